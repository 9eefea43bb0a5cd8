//! Processes that outlive their job: a daemon a task leaves behind, a remote command (`cosched rsh`) still running
//! when the tasks end, a job killed while frozen, and a process nobody can kill. Everything a job started ends with
//! the job; what cannot be ended is reported and kept, never forgotten.

use super::ATTACKER;
use crate::harness::*;
use crate::held_fs::HeldLookups;
use std::time::Duration;

/// The job's record once it is over (within 60 s).
fn wait_over(daemon: &Daemon, job: u64) -> StatusJob {
    wait_for(&format!("job {job} to end"), Duration::from_secs(60), || {
        daemon.job(job).is_some_and(|j| j.state.is_over())
    });
    daemon.job(job).unwrap()
}

/// The tails of the job's logs, as its owner reads them.
fn logs_of(daemon: &Daemon, job: u64) -> String {
    String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned()
}

/// A shell line that starts `sleep <seconds>` in the job through `cosched rsh` on the task's own node, in the
/// background, and returns once it runs.
fn remote_sleep(daemon: &Daemon, seconds: u32) -> String {
    format!(
        "COSCHED_SOCKET={} {COSCHED} rsh \"$COSCHED_NODE\" 'sleep {seconds}' & \
         until pgrep -f '^sleep {seconds}$' >/dev/null; do sleep 0.1; done",
        daemon.socket.display()
    )
}

#[test]
fn a_daemon_a_task_leaves_behind_ends_with_its_job() {
    if skip_unless_root("a_daemon_a_task_leaves_behind_ends_with_its_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    // The classic daemon: a session of its own, its parent gone, so nothing waits for it; it says its pid first.
    let script = "setsid sh -c 'sleep 86401 & echo daemon-pid=$!' </dev/null; exit 0";
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", script]);
    let record = wait_over(&daemon, job);
    assert!(logs_of(&daemon, job).contains("daemon-pid="), "the daemon never started: {}", logs_of(&daemon, job));
    assert_eq!(record.state, JobState::Finished, "{record:?}");
    assert_eq!(sleeps_of(86401), Vec::<i32>::new(), "the daemon outlived its job");
    daemon.wait_cgroup_gone(job);
}

#[test]
fn a_remote_command_still_running_when_the_tasks_end_ends_with_the_job() {
    if skip_unless_root("a_remote_command_still_running_when_the_tasks_end_ends_with_the_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let script = format!("{}; echo remote-started; exit 0", remote_sleep(&daemon, 86402));
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", &script]);
    let record = wait_over(&daemon, job);
    assert!(logs_of(&daemon, job).contains("remote-started"), "no remote command ran: {}", logs_of(&daemon, job));
    assert_eq!(record.state, JobState::Finished, "{record:?}");
    assert_eq!(sleeps_of(86402), Vec::<i32>::new(), "the remote command outlived its job");
    daemon.wait_cgroup_gone(job);
}

#[test]
fn a_job_killed_while_frozen_leaves_nothing_running_under_every_freezer() {
    if skip_unless_root("a_job_killed_while_frozen_leaves_nothing_running_under_every_freezer") {
        return;
    }
    for (freezer, seconds) in [("v2", 86410), ("v1", 86420), ("signals", 86430)] {
        let daemon = Daemon::up(&["--slice-ms", "50", "--freezer", freezer, "--kill-wait-s", "1"]);
        // A task that ignores SIGTERM, with a daemon and a remote command that ignore it too.
        let script = format!(
            "trap '' TERM; setsid sh -c \"trap '' TERM; sleep {daemon_sleep} & wait\" </dev/null & {remote}; \
             echo all-started; sleep {task_sleep}",
            daemon_sleep = seconds + 1,
            remote = remote_sleep(&daemon, seconds + 2),
            task_sleep = seconds + 3,
        );
        let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", &script]);
        wait_for(&format!("{freezer}: every process to start"), Duration::from_secs(30), || {
            logs_of(&daemon, job).contains("all-started") && sleeps_of(seconds + 3).len() == 1
        });
        assert!(daemon.client(&["suspend", &job.to_string()]).status.success());
        wait_for(&format!("{freezer}: the job to be frozen"), Duration::from_secs(20), || {
            daemon.job(job).is_some_and(|j| j.frozen && j.state == JobState::Suspended)
        });
        assert!(daemon.client_as(ATTACKER, &["kill", &job.to_string()]).status.success());
        let record = wait_over(&daemon, job);
        assert_eq!(record.state, JobState::Killed, "{freezer}: {record:?}");
        for sleep in seconds + 1..=seconds + 3 {
            assert_eq!(sleeps_of(sleep), Vec::<i32>::new(), "{freezer}: sleep {sleep} outlived its killed job");
        }
        daemon.wait_cgroup_gone(job);
    }
}

/// A task leaves a process that waits in the kernel on a file system that does not answer, and which therefore
/// survives SIGKILL. The job ends, the cgroup is kept and reported (agent log, the job's record, the node in
/// `status` and `/metrics`), the kill is retried, and once the process can die the cgroup goes and so does the
/// report. Meanwhile the node keeps running other jobs, and a crash of the daemon forgets nothing of it.
#[test]
fn a_cgroup_that_cannot_be_emptied_is_reported_and_kept_until_it_empties() {
    if skip_unless_root("a_cgroup_that_cannot_be_emptied_is_reported_and_kept_until_it_empties") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "50", "--monitor", "127.0.0.1:0"]);
    let held = HeldLookups::mount(); // dropped first: a failed test releases the process, then the daemon cleans up
    let address = monitor_address(&daemon);
    let script = format!("stat {} >/dev/null 2>&1 & sleep 1; exit 0", held.path("x").display());
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", &script]);
    wait_for("the lookup to wait in the kernel", Duration::from_secs(20), || held.waiting() == 1);
    let stuck_pid = wait_stuck(&daemon, job);
    assert_eq!(process_state(stuck_pid), Some('D'), "the left process is not in uninterruptible sleep");

    // Ended and said so in the job's record, under the node in status and in /metrics, and in the agent's log.
    let record = daemon.job(job).unwrap();
    assert!(record.state.is_over(), "{record:?}");
    let note = record.left_behind.clone().unwrap_or_default();
    assert!(note.contains(&daemon.node) && note.contains(&stuck_pid.to_string()), "the job's record: {record:?}");
    let (_, _, metrics) = http_exchange(&address, "GET", "/metrics", &[("Host", &address)]);
    let node_label = format!("{{node=\"{}\"}}", daemon.node);
    assert!(metrics.contains(&format!("cosched_node_stuck_jobs{node_label} 1")), "{metrics}");
    assert!(metrics.contains(&format!("cosched_node_stuck_processes{node_label} 1")), "{metrics}");
    let table = String::from_utf8_lossy(&daemon.client(&["status"]).stdout).into_owned();
    assert!(table.contains(&format!("job {job}")) && table.contains("could not be killed"), "{table}");
    assert!(daemon.log().contains(&format!("job {job}")) && daemon.log().contains("could not be killed"));
    // Kept: the cgroup stays while its process does, and the node runs new jobs meanwhile.
    assert!(job_cgroups(&daemon.node).contains(&job), "the cgroup of a process left running was removed");
    let next = daemon.submit_as(Some(ATTACKER), &["--", "true"]);
    assert_eq!(wait_over(&daemon, next).state, JobState::Finished);
    assert!(stuck_on_node(&daemon).iter().any(|s| s.job == job), "the report went away while the process lives");
    // Kept across a crash of the daemon: the new agent finds the cgroup, the controller knows the job is over, and
    // the kill goes on.
    daemon.restart(&["--slice-ms", "50"]);
    wait_for("the restarted node to report the cgroup stuck again", Duration::from_secs(60), || {
        stuck_on_node(&daemon).iter().any(|s| s.job == job && s.pids == [stuck_pid])
    });
    assert!(job_cgroups(&daemon.node).contains(&job), "the cgroup went with the crash");

    // Once the process can die, the retried kill ends it; the cgroup and the report go.
    held.release();
    wait_for("the left process to die", Duration::from_secs(30), || !is_alive(stuck_pid));
    wait_for("the cgroup to go", Duration::from_secs(30), || !job_cgroups(&daemon.node).contains(&job));
    wait_for("the report to go", Duration::from_secs(30), || stuck_on_node(&daemon).is_empty());
}

/// The stuck jobs the node's agent reports (per `status`).
fn stuck_on_node(daemon: &Daemon) -> Vec<cosched_runtime::wire::protocol::StuckJob> {
    daemon.status().map(|s| s.nodes.into_iter().flat_map(|n| n.stuck_jobs).collect()).unwrap_or_default()
}

/// Wait until the node reports the job's cgroup stuck with one process, and the job over; returns the pid.
fn wait_stuck(daemon: &Daemon, job: u64) -> i32 {
    let mut pids = vec![];
    wait_for("the node to report the job's cgroup stuck", Duration::from_secs(60), || {
        pids = stuck_on_node(daemon).into_iter().filter(|s| s.job == job).flat_map(|s| s.pids).collect();
        pids.len() == 1 && daemon.job(job).is_some_and(|j| j.left_behind.is_some() && j.state.is_over())
    });
    pids[0]
}
