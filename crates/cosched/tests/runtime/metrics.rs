//! `/metrics` on a real controller's monitor, fetched over HTTP without a token: the job's and the node's figures
//! are there, its command, environment and directory are not, and every other monitor path still needs its token.

use crate::harness::*;
use std::os::unix::process::CommandExt;
use std::time::Duration;

/// The job's owner: "nobody", a user with a name in the password database.
const OWNER: u32 = 65534;
const COMMAND_MARKER: &str = "command-marker-4e1f";
const ENV_MARKER: &str = "env-marker-9c2a";
const CWD_MARKER: &str = "cwd-marker-77b0";

/// One HTTP/1.1 exchange with the monitor, no token, as a scraper sends it: (status, head, body).
fn http(address: &str, method: &str, path: &str) -> (u16, String, String) {
    http_exchange(address, method, path, &[("Host", address)])
}

/// Submit as [`OWNER`] with a secret in the command, the environment and the directory; returns the job id.
fn submit_with_secrets(daemon: &Daemon) -> u64 {
    let cwd = daemon.dir.join(CWD_MARKER);
    std::fs::create_dir_all(&cwd).unwrap();
    let command = format!("sleep 300 # {COMMAND_MARKER}");
    let out = std::process::Command::new(COSCHED)
        .args(["submit", "--json", "--", "sh", "-c", &command])
        .env("COSCHED_SOCKET", &daemon.socket)
        .env("METRICS_TEST_SECRET", ENV_MARKER)
        .current_dir(&cwd)
        .uid(OWNER)
        .gid(OWNER)
        .output()
        .unwrap();
    assert!(out.status.success(), "submit: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job
}

/// The value of the one sample whose line starts with `prefix`.
fn value_of(text: &str, prefix: &str) -> f64 {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(lines.len(), 1, "{prefix}: {lines:?} in\n{text}");
    lines[0].rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn metrics_show_jobs_and_nodes_without_a_token_and_never_a_command_or_environment() {
    if skip_unless_root("metrics_show_jobs_and_nodes_without_a_token") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--monitor", "127.0.0.1:0"]);
    let address = monitor_address(&daemon);
    let job = submit_with_secrets(&daemon);
    wait_for("the job to run with its processes", Duration::from_secs(10), || {
        daemon.job(job).is_some_and(|j| j.state == JobState::Running && !j.pids.is_empty())
    });

    // As Prometheus asks for it.
    let accept = ("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5");
    let (status, head, text) = http_exchange(&address, "GET", "/metrics", &[("Host", &address), accept]);
    assert_eq!(status, 200, "{head}\n{text}");
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"), "{head}");
    assert!(text.ends_with("\n# EOF\n"), "{text}");
    let job_labels = format!("{{job_id=\"{job}\",user=\"nobody\"}}");
    let info = format!("cosched_job_info{{job_id=\"{job}\",class=\"batch\",mode=\"gang\",state=\"running\"}} ");
    assert_eq!(value_of(&text, &info), 1.0);
    assert_eq!(value_of(&text, &format!("cosched_job_cpus{job_labels} ")), 1.0);
    assert!(value_of(&text, &format!("cosched_job_processes{job_labels} ")) >= 1.0);
    assert!(value_of(&text, &format!("cosched_job_cpu_seconds_total{job_labels} ")) >= 0.0);
    assert!(value_of(&text, &format!("cosched_job_elapsed_seconds{job_labels} ")) >= 0.0);
    let node = format!("{{node=\"{}\"}}", daemon.node);
    assert_eq!(value_of(&text, &format!("cosched_node_connected{node} ")), 1.0);
    assert_eq!(value_of(&text, &format!("cosched_node_jobs{node} ")), 1.0);
    assert!(value_of(&text, &format!("cosched_node_cpus{node} ")) >= 1.0);
    assert_eq!(value_of(&text, "cosched_jobs{state=\"running\"} "), 1.0);
    for secret in [COMMAND_MARKER, ENV_MARKER, CWD_MARKER, "sleep", "METRICS_TEST_SECRET"] {
        assert!(!text.contains(secret), "/metrics shows {secret:?}:\n{text}");
    }
    match cosched_runtime::testing::parse_openmetrics(&text) {
        Some(parsed) => assert!(parsed.is_ok(), "the reference parser refused /metrics: {parsed:?}\n{text}"),
        None => cosched_runtime::testing::say_skipped(
            "the reference parser's check of a live /metrics",
            "no prometheus_client for /usr/bin/python3 (scripts/setup installs python3-prometheus-client)",
        ),
    }

    // Asked for nothing in particular (curl): Prometheus's own format, the same figures.
    let (_, plain_head, plain) = http(&address, "GET", "/metrics");
    assert!(plain_head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"), "{plain_head}");
    assert!(!plain.contains("# EOF") && plain.contains("# TYPE cosched_job_info gauge"), "{plain}");
    assert_eq!(value_of(&plain, &format!("cosched_job_cpus{job_labels} ")), 1.0);

    // Every other path still needs its token; other methods on /metrics get a clear refusal.
    assert_eq!(http(&address, "GET", "/api/status").0, 403);
    assert_eq!(http(&address, "POST", &format!("/api/jobs/{job}/kill")).0, 403);
    for method in ["HEAD", "POST", "DELETE"] {
        let (status, head, body) = http(&address, method, "/metrics");
        assert_eq!(status, 405, "{method}: {head}");
        assert!(head.contains("Allow: GET"), "{method}: {head}");
        assert!(method != "HEAD" || body.is_empty(), "an answer to HEAD with a body: {body}");
    }
    assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running), "the job was touched");
}

#[test]
fn metrics_turned_off_answer_not_found_and_the_monitor_stays() {
    if skip_unless_root("metrics_turned_off_answer_not_found") {
        return;
    }
    let daemon = Daemon::up(&["--monitor", "127.0.0.1:0", "--metrics", "off"]);
    let address = monitor_address(&daemon);
    let (status, _, body) = http(&address, "GET", "/metrics");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("--metrics off"), "{body}");
    assert_eq!(http(&address, "GET", "/").0, 200, "the page went with the metrics");
}
