//! The engine's side of fast mode's measures per matrix row, under GS (see
//! `gang_rows.rs`, which holds them).

use super::gang_rows::{RowMeasures, RowWindow};
use super::{difference, scaled, Window};
use crate::engine::node_scheduler::NodeScheduler;
use crate::engine::parts::Parts;
use crate::engine::{Engine, NO_PROC};
use crate::metrics::Breakdown;
use cosched_core::SimTime;
use cosched_policy::cluster::Rotation;

impl<P: Parts> Engine<'_, P> {
    /// Measures per row when the scheme allows them (see the module doc).
    pub(in crate::engine) fn row_measures(&self) -> Option<RowMeasures> {
        let costs = &self.cfg.costs;
        let rules = self.coordinator.coscheduler().settings().rules;
        // Rows never move and take turns in order: a job keeps its row's quanta.
        let one_row_each = rules.rotation == Rotation::NextOccupiedRow && !rules.fill_free_cells;
        (Self::RUNS_ROWS && one_row_each && costs.gang_switch_every_quantum).then(|| {
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
        let Some(row) = P::Node::running_row(&self.node_machine) else { return };
        let Some(Window { rows: Some(row_window), .. }) = &self.fast().window else { return };
        if now <= row_window.last_boundary {
            return; // the window opened at this boundary
        }
        self.account_all(now);
        let cpu_count = self.cpus.len();
        let cells = &P::Node::cells(&self.node_machine)[row as usize * cpu_count..][..cpu_count];
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
        let cells = P::Node::cells(&self.node_machine);
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
