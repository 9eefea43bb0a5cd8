//! Where a simulation's jobs come from: a trace file or the Lublin-Feitelson
//! model, then the run-time scale and the offered load.

use cosched_core::StreamSeed;
use cosched_sim::input::JobRequest;
use cosched_sim::SimConfig;
use cosched_workload::trace_model::FittedModel;
use cosched_workload::{load, lublin, swf, ReadOptions, Workload};
use serde::Serialize;
use std::path::PathBuf;

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
            .map(|j| JobRequest { job_number: j.job_number, submit_s: j.submit_s, run_s: j.run_s, procs: j.procs })
            .collect()
    }
}

pub fn load_workload(spec: &WorkloadSpec, machine_cpus: u32) -> Result<LoadedWorkload, String> {
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
                None => {
                    let params = lublin::LublinParams::sized_to(spec.model_procs);
                    params.validate().map_err(|e| format!("workload model: {e}"))?;
                    let w = lublin::generate_workload(&params, jobs, StreamSeed(spec.seed));
                    (w, format!("Lublin-Feitelson model sized to {} CPUs", spec.model_procs))
                }
            }
        }
    };
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
        oversized_jobs_left_out: shaped.oversized_left_out,
        status_left_out,
        statuses_kept,
        runtime_scale: spec.runtime_scale,
        interarrival_scale: shaped.interarrival_scale,
        offered_load: shaped.offered_load,
    };
    Ok(LoadedWorkload { workload, report })
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
