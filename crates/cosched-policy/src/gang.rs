//! The Ousterhout matrix: rows are time slots, columns are CPUs. A job owns
//! one cell per task, all in one row; each row runs together on every CPU for
//! one gang quantum. Which cells a job gets is the planner's choice
//! (`cluster`); the matrix keeps who owns what.

use cosched_core::JobId;

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

    /// Become a copy of `other`, reusing what is allocated.
    pub fn copy_from(&mut self, other: &GangMatrix) {
        (self.rows, self.columns) = (other.rows, other.columns);
        self.cells.clone_from(&other.cells);
        self.free_in_row.clone_from(&other.free_in_row);
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
