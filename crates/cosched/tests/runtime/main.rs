//! The real coscheduler, end to end: `cosched up` on real cgroups, real jobs,
//! checked through /proc. Needs root (we are root here; elsewhere these
//! tests print SKIPPED).

mod harness;

use harness::*;
use std::time::Duration;

const SPIN_ARGS: [&str; 5] = ["timeout", "120", "sh", "-c", "while :; do :; done"];

fn spin_job(daemon: &Daemon, tasks: &str, extra: &[&str]) -> u64 {
    let mut args = vec!["-n", tasks];
    args.extend(extra);
    args.push("--");
    args.extend(SPIN_ARGS);
    daemon.submit(&args)
}

#[test]
fn gangs_alternate_one_at_a_time_and_obey_controls() {
    if skip_unless_root("gangs_alternate_one_at_a_time_and_obey_controls") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let a = spin_job(&daemon, "2", &[]);
    let b = spin_job(&daemon, "2", &[]);
    let (pa, pb) = (daemon.pids(a, 4), daemon.pids(b, 4));
    let s = sample_gangs(&[pa.clone(), pb.clone()], Duration::from_secs(2));
    assert!(s.consistent > 200, "too few samples: {}", s.consistent);
    assert_eq!(s.overlap, 0, "two gangs ran at once in {} of {} samples", s.overlap, s.consistent);
    for (job, running) in [(a, s.running[0]), (b, s.running[1])] {
        let share = running as f64 / s.consistent as f64;
        assert!((0.25..0.75).contains(&share), "job {job} ran in {share:.2} of the samples: slices do not rotate");
    }

    // Suspend stops every process of A; B then has the CPUs to itself.
    assert!(daemon.client(&["suspend", &a.to_string()]).status.success());
    std::thread::sleep(Duration::from_millis(200));
    let s = sample_gangs(&[pa.clone(), pb.clone()], Duration::from_millis(600));
    assert_eq!(s.running[0], 0, "a suspended job ran");
    assert!(s.running[1] as f64 > 0.9 * s.consistent as f64, "B did not get A's slices");
    assert_eq!(daemon.job(a)["state"], "suspended");
    assert!(daemon.client(&["resume", &a.to_string()]).status.success());
    wait_for("A to run again", Duration::from_secs(2), || any_running(&pa));

    // Class: the owner (root, an administrator) may raise; others may not touch it.
    assert!(daemon.client(&["class", &a.to_string(), "interactive"]).status.success());
    assert_eq!(daemon.job(a)["class"], "interactive");

    // Kill ends every process of the job.
    assert!(daemon.client(&["kill", &a.to_string()]).status.success());
    wait_for("A's processes to end", Duration::from_secs(5), || pa.iter().all(|&p| cpu_ticks(p).is_none()));
    wait_for("A to be recorded as killed", Duration::from_secs(5), || daemon.job(a)["state"] == "killed");
    wait_for("B to have the machine", Duration::from_secs(2), || daemon.job(b)["slice_share"] == 1.0);
}

#[test]
fn an_idle_gang_job_reverts_to_local_scheduling() {
    if skip_unless_root("an_idle_gang_job_reverts_to_local_scheduling") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--idle-revert-s", "1"]);
    let sleeper = daemon.submit(&["-n", "1", "--", "sleep", "120"]);
    let busy = spin_job(&daemon, "2", &[]);
    daemon.pids(busy, 4);
    assert_eq!(daemon.job(sleeper)["idle"], false);
    wait_for("the sleeping job to be judged idle", Duration::from_secs(5), || daemon.job(sleeper)["idle"] == true);
    let job = daemon.job(sleeper);
    assert_eq!(job["slice_share"], 1.0, "an idle job runs outside the matrix: {job}");
    assert_eq!(daemon.job(busy)["slice_share"], 1.0, "the busy job has the matrix to itself");
}

#[test]
fn killing_the_daemon_mid_slice_leaves_no_process_stopped_and_a_restart_adopts_the_jobs() {
    if skip_unless_root("killing_the_daemon_mid_slice_leaves_no_process_stopped") {
        return;
    }
    let mut daemon = Daemon::up(&["--slice-ms", "100"]);
    let a = spin_job(&daemon, "2", &[]);
    let b = spin_job(&daemon, "2", &[]);
    let (pa, pb) = (daemon.pids(a, 4), daemon.pids(b, 4));
    std::thread::sleep(Duration::from_millis(230)); // mid-slice, one gang frozen
    daemon.kill_hard();
    let all: Vec<i32> = pa.iter().chain(&pb).copied().collect();
    let spinners: Vec<i32> = all.iter().copied().filter(|&p| is_spinner(p)).collect();
    assert_eq!(spinners.len(), 4);
    wait_for("every process to run again", Duration::from_secs(2), || {
        all_progress(&spinners, Duration::from_millis(200))
    });

    daemon.restart(&["--slice-ms", "100"]);
    assert_eq!(daemon.job(a)["state"], "running", "the database keeps the jobs");
    assert_eq!(daemon.pids(a, 4), pa, "the agent adopts the job's cgroup");
    let s = sample_gangs(&[pa, pb], Duration::from_secs(1));
    assert_eq!(s.overlap, 0, "gang scheduling resumes after the restart");
    assert!(s.running[0] > 0 && s.running[1] > 0);
}

fn is_spinner(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sh")
}

#[test]
fn other_users_cannot_touch_a_job_and_only_administrators_set_express() {
    if skip_unless_root("other_users_cannot_touch_a_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["-n", "1", "--", "sleep", "120"]);
    let id = job.to_string();
    for args in [vec!["suspend", &id], vec!["kill", &id], vec!["class", &id, "standby"], vec!["logs", &id]] {
        let out = daemon.client_as(65534, &args);
        assert!(!out.status.success(), "nobody could run {args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"), "{:?}", out);
    }
    let out = daemon.client_as(65534, &["submit", "--class", "express", "--", "true"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("only administrators"), "{out:?}");
    // A user's own job: may lower its class, may not raise it.
    let out = daemon.client_as(65534, &["submit", "--json", "--class", "batch", "--", "sleep", "120"]);
    let own: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let own = own["job"].as_u64().unwrap().to_string();
    assert!(daemon.client_as(65534, &["class", &own, "standby"]).status.success());
    let out = daemon.client_as(65534, &["class", &own, "interactive"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("only administrators may raise"), "{out:?}");
    assert_eq!(daemon.job(job)["state"], "running");
    assert!(daemon.client_as(65534, &["kill", &own]).status.success());
}

#[test]
fn malformed_requests_get_errors_and_leave_the_database_unchanged() {
    if skip_unless_root("malformed_requests_get_errors") {
        return;
    }
    use std::io::{BufRead, BufReader, Write};
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["-n", "1", "--", "sleep", "120"]);
    let before = db_rows(&daemon);
    let stream = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let bad = [
        "this is not json",
        r#"{"op":"reboot"}"#,
        r#"{"op":"kill","job":"one"}"#,
        r#"{"op":"kill","job":999}"#,
        r#"{"op":"submit","tasks":0,"argv":["true"],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":1,"argv":[],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":64,"argv":["true"],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":1,"class":"urgent","argv":["true"],"cwd":"/"}"#,
        r#"{"op":"set_class","job":1,"class":"urgent"}"#,
        r#"{"op":"resume","job":1}"#,
        r#"{"op":"submit","tasks":1,"argv":["true"],"cwd":"/","extra":1}"#,
    ];
    for line in bad {
        writeln!(writer, "{line}").unwrap();
        let mut reply = String::new();
        reader.read_line(&mut reply).unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["ok"], false, "{line} was accepted");
        assert!(reply["error"].as_str().is_some_and(|e| e.len() > 5), "{line}: unclear error {reply}");
    }
    assert_eq!(db_rows(&daemon), before, "a bad request changed the database");
    assert_eq!(daemon.job(job)["state"], "running");
}

fn db_rows(daemon: &Daemon) -> Vec<(i64, String, String)> {
    let conn = rusqlite::Connection::open(daemon.dir.join("cosched.db")).unwrap();
    let mut stmt = conn.prepare("SELECT id, state, record FROM jobs ORDER BY id").unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

mod c_client;
mod multi_node;
