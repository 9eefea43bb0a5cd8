//! Jobs as the controller keeps them, and who may act on them.

use crate::slurm_time::TimeCredit;
use cosched_policy::cluster::{JobClass, Mode, NodeCpus};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    Suspended,
    Finished,
    Killed,
    Failed,
    /// Ended at its time limit (`submit --time`), as Slurm's `TIMEOUT`.
    #[serde(rename = "timeout")]
    TimedOut,
}

impl JobState {
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Suspended,
        JobState::Finished,
        JobState::Killed,
        JobState::Failed,
        JobState::TimedOut,
    ];

    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Suspended => "suspended",
            JobState::Finished => "finished",
            JobState::Killed => "killed",
            JobState::Failed => "failed",
            JobState::TimedOut => "timeout",
        }
    }

    /// Slurm's name of the state (`squeue -t`, `sacct -s`) and its compact code (`squeue %t`).
    pub fn slurm_names(self) -> (&'static str, &'static str) {
        match self {
            JobState::Queued => ("PENDING", "PD"),
            JobState::Running => ("RUNNING", "R"),
            JobState::Suspended => ("SUSPENDED", "S"),
            JobState::Finished => ("COMPLETED", "CD"),
            JobState::Killed => ("CANCELLED", "CA"),
            JobState::Failed => ("FAILED", "F"),
            JobState::TimedOut => ("TIMEOUT", "TO"),
        }
    }

    /// The state of a name: `name()`, Slurm's name or its code (any case).
    pub fn from_name(text: &str) -> Option<JobState> {
        let text = text.trim();
        JobState::ALL.into_iter().find(|s| {
            let (long, code) = s.slurm_names();
            [s.name(), long, code].iter().any(|name| name.eq_ignore_ascii_case(text))
        })
    }

    pub fn is_over(self) -> bool {
        matches!(self, JobState::Finished | JobState::Killed | JobState::Failed | JobState::TimedOut)
    }
}

/// A job's CPUs on one named node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlacement {
    pub node: String,
    pub cpus: Vec<u32>,
    /// Global ranks of the tasks on this node.
    pub ranks: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u64,
    pub uid: u32,
    pub gid: u32,
    /// Stored by name ("batch", ...), as in databases written before the enum.
    #[serde(with = "class_name")]
    pub class: JobClass,
    /// Gang or local ("gang", "local"); a gang job dropped from the gang database after a long idle time becomes
    /// local.
    #[serde(with = "mode_name")]
    pub mode: Mode,
    pub tasks: u32,
    pub nodes: Option<u32>,
    pub mem_bytes: u64,
    pub slice_opt_out: bool,
    pub registered: bool,
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    pub state: JobState,
    pub placement: Vec<NodePlacement>,
    pub submitted_unix_ms: u64,
    pub started_unix_ms: Option<u64>,
    pub ended_unix_ms: Option<u64>,
    pub exit_code: Option<i32>,
    /// Nodes on which the job has no process left.
    pub ended_on: Vec<String>,
    /// Idle (no CPU used for the revert time): run outside the matrix.
    pub idle: bool,
    pub error: Option<String>,
    /// Random, per job: a cgroup is adopted as this job only if it carries the same token (`job_tag`).
    #[serde(default)]
    pub token: String,
    /// Suspended by an administrator: only an administrator may resume it.
    #[serde(default)]
    pub held_by_admin: bool,
    /// An MPI job: the command (the launcher) runs once, on the first node, and starts the rest through `Exec`;
    /// the job ends when the launcher ends.
    #[serde(default)]
    pub mpi: bool,
    /// A Slurm job's id: Slurm placed and launched it, and its epilog ends it (`crate::slurm`). Its nodes
    /// empty between job steps without ending it.
    #[serde(default)]
    pub slurm_job: Option<u32>,
    /// Processes of the job that a node could not kill when it ended (`protocol::StuckJob`), as first reported:
    /// that node keeps their cgroup and retries; `status` lists it under the node while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_behind: Option<String>,
    /// What cosched has added to the Slurm job's end time and time limit for the time it spent out of its slots
    /// (`crate::slurm_time`): kept here so that a restarted controller never grants it twice.
    #[serde(default, skip_serializing_if = "TimeCredit::is_zero")]
    pub slurm_time: TimeCredit,
    /// The CPU time of all its processes on all its nodes, kept from its end on for its history (the nodes'
    /// reports are not kept across restarts).
    #[serde(default)]
    pub cpu_ns: u64,
    /// Its share of the cycle's slices when it ended (1 outside the matrix), for its history.
    #[serde(default)]
    pub slice_share: f64,
    /// The name its owner gave it (`submit -J`); empty when none was given.
    #[serde(default)]
    pub name: String,
    /// How long it may run in its slots (`submit --time`); `None`: no limit.
    #[serde(default)]
    pub time_limit_s: Option<u64>,
    /// How long it has run in its slots so far (`controller::time_limit`): its share of the cycle's slices over the
    /// time it was running. Saved at least every `time_limit::SAVE_EVERY`.
    #[serde(default)]
    pub in_slot_ms: u64,
    /// The matrix row it owns (a started gang job): written when it changes, so that a controller that restarts
    /// gives every running job the row it had, and none is left out of the cycle by a new packing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_held: Option<u32>,
    /// Where its tasks write stdout and stderr, when its owner said (`submit -o`/`-e`); dropped at its end.
    #[serde(default, skip_serializing_if = "crate::wire::output_files::OutputFiles::is_empty")]
    pub output_files: crate::wire::output_files::OutputFiles,
    /// Its owner's file mode creation mask at submission, for its tasks; `None`: the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
}

/// The most of an ended job's command line that its record keeps (its words, as far as they fit), counted as JSON
/// writes it (a control character takes six bytes there).
pub const ENDED_COMMAND_BYTES: usize = 4096;

/// The bytes `text` takes inside a JSON string (serde_json escapes quotes, backslashes and control characters).
pub fn json_len(text: &str) -> usize {
    text.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum()
}

/// `text` cut to at most `max` bytes as JSON writes it, ending in "…" when cut.
pub fn cut_to_json_bytes(text: &str, max: usize) -> String {
    if json_len(text) <= max {
        return text.to_string();
    }
    let mut kept = 0;
    let mut cut: String = text
        .chars()
        .take_while(|c| {
            kept += json_len(c.encode_utf8(&mut [0; 4]));
            kept + '…'.len_utf8() <= max
        })
        .collect();
    cut.push('…');
    cut
}

impl JobRecord {
    /// The job is over, in `state`, now. Its record keeps what `status` and its history show: the environment,
    /// which only starting it needed, goes, and the command line is cut to `ENDED_COMMAND_BYTES` (a user's short
    /// jobs with environments near the request's 1 MiB once grew the daemon's memory and database by that much
    /// each, for ever).
    pub fn end(&mut self, state: JobState, now_unix_ms: u64) {
        self.state = state;
        self.ended_unix_ms = Some(now_unix_ms);
        self.env = Vec::new();
        self.output_files = Default::default();
        let mut kept = 0;
        let fits = self.argv.iter().take_while(|word| {
            kept += json_len(word) + 1;
            kept <= ENDED_COMMAND_BYTES
        });
        let words = fits.count();
        if words < self.argv.len() {
            self.argv.truncate(words);
            self.argv.push("…".into());
        }
    }

    /// A queued job of `who` with nothing placed or measured yet; the controller sets when it was submitted and its
    /// secret token.
    pub fn new(id: u64, who: &Identity, class: JobClass, local: bool, tasks: u32) -> JobRecord {
        JobRecord {
            id,
            uid: who.uid,
            gid: who.gid,
            class,
            mode: if local { Mode::Local } else { Mode::Gang },
            tasks,
            nodes: None,
            mem_bytes: 0,
            slice_opt_out: false,
            registered: false,
            argv: vec![],
            cwd: "/".into(),
            env: vec![],
            state: JobState::Queued,
            placement: vec![],
            submitted_unix_ms: 0,
            started_unix_ms: None,
            ended_unix_ms: None,
            exit_code: None,
            ended_on: vec![],
            mpi: false,
            slurm_job: None,
            slurm_time: TimeCredit::default(),
            idle: false,
            error: None,
            held_by_admin: false,
            left_behind: None,
            token: String::new(),
            cpu_ns: 0,
            slice_share: 0.0,
            name: String::new(),
            time_limit_s: None,
            in_slot_ms: 0,
            row_held: None,
            output_files: Default::default(),
            umask: None,
        }
    }

    /// How the plan shares the job's CPUs: a job that opted out of slices runs like a local one.
    pub fn planned_mode(&self) -> Mode {
        if self.slice_opt_out {
            Mode::Local
        } else {
            self.mode
        }
    }

    pub fn placement_for_plan(&self, node_index: impl Fn(&str) -> Option<u32>) -> Option<Vec<NodeCpus>> {
        if self.placement.is_empty() {
            return None;
        }
        self.placement.iter().map(|p| node_index(&p.node).map(|node| NodeCpus { node, cpus: p.cpus.clone() })).collect()
    }

    /// The node an MPI job's launcher runs on (its first).
    pub fn launcher_node(&self) -> Option<&str> {
        self.mpi.then(|| self.placement.first().map(|p| p.node.as_str())).flatten()
    }

    pub fn on_node(&self, node: &str) -> Option<&NodePlacement> {
        self.placement.iter().find(|p| p.node == node)
    }
}

/// Who sent a request: from the Unix socket's peer credentials, or from an
/// authenticated TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub admin: bool,
}

impl Identity {
    pub fn may_act_on(&self, job: &JobRecord) -> Result<(), String> {
        if self.admin || self.uid == job.uid {
            Ok(())
        } else {
            Err(format!("permission denied: job {} belongs to uid {}, you are uid {}", job.id, job.uid, self.uid))
        }
    }
}

/// A mode's name on the wire and in the database.
pub fn mode_text(mode: Mode) -> &'static str {
    match mode {
        Mode::Gang => "gang",
        Mode::Local => "local",
    }
}

pub fn parse_mode(text: &str) -> Option<Mode> {
    [Mode::Gang, Mode::Local].into_iter().find(|mode| mode_text(*mode) == text)
}

/// Serde for a `JobClass` as its name (the policy crate's enums carry no serde).
pub mod class_name {
    use cosched_policy::cluster::JobClass;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(class: &JobClass, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(class.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<JobClass, D::Error> {
        let text = String::deserialize(deserializer)?;
        JobClass::parse(&text).ok_or_else(|| D::Error::custom(format!("unknown class {text:?}")))
    }
}

/// Serde for a `Mode` as its name.
pub mod mode_name {
    use cosched_policy::cluster::Mode;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &Mode, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(super::mode_text(*mode))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Mode, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::parse_mode(&text).ok_or_else(|| D::Error::custom(format!("unknown mode {text:?} (gang or local)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_measured_and_cut_as_json_writes_them() {
        assert_eq!(json_len("ab\"\\\n\u{1}é"), 2 + 2 + 2 + 2 + 6 + 2);
        for text in ["\u{1}\u{1f}\"x", "tab\tnew\nline\u{8}\u{c}\r", "plain é ü", "\u{7f}\\"] {
            assert_eq!(serde_json::to_string(text).unwrap().len() - 2, json_len(text), "{text:?}");
        }
        let cut = cut_to_json_bytes(&"\u{1}".repeat(1_000), 4096);
        assert!(json_len(&cut) <= 4096 && json_len(&cut) > 4080 && cut.ends_with('…'), "{}", json_len(&cut));
        assert_eq!(cut_to_json_bytes("short", 4096), "short");
        let owner = Identity { uid: 1, gid: 1, admin: false };
        let mut job = JobRecord::new(1, &owner, JobClass::Batch, false, 1);
        job.argv = vec!["prog".into(), "\u{1}".repeat(1_000), "x".into()];
        job.end(JobState::Killed, 1);
        assert_eq!(job.argv, ["prog", "…"], "1,000 control characters are 6,000 bytes of JSON");
    }
}
