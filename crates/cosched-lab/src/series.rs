//! Results over time, from a run's job records: jobs waiting, jobs running, processes per CPU and delivered
//! utilization, each the mean over one of equal stretches of the run. Each is a step function of the records (a
//! job waits from its arrival to its start, runs from its start to its finish), integrated exactly over each
//! stretch, so the mean of a column over the stretches is the run's own time average: jobs waiting on average =
//! Σ wait / span (Little's law), jobs running = Σ execution / span, processes per CPU = Σ tasks × execution /
//! (CPUs × span), delivered utilization = Σ tasks × dedicated time / (CPUs × span), the summary's. A job's
//! delivered work is spread evenly over its execution: the records say how much it got, not when (a
//! time-shared job's share varies within its run). Only finished jobs have records: a run cut short leaves out
//! the jobs still in the machine.

use crate::csv::{float, num, text, to_csv, Column};
use cosched_sim::metrics::JobRecord;
use cosched_sim::run::RunResult;

/// Stretches a run is cut into (our choice: enough to see a queue build, few enough to read).
pub const STRETCHES: usize = 200;

/// One stretch of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Stretch {
    pub from_s: f64,
    pub to_s: f64,
    pub waiting_jobs: f64,
    pub running_jobs: f64,
    pub processes_per_cpu: f64,
    /// Work delivered (tasks × dedicated time) per CPU-second.
    pub delivered_utilization: f64,
}

/// The run from 0 to `span_s` cut into `stretches` equal stretches; each column the mean over its stretch.
pub fn over_time(jobs: &[JobRecord], cpus: u32, span_s: f64, stretches: usize) -> Vec<Stretch> {
    assert!(stretches > 0 && cpus > 0, "at least one stretch and one CPU");
    let width_s = span_s / stretches as f64;
    let mut waiting = vec![0.0; stretches];
    let mut running = vec![0.0; stretches];
    let mut processes = vec![0.0; stretches];
    let mut delivered = vec![0.0; stretches];
    if width_s > 0.0 {
        for job in jobs {
            spread(&mut waiting, width_s, job.arrival_s, job.start_s, 1.0);
            spread(&mut running, width_s, job.start_s, job.finish_s, 1.0);
            spread(&mut processes, width_s, job.start_s, job.finish_s, f64::from(job.tasks) / f64::from(cpus));
            if job.finish_s > job.start_s {
                let work_per_s = f64::from(job.tasks) * job.dedicated_s / (job.finish_s - job.start_s);
                spread(&mut delivered, width_s, job.start_s, job.finish_s, work_per_s / f64::from(cpus));
            }
        }
    }
    let mean = |total: f64| if width_s > 0.0 { total / width_s } else { 0.0 };
    (0..stretches)
        .map(|k| Stretch {
            from_s: k as f64 * width_s,
            to_s: if k + 1 == stretches { span_s } else { (k + 1) as f64 * width_s },
            waiting_jobs: mean(waiting[k]),
            running_jobs: mean(running[k]),
            processes_per_cpu: mean(processes[k]),
            delivered_utilization: mean(delivered[k]),
        })
        .collect()
}

/// Add `weight` × the time `[from_s, to_s)` spends in each stretch.
fn spread(totals: &mut [f64], width_s: f64, from_s: f64, to_s: f64, weight: f64) {
    if to_s <= from_s {
        return;
    }
    let last = totals.len() - 1;
    let first_k = ((from_s / width_s) as usize).min(last);
    let last_k = ((to_s / width_s) as usize).min(last);
    for (k, total) in totals.iter_mut().enumerate().take(last_k + 1).skip(first_k) {
        let (low, high) = (k as f64 * width_s, if k == last { f64::INFINITY } else { (k + 1) as f64 * width_s });
        let overlap = to_s.min(high) - from_s.max(low);
        if overlap > 0.0 {
            *total += weight * overlap;
        }
    }
}

/// One row of `series.csv`.
pub struct SeriesRow<'a> {
    pub scheme: &'a str,
    pub stretch: Stretch,
}

fn series_columns<'a>() -> Vec<Column<SeriesRow<'a>>> {
    vec![
        text("scheme", |r| crate::csv::csv_field(r.scheme)),
        float("from_s", |r| num(r.stretch.from_s)),
        float("to_s", |r| num(r.stretch.to_s)),
        float("waiting_jobs", |r| num(r.stretch.waiting_jobs)),
        float("running_jobs", |r| num(r.stretch.running_jobs)),
        float("processes_per_cpu", |r| num(r.stretch.processes_per_cpu)),
        float("delivered_utilization", |r| num(r.stretch.delivered_utilization)),
    ]
}

/// Every run's stretches (see `over_time`), runs in order.
pub fn runs_over_time(results: &[RunResult], cpus: &[u32]) -> Vec<(String, Vec<Stretch>)> {
    results
        .iter()
        .zip(cpus)
        .map(|(r, &cpus)| (r.summary.scheme.clone(), over_time(&r.jobs, cpus, r.summary.span_s, STRETCHES)))
        .collect()
}

/// `series.csv`: each run's stretches, runs in order.
pub fn series_csv(runs: &[(String, Vec<Stretch>)]) -> String {
    let rows: Vec<SeriesRow> = runs
        .iter()
        .flat_map(|(scheme, stretches)| stretches.iter().map(move |s| SeriesRow { scheme, stretch: s.clone() }))
        .collect();
    to_csv(&series_columns(), &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(arrival_s: f64, start_s: f64, finish_s: f64, tasks: u32) -> JobRecord {
        JobRecord {
            job_number: 0,
            job_type: "J1".into(),
            tasks,
            iterations: 1,
            arrival_s,
            start_s,
            finish_s,
            wait_s: start_s - arrival_s,
            execution_s: finish_s - start_s,
            response_s: finish_s - arrival_s,
            dedicated_s: finish_s - start_s,
            slowdown: 1.0,
            bounded_slowdown: 1.0,
            cpus: Default::default(),
        }
    }

    #[test]
    fn a_hand_worked_run_gives_each_stretch_its_mean() {
        // Four CPUs, 0..4 s in four stretches: A (2 tasks) runs 0..3; B (4 tasks) waits 1..3, runs 3..4 (a 0.5 s
        // job slowed twofold).
        let jobs = [record(0.0, 0.0, 3.0, 2), JobRecord { dedicated_s: 0.5, ..record(1.0, 3.0, 4.0, 4) }];
        let got = over_time(&jobs, 4, 4.0, 4);
        let waiting: Vec<f64> = got.iter().map(|s| s.waiting_jobs).collect();
        let running: Vec<f64> = got.iter().map(|s| s.running_jobs).collect();
        let per_cpu: Vec<f64> = got.iter().map(|s| s.processes_per_cpu).collect();
        assert_eq!(waiting, [0.0, 1.0, 1.0, 0.0]);
        assert_eq!(running, [1.0, 1.0, 1.0, 1.0]);
        assert_eq!(per_cpu, [0.5, 0.5, 0.5, 1.0]);
        let delivered: Vec<f64> = got.iter().map(|s| s.delivered_utilization).collect();
        assert_eq!(delivered, [0.5, 0.5, 0.5, 0.5]);
        assert_eq!((got[3].from_s, got[3].to_s), (3.0, 4.0));
    }
}
