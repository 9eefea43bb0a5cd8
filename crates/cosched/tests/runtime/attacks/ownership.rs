//! Attacks on other users' processes and jobs, and on the daemon's own processes.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Register a job as `uid` (`None`: root) and return its id, or the controller's refusal.
fn register(daemon: &Daemon, uid: Option<u32>, args: &[&str]) -> Result<u64, String> {
    let mut all = vec!["register", "--json"];
    all.extend(args);
    let out = client_as(&daemon.socket, &all, uid);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job)
}

fn refusal(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "the daemon accepted: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sleeper_as(uid: Option<u32>) -> Child {
    let mut command = Command::new("sleep");
    command.arg("300").stdin(Stdio::null());
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    command.spawn().unwrap()
}

struct Reaped(Child);
impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_user_cannot_pull_another_users_task_or_a_root_service_out_through_their_own_job() {
    if skip_unless_root("a_user_cannot_pull_another_users_task_out") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let victim_job = daemon.submit(&["-n", "1", "--", "sleep", "300"]);
    let victim = daemon.pids(victim_job, 1)[0];
    let before = cgroup_of(victim);
    let service = Reaped(sleeper_as(None));
    let service_pid = service.0.id() as i32;
    let service_cgroup = cgroup_of(service_pid);
    let own = register(&daemon, Some(ATTACKER), &["--cpus", "1"]).unwrap().to_string();

    for pid in [victim, service_pid] {
        // A user takes no process out of any job, not even of their own.
        let out = daemon.client_as(ATTACKER, &["remove-pid", &own, &pid.to_string()]);
        assert!(refusal(&out).contains("only administrators"), "{out:?}");
        // Not even an administrator moves a process out of a job it is not in.
        let out = daemon.client(&["remove-pid", &own, &pid.to_string()]);
        assert!(refusal(&out).contains("not a member of job"), "{out:?}");
    }
    // Not through the victim's job either: it is not theirs.
    let out = daemon.client_as(ATTACKER, &["remove-pid", &victim_job.to_string(), &victim.to_string()]);
    assert!(refusal(&out).contains("permission denied"), "{out:?}");
    // Nor into their own job, which would take it out of the victim's.
    let out = daemon.client_as(ATTACKER, &["add-pid", &own, &victim.to_string()]);
    assert!(refusal(&out).contains("permission denied"), "{out:?}");
    let out = daemon.client(&["add-pid", &own, &victim.to_string()]);
    assert!(refusal(&out).contains(&format!("is in job {victim_job}")), "{out:?}");
    assert_eq!(cgroup_of(victim), before, "the victim's task left its job");
    assert_eq!(cgroup_of(service_pid), service_cgroup, "the root service was moved");
    // The victim's job can still be ended as a whole.
    assert!(daemon.client(&["kill", &victim_job.to_string()]).status.success());
    wait_for("the victim's job to end", Duration::from_secs(20), || cpu_ticks(victim).is_none());
}

#[test]
fn a_user_cannot_add_another_users_process_or_a_set_uid_one() {
    if skip_unless_root("a_user_cannot_add_another_users_process") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let own = register(&daemon, Some(ATTACKER), &["--cpus", "1"]).unwrap().to_string();
    let other = Reaped(sleeper_as(Some(OTHER_USER)));
    let root = Reaped(sleeper_as(None));
    for pid in [other.0.id(), root.0.id()] {
        let out = daemon.client_as(ATTACKER, &["add-pid", &own, &pid.to_string()]);
        assert!(refusal(&out).contains("does not belong to uid 65534"), "{out:?}");
        assert!(!cgroup_of(pid as i32).contains(&format!("job-{own}")));
    }
    // Their own process: accepted.
    let mine = Reaped(sleeper_as(Some(ATTACKER)));
    let out = daemon.client_as(ATTACKER, &["add-pid", &own, &mine.0.id().to_string()]);
    assert!(out.status.success(), "{out:?}");
    assert!(cgroup_of(mine.0.id() as i32).ends_with(&format!("job-{own}")));
}

/// A process whose second thread prints its id and sleeps: `switch` has that thread alone take uid 65534 (a raw
/// setresuid changes one thread's credentials), `setgid` has the whole process keep gid 0 saved (as a set-gid
/// program would) under uid 65534, `leaderless` ends the main thread alone (`pthread_exit`), `plain` changes nothing.
const THREADED: &str = r#"
import ctypes, os, sys, threading, time
how, setresuid = sys.argv[1], int(sys.argv[2])
printed = threading.Event()
if how == "setgid":
    os.setgroups([])
    os.setresgid(65534, 65534, 0)
    os.setresuid(65534, 65534, 65534)
def second():
    if how == "switch" and ctypes.CDLL(None, use_errno=True).syscall(setresuid, 65534, 65534, 65534) != 0:
        sys.exit("setresuid failed")
    print(threading.get_native_id(), flush=True)
    printed.set()
    time.sleep(300)
threading.Thread(target=second, daemon=True).start()
printed.wait()
if how == "leaderless":
    ctypes.CDLL(None).pthread_exit(None)
time.sleep(300)
"#;

/// Start `THREADED` (as `uid`, or root) and return it with its second thread's id.
fn threaded(how: &str, uid: Option<u32>) -> (Reaped, i32) {
    use std::io::BufRead;
    let mut command = Command::new("python3");
    command.args(["-c", THREADED, how, &nix::libc::SYS_setresuid.to_string()]);
    command.stdin(Stdio::null()).stdout(Stdio::piped());
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let tid = line.trim().parse().unwrap_or_else(|_| panic!("no thread id from python: {line:?}"));
    (Reaped(child), tid)
}

/// Found by a reviewer: credentials are per thread, and a move takes the whole process. Naming a root process's
/// thread that had taken the user's uids moved that process out of its cgroup (and into the agent's); a set-gid
/// process passed the uid check. Now every thread's uids and gids are judged, and a thread id names its process.
#[test]
fn a_user_cannot_move_a_process_through_one_of_its_threads_a_set_gid_one_or_one_without_its_leader() {
    if skip_unless_root("a_user_cannot_move_a_process_through_one_of_its_threads") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let theirs = register(&daemon, Some(ATTACKER), &["--cpus", "1"]).unwrap().to_string();
    let (root_process, switched_thread) = threaded("switch", None);
    let (set_gid, set_gid_thread) = threaded("setgid", None);
    for (process, thread) in [(&root_process, switched_thread), (&set_gid, set_gid_thread)] {
        let pid = process.0.id() as i32;
        let before = cgroup_of(pid);
        for named in [pid, thread] {
            let out = daemon.client_as(ATTACKER, &["add-pid", &theirs, &named.to_string()]);
            assert!(refusal(&out).contains("permission denied"), "{out:?}");
            assert_eq!(cgroup_of(pid), before, "process {pid} was moved when {named} was named");
        }
    }
    // A process whose main thread has ended: the kernel would move its other threads without it, where the job's
    // `cgroup.procs` lists none of them, so nothing could freeze or kill them with the job (a reviewer's find).
    let (leaderless, _) = threaded("leaderless", Some(ATTACKER));
    let leader = leaderless.0.id() as i32;
    wait_for("the main thread to end", Duration::from_secs(10), || process_state(leader) == Some('Z'));
    let before = cgroup_of(leader);
    let out = daemon.client_as(ATTACKER, &["add-pid", &theirs, &leader.to_string()]);
    assert!(refusal(&out).contains("exiting"), "{out:?}");
    assert_eq!(cgroup_of(leader), before);
    // Another user's job can take their own threaded process, named by a thread: the whole process moves.
    let others = register(&daemon, Some(OTHER_USER), &["--cpus", "1"]).unwrap().to_string();
    let (own, own_thread) = threaded("plain", Some(OTHER_USER));
    let out = daemon.client_as(OTHER_USER, &["add-pid", &others, &own_thread.to_string()]);
    assert!(out.status.success(), "{out:?}");
    assert!(cgroup_of(own.0.id() as i32).ends_with(&format!("job-{others}")), "{}", cgroup_of(own.0.id() as i32));
}

#[test]
fn nobody_not_even_root_can_put_pid_1_a_kernel_thread_or_the_daemon_into_a_job() {
    if skip_unless_root("nobody_can_put_pid_1_or_the_daemon_into_a_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = register(&daemon, None, &["--cpus", "1"]).unwrap().to_string();
    let daemon_pid = daemon.child.id() as i32;
    let watchdog = watchdog_of(daemon_pid);
    daemon.pids(daemon.submit(&["--", "sleep", "300"]), 1);
    let supervisor = daemon_child(daemon_pid, "__supervise");
    let kthreadd = 2;
    for pid in [1, kthreadd, daemon_pid, watchdog, supervisor] {
        let out = daemon.client(&["add-pid", &job, &pid.to_string()]);
        let why = refusal(&out);
        assert!(
            why.contains("never moved") || why.contains("kernel thread") || why.contains("cosched itself"),
            "{why}"
        );
    }
    assert!(!cgroup_of(daemon_pid).contains("job-"), "the daemon joined a job");
    assert!(daemon.client(&["status"]).status.success(), "the daemon stopped answering");
}

fn children_of(pid: i32) -> Vec<i32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    tasks
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// An agent in a pid namespace of its own: there the attacker's pid number on this host names a root process.
/// The ownership check must happen where the pid lives (the agent), not on the controller's host.
#[test]
fn a_pid_is_checked_on_the_node_where_it_lives() {
    if skip_unless_root("a_pid_is_checked_on_the_node_where_it_lives") {
        return;
    }
    let node = unique("ns");
    let daemon = Daemon::up(&["--slice-ms", "50", "--nodes", &node]);
    let attacker_process = Reaped(sleeper_as(Some(ATTACKER)));
    let number = attacker_process.0.id();
    let script = format!(
        "echo {} > /proc/sys/kernel/ns_last_pid; sleep 300 & exec {COSCHED} agent --controller {} --node {node} \
         --state-dir {} --cpus 1 --no-realtime",
        number - 1,
        daemon.socket.display(),
        daemon.dir.join("ns-agent").display()
    );
    let namespace = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(daemon.dir.join("ns-agent.log")).unwrap())
        .spawn()
        .unwrap();
    let _namespace = NamespaceGuard { child: namespace, node: node.clone() };
    wait_for("the namespaced agent", Duration::from_secs(10), || {
        daemon.status().is_some_and(|s| s.nodes.iter().any(|n| n.name == node && n.connected))
    });
    let victim = root_process_with_namespace_pid(number).expect("a root process with the attacker's pid number");
    let job = register(&daemon, Some(ATTACKER), &["--cpus", "1", "--node", &node]).unwrap().to_string();
    let out = daemon.client_as(ATTACKER, &["add-pid", &job, &number.to_string()]);
    assert!(refusal(&out).contains("does not belong to uid 65534"), "{out:?}");
    assert!(!cgroup_of(victim).contains(&format!("job-{job}")), "the root process joined the attacker's job");
}

struct NamespaceGuard {
    child: Child,
    node: String,
}

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        // Killing the namespace's first process ends every process in it.
        for pid in children_of(self.child.id() as i32) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_agent_cgroups(&self.node);
    }
}

/// The host pid of a root `sleep` whose pid inside its namespace is `number`.
fn root_process_with_namespace_pid(number: u32) -> Option<i32> {
    let mut found = None;
    wait_for("the namespace's root process", Duration::from_secs(10), || {
        found = std::fs::read_dir("/proc").into_iter().flatten().flatten().find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let nspid = status.lines().find(|l| l.starts_with("NSpid:"))?;
            let ids: Vec<&str> = nspid.split_whitespace().skip(1).collect();
            let root = status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
            (ids.len() == 2 && ids[1] == number.to_string() && root).then_some(pid)
        });
        found.is_some()
    });
    found
}

#[test]
fn registrations_cannot_take_a_running_job_out_of_the_cycle_and_empty_jobs_can_be_ended() {
    if skip_unless_root("registrations_cannot_starve_a_running_job") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "20", "--rows", "4", "--cpus", "2"]);
    let victim = daemon.submit(&["-n", "2", "--", "timeout", "120", "sh", "-c", "while :; do :; done"]);
    let spinners = daemon.spinners(victim, 2);
    let mut registered = Vec::new();
    let refused = loop {
        match register(&daemon, Some(ATTACKER), &["--cpus", "2", "--class", "interactive"]) {
            Ok(job) => registered.push(job),
            Err(why) => break why,
        }
        assert!(registered.len() <= 3, "more registrations than free rows were admitted");
    };
    assert!(refused.contains("no room"), "{refused}");
    assert_eq!(registered.len(), 3, "three rows were free");
    let share = daemon.job(victim).unwrap().slice_share;
    assert!(share >= 0.25, "the running job's share fell to {share}");
    assert!(all_progress(&spinners, Duration::from_secs(2)), "the running job was frozen");
    // Jobs without processes end when killed, by their owner or by root.
    for (i, job) in registered.iter().enumerate() {
        let out = if i == 0 {
            daemon.client(&["kill", &job.to_string()])
        } else {
            daemon.client_as(ATTACKER, &["kill", &job.to_string()])
        };
        assert!(out.status.success(), "{out:?}");
    }
    for job in registered {
        wait_for(&format!("empty job {job} to end"), Duration::from_secs(20), || {
            daemon.job(job).is_some_and(|j| j.state == JobState::Killed)
        });
    }
}

#[test]
fn a_user_cannot_resume_a_job_an_administrator_suspended() {
    if skip_unless_root("a_user_cannot_resume_a_job_an_administrator_suspended") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let id = daemon.submit_as(Some(ATTACKER), &["--", "sleep", "300"]);
    daemon.pids(id, 1);
    assert!(daemon.client(&["suspend", &id.to_string()]).status.success());
    let out = daemon.client_as(ATTACKER, &["resume", &id.to_string()]);
    assert!(refusal(&out).contains("only an administrator may resume"), "{out:?}");
    assert_eq!(daemon.job(id).map(|j| j.state), Some(JobState::Suspended));
    // The owner's own suspension is the owner's to lift.
    assert!(daemon.client(&["resume", &id.to_string()]).status.success());
    assert!(daemon.client_as(ATTACKER, &["suspend", &id.to_string()]).status.success());
    assert!(daemon.client_as(ATTACKER, &["resume", &id.to_string()]).status.success());
}

#[test]
fn a_lost_database_does_not_hand_running_processes_to_a_new_owner_of_the_same_job_id() {
    if skip_unless_root("a_lost_database_does_not_hand_running_processes_over") {
        return;
    }
    let clean_node = unique("clean");
    let nodes = ["--slice-ms", "50", "--nodes", &clean_node];
    let mut daemon = Daemon::up(&nodes);
    let victim = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    let victim_pid = daemon.pids(victim, 1)[0];
    daemon.kill_hard();
    // Lost with its backup (a database missing beside its backup is refused before any agent is heard).
    for file in ["cosched.db", "cosched.db-wal", "cosched.db-shm", "backup/cosched.db"] {
        let _ = std::fs::remove_file(daemon.dir.join(file));
    }
    daemon.restart_controller(&nodes);
    wait_for("the agent's refusal", Duration::from_secs(10), || {
        std::fs::read_to_string(daemon.dir.join("up2.log"))
            .unwrap_or_default()
            .contains("does not know: job-1 (uid 64000")
    });
    let connected = daemon.any_node_connected();
    assert!(!connected, "the agent was accepted over cgroups the database does not know");
    // A job submitted now runs on a clean node. Its id may be one the refused node's leftover cgroups carry (the
    // lost database knew it, this one cannot): those cgroups stay the old job's, by their tag.
    let clean_dir = daemon.dir.join("clean");
    std::fs::create_dir_all(&clean_dir).unwrap();
    let (socket, state) = (daemon.socket.to_str().unwrap(), clean_dir.to_str().unwrap());
    let agent_args = ["agent", "--controller", socket, "--node", &clean_node, "--state-dir", state];
    let mut clean_agent = spawn_logged(&agent_args, &clean_dir.join("agent.log"));
    wait_for("the clean node's agent", Duration::from_secs(10), || {
        daemon.status().is_some_and(|s| s.nodes.iter().any(|n| n.name == clean_node && n.connected))
    });
    let out = daemon.client_as(ATTACKER, &["submit", "--json", "--", "sleep", "300"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job = serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job;
    let theirs = daemon.pids(job, 1);
    assert!(!theirs.contains(&victim_pid), "job {job} took over the victim's process {victim_pid}");
    let _ = daemon.client_as(ATTACKER, &["kill", &job.to_string()]);
    let _ = clean_agent.kill();
    let _ = clean_agent.wait();
    remove_agent_cgroups(&clean_node);
    assert!(cpu_ticks(victim_pid).is_some(), "the victim's process was killed");
    let cgroup = cgroup_of(victim_pid);
    assert!(cgroup.ends_with(&format!("job-{victim}")), "the victim left its cgroup: {cgroup}");
    assert_eq!(frozen(victim_pid), Some(false), "the victim's job is frozen");
}

#[test]
fn an_administrators_suspension_outlives_a_crash_of_the_daemon() {
    if skip_unless_root("an_administrators_suspension_outlives_a_crash") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "50"]);
    let held = daemon.submit_as(Some(ATTACKER), &["--", "sleep", "300"]);
    let running = daemon.submit(&["--", "sleep", "300"]);
    let (held_pid, running_pid) = (daemon.pids(held, 1)[0], daemon.pids(running, 1)[0]);
    assert!(daemon.client(&["suspend", &held.to_string()]).status.success());
    wait_for("the suspension", Duration::from_secs(5), || frozen(held_pid) == Some(true));
    let watchdog = watchdog_of(daemon.child.id() as i32);
    daemon.kill_hard();
    // The watchdog thaws every job but the suspended one, then exits.
    wait_for("the watchdog to finish", Duration::from_secs(10), || !is_alive(watchdog));
    assert_eq!(frozen(running_pid), Some(false));
    assert_eq!(frozen(held_pid), Some(true), "the watchdog thawed a suspended job");
    daemon.restart(&["--slice-ms", "50"]);
    assert_eq!(daemon.job(held).map(|j| j.state), Some(JobState::Suspended));
    let out = daemon.client_as(ATTACKER, &["resume", &held.to_string()]);
    assert!(refusal(&out).contains("only an administrator may resume"), "{out:?}");
    assert!(daemon.client(&["resume", &held.to_string()]).status.success());
    wait_for("the job to be thawed", Duration::from_secs(5), || frozen(held_pid) == Some(false));
}

fn watchdog_of(daemon_pid: i32) -> i32 {
    daemon_child(daemon_pid, "__watchdog")
}

/// A child of the daemon running cosched's binary as `role` (`__watchdog`, `__supervise`).
fn daemon_child(daemon_pid: i32, role: &str) -> i32 {
    let role = format!("\0{role}\0");
    children_of(daemon_pid)
        .into_iter()
        .find(|&p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.windows(role.len()).any(|w| w == role.as_bytes()))
        })
        .unwrap_or_else(|| panic!("no{role:?} child of the daemon"))
}

/// The job's own task tries to end its supervisor and to write its status on its cgroup; it can do neither, and
/// its job ends with the status it really exited with.
#[test]
fn a_task_can_neither_forge_its_exit_status_nor_end_its_supervisor() {
    if skip_unless_root("a_task_can_neither_forge_its_exit_status_nor_end_its_supervisor") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let attribute = format!("{}0", cosched_runtime::job_tag::TASK_ATTRIBUTE_PREFIX);
    let forge = format!(r#"import os, sys; os.setxattr(sys.argv[1], "{attribute}", b"exited 0 1")"#);
    let script = format!(
        "kill -9 $PPID && echo ended-the-supervisor; \
         /usr/bin/python3 -c '{forge}' {}$(sed -n 's/^0:://p' /proc/self/cgroup) && echo forged; exit 3",
        v2_mount().display()
    );
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sh", "-c", &script]);
    wait_for("the job to end", Duration::from_secs(20), || daemon.job(job).is_some_and(|j| j.ended_unix_ms.is_some()));
    let record = daemon.job(job).unwrap();
    assert_eq!(record.state, JobState::Failed, "{record:?}");
    assert!(record.error.as_deref().unwrap_or("").contains("exited with status 3"), "{record:?}");
    let logs = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).into_owned();
    assert!(!logs.contains("ended-the-supervisor") && !logs.contains("forged"), "{logs}");
    assert!(logs.contains("Operation not permitted"), "the attempts did not run: {logs}");
}

/// `cosched rsh` as `uid` (`None`: root) for job `job` (`None`: outside any job); its exit status and stderr.
fn rsh_as(daemon: &Daemon, uid: Option<u32>, job: Option<u64>, node: &str, words: &[&str]) -> (Option<i32>, String) {
    let mut command = Command::new(COSCHED);
    command.args(["rsh", node]).args(words).env("COSCHED_SOCKET", &daemon.socket).env_remove("COSCHED_JOB_ID");
    command.current_dir("/tmp");
    if let Some(job) = job {
        command.env("COSCHED_JOB_ID", job.to_string());
    }
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    let out = command.output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn commands_run_only_in_ones_own_running_job_on_its_nodes_and_inside_its_cgroup() {
    if skip_unless_root("commands_run_only_in_ones_own_running_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "60"]);
    wait_for("the job to run", Duration::from_secs(10), || daemon.job(job).is_some_and(|j| !j.pids.is_empty()));
    let node = daemon.node.clone();
    // The owner's command runs in the job's cgroup on the node, as the owner, and its exit status comes back.
    let inside = format!("grep -q job-{job} /proc/self/cgroup && test $(id -u) = {OTHER_USER}");
    assert_eq!(rsh_as(&daemon, Some(OTHER_USER), Some(job), &node, &[&inside]), (Some(0), String::new()));
    assert_eq!(rsh_as(&daemon, Some(OTHER_USER), Some(job), &node, &["exit", "7"]).0, Some(7));
    // Another user, even naming the job, is refused; so is a node the job does not hold, or no job at all.
    let (code, said) = rsh_as(&daemon, Some(ATTACKER), Some(job), &node, &["true"]);
    assert!(code == Some(255) && said.contains("permission denied"), "{code:?} {said}");
    let (code, said) = rsh_as(&daemon, Some(OTHER_USER), Some(job), "elsewhere", &["true"]);
    assert!(code == Some(255) && said.contains("has no CPUs on node elsewhere"), "{code:?} {said}");
    let (code, said) = rsh_as(&daemon, Some(OTHER_USER), None, &node, &["true"]);
    assert!(code == Some(255) && said.contains("COSCHED_JOB_ID is not set"), "{code:?} {said}");
    // Once the job has ended, nothing more runs in it.
    assert!(daemon.client(&["kill", &job.to_string()]).status.success());
    wait_for("the job to end", Duration::from_secs(20), || daemon.job(job).is_some_and(|j| j.state.is_over()));
    let (code, said) = rsh_as(&daemon, Some(OTHER_USER), Some(job), &node, &["true"]);
    assert!(code == Some(255) && said.contains("commands run only in a running job"), "{code:?} {said}");
}
