//! Fast mode against the exact engine: the same workloads run both ways, and
//! per scheme the paired differences of the figures users read (mean
//! response, mean wait, delivered utilization, the saturation verdict), each
//! the mean over seeds with a 95 % confidence interval.

use crate::batch::{run_all, BatchWatch};
use crate::csv::{column, csv_field, num, to_csv, Column};
use crate::workload::{bounded_slowdown_threshold_s, load_workload, WorkloadSpec};
use cosched_bench::stats::Estimate;
use cosched_sim::engine::fast::FastSettings;
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{RunOptions, RunResult};
use cosched_sim::{Mix, Scheme, SimConfig, SimJob, Summary};
use serde::Serialize;

/// The validation set: every scheme on every seed's workload, exact and fast.
#[derive(Clone, Debug)]
pub struct FastCheckSettings {
    pub schemes: Vec<Scheme>,
    pub seeds: Vec<u64>,
    /// The machine (its scheme and seed are set per run).
    pub machine: SimConfig,
    /// The workload (its seed is set per run).
    pub workload: WorkloadSpec,
    pub mix: Mix,
    pub fast: FastSettings,
}

/// One scheme on one seed's workload, both ways.
#[derive(Clone, Debug, Serialize)]
pub struct PairedRun {
    pub scheme: String,
    pub seed: u64,
    pub exact: Summary,
    pub fast: Summary,
    /// Each job's response, fast / exact - 1 (jobs finished both ways).
    #[serde(skip)]
    pub job_errors: Vec<f64>,
}

impl PairedRun {
    /// Fast over exact, minus one.
    pub fn response_error(&self) -> f64 {
        self.fast.mean_response_s / self.exact.mean_response_s - 1.0
    }
    /// The wait's difference as a share of the exact mean response (waits are often near 0).
    pub fn wait_error(&self) -> f64 {
        (self.fast.mean_wait_s - self.exact.mean_wait_s) / self.exact.mean_response_s
    }
    pub fn utilization_error(&self) -> f64 {
        self.fast.delivered_utilization / self.exact.delivered_utilization - 1.0
    }
    pub fn saturation_agrees(&self) -> bool {
        self.fast.saturation.saturated == self.exact.saturation.saturated
    }
    /// Share of the run's simulated time fast mode skipped.
    pub fn skipped_share(&self) -> f64 {
        let skipped_ns = self.fast.fast_mode.map_or(0, |f| f.skipped_ns);
        skipped_ns as f64 / 1e9 / self.fast.span_s.max(f64::MIN_POSITIVE)
    }
}

/// A scheme's errors over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct SchemeCheck {
    pub scheme: String,
    pub response: Estimate,
    pub wait: Estimate,
    pub utilization: Estimate,
    pub saturation_agreements: usize,
    pub runs: usize,
    pub skipped_share: Estimate,
    /// Single jobs' response errors, pooled over seeds: the median and the 90th percentile of |fast / exact - 1|.
    pub job_error_p50: f64,
    pub job_error_p90: f64,
}

impl SchemeCheck {
    /// The acceptance bound: both 95 % intervals of mean response and
    /// delivered utilization lie within ±`bound`.
    pub fn within(&self, bound: f64) -> bool {
        [&self.response, &self.utilization].iter().all(|e| e.mean.abs() + e.ci95_half_width() <= bound)
    }
}

/// Run the validation set both ways, exact first (`between` is called
/// between the two batches, for timing); pairs in (scheme, seed) order.
pub fn run_pairs<W: BatchWatch>(
    settings: &FastCheckSettings,
    exact_watch: &W,
    fast_watch: &W,
    between: impl FnOnce(),
) -> Result<Vec<PairedRun>, String> {
    let mut configs = Vec::new();
    let mut labels = Vec::new();
    for scheme in &settings.schemes {
        for &seed in &settings.seeds {
            let config = SimConfig { scheme: *scheme, seed, ..settings.machine.clone() };
            config.validate().map_err(|e| e.to_string())?;
            labels.push(format!("{}-seed{seed}", scheme.name()));
            configs.push(config);
        }
    }
    let workloads = settings
        .seeds
        .iter()
        .map(|&seed| {
            let spec = WorkloadSpec { seed, ..settings.workload.clone() };
            load_workload(&spec, settings.machine.cpu_count()).map(|w| w.requests())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let plan = WorkloadPlan { mix: settings.mix, runtime_scale: 1.0 };
    let jobs_for = |i: usize| -> Vec<SimJob> { sim_jobs(&workloads[i % settings.seeds.len()], &plan, &configs[i]) };
    let exact_options = RunOptions {
        bounded_slowdown_threshold_s: bounded_slowdown_threshold_s(settings.workload.runtime_scale),
        progress_every_events: 1 << 18,
        ..RunOptions::default()
    };
    let fast_options = RunOptions { fast: Some(settings.fast), ..exact_options.clone() };
    let exact = run_all(&configs, &labels, jobs_for, &exact_options, exact_watch)?;
    between();
    let fast = run_all(&configs, &labels, jobs_for, &fast_options, fast_watch)?;
    Ok(configs
        .iter()
        .zip(exact.into_iter().zip(fast))
        .map(|(config, (exact, fast)): (&SimConfig, (RunResult, RunResult))| PairedRun {
            scheme: config.scheme.name().to_string(),
            seed: config.seed,
            job_errors: job_errors(&exact, &fast),
            exact: exact.summary,
            fast: fast.summary,
        })
        .collect())
}

/// Each job's response error, for the jobs both runs finished (records are sorted by job number).
fn job_errors(exact: &RunResult, fast: &RunResult) -> Vec<f64> {
    exact
        .jobs
        .iter()
        .filter_map(|e| {
            let f = fast.jobs.iter().find(|f| f.job_number == e.job_number)?;
            Some(f.response_s / e.response_s - 1.0)
        })
        .collect()
}

/// Per scheme, in the order first seen.
pub fn by_scheme(pairs: &[PairedRun]) -> Vec<SchemeCheck> {
    let mut names: Vec<&str> = Vec::new();
    for pair in pairs {
        if !names.contains(&pair.scheme.as_str()) {
            names.push(&pair.scheme);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let runs: Vec<&PairedRun> = pairs.iter().filter(|p| p.scheme == name).collect();
            let estimate = |f: fn(&PairedRun) -> f64| {
                Estimate::of(&runs.iter().map(|p| f(p)).collect::<Vec<_>>()).expect("a scheme has runs")
            };
            let job_errors: Vec<f64> = runs.iter().flat_map(|p| p.job_errors.iter().map(|e| e.abs())).collect();
            let quantile = |q: f64| cosched_sim::metrics::percentile(&job_errors, q);
            SchemeCheck {
                job_error_p50: quantile(0.5),
                job_error_p90: quantile(0.9),
                scheme: name.to_string(),
                response: estimate(PairedRun::response_error),
                wait: estimate(PairedRun::wait_error),
                utilization: estimate(PairedRun::utilization_error),
                saturation_agreements: runs.iter().filter(|p| p.saturation_agrees()).count(),
                runs: runs.len(),
                skipped_share: estimate(PairedRun::skipped_share),
            }
        })
        .collect()
}

fn pair_columns() -> Vec<Column<PairedRun>> {
    vec![
        column("scheme", |p| csv_field(&p.scheme)),
        column("seed", |p| p.seed.to_string()),
        column("exact_mean_response_s", |p| num(p.exact.mean_response_s)),
        column("fast_mean_response_s", |p| num(p.fast.mean_response_s)),
        column("exact_mean_wait_s", |p| num(p.exact.mean_wait_s)),
        column("fast_mean_wait_s", |p| num(p.fast.mean_wait_s)),
        column("exact_delivered_utilization", |p| num(p.exact.delivered_utilization)),
        column("fast_delivered_utilization", |p| num(p.fast.delivered_utilization)),
        column("exact_saturated", |p| p.exact.saturation.saturated.to_string()),
        column("fast_saturated", |p| p.fast.saturation.saturated.to_string()),
        column("skipped_share", |p| num(p.skipped_share())),
        column("exact_events", |p| p.exact.events.to_string()),
        column("fast_events", |p| p.fast.events.to_string()),
    ]
}

/// `pairs.csv`: one row per scheme and seed.
pub fn pairs_csv(pairs: &[PairedRun]) -> String {
    to_csv(&pair_columns(), pairs.iter())
}
