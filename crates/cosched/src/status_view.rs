//! `cosched status` as people read it: nodes, then jobs the way `squeue`
//! lists them (user names, elapsed time, where they run), filtered by user,
//! state and node on this side of the link.

use clap::Args;
use cosched_runtime::wire::jobs::{mode_text, JobState};
use cosched_runtime::wire::protocol::{SlurmTimeStatus, StatusJob, StatusReply, StorageState, StorageStatus};
use cosched_workload::swf::printable;
use nix::unistd::User;

/// Which jobs to list (each flag takes a comma-separated list; a job must match every flag given).
#[derive(Args, Clone, Debug, Default)]
pub struct StatusFilter {
    /// Only these jobs (ids); an id the controller does not show is an error naming it.
    #[arg(value_name = "JOBID")]
    pub jobs: Vec<u64>,
    /// Only jobs of these users (names or uids).
    #[arg(short = 'u', long = "user", value_delimiter = ',')]
    pub users: Vec<String>,
    /// Only jobs in these states: queued, running, suspended, finished, killed, failed, timeout, or active (the
    /// first three) and ended (the others); Slurm's names and codes are taken too (PD,R,S,CD,CA,F,TO; PENDING...).
    #[arg(short = 't', long = "state", value_delimiter = ',')]
    pub states: Vec<String>,
    /// Only jobs of these names (`submit -J`).
    #[arg(short = 'n', long = "name", value_delimiter = ',')]
    pub names: Vec<String>,
    /// Only jobs with CPUs on these nodes.
    #[arg(short = 'w', long = "node", value_delimiter = ',')]
    pub nodes: Vec<String>,
}

/// A filter whose names have been checked.
struct Wanted {
    ids: Vec<u64>,
    names: Vec<String>,
    uids: Vec<u32>,
    states: Vec<JobState>,
    nodes: Vec<String>,
}

impl StatusFilter {
    /// Whether only ids are given (no user, state, name or node).
    pub fn picks_by_ids_alone(&self) -> bool {
        self.users.is_empty() && self.states.is_empty() && self.names.is_empty() && self.nodes.is_empty()
    }

    /// Keep only the jobs the filter asks for; an unknown user, state or node is an error naming it.
    pub fn apply(&self, status: &mut StatusReply) -> Result<(), String> {
        let wanted = self.checked(status)?;
        status.jobs.retain(|job| wanted.keeps(job));
        Ok(())
    }

    fn checked(&self, status: &StatusReply) -> Result<Wanted, String> {
        let uids = uids_of(&self.users)?;
        let states = states_of(&self.states)?;
        if let Some(unknown) = self.nodes.iter().find(|n| !status.nodes.iter().any(|known| &known.name == *n)) {
            let known: Vec<&str> = status.nodes.iter().map(|n| n.name.as_str()).collect();
            return Err(format!("no node '{unknown}'; nodes: {}", known.join(", ")));
        }
        let missing: Vec<String> =
            self.jobs.iter().filter(|id| !status.jobs.iter().any(|j| j.id == **id)).map(u64::to_string).collect();
        if !missing.is_empty() {
            return Err(format!("no job {} (ended jobs leave after --keep-finished-s)", missing.join(", ")));
        }
        Ok(Wanted { ids: self.jobs.clone(), names: self.names.clone(), uids, states, nodes: self.nodes.clone() })
    }
}

impl Wanted {
    fn keeps(&self, job: &StatusJob) -> bool {
        (self.ids.is_empty() || self.ids.contains(&job.id))
            && (self.names.is_empty() || self.names.contains(&job.name))
            && (self.uids.is_empty() || self.uids.contains(&job.uid))
            && (self.states.is_empty() || self.states.contains(&job.state))
            && (self.nodes.is_empty() || job.placement.iter().any(|p| self.nodes.contains(&p.node)))
    }
}

/// Users' names or uids, as uids.
pub fn uids_of(users: &[String]) -> Result<Vec<u32>, String> {
    users.iter().map(|u| uid_of(u)).collect()
}

/// State names as states: also `active` (queued, running, suspended) and `ended` (finished, killed, failed).
pub fn states_of(names: &[String]) -> Result<Vec<JobState>, String> {
    let mut states = Vec::new();
    for text in names {
        let group = |over: bool| JobState::ALL.into_iter().filter(move |s| s.is_over() == over);
        match text.trim().to_ascii_lowercase().as_str() {
            "active" => states.extend(group(false)),
            "ended" => states.extend(group(true)),
            _ => states.push(JobState::from_name(text).ok_or_else(|| {
                let known: Vec<&str> = JobState::ALL.iter().map(|s| s.name()).collect();
                format!("unknown job state '{text}'; known: {}, active, ended", known.join(", "))
            })?),
        }
    }
    states.sort_by_key(|s| *s as u8);
    states.dedup();
    Ok(states)
}

/// A user name or a uid, as a uid.
fn uid_of(user: &str) -> Result<u32, String> {
    if let Ok(uid) = user.trim().parse::<u32>() {
        return Ok(uid);
    }
    match User::from_name(user.trim()) {
        Ok(Some(found)) => Ok(found.uid.as_raw()),
        _ => Err(format!("unknown user '{user}'")),
    }
}

/// A uid's name on this host, or the number when it has none; looked up once per uid (the password database may be
/// a file read whole at each lookup, or a network service).
fn user_name(uid: u32) -> String {
    thread_local! {
        static NAMES: std::cell::RefCell<std::collections::BTreeMap<u32, String>> = Default::default();
    }
    NAMES.with_borrow_mut(|names| {
        names
            .entry(uid)
            .or_insert_with(|| cosched_runtime::wire::jobs::user_name(uid).unwrap_or_else(|| uid.to_string()))
            .clone()
    })
}

/// Elapsed wall time as `squeue` writes it: `M:SS`, `H:MM:SS`, or `D-HH:MM:SS`.
pub fn elapsed_text(elapsed_ms: u64) -> String {
    let s = elapsed_ms / 1000;
    let (days, hours, minutes, seconds) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (days, hours) {
        (0, 0) => format!("{minutes}:{seconds:02}"),
        (0, _) => format!("{hours}:{minutes:02}:{seconds:02}"),
        _ => format!("{days}-{hours:02}:{minutes:02}:{seconds:02}"),
    }
}

/// Wall time since the job started, until it ended or `now_unix_ms` (0 while queued).
fn elapsed_ms(job: &StatusJob, now_unix_ms: u64) -> u64 {
    job.started_unix_ms.map_or(0, |start| job.ended_unix_ms.unwrap_or(now_unix_ms).saturating_sub(start))
}

pub fn status_table(status: &StatusReply, format: &Format, now_unix_ms: u64) -> String {
    let mut out = format!("slice {} ms, {} slot(s) in the cycle\n", status.slice_ns as f64 / 1e6, status.matrix.len());
    let skew = &status.slice_start_skew;
    if skew.count > 0 {
        let us = |ns: u64| ns as f64 / 1e3;
        out += &format!(
            "switch start skew between nodes: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs over the last {} slices\n",
            us(skew.p50_ns),
            us(skew.p99_ns),
            us(skew.max_ns),
            skew.count
        );
    }
    out += &storage_text(&status.storage);
    out += &table(&["node", "cpus", "connected", "freezer", "load"], &node_rows(status));
    out += &stuck_text(status, now_unix_ms);
    out += "\n";
    out += &job_table(&status.jobs, format, now_unix_ms, true);
    out.trim_end().to_string()
}

/// A column of the job tables: its name in `--format`, its header, what it shows, and its cell.
struct Field {
    name: &'static str,
    header: &'static str,
    about: &'static str,
    cell: fn(&StatusJob, u64) -> String,
}

/// Every column `--format` knows, in the order `--help` lists them.
const FIELDS: [Field; 21] = [
    Field { name: "jobid", header: "job", about: "the job's id", cell: |j, _| j.id.to_string() },
    Field { name: "name", header: "name", about: "the name given with -J", cell: |j, _| name_cell(j) },
    Field { name: "user", header: "user", about: "its owner's name", cell: |j, _| user_name(j.uid) },
    Field { name: "uid", header: "uid", about: "its owner's uid", cell: |j, _| j.uid.to_string() },
    Field { name: "class", header: "class", about: "its class", cell: |j, _| j.class.name().to_string() },
    Field { name: "mode", header: "mode", about: "gang or local", cell: |j, _| mode_text(j.mode).to_string() },
    Field { name: "state", header: "state", about: "its state", cell: |j, _| j.state.name().to_string() },
    Field {
        name: "st",
        header: "st",
        about: "its state as Slurm's code (PD, R, S, CD, CA, F, TO)",
        cell: |j, _| j.state.slurm_names().1.to_string(),
    },
    Field { name: "exitcode", header: "exit", about: "its exit status", cell: |j, _| optional(j.exit_code) },
    Field {
        name: "submit",
        header: "submit",
        about: "when submitted, in UTC",
        cell: |j, _| utc_text(j.submitted_unix_ms),
    },
    Field {
        name: "start",
        header: "start",
        about: "when started, in UTC",
        cell: |j, _| optional(j.started_unix_ms.map(utc_text)),
    },
    Field {
        name: "end",
        header: "end",
        about: "when it ended, in UTC",
        cell: |j, _| optional(j.ended_unix_ms.map(utc_text)),
    },
    Field {
        name: "elapsed",
        header: "elapsed",
        about: "wall time since its start",
        cell: |j, now| elapsed_text(elapsed_ms(j, now)),
    },
    Field {
        name: "timelimit",
        header: "limit",
        about: "its time limit in its slots (--time)",
        cell: |j, _| optional(j.time_limit_s.map(|s| elapsed_text(s * 1000))),
    },
    Field {
        name: "slottime",
        header: "slottime",
        about: "how long a job with a time limit has run in its slots",
        cell: |j, _| optional(j.time_limit_s.map(|_| elapsed_text(j.in_slot_ms))),
    },
    Field { name: "tasks", header: "tasks", about: "its tasks", cell: |j, _| j.tasks.to_string() },
    Field { name: "nodes", header: "nodes", about: "the nodes it has CPUs on", cell: |j, _| nodes_text(j) },
    Field {
        name: "cpu",
        header: "cpu s",
        about: "CPU seconds used",
        cell: |j, _| format!("{:.1}", j.cpu_ns as f64 / 1e9),
    },
    Field {
        name: "share",
        header: "share",
        about: "its share of the slices",
        cell: |j, _| format!("{:.0}%", j.slice_share * 100.0),
    },
    Field {
        name: "reason",
        header: "reason",
        about: "why it is in its state, cut at 40 characters",
        cell: |j, _| reason_cell(j),
    },
    Field { name: "command", header: "command", about: "its command line", cell: |j, _| one_line(&j.command) },
];

/// The columns of a job table, as `--format` names them (comma-separated, any case).
#[derive(Clone, Debug)]
pub struct Format(Vec<usize>);

impl Format {
    /// `status`'s columns: the command stays last, whole, as scripts read it (`$NF`); the reason before it is cut
    /// (`--json` has it whole).
    pub const STATUS: &'static str = "jobid,user,class,mode,state,elapsed,tasks,nodes,cpu,share,reason,command";
    /// `history`'s columns, as sacct's.
    pub const HISTORY: &'static str =
        "jobid,name,user,state,exitcode,submit,end,elapsed,tasks,nodes,cpu,share,reason,command";

    /// What `--help` says of `--format`.
    pub fn help() -> String {
        let names: Vec<String> = FIELDS.iter().map(|f| format!("{} ({})", f.name, f.about)).collect();
        format!("Columns, comma-separated: {}", names.join(", "))
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(text: &str) -> Result<Format, String> {
        let mut columns = Vec::new();
        for name in text.split(',').map(str::trim) {
            let found = FIELDS.iter().position(|f| f.name.eq_ignore_ascii_case(name));
            columns.push(found.ok_or_else(|| {
                let known: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
                format!("unknown column '{name}'; known: {}", known.join(","))
            })?);
        }
        Ok(Format(columns))
    }
}

/// The jobs alone, a line each, as `squeue` lists them; with their header or without (`--noheader`, for scripts).
pub fn job_table(jobs: &[StatusJob], format: &Format, now_unix_ms: u64, header: bool) -> String {
    let fields: Vec<&Field> = format.0.iter().map(|&i| &FIELDS[i]).collect();
    let headers: Vec<&str> = fields.iter().map(|f| f.header).collect();
    let rows: Vec<Vec<String>> =
        jobs.iter().map(|j| fields.iter().map(|f| (f.cell)(j, now_unix_ms)).collect()).collect();
    let text = table(&headers, &rows);
    match header {
        true => text,
        false => text.lines().skip(1).map(|l| format!("{l}\n")).collect(),
    }
}

fn node_rows(status: &StatusReply) -> Vec<Vec<String>> {
    let row = |n: &cosched_runtime::wire::protocol::StatusNode| {
        vec![
            n.name.clone(),
            n.cpus.to_string(),
            if n.connected { "yes" } else { "no" }.into(),
            n.freezer.clone(),
            format!("{:.2}", n.load_avg),
        ]
    };
    status.nodes.iter().map(row).collect()
}

fn nodes_text(j: &StatusJob) -> String {
    let nodes: Vec<&str> = j.placement.iter().map(|p| p.node.as_str()).collect();
    if nodes.is_empty() {
        "-".into()
    } else {
        nodes.join(",")
    }
}

fn name_cell(j: &StatusJob) -> String {
    match j.name.is_empty() {
        true => "-".into(),
        false => shortened(&one_line(&j.name), NAME_WIDTH),
    }
}

/// The widest name the table shows (`--json` has it whole).
const NAME_WIDTH: usize = 24;

fn reason_cell(j: &StatusJob) -> String {
    job_notes(j).map_or_else(|| "-".into(), |reason| shortened(&one_line(&reason), REASON_WIDTH))
}

/// A value, or "-" when there is none.
fn optional(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A Unix time in milliseconds as UTC `YYYY-MM-DDTHH:MM:SS`, the form sacct prints (in UTC: the controller's and
/// the reader's time zones may differ).
pub fn utc_text(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let (year, month, day) = crate::calendar::date_of_day(seconds / 86_400);
    let s = seconds % 86_400;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The widest reason the table shows (`--json` has it whole), so the command after it stays in view.
const REASON_WIDTH: usize = 40;

/// `text` as it prints (control and invisible characters escaped), on one line, its runs of white space made one
/// space: a command's or a reason's own padding cannot push the columns after it.
fn one_line(text: &str) -> String {
    printable(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// `text` cut to `width` characters, ending in "…" when cut.
fn shortened(text: &str, width: usize) -> String {
    match text.chars().count() > width {
        true => text.chars().take(width.saturating_sub(1)).chain(['…']).collect(),
        false => text.to_string(),
    }
}

/// A line per job cgroup a node could not empty (processes that survived SIGKILL), only when there are some.
fn stuck_text(status: &StatusReply, now_unix_ms: u64) -> String {
    let mut out = String::new();
    for node in &status.nodes {
        for stuck in &node.stuck_jobs {
            out += &format!(
                "node {}: job {}: {} for {}; the agent keeps their cgroup and retries\n",
                node.name,
                stuck.job,
                stuck.describe(),
                elapsed_text(now_unix_ms.saturating_sub(stuck.since_unix_ms))
            );
        }
    }
    out
}

/// Why a job is in its state, when that says more than the state itself.
pub fn reason(j: &StatusJob) -> Option<String> {
    job_notes(j)
}

/// What the state of a job needs said beside it: its error, and for a Slurm job the time cosched added to its Slurm
/// end time or why it could not.
fn job_notes(j: &StatusJob) -> Option<String> {
    // A reason that only repeats the state ("killed") is said once, by the state.
    let mut notes: Vec<String> = j.error.iter().filter(|e| e.as_str() != j.state.name()).cloned().collect();
    match &j.slurm_time {
        Some(SlurmTimeStatus { error: Some(e), .. }) => notes.push(format!("Slurm end time not extended: {e}")),
        Some(SlurmTimeStatus { extended_s, .. }) if *extended_s > 0 => {
            notes.push(format!("Slurm end time +{extended_s} s"))
        }
        _ => {}
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Lines about storage, only when something is wrong with it.
fn storage_text(storage: &StorageStatus) -> String {
    let mut out = String::new();
    if storage.state == StorageState::Error {
        out += &format!(
            "storage: ERROR: {}; requests that change anything are refused, {} changes are held in memory until the \
             database can be written\n",
            storage.error.as_deref().unwrap_or("?"),
            storage.held_changes
        );
    }
    if let Some(error) = &storage.backup.error {
        out += &format!("backup: FAILED: {error}\n");
    }
    out
}

/// Columns padded to their widest cell (by characters); numbers right-aligned, the last column left as is. Every
/// cell is shown with its control and invisible characters escaped: a command line is its user's text, and raw it
/// could drive the terminal of whoever reads the table or forge rows of other users' jobs.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows.iter().map(|row| row.iter().map(|cell| printable(cell)).collect()).collect();
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).chain([headers[c].len()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..headers.len()).map(width).collect();
    // Judged once per column: judged per cell, a table took rows² parses (3.8 s for 1,000 jobs on a busy node).
    let numeric: Vec<bool> =
        (0..headers.len()).map(|c| rows.iter().all(|r| r[c].trim_end_matches('%').parse::<f64>().is_ok())).collect();
    let line = |cells: Vec<&str>| {
        let last = cells.len() - 1;
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, cell)| match () {
                _ if c == last => cell.to_string(),
                _ if numeric[c] => format!("{cell:>w$}", w = widths[c]),
                _ => format!("{cell:<w$}", w = widths[c]),
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in &rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_policy::{JobClass, Mode};
    use cosched_runtime::controller::skew::Summary;
    use cosched_runtime::wire::jobs::NodePlacement;
    use cosched_runtime::wire::protocol::{BackupStatus, StatusNode};

    fn job(id: u64, uid: u32, state: JobState, nodes: &[&str]) -> StatusJob {
        StatusJob {
            id,
            uid,
            class: JobClass::Batch,
            mode: Mode::Gang,
            state,
            tasks: nodes.len() as u32,
            mem_bytes: 0,
            idle: false,
            registered: false,
            command: format!("prog {id}"),
            placement: nodes
                .iter()
                .map(|n| NodePlacement { node: n.to_string(), cpus: vec![0], ranks: vec![0] })
                .collect(),
            cpu_ns: 1_500_000_000,
            cpu_final: state.is_over(),
            pids: vec![],
            frozen: false,
            slice_share: 0.5,
            exit_code: None,
            error: None,
            submitted_unix_ms: 1_000,
            started_unix_ms: (state != JobState::Queued).then_some(2_000),
            ended_unix_ms: state.is_over().then_some(65_000),
            left_behind: None,
            slurm_time: None,
            name: String::new(),
            time_limit_s: None,
            in_slot_ms: 0,
        }
    }

    fn node(name: &str) -> StatusNode {
        let freezer = "cgroup2".to_string();
        StatusNode {
            name: name.into(),
            cpus: 2,
            mem_bytes: 0,
            connected: true,
            freezer,
            load_avg: 0.0,
            switches: 0,
            switch_errors: 0,
            stuck_jobs: vec![],
        }
    }

    fn status() -> StatusReply {
        StatusReply {
            slice_ns: 10_000_000,
            rows: 2,
            nodes: vec![node("a"), node("b")],
            jobs: vec![
                job(1, 0, JobState::Running, &["a"]),
                job(2, 65534, JobState::Queued, &[]),
                job(3, 0, JobState::Finished, &["a", "b"]),
            ],
            matrix: vec![],
            slice_start_skew: Summary { count: 0, p50_ns: 0, p99_ns: 0, max_ns: 0 },
            storage: StorageStatus {
                state: StorageState::Ok,
                error: None,
                since_unix_ms: 0,
                held_changes: 0,
                database: "db".into(),
                backup: BackupStatus { path: "b".into(), taken_unix_ms: None, current: true, error: None },
            },
        }
    }

    fn status_format() -> Format {
        Format::STATUS.parse().unwrap()
    }

    #[test]
    fn columns_are_chosen_by_name_in_any_case_and_an_unknown_one_is_named() {
        let format: Format = "JobID, state,exitcode,end,command".parse().unwrap();
        let mut jobs = status().jobs;
        jobs[2].exit_code = Some(3);
        let text = job_table(&jobs, &format, 122_000, true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["job", "state", "exit", "end", "command"]);
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["3", "finished", "3", "1970-01-01T00:01:05", "prog", "3"]
        );
        assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["2", "queued", "-", "-", "prog", "2"]);
        let error = "jobid,colour".parse::<Format>().unwrap_err();
        assert!(error.contains("unknown column 'colour'") && error.contains("exitcode"), "{error}");
        assert!(Format::HISTORY.parse::<Format>().is_ok());
        assert!(Format::help().contains("submit (when submitted, in UTC)"), "{}", Format::help());
    }

    #[test]
    fn times_print_in_utc_as_sacct_prints_them() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00");
        assert_eq!(utc_text(1_764_166_445_999), "2025-11-26T14:14:05");
    }

    #[test]
    fn states_are_read_by_name_and_group() {
        let names = |v: &[&str]| states_of(&list(v)).map(|s| s.iter().map(|s| s.name()).collect::<Vec<_>>());
        assert_eq!(names(&["ended"]).unwrap(), ["finished", "killed", "failed", "timeout"]);
        assert_eq!(names(&["Failed", "active", "failed"]).unwrap(), ["queued", "running", "suspended", "failed"]);
        assert!(names(&["done"]).unwrap_err().contains("active, ended"));
    }

    #[test]
    fn states_are_read_by_slurms_names_and_codes() {
        let names = |v: &[&str]| states_of(&list(v)).map(|s| s.iter().map(|s| s.name()).collect::<Vec<_>>());
        assert_eq!(names(&["R", "pd"]).unwrap(), ["queued", "running"]);
        assert_eq!(
            names(&["S", "CD", "CA", "F", "TO"]).unwrap(),
            ["suspended", "finished", "killed", "failed", "timeout"]
        );
        assert_eq!(names(&["PENDING", "Running", "COMPLETED", "CANCELLED", "TIMEOUT"]).unwrap().len(), 5);
        for state in JobState::ALL {
            let (long, code) = state.slurm_names();
            assert_eq!((JobState::from_name(long), JobState::from_name(code)), (Some(state), Some(state)));
        }
    }

    fn kept(filter: StatusFilter) -> Result<Vec<u64>, String> {
        let mut s = status();
        filter.apply(&mut s)?;
        Ok(s.jobs.iter().map(|j| j.id).collect())
    }

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn filters_by_user_state_and_node_and_all_together() {
        assert_eq!(kept(StatusFilter::default()).unwrap(), [1, 2, 3]);
        assert_eq!(kept(StatusFilter { users: list(&["root"]), ..Default::default() }).unwrap(), [1, 3]);
        assert_eq!(kept(StatusFilter { users: list(&["65534"]), ..Default::default() }).unwrap(), [2]);
        assert_eq!(kept(StatusFilter { states: list(&["active"]), ..Default::default() }).unwrap(), [1, 2]);
        assert_eq!(kept(StatusFilter { states: list(&["FINISHED", "queued"]), ..Default::default() }).unwrap(), [2, 3]);
        assert_eq!(kept(StatusFilter { nodes: list(&["b"]), ..Default::default() }).unwrap(), [3]);
        let all = StatusFilter {
            users: list(&["root"]),
            states: list(&["running"]),
            nodes: list(&["a"]),
            ..Default::default()
        };
        assert_eq!(kept(all).unwrap(), [1]);
        assert_eq!(kept(StatusFilter { states: list(&["R", "PD"]), ..Default::default() }).unwrap(), [1, 2]);
        let named = |name: &str| {
            let mut s = status();
            s.jobs[1].name = "nightly".into();
            StatusFilter { names: list(&[name]), ..Default::default() }.apply(&mut s).map(|()| s.jobs.len())
        };
        assert_eq!((named("nightly"), named("other")), (Ok(1), Ok(0)));
    }

    #[test]
    fn an_unknown_user_state_or_node_is_named() {
        let e = kept(StatusFilter { users: list(&["no-such-user-here"]), ..Default::default() }).unwrap_err();
        assert!(e.contains("unknown user 'no-such-user-here'"), "{e}");
        let e = kept(StatusFilter { states: list(&["sleeping"]), ..Default::default() }).unwrap_err();
        assert!(e.contains("unknown job state 'sleeping'") && e.contains("queued"), "{e}");
        let e = kept(StatusFilter { nodes: list(&["c"]), ..Default::default() }).unwrap_err();
        assert_eq!(e, "no node 'c'; nodes: a, b");
    }

    #[test]
    fn elapsed_time_reads_like_squeue() {
        assert_eq!(elapsed_text(0), "0:00");
        assert_eq!(elapsed_text(59_999), "0:59");
        assert_eq!(elapsed_text(61_000), "1:01");
        assert_eq!(elapsed_text(3_600_000 + 62_000), "1:01:02");
        assert_eq!(elapsed_text(2 * 86_400_000 + 3_600_000 + 1000), "2-01:00:01");
    }

    #[test]
    fn the_job_table_names_users_and_nodes_and_counts_time_to_the_end() {
        let text = status_table(&status(), &status_format(), 122_000);
        let line = |id: &str| text.lines().find(|l| l.trim_start().starts_with(id)).unwrap().to_string();
        // Running: since its start (2 s) until now (122 s); finished: until it ended (65 s); queued: nothing yet.
        assert!(line("1 ").contains("root") && line("1 ").contains("2:00"), "{text}");
        assert!(line("3 ").contains("1:03") && line("3 ").contains("a,b"), "{text}");
        assert!(line("2 ").contains("0:00") && line("2 ").contains(" - "), "{text}");
        assert!(!text.contains("could not be killed"), "{text}");
    }

    #[test]
    fn a_reason_has_its_own_column_and_a_killed_job_says_killed_once() {
        let mut status = status();
        status.jobs[0].state = JobState::Failed;
        status.jobs[0].error = Some("exited with status 3".into());
        status.jobs[2].state = JobState::Killed;
        status.jobs[2].error = Some("killed".into());
        let text = job_table(&status.jobs, &status_format(), 122_000, true);
        let header = text.lines().next().unwrap();
        assert!(header.contains(" reason ") && header.ends_with("command"), "the command stays last: {text}");
        let line = |id: &str| text.lines().find(|l| l.trim_start().starts_with(id)).unwrap().to_string();
        assert!(line("1 ").contains(" exited with status 3 ") && line("1 ").contains(" failed "), "{text}");
        assert_eq!(line("3 ").matches("killed").count(), 1, "{text}");
        let bare = job_table(&status.jobs, &status_format(), 122_000, false);
        assert_eq!(bare.lines().count(), status.jobs.len(), "no header: {bare}");
        assert!(!bare.contains("reason"), "{bare}");
    }

    #[test]
    fn jobs_are_chosen_by_id_and_an_unknown_id_is_named() {
        let filter = StatusFilter { jobs: vec![3, 1], ..StatusFilter::default() };
        assert_eq!(kept(filter).unwrap(), [1, 3]);
        let filter = StatusFilter { jobs: vec![3, 77, 78], ..StatusFilter::default() };
        assert!(kept(filter).unwrap_err().contains("no job 77, 78"));
    }

    #[test]
    fn a_long_reason_is_shortened_in_the_table() {
        assert_eq!(one_line("sleep   1\n\t"), "sleep 1", "padding cannot push the reason along");
        assert!(one_line("a\u{1b}[2Jb").contains("\\"), "escaped before it is cut: {}", one_line("a\u{1b}[2Jb"));
        assert_eq!(shortened("sleep 1", 48), "sleep 1");
        let cut = shortened(&"x".repeat(60), 48);
        assert_eq!(cut.chars().count(), 48);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_stuck_job_cgroup_is_named_under_the_nodes() {
        let mut status = status();
        let stuck = cosched_runtime::wire::protocol::StuckJob {
            job: 3,
            processes: 2,
            pids: vec![41, 42],
            since_unix_ms: 2_000,
        };
        status.nodes[1].stuck_jobs.push(stuck);
        let text = status_table(&status, &status_format(), 122_000);
        assert!(text.contains("node b: job 3: 2 processes could not be killed (pids 41,42) for 2:00"), "{text}");
    }

    #[test]
    fn a_slurm_job_says_what_was_added_to_its_end_time_or_why_not() {
        let mut j = job(4, 0, JobState::Running, &["a"]);
        assert_eq!(job_notes(&j), None);
        j.slurm_time = Some(SlurmTimeStatus { extended_s: 93, error: None });
        assert_eq!(job_notes(&j).unwrap(), "Slurm end time +93 s");
        j.slurm_time = Some(SlurmTimeStatus { extended_s: 93, error: Some("squeue: no answer within 10 s".into()) });
        j.error = Some("Slurm: TIMEOUT".into());
        assert_eq!(
            job_notes(&j).unwrap(),
            "Slurm: TIMEOUT; Slurm end time not extended: squeue: no answer within 10 s"
        );
    }

    #[test]
    fn status_columns_align_whatever_the_widths() {
        let rows = vec![
            vec!["7".to_string(), "65534".into(), "interactive".into(), "sleep 1".into()],
            vec!["123456".to_string(), "0".into(), "batch".into(), "x".into()],
        ];
        let text = table(&["job", "uid", "class", "command"], &rows);
        let lines: Vec<&str> = text.lines().collect();
        let column = |needle: &str, line: &str| line.find(needle).unwrap() + needle.len();
        assert_eq!(column("job", lines[0]), column("7", lines[1]), "{text}");
        assert_eq!(column("7", lines[1]), column("123456", lines[2]), "numbers end in one column:\n{text}");
        assert_eq!(lines[1].find("interactive"), lines[2].find("batch"), "{text}");
        assert_eq!(lines[1].find("sleep 1"), lines[2].find("x"), "{text}");
    }
}
