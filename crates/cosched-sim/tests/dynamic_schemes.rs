//! Hand-computable timelines for the mechanisms of the dynamic schemes.
//!
//! Common set-up, two nodes, MPL 3, jobs in this order at time 0:
//! B1 (1 task, 1 ms) -> CPU 0; B2 (1 task, 5 ms) -> CPU 1; A (2 tasks,
//! 1 ms compute, one iteration) -> CPUs 0 and 1; optionally C (1 task,
//! 30 ms) -> CPU 0. Process ids: B1 = 0, B2 = 1, A0 = 2, A1 = 3, C = 4.
//! A0 runs 1.2-2.2 ms and then waits for A1, which runs 5.2-6.2 ms: A1's
//! message lands in A0's endpoint at 6.2 ms + L.

mod common;
use common::*;
use cosched_sim::trace::TraceKind;
use cosched_sim::{Scheme, SimJob};

const A0: u32 = 2;
const A1: u32 = 3;
const C: u32 = 4;
const SPIN: u64 = 204_028; // 1.1 x L
const INTERRUPT: u64 = 50 * US;
const SYSCALL: u64 = 3 * US;
const QUEUE_MOVE: u64 = 3 * US;
const CHECK: u64 = 2 * US;

fn jobs(with_c: bool) -> Vec<SimJob> {
    let mut jobs = vec![job(1, 0, 1, MS, 0, 1), job(2, 0, 1, 5 * MS, 0, 1), job(3, 0, 2, MS, 0, 1)];
    if with_c {
        jobs.push(job(4, 0, 1, 30 * MS, 0, 1));
    }
    jobs
}

fn scheme(name: &str) -> Scheme {
    name.parse().unwrap()
}

#[test]
fn spin_block_blocks_after_its_spin_time_and_an_interrupt_wakes_it() {
    let r = simulate(&config(scheme("SB"), 2, 3), jobs(false));
    let a0 = events(&r, |k| {
        matches!(k, TraceKind::Block { process: A0 } | TraceKind::Interrupt { .. } | TraceKind::Wake { .. })
    });
    assert_eq!(
        a0,
        vec![
            (2_200 * US + SPIN, 0, TraceKind::Block { process: A0 }),
            (6_200 * US + L, 0, TraceKind::Interrupt { process: A0 }),
            (6_200 * US + L, 0, TraceKind::Wake { process: A0 }),
        ]
    );
    // A0 runs again once the interrupt handler is done, with no switch (it ran last).
    assert_eq!(finish_ns(&r, 3), 6_200 * US + L + INTERRUPT);
    let cpu0 = r.per_cpu_time[0];
    assert_eq!(cpu0.overhead_ns, SYSCALL + INTERRUPT);
    assert_eq!(cpu0.spin_ns, SPIN);
}

#[test]
fn spin_yield_drops_below_the_others_and_boosts_the_next_runnable_process() {
    let r = simulate(&config(scheme("SY"), 2, 3), jobs(true));
    let yielded = 2_200 * US + SPIN;
    let timeline = events(&r, |k| {
        matches!(k, TraceKind::Yield { .. } | TraceKind::Boost { .. } | TraceKind::Preempt { .. })
            || matches!(k, TraceKind::Dispatch { process: C, .. })
    });
    assert_eq!(
        &timeline[..4],
        &[
            // C is at level 59: A0 drops to 58 and boosts C (the only candidate).
            (yielded, 0, TraceKind::Yield { process: A0, level: 58 }),
            (yielded, 0, TraceKind::Boost { process: C }),
            // The drop takes effect at the next tick.
            (3 * MS, 0, TraceKind::Preempt { process: A0 }),
            (3 * MS, 0, TraceKind::Dispatch { process: C, switch_cost: true }),
        ]
    );
    // System call, own queue move, two endpoint checks (one per pass), C's queue move.
    let yield_cost = SYSCALL + QUEUE_MOVE + 2 * CHECK + QUEUE_MOVE;
    assert_eq!(r.per_cpu_time[0].overhead_ns, yield_cost);
    assert!(events(&r, |k| matches!(k, TraceKind::Yield { .. })).len() == 1, "one yield per receive");
}

#[test]
fn demand_based_coscheduling_interrupts_only_for_receivers_not_running() {
    // Alone, every receiver is running when its message lands: no interrupt.
    let alone = simulate(&config(scheme("DCS"), 2, 3), vec![job(1, 0, 2, MS, 0, 3)]);
    assert!(events(&alone, |k| matches!(k, TraceKind::Interrupt { .. })).is_empty());
    assert_eq!(alone.summary.cpu_time.overhead_ns, 0);
    // A0 computes 3 ms (1.2-4.2 ms), spins until its quantum ends (tick 22 ms),
    // and C takes CPU 0. A0's message lands at A1 at 4.2 ms + L while B2 runs on
    // CPU 1: interrupt, A1 to the top (level 59, like B2: no preemption). The
    // 53 µs handler delays B2, whose 20 ms quantum so ends at 20.053 ms, seen at
    // the 21 ms tick; A1 computes 21.2-24.2 ms and sends: when its message
    // lands, the NIC's view of CPU 0 (refreshed at 24 ms) is C: interrupt.
    let jobs = vec![
        job(1, 0, 1, MS, 0, 1),
        job(2, 0, 1, 30 * MS, 0, 1),
        job(3, 0, 2, 3 * MS, 0, 1),
        job(4, 0, 1, 30 * MS, 0, 1),
    ];
    let r = simulate(&config(scheme("DCS"), 2, 3), jobs);
    let interrupts = events(&r, |k| matches!(k, TraceKind::Interrupt { .. }));
    assert_eq!(
        interrupts,
        vec![
            // A0's message reaches A1 while B2 runs on CPU 1.
            (4_200 * US + L, 1, TraceKind::Interrupt { process: A1 }),
            (24_200 * US + L, 0, TraceKind::Interrupt { process: A0 }),
        ]
    );
    assert_eq!(r.per_cpu_time[0].overhead_ns, INTERRUPT + QUEUE_MOVE);
    assert_eq!(r.per_cpu_time[1].overhead_ns, INTERRUPT + QUEUE_MOVE);
}

#[test]
fn periodic_boost_walks_after_the_running_process_every_tick() {
    let r = simulate(&config(scheme("PB"), 2, 3), jobs(true));
    let boosts = events(&r, |k| matches!(k, TraceKind::Boost { .. }));
    assert!(!boosts.is_empty());
    assert!(boosts.iter().all(|(t, _, _)| t % MS == 0), "boosts happen at ticks");
    // While A0 runs on CPU 0 (from 1.2 ms until its message lands at 6.2 ms + L),
    // the walk after it finds C, runnable and not in a receive, at every tick.
    let on_cpu0: Vec<u64> = boosts
        .iter()
        .filter(|(t, cpu, k)| *cpu == 0 && (2 * MS..=6 * MS).contains(t) && *k == TraceKind::Boost { process: C })
        .map(|(t, _, _)| *t)
        .collect();
    assert_eq!(on_cpu0, vec![2 * MS, 3 * MS, 4 * MS, 5 * MS, 6 * MS]);
    assert!(r.summary.cpu_time.overhead_ns > 0);
}
