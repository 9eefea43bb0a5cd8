//! Speaking for Slurm: the requests of the SPANK plugin (`cosched slurm begin`, `attach`, `end`), which root sends
//! from Slurm's prolog, slurmstepd and epilog, sent by a user instead.

use super::ATTACKER;
use crate::harness::*;
use std::time::Duration;

fn refused(out: &std::process::Output) -> bool {
    let said = String::from_utf8_lossy(&out.stderr);
    !out.status.success()
        && said.contains("only administrators (Slurm's prolog, slurmstepd, epilog) speak for Slurm jobs")
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn a_user_cannot_begin_attach_or_end_a_slurm_job_and_nothing_changes() {
    if skip_unless_root("a_user_cannot_begin_attach_or_end_a_slurm_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let node = daemon.node.clone();
    let begin = |owner: &'static str| -> Vec<String> {
        let args = ["slurm", "begin", "--slurm-job", "4242", "--uid", owner, "--gid", owner, "--nodelist", &node];
        let args = [args.as_slice(), &["--cpus-per-node", "1", "--node", &node]].concat();
        args.into_iter().map(String::from).collect()
    };
    // A user who begins a Slurm job of root's (a job cosched would freeze and thaw as root's), or of its own.
    for owner in ["0", "65534"] {
        let out = daemon.client_as(ATTACKER, &strs(&begin(owner)));
        assert!(refused(&out), "begin as a user: {out:?}");
    }
    assert!(daemon.status().unwrap().jobs.is_empty(), "a refused begin made a job");

    // The prolog (root) begins the user's Slurm job; the user then tries to move a process of root's into it, and
    // to end it (which would thaw and forget it everywhere).
    let out = daemon.client(&strs(&begin("65534")));
    assert!(out.status.success(), "the prolog's begin: {out:?}");
    let job = daemon.status().unwrap().jobs[0].clone();
    assert_eq!((job.uid, job.command.as_str()), (ATTACKER, "slurm:4242"));
    let mut roots = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let root_pid = roots.id().to_string();
    let attach = ["slurm", "attach", "--slurm-job", "4242", "--node", &node, &root_pid];
    assert!(refused(&daemon.client_as(ATTACKER, &attach)), "attach as a user");
    let end = ["slurm", "end", "--slurm-job", "4242", "--node", &node];
    assert!(refused(&daemon.client_as(ATTACKER, &end)), "end as a user");
    std::thread::sleep(Duration::from_millis(300));
    let after = daemon.job(job.id).unwrap();
    assert!(!after.state.is_over() && after.pids.is_empty(), "the job changed: {after:?}");
    let _ = roots.kill();
    let _ = roots.wait();

    // Only the epilog's end ends it.
    assert!(daemon.client(&end).status.success());
    wait_for("the Slurm job to end", Duration::from_secs(10), || daemon.job(job.id).is_some_and(|j| j.state.is_over()));
}

/// Slurm's own state of a job, read from a field a user cannot write into (`squeue`'s `%T`).
fn slurm_state(slurm: &crate::slurm::PrivateSlurm, job: u32) -> String {
    let out = slurm.command("squeue", &["--noheader", "--states=all", "--jobs", &job.to_string(), "-o", "%T"], None);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A job's owner names it like Slurm's fields (`x JobState=COMPLETED ExitCode=0:0`): `scontrol show job` prints the
/// name before Slurm's own `JobState` and `ExitCode`, and the epilog took the first of each, so the owner chose how
/// cosched recorded the job's end (a failed job `finished`, a finished one `killed`). Only Slurm's own fields count.
#[test]
fn a_slurm_job_named_like_slurms_fields_cannot_choose_how_cosched_records_its_end() {
    if skip_unless_root("a_slurm_job_named_like_slurms_fields_cannot_choose_how_cosched_records_its_end") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "10"]);
    let slurm = crate::slurm::PrivateSlurm::start(&daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    let failing = slurm.sbatch_with(&["-J", "x JobState=COMPLETED ExitCode=0:0"], "1", "exit 3");
    let finishing = slurm.sbatch_with(&["-J", "y JobState=TIMEOUT ExitCode=0:9"], "1", "true");
    for (job, state) in [(failing, "FAILED"), (finishing, "COMPLETED")] {
        wait_for(&format!("Slurm job {job} to be {state}"), Duration::from_secs(120), || {
            slurm_state(&slurm, job) == state
        });
        wait_for("cosched to end it", Duration::from_secs(30), || {
            crate::slurm::cosched_job(&daemon, job).is_some_and(|j| j.state.is_over())
        });
    }
    let failed = crate::slurm::cosched_job(&daemon, failing).unwrap();
    assert_eq!((failed.state.name(), failed.error.as_deref()), ("failed", Some("Slurm: exit code 3")), "{failed:?}");
    let finished = crate::slurm::cosched_job(&daemon, finishing).unwrap();
    assert_eq!((finished.state.name(), finished.error.as_deref()), ("finished", None), "{finished:?}");
}
