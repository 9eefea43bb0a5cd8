//! The controller's decisions, with no I/O: the job table, the plan (`cosched_policy::Coscheduler`), the rules of
//! every request, admission, the idle rule, time limits and history retention.
//!
//! It is a state machine in the manner of a protocol library: the shell (`super::Controller`, or a simulation)
//! hands it an input — a request with the identity the shell verified, an agent's message, a tick — together with
//! the time (`Now`), and it changes its state and leaves what is to be done in its outbox (`Effects`): messages to
//! agents, answers to requests waiting on an agent, lines to log. Records go through `Records`, synchronously: a
//! change a request makes is written before the request's reply exists, and is not made when it cannot be written.
//! It reads no clock, owns no socket, file, thread or random source (`tests::the_core_does_no_io` holds it to that).

use super::{ControllerSettings, MAX_CPUS_PER_NODE, MAX_JOB_ID};
use crate::controller::metrics::{Histogram, JobFigures, MetricsSnapshot, NodeFigures, MAX_JOB_SERIES};
use crate::controller::skew::SliceStartSkew;
use crate::wire::jobs::{Identity, JobRecord, JobState, NodePlacement};
use crate::wire::protocol::checks::{parse_class, parse_signal, validate_node_name};
use crate::wire::protocol::{
    AgentHello, ClassReply, ExecRequest, FromAgent, HistoryReply, HistoryRequest, JobStateReply, JobUsage, KillReply,
    KillState, LogTail, MatrixCell, NodeLoad, NodeLoadReply, RegisterRequest, ReplyData, Request, ResourcesReply,
    Schedule, SignalReply, StartJob, StatusJob, StatusNode, StatusReply, StorageStatus, StuckJob, SubmitReply,
    SubmitRequest, ToAgent, UsageReply, DEFAULT_HISTORY_JOBS, MAX_HISTORY_JOBS,
};
use cosched_core::JobId;
use cosched_policy::cluster::{ClusterShape, JobStatus, Mode, PlanJob};
use cosched_policy::Coscheduler;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod agents;
mod periodic;
mod plan;
mod records;
mod requests;
pub mod slurm_jobs;
pub mod slurm_time;
mod status;
#[cfg(test)]
mod tests;

/// Deliberate bugs the simulation tester must catch (`simulation::tests`), compiled into test builds only.
#[cfg(test)]
pub(crate) mod planted {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Bug {
        /// A node's schedule runs in each slot the jobs of the next slot too, as a fill-in granted without looking
        /// at its cells.
        CpuTwice,
        /// A request's change is not written before its reply.
        ReplyBeforeSave,
        /// After a restart, the jobs that were running are kept frozen on their nodes.
        ThawForgotten,
        /// Other users' commands are hidden only once their jobs are over.
        OthersShown,
        /// The time in its slots is not accrued when the plan changes.
        TimeLimitNotCharged,
    }

    thread_local!(static PLANTED: std::cell::Cell<Option<Bug>> = const { std::cell::Cell::new(None) });

    /// Plant `bug` in the cores this thread drives (`None`: none).
    pub fn plant(bug: Option<Bug>) {
        PLANTED.with(|p| p.set(bug));
    }

    pub fn is(bug: Bug) -> bool {
        PLANTED.with(|p| p.get() == Some(bug))
    }
}
#[cfg(test)]
use planted::Bug;
mod time_limit;

use plan::*;
pub use records::{Loaded, MemoryRecords, NodeRow, Records};
use status::*;

/// The time of an input: a monotonic clock for durations (never steps), and the wall clock for what records and
/// users see (may step).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Now {
    /// Nanoseconds on a monotonic clock whose origin the shell chooses.
    pub mono_ns: u64,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

/// What the core asks its shell to do, in order, after an input.
#[derive(Debug, Default)]
pub struct Effects {
    /// Messages to agents, each to a node whose agent was connected when it was queued.
    pub to_agents: Vec<(String, ToAgent)>,
    /// Answers to requests that wait on an agent, by acknowledgement number (`ControllerCore::ask`).
    pub answers: Vec<(u64, AgentAnswer)>,
    /// Lines for the controller's log.
    pub logs: Vec<String>,
}

struct Node {
    name: String,
    cpus: u32,
    mem_bytes: u64,
    /// Its agent is connected (the shell holds the link).
    connected: bool,
    freezer: String,
    load_avg: f64,
    switches: u64,
    switch_errors: u64,
    last_schedule: Option<Schedule>,
    /// Jobs whose cgroup the node's agent could not empty, as its last report said (kept while it is away).
    stuck_jobs: Vec<StuckJob>,
    /// Events of this node's agent ignored because they spoke of jobs not running there or answered requests never
    /// sent to it (logged at powers of two).
    ignored_events: u64,
    /// Its switches' start after the slice boundary, and their end (the incoming gang thawed), since the start.
    switch_lateness: Histogram,
    switch_latency: Histogram,
    /// What its agent said it does beyond the first agents (`AgentHello::features`).
    features: Vec<String>,
}

impl Node {
    /// A node known by name and size, with no agent connected yet.
    fn new(name: String, cpus: u32, mem_bytes: u64) -> Node {
        Node {
            name,
            cpus,
            mem_bytes,
            connected: false,
            freezer: String::new(),
            load_avg: 0.0,
            switches: 0,
            switch_errors: 0,
            last_schedule: None,
            stuck_jobs: Vec::new(),
            ignored_events: 0,
            switch_lateness: Histogram::default(),
            switch_latency: Histogram::default(),
            features: Vec::new(),
        }
    }
}

/// Live measurements of a job (not persisted).
#[derive(Default)]
struct JobLive {
    usage: BTreeMap<String, JobUsage>,
    cpu_ns: u64,
    progress_at_ns: Option<u64>,
    /// Some report showed a process of the job (an empty registration has had none).
    had_process: bool,
    /// A Slurm job's time out of its slots not yet added to its Slurm end time (`slurm_time`).
    slurm_time: slurm_time::OutOfSlot,
    /// Since when a job with a time limit has been accruing time in its slots (`time_limit`; `None`: not running).
    in_slot_since_ns: Option<u64>,
    /// Its time in its slots as last saved.
    in_slot_saved_ms: u64,
    /// Time in its slots below a millisecond, not yet in `JobRecord::in_slot_ms`.
    in_slot_carry_ns: u64,
    /// Its nodes were told to end it for its time limit (again whenever an agent comes back).
    time_limit_sent: bool,
    /// Since the first report of the running job that found every process frozen on every node, with every report
    /// since saying the same (`None`: a report found it running somewhere).
    frozen_since_ns: Option<u64>,
    /// The nodes that gave its CPU time at its end there.
    cpu_final_on: BTreeSet<String>,
}

impl JobLive {
    /// The CPU time on all its nodes, as last reported.
    fn total_cpu_ns(&self) -> u64 {
        self.usage.values().fold(0u64, |sum, u| sum.saturating_add(u.cpu_ns))
    }
}

struct State {
    /// The time of the input being handled.
    now: Now,
    records: Box<dyn Records>,
    jobs: BTreeMap<u64, JobRecord>,
    live: BTreeMap<u64, JobLive>,
    nodes: Vec<Node>,
    /// Each node's index in `nodes` by name (a report names its node: thousands of nodes are not scanned).
    node_by_name: BTreeMap<String, usize>,
    next_job: u64,
    /// The policy: the plan of every job not over, kept in step with `jobs`.
    cosched: Coscheduler,
    /// Where each job is in the plan's `jobs` (a plan of thousands of jobs is not searched per job).
    plan_index: BTreeMap<u64, usize>,
    /// Requests waiting for an agent's answer (`PidMoved`, `Logs`, `ExecEnded`, `Forgotten`), by acknowledgement
    /// number: only the agent they were sent to may answer them.
    pending_answers: BTreeMap<u64, Pending>,
    /// Why recent Slurm jobs were refused at their prolog (`slurm_jobs`), oldest first.
    slurm_refusals: std::collections::VecDeque<(u32, String)>,
    next_ack: u64,
    /// The agents' recent slice starts, for the skew between nodes.
    slice_starts: SliceStartSkew,
    /// Counts the changes of what `status` shows (jobs, plan, nodes, reports), so that the status document is
    /// written only when something in it changed.
    status_changes: u64,
    /// What the status document last written showed.
    status_written: Option<StatusFingerprint>,
    /// When jobs past the history's retention were last looked for.
    history_pruned_at_ns: Option<u64>,
    /// What the shell is to do.
    out: Effects,
    /// The jobs running when the core opened (for a planted bug).
    #[cfg(test)]
    restored: BTreeSet<u64>,
}

/// Enough to tell whether the status document would change: the changes counted, the jobs listed (ended ones leave
/// after `keep_finished` without any event), and storage's state.
pub type StatusFingerprint = (u64, usize, StorageStatus);

/// A request sent to one agent, waiting for that agent's answer of the same kind.
struct Pending {
    node: String,
    kind: AnswerKind,
    /// Who asked, for the bound on waiting remote commands.
    requester: u32,
    /// The job a process is moved into (`AddPid`): once moved, the job has had a process.
    joins: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerKind {
    PidMoved,
    Logs,
    /// An `Exec`'s end: due when the command ends, failed when its node's agent goes away.
    ExecEnded,
    /// A `Forget`'s outcome: the job's processes all ended, or those the kill did not end.
    Forgotten,
}

/// The controller's decisions and everything they depend on; see the module's documentation.
pub struct ControllerCore {
    rules: Rules,
    state: State,
}

/// The settings the rules follow (the methods that decide live here, apart from the state they change).
struct Rules {
    settings: ControllerSettings,
}

pub type Outcome = Result<ReplyData, String>;
/// What an agent answered to a request the controller forwarded.
pub type AgentAnswer = Result<AgentAnswerData, String>;

/// The data of an agent's answer: a pid change carries none, a logs request the tails.
#[derive(Debug)]
pub enum AgentAnswerData {
    PidMoved,
    Logs(Vec<LogTail>),
    ExecEnded(i32),
    /// What the agent could not end (`None`: all ended, the job's cgroup is gone).
    Forgotten(Option<StuckJob>),
}

/// The most bytes of jobs one `History` reply holds (well within `MAX_TRUSTED_LINE_BYTES`); beyond, the older jobs
/// are left out and the reply says so (`more`).
const MAX_HISTORY_REPLY_BYTES: usize = 8 << 20;

/// How often the controller looks for jobs past the history's retention.
const HISTORY_PRUNE_PERIOD: Duration = Duration::from_secs(1);

/// Slices over which the status reports the skew between nodes.
const SKEW_SLICES_KEPT: usize = 2_000;

/// The most stuck jobs kept per node (an agent holding the key could report any number).
const STUCK_JOBS_KEPT: usize = 256;

/// A job using less than 1/100 of one CPU counts as idle.
const IDLE_CPU_SHARE_DIVISOR: u64 = 100;

/// Nanoseconds from `since` to `now` on the monotonic clock (none if the input came out of order).
fn ns_since(now: Now, since_ns: u64) -> u64 {
    now.mono_ns.saturating_sub(since_ns)
}

fn log(state: &mut State, line: String) {
    state.out.logs.push(line);
}

impl ControllerCore {
    /// The core over what `records` loaded (`loaded`), before any agent connects.
    pub fn open(settings: ControllerSettings, records: Box<dyn Records>, loaded: Loaded, now: Now) -> ControllerCore {
        let jobs: BTreeMap<u64, JobRecord> = loaded.jobs.into_iter().map(|j| (j.id, j)).collect();
        let (nodes, unconfigured) = configured_nodes(&settings.nodes, loaded.nodes);
        // Past `MAX_JOB_ID` (never written by this code) the counter stays exhausted: it never wraps.
        let next_job = jobs.keys().next_back().map_or(1, |id| id.saturating_add(1)).max(loaded.next_job_id);
        let no_nodes = ClusterShape { cpus_per_node: vec![], mem_bytes_per_node: vec![], accepting: vec![] };
        let cosched = Coscheduler::replanning(settings.plan.clone(), no_nodes);
        let mut state = State {
            now,
            records,
            jobs,
            live: BTreeMap::new(),
            node_by_name: nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect(),
            nodes,
            next_job,
            cosched,
            plan_index: BTreeMap::new(),
            pending_answers: BTreeMap::new(),
            next_ack: 1,
            slurm_refusals: std::collections::VecDeque::new(),
            slice_starts: SliceStartSkew::new(SKEW_SLICES_KEPT),
            status_changes: 0,
            status_written: None,
            history_pruned_at_ns: None,
            out: Effects::default(),
            #[cfg(test)]
            restored: BTreeSet::new(),
        };
        debug_assert_eq!(state.node_by_name.len(), state.nodes.len(), "node names are unique");
        #[cfg(test)]
        if planted::is(Bug::ThawForgotten) {
            state.restored = state.jobs.values().filter(|j| j.state == JobState::Running).map(|j| j.id).collect();
        }
        if !unconfigured.is_empty() {
            let names = unconfigured.join(", ");
            log(
                &mut state,
                format!("cosched controller: nodes in the database but not configured are ignored: {names}"),
            );
        }
        ControllerCore { rules: Rules { settings }, state }
    }

    pub fn settings(&self) -> &ControllerSettings {
        &self.rules.settings
    }

    /// Take what is to be done since the last call.
    pub fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.state.out)
    }

    /// Begin an input at `now` (the monotonic clock never goes back, whatever the shell says).
    fn at(&mut self, now: Now) -> (&Rules, &mut State) {
        let mono_ns = now.mono_ns.max(self.state.now.mono_ns);
        self.state.now = Now { mono_ns, unix_ms: now.unix_ms };
        (&self.rules, &mut self.state)
    }

    /// A user's request, from `who` as the shell verified it. `job_token` is the secret a new job gets (the shell
    /// draws it; unused by other requests). Requests that wait on an agent are the shell's (`ask`).
    pub fn handle(&mut self, now: Now, who: &Identity, request: Request, job_token: String) -> Outcome {
        let (rules, state) = self.at(now);
        rules.handle(state, who, request, job_token)
    }

    /// Check that `who` may move `pid` into (`add`) or out of job `id`, and name the node whose agent does it.
    pub fn pid_change_node(
        &mut self,
        now: Now,
        who: &Identity,
        id: u64,
        pid: i32,
        node: Option<String>,
        add: bool,
    ) -> Result<String, String> {
        if !add && !who.admin {
            // As with Slurm's cgroups: a user's process leaves its job only by ending, so that nobody's task can
            // escape its job's slices (or its kill) while the job keeps its row.
            return Err("permission denied: only administrators take a process out of a job; a process leaves its \
                        job by ending"
                .into());
        }
        let (_, state) = self.at(now);
        Rules::pid_change_node(state, who, id, pid, node)
    }

    /// Send `node`'s agent a request that it answers (`message` gets the acknowledgement number): the answer comes
    /// out in `Effects::answers` under that number, or an error when the agent goes away. `requester` is who asked
    /// (remote commands of one user are bounded).
    pub fn ask(
        &mut self,
        now: Now,
        node: &str,
        kind: AnswerKind,
        requester: u32,
        message: impl FnOnce(u64) -> ToAgent,
    ) -> Result<u64, String> {
        let (rules, state) = self.at(now);
        rules.ask(state, node, kind, requester, message)
    }

    /// The shell stopped waiting for `ack` (its timeout): a late answer is then ignored.
    pub fn forget_ask(&mut self, ack: u64) {
        self.state.pending_answers.remove(&ack);
    }

    /// Check a remote command in `who`'s job: the uid, gid and umask it runs with.
    pub fn check_exec(&mut self, now: Now, who: &Identity, r: &ExecRequest) -> Result<(u32, u32, Option<u32>), String> {
        let (_, state) = self.at(now);
        Rules::check_exec(state, who, r)
    }

    /// Where job `id`'s logs are, for `who`: its placement and its owner.
    pub fn log_places(&mut self, now: Now, who: &Identity, id: u64) -> Result<(Vec<NodePlacement>, u32), String> {
        let (_, state) = self.at(now);
        let job = Rules::owned_job(state, who, id)?;
        Ok((job.placement.clone(), job.uid))
    }

    /// An agent said hello, its identity proven by the shell: accept it for its node and return the node's index.
    /// Nothing it claims counts before the whole hello is accepted.
    pub fn agent_connected(&mut self, now: Now, hello: &AgentHello) -> Result<u32, String> {
        let (rules, state) = self.at(now);
        rules.agent_connected(state, hello)
    }

    /// `node`'s link is gone: what was asked of it fails, and it gets no messages until it says hello again.
    pub fn agent_disconnected(&mut self, now: Now, node: &str) {
        let (rules, state) = self.at(now);
        rules.agent_disconnected(state, node)
    }

    /// What `node`'s agent (proven by the shell) says.
    pub fn agent_event(&mut self, now: Now, node: &str, event: FromAgent) {
        let (rules, state) = self.at(now);
        rules.agent_event(state, node, event)
    }

    /// Periodic work (see `Rules::tick`); the status document to write, if it changed.
    pub fn tick(&mut self, now: Now) -> Option<(StatusReply, StatusFingerprint)> {
        let (rules, state) = self.at(now);
        rules.tick(state)
    }

    /// The status document showing `fingerprint` was written.
    pub fn status_written(&mut self, fingerprint: StatusFingerprint) {
        self.state.status_written = Some(fingerprint);
    }

    /// Everything `status` shows, to an administrator.
    pub fn status(&mut self, now: Now) -> StatusReply {
        let (rules, state) = self.at(now);
        rules.status_of(state)
    }

    pub fn metrics(&mut self, now: Now) -> MetricsSnapshot {
        let (rules, state) = self.at(now);
        rules.metrics(state)
    }

    /// The schedule `node`'s agent is to follow now (`None`: no such node).
    pub fn node_schedule(&self, node: &str) -> Option<Schedule> {
        self.rules.node_schedule(&self.state, node)
    }

    /// Every job record the core holds, by id.
    pub fn jobs(&self) -> &BTreeMap<u64, JobRecord> {
        &self.state.jobs
    }

    /// The plan the agents follow.
    pub fn plan(&self) -> &cosched_policy::cluster::Plan {
        full_plan(&self.state)
    }

    /// The coscheduler that holds the plan (read-only: a simulated node reads its rules and rotation).
    pub fn coscheduler(&self) -> &Coscheduler {
        &self.state.cosched
    }
}

/// The nodes recorded in the database (their CPUs and memory as last seen) that the configuration lists; rows of
/// names no longer configured are left out (and returned, to be said once). A configured node joins when its agent
/// first connects.
fn configured_nodes(names: &[String], stored: Vec<NodeRow>) -> (Vec<Node>, Vec<String>) {
    let (known, unknown): (Vec<NodeRow>, Vec<NodeRow>) = stored.into_iter().partition(|r| names.contains(&r.name));
    let unknown = unknown.into_iter().map(|r| r.name).collect();
    (known.into_iter().map(|row| Node::new(row.name, row.cpus, row.mem_bytes)).collect(), unknown)
}

/// Queue `message` for `node`'s agent, or say that it is not connected. (A write that fails later ends the link,
/// and the shell says so with `agent_disconnected`.)
fn send_to(state: &mut State, node: &str, message: ToAgent) -> Result<(), String> {
    if !state.nodes.iter().any(|n| n.name == node && n.connected) {
        return Err(format!("the agent of node {node} is not connected"));
    }
    state.out.to_agents.push((node.to_string(), message));
    Ok(())
}

fn node_index(state: &State, name: &str) -> Option<usize> {
    state.node_by_name.get(name).copied()
}

/// What a user sees of another user's command line under `private_data`.
const HIDDEN: &str = "(hidden)";

/// The error of a job ended by `kill`.
const KILLED: &str = "killed";

/// Why a job whose task exited with `code` failed, in the words of a shell.
fn exit_reason(code: i32) -> String {
    match code {
        126 => "exited with status 126: the command could not be executed (see cosched logs)".into(),
        127 => "exited with status 127: the command was not found or could not start (see cosched logs)".into(),
        c if c > 128 && c < 128 + 65 => {
            let name = nix::sys::signal::Signal::try_from(c - 128).map_or("?", |s| s.as_str());
            format!("killed by signal {} ({name})", c - 128)
        }
        c => format!("exited with status {c}"),
    }
}
