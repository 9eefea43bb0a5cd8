//! Offered load and the scalings that change it.
//!
//! Load is raised or lowered by stretching the arrival process, not by
//! changing jobs, so the size and run-time distributions stay those of the
//! model or trace. Run times have their own scale factor, because faithful
//! run times (hours) are expensive to simulate at millisecond resolution.
//! All functions keep each job's raw SWF `fields` in step with the named
//! members they change.

use crate::swf::{show, TraceJob, FIELD_NAMES, F_CPU_TIME, F_REQ_TIME, F_WAIT_TIME, MAX_TIME_S};

/// The recorded durations the run-time scale multiplies besides the run time (SWF fields 3, 6 and 9).
const SCALED_DURATIONS: [usize; 3] = [F_WAIT_TIME, F_CPU_TIME, F_REQ_TIME];

/// What is done to a workload before it is simulated (the CLI's `--jobs`,
/// `--drop-oversized`, `--runtime-scale`, `--load` and `--natural-load`).
#[derive(Clone, Copy, Debug)]
pub struct Shaping {
    /// Keep only the first jobs.
    pub max_jobs: Option<usize>,
    pub machine_cpus: u32,
    /// Leave out jobs wider than the machine instead of refusing the workload.
    pub drop_oversized: bool,
    pub runtime_scale: f64,
    /// The offered load to reach by scaling inter-arrival times; `None` keeps
    /// the workload's own load (arrivals scale with run times).
    pub target_load: Option<f64>,
}

/// What [`shape`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shaped {
    pub oversized_left_out: usize,
    /// Factor applied to inter-arrival times after the run-time scale.
    pub interarrival_scale: f64,
    pub offered_load: Option<f64>,
}

/// Shape `jobs` for a simulation. Every submit and run time that comes out is
/// finite and within [`MAX_TIME_S`], or the error says which job is not.
pub fn shape(jobs: &mut Vec<TraceJob>, how: &Shaping) -> Result<Shaped, String> {
    if !(how.runtime_scale.is_finite() && how.runtime_scale > 0.0) {
        return Err(format!("--runtime-scale must be positive, got {}", how.runtime_scale));
    }
    if let Some(n) = how.max_jobs {
        jobs.truncate(n);
    }
    let oversized_left_out = leave_out_oversized(jobs, how.machine_cpus, how.drop_oversized)?;
    if jobs.is_empty() {
        return Err("no job left to simulate".into());
    }
    scale_runtimes(jobs, how.runtime_scale);
    let interarrival_scale = match how.target_load {
        Some(target) => set_offered_load(jobs, how.machine_cpus, target)
            .ok_or("--load needs a positive target and at least two jobs with distinct submit times")?,
        None => {
            scale_interarrivals(jobs, how.runtime_scale);
            how.runtime_scale
        }
    };
    check_times(jobs, how.runtime_scale, interarrival_scale)?;
    Ok(Shaped { oversized_left_out, interarrival_scale, offered_load: offered_load(jobs, how.machine_cpus) })
}

/// Jobs wider than the machine: an error naming the first, or (when asked)
/// left out, as the reference study did, and counted.
fn leave_out_oversized(jobs: &mut Vec<TraceJob>, cpus: u32, drop: bool) -> Result<usize, String> {
    let before = jobs.len();
    if let Some(job) = jobs.iter().find(|j| j.procs > cpus) {
        if !drop {
            return Err(format!(
                "job {}{} needs {} CPUs but the machine has {cpus}; use --drop-oversized to leave such jobs out",
                job.job_number,
                where_from(job),
                job.procs
            ));
        }
    }
    jobs.retain(|j| j.procs <= cpus);
    Ok(before - jobs.len())
}

/// The scalings can carry a time out of what the simulator's clock holds, and the run-time scale a recorded
/// duration (wait, CPU or requested time) out of what the reader accepts, which would make the trace `sim` writes
/// unreadable.
fn check_times(jobs: &[TraceJob], runtime_scale: f64, interarrival_scale: f64) -> Result<(), String> {
    let within = |t: f64| (0.0..=MAX_TIME_S).contains(&t);
    if let Some(job) = jobs.iter().find(|j| !within(j.submit_s) || !within(j.run_s)) {
        return Err(format!(
            "job {}{}: with run times x{} and inter-arrival times x{} it is submitted at {} s and runs {} s; \
             we accept at most {} s",
            job.job_number,
            where_from(job),
            show(runtime_scale),
            show(interarrival_scale),
            show(job.submit_s),
            show(job.run_s),
            show(MAX_TIME_S)
        ));
    }
    for job in jobs {
        if let Some(&field) = SCALED_DURATIONS.iter().find(|&&f| job.fields[f] > MAX_TIME_S) {
            return Err(format!(
                "job {}{}: with run times x{} its field {} ({}) becomes {} s; we accept at most {} s",
                job.job_number,
                where_from(job),
                show(runtime_scale),
                field + 1,
                FIELD_NAMES[field],
                show(job.fields[field]),
                show(MAX_TIME_S)
            ));
        }
    }
    Ok(())
}

/// " (line N)" for a job read from a file.
fn where_from(job: &TraceJob) -> String {
    if job.source_line > 0 {
        format!(" (line {})", job.source_line)
    } else {
        String::new()
    }
}

/// Offered load = sum(run_s * procs) / (cpus * (last_submit - first_submit));
/// None if fewer than 2 jobs or a span under the simulator's 1 ns.
///
/// First and last are the earliest and latest submit times, so the value does
/// not depend on the order of `jobs`.
pub fn offered_load(jobs: &[TraceJob], cpus: u32) -> Option<f64> {
    if jobs.len() < 2 || cpus == 0 {
        return None;
    }
    let (first, last) = submit_range(jobs)?;
    let span = last - first;
    // A shorter span is no span for the simulator, and would make the load infinite.
    if span < 1e-9 {
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

/// Multiply every job's durations by `factor`: the run time (SWF field 4)
/// and, where recorded (not -1), the wait, the average CPU time and the
/// requested time (fields 3, 6 and 9), so that a trace written after scaling
/// stays consistent with itself.
///
/// # Panics
/// If `factor` is not finite and positive.
pub fn scale_runtimes(jobs: &mut [TraceJob], factor: f64) {
    assert!(factor.is_finite() && factor > 0.0, "run-time factor must be positive, got {factor}");
    let scaled = |value: f64| if value >= 0.0 { value * factor } else { value };
    for job in jobs.iter_mut() {
        job.run_s *= factor;
        job.fields[3] = job.run_s;
        job.wait_s = scaled(job.wait_s);
        job.fields[2] = job.wait_s;
        for field in [F_CPU_TIME, F_REQ_TIME] {
            job.fields[field] = scaled(job.fields[field]);
        }
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
    fn scaling_run_times_scales_every_recorded_duration_and_keeps_unknowns() {
        let mut recorded = TraceJob::new(1, 0.0, 100.0, 4, 1);
        recorded.wait_s = 10.0;
        recorded.fields[2] = 10.0;
        recorded.fields[5] = 90.0;
        recorded.fields[8] = 200.0;
        let mut unknown = TraceJob::new(2, 5.0, 40.0, 2, 1);
        unknown.fields[8] = -1.0;
        let mut jobs = vec![recorded, unknown];
        scale_runtimes(&mut jobs, 0.5);
        assert_eq!((jobs[0].run_s, jobs[0].wait_s), (50.0, 5.0));
        assert_eq!(
            [jobs[0].fields[2], jobs[0].fields[3], jobs[0].fields[5], jobs[0].fields[8]],
            [5.0, 50.0, 45.0, 100.0]
        );
        assert_eq!((jobs[1].wait_s, jobs[1].fields[5], jobs[1].fields[8]), (-1.0, -1.0, -1.0));
        assert_eq!(jobs[1].submit_s, 5.0, "arrivals are not durations");
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
    fn offered_load_is_finite_or_none() {
        // Submits 5e-324 s apart once gave an infinite load.
        let js = jobs(&[(0.0, 1e9, 1_000_000), (5e-324, 1e9, 1_000_000)]);
        assert_eq!(offered_load(&js, 1), None);
        let js = jobs(&[(0.0, 1e9, 1_000_000), (1e-9, 1e9, 1_000_000)]);
        assert!(offered_load(&js, 1).is_some_and(f64::is_finite));
    }

    const CLI_DEFAULTS: Shaping =
        Shaping { max_jobs: None, machine_cpus: 8, drop_oversized: false, runtime_scale: 0.5, target_load: None };

    #[test]
    fn shaping_keeps_every_time_within_the_limit() {
        let mut js = jobs(&[(0.0, 100.0, 4), (10.0, 50.0, 2), (30.0, 1e9, 8)]);
        let shaped = shape(&mut js, &CLI_DEFAULTS).unwrap();
        assert_eq!(shaped.interarrival_scale, 0.5);
        assert_eq!(
            js.iter().map(|j| (j.submit_s, j.run_s)).collect::<Vec<_>>(),
            [(0.0, 50.0), (5.0, 25.0), (15.0, 5e8)]
        );
        assert!(shaped.offered_load.is_some_and(f64::is_finite));

        let huge_scale = Shaping { runtime_scale: 1e300, ..CLI_DEFAULTS };
        let err = shape(&mut jobs(&[(0.0, 100.0, 4), (10.0, 50.0, 2)]), &huge_scale).unwrap_err();
        assert_eq!(
            err,
            "job 1: with run times x1e300 and inter-arrival times x1e300 it is submitted at 0 s and runs 1e302 s; \
             we accept at most 1e9 s"
        );
        let tiny_load = Shaping { target_load: Some(1e-300), ..CLI_DEFAULTS };
        let err = shape(&mut jobs(&[(0.0, 100.0, 4), (10.0, 50.0, 2)]), &tiny_load).unwrap_err();
        assert!(err.starts_with("job 2: with run times x0.5 and inter-arrival times x"), "{err}");
        let mut one = jobs(&[(0.0, 100.0, 4)]);
        assert!(shape(&mut one, &Shaping { runtime_scale: f64::INFINITY, ..CLI_DEFAULTS }).is_err());
        assert!(shape(&mut one, &Shaping { target_load: Some(0.5), ..CLI_DEFAULTS }).unwrap_err().contains("--load"));
        assert_eq!(
            shape(&mut one, &Shaping { machine_cpus: 2, ..CLI_DEFAULTS }).unwrap_err(),
            "job 1 needs 4 CPUs but the machine has 2; use --drop-oversized to leave such jobs out"
        );
    }

    /// The reader holds every time field to 1e9 s; the run-time scale must not carry one past it, or `sim` would
    /// write a workload.swf it cannot read back.
    #[test]
    fn shaping_keeps_every_time_field_within_the_limit() {
        let mut requested_long = TraceJob::new(2, 10.0, 50.0, 2, 1);
        requested_long.fields[8] = 5e8;
        requested_long.source_line = 3;
        let mut js = vec![TraceJob::new(1, 0.0, 100.0, 4, 1), requested_long];
        let err = shape(&mut js, &Shaping { runtime_scale: 4.0, ..CLI_DEFAULTS }).unwrap_err();
        assert_eq!(
            err,
            "job 2 (line 3): with run times x4 its field 9 (requested time) becomes 2e9 s; we accept at most 1e9 s"
        );
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
