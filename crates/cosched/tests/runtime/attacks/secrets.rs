//! Reading other users' environments, command lines, logs, and the daemon's own secrets and state.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use std::time::Duration;

/// Can `uid` open `path` for reading? (Asked of the kernel, as that user.)
fn readable_by(uid: u32, path: &std::path::Path) -> bool {
    let out = client_command_as(uid, "cat", &[path.to_str().unwrap()]);
    out.status.success()
}

fn client_command_as(uid: u32, program: &str, args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(program).args(args).uid(uid).gid(uid).output().unwrap()
}

#[test]
fn a_job_sees_its_users_environment_and_none_of_the_daemons() {
    if skip_unless_root("a_job_sees_none_of_the_daemons_environment") {
        return;
    }
    let daemon = Daemon::up_with_env(&["--slice-ms", "50"], &[("DAEMON_SECRET", "root-only-value")]);
    let job = daemon.submit(&["--", "sh", "-c", "env; sleep 300"]);
    let pid = daemon.pids(job, 2)[0]; // sh and its sleep
    wait_for("the job's output", Duration::from_secs(10), || {
        String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).contains("COSCHED_JOB_ID")
    });
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.contains("root-only-value"), "the job inherited the daemon's environment");
    assert!(environ.contains("COSCHED_JOB_ID="), "{environ}");
}

/// A service manager may start the daemon protected from the OOM killer, and the daemon raises its own limit on
/// open files: neither may pass to the jobs it starts.
#[test]
fn a_job_inherits_neither_the_daemons_raised_file_limit_nor_its_oom_protection() {
    if skip_unless_root("a_job_inherits_neither_the_daemons_limits") {
        return;
    }
    // Protecting a process from the OOM killer takes CAP_SYS_RESOURCE, which some containers lack.
    let protectable = std::process::Command::new("choom")
        .args(["-n", "-500", "--", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    let mut wrapper = vec!["prlimit", "--nofile=1024:16384", "--"];
    if protectable {
        wrapper.extend(["choom", "-n", "-500", "--"]);
    } else {
        cosched_runtime::testing::say_skipped(
            "the OOM half of a_job_inherits_neither_the_daemons_limits",
            "no CAP_SYS_RESOURCE here, so the daemon cannot be protected from the OOM killer",
        );
    }
    let daemon = Daemon::up_under(&wrapper, &["--slice-ms", "50"], &[]);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", daemon.child.id())).unwrap();
    assert!(limits.lines().any(|l| l.starts_with("Max open files") && l.contains("16384")), "{limits}");
    let script = "echo files=$(ulimit -n) oom=$(cat /proc/self/oom_score_adj)";
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", script]);
    wait_for("the job's report", Duration::from_secs(10), || {
        String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).contains("files=")
    });
    let report = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned();
    assert!(report.contains("files=1024 oom=0"), "the job kept the daemon's settings: {report}");
}

#[test]
fn a_launch_spec_never_appears_on_a_command_line() {
    if skip_unless_root("a_launch_spec_never_appears_on_a_command_line") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    // Looked at until it runs the command: while it is still the shim, its command line is the shim's alone.
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sleep", "300"]);
    let pid = daemon.pids(job, 1)[0];
    wait_for("the task to run its command", Duration::from_secs(10), || {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let shim = cmdline.ends_with(b"\0__launch\0") && cmdline.iter().filter(|&&b| b == 0).count() == 2;
        assert!(cmdline == b"sleep\x00300\x00" || shim, "{}", String::from_utf8_lossy(&cmdline));
        cmdline == b"sleep\x00300\x00"
    });
    let mut command = std::process::Command::new(COSCHED);
    command.arg("__launch").stdin(std::process::Stdio::null());
    let out = command.output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad launch spec"), "the shim takes its spec on stdin");
}

#[test]
fn other_users_cannot_read_the_database_the_status_document_or_a_log() {
    if skip_unless_root("other_users_cannot_read_the_state") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["--", "sh", "-c", "echo secret-output"]);
    wait_for("the job to finish", Duration::from_secs(10), || {
        daemon.job(job).is_some_and(|j| j.state == JobState::Finished)
    });
    wait_for("the status document", Duration::from_secs(10), || daemon.dir.join("status.json").exists());
    let log = daemon.dir.join("logs").join(format!("job-{job}.u0.0.out"));
    assert!(std::fs::read_to_string(&log).unwrap().contains("secret-output"));
    let backup = daemon.dir.join("backup").join("cosched.db");
    for file in
        [daemon.dir.join("cosched.db"), daemon.dir.join("cosched.db-wal"), daemon.dir.join("status.json"), backup, log]
    {
        assert!(file.exists(), "{} is missing", file.display());
        assert!(!readable_by(ATTACKER, &file), "uid {ATTACKER} could read {}", file.display());
    }
    let listing = client_command_as(ATTACKER, "ls", &[daemon.dir.join("logs").to_str().unwrap()]);
    assert!(!listing.status.success(), "uid {ATTACKER} could list the logs");
}

#[test]
fn other_users_command_lines_are_hidden_unless_the_site_makes_them_public() {
    if skip_unless_root("other_users_command_lines_are_hidden") {
        return;
    }
    for (flags, hidden) in [(vec!["--slice-ms", "50"], true), (vec!["--slice-ms", "50", "--public-data"], false)] {
        let daemon = Daemon::up(&flags);
        let job = daemon.submit(&["--", "sleep", "300", "--password=hunter2"]);
        let out = daemon.client_as(ATTACKER, &["status", "--json"]);
        let status: StatusReply = serde_json::from_slice(&out.stdout).unwrap();
        let seen = status.jobs.into_iter().find(|j| j.id == job).unwrap().command;
        assert_eq!(seen.contains("hunter2"), !hidden, "{flags:?}: {seen}");
        assert!(daemon.job(job).unwrap().command.contains("hunter2"), "root sees every command");
        // The history shows the same jobs the same way, ended or not.
        let out = daemon.client_as(ATTACKER, &["history", "--json", "-j", &job.to_string()]);
        let history: cosched_runtime::wire::protocol::HistoryReply = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(history.jobs[0].command.contains("hunter2"), !hidden, "{flags:?}: {:?}", history.jobs[0]);
    }
}

/// Whatever descriptor the daemon's own parent left open without close-on-exec (an administrator's shell or
/// script: a log, a lock, a pipe) was open in every job, so a user's task could read or write a file of root's
/// through it. A job starts with its stdin, stdout and stderr and nothing else, and nothing the daemon starts (the
/// tasks' supervisors, the watchdog) holds what it inherited.
#[test]
fn a_descriptor_the_daemon_inherited_never_reaches_a_job_or_its_supervisor() {
    if skip_unless_root("a_descriptor_the_daemon_inherited_never_reaches_a_job_or_its_supervisor") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("roots-secret");
    let secret = dir.join("secret");
    std::fs::write(&secret, "root-only-secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    // An administrator's shell that holds the file open on descriptor 7 starts the daemon.
    let wrapper = ["sh", "-c", "exec 7<\"$SECRET_FILE\"; exec \"$0\" \"$@\""];
    let daemon = Daemon::up_under(&wrapper, &["--slice-ms", "50"], &[("SECRET_FILE", secret.to_str().unwrap())]);
    let held = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == secret)))
            .unwrap_or(false)
    };
    assert!(held(daemon.child.id()), "the daemon was not given the descriptor");
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", "cat <&7; echo tried; exec sleep 300"]);
    wait_for("the job's try", Duration::from_secs(10), || {
        String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).contains("tried")
    });
    let report = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned();
    assert!(!report.contains("root-only-secret"), "the job read root's file: {report}");
    // The shell became `sleep`, keeping every descriptor it had.
    let task = daemon.pids(job, 1)[0];
    wait_for("the task to be sleep", Duration::from_secs(10), || comm(task) == "sleep");
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{task}/fd"))
        .unwrap()
        .flatten()
        .map(|fd| fd.file_name().to_string_lossy().into_owned())
        .collect();
    fds.sort();
    assert_eq!(fds, ["0", "1", "2"], "the task holds more than its three standard descriptors");
    let supervisor = std::fs::read_to_string(format!("/proc/{task}/stat")).unwrap();
    let supervisor: u32 = supervisor.rsplit(')').next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(!held(supervisor), "the task's supervisor (pid {supervisor}) holds the daemon's inherited descriptor");
    for watchdog in watchdogs_of(&daemon.node) {
        assert!(!held(watchdog as u32), "the watchdog (pid {watchdog}) holds the daemon's inherited descriptor");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_given_an_old_jobs_number_after_a_lost_database_never_shows_that_jobs_logs() {
    if skip_unless_root("a_job_given_an_old_jobs_number_after_a_lost_database_never_shows_that_jobs_logs") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "50"]);
    let old = daemon.submit_as(Some(OTHER_USER), &["--", "sh", "-c", "echo the-old-jobs-secret"]);
    wait_for("the old job to end", Duration::from_secs(20), || daemon.job(old).is_some_and(|j| j.state.is_over()));
    // Its cgroup goes a moment after its record ends. Left behind, a lost database would refuse the agent (an
    // orphan cgroup); that refusal is tested elsewhere, and this test is about the logs left on the node.
    daemon.wait_cgroup_gone(old);
    daemon.kill_hard();
    // The database lost with its backup: numbers start again, and the old job's logs are still on the node.
    for file in ["cosched.db", "cosched.db-wal", "cosched.db-shm", "backup/cosched.db"] {
        let _ = std::fs::remove_file(daemon.dir.join(file));
    }
    daemon.restart(&["--slice-ms", "50"]);
    // A registered job makes no logs of its own: before, `logs` read the old job's files by its number.
    let out = daemon.client_as(ATTACKER, &["register", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job = serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job;
    assert_eq!(job, old, "the test needs the old job's number again");
    let logs = daemon.client_as(ATTACKER, &["logs", &job.to_string()]);
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(!text.contains("the-old-jobs-secret"), "another user's old log was shown:\n{text}");
    let _ = daemon.client_as(ATTACKER, &["kill", &job.to_string()]);
}
