//! Oversized requests, lines, environments and logs.

use crate::harness::*;
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

/// Send one raw request line and read the reply (replies may be long: log tails).
fn raw_request(daemon: &Daemon, line: &str) -> serde_json::Value {
    let stream = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    let mut writer = stream.try_clone().unwrap();
    writer.write_all(line.as_bytes()).unwrap();
    writer.write_all(b"\n").unwrap();
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).unwrap();
    serde_json::from_str(&reply).unwrap()
}

fn agent_connected(daemon: &Daemon) -> bool {
    daemon.any_node_connected()
}

#[test]
fn a_submit_of_four_billion_tasks_is_refused_before_any_work_and_the_daemon_stays_up() {
    if skip_unless_root("a_submit_of_four_billion_tasks_is_refused") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    for line in [
        r#"{"op":"submit","tasks":4294967295,"nodes":4294967295,"argv":["true"],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":4294967295,"argv":["true"],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":2,"nodes":2,"argv":["true"],"cwd":"/"}"#,
    ] {
        let reply = raw_request(&daemon, line);
        assert_eq!(reply["ok"], false, "{line} was accepted");
        let error = reply["error"].as_str().unwrap_or("");
        assert!(error.contains("more tasks than") || error.contains("more than the"), "{line}: {error}");
    }
    assert!(agent_connected(&daemon), "the daemon lost its agent");
    assert!(daemon.status().is_some_and(|s| s.jobs.is_empty()), "a refused job was recorded");
}

/// A history request that names many users, asks for billions of jobs or names no state is refused before the
/// controller compares any job with it.
#[test]
fn a_history_request_beyond_its_bounds_is_refused_and_the_daemon_stays_up() {
    if skip_unless_root("a_history_request_beyond_its_bounds_is_refused") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let many_users: Vec<String> = (0..100_000).map(|uid| uid.to_string()).collect();
    let many = format!(r#"{{"op":"history","users":[{}]}}"#, many_users.join(","));
    for (line, expected) in [
        (many.as_str(), "100000 users named; at most 256"),
        (r#"{"op":"history","limit":4294967295}"#, "at most 10000"),
        (r#"{"op":"history","states":["pending"]}"#, "pending"),
        (r#"{"op":"history","since_unix_ms":-1}"#, "expected u64"),
    ] {
        let reply = raw_request(&daemon, line);
        assert_eq!(reply["ok"], false, "{} was accepted", &line[..line.len().min(60)]);
        let error = reply["error"].as_str().unwrap_or("");
        assert!(error.contains(expected), "{}: {error}", &line[..line.len().min(60)]);
    }
    assert!(agent_connected(&daemon), "the daemon lost its agent");
    assert_eq!(raw_request(&daemon, r#"{"op":"history"}"#)["ok"], true);
}

#[test]
fn a_log_of_control_characters_is_read_whole_and_keeps_the_agent() {
    if skip_unless_root("a_log_of_control_characters_is_read_whole") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    // 64 KiB of \x01: six bytes each once escaped in JSON, 384 KiB per file.
    let job = daemon.submit(&["-n", "2", "--", "sh", "-c", "head -c 65536 /dev/zero | tr '\\0' '\\1'"]);
    wait_for("the job to finish", Duration::from_secs(20), || {
        daemon.job(job).is_some_and(|j| j.state == JobState::Finished)
    });
    let reply = raw_request(&daemon, &format!(r#"{{"op":"logs","job":{job}}}"#));
    assert_eq!(reply["ok"], true, "{reply}");
    let outputs: Vec<&serde_json::Value> =
        reply["data"]["files"].as_array().unwrap().iter().filter(|f| f["stream"] == "out").collect();
    assert_eq!(outputs.len(), 2, "one output per rank: {reply}");
    for file in outputs {
        let text = file["text"].as_str().unwrap();
        assert_eq!(text.len(), 65536, "rank {}: {} bytes of log", file["rank"], text.len());
        assert!(text.bytes().all(|b| b == 1));
    }
    assert!(agent_connected(&daemon), "the agent's link was dropped");
}

#[test]
fn a_job_with_an_environment_near_the_request_limit_runs_or_fails_with_the_kernels_reason() {
    if skip_unless_root("a_job_with_an_environment_near_the_request_limit") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    // Eight variables of 120 KB: near the 1 MiB request limit, each under the kernel's 128 KiB per string.
    let vars: Vec<String> = (0..8).map(|i| format!(r#"["BIG{i}","{}"]"#, "a".repeat(120_000))).collect();
    let submit = |argv: &str, env: &str| {
        let line = format!(r#"{{"op":"submit","tasks":1,"argv":{argv},"cwd":"/tmp","env":[{env}]}}"#);
        let reply = raw_request(&daemon, &line);
        assert_eq!(reply["ok"], true, "{}", reply["error"]);
        let job = reply["data"]["job"].as_u64().unwrap();
        wait_for("the job to end", Duration::from_secs(20), || {
            daemon.job(job).is_some_and(|j| j.ended_unix_ms.is_some())
        });
        daemon.job(job).unwrap()
    };
    let fits = submit(r#"["sh","-c","echo ${#BIG7}"]"#, &vars.join(","));
    assert_eq!(fits.state, JobState::Finished, "{fits:?}");
    let logs = daemon.client(&["logs", &fits.id.to_string()]);
    assert!(String::from_utf8_lossy(&logs.stdout).contains("120000"), "the job did not see its environment");
    // One string over the kernel's limit cannot be executed: the job fails and says why, it never "finished".
    let too_long = submit(r#"["true"]"#, &format!(r#"["ONE","{}"]"#, "a".repeat(200_000)));
    assert_eq!(too_long.state, JobState::Failed, "{too_long:?}");
    // In its record, not only in its log: it was not "exited with status 127: not found".
    let reason = too_long.error.as_deref().unwrap_or("");
    let e2big = "could not start: its command line and environment are larger than the kernel takes (E2BIG";
    assert!(reason.contains(e2big), "{reason}");
    let logs = String::from_utf8_lossy(&daemon.client(&["logs", &too_long.id.to_string()]).stdout).into_owned();
    assert!(logs.contains("Argument list too long"), "{logs}");
    assert!(agent_connected(&daemon), "the agent's link was dropped");
}
