//! The discrete-event queue: events ordered by `(time, sequence)`.
//!
//! The sequence number is the order of insertion, so two events at the same
//! instant always pop in the order they were scheduled: a deterministic tie
//! break that does not depend on the payload or on heap internals.

use crate::time::SimTime;
use std::cell::Cell;
use std::collections::VecDeque;

/// Number of buckets: one for "at the last popped time", then one per bit
/// position of a 64-bit time.
const BUCKETS: usize = 65;

/// A monotone priority queue of timed events (a radix heap on time).
///
/// Times are never below the last time popped, which is exactly the discipline
/// of a discrete-event simulation. An event lives in the bucket of the highest
/// bit in which its time differs from the last popped time; popping empties
/// the lowest non-empty bucket into lower ones. Every bucket stays in
/// insertion order (appends only, and a bucket is redistributed only into
/// empty ones), so equal times pop first-in first-out.
pub struct EventQueue<E> {
    /// Bucket 0: the events at `last_time`, first in first out.
    due: VecDeque<(u64, E)>,
    /// Buckets 1..=64 (index 0 unused).
    buckets: Vec<Vec<(u64, E)>>,
    /// Bit `i - 1` is set when bucket `i` holds events.
    nonempty: u64,
    last_time: u64,
    len: usize,
    now: SimTime,
    popped: u64,
    /// The earliest time in the lowest non-empty bucket, once `peek_time` has
    /// looked for it (`UNKNOWN` until then, and after a pop): a simulation
    /// peeks at every step and pops far less often.
    lowest_bucket_min: Cell<u64>,
}

/// `lowest_bucket_min` not known (also the value for an event at the last
/// representable instant, which is then looked for at every peek).
const UNKNOWN: u64 = u64::MAX;

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(time: u64, last_time: u64) -> usize {
    (64 - (time ^ last_time).leading_zeros()) as usize
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            due: VecDeque::new(),
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            nonempty: 0,
            last_time: 0,
            len: 0,
            now: SimTime::ZERO,
            popped: 0,
            lowest_bucket_min: Cell::new(UNKNOWN),
        }
    }

    /// Schedule `event` at `time`, which must not be in the past.
    pub fn schedule(&mut self, time: SimTime, event: E) {
        assert!(time >= self.now, "event scheduled in the past: {time:?} < now {:?}", self.now);
        let time = time.ns();
        let i = bucket_of(time, self.last_time);
        if i > 0 {
            // A bucket below the lowest one becomes the lowest, with this
            // event its minimum; otherwise the minimum can only go down.
            let lowest = self.nonempty.trailing_zeros() as usize + 1;
            let known = self.lowest_bucket_min.get();
            if i < lowest {
                self.lowest_bucket_min.set(time);
            } else if i == lowest && known != UNKNOWN {
                self.lowest_bucket_min.set(known.min(time));
            }
        }
        self.push_at(time, event);
        self.len += 1;
    }

    fn push_at(&mut self, time: u64, event: E) {
        let i = bucket_of(time, self.last_time);
        if i == 0 {
            self.due.push_back((time, event));
        } else {
            self.nonempty |= 1 << (i - 1);
            self.buckets[i].push((time, event));
        }
    }

    /// Remove the earliest event and advance the clock to its time.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if self.len == 0 {
            return None;
        }
        if self.due.is_empty() {
            self.refill_bucket_zero();
        }
        let (time, event) = self.due.pop_front().expect("refilled");
        self.lowest_bucket_min.set(UNKNOWN);
        self.len -= 1;
        self.popped += 1;
        debug_assert!(time >= self.now.ns());
        self.now = SimTime(time);
        Some((self.now, event))
    }

    /// Empty the lowest non-empty bucket into lower ones, taking its earliest
    /// time as the new reference: those events land in bucket 0, in order.
    fn refill_bucket_zero(&mut self) {
        debug_assert!(self.nonempty != 0, "queue is not empty");
        let i = self.nonempty.trailing_zeros() as usize + 1;
        self.nonempty &= !(1 << (i - 1));
        let mut bucket = std::mem::take(&mut self.buckets[i]);
        self.last_time = bucket.iter().map(|(t, _)| *t).min().expect("non-empty");
        for (time, event) in bucket.drain(..) {
            debug_assert!(bucket_of(time, self.last_time) < i);
            self.push_at(time, event);
        }
        // Give the emptied vector back so its capacity is reused.
        self.buckets[i] = bucket;
    }

    /// The time of the earliest event. Scans the lowest non-empty bucket the
    /// first time it is asked after a pop: cheap for a queue that holds few
    /// events, as the simulator's does.
    pub fn peek_time(&self) -> Option<SimTime> {
        if !self.due.is_empty() {
            return Some(SimTime(self.last_time));
        }
        if self.nonempty == 0 {
            return None;
        }
        let known = self.lowest_bucket_min.get();
        if known != UNKNOWN {
            return Some(SimTime(known));
        }
        let lowest = &self.buckets[self.nonempty.trailing_zeros() as usize + 1];
        let min = lowest.iter().map(|(t, _)| *t).min().expect("a non-empty bucket");
        self.lowest_bucket_min.set(min);
        Some(SimTime(min))
    }

    /// The time of the last popped event.
    pub fn now(&self) -> SimTime {
        self.now
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
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
        fn interleaved_pushes_and_pops_stay_ordered(ops in proptest::collection::vec((0u64..1000, any::<bool>()), 0..300)) {
            // A model: a sorted list of (time, sequence).
            let mut q = EventQueue::new();
            let mut model: Vec<(u64, usize)> = Vec::new();
            for (i, (offset, pop)) in ops.into_iter().enumerate() {
                if pop {
                    model.sort();
                    let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                    prop_assert_eq!(q.peek_time().map(SimTime::ns), want.map(|(t, _)| t));
                    let got = q.pop().map(|(t, e)| (t.ns(), e));
                    prop_assert_eq!(got, want);
                } else {
                    let t = q.now().ns() + offset;
                    q.schedule(SimTime(t), i);
                    model.push((t, i));
                    prop_assert_eq!(q.peek_time().map(SimTime::ns), model.iter().map(|&(t, _)| t).min());
                }
                prop_assert_eq!(q.len(), model.len());
            }
        }

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
