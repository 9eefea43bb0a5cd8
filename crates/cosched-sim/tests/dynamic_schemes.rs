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
use cosched_sim::config::{BoostDisplaces, BoostReceive, BoostWalk, YieldCycle};
use cosched_sim::metrics::{BoostCounts, Displaced, SwitchCounts};
use cosched_sim::run::RunResult;
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
fn immediate_blocking_blocks_at_once_and_the_same_interrupt_wakes_it() {
    let r = simulate(&config(scheme("IB"), 2, 3), jobs(false));
    let a0 = events(&r, |k| {
        matches!(k, TraceKind::Block { process: A0 } | TraceKind::Interrupt { .. } | TraceKind::Wake { .. })
    });
    // As spin-block, but the block comes when A0's receive starts, with no spin.
    assert_eq!(
        a0,
        vec![
            (2_200 * US, 0, TraceKind::Block { process: A0 }),
            (6_200 * US + L, 0, TraceKind::Interrupt { process: A0 }),
            (6_200 * US + L, 0, TraceKind::Wake { process: A0 }),
        ]
    );
    assert_eq!(finish_ns(&r, 3), 6_200 * US + L + INTERRUPT);
    let cpu0 = r.per_cpu_time[0];
    assert_eq!(cpu0.overhead_ns, SYSCALL + INTERRUPT);
    assert_eq!(cpu0.spin_ns, 0);
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
            (yielded, 0, TraceKind::Boost { process: C, displaced: Displaced::Spinning }),
            // The drop takes effect at the next tick.
            (3 * MS, 0, TraceKind::Preempt { process: A0 }),
            (3 * MS, 0, TraceKind::Dispatch { process: C, switch_cost: true }),
        ]
    );
    // System call, own queue move, one endpoint check (A0's own: C is not in a
    // receive, and the second pass checks no endpoint), C's queue move.
    let yield_cost = SYSCALL + QUEUE_MOVE + CHECK + QUEUE_MOVE;
    assert_eq!(r.per_cpu_time[0].overhead_ns, yield_cost);
    assert!(events(&r, |k| matches!(k, TraceKind::Yield { .. })).len() == 1, "one yield per receive");
}

#[test]
fn spin_yield_yields_after_every_spin_time_when_its_cycle_repeats() {
    // Alone on CPU 0 from 2.2 ms, A0 waits for A1's message until 6.2 ms + L: its yields drop it below nobody
    // and boost nobody, each costing the call and the walk's look at its own endpoint.
    let each_yield = SYSCALL + CHECK;
    let once = simulate(&config(scheme("SY"), 2, 3), jobs(false));
    assert_eq!(once.per_cpu_time[0].overhead_ns, each_yield);
    let mut cfg = config(scheme("SY"), 2, 3);
    cfg.costs.yield_cycle = YieldCycle::Repeated;
    let repeated = simulate(&cfg, jobs(false));
    let overhead = repeated.per_cpu_time[0].overhead_ns;
    // One yield per spin time (plus the yields' own time) of the 4.185 ms wait: 20.
    assert_eq!(overhead % each_yield, 0, "{overhead}");
    let waited = 4_000 * US + L;
    assert_eq!(overhead / each_yield, waited / (SPIN + each_yield), "{overhead}");
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

/// Periodic boost on CPU 0 of the common set-up with C. A0 computes
/// 1.2-2.2 ms and then spins at level 59, like C, which waits at level 59.
fn periodic_boost_run(walk: BoostWalk) -> RunResult {
    let mut cfg = config(scheme("PB"), 2, 3);
    cfg.costs.boost_walk = walk;
    simulate(&cfg, jobs(true))
}

#[test]
fn boosts_are_counted_by_what_they_displaced() {
    let r = periodic_boost_run(BoostWalk::TickBefore);
    // C displaced spinning A0 at 3 ms; A0 displaced computing C at 7 ms.
    // At 3 ms A0's partner A1 is not running yet (B2 holds CPU 1 until 5 ms): no pair is broken.
    let counts = BoostCounts {
        displacing_computing: 1,
        displacing_spinning: 1,
        on_an_idle_cpu: 0,
        breaking_a_coscheduled_pair: 0,
    };
    assert_eq!(r.summary.boosts, counts);
}

#[test]
fn context_switches_are_counted_by_why_the_last_process_left() {
    let r = periodic_boost_run(BoostWalk::TickBefore);
    let switches = r.summary.switches;
    // CPU 0: B1 ends (1 ms, to A0), C's boost (4 ms), A0's boost (8 ms), A0 ends (to C). CPU 1: B2 ends (5 ms,
    // to A1). A1's and C's ends leave their CPUs idle: no switch follows.
    let expected =
        SwitchCounts { after_a_tick: 0, after_a_boost: 2, after_a_block: 0, after_an_exit: 3, after_a_gang_switch: 0 };
    assert_eq!(switches, expected);
    let charged = events(&r, |k| matches!(k, TraceKind::Dispatch { switch_cost: true, .. })).len() as u64;
    assert_eq!(charged, 5, "every charged switch has one cause");
    // Spin-block's block is a cause of its own.
    let sb = simulate(&config(scheme("SB"), 2, 3), jobs(true));
    assert!(sb.summary.switches.after_a_block >= 1, "{:?}", sb.summary.switches);
}

#[test]
fn a_computing_process_keeps_its_cpu_when_boosts_displace_only_spinners() {
    let mut cfg = config(scheme("PB"), 2, 3);
    cfg.costs.boost_displaces = BoostDisplaces::Spinning;
    let r = simulate(&cfg, jobs(true));
    // As by default C displaces spinning A0 (boosted at 3 ms, runs at 4 ms)...
    assert_eq!(on_cpu0(&r, 3, 4)[1], (4 * MS, 0, TraceKind::Preempt { process: A0 }));
    // ...but A0, boosted at 7 ms while C computes, waits at the head of the top level until C's 20 ms quantum
    // runs out (at 24 ms plus the walks' time, seen at the 25 ms tick): no preemption at 8 ms.
    let a0 = on_cpu0(&r, 7, 25);
    assert_eq!(a0[0], (7 * MS, 0, TraceKind::Boost { process: A0, displaced: Displaced::Computing }));
    assert!(!a0.iter().any(|e| matches!(e.2, TraceKind::Preempt { .. })), "{a0:?}");
    assert_eq!(a0.last(), Some(&(25 * MS, 0, TraceKind::Dispatch { process: A0, switch_cost: true })));
    // (The 25 ms walk looks into A0's endpoint after the dispatch: A0 is found, nothing changes.)
    assert_eq!(finish_ns(&r, 3), 25 * MS + CS + CHECK);
}

/// Three nodes: B1 (1 ms), B2 (5 ms), B3 (9 ms) one per CPU, then A (3 tasks: 1 ms compute, one iteration) over
/// CPUs 0-2, then C (30 ms) on CPU 0. Process ids: B1..B3 = 0..2, A0..A2 = 3..5, C = 6. A0 computes 1.2-2.2 ms
/// and waits for A1 (runs 5.2-6.2 ms) and A2 (9.2-10.2 ms); C takes CPU 0 from spinning A0 at 4 ms.
fn one_message_of_two_run(receive: BoostReceive) -> RunResult {
    let mut cfg = config(scheme("PB"), 3, 3);
    cfg.costs.boost_receive = receive;
    let jobs = vec![
        job(1, 0, 1, MS, 0, 1),
        job(2, 0, 1, 5 * MS, 0, 1),
        job(3, 0, 1, 9 * MS, 0, 1),
        job(4, 0, 3, MS, 0, 1),
        job(5, 0, 1, 30 * MS, 0, 1),
    ];
    simulate(&cfg, jobs)
}

#[test]
fn a_receiver_with_one_of_its_two_messages_is_a_candidate_only_per_message() {
    const RING_A0: u32 = 3;
    let boosts_of_a0 = |r: &RunResult| {
        events(r, |k| matches!(k, TraceKind::Boost { process: RING_A0, .. }))
            .into_iter()
            .filter(|&(t, cpu, _)| cpu == 0 && (5 * MS..=10 * MS).contains(&t))
            .collect::<Vec<_>>()
    };
    // A1's message lands in A0's endpoint at 6.2 ms + L; A2's not before 10.2 ms.
    let whole = one_message_of_two_run(BoostReceive::Whole);
    assert_eq!(boosts_of_a0(&whole), vec![], "one receive waits for both messages");
    let per_message = one_message_of_two_run(BoostReceive::PerMessage);
    let boost = (7 * MS, 0, TraceKind::Boost { process: RING_A0, displaced: Displaced::Computing });
    assert_eq!(boosts_of_a0(&per_message), vec![boost], "A1's message is a receive of its own");
    // A0 then takes A1's message and spins for A2's: the walks that follow start with A0, which has taken all
    // that is in, and find C (outside a receive) again.
    let c_again = events(&per_message, |k| matches!(k, TraceKind::Boost { process: 6, .. }));
    assert!(c_again.iter().any(|&(t, _, _)| (8 * MS..10 * MS).contains(&t)), "{c_again:?}");
}

fn on_cpu0(r: &RunResult, from_ms: u64, to_ms: u64) -> Vec<(u64, u32, TraceKind)> {
    events(r, |k| matches!(k, TraceKind::Boost { .. } | TraceKind::Preempt { .. } | TraceKind::Dispatch { .. }))
        .into_iter()
        .filter(|&(t, cpu, _)| cpu == 0 && (from_ms * MS..=to_ms * MS).contains(&t))
        .collect()
}

#[test]
fn a_periodic_boost_displaces_a_spinner_at_the_same_level_at_the_next_tick() {
    let r = periodic_boost_run(BoostWalk::TickBefore);
    assert_eq!(
        on_cpu0(&r, 2, 4),
        vec![
            // The 3 ms walk starts with A0, spinning: its endpoint has nothing;
            // the second pass finds C, outside a receive, and boosts it...
            (3 * MS, 0, TraceKind::Boost { process: C, displaced: Displaced::Spinning }),
            // ...and the scheduler, at the next boundary, runs C in place of A0,
            // though both are at level 59.
            (4 * MS, 0, TraceKind::Preempt { process: A0 }),
            (4 * MS, 0, TraceKind::Dispatch { process: C, switch_cost: true }),
        ]
    );
    // A1 runs 5.2-6.2 ms (B2 first): its message lands in A0's endpoint at
    // 6.2 ms + L; the 7 ms walk boosts A0, which displaces C at 8 ms and ends.
    assert_eq!(
        on_cpu0(&r, 5, 8),
        vec![
            (7 * MS, 0, TraceKind::Boost { process: A0, displaced: Displaced::Computing }),
            (8 * MS, 0, TraceKind::Preempt { process: C }),
            (8 * MS, 0, TraceKind::Dispatch { process: A0, switch_cost: true }),
        ]
    );
    // Kernel time at each walk: 3 ms: A0's endpoint + C's queue move; 4, 5, 6 ms:
    // A0's endpoint only; 7 ms: A0's endpoint + its queue move; 8 ms: A0's own
    // endpoint, just after the switch to it (A0 is found, nothing changes).
    let walks = (CHECK + QUEUE_MOVE) + 3 * CHECK + (CHECK + QUEUE_MOVE) + CHECK;
    assert_eq!(r.per_cpu_time[0].overhead_ns, walks);
    assert_eq!(finish_ns(&r, 3), 8 * MS + CS + CHECK);
    // A0 spun from 2.2 ms to 4 ms but for the 3 ms walk.
    assert_eq!(r.per_cpu_time[0].spin_ns, 1_800 * US - (CHECK + QUEUE_MOVE));
}

#[test]
fn a_walk_that_finds_the_running_process_changes_nothing() {
    let r = periodic_boost_run(BoostWalk::TickBefore);
    // From 4.2 to 7 ms C computes: each walk starts with C, checks the endpoint
    // of A0 (in a receive, no message yet) and finds C itself: no boost, no switch.
    assert_eq!(on_cpu0(&r, 5, 6), vec![]);
    // Alone after 8.2 ms, C is never boosted: at 25 ms its 20 ms quantum (less the
    // time the walks took from it) runs out, it drops to level 58 and goes on.
    let late = events(&r, |k| matches!(k, TraceKind::Boost { .. } | TraceKind::Demote { .. }));
    assert_eq!(late.last(), Some(&(25 * MS, 0, TraceKind::Demote { process: C, level: 58 })));
    assert!(late.iter().all(|&(t, _, _)| t <= 8 * MS || t == 25 * MS), "{late:?}");
}

#[test]
fn with_the_walk_at_the_same_tick_the_boost_takes_effect_at_once() {
    let r = periodic_boost_run(BoostWalk::SameTick);
    assert_eq!(
        on_cpu0(&r, 2, 4),
        vec![
            (3 * MS, 0, TraceKind::Boost { process: C, displaced: Displaced::Spinning }),
            (3 * MS, 0, TraceKind::Preempt { process: A0 }),
            (3 * MS, 0, TraceKind::Dispatch { process: C, switch_cost: true }),
        ]
    );
    let boosted_a0 = on_cpu0(&r, 5, 8);
    assert_eq!(boosted_a0[0], (7 * MS, 0, TraceKind::Boost { process: A0, displaced: Displaced::Computing }));
    assert_eq!(boosted_a0[1], (7 * MS, 0, TraceKind::Preempt { process: C }));
    // The walk runs before the switch to A0 (A0's endpoint, its queue move); A0 ends after the switch.
    assert_eq!(finish_ns(&r, 3), 7 * MS + CHECK + QUEUE_MOVE + CS);
}

#[test]
fn a_boost_breaks_a_pair_only_where_the_displaced_process_has_a_partner_running() {
    // Two two-task jobs of short iterations sharing two CPUs: their processes are often coscheduled.
    let pairs =
        simulate(&config(scheme("PB"), 2, 2), vec![job(1, 0, 2, 300 * US, 0, 40), job(2, 0, 2, 300 * US, 0, 40)]);
    let boosts = pairs.summary.boosts;
    let displacing = boosts.displacing_computing + boosts.displacing_spinning;
    assert!(boosts.breaking_a_coscheduled_pair > 0 && boosts.breaking_a_coscheduled_pair <= displacing, "{boosts:?}");
    // A job alone on the CPUs is never displaced, so no pair of its is broken.
    let alone = simulate(&config(scheme("PB"), 2, 2), vec![job(1, 0, 2, 300 * US, 0, 40)]).summary.boosts;
    assert_eq!(alone.breaking_a_coscheduled_pair, 0, "{alone:?}");
}

/// On EEVDF favouring a process preempts at once (the next buddy with a reschedule): a boost that may not
/// displace a computing process must leave out the reschedule, or the reading changes nothing there.
#[test]
fn on_eevdf_too_a_boost_that_displaces_only_spinners_changes_the_run() {
    let run = |displaces| {
        let mut cfg = config(scheme("PB"), 4, 3);
        cfg.node_scheduler = cosched_sim::OsScheduler::Eevdf;
        cfg.costs.boost_displaces = displaces;
        let jobs = vec![
            job(1, 0, 4, 300 * US, 100 * US, 60),
            job(2, 0, 4, 700 * US, 0, 40),
            job(3, 0, 2, 2 * MS, 0, 20),
            job(4, 0, 1, 30 * MS, 0, 1),
            job(5, MS, 3, 500 * US, 200 * US, 40),
        ];
        simulate(&cfg, jobs)
    };
    let (any, spinning) = (run(BoostDisplaces::Any), run(BoostDisplaces::Spinning));
    assert!(any.summary.boosts.displacing_computing > 0, "{:?}", any.summary.boosts);
    assert_ne!(any.jobs, spinning.jobs, "sparing computing processes changed nothing on EEVDF");
}
