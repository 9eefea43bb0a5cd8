//! The capacity measure E1 rests on (delivered utilization over the second
//! half of an overloaded run's arrivals) recovers capacities known exactly.

mod common;
use common::*;
use cosched_sim::{Scheme, SimConfig, SimJob};

const CPUS: u32 = 32;

/// GS with one row and no switch: a job runs alone in the row, exactly at
/// its dedicated time, and the next starts the instant it ends. With jobs
/// of `tasks` CPUs of 32 and more than half of them, one job runs at a
/// time: the machine's capacity is exactly `tasks / 32`.
fn one_job_at_a_time() -> SimConfig {
    let mut cfg = config(Scheme::GANG, CPUS, 1);
    cfg.costs.gang_switch_every_quantum = false;
    cfg
}

/// `count` jobs of `tasks` CPUs, 20 iterations of 10 ms compute and a message
/// exchange each, arriving four times faster than one at a time is served.
fn overload(tasks: u32, count: u64) -> Vec<SimJob> {
    let iteration_ns = 10 * MS + 2 * O + L;
    let gap_ns = 20 * iteration_ns / 4;
    (0..count).map(|k| job(k + 1, k * gap_ns, tasks, 10 * MS, 0, 20)).collect()
}

fn capacity(cfg: &SimConfig, jobs: Vec<SimJob>) -> f64 {
    let capacity = simulate(cfg, jobs).summary.delivered_utilization_second_half;
    assert!(capacity.is_finite());
    capacity
}

#[test]
fn a_machine_kept_full_delivers_one_cpu_second_per_cpu_second() {
    let full = capacity(&one_job_at_a_time(), overload(CPUS, 200));
    assert!((full - 1.0).abs() < 0.01, "capacity {full}, known 1");
}

#[test]
fn capacities_in_a_known_ratio_come_out_in_that_ratio() {
    let cfg = one_job_at_a_time();
    let full = capacity(&cfg, overload(CPUS, 200));
    let part = capacity(&cfg, overload(17, 200));
    let known = 17.0 / 32.0;
    assert!((part - known).abs() < 0.01 * known, "capacity {part}, known {known}");
    assert!((part / full - known).abs() < 0.01 * known, "ratio {}, known {known}", part / full);
}

#[test]
fn the_gang_switch_costs_its_share_of_every_quantum() {
    // Charged at every 200 ms boundary, the 2 ms switch takes 1 % of the machine.
    let mut cfg = one_job_at_a_time();
    cfg.costs.gang_switch_every_quantum = true;
    let known = 198.0 / 200.0;
    let with_switch = capacity(&cfg, overload(CPUS, 200));
    assert!((with_switch - known).abs() < 0.005, "capacity {with_switch}, known {known}");
}

#[test]
fn a_run_too_short_to_halve_has_no_capacity() {
    let r = simulate(&one_job_at_a_time(), overload(CPUS, 2));
    assert!(r.summary.delivered_utilization_second_half.is_nan());
}
