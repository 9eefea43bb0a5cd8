//! The controller daemon's shell around its core (`core::ControllerCore`, every decision, no I/O): it holds the
//! links to agents, the requests waiting on an agent's answer, the web monitor's tokens, the SQLite records
//! (`storage`), the clock and the random source, and does what the core's effects say. Identities are verified
//! before the core sees anything (`server`: SO_PEERCRED, MUNGE or the shared key; `monitor`: tokens).
//!
//! All state sits behind one mutex. Each input takes the lock, reads the clock once, hands the input to the core,
//! then, still holding the lock, writes the messages the core queued to the agents' links, hands agents' answers
//! to the requests waiting for them, and logs.

pub use cosched_control::controller::{core, metrics, simulation, skew};
pub use cosched_control::controller::{ControllerSettings, JobLimits, MAX_CPUS_PER_NODE, MAX_JOB_ID};
pub mod db;
pub mod monitor;
pub mod server;
mod slurm_time;
pub mod storage;

use crate::controller::core::{AgentAnswer, AgentAnswerData, AnswerKind, ControllerCore, Effects, Now, Outcome};
use crate::controller::metrics::MetricsSnapshot;
use crate::controller::storage::Storage;
use crate::wire::auth::monitor_tokens::MonitorTokens;
use crate::wire::jobs::{unix_ms_now, Identity};
use crate::wire::protocol::{
    write_message, AgentHello, ExecReply, ExecRequest, FromAgent, LogFile, LogsReply, MonitorTokenReply, PidReply,
    Reply, Request, SlurmEndRequest, StatusReply, ToAgent,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub type AgentWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// How long a request forwarded to an agent (pid change, logs) waits for its answer.
const AGENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Controller {
    pub settings: ControllerSettings,
    shell: Mutex<Shell>,
}

/// What the shell holds beside the core.
struct Shell {
    core: ControllerCore,
    /// The connected agents' links, by node.
    links: BTreeMap<String, AgentWriter>,
    /// Requests waiting for an agent's answer, by acknowledgement number.
    waiters: BTreeMap<u64, mpsc::Sender<AgentAnswer>>,
    monitor_tokens: MonitorTokens,
    /// The origin of the core's monotonic clock.
    epoch: Instant,
}

impl Shell {
    #[allow(clippy::disallowed_methods)] // the daemon's clock: read here, and only here, for the core
    fn now(&self) -> Now {
        Now { mono_ns: self.epoch.elapsed().as_nanos() as u64, unix_ms: unix_ms_now() }
    }

    /// Do what the core asked: its messages go out on the agents' links, its answers to the requests waiting.
    fn carry_out(&mut self) {
        loop {
            let effects = self.core.take_effects();
            if effects.to_agents.is_empty() && effects.answers.is_empty() && effects.logs.is_empty() {
                return;
            }
            self.carry_out_once(effects);
        }
    }

    fn carry_out_once(&mut self, effects: Effects) {
        let Effects { to_agents, answers, logs } = effects;
        for line in logs {
            crate::log_line!("{line}");
        }
        for (node, message) in to_agents {
            let Some(link) = self.links.get(&node).cloned() else { continue };
            // A link that takes no more writes is gone: the agent is away from now on (what was asked of it fails),
            // and its reader, finding its link no longer the node's, closes the connection (the agent says hello
            // again).
            let written = write_message(&mut *link.lock().unwrap(), &message);
            if let Err(e) = written {
                crate::log_line!("cosched controller: node {node}: {e}; its link is closed");
                self.links.remove(&node);
                let now = self.now();
                self.core.agent_disconnected(now, &node);
            }
        }
        for (ack, answer) in answers {
            if let Some(waiting) = self.waiters.remove(&ack) {
                let _ = waiting.send(answer);
            }
        }
    }
}

impl Controller {
    /// Open the records in `settings.state_dir` (refusing a state directory others could change) and the core
    /// over them.
    pub fn open(settings: ControllerSettings) -> std::io::Result<Controller> {
        // Root writes the records there: nobody else may have made it or be able to change it.
        crate::private_dir::ensure(&settings.state_dir, "state directory")?;
        let (storage, loaded) = Storage::open(&settings.state_dir)?;
        #[allow(clippy::disallowed_methods)] // the origin of the core's monotonic clock
        let epoch = Instant::now();
        let now = Now { mono_ns: 0, unix_ms: unix_ms_now() };
        let core = ControllerCore::open(settings.clone(), Box::new(storage), loaded, now);
        let mut shell =
            Shell { core, links: BTreeMap::new(), waiters: BTreeMap::new(), monitor_tokens: Default::default(), epoch };
        shell.carry_out();
        Ok(Controller { settings, shell: Mutex::new(shell) })
    }

    /// Run `f` on the core at the time now, and carry out what it asked.
    fn with_core<T>(&self, f: impl FnOnce(&mut ControllerCore, Now) -> T) -> T {
        let mut shell = self.shell.lock().unwrap();
        let now = shell.now();
        let result = f(&mut shell.core, now);
        shell.carry_out();
        result
    }

    pub fn identity_for(&self, uid: u32, gid: u32) -> Identity {
        Identity { uid, gid, admin: uid == 0 || self.settings.admin_uids.contains(&uid) }
    }

    pub fn monitor_identity(&self, token: &str) -> Option<Identity> {
        let shell = self.shell.lock().unwrap();
        let now = shell.epoch + Duration::from_nanos(shell.now().mono_ns);
        shell.monitor_tokens.identity(token, now)
    }

    /// Spend a monitor token that came in a URL for a fresh one standing for the same user (see `monitor`).
    pub fn exchange_monitor_token(&self, token: &str) -> Option<String> {
        let fresh = crate::job_tag::random_hex(16).ok()?;
        let mut shell = self.shell.lock().unwrap();
        let now = shell.epoch + Duration::from_nanos(shell.now().mono_ns);
        shell.monitor_tokens.exchange(token, fresh, now)
    }

    /// Handle one user request, from `who` as the caller verified it.
    pub fn handle(&self, who: &Identity, request: Request) -> Reply {
        let outcome = match request {
            // These wait for an agent without holding the state.
            Request::AddPid { job, pid, node } => self.pid_change(who, job, pid, node, true),
            Request::RemovePid { job, pid, node } => self.pid_change(who, job, pid, node, false),
            Request::Logs { job } => self.logs(who, job),
            Request::Exec(r) => self.exec(who, r),
            Request::SlurmAttach { slurm_job, pid, node } => self.slurm_attach(who, slurm_job, pid, node),
            Request::SlurmEnd(r) => self.slurm_end(who, r),
            Request::MonitorToken {} => self.monitor_token(who),
            other => {
                // The secret a new job's cgroup is tagged with; only a request that makes a job needs one.
                let makes_a_job = matches!(other, Request::Submit(_) | Request::Register(_) | Request::SlurmBegin(_));
                match if makes_a_job { crate::job_tag::random_hex(16) } else { Ok(String::new()) } {
                    Ok(token) => self.with_core(|core, now| core.handle(now, who, other, token)),
                    Err(e) => Err(format!("no random token for a job: {e}")),
                }
            }
        };
        match outcome {
            Ok(data) => Reply::ok(data),
            Err(message) => Reply::error(message),
        }
    }

    /// Ask the job's agent to move a process in or out, and answer once the agent confirms (a launcher may let
    /// the process run only when it is in the job).
    fn pid_change(&self, who: &Identity, id: u64, pid: i32, node: Option<String>, add: bool) -> Outcome {
        let node = self.with_core(|core, now| core.pid_change_node(now, who, id, pid, node, add))?;
        // Who owns the pid is checked by the agent of the node where it lives, never here.
        self.move_pid(id, pid, node, (!who.admin).then_some(who.uid), who.uid, add)
    }

    /// Have `node`'s agent move `pid` (which must belong to `owner`, if given) into or out of job `id`, for
    /// `requester` (whose moves waiting at once are bounded, root's aside).
    fn move_pid(&self, id: u64, pid: i32, node: String, owner: Option<u32>, requester: u32, add: bool) -> Outcome {
        let message = |ack| {
            if add {
                ToAgent::AddPid { job: id, pid, ack, owner }
            } else {
                ToAgent::RemovePid { job: id, pid, ack, owner }
            }
        };
        self.ask_agent(&node, AnswerKind::PidMoved, requester, Some(AGENT_ANSWER_TIMEOUT), message)
            .map_err(|e| format!("node {node}: {e}"))?;
        Ok(PidReply { job: id, pid, node }.into())
    }

    /// Send an agent a request that it answers, and wait for the answer without holding the state: at most
    /// `timeout`, or (`None`) until the agent answers or goes away.
    fn ask_agent(
        &self,
        node: &str,
        kind: AnswerKind,
        requester: u32,
        timeout: Option<Duration>,
        message: impl FnOnce(u64) -> ToAgent,
    ) -> AgentAnswer {
        let (answer, ack) = {
            let mut shell = self.shell.lock().unwrap();
            let now = shell.now();
            let asked = shell.core.ask(now, node, kind, requester, message);
            let (sender, answer) = mpsc::channel();
            if let Ok(ack) = asked {
                shell.waiters.insert(ack, sender);
            }
            shell.carry_out();
            (answer, asked?)
        };
        let Some(timeout) = timeout else {
            return answer.recv().unwrap_or_else(|_| Err("the controller dropped the request".into()));
        };
        answer.recv_timeout(timeout).unwrap_or_else(|_| {
            let mut shell = self.shell.lock().unwrap();
            shell.waiters.remove(&ack);
            shell.core.forget_ask(ack);
            // An answer that came between the timeout and the lock counts.
            answer.try_recv().unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
        })
    }

    /// Run a command in the caller's job on one of its nodes (an MPI launcher's remote daemon) and answer with
    /// its exit code once it ends.
    fn exec(&self, who: &Identity, r: ExecRequest) -> Outcome {
        let (uid, gid, umask) = self.with_core(|core, now| core.check_exec(now, who, &r))?;
        let (job, node) = (r.job, r.node.clone());
        let message = |ack| ToAgent::Exec { job, ack, uid, gid, argv: r.argv, cwd: r.cwd, env: r.env, umask };
        let ended = self.ask_agent(&node, AnswerKind::ExecEnded, who.uid, None, message);
        match ended.map_err(|e| format!("node {node}: {e}"))? {
            AgentAnswerData::ExecEnded(exit_code) => Ok(ExecReply { job, node, exit_code }.into()),
            _ => Err(format!("node {node}: an answer to another request")),
        }
    }

    /// The tails of the job's logs, read by the agents that hold them; a node whose agent cannot answer gets an
    /// entry saying why instead.
    fn logs(&self, who: &Identity, id: u64) -> Outcome {
        let (placement, owner) = self.with_core(|core, now| core.log_places(now, who, id))?;
        let mut files = Vec::new();
        for p in placement {
            let node = p.node.clone();
            let read = |ack| ToAgent::ReadLogs { job: id, ranks: p.ranks, ack, owner: Some(owner) };
            match self.ask_agent(&node, AnswerKind::Logs, 0, Some(AGENT_ANSWER_TIMEOUT), read) {
                Ok(AgentAnswerData::Logs(tails)) => {
                    files.extend(tails.into_iter().map(|tail| LogFile::Tail { node: node.clone(), tail }));
                }
                Ok(_) => files.push(LogFile::Unavailable { node, error: "an answer to another request".into() }),
                Err(error) => files.push(LogFile::Unavailable { node, error }),
            }
        }
        Ok(LogsReply { job: id, files }.into())
    }

    /// Move a task into its Slurm job's cgroup on its node; answered once the agent has moved it.
    fn slurm_attach(&self, who: &Identity, slurm_job: u32, pid: i32, node: String) -> Outcome {
        let (id, owner) = self.with_core(|core, now| core.slurm_attach_target(now, who, slurm_job, pid, &node))?;
        // slurmstepd has made the task its user's before it runs: a pid of anybody else is refused by the agent.
        self.move_pid(id, pid, node, Some(owner), who.uid, true)
    }

    /// The Slurm job is over: its epilog runs on each of its nodes, and the first one ends the cosched job. Each
    /// node's agent then kills whatever is left in the job's cgroup there and removes it. Each epilog waits for
    /// its own node, within the kill's bound: processes that survive SIGKILL make the answer an error (slurmd
    /// logs it), and the agent keeps their cgroup and retries.
    fn slurm_end(&self, who: &Identity, r: SlurmEndRequest) -> Outcome {
        let ended = self.with_core(|core, now| core.end_slurm_job(now, who, &r))?;
        let wait = crate::agent::ender::KILL_BOUND + AGENT_ANSWER_TIMEOUT;
        let forget = |ack| ToAgent::Forget { job: ended.job, ack: Some(ack) };
        let what = format!("Slurm job {}: cosched job {} {}", r.slurm_job, ended.job, ended.state.name());
        match self.ask_agent(&r.node, AnswerKind::Forgotten, 0, Some(wait), forget) {
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

    /// A fresh token for the web monitor, standing for `who`, and the monitor's address.
    fn monitor_token(&self, who: &Identity) -> Outcome {
        let token = crate::job_tag::random_hex(16).map_err(|e| format!("no random token: {e}"))?;
        {
            let mut shell = self.shell.lock().unwrap();
            let now = shell.epoch + Duration::from_nanos(shell.now().mono_ns);
            shell.monitor_tokens.insert(token.clone(), *who, now);
        }
        let address = std::fs::read_to_string(self.settings.state_dir.join("monitor.addr")).unwrap_or_default();
        Ok(MonitorTokenReply { token, address: address.trim().to_string() }.into())
    }

    /// An agent said hello on `writer`'s link, its key proven (`server`): accept it for its node and return the
    /// node's index.
    pub fn agent_connected(&self, hello: &AgentHello, writer: AgentWriter) -> Result<u32, String> {
        let mut shell = self.shell.lock().unwrap();
        let now = shell.now();
        let accepted = shell.core.agent_connected(now, hello);
        match &accepted {
            Ok(_) => {
                shell.links.insert(hello.node.clone(), writer);
            }
            Err(reason) => crate::log_line!("cosched controller: refusing agent {}: {reason}", hello.node),
        }
        shell.carry_out();
        accepted
    }

    /// The link `node`'s agent is connected on, if any.
    pub fn link_of(&self, node: &str) -> Option<AgentWriter> {
        self.shell.lock().unwrap().links.get(node).cloned()
    }

    /// `link`, `node`'s, is closed. Nothing changes if it is no longer the node's link (closed already after a
    /// failed write, the agent perhaps connected again on another).
    pub fn agent_disconnected(&self, node: &str, link: &AgentWriter) {
        let mut shell = self.shell.lock().unwrap();
        if !shell.links.get(node).is_some_and(|current| Arc::ptr_eq(current, link)) {
            return;
        }
        shell.links.remove(node);
        let now = shell.now();
        shell.core.agent_disconnected(now, node);
        shell.carry_out();
    }

    /// What an agent says on `link` (which proved its node). False when `link` is no longer the node's: the event
    /// is not heard, and the reader should close the connection.
    pub fn agent_event(&self, node: &str, link: &AgentWriter, event: FromAgent) -> bool {
        let mut shell = self.shell.lock().unwrap();
        if !shell.links.get(node).is_some_and(|current| Arc::ptr_eq(current, link)) {
            return false;
        }
        let now = shell.now();
        shell.core.agent_event(now, node, event);
        shell.carry_out();
        true
    }

    /// Periodic work: the core's (storage, history, time limits, empty registrations), and the status document
    /// when something in it changed.
    pub fn tick(&self) {
        let Some((status, fingerprint)) = self.with_core(|core, now| core.tick(now)) else { return };
        let path = self.settings.status_path();
        let tmp = path.with_extension("json.tmp");
        // The document lists every user's jobs: root's alone to read, like the database.
        let written =
            crate::controller::db::write_private(&tmp, &serde_json::to_vec_pretty(&status).unwrap_or_default())
                .and_then(|_| std::fs::rename(&tmp, &path));
        match written {
            Ok(()) => self.shell.lock().unwrap().core.status_written(fingerprint),
            Err(e) => crate::log_line!("cosched controller: status document {}: {e}", path.display()),
        }
    }

    pub fn status(&self) -> StatusReply {
        self.with_core(|core, now| core.status(now))
    }

    pub fn metrics(&self) -> MetricsSnapshot {
        self.with_core(|core, now| core.metrics(now))
    }
}
