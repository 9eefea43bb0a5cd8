//! Ending what a job leaves: every process still in a job's cgroup when the job is over on this node (its tasks
//! ended, it was killed, Slurm's epilog ran) is killed, the kill repeated until the cgroup is empty, and then the
//! cgroup is removed. A process that survives SIGKILL (one waiting uninterruptibly in the kernel, for a dead NFS
//! server or a FUSE file system that does not answer) keeps its cgroup: the job is reported stuck, logged and
//! retried every second for as long as it lasts, never forgotten; no new job ever takes that cgroup (job ids are
//! never reused).
//!
//! One thread works on every ending job at once, so a stuck one never delays the others: each round kills what
//! is left of each job (`JobGroups::kill_all`, which never waits) and checks who is still there.

use crate::agent::freezer::{monotonic_now, JobGroups};
use crate::wire::protocol::StuckJob;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long the kill of a job's processes may take before the job is reported stuck (and the requests waiting
/// for its end, Slurm's epilog among them, get their answer). SIGKILLed processes usually go in milliseconds; a
/// loaded machine may take a good part of a second to tear down a large one.
pub const KILL_BOUND: Duration = Duration::from_secs(5);
/// How often a round runs while some job is within its bound, and while every ending job is stuck.
const FRESH_ROUND: Duration = Duration::from_millis(10);
const STUCK_ROUND: Duration = Duration::from_secs(1);
/// The most processes a stuck report names per job (the count is always whole).
const PIDS_REPORTED: usize = 64;

/// One job whose processes are being ended.
struct Ending {
    /// Not before this instant (a kill's grace after its SIGTERM).
    kill_at: Instant,
    /// Remove the cgroup once it is empty: the controller is done with the job (`Forget`).
    remove: bool,
    /// Requests waiting for the outcome (their acknowledgement numbers).
    waiting: Vec<u64>,
    /// Since when the job's cgroup could not be emptied, and who was left at the last round.
    stuck: Option<StuckJob>,
}

/// What a round has for a request that waited on a job: all ended (`None`), or what outlived the kill's bound.
pub struct EndAnswer {
    pub ack: u64,
    pub job: u64,
    pub stuck: Option<StuckJob>,
}

pub struct Ender {
    groups: Arc<JobGroups>,
    node: String,
    jobs: Mutex<BTreeMap<u64, Ending>>,
    /// A job was added or changed since the last round began (set and read under `jobs`' lock).
    changed: AtomicBool,
    wake: Condvar,
}

impl Ender {
    pub fn new(groups: Arc<JobGroups>, node: &str) -> Ender {
        let jobs = Mutex::new(BTreeMap::new());
        Ender { groups, node: node.to_string(), jobs, changed: AtomicBool::new(false), wake: Condvar::new() }
    }

    /// End every process of `job` from `kill_at` on, `remove` its cgroup once empty, and answer `ack`, if any,
    /// once the cgroup is empty or found stuck. A job already ending keeps its kill time (a grace after SIGTERM
    /// runs out first), unless someone waits for the answer: then it is killed by `kill_at` at the latest.
    pub fn end(&self, job: u64, kill_at: Instant, remove: bool, ack: Option<u64>) {
        let mut jobs = self.jobs.lock().unwrap();
        let ending = jobs.entry(job).or_insert(Ending { kill_at, remove, waiting: vec![], stuck: None });
        if let Some(ack) = ack {
            ending.kill_at = ending.kill_at.min(kill_at);
            ending.waiting.push(ack);
        }
        ending.remove |= remove;
        self.changed.store(true, Ordering::SeqCst);
        self.wake.notify_all();
    }

    /// Has `job` been found stuck: processes that outlived the kill's bound?
    pub fn is_stuck(&self, job: u64) -> bool {
        self.jobs.lock().unwrap().get(&job).is_some_and(|e| e.stuck.is_some())
    }

    /// The jobs found stuck, for the agent's reports.
    pub fn stuck(&self) -> Vec<StuckJob> {
        self.jobs.lock().unwrap().values().filter_map(|e| e.stuck.clone()).collect()
    }

    /// Run rounds for ever, handing each round's answers to `answer`.
    pub fn run(&self, answer: impl Fn(EndAnswer)) {
        loop {
            let (answers, next_round) = self.round(monotonic_now());
            answers.into_iter().for_each(&answer);
            let jobs = self.jobs.lock().unwrap();
            if !self.changed.swap(false, Ordering::SeqCst) {
                let _ = self.wake.wait_timeout(jobs, next_round).unwrap();
                self.changed.store(false, Ordering::SeqCst);
            }
        }
    }

    /// Kill what is left of each job due, finish the jobs whose cgroup is empty (removing it when asked), mark the
    /// ones past their bound stuck. Returns the answers due and when the next round should run.
    fn round(&self, now: Instant) -> (Vec<EndAnswer>, Duration) {
        let due: Vec<(u64, Instant, bool)> = {
            let jobs = self.jobs.lock().unwrap();
            jobs.iter().map(|(&job, e)| (job, e.kill_at, e.remove)).collect()
        };
        let mut answers = Vec::new();
        let mut next_round = STUCK_ROUND;
        for (job, kill_at, remove) in due {
            let left = self.groups.members(job).unwrap_or_default();
            if left.is_empty() && (!remove || self.remove(job)) {
                answers.extend(self.finish(job, remove));
                continue;
            }
            if now < kill_at {
                next_round = next_round.min(kill_at - now).max(FRESH_ROUND);
                continue;
            }
            if let Err(e) = self.groups.kill_all(job) {
                crate::log_line!("cosched agent {}: killing what is left of job {job}: {e}", self.node);
            }
            if now < kill_at + KILL_BOUND {
                next_round = FRESH_ROUND;
            } else {
                answers.extend(self.mark_stuck(job, &left));
            }
        }
        (answers, next_round)
    }

    /// Remove the job's empty cgroup; false (retried next round) if the kernel still holds it.
    fn remove(&self, job: u64) -> bool {
        self.groups.remove(job).map_err(|e| crate::log_line!("cosched agent {}: {e}; retrying", self.node)).is_ok()
    }

    /// The job's cgroup is empty (and `removed`, if that was asked when the round began): done with it, unless
    /// its removal was asked meanwhile (then the next round removes it).
    fn finish(&self, job: u64, removed: bool) -> Vec<EndAnswer> {
        let mut jobs = self.jobs.lock().unwrap();
        if jobs.get(&job).is_some_and(|ending| ending.remove && !removed) {
            return vec![];
        }
        let Some(ending) = jobs.remove(&job) else { return vec![] };
        drop(jobs);
        if let Some(stuck) = &ending.stuck {
            let seconds = crate::wire::jobs::unix_ms_now().saturating_sub(stuck.since_unix_ms) / 1000;
            crate::log_line!(
                "cosched agent {}: job {job}: its last processes ended after {seconds} s stuck",
                self.node
            );
        }
        ending.waiting.into_iter().map(|ack| EndAnswer { ack, job, stuck: None }).collect()
    }

    /// The job's processes outlived the bound: say so once (log), keep it, and answer whoever waited.
    fn mark_stuck(&self, job: u64, left: &[i32]) -> Vec<EndAnswer> {
        let mut jobs = self.jobs.lock().unwrap();
        let Some(ending) = jobs.get_mut(&job) else { return vec![] };
        let pids: Vec<i32> = left.iter().copied().take(PIDS_REPORTED).collect();
        match &mut ending.stuck {
            Some(stuck) => stuck.pids = pids,
            None => {
                crate::log_line!(
                    "cosched agent {}: job {job}: {} could not be killed within {} s (pids {}, {}): its cgroup is \
                     kept and the kill retried every {} s",
                    self.node,
                    crate::wire::protocol::processes(left.len() as u64),
                    KILL_BOUND.as_secs(),
                    join(&pids),
                    describe_states(&pids),
                    STUCK_ROUND.as_secs()
                );
                let since_unix_ms = crate::wire::jobs::unix_ms_now();
                ending.stuck = Some(StuckJob { job, processes: left.len() as u64, pids, since_unix_ms });
            }
        }
        let stuck = ending.stuck.clone();
        std::mem::take(&mut ending.waiting)
            .into_iter()
            .map(|ack| EndAnswer { ack, job, stuck: stuck.clone() })
            .collect()
    }
}

fn join(pids: &[i32]) -> String {
    pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",")
}

/// Each process's state letter and where it waits in the kernel (`/proc/<pid>/wchan`), for the log.
fn describe_states(pids: &[i32]) -> String {
    let describe = |&pid: &i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).unwrap_or("?");
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        format!("{pid}: state {state} in {}", if wchan.is_empty() { "?" } else { wchan.trim() })
    };
    pids.iter().take(8).map(describe).collect::<Vec<_>>().join("; ")
}
