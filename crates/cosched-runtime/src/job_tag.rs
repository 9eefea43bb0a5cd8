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
    let result = if suspended {
        xattr::set(cgroup_dir, SUSPENDED_ATTRIBUTE, b"1")
    } else {
        match xattr::remove(cgroup_dir, SUSPENDED_ATTRIBUTE) {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENODATA as i32) => Ok(()),
            other => other,
        }
    };
    result.map_err(|e| io::Error::new(e.kind(), format!("marking {} suspended: {e}", cgroup_dir.display())))
}

pub fn is_suspended(cgroup_dir: &Path) -> bool {
    xattr::get(cgroup_dir, SUSPENDED_ATTRIBUTE).is_ok_and(|v| v.is_some())
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
}

impl TaskStatus {
    fn encode(&self) -> String {
        match self {
            TaskStatus::Running { pid, start_ticks } => format!("running {pid} {start_ticks}"),
            TaskStatus::Exited { code, unix_ns } => format!("exited {code} {unix_ns}"),
        }
    }

    fn decode(text: &str) -> Option<TaskStatus> {
        let mut words = text.split(' ');
        let status = match (words.next()?, words.next()?, words.next()?) {
            ("running", pid, ticks) => TaskStatus::Running { pid: pid.parse().ok()?, start_ticks: ticks.parse().ok()? },
            ("exited", code, at) => TaskStatus::Exited { code: code.parse().ok()?, unix_ns: at.parse().ok()? },
            _ => return None,
        };
        words.next().is_none().then_some(status)
    }

    /// May the task still end with a status yet to be written? (Its supervisor lives: the same pid started at the
    /// same time, so a reused pid does not count, and not a zombie nobody reaped.)
    pub fn pending(&self) -> bool {
        match *self {
            TaskStatus::Running { pid, start_ticks } => {
                crate::pid_guard::ProcessFacts::read(pid).is_ok_and(|p| p.start_ticks == start_ticks) && !is_zombie(pid)
            }
            TaskStatus::Exited { .. } => false,
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

/// The job's exit code from its tasks' statuses: the first task to fail (by time) decides, else 0 when every
/// recorded task exited 0; `None` when no task recorded an exit.
pub fn job_exit_code(statuses: &[(u32, TaskStatus)]) -> Option<i32> {
    let exits = statuses.iter().filter_map(|(_, s)| match *s {
        TaskStatus::Exited { code, unix_ns } => Some((code, unix_ns)),
        TaskStatus::Running { .. } => None,
    });
    let mut exits: Vec<(i32, u64)> = exits.collect();
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
}
