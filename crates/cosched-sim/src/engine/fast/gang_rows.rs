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

use super::{difference, scaled, Engine, Parts, Window};
use crate::engine::NO_PROC;
use crate::metrics::Breakdown;
use cosched_core::SimTime;

/// Each CPU's time in each row's quanta, over the windows since the cell last changed.
pub(in crate::engine) struct RowMeasures {
    quantum_ns: u64,
    switch_ns: u64,
    cpu_count: usize,
    /// Row-major, like the engine's cells.
    cells: Vec<CellMeasure>,
}

#[derive(Clone, Copy, Default)]
struct CellMeasure {
    time: Breakdown,
    quanta: u64,
}

impl RowMeasures {
    pub(in crate::engine) fn new(quantum_ns: u64, switch_ns: u64, rows: usize, cpu_count: usize) -> RowMeasures {
        RowMeasures { quantum_ns, switch_ns, cpu_count, cells: vec![CellMeasure::default(); rows * cpu_count] }
    }

    pub(super) fn forget_all(&mut self) {
        self.cells.fill(CellMeasure::default());
    }

    pub(super) fn forget_cells(&mut self, row: u32, cpus: &[u32]) {
        for &c in cpus {
            self.cells[row as usize * self.cpu_count + c as usize] = CellMeasure::default();
        }
    }

    pub(super) fn is_quantum_boundary(&self, now: SimTime) -> bool {
        now.ns().is_multiple_of(self.quantum_ns)
    }

    /// A quantum of an empty cell: the gang switch, then idle.
    fn empty_quantum(&self) -> Breakdown {
        Breakdown { switch_ns: self.switch_ns, idle_ns: self.quantum_ns - self.switch_ns, ..Breakdown::default() }
    }
}

/// A window measured per row: which rows it waits for, and the quanta each row had in it.
pub(super) struct RowWindow {
    quantum_ns: u64,
    last_boundary: SimTime,
    quanta_by_row: Vec<u64>,
    /// Rows of the jobs it measures: it closes once each had `quanta_wanted` quanta.
    wanted_rows: Vec<u32>,
    quanta_wanted: u64,
}

impl RowWindow {
    /// The length of a row's quanta in the window.
    pub(super) fn own_quanta_ns(&self, row: u32) -> u64 {
        self.quanta_by_row[row as usize] * self.quantum_ns
    }

    fn is_complete(&self) -> bool {
        self.wanted_rows.iter().all(|&r| self.quanta_by_row[r as usize] >= self.quanta_wanted)
    }
}

impl<P: Parts> Engine<'_, P> {
    /// Measures per row when the scheme allows them (see the module doc).
    pub(in crate::engine) fn row_measures(&self) -> Option<RowMeasures> {
        let gang = self.gang.as_ref()?;
        let costs = &self.cfg.costs;
        let one_row_each = !gang.follows_every_plan && !self.cosched.settings().rules.fill_free_cells;
        (one_row_each && costs.gang_switch_every_quantum).then(|| {
            RowMeasures::new(costs.gang_quantum_ns, costs.gang_switch_ns, self.cfg.mpl as usize, self.cpus.len())
        })
    }

    /// A window opening at the quantum boundary `now`: it waits for the rows
    /// of the jobs not yet measured (or that did too few iterations), for as
    /// many quanta each as a window of whole cycles of `wanted_ns` gives them.
    pub(super) fn row_window(&self, now: SimTime, wanted_ns: u64) -> RowWindow {
        let fast = self.fast();
        let mut wanted_rows: Vec<u32> =
            fast.running.iter().filter(|r| r.measured_ns == 0 || self.wants_longer_window(r)).map(|r| r.row).collect();
        wanted_rows.sort_unstable();
        wanted_rows.dedup();
        RowWindow {
            quantum_ns: self.cfg.costs.gang_quantum_ns,
            last_boundary: now,
            quanta_by_row: vec![0; self.cfg.mpl as usize],
            wanted_rows,
            // Each row has as many quanta as whole cycles give it.
            quanta_wanted: self.window_length(wanted_ns) / self.gang_cycle_ns(),
        }
    }

    /// A gang quantum ends at `now`: in a window measured per row, what each
    /// CPU did in it goes to its cell in the row that ran; the window closes
    /// once its rows had their quanta.
    pub(in crate::engine) fn fast_quantum_ends(&mut self, now: SimTime) {
        let Some(row) = self.gang.as_ref().expect("gang").current_row else { return };
        let Some(Window { rows: Some(row_window), .. }) = &self.fast().window else { return };
        if now <= row_window.last_boundary {
            return; // the window opened at this boundary
        }
        self.account_all(now);
        let cpu_count = self.cpus.len();
        let cells = &self.gang.as_ref().expect("gang").cell_procs[row as usize * cpu_count..][..cpu_count];
        let fast = self.fast.as_mut().expect("fast mode");
        let (Some(window), Some(measures)) = (&mut fast.window, &mut fast.rows) else { unreachable!() };
        let row_window = window.rows.as_mut().expect("measured per row");
        let empty_quantum = measures.empty_quantum();
        let measured = &mut measures.cells[row as usize * cpu_count..][..cpu_count];
        for (((cell, &process), cpu), before) in
            measured.iter_mut().zip(cells).zip(&self.cpus).zip(&mut window.cpu_time)
        {
            let quantum = difference(&cpu.time, before);
            if process != NO_PROC {
                cell.time.add(&quantum);
                cell.quanta += 1;
            } else {
                debug_assert_eq!(quantum, empty_quantum, "an empty cell's quantum is a switch, then idle");
            }
            *before = cpu.time;
        }
        debug_assert_eq!(now - row_window.last_boundary, measures.quantum_ns, "one quantum since the last");
        row_window.quanta_by_row[row as usize] += 1;
        row_window.last_boundary = now;
        if row_window.is_complete() {
            self.close_window(now);
        }
    }

    /// Each CPU's time over `jump_ns`, composed from its cells in the occupied rows.
    pub(super) fn skipped_cpu_time_by_rows(&self, jump_ns: u64) -> Vec<Breakdown> {
        let fast = self.fast();
        let measures = fast.rows.as_ref().expect("measured per row");
        let mut occupied = vec![false; self.cfg.mpl as usize];
        for rate in &fast.running {
            occupied[rate.row as usize] = true;
        }
        let rows: Vec<usize> = (0..occupied.len()).filter(|&r| occupied[r]).collect();
        debug_assert_eq!(rows.len(), fast.gang_rows, "the running jobs occupy the matrix's rows");
        let cells = &self.gang.as_ref().expect("gang").cell_procs;
        let (cpu_count, quantum_ns) = (self.cpus.len(), measures.quantum_ns);
        if rows.is_empty() {
            return vec![Breakdown { idle_ns: jump_ns, ..Breakdown::default() }; cpu_count];
        }
        (0..cpu_count)
            .map(|c| {
                let mut cycle = Breakdown::default();
                for &r in &rows {
                    let measured = &measures.cells[r * cpu_count + c];
                    if cells[r * cpu_count + c] == NO_PROC {
                        cycle.add(&measures.empty_quantum());
                    } else {
                        debug_assert!(measured.quanta > 0, "a running job's cells are measured with it");
                        debug_assert_eq!(measured.time.total_ns(), measured.quanta * quantum_ns, "whole quanta");
                        cycle.add(&scaled(&measured.time, measured.quanta * quantum_ns, quantum_ns));
                    }
                }
                scaled(&cycle, rows.len() as u64 * quantum_ns, jump_ns)
            })
            .collect()
    }
}
