//! The discrete-event queue: events ordered by `(time, sequence)`.
//!
//! The sequence number is the order of insertion, so two events at the same
//! instant always pop in the order they were scheduled: a deterministic tie
//! break that does not depend on the payload or on heap internals.

use crate::time::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    time: SimTime,
    sequence: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.sequence == other.sequence
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.cmp(&self.time).then_with(|| other.sequence.cmp(&self.sequence))
    }
}

/// A priority queue of timed events.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_sequence: u64,
    now: SimTime,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_sequence: 0, now: SimTime::ZERO, popped: 0 }
    }

    /// Schedule `event` at `time`, which must not be in the past.
    pub fn schedule(&mut self, time: SimTime, event: E) {
        assert!(time >= self.now, "event scheduled in the past: {time:?} < now {:?}", self.now);
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.heap.push(Entry { time, sequence, event });
    }

    /// Remove the earliest event and advance the clock to its time.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let entry = self.heap.pop()?;
        debug_assert!(entry.time >= self.now);
        self.now = entry.time;
        self.popped += 1;
        Some((entry.time, entry.event))
    }

    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| e.time)
    }

    /// The time of the last popped event.
    pub fn now(&self) -> SimTime {
        self.now
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Events popped so far (stale ones included).
    pub fn popped(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn same_time_pops_in_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(SimTime(5), 'b');
        q.schedule(SimTime(1), 'a');
        q.schedule(SimTime(5), 'c');
        q.schedule(SimTime(5), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
    }

    #[test]
    #[should_panic(expected = "in the past")]
    fn scheduling_in_the_past_is_a_bug() {
        let mut q = EventQueue::new();
        q.schedule(SimTime(10), ());
        q.pop();
        q.schedule(SimTime(9), ());
    }

    proptest! {
        #[test]
        fn pops_are_sorted_by_time_then_insertion(times in proptest::collection::vec(0u64..50, 0..200)) {
            let mut q = EventQueue::new();
            for (i, &t) in times.iter().enumerate() {
                q.schedule(SimTime(t), i);
            }
            let mut last: Option<(SimTime, usize)> = None;
            while let Some((t, i)) = q.pop() {
                if let Some((lt, li)) = last {
                    prop_assert!(lt < t || (lt == t && li < i));
                }
                last = Some((t, i));
            }
        }
    }
}
