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
//! mode about those of the exact stretches around each change, the rest
//! being skipped (an estimate: fast mode decides where to run exactly as it
//! goes).

use crate::app::dedicated_ns;
use crate::config::SimConfig;
use crate::engine::fast::{FastSettings, MAX_WINDOW_GROWTH};
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
    /// Process iterations the engine simulates step by step (fast mode: an
    /// estimate, see `FastExactTime`).
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
    let dedicated: Vec<u64> = jobs.iter().map(|job| dedicated_ns(&job.program, job.tasks, &cfg.network)).collect();
    let exact_in_life = fast.map(|settings| FastExactTime::of(cfg, &settings.for_run(cfg), jobs, &dedicated));
    let mut cost = RunCost { process_iterations: 0, heaviest: None, least_span_ns: 0 };
    for (job, &dedicated_ns) in jobs.iter().zip(&dedicated) {
        let exact_ns = exact_in_life.as_ref().map(|exact| exact.in_life_of(dedicated_ns));
        let job_cost = job_cost(cfg, job, dedicated_ns, exact_ns);
        cost.process_iterations = cost.process_iterations.saturating_add(job_cost.process_iterations);
        if cost.heaviest.is_none_or(|heaviest| job_cost.process_iterations > heaviest.process_iterations) {
            cost.heaviest = Some(job_cost);
        }
        cost.least_span_ns = cost.least_span_ns.max(job.arrival.ns().saturating_add(job_cost.dedicated_ns));
    }
    cost
}

/// Fast mode's exact simulation, estimated (not bounded: a late change is measured again, changes overlap).
/// It runs exactly around each change (a start or an end): a warm-up, a window (at its longest if it grows;
/// under gang schemes whole cycles of the occupied rows, as many as the offered load fills) and the guard
/// before a predicted end; and it runs on through gaps between arrivals too short to jump. A job is therefore
/// simulated exactly around its own start and end, and around the others' changes while it runs, which come at
/// the run's mean rate of changes. A job slowed by time-sharing sees more changes, but progresses the slower in
/// each: the product is its dedicated time's.
struct FastExactTime {
    per_change_ns: f64,
    changes_per_ns: f64,
    /// A job's own start and end, and the gap before its arrival.
    own_ns: f64,
}

impl FastExactTime {
    fn of(cfg: &SimConfig, settings: &FastSettings, jobs: &[SimJob], dedicated: &[u64]) -> FastExactTime {
        let first = jobs.iter().map(|j| j.arrival.ns()).min().unwrap_or(0);
        let last_end = jobs.iter().zip(dedicated).map(|(j, &d)| j.arrival.ns().saturating_add(d)).max().unwrap_or(0);
        let cpus = f64::from(cfg.cpu_count().max(1));
        let work_ns = jobs.iter().zip(dedicated).map(|(j, &d)| f64::from(j.tasks) * d as f64).sum::<f64>();
        let arrivals_span_ns = (last_end.saturating_sub(first) as f64).max(1.0);
        // Offered beyond the CPUs, processes share them (the rows fill, up to the MPL); jobs that arrive faster
        // than the machine serves them stretch the run to their work at the least.
        let offered_per_cpu = work_ns / (cpus * arrivals_span_ns);
        let span_ns = arrivals_span_ns.max(work_ns / cpus);
        // A window that grows until a count is reached is taken at its longest.
        let growth = if settings.min_iterations > 0 { MAX_WINDOW_GROWTH } else { 1 };
        let set_window_ns = settings.window_ns.saturating_mul(growth) as f64;
        let window_ns = if cfg.scheme.is_gang() {
            let rows = offered_per_cpu.ceil().clamp(1.0, f64::from(cfg.mpl.max(1)));
            let cycle_ns = (rows * cfg.costs.gang_quantum_ns as f64).max(1.0);
            (set_window_ns / cycle_ns).ceil() * cycle_ns
        } else {
            set_window_ns
        };
        let per_change_ns = settings.warmup_ns as f64 + window_ns + settings.guard_ns as f64;
        FastExactTime {
            per_change_ns,
            changes_per_ns: 2.0 * jobs.len() as f64 / span_ns,
            own_ns: 2.0 * per_change_ns + settings.min_jump_ns as f64,
        }
    }

    /// The simulated time a job of `dedicated_ns` alone on the machine runs exactly.
    fn in_life_of(&self, dedicated_ns: u64) -> u64 {
        let others_ns = self.changes_per_ns * dedicated_ns as f64 * self.per_change_ns;
        // (A float beyond u64 saturates in the cast.)
        ((self.own_ns + others_ns).ceil() as u64).min(dedicated_ns)
    }
}

/// One job's process iterations: all of its program's, or those it can do by
/// the horizon or within fast mode's exact time (`exact_ns`), at its fastest pace.
fn job_cost(cfg: &SimConfig, job: &SimJob, dedicated_ns: u64, exact_ns: Option<u64>) -> JobCost {
    let iterations = job.program.iterations as u64;
    // Skew shortens an iteration by up to half its spread.
    let fastest_iteration_ns = ((dedicated_ns / iterations.max(1)) as f64 * (1.0 - cfg.skew / 2.0)).max(1.0);
    let reachable = |ns: u64| (ns as f64 / fastest_iteration_ns).ceil() as u64;
    let by_horizon = cfg.horizon_ns.map_or(u64::MAX, |h| reachable(h.saturating_sub(job.arrival.ns())));
    let by_fast_mode = exact_ns.map_or(u64::MAX, reachable);
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
        assert_eq!(fast.least_span_ns, exact.least_span_ns);
        // The long job runs exactly around its own start and end (a warm-up, a window and a guard each, 270 ms,
        // and a gap too short to jump, 100 ms) and around the changes while it runs, at the run's mean rate of
        // its 40 changes (its own two among them: an estimate).
        let fast_long = fast.heaviest.unwrap();
        assert_eq!(fast_long.job_number, 7);
        let per_process_s = jobs[6].program.iterations as f64 / 2e6;
        let exact_s = fast_long.process_iterations as f64 / 4.0 / per_process_s;
        let span_s = 7.0 * 60.0 + 2e6 - 60.0;
        let expected_s = 2.0 * 0.27 + 0.1 + 40.0 / span_s * 2e6 * 0.27;
        assert!(exact_s >= expected_s && exact_s <= expected_s / 0.9 + 0.01, "{exact_s} s, not {expected_s} s");
        // A short job runs exactly for its own changes' 640 ms of its 10 s, and a little more for the others'.
        let short = job_cost(&config, &jobs[0], dedicated_ns(&jobs[0].program, 4, &config.network), Some(640_000_000));
        let short_in_fast = fast.process_iterations - fast_long.process_iterations;
        assert!(short_in_fast >= 19 * short.process_iterations, "{short_in_fast} {short:?}");
        assert!(short_in_fast < 19 * short.process_iterations * 101 / 100, "{short_in_fast} {short:?}");
        assert!(short.process_iterations < iterations(&jobs[0]) / 10, "{short:?}");
    }

    #[test]
    fn jobs_that_arrive_at_once_stretch_the_run_to_their_work() {
        // 1,000 jobs of 100 s on 4 CPUs each, at once on 32 CPUs: the run spans 12,500 s at the least, not 100 s,
        // so a job sees 0.16 changes per second, not 20.
        let jobs: Vec<SimJob> = (0..1000).map(|n| job(n, 0, 100, 4)).collect();
        let config = SimConfig::default();
        let dedicated: Vec<u64> = jobs.iter().map(|j| dedicated_ns(&j.program, j.tasks, &config.network)).collect();
        let exact = FastExactTime::of(&config, &FastSettings::default(), &jobs, &dedicated);
        let span_s = 1000.0 * 4.0 * dedicated[0] as f64 / 1e9 / 32.0;
        assert!((exact.changes_per_ns * 1e9 - 2000.0 / span_s).abs() < 1e-9, "{}", exact.changes_per_ns * 1e9);
        let fast = estimate(&config, &jobs, Some(&FastSettings::default()));
        assert!(fast.process_iterations < estimate(&config, &jobs, None).process_iterations / 2, "{fast:?}");
        assert_eq!(estimate(&config, &[], Some(&FastSettings::default())).process_iterations, 0);
    }

    #[test]
    fn a_gang_window_holds_whole_cycles_of_the_rows_the_load_fills() {
        // 8 CPUs offered 3 processes per CPU: three rows of 200 ms quanta, so a 600 ms window.
        let jobs: Vec<SimJob> = (0..3).map(|n| job(n, 0, 100, 8)).collect();
        let gang = SimConfig { scheme: crate::Scheme::GANG, nodes: 8, ..SimConfig::default() };
        let dedicated: Vec<u64> = jobs.iter().map(|j| dedicated_ns(&j.program, j.tasks, &gang.network)).collect();
        let settings = FastSettings::default();
        let gang_exact = FastExactTime::of(&gang, &settings, &jobs, &dedicated);
        assert_eq!(gang_exact.per_change_ns, (50 + 600 + 20) as f64 * 1e6);
        let local = SimConfig { scheme: crate::Scheme::LOCAL, ..gang.clone() };
        assert_eq!(FastExactTime::of(&local, &settings, &jobs, &dedicated).per_change_ns, 270e6);
        // A window that grows until a count is reached is taken at its longest, 16 times: 3.2 s, six cycles.
        let growing = FastSettings { min_iterations: 20, ..settings };
        assert_eq!(FastExactTime::of(&gang, &growing, &jobs, &dedicated).per_change_ns, (50 + 3600 + 20) as f64 * 1e6);
    }
}
