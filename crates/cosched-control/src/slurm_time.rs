//! Slurm's time limit of the jobs cosched slices, the pure part: the settings, the credit already granted (kept
//! in the job's record, so that a restarted controller never grants it twice), the arithmetic of a pass and
//! squeue's lines. The commands run as root are `cosched_runtime::slurm_time`'s; the controller's side is
//! `controller/core/slurm_time.rs`. Slurm counts a job's time limit in wall-clock time from its start, less the
//! time Slurm itself kept it suspended; the controller credits a Slurm job the time it spent out of its slots, as
//! Slurm's own gang scheduler credits the time it kept a job suspended. See docs/slurm.md.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Where the controller finds Slurm: set by the administrator who starts it, never by a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmTimeSettings {
    /// The directory of `squeue` and `scontrol`; it and they must be root's and writable by root alone.
    pub bin_dir: PathBuf,
    /// The slurm.conf they read (`SLURM_CONF`); `None`: Slurm's own default. Root's, writable by root alone.
    pub slurm_conf: Option<PathBuf>,
    /// Between two passes.
    pub period: Duration,
    /// The longest one command may run before it is killed.
    pub command_timeout: Duration,
}

impl Default for SlurmTimeSettings {
    fn default() -> SlurmTimeSettings {
        SlurmTimeSettings {
            bin_dir: PathBuf::from("/usr/bin"),
            slurm_conf: None,
            // Half of Slurm's own time-limit check period (PERIODIC_TIMEOUT, 30 s in src/slurmctld/slurmctld.h).
            period: Duration::from_secs(15),
            // Slurm's default MessageTimeout.
            command_timeout: Duration::from_secs(10),
        }
    }
}

/// What cosched has added to a Slurm job's end time and time limit so far (stored with the job).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeCredit {
    /// Seconds the job spent out of its slots, added to its Slurm end time.
    pub extended_s: u64,
    /// Minutes added to its Slurm time limit along with them: `extended_s` to within `LIMIT_DRIFT_MAX_S`
    /// (`limit_step`).
    pub limit_added_min: i64,
    /// Slurm's own suspended time of the job when last seen.
    pub slurm_suspended_s: i64,
}

impl TimeCredit {
    pub fn is_zero(&self) -> bool {
        *self == TimeCredit::default()
    }
}

/// A job as `squeue` shows it: only fields Slurm writes itself, never text of the job's owner (a job's name or
/// comment could otherwise pose as another field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmJobView {
    /// `RUNNING`, `SUSPENDED`, `COMPLETING`, ...
    pub state: String,
    pub start_s: i64,
    pub end_s: i64,
    /// `None`: no time limit.
    pub limit_min: Option<i64>,
    /// Slurm's run time: wall time since the start less the time Slurm kept the job suspended.
    pub run_s: i64,
}

/// squeue's `--format`: job id, state, start and end (epoch seconds under `SLURM_TIME_FORMAT=%s`), time limit,
/// time used.
pub const SQUEUE_FORMAT: &str = "%A %T %S %e %l %M";

/// An `scontrol update` of a running job: its new time limit and end time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitUpdate {
    pub limit_min: i64,
    pub end_s: i64,
}

/// What one pass does for one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The update to send, if any.
    pub update: Option<LimitUpdate>,
    /// The credit once the update is made (or as it stands, when there is none).
    pub credit: TimeCredit,
    /// Out-of-slot time (ms) the pass is done with: granted, or not Slurm's to count (the job was not running for
    /// Slurm, or had no limit). The rest stays owed.
    pub settled_ms: u64,
}

/// Slurm's suspended time of a job grown by less than this between passes is the jitter of reading it (squeue's
/// clock and ours a second apart), not a suspension.
const SUSPENSION_NOTICED_S: i64 = 2;

/// The most the minutes added to a job's time limit may stray from the seconds added to its end time. The limit is
/// what Slurm recomputes an end time from (at a resume) and what `scontrol show job` shows.
const LIMIT_DRIFT_MAX_S: i64 = 30;

/// One pass for one job: Slurm shows it as `view`, cosched has credited `credit`, and the job has been out of its
/// slots `owed_ms` since. `now_s` was read before squeue ran, so that Slurm's suspended time computed from it is
/// never more than the truth.
///
/// While Slurm does not run the job (suspended by Slurm, ending) the time is Slurm's own business: nothing is
/// granted for it. A suspension by Slurm since the last pass is noticed by the job's suspended time having grown;
/// the time owed then overlapped it and is dropped, and the end time, which Slurm's resume set from the time
/// limit, is put back to hold the seconds granted.
pub fn decide(view: &SlurmJobView, credit: TimeCredit, owed_ms: u64, now_s: i64) -> Decision {
    let nothing = |credit, settled_ms| Decision { update: None, credit, settled_ms };
    let Some(limit_min) = view.limit_min.filter(|_| view.state == "RUNNING") else {
        return nothing(credit, owed_ms);
    };
    let suspended_s = (now_s - view.start_s - view.run_s).max(0);
    // How far the minutes added to the limit stray from the seconds added to the end time.
    let drift_s = 60 * credit.limit_added_min - credit.extended_s as i64;
    let mut after = credit;
    let (delta_s, minutes, settled_ms) = if suspended_s >= credit.slurm_suspended_s + SUSPENSION_NOTICED_S {
        after.slurm_suspended_s = suspended_s;
        // At a resume Slurm set the end time to now + limit − time run (`_job_suspend_op`, src/slurmctld/job_mgr.c),
        // so it holds the minutes added, not the seconds granted.
        (-drift_s, limit_step(-drift_s, drift_s), owed_ms)
    } else {
        let grant_s = fitting_grant(owed_ms / 1000, drift_s);
        after.extended_s += grant_s as u64;
        (grant_s, limit_step(grant_s, drift_s - grant_s), grant_s as u64 * 1000)
    };
    if delta_s == 0 && minutes == 0 {
        return nothing(after, settled_ms);
    }
    after.limit_added_min += minutes;
    let update = LimitUpdate { limit_min: limit_min + minutes, end_s: view.end_s + delta_s };
    Decision { update: Some(update), credit: after, settled_ms }
}

/// The minutes to add to the time limit in an update that moves the end time by `delta_s`: of those Slurm allows,
/// the ones that leave the limit nearest the credit (`drift_s`: how far it would stray with none added). Slurm
/// applies an update's TimeLimit before its EndTime (`_update_job`, src/slurmctld/job_mgr.c): the new limit moves
/// the end time by its whole minutes, then the new end time adds its difference from that to the limit, rounded
/// in C as `(d + 30) / 60`. So an update adds exactly `k` minutes when that rounding gives 0:
/// −90 < delta − 60k < 30. It can never add fewer minutes than `delta_s` rounds to (half up).
fn limit_step(delta_s: i64, drift_s: i64) -> i64 {
    let lowest = (delta_s + 30).div_euclid(60);
    let highest = (delta_s + 89).div_euclid(60);
    (lowest..=highest).min_by_key(|k| (drift_s + 60 * k).abs()).unwrap_or(lowest)
}

/// The most of `owed_s` that can be granted now with the limit kept within `LIMIT_DRIFT_MAX_S` of the credit: a
/// grant Slurm would round up too far keeps back at most 30 s for a later pass.
fn fitting_grant(owed_s: u64, drift_s: i64) -> i64 {
    let mut grant_s = owed_s as i64;
    while grant_s > 0 && (drift_s - grant_s + 60 * limit_step(grant_s, drift_s - grant_s)).abs() > LIMIT_DRIFT_MAX_S {
        grant_s -= 1;
    }
    grant_s
}

/// squeue's lines (`SQUEUE_FORMAT`) by job id. A running job's line must be whole; of other jobs only the state
/// counts.
pub fn parse_squeue(text: &str) -> Result<BTreeMap<u32, SlurmJobView>, String> {
    let mut jobs = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let bad = || format!("squeue printed {line:?}, not \"{SQUEUE_FORMAT}\"");
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [id, state, start, end, limit, used] = fields[..] else { return Err(bad()) };
        let id: u32 = id.parse().map_err(|_| bad())?;
        if state.is_empty() || !state.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            return Err(bad());
        }
        let view = if state == "RUNNING" {
            SlurmJobView {
                state: state.to_string(),
                start_s: start.parse().map_err(|_| bad())?,
                end_s: end.parse().map_err(|_| bad())?,
                limit_min: match limit {
                    "UNLIMITED" | "NOT_SET" | "INVALID" => None,
                    _ => Some(parse_slurm_duration_s(limit).ok_or_else(bad)? / 60),
                },
                run_s: parse_slurm_duration_s(used).ok_or_else(bad)?,
            }
        } else {
            SlurmJobView { state: state.to_string(), start_s: 0, end_s: 0, limit_min: None, run_s: 0 }
        };
        jobs.insert(id, view);
    }
    Ok(jobs)
}

/// A duration as Slurm prints it (`secs2time_str`, `mins2time_str`): `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
fn parse_slurm_duration_s(text: &str) -> Option<i64> {
    let (days, clock) = match text.split_once('-') {
        Some((days, clock)) => (days.parse::<i64>().ok()?, clock),
        None => (0, text),
    };
    let parts: Vec<i64> = clock.split(':').map(|p| p.parse::<i64>().ok().filter(|&v| v >= 0)).collect::<Option<_>>()?;
    let (hours, minutes, seconds) = match parts[..] {
        [minutes, seconds] => (0, minutes, seconds),
        [hours, minutes, seconds] => (hours, minutes, seconds),
        _ => return None,
    };
    (days >= 0).then(|| ((days * 24 + hours) * 60 + minutes) * 60 + seconds)
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;

    /// What Slurm 22.05's `_update_job` leaves of a running job's limit and end time after an update with both
    /// TimeLimit and EndTime: the limit moves the end time, then the end time the limit, rounded as C rounds.
    fn slurm_applies(limit_min: i64, end_s: i64, update: LimitUpdate) -> (i64, i64) {
        let end_after_limit = end_s + (update.limit_min - limit_min) * 60;
        let difference = update.end_s - end_after_limit;
        // Rust's integer division truncates toward zero, as C's does.
        (update.limit_min + (difference + 30) / 60, update.end_s)
    }

    /// Slurm's resume: the end time from the limit, less the time the job ran before (`_job_suspend_op`).
    fn slurm_resumes(now_s: i64, limit_min: i64, ran_s: i64) -> i64 {
        now_s + limit_min * 60 - ran_s
    }

    fn running(start_s: i64, end_s: i64, limit_min: i64, run_s: i64) -> SlurmJobView {
        SlurmJobView { state: "RUNNING".into(), start_s, end_s, limit_min: Some(limit_min), run_s }
    }

    #[test]
    fn a_sliced_job_is_granted_what_it_was_out_of_its_slots_and_no_more() {
        // Started at 1000 with a 1-minute limit; 30 s later, at a third of the slots, it is owed 20 s.
        let view = running(1_000, 1_060, 1, 30);
        let d = decide(&view, TimeCredit::default(), 20_400, 1_030);
        assert_eq!(d.update, Some(LimitUpdate { limit_min: 1, end_s: 1_080 }));
        assert_eq!(d.credit.extended_s, 20);
        // Whole seconds are granted; the 400 ms stay owed.
        assert_eq!(d.settled_ms, 20_000);
        // Nothing owed: nothing sent.
        let d = decide(&view, d.credit, 999, 1_031);
        assert_eq!((d.update, d.settled_ms), (None, 0));
    }

    #[test]
    fn the_time_limit_carries_the_credit_to_the_minute_and_the_end_time_to_the_second() {
        let (mut limit, mut end) = (60_i64, 100_000_i64);
        let mut credit = TimeCredit::default();
        let (mut owed_ms, mut owed_total_ms) = (0_u64, 0_u64);
        // Time owed in amounts of every size up to a few minutes, in an order that mixes them.
        for step in 0..3_000_u64 {
            let accrued_ms = (step * 7_919_003) % 311_000;
            (owed_ms, owed_total_ms) = (owed_ms + accrued_ms, owed_total_ms + accrued_ms);
            let view = running(0, end, limit, 1_000 + step as i64);
            let d = decide(&view, credit, owed_ms, 1_000 + step as i64);
            if let Some(update) = d.update {
                (limit, end) = slurm_applies(limit, end, update);
            }
            (credit, owed_ms) = (d.credit, owed_ms - d.settled_ms);
            assert_eq!((end - 100_000) as u64, credit.extended_s, "the end time holds every second granted");
            assert_eq!(credit.extended_s * 1_000 + owed_ms, owed_total_ms, "granted or still owed, never more");
            assert!(owed_ms < 31_000, "{owed_ms} ms held back after step {step}");
            assert_eq!(limit - 60, credit.limit_added_min, "Slurm's limit is what the credit says");
            let drift_s = 60 * credit.limit_added_min - credit.extended_s as i64;
            assert!(drift_s.abs() <= LIMIT_DRIFT_MAX_S, "the limit strays {drift_s} s after step {step}");
        }
    }

    #[test]
    fn each_step_adds_exactly_the_minutes_slurm_will_add() {
        for delta_s in -30..400 {
            for drift_s in -400..400 {
                let k = limit_step(delta_s, drift_s);
                let update = LimitUpdate { limit_min: 10 + k, end_s: 5_000 + delta_s };
                assert_eq!(slurm_applies(10, 5_000, update), (10 + k, 5_000 + delta_s), "delta {delta_s}");
                assert!(k >= 0, "the limit is never lowered");
            }
        }
    }

    #[test]
    fn a_suspension_by_slurm_earns_nothing_and_its_resume_keeps_the_seconds_granted() {
        // Granted 80 s: the limit took 1 minute of it.
        let credit = TimeCredit { extended_s: 80, limit_added_min: 1, slurm_suspended_s: 0 };
        // Suspended by Slurm at 1 040 (40 s run), resumed at 1 100: end = 1 100 + 2 min − 40 s.
        let resumed_end = slurm_resumes(1_100, 2, 40);
        let view = running(1_000, resumed_end, 2, 45);
        // The owed 30 s overlapped the suspension: dropped; the 20 s the resume lost are put back.
        let d = decide(&view, credit, 30_000, 1_105);
        assert_eq!(d.settled_ms, 30_000);
        assert_eq!(d.update, Some(LimitUpdate { limit_min: 2, end_s: resumed_end + 20 }));
        assert_eq!((d.credit.extended_s, d.credit.slurm_suspended_s), (80, 60));
        // A limit that took more than the seconds granted gives them back.
        let over = TimeCredit { extended_s: 40, ..credit };
        assert_eq!(decide(&view, over, 0, 1_105).update.map(|u| u.end_s), Some(resumed_end - 20));
        // While suspended: nothing, and the owed time is Slurm's.
        let suspended = SlurmJobView { state: "SUSPENDED".into(), ..view.clone() };
        assert_eq!(decide(&suspended, credit, 9_000, 1_105), Decision { update: None, credit, settled_ms: 9_000 });
        // A second of jitter in reading the suspended time is not a suspension.
        let d = decide(&running(1_000, 2_000, 1, 45), credit, 5_000, 1_046);
        assert_eq!((d.credit.extended_s, d.settled_ms), (85, 5_000));
    }

    #[test]
    fn a_job_without_a_limit_is_left_alone() {
        let view = SlurmJobView { limit_min: None, ..running(0, 0, 0, 10) };
        assert_eq!(decide(&view, TimeCredit::default(), 8_000, 10).update, None);
    }

    #[test]
    fn squeue_lines_are_read_field_by_field_and_nothing_else_passes() {
        let text = "12 RUNNING 1795633709 1795633769 1:00 0:07\n\
                    13 PENDING N/A N/A 5:00 0:00\n\
                    14 RUNNING 1795633709 1795720109 1-00:00:00 2:03:04\n\
                    15 RUNNING 1795633709 1795633769 UNLIMITED 59:59\n";
        let jobs = parse_squeue(text).unwrap();
        assert_eq!(jobs[&12], running(1_795_633_709, 1_795_633_769, 1, 7));
        assert_eq!(jobs[&13].state, "PENDING");
        assert_eq!((jobs[&14].limit_min, jobs[&14].run_s), (Some(1_440), 7_384));
        assert_eq!((jobs[&15].limit_min, jobs[&15].run_s), (None, 3_599));
        for bad in
            ["12 RUNNING 1 2 1:00", "12 RUNNING x 2 1:00 0:01", "12 running 1 2 1:00 0:01", "x RUNNING 1 2 1:0 0:1"]
        {
            assert!(parse_squeue(bad).is_err(), "{bad:?} was read");
        }
        assert_eq!(parse_slurm_duration_s("1:2:3:4"), None);
        assert_eq!(parse_slurm_duration_s("-1:00"), None);
    }
}
