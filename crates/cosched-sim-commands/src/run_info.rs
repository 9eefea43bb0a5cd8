//! What a run cost: wall seconds, events per second, peak memory and the version, written beside its results
//! (`run.json`) rather than in them, so that the results of a seed stay byte-identical from run to run.

use cosched_sim::run::RunResult;
use serde::Serialize;

/// This process's peak resident set, KiB (VmHWM).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Serialize)]
struct RunInfo<'a> {
    cosched_version: &'static str,
    cores: usize,
    /// The whole command's peak resident memory (its runs share the process).
    peak_memory_mib: Option<f64>,
    runs: Vec<OneRun<'a>>,
}

#[derive(Serialize)]
struct OneRun<'a> {
    scheme: &'a str,
    wall_s: f64,
    events: u64,
    events_per_s: f64,
    simulated_s: f64,
}

/// `run.json` for runs that took `wall_s` each (the runs went in parallel on `cores`).
pub fn run_json(results: &[RunResult], wall_s: &[f64]) -> String {
    let runs = results
        .iter()
        .zip(wall_s)
        .map(|(r, &wall_s)| OneRun {
            scheme: &r.summary.scheme,
            wall_s,
            events: r.summary.events,
            events_per_s: if wall_s > 0.0 { r.summary.events as f64 / wall_s } else { 0.0 },
            simulated_s: r.summary.span_s,
        })
        .collect();
    let info = RunInfo {
        cosched_version: env!("CARGO_PKG_VERSION"),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        peak_memory_mib: peak_rss_kib().map(|kib| kib as f64 / 1024.0),
        runs,
    };
    serde_json::to_string_pretty(&info).expect("plain data serializes") + "\n"
}
