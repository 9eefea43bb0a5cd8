//! `cosched study e1 … e5`: the reference study's experiments, each one
//! command. Every experiment is a list of independent runs (a scheme, a
//! workload mix, a load and machine parameters) executed in parallel on all
//! cores; each writes its table (CSV and Markdown), its figure (SVG and PNG)
//! and a manifest with the exact command, version, seed and parameters.

use crate::output::{csv_field, num, push_row, OutputDir};
use crate::plot::{svg_to_png, LineChart, Series, StackedBar, StackedBarChart};
use crate::sim_cmd::{command_line, run_all};
use crate::workload_source::{load_workload, WorkloadSpec};
use clap::{Args, Subcommand};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::metrics::{judge_saturation, SaturationVerdict};
use cosched_sim::run::RunOptions;
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// E1, load: WL7, p = 32, MPL 5, s = 20 %; mean response against utilization per scheme as load rises.
    E1(StudyArgs),
    /// E2, nature of the workload: WL4 (CPU), WL5 (communication), WL2 (I/O), WL3 (balanced); wait and execution per scheme.
    E2(StudyArgs),
    /// E3, multiprogramming level: response at MPL 5 and 16 relative to MPL 2, for WL2, WL4, WL5.
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
    /// Offered loads (E1: the steps; others: the single load, first value).
    #[arg(long, value_delimiter = ',')]
    pub loads: Option<Vec<f64>>,
    /// Schemes to run (default: all ten).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Option<Vec<Scheme>>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A run stops at this many times (arrival span + MPL x longest run time); jobs unfinished then mark it saturated.
    #[arg(long, default_value_t = 3.0)]
    pub horizon_factor: f64,
    /// Output folder (default: cosched-out/study-eN).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The study at full size: 1000 jobs per run, run times x0.01 (hours on this machine).
    #[arg(long)]
    pub full: bool,
    #[arg(long, short)]
    pub quiet: bool,
}

/// One run of a study.
#[derive(Clone, Debug)]
struct RunSpec {
    group: String,
    mix: Mix,
    load: f64,
    config: SimConfig,
}

/// One run's outcome, as reported.
#[derive(Clone, Debug, Serialize)]
struct RunRow {
    group: String,
    scheme: String,
    mix: String,
    load: f64,
    mpl: u32,
    skew: f64,
    offered_load: f64,
    jobs: usize,
    completed: usize,
    utilization: f64,
    mean_response_s: f64,
    mean_wait_s: f64,
    mean_execution_s: f64,
    mean_slowdown: f64,
    saturation: SaturationVerdict,
}

#[derive(Serialize)]
struct Manifest<'a> {
    experiment: &'a str,
    cosched_version: &'static str,
    command: String,
    seed: u64,
    jobs_per_run: usize,
    runtime_scale: f64,
    horizon_factor: f64,
    runs: usize,
    note: &'a str,
    /// Every run's scheme, workload and machine parameters are in runs.csv;
    /// this is the machine and cost model every run starts from.
    base_config: SimConfig,
}

const ALL_SCHEMES: [&str; 10] = ["Local", "GS", "SB", "SY", "DCS", "PB", "DCS-SB", "DCS-SY", "PB-SB", "PB-SY"];

fn base_config(scheme: Scheme, seed: u64) -> SimConfig {
    SimConfig { scheme, nodes: 32, cpus_per_node: 1, mpl: 5, skew: 0.2, seed, ..SimConfig::default() }
}

impl StudyArgs {
    fn schemes(&self) -> Vec<Scheme> {
        self.schemes.clone().unwrap_or_else(|| ALL_SCHEMES.iter().map(|n| n.parse().expect("known")).collect())
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
    let specs = plan(name, args);
    let rows = execute(&specs, args)?;
    let out = OutputDir::begin(&out_path)?;
    out.write("runs.csv", &runs_csv(&rows))?;
    let (table, figures) = match name {
        "e1" => report_e1(&rows),
        "e3" => report_ratio(&rows, "MPL", |r| r.mpl.to_string(), "2"),
        "e5" => report_ratio(&rows, "costs", |r| r.group.clone(), "defaults"),
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
        seed: args.seed,
        jobs_per_run: args.jobs(),
        runtime_scale: args.runtime_scale(),
        horizon_factor: args.horizon_factor,
        runs: rows.len(),
        note: "Workload: Lublin-Feitelson model sized to the machine, the same jobs for every scheme of a group.",
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

/// The runs of an experiment.
fn plan(name: &str, args: &StudyArgs) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    let mut add =
        |group: String, mix: Mix, load: f64, config: SimConfig| specs.push(RunSpec { group, mix, load, config });
    let schemes = args.schemes();
    match name {
        "e1" => {
            let loads = args.loads.clone().unwrap_or_else(|| vec![0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]);
            for &load in &loads {
                for &s in &schemes {
                    add(format!("load {load}"), mix("WL7"), load, base_config(s, args.seed));
                }
            }
        }
        "e2" => {
            let load = args.single_load(0.5);
            for wl in ["WL4", "WL5", "WL2", "WL3"] {
                for &s in &schemes {
                    add(wl.to_string(), mix(wl), load, base_config(s, args.seed));
                }
            }
        }
        "e3" => {
            let load = args.single_load(0.5);
            for wl in ["WL2", "WL4", "WL5"] {
                for mpl in [2, 5, 16] {
                    for &s in &schemes {
                        add(wl.to_string(), mix(wl), load, SimConfig { mpl, ..base_config(s, args.seed) });
                    }
                }
            }
        }
        "e4" => {
            let load = args.single_load(0.5);
            for skew in [0.2, 1.5] {
                for &s in &schemes {
                    add(format!("s = {skew}"), mix("WL4"), load, SimConfig { skew, ..base_config(s, args.seed) });
                }
            }
        }
        "e5" => {
            let load = args.single_load(0.5);
            for &s in &schemes {
                let base = base_config(s, args.seed);
                let variants: [(&str, u64, u64); 3] = if s.is_gang() {
                    [
                        ("defaults", 200, 2_000),
                        ("Q 100 ms, CS_GS 1 ms", 100, 1_000),
                        ("Q 100 ms, CS_GS 2 ms", 100, 2_000),
                    ]
                } else {
                    [("defaults", 200, 50), ("CS 100 µs, I 25 µs", 100, 25), ("CS 100 µs, I 50 µs", 100, 50)]
                };
                for (label, a, b) in variants {
                    let mut cfg = base.clone();
                    if s.is_gang() {
                        cfg.costs.gang_quantum_ns = a * 1_000_000;
                        cfg.costs.gang_switch_ns = b * 1_000;
                    } else {
                        cfg.costs.context_switch_ns = a * 1_000;
                        cfg.costs.interrupt_ns = b * 1_000;
                    }
                    add(label.to_string(), mix("WL5"), load, cfg);
                }
            }
        }
        _ => unreachable!("experiments are e1..e5"),
    }
    specs
}

/// Run everything in parallel; the workload of a (mix, load) is generated once.
fn execute(specs: &[RunSpec], args: &StudyArgs) -> Result<Vec<RunRow>, String> {
    let mut workloads = BTreeMap::new();
    for spec in specs {
        let key = (spec.mix.number, spec.load.to_bits(), spec.config.cpu_count());
        if workloads.contains_key(&key) {
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
            seed: args.seed,
            hyper_erlang_params: None,
        };
        let loaded = load_workload(&ws, spec.config.cpu_count())?;
        workloads.insert(key, (loaded.requests(), loaded.report.offered_load.unwrap_or(f64::NAN)));
    }
    let configs: Vec<SimConfig> = specs
        .iter()
        .map(|spec| {
            let key = (spec.mix.number, spec.load.to_bits(), spec.config.cpu_count());
            let requests = &workloads[&key].0;
            let last_submit = requests.iter().map(|r| r.submit_s).fold(0.0, f64::max);
            let first_submit = requests.iter().map(|r| r.submit_s).fold(f64::INFINITY, f64::min);
            // Long enough for the longest job to time-share with MPL others after the last arrival.
            let longest_run = requests.iter().map(|r| r.run_s).fold(0.0, f64::max);
            let horizon_s =
                ((last_submit - first_submit) + longest_run * spec.config.mpl as f64).max(1.0) * args.horizon_factor;
            SimConfig { horizon_ns: Some((horizon_s * 1e9) as u64), ..spec.config.clone() }
        })
        .collect();
    let options = RunOptions {
        bounded_slowdown_threshold_s: 10.0 * args.runtime_scale(),
        record_trace: false,
        progress_every_events: 1 << 20,
        visit_every_tick: false,
        stop: None,
    };
    if !args.quiet {
        eprintln!("{} runs of {} jobs each on {} cores", specs.len(), args.jobs(), num_cpus());
    }
    let labels: Vec<String> = specs.iter().map(|s| format!("{} {} {}", s.config.scheme, s.mix, s.group)).collect();
    let results = run_all(
        &configs,
        &labels,
        |i| {
            let spec = &specs[i];
            let key = (spec.mix.number, spec.load.to_bits(), spec.config.cpu_count());
            sim_jobs(&workloads[&key].0, &WorkloadPlan { mix: spec.mix, runtime_scale: 1.0 }, &configs[i])
        },
        &options,
        !args.quiet,
    )?;
    Ok(specs
        .iter()
        .zip(results)
        .map(|(spec, r)| {
            let key = (spec.mix.number, spec.load.to_bits(), spec.config.cpu_count());
            let s = &r.summary;
            RunRow {
                group: spec.group.clone(),
                scheme: s.scheme.clone(),
                mix: spec.mix.to_string(),
                load: spec.load,
                mpl: spec.config.mpl,
                skew: spec.config.skew,
                offered_load: workloads[&key].1,
                jobs: s.jobs_submitted,
                completed: s.jobs_completed,
                utilization: s.utilization_during_arrivals,
                mean_response_s: s.mean_response_s,
                mean_wait_s: s.mean_wait_s,
                mean_execution_s: s.mean_execution_s,
                mean_slowdown: s.mean_slowdown,
                saturation: judge_saturation(&r.jobs, s.jobs_submitted),
            }
        })
        .collect())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn runs_csv(rows: &[RunRow]) -> String {
    let mut text = String::from(
        "group,scheme,mix,load,mpl,skew,offered_load,jobs,completed,utilization,mean_response_s,mean_wait_s,\
         mean_execution_s,mean_slowdown,saturated,wait_growth\n",
    );
    for r in rows {
        push_row(
            &mut text,
            &[
                csv_field(&r.group),
                csv_field(&r.scheme),
                r.mix.clone(),
                num(r.load),
                r.mpl.to_string(),
                num(r.skew),
                num(r.offered_load),
                r.jobs.to_string(),
                r.completed.to_string(),
                num(r.utilization),
                num(r.mean_response_s),
                num(r.mean_wait_s),
                num(r.mean_execution_s),
                num(r.mean_slowdown),
                r.saturation.saturated.to_string(),
                num(r.saturation.wait_growth),
            ],
        );
    }
    text
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

/// The highest utilization a scheme sustains: the best of its runs at loads
/// below its first saturated run.
fn saturation_point(runs: &[&RunRow]) -> (Option<f64>, Option<f64>) {
    let mut best = None;
    for r in runs {
        if r.saturation.saturated {
            return (best, Some(r.load));
        }
        best = Some(best.map_or(r.utilization, |b: f64| b.max(r.utilization)));
    }
    (best, None)
}

type Figures = Vec<(String, String)>;

fn report_e1(rows: &[RunRow]) -> (String, Figures) {
    let mut table = String::from(
        "# E1 — mean response time against utilization (WL7, p = 32, MPL 5, s = 20 %)\n\n\
         | scheme | sustains utilization up to | first saturated at offered load | response at each load (s; * = saturated) |\n|---|---|---|---|\n",
    );
    let mut series = Vec::new();
    let mut max_response: f64 = 1e-3;
    let mut min_response = f64::INFINITY;
    for scheme in schemes_in_order(rows) {
        let mut runs: Vec<&RunRow> = rows.iter().filter(|r| r.scheme == scheme).collect();
        runs.sort_by(|a, b| a.load.total_cmp(&b.load));
        let (sustained, first_saturated) = saturation_point(&runs);
        let cells: Vec<String> = runs
            .iter()
            .map(|r| format!("{:.2}{}", r.mean_response_s, if r.saturation.saturated { "*" } else { "" }))
            .collect();
        table += &format!(
            "| {scheme} | {} | {} | {} |\n",
            sustained.map_or("—".into(), |u| format!("{:.1} %", 100.0 * u)),
            first_saturated.map_or("none".into(), |l| format!("{l}")),
            cells.join(", ")
        );
        let clipped_from = runs.iter().position(|r| r.saturation.saturated);
        for r in runs.iter().take(clipped_from.unwrap_or(runs.len())) {
            max_response = max_response.max(r.mean_response_s);
            min_response = min_response.min(r.mean_response_s);
        }
        series.push(Series {
            name: scheme.clone(),
            points: runs.iter().map(|r| (r.utilization, r.mean_response_s)).collect(),
            clipped_from,
            y_errors: vec![],
        });
    }
    table +=
        "\nSaturated: some jobs were unfinished at the horizon, or waiting grew by at least 0.1 s per s of arrivals.\n";
    let max_util = rows.iter().map(|r| r.utilization).fold(0.0, f64::max);
    let chart = LineChart {
        title: "E1: mean response time against utilization (WL7)".into(),
        x_label: "utilization while jobs arrive (useful CPU time / capacity)".into(),
        y_label: "mean response time, s (log)".into(),
        x_range: (0.0, (max_util * 10.0).ceil() / 10.0 + 0.05),
        y_range: (10f64.powf(min_response.max(1e-6).log10().floor()), 10f64.powf(max_response.log10().ceil())),
        log_y: true,
        series,
    };
    (table, vec![("e1".into(), chart.to_svg())])
}

/// Wait and execution per scheme, one chart per group (E2, E4).
fn report_bars(rows: &[RunRow]) -> (String, Figures) {
    let mut groups: Vec<String> = Vec::new();
    for r in rows {
        if !groups.contains(&r.group) {
            groups.push(r.group.clone());
        }
    }
    let mut table = String::from("| group | scheme | wait (s) | execution (s) | response (s) | utilization | saturated |\n|---|---|---|---|---|---|---|\n");
    let mut figures = Vec::new();
    for group in &groups {
        let runs: Vec<&RunRow> = rows.iter().filter(|r| &r.group == group).collect();
        for r in &runs {
            table += &format!(
                "| {group} | {} | {:.2} | {:.2} | {:.2} | {:.1} % | {} |\n",
                r.scheme,
                r.mean_wait_s,
                r.mean_execution_s,
                r.mean_response_s,
                100.0 * r.utilization,
                if r.saturation.saturated { "yes" } else { "no" }
            );
        }
        let chart = StackedBarChart {
            title: format!("{group}: mean response time"),
            unit: "seconds (simulated)".into(),
            segment_names: vec!["wait".into(), "execution".into()],
            bars: runs
                .iter()
                .map(|r| StackedBar {
                    label: format!("{}{}", r.scheme, if r.saturation.saturated { "*" } else { "" }),
                    segments: vec![r.mean_wait_s, r.mean_execution_s],
                })
                .collect(),
        };
        let file = group.to_lowercase().replace([' ', '='], "").replace('.', "_");
        figures.push((file, chart.to_svg()));
    }
    table += "\n\\* saturated run.\n";
    (table, figures)
}

/// Mean response of each variant relative to the baseline variant (E3, E5).
fn report_ratio(rows: &[RunRow], what: &str, variant: impl Fn(&RunRow) -> String, baseline: &str) -> (String, Figures) {
    let mut table = format!("| workload | scheme | {what} | mean response (s) | relative to {baseline} | saturated |\n|---|---|---|---|---|---|\n");
    let mut figures = Vec::new();
    let mut mixes: Vec<String> = Vec::new();
    for r in rows {
        if !mixes.contains(&r.mix) {
            mixes.push(r.mix.clone());
        }
    }
    for m in &mixes {
        let mut bars = Vec::new();
        for scheme in schemes_in_order(rows) {
            let runs: Vec<&RunRow> = rows.iter().filter(|r| &r.mix == m && r.scheme == scheme).collect();
            let base = runs.iter().find(|r| variant(r) == baseline).map(|r| r.mean_response_s);
            for r in &runs {
                let relative = base.map(|b| r.mean_response_s / b);
                table += &format!(
                    "| {m} | {scheme} | {} | {:.2} | {} | {} |\n",
                    variant(r),
                    r.mean_response_s,
                    relative.map_or("—".into(), |x| format!("{x:.2}")),
                    if r.saturation.saturated { "yes" } else { "no" }
                );
                if variant(r) != baseline {
                    bars.push(StackedBar {
                        label: format!("{scheme} {}", variant(r)),
                        segments: vec![relative.unwrap_or(f64::NAN)],
                    });
                }
            }
        }
        let chart = StackedBarChart {
            title: format!("{m}: response relative to {what} {baseline}"),
            unit: "ratio".into(),
            segment_names: vec![format!("response / response at {baseline}")],
            bars,
        };
        figures.push((m.to_lowercase(), chart.to_svg()));
    }
    (table, figures)
}
