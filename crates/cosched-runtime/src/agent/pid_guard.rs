//! Which processes may be moved into or out of a job, decided on the node where the process lives.
//!
//! The agent runs as root and a pid is only a number: the controller cannot know who owns pid 4242 on another
//! host, so every check happens here, at the moment of the move. Nobody — administrators included — may put pid 1,
//! a kernel thread or one of cosched's own daemons into a job (freezing them would hang the node or the
//! coscheduler itself). A user may move only processes that are theirs by every uid and gid the kernel keeps (real,
//! effective, saved, filesystem) in every thread: a set-uid or set-gid program a user started is not theirs to
//! freeze, nor is a process one of whose threads took the user's uids (credentials are per thread, and a move takes
//! the whole process). A thread's id names its process: the checks are of the process, whichever id is given.

use std::collections::BTreeSet;
use std::fs;

/// `PF_KTHREAD` in the flags field of `/proc/<pid>/stat` (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// The subcommands of cosched's own binary that are daemons or tasks' supervisors (never movable).
const DAEMON_ROLES: [&str; 7] = ["up", "controller", "agent", "__watchdog", "__supervise", "__pump", "__launch"];

/// The most threads a process may have to be moved by a user: each is judged by reading its `/proc` entry on the
/// agent's message loop (about 75 µs here), so a bound keeps one request from holding the node's agent for seconds
/// (a reviewer's 4,000 threads took 0.3 s a request). A larger program is started inside its job instead.
const MAX_THREADS_JUDGED: usize = 1024;

/// What the kernel says about one process, read once per check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessFacts {
    /// The thread group (a tid names its whole process in `cgroup.procs`).
    pub tgid: i32,
    /// Real, effective, saved and filesystem uid of the process's main thread.
    pub uids: [u32; 4],
    /// Real, effective, saved and filesystem gid of the process's main thread.
    pub gids: [u32; 4],
    pub kernel_thread: bool,
    /// Its main thread is a zombie (`Z`) or dead (`X`): the kernel moves the process's other threads without it,
    /// and `cgroup.procs` then lists none of them, so a job could not see, freeze or kill them.
    pub exiting: bool,
    /// Start time in clock ticks since boot: tells a process from a later one that reuses its pid.
    pub start_ticks: u64,
}

impl ProcessFacts {
    pub fn read(pid: i32) -> Result<ProcessFacts, String> {
        let gone = |_| format!("no process {pid} on this node");
        let status = fs::read_to_string(format!("/proc/{pid}/status")).map_err(gone)?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).map_err(gone)?;
        let malformed = || format!("process {pid}: unreadable /proc entry");
        let (state, flags, start_ticks) = parse_stat_state_flags_and_start(&stat).ok_or_else(malformed)?;
        Ok(ProcessFacts {
            tgid: status_field(&status, "Tgid:").and_then(|v| v.first().copied()).ok_or_else(malformed)? as i32,
            uids: four_ids(&status, "Uid:").ok_or_else(malformed)?,
            gids: four_ids(&status, "Gid:").ok_or_else(malformed)?,
            kernel_thread: flags & PF_KTHREAD != 0,
            exiting: matches!(state, 'Z' | 'X'),
            start_ticks,
        })
    }
}

/// Real, effective, saved and filesystem ids on a `Uid:` or `Gid:` line of `/proc/<pid>/status`.
fn four_ids(status: &str, name: &str) -> Option<[u32; 4]> {
    <[u32; 4]>::try_from(status_field(status, name)?.get(..4)?).ok()
}

/// Is every thread of process `tgid` owned by `uid` by all four uids, with one gid for all four gids (no set-gid)?
/// A thread that ends meanwhile (its status gone) is not judged.
fn every_thread_owned_by(tgid: i32, uid: u32) -> Result<(), String> {
    let gone = |_| format!("no process {tgid} on this node");
    let tasks: Vec<fs::DirEntry> = fs::read_dir(format!("/proc/{tgid}/task")).map_err(gone)?.flatten().collect();
    if tasks.len() > MAX_THREADS_JUDGED {
        return Err(format!(
            "process {tgid} has {} threads, more than the {MAX_THREADS_JUDGED} add-pid judges: start it inside its \
             job instead",
            tasks.len()
        ));
    }
    for task in tasks {
        let Ok(status) = fs::read_to_string(task.path().join("status")) else { continue };
        let (uids, gids) = (four_ids(&status, "Uid:"), four_ids(&status, "Gid:"));
        let owned =
            uids.is_some_and(|u| u.iter().all(|&id| id == uid)) && gids.is_some_and(|g| g.iter().all(|&id| id == g[0]));
        if !owned {
            // Which ids it has is not said: with `hidepid` on /proc they are not the requester's to learn.
            return Err(format!(
                "permission denied: process {tgid} does not belong to uid {uid} (a thread of it has other ids, or \
                 it is set-uid or set-gid)"
            ));
        }
    }
    Ok(())
}

/// The numbers on a `Name:\t1\t2...` line of `/proc/<pid>/status`.
fn status_field(status: &str, name: &str) -> Option<Vec<u32>> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().map(|v| v.parse().ok()).collect()
}

/// State (field 3), flags (field 9) and start time (field 22) of `/proc/<pid>/stat`, counted after the command's
/// last `)`.
fn parse_stat_state_flags_and_start(stat: &str) -> Option<(char, u64, u64)> {
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((state, fields.get(6)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// The daemon's own processes on this node, which no request may move.
#[derive(Clone, Debug, Default)]
pub struct PidGuard {
    protected: BTreeSet<i32>,
}

impl PidGuard {
    /// Protects this process and `others` (the watchdog), and any process running cosched's binary as a daemon.
    pub fn new(others: impl IntoIterator<Item = i32>) -> PidGuard {
        let mut protected: BTreeSet<i32> = others.into_iter().collect();
        protected.insert(std::process::id() as i32);
        PidGuard { protected }
    }

    /// May `pid` be moved by a requester who is `owner` (`None`: an administrator)? Returns what the kernel said
    /// about it, to confirm after the move that the pid still names the same process.
    pub fn check(&self, pid: i32, owner: Option<u32>) -> Result<ProcessFacts, String> {
        if pid <= 1 {
            return Err(format!("pid {pid} is never moved into or out of a job"));
        }
        // What is checked and moved is the process: a thread's id is resolved to its process first.
        let tgid = ProcessFacts::read(pid)?.tgid;
        let facts = ProcessFacts::read(tgid)?;
        if facts.kernel_thread {
            return Err(format!("process {pid} is a kernel thread: never moved into a job"));
        }
        if facts.tgid == 1 || self.protected.contains(&facts.tgid) || is_cosched_daemon(facts.tgid) {
            return Err(format!("process {pid} is part of cosched itself: never moved into a job"));
        }
        if facts.exiting {
            return Err(format!(
                "process {tgid} is exiting (its main thread has ended): a process moves whole or not at all"
            ));
        }
        if let Some(uid) = owner {
            every_thread_owned_by(tgid, uid).map_err(|e| format!("{e} (asked for pid {pid})"))?;
        }
        Ok(facts)
    }
}

/// The cosched job `pid` is in, if any, as (agent, job id): a cgroup `…/cosched/<agent>/job-<id>` in any
/// hierarchy (`/proc/<pid>/cgroup`).
pub fn job_of_process(pid: i32) -> Option<(String, u64)> {
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroups.lines().find_map(|line| job_of_cgroup_path(line.splitn(3, ':').nth(2)?))
}

/// (agent, job id) of a cgroup path `…/cosched/<agent>/job-<id>`.
fn job_of_cgroup_path(path: &str) -> Option<(String, u64)> {
    let parts: Vec<&str> = path.trim_end_matches('/').rsplitn(4, '/').collect();
    match parts.as_slice() {
        [job, agent, "cosched", ..] => Some((agent.to_string(), job.strip_prefix("job-")?.parse().ok()?)),
        _ => None,
    }
}

/// Is `pid` this very program (same file) running as one of the daemons?
fn is_cosched_daemon(pid: i32) -> bool {
    let same_program = match (fs::metadata(format!("/proc/{pid}/exe")), fs::metadata("/proc/self/exe")) {
        (Ok(theirs), Ok(ours)) => {
            use std::os::unix::fs::MetadataExt;
            (theirs.dev(), theirs.ino()) == (ours.dev(), ours.ino())
        }
        _ => false,
    };
    if !same_program {
        return false;
    }
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let role = cmdline.split(|&b| b == 0).nth(1).unwrap_or_default();
    DAEMON_ROLES.iter().any(|r| r.as_bytes() == role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_cgroup_is_told_by_its_path_in_any_hierarchy() {
        assert_eq!(job_of_cgroup_path("/cosched/n1/job-7"), Some(("n1".into(), 7)));
        assert_eq!(job_of_cgroup_path("/machine.slice/cosched/n-2/job-12/"), Some(("n-2".into(), 12)));
        assert_eq!(job_of_cgroup_path("/cosched/n1"), None);
        assert_eq!(job_of_cgroup_path("/user.slice/job-7"), None);
        assert_eq!(job_of_cgroup_path("/cosched/n1/job-x"), None);
        assert_eq!(job_of_process(std::process::id() as i32).map(|(_, job)| job), None);
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let stat = "42 (a) b) (c) S 1 42 42 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 1 0 98765 0 0";
        assert_eq!(parse_stat_state_flags_and_start(stat), Some(('S', 4194560, 98765)));
        assert_eq!(parse_stat_state_flags_and_start("garbage"), None);
    }

    #[test]
    fn pid_1_kernel_threads_and_this_process_are_refused_even_for_administrators() {
        let guard = PidGuard::new([]);
        assert!(guard.check(1, None).unwrap_err().contains("never moved"));
        assert!(guard.check(0, None).is_err());
        assert!(guard.check(-5, None).is_err());
        // kthreadd is pid 2 on every Linux system.
        assert!(guard.check(2, None).unwrap_err().contains("kernel thread"));
        let me = std::process::id() as i32;
        assert!(guard.check(me, None).unwrap_err().contains("cosched itself"));
    }

    #[test]
    fn a_process_is_a_users_only_if_every_uid_is_theirs() {
        let child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = child.id() as i32;
        let guard = PidGuard::new([]);
        let uid = nix::unistd::getuid().as_raw();
        assert_eq!(guard.check(pid, Some(uid)).unwrap().tgid, pid);
        assert!(guard.check(pid, Some(uid + 1)).unwrap_err().contains("permission denied"));
        assert!(guard.check(pid, None).is_ok());
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
}
