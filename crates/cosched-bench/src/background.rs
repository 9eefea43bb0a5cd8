//! What the rest of a node does to a busy CPU's processes, measured with
//! spinning threads: how often other tasks (kernel threads, daemons) wake and
//! take a CPU from the process running there, and how often the kernel moves
//! a process between CPUs that are all busy. The node model does not simulate
//! those tasks or the averaged loads behind the moves; the machine file gives
//! it these two rates instead (`housekeeping_wake_interval_ns`,
//! `background_migration_interval_ns`). Properties of the machine and its
//! kernel, measured with nothing else of ours running, never fitted to a
//! slowdown.

use crate::os;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// A window of either measurement, at most: bounds the time root's calibration can be asked to spin.
pub const MAX_WINDOW: Duration = Duration::from_secs(60);
/// A window of either measurement, at least: shorter ones count too few events to say anything.
pub const MIN_WINDOW: Duration = Duration::from_millis(500);
/// Spinning threads per CPU while moves are counted: every CPU busy with a queue, as under local scheduling.
const SPINNERS_PER_CPU_FOR_MOVES: usize = 2;
/// Moves are counted over windows this many times longer than wakes: a thread moves once in seconds, so a
/// wake's window counts a handful of moves at most (0 to 3 in 5 s with four threads on this machine).
pub const MOVES_WINDOW_FACTOR: u32 = 4;

#[derive(Clone, Debug, Serialize)]
pub struct BackgroundReport {
    pub cpus: usize,
    pub window_s: f64,
    /// Per window: the preemptions of a lone spinning thread per CPU-second, all CPUs together.
    pub wakes_per_cpu_s: Vec<f64>,
    /// Per window of moves (`MOVES_WINDOW_FACTOR` × `window_s`): moves of a spinning thread per thread-second,
    /// two per CPU.
    pub migrations_per_thread_s: Vec<f64>,
    /// Moves counted over all windows: the rate's precision (a count of n is known to about 1/√n).
    pub migrations_counted: u64,
    /// The mean time between wakes on one CPU, from the median window (0: none seen).
    pub housekeeping_wake_interval_ns: u64,
    /// The mean time between moves of one thread, from all windows' moves together (0: none seen).
    pub background_migration_interval_ns: u64,
}

/// `repeats` windows of each measurement, each `window` long.
pub fn measure(window: Duration, repeats: usize) -> Result<BackgroundReport, String> {
    if !(MIN_WINDOW..=MAX_WINDOW).contains(&window) {
        return Err(format!("a window is {} to {} s", MIN_WINDOW.as_secs_f64(), MAX_WINDOW.as_secs()));
    }
    let cpus = os::allowed_cpus()?;
    let mut wakes_per_cpu_s = Vec::new();
    let mut migrations_per_thread_s = Vec::new();
    let mut migrations_counted = 0;
    let moves_window = window * MOVES_WINDOW_FACTOR;
    for _ in 0..repeats.max(1) {
        let preempted = spin_and_count(&cpus, 1, true, window, involuntary_switches)?;
        wakes_per_cpu_s.push(preempted as f64 / (cpus.len() as f64 * window.as_secs_f64()));
        let spinners = SPINNERS_PER_CPU_FOR_MOVES * cpus.len();
        let moved = spin_and_count(&cpus, SPINNERS_PER_CPU_FOR_MOVES, false, moves_window, migrations)?;
        migrations_per_thread_s.push(moved as f64 / (spinners as f64 * moves_window.as_secs_f64()));
        migrations_counted += moved;
    }
    Ok(BackgroundReport {
        cpus: cpus.len(),
        window_s: window.as_secs_f64(),
        housekeeping_wake_interval_ns: interval_ns(median(&wakes_per_cpu_s)),
        background_migration_interval_ns: interval_ns(pooled(&migrations_per_thread_s)),
        wakes_per_cpu_s,
        migrations_per_thread_s,
        migrations_counted,
    })
}

/// The rate of rare events over windows of equal length, all counted together (the Poisson rate's maximum
/// likelihood): a median of counts of 0 to 3 would mostly say how the counts fell.
fn pooled(rates: &[f64]) -> f64 {
    match rates.len() {
        0 => 0.0,
        n => rates.iter().sum::<f64>() / n as f64,
    }
}

/// The mean time between events at `per_s` a second (0: none).
fn interval_ns(per_s: f64) -> u64 {
    if per_s > 0.0 {
        (1e9 / per_s).round() as u64
    } else {
        0
    }
}

fn median(values: &[f64]) -> f64 {
    cosched_core::stats::lower_median(values).unwrap_or(0.0)
}

/// `per_cpu` spinning threads on each of `cpus` (pinned to it, or free to move among them) for `window`;
/// the sum over the threads of `count` at the end less at the start, each read by its own thread.
fn spin_and_count(
    cpus: &[usize],
    per_cpu: usize,
    pinned: bool,
    window: Duration,
    count: fn() -> Result<u64, String>,
) -> Result<u64, String> {
    let threads = cpus.len() * per_cpu;
    // The spinners and this thread, which starts the window once every spinner has read its counter.
    let start = Barrier::new(threads + 1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (start, stop) = (&start, &stop);
                let cpu = cpus[i % cpus.len()];
                scope.spawn(move || -> Result<u64, String> {
                    if pinned {
                        os::pin_current_thread(cpu)?;
                    }
                    let before = count();
                    start.wait();
                    let before = before?;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    Ok(count()?.saturating_sub(before))
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        while began.elapsed() < window {
            std::thread::sleep(Duration::from_millis(50).min(window));
        }
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().map_err(|_| "a spinning thread panicked".to_string())?).sum()
    })
}

/// The calling thread's involuntary context switches so far: another task took its CPU.
fn involuntary_switches() -> Result<u64, String> {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
        .map_err(|e| format!("getrusage: {e}"))?;
    Ok(usage.involuntary_context_switches() as u64)
}

/// The calling thread's moves between CPUs so far (`se.nr_migrations` of /proc/thread-self/sched).
fn migrations() -> Result<u64, String> {
    let text =
        std::fs::read_to_string("/proc/thread-self/sched").map_err(|e| format!("/proc/thread-self/sched: {e}"))?;
    text.lines()
        .find(|line| line.starts_with("se.nr_migrations"))
        .and_then(|line| line.rsplit(':').next())
        .and_then(|value| value.trim().parse().ok())
        .ok_or("/proc/thread-self/sched has no se.nr_migrations".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_become_intervals_and_none_stays_none() {
        assert_eq!(interval_ns(20.0), 50_000_000);
        assert_eq!(interval_ns(0.0), 0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(pooled(&[0.15, 0.05, 0.0]), 0.2 / 3.0);
        assert_eq!(pooled(&[]), 0.0);
    }

    /// The counters the measurement reads exist and count up.
    #[test]
    fn this_threads_counters_are_readable() {
        let (switches, moves) = (involuntary_switches().unwrap(), migrations().unwrap());
        assert!(involuntary_switches().unwrap() >= switches);
        assert!(migrations().unwrap() >= moves);
    }

    /// Short windows on this machine: every window gives a rate; the wakes' interval follows from their median
    /// window, the moves' from all their windows together.
    #[test]
    fn a_short_measurement_reports_a_rate_per_window() {
        let report = measure(MIN_WINDOW, 2).unwrap();
        assert_eq!(report.cpus, os::allowed_cpus().unwrap().len());
        for rates in [&report.wakes_per_cpu_s, &report.migrations_per_thread_s] {
            assert_eq!(rates.len(), 2);
            assert!(rates.iter().all(|r| r.is_finite() && *r >= 0.0), "{rates:?}");
        }
        assert_eq!(report.housekeeping_wake_interval_ns, interval_ns(median(&report.wakes_per_cpu_s)));
        assert_eq!(report.background_migration_interval_ns, interval_ns(pooled(&report.migrations_per_thread_s)));
        let threads_s =
            (SPINNERS_PER_CPU_FOR_MOVES * report.cpus) as f64 * report.window_s * MOVES_WINDOW_FACTOR as f64;
        let counted: f64 = report.migrations_per_thread_s.iter().map(|rate| rate * threads_s).sum();
        assert_eq!(counted.round() as u64, report.migrations_counted);
    }

    #[test]
    fn a_window_beyond_the_bound_is_refused_before_any_spinning() {
        assert!(measure(MAX_WINDOW + Duration::from_secs(1), 1).is_err());
        assert!(measure(Duration::ZERO, 1).is_err());
        assert!(measure(MIN_WINDOW - Duration::from_millis(1), 1).is_err());
    }
}
