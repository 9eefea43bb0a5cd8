//! The controller's side of Slurm jobs (`crate::slurm`): Slurm chose the nodes, so a Slurm job is registered on
//! exactly those nodes and must fit at once; it ends when Slurm's epilog says so, never because its nodes emptied
//! between job steps, and the epilog waits until its node has ended what is left of the job. Only administrators
//! (root in Slurm's prolog, slurmstepd and epilog) may call these.

use super::{node_index, send_to, ControllerCore, Now, Outcome, Rules, State};
use crate::slurm::{expand_cpus_per_node, expand_hostlist};
use crate::wire::jobs::{Identity, JobRecord, JobState};
use crate::wire::protocol::{JobStateReply, SlurmBeginRequest, SlurmEndRequest, SubmitReply, ToAgent};
use cosched_policy::cluster::JobClass;

impl ControllerCore {
    /// Check a task's attach to its Slurm job: the cosched job's id and owner (whose task alone its agent moves).
    pub fn slurm_attach_target(
        &mut self,
        now: Now,
        who: &Identity,
        slurm_job: u32,
        pid: i32,
        node: &str,
    ) -> Result<(u64, u32), String> {
        require_admin(who)?;
        let (_, state) = self.at(now);
        let job = live_slurm_job(state, slurm_job).ok_or_else(|| no_job_for(state, slurm_job))?;
        let (id, owner) = (job.id, job.uid);
        Rules::pid_change_node(state, who, id, pid, Some(node.to_string()))?;
        Ok((id, owner))
    }

    /// The Slurm job is over (its epilog on `r.node`): end its cosched job, if it is not over yet, and tell its
    /// other nodes to end what is left. The epilog then waits for its own node (`ask` a `Forget`).
    pub fn end_slurm_job(&mut self, now: Now, who: &Identity, r: &SlurmEndRequest) -> Result<JobStateReply, String> {
        require_admin(who)?;
        let (rules, state) = self.at(now);
        rules.end_slurm_job(state, r)
    }
}

impl Rules {
    pub(super) fn slurm_begin(
        &self,
        state: &mut State,
        who: &Identity,
        r: SlurmBeginRequest,
        token: String,
    ) -> Outcome {
        require_admin(who)?;
        if let Some(job) = live_slurm_job(state, r.slurm_job) {
            return Ok(SubmitReply { job: job.id, state: job.state }.into());
        }
        let outcome = self.register_slurm_job(state, &r, token);
        if let Err(reason) = &outcome {
            remember_refusal(state, r.slurm_job, reason);
        }
        outcome
    }

    fn register_slurm_job(&self, state: &mut State, r: &SlurmBeginRequest, token: String) -> Outcome {
        let nodes = expand_hostlist(&r.nodelist)?;
        let cpus = expand_cpus_per_node(&r.cpus_per_node, nodes.len())?;
        if !nodes.contains(&r.node) {
            return Err(format!("node {} is not among Slurm job {}'s nodes {:?}", r.node, r.slurm_job, r.nodelist));
        }
        let indices = nodes
            .iter()
            .map(|name| {
                node_index(state, name)
                    .ok_or_else(|| format!("node {name} of Slurm job {} has no cosched agent", r.slurm_job))
            })
            .collect::<Result<Vec<usize>, String>>()?;
        if let Some((&i, &count)) = indices.iter().zip(&cpus).find(|(&i, &count)| count > state.nodes[i].cpus) {
            let node = &state.nodes[i];
            return Err(format!(
                "Slurm job {} asks for {count} CPUs on {}, which has {}",
                r.slurm_job, node.name, node.cpus
            ));
        }
        let owner = Identity { uid: r.uid, gid: r.gid, admin: false };
        let mut job = self.new_job(state, &owner, JobClass::Batch, false, cpus.iter().sum(), token);
        job.nodes = Some(nodes.len() as u32);
        job.registered = true;
        job.slurm_job = Some(r.slurm_job);
        job.argv = vec![format!("slurm:{}", r.slurm_job)];
        let placement = self
            .admit_registered(state, &job, &indices)
            .map_err(|e| format!("Slurm job {} is not gang scheduled: {e}", r.slurm_job))?;
        let reply = self.insert_job(state, job)?;
        self.start_job(state, reply.job, placement);
        self.recompute_plan(state);
        self.send_schedules(state);
        Ok(reply.into())
    }

    /// End the cosched job of a Slurm job, if it is not over yet; its nodes other than `r.node` (whose epilog waits
    /// for its own) are told to end what is left there.
    fn end_slurm_job(&self, state: &mut State, r: &SlurmEndRequest) -> Result<JobStateReply, String> {
        let latest = state.jobs.values().rev().find(|j| j.slurm_job == Some(r.slurm_job));
        let mut job = latest.cloned().ok_or_else(|| format!("cosched has no job for Slurm job {}", r.slurm_job))?;
        if !job.state.is_over() {
            let (ended, error) = end_state(r);
            job.error = error;
            job.exit_code = r.exit_code;
            self.keep_usage(state, &mut job);
            job.end(ended, state.now.unix_ms);
            job.ended_on = job.placement.iter().map(|p| p.node.clone()).collect();
            for node in job.ended_on.iter().filter(|&node| *node != r.node) {
                let _ = send_to(state, node, ToAgent::Forget { job: job.id, ack: None });
            }
            state.records.save_job_or_hold(&job);
            state.jobs.insert(job.id, job.clone());
            self.replan(state);
        }
        Ok(JobStateReply { job: job.id, state: job.state })
    }
}

/// The cosched state of an ended Slurm job: Slurm's word first (a cancelled job's exit code is 0:0), then the
/// exit code and signal.
fn end_state(r: &SlurmEndRequest) -> (JobState, Option<String>) {
    const ENDED_BY_SLURM: [&str; 7] =
        ["CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REQUEUED"];
    let slurm_state = r.slurm_state.as_deref().unwrap_or("");
    if ENDED_BY_SLURM.contains(&slurm_state) || slurm_state.starts_with("REQUEUE") {
        return (JobState::Killed, Some(format!("Slurm: {slurm_state}")));
    }
    match (r.exit_code, r.signal) {
        (_, Some(signal)) if signal != 0 => (JobState::Killed, Some(format!("Slurm: signal {signal}"))),
        (Some(code), _) if code != 0 => (JobState::Failed, Some(format!("Slurm: exit code {code}"))),
        _ if slurm_state == "FAILED" => (JobState::Failed, Some("Slurm: FAILED".into())),
        _ => (JobState::Finished, None),
    }
}

fn require_admin(who: &Identity) -> Result<(), String> {
    if who.admin {
        Ok(())
    } else {
        Err("permission denied: only administrators (Slurm's prolog, slurmstepd, epilog) speak for Slurm jobs".into())
    }
}

/// Why an attach finds no job: the refusal of the job's prolog, if cosched remembers it.
fn no_job_for(state: &State, slurm_job: u32) -> String {
    match state.slurm_refusals.iter().find(|(id, _)| *id == slurm_job) {
        Some((_, reason)) => format!("Slurm job {slurm_job} was refused at its prolog: {reason}"),
        None => format!("cosched has no running job for Slurm job {slurm_job} (did its prolog reach cosched?)"),
    }
}

/// Keep the last refusals, so that the tasks' attach (whose errors reach the job's output) can say why.
fn remember_refusal(state: &mut State, slurm_job: u32, reason: &str) {
    if state.slurm_refusals.len() == MAX_REFUSALS_KEPT {
        state.slurm_refusals.pop_front();
    }
    state.slurm_refusals.push_back((slurm_job, reason.to_string()));
}

const MAX_REFUSALS_KEPT: usize = 256;

/// The cosched job of a Slurm job that has not ended (a requeued Slurm job gets a new one).
fn live_slurm_job(state: &State, slurm_job: u32) -> Option<&JobRecord> {
    state.jobs.values().rev().find(|j| j.slurm_job == Some(slurm_job) && !j.state.is_over())
}
