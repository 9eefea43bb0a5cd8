//! Results over time: each run's stretches average to the run's own means (Little's law on the job records, and
//! the summary's delivered utilization),
//! under FCFS and under EASY backfilling, on a saturated machine and a quiet one.

use cosched_lab::batch::Unwatched;
use cosched_lab::series::{over_time, STRETCHES};
use cosched_lab::sim::{prepare, SimSettings};
use cosched_lab::workload::WorkloadSpec;
use cosched_sim::config::Backfill;
use cosched_sim::run::RunOptions;
use cosched_sim::SimConfig;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn the_stretches_average_to_the_runs_own_means() {
    for (load, backfill) in [(0.5, Backfill::None), (3.0, Backfill::None), (3.0, Backfill::Easy)] {
        let schemes = ["Local", "GS", "PB-SB"].iter().map(|n| n.parse().unwrap()).collect();
        let machine = SimConfig { nodes: 8, mpl: 1, seed: 3, backfill, ..SimConfig::default() };
        let workload = WorkloadSpec {
            jobs: Some(40),
            model_procs: 8,
            seed: 3,
            target_load: Some(load),
            ..WorkloadSpec::default()
        };
        let prepared = prepare(&SimSettings { schemes, machine, workload, ..SimSettings::default() }).unwrap();
        let mut waited = false;
        for r in prepared.run(&RunOptions::default(), &Unwatched).unwrap() {
            let s = &r.summary;
            let stretches = over_time(&r.jobs, 8, s.span_s, STRETCHES);
            assert_eq!(stretches.len(), STRETCHES);
            assert_eq!(stretches.last().unwrap().to_s, s.span_s);
            let mean =
                |f: fn(&cosched_lab::series::Stretch) -> f64| stretches.iter().map(f).sum::<f64>() / STRETCHES as f64;
            let jobs = s.jobs_completed as f64;
            let what = format!("{} at load {load}, {backfill:?}", s.scheme);
            assert!(close(mean(|x| x.waiting_jobs), jobs * s.mean_wait_s / s.span_s), "waiting, {what}");
            assert!(close(mean(|x| x.running_jobs), jobs * s.mean_execution_s / s.span_s), "running, {what}");
            let process_s: f64 = r.jobs.iter().map(|j| f64::from(j.tasks) * j.execution_s).sum();
            assert!(close(mean(|x| x.processes_per_cpu), process_s / (8.0 * s.span_s)), "per CPU, {what}");
            assert!(close(mean(|x| x.delivered_utilization), s.delivered_utilization), "delivered, {what}");
            waited |= stretches.iter().any(|x| x.waiting_jobs > 0.5);
        }
        assert!(waited || load < 1.0, "at load {load} some scheme's queue builds");
    }
}
