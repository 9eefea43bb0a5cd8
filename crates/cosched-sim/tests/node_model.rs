//! Hand-computable timelines, one per rule of the node model and the schemes.

mod common;
use common::*;
use cosched_sim::trace::TraceKind;
use cosched_sim::Scheme;

#[test]
fn dedicated_job_takes_exactly_its_nominal_time() {
    for scheme in [Scheme::LOCAL, Scheme::GANG] {
        for tasks in [1, 2, 3, 8] {
            let mut cfg = config(scheme, 8, 5);
            // (GS's switch at every quantum's end is tested below.)
            cfg.costs.gang_switch_every_quantum = false;
            let program = cosched_sim::app::program_for(
                cosched_sim::JobType::by_number(1).unwrap(),
                tasks,
                2 * 1_000 * MS,
                &cfg.network,
            );
            let mut j = job(1, 0, tasks, 0, 0, 0);
            j.program = program;
            let r = simulate(&cfg, vec![j]);
            let rec = &r.jobs[0];
            assert_eq!(ns(rec.execution_s), ns(rec.dedicated_s), "{scheme} with {tasks} tasks");
            assert!((rec.dedicated_s - 2.0).abs() < 0.001, "close to nominal: {}", rec.dedicated_s);
            assert_eq!(r.summary.cpu_time.switch_ns, 0, "a job alone pays no switch");
        }
    }
}

#[test]
fn quantum_expiry_demotes_to_the_tail_of_the_next_level() {
    // Two CPU-bound single-task jobs on one CPU.
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 100 * MS, 0, 1), job(2, 0, 1, 100 * MS, 0, 1)]);
    let timeline = events(&r, |k| matches!(k, TraceKind::Demote { .. } | TraceKind::Dispatch { .. }));
    assert_eq!(
        &timeline[..5],
        &[
            (0, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            // Level 59's quantum is 20 ms: job 1 goes down to 58 at the 20 ms tick.
            (20 * MS, 0, TraceKind::Demote { process: 0, level: 58 }),
            (20 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: true }),
            // Job 2 starts after the 200 µs switch; its 20 ms end at 40.2 ms, noticed at the 41 ms tick.
            (41 * MS, 0, TraceKind::Demote { process: 1, level: 58 }),
            (41 * MS, 0, TraceKind::Dispatch { process: 0, switch_cost: true }),
        ]
    );
}

#[test]
fn context_switches_are_charged_as_cpu_time() {
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 100 * MS, 0, 1), job(2, 0, 1, 100 * MS, 0, 1)]);
    let switches = events(&r, |k| matches!(k, TraceKind::Dispatch { switch_cost: true, .. })).len() as u64;
    let time = r.summary.cpu_time;
    assert!(switches >= 5);
    assert_eq!(time.switch_ns, switches * CS);
    assert_eq!(time.useful_ns, 200 * MS);
    assert_eq!(time.idle_ns, 0);
    assert_eq!(ns(r.summary.span_s), 200 * MS + switches * CS);
}

#[test]
fn wake_boost_preempts_at_the_next_tick_and_not_before() {
    // Job 1 is CPU bound; job 2 computes 1 ms then does 5.3 ms of I/O, twice.
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 300 * MS, 0, 1), job(2, MS / 2, 1, MS, 5_300 * US, 2)]);
    let timeline = events(&r, |k| {
        matches!(
            k,
            TraceKind::Dispatch { .. } | TraceKind::Wake { .. } | TraceKind::Preempt { .. } | TraceKind::Block { .. }
        )
    });
    assert_eq!(
        &timeline[..7],
        &[
            (0, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            // Equal levels: job 2, arriving at 0.5 ms, waits for job 1's quantum to end.
            (20 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: true }),
            (21_200 * US, 0, TraceKind::Block { process: 1 }),
            (21_200 * US, 0, TraceKind::Dispatch { process: 0, switch_cost: true }),
            // Back from I/O at 26.5 ms at the head of level 59, above job 1 (now at 58)...
            (26_500 * US, 0, TraceKind::Wake { process: 1 }),
            // ...but the preemption waits for the 27 ms tick.
            (27 * MS, 0, TraceKind::Preempt { process: 0 }),
            (27 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: true }),
        ]
    );
}

/// The timeline above on an ideal machine whose context switch is free: a
/// process back from I/O that gets the CPU sends at once, as a process that
/// needs no switch does. (Once the dispatch waited for a switch of zero
/// length to end, nothing advanced the process, and the run panicked.)
#[test]
fn with_a_free_context_switch_a_process_back_from_io_goes_on_at_once() {
    let mut cfg = config(Scheme::LOCAL, 1, 2);
    cfg.costs.context_switch_ns = 0;
    let r = simulate(&cfg, vec![job(1, 0, 1, 300 * MS, 0, 1), job(2, MS / 2, 1, MS, 5_300 * US, 2)]);
    let timeline = events(&r, |k| {
        matches!(
            k,
            TraceKind::Dispatch { .. } | TraceKind::Wake { .. } | TraceKind::Preempt { .. } | TraceKind::Block { .. }
        )
    });
    assert_eq!(
        &timeline[..10],
        &[
            (0, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            (20 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: false }),
            (21 * MS, 0, TraceKind::Block { process: 1 }),
            (21 * MS, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            (26_300 * US, 0, TraceKind::Wake { process: 1 }),
            (27 * MS, 0, TraceKind::Preempt { process: 0 }),
            // Sends, receives nothing (one task) and computes its second iteration at once.
            (27 * MS, 0, TraceKind::Dispatch { process: 1, switch_cost: false }),
            (28 * MS, 0, TraceKind::Block { process: 1 }),
            (28 * MS, 0, TraceKind::Dispatch { process: 0, switch_cost: false }),
            (33_300 * US, 0, TraceKind::Wake { process: 1 }),
        ]
    );
    // Back from its last I/O, it exits when it gets the CPU at the 34 ms tick.
    assert_eq!(finish_ns(&r, 2), 34 * MS);
    assert_eq!(finish_ns(&r, 1), 300 * MS + 2 * MS);
    assert_eq!(r.summary.cpu_time.switch_ns, 0);
}

#[test]
fn an_idle_cpu_runs_a_woken_process_at_once() {
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, MS, 3_300 * US, 2)]);
    let wakes = events(&r, |k| matches!(k, TraceKind::Wake { .. } | TraceKind::Dispatch { .. }));
    assert_eq!(wakes[1], (4_300 * US, 0, TraceKind::Wake { process: 0 }));
    assert_eq!(wakes[2], (4_300 * US, 0, TraceKind::Dispatch { process: 0, switch_cost: false }));
    assert_eq!(finish_ns(&r, 1), 2 * 4_300 * US);
}

#[test]
fn every_second_all_processes_return_to_the_top_level() {
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 1_500 * MS, 0, 1), job(2, 0, 1, 1_500 * MS, 0, 1)]);
    let demotions = events(&r, |k| matches!(k, TraceKind::Demote { .. }));
    let level = |(_, _, k): &(u64, u32, TraceKind)| match k {
        TraceKind::Demote { level, .. } => *level,
        _ => unreachable!(),
    };
    let before: Vec<u8> = demotions.iter().filter(|e| e.0 < 1_000 * MS).map(level).collect();
    let after = demotions.iter().find(|e| e.0 > 1_000 * MS).map(level);
    assert!(*before.last().unwrap() < 50, "by 1 s both have sunk below level 50: {before:?}");
    assert_eq!(after, Some(58), "after the raise, the next demotion is from 59 to 58");
}

#[test]
fn message_latency_and_sender_serialisation() {
    // Three tasks on three nodes compute 1 ms, then each sends left, then right.
    let cfg = config(Scheme::LOCAL, 3, 1);
    let r = simulate(&cfg, vec![job(1, 0, 3, MS, 0, 1)]);
    let deposits = events(&r, |k| matches!(k, TraceKind::Deposit { .. }));
    let times: Vec<u64> = deposits.iter().map(|e| e.0).collect();
    // Every node gets its right neighbour's first message after L, and its
    // left neighbour's second message one interface time later.
    assert_eq!(times, vec![MS + L, MS + L, MS + L, MS + L + O, MS + L + O, MS + L + O]);
    assert_eq!(finish_ns(&r, 1), MS + L + O);
    let two = simulate(&config(Scheme::LOCAL, 2, 1), vec![job(1, 0, 2, MS, 0, 1)]);
    assert_eq!(finish_ns(&two, 1), MS + L, "one neighbour: one latency");
}

#[test]
fn receiving_interface_deposits_one_message_at_a_time() {
    // Jobs 1 (CPUs 0,1) and 2 (CPUs 2,0): at 1 ms both partners of CPU 0 send
    // to node 0 at once; the second message waits for the interface.
    let cfg = config(Scheme::LOCAL, 3, 2);
    let r = simulate(&cfg, vec![job(1, 0, 2, MS, 0, 1), job(2, 0, 2, MS, 0, 1)]);
    let to_node0: Vec<u64> =
        events(&r, |k| matches!(k, TraceKind::Deposit { .. })).into_iter().filter(|e| e.1 == 0).map(|e| e.0).collect();
    assert_eq!(to_node0, vec![MS + L, MS + L + O]);
}

#[test]
fn busy_wait_spins_on_the_cpu() {
    let cfg = config(Scheme::LOCAL, 3, 1);
    let r = simulate(&cfg, vec![job(1, 0, 3, MS, 0, 1)]);
    // Each CPU spins from 1 ms until its last message.
    assert_eq!(r.summary.cpu_time.spin_ns, 3 * (L + O));
    assert_eq!(r.summary.cpu_time.useful_ns, 3 * MS);
}

#[test]
fn gang_scheduling_idles_a_cpu_whose_process_blocks() {
    // Job 1 (row 0) computes 10 ms then does 30 ms of I/O; job 2 (row 1) computes 500 ms.
    let cfg = config(Scheme::GANG, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 10 * MS, 30 * MS, 1), job(2, 0, 1, 500 * MS, 0, 1)]);
    assert_eq!(finish_ns(&r, 1), 40 * MS);
    assert_eq!(start_ns(&r, 2), 0, "admitted at once into row 1");
    // Row 1 gets the CPU only at the 200 ms quantum boundary, after a 2 ms gang
    // switch; alone from then on, it still pays the switch at 400 and 600 ms.
    assert_eq!(finish_ns(&r, 2), 200 * MS + 3 * 2 * MS + 500 * MS);
    let time = r.summary.cpu_time;
    assert_eq!(time.idle_ns, 190 * MS, "idle during the I/O and the rest of row 0's quantum");
    assert_eq!(time.switch_ns, 3 * 2 * MS);
    assert_eq!(time.useful_ns, 510 * MS);
}

fn switch_row(kind: &TraceKind) -> u32 {
    match kind {
        TraceKind::GangSwitch { row, .. } => *row,
        other => panic!("not a gang switch: {other:?}"),
    }
}

#[test]
fn gang_scheduling_switches_all_cpus_together() {
    // Job 1 takes row 0 on CPUs 0-1; job 2 does not fit in row 0 and takes row 1 on CPUs 0-2.
    let cfg = config(Scheme::GANG, 4, 2);
    let r = simulate(&cfg, vec![job(1, 0, 2, 700 * MS, 0, 1), job(2, 0, 3, 700 * MS, 0, 1)]);
    let switches = events(&r, |k| matches!(k, TraceKind::GangSwitch { .. }));
    assert!(switches.len() >= 8);
    for chunk in switches.chunks(4) {
        let t = chunk[0].0;
        assert_eq!(t % (200 * MS), 0, "switches happen at quantum boundaries");
        let cpus: Vec<u32> = chunk.iter().map(|e| e.1).collect();
        assert_eq!(cpus, vec![0, 1, 2, 3], "all CPUs switch at {t}");
        assert!(chunk.iter().all(|e| e.0 == t && switch_row(&e.2) == switch_row(&chunk[0].2)));
    }
    // Rows alternate: 0 (start, no switch), 1 at 200 ms, 0 at 400 ms, ...
    assert_eq!(switch_row(&switches[0].2), 1);
    assert_eq!(switch_row(&switches[4].2), 0);
    // Job 1's process 0 is CPU 0's cell in row 0; job 2's processes 2-4 are CPUs 0-2's in row 1, CPU 3's is empty.
    assert_eq!(switches[0].2, TraceKind::GangSwitch { row: 1, cell: Some(2) });
    assert_eq!(switches[3].2, TraceKind::GangSwitch { row: 1, cell: None });
    assert_eq!(switches[4].2, TraceKind::GangSwitch { row: 0, cell: Some(0) });
    // Job 1 needs 700 ms of CPU: its first slice is a whole 200 ms (no switch
    // before it), the next ones 198 ms; it finishes in its 4th slice, then
    // exchanges one message (latency L).
    assert_eq!(finish_ns(&r, 1), 1_200 * MS + 2 * MS + (700 - 200 - 2 * 198) * MS + L);
}

#[test]
fn fcfs_head_of_line_job_blocks_smaller_jobs_behind_it() {
    let cfg = config(Scheme::LOCAL, 3, 1);
    let r = simulate(
        &cfg,
        vec![job(1, 0, 2, 50 * MS, 0, 1), job(2, MS, 2, 50 * MS, 0, 1), job(3, 2 * MS, 1, 10 * MS, 0, 1)],
    );
    let a_done = finish_ns(&r, 1);
    assert_eq!(start_ns(&r, 2), a_done);
    assert_eq!(start_ns(&r, 3), a_done, "job 3 fits on CPU 2 but waits behind job 2");
    let gs = simulate(
        &config(Scheme::GANG, 3, 1),
        vec![job(1, 0, 2, 50 * MS, 0, 1), job(2, MS, 2, 50 * MS, 0, 1), job(3, 2 * MS, 1, 10 * MS, 0, 1)],
    );
    assert_eq!(start_ns(&gs, 3), finish_ns(&gs, 1));
}

#[test]
fn mpl_limits_processes_per_cpu() {
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 30 * MS, 0, 1), job(2, 0, 1, 60 * MS, 0, 1), job(3, 0, 1, 10 * MS, 0, 1)]);
    assert_eq!(start_ns(&r, 1), 0);
    assert_eq!(start_ns(&r, 2), 0);
    assert_eq!(start_ns(&r, 3), finish_ns(&r, 1).min(finish_ns(&r, 2)));
    assert_eq!(r.summary.longest_queue, 1);
    let gs = simulate(
        &config(Scheme::GANG, 1, 2),
        vec![job(1, 0, 1, 30 * MS, 0, 1), job(2, 0, 1, 60 * MS, 0, 1), job(3, 0, 1, 10 * MS, 0, 1)],
    );
    assert_eq!(start_ns(&gs, 3), finish_ns(&gs, 1), "two rows only: job 3 takes job 1's cell");
}

#[test]
fn gang_scheduling_charges_the_switch_at_every_quantum_even_with_one_row() {
    // One job of 500 ms alone: quanta end at 200 and 400 ms; each costs a 2 ms gang switch.
    let cfg = config(Scheme::GANG, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 500 * MS, 0, 1)]);
    let switches = events(&r, |k| matches!(k, TraceKind::GangSwitch { .. }));
    assert_eq!(
        switches,
        vec![
            (200 * MS, 0, TraceKind::GangSwitch { row: 0, cell: Some(0) }),
            (400 * MS, 0, TraceKind::GangSwitch { row: 0, cell: Some(0) })
        ]
    );
    assert_eq!(finish_ns(&r, 1), 504 * MS);
    assert_eq!(r.summary.cpu_time.switch_ns, 4 * MS);
    // The cheaper reading: no cost while the row does not change.
    let mut free = cfg.clone();
    free.costs.gang_switch_every_quantum = false;
    let r = simulate(&free, vec![job(1, 0, 1, 500 * MS, 0, 1)]);
    assert_eq!(finish_ns(&r, 1), 500 * MS);
    assert_eq!(r.summary.cpu_time.switch_ns, 0);
}

/// cosched's agents stop and start only the jobs that leave or enter the slot: a job alone is never
/// switched, whatever the quantum (the study's GS pays the switch at every quantum, above).
#[test]
fn cosched_gang_switches_nothing_while_a_job_is_alone() {
    let cfg = config(Scheme::COSCHED_GANG, 1, 2);
    assert!(cfg.costs.gang_switch_every_quantum, "the study's reading is the default, and does not apply");
    let r = simulate(&cfg, vec![job(1, 0, 1, 500 * MS, 0, 1)]);
    assert!(events(&r, |k| matches!(k, TraceKind::GangSwitch { .. })).is_empty());
    assert_eq!(finish_ns(&r, 1), 500 * MS);
    assert_eq!(r.summary.cpu_time.switch_ns, 0);
}

/// Two one-task jobs take turns on one CPU under GS-cosched: each switch costs the gang switch
/// (2 ms) and the incoming job's cache refill, its working set's part of the CPU's cache (a
/// measured machine's 1 ms for 1 MiB): 0.5 ms for job 1's 512 KiB, all of it for job 2's 4 MiB.
#[test]
fn cosched_gang_charges_the_incoming_jobs_cache_refill_at_each_switch() {
    let mut cfg = config(Scheme::COSCHED_GANG, 1, 2);
    (cfg.costs.cache_bytes, cfg.costs.cache_refill_ns) = (1 << 20, MS);
    let mut jobs = vec![job(1, 0, 1, 500 * MS, 0, 1), job(2, 0, 1, 500 * MS, 0, 1)];
    (jobs[0].program.working_set_bytes, jobs[1].program.working_set_bytes) = (512 << 10, 4 << 20);
    let r = simulate(&cfg, jobs);
    let switches = events(&r, |k| matches!(k, TraceKind::GangSwitch { .. }));
    assert_eq!(switches.iter().map(|e| e.0).collect::<Vec<_>>(), [200 * MS, 400 * MS, 600 * MS, 800 * MS]);
    // Job 1: 200 ms, then 197.5 ms at 400 and at 800 ms after 2 + 0.5 ms: 102.5 ms left there.
    assert_eq!(finish_ns(&r, 1), 800 * MS + 2_500_000 + 102_500_000);
    // Job 2: 197 ms at 200 and at 600 ms after 2 + 1 ms; alone at 905 ms, it takes the CPU at once
    // with no switch but its refill (1 ms), and needs 106 ms more.
    assert_eq!(finish_ns(&r, 2), 905 * MS + MS + 106 * MS);
    assert_eq!(r.summary.cpu_time.switch_ns, 4 * 2 * MS + 2 * 500_000 + 3 * MS);
}

#[test]
fn a_tick_inside_a_context_switch_is_deferred_to_its_end() {
    // Y (100 ms of compute) runs first; at 20 ms its quantum expires and it
    // drops to level 58. X computes 20.2-20.9 ms, then 50 µs of I/O; the switch
    // back to Y runs 20.9-21.1 ms, and X wakes at 20.95 ms at level 59. The
    // 21 ms tick falls inside that switch: the scheduler acts at its end,
    // 21.1 ms, and runs X in place of Y (were the tick dropped, at 22 ms).
    let cfg = config(Scheme::LOCAL, 1, 2);
    let r = simulate(&cfg, vec![job(1, 0, 1, 100 * MS, 0, 1), job(2, 0, 1, 700 * US, 50 * US, 2)]);
    let (y, x) = (0, 1);
    let timeline: Vec<_> =
        events(&r, |k| matches!(k, TraceKind::Preempt { .. } | TraceKind::Dispatch { .. } | TraceKind::Wake { .. }))
            .into_iter()
            .filter(|&(t, _, _)| (20 * MS..=23 * MS).contains(&t))
            .collect();
    assert_eq!(
        timeline,
        vec![
            (20 * MS, 0, TraceKind::Dispatch { process: x, switch_cost: true }),
            (20_900 * US, 0, TraceKind::Dispatch { process: y, switch_cost: true }),
            (20_950 * US, 0, TraceKind::Wake { process: x }),
            (21_100 * US, 0, TraceKind::Preempt { process: y }),
            (21_100 * US, 0, TraceKind::Dispatch { process: x, switch_cost: true }),
            // X computes 21.3-22.0 ms; its second I/O ends at 22.05 ms inside the
            // switch to Y (22.0-22.2 ms), where no tick falls: the 23 ms tick acts.
            (22 * MS, 0, TraceKind::Dispatch { process: y, switch_cost: true }),
            (22_050 * US, 0, TraceKind::Wake { process: x }),
            (23 * MS, 0, TraceKind::Preempt { process: y }),
            (23 * MS, 0, TraceKind::Dispatch { process: x, switch_cost: true }),
        ]
    );
    assert_eq!(finish_ns(&r, 2), 23 * MS + CS);
}

#[test]
fn delivered_utilization_counts_the_work_given_not_compute_alone() {
    // 10 ms of compute and 30 ms of I/O, alone on one CPU: the CPU computes a
    // quarter of the time, yet it delivers the job's whole dedicated work.
    let r = simulate(&config(Scheme::LOCAL, 1, 2), vec![job(1, 0, 1, 10 * MS, 30 * MS, 1)]);
    let s = &r.summary;
    assert_eq!(ns(s.span_s), 40 * MS);
    assert!((s.delivered_utilization - 1.0).abs() < 1e-12, "{}", s.delivered_utilization);
    assert!((s.compute_utilization - 0.25).abs() < 1e-12, "{}", s.compute_utilization);
    // Two such jobs arriving 50 ms apart on two CPUs: while jobs arrive (0-50 ms),
    // the first delivers its 40 ms of work, exactly what was offered.
    let jobs = vec![job(1, 0, 1, 10 * MS, 30 * MS, 1), job(2, 50 * MS, 1, 10 * MS, 30 * MS, 1)];
    let r = simulate(&config(Scheme::LOCAL, 2, 2), jobs);
    let s = &r.summary;
    assert!((s.delivered_utilization_during_arrivals - 0.4).abs() < 1e-12);
    assert!((s.offered_utilization_during_arrivals - 0.4).abs() < 1e-12);
    assert!((s.saturation.delivered_share - 1.0).abs() < 1e-12 && !s.saturation.saturated, "{:?}", s.saturation);
}
