//! Rates reused by job kind, under GS on one-CPU nodes (`FastSettings::reuse_kind_rates`).
//!
//! Under GS a job runs alone on its CPUs in its own quanta (`gang_rows.rs`), so what it does there depends on
//! itself only: its tasks and its program, on nodes of one CPU each, where every neighbour is across the network.
//! Two jobs of the same kind then have the same rate in their quanta, but for their draws of the skew. So once
//! some jobs of a kind were measured, a job of that kind that starts can take their rate and their CPUs' time
//! split, and needs no warm-up or window of its own: at a site's scale these are most of fast mode's exact
//! simulation (docs/fast-mode.md, "A site's log").

use super::gang_rows::CellMeasure;
use super::settings::{REUSED_KIND_SAMPLES, REUSED_KIND_SAMPLE_EVERY};
use crate::app::Program;

/// What makes two jobs' rates in their own quanta the same: their tasks and their program, but for its length.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct JobKind {
    tasks: u32,
    program: Program,
}

impl JobKind {
    /// The kind of a job, where its rate can stand for its kind's: a program that does the same from its first
    /// iteration to its last (no prologue, no rounds), and that refills no caches when it takes a CPU back (a
    /// working set's refill depends on whether another row's process ran there last, so on the other rows).
    pub(super) fn of(tasks: u32, program: &Program) -> Option<JobKind> {
        let uniform = program.prologue.is_none() && program.rounds.is_none() && program.working_set_bytes == 0;
        uniform.then_some(JobKind { tasks, program: Program { iterations: 0, ..*program } })
    }
}

/// The first windows of a kind's jobs, summed.
#[derive(Clone, Copy, Default)]
pub(super) struct KindMeasure {
    /// Windows taken into it: one per job, its first.
    pub(super) samples: u32,
    /// Starts of jobs of this kind, measured or not.
    pub(super) starts: u32,
    /// Iterations its jobs' processes did together in those windows, and the length of the jobs' own quanta there.
    pub(super) iterations: u64,
    pub(super) measured_ns: u64,
    /// Their CPUs' cells since their starts (those windows, and any a change cut short), summed over CPUs.
    pub(super) cell: CellMeasure,
}

/// Every kind seen in the run, in the order first seen (a run holds a few dozen: tasks times job types).
#[derive(Default)]
pub(super) struct KindRates {
    kinds: Vec<(JobKind, KindMeasure)>,
    /// Starts that took their kind's rate.
    pub(super) reused: u64,
}

impl KindRates {
    fn entry(&mut self, kind: JobKind) -> &mut KindMeasure {
        let at = match self.kinds.iter().position(|(k, _)| *k == kind) {
            Some(at) => at,
            None => {
                self.kinds.push((kind, KindMeasure::default()));
                self.kinds.len() - 1
            }
        };
        &mut self.kinds[at].1
    }

    /// A job of `kind` starts: the measure it takes, where its kind has enough samples and this start is not one
    /// kept for sampling.
    pub(super) fn on_start(&mut self, kind: JobKind) -> Option<KindMeasure> {
        let measure = self.entry(kind);
        measure.starts += 1;
        let reuse = measure.samples >= REUSED_KIND_SAMPLES && !measure.starts.is_multiple_of(REUSED_KIND_SAMPLE_EVERY);
        let taken = reuse.then_some(*measure);
        self.reused += u64::from(taken.is_some());
        taken
    }

    /// A job of `kind` had its first window: add what it saw.
    pub(super) fn add_sample(&mut self, kind: JobKind, sample: &KindMeasure) {
        let measure = self.entry(kind);
        measure.samples += 1;
        measure.iterations += sample.iterations;
        measure.measured_ns += sample.measured_ns;
        measure.cell.add(&sample.cell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Breakdown;

    fn program(compute_ns: u64, iterations: u32) -> Program {
        Program {
            compute_ns,
            io_ns: 1_000,
            iterations,
            message_bytes: 64,
            prologue: Default::default(),
            working_set_bytes: 0,
            rounds: Default::default(),
            reads_cpu_clock: false,
            barrier: false,
        }
    }

    fn sample(iterations: u64) -> KindMeasure {
        let time = Breakdown { useful_ns: 150, idle_ns: 50, ..Breakdown::default() };
        KindMeasure { iterations, measured_ns: 200, cell: CellMeasure { time, quanta: 1 }, ..KindMeasure::default() }
    }

    #[test]
    fn a_kind_is_its_tasks_and_program_whatever_its_length() {
        assert!(JobKind::of(4, &program(5_000, 10)) == JobKind::of(4, &program(5_000, 9_000)));
        assert!(JobKind::of(4, &program(5_000, 10)) != JobKind::of(8, &program(5_000, 10)));
        assert!(JobKind::of(4, &program(5_000, 10)) != JobKind::of(4, &program(6_000, 10)));
    }

    #[test]
    fn a_kind_is_reused_once_sampled_enough_and_every_so_often_sampled_again() {
        let kind = JobKind::of(2, &program(5_000, 10)).expect("a uniform program");
        let mut rates = KindRates::default();
        for _ in 0..REUSED_KIND_SAMPLES {
            assert!(rates.on_start(kind).is_none(), "too few samples yet");
            rates.add_sample(kind, &sample(40));
        }
        let taken: Vec<bool> = (0..2 * REUSED_KIND_SAMPLE_EVERY).map(|_| rates.on_start(kind).is_some()).collect();
        let measured = taken.iter().filter(|&&t| !t).count() as u32;
        assert_eq!(measured, 2, "one start in {REUSED_KIND_SAMPLE_EVERY} is measured: {taken:?}");
        let measure = rates.on_start(kind).expect("reused");
        let n = u64::from(REUSED_KIND_SAMPLES);
        assert_eq!((measure.samples, measure.iterations, measure.measured_ns), (REUSED_KIND_SAMPLES, 40 * n, 200 * n));
        assert_eq!((measure.cell.quanta, measure.cell.time.total_ns()), (n, 200 * n), "whole quanta, summed");
        let other = JobKind::of(2, &program(7_000, 10)).expect("a uniform program");
        assert!(rates.on_start(other).is_none(), "another kind has its own samples");
    }
}
