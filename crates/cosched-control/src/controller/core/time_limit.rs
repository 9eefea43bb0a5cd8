//! Time limits of cosched's own jobs (`submit --time`). A job may run for its limit *in its slots*: between two
//! changes of the plan it runs in the share of the cycle the plan gives it, so its time in its slots grows by that
//! share of the wall time while it runs, and not at all while it is queued or suspended. This is the complement of
//! what `slurm_time` adds to a Slurm job's end time, and, like it, comes from the plan alone: nothing an agent says
//! enters it. A job whose time is up is ended as `kill` ends it, with the reason "time limit", in state `timeout`.

use super::{Rules, State};
use crate::wire::jobs::JobState;
use std::time::Duration;

/// The time in its slots is saved at least this often: a controller that stops loses at most this much of it (the
/// job is then granted that much more). Each save writes the job's record (and so makes the backup due again).
pub(super) const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Add to each running job with a limit its share of the time since it was last accrued, under the plan that held
/// meanwhile.
pub(super) fn accrue(state: &mut State, now_ns: u64) {
    let Some(plan) = state.cosched.plan() else { return };
    let limited = state.jobs.values_mut().filter(|j| j.time_limit_s.is_some() && !j.state.is_over());
    for job in limited {
        let live = state.live.entry(job.id).or_default();
        if let Some(since_ns) = live.in_slot_since_ns {
            let share = super::plan::share_in(plan, &state.plan_index, job.id).unwrap_or(1.0).clamp(0.0, 1.0);
            // In ns, the part below a millisecond carried to the next accrual: accruals come every tick and at
            // every change of the plan, and rounding each down would charge a job less than its share.
            let in_slot_ns = now_ns.saturating_sub(since_ns) as f64 * share;
            let total_ns = (in_slot_ns as u64).saturating_add(live.in_slot_carry_ns);
            job.in_slot_ms = job.in_slot_ms.saturating_add(total_ns / 1_000_000);
            live.in_slot_carry_ns = total_ns % 1_000_000;
        }
        live.in_slot_since_ns = (job.state == JobState::Running).then_some(now_ns);
    }
}

impl Rules {
    /// Every tick: accrue, save what grew by `SAVE_EVERY`, and end the jobs whose time is up (each told once here;
    /// an agent that comes back is told again, `timed_out_on`).
    pub(super) fn keep_time_limits(&self, state: &mut State) {
        accrue(state, state.now.mono_ns);
        let save_every_ms = SAVE_EVERY.as_millis() as u64;
        let mut to_save = Vec::new();
        let mut over = Vec::new();
        for job in state.jobs.values().filter(|j| j.state == JobState::Running) {
            let Some(limit_s) = job.time_limit_s else { continue };
            let live = state.live.get(&job.id);
            let saved_ms = live.map_or(0, |l| l.in_slot_saved_ms);
            if job.in_slot_ms >= saved_ms.saturating_add(save_every_ms) {
                to_save.push(job.id);
            }
            if timed_out(job) && !live.is_some_and(|l| l.time_limit_sent) {
                over.push((job.id, limit_s));
            }
        }
        for id in to_save {
            let in_slot_ms = state.jobs[&id].in_slot_ms;
            state.records.save_job_or_hold(&state.jobs[&id]);
            state.live.entry(id).or_default().in_slot_saved_ms = in_slot_ms;
        }
        for (id, limit_s) in over {
            // The first reason stays (a node's failure, a kill); the limit still ends the job.
            self.update_job_or_hold(state, id, |j| {
                j.error.get_or_insert_with(|| format!("{TIME_LIMIT_REASON}{limit_s} s in its slots"));
            });
            state.live.entry(id).or_default().time_limit_sent = true;
            let job = state.jobs[&id].clone();
            self.send_terminate(state, &job);
        }
    }
}

/// The job was ended because its time was up: its first reason is its limit (a node's failure or a kill that came
/// first stays what ended it).
pub(super) fn ended_at_its_limit(job: &crate::wire::jobs::JobRecord) -> bool {
    timed_out(job) && job.error.as_deref().is_some_and(|e| e.starts_with(TIME_LIMIT_REASON))
}

const TIME_LIMIT_REASON: &str = "time limit: ";

/// The job has run its time limit in its slots.
pub(super) fn timed_out(job: &crate::wire::jobs::JobRecord) -> bool {
    job.time_limit_s.is_some_and(|limit_s| job.in_slot_ms >= limit_s.saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::core::tests::{agent_messages, one_node_core, submit_as, OWNER};
    use crate::controller::core::Now;
    use crate::wire::protocol::{AdoptedJob, ToAgent};

    fn terminated(core: &mut super::super::ControllerCore) -> Vec<u64> {
        let messages = agent_messages(core);
        messages
            .iter()
            .filter_map(|(_, m)| if let ToAgent::Terminate { job, .. } = m { Some(*job) } else { None })
            .collect()
    }

    const S: u64 = 1_000_000_000;

    /// Two gangs share one CPU, each in half of the cycle: 10 s of wall time are 5 s in their slots, and a
    /// suspended job's time stands still.
    #[test]
    fn a_job_is_charged_its_share_of_the_time_it_runs_and_ended_at_its_limit() {
        let mut core = one_node_core(1);
        let limited = submit_as(&mut core, &OWNER, Some(8));
        let other = submit_as(&mut core, &OWNER, Some(3600));
        let _ = agent_messages(&mut core);
        let state = &mut core.state;
        let t0 = state.now.mono_ns;
        accrue(state, t0);
        let before = |state: &State, id| state.jobs[&id].in_slot_ms;
        let (limited_0, other_0) = (before(state, limited), before(state, other));
        assert_eq!((limited_0, other_0), (0, 0));
        accrue(state, t0 + 10 * S);
        assert_eq!(before(state, limited) - limited_0, 5_000, "half of 10 s");
        state.jobs.get_mut(&other).unwrap().state = JobState::Suspended;
        accrue(state, t0 + 12 * S); // the suspension is seen from here on
        accrue(state, t0 + 20 * S);
        assert_eq!(before(state, other) - other_0, 6_000, "suspended from 12 s on");
        let at = |s: u64| Now { mono_ns: t0 + s * S, unix_ms: 0 };
        core.tick(at(20));
        assert_eq!(terminated(&mut core), [limited], "8 s in its slots and over");
        assert_eq!(core.jobs()[&limited].error.as_deref(), Some("time limit: 8 s in its slots"));
        core.tick(at(20));
        assert!(terminated(&mut core).is_empty(), "told once");
        // An error of its own (a node's failure) neither hides the limit nor is replaced by it.
        let other_job = core.state.jobs.get_mut(&other).unwrap();
        other_job.state = JobState::Running;
        other_job.error = Some("n0: no such directory".into());
        other_job.in_slot_ms = 3_600_000;
        core.tick(at(20));
        assert_eq!(terminated(&mut core), [other]);
        assert_eq!(core.jobs()[&other].error.as_deref(), Some("n0: no such directory"));
        // An agent that comes back (it may have missed the message) is told again.
        core.agent_disconnected(at(21), "n0");
        let adopted = [limited, other].map(|job| AdoptedJob {
            job,
            pids: vec![],
            owner: Some(OWNER.uid),
            token: Some(core.jobs()[&job].token.clone()),
        });
        let hello = crate::controller::core::tests::hello("n0", 1, adopted.into());
        core.agent_connected(at(22), &hello).unwrap();
        assert_eq!(terminated(&mut core), [limited, other]);
    }

    /// Accruals a few ms apart (a tick, or a busy plan) charge the whole share, not each one's whole milliseconds.
    #[test]
    fn many_short_accruals_charge_what_one_long_one_does() {
        let mut core = one_node_core(1);
        let limited = submit_as(&mut core, &OWNER, Some(3600));
        let _other = submit_as(&mut core, &OWNER, None);
        let state = &mut core.state;
        let t0 = state.now.mono_ns;
        accrue(state, t0);
        let before = state.jobs[&limited].in_slot_ms;
        for step in 1..=1000 {
            accrue(state, t0 + 2_999_000 * step);
        }
        // Half of 2.999 s; every accrual alone would be 1.4995 ms, floored to 1.
        let charged = state.jobs[&limited].in_slot_ms - before;
        assert!((1_499..=1_500).contains(&charged), "{charged} ms");
    }
}
