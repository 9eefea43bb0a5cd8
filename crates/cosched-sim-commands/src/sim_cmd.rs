//! `cosched sim`: simulate schemes side by side on one workload.

use crate::jitter::{print_jitter, JitterFlags};
use crate::model_flags::{ModelFlags, MILLISECONDS, SECONDS, SET_BY_MACHINE_FILE};
use crate::output::{read_bounded, OutputDir};
use crate::plot::{scheme_style, LineChart, Series, StackedBar, StackedBarChart};
use crate::progress::BatchProgress;
use clap::Args;
use cosched_lab::batsim::batsim_jobs_csv;
use cosched_lab::jitter::{jitter_csv, Answer, ArrivalJitter, JitterReport, RunJitter};
use cosched_lab::series::{runs_over_time, series_csv, Stretch};
use cosched_lab::sim::{fast_windows_csv, jobs_csv, prepare, summary_csv, PreparedSim, SimSettings};
use cosched_lab::workload::{
    bounded_slowdown_threshold_s, JobSizes, WorkloadReport, WorkloadSpec, DEFAULT_JOBS, DEFAULT_RUNTIME_SCALE,
    DEFAULT_TARGET_LOAD,
};
use cosched_sim::config::Backfill;
use cosched_sim::cost::RunCost;
use cosched_sim::engine::fast::{FastReport, FastSettings, NotValidated, ACCEPTED_ERROR, HALVES_APART_FACTOR};
use cosched_sim::machine::{MachineModel, MAX_FILE_BYTES};
use cosched_sim::run::{RunOptions, RunResult, SharedChooser};
use cosched_sim::trace::TraceEvent;
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

// The flags' defaults, taken from the library's so that each value is written once.
fn machine() -> SimConfig {
    SimConfig::default()
}
fn fast_settings() -> FastSettings {
    FastSettings::default()
}
fn default_schemes() -> Vec<Scheme> {
    SimSettings::default().schemes
}

/// `--load`'s default as text: the flag is optional (`--natural-load` leaves it out), so clap takes text.
fn default_load_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| DEFAULT_TARGET_LOAD.to_string())
}

fn scheme_help() -> String {
    format!("Schemes to compare, comma-separated: {} (any case)", Scheme::all_names().join(" "))
}

/// Simulate time-sharing schemes side by side on one workload.
///
/// With no options: WL7 (job types J1-J6 mixed), 300 jobs of the
/// Lublin-Feitelson model on 32 one-CPU nodes, MPL 5, skew 20 %, Local and GS.
/// Results go to the terminal and to --out as CSV and JSON.
#[derive(Args, Debug)]
#[command(after_help = "Model parameters and their meaning: docs/model.md. Every default is the \
reference study's value or is marked there as our choice.")]
pub struct SimArgs {
    #[arg(long, value_delimiter = ',', default_values_t = default_schemes(), help = scheme_help())]
    pub schemes: Vec<Scheme>,

    // ---- workload -------------------------------------------------------------
    /// Workload mix: WL1..WL6 use only job type J1..J6, WL7 all six, WL8 J2, J4, J5.
    #[arg(long, default_value_t = SimSettings::default().mix, help_heading = "Workload")]
    pub workload: Mix,
    /// Read jobs from this SWF trace (plain or gzip) instead of generating them.
    #[arg(long, value_name = "FILE.swf", help_heading = "Workload")]
    pub trace: Option<PathBuf>,
    /// Skip malformed trace lines (they are counted and reported) instead of stopping.
    #[arg(long, help_heading = "Workload")]
    pub skip_bad_lines: bool,
    /// Leave out trace jobs wider than the machine (counted and reported) instead of stopping.
    #[arg(long, help_heading = "Workload")]
    pub drop_oversized: bool,
    /// Leave out trace jobs with these SWF statuses (names or numbers: failed, completed, partial, last-partial,
    /// failed-partial, cancelled, unknown), e.g. `failed,cancelled`. By default every job is simulated: failed and
    /// cancelled jobs ran until they ended and loaded the machine too. The summary says what was simulated.
    #[arg(long, value_delimiter = ',', value_parser = cosched_workload::swf::parse_status, requires = "trace", help_heading = "Workload")]
    pub drop_status: Vec<i64>,
    /// Jobs to generate (with --trace: keep only the first N).
    #[arg(long, help_heading = "Workload")]
    pub jobs: Option<usize>,
    /// Sizes of the generated jobs: machine (the Lublin-Feitelson model sized to the machine, the
    /// default), lublin:N (the model sized to N CPUs, only the jobs that fit the machine kept: the
    /// study's words) or trace:FILE (sizes drawn from an SWF trace's jobs that fit the machine).
    #[arg(long, default_value = "machine", conflicts_with = "trace", help_heading = "Workload")]
    pub job_sizes: JobSizes,
    /// Target offered load (CPU demand / capacity), set by scaling inter-arrival times
    /// (--natural-load keeps the workload's own instead).
    #[arg(long, default_value = default_load_text(), help_heading = "Workload")]
    pub load: Option<f64>,
    /// Keep the workload's own inter-arrival times (after the run-time scale) instead of --load.
    #[arg(long, conflicts_with = "load", help_heading = "Workload")]
    pub natural_load: bool,
    /// Multiply every nominal run time by this (the model's run times are hours; see docs/model.md).
    #[arg(long, default_value_t = DEFAULT_RUNTIME_SCALE, help_heading = "Workload")]
    pub runtime_scale: f64,
    /// Start the runs even when their work passes the bound `sim` keeps to: 2e9 process iterations simulated step
    /// by step per run, some 6 to 30 minutes each on the release build (docs/model.md, "What a run costs").
    #[arg(long, help_heading = "Workload")]
    pub allow_long_run: bool,

    // ---- machine --------------------------------------------------------------
    /// Nodes in the cluster (p).
    #[arg(long, default_value_t = machine().nodes, help_heading = "Machine")]
    pub nodes: u32,
    /// CPUs per node (c); one task per CPU.
    #[arg(long, default_value_t = machine().cpus_per_node, help_heading = "Machine")]
    pub cpus_per_node: u32,
    /// A machine file of `cosched calibrate` (its folder or machine.json): CPUs per node, the tick, the
    /// context and gang switch costs and the message costs as measured there, every node on the EEVDF model.
    /// The flags it sets cannot be given with it.
    #[arg(long, value_name = "FILE", help_heading = "Machine", conflicts_with_all = SET_BY_MACHINE_FILE)]
    pub machine: Option<std::path::PathBuf>,
    /// Multiprogramming level: processes per CPU (Local), matrix rows (GS).
    #[arg(long, default_value_t = machine().mpl, help_heading = "Machine")]
    pub mpl: u32,
    /// Skew s: compute and I/O of every iteration are scaled by 1 + U(-s/2, s/2).
    #[arg(long, default_value_t = machine().skew, help_heading = "Machine")]
    pub skew: f64,
    /// Seed of every random stream (workload, job types, skew).
    #[arg(long, default_value_t = machine().seed, help_heading = "Machine")]
    pub seed: u64,
    /// The queue behind a job that does not fit: none, strict FCFS (the study's); easy, EASY backfilling: the
    /// first waiting job gets a reservation from the running jobs' requested times, and a later job starts now
    /// if it fits now and would not delay it by what it asked for; conservative: every waiting job, in queue order,
    /// gets such a reservation, and a job starts now only if it delays none of those before it. A job's requested
    /// time is the trace's field 9, or
    /// else its dedicated time (alone on the machine, no skew, no switches: close to, not above, what it takes).
    /// Nothing is killed at its request. Not GS-cosched, whose queue is cosched's own (docs/model.md).
    #[arg(long, default_value = "none", value_parser = parse_backfill, help_heading = "Machine")]
    pub backfill: Backfill,

    // ---- the machine model: network, costs, node scheduler -------------------------
    #[command(flatten)]
    pub model: ModelFlags,

    // ---- fast mode ------------------------------------------------------------
    /// Fast mode: after every change of the processes on the CPUs, simulate exactly for a warm-up and a
    /// window, then skip ahead to the next change at the rates measured in the window. For long traces at
    /// full run times; its error against the exact engine is in docs/fast-mode.md. Every output says so.
    #[arg(long, help_heading = "Fast mode")]
    pub fast: bool,
    #[command(flatten)]
    pub fast_flags: FastFlags,
    #[command(flatten)]
    pub jitter: JitterFlags,

    // ---- output ---------------------------------------------------------------
    /// Folder for summary.csv, jobs.csv, batsim/SCHEME_jobs.csv, summary.json and workload.swf (replaced if it
    /// is cosched output).
    #[arg(long, default_value = "cosched-out/sim", help_heading = "Output")]
    pub out: PathBuf,
    /// Bounded-slowdown threshold, s (default: 10 s times the run-time scale).
    #[arg(long, help_heading = "Output")]
    pub bsld_threshold_s: Option<f64>,
    /// Stop each run at this simulated time, s (jobs not finished are not reported).
    #[arg(long, help_heading = "Output")]
    pub horizon_s: Option<f64>,
    /// Also write every scheduling decision to trace-SCHEME.jsonl, in time order, then CPU order (small runs only).
    #[arg(long, help_heading = "Output")]
    pub trace_events: bool,
    /// Also write fast-windows.csv: what each of fast mode's windows saw of each running job, and the rate its
    /// jumps then credit it with (at most 500000 rows per scheme). Without --fast, the exact run is watched
    /// through the windows fast mode would take (--fast-warmup-ms, --fast-window-ms): one a warm-up after every
    /// change, and after each the next a window and a warm-up later, never jumping; its jobs and measures stay the
    /// exact run's.
    #[arg(long, help_heading = "Output")]
    pub fast_windows: bool,
    /// No progress lines.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

impl SimArgs {
    /// Every machine, network, cost and scheduler parameter (the scheme is set per run): the flags, with the
    /// machine file's values over them; and the machine file as read for it. The runs and what is printed of their
    /// model use that one reading (`SimOutcome::machine_file`), so a file changed during the runs changes neither.
    fn machine_config(&self) -> Result<(SimConfig, Option<MachineFile>), String> {
        let mut cfg = SimConfig {
            scheme: machine().scheme,
            nodes: self.nodes,
            cpus_per_node: self.cpus_per_node,
            mpl: self.mpl,
            skew: self.skew,
            seed: self.seed,
            horizon_ns: self.horizon_s.map(|h| SECONDS.ns(h, "--horizon-s")).transpose()?,
            backfill: self.backfill,
            ..SimConfig::default()
        };
        let model = apply_model(&self.model, self.machine.as_deref(), &mut cfg)?;
        let file = self.machine.clone().zip(model).map(|(path, model)| MachineFile { path, model });
        Ok((cfg, file))
    }

    /// The workload; `cpus` is the machine's (a machine file may set its CPUs per node).
    fn workload_spec(&self, cpus: u32) -> Result<WorkloadSpec, String> {
        if !(self.runtime_scale.is_finite() && self.runtime_scale > 0.0) {
            return Err(format!("--runtime-scale must be positive, got {}", self.runtime_scale));
        }
        let target_load = if self.natural_load { None } else { self.load };
        if let Some(load) = target_load {
            if !(load.is_finite() && load > 0.0) {
                return Err(format!("--load must be positive, got {load}"));
            }
        }
        if self.jobs == Some(0) {
            return Err("--jobs must be at least 1".into());
        }
        Ok(WorkloadSpec {
            trace: self.trace.clone(),
            skip_bad_lines: self.skip_bad_lines,
            drop_oversized: self.drop_oversized,
            drop_statuses: self.drop_status.clone(),
            jobs: self.jobs.or(self.trace.is_none().then_some(DEFAULT_JOBS)),
            model_procs: cpus,
            runtime_scale: self.runtime_scale,
            target_load,
            seed: self.seed,
            hyper_erlang_params: None,
            job_sizes: self.job_sizes.clone(),
        })
    }

    /// What to simulate, checked: the library's settings.
    pub fn settings(&self) -> Result<SimSettings, String> {
        Ok(self.settings_and_machine_file()?.0)
    }

    /// [`SimArgs::settings`], and the machine file they were made with.
    fn settings_and_machine_file(&self) -> Result<(SimSettings, Option<MachineFile>), String> {
        cosched_lab::sim::check_schemes(&self.schemes)?;
        let (machine, machine_file) = self.machine_config()?;
        let mut settings = SimSettings {
            schemes: self.schemes.clone(),
            machine,
            workload: WorkloadSpec::default(),
            mix: self.workload,
        };
        // The machine is checked before the workload, as the flags' errors have always been reported.
        settings.configs()?;
        settings.workload =
            self.workload_spec(settings.machine.nodes.saturating_mul(settings.machine.cpus_per_node))?;
        Ok((settings, machine_file))
    }

    /// Fast mode's settings, when asked for.
    pub fn fast_settings(&self) -> Result<Option<FastSettings>, String> {
        let settings = self.fast_flags.settings()?;
        if !self.fast && !self.fast_windows && settings != fast_settings() {
            return Err(
                "the --fast-... settings apply to fast mode only: add --fast (or --fast-windows, to watch the exact \
                 run through such windows)"
                    .into(),
            );
        }
        Ok(self.fast.then_some(settings))
    }

    /// An exact run with `--fast-windows`: the windows it is watched through. The guard bounds jumps, which a
    /// watched run never makes: a guard other than the default is refused rather than ignored.
    pub fn watch_windows(&self) -> Result<Option<FastSettings>, String> {
        if self.fast || !self.fast_windows {
            return Ok(None);
        }
        let settings = self.fast_flags.settings()?;
        if settings.guard_ns != fast_settings().guard_ns {
            return Err("--fast-guard-ms bounds fast mode's jumps, and an exact run watched through the windows \
                        (--fast-windows without --fast) never jumps: leave it out, or add --fast"
                .into());
        }
        if settings.reuse_kind_rates {
            return Err(
                "--fast-reuse-kind-rates spares a job its window, and an exact run watched through the windows \
                        (--fast-windows without --fast) is watched through every job's own: leave it out, or add \
                        --fast"
                    .into(),
            );
        }
        Ok(Some(settings))
    }

    fn bsld_threshold_s(&self) -> f64 {
        self.bsld_threshold_s.unwrap_or(bounded_slowdown_threshold_s(self.runtime_scale))
    }
}

/// Fast mode's measurement settings (docs/fast-mode.md).
#[derive(Args, Debug, Clone)]
pub struct FastFlags {
    /// Fast mode: exact simulation after a change before the window opens, ms.
    #[arg(long, default_value_t = MILLISECONDS.of_ns(fast_settings().warmup_ns), help_heading = "Fast mode")]
    pub fast_warmup_ms: f64,
    /// Fast mode: the measurement window, ms (gang schemes: rounded up to whole cycles of the rows) [default:
    /// 200, or another the scheme was measured with where its bound is clearly smaller: 1000 for SB, SY and PB-SB on
    /// one-CPU MLFQ nodes, 1000 for PB-SY on one-CPU EEVDF nodes]
    #[arg(long, help_heading = "Fast mode")]
    pub fast_window_ms: Option<f64>,
    /// Fast mode: exact simulation kept before each job's predicted end, ms.
    #[arg(long, default_value_t = MILLISECONDS.of_ns(fast_settings().guard_ns), help_heading = "Fast mode")]
    pub fast_guard_ms: f64,
    /// Fast mode: a window grows (by its length at a time, up to 16 times it) until every job's processes did this many
    /// iterations in it, on average (0: windows keep their length; see docs/fast-mode.md).
    #[arg(long, default_value_t = fast_settings().min_iterations, help_heading = "Fast mode")]
    pub fast_min_iterations: u64,
    /// Fast mode under GS on one-CPU nodes: a job takes the rate earlier jobs of its kind (tasks and program) were
    /// measured at, once 8 were, instead of a window of its own; every 8th is still measured. About 4 times faster
    /// on a site's log. It has bounds of its own under GS on one-CPU nodes (a little wider than without); elsewhere the
    /// run reports no bound (docs/fast-mode.md, "Rates reused by job kind").
    #[arg(long, help_heading = "Fast mode")]
    pub fast_reuse_kind_rates: bool,
}

impl FastFlags {
    /// The flags that give `fast` where it differs from the defaults, as a command line spells them (a unit test
    /// reads them back through these flags, so that the two never drift apart). A window a run took by
    /// `FastSettings::for_run` is spelled out, and read back as given: the same run.
    pub fn arguments_for(fast: &FastSettings) -> Vec<String> {
        let default = FastSettings::default();
        let ms = |ns: u64| MILLISECONDS.of_ns(ns);
        let mut words = Vec::new();
        // A window given by name is kept for every scheme, the default's length included.
        let window_given = !fast.validated_window || fast.window_ns != default.window_ns;
        for (flag, value, given) in [
            ("--fast-warmup-ms", fast.warmup_ns, fast.warmup_ns != default.warmup_ns),
            ("--fast-window-ms", fast.window_ns, window_given),
            ("--fast-guard-ms", fast.guard_ns, fast.guard_ns != default.guard_ns),
        ] {
            if given {
                words.extend([flag.to_string(), ms(value).to_string()]);
            }
        }
        if fast.min_iterations != default.min_iterations {
            words.extend(["--fast-min-iterations".to_string(), fast.min_iterations.to_string()]);
        }
        if fast.reuse_kind_rates {
            words.push("--fast-reuse-kind-rates".to_string());
        }
        words
    }

    pub fn settings(&self) -> Result<FastSettings, String> {
        let settings = FastSettings {
            warmup_ns: MILLISECONDS.ns(self.fast_warmup_ms, "--fast-warmup-ms")?,
            window_ns: match self.fast_window_ms {
                Some(window_ms) => MILLISECONDS.ns(window_ms, "--fast-window-ms")?,
                None => fast_settings().window_ns,
            },
            validated_window: self.fast_window_ms.is_none(),
            guard_ns: MILLISECONDS.ns(self.fast_guard_ms, "--fast-guard-ms")?,
            min_iterations: self.fast_min_iterations,
            reuse_kind_rates: self.fast_reuse_kind_rates,
            ..fast_settings()
        };
        settings.validate()?;
        Ok(settings)
    }
}

/// The machine-readable record of a run: everything needed to repeat it.
#[derive(Serialize)]
struct SummaryDocument<'a> {
    cosched_version: &'static str,
    command: String,
    seed: u64,
    workload: &'a WorkloadReport,
    mix: String,
    configs: Vec<SimConfig>,
    results: Vec<&'a cosched_sim::Summary>,
    /// Every scheme's answers with the arrivals jittered (`--jitter-draws`).
    #[serde(skip_serializing_if = "Option::is_none")]
    arrival_jitter: Option<&'a JitterReport>,
}

/// What `cosched sim` simulated: the checked configurations, the workload and every scheme's result.
pub struct SimOutcome {
    pub prepared: PreparedSim,
    /// The machine file the runs were made with, as read for them.
    pub machine_file: Option<MachineFile>,
    pub results: Vec<RunResult>,
    /// Each run's wall seconds (`run.json`).
    pub run_wall_s: Vec<f64>,
    /// Every scheme again with its arrivals jittered, if asked (`--jitter-draws`) and not interrupted.
    pub jitter: Option<JitterReport>,
}

/// Simulate what the flags describe, writing nothing: the CLI and the Python package share this.
/// `stop` ends the runs early at their next progress report, keeping the jobs finished by then.
/// `describe_workload`: say on stderr what workload was made (the CLI always does, even with --quiet).
pub fn simulate(args: &SimArgs, stop: Arc<AtomicBool>, describe_workload: bool) -> Result<SimOutcome, String> {
    simulate_chosen(args, stop, describe_workload, None, |_, _, _| {})
}

/// `simulate`, admission decided by `chooser` when one is given (one scheme only: a chooser decides one run);
/// `main_runs_done` sees the runs on the jobs as given before any jittered run starts.
pub fn simulate_chosen(
    args: &SimArgs,
    stop: Arc<AtomicBool>,
    describe_workload: bool,
    chooser: Option<SharedChooser>,
    main_runs_done: impl FnOnce(&PreparedSim, &[RunResult], Option<&MachineFile>),
) -> Result<SimOutcome, String> {
    let (settings, machine_file) = args.settings_and_machine_file()?;
    if chooser.is_some() && settings.schemes.len() != 1 {
        return Err(format!(
            "a policy of your own decides one run: name one scheme, not {}",
            settings.schemes.iter().map(|s| s.name()).collect::<Vec<_>>().join(",")
        ));
    }
    let fast = args.fast_settings()?;
    let jitter = args.jitter.jitter()?;
    if jitter.is_some() && chooser.is_some() {
        return Err("--jitter-draws reruns every scheme; a policy of your own decides one run: not both".into());
    }
    // Each run refuses these too: said here before any run starts rather than after the first ones.
    for cfg in settings.configs()? {
        if fast.is_some() {
            cosched_sim::run::check_fast_mode_validated(&cfg).map_err(|e| e.to_string())?;
        }
        if chooser.is_some() {
            cosched_sim::run::check_chooser_allowed(&cfg, fast.is_some()).map_err(|e| e.to_string())?;
        }
    }
    let prepared = prepare(&settings)?;
    let cost = match args.allow_long_run {
        true => prepared.cost(fast.as_ref()),
        false => prepared.check_cost(fast.as_ref(), args.trace.as_deref())?,
    };
    if describe_workload {
        eprintln!("workload: {}, mix {}", prepared.loaded.report.describe(), args.workload);
        eprintln!("{}", describe_cost(&cost, fast.is_some()));
        if let Some(jitter) = jitter {
            eprintln!("then every scheme {} more times with its arrivals jittered (--jitter-draws)", jitter.draws);
        }
    }
    let options = RunOptions {
        bounded_slowdown_threshold_s: args.bsld_threshold_s(),
        record_trace: args.trace_events,
        record_fast_windows: args.fast_windows,
        watch_windows: args.watch_windows()?,
        progress_every_events: 1 << 18,
        visit_every_tick: false,
        stop: Some(stop),
        fast,
        plan_model_only: false,
        event_log_from_ns: None,
        fast_unvalidated: false,
        chooser,
    };
    let progress = BatchProgress::new(!args.quiet);
    let results = prepared.run(&options, &progress)?;
    let run_wall_s = progress.run_wall_s();
    main_runs_done(&prepared, &results, machine_file.as_ref());
    let jitter = match jitter {
        Some(jitter) if !stopped(&options) => jittered(&prepared, &results, jitter, &options, !args.quiet)?,
        _ => None,
    };
    Ok(SimOutcome { prepared, machine_file, results, run_wall_s, jitter })
}

/// Every scheme again on the jittered jobs, each answer beside its own on the jobs as given; `None` if stopped
/// part way (a stopped run's answers would not compare).
fn jittered(
    prepared: &PreparedSim,
    results: &[RunResult],
    jitter: ArrivalJitter,
    options: &RunOptions,
    show_progress: bool,
) -> Result<Option<JitterReport>, String> {
    let options =
        RunOptions { record_trace: false, record_fast_windows: false, watch_windows: None, ..options.clone() };
    let progress = BatchProgress::new(show_progress).dropping_jittered_runs();
    let draws = prepared.run_jittered(jitter, &options, &progress)?;
    if stopped(&options) {
        return Ok(None);
    }
    let runs = results
        .iter()
        .zip(draws)
        .map(|(r, draws)| RunJitter::of(&r.summary.scheme, Answer::of(&r.summary), draws))
        .collect();
    Ok(Some(JitterReport { jitter, runs }))
}

/// Ctrl-C (or Python's stop) ended the runs.
fn stopped(options: &RunOptions) -> bool {
    options.stop.as_ref().is_some_and(|stop| stop.load(Ordering::Relaxed))
}

/// What each run will cost, said before it starts (docs/model.md, "What a run costs").
fn describe_cost(cost: &RunCost, fast: bool) -> String {
    let iterations = format!("{:.2e}", cost.process_iterations as f64);
    let work = match fast {
        true => {
            format!("about {iterations} process iterations simulated step by step per run in fast mode (an estimate)")
        }
        false => format!("{iterations} process iterations simulated step by step per run"),
    };
    let beyond = if cost.beyond_budget() { " (beyond the bound: --allow-long-run)" } else { "" };
    format!("work: {work}{beyond}; simulated span at least {:.1} s", cost.least_span_ns as f64 / 1e9)
}

pub fn run(args: &SimArgs) -> Result<(), String> {
    // Validate everything before doing any work or touching the output folder.
    args.settings()?;
    args.fast_settings()?;
    args.jitter.jitter()?;
    let checked_out = OutputDir::check(&args.out)?;
    let interrupted = crate::interrupt::stop_on_interrupt()?;
    // The table as soon as the runs it shows end, before the jittered runs (N times as long).
    let show_table = |prepared: &PreparedSim, results: &[RunResult], machine_file: Option<&MachineFile>| {
        print_table(results, &prepared.configs, machine_file)
    };
    let SimOutcome { prepared, results, run_wall_s, jitter, .. } =
        simulate_chosen(args, interrupted.clone(), true, None, show_table)?;
    if let Some(report) = &jitter {
        print_jitter(report, if args.fast { "fast " } else { "" });
    }
    let out = OutputDir::begin(&checked_out)?;
    write_outputs(&out, args, &prepared.configs, &prepared.loaded.report, &results, jitter.as_ref())?;
    out.write("run.json", &crate::run_info::run_json(&results, &run_wall_s))?;
    cosched_workload::swf::write_file(&out.create("workload.swf")?, false, &prepared.loaded.workload)
        .map_err(|e| format!("cannot write workload.swf: {e}"))?;
    let path = out.commit()?;
    eprintln!(
        "results in {}/ (summary.csv, jobs.csv, series.csv, batsim/, summary.json, response.svg, cpu-time.svg, \
         queue.svg, utilization.svg, workload.swf, run.json{}{}{})",
        path.display(),
        if jitter.is_some() { ", jitter.csv" } else { "" },
        if args.fast_windows { ", fast-windows.csv" } else { "" },
        if args.trace_events { ", trace-SCHEME.jsonl" } else { "" }
    );
    let main_runs_whole = results.iter().all(|r| r.summary.interrupted_at_s.is_none());
    if interrupted.load(Ordering::Relaxed) && main_runs_whole {
        return Err(format!(
            "interrupted during the jittered runs: {} holds every scheme's whole run, without jitter.csv or \
             arrival_jitter in summary.json",
            path.display()
        ));
    }
    if interrupted.load(Ordering::Relaxed) {
        return Err(format!(
            "interrupted: {} holds the records of the jobs finished by then (interrupted_at_s in summary.json)",
            path.display()
        ));
    }
    Ok(())
}

fn print_table(results: &[RunResult], configs: &[SimConfig], machine: Option<&MachineFile>) {
    let name_width = results.iter().map(|r| r.summary.scheme.len()).max().unwrap_or(0).max(8);
    println!(
        "{:<name_width$} {:>5} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "scheme",
        "jobs",
        "response",
        "wait",
        "execution",
        "delivered",
        "compute",
        "slowdown",
        "bsld",
        "useful",
        "spin",
        "switch",
        "idle"
    );
    for r in results {
        let s = &r.summary;
        let [useful, spin, switch, overhead, idle] = s.cpu_time.shares();
        println!(
            "{:<name_width$} {:>5} {:>9.2}s {:>9.2}s {:>9.2}s {:>8.1}% {:>7.1}% {:>9.2} {:>9.2} {:>6.1}% {:>6.1}% {:>6.1}% {:>6.1}%",
            s.scheme,
            s.jobs_completed,
            s.mean_response_s,
            s.mean_wait_s,
            s.mean_execution_s,
            100.0 * s.delivered_utilization,
            100.0 * s.compute_utilization,
            s.mean_slowdown,
            s.mean_bounded_slowdown,
            100.0 * useful,
            100.0 * spin,
            100.0 * (switch + overhead),
            100.0 * idle
        );
    }
    println!("delivered, compute: utilization by the work the jobs were given (the study's) and by compute time alone");
    print_fast_mode(results, configs, machine);
    print_window_logs(results, configs);
    for s in results.iter().map(|r| &r.summary).filter(|s| s.saturation.saturated) {
        eprintln!(
            "warning: {} saturated the machine: {}; its means describe a growing backlog",
            s.scheme, s.saturation.why
        );
    }
}

/// Which runs were watched through fast mode's windows, and any window measures not kept (`--fast-windows`).
fn print_window_logs(results: &[RunResult], configs: &[SimConfig]) {
    for (r, cfg) in results.iter().zip(configs) {
        let s = &r.summary;
        if let Some(watched) = s.watched_windows {
            let ms = |ns: u64| ns as f64 / 1e6;
            // Under the gang schemes a window holds whole cycles of the matrix's rows.
            let whole_cycles = if cfg.scheme.is_gang() { ", rounded up to whole cycles of the rows" } else { "" };
            println!(
                "{}: EXACT, watched through fast mode's {} ms windows{whole_cycles} (a {} ms warm-up before each) \
                 for fast-windows.csv; no jump",
                s.scheme,
                ms(watched.window_ns),
                ms(watched.warmup_ns)
            );
        }
        if r.fast_windows.dropped > 0 {
            eprintln!(
                "warning: fast-windows.csv holds {}'s first {} window measures; {} more were not kept (longer \
                 windows or a shorter run keep them all)",
                s.scheme,
                r.fast_windows.measures.len(),
                r.fast_windows.dropped
            );
        }
    }
}

/// Which runs fast mode made, what it skipped, and its validated error in the
/// run's regime, stable or saturated (docs/fast-mode.md); `machine`: the run's machine file.
fn print_fast_mode(results: &[RunResult], configs: &[SimConfig], machine: Option<&MachineFile>) {
    for (s, cfg) in results.iter().map(|r| &r.summary).zip(configs) {
        let Some(fast) = s.fast_mode else { continue };
        let skipped = fast.skipped_ns as f64 / 1e9 / s.span_s.max(f64::MIN_POSITIVE);
        let regime = if s.saturation.saturated { "saturated" } else { "stable" };
        let error = match (fast.validated_error, fast.not_validated) {
            (Some(e), _) => {
                let size = match fast.validated_on_cpus.filter(|&cpus| cpus != cfg.cpu_count()) {
                    Some(cpus) => format!(" (measured on {cpus} CPUs, carried over to this run's {})", cfg.cpu_count()),
                    None => String::new(),
                };
                format!("validated within {:.1} % of exact in {regime} runs{size}", 100.0 * e)
            }
            (None, Some(NotValidated::Window)) => format!("not validated with these windows in {regime} runs"),
            (None, Some(why)) => why.to_string(),
            (None, None) => format!("not validated in {regime} runs"),
        };
        let settings = fast.settings.unwrap_or_default();
        let window_ms = settings.window_ns / 1_000_000;
        let window = match settings.validated_window && settings.window_ns != fast_settings().window_ns {
            true if fast.validated_error.is_some() => {
                format!(" with the {window_ms} ms windows it takes by default here")
            }
            true => format!(" with {window_ms} ms windows"),
            false => String::new(),
        };
        let reused = match fast.reused_kind_rates {
            0 => String::new(),
            jobs => format!(", {jobs} jobs took their kind's rate"),
        };
        println!(
            "{}: FAST MODE{window}, {:.1} % of simulated time skipped{reused}; {error} (docs/fast-mode.md)",
            s.scheme,
            100.0 * skipped
        );
        if fast.validated_error.is_none_or(|e| e > ACCEPTED_ERROR) {
            let remedy = match fast.better_window {
                Some((window_ns, error)) => format!(
                    "; with --fast-window-ms {} it is validated within {:.1} % in {regime} runs",
                    window_ns / 1_000_000,
                    100.0 * error
                ),
                _ => String::new(),
            };
            eprintln!(
                "warning: fast mode is not known to be within {:.0} % of the exact engine for {} in {regime} runs \
                 with these settings on these nodes; {} or run without --fast{remedy}",
                100.0 * ACCEPTED_ERROR,
                s.scheme,
                how_to_check(cfg, settings, machine)
            );
        }
        if fast.rates_unsteady() {
            eprintln!("{}", unsteady_rates_warning(&s.scheme, &fast));
        }
    }
}

/// A run whose windows saw its jobs' rates move within them: fast mode's own sign that a jump may carry one state of
/// a flipping rate far (docs/fast-mode.md, "Rates that flip"). Beside a bound too: a bound is a set's mean, and on the
/// 400-job sets the runs far off were the unsteady ones. Longer windows are not offered as the cure: on seeds drawn
/// after they were measured they cured some runs and not others.
fn unsteady_rates_warning(scheme: &str, fast: &FastReport) -> String {
    let beside_bound = match fast.validated_error {
        Some(bound) => {
            format!(" than its bound of {:.1} % (which holds for a set of runs, not for one)", 100.0 * bound)
        }
        None => String::new(),
    };
    let off = if beside_bound.is_empty() { "far off" } else { "farther off" };
    format!(
        "warning: {scheme}'s rates moved by more than {HALVES_APART_FACTOR} times between the halves of {:.0} % of \
         its jobs' windows ({} of {} judged): they flip between states, and a jump carries what one window saw across a \
         long stretch, so this answer may be {off} the exact engine's{beside_bound} (docs/fast-mode.md, \"Rates that \
         flip\"); run it exactly",
        100.0 * fast.unsteady_share().unwrap_or(0.0),
        fast.unsteady_windows,
        fast.halved_windows
    )
}

/// How a user measures fast mode where this run has no bound: the `bench fast` that runs its model (its machine
/// file or its nodes, the model flags over them, its MPL, skew and backfilling) with its fast settings, or why no
/// `bench fast` runs it.
fn how_to_check(cfg: &SimConfig, fast: FastSettings, machine: Option<&MachineFile>) -> String {
    match bench_fast_command(cfg, fast, machine) {
        Ok(command) => format!("check with `{command}`"),
        Err(why) => format!("no `cosched bench fast` runs this model ({why}): compare with a run without --fast,"),
    }
}

/// The `bench fast` that measures fast mode on this run's model (its machine, costs, scheduler, MPL, skew and
/// queue; not its size or workload, which the bench sets) with its fast settings, or why no `bench fast` runs it.
fn bench_fast_command(cfg: &SimConfig, fast: FastSettings, machine: Option<&MachineFile>) -> Result<String, String> {
    if cfg.horizon_ns.is_some() {
        return Err("`bench fast` runs every job to its end; this run stops at --horizon-s".into());
    }
    // What `bench fast` starts from: the default machine model, with the machine file applied.
    let mut base = SimConfig::default();
    if let Some(file) = machine {
        file.model.apply(&mut base);
    }
    let model_words =
        ModelFlags::arguments_for(cfg, &base).ok_or("a value of it has no flag: only a machine file sets it")?;
    let default = SimConfig::default();
    let mut command = format!("cosched bench fast --schemes {}", cfg.scheme.name());
    if cfg.mpl != default.mpl {
        command += &format!(" --mpl {}", cfg.mpl);
    }
    if cfg.skew != default.skew {
        command += &format!(" --skew {}", cfg.skew);
    }
    if cfg.backfill != default.backfill {
        command += &format!(" --backfill {}", cfg.backfill.name());
    }
    match machine {
        // (`=`: a path that starts with a dash is still the flag's value.)
        Some(file) => command += &format!(" --machine={}", shell_word(&file.path.display().to_string())),
        None if cfg.cpus_per_node != default.cpus_per_node => {
            command += &format!(" --cpus-per-node {}", cfg.cpus_per_node)
        }
        None => {}
    }
    for word in model_words.iter().chain(&FastFlags::arguments_for(&fast)) {
        command += &format!(" {word}");
    }
    Ok(command)
}

/// `summary.json`: the machine-readable record of a run, everything needed to repeat it.
pub fn summary_json(
    args: &SimArgs,
    command: &str,
    configs: &[SimConfig],
    workload: &WorkloadReport,
    results: &[RunResult],
    jitter: Option<&JitterReport>,
) -> Result<String, String> {
    let doc = SummaryDocument {
        cosched_version: env!("CARGO_PKG_VERSION"),
        command: command.to_string(),
        seed: args.seed,
        workload,
        mix: args.workload.to_string(),
        configs: configs.to_vec(),
        results: results.iter().map(|r| &r.summary).collect(),
        arrival_jitter: jitter,
    };
    Ok(serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n")
}

fn write_outputs(
    out: &OutputDir,
    args: &SimArgs,
    configs: &[SimConfig],
    workload: &WorkloadReport,
    results: &[RunResult],
    jitter: Option<&JitterReport>,
) -> Result<(), String> {
    out.write("summary.csv", &summary_csv(results))?;
    if let Some(report) = jitter {
        out.write("jitter.csv", &jitter_csv(report))?;
    }
    out.write("response.svg", &response_chart(results, jitter).to_svg())?;
    out.write("cpu-time.svg", &cpu_time_chart(results).to_svg())?;
    out.write("jobs.csv", &jobs_csv(results))?;
    let cpus: Vec<u32> = configs.iter().map(SimConfig::cpu_count).collect();
    let over_time = runs_over_time(results, &cpus);
    out.write("series.csv", &series_csv(&over_time))?;
    out.write("queue.svg", &over_time_chart(results, &over_time, &QUEUE_OVER_TIME).to_svg())?;
    out.write("utilization.svg", &over_time_chart(results, &over_time, &UTILIZATION_OVER_TIME).to_svg())?;
    for r in results {
        out.write(&batsim_jobs_file(&r.summary.scheme), &batsim_jobs_csv(r))?;
    }
    out.write("summary.json", &summary_json(args, &command_line(), configs, workload, results, jitter)?)?;
    if args.fast_windows {
        out.write("fast-windows.csv", &fast_windows_csv(results))?;
    }
    if args.trace_events {
        for r in results {
            out.write(&format!("trace-{}.jsonl", r.summary.scheme), &trace_jsonl(&r.trace))?;
        }
    }
    Ok(())
}

/// Markers per scheme in the charts over time: enough to tell the schemes apart along 200 points.
const OVER_TIME_CHART_MARKERS: usize = 20;

/// One column of `series.csv` drawn over time.
struct OverTime {
    title: &'static str,
    y_label: &'static str,
    value: fn(&Stretch) -> f64,
    /// The top of the y axis at least (a flat zero line still gets an axis).
    y_top_at_least: f64,
}

const QUEUE_OVER_TIME: OverTime = OverTime {
    title: "Jobs waiting over time",
    y_label: "jobs waiting",
    value: |s| s.waiting_jobs,
    y_top_at_least: 1.0,
};

const UTILIZATION_OVER_TIME: OverTime = OverTime {
    title: "Delivered utilization over time",
    y_label: "work delivered per CPU-second",
    value: |s| s.delivered_utilization,
    y_top_at_least: 1.0,
};

/// A column of `series.csv` per scheme (the means over each stretch); a saturated scheme starred.
fn over_time_chart(results: &[RunResult], over_time: &[(String, Vec<Stretch>)], what: &OverTime) -> LineChart {
    let saturated = |r: &RunResult| r.summary.saturation.saturated;
    let series: Vec<Series> = results
        .iter()
        .zip(over_time)
        .enumerate()
        .map(|(i, (r, (scheme, stretches)))| Series {
            name: format!("{scheme}{}", if saturated(r) { "*" } else { "" }),
            style: scheme_style(scheme, i),
            points: stretches.iter().map(|s| ((s.from_s + s.to_s) / 2.0, (what.value)(s))).collect(),
            clipped_from: None,
            y_errors: Vec::new(),
            x_errors: Vec::new(),
            y_intervals: Vec::new(),
        })
        .collect();
    let most = |f: &dyn Fn(&Stretch) -> f64| over_time.iter().flat_map(|(_, s)| s.iter().map(f)).fold(0.0, f64::max);
    let mut legend_notes = vec![
        "the line: the mean over each 1/200".into(),
        "of the run (series.csv); a marker".into(),
        "every 10th".into(),
    ];
    if results.iter().any(saturated) {
        legend_notes.push("* saturated: the queue grows".into());
    }
    LineChart {
        title: what.title.into(),
        x_label: "simulated time, s".into(),
        y_label: what.y_label.into(),
        x_range: (0.0, most(&|s| s.to_s).max(1e-9)),
        y_range: (0.0, most(&what.value).max(what.y_top_at_least)),
        log_y: false,
        series,
        legend_notes,
        max_markers: Some(OVER_TIME_CHART_MARKERS),
    }
}

/// Where a scheme's jobs go in Batsim's format: Batsim names its file PREFIX_jobs.csv, a run's prefix here is its
/// scheme (docs/batsim.md).
fn batsim_jobs_file(scheme: &str) -> String {
    format!("batsim/{scheme}_jobs.csv")
}

/// Mean response per scheme, split into wait and execution; a saturated scheme starred (its mean is of the jobs
/// that finished, and grows with the run).
fn response_chart(results: &[RunResult], jitter: Option<&JitterReport>) -> StackedBarChart {
    let saturated = |r: &RunResult| r.summary.saturation.saturated;
    // With jittered runs, each bar's whisker spans the lowest to the highest mean response over them.
    let whisker = |i: usize| {
        let Some(spread) = jitter.and_then(|j| j.runs[i].spread) else { return (0.0, 0.0) };
        let given_s = results[i].summary.mean_response_s;
        let seconds = |share: f64| if share.is_finite() { (share * given_s).abs() } else { 0.0 };
        (seconds(spread.response_low), seconds(spread.response_high))
    };
    let notes = [
        results
            .iter()
            .any(saturated)
            .then(|| "* saturated: the mean is of the jobs that finished, and grows the longer the run".to_string()),
        jitter.map(|j| {
            // An unknown move is NaN at both ends (`AnswerSpread::of`).
            let unknown = j.runs.iter().any(|r| r.spread.is_none_or(|s| s.response_low.is_nan()));
            format!(
                "whiskers: the lowest to highest mean response over the run as given and {} with every arrival moved \
                 within ±{} s{}",
                j.jitter.draws,
                j.jitter.jitter_s,
                if unknown { " (none where a run finished no job)" } else { "" }
            )
        }),
    ];
    let notes: Vec<String> = notes.into_iter().flatten().collect();
    StackedBarChart {
        title: "Mean response time".into(),
        unit: "seconds (simulated)".into(),
        segment_names: vec!["wait".into(), "execution".into()],
        bars: results
            .iter()
            .enumerate()
            .map(|(i, r)| StackedBar {
                label: format!("{}{}", r.summary.scheme, if saturated(r) { "*" } else { "" }),
                segments: vec![r.summary.mean_wait_s, r.summary.mean_execution_s],
                whisker: whisker(i),
            })
            .collect(),
        note: (!notes.is_empty()).then(|| notes.join("\n")),
    }
}

/// Where the CPUs' time went, per scheme, in percent.
fn cpu_time_chart(results: &[RunResult]) -> StackedBarChart {
    StackedBarChart {
        title: "CPU time".into(),
        unit: "% of all CPU time".into(),
        segment_names: ["useful", "spin", "switch", "overhead", "idle"].map(String::from).to_vec(),
        bars: results
            .iter()
            .map(|r| StackedBar {
                label: r.summary.scheme.clone(),
                segments: r.summary.cpu_time.shares().iter().map(|s| 100.0 * s).collect(),
                whisker: (0.0, 0.0),
            })
            .collect(),
        note: None,
    }
}

pub fn command_line() -> String {
    std::env::args().map(|a| shell_word(&a)).collect::<Vec<_>>().join(" ")
}

/// A word of a command line as printed for a user to run again: single-quoted (a quote in it closed, escaped and
/// reopened) unless every character is one a shell takes as it is.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn trace_jsonl(trace: &[TraceEvent]) -> String {
    trace.iter().map(|e| serde_json::to_string(e).expect("plain data") + "\n").collect()
}

/// Set `cfg`'s machine model from the flags, then from the machine file (`--machine`) over them: the file's
/// measured values win, and the flags it does not set stay. `sim` and `bench fast` both build their model so.
/// Gives the machine file as read, for what is later said of the model.
pub fn apply_model(
    flags: &ModelFlags,
    machine: Option<&Path>,
    cfg: &mut SimConfig,
) -> Result<Option<MachineModel>, String> {
    flags.apply(cfg)?;
    let model = machine.map(|path| read_machine(path).map_err(|e| format!("--machine {e}"))).transpose()?;
    if let Some(model) = &model {
        model.apply(cfg);
    }
    Ok(model)
}

/// A machine file as a run read it: where it was, and what it said.
pub struct MachineFile {
    pub path: PathBuf,
    pub model: MachineModel,
}

/// The machine file of `cosched calibrate` (its folder or machine.json), read within its bound.
pub fn read_machine(path: &Path) -> Result<MachineModel, String> {
    let file = if path.is_dir() { path.join("machine.json") } else { path.to_path_buf() };
    let text = read_bounded(&file, MAX_FILE_BYTES)?;
    MachineModel::parse(&text).map_err(|e| format!("{}: {e}", file.display()))
}

pub fn parse_backfill(text: &str) -> Result<Backfill, String> {
    Backfill::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Backfill::ALL.iter().map(|b| b.name()).collect();
        format!("unknown backfilling {text:?}; one of: {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use cosched_sim::OsScheduler;

    #[derive(Parser)]
    struct SimCommand {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(flags: &[&str]) -> SimArgs {
        SimCommand::try_parse_from(std::iter::once("sim").chain(flags.iter().copied())).expect("flags parse").sim
    }

    /// `--fast-window-ms`'s help names every window a run given none takes, as the bounds decide it today: the
    /// text is written by hand, the choice measured, so a bound that moves must move the help too.
    #[test]
    fn the_help_names_the_windows_runs_take_by_default() {
        use clap::CommandFactory;
        let nodes = [
            (OsScheduler::Mlfq, 1, "one-CPU MLFQ nodes"),
            (OsScheduler::Eevdf, 1, "one-CPU EEVDF nodes"),
            (OsScheduler::Eevdf, 4, "EEVDF nodes of four CPUs"),
        ];
        let mut said = Vec::new();
        for (node_scheduler, cpus_per_node, where_) in nodes {
            let mut by_window: std::collections::BTreeMap<u64, Vec<&str>> = Default::default();
            for name in Scheme::all_names() {
                let cfg =
                    SimConfig { scheme: name.parse().unwrap(), node_scheduler, cpus_per_node, ..Default::default() };
                if let Some(window_ns) = cosched_sim::engine::fast::settings::better_window(&cfg) {
                    by_window.entry(window_ns / 1_000_000).or_default().push(name);
                }
            }
            for (window_ms, schemes) in by_window {
                let listed = match schemes.split_last() {
                    Some((last, [])) => last.to_string(),
                    Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
                    None => unreachable!(),
                };
                said.push(format!("{window_ms} for {listed} on {where_}"));
            }
        }
        let command = SimCommand::command();
        let help = command.get_arguments().find(|a| a.get_id() == "fast_window_ms").unwrap().get_help().unwrap();
        let expected = format!("clearly smaller: {}]", said.join(", "));
        assert!(help.to_string().contains(&expected), "{help}\nshould say: {expected}");
    }

    #[test]
    fn a_printed_word_runs_as_printed() {
        assert_eq!(shell_word("--schemes"), "--schemes");
        assert_eq!(shell_word("GS,PB-SB"), "GS,PB-SB");
        assert_eq!(shell_word("/tmp/my machine"), "'/tmp/my machine'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("$HOME;rm *"), "'$HOME;rm *'");
        assert_eq!(shell_word(""), "''");
    }

    /// The warning's `bench fast` is written from the machine file as the run read it: nothing is read again, so a
    /// file changed or gone since cannot make the command name another model than the run's.
    #[test]
    fn the_warnings_command_comes_from_the_machine_file_as_read_for_the_run() {
        let text = include_str!("../../../test-data/machines/vm-2026-11-30/machine.json");
        let gone = PathBuf::from("/nonexistent/cosched-machine.json");
        let file = MachineFile { path: gone.clone(), model: MachineModel::parse(text).expect("the kept machine file") };
        let mut cfg = parse(&["--spin-factor", "2"]).machine_config().expect("valid flags").0;
        file.model.apply(&mut cfg);
        cfg.scheme = parse(&["--schemes", "SB"]).settings().expect("valid").configs().expect("valid")[0].scheme;
        let command = bench_fast_command(&cfg, FastSettings::default(), Some(&file)).expect("a command");
        let want = format!("cosched bench fast --schemes SB --machine={} --spin-factor 2", gone.display());
        assert_eq!(command, want);
    }

    /// Fast mode's bounds hold on the machine model `bench fast` runs, `SimConfig`'s defaults: `sim`'s own defaults
    /// must be that model to the bit, on either node scheduler, or no fast run of `sim` would have a bound.
    #[test]
    fn the_default_flags_give_the_machine_model_fast_mode_was_measured_on() {
        use cosched_sim::engine::fast::machine_as_measured;
        for flags in [&[][..], &["--node-scheduler", "eevdf"], &["--cpus-per-node", "4", "--schemes", "GS,DCS"]] {
            for cfg in parse(flags).settings().expect("valid flags").configs().expect("valid machine") {
                assert!(machine_as_measured(&cfg), "{flags:?}: {cfg:?}");
            }
        }
        assert!(!machine_as_measured(&parse(&["--tick-ms", "4"]).settings().unwrap().configs().unwrap()[0]));
    }

    #[test]
    fn the_fast_flags_a_suggested_command_spells_read_back_as_the_same_settings() {
        const MS: u64 = 1_000_000;
        let default = FastSettings::default();
        assert!(FastFlags::arguments_for(&default).is_empty(), "defaults need no flag");
        let each_changed = [
            FastSettings { warmup_ns: 75 * MS, ..default },
            FastSettings { window_ns: 3_000 * MS, validated_window: false, ..default },
            FastSettings { validated_window: false, ..default },
            FastSettings { guard_ns: 5 * MS / 2, ..default },
            FastSettings { min_iterations: 8, ..default },
            FastSettings { reuse_kind_rates: true, ..default },
            FastSettings {
                warmup_ns: 10 * MS,
                window_ns: 300 * MS,
                guard_ns: 40 * MS,
                min_iterations: 2,
                validated_window: false,
                ..default
            },
        ];
        for fast in each_changed {
            let words = FastFlags::arguments_for(&fast);
            let flags: Vec<&str> = std::iter::once("--fast").chain(words.iter().map(String::as_str)).collect();
            assert_eq!(parse(&flags).fast_settings(), Ok(Some(fast)), "{words:?}");
        }
        // The settings a PB-SY run on EEVDF nodes took with no window given: 1 s, spelled out, the same run again.
        let pb_sy =
            SimConfig { scheme: "PB-SY".parse().unwrap(), node_scheduler: OsScheduler::Eevdf, ..Default::default() };
        let took = default.for_run(&pb_sy);
        let words = FastFlags::arguments_for(&took);
        assert_eq!(words, ["--fast-window-ms", "1000"]);
        let again = parse(&["--fast", "--fast-window-ms", "1000"]).fast_settings().unwrap().unwrap();
        assert_eq!(again.for_run(&pb_sy).window_ns, took.window_ns);
    }

    fn json(config: &SimConfig) -> serde_json::Value {
        serde_json::to_value(config).expect("plain data")
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        let settings = parse(&[]).settings().expect("the defaults are valid");
        let library = SimSettings::default();
        assert_eq!(json(&settings.machine), json(&SimConfig::default()));
        assert_eq!(settings.schemes, library.schemes);
        assert_eq!(settings.mix, library.mix);
        assert_eq!(settings.workload, WorkloadSpec::default());
    }

    #[test]
    fn unit_flags_reach_the_config_in_nanoseconds() {
        let config =
            parse(&["--cs-us", "100", "--gang-quantum-ms", "50", "--horizon-s", "2"]).machine_config().unwrap().0;
        assert_eq!(config.costs.context_switch_ns, 100_000);
        assert_eq!(config.costs.gang_quantum_ns, 50_000_000);
        assert_eq!(config.horizon_ns, Some(2_000_000_000));
    }

    #[test]
    fn every_scheme_of_the_table_is_named_in_the_help() {
        for name in Scheme::all_names() {
            assert!(scheme_help().contains(name), "{name} missing from --schemes help");
        }
    }
}
