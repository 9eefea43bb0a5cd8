//! Schemes side by side on one workload (`cosched sim`): the same jobs, the
//! same machine, one run per scheme; and the CSV files of their results.

use crate::batch::{run_all, BatchWatch};
use crate::csv::{csv_field, flag, float, int, kinds, num, text, to_csv, Column, ColumnKinds};
use crate::jitter::{jittered_answers, Answer, ArrivalJitter};
use crate::workload::{load_workload, LoadedWorkload, WorkloadSpec};
use cosched_sim::cost::{self, JobCost, RunCost, ITERATION_BUDGET};
use cosched_sim::engine::fast::{FastSettings, WindowMeasure};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{RunOptions, RunResult};
use cosched_sim::{JobRecord, Mix, Scheme, SimConfig, Summary};
use std::path::Path;

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

/// A list of schemes to run: at least one, each once (a scheme named twice would run twice and show twice).
pub fn check_schemes(schemes: &[Scheme]) -> Result<(), String> {
    if schemes.is_empty() {
        return Err("--schemes needs at least one scheme".into());
    }
    for (i, scheme) in schemes.iter().enumerate() {
        if schemes[..i].iter().any(|earlier| earlier.name() == scheme.name()) {
            return Err(format!("--schemes names {} twice: each scheme runs once", scheme.name()));
        }
    }
    Ok(())
}

impl SimSettings {
    /// The configuration of every run, each checked.
    pub fn configs(&self) -> Result<Vec<SimConfig>, String> {
        check_schemes(&self.schemes)?;
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
        run_all(&self.configs, &self.labels(), |i| sim_jobs(&requests, &self.plan(), &self.configs[i]), options, watch)
    }

    /// Every scheme again, `jitter.draws` times, on the same jobs with their arrivals jittered (each draw the same
    /// for every scheme, from the run's seed): per scheme, its answer in each draw.
    pub fn run_jittered<W: BatchWatch>(
        &self,
        jitter: ArrivalJitter,
        options: &RunOptions,
        watch: &W,
    ) -> Result<Vec<Vec<Answer>>, String> {
        let requests = self.loaded.requests();
        let jobs_for = |i: usize| sim_jobs(&requests, &self.plan(), &self.configs[i]);
        jittered_answers(jitter, &self.configs, &self.labels(), &jobs_for, options, watch)
    }

    /// Each run's name: its scheme's.
    fn labels(&self) -> Vec<String> {
        self.configs.iter().map(|c| c.scheme.name().to_string()).collect()
    }

    fn plan(&self) -> WorkloadPlan {
        WorkloadPlan { mix: self.mix, runtime_scale: 1.0 }
    }

    /// What the dearest of the runs will cost (the schemes' runs differ only in fast mode: its gang cycles and the
    /// window a scheme takes).
    pub fn cost(&self, fast: Option<&FastSettings>) -> RunCost {
        let requests = self.loaded.requests();
        let cost_of = |config: &SimConfig| cost::estimate(config, &sim_jobs(&requests, &self.plan(), config), fast);
        self.configs.iter().map(cost_of).max_by_key(|cost| cost.process_iterations).expect("a run per scheme")
    }

    /// The cost of the runs, or, beyond [`ITERATION_BUDGET`], why they are
    /// not started: the work, the job behind most of it (`trace` names its
    /// file) and what to do.
    pub fn check_cost(&self, fast: Option<&FastSettings>, trace: Option<&Path>) -> Result<RunCost, String> {
        let cost = self.cost(fast);
        if !cost.beyond_budget() {
            return Ok(cost);
        }
        Err(self.too_costly(&cost, fast.is_some(), trace))
    }

    fn too_costly(&self, cost: &RunCost, fast: bool, trace: Option<&Path>) -> String {
        let mode = if fast { "even in fast mode, " } else { "" };
        let about = if fast { "about " } else { "" };
        let mut text = format!(
            "{mode}each run would simulate {about}{:.1e} process iterations step by step, beyond the {:.0e} `cosched \
             sim` starts without --allow-long-run (docs/model.md, \"What a run costs\")",
            cost.process_iterations as f64, ITERATION_BUDGET as f64
        );
        let heaviest = cost.heaviest.expect("a costly run has jobs");
        let share = cost.heaviest_share();
        text += &format!("; {:.1} % of them are {}", 100.0 * share, self.describe_job(&heaviest, trace));
        text +=
            &format!(", and the run spans at least {} s of simulated time", approx(cost.least_span_ns as f64 / 1e9));
        // In fast mode the work follows the changes and their exact stretches, not the run times (a scale also
        // shortens the gaps between arrivals).
        let mut remedies = if fast {
            vec!["shorten fast mode's exact stretches (--fast-window-ms, --fast-warmup-ms; a scheme is validated with \
                  its default warm-up only, and with its default window or the one it takes)"
                .to_string()]
        } else {
            vec![
                format!("scale run times down (--runtime-scale {} brings it within)", self.scale_within(cost)),
                "use fast mode (--fast)".into(),
            ]
        };
        remedies.push(if share >= 0.5 {
            format!(
                "leave job {} out of the {}",
                heaviest.job_number,
                if trace.is_some() { "trace" } else { "workload" }
            )
        } else {
            "simulate fewer jobs (--jobs)".into()
        });
        remedies.push("pass --allow-long-run to run it all the same".into());
        let last = remedies.pop().expect("remedies");
        text + &format!(". To go on: {}, or {last}", remedies.join(", "))
    }

    /// "job N (FILE:LINE): T processes for S s (NOMINAL s x --runtime-scale X)".
    fn describe_job(&self, job: &JobCost, trace: Option<&Path>) -> String {
        let line = self.loaded.workload.jobs.iter().find(|j| j.job_number == job.job_number).map(|j| j.source_line);
        let place = match (trace, line) {
            (Some(path), Some(line)) if line > 0 => format!(" ({}:{line})", path.display()),
            _ => String::new(),
        };
        let run_s = job.dedicated_ns as f64 / 1e9;
        let scale = self.loaded.report.runtime_scale;
        format!(
            "job {}{place}: {} processes for {} s ({} s x --runtime-scale {scale})",
            job.job_number,
            job.tasks,
            approx(run_s),
            approx(run_s / scale)
        )
    }

    /// A run-time scale, one significant digit rounded down, that brings the
    /// work within the budget (the work follows the run times).
    fn scale_within(&self, cost: &RunCost) -> String {
        let wanted = self.loaded.report.runtime_scale * ITERATION_BUDGET as f64 / cost.process_iterations as f64;
        let exponent = wanted.log10().floor() as i32;
        let digit = (wanted / 10f64.powi(exponent)).floor();
        format!("{:.*}", (-exponent).max(0) as usize, digit * 10f64.powi(exponent))
    }
}

/// `x` to 4 significant digits, in exponent form when large or small (2e6, 893.1, 1.5e-4).
fn approx(x: f64) -> String {
    let rounded: f64 = format!("{x:.3e}").parse().expect("a formatted number parses");
    if rounded != 0.0 && !(1e-3..1e6).contains(&rounded.abs()) {
        format!("{rounded:e}")
    } else {
        format!("{rounded}")
    }
}

fn seconds(ns: u64) -> String {
    num(ns as f64 / 1e9)
}

/// The columns of `summary.csv`, one row per scheme.
fn summary_columns() -> Vec<Column<Summary>> {
    vec![
        text("scheme", |s| csv_field(&s.scheme)),
        int("jobs_submitted", |s| s.jobs_submitted.to_string()),
        int("jobs_completed", |s| s.jobs_completed.to_string()),
        float("span_s", |s| num(s.span_s)),
        float("mean_response_s", |s| num(s.mean_response_s)),
        float("mean_wait_s", |s| num(s.mean_wait_s)),
        float("mean_execution_s", |s| num(s.mean_execution_s)),
        float("p50_response_s", |s| num(s.p50_response_s)),
        float("p95_response_s", |s| num(s.p95_response_s)),
        float("throughput_jobs_per_s", |s| num(s.throughput_jobs_per_s)),
        float("delivered_utilization", |s| num(s.delivered_utilization)),
        float("compute_utilization", |s| num(s.compute_utilization)),
        float("delivered_utilization_during_arrivals", |s| num(s.delivered_utilization_during_arrivals)),
        float("compute_utilization_during_arrivals", |s| num(s.compute_utilization_during_arrivals)),
        float("offered_utilization_during_arrivals", |s| num(s.offered_utilization_during_arrivals)),
        flag("saturated", |s| s.saturation.saturated.to_string()),
        float("delivered_share", |s| num(s.saturation.delivered_share)),
        float("backlog_growth", |s| num(s.saturation.backlog_growth)),
        float("wait_growth", |s| num(s.saturation.wait_growth)),
        float("mean_slowdown", |s| num(s.mean_slowdown)),
        float("mean_bounded_slowdown", |s| num(s.mean_bounded_slowdown)),
        float("bounded_slowdown_threshold_s", |s| num(s.bounded_slowdown_threshold_s)),
        int("longest_queue", |s| s.longest_queue.to_string()),
        float("useful_s", |s| seconds(s.cpu_time.useful_ns)),
        float("spin_s", |s| seconds(s.cpu_time.spin_ns)),
        float("switch_s", |s| seconds(s.cpu_time.switch_ns)),
        float("overhead_s", |s| seconds(s.cpu_time.overhead_ns)),
        float("idle_s", |s| seconds(s.cpu_time.idle_ns)),
        int("events", |s| s.events.to_string()),
    ]
}

/// Columns added when fast mode made a run: the mode, what it skipped, its validated error.
fn fast_mode_columns() -> Vec<Column<Summary>> {
    vec![
        text("mode", |s| if s.fast_mode.is_some() { "fast" } else { "exact" }.to_string()),
        float("skipped_s", |s| seconds(s.fast_mode.map_or(0, |f| f.skipped_ns))),
        float("fast_validated_error", |s| s.fast_mode.and_then(|f| f.validated_error).map_or(String::new(), num)),
    ]
}

/// `summary.csv`: one row per run (with fast mode's columns when a run used it).
pub fn summary_csv(results: &[RunResult]) -> String {
    to_csv(&summary_table(results), results.iter().map(|r| &r.summary))
}

/// The columns of `summary_csv(results)`, with what each holds.
pub fn summary_kinds(results: &[RunResult]) -> ColumnKinds {
    kinds(&summary_table(results))
}

fn summary_table(results: &[RunResult]) -> Vec<Column<Summary>> {
    let mut columns = summary_columns();
    if results.iter().any(|r| r.summary.fast_mode.is_some()) {
        columns.extend(fast_mode_columns());
    }
    columns
}

/// The columns of `jobs_csv`, with what each holds.
pub fn jobs_kinds() -> ColumnKinds {
    kinds(&job_columns())
}

/// One row of `jobs.csv`: a job's record under one scheme.
pub struct JobRow<'a> {
    pub scheme: &'a str,
    pub job: &'a JobRecord,
}

fn job_columns<'a>() -> Vec<Column<JobRow<'a>>> {
    vec![
        text("scheme", |r| csv_field(r.scheme)),
        int("job_number", |r| r.job.job_number.to_string()),
        text("job_type", |r| csv_field(&r.job.job_type)),
        int("tasks", |r| r.job.tasks.to_string()),
        int("iterations", |r| r.job.iterations.to_string()),
        float("arrival_s", |r| num(r.job.arrival_s)),
        float("start_s", |r| num(r.job.start_s)),
        float("finish_s", |r| num(r.job.finish_s)),
        float("wait_s", |r| num(r.job.wait_s)),
        float("execution_s", |r| num(r.job.execution_s)),
        float("response_s", |r| num(r.job.response_s)),
        float("dedicated_s", |r| num(r.job.dedicated_s)),
        float("slowdown", |r| num(r.job.slowdown)),
        float("bounded_slowdown", |r| num(r.job.bounded_slowdown)),
    ]
}

/// `jobs.csv`: every finished job of every run, runs in order.
pub fn jobs_csv(results: &[RunResult]) -> String {
    let rows: Vec<JobRow> =
        results.iter().flat_map(|r| r.jobs.iter().map(|job| JobRow { scheme: &r.summary.scheme, job })).collect();
    to_csv(&job_columns(), &rows)
}

/// One window's measure of one job, with its run's scheme.
struct WindowRow<'a> {
    scheme: &'a str,
    measure: &'a WindowMeasure,
}

fn window_columns<'a>() -> Vec<Column<WindowRow<'a>>> {
    fn ms(ns: u64) -> String {
        num(ns as f64 / 1e6)
    }
    vec![
        text("scheme", |r| csv_field(r.scheme)),
        float("closed_s", |r| num(r.measure.closed_ns as f64 / 1e9)),
        float("skipped_s", |r| num(r.measure.skipped_ns as f64 / 1e9)),
        int("job_number", |r| r.measure.job_number.to_string()),
        int("tasks", |r| r.measure.tasks.to_string()),
        int("row", |r| r.measure.row.map_or(String::new(), |row| row.to_string())),
        float("window_ms", |r| ms(r.measure.job_time_ns)),
        int("iterations", |r| r.measure.iterations.to_string()),
        int("first_half_iterations", |r| r.measure.first_half_iterations.map_or(String::new(), |i| i.to_string())),
        float("window_rate_per_ms", |r| {
            let m = r.measure;
            num(m.iterations as f64 / m.tasks.max(1) as f64 / (m.job_time_ns as f64 / 1e6))
        }),
        float("measured_ms", |r| ms(r.measure.measured_ns)),
        int("measured_iterations", |r| r.measure.measured_iterations.to_string()),
        float("rate_per_ms", |r| num(r.measure.rate_per_ns * 1e6)),
    ]
}

/// `fast-windows.csv` (`cosched sim --fast-windows`, fast or watched): every window's measure of every running job,
/// runs in order. `window_rate_per_ms` is this window's iterations per process per ms of the job's time in it
/// (empty where it had none: a row's window without its quanta); `rate_per_ms`, per ms of the run's clock over its
/// measure since its surroundings last changed, is what a jump would credit.
pub fn fast_windows_csv(results: &[RunResult]) -> String {
    let rows: Vec<WindowRow> = results
        .iter()
        .flat_map(|r| r.fast_windows.measures.iter().map(|measure| WindowRow { scheme: &r.summary.scheme, measure }))
        .collect();
    to_csv(&window_columns(), &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39 item 16's trace: 20 jobs of 4 processes, the seventh running 1e9 s. In a file made new (a fixed
    /// name in the shared temporary directory could be another user's link).
    fn long_trace() -> tempfile::NamedTempFile {
        let mut text = String::from("; MaxProcs: 32\n");
        for job in 1..=20 {
            let run_s = if job == 7 { 1e9 } else { 100.0 * job as f64 };
            text += &format!("{job} {} 0 {run_s} 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n", 60 * job);
        }
        let file = tempfile::Builder::new().prefix("cosched-lab-").suffix(".swf").tempfile().expect("a scratch file");
        std::fs::write(file.path(), text).expect("writing the trace");
        file
    }

    fn prepared(trace: Option<&Path>, runtime_scale: f64) -> PreparedSim {
        let workload = WorkloadSpec {
            trace: trace.map(Path::to_path_buf),
            jobs: trace.is_none().then_some(crate::workload::DEFAULT_JOBS),
            runtime_scale,
            ..WorkloadSpec::default()
        };
        prepare(&SimSettings { workload, ..SimSettings::default() }).expect("a valid workload")
    }

    #[test]
    fn a_run_beyond_the_budget_names_its_job_and_a_scale_that_brings_it_within() {
        let file = long_trace();
        let trace = file.path();
        let long = prepared(Some(trace), 0.002);
        let refusal = long.check_cost(None, Some(trace)).unwrap_err();
        let place = format!("are job 7 ({}:8): 4 processes for 2e6 s (1e9 s x --runtime-scale 0.002)", trace.display());
        assert!(refusal.contains(&place), "{refusal}");
        for remedy in ["use fast mode (--fast)", "leave job 7 out of the trace", "--allow-long-run"] {
            assert!(refusal.contains(remedy), "{remedy:?} missing: {refusal}");
        }
        let scale: f64 =
            refusal.split("--runtime-scale ").nth(2).and_then(|s| s.split(' ').next()).unwrap().parse().unwrap();
        assert!(prepared(Some(trace), scale).check_cost(None, Some(trace)).is_ok(), "--runtime-scale {scale}");
        assert!(long.check_cost(Some(&FastSettings::default()), Some(trace)).is_ok(), "fast mode skips the long job");
    }

    #[test]
    fn the_default_run_is_far_within_the_budget() {
        let cost = prepared(None, crate::workload::DEFAULT_RUNTIME_SCALE).cost(None);
        assert!(cost.process_iterations * 90 < ITERATION_BUDGET, "{cost:?}");
    }
}
