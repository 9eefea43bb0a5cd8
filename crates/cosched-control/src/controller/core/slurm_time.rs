//! The core's side of Slurm time limits (`crate::slurm_time`): how long each Slurm job has been out of its slots,
//! accrued before every change of the plan, and the decisions of the periodic pass that adds it to the job's Slurm
//! end time (the shell runs Slurm's commands: `controller::slurm_time`).
//!
//! The time out of its slots is the plan's, integrated over wall time: between two changes of the plan a job runs
//! in the share of the cycle's slots the plan gives it, and the switchers of every node run exactly those slots on
//! the clock's slice boundaries. Nothing an agent reports enters it, so no agent can stretch another job's limit.
//!
//! Only a slot another user's job takes on one of the job's nodes is credited, as Slurm's own gang scheduler
//! credits only the time another job took: a slot of the owner's own gangs, or one that leaves the job's nodes
//! idle, earns nothing. Otherwise a user could stretch their Slurm job's limit up to `rows` times with idle gangs of
//! their own (`credited_share`).

use super::{log, ControllerCore, JobLive, Now, State};
use crate::slurm_time::{decide, LimitUpdate, SlurmJobView, TimeCredit};
use crate::wire::jobs::{JobRecord, JobState};
use crate::wire::protocol::SlurmTimeStatus;
use cosched_core::JobId;
use cosched_policy::cluster::{JobStatus, Plan};
use std::collections::{BTreeMap, BTreeSet};

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
    let owner = |id: u64| state.jobs.get(&id).map(|j| j.uid);
    for job in state.jobs.values().filter(|j| j.slurm_job.is_some() && !j.state.is_over()) {
        let out = &mut state.live.entry(job.id).or_default().slurm_time;
        if let Some(since_ns) = out.since_ns {
            // A job the plan does not hold is given nothing: only time known to be taken by others counts.
            let credited = credited_share(plan, &state.plan_index, job.id, owner);
            out.owed_ns = out.owed_ns.saturating_add(credited_ns(now_ns.saturating_sub(since_ns), credited));
        }
        out.since_ns = (job.state == JobState::Running).then_some(now_ns);
    }
}

/// The part of `elapsed_ns` that `share` of the cycle's slots took.
fn credited_ns(elapsed_ns: u64, share: f64) -> u64 {
    (elapsed_ns as f64 * share.clamp(0.0, 1.0)) as u64
}

/// The share of `plan`'s slots in which job `id` is out of its slots while a job of another owner (`owner` gives a
/// job's uid) runs on one of its nodes: in a matrix row, that row's gangs; in a slot left to the local jobs, those
/// that run all the time. 0 for a job the plan does not hold, or holds all the time.
fn credited_share(plan: &Plan, index: &BTreeMap<u64, usize>, id: u64, owner: impl Fn(u64) -> Option<u32>) -> f64 {
    let Some(JobStatus::Placed { cpus, rows, always: false }) = placed(plan, index, id) else { return 0.0 };
    let Some(its_owner) = owner(id) else { return 0.0 };
    let its_nodes: BTreeSet<u32> = cpus.iter().map(|c| c.node).collect();
    let anothers_on_its_nodes = |other: &JobId| {
        owner(other.0).is_some_and(|uid| uid != its_owner)
            && matches!(placed(plan, index, other.0), Some(JobStatus::Placed { cpus, .. })
                if cpus.iter().any(|c| its_nodes.contains(&c.node)))
    };
    let credited = (0..plan.rows.len())
        .filter(|slot| !rows.contains(&(*slot as u32)))
        .filter(|&slot| match plan.slot_rows.get(slot) {
            Some(Some(_)) => plan.rows[slot].iter().any(anothers_on_its_nodes),
            _ => plan.always.iter().any(anothers_on_its_nodes),
        })
        .count();
    credited as f64 / plan.rows.len().max(1) as f64
}

/// Where `plan` holds job `id`, found through `index` (the plan's `jobs` by id).
fn placed<'p>(plan: &'p Plan, index: &BTreeMap<u64, usize>, id: u64) -> Option<&'p JobStatus> {
    plan.jobs.get(*index.get(&id)?).filter(|j| j.id.0 == id).map(|j| &j.status)
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

    use cosched_policy::cluster::{JobPlan, NodeCpus};

    #[test]
    fn a_job_is_owed_the_part_of_the_time_others_took() {
        let minute = 60_000_000_000;
        assert_eq!(credited_ns(minute, 2.0 / 3.0), 40_000_000_000);
        assert_eq!(credited_ns(minute, 0.0), 0);
        assert_eq!(credited_ns(minute, 0.75), 45_000_000_000);
        // A share outside [0, 1] never gives more than the time itself, nor less than nothing.
        assert_eq!(credited_ns(minute, 2.0), 60_000_000_000);
        assert_eq!(credited_ns(minute, -1.0), 0);
    }

    /// A plan of one gang per matrix row: `(job, nodes)`, each job in row `job - 1`.
    fn one_gang_per_row(gangs: &[(u64, &[u32])]) -> (Plan, BTreeMap<u64, usize>) {
        let jobs = gangs.iter().enumerate().map(|(row, (id, nodes))| JobPlan {
            id: JobId(*id),
            status: JobStatus::Placed {
                cpus: nodes.iter().map(|&node| NodeCpus { node, cpus: vec![0] }).collect(),
                rows: vec![row as u32],
                always: false,
            },
            own_row: Some(row as u32),
        });
        let plan = Plan {
            rows: gangs.iter().map(|(id, _)| vec![JobId(*id)]).collect(),
            slot_rows: (0..gangs.len() as u32).map(Some).collect(),
            always: vec![],
            jobs: jobs.collect(),
        };
        let index = gangs.iter().enumerate().map(|(i, (id, _))| (*id, i)).collect();
        (plan, index)
    }

    #[test]
    fn only_slots_another_users_job_takes_on_the_jobs_nodes_are_credited() {
        let (alice, bob) = (1000, 1001);
        // Job 1 is alice's Slurm job on node 0; jobs 2-4 are the other rows.
        let (plan, index) = one_gang_per_row(&[(1, &[0]), (2, &[0]), (3, &[0, 1]), (4, &[1])]);
        let owners = |of: [u32; 4]| move |id: u64| of.get(id as usize - 1).copied();
        // Three idle gangs of her own: a quarter of the time, and not a second of it credited.
        assert_eq!(credited_share(&plan, &index, 1, owners([alice; 4])), 0.0);
        // Bob's gangs on her node take two slots of four; his gang on another node takes nothing of hers.
        assert_eq!(credited_share(&plan, &index, 1, owners([alice, bob, bob, bob])), 0.5);
        assert_eq!(credited_share(&plan, &index, 1, owners([alice, alice, bob, alice])), 0.25);
        // A job the plan does not hold, or whose owner is unknown, is credited nothing.
        assert_eq!(credited_share(&plan, &index, 9, owners([alice, bob, bob, bob])), 0.0);
        assert_eq!(credited_share(&plan, &index, 1, |_| None), 0.0);
    }
}
