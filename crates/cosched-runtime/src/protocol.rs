//! The wire protocol: one JSON object per line, over a Unix socket or TCP.
//!
//! Users send a `Request` and read one `Reply`. Agents open their connection
//! with `Request::AgentHello`; from then on the controller sends
//! `ToAgent` lines and the agent sends `FromAgent` lines on it.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// The longest line either side accepts (a bad peer cannot make us buffer more).
pub const MAX_LINE_BYTES: usize = 1 << 20;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// TCP only: authenticate with the shared key, then act as `uid`.
    Auth {
        token: String,
        uid: u32,
        gid: u32,
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
    Status,
    Suspend {
        job: u64,
    },
    Resume {
        job: u64,
    },
    Kill {
        job: u64,
    },
    Logs {
        job: u64,
    },
    /// A token for the web monitor, bound to the caller's identity.
    MonitorToken,
    AgentHello(AgentHello),
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
    pub argv: Vec<String>,
    pub cwd: String,
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

fn default_class() -> String {
    "batch".into()
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
    /// Required over TCP.
    pub token: Option<String>,
    /// Jobs whose cgroups the agent found (it re-adopts them).
    pub adopted: Vec<AdoptedJob>,
    pub freezer: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AdoptedJob {
    pub job: u64,
    pub pids: Vec<i32>,
}

/// The reply to every user request.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "serde_json::Value::is_null", default)]
    pub data: serde_json::Value,
}

impl Reply {
    pub fn ok(data: serde_json::Value) -> Reply {
        Reply { ok: true, error: None, data }
    }
    pub fn error(message: impl Into<String>) -> Reply {
        Reply { ok: false, error: Some(message.into()), data: serde_json::Value::Null }
    }
}

/// What the controller tells an agent.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum ToAgent {
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
    /// Move a process into the job's cgroup; the agent answers with `PidMoved { ack }`.
    AddPid {
        job: u64,
        pid: i32,
        ack: u64,
    },
    /// Move a process out of the job's cgroup; answered like `AddPid`.
    RemovePid {
        job: u64,
        pid: i32,
        ack: u64,
    },
    /// Send the tails of the job's log files for these ranks; the agent answers with `Logs { ack }`.
    ReadLogs {
        job: u64,
        ranks: Vec<u32>,
        ack: u64,
    },
    /// The job is over on this node: remove its cgroup once empty.
    Forget {
        job: u64,
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
}

/// What an agent tells the controller.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FromAgent {
    /// Every slice boundary at most every 100 ms: CPU use and processes per job.
    Report {
        jobs: Vec<JobUsage>,
        load_avg: f64,
        switches: u64,
        /// (slice number, ns from the slice boundary to the switch's start) of the switches since the last report.
        #[serde(default)]
        slice_starts: Vec<(u64, u64)>,
    },
    /// The job has no process left on this node.
    Ended {
        job: u64,
        exit_code: Option<i32>,
    },
    Failed {
        job: u64,
        error: String,
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

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobUsage {
    pub job: u64,
    pub cpu_ns: u64,
    pub pids: Vec<i32>,
    pub frozen: bool,
}

/// Read one line (at most `MAX_LINE_BYTES`); `Ok(None)` at end of stream.
pub fn read_line<R: BufRead>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let read = <&mut R as std::io::Read>::take(reader, MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(std::io::Error::other(format!("request longer than {MAX_LINE_BYTES} bytes")));
    }
    String::from_utf8(line)
        .map(|s| Some(s.trim_end().to_string()))
        .map_err(|_| std::io::Error::other("request is not UTF-8"))
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
}
