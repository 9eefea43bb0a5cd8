//! The EEVDF node scheduler's rules, on timelines computed by hand (see
//! docs/model.md, "The EEVDF node scheduler"). One CPU per node: the base
//! slice is 0.70 ms; the tick is 1 ms (HZ=1000) unless said; switches are
//! free so that instants stay round.

mod common;

use common::*;
use cosched_sim::trace::TraceKind;
use cosched_sim::{OsScheduler, Scheme, SimConfig, SimJob};

fn eevdf(mpl: u32) -> SimConfig {
    let mut cfg = config(Scheme::LOCAL, 1, mpl);
    cfg.node_scheduler = OsScheduler::Eevdf;
    cfg.costs.context_switch_ns = 0;
    cfg
}

fn niced(mut job: SimJob, nice: i8) -> SimJob {
    job.nice = nice;
    job
}

/// (instant in µs, process) of every dispatch.
fn dispatches(result: &cosched_sim::RunResult) -> Vec<(u64, u32)> {
    events(result, |k| matches!(k, TraceKind::Dispatch { .. }))
        .into_iter()
        .map(|(t, _, k)| match k {
            TraceKind::Dispatch { process, .. } => (t / US, process),
            _ => unreachable!(),
        })
        .collect()
}

/// Two CPU-bound processes that arrive together: both start at the average
/// (0) with half a slice (0.35 ms) to their deadline; the first queued wins
/// the tie. At each tick the running one has used its slice and is past the
/// average, so the other, eligible, runs: they take turns every tick, and
/// 10 ms of work each ends at 19 and 20 ms.
#[test]
fn equal_processes_take_turns_at_every_tick() {
    let result = simulate(&eevdf(2), vec![job(1, 0, 1, 10 * MS, 0, 1), job(2, 0, 1, 10 * MS, 0, 1)]);
    let turns = dispatches(&result);
    assert_eq!(turns.len(), 20, "{turns:?}");
    for (i, &(at_us, process)) in turns.iter().enumerate() {
        assert_eq!(at_us, i as u64 * 1000, "{turns:?}");
        assert_eq!(process, (i % 2) as u32, "{turns:?}");
    }
    assert_eq!(finish_ns(&result, 1), 19 * MS);
    assert_eq!(finish_ns(&result, 2), 20 * MS);
}

/// With HZ=250 (4 ms ticks) the slice is noticed only at a tick: turns of
/// 4 ms.
#[test]
fn a_slice_ends_at_the_first_tick_after_it() {
    let mut cfg = eevdf(2);
    cfg.scheduler.tick_ns = 4 * MS;
    cfg.scheduler.raise_period_ns = 1000 * MS;
    let result = simulate(&cfg, vec![job(1, 0, 1, 8 * MS, 0, 1), job(2, 0, 1, 8 * MS, 0, 1)]);
    let turns: Vec<u64> = dispatches(&result).iter().map(|&(t, _)| t).collect();
    assert_eq!(turns, [0, 4000, 8000, 12000]);
    assert_eq!(finish_ns(&result, 1), 12 * MS);
    assert_eq!(finish_ns(&result, 2), 16 * MS);
}

/// A process that reads its own CPU clock all along runs the kernel's
/// `update_curr` at every read, so its slice ends when used up, not at the
/// next tick (here 4 ms away). Both start with half a slice (0.35 ms): the
/// first runs it, then the second; from then on each runs a whole slice
/// (0.70 ms), so 8 ms of work each ends at 16 ms.
#[test]
fn a_process_reading_its_cpu_clock_ends_its_slice_when_used_up() {
    let mut cfg = eevdf(2);
    cfg.scheduler.tick_ns = 4 * MS;
    cfg.scheduler.raise_period_ns = 1000 * MS;
    let reader = |n| {
        let mut job = job(n, 0, 1, 8 * MS, 0, 1);
        job.program.reads_cpu_clock = true;
        job
    };
    let result = simulate(&cfg, vec![reader(1), reader(2)]);
    let turns: Vec<u64> = dispatches(&result).iter().map(|&(t, _)| t).collect();
    assert_eq!(turns[..6], [0, 350, 700, 1400, 2100, 2800], "{turns:?}");
    assert!(turns.windows(2).skip(2).all(|w| w[1] - w[0] <= 700), "{turns:?}");
    assert_eq!(finish_ns(&result, 1).max(finish_ns(&result, 2)), 16 * MS);
}

/// The kernel's base slice counts the machine's CPUs, not the node's: a
/// one-CPU node of a two-CPU machine has slices of 1.4 ms.
#[test]
fn the_base_slice_counts_the_machines_cpus_when_given() {
    let mut cfg = eevdf(2);
    cfg.scheduler.tick_ns = 4 * MS;
    cfg.scheduler.raise_period_ns = 1000 * MS;
    cfg.scheduler.base_slice_cpus = 2;
    let reader = |n| {
        let mut job = job(n, 0, 1, 6 * MS, 0, 1);
        job.program.reads_cpu_clock = true;
        job
    };
    let turns: Vec<u64> = dispatches(&simulate(&cfg, vec![reader(1), reader(2)])).iter().map(|&(t, _)| t).collect();
    assert_eq!(turns[..5], [0, 700, 1400, 2800, 4200], "{turns:?}");
}

/// Weights from nice values: nice 0 (1024) against nice 5 (335) share the
/// CPU 1024 : 335, so the nice-0 process's 2 s of work take 2 s x 1359/1024
/// = 2.654 s, within a tick or two.
#[test]
fn cpu_shares_follow_the_weights_of_nice_values() {
    let result = simulate(&eevdf(2), vec![job(1, 0, 1, 2000 * MS, 0, 1), niced(job(2, 0, 1, 2000 * MS, 0, 1), 5)]);
    let expected_ns = 2000 * MS * (1024 + 335) / 1024;
    let finish = finish_ns(&result, 1);
    assert!(finish.abs_diff(expected_ns) <= 2 * MS, "nice-0 job ends at {finish} ns, expected about {expected_ns}");
}

/// A new task joins at the average with half a slice: it preempts the
/// running one at once when that one has run past its own deadline. The
/// first runs alone from 0; at 2.5 ms (deadline renewed at the ticks 1 and
/// 2 ms to 2.7 ms, protection 0.35 ms long gone) the second arrives at the
/// average 2.5 ms with deadline 2.85 ms. The running one, at the average
/// too, is eligible, but its deadline (2.7 ms) is earlier: it keeps the CPU.
/// At the tick of 3 ms it is past the average (3 > 2.75) and not eligible:
/// the newcomer runs.
#[test]
fn a_newcomer_waits_for_an_earlier_deadline_then_runs_at_the_tick() {
    let result = simulate(&eevdf(2), vec![job(1, 0, 1, 10 * MS, 0, 1), job(2, 2500 * US, 1, MS, 0, 1)]);
    assert_eq!(dispatches(&result)[..3], [(0, 0), (3000, 1), (4000, 0)]);
}

/// A sleeper's lag across its sleeps: a process that computes 0.2 ms then
/// sleeps 3 ms beside a CPU-bound one (A).
/// - Joins at 1.5 ms at the average (1.5), deadline 1.85, behind A's deadline
///   1.7: runs at the tick of 2 ms, when A is past the average. Leaves at 2.2
///   eligible, lag 0.15 ms (average 1.85, its own 1.7).
/// - Wakes at 5.2 with that lag, scaled (x2): 4.7, deadline 5.4; A at 5.0
///   is past the new average 4.85, not eligible: the sleeper preempts at once.
///   Leaves at 5.4 with lag 0.05.
/// - Wakes at 8.4 at 7.9 (A at 8.0, average 7.95): preempts at once again.
///   Leaves at 8.6 at 8.1, past the average 8.05: not eligible, so it stays
///   queued, delayed, until A's next pick (the tick of 9 ms, A past its
///   protection) dequeues it at zero lag (DELAY_ZERO).
/// - Wakes at 11.6 at that zero lag, at A's 11.0, deadline 11.7. A, eligible
///   and with the earlier deadline (11.1), keeps the CPU; at the tick of 12 ms
///   A is past the average and the sleeper runs.
#[test]
fn a_sleeper_keeps_its_lag_and_a_delayed_one_loses_it() {
    let result = simulate(&eevdf(2), vec![job(1, 0, 1, 100 * MS, 0, 1), job(2, 1500 * US, 1, 200 * US, 3 * MS, 10)]);
    let sleeper = 1;
    let runs: Vec<u64> = dispatches(&result).iter().filter(|&&(_, p)| p == sleeper).map(|&(t, _)| t).collect();
    assert_eq!(runs[..4], [2000, 5200, 8400, 12000], "{runs:?}");
}

/// The same seed gives the same run, to the byte, under every scheme with an
/// OS scheduler, gang slots over EEVDF included (skewed iterations, messages,
/// two CPUs per node).
#[test]
fn the_same_seed_gives_the_same_run() {
    let jobs: Vec<SimJob> = (0..8).map(|i| job(i, i * 3 * MS, 1 + (i as u32 % 4), 2 * MS, MS / 2, 20)).collect();
    let schemes = Scheme::all_names().into_iter().map(|n| n.parse::<Scheme>().unwrap());
    for scheme in schemes.filter(|s| s.node() != cosched_sim::NodeKind::GangCell) {
        let mut cfg = eevdf(3);
        cfg.scheme = scheme;
        cfg.nodes = 4;
        cfg.cpus_per_node = 2;
        cfg.skew = 0.2;
        cfg.costs.context_switch_ns = CS;
        let first = simulate(&cfg, jobs.clone());
        let second = simulate(&cfg, jobs.clone());
        assert_eq!(format!("{:?}", first.jobs), format!("{:?}", second.jobs), "{scheme}");
        assert_eq!(format!("{:?}", first.trace), format!("{:?}", second.trace), "{scheme}");
    }
}

// ---- a node of two CPUs: the base slice is 1.4 ms; the busy balance
// ---- interval 16 × 2 ms = 32 ms.

fn two_cpu_node(mpl: u32) -> SimConfig {
    let mut cfg = eevdf(mpl);
    cfg.cpus_per_node = 2;
    cfg
}

/// (instant in µs, CPU moved to, process, CPU moved from) of every move.
fn migrations(result: &cosched_sim::RunResult) -> Vec<(u64, u32, u32, u32)> {
    events(result, |k| matches!(k, TraceKind::Migrate { .. }))
        .into_iter()
        .map(|(t, cpu, k)| match k {
            TraceKind::Migrate { process, from } => (t / US, cpu, process, from),
            _ => unreachable!(),
        })
        .collect()
}

/// p0 and p2 share CPU 0, p1 is alone on CPU 1. At the 1 ms tick CPU 0
/// turns from p0 (its half slice used) to p2; at the same instant p1 exits
/// and CPU 1, left with nothing, takes CPU 0's queued process, p0. Each then
/// runs alone: p0 has 19 ms left (ends at 20 ms), p2 all its 20 ms (21 ms).
#[test]
fn a_cpu_left_idle_takes_its_siblings_queued_process_at_once() {
    let jobs = vec![job(1, 0, 1, 20 * MS, 0, 1), job(2, 0, 1, MS, 0, 1), job(3, 0, 1, 20 * MS, 0, 1)];
    let result = simulate(&two_cpu_node(3), jobs);
    assert_eq!(migrations(&result), vec![(1000, 1, 0, 0)]);
    assert_eq!(finish_ns(&result, 1), 20 * MS);
    assert_eq!(finish_ns(&result, 3), 21 * MS);
}

/// p0 is CPU-bound on CPU 0 with p2 (0.5 ms of compute, then 5 ms of I/O,
/// twice); p1 on CPU 1 computes 3 ms, then waits 10 ms for I/O. p2 runs
/// from the 1 ms tick to 1.5 ms; it wakes at 6.5 ms while p0 runs and CPU 1
/// is idle: it wakes there (the one move), and at 12 ms wakes on CPU 1
/// again, idle still.
#[test]
fn a_wake_goes_to_an_idle_sibling_when_its_cpu_is_busy() {
    let jobs = vec![job(1, 0, 1, 30 * MS, 0, 1), job(2, 0, 1, 3 * MS, 10 * MS, 1), job(3, 0, 1, MS / 2, 5 * MS, 2)];
    let result = simulate(&two_cpu_node(3), jobs);
    assert_eq!(migrations(&result), vec![(6500, 1, 2, 0)]);
    let wakes = events(&result, |k| matches!(k, TraceKind::Wake { process: 2 }));
    let wakes: Vec<(u64, u32)> = wakes.iter().map(|&(t, cpu, _)| (t / US, cpu)).collect();
    assert_eq!(wakes, vec![(6500, 1), (12000, 1)]);
}

/// Nice 0 and 5 on CPU 0 (load 1024 + 335), nice 0 and -5 on CPU 1
/// (1024 + 3121). CPU 1 balances at its first tick with a process queued
/// (1 ms) and then every 32 - 1 = 31 ms (`get_sd_balance_interval`, busy):
/// the imbalance is min(4145 - 2752, 2752 - 1359) = 1393, so the nice-0
/// process (1024) moves when it is the queued one, the nice -5 one (3121)
/// never. At 1 ms the queued one is the nice -5 process (the nice-0 one
/// ran first and is preempted only after the tick's balance): no move; at
/// 32 ms the nice-0 one moves. Then CPU 1 has nothing queued and CPU 0 is
/// the less loaded: no other move while the nice -5 process runs, alone,
/// and the others share by weight (43/43/14 %), as the kernel does
/// (docs/model.md, "Checked against the real kernel").
#[test]
fn balancing_gives_the_heavy_process_a_cpu_of_its_own() {
    let jobs = vec![
        job(1, 0, 1, 400 * MS, 0, 1),
        job(2, 0, 1, 400 * MS, 0, 1),
        niced(job(3, 0, 1, 400 * MS, 0, 1), 5),
        niced(job(4, 0, 1, 400 * MS, 0, 1), -5),
    ];
    let result = simulate(&two_cpu_node(4), jobs);
    let heavy_done_us = finish_ns(&result, 4) / US;
    let moves: Vec<_> = migrations(&result).into_iter().filter(|m| m.0 < heavy_done_us).collect();
    assert_eq!(moves, vec![(32_000, 0, 1, 1)]);
    // The nice -5 process ran alone from then on: 400 ms of its own less
    // what it had by 32 ms (3/4 of CPU 1 between the nice-0 one's turns).
    assert!(heavy_done_us < 32_000 + 400_000, "{heavy_done_us}");
}

/// p2 arrives at 2.5 ms and is placed on CPU 0 beside p0 (the coscheduler
/// counts residents, and p1 on CPU 1 is in a 10 ms I/O). Its deadline
/// (2.5 + 0.7 ms) is earlier than p0's (renewed at 2.5 ms to 3.9 ms): it
/// preempts, and the queued p0 moves to the idle CPU 1 at CPU 0's next
/// tick, 3 ms. p2 ends at 7.5 ms; p1 wakes at 10.5 ms with its CPU busy
/// and CPU 0 idle, and wakes there.
#[test]
fn a_queued_process_moves_to_an_idle_sibling_at_the_next_tick() {
    let jobs = vec![job(1, 0, 1, 20 * MS, 0, 1), job(2, 0, 1, MS / 2, 10 * MS, 1), job(3, 2_500 * US, 1, 5 * MS, 0, 1)];
    let result = simulate(&two_cpu_node(3), jobs);
    assert_eq!(migrations(&result), vec![(3000, 1, 0, 0), (10_500, 0, 1, 1)]);
}

// ---- what the rest of a measured node does (`bench background`)

/// Four CPU-bound processes on a node of two CPUs, 2 s each of work (4 s of
/// span), with the kernel's background moves at one per `interval_ns` per process.
fn four_spinners_moved_every(interval_ns: u64, seed: u64) -> cosched_sim::RunResult {
    let mut cfg = two_cpu_node(4);
    cfg.scheduler.tick_ns = 4 * MS;
    cfg.scheduler.raise_period_ns = 1000 * MS;
    cfg.scheduler.background_migration_interval_ns = interval_ns;
    cfg.seed = seed;
    simulate(&cfg, (1..=4).map(|n| job(n, 0, 1, 2000 * MS, 0, 1)).collect())
}

/// The share of the time until the first process finishes during which `a` and `b` share a CPU.
fn together_share(result: &cosched_sim::RunResult, a: u32, b: u32) -> f64 {
    let end_us = (1..=4).map(|n| finish_ns(result, n)).min().unwrap() / US;
    let mut cpu_of: Vec<u32> = vec![0, 1, 0, 1];
    let (mut last_us, mut together_us) = (0, 0);
    for (at_us, to, process, _) in migrations(result).into_iter().take_while(|m| m.0 < end_us) {
        if cpu_of[a as usize] == cpu_of[b as usize] {
            together_us += at_us - last_us;
        }
        (last_us, cpu_of[process as usize]) = (at_us, to);
    }
    if cpu_of[a as usize] == cpu_of[b as usize] {
        together_us += end_us - last_us;
    }
    together_us as f64 / end_us as f64
}

/// Equal loads on both CPUs: the balancing rules alone never move anyone,
/// and p0 and p1, placed apart, stay apart. With background moves, each
/// draw moves one process and the busy balance moves one back (not always
/// the same): each process moves about once per interval, counting both,
/// and the pairings mix, so that p0 shares a CPU with p1 about a third of
/// the time, as with any one of the three others (the kernel's runs show
/// the same mixing: docs/reproduction-real.md). Bounds are loose: the
/// count of moves over 4 s is a random draw from the seed.
#[test]
fn background_moves_mix_the_pairs_on_busy_cpus() {
    assert!(migrations(&four_spinners_moved_every(0, 1)).is_empty());
    let result = four_spinners_moved_every(100 * MS, 1);
    let moves = migrations(&result).len() as f64;
    let process_seconds = 4.0 * 4.0;
    assert!((0.5..2.0).contains(&(moves / (process_seconds / 0.1))), "{moves} moves");
    let share = together_share(&result, 0, 1);
    assert!((0.15..0.5).contains(&share), "p0 with p1 {share:.2} of the time");
    let again = four_spinners_moved_every(100 * MS, 1);
    assert_eq!(migrations(&again), migrations(&result), "the same seed moves the same processes");
    assert_ne!(migrations(&four_spinners_moved_every(100 * MS, 2)), migrations(&result));
}

/// Two CPU-bound processes on one CPU at HZ=250 turn only at ticks; with
/// housekeeping wakes, some turns start between ticks, and only once the
/// running process is past the protection it was picked with (the base
/// slice of 0.70 ms here): never earlier than that into a turn.
#[test]
fn housekeeping_wakes_end_turns_between_ticks_past_protection() {
    let mut cfg = eevdf(2);
    cfg.scheduler.tick_ns = 4 * MS;
    cfg.scheduler.raise_period_ns = 1000 * MS;
    let run =
        |cfg: &SimConfig| dispatches(&simulate(cfg, vec![job(1, 0, 1, 500 * MS, 0, 1), job(2, 0, 1, 500 * MS, 0, 1)]));
    assert!(run(&cfg).iter().all(|&(at_us, _)| at_us % 4000 == 0));
    cfg.scheduler.housekeeping_wake_interval_ns = 20 * MS;
    let turns = run(&cfg);
    let between_ticks: Vec<_> = turns.windows(2).filter(|w| w[1].0 % 4000 != 0).collect();
    // 1 s of span, a wake every 20 ms: some 50 wakes, of which those past protection end a turn.
    assert!((10..=60).contains(&between_ticks.len()), "{} turns began between ticks", between_ticks.len());
    for w in between_ticks {
        assert!(w[1].0 - w[0].0 >= 700, "a turn ended by a wake after {} µs: {w:?}", w[1].0 - w[0].0);
    }
}
