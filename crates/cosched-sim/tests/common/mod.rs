#![allow(dead_code)]
//! Builders for hand-made scenarios.

use cosched_core::SimTime;
use cosched_sim::run::{run, RunOptions, RunResult};
use cosched_sim::trace::{TraceEvent, TraceKind};
use cosched_sim::{Program, Prologue, Scheme, SimConfig, SimJob};

pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;
pub const L: u64 = 185_480; // default latency of a 4096-byte message
pub const O: u64 = 10 * US; // interface time per message
pub const CS: u64 = 200 * US;

pub fn config(scheme: Scheme, nodes: u32, mpl: u32) -> SimConfig {
    SimConfig { scheme, nodes, mpl, skew: 0.0, ..SimConfig::default() }
}

pub fn job(number: u64, arrival_ns: u64, tasks: u32, compute_ns: u64, io_ns: u64, iterations: u32) -> SimJob {
    SimJob {
        job_number: number,
        arrival: SimTime(arrival_ns),
        tasks,
        cpus: tasks,
        program: Program {
            compute_ns,
            io_ns,
            iterations,
            message_bytes: 4096,
            prologue: Prologue::NONE,
            working_set_bytes: 0,
            rounds: cosched_sim::Rounds::NONE,
            reads_cpu_clock: false,
            barrier: false,
        },
        label: format!("test{number}"),
        nice: 0,
        requested_ns: None,
    }
}

pub fn simulate(cfg: &SimConfig, jobs: Vec<SimJob>) -> RunResult {
    let options = RunOptions { record_trace: true, ..RunOptions::default() };
    let result = run(cfg, jobs, &options, |_| {}).expect("valid scenario");
    let span_ns = (result.summary.span_s * 1e9).round() as u64;
    for (cpu, time) in result.per_cpu_time.iter().enumerate() {
        assert_eq!(time.total_ns(), span_ns, "CPU {cpu}: time must add up to the span");
    }
    result
}

pub fn ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}

/// The trace events matching `keep`, as (time, cpu, kind).
pub fn events(result: &RunResult, keep: impl Fn(&TraceKind) -> bool) -> Vec<(u64, u32, TraceKind)> {
    result.trace.iter().filter(|e: &&TraceEvent| keep(&e.kind)).map(|e| (e.time_ns, e.cpu, e.kind)).collect()
}

pub fn finish_ns(result: &RunResult, job_number: u64) -> u64 {
    ns(result.jobs.iter().find(|r| r.job_number == job_number).expect("job ran").finish_s)
}

pub fn start_ns(result: &RunResult, job_number: u64) -> u64 {
    ns(result.jobs.iter().find(|r| r.job_number == job_number).expect("job ran").start_s)
}
