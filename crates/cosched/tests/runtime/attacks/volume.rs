#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Denial of service by volume: queues without bound, a status document rewritten at every tick, logs that fill
//! the state file system, and waiting remote commands that use up their user's connections. See `mod.rs`.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn submit_json_as(daemon: &Daemon, uid: u32, args: &[&str]) -> Result<u64, String> {
    let mut all = vec!["submit", "--json"];
    all.extend(args);
    let out = daemon.client_as(uid, &all);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job)
}

/// The status document's inode: each write renames a new file over it.
fn status_inode(daemon: &Daemon) -> Option<u64> {
    std::fs::metadata(daemon.dir.join("status.json")).ok().map(|m| m.ino())
}

#[test]
fn an_idle_daemon_leaves_its_status_document_alone_and_writes_each_change() {
    if skip_unless_root("an_idle_daemon_leaves_its_status_document_alone") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "20", "--rows", "1", "--cpus", "2"]);
    daemon.pids(daemon.submit_as(Some(ATTACKER), &["-n", "2", "--", "sleep", "300"]), 2);
    let queued: Vec<u64> =
        (0..20).map(|_| submit_json_as(&daemon, ATTACKER, &["--", "sleep", "300"]).unwrap()).collect();
    std::thread::sleep(Duration::from_secs(1));
    let mut writes = 0;
    let mut last = status_inode(&daemon);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(5));
        let now = status_inode(&daemon);
        writes += usize::from(now != last);
        last = now;
    }
    // Nothing changes but the node's load average, which the kernel updates every 5 s.
    assert!(writes <= 4, "the status document was rewritten {writes} times in 3 s with nothing changing");
    // A change is written.
    assert!(daemon.client_as(ATTACKER, &["kill", &queued[19].to_string()]).status.success());
    let path = daemon.dir.join("status.json");
    wait_for("the kill in the status document", Duration::from_secs(10), || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let document: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let jobs = document["jobs"].as_array().cloned().unwrap_or_default();
        jobs.iter().any(|j| j["id"] == queued[19] && j["state"] == "killed")
    });
}

/// Bytes the logs of `uid` (`job-<id>.u<uid>.…`) in the node's log folder take on disk: (all together, the largest).
fn log_bytes_of(daemon: &Daemon, uid: u32) -> (u64, u64) {
    let files = std::fs::read_dir(daemon.dir.join("logs")).into_iter().flatten().flatten();
    let owned = |name: &str| name.split('.').nth(1) == Some(&format!("u{uid}"));
    let sizes: Vec<u64> = files
        .filter(|f| f.file_name().to_str().is_some_and(owned))
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.blocks() * 512)
        .collect();
    (sizes.iter().sum(), sizes.iter().copied().max().unwrap_or(0))
}

#[test]
fn a_job_that_writes_without_end_keeps_within_its_log_bounds_and_its_tail() {
    if skip_unless_root("a_job_that_writes_without_end_keeps_within_its_log_bounds") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--max-log-bytes", "1M", "--max-user-log-bytes", "3M"]);
    // Two tasks, 40 MB each on stdout, then a last line, then they keep running (their logs stay open).
    let writer = "head -c 40000000 /dev/zero | tr '\\0' x; echo; echo END-OF-LOG-$COSCHED_RANK; sleep 300";
    let job = daemon.submit_as(Some(ATTACKER), &["-n", "2", "--", "sh", "-c", writer]);
    let slack = 512 * 1024;
    let mut seen = (0, 0);
    wait_for("the logs to be cut back to their bounds", Duration::from_secs(60), || {
        seen = log_bytes_of(&daemon, ATTACKER);
        let logs = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned();
        let tails = logs.contains("END-OF-LOG-0") && logs.contains("END-OF-LOG-1");
        tails && seen.0 <= (3 << 20) + slack && seen.1 <= (1 << 20) + slack
    });
    // Another user still submits (the file system of the database is not full).
    submit_json_as(&daemon, OTHER_USER, &["--", "true"]).unwrap();
}

/// A small file system of its own (tmpfs) for a daemon's state, unmounted when dropped (after the daemon: declare
/// it first).
struct SmallFileSystem(std::path::PathBuf);

impl SmallFileSystem {
    fn mount(megabytes: u32) -> Result<SmallFileSystem, String> {
        let dir = fresh_dir("cosched-small-fs");
        let size = format!("size={megabytes}m,mode=0755");
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &size, "cosched-test"]).arg(&dir).output();
        match out {
            Ok(out) if out.status.success() => Ok(SmallFileSystem(dir)),
            Ok(out) => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Bytes unprivileged users may still take.
    fn free_bytes(&self) -> u64 {
        let stats = nix::sys::statvfs::statvfs(&self.0).unwrap();
        stats.blocks_available() as u64 * stats.fragment_size() as u64
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Before, a task wrote its log itself and the agent cut logs back once a second: a task writing at disk speed
/// filled a small state file system between two looks, and other users' submits were refused ("database or disk
/// is full"). Now only a root copy writes a log, and it never writes into the reserve.
#[test]
fn one_users_output_never_fills_the_file_system_of_the_database() {
    if skip_unless_root("one_users_output_never_fills_the_file_system_of_the_database") {
        return;
    }
    let fs = match SmallFileSystem::mount(48) {
        Ok(fs) => fs,
        Err(e) => {
            let test = "one_users_output_never_fills_the_file_system_of_the_database";
            cosched_runtime::testing::say_skipped(test, &format!("no tmpfs to mount: {e}"));
            return;
        }
    };
    // Bounds far above the file system: only the reserve stands between the writers and the database.
    let bounds = ["--max-log-bytes", "1G", "--max-user-log-bytes", "1G", "--log-reserve-bytes", "16M"];
    let mut flags = vec!["--slice-ms", "50"];
    flags.extend(bounds);
    let daemon = Daemon::up_in(fs.0.clone(), &flags);
    let writer = "cat /dev/zero & cat /dev/zero >&2 & wait";
    let job = daemon.submit_as(Some(ATTACKER), &["-n", "2", "--", "sh", "-c", writer]);
    wait_for("the writers to reach the reserve", Duration::from_secs(60), || fs.free_bytes() < 17 << 20);
    std::thread::sleep(Duration::from_secs(2));
    let free = fs.free_bytes();
    assert!(free >= 15 << 20, "the writers went into the reserve: {free} bytes left");
    for _ in 0..40 {
        submit_json_as(&daemon, OTHER_USER, &["--", "true"]).expect("another user's submit while the logs are full");
    }
    let logs = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned();
    assert!(logs.contains("output dropped here"), "the logs do not say where output was dropped");
    // Nor can the writer reach its log some other way: it is root's.
    let log = fs.0.join("logs").join(format!("job-{job}.u{ATTACKER}.0.out"));
    assert_eq!(std::fs::metadata(&log).unwrap().uid(), 0, "{} is not root's", log.display());
    let to_log = format!("echo more >> {}", log.display());
    let append = Command::new("sh").args(["-c", &to_log]).uid(ATTACKER).gid(ATTACKER).output().unwrap();
    assert!(!append.status.success(), "uid {ATTACKER} could write its log");
    assert!(daemon.client(&["kill", &job.to_string()]).status.success());
    wait_for("the writers' job to end", Duration::from_secs(30), || daemon.job(job).is_some_and(|j| j.state.is_over()));
    // Its ended logs make room for others' output, not hold the file system at its reserve for their retention.
    wait_for("room beyond the reserve", Duration::from_secs(30), || fs.free_bytes() >= 32 << 20);
    let other = submit_json_as(&daemon, OTHER_USER, &["--", "seq", "1", "100000"]).unwrap();
    wait_for("the other user's job to end", Duration::from_secs(30), || {
        daemon.job(other).is_some_and(|j| j.state.is_over())
    });
    let text = String::from_utf8_lossy(&daemon.client(&["logs", &other.to_string()]).stdout).into_owned();
    assert!(
        text.trim_end().ends_with("\n100000") && !text.contains("dropped"),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
}

/// `cosched rsh NODE WORDS` as `uid` in job `job`, started (not awaited).
fn rsh(daemon: &Daemon, uid: u32, job: u64, words: &str) -> Child {
    let mut command = Command::new(COSCHED);
    command
        .args(["rsh", &daemon.node, words])
        .env("COSCHED_SOCKET", &daemon.socket)
        .env("COSCHED_JOB_ID", job.to_string())
        .current_dir("/tmp")
        .uid(uid)
        .gid(uid)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command.spawn().unwrap()
}

/// The log files of job `job` in the node's log folder whose task part (`job-<job>.u<uid>.<task>.<stream>`) starts
/// with `task`.
fn job_logs(daemon: &Daemon, job: u64, task: &str) -> Vec<String> {
    let prefix = format!("job-{job}.");
    let of_task =
        |name: &String| name.starts_with(&prefix) && name.split('.').nth(2).is_some_and(|t| t.starts_with(task));
    let files = std::fs::read_dir(daemon.dir.join("logs")).into_iter().flatten().flatten();
    let mut names: Vec<String> = files.filter_map(|f| f.file_name().into_string().ok()).filter(of_task).collect();
    names.sort();
    names
}

#[test]
fn a_remote_command_leaves_no_empty_log_behind() {
    if skip_unless_root("a_remote_command_leaves_no_empty_log_behind") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    daemon.pids(job, 1);
    for words in ["true", "true", "true", "echo kept"] {
        let out = rsh(&daemon, OTHER_USER, job, words).wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    wait_for("only the non-empty log of the commands to stay", Duration::from_secs(10), || {
        job_logs(&daemon, job, "exec-").len() == 1
    });
    let kept = job_logs(&daemon, job, "exec-");
    assert!(kept[0].ends_with(".out"), "{kept:?}");
    let text = std::fs::read_to_string(daemon.dir.join("logs").join(&kept[0])).unwrap();
    assert_eq!(text, "kept\n");
}

/// The root copies of output that write into `daemon`'s logs (`__pump`s, by what their stdout is).
fn pumps_into(daemon: &Daemon) -> usize {
    let logs = daemon.dir.join("logs");
    let processes = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    processes
        .filter(|p| std::fs::read(p.path().join("cmdline")).is_ok_and(|c| c.windows(6).any(|w| w == b"__pump")))
        .filter(|p| std::fs::read_link(p.path().join("fd/1")).is_ok_and(|target| target.starts_with(&logs)))
        .count()
}

/// Found in review: a remote command's copy of its output ran until every holder of the pipe closed it, so a
/// process the command left behind (or one it passed the pipe to, outside the job) kept a root process alive and
/// copying after the job ended: 600 of them from one user. The copy now ends soon after its command.
#[test]
fn a_remote_commands_output_copy_ends_soon_after_the_command_whoever_holds_the_pipe() {
    if skip_unless_root("a_remote_commands_output_copy_ends_soon_after_the_command") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    daemon.pids(job, 1);
    let out = rsh(&daemon, OTHER_USER, job, "sleep 120 & echo started").wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    wait_for("the command's output copies to end", Duration::from_secs(20), || pumps_into(&daemon) == 0);
    // The empty error log goes once its copy has ended (not before: the copy may not have taken what was written).
    wait_for("only the command's output log to stay", Duration::from_secs(10), || {
        job_logs(&daemon, job, "exec-").len() == 1
    });
    let kept = job_logs(&daemon, job, "exec-");
    assert!(kept[0].ends_with(".out"), "{kept:?}");
    let text = std::fs::read_to_string(daemon.dir.join("logs").join(&kept[0])).unwrap();
    assert_eq!(text, "started\n", "what the command wrote before it ended is kept");
}

#[test]
fn logs_of_an_ended_job_go_after_their_retention() {
    if skip_unless_root("logs_of_an_ended_job_go_after_their_retention") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--log-retention-s", "1"]);
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", "echo some output"]);
    wait_for("the job to end", Duration::from_secs(20), || daemon.job(job).is_some_and(|j| j.state.is_over()));
    assert!(!job_logs(&daemon, job, "").is_empty(), "the job left no log at all");
    wait_for("the ended job's logs to go", Duration::from_secs(30), || job_logs(&daemon, job, "").is_empty());
}

#[test]
fn waiting_remote_commands_never_use_up_their_owners_room_to_kill_the_job() {
    if skip_unless_root("waiting_remote_commands_never_use_up_their_owners_room") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--max-connections-per-user", "8"]);
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    daemon.pids(job, 1);
    let mut waiting: Vec<Child> = (0..8).map(|_| rsh(&daemon, OTHER_USER, job, "sleep 300")).collect();
    // Each command either runs in the job (its connection held) or was refused.
    wait_for("the commands to run or be refused", Duration::from_secs(30), || {
        let ended = waiting.iter_mut().map(|c| c.try_wait()).filter(|s| matches!(s, Ok(Some(_)))).count();
        let running = daemon.job(job).map_or(0, |j| j.pids.iter().filter(|&&p| comm(p) == "sleep").count());
        ended + running.saturating_sub(1) >= 8
    });
    let out = daemon.client_as(OTHER_USER, &["kill", &job.to_string()]);
    assert!(out.status.success(), "the owner could not kill its job: {}", String::from_utf8_lossy(&out.stderr));
    wait_for("the commands to end with the job", Duration::from_secs(30), || {
        waiting.iter_mut().all(|c| matches!(c.try_wait(), Ok(Some(_))))
    });
}

/// Bytes the daemon holds: its resident memory and its state files (database, write-ahead log, backup).
fn daemon_footprint(daemon: &Daemon) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.child.id())).unwrap();
    let rss_kb: u64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB").parse().unwrap();
    let files =
        [daemon.dir.join("cosched.db"), daemon.dir.join("cosched.db-wal"), daemon.dir.join("backup/cosched.db")];
    let disk = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.blocks() * 512).sum();
    (rss_kb * 1024, disk)
}

/// The job limits bound the jobs that are not over, and a request is at most 1 MiB; but every ended job kept its
/// whole request, environment included, in the controller's memory and its database: 600 jobs of 0.9 MB in 18 s
/// made 568 MB of memory and 1.3 GB of state files. An ended job now keeps only what its record shows
/// (`JobRecord::end`: the environment goes, the command is cut), and history leaves after `--keep-history`.
#[test]
fn short_jobs_with_large_environments_never_grow_the_daemon_without_bound() {
    if skip_unless_root("short_jobs_with_large_environments_never_grow_the_daemon_without_bound") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let (rss_before, disk_before) = daemon_footprint(&daemon);
    // 7 variables of 120 KiB (the kernel takes at most 128 KiB per string): 840 KiB a job, 150 jobs, 126 MiB.
    let chunk = "x".repeat(120 << 10);
    let mut jobs = vec![];
    for _ in 0..150 {
        let mut command = Command::new(COSCHED);
        command.args(["submit", "--json", "--socket", daemon.socket.to_str().unwrap(), "--", "true"]);
        command.env_clear().envs((0..7).map(|i| (format!("BIG{i}"), chunk.as_str())));
        let out = command.uid(ATTACKER).gid(ATTACKER).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        jobs.push(serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job);
    }
    wait_for("every job to end", Duration::from_secs(120), || {
        jobs.iter().all(|&j| daemon.job(j).is_none_or(|j| j.state.is_over()))
    });
    std::thread::sleep(Duration::from_secs(6)); // a backup is taken at most every 5 s after changes
    let (rss_after, disk_after) = daemon_footprint(&daemon);
    let (rss_grew, disk_grew) = (rss_after.saturating_sub(rss_before), disk_after.saturating_sub(disk_before));
    assert!(
        rss_grew < 32 << 20 && disk_grew < 32 << 20,
        "150 ended jobs of 840 KiB each grew the daemon by {} MiB of memory and {} MiB of state files",
        rss_grew >> 20,
        disk_grew >> 20
    );
}

/// A lease (`F_SETLEASE`) its owner took on a log would make every open of it by root wait for the lease's break
/// (45 s by default): `cosched logs` and the log bounds would stall the agent for every user. A task's output is a
/// pipe that its root supervisor copies into a log of root's, so the task has no log file to take a lease on.
#[test]
fn a_job_cannot_take_a_lease_on_its_logs() {
    if skip_unless_root("a_job_cannot_take_a_lease_on_its_logs") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let leaser = "import fcntl, os, time\n\
        F_SETLEASE = 1024\n\
        for fd, name in ((1, 'stdout'), (2, 'stderr')):\n\
        \x20   try:\n\
        \x20       fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)\n\
        \x20       fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)\n\
        \x20       print(f'lease on {name}: TAKEN', flush=True)\n\
        \x20   except OSError as e:\n\
        \x20       print(f'lease on {name}: refused ({os.strerror(e.errno)})', flush=True)\n\
        time.sleep(300)\n";
    let job = daemon.submit_as(Some(ATTACKER), &["--", "python3", "-c", leaser]);
    let mut logs = String::new();
    wait_for("the job to report both lease attempts", Duration::from_secs(60), || {
        logs = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned();
        logs.contains("lease on stdout:") && logs.contains("lease on stderr:")
    });
    assert!(!logs.contains("TAKEN"), "a job took a lease on its own log:\n{logs}");
}
