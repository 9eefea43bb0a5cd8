//! Time limits of cosched's own jobs (`submit --time`). A job may run for its limit *in its slots*: between two
//! changes of the plan it runs in the share of the cycle the plan gives it, so its time in its slots grows by that
//! share of the wall time while it runs, and not at all while it is queued or suspended. This is the complement of
//! what `slurm_time` adds to a Slurm job's end time, and, like it, comes from the plan alone: nothing an agent says
//! enters it. A job whose time is up is ended as `kill` ends it, with the reason "time limit".

use super::{Controller, State};
use crate::wire::jobs::JobState;
use cosched_core::JobId;
use std::time::{Duration, Instant};

/// The time in its slots is saved at least this often: a controller that stops loses at most this much of it (the
/// job is then granted that much more). Each save writes the job's record (and so makes the backup due again).
pub(super) const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Add to each running job with a limit its share of the time since it was last accrued, under the plan that held
/// meanwhile.
pub(super) fn accrue(state: &mut State, now: Instant) {
    let Some(plan) = state.cosched.plan() else { return };
    let slots = plan.rows.len();
    let limited = state.jobs.values_mut().filter(|j| j.time_limit_s.is_some() && !j.state.is_over());
    for job in limited {
        let live = state.live.entry(job.id).or_default();
        if let Some(since) = live.in_slot_since {
            let share = plan.job(JobId(job.id)).map_or(1.0, |p| p.slice_share(slots)).clamp(0.0, 1.0);
            // In ns, the part below a millisecond carried to the next accrual: accruals come every tick and at
            // every change of the plan, and rounding each down would charge a job less than its share.
            let in_slot_ns = now.saturating_duration_since(since).as_nanos() as f64 * share;
            let total_ns = (in_slot_ns as u64).saturating_add(live.in_slot_carry_ns);
            job.in_slot_ms = job.in_slot_ms.saturating_add(total_ns / 1_000_000);
            live.in_slot_carry_ns = total_ns % 1_000_000;
        }
        live.in_slot_since = (job.state == JobState::Running).then_some(now);
    }
}

impl Controller {
    /// Every tick: accrue, save what grew by `SAVE_EVERY`, and end the jobs whose time is up (each told once here;
    /// an agent that comes back is told again, `timed_out_on`).
    pub(super) fn keep_time_limits(&self, state: &mut State) {
        accrue(state, Instant::now());
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
            state.storage.save_job_or_hold(&state.jobs[&id]);
            state.live.entry(id).or_default().in_slot_saved_ms = in_slot_ms;
        }
        for (id, limit_s) in over {
            // The first reason stays (a node's failure, a kill); the limit still ends the job.
            self.update_job_or_hold(state, id, |j| {
                j.error.get_or_insert_with(|| format!("time limit: {limit_s} s in its slots"));
            });
            state.live.entry(id).or_default().time_limit_sent = true;
            let job = state.jobs[&id].clone();
            self.send_terminate(state, &job);
        }
    }
}

/// The job has run its time limit in its slots.
pub(super) fn timed_out(job: &crate::wire::jobs::JobRecord) -> bool {
    job.time_limit_s.is_some_and(|limit_s| job.in_slot_ms >= limit_s.saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ControllerSettings;
    use crate::wire::jobs::Identity;
    use crate::wire::protocol::{AgentHello, ReplyData, Request, SubmitRequest, ToAgent};
    use std::sync::{Arc, Mutex};

    const OWNER: Identity = Identity { uid: 1000, gid: 1000, admin: false };

    /// A controller with one node of one CPU whose agent's messages are kept.
    fn controller() -> (Controller, Arc<Mutex<Vec<u8>>>) {
        let dir = tempfile::Builder::new().prefix("cosched-time-limit-").tempdir().unwrap().keep();
        let settings = ControllerSettings { state_dir: dir, nodes: vec!["n0".into()], ..ControllerSettings::default() };
        let controller = Controller::open(settings).unwrap();
        let hello = AgentHello {
            node: "n0".into(),
            cpus: 1,
            mem_bytes: 1 << 30,
            adopted: vec![],
            freezer: "t".into(),
            features: vec![],
        };
        let sent = Arc::new(Mutex::new(Vec::new()));
        let writer = SharedBuffer(sent.clone());
        controller.agent_connected(&hello, Arc::new(Mutex::new(Box::new(writer)))).unwrap();
        (controller, sent)
    }

    struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for SharedBuffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn submit(controller: &Controller, time_limit_s: Option<u64>) -> u64 {
        let request = SubmitRequest { time_limit_s, ..SubmitRequest::new(vec!["prog".into()], "/".into()) };
        match controller.handle(&OWNER, Request::Submit(request)).data {
            Some(ReplyData::Submit(reply)) => reply.job,
            other => panic!("{other:?}"),
        }
    }

    fn terminated(sent: &Mutex<Vec<u8>>) -> Vec<u64> {
        let text = String::from_utf8(sent.lock().unwrap().clone()).unwrap();
        let messages = text.lines().map(|l| serde_json::from_str::<ToAgent>(l).unwrap());
        messages.filter_map(|m| if let ToAgent::Terminate { job, .. } = m { Some(job) } else { None }).collect()
    }

    /// Two gangs share one CPU, each in half of the cycle: 10 s of wall time are 5 s in their slots, and a
    /// suspended job's time stands still.
    #[test]
    fn a_job_is_charged_its_share_of_the_time_it_runs_and_ended_at_its_limit() {
        #[allow(clippy::disallowed_methods)] // the accrual's clock, moved by hand below
        let start = Instant::now();
        let (controller, sent) = controller();
        let limited = submit(&controller, Some(8));
        let other = submit(&controller, Some(3600));
        let mut state = controller.state.lock().unwrap();
        let t0 = Instant::now().max(start);
        accrue(&mut state, t0);
        let before = |state: &State, id| state.jobs[&id].in_slot_ms;
        let (limited_0, other_0) = (before(&state, limited), before(&state, other));
        assert!(limited_0 <= t0.duration_since(start).as_millis() as u64, "{limited_0}");
        accrue(&mut state, t0 + Duration::from_secs(10));
        assert_eq!(before(&state, limited) - limited_0, 5_000, "half of 10 s");
        state.jobs.get_mut(&other).unwrap().state = JobState::Suspended;
        accrue(&mut state, t0 + Duration::from_secs(12)); // the suspension is seen from here on
        accrue(&mut state, t0 + Duration::from_secs(20));
        assert_eq!(before(&state, other) - other_0, 6_000, "suspended from 12 s on");
        assert!(terminated(&sent).is_empty());
        controller.keep_time_limits(&mut state);
        assert_eq!(terminated(&sent), [limited], "8 s in its slots and over");
        assert_eq!(state.jobs[&limited].error.as_deref(), Some("time limit: 8 s in its slots"));
        controller.keep_time_limits(&mut state);
        assert_eq!(terminated(&sent), [limited], "told once");
        // An error of its own (a node's failure) neither hides the limit nor is replaced by it.
        state.jobs.get_mut(&other).unwrap().state = JobState::Running;
        state.jobs.get_mut(&other).unwrap().error = Some("n0: no such directory".into());
        state.jobs.get_mut(&other).unwrap().in_slot_ms = 3_600_000;
        controller.keep_time_limits(&mut state);
        assert_eq!(terminated(&sent), [limited, other]);
        assert_eq!(state.jobs[&other].error.as_deref(), Some("n0: no such directory"));
        drop(state);
        // An agent that comes back (it may have missed the message) is told again.
        controller.agent_disconnected("n0");
        let state = controller.state.lock().unwrap();
        let adopted = [limited, other].map(|job| crate::wire::protocol::AdoptedJob {
            job,
            pids: vec![],
            owner: Some(OWNER.uid),
            token: Some(state.jobs[&job].token.clone()),
        });
        drop(state);
        let hello = AgentHello {
            node: "n0".into(),
            cpus: 1,
            mem_bytes: 1 << 30,
            adopted: adopted.into(),
            freezer: "t".into(),
            features: vec![],
        };
        let writer = SharedBuffer(sent.clone());
        controller.agent_connected(&hello, Arc::new(Mutex::new(Box::new(writer)))).unwrap();
        assert_eq!(terminated(&sent), [limited, other, limited, other]);
    }

    /// Accruals a few ms apart (a tick, or a busy plan) charge the whole share, not each one's whole milliseconds.
    #[test]
    fn many_short_accruals_charge_what_one_long_one_does() {
        let (controller, _sent) = controller();
        let limited = submit(&controller, Some(3600));
        let _other = submit(&controller, None);
        let mut state = controller.state.lock().unwrap();
        let t0 = Instant::now();
        accrue(&mut state, t0);
        let before = state.jobs[&limited].in_slot_ms;
        for step in 1..=1000 {
            accrue(&mut state, t0 + Duration::from_micros(2_999 * step));
        }
        // Half of 2.999 s; every accrual alone would be 1.4995 ms, floored to 1.
        let charged = state.jobs[&limited].in_slot_ms - before;
        assert!((1_499..=1_500).contains(&charged), "{charged} ms");
    }
}
