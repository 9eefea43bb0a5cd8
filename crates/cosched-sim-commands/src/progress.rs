//! Progress lines on standard error for long runs, at most one every few
//! seconds per run. The simulator itself never reads the clock: it calls back
//! every so many events, and only this glue looks at wall time.
#![allow(clippy::disallowed_methods)] // wall-clock time is what progress is about

use cosched_lab::batch::{BatchWatch, RunWatch};
use cosched_sim::run::RunResult;
use cosched_sim::Progress;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct ProgressLine {
    label: String,
    started: Instant,
    last_print: Instant,
    every: Duration,
    enabled: bool,
    ctrl_c: &'static str,
}

/// What Ctrl-C does, said on each progress line: `sim` keeps the jobs that finished, a study the runs.
const CTRL_C_KEEPS_JOBS: &str = "Ctrl-C: stop and keep the finished jobs";
const CTRL_C_KEEPS_RUNS: &str = "Ctrl-C: stop and keep the finished runs";
const CTRL_C_DROPS_JITTER: &str = "Ctrl-C: stop these jittered runs and keep the runs before them";

impl ProgressLine {
    pub fn new(label: &str, enabled: bool) -> ProgressLine {
        let now = Instant::now();
        ProgressLine {
            label: label.to_string(),
            started: now,
            last_print: now,
            every: Duration::from_secs(3),
            enabled,
            ctrl_c: CTRL_C_KEEPS_JOBS,
        }
    }

    pub fn update(&mut self, p: &Progress) {
        if !self.enabled || self.last_print.elapsed() < self.every {
            return;
        }
        self.last_print = Instant::now();
        let elapsed_s = self.started.elapsed().as_secs_f64();
        eprintln!(
            "[{}] {:>6.1} s wall: simulated {:.1} s, {}/{} jobs done, {} queued, {:.1} M events, {} ({})",
            self.label,
            elapsed_s,
            p.now.as_secs_f64(),
            p.jobs_completed,
            p.jobs_total,
            p.queued,
            p.events as f64 / 1e6,
            eta(elapsed_s, p),
            self.ctrl_c
        );
    }

    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// Progress lines for every run of a batch, and a line as each run ends.
pub struct BatchProgress {
    enabled: bool,
    /// Said when a batch begins (the study's batches), with the runs and the cores.
    jobs_per_run: Option<usize>,
    counts: Arc<BatchCounts>,
    stop: Option<Arc<AtomicBool>>,
    ctrl_c: &'static str,
}

/// Runs in the batch and runs finished, shared with each run's watcher.
#[derive(Default)]
struct BatchCounts {
    runs: AtomicUsize,
    finished: AtomicUsize,
    /// Each finished run's wall seconds, by its index in the batch.
    wall_s: Mutex<BTreeMap<usize, f64>>,
}

impl BatchProgress {
    pub fn new(enabled: bool) -> BatchProgress {
        BatchProgress { enabled, jobs_per_run: None, counts: Arc::default(), stop: None, ctrl_c: CTRL_C_KEEPS_JOBS }
    }

    /// Also say, as each batch begins, how many runs of how many jobs it holds.
    pub fn announcing(jobs_per_run: usize, enabled: bool) -> BatchProgress {
        BatchProgress { jobs_per_run: Some(jobs_per_run), ..BatchProgress::new(enabled) }
    }

    /// The wall seconds of the last batch's finished runs, in the batch's order.
    pub fn run_wall_s(&self) -> Vec<f64> {
        self.counts.wall_s.lock().expect("no panics while holding the lock").values().copied().collect()
    }

    /// Say on each progress line that Ctrl-C keeps the finished runs (a study's journal).
    pub fn keeping_runs(self) -> BatchProgress {
        BatchProgress { ctrl_c: CTRL_C_KEEPS_RUNS, ..self }
    }

    /// Say on each progress line that Ctrl-C drops these runs, keeping those before them (`--jitter-draws`).
    pub fn dropping_jittered_runs(self) -> BatchProgress {
        BatchProgress { ctrl_c: CTRL_C_DROPS_JITTER, ..self }
    }

    /// Also hand the runs this stop flag (see [`BatchWatch::stop`]).
    pub fn stopped_by(self, stop: Arc<AtomicBool>) -> BatchProgress {
        BatchProgress { stop: Some(stop), ..self }
    }
}

/// One run's progress line, and the batch's counts for the line at its end.
pub struct RunProgress {
    line: ProgressLine,
    counts: Arc<BatchCounts>,
    index: usize,
}

impl BatchWatch for BatchProgress {
    type Run = RunProgress;

    fn stop(&self) -> Option<Arc<AtomicBool>> {
        self.stop.clone()
    }

    fn batch_started(&self, runs: usize) {
        self.counts.runs.store(runs, Ordering::Relaxed);
        self.counts.finished.store(0, Ordering::Relaxed);
        // `run_wall_s` speaks of the last batch only.
        self.counts.wall_s.lock().expect("no panics while holding the lock").clear();
        if let (true, Some(jobs)) = (self.enabled, self.jobs_per_run) {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            eprintln!("{runs} runs of {jobs} jobs each on {cores} cores");
        }
    }

    fn run_started(&self, index: usize, label: &str) -> RunProgress {
        let line = ProgressLine { ctrl_c: self.ctrl_c, ..ProgressLine::new(label, self.enabled) };
        RunProgress { line, counts: self.counts.clone(), index }
    }
}

impl RunWatch for RunProgress {
    fn progress(&mut self, progress: &Progress) {
        self.line.update(progress);
    }

    fn finished(self, result: &Result<RunResult, String>) {
        let done = self.counts.finished.fetch_add(1, Ordering::Relaxed) + 1;
        self.counts.wall_s.lock().expect("no panics while holding the lock").insert(self.index, self.line.elapsed_s());
        let (true, Ok(r)) = (self.line.enabled, result) else { return };
        let interrupted = if r.summary.interrupted_at_s.is_some() { " (interrupted)" } else { "" };
        eprintln!(
            "[{done}/{}] {}: {} jobs, simulated {:.1} s in {:.1} s wall{interrupted}",
            self.counts.runs.load(Ordering::Relaxed),
            self.line.label,
            r.summary.jobs_completed,
            r.summary.span_s,
            self.line.elapsed_s()
        );
    }
}

/// The share of the work done and the wall time left if the work ahead goes
/// at the pace of the work done. The work is every iteration of every process
/// of every job, known before the run, which the engine's cost follows
/// (docs/model.md, "What a run costs"); jobs done are no measure, as one job
/// may hold nearly all of it. Still rough: an iteration costs more when
/// processes share a CPU, and fast mode skips some at no cost.
fn eta(elapsed_s: f64, p: &Progress) -> String {
    let (done, total) = (p.process_iterations_done, p.process_iterations_total.max(p.process_iterations_done));
    if done == 0 {
        return "no work done yet, no ETA".into();
    }
    let share_done = done as f64 / total as f64;
    let left_s = elapsed_s * (total - done) as f64 / done as f64;
    let left = match left_s {
        s if s < 120.0 => format!("about {s:.0} s left"),
        s if s < 7200.0 => format!("about {:.0} min left", s / 60.0),
        s => format!("about {:.1} h left", s / 3600.0),
    };
    format!("{:.1} % of the work done, {left}", 100.0 * share_done)
}

#[cfg(test)]
mod tests {
    use super::{eta, BatchProgress, BatchWatch, RunWatch};
    use cosched_core::SimTime;
    use cosched_sim::Progress;

    /// A second batch's wall times do not carry the first's.
    #[test]
    fn the_wall_times_are_the_last_batchs() {
        let progress = BatchProgress::new(false);
        progress.batch_started(2);
        for index in 0..2 {
            progress.run_started(index, "first").finished(&Err("not run".into()));
        }
        assert_eq!(progress.run_wall_s().len(), 2);
        progress.batch_started(1);
        progress.run_started(0, "second").finished(&Err("not run".into()));
        assert_eq!(progress.run_wall_s().len(), 1);
    }

    fn progress(jobs_completed: usize, jobs_total: usize, iterations_done: u64, iterations_total: u64) -> Progress {
        Progress {
            now: SimTime::ZERO,
            jobs_completed,
            jobs_total,
            queued: 0,
            events: 0,
            process_iterations_done: iterations_done,
            process_iterations_total: iterations_total,
        }
    }

    /// Issue 39 item 16: 6 of 20 jobs done in 9 s said "about 21 s left" while the seventh job, 4 processes of
    /// 2e6 s, held nearly all the work: the run went on for hours.
    #[test]
    fn eta_counts_the_work_still_ahead_not_the_jobs_done() {
        let long_job_ahead = progress(6, 20, 9_000_000, 12_000_000_000);
        assert_eq!(eta(9.0, &long_job_ahead), "0.1 % of the work done, about 3.3 h left");
        assert_eq!(eta(10.0, &progress(0, 100, 0, 1_000)), "no work done yet, no ETA");
        assert_eq!(eta(10.0, &progress(50, 100, 500, 1_000)), "50.0 % of the work done, about 10 s left");
        assert_eq!(eta(60.0, &progress(10, 100, 100, 1_000)), "10.0 % of the work done, about 9 min left");
        assert_eq!(eta(3600.0, &progress(1, 3, 1, 3)), "33.3 % of the work done, about 2.0 h left");
        assert_eq!(eta(5.0, &progress(3, 3, 7, 7)), "100.0 % of the work done, about 0 s left");
    }
}
