//! The controller: the job database, the plan (`cosched_policy::cluster`),
//! the requests of users and the links to node agents.
//!
//! All state sits behind one mutex; every request validates fully before it
//! changes anything, writes the database, recomputes the plan and tells the
//! agents what changed.

pub mod db;
pub mod metrics;
pub mod monitor;
pub mod server;
pub mod skew;
pub mod storage;

use crate::controller::db::NodeRow;
use crate::controller::metrics::{Histogram, JobFigures, MetricsAccess, MetricsSnapshot, NodeFigures, MAX_JOB_SERIES};
use crate::controller::skew::SliceStartSkew;
use crate::controller::storage::Storage;
use crate::wire::jobs::{unix_ms_now, Identity, JobRecord, JobState, NodePlacement};
use crate::wire::protocol::checks::{parse_class, parse_signal, validate_node_name};
use crate::wire::protocol::{
    write_message, AgentHello, ClassReply, ExecReply, ExecRequest, FromAgent, HistoryReply, HistoryRequest,
    JobStateReply, JobUsage, KillReply, KillState, LogFile, LogTail, LogsReply, MatrixCell, MonitorTokenReply,
    NodeLoad, NodeLoadReply, PidReply, RegisterRequest, Reply, ReplyData, Request, ResourcesReply, Schedule,
    SignalReply, StartJob, StatusJob, StatusNode, StatusReply, StuckJob, SubmitReply, SubmitRequest, ToAgent,
    UsageReply, DEFAULT_HISTORY_JOBS, MAX_HISTORY_JOBS,
};
use cosched_core::JobId;
use cosched_policy::cluster::{ClusterShape, JobStatus, Mode, PlanJob, PlanSettings};
use cosched_policy::Coscheduler;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

mod slurm_jobs;
mod slurm_time;
mod time_limit;

#[derive(Clone, Debug)]
pub struct ControllerSettings {
    pub state_dir: PathBuf,
    pub slice_ns: u64,
    pub plan: PlanSettings,
    /// A gang job that used no CPU for this long runs outside the matrix.
    pub idle_revert: Duration,
    /// ... and after this long it leaves the gang database for good (becomes local).
    pub idle_forget: Duration,
    pub admin_uids: Vec<u32>,
    /// Between SIGTERM and SIGKILL when a job is killed (Slurm's KillWait).
    pub kill_wait: Duration,
    /// Jobs that ended longer ago than this leave `status` (their records stay, for `history`).
    pub keep_finished: Duration,
    /// Jobs that ended longer ago than this leave the history and the database (sacct's purge).
    pub keep_history: Duration,
    /// Hide other users' command lines from users who are not administrators (Slurm's PrivateData=jobs).
    pub private_data: bool,
    /// Whether the monitor serves `/metrics` (without a token).
    pub metrics: MetricsAccess,
    /// The cluster's nodes (`--nodes`, and `cosched up`'s own): an agent naming any other node is refused.
    pub nodes: Vec<String>,
    /// Bounds on jobs not over and on remote commands waiting (Slurm's MaxSubmitJobs and MaxJobCount).
    pub job_limits: JobLimits,
    /// A registered job no process has joined ends this long after its registration (a Slurm job waits for its
    /// epilog instead).
    pub empty_job_grace: Duration,
    /// Where Slurm is, to add to each Slurm job's end time the time it spends out of its slots (`None`: never).
    pub slurm_time: Option<crate::slurm_time::SlurmTimeSettings>,
}

/// How many jobs and waiting remote commands the controller holds: the volume one user (or all together) may put
/// on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobLimits {
    /// Jobs not over of one user (Slurm's `MaxSubmitJobs`).
    pub per_user: usize,
    /// Jobs not over of all users (Slurm's `MaxJobCount`).
    pub total: usize,
    /// `exec` requests (`cosched rsh`) of one user waiting for their commands to end. Each holds one of that
    /// user's connections, so this stays below the per-user connection bound and leaves room for other requests.
    pub waiting_execs_per_user: usize,
}

impl Default for JobLimits {
    fn default() -> JobLimits {
        JobLimits { per_user: 1_000, total: 10_000, waiting_execs_per_user: 96 }
    }
}

/// The largest job id: the database's keys are signed 64-bit integers. A controller that has given it out refuses
/// new jobs rather than wrap around to ids in use.
pub const MAX_JOB_ID: u64 = i64::MAX as u64;

/// The most CPUs an agent may offer (Linux's largest `NR_CPUS`): the plan holds a cell per CPU and row.
pub const MAX_CPUS_PER_NODE: u32 = 8192;

/// What `cosched controller` and `cosched up` run with when no flag says otherwise (the flags take their defaults
/// from here).
impl Default for ControllerSettings {
    fn default() -> ControllerSettings {
        ControllerSettings {
            state_dir: PathBuf::from("/var/lib/cosched"),
            slice_ns: crate::agent::switcher::DEFAULT_SLICE_NS,
            plan: PlanSettings {
                rules: cosched_policy::cluster::PlanRules::COSCHED,
                rows: 4,
                local_mpl: 4,
                gang_cpu_share: 1.0,
                over_allocation: 0.0,
            },
            // The LLNL gang scheduler's: 10 minutes without CPU use reverts, 2 hours forgets.
            idle_revert: Duration::from_secs(600),
            idle_forget: Duration::from_secs(7_200),
            admin_uids: vec![],
            // Flux's grace; Slurm's KillWait is 30 s.
            kill_wait: Duration::from_secs(5),
            // Slurm's MinJobAge.
            keep_finished: Duration::from_secs(300),
            // Slurm keeps job records for ever unless told to purge; a month bounds the memory history takes.
            keep_history: Duration::from_secs(30 * 86_400),
            private_data: true,
            metrics: MetricsAccess::Public,
            nodes: vec![],
            job_limits: JobLimits::default(),
            empty_job_grace: Duration::from_secs(60),
            slurm_time: Some(crate::slurm_time::SlurmTimeSettings::default()),
        }
    }
}

impl ControllerSettings {
    pub fn status_path(&self) -> PathBuf {
        self.state_dir.join("status.json")
    }
}

pub type AgentWriter = Arc<Mutex<Box<dyn Write + Send>>>;

struct Node {
    name: String,
    cpus: u32,
    mem_bytes: u64,
    link: Option<AgentWriter>,
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
            link: None,
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
    progress_at: Option<Instant>,
    /// Some report showed a process of the job (an empty registration has had none).
    had_process: bool,
    /// A Slurm job's time out of its slots not yet added to its Slurm end time (`slurm_time`).
    slurm_time: slurm_time::OutOfSlot,
    /// Since when a job with a time limit has been accruing time in its slots (`time_limit`; `None`: not running).
    in_slot_since: Option<Instant>,
    /// Its time in its slots as last saved.
    in_slot_saved_ms: u64,
    /// Time in its slots below a millisecond, not yet in `JobRecord::in_slot_ms`.
    in_slot_carry_ns: u64,
    /// Its nodes were told to end it for its time limit (again whenever an agent comes back).
    time_limit_sent: bool,
    /// Since the first report of the running job that found every process frozen on every node, with every report
    /// since saying the same (`None`: a report found it running somewhere).
    frozen_since: Option<Instant>,
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
    storage: Storage,
    jobs: BTreeMap<u64, JobRecord>,
    live: BTreeMap<u64, JobLive>,
    nodes: Vec<Node>,
    next_job: u64,
    /// The policy: the plan of every job not over, kept in step with `jobs`.
    cosched: Coscheduler,
    monitor_tokens: crate::wire::auth::monitor_tokens::MonitorTokens,
    /// Requests waiting for an agent's answer (`PidMoved`, `Logs`, `ExecEnded`), by acknowledgement number: only
    /// the agent they were sent to may answer them.
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
    history_pruned_at: Option<Instant>,
}

/// Enough to tell whether the status document would change: the changes counted, the jobs listed (ended ones leave
/// after `keep_finished` without any event), and storage's state.
type StatusFingerprint = (u64, usize, crate::wire::protocol::StorageStatus);

/// A request sent to one agent, waiting for that agent's answer of the same kind.
struct Pending {
    node: String,
    kind: AnswerKind,
    /// Who asked, for the bound on waiting remote commands.
    requester: u32,
    sender: mpsc::Sender<AgentAnswer>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AnswerKind {
    PidMoved,
    Logs,
    /// An `Exec`'s end: due when the command ends, failed when its node's agent goes away.
    ExecEnded,
    /// A `Forget`'s outcome: the job's processes all ended, or those the kill did not end.
    Forgotten,
}

pub struct Controller {
    pub settings: ControllerSettings,
    state: Mutex<State>,
}

type Outcome = Result<ReplyData, String>;
/// What an agent answered to a request the controller forwarded.
type AgentAnswer = Result<AgentAnswerData, String>;

/// The data of an agent's answer: a pid change carries none, a logs request the tails.
enum AgentAnswerData {
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

/// How long a request forwarded to an agent (pid change, logs) waits for its answer.
const AGENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The most stuck jobs kept per node (an agent holding the key could report any number).
const STUCK_JOBS_KEPT: usize = 256;

/// A job using less than 1/100 of one CPU counts as idle.
const IDLE_CPU_SHARE_DIVISOR: u64 = 100;

impl Controller {
    pub fn open(settings: ControllerSettings) -> std::io::Result<Controller> {
        // Root writes the records there: nobody else may have made it or be able to change it.
        crate::private_dir::ensure(&settings.state_dir, "state directory")?;
        let (storage, loaded) = Storage::open(&settings.state_dir)?;
        let jobs: BTreeMap<u64, JobRecord> = loaded.jobs.into_iter().map(|j| (j.id, j)).collect();
        let nodes = configured_nodes(&settings.nodes, loaded.nodes);
        // Past `MAX_JOB_ID` (never written by this code) the counter stays exhausted: it never wraps.
        let next_job = jobs.keys().next_back().map_or(1, |id| id.saturating_add(1)).max(loaded.next_job_id);
        let no_nodes = ClusterShape { cpus_per_node: vec![], mem_bytes_per_node: vec![], accepting: vec![] };
        let cosched = Coscheduler::replanning(settings.plan.clone(), no_nodes);
        let state = State {
            storage,
            jobs,
            live: BTreeMap::new(),
            nodes,
            next_job,
            cosched,
            monitor_tokens: crate::wire::auth::monitor_tokens::MonitorTokens::default(),
            pending_answers: BTreeMap::new(),
            next_ack: 1,
            slurm_refusals: std::collections::VecDeque::new(),
            slice_starts: SliceStartSkew::new(SKEW_SLICES_KEPT),
            status_changes: 0,
            status_written: None,
            history_pruned_at: None,
        };
        Ok(Controller { settings, state: Mutex::new(state) })
    }

    pub fn identity_for(&self, uid: u32, gid: u32) -> Identity {
        Identity { uid, gid, admin: uid == 0 || self.settings.admin_uids.contains(&uid) }
    }

    pub fn monitor_identity(&self, token: &str) -> Option<Identity> {
        self.state.lock().unwrap().monitor_tokens.identity(token, Instant::now())
    }

    /// Spend a monitor token that came in a URL for a fresh one standing for the same user (see `monitor`).
    pub fn exchange_monitor_token(&self, token: &str) -> Option<String> {
        let fresh = crate::job_tag::random_hex(16).ok()?;
        self.state.lock().unwrap().monitor_tokens.exchange(token, fresh, Instant::now())
    }

    /// Handle one user request.
    pub fn handle(&self, who: &Identity, request: Request) -> Reply {
        let outcome = match request {
            // These wait for the agent without holding the state.
            Request::AddPid { job, pid, node } => self.pid_change(who, job, pid, node, true),
            Request::RemovePid { job, pid, node } => self.pid_change(who, job, pid, node, false),
            Request::Logs { job } => self.logs(who, job),
            Request::Exec(r) => self.exec(who, r),
            Request::SlurmAttach { slurm_job, pid, node } => self.slurm_attach(who, slurm_job, pid, node),
            Request::SlurmEnd(r) => self.slurm_end(who, r),
            other => self.handle_locked(&mut self.state.lock().unwrap(), who, other),
        };
        match outcome {
            Ok(data) => Reply::ok(data),
            Err(message) => Reply::error(message),
        }
    }

    fn handle_locked(&self, state: &mut State, who: &Identity, request: Request) -> Outcome {
        match request {
            Request::Submit(r) => self.submit(state, who, r),
            Request::Register(r) => self.register(state, who, r),
            Request::SetClass { job, class } => self.set_class(state, who, job, &class),
            Request::SetResources { job, cpus_per_node, mem_bytes } => {
                self.set_resources(state, who, job, cpus_per_node, mem_bytes)
            }
            Request::Usage { job } => self.usage(state, who, job),
            Request::NodeLoad { node } => node_load(state, node.as_deref()),
            Request::Status {} => Ok(self.status_for(state, who).into()),
            Request::Suspend { job } => self.suspend_resume(state, who, job, true),
            Request::Resume { job } => self.suspend_resume(state, who, job, false),
            Request::Kill { job } => self.kill(state, who, job),
            Request::Signal { job, signal } => self.signal(state, who, job, &signal),
            Request::MonitorToken {} => self.monitor_token(state, who),
            Request::History(r) => Ok(self.history(state, who, &r).into()),
            Request::SlurmBegin(r) => self.slurm_begin(state, who, r),
            Request::AddPid { .. }
            | Request::SlurmAttach { .. }
            | Request::SlurmEnd(_)
            | Request::RemovePid { .. }
            | Request::Logs { .. }
            | Request::Exec(_)
            | Request::Auth { .. }
            | Request::Challenge { .. }
            | Request::AgentAuth { .. }
            | Request::AgentHello(_) => Err("this request is not valid here".into()),
        }
    }

    fn submit(&self, state: &mut State, who: &Identity, r: SubmitRequest) -> Outcome {
        let class = parse_class(&r.class)?;
        if !class.submit_allowed(who.admin) {
            return Err("permission denied: only administrators may submit express jobs".into());
        }
        if r.tasks == 0 {
            return Err("a job needs at least one task (-n)".into());
        }
        let cpus: u32 = state.nodes.iter().map(|n| n.cpus).sum();
        if r.tasks > cpus.max(1) {
            return Err(format!("-n {} is more tasks than the {cpus} CPUs of all nodes together", r.tasks));
        }
        if r.nodes.is_some_and(|n| n as usize > state.nodes.len()) {
            return Err(format!("--nodes {} is more than the {} nodes known", r.nodes.unwrap_or(0), state.nodes.len()));
        }
        if r.nodes == Some(0) || r.nodes.is_some_and(|n| n > r.tasks) {
            return Err(format!("--nodes must be between 1 and the number of tasks ({})", r.tasks));
        }
        if r.argv.is_empty() || r.argv[0].is_empty() {
            return Err("no command given".into());
        }
        let mut job = JobRecord::new(state.next_job, who, class, r.local, r.tasks);
        job.nodes = r.nodes;
        job.mem_bytes = r.mem_bytes;
        job.slice_opt_out = r.slice_opt_out;
        job.argv = r.argv;
        job.cwd = r.cwd;
        job.env = r.env;
        job.mpi = r.mpi;
        job.name = r.name;
        job.time_limit_s = r.time_limit_s;
        job.output_files = r.output_files;
        job.umask = r.umask;
        self.check_fits_ever(state, &job)?;
        self.insert_job(state, job).map(ReplyData::from)
    }

    fn register(&self, state: &mut State, who: &Identity, r: RegisterRequest) -> Outcome {
        let class = parse_class(&r.class)?;
        if !class.submit_allowed(who.admin) {
            return Err("permission denied: only administrators may register express jobs".into());
        }
        let node = match &r.node {
            Some(name) => name.clone(),
            None => state.nodes.first().map(|n| n.name.clone()).ok_or("no node agent is known yet")?,
        };
        let index = node_index(state, &node).ok_or_else(|| format!("unknown node {node:?}"))?;
        let cpus = r.cpus_per_node.max(r.min_cpus).max(1);
        if cpus > state.nodes[index].cpus {
            return Err(format!("node {node} has {} CPUs, the job asks for {cpus}", state.nodes[index].cpus));
        }
        let mut job = JobRecord::new(state.next_job, who, class, r.local, cpus);
        job.nodes = Some(1);
        job.mem_bytes = r.mem_bytes;
        job.registered = true;
        let placement = self.admit_registered(state, &job, &[index])?;
        let reply = self.insert_job(state, job)?;
        self.start_job(state, reply.job, placement);
        self.recompute_plan(state);
        self.send_schedules(state);
        Ok(reply.into())
    }

    /// Record a new job under the next id. Ids come from the controller alone: the job must carry `next_job`, which
    /// must not be used up, and no record may have it; the job must fit within the limits of jobs not over.
    fn insert_job(&self, state: &mut State, job: JobRecord) -> Result<SubmitReply, String> {
        let id = job.id;
        if id > MAX_JOB_ID {
            return Err(format!(
                "no new job can be recorded: every job id up to {MAX_JOB_ID} has been given out; nothing was changed"
            ));
        }
        if id != state.next_job || state.jobs.contains_key(&id) {
            return Err(format!("job id {id} is not the next free one: nothing was changed"));
        }
        self.check_job_limits(state, job.uid)?;
        state.storage.insert_job(&job)?;
        state.next_job = id + 1; // id <= MAX_JOB_ID < u64::MAX
        state.jobs.insert(id, job);
        self.replan(state);
        Ok(SubmitReply { job: id, state: state.jobs[&id].state })
    }

    /// Refuse a new job of `uid` beyond the bounds on jobs not over (each user's, and all users' together).
    fn check_job_limits(&self, state: &State, uid: u32) -> Result<(), String> {
        let limits = self.settings.job_limits;
        let live = || state.jobs.values().filter(|j| !j.state.is_over());
        let total = live().count();
        if total >= limits.total {
            return Err(format!(
                "job limit: {total} jobs are not over, the most all users may have (--max-jobs {})",
                limits.total
            ));
        }
        let theirs = live().filter(|j| j.uid == uid).count();
        if theirs >= limits.per_user {
            return Err(format!(
                "job limit: uid {uid} has {theirs} jobs not over, the most one user may have (--max-jobs-per-user {})",
                limits.per_user
            ));
        }
        Ok(())
    }

    /// Refuse a job that could not start even on an empty machine.
    fn check_fits_ever(&self, state: &State, job: &JobRecord) -> Result<(), String> {
        if state.nodes.is_empty() {
            return Err("no node agent has connected yet".into());
        }
        let mut shape = self.shape(state);
        shape.accepting = vec![true; shape.accepting.len()];
        match state.cosched.probe_alone(shape.clone(), plan_job(job, None)) {
            JobStatus::Queued => Err(format!(
                "the job can never run here: {} tasks{} with {} bytes per node on {} nodes of {:?} CPUs",
                job.tasks,
                job.nodes.map(|n| format!(" on {n} nodes")).unwrap_or_default(),
                job.mem_bytes,
                shape.cpus_per_node.len(),
                shape.cpus_per_node
            )),
            JobStatus::Placed { .. } => Ok(()),
        }
    }

    fn owned_job<'a>(state: &'a State, who: &Identity, id: u64) -> Result<&'a JobRecord, String> {
        let job = state.jobs.get(&id).ok_or_else(|| format!("no job {id}"))?;
        who.may_act_on(job)?;
        Ok(job)
    }

    /// Ask the job's agent to move a process in or out, and answer once the agent confirms (a launcher may let
    /// the process run only when it is in the job).
    fn pid_change(&self, who: &Identity, id: u64, pid: i32, node: Option<String>, add: bool) -> Outcome {
        if !add && !who.admin {
            // As with Slurm's cgroups: a user's process leaves its job only by ending, so that nobody's task can
            // escape its job's slices (or its kill) while the job keeps its row.
            return Err("permission denied: only administrators take a process out of a job; a process leaves its \
                        job by ending"
                .into());
        }
        let node = Self::pid_change_node(&self.state.lock().unwrap(), who, id, pid, node)?;
        // Who owns the pid is checked by the agent of the node where it lives, never here.
        self.move_pid(id, pid, node, (!who.admin).then_some(who.uid), add)
    }

    /// Have `node`'s agent move `pid` (which must belong to `owner`, if given) into or out of job `id`.
    fn move_pid(&self, id: u64, pid: i32, node: String, owner: Option<u32>, add: bool) -> Outcome {
        self.ask_agent(&node, AnswerKind::PidMoved, |ack| {
            if add {
                ToAgent::AddPid { job: id, pid, ack, owner }
            } else {
                ToAgent::RemovePid { job: id, pid, ack, owner }
            }
        })
        .map_err(|e| format!("node {node}: {e}"))?;
        Ok(PidReply { job: id, pid, node }.into())
    }

    /// Send an agent a request that it answers, and wait for the answer without holding the state.
    fn ask_agent(&self, node: &str, kind: AnswerKind, message: impl FnOnce(u64) -> ToAgent) -> AgentAnswer {
        self.ask_agent_within(node, kind, AGENT_ANSWER_TIMEOUT, message)
    }

    /// `ask_agent`, waiting at most `timeout`.
    fn ask_agent_within(
        &self,
        node: &str,
        kind: AnswerKind,
        timeout: Duration,
        message: impl FnOnce(u64) -> ToAgent,
    ) -> AgentAnswer {
        let (answer, ack) = self.send_asking(node, kind, 0, message)?;
        answer.recv_timeout(timeout).unwrap_or_else(|_| {
            self.state.lock().unwrap().pending_answers.remove(&ack);
            Err(format!("no answer within {} s", timeout.as_secs()))
        })
    }

    /// Send a request whose answer is due when something ends (`Exec`): no timeout, but a node whose agent goes
    /// away fails it (`agent_disconnected`).
    fn ask_agent_until_done(&self, node: &str, requester: u32, message: impl FnOnce(u64) -> ToAgent) -> AgentAnswer {
        let (answer, _) = self.send_asking(node, AnswerKind::ExecEnded, requester, message)?;
        answer.recv().unwrap_or_else(|_| Err("the controller dropped the request".into()))
    }

    /// Send `node`'s agent a request numbered with a fresh acknowledgement, which only that agent may answer, with
    /// an answer of `kind`. A remote command is refused when its requester has too many waiting already.
    fn send_asking(
        &self,
        node: &str,
        kind: AnswerKind,
        requester: u32,
        message: impl FnOnce(u64) -> ToAgent,
    ) -> Result<(mpsc::Receiver<AgentAnswer>, u64), String> {
        let mut state = self.state.lock().unwrap();
        if kind == AnswerKind::ExecEnded {
            self.check_waiting_execs(&state, requester)?;
        }
        let ack = state.next_ack;
        state.next_ack += 1;
        let (sender, answer) = mpsc::channel();
        state.pending_answers.insert(ack, Pending { node: node.to_string(), kind, requester, sender });
        if let Err(e) = send_to(&state, node, &message(ack)) {
            state.pending_answers.remove(&ack);
            return Err(e);
        }
        Ok((answer, ack))
    }

    /// Each waiting remote command holds a connection of its user: beyond the bound, the user would have none left
    /// for anything else (not even to kill the job).
    fn check_waiting_execs(&self, state: &State, requester: u32) -> Result<(), String> {
        let limit = self.settings.job_limits.waiting_execs_per_user;
        let waiting = state
            .pending_answers
            .values()
            .filter(|p| p.kind == AnswerKind::ExecEnded && p.requester == requester)
            .count();
        if waiting >= limit {
            return Err(format!(
                "uid {requester} has {waiting} remote commands waiting, the most one user may (a connection each; \
                 the rest stay for other requests)"
            ));
        }
        Ok(())
    }

    /// Run a command in the caller's job on one of its nodes (an MPI launcher's remote daemon) and answer with
    /// its exit code once it ends.
    fn exec(&self, who: &Identity, r: ExecRequest) -> Outcome {
        let (uid, gid, umask) = {
            let state = self.state.lock().unwrap();
            let job = Self::owned_job(&state, who, r.job)?;
            if job.state != JobState::Running && job.state != JobState::Suspended {
                return Err(format!("job {} is {}: commands run only in a running job", r.job, job.state.name()));
            }
            if job.on_node(&r.node).is_none() {
                return Err(format!("job {} has no CPUs on node {}", r.job, r.node));
            }
            if r.argv.first().is_none_or(|program| program.is_empty()) {
                return Err("no command given".into());
            }
            (job.uid, job.gid, job.umask)
        };
        let (job, node) = (r.job, r.node.clone());
        let ended = self.ask_agent_until_done(&r.node, who.uid, |ack| ToAgent::Exec {
            job,
            ack,
            uid,
            gid,
            argv: r.argv,
            cwd: r.cwd,
            env: r.env,
            umask,
        });
        match ended.map_err(|e| format!("node {node}: {e}"))? {
            AgentAnswerData::ExecEnded(exit_code) => Ok(ExecReply { job, node, exit_code }.into()),
            _ => Err(format!("node {node}: an answer to another request")),
        }
    }

    /// Check a pid change and name the node it goes to.
    fn pid_change_node(
        state: &State,
        who: &Identity,
        id: u64,
        pid: i32,
        node: Option<String>,
    ) -> Result<String, String> {
        let job = Self::owned_job(state, who, id)?;
        if pid <= 0 {
            return Err(format!("invalid pid {pid}"));
        }
        if job.state.is_over() {
            return Err(format!("job {id} is {}", job.state.name()));
        }
        let node = match node {
            Some(n) => n,
            None => job.placement.first().map(|p| p.node.clone()).ok_or("the job has no node yet")?,
        };
        if job.on_node(&node).is_none() {
            return Err(format!("job {id} has no CPUs on node {node}"));
        }
        Ok(node)
    }

    fn set_class(&self, state: &mut State, who: &Identity, id: u64, class: &str) -> Outcome {
        let to = parse_class(class)?;
        let job = Self::owned_job(state, who, id)?;
        if !job.class.change_allowed(to, who.admin) {
            return Err(format!(
                "permission denied: only administrators may raise a job's class ({} to {})",
                job.class.name(),
                to.name()
            ));
        }
        self.update_job(state, id, |j| j.class = to)?;
        Ok(ClassReply { job: id, class: to }.into())
    }

    fn set_resources(
        &self,
        state: &mut State,
        who: &Identity,
        id: u64,
        cpus: Option<u32>,
        mem: Option<u64>,
    ) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        if job.state != JobState::Queued && cpus.is_some_and(|c| c != job.tasks) {
            return Err(format!("job {id} has started: its CPU count cannot change now"));
        }
        if cpus == Some(0) {
            return Err("a job needs at least one CPU".into());
        }
        let mut changed = job.clone();
        if let Some(c) = cpus {
            changed.tasks = c;
        }
        if let Some(m) = mem {
            changed.mem_bytes = m;
        }
        self.check_fits_ever(state, &changed)?;
        self.update_job(state, id, |j| *j = changed)?;
        Ok(ResourcesReply { job: id }.into())
    }

    fn usage(&self, state: &State, who: &Identity, id: u64) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        let live = state.live.get(&id);
        let pids: Vec<i32> = live.map(|l| l.usage.values().flat_map(|u| u.pids.clone()).collect()).unwrap_or_default();
        Ok(UsageReply {
            job: id,
            state: job.state,
            cpu_ns: live.map_or(0, |l| l.cpu_ns),
            pids,
            slice_share: self.slice_share(state, id),
        }
        .into())
    }

    fn suspend_resume(&self, state: &mut State, who: &Identity, id: u64, suspend: bool) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        let (from, to) =
            if suspend { (JobState::Running, JobState::Suspended) } else { (JobState::Suspended, JobState::Running) };
        if job.state != from {
            return Err(format!("job {id} is {}, not {}", job.state.name(), from.name()));
        }
        if !suspend && job.held_by_admin && !who.admin {
            return Err(format!(
                "permission denied: an administrator suspended job {id}; only an administrator may resume it"
            ));
        }
        self.update_job(state, id, |j| {
            j.state = to;
            j.held_by_admin = suspend && who.admin;
        })?;
        Ok(JobStateReply { job: id, state: to }.into())
    }

    fn kill(&self, state: &mut State, who: &Identity, id: u64) -> Outcome {
        let job = Self::owned_job(state, who, id)?.clone();
        if job.state.is_over() {
            return Err(format!("job {id} is already {}", job.state.name()));
        }
        if job.state == JobState::Queued {
            self.update_job(state, id, |j| j.end(JobState::Killed))?;
            return Ok(KillReply { job: id, state: KillState::Killed }.into());
        }
        self.update_job(state, id, |j| j.error = Some(KILLED.into()))?;
        self.send_terminate(state, &job);
        Ok(KillReply { job: id, state: KillState::Killing }.into())
    }

    /// Tell every node of the job to end it; a node whose agent is away is told when it comes back.
    fn send_terminate(&self, state: &State, job: &JobRecord) {
        let grace_ms = self.settings.kill_wait.as_millis() as u64;
        for p in job.placement.iter().filter(|p| !job.ended_on.contains(&p.node)) {
            let _ = send_to(state, &p.node, &ToAgent::Terminate { job: job.id, grace_ms });
        }
    }

    fn signal(&self, state: &State, who: &Identity, id: u64, name: &str) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        let signal = parse_signal(name)?;
        if job.state != JobState::Running && job.state != JobState::Suspended {
            return Err(format!("job {id} is {}: no process to signal", job.state.name()));
        }
        for p in &job.placement {
            send_to(state, &p.node, &ToAgent::Signal { job: id, signal: signal as i32 })?;
        }
        Ok(SignalReply { job: id, signal: signal.as_str().to_string() }.into())
    }

    /// The tails of the job's logs, read by the agents that hold them; a node whose agent cannot answer gets an
    /// entry saying why instead.
    fn logs(&self, who: &Identity, id: u64) -> Outcome {
        let (placement, owner) = {
            let state = self.state.lock().unwrap();
            let job = Self::owned_job(&state, who, id)?;
            (job.placement.clone(), job.uid)
        };
        let mut files = Vec::new();
        for p in placement {
            let node = p.node.clone();
            let read = |ack| ToAgent::ReadLogs { job: id, ranks: p.ranks, ack, owner: Some(owner) };
            match self.ask_agent(&node, AnswerKind::Logs, read) {
                Ok(AgentAnswerData::Logs(tails)) => {
                    files.extend(tails.into_iter().map(|tail| LogFile::Tail { node: node.clone(), tail }));
                }
                Ok(_) => files.push(LogFile::Unavailable { node, error: "an answer to another request".into() }),
                Err(error) => files.push(LogFile::Unavailable { node, error }),
            }
        }
        Ok(LogsReply { job: id, files }.into())
    }

    /// For a request: change a job, persist it, and replan; a change that cannot be persisted is not made.
    fn update_job(&self, state: &mut State, id: u64, change: impl FnOnce(&mut JobRecord)) -> Result<(), String> {
        let mut job = state.jobs[&id].clone();
        change(&mut job);
        state.storage.save_job(&job)?;
        state.jobs.insert(id, job);
        self.replan(state);
        Ok(())
    }

    /// For an event (what an agent saw happen): change a job and replan; it is persisted now or once storage
    /// works again.
    fn update_job_or_hold(&self, state: &mut State, id: u64, change: impl FnOnce(&mut JobRecord)) {
        let Some(job) = state.jobs.get(&id) else { return };
        let mut job = job.clone();
        change(&mut job);
        state.storage.save_job_or_hold(&job);
        state.jobs.insert(id, job);
        self.replan(state);
    }

    fn shape(&self, state: &State) -> ClusterShape {
        ClusterShape {
            cpus_per_node: state.nodes.iter().map(|n| n.cpus).collect(),
            mem_bytes_per_node: state.nodes.iter().map(|n| n.mem_bytes).collect(),
            accepting: state.nodes.iter().map(|n| n.link.is_some()).collect(),
        }
    }

    /// Recompute the plan, start jobs that got room, and send every agent its schedule.
    fn replan(&self, state: &mut State) {
        self.recompute_plan(state);
        let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
        let started: Vec<(u64, Vec<NodePlacement>)> = full_plan(state)
            .jobs
            .iter()
            .filter_map(|jp| match &jp.status {
                JobStatus::Placed { cpus, .. } if state.jobs[&jp.id.0].placement.is_empty() => {
                    Some((jp.id.0, with_ranks(cpus, &names)))
                }
                _ => None,
            })
            .collect();
        let any_started = !started.is_empty();
        for (id, placement) in started {
            self.start_job(state, id, placement);
        }
        if any_started {
            // The placements just fixed are no longer choices of the plan.
            self.recompute_plan(state);
        }
        self.send_schedules(state);
    }

    fn start_job(&self, state: &mut State, id: u64, placement: Vec<NodePlacement>) {
        let mut job = state.jobs[&id].clone();
        job.placement = placement;
        job.state = if job.state == JobState::Suspended { JobState::Suspended } else { JobState::Running };
        job.started_unix_ms = Some(unix_ms_now());
        if let Some(error) = missing_agent_features(state, &job) {
            job.error = Some(error);
            let nodes: Vec<String> = job.placement.iter().map(|p| p.node.clone()).collect();
            state.storage.save_job_or_hold(&job);
            state.jobs.insert(id, job);
            for node in nodes {
                self.node_ended(state, id, &node, Some(127));
            }
            return;
        }
        let messages: Vec<(String, ToAgent)> =
            job.placement.iter().map(|p| (p.node.clone(), ToAgent::Start(start_message(&job, p)))).collect();
        state.storage.save_job_or_hold(&job);
        state.jobs.insert(id, job);
        state.live.entry(id).or_default().progress_at = Some(Instant::now());
        for (node, message) in messages {
            if let Err(e) = send_to(state, &node, &message) {
                eprintln!("cosched controller: starting job {id} on {node}: {e}");
            }
        }
    }

    fn recompute_plan(&self, state: &mut State) {
        // The time out of their slots under the plan that held until now.
        let now = Instant::now();
        slurm_time::accrue(state, now);
        time_limit::accrue(state, now);
        state.status_changes += 1;
        let shape = self.shape(state);
        let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
        let index = |name: &str| names.iter().position(|n| n == name).map(|i| i as u32);
        let plan_jobs = plan_jobs(state, index);
        state.cosched.sync(shape, plan_jobs);
    }

    /// Admission for a registered job: CPUs on `nodes` now, from the plan with every other job in it, or a
    /// refusal. Its processes exist already, so it cannot wait in the queue; it never takes a row a started job
    /// holds.
    fn admit_registered(&self, state: &State, job: &JobRecord, nodes: &[usize]) -> Result<Vec<NodePlacement>, String> {
        let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
        let mut shape = self.shape(state);
        shape.accepting = (0..names.len()).map(|i| nodes.contains(&i) && shape.accepting[i]).collect();
        match state.cosched.probe(shape, plan_job(job, None)) {
            JobStatus::Placed { cpus, .. } => Ok(with_ranks(&cpus, &names)),
            _ => {
                let wanted: Vec<&str> = nodes.iter().map(|&i| names[i].as_str()).collect();
                Err(format!(
                    "no room on {} for {} CPUs now (matrix rows, memory or local slots are taken); \
                     a registered job must fit at once",
                    wanted.join(","),
                    job.tasks
                ))
            }
        }
    }

    fn send_schedules(&self, state: &mut State) {
        for i in 0..state.nodes.len() {
            let schedule = self.node_schedule(state, &state.nodes[i].name);
            if state.nodes[i].last_schedule.as_ref() == Some(&schedule) || state.nodes[i].link.is_none() {
                continue;
            }
            let name = state.nodes[i].name.clone();
            if send_to(state, &name, &ToAgent::Schedule(schedule.clone())).is_ok() {
                state.nodes[i].last_schedule = Some(schedule);
            }
        }
    }

    fn node_schedule(&self, state: &State, node: &str) -> Schedule {
        let here = |id: &JobId| state.jobs.get(&id.0).is_some_and(|j| j.on_node(node).is_some());
        let ids = |list: &[JobId]| list.iter().filter(|id| here(id)).map(|id| id.0).collect::<Vec<u64>>();
        let jobs: Vec<u64> = state
            .jobs
            .values()
            .filter(|j| !j.state.is_over() && j.on_node(node).is_some() && !j.ended_on.iter().any(|n| n == node))
            .map(|j| j.id)
            .collect();
        Schedule {
            slice_ns: self.settings.slice_ns,
            rows: full_plan(state).rows.iter().map(|row| ids(row)).collect(),
            always: ids(&full_plan(state).always),
            suspended: jobs.iter().copied().filter(|id| state.jobs[id].state == JobState::Suspended).collect(),
            jobs,
        }
    }

    /// Keep in the record of a job about to end what its history shows of its use: its CPU time so far and its
    /// share of the slices.
    fn keep_usage(&self, state: &State, job: &mut JobRecord) {
        job.cpu_ns = state.live.get(&job.id).map_or(0, JobLive::total_cpu_ns).max(job.cpu_ns);
        job.slice_share = self.slice_share(state, job.id);
    }

    fn slice_share(&self, state: &State, id: u64) -> f64 {
        let plan = full_plan(state);
        plan.job(JobId(id)).map_or(0.0, |j| j.slice_share(plan.rows.len()))
    }

    /// An agent said hello: accept it for its node and return the node's index. Nothing it claims counts before
    /// the whole hello is accepted (`check_hello`).
    pub fn agent_connected(&self, hello: &AgentHello, writer: AgentWriter) -> Result<u32, String> {
        let mut state = self.state.lock().unwrap();
        let index = match check_hello(&state, &self.settings.nodes, hello)? {
            Some(index) => index,
            None => {
                state.nodes.push(Node::new(hello.node.clone(), hello.cpus, hello.mem_bytes));
                state.nodes.len() - 1
            }
        };
        // Kept even when storage fails: refusing the agent would leave its jobs unscheduled.
        let row = NodeRow { name: hello.node.clone(), cpus: hello.cpus, mem_bytes: hello.mem_bytes };
        state.storage.save_node_or_hold(&row);
        let node = &mut state.nodes[index];
        node.cpus = hello.cpus;
        node.mem_bytes = hello.mem_bytes;
        node.link = Some(writer);
        node.freezer = hello.freezer.clone();
        node.features = hello.features.clone();
        node.last_schedule = None;
        node.ignored_events = 0;
        let _ = send_to(&state, &hello.node, &ToAgent::Welcome { node_index: index as u32 });
        self.reconcile_adopted(&mut state, hello);
        self.replan(&mut state);
        Ok(index as u32)
    }

    /// Jobs the database runs on this node but the agent does not have are over there.
    fn reconcile_adopted(&self, state: &mut State, hello: &AgentHello) {
        let gone: Vec<u64> = state
            .jobs
            .values()
            .filter(|j| !j.state.is_over() && j.on_node(&hello.node).is_some() && !j.ended_on.contains(&hello.node))
            .filter(|j| !hello.adopted.iter().any(|a| a.job == j.id))
            .filter(|j| !j.registered)
            .map(|j| j.id)
            .collect();
        for id in gone {
            self.node_ended(state, id, &hello.node, None);
        }
        // Cgroups of jobs over there (their processes could not be ended before, or the end never reached the
        // agent): whatever they hold ends now.
        let over: Vec<u64> = hello
            .adopted
            .iter()
            .filter(|a| state.jobs.get(&a.job).is_some_and(|j| j.state.is_over() || j.ended_on.contains(&hello.node)))
            .map(|a| a.job)
            .collect();
        for job in over {
            let _ = send_to(state, &hello.node, &ToAgent::Forget { job, ack: None });
        }
        let killing: Vec<JobRecord> = state
            .jobs
            .values()
            .filter(|j| !j.state.is_over() && j.on_node(&hello.node).is_some())
            .filter(|j| j.error.as_deref() == Some(KILLED) || time_limit::timed_out(j))
            .cloned()
            .collect();
        for job in killing {
            self.send_terminate(state, &job);
        }
    }

    pub fn agent_disconnected(&self, node: &str) {
        let mut state = self.state.lock().unwrap();
        if let Some(i) = node_index(&state, node) {
            state.nodes[i].link = None;
            state.nodes[i].last_schedule = None;
        }
        state.status_changes += 1;
        // Nobody else may answer what was asked of this agent.
        let lost: Vec<u64> =
            state.pending_answers.iter().filter(|(_, p)| p.node == node).map(|(&ack, _)| ack).collect();
        for ack in lost {
            if let Some(pending) = state.pending_answers.remove(&ack) {
                let _ = pending
                    .sender
                    .send(Err("its agent went away; the answer (or the command's end) is unknown".into()));
            }
        }
    }

    /// What an agent says. It speaks only for its own node: about jobs placed there and not ended there, and in
    /// answer to requests sent to it; anything else is ignored (and logged).
    pub fn agent_event(&self, node: &str, event: FromAgent) {
        let mut state = self.state.lock().unwrap();
        let heard = match event {
            FromAgent::Report {
                jobs,
                load_avg,
                switches,
                switch_errors,
                slice_starts,
                switch_latencies_ns,
                stuck_jobs,
            } => {
                let slice_starts = bounded_slice_starts(slice_starts);
                let latencies_ns = &switch_latencies_ns[..switch_latencies_ns.len().min(SWITCHES_PER_REPORT)];
                note_switch_times(&mut state, node, &slice_starts, latencies_ns);
                let usage_heard =
                    self.node_report(&mut state, node, (load_avg, switches, switch_errors), slice_starts, jobs);
                self.note_stuck_jobs(&mut state, node, stuck_jobs) && usage_heard
            }
            FromAgent::Ended { job, cpu_ns: Some(cpu_ns), .. } if !runs_on(&state, job, node) => {
                final_cpu_time(&mut state, job, node, cpu_ns)
            }
            FromAgent::Ended { job, exit_code, error, cpu_ns } if runs_on(&state, job, node) => {
                if let Some(cpu_ns) = cpu_ns {
                    final_cpu_time(&mut state, job, node, cpu_ns);
                }
                if let Some(error) = error {
                    self.update_job_or_hold(&mut state, job, |j| {
                        j.error.get_or_insert_with(|| format!("{node}: {error}"));
                    });
                }
                self.node_ended(&mut state, job, node, exit_code);
                true
            }
            FromAgent::Failed { job, error } if runs_on(&state, job, node) => {
                self.update_job_or_hold(&mut state, job, |j| j.error = Some(format!("{node}: {error}")));
                self.node_ended(&mut state, job, node, Some(127));
                true
            }
            FromAgent::Ended { .. } | FromAgent::Failed { .. } => false,
            FromAgent::PidMoved { ack, error } => {
                answer(&mut state, node, ack, AnswerKind::PidMoved, error.map_or(Ok(AgentAnswerData::PidMoved), Err))
            }
            FromAgent::Logs { ack, files } => {
                answer(&mut state, node, ack, AnswerKind::Logs, Ok(AgentAnswerData::Logs(files)))
            }
            FromAgent::ExecEnded { ack, exit_code, error } => {
                let ended = match error {
                    Some(e) => Err(e),
                    None => Ok(AgentAnswerData::ExecEnded(exit_code.unwrap_or(-1))),
                };
                answer(&mut state, node, ack, AnswerKind::ExecEnded, ended)
            }
            FromAgent::Forgotten { ack, stuck } => {
                // What is stuck is noted before the request waiting for it (an epilog) returns, not at the node's
                // next report; and only in answer to a request sent to that node.
                let asked =
                    state.pending_answers.get(&ack).is_some_and(|p| p.node == node && p.kind == AnswerKind::Forgotten);
                let noted = !asked || stuck.as_ref().is_none_or(|s| self.note_stuck_job(&mut state, node, s));
                answer(&mut state, node, ack, AnswerKind::Forgotten, Ok(AgentAnswerData::Forgotten(stuck))) && noted
            }
        };
        if !heard {
            ignored_event(&mut state, node);
        }
    }

    /// A node's periodic report: its own figures, and the usage of the jobs that run there (usage of any other job
    /// is ignored). False when some of it was.
    fn node_report(
        &self,
        state: &mut State,
        node: &str,
        (load_avg, switches, switch_errors): (f64, u64, u64),
        slice_starts: Vec<(u64, u64)>,
        jobs: Vec<JobUsage>,
    ) -> bool {
        let Some(i) = node_index(state, node) else { return false };
        let figures = (load_avg, switches, switch_errors);
        let n = &mut state.nodes[i];
        let mut changed = (n.load_avg, n.switches, n.switch_errors) != figures || !slice_starts.is_empty();
        (n.load_avg, n.switches, n.switch_errors) = figures;
        for (slice, offset_ns) in slice_starts {
            state.slice_starts.add(slice, offset_ns);
        }
        let count = jobs.len();
        let ours: Vec<JobUsage> = jobs.into_iter().filter(|u| runs_on(state, u.job, node)).collect();
        let all_ours = ours.len() == count;
        for usage in ours {
            let running = state.jobs.get(&usage.job).is_some_and(|j| j.state == JobState::Running);
            let live = state.live.entry(usage.job).or_default();
            live.had_process |= !usage.pids.is_empty();
            // Running there again (a Slurm job's next step, another launch on an MPI helper node): not final.
            live.cpu_final_on.remove(node);
            changed |= live.usage.get(node) != Some(&usage);
            live.usage.insert(node.to_string(), usage);
            let all_frozen = running && live.usage.values().all(|u| u.frozen);
            live.frozen_since = if all_frozen { live.frozen_since.or(Some(Instant::now())) } else { None };
        }
        if changed {
            state.status_changes += 1;
        }
        self.track_idle(state);
        all_ours
    }

    /// What a node says of the cgroups it could not empty, for jobs placed there (others are ignored): kept with
    /// the node for `status` and `/metrics` while the node reports them, and said once in the job's record and the
    /// controller's log. False when some of it was ignored.
    fn note_stuck_jobs(&self, state: &mut State, node: &str, stuck_jobs: Vec<StuckJob>) -> bool {
        let Some(i) = node_index(state, node) else { return false };
        let count = stuck_jobs.len();
        let ours: Vec<StuckJob> =
            stuck_jobs.into_iter().filter(|s| placed_on(state, s.job, node)).take(STUCK_JOBS_KEPT).collect();
        for stuck in &ours {
            note_left_behind(state, node, stuck);
        }
        let all_ours = ours.len() == count;
        if state.nodes[i].stuck_jobs != ours {
            state.nodes[i].stuck_jobs = ours;
            state.status_changes += 1;
        }
        all_ours
    }

    /// One stuck cgroup a node answered a `Forget` with: noted as a report's would be, until its next report.
    fn note_stuck_job(&self, state: &mut State, node: &str, stuck: &StuckJob) -> bool {
        let Some(i) = node_index(state, node).filter(|_| placed_on(state, stuck.job, node)) else { return false };
        note_left_behind(state, node, stuck);
        let listed = &mut state.nodes[i].stuck_jobs;
        if !listed.iter().any(|s| s.job == stuck.job) && listed.len() < STUCK_JOBS_KEPT {
            listed.push(stuck.clone());
            state.status_changes += 1;
        }
        true
    }

    fn node_ended(&self, state: &mut State, id: u64, node: &str, exit_code: Option<i32>) {
        let Some(job) = state.jobs.get(&id) else { return };
        if job.state.is_over() || job.ended_on.iter().any(|n| n == node) {
            return;
        }
        if job.slurm_job.is_some() {
            return; // its nodes empty between job steps; Slurm's epilog ends it (`slurm_end`)
        }
        let mut job = job.clone();
        match job.launcher_node() {
            // An MPI job's other nodes empty whenever its daemons end: the job goes on while its launcher runs.
            Some(launcher) if launcher != node => return,
            Some(_) => self.end_mpi_helpers(state, &mut job),
            None => {}
        }
        job.ended_on.push(node.to_string());
        if exit_code.is_some_and(|c| c != 0) || job.exit_code.is_none() {
            job.exit_code = exit_code.or(job.exit_code);
        }
        if job.placement.iter().all(|p| job.ended_on.contains(&p.node)) {
            let ended = match (&job.error, job.exit_code) {
                (Some(e), _) if e == KILLED => JobState::Killed,
                (Some(_), _) => JobState::Failed,
                (None, Some(code)) if code != 0 => {
                    job.error = Some(exit_reason(code));
                    JobState::Failed
                }
                _ => JobState::Finished,
            };
            self.keep_usage(state, &mut job);
            job.end(ended);
        }
        let _ = send_to(state, node, &ToAgent::Forget { job: id, ack: None });
        state.storage.save_job_or_hold(&job);
        state.jobs.insert(id, job);
        self.replan(state);
    }

    /// An MPI job's launcher has ended: whatever it started on the other nodes ends too, and those nodes are done.
    fn end_mpi_helpers(&self, state: &State, job: &mut JobRecord) {
        let grace_ms = self.settings.kill_wait.as_millis() as u64;
        let launcher = job.launcher_node().map(str::to_string);
        for p in job.placement.iter().filter(|p| Some(&p.node) != launcher.as_ref()) {
            let _ = send_to(state, &p.node, &ToAgent::Terminate { job: job.id, grace_ms });
            let _ = send_to(state, &p.node, &ToAgent::Forget { job: job.id, ack: None });
            job.ended_on.push(p.node.clone());
        }
    }

    /// Gang jobs that used no CPU while they had slices for `idle_revert` run
    /// outside the matrix; after `idle_forget` they become local for good.
    fn track_idle(&self, state: &mut State) {
        let now = Instant::now();
        let mut changes: Vec<(u64, bool, bool)> = Vec::new();
        for job in state.jobs.values().filter(|j| j.state == JobState::Running && j.mode == Mode::Gang) {
            let live = state.live.entry(job.id).or_default();
            let cpu_ns = live.total_cpu_ns();
            // "No CPU" means under 1 % of one CPU since the last progress: a
            // sleeping process still spends a few µs at every freeze and thaw.
            let since_ns = live.progress_at.map_or(0, |at| now.duration_since(at).as_nanos() as u64);
            if cpu_ns.saturating_sub(live.cpu_ns) > since_ns / IDLE_CPU_SHARE_DIVISOR || live.progress_at.is_none() {
                live.cpu_ns = cpu_ns;
                live.progress_at = Some(now);
                if job.idle {
                    changes.push((job.id, false, false));
                }
                continue;
            }
            let quiet = now.duration_since(live.progress_at.unwrap_or(now));
            if quiet >= self.settings.idle_forget {
                changes.push((job.id, true, true));
            } else if quiet >= self.settings.idle_revert && !job.idle {
                changes.push((job.id, true, false));
            }
        }
        for (id, idle, forget) in changes {
            self.update_job_or_hold(state, id, |j| {
                j.idle = idle;
                if forget {
                    j.mode = Mode::Local;
                    j.idle = false;
                }
            });
        }
    }

    /// Periodic work: storage checks, repairs and backups; empty registrations past their grace; the status
    /// document, when something in it changed.
    pub fn tick(&self) {
        let (status, fingerprint) = {
            let mut state = self.state.lock().unwrap();
            maintain_storage(&mut state);
            self.prune_history(&mut state);
            self.keep_time_limits(&mut state);
            self.end_empty_registrations(&mut state);
            let fingerprint = (state.status_changes, self.listed_jobs(&state).count(), state.storage.status());
            if state.status_written.as_ref() == Some(&fingerprint) {
                return;
            }
            (self.status_of(&state), fingerprint)
        };
        let path = self.settings.status_path();
        let tmp = path.with_extension("json.tmp");
        // The document lists every user's jobs: root's alone to read, like the database.
        let written =
            crate::controller::db::write_private(&tmp, &serde_json::to_vec_pretty(&status).unwrap_or_default())
                .and_then(|_| std::fs::rename(&tmp, &path));
        match written {
            Ok(()) => self.state.lock().unwrap().status_written = Some(fingerprint),
            Err(e) => eprintln!("cosched controller: status document {}: {e}", path.display()),
        }
    }

    /// A registered job (not Slurm's) that no process has joined within `empty_job_grace` of its start ends, as if
    /// killed: an empty registration must not hold a matrix row for ever. Its nodes must all have reported it empty.
    fn end_empty_registrations(&self, state: &mut State) {
        let grace_ms = self.settings.empty_job_grace.as_millis() as u64;
        let now_ms = unix_ms_now();
        let empty: Vec<JobRecord> = state
            .jobs
            .values()
            .filter(|j| j.registered && j.slurm_job.is_none() && !j.state.is_over() && j.error.is_none())
            .filter(|j| j.started_unix_ms.is_some_and(|started| now_ms.saturating_sub(started) >= grace_ms))
            .filter(|j| never_joined(state, j))
            .cloned()
            .collect();
        let reason = format!(
            "no process joined the job within {} s of its registration (--empty-job-grace-s)",
            self.settings.empty_job_grace.as_secs()
        );
        for job in empty {
            self.update_job_or_hold(state, job.id, |j| j.error = Some(reason.clone()));
            self.send_terminate(state, &job);
        }
    }

    /// The status as `who` may see it: with `private_data`, other users' commands are hidden from non-admins.
    fn status_for(&self, state: &State, who: &Identity) -> StatusReply {
        let mut status = self.status_of(state);
        self.hide_others_commands(who, &mut status.jobs);
        status
    }

    /// With `private_data`, other users' commands are hidden from non-admins.
    fn hide_others_commands(&self, who: &Identity, jobs: &mut [StatusJob]) {
        if self.settings.private_data && !who.admin {
            for job in jobs.iter_mut().filter(|job| job.uid != who.uid) {
                job.command = HIDDEN.into();
                // Named or not: an empty name left as it is would tell which jobs have one.
                job.name = HIDDEN.into();
            }
        }
    }

    /// The history as `who` may see it (as `status` shows jobs): the newest `limit` jobs that match, oldest first.
    fn history(&self, state: &State, who: &Identity, r: &HistoryRequest) -> HistoryReply {
        let limit = r.limit.unwrap_or(DEFAULT_HISTORY_JOBS).min(MAX_HISTORY_JOBS) as usize;
        // Sorted, so that each job costs a search of the names, not a pass over them.
        let (mut ids, mut uids) = (r.jobs.clone(), r.users.clone());
        ids.sort_unstable();
        uids.sort_unstable();
        let matches = |j: &&JobRecord| {
            (ids.is_empty() || ids.binary_search(&j.id).is_ok())
                && (uids.is_empty() || uids.binary_search(&j.uid).is_ok())
                && (r.states.is_empty() || r.states.contains(&j.state))
                && r.since_unix_ms.is_none_or(|since| j.ended_unix_ms.is_none_or(|end| end >= since))
                && r.until_unix_ms.is_none_or(|until| j.submitted_unix_ms < until)
        };
        let (mut jobs, mut bytes, mut more) = (Vec::new(), 0, false);
        for record in state.jobs.values().rev().filter(matches) {
            let mut job = self.status_job(state, record);
            // Whole commands are for `status`: the history lists each as an ended job's record keeps it.
            job.command = crate::wire::jobs::cut_to_json_bytes(&job.command, crate::wire::jobs::ENDED_COMMAND_BYTES);
            self.hide_others_commands(who, std::slice::from_mut(&mut job));
            bytes += serde_json::to_vec(&job).map_or(0, |json| json.len());
            if jobs.len() == limit || bytes > MAX_HISTORY_REPLY_BYTES {
                more = true;
                break;
            }
            jobs.push(job);
        }
        jobs.reverse();
        HistoryReply { jobs, more, keep_history_s: self.settings.keep_history.as_secs() }
    }

    /// Jobs that ended more than `keep_history` ago leave memory and the database (looked for once a second).
    fn prune_history(&self, state: &mut State) {
        let now = Instant::now();
        if state.history_pruned_at.is_some_and(|at| now.duration_since(at) < HISTORY_PRUNE_PERIOD) {
            return;
        }
        state.history_pruned_at = Some(now);
        let kept_since_ms = unix_ms_now().saturating_sub(self.settings.keep_history.as_millis() as u64);
        // A job whose cgroup may still be on a node stays: a node that reports it stuck, or whose agent is away
        // (it may come back with the cgroup, which only a known job's record lets it keep).
        let may_have_cgroup = |j: &JobRecord| {
            j.placement.iter().any(|p| {
                let node = state.nodes.iter().find(|n| n.name == p.node);
                node.is_none_or(|n| n.link.is_none() || n.stuck_jobs.iter().any(|s| s.job == j.id))
            })
        };
        let old: Vec<u64> = state
            .jobs
            .values()
            .filter(|j| j.ended_unix_ms.is_some_and(|end| end < kept_since_ms) && !may_have_cgroup(j))
            .map(|j| j.id)
            .collect();
        if old.is_empty() {
            return;
        }
        for id in &old {
            state.jobs.remove(id);
            state.live.remove(id);
        }
        let next_job = state.next_job;
        state.storage.delete_jobs(&old, next_job);
    }

    pub fn status(&self) -> StatusReply {
        self.status_of(&self.state.lock().unwrap())
    }

    /// The jobs `status` lists: those not over, and ended ones for `keep_finished`.
    fn listed_jobs<'a>(&self, state: &'a State) -> impl Iterator<Item = &'a JobRecord> {
        let shown_since_ms = unix_ms_now().saturating_sub(self.settings.keep_finished.as_millis() as u64);
        state.jobs.values().filter(move |j| j.ended_unix_ms.is_none_or(|ended| ended >= shown_since_ms))
    }

    fn status_of(&self, state: &State) -> StatusReply {
        let jobs = self.listed_jobs(state).map(|j| self.status_job(state, j)).collect();
        StatusReply {
            slice_ns: self.settings.slice_ns,
            rows: self.settings.plan.rows,
            nodes: state.nodes.iter().map(status_node).collect(),
            jobs,
            matrix: matrix_cells(state),
            slice_start_skew: state.slice_starts.summary(),
            storage: state.storage.status(),
        }
    }

    fn status_job(&self, state: &State, j: &JobRecord) -> StatusJob {
        let live = state.live.get(&j.id);
        StatusJob {
            id: j.id,
            uid: j.uid,
            class: j.class,
            mode: j.mode,
            state: j.state,
            tasks: j.tasks,
            mem_bytes: j.mem_bytes,
            idle: j.idle,
            registered: j.registered,
            command: j.argv.join(" "),
            placement: j.placement.clone(),
            cpu_ns: live.map_or(0, JobLive::total_cpu_ns).max(j.cpu_ns),
            // A job over with nothing live was restored from the database: its record is all there is.
            cpu_final: j.state.is_over()
                && live.is_none_or(|l| j.placement.iter().all(|p| l.cpu_final_on.contains(&p.node))),
            pids: live.map(|l| l.usage.values().flat_map(|u| u.pids.clone()).collect()).unwrap_or_default(),
            frozen: live.is_some_and(|l| !l.usage.is_empty() && l.usage.values().all(|u| u.frozen)),
            slice_share: if j.state.is_over() { j.slice_share } else { self.slice_share(state, j.id) },
            exit_code: j.exit_code,
            error: j.error.clone(),
            submitted_unix_ms: j.submitted_unix_ms,
            started_unix_ms: j.started_unix_ms,
            ended_unix_ms: j.ended_unix_ms,
            left_behind: j.left_behind.clone(),
            slurm_time: j.slurm_job.map(|_| slurm_time::status(j, live)),
            name: j.name.clone(),
            time_limit_s: j.time_limit_s,
            in_slot_ms: j.in_slot_ms,
        }
    }
}

impl Controller {
    /// The figures of `/metrics`: the jobs `status` lists (per-job figures for at most [`MAX_JOB_SERIES`] of them,
    /// those not over first) and every node.
    pub fn metrics(&self) -> MetricsSnapshot {
        let state = self.state.lock().unwrap();
        let mut listed: Vec<&JobRecord> = self.listed_jobs(&state).collect();
        let jobs_by_state =
            JobState::ALL.iter().map(|&s| (s, listed.iter().filter(|j| j.state == s).count() as u64)).collect();
        // Stable: id order within the jobs not over and within the ended ones.
        listed.sort_by_key(|j| j.state.is_over());
        let now_ms = unix_ms_now();
        MetricsSnapshot {
            slice_ns: self.settings.slice_ns,
            slice_start_skew: state.slice_starts.spreads_seen().clone(),
            storage_ok: state.storage.status().state == crate::wire::protocol::StorageState::Ok,
            nodes: state.nodes.iter().map(|n| node_figures(&state, n)).collect(),
            jobs_by_state,
            jobs: listed.iter().take(MAX_JOB_SERIES).map(|j| self.job_figures(&state, j, now_ms)).collect(),
            jobs_omitted: listed.len().saturating_sub(MAX_JOB_SERIES) as u64,
        }
    }

    fn job_figures(&self, state: &State, j: &JobRecord, now_ms: u64) -> JobFigures {
        let live = state.live.get(&j.id);
        let usage = live.map(|l| l.usage.values().collect::<Vec<_>>()).unwrap_or_default();
        let frozen_since = live.and_then(|l| l.frozen_since).filter(|_| j.state == JobState::Running);
        JobFigures {
            id: j.id,
            uid: j.uid,
            class: j.class,
            mode: j.mode,
            state: j.state,
            // An ended job keeps its placement on record but holds no CPU.
            cpus: if j.state.is_over() { 0 } else { j.placement.iter().map(|p| p.cpus.len() as u32).sum() },
            cpu_ns: live.map_or(0, JobLive::total_cpu_ns).max(j.cpu_ns),
            processes: usage.iter().map(|u| u.pids.len() as u64).sum(),
            slice_share: self.slice_share(state, j.id),
            elapsed_ms: j.started_unix_ms.map(|started| j.ended_unix_ms.unwrap_or(now_ms).saturating_sub(started)),
            frozen_ms: frozen_since.map(|since| since.elapsed().as_millis() as u64),
        }
    }
}

fn node_figures(state: &State, n: &Node) -> NodeFigures {
    NodeFigures {
        name: n.name.clone(),
        cpus: n.cpus,
        mem_bytes: n.mem_bytes,
        connected: n.link.is_some(),
        load_avg: n.load_avg,
        switches: n.switches,
        switch_errors: n.switch_errors,
        jobs: jobs_on(state, &n.name),
        stuck_jobs: n.stuck_jobs.len() as u64,
        stuck_processes: n.stuck_jobs.iter().map(|s| s.processes).sum(),
        switch_lateness: n.switch_lateness.clone(),
        switch_latency: n.switch_latency.clone(),
    }
}

/// A node's switches as its report gives them: when each began after its slice boundary and when its incoming
/// gang was thawed, into the node's histograms.
fn note_switch_times(state: &mut State, node: &str, slice_starts: &[(u64, u64)], latencies_ns: &[u64]) {
    let Some(i) = node_index(state, node) else { return };
    let n = &mut state.nodes[i];
    for &(_, offset_ns) in slice_starts {
        n.switch_lateness.observe(offset_ns);
    }
    for &latency_ns in latencies_ns {
        n.switch_latency.observe(latency_ns);
    }
}

/// The switches of one report the controller takes, as many as an agent keeps between reports
/// (`switcher::STARTS_UNREPORTED_MAX`): a longer list (only a forging agent sends one) is cut, so that one line
/// cannot hold the controller's lock for long.
const SWITCHES_PER_REPORT: usize = 4_096;

/// A report's slice starts cut to `SWITCHES_PER_REPORT`, each slice once: an agent reports a slice once, and one
/// that named it again would count as another node in the skew between nodes.
fn bounded_slice_starts(mut slice_starts: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    slice_starts.truncate(SWITCHES_PER_REPORT);
    let mut seen = BTreeSet::new();
    slice_starts.retain(|(slice, _)| seen.insert(*slice));
    slice_starts
}

/// Jobs not over that hold CPUs of node `name`.
fn jobs_on(state: &State, name: &str) -> u64 {
    state.jobs.values().filter(|j| !j.state.is_over() && j.on_node(name).is_some()).count() as u64
}

fn status_node(n: &Node) -> StatusNode {
    StatusNode {
        name: n.name.clone(),
        cpus: n.cpus,
        mem_bytes: n.mem_bytes,
        connected: n.link.is_some(),
        freezer: n.freezer.clone(),
        load_avg: n.load_avg,
        switches: n.switches,
        switch_errors: n.switch_errors,
        stuck_jobs: n.stuck_jobs.clone(),
    }
}

/// Give storage everything the controller holds, for repairs.
fn maintain_storage(state: &mut State) {
    let nodes: Vec<NodeRow> =
        state.nodes.iter().map(|n| NodeRow { name: n.name.clone(), cpus: n.cpus, mem_bytes: n.mem_bytes }).collect();
    state.storage.maintain(&state.jobs, &nodes);
}

/// Slots × (node, CPU): the job in each cell, for the monitor.
fn matrix_cells(state: &State) -> Vec<Vec<MatrixCell>> {
    full_plan(state)
        .rows
        .iter()
        .map(|row| {
            let in_slot: Vec<u64> = row.iter().chain(&full_plan(state).always).map(|id| id.0).collect();
            state.nodes.iter().map(|n| matrix_cell(state, n, &in_slot)).collect()
        })
        .collect()
}

/// The job of `in_slot` on each CPU of node `n`.
fn matrix_cell(state: &State, n: &Node, in_slot: &[u64]) -> MatrixCell {
    let job_on = |cpu: u32| {
        in_slot
            .iter()
            .copied()
            .find(|id| state.jobs.get(id).and_then(|j| j.on_node(&n.name)).is_some_and(|p| p.cpus.contains(&cpu)))
    };
    MatrixCell { node: n.name.clone(), cpus: (0..n.cpus).map(job_on).collect() }
}

fn node_load(state: &State, node: Option<&str>) -> Outcome {
    let nodes: Vec<NodeLoad> = state
        .nodes
        .iter()
        .filter(|n| node.is_none_or(|want| want == n.name))
        .map(|n| NodeLoad { node: n.name.clone(), cpus: n.cpus, load_avg: n.load_avg, jobs: jobs_on(state, &n.name) })
        .collect();
    if nodes.is_empty() {
        return Err(format!("unknown node {:?}", node.unwrap_or("")));
    }
    Ok(NodeLoadReply { nodes }.into())
}

impl Controller {
    /// A fresh token for the web monitor, standing for `who`, and the monitor's address.
    fn monitor_token(&self, state: &mut State, who: &Identity) -> Outcome {
        let token = crate::job_tag::random_hex(16).map_err(|e| format!("no random token: {e}"))?;
        state.monitor_tokens.insert(token.clone(), *who, Instant::now());
        let address = std::fs::read_to_string(self.settings.state_dir.join("monitor.addr")).unwrap_or_default();
        Ok(MonitorTokenReply { token, address: address.trim().to_string() }.into())
    }
}

/// The plan the agents get (the controller's coscheduler always plans in full).
fn full_plan(state: &State) -> &cosched_policy::cluster::Plan {
    state.cosched.plan().expect("a replanning coscheduler")
}

/// The jobs the plan places: all that are not over, except registered jobs not yet admitted.
/// A job placed on a node no longer configured keeps its record but is not planned (it cannot be placed anew).
fn plan_jobs(state: &State, node_index: impl Fn(&str) -> Option<u32>) -> Vec<PlanJob> {
    state
        .jobs
        .values()
        .filter(|j| !(j.state.is_over() || j.registered && j.placement.is_empty()))
        .filter_map(|j| {
            let placed = j.placement_for_plan(&node_index);
            (j.placement.is_empty() || placed.is_some()).then(|| plan_job(j, placed))
        })
        .collect()
}

/// A job as the coscheduler sees it; the row it holds is the coscheduler's to remember.
fn plan_job(job: &JobRecord, placed: Option<Vec<cosched_policy::cluster::NodeCpus>>) -> PlanJob {
    PlanJob {
        id: JobId(job.id),
        class: job.class,
        mode: job.planned_mode(),
        tasks: job.tasks,
        nodes: job.nodes,
        mem_bytes_per_node: job.mem_bytes,
        placed,
        suspended: job.state == JobState::Suspended,
        idle: job.idle && job.planned_mode() == Mode::Gang,
        row_held: None,
    }
}

/// Number the tasks node by node.
fn with_ranks(cpus: &[cosched_policy::cluster::NodeCpus], names: &[String]) -> Vec<NodePlacement> {
    let mut next = 0;
    cpus.iter()
        .map(|nc| {
            let ranks: Vec<u32> = (next..next + nc.cpus.len() as u32).collect();
            next += nc.cpus.len() as u32;
            NodePlacement { node: names[nc.node as usize].clone(), cpus: nc.cpus.clone(), ranks }
        })
        .collect()
}

/// Why the job cannot start on its nodes: an agent older than what the job needs would ignore it (`-o`/`-e`).
fn missing_agent_features(state: &State, job: &JobRecord) -> Option<String> {
    if job.output_files.is_empty() {
        return None;
    }
    let feature = crate::wire::protocol::FEATURE_OUTPUT_FILES;
    let lacking: Vec<&str> = job
        .placement
        .iter()
        .filter(|p| {
            // An agent away is judged when it is back and the job starts there again (`reconcile_adopted`).
            state.nodes.iter().any(|n| n.name == p.node && n.link.is_some() && !n.features.iter().any(|f| f == feature))
        })
        .map(|p| p.node.as_str())
        .collect();
    (!lacking.is_empty()).then(|| {
        format!(
            "the agent of {} is older than submit -o/-e and would ignore them: upgrade it (the controller first, \
             then the agents)",
            lacking.join(", ")
        )
    })
}

fn start_message(job: &JobRecord, p: &NodePlacement) -> StartJob {
    let mut start = plain_start_message(job, p);
    match job.launcher_node() {
        // An MPI job: its launcher, once, on the first node, with the job's hosts; only a cgroup elsewhere.
        Some(launcher) if launcher == p.node => {
            start.ranks.truncate(1);
            start.mpi_hosts = job.placement.iter().map(|q| (q.node.clone(), q.cpus.len() as u32)).collect();
        }
        Some(_) => start.register_only = true,
        None => {}
    }
    start
}

fn plain_start_message(job: &JobRecord, p: &NodePlacement) -> StartJob {
    StartJob {
        job: job.id,
        uid: job.uid,
        gid: job.gid,
        argv: job.argv.clone(),
        cwd: job.cwd.clone(),
        env: job.env.clone(),
        ranks: p.ranks.clone(),
        size: job.tasks,
        cpus: p.cpus.clone(),
        register_only: job.registered,
        token: job.token.clone(),
        mpi_hosts: vec![],
        name: job.name.clone(),
        output_files: job.output_files.clone(),
        umask: job.umask,
    }
}

/// Hand `node`'s answer to the request waiting for it, if that request was sent to `node` and asked for an answer of
/// this kind; false when it answers nothing (a request that timed out, or one it was never sent).
fn answer(state: &mut State, node: &str, ack: u64, kind: AnswerKind, result: AgentAnswer) -> bool {
    let asked = state.pending_answers.get(&ack).is_some_and(|p| p.node == node && p.kind == kind);
    if asked {
        if let Some(waiting) = state.pending_answers.remove(&ack) {
            let _ = waiting.sender.send(result);
        }
    }
    asked
}

/// Was job `job` placed on `node` (whether over or not)? Only then may `node`'s agent say it left processes there.
fn placed_on(state: &State, job: u64, node: &str) -> bool {
    state.jobs.get(&job).is_some_and(|j| j.on_node(node).is_some())
}

/// Say once, in the job's record and the controller's log, that `node` could not kill processes of the job.
fn note_left_behind(state: &mut State, node: &str, stuck: &StuckJob) {
    let said = format!("node {node}:");
    let Some(record) = state.jobs.get(&stuck.job) else { return };
    if record.left_behind.as_deref().is_some_and(|note| note.contains(&said)) {
        return;
    }
    let note = format!("{said} {}; the agent keeps their cgroup and retries", stuck.describe());
    eprintln!("cosched controller: job {}: {note}", stuck.job);
    let mut job = record.clone();
    job.left_behind = Some(job.left_behind.map_or(note.clone(), |earlier| format!("{earlier}; {note}")));
    state.storage.save_job_or_hold(&job);
    state.jobs.insert(job.id, job);
}

/// A node's CPU time of a job at its end, in place of its last report: never below it (a cgroup's CPU time
/// only grows). Taken only from a node the job was placed on, also after the job ended there (an MPI job's
/// other nodes are told to end when its launcher's node does, and their ends come after), and once a node
/// after the job is over. A job over whose figures were not kept (restored after a restart) keeps its record.
/// Whether the figure was taken.
fn final_cpu_time(state: &mut State, job: u64, node: &str, cpu_ns: u64) -> bool {
    let Some(record) = state.jobs.get(&job).filter(|j| j.on_node(node).is_some()) else { return false };
    let over = record.state.is_over();
    let given = state.live.get(&job).map(|l| l.cpu_final_on.contains(node));
    if over && given.is_none_or(|given| given) {
        return false;
    }
    let live = state.live.entry(job).or_default();
    let usage = live.usage.entry(node.to_string()).or_insert(JobUsage { job, cpu_ns: 0, pids: vec![], frozen: false });
    usage.cpu_ns = usage.cpu_ns.max(cpu_ns);
    live.cpu_final_on.insert(node.to_string());
    let total_ns = live.total_cpu_ns();
    // A late end (another node of an ended job): its record, which the history reads, grows too.
    if let Some(record) = state.jobs.get_mut(&job).filter(|j| j.state.is_over() && j.cpu_ns < total_ns) {
        record.cpu_ns = total_ns;
        state.storage.save_job_or_hold(record);
    }
    true
}

/// Does job `job` run on `node` (placed there, not over, not ended there)? Only then may `node`'s agent speak of it.
fn runs_on(state: &State, job: u64, node: &str) -> bool {
    state
        .jobs
        .get(&job)
        .is_some_and(|j| !j.state.is_over() && j.on_node(node).is_some() && !j.ended_on.iter().any(|n| n == node))
}

/// Count (and log at powers of two) an event of `node`'s agent that was ignored.
fn ignored_event(state: &mut State, node: &str) {
    let Some(i) = node_index(state, node) else { return };
    let count = &mut state.nodes[i].ignored_events;
    *count += 1;
    if count.is_power_of_two() {
        eprintln!(
            "cosched controller: agent {node} spoke of a job that does not run there or answered a request never \
             sent to it ({count} such events ignored on this link)"
        );
    }
}

/// Has no process of this registered job ever shown, while every node of it reported the job?
fn never_joined(state: &State, job: &JobRecord) -> bool {
    let Some(live) = state.live.get(&job.id) else { return false };
    let reported = job.placement.iter().all(|p| {
        node_index(state, &p.node).is_some_and(|i| state.nodes[i].link.is_some())
            && live.usage.get(&p.node).is_some_and(|u| u.pids.is_empty())
    });
    reported && !live.had_process
}

/// The nodes recorded in the database (their CPUs and memory as last seen) that the configuration lists; rows of
/// names no longer configured are left out, and said so once. A configured node joins when its agent first connects.
fn configured_nodes(names: &[String], stored: Vec<NodeRow>) -> Vec<Node> {
    let (known, unknown): (Vec<NodeRow>, Vec<NodeRow>) = stored.into_iter().partition(|r| names.contains(&r.name));
    if !unknown.is_empty() {
        let unknown: Vec<String> = unknown.into_iter().map(|r| r.name).collect();
        eprintln!("cosched controller: nodes in the database but not configured are ignored: {}", unknown.join(", "));
    }
    known.into_iter().map(|row| Node::new(row.name, row.cpus, row.mem_bytes)).collect()
}

/// Check an agent's hello in full before anything it says is used: its node must be one of the configuration's,
/// not connected already, of a sane size, and every cgroup it found must be owned by a record (`refuse_orphans`).
/// Returns the node's index, `None` for a configured node never seen before.
fn check_hello(state: &State, configured: &[String], hello: &AgentHello) -> Result<Option<usize>, String> {
    validate_node_name(&hello.node)?;
    if !configured.contains(&hello.node) {
        let listed = configured_list(configured);
        return Err(format!("{} is not a node of this cluster (the controller's --nodes: {listed})", hello.node));
    }
    let index = node_index(state, &hello.node);
    if index.is_some_and(|i| state.nodes[i].link.is_some()) {
        return Err(format!("an agent for node {} is already connected", hello.node));
    }
    if hello.cpus == 0 || hello.cpus > MAX_CPUS_PER_NODE {
        return Err(format!("an agent must offer 1 to {MAX_CPUS_PER_NODE} CPUs, not {}", hello.cpus));
    }
    refuse_orphans(state, hello)?;
    Ok(index)
}

/// The configured node names for a message (the first few).
fn configured_list(configured: &[String]) -> String {
    let names: Vec<&str> = configured.iter().take(8).map(String::as_str).collect();
    let more = configured.len().saturating_sub(names.len());
    if names.is_empty() {
        "none".into()
    } else if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

fn send_to(state: &State, node: &str, message: &ToAgent) -> Result<(), String> {
    let link = state
        .nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.link.clone())
        .ok_or_else(|| format!("the agent of node {node} is not connected"))?;
    let mut writer = link.lock().unwrap();
    write_message(&mut *writer, message).map_err(|e| format!("node {node}: {e}"))
}

fn node_index(state: &State, name: &str) -> Option<usize> {
    state.nodes.iter().position(|n| n.name == name)
}

/// Refuse an agent whose node holds job cgroups that no record of this database owns (same id, owner and
/// token): after a lost or restored database, a new job must never inherit another job's running processes.
fn refuse_orphans(state: &State, hello: &AgentHello) -> Result<(), String> {
    let orphans: Vec<String> = hello
        .adopted
        .iter()
        .filter(|a| !state.jobs.get(&a.job).is_some_and(|record| owns_cgroup(record, a)))
        .map(|a| {
            let owner = a.owner.map_or("?".into(), |u| u.to_string());
            format!("job-{} (uid {owner}, {})", a.job, crate::wire::protocol::processes(a.pids.len() as u64))
        })
        .collect();
    if orphans.is_empty() {
        return Ok(());
    }
    let reason = format!(
        "node {} has job cgroups that the database does not know: {}; restore the database it had \
         (docs/security.md, \"Recovery\"), or end those processes and remove their cgroups, then restart the agent",
        hello.node,
        orphans.join(", ")
    );
    eprintln!("cosched controller: refusing agent: {reason}");
    Err(reason)
}

/// Is this cgroup the record's? Records and cgroups from before tags existed match by id and owner alone.
fn owns_cgroup(record: &JobRecord, cgroup: &crate::wire::protocol::AdoptedJob) -> bool {
    match (&cgroup.token, cgroup.owner) {
        (Some(token), Some(owner)) => !record.token.is_empty() && *token == record.token && owner == record.uid,
        _ => record.token.is_empty() && !record.state.is_over(),
    }
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
