//! A slowdown experiment's report: every run (`Sample`), and per policy and number of copies `j` the summary
//! (`Point`) with `s_j = t_j / t_1` of the same policy.

use crate::policy::Policy;
use cosched_core::stats::{Estimate, Ratio};
use serde::{Deserialize, Serialize};

/// One run of `jobs` copies under one policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub policy: String,
    pub jobs: u32,
    pub repeat: u32,
    pub elapsed_s: f64,
    pub copy_elapsed_s: Vec<f64>,
    /// None under Slurm: its jobs are not this process's children.
    pub cpu_s: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
    /// The last line of the first copy's output when it is a JSON object
    /// (the reference programs report their own figures that way).
    pub app_report: Option<serde_json::Value>,
    /// Share of the samples, while two or more copies were in the system, in which two or more ran at once
    /// (`crate::overlap`); `None` for one copy.
    #[serde(default)]
    pub overlap: Option<f64>,
    /// Share of the same samples in which a copy had two runnable threads on one CPU (`crate::overlap`).
    #[serde(default)]
    pub colocated: Option<f64>,
    /// What the whole machine's CPUs did from the copies' start to their end (`None` in reports written
    /// before it was recorded): a slow repeat beside the others' work or the hypervisor's shows here.
    #[serde(default)]
    pub machine_cpu: Option<MachineCpu>,
}

/// The machine's CPU time over a run, all CPUs together, from /proc/stat (clock ticks, 10 ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineCpu {
    /// CPU-seconds busy with anything: the copies (their `cpu_s` is part of it), other processes, interrupts.
    pub busy_s: f64,
    /// CPU-seconds the hypervisor gave to other machines (steal).
    pub steal_s: f64,
    /// CPU-seconds in all (busy, idle, waiting for I/O, stolen): the run's time times the CPUs.
    pub all_s: f64,
}

/// The summary of one policy at one `j`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    pub policy: String,
    pub jobs: u32,
    /// `t_j`: elapsed until the last copy ends.
    pub elapsed_s: Estimate,
    /// `s_j = t_j / t_1` of the same policy.
    pub slowdown: Ratio,
    /// Every copy's own elapsed time, over all repeats.
    pub copy_elapsed_s: Estimate,
    /// Slowest copy over fastest copy in a run, averaged over runs (1 = fair).
    pub fairness_ratio: f64,
    /// CPU time of all `j` copies of a run.
    pub cpu_s: Option<Estimate>,
    /// CPU time over elapsed time, as `time` reports it (200 % = two CPUs busy).
    pub cpu_percent: Option<f64>,
    /// Largest resident memory of a single job's processes (j = 1 only).
    pub peak_rss_bytes: Option<u64>,
    /// Share of the time two or more copies ran at once, over the runs (`Sample::overlap`).
    #[serde(default)]
    pub overlap: Option<Estimate>,
    /// Share of the time a copy's tasks shared a CPU, over the runs (`Sample::colocated`).
    #[serde(default)]
    pub colocated: Option<Estimate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlowdownReport {
    pub command: Vec<String>,
    pub cpus_per_job: u32,
    /// Namespace nodes of one CPU each the copies ran across (`SlowdownConfig::nodes`); 1: this host.
    #[serde(default = "one_node")]
    pub nodes: u32,
    pub repeat: u32,
    pub points: Vec<Point>,
    pub samples: Vec<Sample>,
}

fn one_node() -> u32 {
    1
}

impl SlowdownReport {
    /// The policies of the points, in first-seen order.
    pub fn policies(&self) -> Vec<&str> {
        let mut policies: Vec<&str> = Vec::new();
        for point in &self.points {
            if !policies.contains(&point.policy.as_str()) {
                policies.push(&point.policy);
            }
        }
        policies
    }
}

/// Per policy and `j`: means, standard errors and slowdowns against that policy's `t_1`.
pub fn summarize(policies: &[Policy], jobs: &[u32], samples: &[Sample]) -> Vec<Point> {
    let mut points = Vec::new();
    for policy in policies {
        let label = policy.to_string();
        let of = |j: u32| samples.iter().filter(|s| s.policy == label && s.jobs == j).collect::<Vec<_>>();
        let Some(t1) = Estimate::of(&of(1).iter().map(|s| s.elapsed_s).collect::<Vec<_>>()) else { continue };
        for &j in jobs {
            let runs = of(j);
            let Some(elapsed_s) = Estimate::of(&runs.iter().map(|s| s.elapsed_s).collect::<Vec<_>>()) else {
                continue;
            };
            let copies: Vec<f64> = runs.iter().flat_map(|s| s.copy_elapsed_s.iter().copied()).collect();
            let fairness: Vec<f64> = runs.iter().map(|s| spread_ratio(&s.copy_elapsed_s)).collect();
            let cpu: Vec<f64> = runs.iter().filter_map(|s| s.cpu_s).collect();
            let cpu_s = Estimate::of(&cpu);
            let overlap = Estimate::of(&runs.iter().filter_map(|s| s.overlap).collect::<Vec<_>>());
            let colocated = Estimate::of(&runs.iter().filter_map(|s| s.colocated).collect::<Vec<_>>());
            points.push(Point {
                policy: label.clone(),
                jobs: j,
                elapsed_s,
                slowdown: elapsed_s.ratio(&t1),
                copy_elapsed_s: Estimate::of(&copies).unwrap_or(elapsed_s),
                fairness_ratio: fairness.iter().sum::<f64>() / fairness.len() as f64,
                cpu_percent: cpu_s.map(|c| 100.0 * c.mean / elapsed_s.mean),
                cpu_s,
                peak_rss_bytes: runs.iter().filter_map(|s| s.peak_rss_bytes).max(),
                overlap,
                colocated,
            });
        }
    }
    points
}

fn spread_ratio(times: &[f64]) -> f64 {
    let max = times.iter().copied().fold(f64::MIN, f64::max);
    let min = times.iter().copied().fold(f64::MAX, f64::min);
    if min > 0.0 {
        max / min
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(policy: &str, jobs: u32, elapsed_s: f64, copies: Vec<f64>) -> Sample {
        Sample {
            policy: policy.into(),
            jobs,
            repeat: 1,
            elapsed_s,
            copy_elapsed_s: copies,
            cpu_s: Some(elapsed_s),
            peak_rss_bytes: None,
            app_report: None,
            overlap: None,
            colocated: None,
            machine_cpu: None,
        }
    }

    #[test]
    fn slowdown_is_relative_to_the_same_policy() {
        let samples = vec![
            sample("none", 1, 2.0, vec![2.0]),
            sample("none", 1, 2.2, vec![2.2]),
            sample("none", 2, 4.2, vec![4.0, 4.2]),
            sample("none", 2, 4.2, vec![4.2, 4.2]),
        ];
        let points = summarize(&[Policy::None], &[1, 2], &samples);
        assert_eq!(points.len(), 2);
        assert!((points[1].slowdown.value - 2.0).abs() < 1e-12);
        assert!(points[1].slowdown.std_error > 0.0);
        assert!((points[1].fairness_ratio - (4.2 / 4.0 + 1.0) / 2.0).abs() < 1e-12);
        assert!((points[1].cpu_percent.unwrap() - 100.0).abs() < 1e-9);
    }
}
