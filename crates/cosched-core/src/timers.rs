//! One pending timer per entity (per CPU), in a tournament tree.
//!
//! In the simulator almost every event is "look at this CPU at time t", and
//! a CPU's next instant keeps moving as messages and wake-ups come in.
//! Re-arming a timer updates its leaf in place: no stale events to pop later.
//!
//! The tree is complete and binary over a power of two of leaves, one per
//! entity; each inner node holds the smaller of its two children, so the root
//! is the earliest timer. A re-arm rewrites the leaf and then the path to the
//! root, taking at each level the smaller of the new value and the sibling.
//! The siblings' places are known before any comparison, so their loads do
//! not wait on one another and the comparisons are branch-free: on every
//! level a heap's sift instead waits on the previous level's choice, and
//! under periodic boost, where every CPU is re-armed at every tick, it took a
//! fifth of the engine's time.
//!
//! Each entry is one integer key, the time in the high bits and the entity in
//! the low ones, so that comparing single integers orders by time and breaks
//! ties to the lowest entity. The key is 64 bits wide while every armed time
//! fits beside the entity (2^54 ns, 208 days, for 1,024 entities), which
//! halves the memory a re-arm touches and the work of each comparison against
//! 128-bit keys; the tree switches to 128-bit keys for good the first time a
//! time does not fit.

use crate::time::SimTime;

pub struct TimerTree {
    keys: Keys,
}

enum Keys {
    Narrow(Tree<NarrowKey>),
    Wide(Tree<WideKey>),
}

impl TimerTree {
    /// `entities` timers, all disarmed.
    pub fn new(entities: usize) -> TimerTree {
        assert!(entities < u32::MAX as usize);
        let id_bits = (usize::BITS - entities.saturating_sub(1).leading_zeros()).max(1);
        TimerTree { keys: Keys::Narrow(Tree::new(entities, NarrowKey::new(id_bits))) }
    }

    /// The earliest armed timer, ties to the lowest id.
    pub fn peek(&self) -> Option<(SimTime, u32)> {
        let (time, id) = match &self.keys {
            Keys::Narrow(tree) => tree.first(),
            Keys::Wide(tree) => tree.first(),
        };
        (time != SimTime::MAX).then_some((time, id))
    }

    pub fn armed_at(&self, id: u32) -> SimTime {
        match &self.keys {
            Keys::Narrow(tree) => tree.armed_at(id),
            Keys::Wide(tree) => tree.armed_at(id),
        }
    }

    /// Arm, re-arm or (with `SimTime::MAX`) disarm the timer of `id`.
    /// Inlined: a re-arm is a short loop; switching to wide keys is cold.
    #[inline]
    pub fn set(&mut self, id: u32, at: SimTime) {
        match &mut self.keys {
            Keys::Narrow(tree) => {
                if tree.set(id, at).is_ok() {
                    return;
                }
            }
            Keys::Wide(tree) => {
                tree.set(id, at).expect("every time fits a wide key");
                return;
            }
        }
        self.widen_and_set(id, at);
    }

    #[cold]
    #[inline(never)]
    fn widen_and_set(&mut self, id: u32, at: SimTime) {
        self.widen();
        self.set(id, at);
    }

    /// Switch to 128-bit keys. The order of the keys is the same (padding
    /// reads as a disarmed timer of an id above every entity's), so every
    /// node keeps its entry.
    fn widen(&mut self) {
        let Keys::Narrow(narrow) = &self.keys else { return };
        let form = narrow.form;
        let keys = narrow.keys.iter().map(|&k| WideKey::encode(form.time(k), form.id(k))).collect();
        self.keys = Keys::Wide(Tree { keys, leaves: narrow.leaves, form: WideKey });
    }
}

/// How a (time, id) pair is packed into one integer whose order is the
/// pairs' order.
trait KeyForm: Copy {
    type Key: Copy + Ord;
    /// The key of a leaf with no entity: every bit set, which reads as a
    /// disarmed timer and is above every entity's key.
    const PADDING: Self::Key;
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
    /// Padding exists only when the entities are not a power of two, and
    /// then every id is below the id field's largest value.
    const PADDING: u64 = u64::MAX;

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
    /// Ids are below `u32::MAX` (checked in `TimerTree::new`).
    const PADDING: u128 = u128::MAX;

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

/// The tree proper: node `n`'s children are `2n` and `2n + 1`, the root is
/// node 1, and entity `id`'s leaf is node `leaves + id`.
struct Tree<F: KeyForm> {
    keys: Vec<F::Key>,
    /// A power of two, at least the number of entities (and at least 2, so the root is an inner node).
    leaves: usize,
    form: F,
}

impl<F: KeyForm> Tree<F> {
    fn new(entities: usize, form: F) -> Self {
        let leaves = entities.next_power_of_two().max(2);
        let mut keys = vec![F::PADDING; 2 * leaves];
        for id in 0..entities {
            keys[leaves + id] = form.key(SimTime::MAX, id as u32).expect("a disarmed timer always fits");
        }
        for node in (1..leaves).rev() {
            keys[node] = keys[2 * node].min(keys[2 * node + 1]);
        }
        Tree { keys, leaves, form }
    }

    /// The smallest key's (time, id); a disarmed time when none is armed.
    fn first(&self) -> (SimTime, u32) {
        let root = self.keys[1];
        (self.form.time(root), self.form.id(root))
    }

    fn armed_at(&self, id: u32) -> SimTime {
        self.form.time(self.keys[self.leaves + id as usize])
    }

    /// `Err` (and nothing changed) when the time does not fit the key.
    ///
    /// Every index is masked to the tree's size, a power of two: the
    /// compiler then sees that none can be out of bounds and drops the two
    /// checks per level, half of a re-arm's instructions. The loop runs a
    /// fixed number of levels: log2 of `leaves`, which is a power of two.
    #[inline]
    fn set(&mut self, id: u32, at: SimTime) -> Result<(), ()> {
        assert!((id as usize) < self.leaves, "timer {id} of a tree of {} leaves", self.leaves);
        let mut smallest = self.form.key(at, id).ok_or(())?;
        let keys = &mut self.keys[..];
        debug_assert!(keys.len().is_power_of_two() && keys.len() == 2 * self.leaves);
        let mask = keys.len() - 1;
        let mut node = self.leaves + id as usize;
        keys[node & mask] = smallest;
        for _ in 0..self.leaves.trailing_zeros() {
            smallest = smallest.min(keys[(node ^ 1) & mask]);
            node >>= 1;
            keys[node & mask] = smallest;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_time_too_far_for_narrow_keys_widens_them() {
        let mut timers = TimerTree::new(1024);
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
        let mut timers = TimerTree::new(2); // one id bit: times below 2^63 - 1
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
            let mut timers = TimerTree::new(entities);
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
