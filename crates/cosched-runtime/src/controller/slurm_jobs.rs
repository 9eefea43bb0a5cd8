//! The controller's side of Slurm jobs (`crate::slurm`): Slurm chose the nodes, so a Slurm job is registered on
//! exactly those nodes and must fit at once; it ends when Slurm's epilog says so, never because its nodes emptied
//! between job steps, and the epilog waits until its node has ended what is left of the job. Only administrators
//! (root in Slurm's prolog, slurmstepd and epilog) may call these.

use super::{node_index, send_to, AgentAnswerData, AnswerKind, Controller, Outcome, State, AGENT_ANSWER_TIMEOUT};
use crate::slurm::{expand_cpus_per_node, expand_hostlist};
use crate::wire::jobs::{Identity, JobRecord, JobState};
use crate::wire::protocol::{JobStateReply, SlurmBeginRequest, SlurmEndRequest, SubmitReply, ToAgent};
use cosched_policy::cluster::JobClass;

impl Controller {
    pub(super) fn slurm_begin(&self, state: &mut State, who: &Identity, r: SlurmBeginRequest) -> Outcome {
        require_admin(who)?;
        if let Some(job) = live_slurm_job(state, r.slurm_job) {
            return Ok(SubmitReply { job: job.id, state: job.state }.into());
        }
        let outcome = self.register_slurm_job(state, &r);
        if let Err(reason) = &outcome {
            remember_refusal(state, r.slurm_job, reason);
        }
        outcome
    }

    fn register_slurm_job(&self, state: &mut State, r: &SlurmBeginRequest) -> Outcome {
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
        let mut job = JobRecord::new(state.next_job, &owner, JobClass::Batch, false, cpus.iter().sum());
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

    /// Move a task into its Slurm job's cgroup on its node; answered once the agent has moved it.
    pub(super) fn slurm_attach(&self, who: &Identity, slurm_job: u32, pid: i32, node: String) -> Outcome {
        require_admin(who)?;
        let (id, owner) = {
            let state = self.state.lock().unwrap();
            let job = live_slurm_job(&state, slurm_job).ok_or_else(|| no_job_for(&state, slurm_job))?;
            Self::pid_change_node(&state, who, job.id, pid, Some(node.clone()))?;
            (job.id, job.uid)
        };
        // slurmstepd has made the task its user's before it runs: a pid of anybody else is refused by the agent.
        self.move_pid(id, pid, node, Some(owner), true)
    }

    /// The Slurm job is over: its epilog runs on each of its nodes, and the first one ends the cosched job. Each
    /// node's agent then kills whatever is left in the job's cgroup there and removes it: Slurm has ended its own
    /// processes, but a command of `cosched rsh` (started by the agent) or a process added to the job is
    /// cosched's to end. Each epilog waits for its own node, within the kill's bound: processes that survive
    /// SIGKILL make the answer an error (slurmd logs it), and the agent keeps their cgroup and retries.
    pub(super) fn slurm_end(&self, who: &Identity, r: SlurmEndRequest) -> Outcome {
        require_admin(who)?;
        let ended = self.end_slurm_job(&mut self.state.lock().unwrap(), &r)?;
        let wait = crate::agent::ender::KILL_BOUND + AGENT_ANSWER_TIMEOUT;
        let forget = |ack| ToAgent::Forget { job: ended.job, ack: Some(ack) };
        let what = format!("Slurm job {}: cosched job {} {}", r.slurm_job, ended.job, ended.state.name());
        match self.ask_agent_within(&r.node, AnswerKind::Forgotten, wait, forget) {
            Ok(AgentAnswerData::Forgotten(None)) => Ok(ended.into()),
            Ok(AgentAnswerData::Forgotten(Some(stuck))) => Err(format!(
                "{what}, but on node {}: {}; the agent keeps their cgroup and retries, cosched status lists them",
                r.node,
                stuck.describe()
            )),
            Ok(_) => Err(format!("{what}; node {}: an answer to another request", r.node)),
            Err(e) => Err(format!("{what}; node {} did not confirm that its processes ended: {e}", r.node)),
        }
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
            job.end(ended);
            job.ended_on = job.placement.iter().map(|p| p.node.clone()).collect();
            for node in job.ended_on.iter().filter(|&node| *node != r.node) {
                let _ = send_to(state, node, &ToAgent::Forget { job: job.id, ack: None });
            }
            state.storage.save_job_or_hold(&job);
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
