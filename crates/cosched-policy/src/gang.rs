//! The Ousterhout matrix: rows are time slots, columns are CPUs. A job takes
//! one cell per task, all in one row; each row runs together on every CPU for
//! one gang quantum.

use cosched_core::JobId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangPlacement {
    pub row: u32,
    pub columns: Vec<u32>,
}

#[derive(Clone, Debug)]
pub struct GangMatrix {
    rows: usize,
    columns: usize,
    /// Row-major: `cells[row * columns + column]`.
    cells: Vec<Option<JobId>>,
    free_in_row: Vec<u32>,
}

impl GangMatrix {
    pub fn new(rows: usize, columns: usize) -> GangMatrix {
        assert!(rows >= 1, "the matrix needs at least one row (MPL >= 1)");
        assert!(columns >= 1, "the matrix needs at least one column");
        GangMatrix { rows, columns, cells: vec![None; rows * columns], free_in_row: vec![columns as u32; rows] }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn columns(&self) -> usize {
        self.columns
    }

    pub fn cell(&self, row: u32, column: u32) -> Option<JobId> {
        self.cells[self.index(row, column)]
    }

    fn index(&self, row: u32, column: u32) -> usize {
        debug_assert!((row as usize) < self.rows && (column as usize) < self.columns);
        row as usize * self.columns + column as usize
    }

    /// First fit (our choice): the lowest row with `tasks` free cells, and its
    /// lowest free columns.
    pub fn find(&self, tasks: u32) -> Option<GangPlacement> {
        if tasks == 0 || tasks as usize > self.columns {
            return None;
        }
        let row = (0..self.rows as u32).find(|&r| self.free_in_row[r as usize] >= tasks)?;
        let columns: Vec<u32> =
            (0..self.columns as u32).filter(|&c| self.cell(row, c).is_none()).take(tasks as usize).collect();
        debug_assert_eq!(columns.len(), tasks as usize);
        Some(GangPlacement { row, columns })
    }

    pub fn take(&mut self, job: JobId, row: u32, columns: &[u32]) {
        for &column in columns {
            let i = self.index(row, column);
            assert!(self.cells[i].is_none(), "cell ({row}, {column}) is already taken");
            self.cells[i] = Some(job);
        }
        self.free_in_row[row as usize] -= columns.len() as u32;
    }

    pub fn give_back(&mut self, job: JobId, row: u32, columns: &[u32]) {
        for &column in columns {
            let i = self.index(row, column);
            assert_eq!(self.cells[i], Some(job), "cell ({row}, {column}) is not held by {job}");
            self.cells[i] = None;
        }
        self.free_in_row[row as usize] += columns.len() as u32;
    }

    pub fn row_is_occupied(&self, row: u32) -> bool {
        (self.free_in_row[row as usize] as usize) < self.columns
    }

    pub fn occupied_rows(&self) -> usize {
        (0..self.rows as u32).filter(|&r| self.row_is_occupied(r)).count()
    }

    /// The row the machine moves to at the end of a quantum: the next row after
    /// `current` (cyclically) that holds any job; `current` itself if it is the
    /// only one; `None` if the matrix is empty.
    pub fn next_occupied_row(&self, current: Option<u32>) -> Option<u32> {
        let start = current.map_or(0, |c| c as usize + 1);
        (0..self.rows).map(|k| ((start + k) % self.rows) as u32).find(|&r| self.row_is_occupied(r))
    }

    /// Every job's cells lie in one row, and the free counts match the cells.
    pub fn check_invariants(&self) {
        let mut job_rows: std::collections::BTreeMap<JobId, u32> = Default::default();
        for row in 0..self.rows as u32 {
            let mut free = 0;
            for column in 0..self.columns as u32 {
                match self.cell(row, column) {
                    None => free += 1,
                    Some(job) => {
                        let first_row = *job_rows.entry(job).or_insert(row);
                        assert_eq!(first_row, row, "{job} has cells in rows {first_row} and {row}");
                    }
                }
            }
            assert_eq!(free, self.free_in_row[row as usize], "free count of row {row}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_fit_and_row_rotation() {
        let mut m = GangMatrix::new(3, 4);
        assert_eq!(m.next_occupied_row(None), None);
        let a = m.find(3).unwrap();
        assert_eq!(a, GangPlacement { row: 0, columns: vec![0, 1, 2] });
        m.take(JobId(0), a.row, &a.columns);
        let b = m.find(2).unwrap();
        assert_eq!(b.row, 1, "two cells are not free in row 0");
        m.take(JobId(1), b.row, &b.columns);
        let c = m.find(1).unwrap();
        assert_eq!(c, GangPlacement { row: 0, columns: vec![3] });
        m.take(JobId(2), c.row, &c.columns);
        assert_eq!(m.next_occupied_row(Some(0)), Some(1));
        assert_eq!(m.next_occupied_row(Some(1)), Some(0), "row 2 is empty and skipped");
        m.give_back(JobId(1), b.row, &b.columns);
        assert_eq!(m.next_occupied_row(Some(0)), Some(0), "only one occupied row: stay");
        assert_eq!(m.find(5), None, "wider than the machine");
        m.check_invariants();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Place(u32),
        Finish(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![(1u32..9).prop_map(Op::Place), (0usize..16).prop_map(Op::Finish)]
    }

    proptest! {
        #[test]
        fn never_double_books_and_keeps_jobs_in_one_row(ops in proptest::collection::vec(op(), 1..80)) {
            let mut m = GangMatrix::new(4, 8);
            let mut live: Vec<(JobId, GangPlacement)> = Vec::new();
            let mut next_job = 0;
            for op in ops {
                match op {
                    Op::Place(tasks) => {
                        if let Some(p) = m.find(tasks) {
                            for &c in &p.columns {
                                prop_assert!(m.cell(p.row, c).is_none(), "double booking");
                            }
                            m.take(JobId(next_job), p.row, &p.columns);
                            live.push((JobId(next_job), p));
                            next_job += 1;
                        } else {
                            // Refused only if no row has room.
                            for row in 0..4 {
                                let free = (0..8).filter(|&c| m.cell(row, c).is_none()).count();
                                prop_assert!(free < tasks as usize);
                            }
                        }
                    }
                    Op::Finish(k) if !live.is_empty() => {
                        let (job, p) = live.remove(k % live.len());
                        m.give_back(job, p.row, &p.columns);
                    }
                    Op::Finish(_) => {}
                }
                m.check_invariants();
                for (job, p) in &live {
                    for &c in &p.columns {
                        prop_assert_eq!(m.cell(p.row, c), Some(*job));
                    }
                }
            }
        }
    }
}
