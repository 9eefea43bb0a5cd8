//! `cosched study e1 … e5`: the reference study's experiments, each one
//! command. The runs, their replications and their points come from
//! `cosched_lab::study`; here are the flags, and what a study writes: its runs
//! and points (CSV), its table (Markdown), its figures (SVG and PNG) and a
//! manifest with the command that reproduces it, version, seeds and parameters.
//! A study can also run in shards (`--shard I/N`, `cosched_lab::shard`), each
//! writing a shard document, which `cosched study merge` turns into the same
//! files, byte for byte.

use crate::output::OutputDir;
use crate::plot::{scheme_style, svg_to_png, GroupedBarChart, LineChart, Series, StackedBar, StackedBarChart};
use crate::progress::BatchProgress;
use clap::{Args, Subcommand};
use cosched_bench::stats::Estimate;
use cosched_lab::shard::{merge, run_shard, Shard, ShardDocument};
use cosched_lab::study::{
    base_config, curve, first_seen, points, points_csv, run_study, runs_csv, schemes_in_order, Curve, Experiment,
    Point, RunRow, StudySettings, FULL_JOBS_PER_RUN, FULL_RUNTIME_SCALE,
};
use cosched_lab::workload::JobSizes;
use cosched_sim::{Scheme, SimConfig};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// E1, load: WL7, p = 32, MPL 5, s = 20 %; mean response against delivered utilization per scheme as load rises.
    E1(StudyArgs),
    /// E2, nature of the workload: WL4 (CPU), WL5 (communication), WL2 (I/O), WL3 (balanced); wait and execution per scheme.
    E2(StudyArgs),
    /// E3, multiprogramming level: response at MPL 5 and 16 relative to MPL 2, for WL2, WL4, WL5 (at a load where jobs queue).
    E3(StudyArgs),
    /// E4, skew: WL4 at s = 20 % and 150 %.
    E4(StudyArgs),
    /// E5, system overheads: WL5 with cheaper switches, quanta and interrupts, normalised to the defaults.
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
    note: &'a str,
    /// Every run's scheme, workload and machine parameters are in runs.csv;
    /// this is the machine and cost model every run starts from.
    base_config: SimConfig,
}

impl StudyArgs {
    /// The library's settings from the flags (`--full` sets the full-size jobs and scale).
    pub fn settings(&self) -> StudySettings {
        let (jobs_per_run, runtime_scale) =
            if self.full { (FULL_JOBS_PER_RUN, FULL_RUNTIME_SCALE) } else { (self.jobs, self.runtime_scale) };
        StudySettings {
            jobs_per_run,
            runtime_scale,
            loads: self.loads.clone(),
            schemes: self.schemes.clone().unwrap_or(defaults().schemes),
            first_seed: self.seed,
            replications: self.replications,
            horizon_factor: self.horizon_factor,
            keep_saturated: self.keep_saturated,
            job_sizes: self.job_sizes.clone(),
        }
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
        StudyCommand::Merge(args) => return run_merge(args),
    };
    let settings = args.settings();
    settings.check(experiment)?;
    let out_path = args.out.clone().unwrap_or_else(|| default_out(experiment, args.shard));
    OutputDir::check(&out_path)?;
    let watch = BatchProgress::announcing(settings.jobs_per_run, !args.quiet);
    match args.shard {
        Some(shard) => write_shard(&run_shard(experiment, &settings, shard, &watch)?, &out_path),
        None => write_study(experiment, &settings, &run_study(experiment, &settings, &watch)?, &out_path),
    }
}

/// The shard document alone, `shard.json`, all-or-nothing like any output.
fn write_shard(doc: &ShardDocument, out_path: &Path) -> Result<(), String> {
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
    OutputDir::check(&out_path)?;
    let merged = merge(shards)?;
    write_study(merged.experiment, &merged.settings, &merged.rows, &out_path)
}

/// What a study writes, from its rows, whether run whole or merged from shards.
pub fn write_study(
    experiment: Experiment,
    settings: &StudySettings,
    rows: &[RunRow],
    out_path: &Path,
) -> Result<(), String> {
    let name = experiment.name();
    let out = OutputDir::begin(out_path)?;
    out.write("runs.csv", &runs_csv(rows))?;
    out.write("points.csv", &points_csv(rows))?;
    let (table, figures) = report(experiment, rows);
    out.write("table.md", &table)?;
    for (file, svg) in &figures {
        out.write(&format!("{file}.svg"), svg)?;
        std::fs::write(out.file(&format!("{file}.png")), svg_to_png(svg)?).map_err(|e| e.to_string())?;
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
        note: "Workload: Lublin-Feitelson model sized to the machine; replication k uses seed + k for the workload \
               and the model, the same jobs for every scheme and variant of a replication.",
        base_config: base_config(Scheme::LOCAL, settings.first_seed),
    };
    out.write("manifest.json", &(serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n"))?;
    print!("{table}");
    let path = out.commit()?;
    eprintln!("study {name}: {} runs; results in {}/", rows.len(), path.display());
    Ok(())
}

type Figures = Vec<(String, String)>;

/// A study's table (Markdown) and figures (name, SVG) from its rows.
pub fn report(experiment: Experiment, rows: &[RunRow]) -> (String, Figures) {
    match experiment {
        Experiment::E1 => report_e1(rows),
        Experiment::E3 => report_ratio(rows, "MPL", "2", "e3"),
        Experiment::E5 => report_ratio(rows, "costs", "defaults", "e5"),
        Experiment::E2 | Experiment::E4 => report_bars(rows),
    }
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
/// growing), `†` delivered utilization stopped rising.
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
    let mut table = format!(
        "# E1 — mean response time against delivered utilization (WL7, p = 32, MPL 5, s = 20 %)\n\n\
         Means over {replications} replications with 95 % confidence intervals. Utilization: the work the jobs were \
         given (tasks x dedicated time) delivered per CPU-second while jobs arrive; compute-only beside it.\n\n\
         | scheme | sustains delivered utilization | (compute only) | first saturated at offered load | \
         mean response at each offered load, s (* † saturated, see below) |\n|---|---|---|---|---|\n"
    );
    let curves: Vec<Curve> = schemes_in_order(rows).iter().map(|s| curve(rows, s)).collect();
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
            "| {} | {} | {} | {} | {} |\n",
            c.scheme,
            c.sustained.as_ref().map_or("—".into(), percent_with_ci),
            compute.unwrap_or("—".into()),
            c.first_saturated.map_or("none run".into(), |k| c.points[k].first().load.to_string()),
            cells.join("; ")
        );
    }
    table += &e1_ratio_line(&curves);
    table += "\nSaturated: \\* most replications had jobs unfinished at the horizon or a wait growing by at least \
              0.1 s per s of arrivals; † the mean delivered utilization rose by less than half the step in offered \
              load (it stopped rising: throughput saturation). Loads above a scheme's first saturated point are not \
              run (`--keep-saturated` runs them).\n";
    (table, vec![("e1".into(), e1_chart(&curves, replications))])
}

/// The study's central E1 number: the best dynamic scheme's sustained utilization over GS's.
fn e1_ratio_line(curves: &[Curve]) -> String {
    let gs = curves.iter().find(|c| c.scheme == "GS").and_then(|c| c.sustained);
    let best = curves
        .iter()
        .filter(|c| c.scheme != "GS")
        .filter_map(|c| c.sustained.map(|u| (c.scheme.as_str(), u)))
        .max_by(|a, b| a.1.mean.total_cmp(&b.1.mean));
    match (best, gs) {
        (Some((scheme, u)), Some(g)) => {
            let ratio = u.ratio(&g);
            format!(
                "\nBest dynamic scheme {scheme} sustains {:.2} ± {:.2} (one s.e.) times GS's delivered utilization; \
                 the study: 77 % / 57 % = 1.35.\n",
                ratio.value, ratio.std_error
            )
        }
        _ => String::new(),
    }
}

fn e1_chart(curves: &[Curve], replications: u32) -> String {
    let mut series = Vec::new();
    let (mut low, mut high, mut max_util) = (f64::INFINITY, 1e-3f64, 0.0f64);
    for (i, c) in curves.iter().enumerate() {
        let shown = c.first_saturated.map_or(c.points.len(), |k| k + 1);
        let (mut points, mut y_errors) = (Vec::new(), Vec::new());
        for (k, p) in c.points[..shown].iter().enumerate() {
            let (u, resp) = (p.estimate(|r| r.delivered_utilization), p.estimate(|r| r.mean_response_s));
            max_util = max_util.max(u.mean);
            if Some(k) != c.first_saturated {
                // The axis follows the means; a whisker that leaves it is cut at its edge.
                low = low.min(resp.mean);
                high = high.max(resp.mean);
            }
            points.push((u.mean, resp.mean));
            y_errors.push(resp.ci95_half_width());
        }
        series.push(Series {
            name: c.scheme.clone(),
            style: scheme_style(&c.scheme, i),
            points,
            clipped_from: c.first_saturated,
            y_errors,
            // (Utilization's intervals are in the table: across the chart they hide the curves.)
            x_errors: Vec::new(),
        });
    }
    let low = if low.is_finite() { (low / 2.0).max(1e-6) } else { 1e-3 };
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
            "bars: 95 % confidence intervals".into(),
            format!("of the mean response ({replications} seeds;"),
            "workloads differ between seeds)".into(),
            "▲ at the top: first saturated".into(),
            "point, at its utilization".into(),
        ],
    }
    .to_svg()
}

/// Wait and execution per scheme, one chart per group (E2, E4).
fn report_bars(rows: &[RunRow]) -> (String, Figures) {
    let mut table = String::from(
        "Means over the replications with 95 % confidence intervals.\n\n\
         | group | scheme | wait (s) | execution (s) | response (s) | delivered utilization | saturated replications |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut figures = Vec::new();
    for group in first_seen(rows, |r| r.group.as_str()) {
        let group_points: Vec<Point> = points(rows).into_iter().filter(|p| p.first().group == group).collect();
        let mut bars = Vec::new();
        for p in &group_points {
            let response = p.estimate(|r| r.mean_response_s);
            table += &format!(
                "| {group} | {} | {} | {} | {} | {} | {} of {} |\n",
                p.first().scheme,
                with_ci(&p.estimate(|r| r.mean_wait_s), 2),
                with_ci(&p.estimate(|r| r.mean_execution_s), 2),
                with_ci(&response, 2),
                percent_with_ci(&p.estimate(|r| r.delivered_utilization)),
                p.saturated_runs(),
                p.runs.len()
            );
            bars.push(StackedBar {
                label: format!("{}{}", p.first().scheme, saturated_mark(p)),
                segments: vec![p.estimate(|r| r.mean_wait_s).mean, p.estimate(|r| r.mean_execution_s).mean],
                error: response.ci95_half_width(),
            });
        }
        let first = group_points[0].first();
        let chart = StackedBarChart {
            title: format!("{} {group}: mean response time (offered load {})", experiment_of(first), first.load),
            unit: "seconds (simulated)".into(),
            segment_names: vec!["wait in the arrival queue".into(), "execution".into()],
            bars,
            note: Some("whiskers: 95 % confidence interval of the response; * saturated in most replications".into()),
        };
        let file = group.to_lowercase().replace([' ', '='], "").replace('.', "_");
        figures.push((file, chart.to_svg()));
    }
    table += "\n\\* saturated in most replications.\n";
    (table, figures)
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
    let mut table = format!(
        "Offered load {}. Ratios are taken per replication (the same jobs under both settings); means with 95 % \
         confidence intervals.\n\n| workload | scheme | {what} | mean response (s) | relative to {baseline} | \
         saturated replications | peak processes per CPU | mean wait (s) |\n|---|---|---|---|---|---|---|---|\n",
        rows.first().map_or(0.0, |r| r.load)
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
        for scheme in &schemes {
            let mine: Vec<&RunRow> = rows.iter().filter(|r| r.mix == m && &r.scheme == scheme).collect();
            let mut cells = Vec::new();
            for variant in variants_of(scheme) {
                let point = Point { runs: mine.iter().copied().filter(|r| r.variant == variant).collect() };
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
        }
        let chart = GroupedBarChart {
            title: format!("{}: {m}, mean response relative to {what} {baseline}", experiment.to_uppercase()),
            unit: format!("response / response at {what} {baseline} (1 = no change)"),
            categories: schemes.clone(),
            series_names: series_names(&schemes, &variants_of, what, baseline),
            values,
            reference: Some(1.0),
            note: Some("whiskers: 95 % confidence intervals of the per-replication ratios".into()),
        };
        figures.push((m.to_lowercase(), chart.to_svg()));
    }
    (table, figures)
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

    #[test]
    fn no_flags_give_the_library_defaults() {
        assert_eq!(args_of(&[]).settings(), StudySettings::default());
    }

    #[test]
    fn the_canonical_command_gives_back_the_settings() {
        let flags = ["--full", "--loads", "0.25,1e-7", "--schemes", "gs,sb", "--seed", "9", "--replications", "4"];
        let extra = ["--horizon-factor", "2.5", "--keep-saturated", "--out", "x", "--shard", "2/3", "-q"];
        let sizes = ["--job-sizes", "lublin:256"];
        let settings = args_of(&[&flags[..], &extra[..], &sizes[..]].concat()).settings();
        assert_eq!(settings.job_sizes, JobSizes::Lublin(256));
        let command = canonical_command(Experiment::E4, &settings);
        assert!(command.starts_with("cosched study e4 --jobs 1000 --runtime-scale 0.01 --loads 0.25,0.0000001 "));
        let argv = command.split(' ').skip(1);
        let StudyCommand::E4(args) = Study::try_parse_from(argv).expect("flags parse").command else {
            unreachable!("parsed e4")
        };
        assert_eq!(args.settings(), settings);
        assert_eq!(canonical_command(Experiment::E4, &args.settings()), command);
    }

    #[test]
    fn a_shard_must_be_i_of_n() {
        assert_eq!(args_of(&["--shard", "3/8"]).shard, Some(Shard { index: 3, count: 8 }));
        for bad in ["0/8", "9/8", "8", "1/20000"] {
            let Err(error) = Study::try_parse_from(["study", "e4", "--shard", bad]) else { panic!("{bad} accepted") };
            assert!(error.to_string().contains("--shard"), "{error}");
        }
    }

    #[test]
    fn full_size_replaces_jobs_and_scale() {
        let settings = args_of(&["--full"]).settings();
        assert_eq!((settings.jobs_per_run, settings.runtime_scale), (FULL_JOBS_PER_RUN, FULL_RUNTIME_SCALE));
    }
}
