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

const ARITY: usize = 2;

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

    fn sift_down(&mut self, mut pos: usize) {
        let entry = self.heap[pos];
        let n = self.heap.len();
        loop {
            let first_child = ARITY * pos + 1;
            if first_child >= n {
                break;
            }
            let last_child = (first_child + ARITY).min(n);
            let mut child = first_child;
            for c in first_child + 1..last_child {
                if self.heap[c] < self.heap[child] {
                    child = c;
                }
            }
            let smallest = self.heap[child];
            if smallest >= entry {
                break;
            }
            self.place(pos, smallest);
            pos = child;
        }
        self.place(pos, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn peek_is_the_earliest_armed_timer(ops in proptest::collection::vec((0u32..16, 0u64..100, any::<bool>()), 1..200)) {
            let mut timers = TimerHeap::new(16);
            let mut model = [SimTime::MAX; 16];
            for (id, t, disarm) in ops {
                let at = if disarm { SimTime::MAX } else { SimTime(t) };
                timers.set(id, at);
                model[id as usize] = at;
                let want = (0..16u32)
                    .filter(|&i| model[i as usize] != SimTime::MAX)
                    .map(|i| (model[i as usize], i))
                    .min();
                prop_assert_eq!(timers.peek(), want);
                prop_assert_eq!(timers.armed_at(id), at);
            }
        }
    }
}
