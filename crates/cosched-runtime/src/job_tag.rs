//! Who a job cgroup belongs to, written on the cgroup itself.
//!
//! An agent that restarts finds job cgroups by their directory names (`job-<id>`), but a number proves nothing:
//! after the controller's database is lost, a new job could get the same id and inherit the old job's running
//! processes. So every job cgroup carries a tag — the owner's uid and a random per-job token — as an extended
//! attribute in the `trusted.` namespace (only root may read or write it; cgroupfs supports it on v1 and v2). The
//! controller adopts a cgroup only when its record has the same id, owner and token.

use std::io;
use std::path::Path;

const ATTRIBUTE: &str = "trusted.cosched.job";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobTag {
    pub uid: u32,
    pub token: String,
}

impl JobTag {
    fn encode(&self) -> String {
        format!("{}:{}", self.uid, self.token)
    }

    fn decode(text: &str) -> Option<JobTag> {
        let (uid, token) = text.split_once(':')?;
        let token_ok = !token.is_empty() && token.len() <= 64 && token.bytes().all(|b| b.is_ascii_hexdigit());
        token_ok.then(|| Some(JobTag { uid: uid.parse().ok()?, token: token.to_string() }))?
    }

    pub fn write(&self, cgroup_dir: &Path) -> io::Result<()> {
        xattr::set(cgroup_dir, ATTRIBUTE, self.encode().as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("tagging {}: {e}", cgroup_dir.display())))
    }

    /// The tag of a cgroup; `None` when it has none (or an unreadable one).
    pub fn read(cgroup_dir: &Path) -> Option<JobTag> {
        let bytes = xattr::get(cgroup_dir, ATTRIBUTE).ok()??;
        JobTag::decode(std::str::from_utf8(&bytes).ok()?)
    }
}

const SUSPENDED_ATTRIBUTE: &str = "trusted.cosched.suspended";

/// Mark a job's cgroup as suspended (or not): the watchdog of a dead agent leaves suspended jobs stopped, so a
/// suspension (an administrator's above all) outlives a crash of the daemon.
pub fn mark_suspended(cgroup_dir: &Path, suspended: bool) -> io::Result<()> {
    set_flag(cgroup_dir, SUSPENDED_ATTRIBUTE, suspended, "suspended")
}

pub fn is_suspended(cgroup_dir: &Path) -> bool {
    has_flag(cgroup_dir, SUSPENDED_ATTRIBUTE)
}

const SIGNALS_ATTRIBUTE: &str = "trusted.cosched.stopped-by-signals";

/// Mark a job's cgroup as one whose agent stops it with SIGSTOP (the signals freezer), or not. A thaw after the
/// agent died sends SIGCONT only to marked jobs: under a cgroup freezer a process stopped by its own user stays
/// stopped, as it was.
pub fn mark_stopped_by_signals(cgroup_dir: &Path, by_signals: bool) -> io::Result<()> {
    set_flag(cgroup_dir, SIGNALS_ATTRIBUTE, by_signals, "as stopped by signals")
}

pub fn is_stopped_by_signals(cgroup_dir: &Path) -> bool {
    has_flag(cgroup_dir, SIGNALS_ATTRIBUTE)
}

fn set_flag(cgroup_dir: &Path, attribute: &str, on: bool, what: &str) -> io::Result<()> {
    let result = if on {
        xattr::set(cgroup_dir, attribute, b"1")
    } else {
        match xattr::remove(cgroup_dir, attribute) {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENODATA as i32) => Ok(()),
            other => other,
        }
    };
    result.map_err(|e| io::Error::new(e.kind(), format!("marking {} {what}: {e}", cgroup_dir.display())))
}

fn has_flag(cgroup_dir: &Path, attribute: &str) -> bool {
    xattr::get(cgroup_dir, attribute).is_ok_and(|v| v.is_some())
}

/// The attribute of task `<rank>` is this followed by the rank (only root may write `trusted.*`).
pub const TASK_ATTRIBUTE_PREFIX: &str = "trusted.cosched.task.";

/// What the supervisor of one task (`supervisor`) recorded on the job's cgroup as `trusted.cosched.task.<rank>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// The supervisor, process `pid` started `start_ticks` clock ticks after boot, waits for the task.
    Running { pid: i32, start_ticks: u64 },
    /// The task ended with `code` (128 + the signal when a signal ended it) at `unix_ns`.
    Exited { code: i32, unix_ns: u64 },
    /// The task's command never started, for the reason its shim reported, at `unix_ns`.
    Unstarted { failure: crate::agent::launch::LaunchFailure, unix_ns: u64 },
}

/// The exit status a task that never started counts as (a shell's "not found or could not start").
const UNSTARTED_CODE: i32 = 127;

impl TaskStatus {
    fn encode(&self) -> String {
        match self {
            TaskStatus::Running { pid, start_ticks } => format!("running {pid} {start_ticks}"),
            TaskStatus::Exited { code, unix_ns } => format!("exited {code} {unix_ns}"),
            TaskStatus::Unstarted { failure, unix_ns } => format!("unstarted {unix_ns} {}", failure.encode()),
        }
    }

    fn decode(text: &str) -> Option<TaskStatus> {
        if let Some(rest) = text.strip_prefix("unstarted ") {
            let (at, failure) = rest.split_once(' ')?;
            let failure = crate::agent::launch::LaunchFailure::decode(failure)?;
            return Some(TaskStatus::Unstarted { failure, unix_ns: at.parse().ok()? });
        }
        let mut words = text.split(' ');
        let status = match (words.next()?, words.next()?, words.next()?) {
            ("running", pid, ticks) => TaskStatus::Running { pid: pid.parse().ok()?, start_ticks: ticks.parse().ok()? },
            ("exited", code, at) => TaskStatus::Exited { code: code.parse().ok()?, unix_ns: at.parse().ok()? },
            _ => return None,
        };
        words.next().is_none().then_some(status)
    }

    /// How the task ended and when, once it has: (exit status, unix ns).
    fn ended(&self) -> Option<(i32, u64)> {
        match *self {
            TaskStatus::Running { .. } => None,
            TaskStatus::Exited { code, unix_ns } => Some((code, unix_ns)),
            TaskStatus::Unstarted { unix_ns, .. } => Some((UNSTARTED_CODE, unix_ns)),
        }
    }

    /// May the task still end with a status yet to be written? (Its supervisor lives: the same pid started at the
    /// same time, so a reused pid does not count, and not a zombie nobody reaped.)
    pub fn pending(&self) -> bool {
        match *self {
            TaskStatus::Running { pid, start_ticks } => {
                crate::agent::pid_guard::ProcessFacts::read(pid).is_ok_and(|p| p.start_ticks == start_ticks)
                    && !is_zombie(pid)
            }
            TaskStatus::Exited { .. } | TaskStatus::Unstarted { .. } => false,
        }
    }
}

fn is_zombie(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|s| s == "Z" || s == "X")
}

pub fn write_task_status(cgroup_dir: &Path, rank: u32, status: TaskStatus) -> io::Result<()> {
    xattr::set(cgroup_dir, format!("{TASK_ATTRIBUTE_PREFIX}{rank}"), status.encode().as_bytes()).map_err(|e| {
        io::Error::new(e.kind(), format!("recording task {rank}'s status on {}: {e}", cgroup_dir.display()))
    })
}

/// The statuses recorded on a job's cgroup, by rank (none when it has none or is gone).
pub fn task_statuses(cgroup_dir: &Path) -> Vec<(u32, TaskStatus)> {
    let Ok(names) = xattr::list(cgroup_dir) else { return Vec::new() };
    let mut statuses: Vec<(u32, TaskStatus)> = names
        .filter_map(|name| {
            let rank = name.to_str()?.strip_prefix(TASK_ATTRIBUTE_PREFIX)?.parse().ok()?;
            let value = xattr::get(cgroup_dir, &name).ok()??;
            Some((rank, TaskStatus::decode(std::str::from_utf8(&value).ok()?)?))
        })
        .collect();
    statuses.sort_by_key(|&(rank, _)| rank);
    statuses
}

/// Does the cgroup hold statuses of tasks (which only its agent may collect and then remove)?
pub fn holds_task_statuses(cgroup_dir: &Path) -> bool {
    !task_statuses(cgroup_dir).is_empty()
}

const RANKS_ATTRIBUTE: &str = "trusted.cosched.ranks";

/// Record which tasks (global ranks) the agent starts on this node, before their supervisors exist: a task whose
/// supervisor died before it wrote anything is then known to have had a status, and to have lost it.
pub fn write_expected_ranks(cgroup_dir: &Path, ranks: &[u32]) -> io::Result<()> {
    xattr::set(cgroup_dir, RANKS_ATTRIBUTE, encode_ranks(ranks).as_bytes())
        .map_err(|e| io::Error::new(e.kind(), format!("recording the tasks of {}: {e}", cgroup_dir.display())))
}

/// The ranks recorded by [`write_expected_ranks`]; `None` for a registered job or one started before they were.
pub fn expected_ranks(cgroup_dir: &Path) -> Option<Vec<u32>> {
    let bytes = xattr::get(cgroup_dir, RANKS_ATTRIBUTE).ok()??;
    decode_ranks(std::str::from_utf8(&bytes).ok()?)
}

/// Ranks as runs of consecutive numbers ("0-3,8"), so that thousands of tasks fit an attribute.
fn encode_ranks(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for rank in sorted {
        match runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(rank) => *last = rank,
            _ => runs.push((rank, rank)),
        }
    }
    let run = |&(first, last): &(u32, u32)| if first == last { first.to_string() } else { format!("{first}-{last}") };
    runs.iter().map(run).collect::<Vec<_>>().join(",")
}

/// The most ranks one job may record on one node (a node has at most 8,192 CPUs).
const MAX_RECORDED_RANKS: u64 = 1 << 16;

fn decode_ranks(text: &str) -> Option<Vec<u32>> {
    let mut ranks = Vec::new();
    for run in text.split(',').filter(|r| !r.is_empty()) {
        let (first, last) = match run.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => (run.parse().ok()?, run.parse().ok()?),
        };
        let total = ranks.len() as u64 + u64::from(last.checked_sub(first)?) + 1;
        if total > MAX_RECORDED_RANKS {
            return None;
        }
        ranks.extend(first..=last);
    }
    Some(ranks)
}

/// How a node's tasks ended, from what their supervisors recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TasksEnd {
    /// The first failure's status (by time), else 0 when every recorded task exited 0; `None` when none did.
    pub exit_code: Option<i32>,
    /// Tasks whose command never started, and why (by time).
    pub unstarted: Vec<(u32, crate::agent::launch::LaunchFailure)>,
    /// Tasks whose status was lost: their supervisor ended (killed) before it recorded how the task ended.
    pub lost: Vec<u32>,
}

impl TasksEnd {
    /// Why the job failed on this node when its exit status alone cannot say: the first task that never started,
    /// and any task whose status was lost.
    pub fn failure_reason(&self) -> Option<String> {
        let unstarted = self.unstarted.first().map(|(rank, f)| format!("task {rank} could not start: {}", f.reason()));
        let lost = self.lost.split_first().map(|(first, rest)| {
            let ranks = rest.iter().fold(first.to_string(), |text, rank| format!("{text}, {rank}"));
            if rest.is_empty() {
                format!("the exit status of task {ranks} was lost: its supervisor ended before recording it")
            } else {
                format!("the exit statuses of tasks {ranks} were lost: their supervisors ended before recording them")
            }
        });
        let reasons: Vec<String> = unstarted.into_iter().chain(lost).collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// How the tasks recorded on a job's cgroup ended, once none is pending: the ones `expected` (when known) without
/// an exit, and every one whose supervisor is gone without writing its exit, are lost.
pub fn tasks_end(expected: Option<&[u32]>, statuses: &[(u32, TaskStatus)]) -> TasksEnd {
    let mut lost: Vec<u32> =
        statuses.iter().filter(|(_, s)| matches!(s, TaskStatus::Running { .. })).map(|&(rank, _)| rank).collect();
    let recorded = |rank: &u32| statuses.iter().any(|(r, _)| r == rank);
    lost.extend(expected.unwrap_or_default().iter().filter(|r| !recorded(r)));
    lost.sort_unstable();
    lost.dedup();
    let mut unstarted: Vec<(u64, u32, crate::agent::launch::LaunchFailure)> = statuses
        .iter()
        .filter_map(|&(rank, s)| match s {
            TaskStatus::Unstarted { failure, unix_ns } => Some((unix_ns, rank, failure)),
            _ => None,
        })
        .collect();
    unstarted.sort_by_key(|&(at, rank, _)| (at, rank));
    let unstarted = unstarted.into_iter().map(|(_, rank, failure)| (rank, failure)).collect();
    TasksEnd { exit_code: job_exit_code(statuses), unstarted, lost }
}

/// The job's exit code from its tasks' statuses: the first task to fail (by time) decides, else 0 when every
/// recorded task exited 0; `None` when no task recorded an exit.
pub fn job_exit_code(statuses: &[(u32, TaskStatus)]) -> Option<i32> {
    let mut exits: Vec<(i32, u64)> = statuses.iter().filter_map(|(_, s)| s.ended()).collect();
    exits.sort_by_key(|&(_, at)| at);
    exits.iter().find(|&&(code, _)| code != 0).or(exits.first()).map(|&(code, _)| code)
}

/// A fresh random token (`bytes` bytes from the kernel's generator, in hex).
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut buffer)?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_garbage_is_no_tag() {
        let tag = JobTag { uid: 65534, token: random_hex(16).unwrap() };
        assert_eq!(tag.token.len(), 32);
        assert_eq!(JobTag::decode(&tag.encode()), Some(tag));
        for bad in ["", "65534", "x:ab", "1:", "1:zz", "1:ab:cd"] {
            assert_eq!(JobTag::decode(bad), None, "{bad:?}");
        }
        assert_ne!(random_hex(16).unwrap(), random_hex(16).unwrap());
    }

    #[test]
    fn task_statuses_round_trip_and_the_first_failure_decides() {
        for status in [TaskStatus::Running { pid: 42, start_ticks: 7 }, TaskStatus::Exited { code: -3, unix_ns: 9 }] {
            assert_eq!(TaskStatus::decode(&status.encode()), Some(status));
        }
        for bad in ["", "running 1", "exited x 1", "exited 1 2 3", "done 1 2"] {
            assert_eq!(TaskStatus::decode(bad), None, "{bad:?}");
        }
        let exited = |code, unix_ns| TaskStatus::Exited { code, unix_ns };
        assert_eq!(job_exit_code(&[(0, exited(0, 1)), (1, exited(143, 5)), (2, exited(3, 4))]), Some(3));
        assert_eq!(job_exit_code(&[(0, exited(0, 1)), (1, exited(0, 2))]), Some(0));
        assert_eq!(job_exit_code(&[(0, TaskStatus::Running { pid: 1, start_ticks: 1 })]), None);
        assert!(!TaskStatus::Running { pid: std::process::id() as i32, start_ticks: 0 }.pending());
        assert!(!exited(0, 0).pending());
    }

    #[test]
    fn ranks_round_trip_as_runs_and_garbage_is_none() {
        for ranks in [vec![], vec![0], vec![0, 1, 2, 3, 8, 10, 11], vec![u32::MAX - 1, u32::MAX]] {
            assert_eq!(decode_ranks(&encode_ranks(&ranks)), Some(ranks.clone()), "{ranks:?}");
        }
        assert_eq!(encode_ranks(&[3, 1, 2, 2, 7]), "1-3,7");
        for bad in ["x", "1-", "3-1", "1,,x", "0-4294967295"] {
            assert_eq!(decode_ranks(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_task_whose_supervisor_left_no_exit_is_lost_never_finished() {
        let exited = |code, unix_ns| TaskStatus::Exited { code, unix_ns };
        let dead_supervisor = TaskStatus::Running { pid: 1, start_ticks: 1 };
        let all_exited = tasks_end(Some(&[4, 5]), &[(4, exited(0, 1)), (5, exited(0, 2))]);
        assert_eq!((all_exited.exit_code, all_exited.failure_reason()), (Some(0), None));
        let one_lost = tasks_end(Some(&[4, 5]), &[(4, exited(0, 1)), (5, dead_supervisor)]);
        assert_eq!(one_lost.lost, [5]);
        let never_written = tasks_end(Some(&[4, 5, 6]), &[(4, exited(0, 1))]);
        assert_eq!(never_written.lost, [5, 6]);
        let reason = never_written.failure_reason().unwrap();
        assert!(reason.contains("statuses of tasks 5, 6 were lost"), "{reason}");
        // A registered job (no task of the agent's) or one from before ranks were recorded loses nothing unseen.
        assert_eq!(tasks_end(None, &[]).failure_reason(), None);
    }
}
