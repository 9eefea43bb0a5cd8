//! The model's open choices (the study's text is silent on them): each
//! option's effect on a hand-computable timeline, and its default.

mod common;
use common::*;
use cosched_sim::trace::TraceKind;
use cosched_sim::{Scheme, SimConfig};

fn is_block_or_dispatch(kind: &TraceKind) -> bool {
    matches!(kind, TraceKind::Block { .. } | TraceKind::Dispatch { .. } | TraceKind::IoOnCpu { .. })
}

/// Job 1 is CPU bound; job 2 computes 1 ms then does 100 µs of I/O, twice.
fn cpu_bound_beside_short_io() -> Vec<cosched_sim::SimJob> {
    vec![job(1, 0, 1, 300 * MS, 0, 1), job(2, MS / 2, 1, MS, 100 * US, 2)]
}

#[test]
fn by_default_every_io_blocks_and_gives_up_the_cpu() {
    let cfg = config(Scheme::LOCAL, 1, 2);
    assert_eq!(cfg.costs.io_keeps_cpu_below_ns, 0, "the study's reading is the default");
    let r = simulate(&cfg, cpu_bound_beside_short_io());
    let timeline = events(&r, is_block_or_dispatch);
    assert_eq!(
        &timeline[..4],
        &[
            (0, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            (20 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: true }),
            // The 100 µs I/O blocks job 2: two switches of 200 µs follow from it.
            (21_200 * US, 0, TraceKind::Block { process: 1 }),
            (21_200 * US, 0, TraceKind::Dispatch { process: 0, switch_cost: true }),
        ]
    );
}

#[test]
fn an_io_shorter_than_the_threshold_keeps_the_cpu_as_kernel_work() {
    let mut cfg = config(Scheme::LOCAL, 1, 2);
    cfg.costs.io_keeps_cpu_below_ns = CS;
    let r = simulate(&cfg, cpu_bound_beside_short_io());
    let timeline = events(&r, is_block_or_dispatch);
    assert_eq!(
        &timeline[..5],
        &[
            (0, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            (20 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: true }),
            // Job 2 runs 20.2-21.2 ms, does its I/O on the CPU until 21.3 ms,
            // computes again until 22.3 ms and its I/O ends at 22.4 ms.
            (21_200 * US, 0, TraceKind::IoOnCpu { process: 1 }),
            (22_300 * US, 0, TraceKind::IoOnCpu { process: 1 }),
            (22_400 * US, 0, TraceKind::Dispatch { process: 0, switch_cost: true }),
        ]
    );
    assert_eq!(finish_ns(&r, 2), 22_400 * US);
    assert!(events(&r, |k| matches!(k, TraceKind::Block { .. })).is_empty(), "no I/O blocked");
    // The I/O is charged as overhead, not as useful work.
    let default = simulate(&config(Scheme::LOCAL, 1, 2), cpu_bound_beside_short_io());
    assert_eq!(r.summary.cpu_time.useful_ns, default.summary.cpu_time.useful_ns);
    assert!(r.summary.cpu_time.overhead_ns >= default.summary.cpu_time.overhead_ns + 2 * 100 * US);
    assert!(r.summary.cpu_time.switch_ns < default.summary.cpu_time.switch_ns, "fewer switches");
}

#[test]
fn an_io_as_long_as_the_threshold_still_blocks() {
    let mut cfg = config(Scheme::LOCAL, 1, 2);
    cfg.costs.io_keeps_cpu_below_ns = 100 * US;
    let with = simulate(&cfg, cpu_bound_beside_short_io());
    let without = simulate(&config(Scheme::LOCAL, 1, 2), cpu_bound_beside_short_io());
    assert_eq!(with.trace, without.trace, "100 µs is not below 100 µs");
}

#[test]
fn under_gang_scheduling_a_short_io_changes_nothing() {
    // Nothing else may run on a GS process's CPU: blocking and keeping it are the same.
    let jobs = || vec![job(1, 0, 2, 10 * MS, 100 * US, 20), job(2, 0, 2, 30 * MS, 0, 3)];
    let mut cfg = config(Scheme::GANG, 2, 2);
    let stock = simulate(&cfg, jobs());
    cfg.costs.io_keeps_cpu_below_ns = CS;
    let keeping = simulate(&cfg, jobs());
    assert_eq!(keeping.trace, stock.trace);
}

/// Job 1 (500 ms) takes row 0 on CPU 0; job 2 (100 ms), arriving at 50 ms, fits beside it in row 0.
fn second_job_in_the_running_row(cfg: &SimConfig) -> cosched_sim::run::RunResult {
    simulate(cfg, vec![job(1, 0, 1, 500 * MS, 0, 1), job(2, 50 * MS, 1, 100 * MS, 0, 1)])
}

#[test]
fn by_default_a_gang_job_placed_in_the_running_row_starts_mid_quantum() {
    let cfg = config(Scheme::GANG, 2, 2);
    assert!(!cfg.costs.gang_start_waits_for_quantum);
    let r = second_job_in_the_running_row(&cfg);
    assert_eq!(finish_ns(&r, 2), 150 * MS);
}

#[test]
fn a_gang_job_may_wait_for_the_next_quantum_instead() {
    let mut cfg = config(Scheme::GANG, 2, 2);
    cfg.costs.gang_start_waits_for_quantum = true;
    let r = second_job_in_the_running_row(&cfg);
    // CPU 1 idles until the 200 ms boundary, pays the 2 ms gang switch, then runs job 2.
    assert_eq!(finish_ns(&r, 2), 302 * MS);
    // Job 1, already running, is not disturbed beyond the usual switches.
    assert_eq!(finish_ns(&r, 1), finish_ns(&second_job_in_the_running_row(&config(Scheme::GANG, 2, 2)), 1));
    // The first job on an idle machine still starts at once.
    assert_eq!(start_ns(&r, 1), 0);
}

#[test]
fn waiting_for_the_quantum_switches_even_when_rows_do_not_change_otherwise() {
    // Without the switch at every quantum's end, the pending cells alone must make the boundary switch.
    let mut cfg = config(Scheme::GANG, 2, 2);
    cfg.costs.gang_start_waits_for_quantum = true;
    cfg.costs.gang_switch_every_quantum = false;
    let r = second_job_in_the_running_row(&cfg);
    assert_eq!(finish_ns(&r, 2), 302 * MS);
}
