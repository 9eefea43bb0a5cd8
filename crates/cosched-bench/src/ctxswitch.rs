//! The cost of a process context switch, `α_c` (Strazdins & Uhlmann, ANU
//! TR-CS-04-01): a worker process runs `y` times a short compute loop followed
//! by `sched_yield`. Alone on its CPU a yield returns at once; with two copies
//! pinned to the same CPU every yield switches to the other copy. With `t_1`
//! the time of one copy alone and `t_2` the time of the pair,
//! `α_c = (t_2 - 2 t_1) / (2y)`: the extra time per switch, including the
//! cache and TLB refills the switch causes.
//!
//! Times are the workers' CPU time (user + system, exact to the nanosecond):
//! on an idle CPU it equals the wall time, and when other processes share the
//! CPU it leaves their run time out, which the wall time would charge to the
//! switches. The wall-clock figures are reported too.
//!
//! The workers are separate processes (the paper measures process switches):
//! the caller supplies a command that runs [`worker_main`] with the JSON spec
//! appended as the last argument (the `cosched` binary re-executes itself).

use crate::os;
use crate::stats::Estimate;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What to measure.
#[derive(Debug, Clone)]
pub struct CtxSwitchConfig {
    /// Compute-then-yield rounds of each worker (`y`).
    pub yields: u64,
    /// Compute time before each yield, in nanoseconds (calibrated into a number of iterations).
    pub work_ns: u64,
    /// Alone/pair measurements, interleaved.
    pub repeats: usize,
    /// The CPU all workers are pinned to.
    pub cpu: usize,
}

/// The measurement: `t_1`, `t_2` and `α_c` over the repeats (seconds).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtxSwitchResult {
    pub yields: u64,
    pub work_ns: u64,
    pub repeats: usize,
    /// CPU time of one worker alone.
    pub t1_s: Estimate,
    /// CPU time of two workers together on one CPU (sum of both).
    pub t2_s: Estimate,
    /// `(t_2 - 2 t_1) / (2y)`, computed per repeat from that repeat's pair.
    pub alpha_c_s: Estimate,
    /// Context switches (voluntary + involuntary) of both workers of a pair per yield: about 1 if every yield switched.
    pub switches_per_yield: f64,
    pub cpu: usize,
    /// Context switches per yield of a worker alone: about 0.
    pub switches_per_yield_alone: f64,
    /// Compute-loop iterations per yield, calibrated to `work_ns`.
    pub work_iters: u64,
    /// Wall-clock time of one worker alone.
    pub t1_wall_s: Estimate,
    /// Wall-clock time of the pair, from the first start to the last finish.
    pub t2_wall_s: Estimate,
    /// `α_c` from the wall-clock times.
    pub alpha_c_wall_s: Estimate,
}

/// `α_c = (t_2 - 2 t_1) / (2y)`: both copies yield `y` times and every yield
/// switches, so the pair makes `2y` switches more than two lone runs.
pub fn alpha_c_s(t1_s: f64, t2_s: f64, yields: u64) -> f64 {
    (t2_s - 2.0 * t1_s) / (2.0 * yields as f64)
}

/// `iters` steps of a 64-bit linear congruential generator: a dependent chain
/// of arithmetic in registers that the optimiser can neither vectorise nor
/// skip, because the result is observed through `black_box`.
pub fn work(iters: u64, seed: u64) -> u64 {
    let mut x = std::hint::black_box(seed);
    for _ in 0..std::hint::black_box(iters) {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        x ^= x >> 29;
    }
    std::hint::black_box(x)
}

/// What one worker process does: sent as JSON on its command line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub yields: u64,
    pub work_iters: u64,
    pub cpu: usize,
}

/// What one worker measured of its own loop, printed as one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// CLOCK_MONOTONIC at the start and end of the loop (comparable across processes).
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPU time of the loop (user + system).
    pub cpu_ns: u64,
    /// Context switches during the loop.
    pub switches: u64,
}

/// The worker process: pin to the CPU, print `ready`, wait for a line on
/// stdin (so that the two copies of a pair start together), run the loop and
/// print a [`WorkerReport`].
pub fn worker_main(spec_json: &str) -> Result<(), String> {
    let spec: WorkerSpec = serde_json::from_str(spec_json).map_err(|e| format!("worker spec: {e}"))?;
    os::pin_current_thread(spec.cpu)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready").and_then(|_| stdout.flush()).map_err(|e| e.to_string())?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).map_err(|e| e.to_string())?;
    let report = yield_loop(&spec)?;
    let line = serde_json::to_string(&report).map_err(|e| e.to_string())?;
    writeln!(stdout, "{line}").and_then(|_| stdout.flush()).map_err(|e| e.to_string())
}

fn yield_loop(spec: &WorkerSpec) -> Result<WorkerReport, String> {
    let switches_before = os::context_switches()?;
    let cpu_before_ns = os::process_cpu_ns();
    let start_ns = os::monotonic_ns();
    let mut state = start_ns;
    for _ in 0..spec.yields {
        state = work(spec.work_iters, state);
        std::thread::yield_now();
    }
    let end_ns = os::monotonic_ns();
    let cpu_ns = os::process_cpu_ns() - cpu_before_ns;
    std::hint::black_box(state);
    Ok(WorkerReport { start_ns, end_ns, cpu_ns, switches: os::context_switches()? - switches_before })
}

/// Iterations of [`work`] that take `work_ns` on `cpu`, timed on a thread
/// pinned there (the best of a few runs, so that an interruption does not count).
pub fn calibrate_work_iters(work_ns: u64, cpu: usize) -> Result<u64, String> {
    if work_ns == 0 {
        return Ok(0);
    }
    const PROBE_ITERS: u64 = 1 << 20;
    let ns_per_iter = std::thread::scope(|s| {
        s.spawn(|| -> Result<f64, String> {
            os::pin_current_thread(cpu)?;
            let best_ns = (0..5)
                .map(|i| {
                    let start_ns = os::thread_cpu_ns();
                    work(PROBE_ITERS, i);
                    os::thread_cpu_ns() - start_ns
                })
                .min()
                .unwrap_or(1);
            Ok(best_ns as f64 / PROBE_ITERS as f64)
        })
        .join()
        .map_err(|_| "calibration thread panicked".to_string())?
    })?;
    Ok(((work_ns as f64 / ns_per_iter).round() as u64).max(1))
}

/// A started worker, killed if dropped before it reported.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn spawn(make_command: &dyn Fn() -> Command, spec: &WorkerSpec) -> Result<Worker, String> {
        let spec_json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        let mut command = make_command();
        command.arg(spec_json).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = command.spawn().map_err(|e| format!("starting the worker: {e}"))?;
        let stdin = child.stdin.take().ok_or("no worker stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no worker stdout")?);
        let mut worker = Worker { child, stdin, stdout };
        let line = worker.read_line()?;
        if line.trim() != "ready" {
            return Err(format!("worker said {line:?} instead of ready"));
        }
        Ok(worker)
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the worker exited early (see its message above)".to_string()),
            Ok(_) => Ok(line),
            Err(e) => Err(format!("reading from the worker: {e}")),
        }
    }

    fn go(&mut self) -> Result<(), String> {
        writeln!(self.stdin, "go").and_then(|_| self.stdin.flush()).map_err(|e| format!("starting the worker: {e}"))
    }

    fn finish(mut self) -> Result<WorkerReport, String> {
        let line = self.read_line()?;
        let report = serde_json::from_str(&line).map_err(|e| format!("worker report {line:?}: {e}"))?;
        self.child.wait().map_err(|e| e.to_string())?;
        Ok(report)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Reaped already when it finished normally; otherwise do not leave it spinning.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run `copies` workers at once: all are started and pinned before any begins its loop.
fn run_together(
    make_command: &dyn Fn() -> Command,
    spec: &WorkerSpec,
    copies: usize,
) -> Result<Vec<WorkerReport>, String> {
    let mut workers = (0..copies).map(|_| Worker::spawn(make_command, spec)).collect::<Result<Vec<_>, _>>()?;
    for worker in &mut workers {
        worker.go()?;
    }
    workers.into_iter().map(Worker::finish).collect()
}

/// One repeat: a worker alone and a pair, in seconds and switch counts.
#[derive(Debug, Clone, Copy)]
struct Repeat {
    t1_s: f64,
    t2_s: f64,
    t1_wall_s: f64,
    t2_wall_s: f64,
    switches_alone: u64,
    switches_pair: u64,
}

fn span_wall_s(reports: &[WorkerReport]) -> f64 {
    let start_ns = reports.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let end_ns = reports.iter().map(|r| r.end_ns).max().unwrap_or(0);
    end_ns.saturating_sub(start_ns) as f64 * 1e-9
}

fn cpu_s(reports: &[WorkerReport]) -> f64 {
    reports.iter().map(|r| r.cpu_ns).sum::<u64>() as f64 * 1e-9
}

fn switches(reports: &[WorkerReport]) -> u64 {
    reports.iter().map(|r| r.switches).sum()
}

/// Alone then pair, or pair then alone on odd repeats, so that a slow drift
/// of the machine's speed does not bias `t_2 - 2 t_1` one way.
fn one_repeat(make_command: &dyn Fn() -> Command, spec: &WorkerSpec, index: usize) -> Result<Repeat, String> {
    let (alone, pair) = if index & 1 == 0 {
        let alone = run_together(make_command, spec, 1)?;
        (alone, run_together(make_command, spec, 2)?)
    } else {
        let pair = run_together(make_command, spec, 2)?;
        (run_together(make_command, spec, 1)?, pair)
    };
    Ok(Repeat {
        t1_s: cpu_s(&alone),
        t2_s: cpu_s(&pair),
        t1_wall_s: span_wall_s(&alone),
        t2_wall_s: span_wall_s(&pair),
        switches_alone: switches(&alone),
        switches_pair: switches(&pair),
    })
}

fn estimate(samples: &[f64]) -> Result<Estimate, String> {
    Estimate::of(samples).ok_or_else(|| "no repeats".to_string())
}

/// Measure `α_c` on `config.cpu`; `make_command` builds the command that runs [`worker_main`].
pub fn measure(config: &CtxSwitchConfig, make_command: &dyn Fn() -> Command) -> Result<CtxSwitchResult, String> {
    if config.repeats == 0 || config.yields == 0 {
        return Err("--repeat and --yields must be at least 1".to_string());
    }
    if !os::allowed_cpus()?.contains(&config.cpu) {
        return Err(format!("CPU {} is not available to this process", config.cpu));
    }
    let work_iters = calibrate_work_iters(config.work_ns, config.cpu)?;
    let spec = WorkerSpec { yields: config.yields, work_iters, cpu: config.cpu };
    let repeats = (0..config.repeats).map(|i| one_repeat(make_command, &spec, i)).collect::<Result<Vec<_>, _>>()?;
    summarise(config, work_iters, &repeats)
}

fn summarise(config: &CtxSwitchConfig, work_iters: u64, repeats: &[Repeat]) -> Result<CtxSwitchResult, String> {
    let y = config.yields;
    let column = |f: fn(&Repeat) -> f64| repeats.iter().map(f).collect::<Vec<f64>>();
    let alpha: Vec<f64> = repeats.iter().map(|r| alpha_c_s(r.t1_s, r.t2_s, y)).collect();
    let alpha_wall: Vec<f64> = repeats.iter().map(|r| alpha_c_s(r.t1_wall_s, r.t2_wall_s, y)).collect();
    let total_yields = (repeats.len() as u64 * y) as f64;
    Ok(CtxSwitchResult {
        yields: y,
        work_ns: config.work_ns,
        repeats: repeats.len(),
        t1_s: estimate(&column(|r| r.t1_s))?,
        t2_s: estimate(&column(|r| r.t2_s))?,
        alpha_c_s: estimate(&alpha)?,
        switches_per_yield: repeats.iter().map(|r| r.switches_pair).sum::<u64>() as f64 / (2.0 * total_yields),
        cpu: config.cpu,
        switches_per_yield_alone: repeats.iter().map(|r| r.switches_alone).sum::<u64>() as f64 / total_yields,
        work_iters,
        t1_wall_s: estimate(&column(|r| r.t1_wall_s))?,
        t2_wall_s: estimate(&column(|r| r.t2_wall_s))?,
        alpha_c_wall_s: estimate(&alpha_wall)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_c_by_hand() {
        // 1000 yields; alone 10 ms, pair 24 ms: 4 ms more over 2000 switches = 2 us each.
        assert!((alpha_c_s(0.010, 0.024, 1000) - 2e-6).abs() < 1e-15);
        // No extra time, no switch cost.
        assert_eq!(alpha_c_s(0.5, 1.0, 7), 0.0);
    }

    #[test]
    fn summary_computes_alpha_per_repeat() {
        let config = CtxSwitchConfig { yields: 1000, work_ns: 1000, repeats: 2, cpu: 0 };
        let repeat = |t1_s: f64, t2_s: f64| Repeat {
            t1_s,
            t2_s,
            t1_wall_s: t1_s,
            t2_wall_s: t2_s + 0.002,
            switches_alone: 10,
            switches_pair: 2000,
        };
        // Per repeat: (0.024 - 0.020) / 2000 = 2 us and (0.030 - 0.022) / 2000 = 4 us; mean 3 us, se 1 us.
        let result = summarise(&config, 42, &[repeat(0.010, 0.024), repeat(0.011, 0.030)]).unwrap();
        assert!((result.alpha_c_s.mean - 3e-6).abs() < 1e-15);
        assert!((result.alpha_c_s.std_error - 1e-6).abs() < 1e-15);
        assert!((result.alpha_c_wall_s.mean - 4e-6).abs() < 1e-15);
        assert_eq!(result.switches_per_yield, 1.0);
        assert_eq!(result.switches_per_yield_alone, 0.01);
        assert_eq!((result.work_iters, result.repeats), (42, 2));
    }

    #[test]
    fn work_depends_on_its_inputs() {
        assert_ne!(work(10, 1), work(11, 1));
        assert_ne!(work(10, 1), work(10, 2));
        assert_eq!(work(0, 5), 5);
    }
}
