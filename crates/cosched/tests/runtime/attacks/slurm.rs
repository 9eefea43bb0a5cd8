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
