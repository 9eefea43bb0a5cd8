//! `cosched bench partition`: what one long run would gain if its nodes were split across threads. It runs the
//! `full` scenario of `bench sim` at several sizes, times the sequential engine, records where every event took
//! place, and counts the rounds a conservative partition with the network's latency as lookahead would need
//! (`cosched_sim::partition`); it measures what a two-thread barrier costs on this machine; and it predicts the
//! speed-up from the three. Nothing is built in parallel: the prediction says whether it would pay.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use crate::bench::run_after_warm_up;
use clap::Args;
use cosched_sim::partition::{partition_rounds, PartitionRounds};
use cosched_sim::run::{run as run_sim, RunOptions};
use cosched_sim::Scheme;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Simulated seconds before the timing starts: the machine fills to its MPL.
const WARM_UP_S: f64 = 3.0;

#[derive(Args, Debug)]
pub struct BenchPartitionArgs {
    /// Machine sizes (one-CPU nodes).
    #[arg(long, value_delimiter = ',', default_values_t = [128u32, 1024, 4096])]
    pub nodes: Vec<u32>,
    /// Schemes: Local (only messages couple nodes), GS (a gang quantum acts on every node), PB-SB.
    #[arg(long, value_delimiter = ',', default_values = ["Local", "GS", "PB-SB"])]
    pub schemes: Vec<Scheme>,
    /// Threads the nodes are split across.
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
    /// Simulated seconds timed and logged after the warm-up.
    #[arg(long, default_value_t = 2.0)]
    pub timed_s: f64,
    /// The lookahead, µs (default: the engine's one-way message latency, the earliest a node can act on
    /// another).
    #[arg(long)]
    pub lookahead_us: Option<f64>,
    /// Barrier measurements (each of 200,000 rounds); min, median and max are reported.
    #[arg(long, default_value_t = 5)]
    pub barrier_repeat: u32,
    /// Also print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct PartitionPoint {
    scheme: String,
    nodes: u32,
    ns_per_event: f64,
    rounds: PartitionRounds,
    rounds_per_simulated_s: f64,
    speedup_bound: f64,
    speedup_at_median_barrier: f64,
}

#[derive(Serialize)]
struct PartitionReport {
    barrier_ns: Spread,
    points: Vec<PartitionPoint>,
}

#[derive(Serialize, Clone, Copy)]
struct Spread {
    min: f64,
    median: f64,
    max: f64,
}

pub fn run(args: &BenchPartitionArgs) -> Result<(), String> {
    if args.threads < 2 || args.nodes.iter().any(|&n| n < args.threads) || args.barrier_repeat == 0 {
        return Err(
            "--threads must be at least 2, every --nodes at least --threads, --barrier-repeat at least 1".into()
        );
    }
    if !(args.timed_s > 0.0 && args.timed_s <= 60.0) {
        return Err("--timed-s must be above 0 and at most 60 simulated seconds".into());
    }
    if args.lookahead_us.is_some_and(|us| !(us > 0.0 && us <= 1e9)) {
        return Err("--lookahead-us must be above 0 (and at most 1e9)".into());
    }
    let barrier = measure_barrier(args.threads, args.barrier_repeat);
    eprintln!(
        "barrier of {} spinning threads: {:.0} / {:.0} / {:.0} ns per round (min / median / max of {})",
        args.threads, barrier.min, barrier.median, barrier.max, args.barrier_repeat
    );
    let mut points = Vec::new();
    for &scheme in &args.schemes {
        for &nodes in &args.nodes {
            let point = measure_point(args, scheme, nodes, barrier.median)?;
            print_point(&point, points.is_empty());
            points.push(point);
        }
    }
    if args.json {
        let report = PartitionReport { barrier_ns: barrier, points };
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    }
    Ok(())
}

fn measure_point(
    args: &BenchPartitionArgs,
    scheme: Scheme,
    nodes: u32,
    barrier_ns: f64,
) -> Result<PartitionPoint, String> {
    let horizon_s = WARM_UP_S + args.timed_s;
    let (cfg, jobs) = crate::bench_scaling::saturated_machine(scheme, nodes, horizon_s)?;
    eprintln!("{} on {nodes} nodes: timing the sequential run...", scheme.name());
    let ns_per_event = sequential_ns_per_event(&cfg, jobs.clone())?;
    eprintln!("{} on {nodes} nodes: logging where each event takes place...", scheme.name());
    let warm_up_ns = (WARM_UP_S * 1e9) as u64;
    let options = RunOptions { event_log_from_ns: Some(warm_up_ns), ..RunOptions::default() };
    let logged = run_sim(&cfg, jobs, &options, |_| {}).map_err(|e| e.to_string())?;
    let lookahead_ns = match args.lookahead_us {
        Some(us) => (us * 1e3) as u64,
        None => cfg.network.latency_ns(cfg.network.message_bytes),
    };
    let rounds = partition_rounds(&logged.event_log, nodes, args.threads, lookahead_ns);
    Ok(PartitionPoint {
        scheme: scheme.name().to_string(),
        nodes,
        ns_per_event,
        rounds,
        rounds_per_simulated_s: rounds.rounds as f64 / args.timed_s,
        speedup_bound: rounds.speedup(ns_per_event, 0.0),
        speedup_at_median_barrier: rounds.speedup(ns_per_event, barrier_ns),
    })
}

/// Wall time per event of the exact engine after the warm-up, without the log.
fn sequential_ns_per_event(cfg: &cosched_sim::SimConfig, jobs: Vec<cosched_sim::SimJob>) -> Result<f64, String> {
    // Often enough for a small machine to report past its warm-up.
    let options = RunOptions { progress_every_events: 1 << 10, ..RunOptions::default() };
    let timed = run_after_warm_up(cfg, jobs, &options, WARM_UP_S)?;
    Ok(timed.wall_s * 1e9 / timed.events.max(1) as f64)
}

fn print_point(p: &PartitionPoint, header: bool) {
    if header {
        println!(
            "{:<7} {:>6} {:>10} {:>8} {:>12} {:>10} {:>9} {:>10} {:>11} {:>11}",
            "scheme",
            "nodes",
            "events",
            "whole %",
            "rounds/sim s",
            "ev/round",
            "ns/event",
            "critical %",
            "bound",
            "predicted"
        );
    }
    let r = &p.rounds;
    println!(
        "{:<7} {:>6} {:>10} {:>8.2} {:>12.0} {:>10.2} {:>9.1} {:>10.1} {:>10.2}x {:>10.2}x",
        p.scheme,
        p.nodes,
        r.events,
        100.0 * r.whole_machine_events as f64 / r.events.max(1) as f64,
        p.rounds_per_simulated_s,
        r.events_per_round(),
        p.ns_per_event,
        100.0 * r.critical_events as f64 / r.events.max(1) as f64,
        p.speedup_bound,
        p.speedup_at_median_barrier
    );
}

/// Wall time of one round of a barrier among `threads` spinning threads (each adds one to a shared count and
/// waits until every thread has), as min, median and max of `repeat` measurements of 200,000 rounds.
fn measure_barrier(threads: u32, repeat: u32) -> Spread {
    const ROUNDS: u64 = 200_000;
    let mut per_round: Vec<f64> = (0..repeat)
        .map(|_| {
            let arrived = AtomicU64::new(0);
            let start = Instant::now();
            std::thread::scope(|scope| {
                for _ in 1..threads {
                    scope.spawn(|| barrier_rounds(&arrived, threads as u64, ROUNDS));
                }
                barrier_rounds(&arrived, threads as u64, ROUNDS);
            });
            start.elapsed().as_secs_f64() * 1e9 / ROUNDS as f64
        })
        .collect();
    per_round.sort_by(f64::total_cmp);
    Spread { min: per_round[0], median: per_round[per_round.len() / 2], max: per_round[per_round.len() - 1] }
}

fn barrier_rounds(arrived: &AtomicU64, threads: u64, rounds: u64) {
    for round in 1..=rounds {
        arrived.fetch_add(1, Ordering::AcqRel);
        while arrived.load(Ordering::Acquire) < threads * round {
            std::hint::spin_loop();
        }
    }
}
