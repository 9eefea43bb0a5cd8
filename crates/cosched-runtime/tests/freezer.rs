//! Real cgroups, real processes, real signals: job cgroups, freezing, launching through the shim, the watchdog.
//!
//! Needs root and the examples `launch_shim` and `watchdog` (built by `cargo test`; with `--test freezer` alone,
//! build them first with `cargo build -p cosched-runtime --examples`). A kind the machine does not offer is
//! reported with a `SKIPPED:` line, never passed silently.

// These tests measure real latencies and wait for real processes: the workspace's wall-clock ban (for the
// simulator's determinism) does not apply.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use cosched_runtime::agent::freezer::{thaw_all_under, CgroupParent, FreezerKind, JobGroups};
use cosched_runtime::agent::launch::{spawn_shim, LaunchFailure, LaunchSpec, LaunchStage};
use cosched_runtime::agent::watchdog::start_watchdog;
use cosched_runtime::testing::say_skipped;
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{getgid, getuid, Pid};

const NOBODY: u32 = 65534;
/// Two CPU loops: the shell itself and a forked subshell, so membership must follow forks.
const TWO_LOOPS: &str = "while :; do :; done & while :; do :; done";

/// An example binary next to the test binary (`target/<profile>/examples/<name>`).
fn example(name: &str) -> PathBuf {
    let test_exe = std::env::current_exe().expect("test binary path");
    let path = test_exe.parent().and_then(|deps| deps.parent()).expect("target dir").join("examples").join(name);
    assert!(path.exists(), "{} missing: run `cargo build -p cosched-runtime --examples` first", path.display());
    path
}

fn kind_label(kind: FreezerKind) -> &'static str {
    match kind {
        FreezerKind::V2 => "v2",
        FreezerKind::V1 => "v1",
        FreezerKind::Signals => "signals",
    }
}

/// A test-unique agent name, so tests running in parallel threads (and concurrent test runs) never share cgroups.
fn agent_name(kind: FreezerKind, case: &str) -> String {
    format!("test-{}-{}-{case}", std::process::id(), kind_label(kind))
}

/// State letter and utime+stime ticks of a process, `None` once it is gone.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some((fields[0].chars().next()?, fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?))
}

fn ticks(pids: &[i32]) -> u64 {
    pids.iter().filter_map(|&p| stat(p)).map(|(_, t)| t).sum()
}

fn gone_or_zombie(pid: i32) -> bool {
    matches!(stat(pid), None | Some(('Z' | 'X', _)))
}

/// Poll `done` every millisecond for up to `limit`; true if it became true.
fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    done()
}

/// Owns everything a test creates and removes it even when the test fails: processes, job cgroups, agent dirs.
struct Fixture {
    groups: JobGroups,
    jobs: Vec<u64>,
    children: Vec<Child>,
    stray_pids: Vec<i32>,
}

impl Fixture {
    /// Open `kind` for a test-unique agent, or print why the kind is skipped.
    fn open(kind: FreezerKind, case: &str) -> Option<Fixture> {
        match JobGroups::open(&agent_name(kind, case), Some(kind)) {
            Ok(groups) => {
                assert_eq!(groups.kind(), kind);
                Some(Fixture { groups, jobs: Vec::new(), children: Vec::new(), stray_pids: Vec::new() })
            }
            Err(e) => {
                say_skipped(&format!("{kind:?}"), &e.to_string());
                None
            }
        }
    }

    fn create(&mut self, job: u64) {
        self.jobs.push(job);
        self.groups.create(job).expect("create job cgroup");
    }

    /// Start `sh -c script` as `nobody` in `job` through the shim; returns the index of the child.
    fn launch(&mut self, job: u64, script: &str) -> usize {
        let spec = LaunchSpec {
            procs_files: self.groups.procs_files(job),
            uid: NOBODY,
            gid: NOBODY,
            cwd: PathBuf::from("/"),
            env: vec![("COSCHED_JOB".to_string(), job.to_string())],
            argv: vec!["sh".to_string(), "-c".to_string(), script.to_string()],
            open_files_soft_limit: None,
            files: None,
            umask: None,
        };
        let shim = spawn_shim(&example("launch_shim"), &spec, |c| {
            c.stdout(Stdio::null());
        })
        .expect("spawn shim");
        self.children.push(shim.child);
        self.children.len() - 1
    }

    /// Wait until the job has exactly `count` members and return them.
    fn members(&self, job: u64, count: usize) -> Vec<i32> {
        let mut pids = Vec::new();
        let ok = eventually(Duration::from_secs(5), || {
            pids = self.groups.pids(job).expect("pids");
            pids.len() == count
        });
        assert!(ok, "job {job} has members {pids:?}, expected {count}");
        pids
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for &pid in &self.stray_pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        for child in &mut self.children {
            let _ = child.kill();
        }
        for &job in &self.jobs {
            let _ = self.groups.signal(job, Signal::SIGKILL);
            eventually(Duration::from_secs(2), || self.groups.pids(job).map_or(true, |p| p.is_empty()));
            if let Err(e) = self.groups.remove(job) {
                eprintln!("cleanup: {e}");
            }
        }
        for child in &mut self.children {
            let _ = child.wait();
        }
        if let Err(e) = self.groups.remove_agent_dirs() {
            eprintln!("cleanup: {e}");
        }
    }
}

/// Every member is in the job's cgroup in each hierarchy and runs as `nobody`.
fn check_placement_and_identity(fx: &Fixture, job: u64, pids: &[i32]) {
    let suffix = format!("/cosched/{}/job-{job}", fx.groups.agent_name());
    let hierarchies = fx.groups.procs_files(job).len();
    for &pid in pids {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("read /proc/pid/cgroup");
        let in_job = cgroups.lines().filter(|l| l.ends_with(&suffix)).count();
        assert_eq!(in_job, hierarchies, "pid {pid} not in {suffix} in all {hierarchies} hierarchies:\n{cgroups}");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/pid/status");
        let ids = |key: &str| -> Option<Vec<String>> {
            let line = status.lines().find(|l| l.starts_with(key))?;
            Some(line.split_whitespace().skip(1).map(str::to_string).collect())
        };
        let nobody: Vec<String> = vec![NOBODY.to_string(); 4];
        assert_eq!(ids("Uid:"), Some(nobody.clone()), "pid {pid} uid");
        assert_eq!(ids("Gid:"), Some(nobody), "pid {pid} gid");
        assert_eq!(ids("Groups:"), Some(vec![NOBODY.to_string()]), "pid {pid} groups");
    }
}

/// Freeze and thaw `cycles` times; print and return the median freeze latency in µs.
fn measure_freeze_latency_us(fx: &Fixture, job: u64, cycles: usize) -> u128 {
    let mut latencies_us: Vec<u128> = (0..cycles)
        .map(|_| {
            let start = Instant::now();
            fx.groups.freeze(job).expect("freeze");
            let latency_us = start.elapsed().as_micros();
            fx.groups.thaw(job).expect("thaw");
            thread::sleep(Duration::from_millis(5));
            latency_us
        })
        .collect();
    latencies_us.sort_unstable();
    let (median_us, max_us) = (latencies_us[cycles / 2], latencies_us[cycles - 1]);
    eprintln!(
        "freeze latency {:?} ({} members, {cycles} cycles): median {median_us} us, min {} us, max {max_us} us",
        fx.groups.kind(),
        fx.groups.pids(job).map_or(0, |p| p.len()),
        latencies_us[0]
    );
    median_us
}

/// Frozen: kernel says so, no member is running, and no CPU time accrues for 150 ms.
fn check_frozen(fx: &Fixture, job: u64, pids: &[i32]) {
    assert!(fx.groups.is_frozen(job).expect("is_frozen"), "job {job} not frozen");
    for &pid in pids {
        // A task thawed just before and not yet run still counts as frozen (it goes straight back to the trap once
        // it gets a CPU, running no user code): on a loaded machine it may show `R` for a moment.
        let not_running = eventually(Duration::from_secs(1), || stat(pid).expect("member alive").0 != 'R');
        assert!(not_running, "pid {pid} still running");
        let (state, _) = stat(pid).expect("member alive");
        if fx.groups.kind() == FreezerKind::Signals {
            assert!(state == 'T' || state == 't', "pid {pid} state {state}, expected stopped");
        }
    }
    let (ticks_before, usage_before_ns) = (ticks(pids), fx.groups.cpu_usage_ns(job).expect("usage"));
    thread::sleep(Duration::from_millis(150));
    assert_eq!(ticks(pids), ticks_before, "CPU time advanced while frozen");
    assert_eq!(fx.groups.cpu_usage_ns(job).expect("usage"), usage_before_ns, "cpu_usage_ns advanced while frozen");
}

/// Thawed: kernel says so within a second, and CPU time advances again.
fn check_running(fx: &Fixture, job: u64, pids: &[i32]) {
    assert!(eventually(Duration::from_secs(1), || !fx.groups.is_frozen(job).expect("is_frozen")), "still frozen");
    let (ticks_before, usage_before_ns) = (ticks(pids), fx.groups.cpu_usage_ns(job).expect("usage"));
    let advanced = eventually(Duration::from_secs(2), || ticks(pids) > ticks_before);
    assert!(advanced, "CPU time does not advance after thaw");
    let usage_after_ns = fx.groups.cpu_usage_ns(job).expect("usage");
    assert!(usage_after_ns > usage_before_ns, "cpu_usage_ns {usage_before_ns} -> {usage_after_ns}");
}

/// add_pid / remove_pid move a process that was started outside the job in and out of it.
fn check_add_remove(fx: &mut Fixture, job: u64) {
    fx.create(job);
    let sleeper = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    let pid = i32::try_from(sleeper.id()).expect("pid");
    fx.children.push(sleeper);
    fx.groups.add_pid(job, pid).expect("add_pid");
    assert_eq!(fx.groups.pids(job).expect("pids"), vec![pid]);
    fx.groups.remove_pid(job, pid).expect("remove_pid");
    assert!(fx.groups.pids(job).expect("pids").is_empty());
    fx.groups.remove(job).expect("remove emptied job");
}

/// SIGKILL while frozen kills every member; only then can the cgroup be removed.
fn check_kill_and_remove(fx: &mut Fixture, job: u64, shim: usize, pids: &[i32]) {
    let busy = fx.groups.remove(job).expect_err("remove of a busy job must fail");
    assert!(busy.to_string().contains(&format!("job-{job}")), "error does not name the cgroup: {busy}");
    fx.groups.freeze(job).expect("freeze");
    fx.groups.signal(job, Signal::SIGKILL).expect("SIGKILL");
    let emptied = eventually(Duration::from_secs(2), || fx.groups.pids(job).expect("pids").is_empty());
    assert!(emptied, "members left after SIGKILL: {:?}", fx.groups.pids(job));
    let status = fx.children[shim].wait().expect("wait for shim pid");
    assert_eq!(status.signal(), Some(Signal::SIGKILL as i32), "task status {status:?}");
    assert!(eventually(Duration::from_secs(2), || pids.iter().all(|&p| gone_or_zombie(p))), "a member survived");
    assert!(fx.groups.existing_jobs().expect("existing").contains(&job));
    fx.groups.remove(job).expect("remove after kill");
    assert!(!fx.groups.existing_jobs().expect("existing").contains(&job));
    assert!(fx.groups.pids(job).expect("pids of removed job").is_empty());
}

fn lifecycle(kind: FreezerKind) {
    let Some(mut fx) = Fixture::open(kind, "life") else { return };
    eprintln!("{}", fx.groups.describe());
    let job = 7;
    fx.create(job);
    fx.groups.create(job).expect("create is idempotent");
    let shim = fx.launch(job, TWO_LOOPS);
    let pids = fx.members(job, 2);
    assert!(pids.contains(&(fx.children[shim].id() as i32)), "the shim's pid is the task's pid");
    check_placement_and_identity(&fx, job, &pids);
    check_add_remove(&mut fx, job + 1);
    thread::sleep(Duration::from_millis(50));
    measure_freeze_latency_us(&fx, job, 25);
    fx.groups.freeze(job).expect("freeze");
    check_frozen(&fx, job, &pids);
    fx.groups.thaw(job).expect("thaw");
    check_running(&fx, job, &pids);
    check_kill_and_remove(&mut fx, job, shim, &pids);
}

#[test]
fn lifecycle_v2() {
    lifecycle(FreezerKind::V2);
}

#[test]
fn lifecycle_v1() {
    lifecycle(FreezerKind::V1);
}

#[test]
fn lifecycle_signals() {
    lifecycle(FreezerKind::Signals);
}

/// Start a pretend agent (the `watchdog` example) that starts the real watchdog; returns (agent child index,
/// watchdog pid).
fn start_pretend_agent(fx: &mut Fixture) -> (usize, i32) {
    let mut agent = Command::new(example("watchdog"))
        .arg("agent")
        .arg(fx.groups.agent_name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn pretend agent");
    let mut line = String::new();
    BufReader::new(agent.stdout.take().expect("stdout")).read_line(&mut line).expect("read ready line");
    fx.children.push(agent);
    let watchdog_pid: i32 = line.strip_prefix("ready ").and_then(|p| p.trim().parse().ok()).expect("ready <pid>");
    fx.stray_pids.push(watchdog_pid);
    (fx.children.len() - 1, watchdog_pid)
}

fn watchdog_thaws_after_agent_death(kind: FreezerKind) {
    let Some(mut fx) = Fixture::open(kind, "wd") else { return };
    let (job, empty_job) = (3, 4);
    fx.create(job);
    fx.create(empty_job);
    fx.launch(job, TWO_LOOPS);
    let pids = fx.members(job, 2);
    let (agent, watchdog_pid) = start_pretend_agent(&mut fx);
    fx.groups.freeze(job).expect("freeze");
    check_frozen(&fx, job, &pids);
    fx.children[agent].kill().expect("SIGKILL the pretend agent");
    fx.children[agent].wait().expect("reap the pretend agent");
    let killed_at = Instant::now();
    // The bound is for a loaded machine; the delay itself (milliseconds) is printed for `--nocapture`.
    let thawed = eventually(Duration::from_secs(10), || !fx.groups.is_frozen(job).expect("is_frozen"));
    let thaw_delay = killed_at.elapsed();
    assert!(thawed, "job still frozen 10 s after the agent died");
    println!("watchdog {kind:?}: job thawed {thaw_delay:?} after the agent was killed");
    check_running(&fx, job, &pids);
    assert!(eventually(Duration::from_secs(10), || gone_or_zombie(watchdog_pid)), "watchdog did not exit");
    // The watchdog tidied the empty job's cgroup and kept the living one for the agent to re-adopt.
    assert_eq!(fx.groups.existing_jobs().expect("list jobs"), vec![job]);
}

#[test]
fn watchdog_v2() {
    watchdog_thaws_after_agent_death(FreezerKind::V2);
}

#[test]
fn watchdog_v1() {
    watchdog_thaws_after_agent_death(FreezerKind::V1);
}

#[test]
fn watchdog_signals() {
    watchdog_thaws_after_agent_death(FreezerKind::Signals);
}

/// The clean path: stopping the guard also thaws, and waits for the watchdog to exit.
#[test]
fn watchdog_stop_thaws_and_exits() {
    let Some(mut fx) = Fixture::open(FreezerKind::Signals, "wdstop") else { return };
    let job = 5;
    fx.create(job);
    fx.launch(job, "while :; do :; done");
    let pids = fx.members(job, 1);
    let watchdog =
        start_watchdog(&example("watchdog"), fx.groups.agent_name(), &CgroupParent::top()).expect("start watchdog");
    fx.groups.freeze(job).expect("freeze");
    let status = watchdog.stop().expect("stop watchdog");
    assert!(status.success(), "watchdog exit {status:?}");
    check_running(&fx, job, &pids);
}

/// Run the shim with `spec`; return its exit code and stderr.
/// Run a shim that must fail: its exit code, its stderr, and the reason it reported to its parent.
fn run_failing_shim(spec: &LaunchSpec) -> (Option<i32>, String, Option<LaunchFailure>) {
    let mut shim = spawn_shim(&example("launch_shim"), spec, |c| {
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
    })
    .expect("spawn shim");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut shim.child.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = shim.child.wait().expect("run shim");
    (status.code(), stderr, shim.launch_failure())
}

#[test]
fn shim_failures_name_what_failed_and_tell_the_parent_which_step() {
    let good = LaunchSpec {
        procs_files: Vec::new(),
        uid: getuid().as_raw(),
        gid: getgid().as_raw(),
        cwd: PathBuf::from("/"),
        env: Vec::new(),
        argv: vec!["/nonexistent/cosched-no-such-command".to_string(), "arg".to_string()],
        open_files_soft_limit: None,
        files: None,
        umask: None,
    };
    let failure = |stage, errno: Errno| Some(LaunchFailure { stage, errno: errno as i32 });
    let (code, stderr, reported) = run_failing_shim(&good);
    assert_eq!((code, reported), (Some(127), failure(LaunchStage::Exec, Errno::ENOENT)));
    assert!(stderr.contains("/nonexistent/cosched-no-such-command"), "stderr: {stderr}");

    let bad_cwd = LaunchSpec { cwd: PathBuf::from("/nonexistent/cosched-dir"), ..good.clone() };
    let (code, stderr, reported) = run_failing_shim(&bad_cwd);
    assert_eq!((code, reported), (Some(127), failure(LaunchStage::Directory, Errno::ENOENT)));
    assert!(stderr.contains("/nonexistent/cosched-dir"), "stderr: {stderr}");

    let bad_cgroup = LaunchSpec { procs_files: vec![PathBuf::from("/nonexistent/cgroup.procs")], ..good.clone() };
    let (code, stderr, reported) = run_failing_shim(&bad_cgroup);
    assert_eq!((code, reported.map(|r| r.stage)), (Some(127), Some(LaunchStage::Setup)));
    assert!(stderr.contains("/nonexistent/cgroup.procs"), "stderr: {stderr}");

    // One string over the kernel's 128 KiB: the command exists, the kernel refuses it (E2BIG), and that is what
    // the parent learns, not "not found".
    let huge = LaunchSpec {
        argv: vec!["/bin/true".to_string()],
        env: vec![("BIG".to_string(), "x".repeat(200 << 10))],
        ..good
    };
    let (code, _, reported) = run_failing_shim(&huge);
    assert_eq!((code, reported), (Some(127), failure(LaunchStage::Exec, Errno::E2BIG)));
    assert!(reported.unwrap().reason().contains("larger than the kernel takes"), "{:?}", reported.unwrap().reason());
}

#[test]
fn a_command_that_starts_reports_nothing_to_its_parent() {
    let spec = LaunchSpec {
        procs_files: Vec::new(),
        uid: getuid().as_raw(),
        gid: getgid().as_raw(),
        cwd: PathBuf::from("/"),
        env: Vec::new(),
        argv: vec!["sh".to_string(), "-c".to_string(), "exit 127".to_string()],
        open_files_soft_limit: None,
        files: None,
        umask: None,
    };
    let (code, _, reported) = run_failing_shim(&spec);
    assert_eq!((code, reported), (Some(127), None), "a command that ran and exited 127 is no failure to start");
}

#[test]
fn bad_agent_names_are_rejected() {
    for bad in ["", "..", "../escape", "a/b", ".hidden"] {
        let err = JobGroups::open(bad, None).expect_err("bad name accepted");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}: {err}");
        assert!(thaw_all_under(bad, &CgroupParent::top()).is_err(), "{bad:?}");
        assert!(start_watchdog(&example("watchdog"), bad, &CgroupParent::top()).is_err(), "{bad:?}");
    }
}

/// With no kind forced, the best available kind is chosen.
#[test]
fn open_prefers_the_best_kind() {
    let name = agent_name(FreezerKind::V2, "auto");
    let best = [FreezerKind::V2, FreezerKind::V1, FreezerKind::Signals]
        .into_iter()
        .find(|&k| JobGroups::open(&name, Some(k)).map(|g| g.remove_agent_dirs()).is_ok());
    let Some(best) = best else {
        say_skipped("auto", "no freezer kind available");
        return;
    };
    let groups = JobGroups::open(&name, None).expect("open");
    assert_eq!(groups.kind(), best, "{}", groups.describe());
    assert!(groups.existing_jobs().expect("existing").is_empty());
    groups.remove_agent_dirs().expect("cleanup");
}

/// A freeze that does not complete within its bound must not leave the job half frozen: it is thawed back and
/// the error says so (a zero bound makes the kernel's confirmation come too late, as a stuck task would).
fn a_late_freeze_is_thawed_back(kind: FreezerKind) {
    let Some(mut fx) = Fixture::open(kind, "late") else { return };
    let job = 9;
    fx.create(job);
    fx.launch(job, TWO_LOOPS);
    let pids = fx.members(job, 2);
    for _ in 0..200 {
        match fx.groups.freeze_within(job, Duration::ZERO) {
            Ok(()) => fx.groups.thaw(job).expect("thaw"),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
                assert!(e.to_string().contains("thawed back"), "{e}");
                check_running(&fx, job, &pids);
                return;
            }
        }
    }
    say_skipped(&format!("{kind:?}"), "200 freezes all completed at once; no late freeze to undo");
}

#[test]
fn a_late_freeze_is_thawed_back_v2() {
    a_late_freeze_is_thawed_back(FreezerKind::V2);
}

#[test]
fn a_late_freeze_is_thawed_back_v1() {
    a_late_freeze_is_thawed_back(FreezerKind::V1);
}

/// Everything in a job ends, however it forks and whatever its state: a frozen job whose shell forks every 10 ms
/// is emptied by repeating `kill_all` (`cgroup.kill` where the primary hierarchy is v2; under v1 each member is
/// signalled inside a freeze request, then thawed, since v1 holds a frozen task's SIGKILL until it thaws).
fn kill_all_empties_a_frozen_forking_job(kind: FreezerKind) {
    let Some(mut fx) = Fixture::open(kind, "killall") else { return };
    let job = 11;
    fx.create(job);
    fx.launch(job, "while :; do sleep 300 & sleep 0.01; done");
    assert!(eventually(Duration::from_secs(5), || fx.groups.members(job).expect("members").len() >= 5));
    fx.groups.freeze(job).expect("freeze");
    let emptied = eventually(Duration::from_secs(10), || {
        fx.groups.kill_all(job).expect("kill_all");
        fx.groups.members(job).expect("members").is_empty()
    });
    assert!(emptied, "members left after kill_all: {:?}", fx.groups.members(job));
    fx.groups.remove(job).expect("remove the emptied cgroup");
}

#[test]
fn kill_all_empties_a_frozen_forking_job_v2() {
    kill_all_empties_a_frozen_forking_job(FreezerKind::V2);
}

#[test]
fn kill_all_empties_a_frozen_forking_job_v1() {
    kill_all_empties_a_frozen_forking_job(FreezerKind::V1);
}

#[test]
fn kill_all_empties_a_frozen_forking_job_signals() {
    kill_all_empties_a_frozen_forking_job(FreezerKind::Signals);
}

/// The agent's ender kills what a forgotten job left, removes its cgroup and answers who waited, with nothing left.
#[test]
fn the_ender_ends_what_a_job_left_removes_its_cgroup_and_answers() {
    use cosched_runtime::agent::ender::Ender;
    use std::sync::Arc;
    let Some(mut fx) = Fixture::open(FreezerKind::V2, "ender") else { return };
    let job = 12;
    fx.create(job);
    fx.launch(job, "trap '' TERM; sleep 300 & sleep 300");
    let pids = fx.members(job, 3);
    let groups = Arc::new(JobGroups::open(fx.groups.agent_name(), Some(FreezerKind::V2)).expect("open"));
    let ender = Arc::new(Ender::new(groups, "ender-test"));
    let (answers, answered) = std::sync::mpsc::channel();
    let runner = ender.clone();
    thread::spawn(move || runner.run(|end| answers.send((end.ack, end.job, end.stuck)).unwrap_or(())));
    ender.end(job, Instant::now(), true, Some(7));
    let answer = answered.recv_timeout(Duration::from_secs(20)).expect("an answer");
    assert_eq!(answer, (7, job, None));
    assert!(pids.iter().all(|&p| gone_or_zombie(p)), "a member survived");
    assert!(!fx.groups.existing_jobs().expect("existing").contains(&job), "the cgroup is left");
    assert!(ender.stuck().is_empty());
}
