//! One CPU's run queue of the Solaris-like multilevel feedback queue: 60
//! priority levels, FIFO within a level, the head of the highest level first.
//!
//! A CPU holds at most MPL processes, so a flat vector scanned linearly beats
//! sixty linked queues: it fits in a cache line or two.

/// A queued process: FIFO order within a level is by `order`, smallest first.
#[derive(Clone, Copy, Debug)]
struct Entry {
    process: u32,
    level: u8,
    order: i64,
}

#[derive(Clone, Debug, Default)]
pub struct ReadyQueue {
    entries: Vec<Entry>,
    /// Decreasing counter for insertions at the head of a level.
    head_order: i64,
    /// Increasing counter for insertions at the tail of a level.
    tail_order: i64,
}

impl ReadyQueue {
    pub fn push_head(&mut self, process: u32, level: u8) {
        debug_assert!(!self.contains(process));
        self.head_order -= 1;
        self.entries.push(Entry { process, level, order: self.head_order });
    }

    pub fn push_tail(&mut self, process: u32, level: u8) {
        debug_assert!(!self.contains(process));
        self.tail_order += 1;
        self.entries.push(Entry { process, level, order: self.tail_order });
    }

    fn best_index(&self) -> Option<usize> {
        self.entries
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| a.level.cmp(&b.level).then(b.order.cmp(&a.order)))
            .map(|(i, _)| i)
    }

    /// Remove and return the process that should run next.
    pub fn pop_best(&mut self) -> Option<u32> {
        let i = self.best_index()?;
        Some(self.entries.swap_remove(i).process)
    }

    pub fn best_level(&self) -> Option<u8> {
        self.entries.iter().map(|e| e.level).max()
    }

    /// Set every queued process's level to `level`, keeping their queue order.
    pub fn raise_all(&mut self, level: u8) {
        for e in &mut self.entries {
            e.level = level;
        }
    }

    pub fn contains(&self, process: u32) -> bool {
        self.entries.iter().any(|e| e.process == process)
    }

    pub fn remove(&mut self, process: u32) -> bool {
        match self.entries.iter().position(|e| e.process == process) {
            Some(i) => {
                self.entries.swap_remove(i);
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn processes(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.iter().map(|e| e.process)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_level_first_fifo_within_head_before_tail() {
        let mut q = ReadyQueue::default();
        q.push_tail(1, 10);
        q.push_tail(2, 59);
        q.push_tail(3, 59);
        q.push_head(4, 59);
        q.push_tail(5, 58);
        assert_eq!(q.best_level(), Some(59));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_best()).collect();
        assert_eq!(order, vec![4, 2, 3, 5, 1]);
    }
}
