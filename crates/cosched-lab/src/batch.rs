//! Many independent simulation runs in parallel on the available cores. The
//! results do not depend on how the runs were spread over threads: each run
//! is a pure function of its configuration and its jobs.

use cosched_sim::run::{run as run_sim, RunOptions, RunResult};
use cosched_sim::{Progress, SimConfig, SimJob};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

/// What the caller sees of one run while it goes (progress lines, a line at its end).
pub trait RunWatch {
    fn progress(&mut self, progress: &Progress);
    fn finished(self, result: &Result<RunResult, String>);
}

/// What the caller sees of a batch: one [`RunWatch`] per run, made on the run's worker thread.
pub trait BatchWatch: Sync {
    type Run: RunWatch;
    /// A batch of `runs` runs begins.
    fn batch_started(&self, runs: usize);
    /// Run `index` (named `label`) begins.
    fn run_started(&self, index: usize, label: &str) -> Self::Run;
    /// A flag that, once set, ends every run at its next progress report (a
    /// caller that discards the results then, as Python on Ctrl-C).
    fn stop(&self) -> Option<Arc<AtomicBool>> {
        None
    }
}

/// Watching nothing: for tests and callers that only want the results.
pub struct Unwatched;

impl RunWatch for Unwatched {
    fn progress(&mut self, _: &Progress) {}
    fn finished(self, _: &Result<RunResult, String>) {}
}

impl BatchWatch for Unwatched {
    type Run = Unwatched;
    fn batch_started(&self, _: usize) {}
    fn run_started(&self, _: usize, _: &str) -> Unwatched {
        Unwatched
    }
}

/// Run every configuration with its jobs (`jobs_for(i)` for `configs[i]`), in
/// parallel; results in the order of `configs`, or the first run's error.
pub fn run_all<W: BatchWatch>(
    configs: &[SimConfig],
    labels: &[String],
    jobs_for: impl Fn(usize) -> Vec<SimJob> + Sync,
    options: &RunOptions,
    watch: &W,
) -> Result<Vec<RunResult>, String> {
    assert_eq!(configs.len(), labels.len(), "one label per run");
    watch.batch_started(configs.len());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(configs.len()).max(1);
    let next_run = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<RunResult, String>>> = (0..configs.len()).map(|_| None).collect();
    let slots_lock = Mutex::new(&mut slots);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next_run.fetch_add(1, Ordering::Relaxed);
                let Some(config) = configs.get(i) else { break };
                let mut run_watch = watch.run_started(i, &labels[i]);
                let result =
                    run_sim(config, jobs_for(i), options, |p| run_watch.progress(p)).map_err(|e| e.to_string());
                run_watch.finished(&result);
                slots_lock.lock().expect("no panics while holding the lock")[i] = Some(result);
            });
        }
    });
    slots.into_iter().map(|slot| slot.expect("every run reports")).collect()
}
