#![allow(dead_code)]
//! Builders for hand-made scenarios, and strategies drawing small runs at random.

use cosched_core::SimTime;
use cosched_sim::run::{run, RunOptions, RunResult};
use cosched_sim::trace::{TraceEvent, TraceKind};
use cosched_sim::{NodeKind, OsScheduler, Program, Prologue, Scheme, SimConfig, SimJob};
use proptest::prelude::*;

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

pub fn jobs_strategy(max_tasks: u32) -> impl Strategy<Value = Vec<SimJob>> {
    // Compute long enough for quanta to expire; I/O sometimes absent.
    let io = prop_oneof![Just(0u64), 0u64..5_000];
    // At least 1 µs of compute: a one-task job with no work has no slowdown
    // (0/0), and NaN equals nothing, not even the same run's.
    let one = (0u64..400, 1..=max_tasks, 1u64..30_000, io, 1u32..8);
    proptest::collection::vec(one, 1..12).prop_map(|specs| {
        let mut arrival = 0;
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (gap_ms, tasks, compute_us, io_us, iterations))| {
                arrival += gap_ms * MS / 10;
                job(i as u64 + 1, arrival, tasks, compute_us * US, io_us * US, iterations)
            })
            .collect()
    })
}

/// A small machine (1–4 nodes of 1–4 CPUs, MPL 1–3) under any scheme and
/// any OS scheduler, with any skew and seed, and the jobs that fit it (at
/// least one).
pub fn small_runs() -> impl Strategy<Value = (SimConfig, Vec<SimJob>)> {
    let machine = (1u32..5, 1u32..5, 1u32..4, 0u32..150, 0usize..Scheme::all_names().len(), 0u64..1_000);
    let node_scheduler = prop_oneof![Just(OsScheduler::Mlfq), Just(OsScheduler::Eevdf)];
    (machine, node_scheduler, jobs_strategy(8))
        .prop_map(|((nodes, cpus_per_node, mpl, skew_pct, scheme_index, seed), node_scheduler, jobs)| {
            let scheme: Scheme = Scheme::all_names()[scheme_index].parse().unwrap();
            // Gang slots over EEVDF run on EEVDF only.
            let node_scheduler = match scheme.node() {
                NodeKind::GangSlotsOverEevdf => OsScheduler::Eevdf,
                _ => node_scheduler,
            };
            let cfg = SimConfig {
                scheme,
                node_scheduler,
                nodes,
                cpus_per_node,
                mpl,
                skew: skew_pct as f64 / 100.0,
                seed,
                ..SimConfig::default()
            };
            let jobs: Vec<SimJob> = jobs.into_iter().filter(|j| j.tasks <= nodes * cpus_per_node).collect();
            (cfg, jobs)
        })
        .prop_filter("no job fits the machine", |(_, jobs)| !jobs.is_empty())
}
