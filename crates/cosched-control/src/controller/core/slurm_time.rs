//! The core's side of Slurm time limits (`crate::slurm_time`): how long each Slurm job has been out of its slots,
//! accrued before every change of the plan, and the decisions of the periodic pass that adds it to the job's Slurm
//! end time (the shell runs Slurm's commands: `controller::slurm_time`).
//!
//! The time out of its slots is the plan's, integrated over wall time: between two changes of the plan a job runs
//! in the share of the cycle's slots the plan gives it, and the switchers of every node run exactly those slots on
//! the clock's slice boundaries. Nothing an agent reports enters it, so no agent can stretch another job's limit.

use super::{log, ControllerCore, JobLive, Now, State};
use crate::slurm_time::{decide, LimitUpdate, SlurmJobView, TimeCredit};
use crate::wire::jobs::{JobRecord, JobState};
use crate::wire::protocol::SlurmTimeStatus;

/// A Slurm job's time out of its slots not yet in its Slurm end time. In memory only: a restarted controller loses
/// what accrued since the last pass (the job is granted less, never twice).
#[derive(Default)]
pub(super) struct OutOfSlot {
    owed_ns: u64,
    /// Since when the job has run in cosched under the plan's share (`None`: not running).
    since_ns: Option<u64>,
    /// An update whose command failed: whether Slurm made it anyway is read at the next pass.
    unconfirmed: Option<Unconfirmed>,
    /// Why the last pass did not extend the job's end time.
    error: Option<String>,
}

#[derive(Clone, Copy)]
struct Unconfirmed {
    /// Slurm's end time before the update.
    end_before_s: i64,
    before: TimeCredit,
    after: TimeCredit,
    settled_ms: u64,
}

/// Add to each running Slurm job the time it was out of its slots since it was last accrued, under the plan that
/// held meanwhile.
pub(super) fn accrue(state: &mut State, now_ns: u64) {
    let Some(plan) = state.cosched.plan() else { return };
    for job in state.jobs.values().filter(|j| j.slurm_job.is_some() && !j.state.is_over()) {
        let out = &mut state.live.entry(job.id).or_default().slurm_time;
        if let Some(since_ns) = out.since_ns {
            // A job the plan does not hold is given nothing: only time known to be out of its slots counts.
            let share = super::plan::share_in(plan, &state.plan_index, job.id).unwrap_or(1.0);
            out.owed_ns = out.owed_ns.saturating_add(out_of_slot_ns(now_ns.saturating_sub(since_ns), share));
        }
        out.since_ns = (job.state == JobState::Running).then_some(now_ns);
    }
}

/// The part of `elapsed_ns` a job with `share` of the slots spent out of them.
fn out_of_slot_ns(elapsed_ns: u64, share: f64) -> u64 {
    (elapsed_ns as f64 * (1.0 - share.clamp(0.0, 1.0))) as u64
}

/// What `status` shows of a Slurm job's time limit.
pub(super) fn status(job: &JobRecord, live: Option<&JobLive>) -> SlurmTimeStatus {
    SlurmTimeStatus { extended_s: job.slurm_time.extended_s, error: live.and_then(|l| l.slurm_time.error.clone()) }
}

/// A job whose Slurm record the pass reads.
pub struct Candidate {
    id: u64,
    pub slurm_job: u32,
}

/// An update about to be sent, with Slurm's end time and the credit before it, and the credit after.
pub struct Prepared {
    pub update: LimitUpdate,
    end_before_s: i64,
    before: TimeCredit,
    after: TimeCredit,
    settled_ms: u64,
}

impl ControllerCore {
    /// The running Slurm jobs a pass reads: those owed time, or granted some (for a resume by Slurm), or with an
    /// update whose command failed.
    pub fn slurm_jobs_to_extend(&mut self, now: Now) -> Vec<Candidate> {
        let (_, state) = self.at(now);
        accrue(state, state.now.mono_ns);
        let owes = |j: &JobRecord| {
            let out = state.live.get(&j.id).map(|l| &l.slurm_time);
            let owed_ms = out.map_or(0, |o| o.owed_ns / 1_000_000);
            owed_ms >= 1_000 || !j.slurm_time.is_zero() || out.is_some_and(|o| o.unconfirmed.is_some())
        };
        let running = state.jobs.values().filter(|j| j.state == JobState::Running);
        running.filter(|j| owes(j)).filter_map(|j| Some(Candidate { id: j.id, slurm_job: j.slurm_job? })).collect()
    }

    /// Slurm could not be read: each candidate shows why.
    pub fn slurm_read_failed(&mut self, now: Now, candidates: &[Candidate], error: &str) {
        let (_, state) = self.at(now);
        for job in candidates {
            set_error(state, job, Some(error.to_string()));
        }
    }

    /// Decide one job's update from what Slurm shows of it (`view`, read at `now_s` or after): `None` when nothing
    /// is to be sent.
    pub fn slurm_prepare(
        &mut self,
        now: Now,
        job: &Candidate,
        view: Option<&SlurmJobView>,
        now_s: i64,
    ) -> Option<Prepared> {
        let (_, state) = self.at(now);
        prepare(state, job, view, now_s)
    }

    /// What the update's command did: a failure is settled at the next pass, from what Slurm shows then.
    pub fn slurm_updated(&mut self, now: Now, job: &Candidate, p: &Prepared, result: Result<(), String>) {
        let (_, state) = self.at(now);
        if result.is_err() {
            let unconfirmed = Unconfirmed {
                end_before_s: p.end_before_s,
                before: p.before,
                after: p.after,
                settled_ms: p.settled_ms,
            };
            state.live.entry(job.id).or_default().slurm_time.unconfirmed = Some(unconfirmed);
        }
        set_error(state, job, result.err());
    }
}

/// Settle a failed update of the last pass, decide this pass's, and record its credit before the
/// command runs (a controller that stops between the two has granted less, never twice). `None`: nothing to send.
fn prepare(state: &mut State, c: &Candidate, view: Option<&SlurmJobView>, now_s: i64) -> Option<Prepared> {
    let job = state.jobs.get(&c.id).filter(|j| j.slurm_job == Some(c.slurm_job) && j.state == JobState::Running)?;
    let mut credit = job.slurm_time;
    let out = &mut state.live.entry(c.id).or_default().slurm_time;
    if let Some(u) = out.unconfirmed.take() {
        // Slurm did not make the update if the end time is still what it was: the credit goes back and the time is
        // owed again. Otherwise it is taken as made (at worst the job is granted less, never twice).
        if view.is_some_and(|v| v.end_s == u.end_before_s) && credit == u.after {
            credit = u.before;
            out.owed_ns = out.owed_ns.saturating_add(u.settled_ms * 1_000_000);
        }
    }
    let Some(view) = view else {
        // Slurm no longer lists the job: there is nothing left to extend.
        out.owed_ns = 0;
        let why = format!("Slurm does not list job {}", c.slurm_job);
        set_credit(state, c.id, credit, false).ok()?;
        set_error(state, c, Some(why));
        return None;
    };
    let decision = decide(view, credit, out.owed_ns / 1_000_000, now_s);
    out.owed_ns = out.owed_ns.saturating_sub(decision.settled_ms * 1_000_000);
    if let Err(e) = set_credit(state, c.id, decision.credit, decision.update.is_some()) {
        let out = &mut state.live.entry(c.id).or_default().slurm_time;
        out.owed_ns = out.owed_ns.saturating_add(decision.settled_ms * 1_000_000);
        set_error(state, c, Some(e));
        return None;
    }
    let Some(update) = decision.update else {
        set_error(state, c, None);
        return None;
    };
    Some(Prepared {
        update,
        end_before_s: view.end_s,
        before: credit,
        after: decision.credit,
        settled_ms: decision.settled_ms,
    })
}

/// Record a job's credit: written before an update is sent (`must_persist`: or the update is not sent), otherwise
/// now or once storage works again.
fn set_credit(state: &mut State, id: u64, credit: TimeCredit, must_persist: bool) -> Result<(), String> {
    let Some(job) = state.jobs.get(&id).filter(|j| j.slurm_time != credit) else { return Ok(()) };
    let mut job = job.clone();
    job.slurm_time = credit;
    if must_persist {
        state.records.save_job(&job)?;
    } else {
        state.records.save_job_or_hold(&job);
    }
    state.jobs.insert(id, job);
    state.status_changes += 1;
    Ok(())
}

/// Show why the job's end time was not extended (or that it is again), and log each change of it.
fn set_error(state: &mut State, c: &Candidate, error: Option<String>) {
    let out = &mut state.live.entry(c.id).or_default().slurm_time;
    if out.error == error {
        return;
    }
    let line = match &error {
        Some(e) => format!("cosched controller: Slurm job {}: end time not extended: {e}", c.slurm_job),
        None => format!("cosched controller: Slurm job {}: end time extended again", c.slurm_job),
    };
    out.error = error;
    state.status_changes += 1;
    log(state, line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_owed_the_part_of_the_time_out_of_its_slots() {
        let minute = 60_000_000_000;
        assert_eq!(out_of_slot_ns(minute, 1.0 / 3.0), 40_000_000_000);
        assert_eq!(out_of_slot_ns(minute, 1.0), 0);
        assert_eq!(out_of_slot_ns(minute, 0.25), 45_000_000_000);
        // A share outside [0, 1] never gives more than the time itself, nor less than nothing.
        assert_eq!(out_of_slot_ns(minute, -1.0), 60_000_000_000);
        assert_eq!(out_of_slot_ns(minute, 2.0), 0);
    }
}
