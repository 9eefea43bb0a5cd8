//! Schemes side by side on one workload (`cosched sim`): the same jobs, the
//! same machine, one run per scheme; and the CSV files of their results.

use crate::batch::{run_all, BatchWatch};
use crate::csv::{column, csv_field, num, to_csv, Column};
use crate::workload::{load_workload, LoadedWorkload, WorkloadSpec};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{RunOptions, RunResult};
use cosched_sim::{JobRecord, Mix, Scheme, SimConfig, Summary};

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimSettings {
    /// One run per scheme, in this order.
    pub schemes: Vec<Scheme>,
    /// Every machine, network, cost and scheduler parameter; its `scheme` is replaced by each of `schemes`.
    pub machine: SimConfig,
    pub workload: WorkloadSpec,
    pub mix: Mix,
}

impl Default for SimSettings {
    /// The reference comparison: Local against GS on the default machine and workload (WL7).
    fn default() -> Self {
        SimSettings {
            schemes: vec![Scheme::LOCAL, Scheme::GANG],
            machine: SimConfig::default(),
            workload: WorkloadSpec::default(),
            mix: Mix { number: 7 },
        }
    }
}

impl SimSettings {
    /// The configuration of every run, each checked.
    pub fn configs(&self) -> Result<Vec<SimConfig>, String> {
        if self.schemes.is_empty() {
            return Err("--schemes needs at least one scheme".into());
        }
        let config_of = |scheme: &Scheme| {
            let config = SimConfig { scheme: *scheme, ..self.machine.clone() };
            config.validate().map_err(|e| e.to_string())?;
            Ok(config)
        };
        self.schemes.iter().map(config_of).collect()
    }
}

/// Checked configurations and the loaded workload, ready to run.
pub struct PreparedSim {
    pub configs: Vec<SimConfig>,
    pub loaded: LoadedWorkload,
    pub mix: Mix,
}

/// Check the settings and load (or generate) the workload.
pub fn prepare(settings: &SimSettings) -> Result<PreparedSim, String> {
    let configs = settings.configs()?;
    let loaded = load_workload(&settings.workload, configs[0].cpu_count())?;
    Ok(PreparedSim { configs, loaded, mix: settings.mix })
}

impl PreparedSim {
    /// Every scheme on the same jobs, in parallel; results in the order of the schemes.
    pub fn run<W: BatchWatch>(&self, options: &RunOptions, watch: &W) -> Result<Vec<RunResult>, String> {
        let requests = self.loaded.requests();
        let plan = WorkloadPlan { mix: self.mix, runtime_scale: 1.0 };
        let labels: Vec<String> = self.configs.iter().map(|c| c.scheme.name().to_string()).collect();
        run_all(&self.configs, &labels, |i| sim_jobs(&requests, &plan, &self.configs[i]), options, watch)
    }
}

fn seconds(ns: u64) -> String {
    num(ns as f64 / 1e9)
}

/// The columns of `summary.csv`, one row per scheme.
fn summary_columns() -> Vec<Column<Summary>> {
    vec![
        column("scheme", |s| csv_field(&s.scheme)),
        column("jobs_submitted", |s| s.jobs_submitted.to_string()),
        column("jobs_completed", |s| s.jobs_completed.to_string()),
        column("span_s", |s| num(s.span_s)),
        column("mean_response_s", |s| num(s.mean_response_s)),
        column("mean_wait_s", |s| num(s.mean_wait_s)),
        column("mean_execution_s", |s| num(s.mean_execution_s)),
        column("p50_response_s", |s| num(s.p50_response_s)),
        column("p95_response_s", |s| num(s.p95_response_s)),
        column("throughput_jobs_per_s", |s| num(s.throughput_jobs_per_s)),
        column("delivered_utilization", |s| num(s.delivered_utilization)),
        column("compute_utilization", |s| num(s.compute_utilization)),
        column("delivered_utilization_during_arrivals", |s| num(s.delivered_utilization_during_arrivals)),
        column("compute_utilization_during_arrivals", |s| num(s.compute_utilization_during_arrivals)),
        column("offered_utilization_during_arrivals", |s| num(s.offered_utilization_during_arrivals)),
        column("saturated", |s| s.saturation.saturated.to_string()),
        column("delivered_share", |s| num(s.saturation.delivered_share)),
        column("backlog_growth", |s| num(s.saturation.backlog_growth)),
        column("wait_growth", |s| num(s.saturation.wait_growth)),
        column("mean_slowdown", |s| num(s.mean_slowdown)),
        column("mean_bounded_slowdown", |s| num(s.mean_bounded_slowdown)),
        column("bounded_slowdown_threshold_s", |s| num(s.bounded_slowdown_threshold_s)),
        column("longest_queue", |s| s.longest_queue.to_string()),
        column("useful_s", |s| seconds(s.cpu_time.useful_ns)),
        column("spin_s", |s| seconds(s.cpu_time.spin_ns)),
        column("switch_s", |s| seconds(s.cpu_time.switch_ns)),
        column("overhead_s", |s| seconds(s.cpu_time.overhead_ns)),
        column("idle_s", |s| seconds(s.cpu_time.idle_ns)),
        column("events", |s| s.events.to_string()),
    ]
}

/// Columns added when fast mode made a run: the mode, what it skipped, its validated error.
fn fast_mode_columns() -> Vec<Column<Summary>> {
    vec![
        column("mode", |s| if s.fast_mode.is_some() { "fast" } else { "exact" }.to_string()),
        column("skipped_s", |s| seconds(s.fast_mode.map_or(0, |f| f.skipped_ns))),
        column("fast_validated_error", |s| s.fast_mode.and_then(|f| f.validated_error).map_or(String::new(), num)),
    ]
}

/// `summary.csv`: one row per run (with fast mode's columns when a run used it).
pub fn summary_csv(results: &[RunResult]) -> String {
    let mut columns = summary_columns();
    if results.iter().any(|r| r.summary.fast_mode.is_some()) {
        columns.extend(fast_mode_columns());
    }
    to_csv(&columns, results.iter().map(|r| &r.summary))
}

/// One row of `jobs.csv`: a job's record under one scheme.
pub struct JobRow<'a> {
    pub scheme: &'a str,
    pub job: &'a JobRecord,
}

fn job_columns<'a>() -> Vec<Column<JobRow<'a>>> {
    vec![
        column("scheme", |r| csv_field(r.scheme)),
        column("job_number", |r| r.job.job_number.to_string()),
        column("job_type", |r| csv_field(&r.job.job_type)),
        column("tasks", |r| r.job.tasks.to_string()),
        column("iterations", |r| r.job.iterations.to_string()),
        column("arrival_s", |r| num(r.job.arrival_s)),
        column("start_s", |r| num(r.job.start_s)),
        column("finish_s", |r| num(r.job.finish_s)),
        column("wait_s", |r| num(r.job.wait_s)),
        column("execution_s", |r| num(r.job.execution_s)),
        column("response_s", |r| num(r.job.response_s)),
        column("dedicated_s", |r| num(r.job.dedicated_s)),
        column("slowdown", |r| num(r.job.slowdown)),
        column("bounded_slowdown", |r| num(r.job.bounded_slowdown)),
    ]
}

/// `jobs.csv`: every finished job of every run, runs in order.
pub fn jobs_csv(results: &[RunResult]) -> String {
    let rows: Vec<JobRow> =
        results.iter().flat_map(|r| r.jobs.iter().map(|job| JobRow { scheme: &r.summary.scheme, job })).collect();
    to_csv(&job_columns(), &rows)
}
