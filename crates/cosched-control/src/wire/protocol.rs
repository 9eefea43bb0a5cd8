//! The wire protocol: one JSON object per line, over a Unix socket or TCP.
//!
//! Users send a `Request` and read one `Reply`. Agents open their connection
//! with `Request::AgentHello`; from then on the controller sends
//! `ToAgent` lines and the agent sends `FromAgent` lines on it.
//!
//! Over TCP a connection begins with a handshake (`Challenge`, then `Auth` or `AgentAuth`, see `auth`), and
//! every line after it, both ways, is sealed: `<64 hex digits> <JSON>`, the digits a MAC of the line under the
//! connection's session key (`seal`). On the Unix socket lines are plain JSON.

pub use crate::wire::output_files::OutputFiles;
use serde::{Deserialize, Serialize};
use std::io::Write;

pub mod checks;
mod replies;
pub use replies::*;

/// The longest request line the controller accepts from a user (a bad peer cannot make us buffer more).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// The longest line between the controller and its agents, and of a reply to a user: every message there is
/// built by cosched from bounded parts (a request under `MAX_LINE_BYTES`, log tails under `LOGS_REPLY_BYTES`,
/// each byte at most six when escaped), so one large payload can never break the link.
pub const MAX_TRUSTED_LINE_BYTES: usize = 16 << 20;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// TCP only, the first line: the peer's own nonce (hex, at most `MAX_NONCE_CHARS`), answered with the
    /// controller's (`ChallengeReply`) and nothing else. The next `Auth` or `AgentAuth` proves the peer over both
    /// nonces; only then does the controller prove itself, and every line after that, both ways, is sealed
    /// (`seal`: a MAC under the connection's session key before the JSON).
    Challenge {
        nonce: Option<String>,
    },
    /// TCP only: act as the uid and gid a MUNGE credential vouches for. The credential, restricted to root's
    /// decoding, says `cosched-to-controller:user:<peer nonce>:<controller nonce>:<secret>`: the secret (64 hex
    /// digits, fresh) is the session's, which only the controller learns. The reply (`AuthReply`) is the first
    /// sealed line.
    Auth {
        credential: String,
    },
    /// TCP only: prove to be the agent of `node` (`AgentProof`). The controller answers with its own proof
    /// (`ToAgent::ControllerProof`), the first sealed line; the agent then sends its `AgentHello`, sealed.
    AgentAuth {
        node: String,
        proof: AgentProof,
    },
    Submit(SubmitRequest),
    /// Register a job whose processes already exist (added with `AddPid`).
    Register(RegisterRequest),
    AddPid {
        job: u64,
        pid: i32,
        node: Option<String>,
    },
    RemovePid {
        job: u64,
        pid: i32,
        node: Option<String>,
    },
    SetClass {
        job: u64,
        class: String,
    },
    SetResources {
        job: u64,
        cpus_per_node: Option<u32>,
        mem_bytes: Option<u64>,
    },
    Usage {
        job: u64,
    },
    NodeLoad {
        node: Option<String>,
    },
    /// Struct variants (not unit ones), so that an extra field is refused like everywhere else.
    Status {},
    Suspend {
        job: u64,
    },
    Resume {
        job: u64,
    },
    /// End the job: SIGTERM to every process, SIGKILL after the controller's grace.
    Kill {
        job: u64,
    },
    /// Send one signal (a name: "USR1", "SIGHUP", ...) to every process of the job.
    Signal {
        job: u64,
        signal: String,
    },
    Logs {
        job: u64,
    },
    /// Jobs of the history (ended ones until the controller's `keep_history`, and those not over), as sacct
    /// lists them.
    History(HistoryRequest),
    /// A token for the web monitor, bound to the caller's identity.
    MonitorToken {},
    /// Run a command in the caller's running job on one of its nodes, inside the job's cgroup there, and answer
    /// when it exits (what `cosched rsh` asks for an MPI launcher: one remote daemon per node).
    Exec(ExecRequest),
    /// Administrators only (the cosched SPANK plugin, from Slurm's prolog on a node of the job): a Slurm job's
    /// allocation, to be gang scheduled on the nodes Slurm chose. The first call creates the cosched job; the
    /// prologs of its other nodes get the same job back.
    SlurmBegin(SlurmBeginRequest),
    /// Administrators only (the plugin, in slurmstepd, before the task runs): move a task of a Slurm job on
    /// `node` into the job's cgroup there.
    SlurmAttach {
        slurm_job: u32,
        pid: i32,
        node: String,
    },
    /// Administrators only (the plugin, from Slurm's epilog): the Slurm job is over. Its cgroups are thawed and
    /// forgotten on every node; its processes are Slurm's to end.
    SlurmEnd(SlurmEndRequest),
    AgentHello(AgentHello),
}

/// `History`: which jobs; a job must match every field given. Empty lists and absent times match every job.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HistoryRequest {
    #[serde(default)]
    pub jobs: Vec<u64>,
    #[serde(default)]
    pub users: Vec<u32>,
    #[serde(default)]
    pub states: Vec<crate::wire::jobs::JobState>,
    /// Jobs not over, or that ended at or after this time.
    #[serde(default)]
    pub since_unix_ms: Option<u64>,
    /// Jobs submitted before this time.
    #[serde(default)]
    pub until_unix_ms: Option<u64>,
    /// The newest this many matching jobs (at most `MAX_HISTORY_JOBS`; `DEFAULT_HISTORY_JOBS` when absent).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The most jobs one `History` reply lists: bounds the reply (each job's command is at most 4 KiB once it ended).
pub const MAX_HISTORY_JOBS: u32 = 10_000;
/// What `History` lists when the request sets no limit.
pub const DEFAULT_HISTORY_JOBS: u32 = 1_000;

/// `SlurmBegin`: the allocation as Slurm's prolog environment gives it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmBeginRequest {
    pub slurm_job: u32,
    /// The job's owner (`SLURM_JOB_UID`, `SLURM_JOB_GID`).
    pub uid: u32,
    pub gid: u32,
    /// Slurm's hostlist of the job's nodes (`SLURM_NODELIST`); cosched's agents must be named as Slurm names
    /// the nodes.
    pub nodelist: String,
    /// `SLURM_JOB_CPUS_PER_NODE` (`2(x3),1`).
    pub cpus_per_node: String,
    /// The node whose prolog asks (`SLURMD_NODENAME`).
    pub node: String,
}

/// `SlurmEnd`: how the job ended, from the epilog's `SLURM_JOB_EXIT_CODE2` (`exit:signal`) and Slurm's state.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmEndRequest {
    pub slurm_job: u32,
    pub node: String,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    /// Slurm's state of the job at its end (`CANCELLED`, `TIMEOUT`, ...), when the epilog could ask: the exit
    /// code of a cancelled job says nothing of it.
    #[serde(default)]
    pub slurm_state: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub tasks: u32,
    pub nodes: Option<u32>,
    #[serde(default = "default_class")]
    pub class: String,
    #[serde(default)]
    pub mem_bytes: u64,
    #[serde(default)]
    pub slice_opt_out: bool,
    /// Leave the job to the local scheduler instead of gang scheduling it.
    #[serde(default)]
    pub local: bool,
    /// The command is an MPI launcher: run it once, on the job's first node, and let it start its daemons on
    /// the job's nodes through `Exec` (see `docs/runtime.md`, "MPI jobs").
    #[serde(default)]
    pub mpi: bool,
    pub argv: Vec<String>,
    pub cwd: String,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// A name for the job (`-J`), shown by `status` and `history`: at most `MAX_JOB_NAME_BYTES`, no white space
    /// or control characters. Left out when empty, so that controllers older than it take the request.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The longest the job may run in its slots (`--time`), in seconds: time out of its slots and time suspended
    /// do not count. Reached, the job is ended as `kill` ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<u64>,
    /// Files for the tasks' stdout and stderr instead of the job's logs (`-o`, `-e`, `--open-mode`).
    #[serde(default, skip_serializing_if = "OutputFiles::is_empty")]
    pub output_files: OutputFiles,
    /// The submitter's file mode creation mask (at most 0o777), which the tasks get; `None`: the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
}

/// The longest job name (`SubmitRequest::name`), in bytes.
pub const MAX_JOB_NAME_BYTES: usize = 256;
/// The longest time limit (`SubmitRequest::time_limit_s`): a year.
pub const MAX_TIME_LIMIT_S: u64 = 365 * 86_400;

/// `Exec`: the command runs as the job's owner, in `cwd`, with exactly `env` (plus `PATH` and `HOME` defaults).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    pub job: u64,
    pub node: String,
    pub argv: Vec<String>,
    pub cwd: String,
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

fn default_class() -> String {
    "batch".into()
}

impl SubmitRequest {
    /// A batch gang job of one task running `argv` in `cwd`, with an empty environment and nothing else set: a
    /// caller changes what it needs (`SubmitRequest { tasks: 4, ..SubmitRequest::new(argv, cwd) }`).
    pub fn new(argv: Vec<String>, cwd: String) -> SubmitRequest {
        SubmitRequest {
            tasks: 1,
            nodes: None,
            class: default_class(),
            mem_bytes: 0,
            slice_opt_out: false,
            local: false,
            mpi: false,
            argv,
            cwd,
            env: vec![],
            name: String::new(),
            time_limit_s: None,
            output_files: OutputFiles::default(),
            umask: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    #[serde(default = "default_class")]
    pub class: String,
    pub cpus_per_node: u32,
    #[serde(default)]
    pub min_cpus: u32,
    #[serde(default)]
    pub mem_bytes: u64,
    /// The node the processes live on (default: the first agent).
    pub node: Option<String>,
    #[serde(default)]
    pub local: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentHello {
    pub node: String,
    pub cpus: u32,
    pub mem_bytes: u64,
    /// Jobs whose cgroups the agent found (it re-adopts them).
    pub adopted: Vec<AdoptedJob>,
    pub freezer: String,
    /// What this agent does beyond the first agents (`AGENT_FEATURES`): the controller starts a job that needs one
    /// only on nodes whose agent has it, instead of an older agent ignoring what it does not know.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

impl AgentHello {
    /// This version's agent's hello from a node with no job to adopt: what simulated agents, benchmarks and tests
    /// say (each changes what it needs, `AgentHello { adopted, ..AgentHello::new(...) }`).
    pub fn new(node: &str, cpus: u32, mem_bytes: u64, freezer: &str) -> AgentHello {
        AgentHello {
            node: node.into(),
            cpus,
            mem_bytes,
            adopted: vec![],
            freezer: freezer.into(),
            features: AGENT_FEATURES.iter().map(|f| f.to_string()).collect(),
        }
    }
}

/// The features of this version's agent (`AgentHello::features`).
pub const AGENT_FEATURES: &[&str] = &[FEATURE_OUTPUT_FILES];
/// Opens `submit -o`/`-e` files (`StartJob::output_files`) and sets the submitter's umask.
pub const FEATURE_OUTPUT_FILES: &str = "output_files";

/// How an agent proves over TCP that it is a node, over both nonces of its connection: a MUNGE credential of
/// root, restricted to root's decoding, saying `cosched-to-controller:agent <node>:<peer nonce>:<controller
/// nonce>:<secret>`, or the hex HMAC-SHA256 of that text (without the secret) under the agents' shared key.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentProof {
    Munge(String),
    Hmac(String),
}

/// The controller's answer to `Challenge`: its nonce for this connection.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct ChallengeReply {
    pub nonce: String,
}

/// The controller's proof to a peer that proved itself, over both nonces and naming the peer: to an agent the
/// way the agent proved itself (the key's HMAC of `cosched-to-peer:agent <node>:<peer nonce>:<controller
/// nonce>`, or a MUNGE credential of root with that payload for root's decoding); to a user a MUNGE credential of
/// root with the payload `cosched-to-peer:user <uid>:...` that only that uid may decode.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct ControllerProof {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub munge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac: Option<String>,
}

/// The longest nonce a client may send (ours are 32 hex digits).
pub const MAX_NONCE_CHARS: usize = 64;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdoptedJob {
    pub job: u64,
    pub pids: Vec<i32>,
    /// The owner and token the cgroup was tagged with when the job started (`None`: untagged).
    #[serde(default)]
    pub owner: Option<u32>,
    #[serde(default)]
    pub token: Option<String>,
}

/// The reply to every user request. The controller writes `Reply<ReplyData>`; a client that knows what it asked
/// reads `Reply<T>` with `T` the request's reply struct (see `replies`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Reply<T = ReplyData> {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default = "none")]
    pub data: Option<T>,
}

/// A default for `Reply::data` that does not require `T: Default`.
fn none<T>() -> Option<T> {
    None
}

impl Reply<ReplyData> {
    pub fn ok(data: impl Into<ReplyData>) -> Reply {
        Reply { ok: true, error: None, data: Some(data.into()) }
    }

    pub fn error(message: impl Into<String>) -> Reply {
        Reply { ok: false, error: Some(message.into()), data: None }
    }
}

impl<T> Reply<T> {
    /// The data of a successful reply, or the controller's reason for refusing.
    pub fn into_result(self) -> Result<T, String> {
        match (self.ok, self.data) {
            (true, Some(data)) => Ok(data),
            (true, None) => Err("the controller's reply has no data".into()),
            (false, _) => Err(self.error.unwrap_or_else(|| "the controller refused".into())),
        }
    }
}

/// What the controller tells an agent.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum ToAgent {
    /// Over TCP, the first message to an agent that proved itself (sealed, as every message after it): the
    /// controller's proof. The agent says hello, obeys and reports nothing before it has checked it.
    ControllerProof(ControllerProof),
    Welcome {
        node_index: u32,
    },
    /// The cycle: slot `k` of wall-clock slice `n` is `rows[n % rows.len()]`.
    Schedule(Schedule),
    /// Start this node's tasks of a job (or adopt them if its cgroup exists).
    Start(StartJob),
    Signal {
        job: u64,
        signal: i32,
    },
    /// End the job: SIGTERM now, SIGKILL to whatever is left after `grace_ms`.
    Terminate {
        job: u64,
        grace_ms: u64,
    },
    /// Move a process into the job's cgroup; the agent answers with `PidMoved { ack }`. The agent checks the
    /// process where it lives: it must belong to `owner` (`None`: an administrator asked) and never be pid 1, a
    /// kernel thread or cosched's own.
    AddPid {
        job: u64,
        pid: i32,
        ack: u64,
        owner: Option<u32>,
    },
    /// Move a process out of the job's cgroup (only a member of that job); answered like `AddPid`.
    RemovePid {
        job: u64,
        pid: i32,
        ack: u64,
        owner: Option<u32>,
    },
    /// Run a command of the job's owner inside the job's cgroup; the agent answers with `ExecEnded { ack }` when
    /// it exits (or could not start).
    Exec {
        job: u64,
        ack: u64,
        uid: u32,
        gid: u32,
        argv: Vec<String>,
        cwd: String,
        env: Vec<(String, String)>,
        /// The job's umask (`StartJob::umask`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        umask: Option<u32>,
    },
    /// Send the tails of the job's log files for these ranks; the agent answers with `Logs { ack }`.
    ReadLogs {
        job: u64,
        ranks: Vec<u32>,
        ack: u64,
        /// The job's owner: a log is read only if it is this user's (a file under the job's number may be another
        /// job's, after a lost database gave the number again).
        #[serde(default)]
        owner: Option<u32>,
    },
    /// The job is over on this node: kill whatever is left in its cgroup (after the grace of a `Terminate` still
    /// running), and remove the cgroup once empty. With `ack`, the agent answers `Forgotten { ack }` once the cgroup
    /// is empty, or once its processes have outlived the kill's bound (then it keeps the cgroup and retries).
    Forget {
        job: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ack: Option<u64>,
    },
    Refused {
        reason: String,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Schedule {
    pub slice_ns: u64,
    /// Per slot, the jobs of this node that run in it.
    pub rows: Vec<Vec<u64>>,
    /// Jobs of this node that run all the time.
    pub always: Vec<u64>,
    /// Every job of this node the agent should know (the rest stay frozen).
    pub jobs: Vec<u64>,
    /// Jobs to keep stopped (suspended by a user); never thawed by a slice.
    pub suspended: Vec<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StartJob {
    pub job: u64,
    pub uid: u32,
    pub gid: u32,
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    /// Global ranks of this node's tasks and the CPUs (of this node) the job holds.
    pub ranks: Vec<u32>,
    pub size: u32,
    pub cpus: Vec<u32>,
    /// Registered jobs: create the cgroup, start nothing.
    pub register_only: bool,
    /// The job's random token, tagged on its cgroup with the owner (see `job_tag`).
    #[serde(default)]
    pub token: String,
    /// An MPI job's launcher (on its first node): every node of the job with its CPUs held, for the launcher's
    /// host list. Empty for other jobs and on the job's other nodes.
    #[serde(default)]
    pub mpi_hosts: Vec<(String, u32)>,
    /// The job's name (for `%x` in its file names).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The user's files for the tasks' stdout and stderr, as patterns (`crate::wire::output_files`).
    #[serde(default, skip_serializing_if = "OutputFiles::is_empty")]
    pub output_files: OutputFiles,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
}

/// How often an agent surveys its jobs and reports their use (`FromAgent::Report`).
pub const REPORT_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

/// What an agent tells the controller.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FromAgent {
    /// Every slice boundary at most every 100 ms: CPU use and processes per job.
    Report {
        jobs: Vec<JobUsage>,
        load_avg: f64,
        switches: u64,
        /// Slices whose switch failed (a gang that would not stop or start).
        #[serde(default)]
        switch_errors: u64,
        /// (slice number, ns from the slice boundary to the switch's start) of the switches since the last report.
        #[serde(default)]
        slice_starts: Vec<(u64, u64)>,
        /// Of the same switches, in the same order: ns from the slice boundary to the incoming gang thawed.
        #[serde(default)]
        switch_latencies_ns: Vec<u64>,
        /// Jobs over (or being killed) whose cgroup the agent could not empty: processes that outlived SIGKILL.
        #[serde(default)]
        stuck_jobs: Vec<StuckJob>,
    },
    /// The job has no process left on this node.
    Ended {
        job: u64,
        exit_code: Option<i32>,
        /// Why the job failed on this node although no task reported a failure (a task's exit status was lost).
        #[serde(default)]
        error: Option<String>,
        /// The job's CPU time on this node at its end (its cgroup's), which the last report may have missed
        /// by up to a report period.
        #[serde(default)]
        cpu_ns: Option<u64>,
    },
    Failed {
        job: u64,
        error: String,
    },
    /// The command of `Exec` number `ack` has ended: its exit code, or its signal as 128 + number, or why it
    /// could not start.
    ExecEnded {
        ack: u64,
        exit_code: Option<i32>,
        error: Option<String>,
    },
    /// The answer to `AddPid` / `RemovePid` number `ack`: done, or why not.
    PidMoved {
        ack: u64,
        error: Option<String>,
    },
    /// The answer to `ReadLogs` number `ack`.
    Logs {
        ack: u64,
        files: Vec<LogTail>,
    },
    /// The answer to `Forget` number `ack`: the job's processes all ended and its cgroup is gone (`None`), or
    /// those that outlived the kill's bound (the agent keeps their cgroup and retries).
    Forgotten {
        ack: u64,
        stuck: Option<StuckJob>,
    },
}

impl FromAgent {
    /// A report of its jobs' usage alone (no switches, slice starts or stuck cgroups), as simulations and tests
    /// send one.
    pub fn usage_report(jobs: Vec<JobUsage>) -> FromAgent {
        FromAgent::Report {
            jobs,
            load_avg: 0.0,
            switches: 0,
            switch_errors: 0,
            slice_starts: vec![],
            switch_latencies_ns: vec![],
            stuck_jobs: vec![],
        }
    }
}

/// The end of one task's stdout or stderr on its node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LogTail {
    pub rank: u32,
    /// "out" or "err".
    pub stream: String,
    pub path: String,
    pub text: String,
}

/// How much of each log file `cosched logs` shows (the end of it).
pub const LOG_TAIL_BYTES: u64 = 64 * 1024;
/// How much log text one agent sends for one `cosched logs` (shared by its files).
pub const LOGS_REPLY_BYTES: u64 = 2 << 20;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobUsage {
    pub job: u64,
    pub cpu_ns: u64,
    pub pids: Vec<i32>,
    pub frozen: bool,
}

/// A user's request line, parsed and given every check that needs no state, as the server does before the
/// controller sees it.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let request = serde_json::from_str::<Request>(line).map_err(|e| format!("bad request: {e}"))?;
    checks::check_request(&request)?;
    Ok(request)
}

pub fn write_message(writer: &mut impl Write, message: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    writer.write_all(&line)?;
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_ops_are_errors() {
        assert!(serde_json::from_str::<Request>(r#"{"op":"status"}"#).is_ok());
        let err = serde_json::from_str::<Request>(r#"{"op":"reboot"}"#).unwrap_err().to_string();
        assert!(err.contains("reboot"), "{err}");
        let err = serde_json::from_str::<Request>(r#"{"op":"kill","job":"x"}"#).unwrap_err().to_string();
        assert!(err.contains("invalid type"), "{err}");
        assert!(serde_json::from_str::<Request>(r#"{"op":"kill","job":1,"force":true}"#).is_err());
    }

    #[test]
    fn names_are_checked_before_the_controller_sees_a_request() {
        let refused = |line: &str| parse_request(line).unwrap_err();
        assert!(refused(r#"{"op":"set_class","job":1,"class":"royal"}"#).starts_with("unknown class \"royal\""));
        assert!(refused(r#"{"op":"signal","job":1,"signal":"STOP"}"#).contains("use suspend and resume"));
        assert!(refused(r#"{"op":"node_load","node":"a\u0000b"}"#).starts_with("invalid node name \"a\\0b\""));
        assert!(refused(r#"{"op":"kill","job":-1}"#).starts_with("bad request: invalid value"));
        assert_eq!(parse_request(r#"{"op":"kill","job":1}"#), Ok(Request::Kill { job: 1 }));
    }
}

#[cfg(test)]
mod unknown_field_tests {
    use super::*;

    /// One valid example of every request, each of which must refuse one extra field.
    const EVERY_OP: [&str; 19] = [
        r#"{"op":"challenge","nonce":"ab""#,
        r#"{"op":"auth","credential":"MUNGE:x""#,
        r#"{"op":"submit","tasks":1,"argv":["true"],"cwd":"/""#,
        r#"{"op":"register","cpus_per_node":1"#,
        r#"{"op":"add_pid","job":1,"pid":2"#,
        r#"{"op":"remove_pid","job":1,"pid":2"#,
        r#"{"op":"set_class","job":1,"class":"batch""#,
        r#"{"op":"set_resources","job":1"#,
        r#"{"op":"usage","job":1"#,
        r#"{"op":"node_load""#,
        r#"{"op":"status""#,
        r#"{"op":"suspend","job":1"#,
        r#"{"op":"resume","job":1"#,
        r#"{"op":"kill","job":1"#,
        r#"{"op":"signal","job":1,"signal":"USR1""#,
        r#"{"op":"logs","job":1"#,
        r#"{"op":"monitor_token""#,
        r#"{"op":"agent_hello","node":"n","cpus":1,"mem_bytes":0,"adopted":[],"freezer":"v2""#,
        r#"{"op":"agent_hello","node":"n","cpus":1,"mem_bytes":0,"adopted":[{"job":1,"pids":[]}],"freezer":"v2""#,
    ];

    #[test]
    fn every_request_refuses_an_unknown_field() {
        for op in EVERY_OP {
            let valid = format!("{op}}}");
            assert!(serde_json::from_str::<Request>(&valid).is_ok(), "valid request refused: {valid}");
            let extra = if op.contains("adopted\":[{") {
                op.replace("\"pids\":[]", "\"pids\":[],\"evil\":1")
            } else {
                format!("{op},\"evil\":1")
            };
            let extra = format!("{extra}}}");
            let result = serde_json::from_str::<Request>(&extra);
            assert!(result.is_err(), "an unknown field was accepted: {extra}");
            assert!(result.unwrap_err().to_string().contains("evil"), "the error does not name the field: {extra}");
        }
    }
}
