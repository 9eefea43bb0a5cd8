//! One simulation run from configuration and jobs to records and summary.

use crate::config::{ConfigError, SimConfig};
use crate::engine::fast::{
    better_window_than, fast_mode_measured, validation_with, FastReport, FastSettings, WindowLog, VALIDATION_CPUS,
};
use crate::engine::runner::EngineRun;
use crate::engine::{ArrivalWindow, Progress, SimJob};
use crate::metrics::{judge_saturation, mean, percentile, slope, BacklogMeasure, Breakdown, JobRecord, Summary};
use crate::scheme::model_as_read;
use crate::trace::TraceEvent;
use cosched_core::SimTime;
pub use cosched_policy::coscheduler::external::{Choice, Chooser, QueueView, SharedChooser, WaitingJob};

pub struct RunResult {
    pub summary: Summary,
    pub jobs: Vec<JobRecord>,
    pub per_cpu_time: Vec<Breakdown>,
    pub trace: Vec<TraceEvent>,
    /// Events handled, by kind (names in `engine::EVENT_KIND_NAMES`).
    pub event_counts: [u64; crate::engine::EVENT_KINDS],
    /// Where each event took place, from `RunOptions::event_log_from_ns` on (empty unless asked for).
    pub event_log: Vec<crate::engine::LoggedEvent>,
    /// What each of fast mode's windows measured of each running job (`RunOptions::record_fast_windows`).
    pub fast_windows: WindowLog,
}

/// Options of a run that are not part of the machine model.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub bounded_slowdown_threshold_s: f64,
    pub record_trace: bool,
    pub progress_every_events: u64,
    /// Testing aid: visit every CPU at every tick and at the end of its kernel work too; results must not change.
    pub visit_every_tick: bool,
    /// Set from outside (an interrupt) to end the run at its next progress report, keeping what finished.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Fast mode: skip the stationary stretches between changes (`None`: exact).
    pub fast: Option<FastSettings>,
    /// Keep what each of fast mode's windows measured (`RunResult::fast_windows`), up to
    /// [`MAX_WINDOW_MEASURES`](crate::engine::fast::MAX_WINDOW_MEASURES).
    pub record_fast_windows: bool,
    /// An exact run (`fast` is `None`) watched through fast mode's windows of these settings, as the run's scheme
    /// takes them (`FastSettings::for_run`): one a warm-up after every change, and after each the next a window and
    /// a warm-up later (as fast mode waits after a jump too short to make), never followed by a jump. What they
    /// measured is kept in `RunResult::fast_windows`; the jobs, decisions and CPU time are the exact run's (a
    /// property test checks it).
    pub watch_windows: Option<FastSettings>,
    /// Testing aid: decide with the model of the plan alone (`Coscheduler`) where the scheme runs the controller's
    /// core; the two must decide alike while the core's own rules (the idle rule, time limits) do not act.
    #[doc(hidden)]
    pub plan_model_only: bool,
    /// Admission decided outside the engine (the gym interface): for the study's schemes, exact, without
    /// backfilling (`check_chooser_allowed`).
    pub chooser: Option<SharedChooser>,
    /// Fast mode even where it is not validated (`check_fast_mode_validated`): for the runs that validate it
    /// (`cosched bench fast`), never for a result.
    pub fast_unvalidated: bool,
    /// Record where each event from this simulated time on takes place (`cosched bench partition`); exact runs
    /// only, and the results do not change.
    pub event_log_from_ns: Option<u64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            bounded_slowdown_threshold_s: 10.0,
            record_trace: false,
            progress_every_events: 1 << 20,
            visit_every_tick: false,
            stop: None,
            fast: None,
            record_fast_windows: false,
            watch_windows: None,
            plan_model_only: false,
            chooser: None,
            event_log_from_ns: None,
            fast_unvalidated: false,
        }
    }
}

/// The settings an exact run is watched with (`RunOptions::watch_windows`): the windows a fast run of `cfg` would
/// take (the engine then runs them [`never_jumping`]).
fn watching_settings(cfg: &SimConfig, options: &RunOptions) -> Result<Option<FastSettings>, ConfigError> {
    let Some(settings) = options.watch_windows.filter(|_| options.fast.is_none()) else {
        return Ok(None);
    };
    settings.validate().map_err(ConfigError)?;
    Ok(Some(settings.for_run(cfg)))
}

/// Fast mode's windows with no jump after them: no jump is ever long enough.
fn never_jumping(settings: FastSettings) -> FastSettings {
    FastSettings { min_jump_ns: u64::MAX, ..settings }
}

/// Fast mode runs only where it was measured against the exact engine (`engine::fast`'s tables): refused for a
/// scheme added without bounds.
pub fn check_fast_mode_validated(cfg: &SimConfig) -> Result<(), ConfigError> {
    if fast_mode_measured(cfg) {
        return Ok(());
    }
    Err(ConfigError(format!(
        "fast mode was never measured against the exact engine for {} on --node-scheduler {} \
         (docs/fast-mode.md): run without --fast",
        cfg.scheme.name(),
        cfg.node_scheduler
    )))
}

/// Whether admission may be chosen outside the engine in this run: only where the plan's model decides, over a
/// standing planner, and the run is exact.
pub fn check_chooser_allowed(cfg: &SimConfig, fast: bool) -> Result<(), ConfigError> {
    let refuse = |why: &str| Err(ConfigError(format!("a policy of your own cannot decide {why}")));
    if cfg.scheme.runs_the_controller() {
        return refuse(&format!("under {}: cosched's controller admits its jobs itself", cfg.scheme.name()));
    }
    if !cfg.plan_settings().rules.keep_placed_jobs() {
        return refuse(&format!("under {}: its rules move placed jobs or pass over the queue", cfg.scheme.name()));
    }
    if !cfg.backfill.is_none() {
        return refuse("beside --backfill: the policy is the queue's rule (leave --backfill none)");
    }
    if fast {
        return refuse("in fast mode, which is validated under the study's FCFS queue only: run without --fast");
    }
    Ok(())
}

/// Tasks of one job per CPU it holds, at most: the node scheduler's work grows fast with its queues.
pub const MAX_TASKS_PER_CPU: u32 = 8;

/// Simulate `jobs` (sorted by arrival) under `cfg`.
pub fn run(
    cfg: &SimConfig,
    jobs: Vec<SimJob>,
    options: &RunOptions,
    progress: impl FnMut(&Progress),
) -> Result<RunResult, ConfigError> {
    cfg.validate()?;
    if options.chooser.is_some() {
        check_chooser_allowed(cfg, options.fast.is_some())?;
    }
    let fast_settings = options.fast.map(|settings| settings.for_run(cfg));
    if let Some(fast) = &fast_settings {
        fast.validate().map_err(ConfigError)?;
        if !options.fast_unvalidated {
            check_fast_mode_validated(cfg)?;
        }
        if let Some(job) = jobs.iter().find(|j| !j.program.rounds.is_none()) {
            return Err(ConfigError(format!(
                "job {}'s iterations come in rounds: fast mode extrapolates uniform iterations only; run without --fast",
                job.job_number
            )));
        }
    }
    let watching = watching_settings(cfg, options)?;
    let cpus = cfg.cpu_count();
    if let Some(job) = jobs.iter().find(|j| j.cpus == 0 || j.cpus > cpus) {
        return Err(ConfigError(format!(
            "job {} asks for {} CPUs but the machine has {} ({} nodes x {} CPUs)",
            job.job_number, job.cpus, cpus, cfg.nodes, cfg.cpus_per_node
        )));
    }
    let oversubscribed = |j: &SimJob| j.tasks > j.cpus.saturating_mul(MAX_TASKS_PER_CPU);
    if let Some(job) = jobs.iter().find(|j| oversubscribed(j)) {
        return Err(ConfigError(format!(
            "job {} runs {} tasks on {} CPUs: at most {MAX_TASKS_PER_CPU} tasks per CPU are simulated",
            job.job_number, job.tasks, job.cpus
        )));
    }
    let misfit = |j: &SimJob| j.tasks < j.cpus || (j.tasks > j.cpus && !cfg.scheme.takes_more_tasks_than_cpus());
    if let Some(job) = jobs.iter().find(|j| misfit(j)) {
        return Err(ConfigError(format!(
            "job {} runs {} tasks on {} CPUs: a job has at least one task per CPU, and more tasks than CPUs run only \
             under the node's own scheduler (a gang cell runs one process; GS-cosched-kernel takes them)",
            job.job_number, job.tasks, job.cpus
        )));
    }
    let submitted = jobs.len();
    let mut progress = progress;
    let engine_run = EngineRun {
        cfg,
        jobs,
        bounded_slowdown_threshold_s: options.bounded_slowdown_threshold_s,
        record_trace: options.record_trace,
        visit_every_tick: options.visit_every_tick,
        progress_every_events: options.progress_every_events,
        stop: options.stop.as_deref(),
        fast: fast_settings.or(watching.map(never_jumping)),
        record_fast_windows: options.record_fast_windows || watching.is_some(),
        plan_model_only: options.plan_model_only,
        event_log_from_ns: options.event_log_from_ns.filter(|_| fast_settings.is_none() && watching.is_none()),
        chooser: options.chooser.clone(),
        progress: &mut progress,
    };
    let outcome = crate::scheme::run_scheme(cfg.scheme, engine_run);
    let mut records = outcome.records;
    records.sort_by_key(|r| r.job_number);
    let span_s = outcome.end.as_secs_f64();
    let responses: Vec<f64> = records.iter().map(|r| r.response_s).collect();
    let total_cpu_ns = outcome.cpu_time.total_ns().max(1) as f64;
    let delivered_ns: f64 = records.iter().map(|r| r.tasks as f64 * r.dedicated_s * 1e9).sum();
    let window = outcome.arrival_window;
    // (A run of one arrival has an empty window: the whole run stands for it.)
    let window = if window.last_arrival > SimTime::ZERO {
        window
    } else {
        ArrivalWindow {
            last_arrival: outcome.end,
            compute_ns: outcome.cpu_time.useful_ns,
            delivered_ns,
            offered_ns: delivered_ns,
            middle: None,
        }
    };
    let second_half = window.middle.filter(|m| window.last_arrival > m.at).map(|middle| {
        let capacity_ns = cpus as f64 * (window.last_arrival - middle.at) as f64;
        (
            (window.delivered_ns - middle.delivered_ns) / capacity_ns,
            (window.compute_ns - middle.compute_ns) as f64 / capacity_ns,
        )
    });
    let window_capacity_ns = cpus as f64 * window.last_arrival.ns().max(1) as f64;
    let backlog = BacklogMeasure {
        delivered_share: if window.offered_ns > 0.0 { window.delivered_ns / window.offered_ns } else { 1.0 },
        growth: jobs_in_system_growth(&outcome.jobs_in_system, outcome.arrival_window.last_arrival),
    };
    let saturation = judge_saturation(&records, submitted, backlog, outcome.stopped_early);
    // Fast mode's validated error is the one of the regime the run was in.
    let fast_mode = outcome.fast.filter(|_| watching.is_none()).map(|f| {
        let settings = fast_settings.unwrap_or_default();
        // The machine model as the scheme reads it: a value it never reads keeps its bound.
        let as_read = model_as_read(cfg);
        let validation = validation_with(&as_read, saturation.saturated, &settings);
        let better_window = better_window_than(&as_read, saturation.saturated, &settings);
        let validated_on_cpus = validation.is_ok().then_some(VALIDATION_CPUS);
        FastReport {
            validated_error: validation.ok(),
            not_validated: validation.err(),
            validated_on_cpus,
            better_window,
            ..f
        }
    });
    let summary = Summary {
        scheme: cfg.scheme.name().to_string(),
        jobs_submitted: submitted,
        jobs_completed: records.len(),
        span_s,
        mean_response_s: mean(responses.iter().copied()),
        mean_wait_s: mean(records.iter().map(|r| r.wait_s)),
        mean_execution_s: mean(records.iter().map(|r| r.execution_s)),
        p50_response_s: percentile(&responses, 0.50),
        p95_response_s: percentile(&responses, 0.95),
        throughput_jobs_per_s: if span_s > 0.0 { records.len() as f64 / span_s } else { 0.0 },
        delivered_utilization: delivered_ns / (cpus as f64 * outcome.end.ns().max(1) as f64),
        compute_utilization: outcome.cpu_time.useful_ns as f64 / total_cpu_ns,
        delivered_utilization_during_arrivals: window.delivered_ns / window_capacity_ns,
        compute_utilization_during_arrivals: window.compute_ns as f64 / window_capacity_ns,
        offered_utilization_during_arrivals: window.offered_ns / window_capacity_ns,
        delivered_utilization_second_half: second_half.map_or(f64::NAN, |(delivered, _)| delivered),
        compute_utilization_second_half: second_half.map_or(f64::NAN, |(_, compute)| compute),
        saturation,
        mean_slowdown: mean(records.iter().map(|r| r.slowdown)),
        mean_bounded_slowdown: mean(records.iter().map(|r| r.bounded_slowdown)),
        bounded_slowdown_threshold_s: options.bounded_slowdown_threshold_s,
        longest_queue: outcome.longest_queue,
        peak_processes_per_cpu: outcome.peak_processes_per_cpu,
        interrupted_at_s: outcome.stopped_early.then_some(span_s),
        cpu_time: outcome.cpu_time,
        boosts: outcome.boosts,
        switches: outcome.switches,
        events: outcome.events,
        fast_mode,
        watched_windows: watching,
    };
    Ok(RunResult {
        summary,
        jobs: records,
        per_cpu_time: outcome.per_cpu_time,
        trace: outcome.trace,
        event_counts: outcome.event_counts,
        event_log: outcome.event_log,
        fast_windows: outcome.fast_windows,
    })
}

/// Growth of the number of jobs in the machine (queued or running) over the
/// second half of the arrivals (the first holds the climb from an empty
/// machine), as a share of the arrival rate: 0 when stable, 1 - service rate
/// / arrival rate when jobs pile up, wherever they wait.
fn jobs_in_system_growth(samples: &[(SimTime, u32)], last_arrival: SimTime) -> f64 {
    if last_arrival == SimTime::ZERO {
        return 0.0;
    }
    let arrivals_per_ns = samples.len() as f64 / last_arrival.ns() as f64;
    let half = last_arrival.ns() / 2;
    let late: Vec<(f64, f64)> =
        samples.iter().filter(|(t, _)| t.ns() >= half).map(|&(t, n)| (t.ns() as f64, n as f64)).collect();
    slope(&late) / arrivals_per_ns
}
