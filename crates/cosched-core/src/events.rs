//! The discrete-event queue: events ordered by time, and at equal times by
//! the order they were scheduled (first in, first out): a deterministic tie
//! break that does not depend on the payload or on a heap's internals.
//!
//! Most of a simulation's events are due a few microseconds to a millisecond
//! ahead (a message's flight), so the queue is a timing wheel over the next
//! millisecond or so, with a radix heap behind it for later events. An event
//! is placed once in the wheel; a radix heap moves each event through several
//! of its buckets before it is due, and was a tenth of the simulator's work.

use crate::time::SimTime;
use std::cell::Cell;
use std::collections::VecDeque;

/// A wheel slot spans 2^SLOT_BITS ns (1.024 µs).
const SLOT_BITS: u32 = 10;
/// Slots in the wheel: it holds the events of the next `SLOTS` slots (about 1 ms).
const SLOTS: usize = 1024;
const SLOT_WORDS: usize = SLOTS / 64;

/// A monotone priority queue of timed events: times are never below the last
/// time popped, which is exactly the discipline of a discrete-event
/// simulation.
///
/// Events due within the window (the slot of the last popped time and the
/// `SLOTS - 1` after it) are in the wheel, each slot in (time, insertion)
/// order. Later ones wait in `far` and move into the wheel, in their order,
/// as soon as the window reaches them: any event scheduled after that for
/// the same time was scheduled after them, so it goes behind them.
pub struct EventQueue<E> {
    slots: Vec<Slot<E>>,
    /// Bit `i % 64` of word `i / 64` is set when slot `i` holds events.
    occupied: [u64; SLOT_WORDS],
    /// The window's first slot: the slot number of the last popped time.
    base_slot: u64,
    /// The slot of the earliest event in the wheel (when it holds any).
    first: usize,
    near_len: usize,
    /// The events at or past the window's end, and the earliest one's time
    /// (`u64::MAX` also when there is none), checked at every move of the
    /// window.
    far: RadixHeap<E>,
    far_first: u64,
    now: SimTime,
    popped: u64,
}

/// A slot's events from `head` on, in (time, insertion) order; the ones
/// before `head` are popped (the vector is cleared when the slot empties).
struct Slot<E> {
    head: usize,
    events: Vec<(u64, E)>,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            slots: (0..SLOTS).map(|_| Slot { head: 0, events: Vec::new() }).collect(),
            occupied: [0; SLOT_WORDS],
            base_slot: 0,
            first: 0,
            near_len: 0,
            far: RadixHeap::new(),
            far_first: u64::MAX,
            now: SimTime::ZERO,
            popped: 0,
        }
    }

    /// Schedule `event` at `time`, which must not be in the past.
    #[inline]
    pub fn schedule(&mut self, time: SimTime, event: E) {
        assert!(time >= self.now, "event scheduled in the past: {time:?} < now {:?}", self.now);
        let time = time.ns();
        if self.in_window(time) {
            self.push_near(time, event);
        } else {
            self.far.schedule(SimTime(time), event);
            self.far_first = self.far_first.min(time);
        }
    }

    #[inline]
    fn in_window(&self, time: u64) -> bool {
        (time >> SLOT_BITS) < self.base_slot + SLOTS as u64
    }

    /// Slots from the window's first to slot `i`, going round.
    #[inline]
    fn distance(&self, i: usize) -> usize {
        i.wrapping_sub(self.base_slot as usize) & (SLOTS - 1)
    }

    /// Behind every event of its slot at or before `time` (almost always the
    /// back: events are mostly scheduled in time order).
    #[inline]
    fn push_near(&mut self, time: u64, event: E) {
        let i = (time >> SLOT_BITS) as usize & (SLOTS - 1);
        let slot = &mut self.slots[i];
        if slot.events.last().is_none_or(|&(last, _)| last <= time) {
            slot.events.push((time, event));
        } else {
            let place = slot.head + slot.events[slot.head..].partition_point(|&(other, _)| other <= time);
            slot.events.insert(place, (time, event));
        }
        self.occupied[i / 64] |= 1 << (i % 64);
        if self.near_len == 0 || self.distance(i) < self.distance(self.first) {
            self.first = i;
        }
        self.near_len += 1;
    }

    /// Remove the earliest event and advance the clock to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if self.near_len == 0 {
            let next = self.far.peek_time()?;
            self.move_window(next.ns());
        }
        let i = self.first;
        let slot = &mut self.slots[i];
        let (time, event) = slot.events[slot.head];
        slot.head += 1;
        self.near_len -= 1;
        if slot.head == slot.events.len() {
            slot.events.clear();
            slot.head = 0;
            self.occupied[i / 64] &= !(1 << (i % 64));
            if self.near_len > 0 {
                self.first = self.next_occupied_slot(i);
            }
        }
        self.popped += 1;
        debug_assert!(time >= self.now.ns());
        self.now = SimTime(time);
        if time >> SLOT_BITS > self.base_slot {
            self.move_window(time);
        }
        Some((self.now, event))
    }

    /// Start the window at `time`'s slot (never earlier than it was), and move
    /// the far events it now covers into the wheel, in their order.
    #[inline]
    fn move_window(&mut self, time: u64) {
        debug_assert!(time >> SLOT_BITS >= self.base_slot);
        self.base_slot = time >> SLOT_BITS;
        if self.in_window(self.far_first) {
            self.take_from_far();
        }
    }

    /// (`far_first` is `u64::MAX` both for none and for an event at the last
    /// instant, which a window there covers.)
    #[cold]
    fn take_from_far(&mut self) {
        while !self.far.is_empty() && self.in_window(self.far_first) {
            let (t, event) = self.far.pop().expect("far_first is an event's time");
            self.push_near(t.ns(), event);
            self.far_first = self.far.peek_time().map_or(u64::MAX, SimTime::ns);
        }
    }

    /// The first occupied slot from slot `from` on, going round: every event
    /// in the wheel is within one turn of the window's start, and none is
    /// before `from`. The wheel must not be empty.
    fn next_occupied_slot(&self, from: usize) -> usize {
        let (word, bit) = (from / 64, from % 64);
        let here = self.occupied[word] & (u64::MAX << bit);
        if here != 0 {
            return word * 64 + here.trailing_zeros() as usize;
        }
        for step in 1..=SLOT_WORDS {
            let w = (word + step) % SLOT_WORDS;
            if self.occupied[w] != 0 {
                return w * 64 + self.occupied[w].trailing_zeros() as usize;
            }
        }
        unreachable!("the wheel holds {} events but no slot is occupied", self.near_len)
    }

    /// The time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        if self.near_len == 0 {
            return self.far.peek_time();
        }
        let slot = &self.slots[self.first];
        Some(SimTime(slot.events[slot.head].0))
    }

    /// The time of the last popped event.
    pub fn now(&self) -> SimTime {
        self.now
    }
    pub fn len(&self) -> usize {
        self.near_len + self.far.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Events popped so far.
    pub fn popped(&self) -> u64 {
        self.popped
    }
}

/// Number of buckets: one for "at the last popped time", then one per bit
/// position of a 64-bit time.
const BUCKETS: usize = 65;

/// A monotone priority queue of timed events (a radix heap on time), for
/// the events past the wheel's window; also the bench's yardstick of machine
/// speed.
///
/// Times are never below the last time popped, which is exactly the discipline
/// of a discrete-event simulation. An event lives in the bucket of the highest
/// bit in which its time differs from the last popped time; popping empties
/// the lowest non-empty bucket into lower ones. Every bucket stays in
/// insertion order (appends only, and a bucket is redistributed only into
/// empty ones), so equal times pop first-in first-out.
pub struct RadixHeap<E> {
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

impl<E> Default for RadixHeap<E> {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(time: u64, last_time: u64) -> usize {
    (64 - (time ^ last_time).leading_zeros()) as usize
}

impl<E> RadixHeap<E> {
    pub fn new() -> Self {
        RadixHeap {
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

    /// The two queues' common face, to test both against one model.
    trait Queue {
        fn schedule(&mut self, time: SimTime, event: usize);
        fn pop(&mut self) -> Option<(SimTime, usize)>;
        fn peek_time(&self) -> Option<SimTime>;
        fn now(&self) -> SimTime;
        fn len(&self) -> usize;
    }

    macro_rules! impl_queue {
        ($q:ident) => {
            impl Queue for $q<usize> {
                fn schedule(&mut self, time: SimTime, event: usize) {
                    $q::schedule(self, time, event)
                }
                fn pop(&mut self) -> Option<(SimTime, usize)> {
                    $q::pop(self)
                }
                fn peek_time(&self) -> Option<SimTime> {
                    $q::peek_time(self)
                }
                fn now(&self) -> SimTime {
                    $q::now(self)
                }
                fn len(&self) -> usize {
                    $q::len(self)
                }
            }
        };
    }
    impl_queue!(EventQueue);
    impl_queue!(RadixHeap);

    /// Offsets from the last popped time: within a slot, across the wheel's
    /// window and its end (1,024 slots of 1,024 ns), far past it, and none.
    fn offset(kind: u8, raw: u64) -> u64 {
        match kind {
            0 => raw,
            1 => raw * 1_100,
            2 => raw * 40_000,
            _ => 0,
        }
    }

    /// Interleaved pushes and pops against a model: a sorted list of (time, sequence).
    fn matches_the_model(q: &mut impl Queue, ops: Vec<(u8, u64, bool)>) -> Result<(), TestCaseError> {
        let mut model: Vec<(u64, usize)> = Vec::new();
        for (i, (kind, raw, pop)) in ops.into_iter().enumerate() {
            if pop {
                model.sort();
                let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                prop_assert_eq!(q.peek_time().map(SimTime::ns), want.map(|(t, _)| t));
                let got = q.pop().map(|(t, e)| (t.ns(), e));
                prop_assert_eq!(got, want);
            } else {
                let t = q.now().ns() + offset(kind, raw);
                q.schedule(SimTime(t), i);
                model.push((t, i));
                prop_assert_eq!(q.peek_time().map(SimTime::ns), model.iter().map(|&(t, _)| t).min());
            }
            prop_assert_eq!(q.len(), model.len());
        }
        Ok(())
    }

    #[test]
    fn an_event_past_the_window_goes_before_later_ones_at_its_time() {
        let mut q = EventQueue::new();
        let far = SimTime(5_000_000);
        q.schedule(far, 'a');
        q.schedule(SimTime(4_500_000), 'x');
        assert_eq!(q.pop(), Some((SimTime(4_500_000), 'x')));
        // The window now covers `far`: 'b' goes behind 'a'.
        q.schedule(far, 'b');
        assert_eq!(q.pop(), Some((far, 'a')));
        assert_eq!(q.pop(), Some((far, 'b')));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn an_event_at_the_last_instant_is_kept() {
        let mut q = EventQueue::new();
        q.schedule(SimTime::MAX, 'z');
        q.schedule(SimTime(3), 'a');
        assert_eq!(q.peek_time(), Some(SimTime(3)));
        assert_eq!(q.pop(), Some((SimTime(3), 'a')));
        assert_eq!(q.peek_time(), Some(SimTime::MAX));
        assert_eq!(q.pop(), Some((SimTime::MAX, 'z')));
        assert_eq!(q.pop(), None);
    }

    proptest! {
        #[test]
        fn the_wheel_pops_as_the_model(ops in proptest::collection::vec((0u8..4, 0u64..1000, any::<bool>()), 0..400)) {
            matches_the_model(&mut EventQueue::new(), ops)?;
        }

        #[test]
        fn the_radix_heap_pops_as_the_model(ops in proptest::collection::vec((0u8..4, 0u64..1000, any::<bool>()), 0..400)) {
            matches_the_model(&mut RadixHeap::new(), ops)?;
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
