//! Benchmarks of the pipeline framework: the priority study (columnsort under
//! each scheduling policy, many interleaved runs, each its own process) and
//! the per-buffer overhead against oneTBB's `parallel_pipeline`.

use std::path::{Path, PathBuf};
use std::process::Command;

use cosched_pipeline::columnsort::data;
use cosched_pipeline::overhead::{self, Mapping};
use cosched_pipeline::WaitPolicy;
use serde::Serialize;

use crate::os::{children_user_sys_s, monotonic_ns};
use crate::stats::{linear_regression, welch_t_test, Estimate, Regression, TTest};

/// One run of the study.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub policy: String,
    pub repeat: usize,
    pub user_s: f64,
    pub sys_s: f64,
    pub wall_s: f64,
    /// (user + sys) / wall, in percent of one CPU.
    pub cpu_percent: f64,
}

/// One policy over all its runs.
#[derive(Debug, Clone, Serialize)]
pub struct PolicySummary {
    pub policy: String,
    pub user_s: Estimate,
    pub sys_s: Estimate,
    pub wall_s: Estimate,
    pub cpu_percent: Estimate,
    /// Welch's test of this policy's wall time against the first policy's.
    pub wall_vs_first: Option<TTest>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StudyResult {
    pub samples: Vec<Sample>,
    pub summaries: Vec<PolicySummary>,
    /// Wall time on user and system time, over every run.
    pub regression: Option<Regression>,
    /// Controls the runs asked for and the kernel refused ("policy: thread: control: why"),
    /// each once: such a policy did not run as named.
    pub refused: Vec<String>,
}

/// The columnsort study's settings.
#[derive(Debug, Clone)]
pub struct StudyConfig {
    /// The `cosched` binary, which runs each sort as its own process.
    pub cosched: PathBuf,
    pub data_dir: PathBuf,
    /// `compute` or `io`.
    pub variant: String,
    pub records: u64,
    pub record_bytes: usize,
    /// The first one is the baseline of the t-tests.
    pub policies: Vec<String>,
    pub repeats: usize,
    /// More arguments for every `cosched pipeline columnsort` run.
    pub extra_args: Vec<String>,
}

/// Generates the input once, then runs every policy `repeats` times,
/// interleaved and in a rotating order, checking the first output of each
/// policy over the whole file.
pub fn run_study(
    config: &StudyConfig,
    mut on_sample: impl FnMut(&Sample, usize, usize),
) -> Result<StudyResult, String> {
    std::fs::create_dir_all(&config.data_dir).map_err(|e| format!("{}: {e}", config.data_dir.display()))?;
    let input = config.data_dir.join(format!("columnsort-{}.in", config.variant));
    let output = config.data_dir.join(format!("columnsort-{}.out", config.variant));
    let expected = data::generate(&input, config.records, config.record_bytes, 1)?;
    let total = config.repeats * config.policies.len();
    let mut samples = Vec::with_capacity(total);
    let mut refused = Vec::new();
    for repeat in 0..config.repeats {
        for k in 0..config.policies.len() {
            let policy = &config.policies[(k + repeat) % config.policies.len()];
            let sample = run_one(config, &input, &output, policy, repeat, &mut refused)?;
            if repeat == 0 {
                data::verify(&output, config.record_bytes, &expected).map_err(|e| format!("policy {policy}: {e}"))?;
            }
            on_sample(&sample, samples.len() + 1, total);
            samples.push(sample);
        }
    }
    let _ = std::fs::remove_file(&output);
    let _ = std::fs::remove_file(&input);
    let mut result = summarise(&config.policies, samples);
    result.refused = refused;
    Ok(result)
}

fn run_one(
    config: &StudyConfig,
    input: &Path,
    output: &Path,
    policy: &str,
    repeat: usize,
    refused: &mut Vec<String>,
) -> Result<Sample, String> {
    let before = children_user_sys_s()?;
    let start = monotonic_ns();
    let out = Command::new(&config.cosched)
        .args([
            "pipeline",
            "columnsort",
            "--config",
            &config.variant,
            "--record-bytes",
            &config.record_bytes.to_string(),
        ])
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output)
        .args(["--policy", policy, "--no-verify", "--quiet"])
        .args(&config.extra_args)
        .output()
        .map_err(|e| format!("{}: {e}", config.cosched.display()))?;
    let wall_s = (monotonic_ns() - start) as f64 / 1e9;
    if !out.status.success() {
        return Err(format!(
            "columnsort under {policy} (repeat {repeat}) failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if let Some(what) = line.strip_prefix("warning: refused control: ") {
            let entry = format!("{policy}: {what}");
            if !refused.contains(&entry) {
                refused.push(entry);
            }
        }
    }
    let after = children_user_sys_s()?;
    let (user_s, sys_s) = (after.0 - before.0, after.1 - before.1);
    Ok(Sample {
        policy: policy.to_string(),
        repeat,
        user_s,
        sys_s,
        wall_s,
        cpu_percent: 100.0 * (user_s + sys_s) / wall_s,
    })
}

/// Per-policy estimates, t-tests against the first policy, and the regression.
pub fn summarise(policies: &[String], samples: Vec<Sample>) -> StudyResult {
    let of = |policy: &str, field: fn(&Sample) -> f64| -> Vec<f64> {
        samples.iter().filter(|s| s.policy == policy).map(field).collect()
    };
    let baseline = of(&policies[0], |s| s.wall_s);
    let summaries = policies
        .iter()
        .filter_map(|p| {
            let wall = of(p, |s| s.wall_s);
            Some(PolicySummary {
                policy: p.clone(),
                user_s: Estimate::of(&of(p, |s| s.user_s))?,
                sys_s: Estimate::of(&of(p, |s| s.sys_s))?,
                wall_s: Estimate::of(&wall)?,
                cpu_percent: Estimate::of(&of(p, |s| s.cpu_percent))?,
                wall_vs_first: if *p == policies[0] { None } else { welch_t_test(&wall, &baseline) },
            })
        })
        .collect();
    let column = |field: fn(&Sample) -> f64| samples.iter().map(field).collect::<Vec<f64>>();
    let regression = linear_regression(&column(|s| s.wall_s), &[column(|s| s.user_s), column(|s| s.sys_s)]);
    StudyResult { samples, summaries, regression, refused: Vec::new() }
}

/// One line of the overhead comparison.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadRow {
    pub stages: usize,
    pub framework: String,
    pub threads: usize,
    pub ns_per_buffer: Estimate,
}

#[derive(Debug, Clone)]
pub struct OverheadConfig {
    pub stages: Vec<usize>,
    pub pool: usize,
    pub items: u64,
    pub repeats: usize,
    /// oneTBB's threads, and the threads our stages share in the matched mapping.
    pub threads: usize,
    /// The oneTBB program of bench/tbb.
    pub tbb: PathBuf,
}

/// For each stage count, interleaved: oneTBB with `threads` workers, our
/// stages spread over `threads` threads, and one thread per stage.
pub fn run_overhead(
    config: &OverheadConfig,
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<OverheadRow>, String> {
    let kinds = [
        ("oneTBB parallel_pipeline", 0usize),
        ("cosched, stages on as many threads", 1),
        ("cosched, a thread per stage", 2),
    ];
    let mut samples = vec![vec![Vec::new(); kinds.len()]; config.stages.len()];
    let total = config.repeats * config.stages.len();
    for repeat in 0..config.repeats {
        for (si, &stages) in config.stages.iter().enumerate() {
            for k in 0..kinds.len() {
                let kind = (k + repeat) % kinds.len();
                let ns = match kind {
                    0 => tbb_ns_per_item(config, stages)?,
                    1 => ours_ns_per_item(config, stages, Mapping::Threads(config.threads))?,
                    _ => ours_ns_per_item(config, stages, Mapping::ThreadPerStage)?,
                };
                samples[si][kind].push(ns);
            }
            progress(repeat * config.stages.len() + si + 1, total);
        }
    }
    let mut rows = Vec::new();
    for (si, &stages) in config.stages.iter().enumerate() {
        for (kind, (name, _)) in kinds.iter().enumerate() {
            let threads = if kind == 2 { stages } else { config.threads };
            let ns_per_buffer = Estimate::of(&samples[si][kind]).ok_or("no repeats")?;
            rows.push(OverheadRow { stages, framework: name.to_string(), threads, ns_per_buffer });
        }
    }
    Ok(rows)
}

fn ours_ns_per_item(config: &OverheadConfig, stages: usize, mapping: Mapping) -> Result<f64, String> {
    // A short warm-up run, as the oneTBB program does.
    overhead::time_run(stages, config.pool, config.items.min(10_000), mapping, WaitPolicy::default())?;
    let elapsed = overhead::time_run(stages, config.pool, config.items, mapping, WaitPolicy::default())?;
    Ok(elapsed.as_secs_f64() * 1e9 / config.items as f64)
}

fn tbb_ns_per_item(config: &OverheadConfig, stages: usize) -> Result<f64, String> {
    let out = Command::new(&config.tbb)
        .args([stages, config.pool, config.items as usize, config.threads].map(|n| n.to_string()))
        .output()
        .map_err(|e| {
            format!(
                "{}: {e} (build it with `make -C bench/tbb`; scripts/setup installs libtbb-dev)",
                config.tbb.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "{} failed with {}: {}",
            config.tbb.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("{}: bad report {line:?}: {e}", config.tbb.display()))?;
    report["ns_per_item"].as_f64().ok_or_else(|| format!("{}: no ns_per_item in {line:?}", config.tbb.display()))
}
