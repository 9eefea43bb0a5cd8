//! GS-cosched-kernel: cosched's gang slots over the kernel's EEVDF. A job alone is never frozen and runs as
//! under local scheduling; jobs of more tasks than CPUs take turns whole, none of a frozen job's processes
//! running in another's slot; a thaw wakes the ranks as a task's wake is placed.

mod common;

use common::{config, events, job, simulate, MS};
use cosched_sim::engine::fast::{FastSettings, NotValidated};
use cosched_sim::run::{run, RunOptions};
use cosched_sim::trace::TraceKind;
use cosched_sim::{OsScheduler, Scheme, SimConfig, SimJob};

/// One node of two CPUs under `scheme` on EEVDF, rows for `mpl` jobs, gang slots of 10 ms.
fn node(scheme: Scheme, mpl: u32) -> SimConfig {
    let mut cfg = SimConfig { cpus_per_node: 2, node_scheduler: OsScheduler::Eevdf, ..config(scheme, 1, mpl) };
    cfg.costs.gang_quantum_ns = 10 * MS;
    cfg
}

/// A job of `tasks` tasks on two CPUs, iterations of 2 ms compute and `io_ns` of I/O.
fn four_on_two(number: u64, tasks: u32, io_ns: u64) -> SimJob {
    SimJob { cpus: 2, ..job(number, 0, tasks, 2 * MS, io_ns, 30) }
}

#[test]
fn a_lone_job_is_never_frozen_and_finishes_as_under_local_scheduling() {
    let alone = |scheme| simulate(&node(scheme, 2), vec![four_on_two(1, 4, MS)]);
    let (gang, local) = (alone(Scheme::COSCHED_GANG_KERNEL), alone(Scheme::LOCAL));
    assert_eq!(gang.jobs[0].finish_s, local.jobs[0].finish_s, "no switch, no freeze: {:?}", gang.jobs[0]);
    let switches: Vec<_> =
        events(&gang, |k| matches!(k, TraceKind::GangSwitch { .. })).into_iter().filter(|e| e.0 > 0).collect();
    assert!(switches.is_empty(), "after its start a lone job's CPUs switch nothing: {switches:?}");
}

/// After the first slot starts, every process dispatched belongs to the job of the slot's row: a frozen job
/// never runs in another's slot, however many tasks share a CPU.
#[test]
fn oversubscribed_jobs_take_turns_whole() {
    for io_ns in [0, MS] {
        let result =
            simulate(&node(Scheme::COSCHED_GANG_KERNEL, 2), vec![four_on_two(1, 4, io_ns), four_on_two(2, 4, io_ns)]);
        assert_eq!(result.jobs.len(), 2, "both finish");
        let job_of = |process: u32| process / 4;
        let mut running_job = None;
        let mut switches = 0;
        for event in &result.trace {
            match event.kind {
                TraceKind::GangSwitch { cell: Some(p), .. } => {
                    running_job = Some(job_of(p));
                    switches += 1;
                }
                // (At 0 both jobs are admitted before the plan freezes the second.)
                TraceKind::Dispatch { process, .. } if event.time_ns > 0 => {
                    assert_eq!(Some(job_of(process)), running_job, "io {io_ns}: at {} ns: {event:?}", event.time_ns);
                }
                _ => {}
            }
        }
        assert!(switches > 4, "io {io_ns}: the jobs took turns ({switches} switches)");
        // Each alone would take at least 2 × 30 × 2 ms of its CPUs; taking turns, the last ends after both.
        let last_s = result.jobs.iter().map(|r| r.finish_s).fold(0.0, f64::max);
        assert!(last_s >= 0.240, "io {io_ns}: {last_s} s");
    }
}

/// Three jobs of four spinning ranks on two CPUs taking 60 ms turns: each job is frozen 120 ms between its slots,
/// long enough for its ranks' decayed loads to fall to a few percent.
fn three_long_turns() -> cosched_sim::run::RunResult {
    let mut cfg = node(Scheme::COSCHED_GANG_KERNEL, 3);
    cfg.costs.gang_quantum_ns = 60 * MS;
    simulate(&cfg, (1..=3).map(|n| SimJob { cpus: 2, ..job(n, 0, 4, 2 * MS, 0, 150) }).collect())
}

/// A thaw is a wake by the agent's thread, and a rank frozen long weighs little: where its own CPU is taken,
/// `wake_affine_weight` moves it to the waker's CPU. On a busy node no thaw looks further for an idle CPU
/// (SIS_UTIL), so most slots start with three of a job's four ranks on one CPU, as on the kernel
/// (docs/reproduction-real/spin-barrier-copies/gang-63ms-slots.txt), and the others two per CPU.
#[test]
fn a_thaw_moves_long_frozen_ranks_to_the_waker_and_stacks_some() {
    let result = three_long_turns();
    assert_eq!(result.jobs.len(), 3, "all finish");
    let moves_at_switches = events(&result, |k| matches!(k, TraceKind::Migrate { .. }))
        .into_iter()
        .filter(|&(t, _, _)| t > 0 && t % (60 * MS) == 0)
        .count();
    assert!(moves_at_switches > 0, "a thaw moved a rank");
    let (mut slots, mut stacked) = (0, 0);
    let mut first_cpu_of_rank: Vec<Option<u32>> = vec![None; 12];
    let mut close_slot = |first: &mut Vec<Option<u32>>| {
        let on_cpu0 = first.iter().filter(|c| **c == Some(0)).count();
        if first.iter().filter(|c| c.is_some()).count() == 4 {
            slots += 1;
            stacked += (on_cpu0 != 2) as u32;
        }
        first.iter_mut().for_each(|c| *c = None);
    };
    for event in result.trace.iter().filter(|e| e.time_ns > 0) {
        match event.kind {
            TraceKind::GangSwitch { .. } if event.cpu == 0 => close_slot(&mut first_cpu_of_rank),
            TraceKind::Dispatch { process, .. } => {
                first_cpu_of_rank[process as usize].get_or_insert(event.cpu);
            }
            _ => {}
        }
    }
    assert!(slots > 10, "{slots} slots");
    // (A thaw that took each rank to an idle CPU, as an interrupt's wake, stacked 15 of 48.)
    let uneven = format!("{stacked} of {slots} slots started with the ranks dealt unevenly");
    assert!(2 * stacked > slots && stacked < slots, "{uneven}");
}

#[test]
fn gang_slots_over_eevdf_need_eevdf_and_the_gang_cell_still_refuses_more_tasks_than_cpus() {
    let fast = RunOptions { fast: Some(FastSettings::default()), ..RunOptions::default() };
    let fast_run = run(&node(Scheme::COSCHED_GANG_KERNEL, 2), vec![four_on_two(1, 4, 0)], &fast, |_| {});
    let report = fast_run.expect("fast mode is measured for the gang slots").summary.fast_mode.expect("a fast run");
    // Its bounds were measured on one-CPU nodes; these have two.
    assert_eq!(
        (report.validated_error, report.not_validated),
        (None, Some(NotValidated::CpusPerNode { cpus_per_node: 2 }))
    );
    let mlfq = SimConfig { node_scheduler: OsScheduler::Mlfq, ..node(Scheme::COSCHED_GANG_KERNEL, 2) };
    let error = run(&mlfq, vec![four_on_two(1, 4, 0)], &RunOptions::default(), |_| {}).err().map(|e| e.to_string());
    assert!(error.unwrap_or_default().contains("--node-scheduler eevdf"));
    let cell = run(&node(Scheme::COSCHED_GANG, 2), vec![four_on_two(1, 4, 0)], &RunOptions::default(), |_| {});
    assert!(cell.err().map(|e| e.to_string()).unwrap_or_default().contains("runs 4 tasks on 2 CPUs"));
}
