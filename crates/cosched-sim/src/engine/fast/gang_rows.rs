//! Fast mode's measures per matrix row, under GS.
//!
//! Under GS each job runs in one row of the matrix; the rows run in turn, one
//! gang quantum each, with a gang switch at every quantum; and a CPU whose cell
//! in the running row is empty idles. What a job does in its own quantum then
//! depends on no other row, and neither does a CPU's time in that quantum. So
//! fast mode measures per row: each job's iterations in its own quanta, and
//! each CPU's time in each row's quanta (a cell). A job's rate over the run
//! clock is its rate in its own quanta shared among the occupied rows, and a
//! CPU's time is composed from its cells, an empty cell being a gang switch
//! and then idle.
//!
//! A change then voids only what it touches: a job that starts is measured
//! (in its row's next quantum), and a job that ends, or a row that empties or
//! fills, leaves every other measure standing. With one measure per CPU, every
//! change re-measured every job sharing the job's CPUs for a whole cycle, and
//! a change in the number of rows every job (docs/fast-mode.md). Windows begin
//! and end at quantum boundaries, so that each quantum in them belongs to one row.

use crate::metrics::Breakdown;
use cosched_core::SimTime;

/// Each CPU's time in each row's quanta, over the windows since the cell last changed.
pub(in crate::engine) struct RowMeasures {
    pub(super) quantum_ns: u64,
    pub(super) switch_ns: u64,
    pub(super) cpu_count: usize,
    /// Row-major, like the engine's cells.
    pub(super) cells: Vec<CellMeasure>,
}

#[derive(Clone, Copy, Default)]
pub(super) struct CellMeasure {
    pub(super) time: Breakdown,
    pub(super) quanta: u64,
}

impl CellMeasure {
    pub(super) fn add(&mut self, other: &CellMeasure) {
        self.time.add(&other.time);
        self.quanta += other.quanta;
    }
}

impl RowMeasures {
    pub(in crate::engine) fn new(quantum_ns: u64, switch_ns: u64, rows: usize, cpu_count: usize) -> RowMeasures {
        RowMeasures { quantum_ns, switch_ns, cpu_count, cells: vec![CellMeasure::default(); rows * cpu_count] }
    }

    pub(super) fn forget_all(&mut self) {
        self.cells.fill(CellMeasure::default());
    }

    pub(super) fn forget_cells(&mut self, row: u32, cpus: &[u32]) {
        self.set_cells(row, cpus, CellMeasure::default());
    }

    /// These CPUs' cells in `row` as measured elsewhere: a job that took its kind's measure (`kinds.rs`).
    pub(super) fn set_cells(&mut self, row: u32, cpus: &[u32], cell: CellMeasure) {
        for &c in cpus {
            let at = self.cell_index(row, c);
            self.cells[at] = cell;
        }
    }

    /// These CPUs' cells in `row`, summed.
    pub(super) fn sum_of_cells(&self, row: u32, cpus: &[u32]) -> CellMeasure {
        let mut sum = CellMeasure::default();
        for &c in cpus {
            sum.add(&self.cells[self.cell_index(row, c)]);
        }
        sum
    }

    fn cell_index(&self, row: u32, cpu: u32) -> usize {
        row as usize * self.cpu_count + cpu as usize
    }

    pub(super) fn is_quantum_boundary(&self, now: SimTime) -> bool {
        now.ns().is_multiple_of(self.quantum_ns)
    }

    /// A quantum of an empty cell: the gang switch, then idle.
    pub(super) fn empty_quantum(&self) -> Breakdown {
        Breakdown { switch_ns: self.switch_ns, idle_ns: self.quantum_ns - self.switch_ns, ..Breakdown::default() }
    }
}

/// A window measured per row: which rows it waits for, and the quanta each row had in it.
pub(super) struct RowWindow {
    pub(super) quantum_ns: u64,
    pub(super) last_boundary: SimTime,
    pub(super) quanta_by_row: Vec<u64>,
    /// Rows of the jobs it measures: it closes once each had `quanta_wanted` quanta.
    pub(super) wanted_rows: Vec<u32>,
    pub(super) quanta_wanted: u64,
}

impl RowWindow {
    /// The length of a row's quanta in the window.
    pub(super) fn own_quanta_ns(&self, row: u32) -> u64 {
        self.quanta_by_row[row as usize] * self.quantum_ns
    }

    pub(super) fn is_complete(&self) -> bool {
        self.wanted_rows.iter().all(|&r| self.quanta_by_row[r as usize] >= self.quanta_wanted)
    }
}
