//! A job whose exchange is a barrier (a spinbarrier's threads): no task passes phase `k` until every task has
//! arrived at it, where the ring lets a task go on once its two neighbours have. With two tasks the two are one.

mod common;

use common::{config, events, job, simulate, MS};
use cosched_sim::trace::TraceKind;
use cosched_sim::{Scheme, SimConfig, SimJob};

/// `nodes` nodes of 2 CPUs under Local, compute skewed per task so that the tasks arrive apart.
fn machine(nodes: u32) -> SimConfig {
    SimConfig { cpus_per_node: 2, skew: 0.5, ..config(Scheme::LOCAL, nodes, 1) }
}

fn spin_job(tasks: u32, barrier: bool) -> SimJob {
    let mut job = job(1, 0, tasks, 2 * MS, 0, 40);
    job.program.barrier = barrier;
    job
}

/// The times of each process's deposits, by process.
fn deposits(result: &cosched_sim::run::RunResult, processes: u32) -> Vec<Vec<u64>> {
    let mut by_process = vec![Vec::new(); processes as usize];
    for (time_ns, _, kind) in events(result, |k| matches!(k, TraceKind::Deposit { .. })) {
        if let TraceKind::Deposit { process } = kind {
            by_process[process as usize].push(time_ns);
        }
    }
    by_process
}

/// The largest spread, over the phases, of the instants the tasks got that phase's `k`-th deposit.
fn widest_phase_spread_ns(by_process: &[Vec<u64>]) -> u64 {
    let phases = by_process.iter().map(Vec::len).min().unwrap();
    (0..phases)
        .map(|k| {
            let times = by_process.iter().map(|d| d[k]);
            times.clone().max().unwrap() - times.min().unwrap()
        })
        .max()
        .unwrap()
}

#[test]
fn a_barrier_releases_every_task_at_once_and_a_ring_does_not() {
    let cfg = machine(2);
    let latency_ns = cfg.network.latency_ns(cfg.network.message_bytes);
    let barrier = simulate(&cfg, vec![spin_job(4, true)]);
    let by_process = deposits(&barrier, 4);
    assert!(by_process.iter().all(|d| d.len() == 40), "one release per phase each: {by_process:?}");
    // The last task to arrive releases them all at once: its own at once, the others' a message later.
    let spread = widest_phase_spread_ns(&by_process);
    assert!(spread <= latency_ns + cfg.network.nic_ns_per_message * 4, "spread {spread} ns");

    let ring = simulate(&cfg, vec![spin_job(4, false)]);
    let by_process = deposits(&ring, 4);
    assert!(by_process.iter().all(|d| d.len() == 80), "a message from each of two neighbours a phase");
    let firsts: Vec<Vec<u64>> = by_process.iter().map(|d| d.iter().step_by(2).copied().collect()).collect();
    assert!(widest_phase_spread_ns(&firsts) > MS / 2, "skewed compute lets ring neighbours drift apart");
    assert!(
        ring.jobs[0].finish_s < barrier.jobs[0].finish_s,
        "waiting for all is slower than waiting for two: ring {} s, barrier {} s",
        ring.jobs[0].finish_s,
        barrier.jobs[0].finish_s
    );
}

#[test]
fn with_two_tasks_a_barrier_is_the_ring() {
    let cfg = machine(1);
    let barrier = simulate(&cfg, vec![spin_job(2, true)]);
    let ring = simulate(&cfg, vec![spin_job(2, false)]);
    assert_eq!(barrier.jobs[0].finish_s, ring.jobs[0].finish_s);
    assert_eq!(barrier.trace, ring.trace);
}
