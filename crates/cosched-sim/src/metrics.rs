//! What a run measures: per-job records, the CPU-time breakdown, and the
//! summary statistics of the reference study.

use serde::Serialize;

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
    pub utilization: f64,
    pub mean_slowdown: f64,
    pub mean_bounded_slowdown: f64,
    pub bounded_slowdown_threshold_s: f64,
    pub longest_queue: usize,
    pub cpu_time: Breakdown,
    pub events: u64,
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
