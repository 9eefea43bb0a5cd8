//! One pending timer per entity (per CPU), in an indexed binary heap.
//!
//! In the simulator almost every event is "look at this CPU at time t", and
//! a CPU's next instant keeps moving as messages and wake-ups come in.
//! Re-arming a timer adjusts its heap entry in place: no stale events to pop
//! later, and a heap of at most one entry per CPU.

use crate::time::SimTime;

pub struct TimerHeap {
    /// A 4-ary heap of keys `time << 32 | id` (time first, then id), stored
    /// inline so that sifting touches one array and compares one integer.
    heap: Vec<u128>,
    /// Position of each entity in `heap`.
    position: Vec<u32>,
}

const ARITY: usize = 4;

fn key(time: SimTime, id: u32) -> u128 {
    ((time.ns() as u128) << 32) | id as u128
}

fn unkey(key: u128) -> (SimTime, u32) {
    (SimTime((key >> 32) as u64), key as u32)
}

impl TimerHeap {
    /// `entities` timers, all disarmed.
    pub fn new(entities: usize) -> TimerHeap {
        assert!(entities < u32::MAX as usize);
        TimerHeap {
            heap: (0..entities as u32).map(|id| key(SimTime::MAX, id)).collect(),
            position: (0..entities as u32).collect(),
        }
    }

    /// The earliest armed timer, ties to the lowest id.
    pub fn peek(&self) -> Option<(SimTime, u32)> {
        let &first = self.heap.first()?;
        let (time, id) = unkey(first);
        (time != SimTime::MAX).then_some((time, id))
    }

    pub fn armed_at(&self, id: u32) -> SimTime {
        unkey(self.heap[self.position[id as usize] as usize]).0
    }

    /// Arm, re-arm or (with `SimTime::MAX`) disarm the timer of `id`.
    pub fn set(&mut self, id: u32, at: SimTime) {
        let pos = self.position[id as usize] as usize;
        let old = unkey(self.heap[pos]).0;
        self.heap[pos] = key(at, id);
        if at < old {
            self.sift_up(pos);
        } else if at > old {
            self.sift_down(pos);
        }
    }

    fn place(&mut self, pos: usize, entry: u128) {
        self.heap[pos] = entry;
        self.position[unkey(entry).1 as usize] = pos as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        let entry = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            if entry >= self.heap[parent] {
                break;
            }
            self.place(pos, self.heap[parent]);
            pos = parent;
        }
        self.place(pos, entry);
    }

    /// Bottom-up: walk the hole down to a leaf along the smallest children,
    /// then let the entry climb back. A re-armed timer usually moves far
    /// down (its next instant is later than most), so this saves the
    /// comparisons with the entry on the way down; the choice among the
    /// four children is branch-free, and four children per level halve the
    /// chain of dependent loads.
    fn sift_down(&mut self, start: usize) {
        let entry = self.heap[start];
        let n = self.heap.len();
        let mut pos = start;
        loop {
            let first = ARITY * pos + 1;
            let child = if first + ARITY <= n {
                self.smallest_of_four(first)
            } else if first < n {
                (first..n).min_by_key(|&c| self.heap[c]).unwrap_or(first)
            } else {
                break;
            };
            self.place(pos, self.heap[child]);
            pos = child;
        }
        while pos > start {
            let parent = (pos - 1) / ARITY;
            if self.heap[parent] <= entry {
                break;
            }
            self.place(pos, self.heap[parent]);
            pos = parent;
        }
        self.place(pos, entry);
    }

    fn smallest_of_four(&self, first: usize) -> usize {
        let h = &self.heap[first..first + 4];
        let a = (h[1] < h[0]) as usize;
        let b = 2 + (h[3] < h[2]) as usize;
        first + if h[b] < h[a] { b } else { a }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Sizes from 1 to 300 cover a partial last group of children and
        /// heaps four levels deep.
        #[test]
        fn peek_is_the_earliest_armed_timer(
            entities in 1usize..300,
            ops in proptest::collection::vec((any::<u32>(), 0u64..100, any::<bool>()), 1..400),
        ) {
            let mut timers = TimerHeap::new(entities);
            let mut model = vec![SimTime::MAX; entities];
            for (raw_id, t, disarm) in ops {
                let id = raw_id % entities as u32;
                let at = if disarm { SimTime::MAX } else { SimTime(t) };
                timers.set(id, at);
                model[id as usize] = at;
                let want = (0..entities as u32)
                    .filter(|&i| model[i as usize] != SimTime::MAX)
                    .map(|i| (model[i as usize], i))
                    .min();
                prop_assert_eq!(timers.peek(), want);
                prop_assert_eq!(timers.armed_at(id), at);
            }
        }
    }
}
