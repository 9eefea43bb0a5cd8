//! What a run will ask of the engine, known before it starts.
//!
//! The engine's work follows the iterations of the processes it simulates,
//! not the simulated time: it is tickless, so an idle stretch costs nothing,
//! while each iteration of each process ends a compute phase, an I/O and a
//! receive. On the default workload (300 jobs, 32 CPUs, 20.6 million process
//! iterations) an iteration cost 1.4 events under GS, 3.2 under Local, 4.7
//! under SB and 5.2 under PB-SB (their ticks and spins included). Every job's
//! program fixes how many iterations its processes run, so the work is known
//! before the run: in exact mode all of them (up to the horizon); in fast
//! mode at most those of the exact stretches around each change, the rest
//! being skipped.

use crate::app::dedicated_ns;
use crate::config::SimConfig;
use crate::engine::fast::FastSettings;
use crate::engine::SimJob;

/// The most process iterations `cosched sim` simulates step by step in one
/// run unless told to go on (docs/model.md, "What a run costs"): 100 times the
/// default workload's 20.6 million. At the release build's 6 to 7.6 million
/// events per second (docs/performance.md) and 1.4 to 5.2 events per
/// iteration, that is 6 to 30 minutes per run.
pub const ITERATION_BUDGET: u64 = 2_000_000_000;

/// A run's cost, before it starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunCost {
    /// Process iterations the engine simulates step by step (fast mode: at
    /// most, when it can skip; see [`FastSettings::exact_ns_per_change`]).
    pub process_iterations: u64,
    /// The job with the most of them (`None`: no job).
    pub heaviest: Option<JobCost>,
    /// The least simulated time the run can span: the latest arrival plus
    /// time alone on the machine of any job, without skew.
    pub least_span_ns: u64,
}

/// One job's part of a run's cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobCost {
    pub job_number: u64,
    pub tasks: u32,
    /// Its run time alone on the machine, without skew.
    pub dedicated_ns: u64,
    pub process_iterations: u64,
}

impl RunCost {
    /// Whether the run passes [`ITERATION_BUDGET`].
    pub fn beyond_budget(&self) -> bool {
        self.process_iterations > ITERATION_BUDGET
    }

    /// The heaviest job's share of the work, 0 to 1.
    pub fn heaviest_share(&self) -> f64 {
        match self.heaviest {
            Some(job) if self.process_iterations > 0 => job.process_iterations as f64 / self.process_iterations as f64,
            _ => 0.0,
        }
    }
}

/// The cost of running `jobs` under `cfg`, exact (`fast: None`) or in fast mode.
pub fn estimate(cfg: &SimConfig, jobs: &[SimJob], fast: Option<&FastSettings>) -> RunCost {
    let exact_stretch_ns = fast.map(|settings| fast_exact_stretch_ns(cfg, settings, jobs.len()));
    let mut cost = RunCost { process_iterations: 0, heaviest: None, least_span_ns: 0 };
    for job in jobs {
        let job_cost = job_cost(cfg, job, exact_stretch_ns);
        cost.process_iterations = cost.process_iterations.saturating_add(job_cost.process_iterations);
        if cost.heaviest.is_none_or(|heaviest| job_cost.process_iterations > heaviest.process_iterations) {
            cost.heaviest = Some(job_cost);
        }
        cost.least_span_ns = cost.least_span_ns.max(job.arrival.ns().saturating_add(job_cost.dedicated_ns));
    }
    cost
}

/// The simulated time fast mode runs exactly in all, at most: around each
/// start and finish, and each gap between arrivals too short to jump.
fn fast_exact_stretch_ns(cfg: &SimConfig, settings: &FastSettings, jobs: usize) -> u64 {
    let gang_cycle_ns = if cfg.scheme.is_gang() { cfg.mpl as u64 * cfg.costs.gang_quantum_ns } else { 0 };
    let per_job_ns = settings.exact_ns_per_change(gang_cycle_ns).saturating_mul(2).saturating_add(settings.min_jump_ns);
    per_job_ns.saturating_mul(jobs as u64)
}

/// One job's process iterations: all of its program's, or those it can do by
/// the horizon or within fast mode's exact stretches, at its fastest pace.
fn job_cost(cfg: &SimConfig, job: &SimJob, exact_stretch_ns: Option<u64>) -> JobCost {
    let dedicated_ns = dedicated_ns(&job.program, job.tasks, &cfg.network);
    let iterations = job.program.iterations as u64;
    // Skew shortens an iteration by up to half its spread.
    let fastest_iteration_ns = ((dedicated_ns / iterations.max(1)) as f64 * (1.0 - cfg.skew / 2.0)).max(1.0);
    let reachable = |ns: u64| (ns as f64 / fastest_iteration_ns).ceil() as u64;
    let by_horizon = cfg.horizon_ns.map_or(u64::MAX, |h| reachable(h.saturating_sub(job.arrival.ns())));
    let by_fast_mode = exact_stretch_ns.map_or(u64::MAX, reachable);
    let per_process = iterations.min(by_horizon).min(by_fast_mode);
    JobCost {
        job_number: job.job_number,
        tasks: job.tasks,
        dedicated_ns,
        process_iterations: per_process.saturating_mul(job.tasks as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{program_for, JobType};
    use cosched_core::SimTime;

    const SECOND_NS: u64 = 1_000_000_000;

    fn job(job_number: u64, arrival_s: u64, run_s: u64, tasks: u32) -> SimJob {
        let j3 = JobType::by_number(3).unwrap();
        let program = program_for(j3, tasks, run_s * SECOND_NS, &SimConfig::default().network);
        SimJob {
            job_number,
            arrival: SimTime(arrival_s * SECOND_NS),
            tasks,
            cpus: tasks,
            program,
            label: "J3".into(),
            nice: 0,
            requested_ns: None,
        }
    }

    fn iterations(job: &SimJob) -> u64 {
        job.program.iterations as u64 * job.tasks as u64
    }

    #[test]
    fn exact_work_is_every_iteration_of_every_process() {
        let jobs = [job(1, 0, 10, 4), job(2, 5, 2_000_000, 4), job(3, 60, 30, 2)];
        let cost = estimate(&SimConfig::default(), &jobs, None);
        assert_eq!(cost.process_iterations, jobs.iter().map(iterations).sum::<u64>());
        let heaviest = cost.heaviest.unwrap();
        assert_eq!((heaviest.job_number, heaviest.process_iterations), (2, iterations(&jobs[1])));
        assert!(cost.heaviest_share() > 0.999 && cost.beyond_budget(), "{cost:?}");
        // Job 2 arrives at 5 s and runs 2e6 s alone (to the nearest iteration).
        let span_s = cost.least_span_ns as f64 / 1e9;
        assert!((span_s - 2_000_005.0).abs() < 0.01, "{span_s}");
        assert_eq!(estimate(&SimConfig::default(), &[], None).heaviest, None);
    }

    #[test]
    fn the_horizon_bounds_the_work() {
        let config = SimConfig { horizon_ns: Some(100 * SECOND_NS), ..SimConfig::default() };
        let long = job(2, 40, 2_000_000, 4);
        let cost = estimate(&config, &[job(1, 0, 10, 4), long.clone(), job(3, 200, 10, 4)], None);
        let per_process_s = long.program.iterations as f64 / 2e6;
        let by_horizon = cost.heaviest.unwrap().process_iterations as f64 / 4.0;
        // 60 s of job 2 (a little more: skew may make an iteration shorter); job 3 arrives after the horizon.
        assert!(by_horizon >= 60.0 * per_process_s && by_horizon <= 60.0 * per_process_s / 0.9 + 1.0, "{cost:?}");
        assert_eq!(cost.process_iterations, iterations(&job(1, 0, 10, 4)) + cost.heaviest.unwrap().process_iterations);
    }

    #[test]
    fn fast_mode_runs_exactly_only_around_changes() {
        let jobs: Vec<SimJob> = (1..=20).map(|n| job(n, 60 * n, if n == 7 { 2_000_000 } else { 10 }, 4)).collect();
        let config = SimConfig::default();
        let exact = estimate(&config, &jobs, None);
        let fast = estimate(&config, &jobs, Some(&FastSettings::default()));
        assert!(exact.beyond_budget() && !fast.beyond_budget(), "{exact:?} {fast:?}");
        // Short jobs run whole; the long one only for the exact stretches of 20 jobs' changes.
        let stretch_ns = fast_exact_stretch_ns(&config, &FastSettings::default(), jobs.len());
        assert_eq!(stretch_ns, 20 * (2 * 520 + 100) * 1_000_000, "a warm-up, a window, a guard and a re-measure");
        let fast_long = fast.heaviest.unwrap();
        assert_eq!(fast_long.job_number, 7);
        assert!(fast_long.process_iterations < iterations(&jobs[6]) / 1000, "{fast_long:?}");
        assert_eq!(fast.least_span_ns, exact.least_span_ns);
        let gang = SimConfig { scheme: crate::Scheme::GANG, ..SimConfig::default() };
        assert!(fast_exact_stretch_ns(&gang, &FastSettings::default(), 20) > stretch_ns, "gang cycles add");
    }
}
