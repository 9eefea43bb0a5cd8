//! `cosched bench scaling`: the exact simulator's speed and peak memory as
//! the machine grows, per scheme family. Each point runs in a child process
//! (`cosched bench scaling-point`), so its peak memory is its own.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use crate::bench::run_after_warm_up;
use clap::Args;
use cosched_lab::workload::{load_workload, WorkloadSpec};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::RunOptions;
use cosched_sim::{Mix, Scheme, SimConfig, SimJob};
use serde::{Deserialize, Serialize};

/// Simulated seconds before the timing starts: the machine fills to its MPL.
const WARM_UP_S: f64 = 3.0;

#[derive(Args, Debug)]
pub struct BenchScalingArgs {
    /// Machine sizes (one-CPU nodes).
    #[arg(long, value_delimiter = ',', default_values_t = [32u32, 64, 128, 256, 512, 1024, 2048, 4096])]
    pub nodes: Vec<u32>,
    /// One scheme per family: MLFQ with busy-waiting (Local), gang cells (GS), spin-block (SB), interrupts
    /// on arrival (DCS), periodic boost every tick (PB-SB).
    #[arg(long, value_delimiter = ',', default_values = ["Local", "GS", "SB", "DCS", "PB-SB"])]
    pub schemes: Vec<Scheme>,
    /// Simulated node-seconds timed per point (the timed span is this over the nodes, at least 1 s).
    #[arg(long, default_value_t = 4096.0)]
    pub node_seconds: f64,
    /// Also print the points as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One point, as the child measures it.
#[derive(Args, Debug)]
pub struct ScalingPointArgs {
    #[arg(long)]
    pub scheme: Scheme,
    #[arg(long)]
    pub nodes: u32,
    #[arg(long)]
    pub timed_s: f64,
}

#[derive(Serialize, Deserialize, Debug)]
struct PointResult {
    wall_s: f64,
    timed_sim_s: f64,
    events: u64,
    peak_rss_kib: u64,
}

#[derive(Serialize, Debug)]
struct ScalingPoint {
    scheme: String,
    nodes: u32,
    timed_s: f64,
    wall_s: f64,
    node_seconds_per_wall_s: f64,
    events_per_node_second: f64,
    /// Events handled per wall second: the engine's speed without the workload's density.
    events_per_wall_s: f64,
    peak_rss_mib: f64,
}

pub fn run(args: &BenchScalingArgs) -> Result<(), String> {
    if args.nodes.contains(&0) || args.node_seconds.is_nan() || args.node_seconds <= 0.0 {
        return Err("--nodes must be positive and --node-seconds above 0".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?;
    let mut points = Vec::new();
    println!(
        "{:<7} {:>6} {:>8} {:>8} {:>17} {:>14} {:>12} {:>9}",
        "scheme", "nodes", "timed s", "wall s", "node-s per wall s", "ev per node-s", "M ev per s", "peak MiB"
    );
    for scheme in &args.schemes {
        for &nodes in &args.nodes {
            let timed_s = (args.node_seconds / nodes as f64).max(1.0);
            let output = std::process::Command::new(&exe)
                .args(["bench", "scaling-point", "--scheme", scheme.name()])
                .args(["--nodes", &nodes.to_string(), "--timed-s", &timed_s.to_string()])
                .stderr(std::process::Stdio::inherit())
                .output()
                .map_err(|e| format!("cannot run a scaling point: {e}"))?;
            if !output.status.success() {
                return Err(format!("the point {} at {nodes} nodes failed ({})", scheme.name(), output.status));
            }
            let point: PointResult = serde_json::from_slice(&output.stdout)
                .map_err(|e| format!("a scaling point printed no result: {e}"))?;
            let result = ScalingPoint {
                scheme: scheme.name().to_string(),
                nodes,
                timed_s: point.timed_sim_s,
                wall_s: point.wall_s,
                node_seconds_per_wall_s: nodes as f64 * point.timed_sim_s / point.wall_s,
                events_per_node_second: point.events as f64 / (nodes as f64 * point.timed_sim_s),
                events_per_wall_s: point.events as f64 / point.wall_s,
                peak_rss_mib: point.peak_rss_kib as f64 / 1024.0,
            };
            println!(
                "{:<7} {:>6} {:>8.1} {:>8.2} {:>17.0} {:>14.0} {:>12.2} {:>9.1}",
                result.scheme,
                nodes,
                result.timed_s,
                result.wall_s,
                result.node_seconds_per_wall_s,
                result.events_per_node_second,
                result.events_per_wall_s / 1e6,
                result.peak_rss_mib
            );
            points.push(result);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&points).map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// The child: a saturated machine (offered load 10, MPL 4, the `full` scenario of `bench sim` at another size),
/// timed after the warm-up; prints one JSON line.
pub fn run_point(args: &ScalingPointArgs) -> Result<(), String> {
    let (cfg, jobs) = saturated_machine(args.scheme, args.nodes, WARM_UP_S + args.timed_s)?;
    // 16 events per node between reports (at least 256, at most 16,384: 4 per node at 4,096 nodes), so that a small
    // machine reports past its warm-up and the timing starts close to the warm-up's end at every size.
    let progress_every_events = (16 * args.nodes as u64).clamp(1 << 8, 1 << 14);
    let options = RunOptions { progress_every_events, ..RunOptions::default() };
    let timed = run_after_warm_up(&cfg, jobs, &options, WARM_UP_S)?;
    let point = PointResult {
        wall_s: timed.wall_s,
        timed_sim_s: timed.timed_sim_s,
        events: timed.events,
        peak_rss_kib: peak_rss_kib().unwrap_or(0),
    };
    println!("{}", serde_json::to_string(&point).map_err(|e| e.to_string())?);
    Ok(())
}

/// The `full` scenario of `bench sim` at `nodes` one-CPU nodes under `scheme`, to `horizon_s`: offered load 10,
/// MPL 4, so every CPU holds four processes once the machine has filled (about 3 simulated seconds).
pub fn saturated_machine(scheme: Scheme, nodes: u32, horizon_s: f64) -> Result<(SimConfig, Vec<SimJob>), String> {
    let spec = WorkloadSpec {
        // Enough jobs to keep the machine full to the horizon at load 10 (jobs last about 3 s at this scale).
        jobs: Some((4.0 * nodes as f64 * horizon_s).ceil() as usize + 1_000),
        model_procs: nodes.min(64),
        runtime_scale: 0.002,
        target_load: Some(10.0),
        seed: 1,
        ..WorkloadSpec::default()
    };
    let loaded = load_workload(&spec, nodes)?;
    let cfg = SimConfig {
        scheme,
        nodes,
        mpl: 4,
        seed: 1,
        horizon_ns: Some((horizon_s * 1e9) as u64),
        ..SimConfig::default()
    };
    let jobs = sim_jobs(&loaded.requests(), &WorkloadPlan { mix: Mix { number: 7 }, runtime_scale: 1.0 }, &cfg);
    Ok((cfg, jobs))
}

pub use cosched_sim_commands::run_info::peak_rss_kib;
