//! What the controller answers to each request: the `data` of a `Reply`, one struct per kind of answer.
//!
//! The C client (`clients/c`) and the monitor page (`web/monitor.html`) read these by key, so a field's name, nesting
//! and JSON type are part of the protocol: the tests below pin the JSON of each.

use super::{ChallengeReply, ControllerProof, LogTail};
use crate::wire::jobs::{JobState, NodePlacement};
use cosched_policy::cluster::{JobClass, Mode};
use serde::{Deserialize, Serialize};

/// Nearest-rank percentiles of a set of durations (`controller::skew::summarize`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: usize,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// `submit` and `register`: the new job and its state.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SubmitReply {
    pub job: u64,
    pub state: JobState,
}

/// `add_pid` and `remove_pid`, answered once the agent of `node` has moved the process.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PidReply {
    pub job: u64,
    pub pid: i32,
    pub node: String,
}

/// `exec`: how the command ended on `node` (128 + the signal's number if a signal ended it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExecReply {
    pub job: u64,
    pub node: String,
    pub exit_code: i32,
}

/// `set_class`: the job's class now.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClassReply {
    pub job: u64,
    #[serde(with = "crate::wire::jobs::class_name")]
    pub class: JobClass,
}

/// `set_resources`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ResourcesReply {
    pub job: u64,
}

/// `usage`: what the job's processes have used, summed over its nodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct UsageReply {
    pub job: u64,
    pub state: JobState,
    pub cpu_ns: u64,
    pub pids: Vec<i32>,
    /// The share of the cycle's slots the job runs in (1.0: all the time).
    pub slice_share: f64,
}

/// `node_load`: the node asked for, or every node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NodeLoadReply {
    pub nodes: Vec<NodeLoad>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NodeLoad {
    pub node: String,
    pub cpus: u32,
    pub load_avg: f64,
    /// Jobs not over that hold CPUs of the node.
    pub jobs: u64,
}

/// `suspend` and `resume`: the job's state now.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobStateReply {
    pub job: u64,
    pub state: JobState,
}

/// `kill`: a queued job is killed at once; a started one is being killed (SIGTERM, then SIGKILL after the grace).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KillReply {
    pub job: u64,
    pub state: KillState,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KillState {
    Killed,
    Killing,
}

/// `signal`: the signal sent, by its full name ("SIGUSR1").
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SignalReply {
    pub job: u64,
    pub signal: String,
}

/// `logs`: the tails of the job's log files, node by node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LogsReply {
    pub job: u64,
    pub files: Vec<LogFile>,
}

/// One log file's tail, or why a node's files could not be read.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum LogFile {
    Tail {
        node: String,
        #[serde(flatten)]
        tail: LogTail,
    },
    Unavailable {
        node: String,
        error: String,
    },
}

/// `monitor_token`: a token for the web monitor and the monitor's address (empty: no monitor).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MonitorTokenReply {
    pub token: String,
    pub address: String,
}

/// `auth`: who the controller takes the peer for, and its proof to that user (the first sealed line).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AuthReply {
    pub uid: u32,
    pub gid: u32,
    pub admin: bool,
    pub controller: ControllerProof,
}

/// `status`: the whole cluster as the asker may see it (also written to the state directory's `status.json`).
/// `history`: the matching jobs, oldest first, as `status` shows a job.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HistoryReply {
    pub jobs: Vec<StatusJob>,
    /// Older jobs matched too but were left out (the request's limit).
    pub more: bool,
    /// How long ended jobs stay in the history (the controller's `--keep-history-days`).
    pub keep_history_s: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StatusReply {
    pub slice_ns: u64,
    /// Rows of the Ousterhout matrix (the gang multiprogramming level).
    pub rows: u32,
    pub nodes: Vec<StatusNode>,
    pub jobs: Vec<StatusJob>,
    /// Per slot of the cycle, per node: the job on each CPU.
    pub matrix: Vec<Vec<MatrixCell>>,
    pub slice_start_skew: Summary,
    pub storage: StorageStatus,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StatusNode {
    pub name: String,
    pub cpus: u32,
    pub mem_bytes: u64,
    pub connected: bool,
    pub freezer: String,
    pub load_avg: f64,
    pub switches: u64,
    pub switch_errors: u64,
    /// Jobs whose cgroup on the node the agent could not empty; it keeps them and retries.
    #[serde(default)]
    pub stuck_jobs: Vec<StuckJob>,
}

/// A job's cgroup on a node that could not be emptied: processes that outlived SIGKILL (waiting in the kernel,
/// e.g. for a dead NFS server). The agent keeps the cgroup and retries the kill every second.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StuckJob {
    pub job: u64,
    /// How many processes are left, and the first of them (at most 64).
    pub processes: u64,
    pub pids: Vec<i32>,
    /// When the agent found that the kill had not ended them within its bound.
    pub since_unix_ms: u64,
}

impl StuckJob {
    /// "2 processes could not be killed (pids 41,42)".
    pub fn describe(&self) -> String {
        let pids: Vec<String> = self.pids.iter().map(|p| p.to_string()).collect();
        format!("{} could not be killed (pids {})", processes(self.processes), pids.join(","))
    }
}

/// "1 process", "2 processes".
pub fn processes(count: u64) -> String {
    if count == 1 {
        "1 process".to_string()
    } else {
        format!("{count} processes")
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StatusJob {
    pub id: u64,
    pub uid: u32,
    #[serde(with = "crate::wire::jobs::class_name")]
    pub class: JobClass,
    #[serde(with = "crate::wire::jobs::mode_name")]
    pub mode: Mode,
    pub state: JobState,
    pub tasks: u32,
    pub mem_bytes: u64,
    pub idle: bool,
    pub registered: bool,
    /// The command line, or "(hidden)" for another user's job under private data.
    pub command: String,
    pub placement: Vec<NodePlacement>,
    pub cpu_ns: u64,
    /// Over, and every node it was placed on has given its CPU time at the end: `cpu_ns` grows no more. (The
    /// other nodes of an MPI job give theirs after its launcher's node ended it.)
    #[serde(default)]
    pub cpu_final: bool,
    pub pids: Vec<i32>,
    /// Every process of the job is frozen on every node that reported it.
    pub frozen: bool,
    pub slice_share: f64,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub submitted_unix_ms: u64,
    pub started_unix_ms: Option<u64>,
    pub ended_unix_ms: Option<u64>,
    /// Processes of the job that a node could not kill (see `StuckJob`), as first reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_behind: Option<String>,
    /// A Slurm job's: how cosched keeps its Slurm time limit while slicing it (absent for other jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_time: Option<SlurmTimeStatus>,
    /// The name given at submission (`-J`), or "".
    #[serde(default)]
    pub name: String,
    /// Its time limit in its slots (`--time`), if it has one.
    #[serde(default)]
    pub time_limit_s: Option<u64>,
    /// How long it has run in its slots, for a job with a time limit (0 for others).
    #[serde(default)]
    pub in_slot_ms: u64,
}

/// The time a Slurm job spent out of its slots that cosched has added to its Slurm end time
/// (`crate::slurm_time`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SlurmTimeStatus {
    /// Seconds added to the job's end time so far.
    pub extended_s: u64,
    /// Why the last extension failed or was not checked (tried again at the next pass).
    pub error: Option<String>,
}

/// One node's CPUs in one slot: the job on each CPU (`None`: idle).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MatrixCell {
    pub node: String,
    pub cpus: Vec<Option<u64>>,
}

/// Whether the database works, since when, what memory holds that it does not, and the backup.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StorageStatus {
    pub state: StorageState,
    pub error: Option<String>,
    pub since_unix_ms: u64,
    pub held_changes: u64,
    /// The database file's path.
    pub database: String,
    pub backup: BackupStatus,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StorageState {
    Ok,
    Error,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BackupStatus {
    pub path: String,
    pub taken_unix_ms: Option<u64>,
    /// The backup holds every change the database holds, and the database works.
    pub current: bool,
    pub error: Option<String>,
}

/// `ReplyData` and a `From` for each reply struct, from one list: `Variant(Reply)`, or `Variant(Reply => Held)`
/// where the enum holds the reply in another form (a large one boxed).
macro_rules! reply_data {
    ($($variant:ident($reply:ty $(=> $held:ty)?)),* $(,)?) => {
        /// The `data` of a successful reply, whichever the request (written untagged: the request says which it is).
        #[derive(Clone, Debug, Serialize, PartialEq)]
        #[serde(untagged)]
        pub enum ReplyData {
            $($variant(reply_data!(@held $reply $(=> $held)?)),)*
        }

        $(impl From<$reply> for ReplyData {
            fn from(reply: $reply) -> ReplyData {
                ReplyData::$variant(reply.into())
            }
        })*
    };
    (@held $reply:ty) => { $reply };
    (@held $reply:ty => $held:ty) => { $held };
}

reply_data!(
    Challenge(ChallengeReply),
    Auth(AuthReply),
    Submit(SubmitReply),
    Pid(PidReply),
    Exec(ExecReply),
    Class(ClassReply),
    Resources(ResourcesReply),
    Usage(UsageReply),
    NodeLoad(NodeLoadReply),
    Status(StatusReply => Box<StatusReply>),
    History(HistoryReply),
    JobState(JobStateReply),
    Kill(KillReply),
    Signal(SignalReply),
    Logs(LogsReply),
    MonitorToken(MonitorTokenReply),
);

/// The JSON of every reply, pinned: the C client and the monitor page read these names and types, so renaming a
/// field, changing its type or its nesting must fail here first.
#[cfg(test)]
mod wire_tests {
    use super::super::Reply;
    use super::*;

    /// `data` as the controller writes it in a successful reply, and read back into its struct.
    fn assert_wire<T>(data: T, expected: &str)
    where
        T: Into<ReplyData> + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug + Clone,
    {
        let line = serde_json::to_string(&Reply::ok(data.clone())).unwrap();
        assert_eq!(line, format!(r#"{{"ok":true,"data":{expected}}}"#));
        let read: Reply<T> = serde_json::from_str(&line).unwrap();
        assert_eq!(read.into_result(), Ok(data));
    }

    #[test]
    fn an_error_reply_has_no_data() {
        assert_eq!(serde_json::to_string(&Reply::error("no job 9")).unwrap(), r#"{"ok":false,"error":"no job 9"}"#);
        let read: Reply<StatusReply> = serde_json::from_str(r#"{"ok":false,"error":"no job 9"}"#).unwrap();
        assert_eq!(read.into_result(), Err("no job 9".to_string()));
    }

    #[test]
    fn challenge_and_auth() {
        assert_wire(ChallengeReply { nonce: "ab".into() }, r#"{"nonce":"ab"}"#);
        let controller = ControllerProof { munge: Some("MUNGE:x".into()), hmac: None };
        let auth = AuthReply { uid: 1000, gid: 100, admin: false, controller };
        assert_wire(auth, r#"{"uid":1000,"gid":100,"admin":false,"controller":{"munge":"MUNGE:x"}}"#);
    }

    #[test]
    fn job_changes() {
        assert_wire(SubmitReply { job: 3, state: JobState::Queued }, r#"{"job":3,"state":"queued"}"#);
        assert_wire(PidReply { job: 3, pid: 42, node: "n1".into() }, r#"{"job":3,"pid":42,"node":"n1"}"#);
        assert_wire(ClassReply { job: 3, class: JobClass::Standby }, r#"{"job":3,"class":"standby"}"#);
        assert_wire(ResourcesReply { job: 3 }, r#"{"job":3}"#);
        assert_wire(JobStateReply { job: 3, state: JobState::Suspended }, r#"{"job":3,"state":"suspended"}"#);
        assert_wire(KillReply { job: 3, state: KillState::Killing }, r#"{"job":3,"state":"killing"}"#);
        assert_wire(KillReply { job: 3, state: KillState::Killed }, r#"{"job":3,"state":"killed"}"#);
        assert_wire(SignalReply { job: 3, signal: "SIGUSR1".into() }, r#"{"job":3,"signal":"SIGUSR1"}"#);
    }

    #[test]
    fn usage_and_node_load() {
        let usage = UsageReply { job: 3, state: JobState::Running, cpu_ns: 5, pids: vec![7, 8], slice_share: 0.5 };
        assert_wire(usage, r#"{"job":3,"state":"running","cpu_ns":5,"pids":[7,8],"slice_share":0.5}"#);
        let load = NodeLoadReply { nodes: vec![NodeLoad { node: "n1".into(), cpus: 4, load_avg: 1.5, jobs: 2 }] };
        assert_wire(load, r#"{"nodes":[{"node":"n1","cpus":4,"load_avg":1.5,"jobs":2}]}"#);
    }

    #[test]
    fn logs_and_monitor_token() {
        let tail = LogTail { rank: 0, stream: "out".into(), path: "/l/0.out".into(), text: "hi\n".into() };
        let files = vec![
            LogFile::Tail { node: "n1".into(), tail },
            LogFile::Unavailable { node: "n2".into(), error: "no answer within 5 s".into() },
        ];
        assert_wire(
            LogsReply { job: 3, files },
            r#"{"job":3,"files":[{"node":"n1","rank":0,"stream":"out","path":"/l/0.out","text":"hi\n"},{"node":"n2","error":"no answer within 5 s"}]}"#,
        );
        let token = MonitorTokenReply { token: "f00d".into(), address: "127.0.0.1:8180".into() };
        assert_wire(token, r#"{"token":"f00d","address":"127.0.0.1:8180"}"#);
    }

    fn example_status() -> StatusReply {
        let job = StatusJob {
            id: 3,
            uid: 1000,
            class: JobClass::Batch,
            mode: Mode::Gang,
            state: JobState::Running,
            tasks: 2,
            mem_bytes: 0,
            idle: false,
            registered: false,
            command: "sleep 9".into(),
            placement: vec![NodePlacement { node: "n1".into(), cpus: vec![0, 1], ranks: vec![0, 1] }],
            cpu_ns: 10,
            cpu_final: false,
            pids: vec![42],
            frozen: true,
            slice_share: 1.0,
            exit_code: None,
            error: None,
            submitted_unix_ms: 100,
            started_unix_ms: Some(101),
            ended_unix_ms: None,
            left_behind: None,
            slurm_time: None,
            name: "nightly".into(),
            time_limit_s: Some(60),
            in_slot_ms: 1500,
        };
        let node = StatusNode {
            name: "n1".into(),
            cpus: 2,
            mem_bytes: 1024,
            connected: true,
            freezer: "v2".into(),
            load_avg: 0.25,
            switches: 7,
            switch_errors: 0,
            stuck_jobs: vec![],
        };
        let storage = StorageStatus {
            state: StorageState::Ok,
            error: None,
            since_unix_ms: 99,
            held_changes: 0,
            database: "/s/cosched.db".into(),
            backup: BackupStatus {
                path: "/s/backup/cosched.db".into(),
                taken_unix_ms: None,
                current: false,
                error: None,
            },
        };
        StatusReply {
            slice_ns: 10_000_000,
            rows: 4,
            nodes: vec![node],
            jobs: vec![job],
            matrix: vec![vec![MatrixCell { node: "n1".into(), cpus: vec![Some(3), None] }]],
            slice_start_skew: Summary { count: 1, p50_ns: 2, p99_ns: 3, max_ns: 4 },
            storage,
        }
    }

    #[test]
    fn status() {
        let expected = concat!(
            r#"{"slice_ns":10000000,"rows":4,"#,
            r#""nodes":[{"name":"n1","cpus":2,"mem_bytes":1024,"connected":true,"freezer":"v2","load_avg":0.25,"#,
            r#""switches":7,"switch_errors":0,"stuck_jobs":[]}],"#,
            r#""jobs":[{"id":3,"uid":1000,"class":"batch","mode":"gang","state":"running","tasks":2,"mem_bytes":0,"#,
            r#""idle":false,"registered":false,"command":"sleep 9","#,
            r#""placement":[{"node":"n1","cpus":[0,1],"ranks":[0,1]}],"cpu_ns":10,"cpu_final":false,"pids":[42],"frozen":true,"#,
            r#""slice_share":1.0,"exit_code":null,"error":null,"submitted_unix_ms":100,"started_unix_ms":101,"#,
            r#""ended_unix_ms":null,"name":"nightly","time_limit_s":60,"in_slot_ms":1500}],"#,
            r#""matrix":[[{"node":"n1","cpus":[3,null]}]],"#,
            r#""slice_start_skew":{"count":1,"p50_ns":2,"p99_ns":3,"max_ns":4},"#,
            r#""storage":{"state":"ok","error":null,"since_unix_ms":99,"held_changes":0,"database":"/s/cosched.db","#,
            r#""backup":{"path":"/s/backup/cosched.db","taken_unix_ms":null,"current":false,"error":null}}}"#,
        );
        assert_wire(example_status(), expected);
    }

    #[test]
    fn history_lists_jobs_as_status_does() {
        let job = example_status().jobs.remove(0);
        let job_json = serde_json::to_string(&job).unwrap();
        let history = HistoryReply { jobs: vec![job], more: true, keep_history_s: 86_400 };
        assert_wire(history, &format!(r#"{{"jobs":[{job_json}],"more":true,"keep_history_s":86400}}"#));
    }

    #[test]
    fn a_local_job_and_a_storage_fault_read_as_the_monitor_and_the_cli_expect() {
        let mut status = example_status();
        status.jobs[0].mode = Mode::Local;
        status.jobs[0].class = JobClass::Interactive;
        status.storage.state = StorageState::Error;
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["jobs"][0]["mode"], "local");
        assert_eq!(json["jobs"][0]["class"], "interactive");
        assert_eq!(json["storage"]["state"], "error");
    }

    #[test]
    fn a_stuck_job_reads_under_its_node_and_a_left_behind_note_under_its_job() {
        let mut status = example_status();
        status.nodes[0].stuck_jobs.push(StuckJob { job: 3, processes: 1, pids: vec![42], since_unix_ms: 7 });
        status.jobs[0].left_behind = Some("node n1: 1 process could not be killed".into());
        let json = serde_json::to_value(&status).unwrap();
        let stuck = &json["nodes"][0]["stuck_jobs"][0];
        assert_eq!((stuck["job"].as_u64(), stuck["processes"].as_u64()), (Some(3), Some(1)));
        assert_eq!((stuck["pids"][0].as_i64(), stuck["since_unix_ms"].as_u64()), (Some(42), Some(7)));
        assert_eq!(json["jobs"][0]["left_behind"], "node n1: 1 process could not be killed");
    }
}
