//! Offered load and the scalings that change it.
//!
//! Load is raised or lowered by stretching the arrival process, not by
//! changing jobs, so the size and run-time distributions stay those of the
//! model or trace. Run times have their own scale factor, because faithful
//! run times (hours) are expensive to simulate at millisecond resolution.
//! All functions keep each job's raw SWF `fields` in step with the named
//! members they change.

use crate::swf::TraceJob;

/// Offered load = sum(run_s * procs) / (cpus * (last_submit - first_submit));
/// None if fewer than 2 jobs or zero span.
///
/// First and last are the earliest and latest submit times, so the value does
/// not depend on the order of `jobs`.
pub fn offered_load(jobs: &[TraceJob], cpus: u32) -> Option<f64> {
    if jobs.len() < 2 || cpus == 0 {
        return None;
    }
    let (first, last) = submit_range(jobs)?;
    let span = last - first;
    if span <= 0.0 {
        return None;
    }
    let work: f64 = jobs.iter().map(|j| j.run_s * j.procs as f64).sum();
    Some(work / (cpus as f64 * span))
}

/// Shift submit times so the first job is submitted at 0 (jobs sorted by submit).
pub fn shift_to_zero(jobs: &mut [TraceJob]) {
    if let Some(first) = jobs.first().map(|j| j.submit_s) {
        for job in jobs.iter_mut() {
            job.submit_s -= first;
            job.sync_fields();
        }
    }
    debug_assert!(jobs.windows(2).all(|w| w[0].submit_s <= w[1].submit_s));
}

/// Multiply every gap between consecutive submits by `factor` (first submit
/// unchanged).
///
/// Computed as `first + factor * (submit - first)`, which is the same for a
/// sorted list and does not accumulate rounding along the trace.
///
/// # Panics
/// If `factor` is not finite and positive.
pub fn scale_interarrivals(jobs: &mut [TraceJob], factor: f64) {
    assert!(factor.is_finite() && factor > 0.0, "inter-arrival factor must be positive, got {factor}");
    let Some((first, _)) = submit_range(jobs) else {
        return;
    };
    for job in jobs.iter_mut() {
        job.submit_s = first + factor * (job.submit_s - first);
        job.fields[1] = job.submit_s;
    }
}

/// Multiply every run time by `factor`.
///
/// Only the run time (SWF field 4) changes; requested time and CPU time are
/// left as recorded.
///
/// # Panics
/// If `factor` is not finite and positive.
pub fn scale_runtimes(jobs: &mut [TraceJob], factor: f64) {
    assert!(factor.is_finite() && factor > 0.0, "run-time factor must be positive, got {factor}");
    for job in jobs.iter_mut() {
        job.run_s *= factor;
        job.fields[3] = job.run_s;
    }
}

/// Scale inter-arrival times so the offered load becomes `target`; returns
/// the factor applied (above 1 stretches arrivals, lowering the load).
/// None, with nothing changed, when the load is undefined or `target` is not
/// positive.
pub fn set_offered_load(jobs: &mut [TraceJob], cpus: u32, target: f64) -> Option<f64> {
    if !(target.is_finite() && target > 0.0) {
        return None;
    }
    let current = offered_load(jobs, cpus)?;
    let factor = current / target;
    if !(factor.is_finite() && factor > 0.0) {
        return None;
    }
    scale_interarrivals(jobs, factor);
    Some(factor)
}

fn submit_range(jobs: &[TraceJob]) -> Option<(f64, f64)> {
    let first = jobs.iter().map(|j| j.submit_s).min_by(f64::total_cmp)?;
    let last = jobs.iter().map(|j| j.submit_s).max_by(f64::total_cmp)?;
    Some((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lublin::{self, LublinParams};
    use cosched_core::StreamSeed;

    fn jobs(spec: &[(f64, f64, u32)]) -> Vec<TraceJob> {
        spec.iter()
            .enumerate()
            .map(|(i, &(submit, run, procs))| TraceJob::new(i as u64 + 1, submit, run, procs, 1))
            .collect()
    }

    #[test]
    fn offered_load_by_hand() {
        // Work 100*4 + 50*2 + 10*8 = 580 over 10 CPUs and a span of 29 s.
        let js = jobs(&[(1.0, 100.0, 4), (10.0, 50.0, 2), (30.0, 10.0, 8)]);
        let load = offered_load(&js, 10).unwrap();
        assert!((load - 580.0 / 290.0).abs() < 1e-12, "{load}");
        assert_eq!(offered_load(&js[..1], 10), None);
        assert_eq!(offered_load(&jobs(&[(5.0, 1.0, 1), (5.0, 2.0, 1)]), 10), None);
        assert_eq!(offered_load(&js, 0), None);
    }

    #[test]
    fn scaling_interarrivals_keeps_first_submit_and_scales_gaps() {
        let mut js = jobs(&[(100.0, 1.0, 1), (110.0, 1.0, 1), (130.0, 1.0, 1)]);
        scale_interarrivals(&mut js, 2.5);
        let submits: Vec<f64> = js.iter().map(|j| j.submit_s).collect();
        assert_eq!(submits, vec![100.0, 125.0, 175.0]);
        assert!(js.iter().all(|j| j.fields[1] == j.submit_s));
        scale_runtimes(&mut js, 0.5);
        assert!(js.iter().all(|j| j.run_s == 0.5 && j.fields[3] == 0.5));
    }

    #[test]
    fn set_offered_load_hits_the_target() {
        let mut js = lublin::generate(&LublinParams::sized_to(128), 5_000, StreamSeed(11));
        for &target in &[0.3, 0.7, 0.95, 1.4] {
            let before = offered_load(&js, 128).unwrap();
            let factor = set_offered_load(&mut js, 128, target).unwrap();
            assert!((factor - before / target).abs() < 1e-12 * factor);
            let after = offered_load(&js, 128).unwrap();
            assert!((after - target).abs() < 1e-9, "target {target}, got {after}");
        }
        assert_eq!(set_offered_load(&mut js, 128, 0.0), None);
        assert_eq!(set_offered_load(&mut js[..1], 128, 0.5), None);
    }
}
