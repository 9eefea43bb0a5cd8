//! Faults: the daemon, its agent and its watchdog killed mid-slice, alone and together; a database made read-only,
//! deleted, replaced or corrupted while the daemon runs, and damaged or lost while it is down. After each, no job
//! stays frozen once the daemon (or the watchdog) has noticed, every job record is still there, and every process
//! is still in its own owner's job. Waits are generous bounds for a loaded machine; what is asserted is the state.

use crate::harness::*;
use std::path::Path;
use std::time::Duration;

const USER: u32 = 65534;

/// A gang job of `tasks` spinning tasks as `uid` (`None`: root); returns its id and its spinning processes.
fn spin_job(daemon: &Daemon, uid: Option<u32>, tasks: usize) -> (u64, Vec<i32>) {
    let n = tasks.to_string();
    let job = daemon.submit_as(uid, &["-n", &n, "--", "timeout", "300", "sh", "-c", "while :; do :; done"]);
    (job, daemon.spinners(job, tasks))
}

/// A job of root's and one of another user's, two spinning tasks each, caught mid-slice (at 100 ms slices one gang
/// is frozen); returns both jobs and the spinners of each.
fn two_owners_mid_slice(daemon: &Daemon) -> (u64, u64, [Vec<i32>; 2]) {
    let (mine, my_spinners) = spin_job(daemon, None, 2);
    let (theirs, their_spinners) = spin_job(daemon, Some(USER), 2);
    std::thread::sleep(Duration::from_millis(230));
    (mine, theirs, [my_spinners, their_spinners])
}

/// A job that waits for `flag` to exist, then exits with `code`; returns it and the pid of its task.
fn job_exiting_on(daemon: &Daemon, flag: &Path, code: u8) -> (u64, i32) {
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done; exit {code}", flag.display());
    let job = daemon.submit(&["--", "sh", "-c", &script]);
    let mut task = None;
    wait_for(&format!("job {job} to run"), Duration::from_secs(10), || {
        let pids = daemon.job(job).map(|j| j.pids).unwrap_or_default();
        task = pids.into_iter().find(|&p| is_shell(p));
        task.is_some()
    });
    (job, task.unwrap())
}

fn signal(pid: i32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
}

fn wait_ended(daemon: &Daemon, job: u64) -> StatusJob {
    wait_for(&format!("job {job} to end"), Duration::from_secs(20), || {
        daemon.job(job).is_some_and(|j| j.ended_unix_ms.is_some())
    });
    daemon.job(job).unwrap()
}

fn assert_failed_with(record: &StatusJob, reason: &str) {
    assert_eq!(record.state, JobState::Failed, "{record:?}");
    assert!(record.error.as_deref().is_some_and(|e| e.contains(reason)), "{record:?}");
}

/// Every job listed, with its state, in `status` and in the stored records.
fn assert_records(daemon: &Daemon, expected: &[(u64, &str)]) {
    let stored = daemon.stored_rows();
    for &(job, state) in expected {
        assert_eq!(daemon.job(job).map(|j| j.state.name()), Some(state), "job {job} in status");
        assert!(stored.iter().any(|(id, s, _)| *id == job as i64 && s == state), "job {job} stored: {stored:?}");
    }
}

#[test]
fn a_tasks_exit_status_survives_restarts_of_the_daemon() {
    if skip_unless_root("a_tasks_exit_status_survives_restarts_of_the_daemon") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "50"]);
    let (after_flag, away_flag) = (daemon.dir.join("after"), daemon.dir.join("away"));
    let (after, _) = job_exiting_on(&daemon, &after_flag, 3);
    let (away, away_task) = job_exiting_on(&daemon, &away_flag, 4);
    daemon.kill_hard();
    // One task ends while no agent runs, the other after a new agent has adopted it: neither is its child.
    std::fs::write(&away_flag, "").unwrap();
    wait_for("the task to end while the daemon is down", Duration::from_secs(10), || !is_alive(away_task));
    daemon.restart(&["--slice-ms", "50"]);
    std::fs::write(&after_flag, "").unwrap();
    assert_failed_with(&wait_ended(&daemon, away), "exited with status 4");
    assert_failed_with(&wait_ended(&daemon, after), "exited with status 3");
}

#[test]
fn killing_the_daemon_and_its_watchdog_together_mid_slice_leaves_nothing_frozen_once_an_agent_starts() {
    if skip_unless_root("killing_the_daemon_and_its_watchdog_together") {
        return;
    }
    let _machine = whole_machine();
    let mut daemon = Daemon::up(&["--slice-ms", "100"]);
    let (mine, theirs, [my_spinners, their_spinners]) = two_owners_mid_slice(&daemon);
    let spinners = [my_spinners.clone(), their_spinners.clone()].concat();
    let watchdogs = watchdogs_of(&daemon.node);
    assert_eq!(watchdogs.len(), 1, "{watchdogs:?}");
    // Stopped first, so that it can neither replace its watchdog nor switch while both are killed.
    signal(daemon.child.id() as i32, nix::sys::signal::Signal::SIGSTOP);
    signal(watchdogs[0], nix::sys::signal::Signal::SIGKILL);
    daemon.kill_hard();
    assert!(!frozen_jobs(&daemon.node).is_empty(), "no gang was frozen when both died: the test proves nothing");

    // Nobody is left to thaw: an agent that starts must do it before anything else, even with no controller.
    let dir = daemon.dir.to_str().unwrap().to_string();
    let dir = dir.as_str();
    daemon.agent = Some(spawn_logged(
        &["agent", "--controller", "/nonexistent/cosched.sock", "--node", &daemon.node, "--state-dir", dir],
        &daemon.dir.join("agent.log"),
    ));
    wait_all_thawed(&daemon.node, &spinners, "the new agent to thaw every job");
    daemon.kill_agent();

    daemon.restart(&["--slice-ms", "100"]);
    assert_records(&daemon, &[(mine, "running"), (theirs, "running")]);
    assert_eq!(daemon.pids(theirs, 4).len(), 4, "the restarted daemon adopts the job");
    assert_processes_are_their_jobs_owners(&daemon);
    assert_every_gang_runs(&[my_spinners, their_spinners], "after the restart");
}

#[test]
fn killing_the_agent_alone_mid_slice_thaws_its_jobs_and_a_new_agent_adopts_them() {
    if skip_unless_root("killing_the_agent_alone_mid_slice") {
        return;
    }
    let _machine = whole_machine();
    let mut daemon = Daemon::split(&["--slice-ms", "100"]);
    let (mine, theirs, [my_spinners, their_spinners]) = two_owners_mid_slice(&daemon);
    let spinners = [my_spinners.clone(), their_spinners.clone()].concat();
    daemon.kill_agent();
    wait_all_thawed(&daemon.node, &spinners, "the watchdog to thaw every job");

    daemon.start_agent();
    wait_for("the agent to connect again", Duration::from_secs(10), || daemon.any_node_connected());
    assert_records(&daemon, &[(mine, "running"), (theirs, "running")]);
    assert_processes_are_their_jobs_owners(&daemon);
    wait_switching(&daemon);
    let s = sample_gangs(&[my_spinners.clone(), their_spinners.clone()], Duration::from_secs(1));
    assert_eq!(s.overlap, 0, "gang scheduling resumes with the new agent");
    assert_every_gang_runs(&[my_spinners, their_spinners], "with the new agent");
}

/// `chattr +i` (or `-i`) on the database and its write-ahead log: as root, a mode does not stop writes, an
/// immutable file does.
fn set_immutable(dir: &Path, immutable: bool) {
    let files = ["cosched.db", "cosched.db-wal"].map(|f| dir.join(f));
    let present: Vec<&Path> = files.iter().map(|f| f.as_path()).filter(|f| f.exists()).collect();
    let out = std::process::Command::new("chattr")
        .arg(if immutable { "+i" } else { "-i" })
        .args(&present)
        .output()
        .expect("chattr");
    assert!(out.status.success(), "chattr: {}", String::from_utf8_lossy(&out.stderr));
}

/// Makes the database writable again even when the test fails half-way.
struct Immutable<'a>(&'a Path);

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        set_immutable(self.0, false);
    }
}

fn storage_state(daemon: &Daemon) -> Option<StorageStatus> {
    daemon.status().map(|s| s.storage)
}

#[test]
fn a_read_only_database_refuses_requests_keeps_events_and_the_node_and_recovers() {
    if skip_unless_root("a_read_only_database") {
        return;
    }
    let mut daemon = Daemon::split(&["--slice-ms", "50"]);
    let flag = daemon.dir.join("end");
    let (ending, _) = job_exiting_on(&daemon, &flag, 3);
    let running = daemon.submit(&["--", "sleep", "300"]);
    let running_pid = daemon.pids(running, 1)[0];
    let dir = daemon.dir.clone();
    set_immutable(&dir, true);
    let _undo = Immutable(&dir);
    // Found by a write, or by the periodic check (which writes) when nothing else is written.
    wait_for("the fault to be seen", Duration::from_secs(20), || {
        storage_state(&daemon).is_some_and(|s| s.state == StorageState::Error)
    });

    // A request that cannot be written is refused and changes nothing.
    let out = daemon.client(&["submit", "--", "true"]);
    let refusal = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success() && refusal.contains("storage error"), "{out:?}");
    assert!(refusal.contains("nothing was changed"), "{refusal}");
    let text = String::from_utf8_lossy(&daemon.client(&["status"]).stdout).into_owned();
    assert!(text.contains("storage: ERROR"), "{text}");

    // An event is kept in memory: the job ends with its status.
    std::fs::write(&flag, "").unwrap();
    assert_failed_with(&wait_ended(&daemon, ending), "exited with status 3");
    // The agent comes back while storage fails: the controller keeps its node and its jobs.
    daemon.kill_agent();
    daemon.start_agent();
    wait_for("the agent to be accepted", Duration::from_secs(10), || daemon.any_node_connected());
    assert_eq!(daemon.pids(running, 1), [running_pid]);
    assert!(storage_state(&daemon).unwrap().held_changes >= 2, "{:?}", storage_state(&daemon));
    std::thread::sleep(Duration::from_secs(3)); // a few retries
    assert_eq!(daemon.log().matches("storage fault:").count(), 1, "logged once per change:\n{}", daemon.log());

    // Storage comes back: everything held is written; the refused job never existed.
    set_immutable(&dir, false);
    wait_for("storage to work again", Duration::from_secs(10), || {
        storage_state(&daemon).is_some_and(|s| s.state == StorageState::Ok)
    });
    assert_records(&daemon, &[(ending, "failed"), (running, "running")]);
    assert_eq!(daemon.stored_rows().len(), 2, "a refused request left a record");

    // A controller that starts on a read-only database says so and does not start; the jobs run on meanwhile.
    set_immutable(&dir, true);
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let args = ["controller", "--monitor", "off", "--state-dir", dir.to_str().unwrap(), "--socket", "/nonexistent/s"];
    let said = refused(&args, &dir.join("refused.log"));
    assert!(said.contains("cannot be written"), "{said}");
    assert_eq!(frozen(running_pid), Some(false));
    set_immutable(&dir, false);
    daemon.restart_split_controller(&["--slice-ms", "50"]);
    wait_for("the agent to reconnect", Duration::from_secs(10), || {
        daemon.job(running).is_some_and(|j| j.pids == [running_pid])
    });
    assert_records(&daemon, &[(ending, "failed"), (running, "running")]);
}

#[test]
fn a_database_deleted_replaced_or_corrupted_under_the_daemon_is_written_anew_from_memory() {
    if skip_unless_root("a_database_deleted_replaced_or_corrupted") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "50"]);
    let mine = daemon.submit(&["--", "sleep", "300"]);
    let theirs = daemon.submit_as(Some(USER), &["--", "sleep", "300"]);
    let pids = [daemon.pids(mine, 1)[0], daemon.pids(theirs, 1)[0]];
    let db = daemon.dir.join("cosched.db");
    daemon.stored_rows(); // written and backed up
    let rewrites = |daemon: &Daemon| daemon.log().matches("written anew from memory").count();

    for (i, what) in ["deleted", "replaced by garbage", "corrupted in place"].into_iter().enumerate() {
        damage(&db, what);
        wait_for(&format!("the {what} database to be written anew"), Duration::from_secs(30), || {
            rewrites(&daemon) == i + 1 && storage_state(&daemon).is_some_and(|s| s.state == StorageState::Ok)
        });
        assert_records(&daemon, &[(mine, "running"), (theirs, "running")]);
    }
    assert!(daemon.log().contains("was deleted") && daemon.log().contains("was replaced"), "{}", daemon.log());
    assert!(daemon.log().contains("failed its check"), "{}", daemon.log());

    // What was written anew is what a restart reads.
    daemon.restart(&["--slice-ms", "50"]);
    assert_records(&daemon, &[(mine, "running"), (theirs, "running")]);
    assert_eq!([daemon.pids(mine, 1)[0], daemon.pids(theirs, 1)[0]], pids);
    assert_processes_are_their_jobs_owners(&daemon);
}

/// Damage the live database file in one of the ways above.
fn damage(db: &Path, how: &str) {
    match how {
        "deleted" => std::fs::remove_file(db).unwrap(),
        "replaced by garbage" => {
            let garbage = db.with_extension("garbage");
            std::fs::write(&garbage, vec![0x42; 16384]).unwrap();
            std::fs::rename(&garbage, db).unwrap();
        }
        "corrupted in place" => {
            use std::os::unix::fs::FileExt;
            let file = std::fs::OpenOptions::new().write(true).open(db).unwrap();
            file.write_all_at(&[0xa5; 8192], 1024).unwrap();
        }
        other => panic!("no damage {other:?}"),
    }
}

#[test]
fn a_damaged_or_lost_database_at_start_is_refused_with_how_to_restore_the_backup() {
    if skip_unless_root("a_damaged_or_lost_database_at_start") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit_as(Some(USER), &["--", "sleep", "300"]);
    let pid = daemon.pids(job, 1)[0];
    daemon.stored_rows(); // the backup holds the job
    let (db, backup) = (daemon.dir.join("cosched.db"), daemon.dir.join("backup").join("cosched.db"));

    daemon.kill_hard();
    std::fs::write(&db, b"SQLite format 3\0 followed by nothing a database could be").unwrap();
    let said = daemon.start_refused(&["--slice-ms", "50"]);
    assert!(said.contains("is damaged") && said.contains(&format!("cp {}", backup.display())), "{said}");
    std::fs::remove_file(&db).unwrap();
    let said = daemon.start_refused(&["--slice-ms", "50"]);
    assert!(said.contains("is missing") && said.contains("a backup exists"), "{said}");
    // Meanwhile the job runs on, thawed by the watchdog.
    wait_for("the job to be thawed", Duration::from_secs(10), || frozen(pid) == Some(false));

    // Restored as the message says, the database is adopted with its job.
    let _ = std::fs::remove_file(daemon.dir.join("cosched.db-wal"));
    std::fs::copy(&backup, &db).unwrap();
    daemon.restart(&["--slice-ms", "50"]);
    assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running));
    assert_eq!(daemon.pids(job, 1), [pid]);
    assert_processes_are_their_jobs_owners(&daemon);
}

/// The jobs that every kind of stop must leave as they were: a gang of root's and one of another user's (two tasks
/// each, so that one of them is frozen at any moment), each spinning until its flag exists, and, where a freezer
/// keeps a process's own stop (v1 and v2: the signals freezer's thaw is SIGCONT), a job whose task stopped itself.
struct StopWitnesses {
    freezer: &'static str,
    mine: (u64, Vec<i32>),
    theirs: (u64, Vec<i32>),
    self_stopped: Option<(u64, i32)>,
}

impl StopWitnesses {
    fn start(daemon: &Daemon, freezer: &'static str) -> StopWitnesses {
        let spin_until = |uid, flag: &str, code: u8| {
            let script = format!("while [ ! -e {} ]; do :; done; exit {code}", daemon.dir.join(flag).display());
            let job = daemon.submit_as(uid, &["-n", "2", "--", "sh", "-c", &script]);
            (job, daemon.pids(job, 2))
        };
        let mine = spin_until(None, "mine.done", 0);
        let theirs = spin_until(Some(USER), "theirs.done", 5);
        let self_stopped = (freezer != "signals").then(|| {
            let job = daemon.submit_as(Some(USER), &["--", "sh", "-c", "kill -STOP $$; exit 7"]);
            let task = daemon.pids(job, 1)[0];
            wait_for("the task to stop itself", Duration::from_secs(20), || process_state(task) == Some('T'));
            (job, task)
        });
        StopWitnesses { freezer, mine, theirs, self_stopped }
    }

    fn spinners(&self) -> Vec<i32> {
        [self.mine.1.clone(), self.theirs.1.clone()].concat()
    }

    /// Wait until the daemon is in the middle of a slice with one of the two gangs frozen, so that a stop now
    /// finds a stopped job (otherwise the test would prove nothing).
    fn catch_a_gang_frozen(&self, node: &str) {
        let kind = match self.freezer {
            "v1" => cosched_runtime::agent::freezer::FreezerKind::V1,
            "v2" => cosched_runtime::agent::freezer::FreezerKind::V2,
            _ => cosched_runtime::agent::freezer::FreezerKind::Signals,
        };
        let groups = cosched_runtime::agent::freezer::JobGroups::open(node, Some(kind)).unwrap();
        wait_for("a gang frozen mid-slice", Duration::from_secs(10), || {
            [self.mine.0, self.theirs.0].iter().any(|&job| groups.is_frozen(job).unwrap_or(false))
        });
    }

    /// Nothing of the node stays frozen once the stop is noticed, and every process is alive and as it was: the
    /// gangs run, the self-stopped task is still stopped.
    fn assert_as_before(&self, what: &str) {
        let spinners = self.spinners();
        wait_for(&format!("every gang to run {what}"), Duration::from_secs(20), || {
            // Longer than a cycle of the three rows at 100 ms, so that every gang has had a slot in it.
            all_progress(&spinners, Duration::from_millis(400))
        });
        if let Some((_, task)) = self.self_stopped {
            // Stopped, or frozen while stopped (the kernel shows a frozen task as D; it returns to T at the thaw).
            // Had it been woken, it would have exited.
            let state = process_state(task);
            assert!(matches!(state, Some('T' | 'D')), "the task its user stopped, {what}: state {state:?}");
        }
    }

    /// `assert_as_before`, once no agent runs: nothing at all may be frozen.
    fn assert_thawed(&self, node: &str, what: &str) {
        self.assert_as_before(what);
        if self.freezer == "v2" {
            assert!(frozen_jobs(node).is_empty(), "a job left frozen {what}");
        }
    }

    /// Every job running in the daemon's records, with its processes. (What is stored is checked once at the end:
    /// the daemon writes a change before its memory has it, and reading the store waits for a backup.)
    fn assert_running(&self, daemon: &Daemon, what: &str) {
        let jobs = [self.mine.0, self.theirs.0].into_iter().chain(self.self_stopped.map(|(job, _)| job));
        for job in jobs {
            assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running), "job {job}, {what}");
        }
        for (job, pids) in [&self.mine, &self.theirs] {
            assert_eq!(daemon.pids(*job, 2), *pids, "job {job}'s processes, {what}");
        }
    }
}

/// Jobs outlive their daemon by design: a test that fails half-way must not leave them spinning.
impl Drop for StopWitnesses {
    fn drop(&mut self) {
        for pid in self.spinners().into_iter().chain(self.self_stopped.map(|(_, task)| task)) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn stop_daemon(daemon: &mut Daemon, how: nix::sys::signal::Signal) {
    signal(daemon.child.id() as i32, how);
    let _ = daemon.child.wait();
}

/// Under one freezer, `cosched up` stopped by SIGTERM (what `systemctl stop` sends) and by SIGKILL, its watchdog
/// killed, and a task's supervisor killed, each while a gang is frozen: every job goes on as it was, and every
/// record ends true — a task whose supervisor died is failed with its status lost, never `finished`.
fn every_stop_of_the_daemon_leaves_jobs_as_they_were(freezer: &'static str) {
    let _machine = whole_machine();
    let args = ["--slice-ms", "100", "--freezer", freezer];
    let mut daemon = Daemon::up(&args);
    let jobs = StopWitnesses::start(&daemon, freezer);
    for how in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGKILL] {
        jobs.catch_a_gang_frozen(&daemon.node);
        stop_daemon(&mut daemon, how);
        jobs.assert_thawed(&daemon.node, &format!("after the daemon's {how}"));
        daemon.restart(&args);
        jobs.assert_running(&daemon, &format!("after the restart that followed {how}"));
        wait_switching(&daemon);
    }

    let first = watchdogs_of(&daemon.node);
    assert_eq!(first.len(), 1, "one watchdog: {first:?}");
    signal(first[0], nix::sys::signal::Signal::SIGKILL);
    wait_for("a new watchdog", Duration::from_secs(10), || {
        let now = watchdogs_of(&daemon.node);
        now.len() == 1 && now != first
    });
    jobs.catch_a_gang_frozen(&daemon.node);
    stop_daemon(&mut daemon, nix::sys::signal::Signal::SIGKILL);
    jobs.assert_thawed(&daemon.node, "after the daemon's SIGKILL once its watchdog was replaced");
    daemon.restart(&args);

    // The supervisor of one of the other user's tasks, killed: the task runs on in its slots; how it ends is lost.
    let supervisor = parent_of(jobs.theirs.1[0]);
    signal(supervisor, nix::sys::signal::Signal::SIGKILL);
    wait_switching(&daemon);
    jobs.assert_as_before("after a supervisor's SIGKILL");

    for flag in ["mine.done", "theirs.done"] {
        std::fs::write(daemon.dir.join(flag), "").unwrap();
    }
    assert_eq!(wait_ended(&daemon, jobs.mine.0).state, JobState::Finished);
    assert_failed_with(&wait_ended(&daemon, jobs.theirs.0), "was lost: its supervisor ended");
    if let Some((job, task)) = jobs.self_stopped {
        signal(task, nix::sys::signal::Signal::SIGCONT); // as its user would
        assert_failed_with(&wait_ended(&daemon, job), "exited with status 7");
    }
    let mut expected = vec![(jobs.mine.0, "finished"), (jobs.theirs.0, "failed")];
    expected.extend(jobs.self_stopped.map(|(job, _)| (job, "failed")));
    assert_records(&daemon, &expected);
}

/// Under one freezer, the agent of a `cosched controller` stopped by SIGTERM and by SIGKILL while a gang is
/// frozen, and the controller killed: the jobs go on as they were, a new agent adopts them, the records stay true.
fn every_stop_of_the_agent_or_controller_leaves_jobs_as_they_were(freezer: &'static str) {
    let _machine = whole_machine();
    let agent_args = ["--freezer", freezer];
    let mut daemon = Daemon::split_with(&["--slice-ms", "100"], &agent_args);
    let jobs = StopWitnesses::start(&daemon, freezer);
    for how in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGKILL] {
        jobs.catch_a_gang_frozen(&daemon.node);
        let mut agent = daemon.agent.take().unwrap();
        signal(agent.id() as i32, how);
        let _ = agent.wait();
        jobs.assert_thawed(&daemon.node, &format!("after the agent's {how}"));
        daemon.start_agent_with(&agent_args);
        wait_for("the agent to connect again", Duration::from_secs(10), || daemon.any_node_connected());
        jobs.assert_running(&daemon, &format!("with a new agent after {how}"));
        wait_switching(&daemon);
    }
    // The controller alone: its agent keeps switching on the last schedule, so gangs keep their turns.
    jobs.catch_a_gang_frozen(&daemon.node);
    daemon.restart_split_controller(&["--slice-ms", "100"]);
    wait_for("the agent to connect again", Duration::from_secs(20), || daemon.any_node_connected());
    jobs.assert_as_before("after the controller's SIGKILL");
    jobs.assert_running(&daemon, "after the controller's restart");

    for flag in ["mine.done", "theirs.done"] {
        std::fs::write(daemon.dir.join(flag), "").unwrap();
    }
    assert_eq!(wait_ended(&daemon, jobs.mine.0).state, JobState::Finished);
    assert_failed_with(&wait_ended(&daemon, jobs.theirs.0), "exited with status 5");
    if let Some((job, task)) = jobs.self_stopped {
        signal(task, nix::sys::signal::Signal::SIGCONT);
        assert_failed_with(&wait_ended(&daemon, job), "exited with status 7");
    }
}

fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat.rsplit_once(')').unwrap().1.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn every_stop_of_the_daemon_under_the_v2_freezer_leaves_jobs_as_they_were() {
    if !skip_unless_root("every_stop_of_the_daemon_under_the_v2_freezer") {
        every_stop_of_the_daemon_leaves_jobs_as_they_were("v2");
    }
}

#[test]
fn every_stop_of_the_daemon_under_the_v1_freezer_leaves_jobs_as_they_were() {
    if !skip_unless_root("every_stop_of_the_daemon_under_the_v1_freezer") {
        every_stop_of_the_daemon_leaves_jobs_as_they_were("v1");
    }
}

#[test]
fn every_stop_of_the_daemon_under_the_signals_freezer_leaves_jobs_as_they_were() {
    if !skip_unless_root("every_stop_of_the_daemon_under_the_signals_freezer") {
        every_stop_of_the_daemon_leaves_jobs_as_they_were("signals");
    }
}

#[test]
fn every_stop_of_the_agent_or_controller_under_the_v2_freezer_leaves_jobs_as_they_were() {
    if !skip_unless_root("every_stop_of_the_agent_or_controller_under_the_v2_freezer") {
        every_stop_of_the_agent_or_controller_leaves_jobs_as_they_were("v2");
    }
}

#[test]
fn every_stop_of_the_agent_or_controller_under_the_v1_freezer_leaves_jobs_as_they_were() {
    if !skip_unless_root("every_stop_of_the_agent_or_controller_under_the_v1_freezer") {
        every_stop_of_the_agent_or_controller_leaves_jobs_as_they_were("v1");
    }
}

#[test]
fn every_stop_of_the_agent_or_controller_under_the_signals_freezer_leaves_jobs_as_they_were() {
    if !skip_unless_root("every_stop_of_the_agent_or_controller_under_the_signals_freezer") {
        every_stop_of_the_agent_or_controller_leaves_jobs_as_they_were("signals");
    }
}

#[test]
fn a_job_that_ends_while_its_controller_is_down_is_recorded_once_the_controller_is_back() {
    if skip_unless_root("a_job_that_ends_while_its_controller_is_down") {
        return;
    }
    let mut daemon = Daemon::split(&["--slice-ms", "50"]);
    let flag = daemon.dir.join("end");
    let (job, task) = job_exiting_on(&daemon, &flag, 3);
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    // The task ends while the agent has no controller to tell; the agent's next surveys find it over.
    std::fs::write(&flag, "").unwrap();
    wait_for("the task to end", Duration::from_secs(10), || !is_alive(task));
    std::thread::sleep(Duration::from_millis(500));
    daemon.restart_split_controller(&["--slice-ms", "50"]);
    wait_for("the agent to connect again", Duration::from_secs(20), || daemon.any_node_connected());
    // The end found while nobody listened is told once somebody does: the job was `running` for ever.
    assert_failed_with(&wait_ended(&daemon, job), "exited with status 3");
}
