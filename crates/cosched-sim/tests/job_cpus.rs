//! Each job's record names the CPUs its processes ran on: one per task, all
//! on the machine, the ones the trace placed its tasks on; and under
//! time-sharing jobs that overlap in time hold some of the same CPUs.

mod common;

use common::{config, job, MS};
use cosched_sim::engine::fast::FastSettings;
use cosched_sim::run::{run, RunOptions, RunResult};
use cosched_sim::trace::TraceKind;
use cosched_sim::{CpuSet, JobRecord, NodeKind, OsScheduler, Scheme, SimConfig, SimJob};

const WIDTHS: [u32; 12] = [3, 1, 8, 2, 5, 1, 4, 6, 2, 7, 1, 3];

/// Jobs of every width up to the machine (4 nodes × 2 CPUs), of `iterations` of 3 ms, arriving faster than they
/// finish.
fn overlapping_jobs(iterations: u32) -> Vec<SimJob> {
    let job_of = |(i, &tasks): (usize, &u32)| job(i as u64 + 1, i as u64 * 5 * MS, tasks, 2 * MS, MS, iterations);
    WIDTHS.iter().enumerate().map(job_of).collect()
}

fn machine(scheme: Scheme) -> SimConfig {
    let node_scheduler = match scheme.node() {
        NodeKind::GangSlotsOverEevdf => OsScheduler::Eevdf,
        _ => OsScheduler::default(),
    };
    SimConfig { cpus_per_node: 2, node_scheduler, ..config(scheme, 4, 3) }
}

fn simulate(cfg: &SimConfig, jobs: Vec<SimJob>, fast: Option<FastSettings>) -> RunResult {
    let options = RunOptions { record_trace: true, fast, ..RunOptions::default() };
    run(cfg, jobs, &options, |_| {}).expect("valid scenario")
}

/// The CPUs the trace placed each job's tasks on, by job number (the jobs are numbered from 1 in arrival order).
fn placed_cpus(result: &RunResult, job_number: u64) -> CpuSet {
    let job_index = (job_number - 1) as u32;
    let placed =
        result.trace.iter().filter(|e| matches!(e.kind, TraceKind::TaskPlaced { job, .. } if job == job_index));
    CpuSet::from_cpus(placed.map(|e| e.cpu))
}

fn check_records(name: &str, cfg: &SimConfig, result: &RunResult) {
    assert_eq!(result.jobs.len(), WIDTHS.len(), "{name}: every job finishes");
    for record in &result.jobs {
        assert_eq!(record.cpus.len(), record.tasks as usize, "{name}: one CPU per task: {record:?}");
        assert!(record.cpus.iter().all(|cpu| cpu < cfg.cpu_count()), "{name}: a CPU off the machine: {record:?}");
        assert_eq!(record.cpus, placed_cpus(result, record.job_number), "{name}: job {}", record.job_number);
    }
}

fn share_a_cpu_at_once(a: &JobRecord, b: &JobRecord) -> bool {
    let overlap_in_time = a.start_s < b.finish_s && b.start_s < a.finish_s;
    overlap_in_time && a.cpus.iter().any(|cpu| b.cpus.iter().any(|other| other == cpu))
}

#[test]
fn every_scheme_records_one_machine_cpu_per_task_where_the_tasks_were_placed() {
    for name in Scheme::all_names() {
        let cfg = machine(name.parse().unwrap());
        check_records(name, &cfg, &simulate(&cfg, overlapping_jobs(20), None));
    }
}

#[test]
fn fast_mode_records_them_too() {
    for name in ["Local", "GS", "SB"] {
        let cfg = machine(name.parse().unwrap());
        // Jobs of 2000 iterations (6 s alone): long enough for fast mode to skip ahead.
        let result = simulate(&cfg, overlapping_jobs(2_000), Some(FastSettings::default()));
        assert!(result.summary.fast_mode.is_some_and(|f| f.jumps > 0), "{name}: fast mode skipped ahead");
        check_records(name, &cfg, &result);
    }
}

#[test]
fn time_sharing_jobs_hold_the_same_cpus_at_once() {
    for name in ["Local", "GS"] {
        let result = simulate(&machine(name.parse().unwrap()), overlapping_jobs(20), None);
        let jobs = &result.jobs;
        let shared = jobs.iter().enumerate().any(|(i, a)| jobs[i + 1..].iter().any(|b| share_a_cpu_at_once(a, b)));
        assert!(shared, "{name}: with MPL 3 some jobs share CPUs");
    }
}

/// A job of more tasks than CPUs (an oversubscribed real job) deals them over its CPUs in blocks, as an MPI
/// launcher maps ranks by slot, and the node's scheduler shares each CPU between them; a gang cell, which runs
/// one process, refuses it.
#[test]
fn an_oversubscribed_job_deals_its_tasks_in_blocks_under_the_nodes_scheduler() {
    let cfg = SimConfig { cpus_per_node: 2, ..config(Scheme::LOCAL, 1, 4) };
    let mut four_on_two = job(1, 0, 4, 2 * MS, 0, 10);
    four_on_two.cpus = 2;
    let result = simulate(&cfg, vec![four_on_two.clone()], None);
    let placed: Vec<(u32, TraceKind)> = result
        .trace
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::TaskPlaced { .. }))
        .map(|e| (e.cpu, e.kind))
        .collect();
    let expected: Vec<(u32, TraceKind)> =
        (0..4).map(|p| (p / 2, TraceKind::TaskPlaced { job: 0, process: p })).collect();
    assert_eq!(placed, expected);
    assert_eq!(result.jobs[0].cpus, CpuSet::from_cpus([0, 1]));
    // Two tasks per CPU, each 20 ms of compute: at least 40 ms.
    assert!(result.jobs[0].finish_s >= 0.040, "{:?}", result.jobs[0]);
    for scheme in [Scheme::GANG, Scheme::COSCHED_GANG] {
        let refused =
            run(&SimConfig { scheme, ..cfg.clone() }, vec![four_on_two.clone()], &RunOptions::default(), |_| {});
        let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("runs 4 tasks on 2 CPUs"), "{scheme}: {error}");
    }
    let mut crowded = job(1, 0, 17, 2 * MS, 0, 10);
    crowded.cpus = 2;
    let error = run(&cfg, vec![crowded], &RunOptions::default(), |_| {}).err().map(|e| e.to_string());
    assert!(error.unwrap_or_default().contains("at most 8 tasks per CPU"));
}
