//! `cosched bench sim`: how fast the simulator runs, on a fixed scenario.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use crate::workload_source::{load_workload, WorkloadSpec};
use clap::{Args, Subcommand};
use cosched_core::{EventQueue, SimTime, StreamSeed};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{run as run_sim, RunOptions};
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Simulator speed on a fixed scenario: events/s and simulated node-seconds per wall second.
    ///
    /// Scenario "local-1024": 1024 one-CPU nodes, MPL 4, Local, WL7 with
    /// Lublin-Feitelson sizes drawn for 64 CPUs (so no job is wider than 64),
    /// run times x0.002, offered load 0.9, seed 1, simulated for 20 s.
    /// A baseline measured in the same run (a bare event-queue loop) gives a
    /// machine-independent ratio.
    Sim(BenchSimArgs),
}

#[derive(Args, Debug)]
pub struct BenchSimArgs {
    /// Simulated seconds per scenario.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Repetitions (the best is reported, and the spread).
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Also print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct BenchResult {
    scenario: String,
    scheme: String,
    nodes: u32,
    simulated_s: f64,
    wall_s_best: f64,
    wall_s_worst: f64,
    events: u64,
    events_per_s: f64,
    node_seconds_per_wall_s: f64,
    baseline_queue_ops_per_s: f64,
    events_per_s_over_baseline: f64,
}

pub fn run(cmd: &BenchCommand) -> Result<(), String> {
    match cmd {
        BenchCommand::Sim(args) => bench_sim(args),
    }
}

fn scenario_config(scheme: Scheme, seconds: f64) -> SimConfig {
    SimConfig { scheme, nodes: 1024, mpl: 4, seed: 1, horizon_ns: Some((seconds * 1e9) as u64), ..SimConfig::default() }
}

fn bench_sim(args: &BenchSimArgs) -> Result<(), String> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) || args.repeat == 0 {
        return Err("--seconds must be positive and --repeat at least 1".into());
    }
    let spec = WorkloadSpec {
        trace: None,
        skip_bad_lines: false,
        drop_oversized: false,
        jobs: Some(20_000),
        model_procs: 64,
        runtime_scale: 0.002,
        target_load: Some(0.9),
        seed: 1,
    };
    let loaded = load_workload(&spec, 1024)?;
    let requests = loaded.requests();
    let plan = WorkloadPlan { mix: Mix { number: 7 }, runtime_scale: 1.0 };
    let cfg = scenario_config(Scheme::LOCAL, args.seconds);
    let options = RunOptions { progress_every_events: 0, ..RunOptions::default() };
    let baseline = baseline_queue_ops_per_s();
    let mut walls = Vec::new();
    let mut events = 0;
    let mut by_kind = [0u64; cosched_sim::engine::EVENT_KINDS];
    for round in 0..args.repeat {
        let jobs = sim_jobs(&requests, &plan, &cfg);
        let start = Instant::now();
        let result = run_sim(&cfg, jobs, &options, |_| {}).map_err(|e| e.to_string())?;
        let wall = start.elapsed().as_secs_f64();
        events = result.summary.events;
        by_kind = result.event_counts;
        eprintln!("round {}: {:.2} s wall, {} events", round + 1, wall, events);
        walls.push(wall);
    }
    let best = walls.iter().copied().fold(f64::INFINITY, f64::min);
    let worst = walls.iter().copied().fold(0.0, f64::max);
    let events_per_s = events as f64 / best;
    let result = BenchResult {
        scenario: "local-1024".into(),
        scheme: cfg.scheme.name().into(),
        nodes: cfg.nodes,
        simulated_s: args.seconds,
        wall_s_best: best,
        wall_s_worst: worst,
        events,
        events_per_s,
        node_seconds_per_wall_s: cfg.nodes as f64 * args.seconds / best,
        baseline_queue_ops_per_s: baseline,
        events_per_s_over_baseline: events_per_s / baseline,
    };
    println!(
        "scenario {}: {} on {} nodes, {:.0} simulated s\n  wall {:.2} s (worst {:.2} s of {})\n  {:.2} M events/s, {:.0} simulated node-seconds per wall second\n  baseline (bare event queue): {:.2} M ops/s; simulator / baseline = {:.3}",
        result.scenario,
        result.scheme,
        result.nodes,
        result.simulated_s,
        best,
        worst,
        args.repeat,
        events_per_s / 1e6,
        result.node_seconds_per_wall_s,
        baseline / 1e6,
        result.events_per_s_over_baseline
    );
    let kinds: Vec<String> = cosched_sim::engine::EVENT_KIND_NAMES
        .iter()
        .zip(by_kind)
        .map(|(name, n)| format!("{name} {:.1}%", 100.0 * n as f64 / events.max(1) as f64))
        .collect();
    println!("  events by kind: {}", kinds.join(", "));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// Push/pop throughput of the bare event queue with a simulator-like mix of
/// horizons (about 4,000 pending events), as a yardstick of machine speed.
fn baseline_queue_ops_per_s() -> f64 {
    let mut rng = StreamSeed(99).stream("baseline");
    let mut queue: EventQueue<u32> = EventQueue::new();
    for i in 0..4_096 {
        queue.schedule(SimTime(rng.below(1_000_000) as u64), i);
    }
    let operations = 20_000_000u64;
    let start = Instant::now();
    let mut checksum = 0u64;
    for _ in 0..operations {
        let (now, e) = queue.pop().expect("never empty");
        checksum = checksum.wrapping_add(e as u64);
        queue.schedule(now + 1 + rng.below(2_000_000) as u64, e);
    }
    std::hint::black_box(checksum);
    operations as f64 / start.elapsed().as_secs_f64()
}
