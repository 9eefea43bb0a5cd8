//! `cosched study e1 … e5`: the reference study's experiments, each one
//! command. The runs, their replications and their points come from
//! `cosched_lab::study`; here are the flags, and what a study writes: its runs
//! and points (CSV), its table (Markdown), its figures (SVG and PNG) and a
//! manifest with the command that reproduces it, version, seeds and parameters.
//! A study can also run in shards (`--shard I/N`, `cosched_lab::shard`), each
//! writing a shard document, which `cosched study merge` turns into the same
//! files, byte for byte.

use crate::output::{CheckedOut, OutputDir};
use crate::plot::{scheme_style, svg_to_png, Chart, GroupedBarChart, LineChart, Series, StackedBar, StackedBarChart};
use crate::progress::BatchProgress;
use clap::{Args, Subcommand};
use cosched_core::stats::Estimate;
use cosched_lab::journal::Journal;
use cosched_lab::shard::{merge, run_shard, Shard, ShardDocument};
use cosched_lab::study::{
    capacities, capacity_of, curve, design_len, first_seen, in_study_order, paired_effect, points, points_csv,
    run_study, runs_csv, schemes_in_order, study_config, Capacity, Curve, Experiment, ModelChoices, Point, RunRow,
    StudySettings, CAPACITY_GROUP, FULL_JOBS_PER_RUN, FULL_RUNTIME_SCALE, INTERRUPTED, KNEE_RESPONSE_FACTOR,
};
use cosched_lab::workload::JobSizes;
use cosched_sim::config::{Backfill, BoostDisplaces, BoostReceive, BoostWalk, YieldCycle};
use cosched_sim::{OsScheduler, Scheme, SimConfig};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// E1, load: WL7, p = 32, MPL 5, s = 20 %; mean response against delivered utilization per scheme as load rises.
    ///
    /// At its defaults about 15 minutes on a 2-vCPU VM. Ctrl-C keeps the finished runs in OUT.journal and their tables
    /// and figures in OUT, marked partial; `--resume` runs the rest.
    E1(StudyArgs),
    /// E2, nature of the workload: WL4 (CPU), WL5 (communication), WL2 (I/O), WL3 (balanced); wait and execution per scheme.
    ///
    /// At its defaults about 3 minutes on a 2-vCPU VM (161 s, 2026-11-28). Ctrl-C keeps the finished runs in
    /// OUT.journal and their tables and figures in OUT, marked partial; `--resume` runs the rest.
    E2(StudyArgs),
    /// E3, multiprogramming level: response at MPL 5 and 16 relative to MPL 2, for WL2, WL4, WL5 (at a load where jobs
    /// queue: offered load 0.9, or with --e3-load-fraction each scheme at that fraction of its own capacity).
    ///
    /// At its defaults about 6 minutes on a 2-vCPU VM (348 s, 2026-11-28); with --e3-load-fraction 0.8 and six seeds,
    /// 11 minutes. Ctrl-C keeps the finished runs in OUT.journal and their tables and figures in OUT, marked
    /// partial; `--resume` runs the rest.
    E3(StudyArgs),
    /// E1's sensitivity to the open choices of the model (CS 200/100 µs, a short I/O keeping the CPU, a GS job's
    /// start in the running row, PB's walk timing, its receive and displacement readings, spin-yield's cycle, and
    /// the last three with the first two together): each one's effect on every scheme's capacity and on E2's
    /// ranking, paired on the same seeds.
    ///
    /// At its defaults (all nine variants, three seeds) about half an hour on a 2-vCPU VM (estimated); --variants and
    /// --schemes take part of it (five schemes, five variants, six seeds: 21.5 minutes). Ctrl-C keeps the finished runs
    /// in OUT.journal and their tables and figures in OUT, marked partial; `--resume` runs the rest.
    E1s(StudyArgs),
    /// E4, skew: WL4 at s = 20 % and 150 %.
    ///
    /// At its defaults about 20 seconds on a 2-vCPU VM (2026-11-28). Ctrl-C keeps the finished runs in OUT.journal and
    /// their tables and figures in OUT, marked partial; `--resume` runs the rest.
    E4(StudyArgs),
    /// E5, system overheads: WL5 with cheaper switches, quanta and interrupts, normalised to the defaults.
    ///
    /// At its defaults about 4.5 minutes on a 2-vCPU VM (267 s, 2026-11-28). Ctrl-C keeps the finished runs in
    /// OUT.journal and their tables and figures in OUT, marked partial; `--resume` runs the rest.
    E5(StudyArgs),
    /// Merge a study's shards (`study eN --shard I/N`) into the files the study run whole writes, byte for byte.
    ///
    /// Every shard 1 to N must be given once, all of one experiment, settings and cosched version. E1's shards
    /// run its full grid, the saturated runs too; merging leaves out a scheme's runs above its first saturated
    /// load, as a whole run does, unless the shards ran with --keep-saturated.
    ///
    /// Example, three shards run anywhere (a Slurm job array, docs/reproduction.md), then merged:
    ///   cosched study e1 --shard 1/3 --out shards/1   (and 2/3, 3/3)
    ///   cosched study merge shards/1 shards/2 shards/3 --out study-e1
    #[command(verbatim_doc_comment)]
    Merge(MergeArgs),
}

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// The shards' output folders (each holding shard.json), or their shard.json files, in any order.
    #[arg(required = true, value_name = "SHARD")]
    pub shards: Vec<PathBuf>,
    /// Output folder (default: cosched-out/study-eN).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct StudyArgs {
    /// Jobs per run (the Lublin-Feitelson model sized to the machine).
    #[arg(long, default_value_t = defaults().jobs_per_run)]
    pub jobs: usize,
    /// Multiply every nominal run time by this (documented in every output).
    #[arg(long, default_value_t = defaults().runtime_scale)]
    pub runtime_scale: f64,
    /// Offered loads (E1: the steps; the others: their single load, first value; see `study --help`).
    #[arg(long, value_delimiter = ',')]
    pub loads: Option<Vec<f64>>,
    #[arg(long, value_delimiter = ',', help = schemes_help())]
    pub schemes: Option<Vec<Scheme>>,
    /// Seed of the first replication; replication k uses seed + k for its workload and its model.
    #[arg(long, default_value_t = defaults().first_seed)]
    pub seed: u64,
    /// Independent replications per point (each its own workload and skew draws); points are their means
    /// with 95 % confidence intervals.
    #[arg(long, default_value_t = defaults().replications)]
    pub replications: u32,
    /// A run stops at this many times (arrival span + MPL x longest run time); jobs unfinished then mark it saturated.
    #[arg(long, default_value_t = defaults().horizon_factor)]
    pub horizon_factor: f64,
    /// E1: also run a scheme at the loads above the one where it saturated (by default it is left out
    /// there: its backlog only grows, and those runs are the longest).
    #[arg(long)]
    pub keep_saturated: bool,
    /// Sizes of the generated jobs: machine (the Lublin-Feitelson model sized to the machine, the
    /// default), lublin:N (the model sized to N CPUs, only the jobs that fit the machine kept: the
    /// study's words) or trace:FILE (sizes drawn from an SWF trace's jobs that fit the machine).
    #[arg(long, default_value = "machine")]
    pub job_sizes: JobSizes,
    /// E1, E1s: offered load of the capacity runs (overloaded: the queue never empties).
    #[arg(long, default_value_t = defaults().capacity_load)]
    pub capacity_load: f64,
    /// E1, E1s, E3 with --e3-load-fraction: jobs per capacity run; capacity is the delivered utilization over the
    /// second half of their arrivals.
    #[arg(long, default_value_t = defaults().capacity_jobs)]
    pub capacity_jobs: usize,
    /// E3: first measure each scheme's capacity on each workload at MPL 2 (capacity runs), then run it at this
    /// fraction of that capacity, so that jobs queue at MPL 2 without a backlog (0: every scheme at offered load
    /// 0.9). Runs whole only (no --shard). docs/reproduction.md, E3.
    #[arg(long, default_value_t = 0.0)]
    pub e3_load_fraction: f64,
    /// Finish a study that was interrupted (Ctrl-C, a kill, a crash): the runs it finished are kept in
    /// OUT.journal as they end, and only the others run. The files are those an uninterrupted run writes.
    #[arg(long)]
    pub resume: bool,
    /// E1s: run only these variants beside the model as set (default: all): cs, io, gang-start, walk, receive,
    /// displaces, yield, together (CS, I/O and the three readings turned together).
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Context switch CS of every run, µs (E5 sets its own).
    #[arg(long, default_value_t = defaults().model.context_switch_ns as f64 / 1e3, help_heading = "Open choices")]
    pub cs_us: f64,
    /// An I/O shorter than this keeps its CPU, µs (0: every I/O blocks, the study's reading; docs/model.md).
    #[arg(long, default_value_t = defaults().model.io_keeps_cpu_below_ns as f64 / 1e3, help_heading = "Open choices")]
    pub io_keeps_cpu_below_us: f64,
    /// GS: a job placed in the running row waits for the next quantum (default: it starts mid-quantum).
    #[arg(long, help_heading = "Open choices")]
    pub gang_start_next_quantum: bool,
    /// When periodic boost's walk runs: tick-before (default) or same-tick (docs/model.md).
    #[arg(long, default_value = defaults().model.boost_walk.name(), help_heading = "Open choices")]
    pub boost_walk: BoostWalk,
    /// When a receive is a candidate of the boost walk: whole (default) or per-message (docs/model.md).
    #[arg(long, default_value = defaults().model.boost_receive.name(), help_heading = "Open choices")]
    pub boost_receive: BoostReceive,
    /// Which running process a periodic boost displaces: any (default) or spinning (docs/model.md).
    #[arg(long, default_value = defaults().model.boost_displaces.name(), help_heading = "Open choices")]
    pub boost_displaces: BoostDisplaces,
    /// Spin-yield yields once per receive (default) or repeated after every spin time (docs/model.md).
    #[arg(long, default_value = defaults().model.yield_cycle.name(), help_heading = "Open choices")]
    pub yield_cycle: YieldCycle,
    /// The OS scheduler of every node of the schemes that have one (all but GS): mlfq, the study's; eevdf,
    /// Linux's since 6.6 at HZ=1000 (docs/model.md).
    #[arg(long, default_value = "mlfq", help_heading = "Open choices")]
    pub node_scheduler: OsScheduler,
    /// The queue behind a job that does not fit: none, the study's strict FCFS; easy or conservative backfilling
    /// on each job's dedicated time as its request (`cosched sim --backfill`, docs/model.md). Not in the study.
    #[arg(long, default_value = "none", value_parser = crate::sim_cmd::parse_backfill)]
    pub backfill: Backfill,
    /// Output folder (default: cosched-out/study-eN, or with --shard cosched-out/study-eN-shard-I-of-N).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, help = full_help())]
    pub full: bool,
    /// Run only shard I of N of the study's runs (the runs i with i mod N = I - 1) and write them into a shard
    /// document (shard.json); `cosched study merge` puts the N shards together. For a Slurm job array:
    /// --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with sbatch --array=1-N. E1 runs its full grid in
    /// shards (saturated runs too); the merge leaves out what a whole run leaves out.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    #[arg(long, short)]
    pub quiet: bool,
}

fn defaults() -> StudySettings {
    StudySettings::default()
}

fn schemes_help() -> String {
    format!("Schemes to run (default: the study's {})", Scheme::study_names().join(", "))
}

fn full_help() -> String {
    format!(
        "The study at full size: {FULL_JOBS_PER_RUN} jobs per run, run times x{FULL_RUNTIME_SCALE} (hours on this \
         machine)"
    )
}

/// `mean ± half-width` of a 95 % confidence interval.
fn with_ci(e: &Estimate, decimals: usize) -> String {
    if e.n < 2 {
        format!("{:.*}", decimals, e.mean)
    } else {
        format!("{:.*} ± {:.*}", decimals, e.mean, decimals, e.ci95_half_width())
    }
}

fn percent_with_ci(e: &Estimate) -> String {
    let scaled = Estimate { mean: 100.0 * e.mean, std_error: 100.0 * e.std_error, ..*e };
    format!("{} %", with_ci(&scaled, 1))
}

#[derive(Serialize)]
struct Manifest<'a> {
    experiment: &'a str,
    cosched_version: &'static str,
    /// The command that reproduces these results, from the settings: the same
    /// for a whole run and a merge of shards, whatever the output folder.
    command: String,
    seeds: Vec<u64>,
    jobs_per_run: usize,
    runtime_scale: f64,
    horizon_factor: f64,
    runs: usize,
    note: String,
    /// Every run's scheme, workload and machine parameters are in runs.csv;
    /// this is the machine and cost model every run starts from.
    base_config: SimConfig,
    /// Present only in an interrupted study's files.
    #[serde(skip_serializing_if = "Option::is_none")]
    partial: Option<PartialStudy>,
}

/// Whole nanoseconds from a flag in µs, refusing what is not a time.
fn microseconds_ns(value: f64, flag: &str) -> Result<u64, String> {
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{flag} must be a finite non-negative number, got {value}"));
    }
    Ok((value * 1e3).round() as u64)
}

impl StudyArgs {
    /// The library's settings from the flags (`--full` sets the full-size jobs and scale).
    pub fn settings(&self) -> Result<StudySettings, String> {
        let (jobs_per_run, runtime_scale) =
            if self.full { (FULL_JOBS_PER_RUN, FULL_RUNTIME_SCALE) } else { (self.jobs, self.runtime_scale) };
        let model = ModelChoices {
            context_switch_ns: microseconds_ns(self.cs_us, "--cs-us")?,
            io_keeps_cpu_below_ns: microseconds_ns(self.io_keeps_cpu_below_us, "--io-keeps-cpu-below-us")?,
            gang_start_waits_for_quantum: self.gang_start_next_quantum,
            boost_walk: self.boost_walk,
            boost_receive: self.boost_receive,
            boost_displaces: self.boost_displaces,
            yield_cycle: self.yield_cycle,
            node_scheduler: self.node_scheduler,
            backfill: self.backfill,
        };
        Ok(StudySettings {
            jobs_per_run,
            runtime_scale,
            loads: self.loads.clone(),
            schemes: self.schemes.clone().unwrap_or(defaults().schemes),
            first_seed: self.seed,
            replications: self.replications,
            horizon_factor: self.horizon_factor,
            keep_saturated: self.keep_saturated,
            job_sizes: self.job_sizes.clone(),
            capacity_load: self.capacity_load,
            capacity_jobs: self.capacity_jobs,
            model,
            e3_load_fraction: self.e3_load_fraction,
            e1s_variants: self.variants.clone(),
        })
    }
}

/// The flags that give `settings`, as a command line: what a study's
/// manifest records, the same however the study was run or cut.
pub fn canonical_command(experiment: Experiment, settings: &StudySettings) -> String {
    let mut command = format!(
        "cosched study {} --jobs {} --runtime-scale {}",
        experiment.name(),
        settings.jobs_per_run,
        settings.runtime_scale
    );
    if let Some(loads) = &settings.loads {
        command += &format!(" --loads {}", loads.iter().map(f64::to_string).collect::<Vec<_>>().join(","));
    }
    let schemes: Vec<&str> = settings.schemes.iter().map(|s| s.name()).collect();
    command += &format!(
        " --schemes {} --seed {} --replications {} --horizon-factor {}",
        schemes.join(","),
        settings.first_seed,
        settings.replications,
        settings.horizon_factor
    );
    if settings.keep_saturated {
        command += " --keep-saturated";
    }
    if !settings.job_sizes.is_machine() {
        command += &format!(" --job-sizes {}", settings.job_sizes);
    }
    let stock = StudySettings::default();
    if (settings.capacity_load, settings.capacity_jobs) != (stock.capacity_load, stock.capacity_jobs) {
        command += &format!(" --capacity-load {} --capacity-jobs {}", settings.capacity_load, settings.capacity_jobs);
    }
    let (model, stock) = (&settings.model, &stock.model);
    if model.context_switch_ns != stock.context_switch_ns {
        command += &format!(" --cs-us {}", model.context_switch_ns as f64 / 1e3);
    }
    if model.io_keeps_cpu_below_ns != stock.io_keeps_cpu_below_ns {
        command += &format!(" --io-keeps-cpu-below-us {}", model.io_keeps_cpu_below_ns as f64 / 1e3);
    }
    if model.gang_start_waits_for_quantum {
        command += " --gang-start-next-quantum";
    }
    if model.boost_walk != stock.boost_walk {
        command += &format!(" --boost-walk {}", model.boost_walk.name());
    }
    if !model.boost_receive.is_default() {
        command += &format!(" --boost-receive {}", model.boost_receive.name());
    }
    if !model.boost_displaces.is_default() {
        command += &format!(" --boost-displaces {}", model.boost_displaces.name());
    }
    if !model.yield_cycle.is_default() {
        command += &format!(" --yield-cycle {}", model.yield_cycle.name());
    }
    if settings.e3_load_fraction != 0.0 {
        command += &format!(" --e3-load-fraction {}", settings.e3_load_fraction);
    }
    if !model.node_scheduler.is_default() {
        command += &format!(" --node-scheduler {}", model.node_scheduler);
    }
    if !model.backfill.is_none() {
        command += &format!(" --backfill {}", model.backfill.name());
    }
    if !settings.e1s_variants.is_empty() {
        command += &format!(" --variants {}", settings.e1s_variants.join(","));
    }
    command
}

/// The study's default output folder under `cosched-out`.
fn default_out(experiment: Experiment, shard: Option<Shard>) -> PathBuf {
    let name = experiment.name();
    PathBuf::from(match shard {
        Some(s) => format!("cosched-out/study-{name}-shard-{}-of-{}", s.index, s.count),
        None => format!("cosched-out/study-{name}"),
    })
}

pub fn run(cmd: &StudyCommand) -> Result<(), String> {
    let (experiment, args) = match cmd {
        StudyCommand::E1(a) => (Experiment::E1, a),
        StudyCommand::E2(a) => (Experiment::E2, a),
        StudyCommand::E3(a) => (Experiment::E3, a),
        StudyCommand::E4(a) => (Experiment::E4, a),
        StudyCommand::E5(a) => (Experiment::E5, a),
        StudyCommand::E1s(a) => (Experiment::E1s, a),
        StudyCommand::Merge(args) => return run_merge(args),
    };
    let settings = args.settings()?;
    settings.check(experiment)?;
    let out_path = args.out.clone().unwrap_or_else(|| default_out(experiment, args.shard));
    let out_path = OutputDir::check(&out_path)?;
    let watch = BatchProgress::announcing(settings.jobs_per_run, !args.quiet);
    if let Some(shard) = args.shard {
        if args.resume {
            return Err("--resume finishes a whole study; a shard is run again whole".into());
        }
        return write_shard(&run_shard(experiment, &settings, shard, &watch)?, &out_path);
    }
    let watch = watch.keeping_runs().stopped_by(crate::interrupt::stop_on_interrupt()?);
    let journal_path = journal_path(&out_path);
    if let Some(parent) = journal_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let journal = if args.resume {
        Journal::resume(&journal_path, experiment, &settings)?
    } else {
        Journal::create(&journal_path, experiment, &settings)?
    };
    if journal.kept_before() > 0 {
        eprintln!("resuming: {} finished runs kept in {}", journal.kept_before(), journal_path.display());
    }
    let rows = run_study(experiment, &settings, &watch, &journal).map_err(|e| {
        if journal.kept_count() == 0 {
            // (A journal that kept nothing would only stop the next start.)
            let _ = std::fs::remove_file(&journal_path);
        }
        if e != INTERRUPTED {
            return e;
        }
        if journal.kept_count() == 0 {
            return format!("study {} interrupted before any run finished: nothing kept", experiment.name());
        }
        let command = canonical_command(experiment, &settings);
        // Said before the partial files are written: a second Ctrl-C quits at once.
        eprintln!(
            "study {} interrupted: {} finished runs kept in {}; `{command} --out {} --resume` finishes it",
            experiment.name(),
            journal.kept_count(),
            journal_path.display(),
            out_path.display()
        );
        let out = out_path.display();
        match write_partial_study(experiment, &settings, &journal, &out_path) {
            Ok(true) => format!("interrupted: the finished runs' tables and figures are in {out}/, marked partial"),
            Ok(false) => {
                format!("interrupted: {out} holds a whole study's files, left as they were (no partial tables)")
            }
            Err(e) => format!("interrupted: no partial tables ({e})"),
        }
    })?;
    write_study(experiment, &settings, &rows, &out_path)?;
    journal.finish()
}

/// Where a whole study keeps its finished runs until its files are written: beside its output folder.
fn journal_path(out_path: &Path) -> PathBuf {
    let name = out_path.file_name().map_or_else(|| "study".into(), |n| n.to_string_lossy().to_string());
    out_path.with_file_name(format!("{name}.journal"))
}

/// The shard document alone, `shard.json`, all-or-nothing like any output.
fn write_shard(doc: &ShardDocument, out_path: &CheckedOut) -> Result<(), String> {
    let out = OutputDir::begin(out_path)?;
    out.write(SHARD_FILE, &doc.to_text())?;
    let path = out.commit()?;
    eprintln!(
        "study {} shard {}: ran {} of the design's {} runs; shard in {}",
        doc.experiment.name(),
        doc.shard,
        doc.results.len(),
        doc.design_runs,
        path.join(SHARD_FILE).display()
    );
    Ok(())
}

/// The file a shard's folder holds.
const SHARD_FILE: &str = "shard.json";

fn run_merge(args: &MergeArgs) -> Result<(), String> {
    let mut shards = Vec::new();
    for given in &args.shards {
        let file = if given.is_dir() { given.join(SHARD_FILE) } else { given.clone() };
        shards.push((file.display().to_string(), ShardDocument::read(&file)?));
    }
    let experiment = shards.first().map(|(_, doc)| doc.experiment).ok_or("no shards to merge")?;
    let out_path = args.out.clone().unwrap_or_else(|| default_out(experiment, None));
    let out_path = OutputDir::check(&out_path)?;
    let merged = merge(shards)?;
    write_study(merged.experiment, &merged.settings, &merged.rows, &out_path)
}

/// What a study writes, from its rows, whether run whole or merged from shards.
pub fn write_study(
    experiment: Experiment,
    settings: &StudySettings,
    rows: &[RunRow],
    out_path: &CheckedOut,
) -> Result<(), String> {
    write_study_files(experiment, settings, rows, None, out_path)?;
    eprintln!("study {}: {} runs; results in {}/", experiment.name(), rows.len(), out_path.display());
    Ok(())
}

/// What an interrupted study has so far: the files of its finished runs, marked as a part (the table's first
/// line, each figure's title, the manifest's `partial`). `--resume` replaces them with the whole study's.
/// A whole study's files already in OUT (an earlier run's) are not replaced by a part of another: false.
fn write_partial_study(
    experiment: Experiment,
    settings: &StudySettings,
    journal: &Journal,
    out_path: &CheckedOut,
) -> Result<bool, String> {
    if holds_whole_study(out_path) {
        return Ok(false);
    }
    let rows = in_study_order(experiment, settings, journal.rows());
    let partial = PartialStudy { finished_runs: rows.len(), design_runs: design_len(experiment, settings) };
    write_study_files(experiment, settings, &rows, Some(partial), out_path)?;
    Ok(true)
}

/// Whether `out_path` holds a study's files that are not partial (a manifest without `partial`). A manifest that is
/// there but cannot be read counts as whole: partial files are never written over what could not be looked at.
fn holds_whole_study(out_path: &Path) -> bool {
    const MAX_MANIFEST_BYTES: u64 = 1 << 20;
    let manifest = out_path.join("manifest.json");
    let Ok(text) = crate::output::read_bounded_no_link(&manifest, MAX_MANIFEST_BYTES) else {
        return manifest.symlink_metadata().is_ok();
    };
    serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|manifest| manifest.get("partial").is_none())
}

/// A partial study's figure opens its title with how much of the study it shows (E1's design counts loads
/// that a whole study leaves out above saturation, hence "at most").
fn mark_partial(chart: &mut Chart, partial: PartialStudy, experiment: Experiment) {
    let at_most = if experiment == Experiment::E1 { "at most " } else { "" };
    let title = chart.title_mut();
    *title = format!("PARTIAL ({} of {at_most}{} runs): {title}", partial.finished_runs, partial.design_runs);
}

/// How much of an interrupted study a partial one holds.
#[derive(Clone, Copy, Serialize)]
struct PartialStudy {
    finished_runs: usize,
    /// The runs of the design (E1: every load, of which a whole study leaves out those above saturation; its
    /// table says "at most").
    design_runs: usize,
}

fn write_study_files(
    experiment: Experiment,
    settings: &StudySettings,
    rows: &[RunRow],
    partial: Option<PartialStudy>,
    out_path: &CheckedOut,
) -> Result<(), String> {
    let name = experiment.name();
    let out = OutputDir::begin(out_path)?;
    out.write("runs.csv", &runs_csv(rows))?;
    out.write("points.csv", &points_csv(rows))?;
    let (table, figures) = match partial {
        None => report(experiment, rows),
        Some(p) => {
            // (The warning about few replications is the study's, not the finished runs'.)
            let (body, mut figures) = report_body(experiment, rows).with_warning(settings.replications);
            let of = if experiment == Experiment::E1 { "at most" } else { "the study's" };
            // A figure travels without its table: it says for itself that it is a part.
            for (_, chart) in &mut figures {
                mark_partial(chart, p, experiment);
            }
            let head = format!(
                "> **Partial:** the study was interrupted; these are its {} finished runs, of {of} {}. \
                 `{} --out {} --resume` finishes it.\n\n",
                p.finished_runs,
                p.design_runs,
                canonical_command(experiment, settings),
                out_path.display()
            );
            (head + &body, figures)
        }
    };
    out.write("table.md", &table)?;
    for (file, chart) in &figures {
        let svg = chart.to_svg();
        out.write(&format!("{file}.svg"), &svg)?;
        out.write_bytes(&format!("{file}.png"), &svg_to_png(&svg)?)?;
    }
    let manifest = Manifest {
        experiment: name,
        cosched_version: env!("CARGO_PKG_VERSION"),
        command: canonical_command(experiment, settings),
        seeds: settings.seeds(),
        jobs_per_run: settings.jobs_per_run,
        runtime_scale: settings.runtime_scale,
        horizon_factor: settings.horizon_factor,
        runs: rows.len(),
        note: format!(
            "Workload: the Lublin-Feitelson model, {}; replication k uses seed + k for the workload and the model, \
             the same jobs for every scheme and variant of a replication.",
            settings.job_sizes.describe()
        ),
        base_config: study_config(settings, Scheme::LOCAL, settings.first_seed),
        partial,
    };
    out.write("manifest.json", &(serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n"))?;
    if partial.is_none() {
        print!("{table}");
    }
    out.commit()?;
    Ok(())
}

type Figures = Vec<(String, Chart)>;

/// A study's table (Markdown) and figures (name, SVG) from its rows.
pub fn report(experiment: Experiment, rows: &[RunRow]) -> (String, Figures) {
    let replications = rows.iter().map(|r| r.replication + 1).max().unwrap_or(0);
    report_body(experiment, rows).with_warning(replications)
}

/// The tables and figures without the warning about few replications.
fn report_body(experiment: Experiment, rows: &[RunRow]) -> (String, Figures) {
    match experiment {
        Experiment::E1 => report_e1(rows),
        Experiment::E3 => report_e3(rows),
        Experiment::E5 => report_ratio(rows, "costs", "defaults", "e5"),
        Experiment::E2 | Experiment::E4 => report_bars(rows),
        Experiment::E1s => report_e1s(rows),
    }
}

trait WithWarning {
    fn with_warning(self, replications: u32) -> Self;
}

impl WithWarning for (String, Figures) {
    /// A table from fewer than three replications says how little its intervals mean.
    fn with_warning(self, replications: u32) -> Self {
        let (table, figures) = self;
        let warning = few_replications_warning(replications);
        (warning.map_or(String::new(), |w| format!("> **Warning:** {w}\n\n")) + &table, figures)
    }
}

/// What fewer than three replications mean for a 95 % interval, if there are.
pub fn few_replications_warning(replications: u32) -> Option<String> {
    match replications {
        0 | 1 => Some("one replication: no interval can be given. Run --replications 6 or more.".into()),
        2 => Some(
            "two replications: a 95 % t-interval from two values has one degree of freedom (t = 12.7), so the \
             intervals below are very wide and say little. Run --replications 6 or more."
                .into(),
        ),
        _ => None,
    }
}

/// `mean ± half-width` of a 95 % t-interval, or `—`.
fn maybe_with_ci(e: Option<&Estimate>, decimals: usize) -> String {
    e.map_or("—".into(), |e| with_ci(e, decimals))
}

/// E1's capacity table: each scheme's capacity, and paired with GS's.
fn capacity_table(capacities: &[Capacity]) -> String {
    let mut table = String::from(
        "| scheme | capacity (delivered utilization, 2nd half of arrivals) | ratio to GS (paired) | difference to GS \
         (paired) | runs saturated (the overload held) |\n|---|---|---|---|---|\n",
    );
    for c in capacities {
        table += &format!(
            "| {} | {} | {} | {} | {} of {} |\n",
            c.scheme,
            with_ci(&c.estimate, 3),
            maybe_with_ci(c.ratio_to_gs.as_ref(), 3),
            maybe_with_ci(c.difference_to_gs.as_ref(), 3),
            c.overloaded_runs,
            c.runs
        );
    }
    table
}

/// The best dynamic scheme's paired capacity ratio to GS, against the study's 1.35.
fn capacity_ratio_line(capacities: &[Capacity]) -> String {
    let best = capacities
        .iter()
        .filter(|c| c.scheme != Scheme::GANG.name() && c.ratio_to_gs.is_some())
        .max_by(|a, b| a.estimate.mean.total_cmp(&b.estimate.mean));
    match best.and_then(|c| c.ratio_to_gs.map(|r| (c, r))) {
        Some((c, ratio)) => format!(
            "\nBest dynamic scheme by capacity: {} at {} of GS's capacity (paired ratio, 95 % t-interval over {} \
             seeds); the study: 77 % / 57 % = 1.35.\n",
            c.scheme,
            with_ci(&ratio, 2),
            ratio.n
        ),
        None => String::new(),
    }
}

/// A grouped bar chart of capacities: schemes by series (variants).
fn capacity_chart(capacities: &[Capacity], title: &str) -> Chart {
    let schemes: Vec<String> = first_seen_strings(capacities.iter().map(|c| c.scheme.as_str()));
    let variants: Vec<String> = first_seen_strings(capacities.iter().map(|c| c.variant.as_str()));
    let values = schemes
        .iter()
        .map(|s| {
            variants
                .iter()
                .map(|v| {
                    capacities
                        .iter()
                        .find(|c| &c.scheme == s && &c.variant == v)
                        .map_or((f64::NAN, 0.0), |c| (c.estimate.mean, ci95(&c.estimate)))
                })
                .collect()
        })
        .collect();
    let series_names = variants.iter().map(|v| if v.is_empty() { "capacity".into() } else { v.clone() }).collect();
    GroupedBarChart {
        title: title.into(),
        unit: "delivered work per CPU-second, 2nd half of an overloaded run's arrivals".into(),
        categories: schemes,
        series_names,
        values,
        reference: None,
        note: Some("whiskers: 95 % t-intervals over the seeds".into()),
    }
    .into()
}

fn ci95(e: &Estimate) -> f64 {
    if e.n < 2 {
        0.0
    } else {
        e.ci95_half_width()
    }
}

fn first_seen_strings<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for name in names {
        if !seen.iter().any(|s| s == name) {
            seen.push(name.to_string());
        }
    }
    seen
}

/// E1s: capacities under every variant, each variant's paired effect on
/// every scheme's capacity, and E2's ranking under each variant.
fn report_e1s(rows: &[RunRow]) -> (String, Figures) {
    let replications = rows.iter().map(|r| r.replication).max().unwrap_or(0) + 1;
    let capacities = capacities(rows);
    let variants = first_seen(rows, |r| r.variant.as_str());
    let schemes = schemes_in_order(rows);
    let mut table = format!(
        "# E1s — the open choices' effect on capacity and on E2's ranking\n\n\
         Each variant turns one open choice of the model (docs/model.md) from the first variant's setting. \
         Capacity: delivered utilization in the second half of the arrivals of an overloaded WL7 run. Effects \
         are paired on the same seeds ({replications}): the variant's value minus the first variant's, per seed, \
         then the mean and 95 % t-interval.\n\n## Capacity\n\n| scheme |"
    );
    for v in &variants {
        table += &format!(" {v} |");
    }
    table += &format!("\n|---|{}\n", "---|".repeat(variants.len()));
    for scheme in &schemes {
        table += &format!("| {scheme} |");
        for (i, v) in variants.iter().enumerate() {
            let Some(c) = capacities.iter().find(|c| &c.scheme == scheme && c.variant == *v) else {
                table += " — |";
                continue;
            };
            let effect = (i > 0)
                .then(|| paired_effect(rows, CAPACITY_GROUP, scheme, v, |r| r.delivered_utilization_second_half))
                .flatten();
            table += &format!(
                " {}{} |",
                with_ci(&c.estimate, 3),
                effect.map_or(String::new(), |e| format!(" (Δ {})", signed_with_ci(&e, 3)))
            );
        }
        table += "\n";
    }
    table += "\n## Ratio of each scheme's capacity to GS's (paired)\n\n| scheme |";
    for v in &variants {
        table += &format!(" {v} |");
    }
    table += &format!("\n|---|{}\n", "---|".repeat(variants.len()));
    for scheme in schemes.iter().filter(|s| s.as_str() != Scheme::GANG.name()) {
        table += &format!("| {scheme} |");
        for v in &variants {
            let ratio = capacities.iter().find(|c| &c.scheme == scheme && c.variant == *v).and_then(|c| c.ratio_to_gs);
            table += &format!(" {} |", maybe_with_ci(ratio.as_ref(), 2));
        }
        table += "\n";
    }
    table += "\n## E2's ranking (mean response, fastest first) under each variant\n\n\
              Ranks joined by `≈` where the paired difference of their responses has a 95 % interval holding 0.\n\n\
              | workload | variant | ranking |\n|---|---|---|\n";
    for group in first_seen(rows, |r| r.group.as_str()).into_iter().filter(|g| *g != CAPACITY_GROUP) {
        for v in &variants {
            table += &format!("| {group} | {v} | {} |\n", ranking(rows, group, v));
        }
    }
    table += "\n## Mean response in E2 (s), and each variant's paired effect on it\n\n| workload | scheme |";
    for v in &variants {
        table += &format!(" {v} |");
    }
    table += &format!("\n|---|---|{}\n", "---|".repeat(variants.len()));
    for group in first_seen(rows, |r| r.group.as_str()).into_iter().filter(|g| *g != CAPACITY_GROUP) {
        for scheme in &schemes {
            table += &format!("| {group} | {scheme} |");
            for (i, v) in variants.iter().enumerate() {
                let point = Point {
                    runs: rows.iter().filter(|r| r.group == group && &r.scheme == scheme && r.variant == *v).collect(),
                };
                if point.runs.is_empty() {
                    table += " — |";
                    continue;
                }
                let effect = (i > 0).then(|| paired_effect(rows, group, scheme, v, |r| r.mean_response_s)).flatten();
                table += &format!(
                    " {}{} |",
                    with_ci(&point.estimate(|r| r.mean_response_s), 2),
                    effect.map_or(String::new(), |e| format!(" (Δ {})", signed_with_ci(&e, 2)))
                );
            }
            table += "\n";
        }
    }
    let figure = capacity_chart(&capacities, "E1s: capacity of every scheme under each open choice (WL7, overloaded)");
    (table, vec![("e1s-capacity".into(), figure)])
}

/// `+0.012 ± 0.004`.
fn signed_with_ci(e: &Estimate, decimals: usize) -> String {
    let text = with_ci(e, decimals);
    if e.mean >= 0.0 {
        format!("+{text}")
    } else {
        text
    }
}

/// The schemes of a group and variant by mean response, fastest first; `≈`
/// between neighbours whose paired difference is not resolved.
fn ranking(rows: &[RunRow], group: &str, variant: &str) -> String {
    let mine: Vec<&RunRow> = rows.iter().filter(|r| r.group == group && r.variant == variant).collect();
    let mut order: Vec<(String, f64)> = first_seen_strings(mine.iter().map(|r| r.scheme.as_str()))
        .into_iter()
        .map(|s| {
            let values: Vec<f64> = mine.iter().filter(|r| r.scheme == s).map(|r| r.mean_response_s).collect();
            let mean = Estimate::of(&values).map_or(f64::NAN, |e| e.mean);
            (s, mean)
        })
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut text = String::new();
    for (k, (scheme, _)) in order.iter().enumerate() {
        if k > 0 {
            let previous = &order[k - 1].0;
            let differences: Vec<f64> = mine
                .iter()
                .filter(|r| &r.scheme == scheme)
                .filter_map(|r| {
                    let p = mine.iter().find(|q| &q.scheme == previous && q.replication == r.replication)?;
                    Some(r.mean_response_s - p.mean_response_s)
                })
                .collect();
            let resolved = Estimate::of(&differences).is_some_and(|e| e.n >= 2 && e.mean - e.ci95_half_width() > 0.0);
            text += if resolved { " < " } else { " ≈ " };
        }
        text += scheme;
    }
    text
}

/// `*` when most of a point's replications saturated.
fn saturated_mark(point: &Point) -> &'static str {
    if point.saturated() {
        "*"
    } else {
        ""
    }
}

/// `*` most replications saturated (jobs unfinished, or the queue's wait
/// growing), `†` past the knee or delivering less than the load before.
fn curve_mark(c: &Curve, k: usize) -> &'static str {
    if c.points[k].saturated() {
        "*"
    } else if c.first_saturated == Some(k) {
        "†"
    } else {
        ""
    }
}

fn report_e1(rows: &[RunRow]) -> (String, Figures) {
    let replications = rows.iter().map(|r| r.replication).max().unwrap_or(0) + 1;
    let capacities = capacities(rows);
    let capacity_load = rows.iter().find(|r| r.group == CAPACITY_GROUP).map_or(f64::NAN, |r| r.load);
    let capacity_jobs = rows.iter().find(|r| r.group == CAPACITY_GROUP).map_or(0, |r| r.jobs);
    let mut table = format!(
        "# E1 — capacity (WL7, p = 32, MPL 5, s = 20 %)\n\n\
         Each scheme's capacity measured directly: {capacity_jobs} jobs offered at load {capacity_load}, so the \
         queue never empties; the work delivered (tasks x dedicated time, by completed iterations) per CPU-second \
         from the middle arrival to the last. The same jobs for every scheme of a seed: ratios and differences \
         to GS are taken per seed, then their mean and 95 % t-interval over {replications} seeds.\n\n"
    );
    table += &capacity_table(&capacities);
    table += &capacity_ratio_line(&capacities);
    table += &format!(
        "\n# E1 — mean response time against delivered utilization (WL7, p = 32, MPL 5, s = 20 %)\n\n\
         Means over {replications} replications with 95 % confidence intervals. Utilization: the work the jobs were \
         given (tasks x dedicated time) delivered per CPU-second while jobs arrive; compute-only beside it.\n\n\
         | scheme | knee at delivered utilization | sustains delivered utilization | (compute only) | \
         first saturated at offered load | mean response at each offered load, s (* † saturated, see below) |\n\
         |---|---|---|---|---|---|\n"
    );
    let curves: Vec<Curve> =
        schemes_in_order(rows).iter().map(|s| curve(rows, s)).filter(|c| !c.points.is_empty()).collect();
    for c in &curves {
        let compute = c
            .first_saturated
            .unwrap_or(c.points.len())
            .checked_sub(1)
            .map(|k| percent_with_ci(&c.points[k].estimate(|r| r.compute_utilization)));
        let cells: Vec<String> = c
            .points
            .iter()
            .enumerate()
            .map(|(k, p)| {
                format!("{}: {}{}", p.first().load, with_ci(&p.estimate(|r| r.mean_response_s), 2), curve_mark(c, k))
            })
            .collect();
        table += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.scheme,
            c.knee_utilization.map_or("—".into(), |u| format!("{:.1} %", 100.0 * u)),
            c.sustained.as_ref().map_or("—".into(), percent_with_ci),
            compute.unwrap_or("—".into()),
            c.first_saturated.map_or("none run".into(), |k| c.points[k].first().load.to_string()),
            cells.join("; ")
        );
    }
    table += &e1_ratio_line(&curves);
    table += &format!(
        "\nThe knee: where the mean response reaches {KNEE_RESPONSE_FACTOR} times its value at the lightest load, \
         read on the delivered utilization between the points either side (on a machine of known capacity it falls \
         at 0.8 to 1.0 of it; `—`: saturated before it, or not reached). Saturated: \\* most replications had jobs \
         unfinished at the horizon or a wait growing by at least 0.1 s per s of arrivals; † past the knee, or less \
         delivered than at the load before. Loads above a scheme's first saturated point are not run \
         (`--keep-saturated` runs them).\n"
    );
    let mut figures =
        vec![("e1-capacity".into(), capacity_chart(&capacities, "E1: capacity of every scheme (WL7, overloaded)"))];
    if !curves.is_empty() {
        figures.push(("e1".into(), e1_chart(&curves, replications)));
    }
    (table, figures)
}

/// The study's central E1 number read off the climb: the best dynamic scheme's knee over GS's.
fn e1_ratio_line(curves: &[Curve]) -> String {
    let gs = curves.iter().find(|c| c.scheme == "GS").and_then(|c| c.knee_utilization);
    let best = curves
        .iter()
        .filter(|c| c.scheme != "GS")
        .filter_map(|c| c.knee_utilization.map(|u| (c.scheme.as_str(), u)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match (best, gs) {
        (Some((scheme, u)), Some(g)) => format!(
            "\nBy the knees of the climb, the best dynamic scheme {scheme} reaches {:.2} times GS's delivered \
             utilization (the study: 77 % against 57 %, 1.35). A reading of short runs without an interval: the \
             capacities above are the measure.\n",
            u / g
        ),
        _ => String::new(),
    }
}

/// A point's geometric mean response and its 95 % t-interval, computed on
/// the log scale (positive, as a log axis needs it).
fn log_scale_interval(p: &Point) -> (f64, (f64, f64)) {
    let logs = p.estimate(|r| r.mean_response_s.max(1e-12).ln());
    let half = ci95(&logs);
    (logs.mean.exp(), ((logs.mean - half).exp(), (logs.mean + half).exp()))
}

fn e1_chart(curves: &[Curve], replications: u32) -> Chart {
    let mut series = Vec::new();
    let (mut low, mut high, mut max_util) = (f64::INFINITY, 1e-3f64, 0.0f64);
    for (i, c) in curves.iter().enumerate() {
        let shown = c.first_saturated.map_or(c.points.len(), |k| k + 1);
        let (mut points, mut y_intervals) = (Vec::new(), Vec::new());
        for (k, p) in c.points[..shown].iter().enumerate() {
            let u = p.estimate(|r| r.delivered_utilization);
            let (mean, interval) = log_scale_interval(p);
            max_util = max_util.max(u.mean);
            if Some(k) != c.first_saturated {
                // The axis holds the intervals: drawn on the log scale, they stay above its floor.
                low = low.min(interval.0);
                high = high.max(interval.1);
            }
            points.push((u.mean, mean));
            y_intervals.push(interval);
        }
        series.push(Series {
            name: c.scheme.clone(),
            style: scheme_style(&c.scheme, i),
            points,
            clipped_from: c.first_saturated,
            y_errors: Vec::new(),
            // (Utilization's intervals are in the table: across the chart they hide the curves.)
            x_errors: Vec::new(),
            y_intervals,
        });
    }
    let low = if low.is_finite() { (low / 2.0).max(1e-9) } else { 1e-3 };
    let high = high * 2.0;
    LineChart {
        title: "E1: mean response time against delivered utilization (WL7, 32 nodes, MPL 5)".into(),
        x_label: "delivered utilization while jobs arrive (nominal work / CPU capacity)".into(),
        y_label: "mean response time, s (log scale)".into(),
        x_range: (0.0, max_util.max(0.1)),
        y_range: (10f64.powf(low.log10().floor()), 10f64.powf(high.log10().ceil())),
        log_y: true,
        series,
        legend_notes: vec![
            "points: geometric mean response;".into(),
            "bars: its 95 % interval on the log".into(),
            format!("scale ({replications} seeds;"),
            "workloads differ between seeds)".into(),
            "▲ at the top: first saturated".into(),
            "point, at its utilization".into(),
        ],
        max_markers: None,
    }
    .into()
}

/// Wait and execution per scheme, one chart per group (E2, E4).
fn report_bars(rows: &[RunRow]) -> (String, Figures) {
    let mut table = String::from(
        "Means over the replications with 95 % confidence intervals.\n\n\
         | group | scheme | wait (s) | execution (s) | response (s) | response − GS's, paired (s) | delivered \
         utilization | saturated replications |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut figures = Vec::new();
    let mut any_saturated = false;
    for group in first_seen(rows, |r| r.group.as_str()) {
        let group_points: Vec<Point> = points(rows).into_iter().filter(|p| p.first().group == group).collect();
        let group_saturated = group_points.iter().any(Point::saturated);
        any_saturated |= group_saturated;
        let mut bars = Vec::new();
        for p in &group_points {
            let response = p.estimate(|r| r.mean_response_s);
            let to_gs = paired_difference_to_gs(rows, p);
            table += &format!(
                "| {group} | {}{} | {} | {} | {} | {} | {} | {} of {} |\n",
                p.first().scheme,
                saturated_mark(p),
                with_ci(&p.estimate(|r| r.mean_wait_s), 2),
                with_ci(&p.estimate(|r| r.mean_execution_s), 2),
                with_ci(&response, 2),
                maybe_with_ci(to_gs.as_ref(), 2),
                percent_with_ci(&p.estimate(|r| r.delivered_utilization)),
                p.saturated_runs(),
                p.runs.len()
            );
            bars.push(StackedBar {
                label: format!("{}{}", p.first().scheme, saturated_mark(p)),
                segments: vec![p.estimate(|r| r.mean_wait_s).mean, p.estimate(|r| r.mean_execution_s).mean],
                whisker: (response.ci95_half_width(), response.ci95_half_width()),
            });
        }
        let first = group_points[0].first();
        let chart = StackedBarChart {
            title: format!("{} {group}: mean response time (offered load {})", experiment_of(first), first.load),
            unit: "seconds (simulated)".into(),
            segment_names: vec!["wait in the arrival queue".into(), "execution".into()],
            bars,
            note: Some(format!(
                "whiskers: 95 % confidence interval of the response{}",
                if group_saturated { "; * saturated in most replications" } else { "" }
            )),
        };
        let file = group.to_lowercase().replace([' ', '='], "").replace('.', "_");
        figures.push((file, chart.into()));
    }
    if any_saturated {
        table += "\n\\* saturated in most replications.\n";
    }
    (table, figures)
}

/// A point's mean response minus GS's in the same group and variant, per replication (the same jobs).
fn paired_difference_to_gs(rows: &[RunRow], point: &Point) -> Option<Estimate> {
    let values: Vec<f64> = point
        .runs
        .iter()
        .filter_map(|r| {
            let gs = rows.iter().find(|g| {
                g.scheme == Scheme::GANG.name()
                    && g.group == r.group
                    && g.variant == r.variant
                    && g.replication == r.replication
            })?;
            Some(r.mean_response_s - gs.mean_response_s)
        })
        .collect();
    Estimate::of(&values)
}

fn experiment_of(row: &RunRow) -> &'static str {
    if row.group.starts_with("s =") {
        "E4"
    } else {
        "E2"
    }
}

/// Mean response of each variant relative to the baseline variant (E3, E5):
/// the ratio per replication (same workload), then its mean and interval.
/// Variants may differ by scheme (E5: GS varies quantum and gang switch, the
/// others context switch and interrupt); the chart's k-th bar of a scheme is
/// its k-th variant, and the legend names what that is for each kind.
fn report_ratio(rows: &[RunRow], what: &str, baseline: &str, experiment: &str) -> (String, Figures) {
    let first_load = rows.first().map_or(0.0, |r| r.load);
    let load = if rows.iter().all(|r| r.load == first_load) {
        format!("Offered load {first_load}")
    } else {
        "Offered load: each scheme's own, per workload (above)".into()
    };
    let mut table = format!(
        "{load}. Ratios are taken per replication (the same jobs under both settings); means with 95 % \
         confidence intervals.\n\n| workload | scheme | {what} | mean response (s) | relative to {baseline} | \
         saturated replications | peak processes per CPU | mean wait (s) |\n|---|---|---|---|---|---|---|---|\n"
    );
    let mut figures = Vec::new();
    let schemes = schemes_in_order(rows);
    let variants_of = |scheme: &str| -> Vec<&str> {
        first_seen(rows, |r| r.variant.as_str())
            .into_iter()
            .filter(|v| rows.iter().any(|r| r.scheme == scheme && r.variant == *v))
            .collect()
    };
    for m in first_seen(rows, |r| r.mix.as_str()) {
        let mut values = Vec::new();
        let mut categories = Vec::new();
        for scheme in &schemes {
            let mine: Vec<&RunRow> = rows.iter().filter(|r| r.mix == m && &r.scheme == scheme).collect();
            let mut cells = Vec::new();
            let mut saturated_somewhere = false;
            for variant in variants_of(scheme) {
                let point = Point { runs: mine.iter().copied().filter(|r| r.variant == variant).collect() };
                if point.runs.is_empty() {
                    // (Only in a partial study: this workload's runs of the variant had not finished.)
                    if variant != baseline {
                        cells.push((f64::NAN, 0.0));
                    }
                    continue;
                }
                saturated_somewhere |= point.saturated();
                let ratios: Vec<f64> = point
                    .runs
                    .iter()
                    .filter_map(|r| {
                        let base = mine.iter().find(|b| b.variant == baseline && b.replication == r.replication)?;
                        Some(r.mean_response_s / base.mean_response_s)
                    })
                    .collect();
                let ratio = Estimate::of(&ratios);
                table += &format!(
                    "| {m} | {scheme} | {variant} | {} | {} | {} of {} | {} | {} |\n",
                    with_ci(&point.estimate(|r| r.mean_response_s), 2),
                    ratio.as_ref().map_or("—".into(), |e| with_ci(e, 2)),
                    point.saturated_runs(),
                    point.runs.len(),
                    point.runs.iter().map(|r| r.peak_processes_per_cpu).max().unwrap_or(0),
                    with_ci(&point.estimate(|r| r.mean_wait_s), 2),
                );
                if variant != baseline {
                    cells.push(ratio.map_or((f64::NAN, 0.0), |e| (e.mean, e.ci95_half_width())));
                }
            }
            values.push(cells);
            categories.push(format!("{scheme}{}", if saturated_somewhere { "*" } else { "" }));
        }
        let any_saturated = categories.iter().any(|c| c.ends_with('*'));
        let chart = GroupedBarChart {
            title: format!("{}: {m}, mean response relative to {what} {baseline}", experiment.to_uppercase()),
            unit: format!("response / response at {what} {baseline} (1 = no change)"),
            categories,
            series_names: series_names(&schemes, &variants_of, what, baseline),
            values,
            reference: Some(1.0),
            note: Some(format!(
                "whiskers: 95 % confidence intervals of the per-replication ratios{}",
                if any_saturated {
                    format!("; * saturated in most replications at some {what}")
                } else {
                    String::new()
                }
            )),
        };
        figures.push((m.to_lowercase(), chart.into()));
    }
    (table, figures)
}

/// E3: the capacities at MPL 2 first when the loads came from them, then the responses relative to MPL 2.
fn report_e3(rows: &[RunRow]) -> (String, Figures) {
    let (capacity_rows, runs): (Vec<RunRow>, Vec<RunRow>) =
        rows.iter().cloned().partition(|r| r.group == CAPACITY_GROUP);
    let (table, figures) = report_ratio(&runs, "MPL", "2", "e3");
    if capacity_rows.is_empty() {
        return (table, figures);
    }
    let mut head = String::from(
        "Each scheme ran each workload at a fraction of its own capacity at MPL 2, measured first (capacity runs: \
         delivered utilization over the second half of the arrivals, overloaded); offered load below is that \
         fraction of the mean capacity.\n\n| workload | scheme | capacity at MPL 2 | offered load |\n|---|---|---|---|\n",
    );
    for m in first_seen(&capacity_rows, |r| r.mix.as_str()) {
        for scheme in schemes_in_order(&capacity_rows) {
            let point = Point { runs: capacity_rows.iter().filter(|r| r.mix == m && r.scheme == scheme).collect() };
            if point.runs.is_empty() {
                continue;
            }
            // A partial study may hold a capacity whose runs have not started yet.
            let run = runs.iter().find(|r| r.mix == m && r.scheme == scheme);
            let load = run.map_or("—".to_string(), |r| format!("{:.3}", r.load));
            head += &format!("| {m} | {scheme} | {} | {load} |\n", with_ci(&point.estimate(capacity_of), 3));
        }
    }
    (head + "\n" + &table, figures)
}

/// The k-th non-baseline variant's names across schemes, joined: "MPL 5", or
/// "Q 100 ms, CS_GS 1 ms (GS) / CS 100 µs, I 25 µs (others)".
fn series_names<'a>(
    schemes: &[String],
    variants_of: &dyn Fn(&str) -> Vec<&'a str>,
    what: &str,
    baseline: &str,
) -> Vec<String> {
    let per_scheme: Vec<Vec<&str>> =
        schemes.iter().map(|s| variants_of(s).into_iter().filter(|v| *v != baseline).collect()).collect();
    let count = per_scheme.iter().map(Vec::len).max().unwrap_or(0);
    (0..count)
        .map(|k| {
            let mut names: Vec<(&str, Vec<&str>)> = Vec::new();
            for (scheme, variants) in schemes.iter().zip(&per_scheme) {
                let Some(&v) = variants.get(k) else { continue };
                match names.iter_mut().find(|(name, _)| *name == v) {
                    Some((_, owners)) => owners.push(scheme),
                    None => names.push((v, vec![scheme])),
                }
            }
            if names.len() == 1 {
                format!("{what} {}", names[0].0)
            } else {
                let label = |(name, owners): &(&str, Vec<&str>)| {
                    if owners.len() == 1 {
                        format!("{name} ({})", owners[0])
                    } else {
                        format!("{name} (others)")
                    }
                };
                names.iter().map(label).collect::<Vec<_>>().join(" / ")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use cosched_sim::metrics::SaturationVerdict;

    #[derive(Parser)]
    struct Study {
        #[command(subcommand)]
        command: StudyCommand,
    }

    fn args_of(flags: &[&str]) -> StudyArgs {
        let argv = ["study", "e4"].into_iter().chain(flags.iter().copied());
        match Study::try_parse_from(argv).expect("flags parse").command {
            StudyCommand::E4(args) => args,
            _ => unreachable!("parsed e4"),
        }
    }

    /// An interrupted study reports whichever of its runs finished (any of them, in the study's order): a cell
    /// with no finished run is left out or shown as "—", never a panic.
    #[test]
    fn every_experiment_reports_any_part_of_its_runs() {
        let small = StudySettings {
            jobs_per_run: 20,
            runtime_scale: 0.0005,
            schemes: vec![Scheme::GANG, Scheme::LOCAL],
            replications: 2,
            capacity_jobs: 20,
            loads: Some(vec![1.6, 0.3]),
            ..StudySettings::default()
        };
        let own_capacity = StudySettings { e3_load_fraction: 0.8, loads: None, ..small.clone() };
        let e1s = StudySettings { e1s_variants: vec!["cs".into(), "walk".into()], ..small.clone() };
        let cases = [
            (Experiment::E1, &small),
            (Experiment::E2, &small),
            (Experiment::E3, &small),
            (Experiment::E3, &own_capacity),
            (Experiment::E4, &small),
            (Experiment::E5, &small),
            (Experiment::E1s, &e1s),
        ];
        // Subsets drawn by a fixed linear congruential sequence.
        let mut state = 0x9e37_79b9_u64;
        let mut draw = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        for (experiment, settings) in cases {
            let rows = run_study(experiment, settings, &cosched_lab::batch::Unwatched, &Journal::none()).unwrap();
            for keep_one_in in [2, 3, 5, 9] {
                let part: Vec<RunRow> = rows.iter().filter(|_| draw() % keep_one_in == 0).cloned().collect();
                let (table, figures) = report(experiment, &part);
                let drawn = figures.iter().all(|(_, chart)| chart.to_svg().starts_with("<svg"));
                assert!(!table.is_empty() && drawn, "{experiment:?}");
            }
        }
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        assert_eq!(args_of(&[]).settings().unwrap(), StudySettings::default());
    }

    #[test]
    fn the_canonical_command_gives_back_the_settings() {
        let flags = ["--full", "--loads", "0.25,1e-7", "--schemes", "gs,sb", "--seed", "9", "--replications", "4"];
        let extra = ["--horizon-factor", "2.5", "--keep-saturated", "--out", "x", "--shard", "2/3", "-q"];
        let sizes = ["--job-sizes", "lublin:256"];
        let model = ["--cs-us", "100", "--io-keeps-cpu-below-us", "200", "--gang-start-next-quantum"];
        let more = ["--boost-walk", "same-tick", "--capacity-load", "1.5", "--capacity-jobs", "600"];
        let readings = ["--boost-receive", "per-message", "--boost-displaces", "spinning", "--yield-cycle", "repeated"];
        let e3 = ["--e3-load-fraction", "0.8"];
        let settings =
            args_of(&[&flags[..], &extra[..], &sizes[..], &model[..], &more[..], &readings[..], &e3[..]].concat())
                .settings()
                .unwrap();
        assert_eq!(settings.job_sizes, JobSizes::Lublin(256));
        let command = canonical_command(Experiment::E4, &settings);
        assert!(command.starts_with("cosched study e4 --jobs 1000 --runtime-scale 0.01 --loads 0.25,0.0000001 "));
        let argv = command.split(' ').skip(1);
        let StudyCommand::E4(args) = Study::try_parse_from(argv).expect("flags parse").command else {
            unreachable!("parsed e4")
        };
        assert_eq!(args.settings().unwrap(), settings);
        assert_eq!(canonical_command(Experiment::E4, &args.settings().unwrap()), command);
    }

    #[test]
    fn a_shard_must_be_i_of_n() {
        assert_eq!(args_of(&["--shard", "3/8"]).shard, Some(Shard { index: 3, count: 8 }));
        for bad in ["0/8", "9/8", "8", "1/20000"] {
            let Err(error) = Study::try_parse_from(["study", "e4", "--shard", bad]) else { panic!("{bad} accepted") };
            assert!(error.to_string().contains("--shard"), "{error}");
        }
    }

    /// An E1 row of the climb with the given response.
    fn climb_row(scheme: &str, replication: u32, response_s: f64) -> RunRow {
        let text = format!(
            r#"{{"group":"load 0.5","variant":"","scheme":"{scheme}","mix":"WL7","load":0.5,"replication":{replication},
            "seed":{},"mpl":5,"skew":0.2,"offered_load":0.5,"jobs":10,"completed":10,"delivered_utilization":0.5,
            "compute_utilization":0.2,"delivered_utilization_second_half":0.5,"compute_utilization_second_half":0.2,
            "mean_response_s":{response_s},"mean_wait_s":0.0,"mean_execution_s":{response_s},"mean_slowdown":1.0,
            "peak_processes_per_cpu":1,"saturation":{{"saturated":false,"wait_growth":0.0,"delivered_share":1.0,
            "backlog_growth":0.0,"why":""}}}}"#,
            replication + 1
        );
        serde_json::from_str(&text).expect("a row")
    }

    #[test]
    fn a_capacity_without_runs_yet_shows_no_load() {
        let capacity = |k| RunRow { group: CAPACITY_GROUP.into(), mix: "WL5".into(), ..climb_row("GS", k, 1.0) };
        let run = |k| RunRow { group: "WL5".into(), mix: "WL5".into(), variant: "2".into(), ..climb_row("GS", k, 1.0) };
        let (table, _) = report(Experiment::E3, &[capacity(0), capacity(1)]);
        assert!(table.contains("| WL5 | GS | 0.500 ± 0.000 | — |"), "{table}");
        let (table, _) = report(Experiment::E3, &[capacity(0), capacity(1), run(0), run(1)]);
        assert!(table.contains("| WL5 | GS | 0.500 ± 0.000 | 0.500 |"), "{table}");
    }

    #[test]
    fn an_interval_on_the_log_axis_stays_above_zero() {
        // Responses spread over three decades: mean - t x s.e. is far below zero.
        let rows = [climb_row("GS", 0, 0.01), climb_row("GS", 1, 10.0), climb_row("GS", 2, 0.02)];
        let point = Point { runs: rows.iter().collect() };
        let arithmetic = point.estimate(|r| r.mean_response_s);
        assert!(arithmetic.mean - arithmetic.ci95_half_width() < 0.0);
        let (mean, (low, high)) = log_scale_interval(&point);
        assert!(low > 0.0 && low < mean && mean < high, "{low} {mean} {high}");
        assert!((mean - (0.01f64 * 10.0 * 0.02).cbrt()).abs() < 1e-12, "the geometric mean");
    }

    #[test]
    fn two_replications_warn_and_six_do_not() {
        let two: Vec<RunRow> = (0..2).map(|k| climb_row("GS", k, 1.0)).collect();
        let (table, _) = report(Experiment::E1, &two);
        assert!(table.starts_with("> **Warning:** two replications"), "{table}");
        let six: Vec<RunRow> = (0..6).map(|k| climb_row("GS", k, 1.0)).collect();
        assert!(!report(Experiment::E1, &six).0.contains("Warning"));
    }

    #[test]
    fn the_saturated_mark_and_its_note_appear_only_where_a_point_saturated() {
        let e2_row = |scheme: &str, k: u32, saturated: bool| RunRow {
            group: "WL5".into(),
            mix: "WL5".into(),
            saturation: SaturationVerdict { saturated, ..climb_row(scheme, k, 1.0).saturation },
            ..climb_row(scheme, k, 1.0)
        };
        let calm: Vec<RunRow> = ["GS", "PB"].iter().flat_map(|s| (0..3).map(move |k| e2_row(s, k, false))).collect();
        let (table, figures) = report(Experiment::E2, &calm);
        assert!(!table.contains('*') && !figures[0].1.to_svg().contains("saturated"), "{table}");
        let mut pb_saturated = calm.clone();
        pb_saturated.iter_mut().filter(|r| r.scheme == "PB").take(2).for_each(|r| r.saturation.saturated = true);
        let (table, figures) = report(Experiment::E2, &pb_saturated);
        assert!(table.contains("| WL5 | PB* |") && table.contains("| WL5 | GS |"), "{table}");
        assert!(table.contains("\\* saturated in most replications"), "{table}");
        let svg = figures[0].1.to_svg();
        assert!(svg.contains("PB*") && svg.contains("* saturated in most replications"));
    }

    #[test]
    fn a_ratio_chart_stars_a_scheme_saturated_at_some_mpl() {
        let row = |scheme: &str, mpl: &str, k: u32, saturated: bool| {
            let base = climb_row(scheme, k, 1.0);
            RunRow {
                group: "WL5".into(),
                mix: "WL5".into(),
                variant: mpl.into(),
                saturation: SaturationVerdict { saturated, ..base.saturation.clone() },
                ..base
            }
        };
        let mut rows = Vec::new();
        for scheme in ["GS", "PB"] {
            for mpl in ["2", "5"] {
                rows.extend((0..3).map(|k| row(scheme, mpl, k, scheme == "PB" && mpl == "5" && k > 0)));
            }
        }
        let (_, figures) = report(Experiment::E3, &rows);
        let svg = &figures[0].1.to_svg();
        assert!(svg.contains(">PB*<") && svg.contains(">GS<"), "{svg}");
        assert!(svg.contains("* saturated in most replications at some MPL"), "{svg}");
        rows.iter_mut().for_each(|r| r.saturation.saturated = false);
        assert!(!report(Experiment::E3, &rows).1[0].1.to_svg().contains("saturated"));
    }

    #[test]
    fn full_size_replaces_jobs_and_scale() {
        let settings = args_of(&["--full"]).settings().unwrap();
        assert_eq!((settings.jobs_per_run, settings.runtime_scale), (FULL_JOBS_PER_RUN, FULL_RUNTIME_SCALE));
    }
}
