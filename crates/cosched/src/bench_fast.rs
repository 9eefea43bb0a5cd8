//! `cosched bench fast` (fast mode against the exact engine) and `cosched
//! bench site` (a production-sized trace at full run times in fast mode).
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use crate::jitter::JitterFlags;
use crate::model_flags::{ModelFlags, SET_BY_MACHINE_FILE};
use crate::output::OutputDir;
use crate::progress::{BatchProgress, ProgressLine};
use crate::sim_cmd::{apply_model, command_line, parse_backfill, FastFlags};
use clap::Args;
use cosched_lab::fast_check::{
    by_scheme_and_load, check_settings, pairs_csv, parting_splits, run_pairs, saturation_points, unsteady_splits,
    validated_bound, FastCheckSettings, PairError, PartingSplit, SaturationPointCheck, SchemeCheck, UnsteadySplit,
};
use cosched_lab::jitter::ArrivalJitter;
use cosched_lab::sim::{jobs_csv, summary_csv};
use cosched_lab::workload::{bounded_slowdown_threshold_s, load_workload, WorkloadSpec};
use cosched_sim::config::Backfill;
use cosched_sim::engine::fast::{ACCEPTED_ERROR, UNSTEADY_WINDOWS_SHARE, VALIDATION_CPUS};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{run as run_sim, RunOptions, RunResult};
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchFastArgs {
    /// Schemes to check (default: the reference study's ten).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Option<Vec<Scheme>>,
    /// One workload per seed; every scheme runs on each, exact and fast.
    #[arg(long, value_delimiter = ',', default_values_t = [1u64, 2, 3], conflicts_with = "draw_seeds")]
    pub seeds: Vec<u64>,
    /// Draw this many seeds at random instead (at least 2; printed, and kept in checks.json, to run again with
    /// --seeds): checks the validated bounds on workloads nobody chose.
    #[arg(long, value_name = "N")]
    pub draw_seeds: Option<usize>,
    /// Nodes.
    #[arg(long, default_value_t = 32)]
    pub nodes: u32,
    /// CPUs per node: fast mode's bounds were measured on one-CPU nodes and on EEVDF nodes of four, and a run on
    /// other nodes reports none; this measures it there.
    #[arg(long, default_value_t = SimConfig::default().cpus_per_node)]
    pub cpus_per_node: u32,
    /// A machine file of `cosched calibrate` (its folder or machine.json): fast mode measured on that machine's
    /// CPUs per node, tick, switch and message costs (EEVDF nodes), as `sim --machine` runs them. Every bound was
    /// measured on the default machine model, so a fast run on another reports none; this measures it there.
    #[arg(long, value_name = "FILE", conflicts_with_all = SET_BY_MACHINE_FILE)]
    pub machine: Option<PathBuf>,
    /// Multiprogramming level.
    #[arg(long, default_value_t = SimConfig::default().mpl)]
    pub mpl: u32,
    /// Skew s: compute and I/O of every iteration are scaled by 1 + U(-s/2, s/2). The bounds were measured at the
    /// default; this measures fast mode at another.
    #[arg(long, default_value_t = SimConfig::default().skew)]
    pub skew: f64,
    /// The queue behind a job that does not fit, as `sim --backfill`: none (strict FCFS, as the bounds were
    /// measured), easy or conservative (measured for GS on one-CPU nodes only).
    #[arg(long, default_value = "none", value_parser = parse_backfill)]
    pub backfill: Backfill,
    /// Jobs of the Lublin-Feitelson model per workload.
    #[arg(long, default_value_t = 200)]
    pub jobs: usize,
    /// Run-time scale: long enough for fast mode to skip (jobs of minutes), short enough for exact runs.
    #[arg(long, default_value_t = 0.05)]
    pub runtime_scale: f64,
    /// Offered loads; each seed's workload is made at each. With more than one,
    /// each scheme's saturation point (the lowest load judged saturated) is
    /// compared too.
    #[arg(long, visible_alias = "load", value_delimiter = ',', default_values_t = [0.4])]
    pub loads: Vec<f64>,
    #[command(flatten)]
    pub fast: FastFlags,
    /// Folder for pairs.csv and checks.json.
    #[arg(long, default_value = "cosched-out/bench-fast")]
    pub out: PathBuf,
    /// The machine model, as `sim` takes it (`--node-scheduler`: fast mode's bounds are kept for mlfq and eevdf;
    /// any other flag here that a scheme reads gives a model they were not measured on).
    #[command(flatten)]
    pub model: ModelFlags,
    #[command(flatten)]
    pub jitter: JitterFlags,
}

#[derive(Serialize)]
struct FastCheckReport<'a> {
    command: String,
    /// The machine model and settings every pair ran with, a machine file's read in.
    model: BenchedModel<'a>,
    accepted_error: f64,
    seeds: &'a [u64],
    /// Per scheme and load: the scheme's bound for stable runs on these nodes with the settings it ran with (taken, as the
    /// bounds were measured, over the seeds whatever their verdict), and whether this check's intervals lie within
    /// it (`None`: no bound).
    validated_bounds: Vec<BoundCheck>,
    exact_wall_s: f64,
    fast_wall_s: f64,
    /// The jittered exact runs', if any (`--jitter-draws`).
    #[serde(skip_serializing_if = "Option::is_none")]
    jittered_wall_s: Option<f64>,
    schemes: &'a [SchemeCheck],
    /// Only with more than one load.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    saturation_points: &'a [SaturationPointCheck],
    /// Per scheme: the runs in which some job was placed on other CPUs, and the largest error with and without.
    placements: &'a [PartingSplit],
    /// Per scheme: the runs fast mode judged to have unsteady rates, and the largest error of those and the rest.
    unsteady: &'a [UnsteadySplit],
}

/// Of a pair's configuration, what every pair shares: the machine's size and model, and the run's settings (not the
/// scheme or seed, which the pairs give).
#[derive(Serialize)]
struct BenchedModel<'a> {
    nodes: u32,
    cpus_per_node: u32,
    mpl: u32,
    skew: f64,
    backfill: Backfill,
    node_scheduler: cosched_sim::OsScheduler,
    network: &'a cosched_sim::config::NetworkConfig,
    costs: &'a cosched_sim::config::CostConfig,
    scheduler: &'a cosched_sim::config::NodeSchedulerConfig,
}

impl<'a> BenchedModel<'a> {
    fn of(machine: &'a SimConfig) -> BenchedModel<'a> {
        BenchedModel {
            nodes: machine.nodes,
            cpus_per_node: machine.cpus_per_node,
            mpl: machine.mpl,
            skew: machine.skew,
            backfill: machine.backfill,
            node_scheduler: machine.node_scheduler,
            network: &machine.network,
            costs: &machine.costs,
            scheduler: &machine.scheduler,
        }
    }
}

#[derive(Serialize)]
struct BoundCheck {
    scheme: String,
    load: f64,
    bound: Option<f64>,
    /// The CPUs the bound was measured on, where this check ran on others: it is carried over.
    #[serde(skip_serializing_if = "Option::is_none")]
    carried_over_from_cpus: Option<u32>,
    within_bound: Option<bool>,
}

/// The machine the pairs run on: the flags' nodes, or the machine file's.
fn machine_of(args: &BenchFastArgs) -> Result<SimConfig, String> {
    let mut machine = SimConfig {
        nodes: args.nodes,
        cpus_per_node: args.cpus_per_node,
        mpl: args.mpl,
        skew: args.skew,
        backfill: args.backfill,
        ..SimConfig::default()
    };
    apply_model(&args.model, args.machine.as_deref(), &mut machine)?;
    Ok(machine)
}

pub fn run_fast_check(args: &BenchFastArgs) -> Result<(), String> {
    let seeds = match args.draw_seeds {
        Some(count) => {
            let drawn = draw_seeds(count)?;
            let listed: Vec<String> = drawn.iter().map(u64::to_string).collect();
            eprintln!("seeds drawn at random: {} (again with --seeds {})", listed.join(", "), listed.join(","));
            drawn
        }
        None => args.seeds.clone(),
    };
    let machine = machine_of(args)?;
    let settings = FastCheckSettings {
        schemes: match &args.schemes {
            Some(schemes) => schemes.clone(),
            None => Scheme::study_names().into_iter().map(|n| n.parse()).collect::<Result<_, _>>()?,
        },
        loads: args.loads.clone(),
        seeds,
        machine: machine.clone(),
        workload: WorkloadSpec {
            jobs: Some(args.jobs),
            model_procs: args.nodes.saturating_mul(machine.cpus_per_node),
            runtime_scale: args.runtime_scale,
            ..WorkloadSpec::default()
        },
        mix: Mix { number: 7 },
        fast: args.fast.settings()?,
        jitter: args.jitter.jitter()?,
    };
    if settings.seeds.is_empty() {
        return Err("--seeds needs at least one seed".into());
    }
    check_settings(&settings)?;
    let checked_out = OutputDir::check(&args.out)?;
    let started = Instant::now();
    let mut batch_ends = Vec::new();
    let exact_watch = BatchProgress::new(true);
    let fast_watch = BatchProgress::new(true);
    let pairs = run_pairs(&settings, &exact_watch, &fast_watch, || batch_ends.push(Instant::now()))?;
    let [exact_done, fast_done] = batch_ends[..] else { unreachable!("run_pairs marks the end of its two batches") };
    let exact_wall_s = (exact_done - started).as_secs_f64();
    let fast_wall_s = (fast_done - exact_done).as_secs_f64();
    let jittered_wall_s = settings.jitter.map(|_| fast_done.elapsed().as_secs_f64());
    let checks = by_scheme_and_load(&pairs);
    let carried_over = Some(VALIDATION_CPUS).filter(|&cpus| cpus != settings.machine.cpu_count());
    let bounds: Vec<BoundCheck> = checks
        .iter()
        .map(|c| {
            let bound = validated_bound(&settings, &c.scheme);
            BoundCheck {
                scheme: c.scheme.clone(),
                load: c.load,
                bound,
                carried_over_from_cpus: bound.and(carried_over),
                within_bound: bound.map(|b| c.within(b)),
            }
        })
        .collect();
    print_checks(&checks, &bounds, exact_wall_s, fast_wall_s);
    if let Some(cpus) = carried_over {
        println!(
            "    (every bound was measured on {cpus} CPUs and is carried over to these {})",
            settings.machine.cpu_count()
        );
    }
    let points = if args.loads.len() > 1 {
        saturation_points(&pairs.iter().map(|p| p.verdicts()).collect::<Vec<_>>())
    } else {
        Vec::new()
    };
    print_estimate_ratios(&checks);
    print_saturation_points(&points);
    let splits = parting_splits(&pairs);
    print_parting_splits(&splits);
    let unsteady = unsteady_splits(&pairs);
    print_unsteady_splits(&unsteady);
    if let Some(jitter) = settings.jitter {
        print_jitter_checks(&checks, jitter, jittered_wall_s.unwrap_or_default());
    }
    let out = OutputDir::begin(&checked_out)?;
    out.write("pairs.csv", &pairs_csv(&pairs))?;
    let report = FastCheckReport {
        command: command_line(),
        model: BenchedModel::of(&settings.machine),
        accepted_error: ACCEPTED_ERROR,
        seeds: &settings.seeds,
        validated_bounds: bounds,
        exact_wall_s,
        fast_wall_s,
        jittered_wall_s,
        schemes: &checks,
        saturation_points: &points,
        placements: &splits,
        unsteady: &unsteady,
    };
    out.write("checks.json", &(serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n"))?;
    let path = out.commit()?;
    eprintln!("results in {}/ (pairs.csv, checks.json)", path.display());
    Ok(())
}

/// `count` seeds from the operating system's randomness, each below 2^32 (short enough to type again), distinct.
fn draw_seeds(count: usize) -> Result<Vec<u64>, String> {
    use std::io::Read;
    // One seed has no interval to check.
    if !(2..=1_000).contains(&count) {
        return Err(format!("--draw-seeds {count}: give 2 to 1000"));
    }
    let mut urandom = std::fs::File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?;
    let mut seeds = Vec::with_capacity(count);
    while seeds.len() < count {
        let mut bytes = [0u8; 4];
        urandom.read_exact(&mut bytes).map_err(|e| format!("/dev/urandom: {e}"))?;
        let seed = u64::from(u32::from_le_bytes(bytes));
        if !seeds.contains(&seed) {
            seeds.push(seed);
        }
    }
    Ok(seeds)
}

fn print_checks(checks: &[SchemeCheck], bounds: &[BoundCheck], exact_wall_s: f64, fast_wall_s: f64) {
    println!("fast mode against exact: fast / exact - 1, mean over seeds ± 95 % interval");
    println!(
        "{:<10} {:>5} {:>18} {:>18} {:>18} {:>10} {:>8} {:>7} {:>14} {:>9} {:>8}",
        "scheme",
        "load",
        "mean response",
        "mean wait*",
        "delivered util",
        "saturated",
        "skipped",
        "within",
        "job p50/p90**",
        "bound***",
        "in bound"
    );
    for (c, b) in checks.iter().zip(bounds) {
        let pct = |e: &cosched_bench::stats::Estimate| {
            format!("{:+.2} ± {:.2} %", 100.0 * e.mean, 100.0 * e.ci95_half_width())
        };
        println!(
            "{:<10} {:>5} {:>18} {:>18} {:>18} {:>10} {:>7.1}% {:>7} {:>14} {:>9} {:>8}",
            c.scheme,
            c.load,
            pct(&c.response),
            pct(&c.wait),
            pct(&c.utilization),
            format!("{}/{} agree", c.saturation_agreements, c.runs),
            100.0 * c.skipped_share.mean,
            if c.within(ACCEPTED_ERROR) { "yes" } else { "NO" },
            format!("{:.1}/{:.1} %", 100.0 * c.job_error_p50, 100.0 * c.job_error_p90),
            b.bound.map_or("none".to_string(), |b| format!("{:.1} %", 100.0 * b)),
            match b.within_bound {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            }
        );
    }
    println!("* wait: the difference as a share of the exact mean response");
    println!("** single jobs' response: median and 90th percentile of |fast / exact - 1|");
    println!("*** the scheme's bound for stable runs on these nodes with these settings (a saturated run reports");
    println!("    the larger of it and the saturated bound); in bound: both intervals lie within it");
    println!(
        "wall time: exact {exact_wall_s:.1} s, fast {fast_wall_s:.1} s ({:.1}x)",
        exact_wall_s / fast_wall_s.max(1e-9)
    );
}

/// How far fast mode's work estimate (what decides whether a run needs --allow-long-run) was from its work.
fn print_estimate_ratios(checks: &[SchemeCheck]) {
    println!("fast mode's work against its estimate before the run: events / estimated events*, mean [min - max]");
    for c in checks {
        let r = &c.estimate_ratio;
        println!("{:<10} {:>5} {:>8.2} [{:.2} - {:.2}]", c.scheme, c.load, r.mean, r.min, r.max);
    }
    println!("* estimated process iterations (docs/model.md, \"What a run costs\") times the exact run's events");
    println!("  per iteration");
}

fn print_saturation_points(points: &[SaturationPointCheck]) {
    if points.is_empty() {
        return;
    }
    println!("saturation point: the lowest load judged saturated, exact / fast, per seed");
    let load = |l: Option<f64>| l.map_or("none".to_string(), |l| l.to_string());
    for p in points {
        let seeds: Vec<String> =
            p.seeds.iter().map(|s| format!("seed {}: {} / {}", s.seed, load(s.exact), load(s.fast))).collect();
        let difference = p.mean_difference.map_or("-".to_string(), |d| format!("{d:+.3}"));
        println!(
            "{:<10} {}; agree {}/{}; fast - exact {} over {} seeds saturated both ways",
            p.scheme,
            seeds.join(", "),
            p.agreements,
            p.seeds.len(),
            difference,
            p.both_saturated
        );
    }
}

/// Per scheme and load, the exact engine's own spread under arrival jitter beside fast mode's error.
fn print_jitter_checks(checks: &[SchemeCheck], jitter: ArrivalJitter, wall_s: f64) {
    println!();
    println!(
        "the exact engine again with every arrival moved within ±{} s, {} draws per run (pairs.csv: exact_jitter_*):",
        jitter.jitter_s, jitter.draws
    );
    println!("the largest move of its answer* beside fast mode's largest error*, fast mode's largest error against");
    println!("the nearest exact answer**, and the runs whose fast answer lies within the exact answers' spread");
    println!("(both figures between the lowest and highest exact answer)");
    println!(
        "{:<10} {:>5} {:>14} {:>14} {:>16} {:>14}",
        "scheme", "load", "exact moves", "fast is off", "off the nearest", "within spread"
    );
    for check in checks {
        let Some(under) = check.under_jitter else { continue };
        println!(
            "{:<10} {:>5} {:>13.1}% {:>13.1}% {:>15.1}% {:>14}",
            check.scheme,
            check.load,
            100.0 * under.exact_largest_move,
            100.0 * under.fast_largest_error,
            100.0 * under.fast_largest_error_to_nearest,
            format!("{}/{}", under.fast_within_exact_spread_runs, check.runs)
        );
    }
    println!("* mean response or delivered utilization, against the exact answer on the workload as given");
    println!("** the larger of the two figures' errors, against the exact answer (given or jittered) nearest to it");
    println!("wall time of the jittered runs: {wall_s:.1} s");
}

/// How many runs placed some job on other CPUs in the fast run than in the exact one, and the largest error with and
/// without such a parting: a run whose placements part follows another schedule from then on, so a small error of
/// rate can grow into a large one.
fn print_parting_splits(splits: &[PartingSplit]) {
    println!(
        "placements: runs in which fast mode placed some job on other CPUs than exact (pairs.csv: placed_otherwise)"
    );
    println!("and the largest error of one run*, without and with such a parting (load, seed)");
    for s in splits {
        println!(
            "{:<10} parted {:>3}/{:<3} placements agree: {:<28} parted: {}",
            s.scheme,
            s.parted_runs,
            s.runs,
            one_run(s.largest_agreeing),
            one_run(s.largest_parted)
        );
    }
    println!("{ONE_RUN_ERROR}");
}

/// What the largest error of one run is, below a table that gives it.
const ONE_RUN_ERROR: &str =
    "* the larger of |fast / exact - 1| of mean response and of delivered utilization, one seed's run";

/// One run's error, with its load and seed.
fn one_run(error: Option<PairError>) -> String {
    error.map_or("-".to_string(), |e| format!("{:.1} % ({}, {})", 100.0 * e.error, e.load, e.seed))
}

/// How many runs fast mode judged to have rates that moved within its windows, and the largest error of those and
/// of the rest: whether that judgement goes with the error on these runs.
fn print_unsteady_splits(splits: &[UnsteadySplit]) {
    println!(
        "unsteady rates: runs whose rates moved between the halves of {:.0} % or more of their jobs' windows",
        100.0 * UNSTEADY_WINDOWS_SHARE
    );
    println!("(sim warns of them; pairs.csv: fast_unsteady_share), and the largest error of one run*");
    for s in splits {
        if s.judged_runs == 0 {
            println!("{:<10} never judged (a gang scheme, or too few iterations in a window)", s.scheme);
            continue;
        }
        println!(
            "{:<10} unsteady {:>3}/{:<3} steady: {:<28} unsteady: {}",
            s.scheme,
            s.unsteady_runs,
            s.judged_runs,
            one_run(s.largest_steady),
            one_run(s.largest_unsteady)
        );
    }
    println!("{ONE_RUN_ERROR}");
}

// ---- the site-scale benchmark ---------------------------------------------------

#[derive(Args, Debug)]
pub struct BenchSiteArgs {
    /// An SWF trace to replay (default: generate the site trace, see --jobs, --load, --seed).
    #[arg(long, value_name = "FILE.swf")]
    pub trace: Option<PathBuf>,
    /// Schemes, each run in turn (wall time and peak memory are per run).
    #[arg(long, value_delimiter = ',', default_values = ["GS", "SB", "PB-SB"])]
    pub schemes: Vec<Scheme>,
    /// One-CPU nodes (the generated trace is sized to them).
    #[arg(long, default_value_t = 128)]
    pub nodes: u32,
    #[arg(long, default_value_t = SimConfig::default().mpl)]
    pub mpl: u32,
    /// Generated trace: jobs of the Lublin-Feitelson model.
    #[arg(long, default_value_t = 18_000)]
    pub jobs: usize,
    /// Generated trace: offered load (inter-arrival times are scaled to it; 0.6 gives about 90 days).
    #[arg(long, default_value_t = 0.6)]
    pub load: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run-time scale (1: run times as in the trace).
    #[arg(long, default_value_t = 1.0)]
    pub runtime_scale: f64,
    #[command(flatten)]
    pub fast: FastFlags,
    /// Folder for the trace (site.swf), summary.csv, jobs.csv and site.json.
    #[arg(long, default_value = "cosched-out/bench-site")]
    pub out: PathBuf,
}

#[derive(Serialize)]
struct SiteRun {
    scheme: String,
    wall_s: f64,
    peak_rss_mib: Option<f64>,
    jobs_completed: usize,
    simulated_days: f64,
    skipped_share: f64,
    events: u64,
    interrupted: bool,
}

pub fn run_site(args: &BenchSiteArgs) -> Result<(), String> {
    let fast = args.fast.settings()?;
    let checked_out = OutputDir::check(&args.out)?;
    let machine = SimConfig { nodes: args.nodes, mpl: args.mpl, ..SimConfig::default() };
    let spec = WorkloadSpec {
        trace: args.trace.clone(),
        jobs: args.trace.is_none().then_some(args.jobs),
        model_procs: machine.cpu_count(),
        runtime_scale: args.runtime_scale,
        target_load: args.trace.is_none().then_some(args.load),
        seed: args.seed,
        ..WorkloadSpec::default()
    };
    let loaded = load_workload(&spec, machine.cpu_count())?;
    eprintln!("workload: {}", loaded.report.describe());
    let requests = loaded.requests();
    let interrupted = crate::interrupt::stop_on_interrupt()?;
    let options = RunOptions {
        bounded_slowdown_threshold_s: bounded_slowdown_threshold_s(args.runtime_scale),
        progress_every_events: 1 << 18,
        stop: Some(interrupted.clone()),
        fast: Some(fast),
        ..RunOptions::default()
    };
    let mut results = Vec::new();
    let mut runs = Vec::new();
    for scheme in &args.schemes {
        let config = SimConfig { scheme: *scheme, ..machine.clone() };
        config.validate().map_err(|e| e.to_string())?;
        let jobs = sim_jobs(&requests, &WorkloadPlan { mix: Mix { number: 7 }, runtime_scale: 1.0 }, &config);
        reset_peak_memory();
        let mut line = ProgressLine::new(scheme.name(), true);
        let started = Instant::now();
        let result = run_sim(&config, jobs, &options, |p| line.update(p)).map_err(|e| e.to_string())?;
        runs.push(site_run(&result, started.elapsed().as_secs_f64()));
        eprintln!("{}: {:.1} s wall", scheme.name(), started.elapsed().as_secs_f64());
        results.push(result);
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    print_site(&runs);
    let out = OutputDir::begin(&checked_out)?;
    cosched_workload::swf::write_file(&out.create("site.swf")?, false, &loaded.workload)
        .map_err(|e| format!("cannot write site.swf: {e}"))?;
    out.write("summary.csv", &summary_csv(&results))?;
    out.write("jobs.csv", &jobs_csv(&results))?;
    out.write("site.json", &(serde_json::to_string_pretty(&runs).map_err(|e| e.to_string())? + "\n"))?;
    let path = out.commit()?;
    eprintln!("results in {}/ (site.swf, summary.csv, jobs.csv, site.json)", path.display());
    if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(format!("interrupted: {} holds the jobs finished by then", path.display()));
    }
    Ok(())
}

fn site_run(result: &RunResult, wall_s: f64) -> SiteRun {
    let s = &result.summary;
    SiteRun {
        scheme: s.scheme.clone(),
        wall_s,
        peak_rss_mib: peak_memory_mib(),
        jobs_completed: s.jobs_completed,
        simulated_days: s.span_s / 86_400.0,
        skipped_share: s.fast_mode.map_or(0.0, |f| f.skipped_ns as f64 / 1e9 / s.span_s.max(f64::MIN_POSITIVE)),
        events: s.events,
        interrupted: s.interrupted_at_s.is_some(),
    }
}

fn print_site(runs: &[SiteRun]) {
    println!(
        "{:<8} {:>9} {:>10} {:>6} {:>10} {:>8} {:>12}",
        "scheme", "wall s", "peak MiB", "jobs", "sim. days", "skipped", "events"
    );
    for r in runs {
        println!(
            "{:<8} {:>9.1} {:>10} {:>6} {:>10.1} {:>7.2}% {:>12}",
            r.scheme,
            r.wall_s,
            r.peak_rss_mib.map_or("?".into(), |m| format!("{m:.0}")),
            r.jobs_completed,
            r.simulated_days,
            100.0 * r.skipped_share,
            r.events
        );
    }
}

/// Reset the process's peak resident set (Linux: `5` to /proc/self/clear_refs), so each run's peak is its own.
fn reset_peak_memory() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("warning: cannot reset the peak memory ({e}); later runs report the largest peak so far");
    }
}

/// The process's peak resident set since the last reset, MiB.
fn peak_memory_mib() -> Option<f64> {
    crate::bench_scaling::peak_rss_kib().map(|kib| kib as f64 / 1024.0)
}
