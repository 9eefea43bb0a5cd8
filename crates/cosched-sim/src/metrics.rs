//! What a run measures: per-job records, the CPU-time breakdown, and the
//! summary statistics of the reference study.

use crate::cpu_set::CpuSet;
use serde::{Deserialize, Serialize};

/// Where CPU time went, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// Compute of the application (the only useful work).
    pub useful_ns: u64,
    /// Busy-waiting on an endpoint.
    pub spin_ns: u64,
    /// Context switches and gang switches.
    pub switch_ns: u64,
    /// Interrupts, queue moves, endpoint checks and system calls of the schemes.
    pub overhead_ns: u64,
    pub idle_ns: u64,
}

impl Breakdown {
    pub fn total_ns(&self) -> u64 {
        self.useful_ns + self.spin_ns + self.switch_ns + self.overhead_ns + self.idle_ns
    }

    pub fn add(&mut self, other: &Breakdown) {
        self.useful_ns += other.useful_ns;
        self.spin_ns += other.spin_ns;
        self.switch_ns += other.switch_ns;
        self.overhead_ns += other.overhead_ns;
        self.idle_ns += other.idle_ns;
    }

    /// Shares of the total, in the field order.
    pub fn shares(&self) -> [f64; 5] {
        let total = self.total_ns().max(1) as f64;
        [self.useful_ns, self.spin_ns, self.switch_ns, self.overhead_ns, self.idle_ns].map(|v| v as f64 / total)
    }
}

/// What the running process was doing when a boost (periodic boost's, spin-yield's pick) chose another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Displaced {
    Computing,
    /// Inside a receive: spinning, or yielding its CPU (spin-yield).
    Spinning,
    /// The CPU ran nobody.
    Nothing,
}

/// Boosts that chose another process than the running one, by what the running one was doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BoostCounts {
    pub displacing_computing: u64,
    pub displacing_spinning: u64,
    pub on_an_idle_cpu: u64,
    /// Of those that displaced a process, the ones whose process had a ring neighbour running at the walk: the
    /// boost ends a coscheduled pair.
    pub breaking_a_coscheduled_pair: u64,
}

impl BoostCounts {
    pub fn count(&mut self, displaced: Displaced, breaks_a_pair: bool) {
        *match displaced {
            Displaced::Computing => &mut self.displacing_computing,
            Displaced::Spinning => &mut self.displacing_spinning,
            Displaced::Nothing => &mut self.on_an_idle_cpu,
        } += 1;
        self.breaking_a_coscheduled_pair += breaks_a_pair as u64;
    }

    pub fn is_zero(&self) -> bool {
        *self == BoostCounts::default()
    }
}

/// Why a CPU's process left it, for the context switch that follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SwitchCause {
    /// The node scheduler at a tick: a quantum ran out, a higher level (a woken, interrupted or yielded-to
    /// process) or, on EEVDF, another pick.
    #[default]
    Tick,
    /// Periodic boost's preemption in favour of the process it boosted (on EEVDF: a switch to any favoured
    /// process, the next buddy, which an interrupt or a yield's pick also sets).
    Boost,
    /// The process blocked: for I/O, or spin-block's block in a receive.
    Block,
    /// The process ended.
    Exit,
    /// A gang slot changed.
    Gang,
}

/// Context switches charged at a dispatch, by why the CPU's last process left it (each costs `CS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SwitchCounts {
    pub after_a_tick: u64,
    pub after_a_boost: u64,
    pub after_a_block: u64,
    pub after_an_exit: u64,
    pub after_a_gang_switch: u64,
}

impl SwitchCounts {
    pub fn count(&mut self, cause: SwitchCause) {
        *match cause {
            SwitchCause::Tick => &mut self.after_a_tick,
            SwitchCause::Boost => &mut self.after_a_boost,
            SwitchCause::Block => &mut self.after_a_block,
            SwitchCause::Exit => &mut self.after_an_exit,
            SwitchCause::Gang => &mut self.after_a_gang_switch,
        } += 1;
    }

    pub fn is_zero(&self) -> bool {
        *self == SwitchCounts::default()
    }
}

/// One job's life.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JobRecord {
    pub job_number: u64,
    pub job_type: String,
    pub tasks: u32,
    pub iterations: u32,
    pub arrival_s: f64,
    pub start_s: f64,
    pub finish_s: f64,
    pub wait_s: f64,
    pub execution_s: f64,
    pub response_s: f64,
    /// Run time alone on the machine with no skew.
    pub dedicated_s: f64,
    pub slowdown: f64,
    pub bounded_slowdown: f64,
    /// The CPUs its processes were placed on when it started (a started job
    /// keeps its CPUs until it finishes). Under time-sharing other jobs hold
    /// some of them at the same time.
    pub cpus: CpuSet,
}

/// The run's figures of merit.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub scheme: String,
    pub jobs_submitted: usize,
    pub jobs_completed: usize,
    pub span_s: f64,
    pub mean_response_s: f64,
    pub mean_wait_s: f64,
    pub mean_execution_s: f64,
    pub p50_response_s: f64,
    pub p95_response_s: f64,
    pub throughput_jobs_per_s: f64,
    /// The study's utilization, "time spent in useful work": the work the
    /// completed jobs were given (tasks x dedicated run time) / (CPUs x span).
    pub delivered_utilization: f64,
    /// Compute time alone / (CPUs x span): I/O and communication excluded.
    pub compute_utilization: f64,
    /// Delivered utilization from time 0 to the last arrival: what the scheme
    /// sustains while work keeps coming (the drain after it is left out).
    pub delivered_utilization_during_arrivals: f64,
    pub compute_utilization_during_arrivals: f64,
    /// The work offered in the same window (see `ArrivalWindow::offered_ns`)
    /// per capacity: what delivered utilization would be if nothing fell behind.
    pub offered_utilization_during_arrivals: f64,
    /// Delivered and compute utilization from the middle arrival (job n/2,
    /// counted from 0) to the last: past the climb from an empty machine, so
    /// in an overloaded run (a queue that never empties) the scheme's
    /// capacity. NaN with fewer than three jobs.
    pub delivered_utilization_second_half: f64,
    pub compute_utilization_second_half: f64,
    pub saturation: SaturationVerdict,
    pub mean_slowdown: f64,
    pub mean_bounded_slowdown: f64,
    pub bounded_slowdown_threshold_s: f64,
    pub longest_queue: usize,
    /// The most processes any CPU held at once (at most the MPL).
    pub peak_processes_per_cpu: usize,
    /// When the run was interrupted (simulated s): the figures are of the jobs finished by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_at_s: Option<f64>,
    pub cpu_time: Breakdown,
    /// Boosts by what they displaced (schemes that boost only).
    #[serde(skip_serializing_if = "BoostCounts::is_zero")]
    pub boosts: BoostCounts,
    /// Context switches by cause (schemes with a node scheduler of their own).
    #[serde(skip_serializing_if = "SwitchCounts::is_zero")]
    pub switches: SwitchCounts,
    pub events: u64,
    /// Fast mode's settings and what it skipped (absent: the exact engine alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_mode: Option<crate::engine::fast::settings::FastReport>,
    /// An exact run watched through fast mode's windows (`RunOptions::watch_windows`): their settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watched_windows: Option<crate::engine::fast::settings::FastSettings>,
}

pub fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}

/// Nearest-rank percentile of unsorted values (`q` in 0..=1).
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Bounded slowdown: max(1, response / max(dedicated, threshold)).
pub fn bounded_slowdown(response_s: f64, dedicated_s: f64, threshold_s: f64) -> f64 {
    (response_s / dedicated_s.max(threshold_s)).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(arrival_s: f64, wait_s: f64) -> JobRecord {
        JobRecord {
            job_number: 0,
            job_type: String::new(),
            tasks: 1,
            iterations: 1,
            arrival_s,
            start_s: arrival_s + wait_s,
            finish_s: arrival_s + wait_s + 1.0,
            wait_s,
            execution_s: 1.0,
            response_s: wait_s + 1.0,
            dedicated_s: 1.0,
            slowdown: wait_s + 1.0,
            bounded_slowdown: wait_s + 1.0,
            cpus: CpuSet::default(),
        }
    }

    #[test]
    fn a_run_saturates_by_a_growing_wait_or_unfinished_jobs() {
        let stable: Vec<JobRecord> = (0..100).map(|i| record(i as f64, (i % 7) as f64)).collect();
        let steady = BacklogMeasure { delivered_share: 0.9, growth: 0.01 };
        assert!(!judge_saturation(&stable, 100, steady, false).saturated);
        let growing: Vec<JobRecord> = (0..100).map(|i| record(i as f64, 0.3 * i as f64)).collect();
        let verdict = judge_saturation(&growing, 100, steady, false);
        assert!(verdict.saturated && (verdict.wait_growth - 0.3).abs() < 1e-9, "{verdict:?}");
        assert!(judge_saturation(&stable[..90], 100, steady, false).saturated, "unfinished jobs");
        // The backlog measures are carried, not judged (see judge_saturation).
        let behind = judge_saturation(&stable, 100, BacklogMeasure { delivered_share: 0.6, growth: 0.2 }, false);
        assert!(!behind.saturated && behind.backlog_growth == 0.2 && behind.why.contains("60 %"), "{behind:?}");
    }

    #[test]
    fn a_stopped_run_is_judged_by_its_finished_jobs() {
        let steady = BacklogMeasure { delivered_share: 0.9, growth: 0.01 };
        let stable: Vec<JobRecord> = (0..90).map(|i| record(i as f64, (i % 7) as f64)).collect();
        let verdict = judge_saturation(&stable, 100, steady, true);
        assert!(
            !verdict.saturated && verdict.why.starts_with("interrupted with 10 of 100 jobs unfinished"),
            "{verdict:?}"
        );
        let growing: Vec<JobRecord> = (0..90).map(|i| record(i as f64, 0.3 * i as f64)).collect();
        let verdict = judge_saturation(&growing, 100, steady, true);
        assert!(verdict.saturated && verdict.why.contains("wait grows 0.30"), "{verdict:?}");
    }

    #[test]
    fn percentile_and_bounded_slowdown() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 0.95), 5.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(bounded_slowdown(20.0, 1.0, 10.0), 2.0);
        assert_eq!(bounded_slowdown(5.0, 1.0, 10.0), 1.0);
        assert_eq!(bounded_slowdown(60.0, 20.0, 10.0), 3.0);
    }
}

/// Whether a run fell behind the work offered to it, and why. Its numbers
/// go through serde without loss (a study's shard documents read it back).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SaturationVerdict {
    pub saturated: bool,
    /// How fast waiting in the arrival queue grew with arrival time (s per s).
    #[serde(with = "crate::exact_f64")]
    pub wait_growth: f64,
    /// Delivered / offered work while jobs arrived (1 when nothing fell behind).
    #[serde(with = "crate::exact_f64")]
    pub delivered_share: f64,
    /// How fast the jobs in the machine (queued or running) grew over the
    /// second half of the arrivals, as a share of the arrival rate.
    #[serde(with = "crate::exact_f64")]
    pub backlog_growth: f64,
    pub why: String,
}

/// Growth of waiting at or above this marks a saturated run: jobs complete
/// more than 10 % slower than they arrive (our choice).
pub const SATURATION_WAIT_GROWTH: f64 = 0.1;

/// What a run measured of its backlog while jobs arrived.
#[derive(Clone, Copy, Debug)]
pub struct BacklogMeasure {
    /// Delivered / offered work from time 0 to the last arrival.
    pub delivered_share: f64,
    /// Growth of the jobs in the machine over the second half of the arrivals, per arrival.
    pub growth: f64,
}

/// Judge one run. Saturated if some jobs never completed (the run was cut at
/// a horizon) or if the wait grows along the arrival sequence (least-squares
/// slope of wait against arrival time of at least [`SATURATION_WAIT_GROWTH`]).
/// A run someone stopped (`interrupted`) left jobs unfinished because it was
/// stopped, not because the scheme fell behind: it is judged by the finished
/// jobs' waits alone, and says so.
///
/// The backlog measures (delivered share, growth of the jobs in the machine)
/// are reported, not judged: on runs of a few hundred jobs of a heavy-tailed,
/// daily-cycling workload they swing as much between seeds of a stable
/// scheme as between stable and saturated ones (docs/reproduction.md).
/// Throughput saturation, with the backlog in the MPL slots, is judged where
/// it can be seen reliably: on a scheme's curve over several loads, means of
/// several seeds (`cosched study e1`: utilization stops rising).
pub fn judge_saturation(
    records: &[JobRecord],
    jobs_submitted: usize,
    backlog: BacklogMeasure,
    interrupted: bool,
) -> SaturationVerdict {
    let wait_growth = wait_growth(records);
    let growth = backlog.growth;
    let unfinished = jobs_submitted - records.len();
    let by_waits = || {
        if wait_growth >= SATURATION_WAIT_GROWTH {
            (true, format!("wait grows {wait_growth:.2} s per s of arrivals"))
        } else {
            let delivered = 100.0 * backlog.delivered_share;
            (false, format!("wait growth {wait_growth:.3} s per s; {delivered:.0} % of the offered work delivered by the last arrival"))
        }
    };
    let (saturated, why) = match (unfinished > 0, interrupted, records.is_empty()) {
        (true, false, _) => (true, format!("{unfinished} of {jobs_submitted} jobs unfinished at the horizon")),
        (true, true, true) => {
            (false, format!("interrupted before any of the {jobs_submitted} jobs finished: not judged"))
        }
        (true, true, false) => {
            let (saturated, why) = by_waits();
            let prefix = format!("interrupted with {unfinished} of {jobs_submitted} jobs unfinished");
            (saturated, format!("{prefix}, judged by the finished jobs: {why}"))
        }
        (false, _, _) => by_waits(),
    };
    SaturationVerdict { saturated, wait_growth, delivered_share: backlog.delivered_share, backlog_growth: growth, why }
}

/// Least-squares slope of y against x (0 for fewer than 3 points or no spread in x).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    if points.len() < 3 {
        return 0.0;
    }
    let (xs, ys): (Vec<f64>, Vec<f64>) = points.iter().copied().unzip();
    cosched_core::stats::least_squares(&xs, &ys).map_or(0.0, |(_, slope)| slope)
}

/// Least-squares slope of wait against arrival time. A stable queue's wait
/// fluctuates around a level; an unstable one's grows linearly, at rate
/// 1 - service rate / arrival rate.
fn wait_growth(records: &[JobRecord]) -> f64 {
    slope(&records.iter().map(|r| (r.arrival_s, r.wait_s)).collect::<Vec<_>>())
}
