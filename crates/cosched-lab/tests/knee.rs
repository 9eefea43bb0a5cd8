//! E1's knee rule, checked on machines whose capacity is known exactly: GS
//! with one row and no switch runs one job at a time, so jobs of `tasks` of
//! 32 CPUs (more than half) give a capacity of exactly `tasks / 32`. The
//! climb of offered load is E1's; arrivals are Poisson, every job the same.

use cosched_core::SimTime;
use cosched_lab::study::{curve, RunRow, KNEE_RESPONSE_FACTOR};
use cosched_sim::run::{run, RunOptions};
use cosched_sim::{Program, Prologue, Scheme, SimConfig, SimJob};

const CPUS: u32 = 32;
const JOBS: u64 = 200;
const ITERATIONS: u32 = 20;
const COMPUTE_NS: u64 = 2_000_000;

fn ideal_machine(seed: u64) -> SimConfig {
    let mut cfg = SimConfig { scheme: Scheme::GANG, nodes: CPUS, mpl: 1, skew: 0.0, seed, ..SimConfig::default() };
    cfg.costs.gang_switch_every_quantum = false;
    cfg
}

/// A job's time alone on the machine, measured: it depends on the message model, not only on its compute.
fn dedicated_ns(tasks: u32) -> f64 {
    let result = run(&ideal_machine(1), vec![job(1, 0, tasks)], &RunOptions::default(), |_| {}).unwrap();
    result.jobs[0].finish_s * 1e9
}

fn job(number: u64, arrival_ns: u64, tasks: u32) -> SimJob {
    SimJob {
        job_number: number,
        arrival: SimTime(arrival_ns),
        tasks,
        cpus: tasks,
        program: Program {
            compute_ns: COMPUTE_NS,
            io_ns: 0,
            iterations: ITERATIONS,
            message_bytes: 4096,
            prologue: Prologue::NONE,
            working_set_bytes: 0,
            rounds: cosched_sim::Rounds::NONE,
            reads_cpu_clock: false,
            barrier: false,
        },
        label: format!("job{number}"),
        nice: 0,
        requested_ns: None,
    }
}

/// Poisson arrivals at `load` of the machine: exponential gaps from a fixed generator (splitmix64).
fn arrivals(tasks: u32, load: f64, seed: u64) -> Vec<SimJob> {
    let mean_gap_ns = f64::from(tasks) * dedicated_ns(tasks) / (f64::from(CPUS) * load);
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut at_ns = 0.0;
    (1..=JOBS)
        .map(|k| {
            at_ns += -mean_gap_ns * (1.0 - uniform()).ln();
            job(k, at_ns as u64, tasks)
        })
        .collect()
}

/// E1's rows for one machine: each load of the climb, three seeds.
fn climb(tasks: u32) -> Vec<RunRow> {
    let loads = (1..=12).map(|k| f64::from(k) / 10.0);
    loads
        .flat_map(|load| (0..3u32).map(move |replication| (load, replication)))
        .map(|(load, replication)| {
            let seed = 1 + u64::from(replication);
            let result =
                run(&ideal_machine(seed), arrivals(tasks, load, seed), &RunOptions::default(), |_| {}).unwrap();
            let s = result.summary;
            RunRow {
                group: format!("load {load}"),
                variant: String::new(),
                scheme: "GS".into(),
                mix: "ideal".into(),
                load,
                replication,
                seed,
                mpl: 1,
                skew: 0.0,
                offered_load: load,
                jobs: s.jobs_submitted,
                completed: s.jobs_completed,
                delivered_utilization: s.delivered_utilization_during_arrivals,
                compute_utilization: s.compute_utilization_during_arrivals,
                delivered_utilization_second_half: s.delivered_utilization_second_half,
                compute_utilization_second_half: s.compute_utilization_second_half,
                mean_response_s: s.mean_response_s,
                mean_wait_s: s.mean_wait_s,
                mean_execution_s: s.mean_execution_s,
                mean_slowdown: s.mean_slowdown,
                peak_processes_per_cpu: s.peak_processes_per_cpu,
                saturation: s.saturation,
            }
        })
        .collect()
}

fn knee(tasks: u32) -> f64 {
    let rows = climb(tasks);
    let gs = curve(&rows, "GS");
    gs.knee_utilization.unwrap_or_else(|| {
        panic!("no knee at {KNEE_RESPONSE_FACTOR}x the lightest response; stopped at {:?}", gs.first_saturated)
    })
}

#[test]
fn the_knee_falls_just_below_a_known_capacity_and_keeps_a_known_ratio() {
    let (full, part) = (knee(CPUS), knee(17));
    let known_part = 17.0 / 32.0;
    assert!((0.8..=1.0).contains(&full), "knee {full} on a machine of capacity 1");
    assert!((0.8 * known_part..=known_part).contains(&part), "knee {part} on a machine of capacity {known_part}");
    let ratio = part / full;
    assert!((ratio / known_part - 1.0).abs() < 0.1, "knee ratio {ratio}, capacity ratio {known_part}");
}
