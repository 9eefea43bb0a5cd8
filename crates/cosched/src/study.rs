//! `cosched study e1 … e5`: the reference study's experiments, each one
//! command. Every experiment is a list of independent runs (a scheme, a
//! workload mix, a load, machine parameters and a replication seed) executed
//! in parallel on all cores. Every reported point is the mean over its
//! replications with a 95 % confidence interval. Each study writes its runs
//! and points (CSV), its table (Markdown), its figures (SVG and PNG) and a
//! manifest with the exact command, version, seeds and parameters.

use crate::output::{csv_field, num, push_row, OutputDir};
use crate::plot::{
    scheme_style, svg_to_png, GroupedBarChart, LineChart, Series, StackedBar, StackedBarChart, SCHEME_ORDER,
};
use crate::sim_cmd::{command_line, run_all};
use crate::workload_source::{load_workload, WorkloadSpec};
use clap::{Args, Subcommand};
use cosched_bench::stats::Estimate;
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::metrics::SaturationVerdict;
use cosched_sim::run::RunOptions;
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

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
}

#[derive(Args, Debug, Clone)]
pub struct StudyArgs {
    /// Jobs per run (the Lublin-Feitelson model sized to the machine).
    #[arg(long, default_value_t = 150)]
    pub jobs: usize,
    /// Multiply every nominal run time by this (documented in every output).
    #[arg(long, default_value_t = 0.001)]
    pub runtime_scale: f64,
    /// Offered loads (E1: the steps; the others: their single load, first value; see `study --help`).
    #[arg(long, value_delimiter = ',')]
    pub loads: Option<Vec<f64>>,
    /// Schemes to run (default: all ten).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Option<Vec<Scheme>>,
    /// Seed of the first replication; replication k uses seed + k for its workload and its model.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Independent replications per point (each its own workload and skew draws); points are their means
    /// with 95 % confidence intervals.
    #[arg(long, default_value_t = 3)]
    pub replications: u32,
    /// A run stops at this many times (arrival span + MPL x longest run time); jobs unfinished then mark it saturated.
    #[arg(long, default_value_t = 3.0)]
    pub horizon_factor: f64,
    /// E1: also run a scheme at the loads above the one where it saturated (by default it is left out
    /// there: its backlog only grows, and those runs are the longest).
    #[arg(long)]
    pub keep_saturated: bool,
    /// Output folder (default: cosched-out/study-eN).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The study at full size: 1000 jobs per run, run times x0.01 (hours on this machine).
    #[arg(long)]
    pub full: bool,
    #[arg(long, short)]
    pub quiet: bool,
}

/// Default loads. E1 climbs until the best schemes saturate. E3-E5 run where
/// their effects can show (docs/reproduction.md, "Choosing the loads"): at
/// 0.9, jobs queue at MPL 2 and CPUs hold more than 5 processes at MPL 16.
const E1_LOADS: [f64; 9] = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const E2_LOAD: f64 = 0.5;
const E3_TO_E5_LOAD: f64 = 0.9;

/// One run of a study.
#[derive(Clone, Debug)]
struct RunSpec {
    group: String,
    variant: String,
    mix: Mix,
    load: f64,
    replication: u32,
    config: SimConfig,
}

/// One run's outcome, as reported.
#[derive(Clone, Debug, Serialize)]
struct RunRow {
    group: String,
    variant: String,
    scheme: String,
    mix: String,
    load: f64,
    replication: u32,
    seed: u64,
    mpl: u32,
    skew: f64,
    offered_load: f64,
    jobs: usize,
    completed: usize,
    delivered_utilization: f64,
    compute_utilization: f64,
    mean_response_s: f64,
    mean_wait_s: f64,
    mean_execution_s: f64,
    mean_slowdown: f64,
    peak_processes_per_cpu: usize,
    saturation: SaturationVerdict,
}

/// The runs of one (group, variant, scheme) over its replications.
struct Point<'a> {
    runs: Vec<&'a RunRow>,
}

impl Point<'_> {
    fn first(&self) -> &RunRow {
        self.runs[0]
    }
    fn estimate(&self, value: impl Fn(&RunRow) -> f64) -> Estimate {
        let values: Vec<f64> = self.runs.iter().map(|r| value(r)).collect();
        Estimate::of(&values).expect("a point has runs")
    }
    fn saturated_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.saturation.saturated).count()
    }
    /// Saturated when most of its replications saturate.
    fn saturated(&self) -> bool {
        2 * self.saturated_runs() > self.runs.len()
    }
    fn star(&self) -> &'static str {
        if self.saturated() {
            "*"
        } else {
            ""
        }
    }
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

fn base_config(scheme: Scheme, seed: u64) -> SimConfig {
    SimConfig { scheme, nodes: 32, cpus_per_node: 1, mpl: 5, skew: 0.2, seed, ..SimConfig::default() }
}

impl StudyArgs {
    fn schemes(&self) -> Vec<Scheme> {
        self.schemes.clone().unwrap_or_else(|| SCHEME_ORDER.iter().map(|n| n.parse().expect("known")).collect())
    }
    fn jobs(&self) -> usize {
        if self.full {
            1000
        } else {
            self.jobs
        }
    }
    fn runtime_scale(&self) -> f64 {
        if self.full {
            0.01
        } else {
            self.runtime_scale
        }
    }
    fn single_load(&self, default: f64) -> f64 {
        self.loads.as_ref().and_then(|l| l.first().copied()).unwrap_or(default)
    }
    fn seeds(&self) -> Vec<u64> {
        (0..self.replications as u64).map(|k| self.seed + k).collect()
    }
    fn validate(&self) -> Result<(), String> {
        if self.jobs() < 10 {
            return Err("--jobs must be at least 10".into());
        }
        if !self.runtime_scale().is_finite() || self.runtime_scale() <= 0.0 {
            return Err("--runtime-scale must be positive".into());
        }
        if self.horizon_factor.is_nan() || self.horizon_factor < 1.0 {
            return Err("--horizon-factor must be at least 1".into());
        }
        if !(1..=100).contains(&self.replications) {
            return Err(format!("--replications must be 1 to 100, got {}", self.replications));
        }
        if let Some(loads) = &self.loads {
            if loads.is_empty() || loads.iter().any(|l| !l.is_finite() || *l <= 0.0) {
                return Err("--loads must be positive numbers".into());
            }
        }
        Ok(())
    }
}

pub fn run(cmd: &StudyCommand) -> Result<(), String> {
    let (name, args) = match cmd {
        StudyCommand::E1(a) => ("e1", a),
        StudyCommand::E2(a) => ("e2", a),
        StudyCommand::E3(a) => ("e3", a),
        StudyCommand::E4(a) => ("e4", a),
        StudyCommand::E5(a) => ("e5", a),
    };
    args.validate()?;
    let out_path = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("cosched-out/study-{name}")));
    OutputDir::check(&out_path)?;
    let rows = if name == "e1" { execute_e1(args)? } else { execute(&plan(name, args), args)? };
    let out = OutputDir::begin(&out_path)?;
    out.write("runs.csv", &runs_csv(&rows))?;
    out.write("points.csv", &points_csv(&rows))?;
    let (table, figures) = match name {
        "e1" => report_e1(&rows),
        "e3" => report_ratio(&rows, "MPL", "2", "e3"),
        "e5" => report_ratio(&rows, "costs", "defaults", "e5"),
        _ => report_bars(&rows),
    };
    out.write("table.md", &table)?;
    for (file, svg) in &figures {
        out.write(&format!("{file}.svg"), svg)?;
        std::fs::write(out.file(&format!("{file}.png")), svg_to_png(svg)?).map_err(|e| e.to_string())?;
    }
    let manifest = Manifest {
        experiment: name,
        cosched_version: env!("CARGO_PKG_VERSION"),
        command: command_line(),
        seeds: args.seeds(),
        jobs_per_run: args.jobs(),
        runtime_scale: args.runtime_scale(),
        horizon_factor: args.horizon_factor,
        runs: rows.len(),
        note: "Workload: Lublin-Feitelson model sized to the machine; replication k uses seed + k for the workload \
               and the model, the same jobs for every scheme and variant of a replication.",
        base_config: base_config(Scheme::LOCAL, args.seed),
    };
    out.write("manifest.json", &(serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n"))?;
    print!("{table}");
    let path = out.commit()?;
    eprintln!("study {name}: {} runs; results in {}/", rows.len(), path.display());
    Ok(())
}

fn mix(name: &str) -> Mix {
    name.parse().expect("known mix")
}

/// E1 climbs the loads; a scheme that saturated at one load (in most of its
/// replications) is left out above it unless `--keep-saturated`.
fn execute_e1(args: &StudyArgs) -> Result<Vec<RunRow>, String> {
    let mut loads = args.loads.clone().unwrap_or_else(|| E1_LOADS.to_vec());
    loads.sort_by(f64::total_cmp);
    let mut schemes = args.schemes();
    let mut rows: Vec<RunRow> = Vec::new();
    for load in loads {
        if schemes.is_empty() {
            break;
        }
        let mut specs = Vec::new();
        for &s in &schemes {
            for (k, seed) in args.seeds().into_iter().enumerate() {
                specs.push(spec(format!("load {load}"), String::new(), mix("WL7"), load, k, base_config(s, seed)));
            }
        }
        rows.extend(execute(&specs, args)?);
        if !args.keep_saturated {
            schemes.retain(|s| curve(&rows, s.name()).first_saturated.is_none());
        }
    }
    Ok(rows)
}

fn spec(group: String, variant: String, mix: Mix, load: f64, replication: usize, config: SimConfig) -> RunSpec {
    RunSpec { group, variant, mix, load, replication: replication as u32, config }
}

/// The runs of E2-E5.
fn plan(name: &str, args: &StudyArgs) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for (k, seed) in args.seeds().into_iter().enumerate() {
        for s in args.schemes() {
            let base = base_config(s, seed);
            let mut add = |group: &str, variant: String, mix_name: &str, load: f64, config: SimConfig| {
                specs.push(spec(group.to_string(), variant, mix(mix_name), load, k, config))
            };
            match name {
                "e2" => {
                    for wl in ["WL4", "WL5", "WL2", "WL3"] {
                        add(wl, String::new(), wl, args.single_load(E2_LOAD), base.clone());
                    }
                }
                "e3" => {
                    for wl in ["WL2", "WL4", "WL5"] {
                        for mpl in [2, 5, 16] {
                            let config = SimConfig { mpl, ..base.clone() };
                            add(wl, mpl.to_string(), wl, args.single_load(E3_TO_E5_LOAD), config);
                        }
                    }
                }
                "e4" => {
                    for skew in [0.2, 1.5] {
                        let config = SimConfig { skew, ..base.clone() };
                        add(&format!("s = {skew}"), String::new(), "WL4", args.single_load(E3_TO_E5_LOAD), config);
                    }
                }
                "e5" => {
                    for (label, config) in cost_variants(&base) {
                        add("WL5", label.to_string(), "WL5", args.single_load(E3_TO_E5_LOAD), config);
                    }
                }
                _ => unreachable!("experiments are e1..e5"),
            }
        }
    }
    specs
}

/// E5's three cost settings of a scheme: GS varies quantum and gang switch,
/// the others context switch and interrupt.
fn cost_variants(base: &SimConfig) -> Vec<(&'static str, SimConfig)> {
    let variants: [(&str, u64, u64); 3] = if base.scheme.is_gang() {
        [("defaults", 200, 2_000), ("Q 100 ms, CS_GS 1 ms", 100, 1_000), ("Q 100 ms, CS_GS 2 ms", 100, 2_000)]
    } else {
        [("defaults", 200, 50), ("CS 100 µs, I 25 µs", 100, 25), ("CS 100 µs, I 50 µs", 100, 50)]
    };
    variants
        .into_iter()
        .map(|(label, a, b)| {
            let mut cfg = base.clone();
            if cfg.scheme.is_gang() {
                cfg.costs.gang_quantum_ns = a * 1_000_000;
                cfg.costs.gang_switch_ns = b * 1_000;
            } else {
                cfg.costs.context_switch_ns = a * 1_000;
                cfg.costs.interrupt_ns = b * 1_000;
            }
            (label, cfg)
        })
        .collect()
}

type WorkloadKey = (u8, u64, u32, u64);

fn workload_key(spec: &RunSpec) -> WorkloadKey {
    (spec.mix.number, spec.load.to_bits(), spec.config.cpu_count(), spec.config.seed)
}

/// Run everything in parallel; the workload of a (mix, load, machine, seed) is generated once.
fn execute(specs: &[RunSpec], args: &StudyArgs) -> Result<Vec<RunRow>, String> {
    let mut workloads = BTreeMap::new();
    for spec in specs {
        if workloads.contains_key(&workload_key(spec)) {
            continue;
        }
        let ws = WorkloadSpec {
            trace: None,
            skip_bad_lines: false,
            drop_oversized: false,
            drop_statuses: Vec::new(),
            jobs: Some(args.jobs()),
            model_procs: spec.config.cpu_count(),
            runtime_scale: args.runtime_scale(),
            target_load: Some(spec.load),
            seed: spec.config.seed,
            hyper_erlang_params: None,
        };
        let loaded = load_workload(&ws, spec.config.cpu_count())?;
        workloads.insert(workload_key(spec), (loaded.requests(), loaded.report.offered_load.unwrap_or(f64::NAN)));
    }
    let configs: Vec<SimConfig> = specs
        .iter()
        .map(|spec| {
            let requests = &workloads[&workload_key(spec)].0;
            let horizon_s = horizon_s(requests, spec.config.mpl, args.horizon_factor);
            SimConfig { horizon_ns: Some((horizon_s * 1e9) as u64), ..spec.config.clone() }
        })
        .collect();
    let options = RunOptions { bounded_slowdown_threshold_s: 10.0 * args.runtime_scale(), ..RunOptions::default() };
    if !args.quiet {
        eprintln!("{} runs of {} jobs each on {} cores", specs.len(), args.jobs(), num_cpus());
    }
    let labels: Vec<String> = specs
        .iter()
        .map(|s| format!("{} {} {} {} seed {}", s.config.scheme, s.mix, s.group, s.variant, s.config.seed))
        .collect();
    let results = run_all(
        &configs,
        &labels,
        |i| {
            let requests = &workloads[&workload_key(&specs[i])].0;
            sim_jobs(requests, &WorkloadPlan { mix: specs[i].mix, runtime_scale: 1.0 }, &configs[i])
        },
        &options,
        !args.quiet,
    )?;
    Ok(specs
        .iter()
        .zip(results)
        .map(|(spec, r)| {
            let s = &r.summary;
            RunRow {
                group: spec.group.clone(),
                variant: spec.variant.clone(),
                scheme: s.scheme.clone(),
                mix: spec.mix.to_string(),
                load: spec.load,
                replication: spec.replication,
                seed: spec.config.seed,
                mpl: spec.config.mpl,
                skew: spec.config.skew,
                offered_load: workloads[&workload_key(spec)].1,
                jobs: s.jobs_submitted,
                completed: s.jobs_completed,
                delivered_utilization: s.delivered_utilization_during_arrivals,
                compute_utilization: s.compute_utilization_during_arrivals,
                mean_response_s: s.mean_response_s,
                mean_wait_s: s.mean_wait_s,
                mean_execution_s: s.mean_execution_s,
                mean_slowdown: s.mean_slowdown,
                peak_processes_per_cpu: s.peak_processes_per_cpu,
                saturation: s.saturation.clone(),
            }
        })
        .collect())
}

/// Long enough for the longest job to time-share with MPL others after the last arrival.
fn horizon_s(requests: &[cosched_sim::input::JobRequest], mpl: u32, factor: f64) -> f64 {
    let last_submit = requests.iter().map(|r| r.submit_s).fold(0.0, f64::max);
    let first_submit = requests.iter().map(|r| r.submit_s).fold(f64::INFINITY, f64::min);
    let longest_run = requests.iter().map(|r| r.run_s).fold(0.0, f64::max);
    ((last_submit - first_submit) + longest_run * mpl as f64).max(1.0) * factor
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn runs_csv(rows: &[RunRow]) -> String {
    let mut text = String::from(
        "group,variant,scheme,mix,load,replication,seed,mpl,skew,offered_load,jobs,completed,delivered_utilization,\
         compute_utilization,mean_response_s,mean_wait_s,mean_execution_s,mean_slowdown,peak_processes_per_cpu,\
         saturated,delivered_share,backlog_growth,wait_growth\n",
    );
    for r in rows {
        push_row(
            &mut text,
            &[
                csv_field(&r.group),
                csv_field(&r.variant),
                csv_field(&r.scheme),
                r.mix.clone(),
                num(r.load),
                r.replication.to_string(),
                r.seed.to_string(),
                r.mpl.to_string(),
                num(r.skew),
                num(r.offered_load),
                r.jobs.to_string(),
                r.completed.to_string(),
                num(r.delivered_utilization),
                num(r.compute_utilization),
                num(r.mean_response_s),
                num(r.mean_wait_s),
                num(r.mean_execution_s),
                num(r.mean_slowdown),
                r.peak_processes_per_cpu.to_string(),
                r.saturation.saturated.to_string(),
                num(r.saturation.delivered_share),
                num(r.saturation.backlog_growth),
                num(r.saturation.wait_growth),
            ],
        );
    }
    text
}

/// Every point with its means and 95 % confidence half-widths.
fn points_csv(rows: &[RunRow]) -> String {
    let mut text = String::from(
        "group,variant,scheme,mix,load,replications,saturated_replications,delivered_utilization,\
         delivered_utilization_ci95,compute_utilization,compute_utilization_ci95,mean_response_s,\
         mean_response_s_ci95,mean_wait_s,mean_wait_s_ci95,mean_execution_s,mean_execution_s_ci95\n",
    );
    for p in points(rows) {
        let r = p.first();
        let mut fields = vec![
            csv_field(&r.group),
            csv_field(&r.variant),
            csv_field(&r.scheme),
            r.mix.clone(),
            num(r.load),
            p.runs.len().to_string(),
            p.saturated_runs().to_string(),
        ];
        let measures: [fn(&RunRow) -> f64; 5] = [
            |r| r.delivered_utilization,
            |r| r.compute_utilization,
            |r| r.mean_response_s,
            |r| r.mean_wait_s,
            |r| r.mean_execution_s,
        ];
        for measure in measures {
            let e = p.estimate(measure);
            fields.extend([num(e.mean), num(e.ci95_half_width())]);
        }
        push_row(&mut text, &fields);
    }
    text
}

/// The points of the rows, in first-seen order of (group, variant, scheme).
fn points(rows: &[RunRow]) -> Vec<Point<'_>> {
    let mut keys: Vec<(&str, &str, &str)> = Vec::new();
    for r in rows {
        let key = (r.group.as_str(), r.variant.as_str(), r.scheme.as_str());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(g, v, s)| Point {
            runs: rows.iter().filter(|r| r.group == g && r.variant == v && r.scheme == s).collect(),
        })
        .collect()
}

fn schemes_in_order(rows: &[RunRow]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for r in rows {
        if !seen.contains(&r.scheme) {
            seen.push(r.scheme.clone());
        }
    }
    seen
}

fn first_seen<'a>(rows: &'a [RunRow], field: impl Fn(&'a RunRow) -> &'a str) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for r in rows {
        if !seen.contains(&field(r)) {
            seen.push(field(r));
        }
    }
    seen
}

type Figures = Vec<(String, String)>;

/// A point whose mean delivered utilization rose by less than this share of
/// the step in offered load from the previous point (or from nothing) has
/// stopped rising: throughput saturation, as the study reads its Figure 3
/// (our choice of the share).
const KNEE_SHARE: f64 = 0.5;

/// A scheme's E1 curve: its points by load, the highest delivered utilization
/// it sustains (the best point below its first saturated one), and that load.
struct Curve<'a> {
    scheme: String,
    points: Vec<Point<'a>>,
    sustained: Option<Estimate>,
    first_saturated: Option<usize>,
}

fn curve<'a>(rows: &'a [RunRow], scheme: &str) -> Curve<'a> {
    let mut points: Vec<Point> = points(rows).into_iter().filter(|p| p.first().scheme == scheme).collect();
    points.sort_by(|a, b| a.first().load.total_cmp(&b.first().load));
    let first_saturated = (0..points.len()).find(|&k| points[k].saturated() || stopped_rising(&points, k));
    let sustained = points[..first_saturated.unwrap_or(points.len())]
        .iter()
        .map(|p| p.estimate(|r| r.delivered_utilization))
        .max_by(|a, b| a.mean.total_cmp(&b.mean));
    Curve { scheme: scheme.to_string(), points, sustained, first_saturated }
}

/// Whether point `k`'s delivered utilization rose by less than [`KNEE_SHARE`]
/// of the offered-load step from the point before it.
fn stopped_rising(points: &[Point], k: usize) -> bool {
    let utilization = |p: &Point| p.estimate(|r| r.delivered_utilization).mean;
    let (load_before, utilization_before) =
        if k == 0 { (0.0, 0.0) } else { (points[k - 1].first().load, utilization(&points[k - 1])) };
    utilization(&points[k]) - utilization_before < KNEE_SHARE * (points[k].first().load - load_before)
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
                label: format!("{}{}", p.first().scheme, p.star()),
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
