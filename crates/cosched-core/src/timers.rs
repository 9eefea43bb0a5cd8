//! One pending timer per entity (per CPU), in an indexed 4-ary heap.
//!
//! In the simulator almost every event is "look at this CPU at time t", and
//! a CPU's next instant keeps moving as messages and wake-ups come in.
//! Re-arming a timer adjusts its heap entry in place: no stale events to pop
//! later, and a heap of at most one entry per CPU.
//!
//! Each entry is one integer key, the time in the high bits and the entity in
//! the low ones, so that sifting compares single integers and ties go to the
//! lowest entity. The key is 64 bits wide while every armed time fits beside
//! the entity (2^54 ns, 208 days, for 1,024 entities), which halves the
//! memory the sift walks and the work of each comparison against 128-bit
//! keys; the heap switches to 128-bit keys for good the first time a time
//! does not fit.

use crate::time::SimTime;

pub struct TimerHeap {
    keys: Keys,
}

enum Keys {
    Narrow(Heap<NarrowKey>),
    Wide(Heap<WideKey>),
}

impl TimerHeap {
    /// `entities` timers, all disarmed.
    pub fn new(entities: usize) -> TimerHeap {
        assert!(entities < u32::MAX as usize);
        let id_bits = (usize::BITS - entities.saturating_sub(1).leading_zeros()).max(1);
        TimerHeap { keys: Keys::Narrow(Heap::new(entities, NarrowKey::new(id_bits))) }
    }

    /// The earliest armed timer, ties to the lowest id.
    pub fn peek(&self) -> Option<(SimTime, u32)> {
        let (time, id) = match &self.keys {
            Keys::Narrow(heap) => heap.first()?,
            Keys::Wide(heap) => heap.first()?,
        };
        (time != SimTime::MAX).then_some((time, id))
    }

    pub fn armed_at(&self, id: u32) -> SimTime {
        match &self.keys {
            Keys::Narrow(heap) => heap.armed_at(id),
            Keys::Wide(heap) => heap.armed_at(id),
        }
    }

    /// Arm, re-arm or (with `SimTime::MAX`) disarm the timer of `id`.
    pub fn set(&mut self, id: u32, at: SimTime) {
        match &mut self.keys {
            Keys::Narrow(heap) => {
                if heap.set(id, at).is_err() {
                    self.widen();
                    self.set(id, at);
                }
            }
            Keys::Wide(heap) => heap.set(id, at).expect("every time fits a wide key"),
        }
    }

    /// Switch to 128-bit keys. The order of the keys is the same, so every
    /// entry keeps its place in the heap.
    fn widen(&mut self) {
        let Keys::Narrow(narrow) = &self.keys else { return };
        let wide = Heap {
            keys: narrow.keys.iter().map(|&k| WideKey::encode(narrow.form.time(k), narrow.form.id(k))).collect(),
            position: narrow.position.clone(),
            form: WideKey,
        };
        self.keys = Keys::Wide(wide);
    }
}

/// How a (time, id) pair is packed into one integer whose order is the
/// pairs' order.
trait KeyForm: Copy {
    type Key: Copy + Ord;
    /// `None` when the time does not fit.
    fn key(self, time: SimTime, id: u32) -> Option<Self::Key>;
    fn time(self, key: Self::Key) -> SimTime;
    fn id(self, key: Self::Key) -> u32;
}

/// `time << id_bits | id` in 64 bits; `SimTime::MAX` (disarmed) is the time
/// field with every bit set.
#[derive(Clone, Copy)]
struct NarrowKey {
    id_bits: u32,
    /// The time field of a disarmed timer (every bit set).
    disarmed: u64,
    id_mask: u64,
}

impl NarrowKey {
    fn new(id_bits: u32) -> NarrowKey {
        NarrowKey { id_bits, disarmed: u64::MAX >> id_bits, id_mask: (1 << id_bits) - 1 }
    }
}

impl KeyForm for NarrowKey {
    type Key = u64;

    fn key(self, time: SimTime, id: u32) -> Option<u64> {
        let field = match time {
            SimTime::MAX => self.disarmed,
            armed if armed.ns() < self.disarmed => armed.ns(),
            _ => return None,
        };
        Some((field << self.id_bits) | id as u64)
    }

    fn time(self, key: u64) -> SimTime {
        let field = key >> self.id_bits;
        if field == self.disarmed {
            SimTime::MAX
        } else {
            SimTime(field)
        }
    }

    fn id(self, key: u64) -> u32 {
        (key & self.id_mask) as u32
    }
}

/// `time << 32 | id` in 128 bits: every time fits.
#[derive(Clone, Copy)]
struct WideKey;

impl WideKey {
    fn encode(time: SimTime, id: u32) -> u128 {
        ((time.ns() as u128) << 32) | id as u128
    }
}

impl KeyForm for WideKey {
    type Key = u128;

    fn key(self, time: SimTime, id: u32) -> Option<u128> {
        Some(Self::encode(time, id))
    }

    fn time(self, key: u128) -> SimTime {
        SimTime((key >> 32) as u64)
    }

    fn id(self, key: u128) -> u32 {
        key as u32
    }
}

const ARITY: usize = 4;

/// The heap proper: keys with four children per node, and each entity's
/// place in it.
struct Heap<F: KeyForm> {
    keys: Vec<F::Key>,
    /// Position of each entity in `keys`.
    position: Vec<u32>,
    form: F,
}

impl<F: KeyForm> Heap<F> {
    fn new(entities: usize, form: F) -> Self {
        let disarmed = |id| form.key(SimTime::MAX, id).expect("a disarmed timer always fits");
        Heap { keys: (0..entities as u32).map(disarmed).collect(), position: (0..entities as u32).collect(), form }
    }

    fn first(&self) -> Option<(SimTime, u32)> {
        let &first = self.keys.first()?;
        Some((self.form.time(first), self.form.id(first)))
    }

    fn armed_at(&self, id: u32) -> SimTime {
        self.form.time(self.keys[self.position[id as usize] as usize])
    }

    /// `Err` (and nothing changed) when the time does not fit the key.
    fn set(&mut self, id: u32, at: SimTime) -> Result<(), ()> {
        let entry = self.form.key(at, id).ok_or(())?;
        let pos = self.position[id as usize] as usize;
        let old = self.keys[pos];
        self.keys[pos] = entry;
        if entry < old {
            self.sift_up(pos);
        } else if entry > old {
            self.sift_down(pos);
        }
        Ok(())
    }

    fn place(&mut self, pos: usize, entry: F::Key) {
        self.keys[pos] = entry;
        self.position[self.form.id(entry) as usize] = pos as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        let entry = self.keys[pos];
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            let parent_entry = self.keys[parent];
            if entry >= parent_entry {
                break;
            }
            self.place(pos, parent_entry);
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
        let entry = self.keys[start];
        let n = self.keys.len();
        let mut pos = start;
        loop {
            let first = ARITY * pos + 1;
            let child = if let Some(children) = self.keys.get(first..first + ARITY) {
                first + smallest_of_four(children.try_into().expect("four children"))
            } else if first < n {
                (first..n).min_by_key(|&c| self.keys[c]).unwrap_or(first)
            } else {
                break;
            };
            self.place(pos, self.keys[child]);
            pos = child;
        }
        while pos > start {
            let parent = (pos - 1) / ARITY;
            let parent_entry = self.keys[parent];
            if parent_entry <= entry {
                break;
            }
            self.place(pos, parent_entry);
            pos = parent;
        }
        self.place(pos, entry);
    }
}

fn smallest_of_four<K: Ord>(h: &[K; ARITY]) -> usize {
    let a = (h[1] < h[0]) as usize;
    let b = 2 + (h[3] < h[2]) as usize;
    if h[b] < h[a] {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_time_too_far_for_narrow_keys_widens_them() {
        let mut timers = TimerHeap::new(1024);
        timers.set(5, SimTime(1 << 40));
        timers.set(9, SimTime(3));
        assert!(matches!(timers.keys, Keys::Narrow(_)));
        timers.set(7, SimTime(1 << 60));
        assert!(matches!(timers.keys, Keys::Wide(_)));
        assert_eq!(timers.peek(), Some((SimTime(3), 9)));
        timers.set(9, SimTime::MAX);
        assert_eq!(timers.peek(), Some((SimTime(1 << 40), 5)));
        timers.set(5, SimTime::MAX);
        assert_eq!(timers.peek(), Some((SimTime(1 << 60), 7)));
        assert_eq!(timers.armed_at(7), SimTime(1 << 60));
    }

    #[test]
    fn the_last_narrow_time_fits_and_the_next_does_not() {
        let mut timers = TimerHeap::new(2); // one id bit: times below 2^63 - 1
        timers.set(1, SimTime((1 << 63) - 2));
        assert!(matches!(timers.keys, Keys::Narrow(_)));
        assert_eq!(timers.peek(), Some((SimTime((1 << 63) - 2), 1)));
        timers.set(0, SimTime((1 << 63) - 1));
        assert!(matches!(timers.keys, Keys::Wide(_)));
        assert_eq!(timers.peek(), Some((SimTime((1 << 63) - 2), 1)));
    }

    proptest! {
        /// Sizes from 1 to 300 cover a partial last group of children and
        /// heaps four levels deep; some times need wide keys.
        #[test]
        fn peek_is_the_earliest_armed_timer(
            entities in 1usize..300,
            ops in proptest::collection::vec((any::<u32>(), 0u64..100, any::<bool>(), 0u8..50), 1..400),
        ) {
            let mut timers = TimerHeap::new(entities);
            let mut model = vec![SimTime::MAX; entities];
            for (raw_id, t, disarm, far) in ops {
                let id = raw_id % entities as u32;
                let t = if far == 0 { u64::MAX - 1 - t } else { t };
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
