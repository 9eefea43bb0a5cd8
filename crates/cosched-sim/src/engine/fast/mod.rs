//! Fast mode: the exact engine, with the stretches between changes skipped.
//!
//! Between two instants where the set of processes on the CPUs changes (a job
//! starts or finishes; arrivals that start nothing change nothing), the exact
//! model is a stationary process. Fast mode lets the exact engine run after
//! each change for a warm-up and then a measurement window, takes from the
//! window each running job's rate of progress (iterations per nanosecond, the
//! mean over its processes) and each CPU's shares of useful, spin, switch,
//! overhead and idle time, and then skips ahead: the run's clock jumps, every
//! running job's processes are credited with the iterations their job's rate
//! gives, and every CPU with the time at its shares. A jump stops short of the
//! next arrival and, by a guard, of the first predicted finish, so arrivals,
//! starts and finishes are all simulated exactly.
//!
//! The engine's own clock never jumps: ticks, quanta, messages in flight and
//! the MLFQ's raise go on from where the window left them, so a jump cannot
//! break an invariant of the exact engine. What moves is an offset between the
//! engine's clock and the run's clock ([`FastState::offset_ns`]): arrivals are
//! booked at their time minus the offset, and starts, finishes, trace and
//! progress are reported plus it.
//!
//! Under GS the measures are kept per matrix row instead ([`gang_rows`]): a
//! change then voids only the measure of the job that started.

mod gang_jumps;
mod gang_rows;
mod jumps;
mod kinds;
pub mod settings;

pub use settings::{
    better_window_than, fast_mode_measured, machine_as_measured, same_machine_model, validation, validation_with,
    FastReport, FastSettings, NotValidated, RunSetting, ACCEPTED_ERROR, HALVES_APART_FACTOR, MAX_WINDOW_GROWTH,
    MEASURED_MPLS, UNSTEADY_WINDOWS_SHARE, VALIDATION_CPUS,
};

use crate::metrics::Breakdown;
use cosched_core::SimTime;
use gang_rows::{RowMeasures, RowWindow};
use kinds::KindRates;

/// What one window saw of one running job, and the rate a jump would then credit it with (`fast-windows.csv` of
/// `cosched sim --fast-windows`): the numbers behind fast mode's answer, for tracing where it parts from the
/// exact engine's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowMeasure {
    /// The run's clock when the window closed.
    pub closed_ns: u64,
    /// The run's clock less the engine's then: the simulated time skipped by the jumps so far.
    pub skipped_ns: u64,
    pub job_number: u64,
    pub tasks: u32,
    /// Its matrix row, where measures are kept per row (GS).
    pub row: Option<u32>,
    /// The job's time in this window: the window's length, or its own quanta in it when measured per row
    /// (`window_ms` in `fast-windows.csv`).
    pub job_time_ns: u64,
    /// Iterations its processes did together in this window.
    pub iterations: u64,
    /// Of those, the iterations of the window's first half (`None` under the gang schemes, whose halves are not
    /// compared): a rate that flips between two states shows in halves that disagree.
    pub first_half_iterations: Option<u64>,
    /// Its measure since its surroundings last changed, this window included (and, for a job that took its kind's
    /// measure at its start, that measure: `--fast-reuse-kind-rates`).
    pub measured_ns: u64,
    pub measured_iterations: u64,
    /// Iterations per process per nanosecond of the run's clock that a jump would credit it with (under GS, with
    /// the rows occupied when the window closed).
    pub rate_per_ns: f64,
}

/// A run keeps at most this many window measures (one per window and running job; some 80 bytes each): enough
/// for a site's months at the default windows, bounded where a tiny window would fill the memory.
pub const MAX_WINDOW_MEASURES: usize = 500_000;

/// The window measures a run kept, and how many it did not keep past [`MAX_WINDOW_MEASURES`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowLog {
    pub measures: Vec<WindowMeasure>,
    pub dropped: u64,
}

impl WindowLog {
    fn is_full(&self) -> bool {
        self.measures.len() >= MAX_WINDOW_MEASURES
    }

    fn extend(&mut self, measures: impl ExactSizeIterator<Item = WindowMeasure>) {
        let room = MAX_WINDOW_MEASURES.saturating_sub(self.measures.len());
        let count = measures.len();
        self.measures.extend(measures.take(room));
        self.dropped += count.saturating_sub(room) as u64;
    }
}

/// Fast mode's state inside the engine.
pub(crate) struct FastState {
    settings: FastSettings,
    /// Run clock = engine clock + this.
    pub(super) offset_ns: u64,
    changed_at: SimTime,
    /// Gang schemes: no window opens before this instant, the end of the
    /// quantum in which the number of rows last changed (see `fast_note_change`).
    rows_settle_at: SimTime,
    /// Running jobs, in start order, with what the windows saw of each.
    running: Vec<JobRate>,
    /// Time of each CPU over the windows since its residents last changed.
    cpu_time: Vec<Breakdown>,
    /// The next job to arrive (a booking left from before a jump is stale).
    pub(super) next_arrival: usize,
    window: Option<Window>,
    /// The next arrival when a jump was last tried, if nothing changed since:
    /// a jump is tried once per arrival and once per change.
    tried_before_arrival: Option<usize>,
    /// After a jump was tried (made or too short): when every job is measured
    /// again if nothing has changed by then (see `try_jump`).
    remeasure_at: Option<SimTime>,
    /// Gang schemes: the matrix's occupied rows (every job's share changes with them).
    gang_rows: usize,
    /// GS: what the windows saw of each CPU, per matrix row (see [`gang_rows`]).
    rows: Option<RowMeasures>,
    /// GS on one-CPU nodes, when asked for: the rates of the kinds of job measured so far (see [`kinds`]).
    kinds: Option<KindRates>,
    report: FastReport,
    /// The engine instant of the last checkpoint.
    last_checkpoint: SimTime,
    /// Every window's measures, when asked for (`RunOptions::record_fast_windows`).
    window_log: Option<WindowLog>,
}

/// A running job's rate as measured: iterations its processes did together
/// in windows since its surroundings last changed, and the windows' length
/// (measured per row: the length of its own quanta in them).
#[derive(Clone, Copy)]
struct JobRate {
    job: u32,
    /// Its matrix row when measures are kept per row ([`NO_ROW`](super::NO_ROW) otherwise).
    row: u32,
    iterations: u64,
    measured_ns: u64,
    /// Its first window is to be added to its kind's measure (see [`kinds`]): set at its start where kinds are
    /// kept and it did not take its kind's measure, cleared once added (a window after every job is measured
    /// again is not a first one).
    kind_sample_due: bool,
}

struct Window {
    from: SimTime,
    /// Measured per row: [`SimTime::MAX`], the window closes at the end of a quantum.
    until: SimTime,
    /// Iterations done so far by each running job's processes together.
    progress: Vec<u64>,
    halves: Halves,
    /// Each CPU's time when the window opened (per row: at the last quantum's end).
    cpu_time: Vec<Breakdown>,
    rows: Option<RowWindow>,
}

/// A window's two halves, compared to see a job's rate flip within it ("Rates that flip", docs/fast-mode.md).
enum Halves {
    /// Not compared: under the gang schemes a window is whole cycles of the rows, and its middle falls wherever
    /// the cycle does, so its halves hold different shares of a job's quanta.
    NotCompared,
    /// To be read at this instant.
    Due(SimTime),
    /// Each running job's progress at the middle.
    Read(Vec<u64>),
}

impl FastState {
    pub(super) fn new(
        settings: FastSettings,
        cpu_count: usize,
        rows: Option<RowMeasures>,
        record_windows: bool,
        one_cpu_nodes: bool,
    ) -> FastState {
        let kinds = (settings.reuse_kind_rates && rows.is_some() && one_cpu_nodes).then(KindRates::default);
        FastState {
            settings,
            offset_ns: 0,
            changed_at: SimTime::ZERO,
            rows_settle_at: SimTime::ZERO,
            running: Vec::new(),
            cpu_time: vec![Breakdown::default(); cpu_count],
            next_arrival: 0,
            window: None,
            tried_before_arrival: None,
            remeasure_at: None,
            gang_rows: 0,
            rows,
            kinds,
            report: FastReport { settings: Some(settings), ..FastReport::default() },
            last_checkpoint: SimTime::ZERO,
            window_log: record_windows.then(WindowLog::default),
        }
    }

    pub(super) fn report(&self) -> FastReport {
        let reused_kind_rates = self.kinds.as_ref().map_or(0, |kinds| kinds.reused);
        FastReport { reused_kind_rates, ..self.report }
    }

    /// The windows' measures, if they were recorded.
    pub(super) fn take_window_log(&mut self) -> WindowLog {
        self.window_log.take().unwrap_or_default()
    }

    /// Forget what the windows saw of every job and every CPU.
    fn forget_all(&mut self) {
        self.cpu_time.fill(Breakdown::default());
        if let Some(rows) = &mut self.rows {
            rows.forget_all();
        }
        for rate in &mut self.running {
            (rate.iterations, rate.measured_ns) = (0, 0);
        }
    }

    /// Forget what the windows saw of these CPUs and these jobs.
    fn forget(&mut self, cpus: &[u32], jobs: &[u32]) {
        for &c in cpus {
            self.cpu_time[c as usize] = Breakdown::default();
        }
        // Sorted once: a change can link many of many running jobs at a site's scale.
        let mut jobs = jobs.to_vec();
        jobs.sort_unstable();
        for rate in self.running.iter_mut().filter(|r| jobs.binary_search(&r.job).is_ok()) {
            (rate.iterations, rate.measured_ns) = (0, 0);
        }
    }
}

/// The CPUs and jobs linked to `changed` CPUs through jobs that share a CPU, at any remove: what a change there
/// may alter. A job's rate depends on every job that shares one of its CPUs, and theirs on the jobs beside them:
/// when a job leaves a CPU of another job, that job runs faster there and takes more from a third job on its
/// other CPU. (Forgetting only the jobs on the changed CPUs kept the third job's old rate: on EEVDF nodes under
/// IB, one job ran 25 % fast for 3,400 s of a stretch the exact run held stationary.) A CPU brings its node's
/// other CPUs (`cpus_per_node` of them from a multiple of it), since a node's scheduler may move a process between
/// them: EEVDF's balancing pulled a process onto a CPU left empty and unmeasured by a job's end.
fn coupled(
    cpus_per_node: u32,
    cpu_count: usize,
    changed: &[u32],
    jobs_on: impl Fn(u32) -> Vec<u32>,
    cpus_of: impl Fn(u32) -> Vec<u32>,
) -> (Vec<u32>, Vec<u32>) {
    let mut seen_cpu = vec![false; cpu_count];
    let mut cpus: Vec<u32> = Vec::new();
    let mut jobs: Vec<u32> = Vec::new();
    let mut seen_job = std::collections::BTreeSet::new();
    let mut visit = |c: u32, cpus: &mut Vec<u32>| {
        let first = c / cpus_per_node * cpus_per_node;
        for sibling in first..first + cpus_per_node {
            if !std::mem::replace(&mut seen_cpu[sibling as usize], true) {
                cpus.push(sibling);
            }
        }
    };
    for &c in changed {
        visit(c, &mut cpus);
    }
    let mut next = 0;
    while let Some(&c) = cpus.get(next) {
        next += 1;
        for j in jobs_on(c) {
            if seen_job.insert(j) {
                jobs.push(j);
                cpus_of(j).into_iter().for_each(|c| visit(c, &mut cpus));
            }
        }
    }
    (cpus, jobs)
}

fn difference(after: &Breakdown, before: &Breakdown) -> Breakdown {
    Breakdown {
        useful_ns: after.useful_ns - before.useful_ns,
        spin_ns: after.spin_ns - before.spin_ns,
        switch_ns: after.switch_ns - before.switch_ns,
        overhead_ns: after.overhead_ns - before.overhead_ns,
        idle_ns: after.idle_ns - before.idle_ns,
    }
}

/// `window`'s time split, scaled from `window_ns` to exactly `target_ns` (the
/// rounding goes to the largest share, so the parts add up).
fn scaled(window: &Breakdown, window_ns: u64, target_ns: u64) -> Breakdown {
    let part = |v: u64| (v as u128 * target_ns as u128 / window_ns.max(1) as u128) as u64;
    let mut out = Breakdown {
        useful_ns: part(window.useful_ns),
        spin_ns: part(window.spin_ns),
        switch_ns: part(window.switch_ns),
        overhead_ns: part(window.overhead_ns),
        idle_ns: part(window.idle_ns),
    };
    let rest = target_ns - out.total_ns();
    let largest = [out.useful_ns, out.spin_ns, out.switch_ns, out.overhead_ns, out.idle_ns]
        .iter()
        .enumerate()
        .max_by_key(|&(i, &v)| (v, std::cmp::Reverse(i)))
        .map_or(4, |(i, _)| i);
    *[&mut out.useful_ns, &mut out.spin_ns, &mut out.switch_ns, &mut out.overhead_ns, &mut out.idle_ns][largest] +=
        rest;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jobs A on CPUs 0-1, B on 1-2, C on 2-3, D on 5-6: a change on CPU 3 reaches C, B and A, not D.
    #[test]
    fn a_change_reaches_every_job_linked_by_shared_cpus() {
        let placement: [(u32, &[u32]); 4] = [(0, &[0, 1]), (1, &[1, 2]), (2, &[2, 3]), (3, &[5, 6])];
        let jobs_on = |c: u32| placement.iter().filter(|(_, cpus)| cpus.contains(&c)).map(|&(j, _)| j).collect();
        let cpus_of = |j: u32| placement[j as usize].1.to_vec();
        let (mut cpus, mut jobs) = coupled(1, 8, &[3], jobs_on, cpus_of);
        cpus.sort_unstable();
        jobs.sort_unstable();
        assert_eq!((cpus, jobs), (vec![0, 1, 2, 3], vec![0, 1, 2]));
        let (cpus, jobs) = coupled(1, 8, &[4, 4], jobs_on, cpus_of);
        assert_eq!((cpus, jobs), (vec![4], vec![]), "an empty CPU reaches nothing, once");
        // On nodes of two CPUs, CPU 4's node holds CPU 5, and job 3 brings node 3 (CPUs 6-7).
        let (mut cpus, jobs) = coupled(2, 8, &[4], jobs_on, cpus_of);
        cpus.sort_unstable();
        assert_eq!((cpus, jobs), (vec![4, 5, 6, 7], vec![3]), "a node's CPUs go together");
    }

    #[test]
    fn a_window_log_keeps_at_most_its_bound_and_counts_the_rest() {
        let measure = WindowMeasure {
            closed_ns: 1,
            skipped_ns: 0,
            job_number: 1,
            tasks: 2,
            row: None,
            job_time_ns: 200,
            iterations: 10,
            first_half_iterations: Some(5),
            measured_ns: 200,
            measured_iterations: 10,
            rate_per_ns: 0.025,
        };
        let mut log = WindowLog::default();
        log.extend(std::iter::repeat_n(measure, MAX_WINDOW_MEASURES - 1));
        assert_eq!((log.measures.len(), log.dropped), (MAX_WINDOW_MEASURES - 1, 0));
        log.extend(std::iter::repeat_n(measure, 3));
        assert_eq!((log.measures.len(), log.dropped), (MAX_WINDOW_MEASURES, 2));
        log.extend(std::iter::repeat_n(measure, 5));
        assert_eq!((log.measures.len(), log.dropped), (MAX_WINDOW_MEASURES, 7));
    }

    #[test]
    fn scaled_time_adds_up_to_the_jump() {
        let window = Breakdown { useful_ns: 333, spin_ns: 333, switch_ns: 0, overhead_ns: 1, idle_ns: 333 };
        for target in [0, 1, 7, 1_000, 123_456_789] {
            let out = scaled(&window, window.total_ns(), target);
            assert_eq!(out.total_ns(), target);
            assert_eq!(out.switch_ns, 0, "a share that was zero stays zero");
        }
        let out = scaled(&window, 1000, 1_000_000);
        assert_eq!((out.useful_ns, out.overhead_ns), (333_000, 1000));
    }
}
