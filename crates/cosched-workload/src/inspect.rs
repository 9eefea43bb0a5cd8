//! A summary of a workload: enough to see at a glance whether a trace or a
//! generated workload looks like what a study expects, and to state in a
//! report what was simulated.

use std::fmt;

use crate::load::offered_load;
use crate::swf::Workload;

/// Jobs whose size falls in `lo..=hi` (classes 1, 2, 3-4, 5-8, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct SizeClass {
    pub lo: u32,
    pub hi: u32,
    pub count: usize,
}

/// Run-time statistics, seconds. Quantiles interpolate linearly between
/// order statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct RunTimeStats {
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
}

/// Job counts by SWF queue field (by convention 0 = interactive, 1 = batch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueCounts {
    pub interactive: usize,
    pub batch: usize,
    pub unknown: usize,
    /// Any other queue number.
    pub other: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// CPUs the offered load and `wider_than_machine` refer to.
    pub cpus: u32,
    pub jobs: usize,
    pub unusable: usize,
    pub skipped_bad_lines: usize,
    /// Jobs wider than `cpus`, which a simulation of that machine leaves out.
    pub wider_than_machine: usize,
    /// From size 1 up to the class holding the widest job.
    pub size_classes: Vec<SizeClass>,
    pub share_serial: f64,
    /// Share of all jobs whose size is a power of two (serial jobs included,
    /// as 1 = 2^0).
    pub share_pow2: f64,
    pub run_time: Option<RunTimeStats>,
    /// Seconds between consecutive submits (in submit order).
    pub interarrival_mean: Option<f64>,
    /// Coefficient of variation of the inter-arrival times.
    pub interarrival_cv: Option<f64>,
    /// Last submit minus first, seconds.
    pub span_s: f64,
    pub offered_load: Option<f64>,
    pub queues: QueueCounts,
}

/// Summarise `workload` for a machine of `cpus` CPUs.
pub fn summarize(workload: &Workload, cpus: u32) -> Summary {
    let jobs = &workload.jobs;
    let n = jobs.len();
    let share = |count: usize| if n == 0 { 0.0 } else { count as f64 / n as f64 };

    let max_procs = jobs.iter().map(|j| j.procs).max().unwrap_or(1);
    let mut size_classes = Vec::new();
    let (mut lo, mut hi) = (1u32, 1u32);
    loop {
        let count = jobs.iter().filter(|j| (lo..=hi).contains(&j.procs)).count();
        size_classes.push(SizeClass { lo, hi, count });
        if hi >= max_procs {
            break;
        }
        lo = hi + 1;
        hi = hi.saturating_mul(2);
    }

    let mut runs: Vec<f64> = jobs.iter().map(|j| j.run_s).collect();
    runs.sort_by(f64::total_cmp);
    let run_time = (!runs.is_empty()).then(|| RunTimeStats {
        mean: runs.iter().sum::<f64>() / n as f64,
        median: quantile(&runs, 0.5),
        p90: quantile(&runs, 0.9),
        max: runs[n - 1],
    });

    let mut submits: Vec<f64> = jobs.iter().map(|j| j.submit_s).collect();
    submits.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = submits.windows(2).map(|w| w[1] - w[0]).collect();
    let (interarrival_mean, interarrival_cv) = if gaps.is_empty() {
        (None, None)
    } else {
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        (Some(mean), (mean > 0.0).then(|| var.sqrt() / mean))
    };

    let mut queues = QueueCounts::default();
    for j in jobs {
        match j.queue {
            0 => queues.interactive += 1,
            1 => queues.batch += 1,
            -1 => queues.unknown += 1,
            _ => queues.other += 1,
        }
    }

    Summary {
        cpus,
        jobs: n,
        unusable: workload.unusable.len(),
        skipped_bad_lines: workload.skipped_bad_lines.len(),
        wider_than_machine: jobs.iter().filter(|j| j.procs > cpus).count(),
        size_classes,
        share_serial: share(jobs.iter().filter(|j| j.procs == 1).count()),
        share_pow2: share(jobs.iter().filter(|j| j.procs.is_power_of_two()).count()),
        run_time,
        interarrival_mean,
        interarrival_cv,
        span_s: submits.last().map_or(0.0, |last| last - submits[0]),
        offered_load: offered_load(jobs, cpus),
        queues,
    }
}

/// Linear interpolation between order statistics of sorted, non-empty data.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let i = pos.floor() as usize;
    let frac = pos - i as f64;
    match sorted.get(i + 1) {
        Some(next) => sorted[i] + frac * (next - sorted[i]),
        None => sorted[i],
    }
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "n/a".to_string(), |v| format!("{v:.digits$}"))
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "jobs: {} usable, {} unusable, {} malformed lines skipped",
            self.jobs, self.unusable, self.skipped_bad_lines
        )?;
        writeln!(
            f,
            "queues: {} interactive, {} batch, {} unknown, {} other",
            self.queues.interactive, self.queues.batch, self.queues.unknown, self.queues.other
        )?;
        writeln!(
            f,
            "sizes: {:.1}% serial, {:.1}% powers of two, {} wider than {} CPUs",
            100.0 * self.share_serial,
            100.0 * self.share_pow2,
            self.wider_than_machine,
            self.cpus
        )?;
        for c in &self.size_classes {
            let label = if c.lo == c.hi { c.lo.to_string() } else { format!("{}-{}", c.lo, c.hi) };
            let pct = if self.jobs == 0 { 0.0 } else { 100.0 * c.count as f64 / self.jobs as f64 };
            writeln!(f, "  {label:>11} CPUs: {:>8} ({pct:5.1}%)", c.count)?;
        }
        match &self.run_time {
            Some(r) => writeln!(
                f,
                "run time (s): mean {:.1}, median {:.1}, p90 {:.1}, max {:.1}",
                r.mean, r.median, r.p90, r.max
            )?,
            None => writeln!(f, "run time (s): n/a")?,
        }
        writeln!(
            f,
            "inter-arrival (s): mean {}, CV {}; span {:.0} s ({:.2} days)",
            opt(self.interarrival_mean, 1),
            opt(self.interarrival_cv, 2),
            self.span_s,
            self.span_s / 86_400.0
        )?;
        writeln!(f, "offered load on {} CPUs: {}", self.cpus, opt(self.offered_load, 3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swf::TraceJob;

    #[test]
    fn summary_of_a_small_workload() {
        let spec =
            [(0.0, 10.0, 1, 0), (10.0, 20.0, 2, 1), (20.0, 30.0, 3, 1), (40.0, 40.0, 8, -1), (40.0, 100.0, 5, 7)];
        let jobs = spec.iter().enumerate().map(|(i, &(s, r, p, q))| TraceJob::new(i as u64 + 1, s, r, p, q)).collect();
        let w = Workload {
            jobs,
            skipped_bad_lines: vec![3],
            unusable: vec![(9, "run time is 0".into()), (10, "x".into())],
            ..Default::default()
        };
        let s = summarize(&w, 4);
        assert_eq!((s.jobs, s.unusable, s.skipped_bad_lines, s.wider_than_machine), (5, 2, 1, 2));
        let counts: Vec<(u32, u32, usize)> = s.size_classes.iter().map(|c| (c.lo, c.hi, c.count)).collect();
        assert_eq!(counts, vec![(1, 1, 1), (2, 2, 1), (3, 4, 1), (5, 8, 2)]);
        assert_eq!(s.share_serial, 0.2);
        assert_eq!(s.share_pow2, 0.6);
        let r = s.run_time.clone().unwrap();
        assert_eq!((r.mean, r.median, r.max), (40.0, 30.0, 100.0));
        assert!((r.p90 - 76.0).abs() < 1e-12, "{}", r.p90);
        assert_eq!(s.interarrival_mean, Some(10.0));
        // Gaps 10, 10, 20, 0: sd sqrt(50), CV sqrt(50)/10.
        assert!((s.interarrival_cv.unwrap() - 50f64.sqrt() / 10.0).abs() < 1e-12);
        // Work 10 + 40 + 90 + 320 + 500 = 960 over 4 CPUs x 40 s.
        assert!((s.offered_load.unwrap() - 6.0).abs() < 1e-12);
        assert_eq!(s.queues, QueueCounts { interactive: 1, batch: 2, unknown: 1, other: 1 });
        let text = s.to_string();
        assert!(text.contains("jobs: 5 usable, 2 unusable, 1 malformed lines skipped"), "{text}");
        assert!(text.contains("5-8 CPUs:        2"), "{text}");
        assert!(text.contains("offered load on 4 CPUs: 6.000"), "{text}");
    }

    #[test]
    fn summary_of_an_empty_workload() {
        let s = summarize(&Workload::default(), 16);
        assert_eq!(s.jobs, 0);
        assert_eq!(s.run_time, None);
        assert_eq!(s.offered_load, None);
        assert!(s.to_string().contains("run time (s): n/a"));
    }
}
