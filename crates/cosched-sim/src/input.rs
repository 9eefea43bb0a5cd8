//! From a workload (arrival, width and nominal run time of each job, from a
//! trace or a model) to the simulator's jobs: a job type per job from the mix,
//! the run-time scale, and the iteration program.

use crate::app::{program_for, Mix};
use crate::config::SimConfig;
use crate::engine::SimJob;
use cosched_core::{SimTime, StreamSeed};
use serde::Serialize;

/// What a trace or a model says about one job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobRequest {
    pub job_number: u64,
    pub submit_s: f64,
    pub run_s: f64,
    pub procs: u32,
    /// The wall time asked for (SWF field 9), if the workload says.
    pub requested_s: Option<f64>,
}

/// How a workload becomes simulator jobs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct WorkloadPlan {
    pub mix: Mix,
    /// Every nominal run time is multiplied by this (1 = as in the workload).
    pub runtime_scale: f64,
}

/// Build the simulator's jobs. Arrivals are shifted so the first job arrives
/// at time zero; job types are drawn per job from the `"job-types"` stream, so
/// every scheme run from the same seed gets the same types.
pub fn sim_jobs(requests: &[JobRequest], plan: &WorkloadPlan, cfg: &SimConfig) -> Vec<SimJob> {
    assert!(plan.runtime_scale > 0.0 && plan.runtime_scale.is_finite());
    let mut ordered: Vec<&JobRequest> = requests.iter().collect();
    ordered.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s).then(a.job_number.cmp(&b.job_number)));
    let first_submit = ordered.first().map_or(0.0, |r| r.submit_s);
    let mut types = StreamSeed(cfg.seed).stream("job-types");
    ordered
        .into_iter()
        .map(|r| {
            let job_type = plan.mix.draw(&mut types);
            let scaled_ns = |s: f64| (s * plan.runtime_scale * 1e9).round().max(1.0) as u64;
            let nominal_ns = scaled_ns(r.run_s);
            SimJob {
                job_number: r.job_number,
                arrival: SimTime::from_secs_f64(r.submit_s - first_submit),
                tasks: r.procs,
                cpus: r.procs,
                program: program_for(job_type, r.procs, nominal_ns, &cfg.network),
                label: job_type.to_string(),
                nice: 0,
                requested_ns: r.requested_s.map(scaled_ns),
            }
        })
        .collect()
}
