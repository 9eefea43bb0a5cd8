//! The processes of a run, indexed by their number, keeping only those that
//! may still be looked at.
//!
//! Processes are numbered as they start and never renumbered (see the
//! invariants in ARCHITECTURE.md). Once every process below some number has
//! finished, their records are no longer needed: they are dropped in bulk, so
//! the table's memory follows the processes alive (and those started since the
//! oldest of them), not the length of the trace.

use std::ops::{Index, IndexMut, Range};

/// Dropped records are released once they are this many and at least as many as the records kept
/// (each release moves the kept ones: amortised, a constant cost per process).
const RELEASE_AT_LEAST: usize = 4096;

pub(crate) struct ProcTable<T> {
    /// Number of the first record in `records`.
    first: usize,
    records: Vec<T>,
    /// Records below this number are finished and will be released.
    finished_below: usize,
}

impl<T> ProcTable<T> {
    pub(crate) fn new() -> ProcTable<T> {
        ProcTable { first: 0, records: Vec::new(), finished_below: 0 }
    }

    /// The number the next process gets.
    pub(crate) fn next_number(&self) -> usize {
        self.first + self.records.len()
    }

    pub(crate) fn push(&mut self, record: T) {
        self.records.push(record);
    }

    /// Every process below `number` has finished and will not be looked at
    /// again; `on_release` sees each record, in number order, before it goes.
    pub(crate) fn finished_below(&mut self, number: usize, mut on_release: impl FnMut(&T)) {
        debug_assert!(number <= self.next_number());
        self.finished_below = self.finished_below.max(number);
        let finished = self.finished_below - self.first;
        if finished >= RELEASE_AT_LEAST && finished >= self.records.len() - finished {
            for record in self.records.drain(..finished) {
                on_release(&record);
            }
            self.first = self.finished_below;
        }
    }

    /// The records kept, in number order (the released ones are gone).
    pub(crate) fn kept(&self) -> impl Iterator<Item = &T> {
        self.records.iter()
    }

    /// Records kept.
    #[cfg(test)]
    pub(crate) fn kept_count(&self) -> usize {
        self.records.len()
    }
}

impl<T> Index<usize> for ProcTable<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, number: usize) -> &T {
        &self.records[number - self.first]
    }
}

impl<T> IndexMut<usize> for ProcTable<T> {
    #[inline(always)]
    fn index_mut(&mut self, number: usize) -> &mut T {
        &mut self.records[number - self.first]
    }
}

impl<T> Index<Range<usize>> for ProcTable<T> {
    type Output = [T];
    fn index(&self, numbers: Range<usize>) -> &[T] {
        &self.records[numbers.start - self.first..numbers.end - self.first]
    }
}

impl<T> IndexMut<Range<usize>> for ProcTable<T> {
    fn index_mut(&mut self, numbers: Range<usize>) -> &mut [T] {
        &mut self.records[numbers.start - self.first..numbers.end - self.first]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_stay_valid_after_a_release_and_each_record_is_seen_once_in_order() {
        let mut table = ProcTable::new();
        let mut released = Vec::new();
        for n in 0..3 * RELEASE_AT_LEAST {
            table.push(n);
            if n % 100 == 99 {
                // Everything older than 500 numbers back has finished.
                table.finished_below((n + 1).saturating_sub(500), |&r| released.push(r));
            }
        }
        assert!(table.kept_count() < 2 * RELEASE_AT_LEAST + 500, "kept {}", table.kept_count());
        assert_eq!(released, (0..released.len()).collect::<Vec<_>>(), "released in number order, each once");
        let last = table.next_number() - 1;
        assert_eq!(table[last], last);
        assert_eq!(table[last - 499..last + 1].len(), 500);
        table[last] = 7;
        assert_eq!(table[last], 7);
        let kept: Vec<usize> = table.kept().copied().collect();
        assert_eq!(kept.len() + released.len(), table.next_number());
    }

    #[test]
    fn nothing_is_released_while_little_has_finished() {
        let mut table = ProcTable::new();
        for n in 0..RELEASE_AT_LEAST * 4 {
            table.push(n);
        }
        table.finished_below(RELEASE_AT_LEAST, |_| panic!("released too early"));
        assert_eq!(table.kept_count(), RELEASE_AT_LEAST * 4);
        table.finished_below(RELEASE_AT_LEAST * 2, |_| {});
        assert_eq!(table.kept_count(), RELEASE_AT_LEAST * 2);
        assert_eq!(table[RELEASE_AT_LEAST * 2], RELEASE_AT_LEAST * 2);
    }
}
