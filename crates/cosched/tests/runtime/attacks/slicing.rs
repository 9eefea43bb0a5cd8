#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Attacks on one's share of the CPUs: tasks taken out of their job (or moved into another job) to escape
//! slicing, empty registrations that hold matrix rows or take slots, and rows taken from a suspended job. See `mod.rs`.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SPIN_TWO: [&str; 8] = ["-n", "2", "--", "timeout", "120", "sh", "-c", "while :; do :; done"];

fn register_as(daemon: &Daemon, uid: u32, args: &[&str]) -> Result<u64, String> {
    let mut all = vec!["register", "--json"];
    all.extend(args);
    let out = daemon.client_as(uid, &all);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job)
}

fn refusal(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "the daemon accepted: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

struct Reaped(Child);
impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper_as(uid: u32) -> Reaped {
    let mut command = Command::new("sleep");
    command.arg("300").stdin(Stdio::null()).uid(uid).gid(uid);
    Reaped(command.spawn().unwrap())
}

#[test]
fn an_owner_cannot_take_its_tasks_out_of_its_job_to_escape_slicing() {
    if skip_unless_root("an_owner_cannot_take_its_tasks_out_of_its_job") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "50", "--cpus", "2"]);
    let theirs = daemon.submit_as(Some(ATTACKER), &SPIN_TWO);
    let victims = daemon.submit_as(Some(OTHER_USER), &SPIN_TWO);
    let (mine, other) = (daemon.spinners(theirs, 2), daemon.spinners(victims, 2));
    // Out of the job: only an administrator takes a process out of a job.
    for &pid in &mine {
        let out = daemon.client_as(ATTACKER, &["remove-pid", &theirs.to_string(), &pid.to_string()]);
        assert!(refusal(&out).contains("only administrators"), "{out:?}");
    }
    // Nor into another job of theirs (which would take it out of this one).
    let other_job = register_as(&daemon, ATTACKER, &["--cpus", "1"]).unwrap();
    for &pid in &mine {
        let out = daemon.client_as(ATTACKER, &["add-pid", &other_job.to_string(), &pid.to_string()]);
        assert!(refusal(&out).contains(&format!("is in job {theirs}")), "{out:?}");
    }
    for &pid in &mine {
        assert!(cgroup_of(pid).ends_with(&format!("job-{theirs}")), "task {pid} left its job: {}", cgroup_of(pid));
    }
    // The two gangs still take turns (the empty registration's row gone): neither gets far more CPU.
    assert!(daemon.client_as(ATTACKER, &["kill", &other_job.to_string()]).status.success());
    wait_for("the empty registration to end", Duration::from_secs(20), || {
        daemon.job(other_job).is_some_and(|j| j.state.is_over())
    });
    let used = gang_cpu_ticks(&[mine, other], Duration::from_secs(5));
    let (least, most) = (used[0].min(used[1]), used[0].max(used[1]));
    assert!(least > 0 && most < 4 * least, "CPU ticks of the attacker's and the victim's gangs: {used:?}");
}

#[test]
fn a_suspended_job_keeps_its_row_so_other_users_registrations_cannot_starve_it_after_resume() {
    if skip_unless_root("a_suspended_job_keeps_its_row") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "50", "--cpus", "2", "--rows", "2"]);
    let victim = daemon.submit_as(Some(OTHER_USER), &SPIN_TWO);
    let spinners = daemon.spinners(victim, 2);
    assert!(daemon.client_as(OTHER_USER, &["suspend", &victim.to_string()]).status.success());
    wait_for("the victim to stop", Duration::from_secs(10), || spinners.iter().all(|&p| frozen(p) == Some(true)));
    let mut admitted = Vec::new();
    let refused = loop {
        match register_as(&daemon, ATTACKER, &["--cpus", "2", "--class", "interactive"]) {
            Ok(job) => admitted.push(job),
            Err(why) => break why,
        }
        assert!(admitted.len() <= 2, "more registrations than rows were admitted");
    };
    assert!(refused.contains("no room"), "{refused}");
    assert_eq!(admitted.len(), 1, "of two rows, one is the suspended job's: {admitted:?}");
    assert!(daemon.client_as(OTHER_USER, &["resume", &victim.to_string()]).status.success());
    wait_for("the resumed job to have its row", Duration::from_secs(10), || {
        daemon.job(victim).is_some_and(|j| j.slice_share >= 0.5)
    });
    assert!(all_progress(&spinners, Duration::from_secs(2)), "the resumed job does not run");
}

/// Before, each empty registration took its row's slots: two users' registrations cut root's running job to a
/// third of the time for the grace, and could be renewed. Now they hold their rows and run in no slot.
#[test]
fn empty_registrations_take_no_time_from_a_running_job_and_a_joining_process_runs() {
    if skip_unless_root("empty_registrations_take_no_time_from_a_running_job") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "50", "--cpus", "2", "--rows", "4"]);
    let running = daemon.submit(&SPIN_TWO);
    let spinners = daemon.spinners(running, 2);
    let theirs = register_as(&daemon, ATTACKER, &["--cpus", "2"]).unwrap();
    let others = register_as(&daemon, OTHER_USER, &["--cpus", "2"]).unwrap();
    wait_for("the running job to keep all the time", Duration::from_secs(10), || {
        daemon.job(running).is_some_and(|j| j.slice_share >= 0.99)
    });
    assert!(all_progress(&spinners, Duration::from_secs(2)), "the running job was frozen");
    for job in [theirs, others] {
        assert_eq!(daemon.job(job).map(|j| j.slice_share), Some(0.0), "empty job {job} holds slots");
    }
    // A process that joins is in the cycle at once (its job's share), and runs.
    let mut command = Command::new("sh");
    command.args(["-c", "while :; do :; done"]).uid(OTHER_USER).gid(OTHER_USER);
    let joining = Reaped(command.stdin(Stdio::null()).spawn().unwrap());
    let pid = joining.0.id().to_string();
    let out = daemon.client_as(OTHER_USER, &["add-pid", &others.to_string(), &pid]);
    assert!(out.status.success(), "{out:?}");
    let share = daemon.job(others).map_or(0.0, |j| j.slice_share);
    assert!(share >= 0.49, "the job that a process joined has share {share} right after the join");
    assert!(all_progress(&[joining.0.id() as i32], Duration::from_secs(3)), "the joined process never ran");
    assert_eq!(daemon.job(theirs).map(|j| j.slice_share), Some(0.0));
}

#[test]
fn an_empty_registration_ends_after_its_grace_and_one_with_a_process_stays() {
    if skip_unless_root("an_empty_registration_ends_after_its_grace") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--empty-job-grace-s", "2"]);
    let empty = register_as(&daemon, ATTACKER, &["--cpus", "1"]).unwrap();
    let used = register_as(&daemon, ATTACKER, &["--cpus", "1"]).unwrap();
    let process = sleeper_as(ATTACKER);
    let out = daemon.client_as(ATTACKER, &["add-pid", &used.to_string(), &process.0.id().to_string()]);
    assert!(out.status.success(), "{out:?}");
    wait_for("the empty registration to end", Duration::from_secs(30), || {
        daemon.job(empty).is_some_and(|j| j.state.is_over())
    });
    let ended = daemon.job(empty).unwrap();
    assert!(ended.error.as_deref().unwrap_or("").contains("no process"), "{ended:?}");
    assert_eq!(daemon.job(used).map(|j| j.state), Some(JobState::Running), "a job with a process was ended");
    assert!(is_alive(process.0.id() as i32));
    // Once its processes are gone, a registered job ends.
    drop(process);
    wait_for("the registration whose process ended to end", Duration::from_secs(30), || {
        daemon.job(used).is_some_and(|j| j.state.is_over())
    });
}
