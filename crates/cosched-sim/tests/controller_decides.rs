//! Under GS-cosched and GS-cosched-kernel the controller's core decides (admission, placement, rows, the idle
//! rule, time limits, history), with the simulated nodes as its agents. On workloads drawn at random, where no
//! job sleeps long enough for the idle rule, its decisions must be those of the plan's model alone, to the byte,
//! in exact and in fast mode; and the runs must replay.

mod common;

use common::job;
use cosched_core::{Rng, StreamSeed};
use cosched_sim::engine::fast::FastSettings;
use cosched_sim::run::{run, RunOptions, RunResult};
use cosched_sim::{OsScheduler, Scheme, SimConfig, SimJob};

const MS: u64 = 1_000_000;

/// A machine and a workload drawn from `seed`: 1–6 nodes of 1–4 CPUs, 1–4 rows, 6–30 jobs of up to the whole
/// machine, arriving in bursts, with compute, I/O, barriers and skew.
fn drawn(seed: u64, scheme: Scheme) -> (SimConfig, Vec<SimJob>) {
    let mut rng = StreamSeed(seed).stream("controller-decides");
    let cfg = SimConfig {
        scheme,
        nodes: 1 + rng.below(6),
        cpus_per_node: 1 + rng.below(4),
        mpl: 1 + rng.below(4),
        skew: if rng.bernoulli(0.5) { 0.0 } else { 0.3 * rng.uniform() },
        seed,
        ..SimConfig::default()
    };
    // The kernel's gang slots run over EEVDF.
    let cfg = match scheme == Scheme::COSCHED_GANG_KERNEL {
        true => SimConfig { node_scheduler: OsScheduler::Eevdf, ..cfg },
        false => cfg,
    };
    let cpus = cfg.nodes * cfg.cpus_per_node;
    let mut arrival_ns = 0;
    let jobs = (0..6 + rng.below(25))
        .map(|i| {
            arrival_ns += if rng.bernoulli(0.3) { 0 } else { (rng.exponential(80.0) * MS as f64) as u64 };
            let tasks = 1 + rng.below(cpus);
            let compute_ns = (50 + u64::from(rng.below(2_000))) * 1_000;
            let io_ns = if rng.bernoulli(0.3) { u64::from(rng.below(500)) * 1_000 } else { 0 };
            let mut drawn = job(i as u64 + 1, arrival_ns, tasks, compute_ns, io_ns, 20 + rng.below(400));
            drawn.program.barrier = rng.bernoulli(0.2);
            drawn
        })
        .collect();
    (cfg, jobs)
}

fn simulate(cfg: &SimConfig, jobs: &[SimJob], fast: bool, plan_model_only: bool) -> RunResult {
    let fast = fast.then(FastSettings::default);
    let options = RunOptions { record_trace: true, fast, plan_model_only, ..RunOptions::default() };
    run(cfg, jobs.to_vec(), &options, |_| {}).expect("a valid drawn workload")
}

/// What must agree: every job's life, every CPU's time, every traced event.
fn outcome(result: &RunResult) -> String {
    let trace: Vec<String> = result.trace.iter().map(|e| format!("{} {} {:?}", e.time_ns, e.cpu, e.kind)).collect();
    format!(
        "{}\n{}\n{}",
        serde_json::to_string(&result.jobs).unwrap(),
        serde_json::to_string(&result.per_cpu_time).unwrap(),
        trace.join("\n")
    )
}

#[test]
fn on_drawn_workloads_the_controller_decides_as_the_plan_does() {
    let first_seed = Rng::from_state(0x5eed, 53).next_u64() % 1_000_000;
    let mut compared = 0;
    for seed in first_seed..first_seed + 24 {
        for scheme in [Scheme::COSCHED_GANG, Scheme::COSCHED_GANG_KERNEL] {
            let (cfg, jobs) = drawn(seed, scheme);
            // Fast mode is validated for the gang cell only (`run::check_fast_mode_validated`).
            let fast = scheme == Scheme::COSCHED_GANG && seed % 3 == 0;
            let controller = simulate(&cfg, &jobs, fast, false);
            let model = simulate(&cfg, &jobs, fast, true);
            assert_eq!(controller.jobs.len(), jobs.len(), "seed {seed} {scheme:?}: every job ran");
            let (a, b) = (outcome(&controller), outcome(&model));
            if a != b {
                let line = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
                panic!(
                    "seed {seed}, {} (fast {fast}), {} nodes x {} CPUs, {} rows: the controller decided otherwise \
                     than the plan, first at output line {line}:\ncontroller: {}\nmodel:      {}",
                    scheme.name(),
                    cfg.nodes,
                    cfg.cpus_per_node,
                    cfg.mpl,
                    a.lines().nth(line).unwrap_or(""),
                    b.lines().nth(line).unwrap_or("")
                );
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 48);
}

#[test]
fn a_run_the_controller_decides_replays_to_the_byte() {
    let (cfg, jobs) = drawn(7, Scheme::COSCHED_GANG);
    let runs: Vec<String> = (0..2).map(|_| outcome(&simulate(&cfg, &jobs, false, false))).collect();
    assert_eq!(runs[0], runs[1]);
}

/// A job that sleeps longer than the idle rule's ten minutes is taken out of the matrix by the controller, as the
/// daemon would, at once if another job waits for its row; the simulated nodes do not model a job running outside
/// the matrix, and the run says so. (A sleeping process that still holds its CPU in the engine's books reports no
/// CPU time for its sleep.)
#[test]
fn a_job_the_idle_rule_would_take_out_of_the_matrix_is_named() {
    let cfg = SimConfig { scheme: Scheme::COSCHED_GANG, nodes: 1, cpus_per_node: 2, mpl: 1, ..SimConfig::default() };
    for waiting in [false, true] {
        let mut jobs = vec![job(1, 0, 2, MS, 700_000 * MS, 2)];
        if waiting {
            jobs.push(job(2, MS, 2, MS, 0, 2));
        }
        let outcome = std::panic::catch_unwind(|| simulate(&cfg, &jobs, false, false));
        let message = outcome.err().and_then(|e| e.downcast_ref::<String>().cloned()).expect("the run stops");
        assert!(message.contains("jobs [1] used no CPU for the idle rule's 600 s"), "{message}");
    }
}
