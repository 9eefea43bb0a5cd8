//! Where a simulation's jobs come from: a trace file or the Lublin-Feitelson
//! model, then the run-time scale and the offered load.

use cosched_core::StreamSeed;
use cosched_sim::input::JobRequest;
use cosched_sim::SimConfig;
use cosched_workload::trace_model::FittedModel;
use cosched_workload::{load, lublin, swf, ReadOptions, Workload};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the sizes of the Lublin-Feitelson model's jobs come from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobSizes {
    /// The model sized to the simulated machine (workloads.md §2, our spec's reading).
    #[default]
    Machine,
    /// The model sized to a machine of this many CPUs, keeping only the jobs
    /// that fit the simulated machine: the study "select[s] jobs from the
    /// characterized model that fall within this limit".
    Lublin(u32),
    /// Sizes drawn uniformly from the jobs of an SWF trace that fit the
    /// simulated machine (its empirical size distribution), with the model's
    /// arrivals and run times (drawn for the size).
    Trace(PathBuf),
}

impl JobSizes {
    pub fn is_machine(&self) -> bool {
        *self == JobSizes::Machine
    }

    /// Where the sizes come from, in words (for manifests).
    pub fn describe(&self) -> String {
        match self {
            JobSizes::Machine => "its sizes drawn for the machine".to_string(),
            JobSizes::Lublin(cpus) => format!("its sizes drawn for {cpus} CPUs, the jobs that fit the machine kept"),
            JobSizes::Trace(path) => {
                format!("its sizes drawn from the jobs of {} that fit the machine", path.display())
            }
        }
    }
}

impl std::str::FromStr for JobSizes {
    type Err = String;

    /// `machine`, `lublin:N` or `trace:FILE`.
    fn from_str(text: &str) -> Result<JobSizes, String> {
        match text.split_once(':') {
            None if text == "machine" => Ok(JobSizes::Machine),
            Some(("lublin", cpus)) => match cpus.parse::<u32>() {
                Ok(cpus) if cpus > 0 => Ok(JobSizes::Lublin(cpus)),
                _ => Err(format!("lublin:N needs a whole number of CPUs of at least 1, found '{cpus}'")),
            },
            Some(("trace", path)) if !path.is_empty() => Ok(JobSizes::Trace(PathBuf::from(path))),
            _ => Err(format!("job sizes are machine, lublin:N or trace:FILE, not '{text}'")),
        }
    }
}

impl std::fmt::Display for JobSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobSizes::Machine => write!(f, "machine"),
            JobSizes::Lublin(cpus) => write!(f, "lublin:{cpus}"),
            JobSizes::Trace(path) => write!(f, "trace:{}", path.display()),
        }
    }
}

/// What to load and how to scale it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    pub trace: Option<PathBuf>,
    pub skip_bad_lines: bool,
    pub drop_oversized: bool,
    /// Trace jobs whose SWF status is one of these are left out (before `jobs` counts the first N).
    pub drop_statuses: Vec<i64>,
    /// Jobs to generate (model), or the first jobs to keep (trace).
    pub jobs: Option<usize>,
    /// Generated sizes are drawn for a machine of this many CPUs.
    pub model_procs: u32,
    pub runtime_scale: f64,
    pub target_load: Option<f64>,
    pub seed: u64,
    /// Generate from saved Hyper-Erlang parameters instead of the Lublin-Feitelson model.
    pub hyper_erlang_params: Option<PathBuf>,
    /// Where the Lublin-Feitelson model's sizes come from.
    pub job_sizes: JobSizes,
}

/// Jobs generated when no count is given (a trace keeps all its jobs instead).
pub const DEFAULT_JOBS: usize = 300;
/// Offered load the inter-arrival times are scaled to when no load is given.
pub const DEFAULT_TARGET_LOAD: f64 = 0.4;
/// The model's run times are hours; this brings a run to minutes of simulated time (docs/model.md).
pub const DEFAULT_RUNTIME_SCALE: f64 = 0.002;

/// A job shorter than this (nominal, before the run-time scale) counts as this long in its bounded slowdown.
pub const BOUNDED_SLOWDOWN_THRESHOLD_NOMINAL_S: f64 = 10.0;

/// The bounded-slowdown threshold of a workload whose run times are scaled by `runtime_scale`.
pub fn bounded_slowdown_threshold_s(runtime_scale: f64) -> f64 {
    BOUNDED_SLOWDOWN_THRESHOLD_NOMINAL_S * runtime_scale
}

impl Default for WorkloadSpec {
    /// The Lublin-Feitelson model sized to the default machine, at the default load and scale.
    fn default() -> Self {
        let machine = SimConfig::default();
        WorkloadSpec {
            trace: None,
            skip_bad_lines: false,
            drop_oversized: false,
            drop_statuses: Vec::new(),
            jobs: Some(DEFAULT_JOBS),
            model_procs: machine.cpu_count(),
            runtime_scale: DEFAULT_RUNTIME_SCALE,
            target_load: Some(DEFAULT_TARGET_LOAD),
            seed: machine.seed,
            hyper_erlang_params: None,
            job_sizes: JobSizes::Machine,
        }
    }
}

/// What was loaded, for reports.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    pub source: String,
    pub jobs: usize,
    pub skipped_bad_lines: usize,
    pub unusable_jobs: usize,
    pub oversized_jobs_left_out: usize,
    /// Jobs left out for their status (`--drop-status`), and the jobs simulated by status name.
    pub status_left_out: usize,
    pub statuses_kept: std::collections::BTreeMap<String, usize>,
    pub runtime_scale: f64,
    /// Factor applied to inter-arrival times after the run-time scale.
    pub interarrival_scale: f64,
    pub offered_load: Option<f64>,
}

pub struct LoadedWorkload {
    pub workload: Workload,
    pub report: WorkloadReport,
}

impl LoadedWorkload {
    pub fn requests(&self) -> Vec<JobRequest> {
        self.workload
            .jobs
            .iter()
            .map(|j| JobRequest {
                job_number: j.job_number,
                submit_s: j.submit_s,
                run_s: j.run_s,
                procs: j.procs,
                requested_s: j.requested_s(),
            })
            .collect()
    }
}

pub fn load_workload(spec: &WorkloadSpec, machine_cpus: u32) -> Result<LoadedWorkload, String> {
    // Jobs of the model too wide for the machine (`JobSizes::Lublin`), left out before shaping.
    let mut oversized_left_out = 0;
    let (mut workload, source) = match &spec.trace {
        Some(path) => {
            let opts = ReadOptions { skip_bad_lines: spec.skip_bad_lines };
            let w = swf::read_path(path, opts).map_err(|e| e.to_string())?;
            (w, format!("trace {}", path.display()))
        }
        None => {
            let jobs = spec.jobs.expect("the model needs a job count");
            match &spec.hyper_erlang_params {
                Some(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
                    let model = FittedModel::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))?;
                    let w = model.generate_workload(jobs, StreamSeed(spec.seed));
                    let kind = match model {
                        FittedModel::Shared(_) => "fitted trace model",
                        FittedModel::PerClass(_) => "Hyper-Erlang model",
                    };
                    (w, format!("{kind} {}", path.display()))
                }
                None => lublin_workload(spec, jobs, machine_cpus, &mut oversized_left_out)?,
            }
        }
    };
    if !spec.job_sizes.is_machine() && (spec.trace.is_some() || spec.hyper_erlang_params.is_some()) {
        return Err(format!("job sizes {} apply to the Lublin-Feitelson model only", spec.job_sizes));
    }
    let shaping = load::Shaping {
        // The model generates exactly `jobs`; a trace keeps its first `jobs`.
        max_jobs: spec.trace.as_ref().and(spec.jobs),
        machine_cpus,
        drop_oversized: spec.drop_oversized,
        runtime_scale: spec.runtime_scale,
        target_load: spec.target_load,
    };
    let before = workload.jobs.len();
    workload.jobs.retain(|job| !spec.drop_statuses.contains(&job.status()));
    let status_left_out = before - workload.jobs.len();
    let shaped = load::shape(&mut workload.jobs, &shaping).map_err(|e| format!("{source}: {e}"))?;
    let mut statuses_kept = std::collections::BTreeMap::new();
    for job in &workload.jobs {
        *statuses_kept.entry(swf::status_name(job.status())).or_insert(0) += 1;
    }
    let report = WorkloadReport {
        source,
        jobs: workload.jobs.len(),
        skipped_bad_lines: workload.skipped_bad_lines.len(),
        unusable_jobs: workload.unusable.len(),
        oversized_jobs_left_out: oversized_left_out + shaped.oversized_left_out,
        status_left_out,
        statuses_kept,
        runtime_scale: spec.runtime_scale,
        interarrival_scale: shaped.interarrival_scale,
        offered_load: shaped.offered_load,
    };
    Ok(LoadedWorkload { workload, report })
}

/// `jobs` jobs of the Lublin-Feitelson model, sized as `spec.job_sizes` says,
/// and what to call them.
fn lublin_workload(
    spec: &WorkloadSpec,
    jobs: usize,
    machine_cpus: u32,
    oversized_left_out: &mut usize,
) -> Result<(Workload, String), String> {
    let seed = StreamSeed(spec.seed);
    let sized = |cpus: u32| {
        let params = lublin::LublinParams::sized_to(cpus);
        params.validate().map_err(|e| format!("workload model: {e}")).map(|()| params)
    };
    match &spec.job_sizes {
        JobSizes::Machine => {
            let w = lublin::generate_workload(&sized(spec.model_procs)?, jobs, seed);
            Ok((w, format!("Lublin-Feitelson model sized to {} CPUs", spec.model_procs)))
        }
        JobSizes::Lublin(cpus) => {
            let params = sized(*cpus)?;
            let mut w = lublin::generate_workload(&params, 0, seed);
            let (kept, left_out) = lublin_jobs_that_fit(&params, jobs, seed, machine_cpus)?;
            w.jobs = kept;
            for key in ["MaxNodes", "MaxProcs"] {
                w.set_header_value(key, &machine_cpus.to_string());
            }
            *oversized_left_out += left_out;
            let source =
                format!("Lublin-Feitelson model sized to {cpus} CPUs, the jobs that fit {machine_cpus} CPUs kept");
            Ok((w, source))
        }
        JobSizes::Trace(path) => {
            let trace = swf::read_path(path, ReadOptions::default()).map_err(|e| e.to_string())?;
            let sizes: Vec<u32> = trace.jobs.iter().map(|j| j.procs).filter(|&p| p <= machine_cpus).collect();
            if sizes.is_empty() {
                return Err(format!("{}: no job of the trace fits {machine_cpus} CPUs", path.display()));
            }
            let params = sized(spec.model_procs)?;
            let mut w = lublin::generate_workload(&params, 0, seed);
            w.jobs = lublin::generate_with_sizes(&params, jobs, seed, Some(&sizes));
            let source = format!(
                "Lublin-Feitelson model sized to {} CPUs, sizes of the {} jobs of {} that fit {machine_cpus} CPUs",
                spec.model_procs,
                sizes.len(),
                path.display()
            );
            Ok((w, source))
        }
    }
}

/// The first `jobs` jobs of the model that fit `machine_cpus` CPUs,
/// renumbered from 1 and shifted to start at 0, and how many wider ones came
/// before the last of them. (The model's first `n` jobs are the same whatever
/// the count drawn, so drawing more until enough fit changes none of them.)
fn lublin_jobs_that_fit(
    params: &lublin::LublinParams,
    jobs: usize,
    seed: StreamSeed,
    machine_cpus: u32,
) -> Result<(Vec<cosched_workload::TraceJob>, usize), String> {
    const MOST_DRAWN_PER_KEPT: usize = 1000;
    let mut drawn = jobs;
    loop {
        let all = lublin::generate(params, drawn, seed);
        let fitting: Vec<usize> = (0..all.len()).filter(|&i| all[i].procs <= machine_cpus).take(jobs).collect();
        if fitting.len() == jobs {
            let left_out = fitting.last().map_or(0, |&last| last + 1 - jobs);
            let mut kept: Vec<cosched_workload::TraceJob> = fitting
                .iter()
                .enumerate()
                .map(|(n, &i)| {
                    let j = &all[i];
                    cosched_workload::TraceJob::new(n as u64 + 1, j.submit_s, j.run_s, j.procs, j.queue)
                })
                .collect();
            load::shift_to_zero(&mut kept);
            return Ok((kept, left_out));
        }
        if drawn >= jobs.saturating_mul(MOST_DRAWN_PER_KEPT) {
            return Err(format!(
                "only {} of {drawn} jobs of the model sized to {} CPUs fit {machine_cpus} CPUs",
                fitting.len(),
                params.max_procs
            ));
        }
        drawn = drawn.saturating_mul(2);
    }
}

impl WorkloadReport {
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{}: {} jobs, run times x{}, inter-arrival times x{:.6}",
            self.source, self.jobs, self.runtime_scale, self.interarrival_scale
        );
        if let Some(load) = self.offered_load {
            text += &format!(", offered load {load:.3}");
        }
        for (n, what) in [
            (self.skipped_bad_lines, "malformed lines skipped"),
            (self.unusable_jobs, "jobs without run time or size left out"),
            (self.oversized_jobs_left_out, "jobs wider than the machine left out"),
            (self.status_left_out, "jobs left out for their status"),
        ] {
            if n > 0 {
                text += &format!("; {n} {what}");
            }
        }
        // What was simulated, when it was more than completed jobs: failed and cancelled ones ran too.
        if self.statuses_kept.keys().any(|status| status != "completed") {
            let kept: Vec<String> = self.statuses_kept.iter().map(|(status, n)| format!("{n} {status}")).collect();
            text += &format!("; simulated: {}", kept.join(", "));
        }
        text
    }
}
