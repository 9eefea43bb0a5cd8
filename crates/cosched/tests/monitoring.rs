//! What a site's monitoring gets from `deploy/`: Prometheus alert rules that promtool accepts and whose own tests
//! pass, and a Grafana dashboard; both may only use series that `/metrics` exports.

use cosched_policy::cluster::{JobClass, Mode};
use cosched_runtime::controller::metrics::{render, Histogram, JobFigures, MetricsSnapshot, NodeFigures};
use cosched_runtime::wire::jobs::JobState;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy").join(path)
}

fn read(path: &str) -> String {
    let path = deploy(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_alert_rules_pass_promtools_check_and_their_own_tests() {
    if Command::new("promtool").arg("--version").output().is_err() {
        cosched_runtime::testing::say_skipped(
            "the_alert_rules_pass_promtools_check_and_their_own_tests",
            "promtool is not installed (scripts/setup installs Debian's prometheus package)",
        );
        return;
    }
    let dir = deploy("prometheus");
    for args in [["check", "rules", "cosched-alerts.yml"], ["test", "rules", "cosched-alerts.test.yml"]] {
        let out = Command::new("promtool").args(args).current_dir(&dir).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "promtool {}:\n{said}", args.join(" "));
        assert!(said.contains("SUCCESS"), "promtool {}:\n{said}", args.join(" "));
    }
}

/// An exposition with every family written: a node with switches, a running frozen job.
fn exposition() -> String {
    let mut switches = Histogram::default();
    switches.observe(50_000);
    let node = NodeFigures {
        name: "n1".into(),
        cpus: 2,
        mem_bytes: 1 << 30,
        connected: true,
        load_avg: 1.0,
        switches: 1,
        switch_errors: 0,
        jobs: 1,
        stuck_jobs: 0,
        stuck_processes: 0,
        switch_lateness: switches.clone(),
        switch_latency: switches.clone(),
    };
    let job = JobFigures {
        id: 7,
        uid: 0,
        class: JobClass::Batch,
        mode: Mode::Gang,
        state: JobState::Running,
        cpus: 2,
        cpu_ns: 1,
        processes: 2,
        slice_share: 0.5,
        elapsed_ms: Some(1),
        frozen_ms: Some(1),
    };
    let snapshot = MetricsSnapshot {
        slice_ns: 10_000_000,
        slice_start_skew: switches,
        storage_ok: true,
        nodes: vec![node],
        jobs_by_state: vec![(JobState::Running, 1)],
        jobs: vec![job],
        jobs_omitted: 0,
    };
    render(&snapshot, &Default::default(), cosched_runtime::controller::metrics::Syntax::OpenMetrics)
}

/// The names of the series an exposition has samples of.
fn exported(text: &str) -> BTreeSet<String> {
    let samples = text.lines().filter(|l| !l.starts_with('#'));
    samples.filter_map(|l| l.split(['{', ' ']).next()).map(str::to_string).collect()
}

/// Every `cosched_…` name in a text.
fn used(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (start, _) in text.match_indices("cosched_") {
        let name: String =
            text[start..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
        names.insert(name);
    }
    names
}

#[test]
fn the_rules_and_the_dashboard_use_only_exported_series() {
    let exported = exported(&exposition());
    let rules = read("prometheus/cosched-alerts.yml");
    let dashboard = read("grafana/cosched-dashboard.json");
    let rule_exprs: String = rules.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
    for (what, text) in [("the alert rules", rule_exprs), ("the dashboard", dashboard)] {
        let names = used(&text);
        assert!(names.len() >= 5, "{what} use {names:?}");
        let missing: Vec<&String> = names.iter().filter(|n| !exported.contains(*n)).collect();
        assert!(missing.is_empty(), "{what} use series /metrics does not export: {missing:?}\nexported: {exported:?}");
    }
}

#[test]
fn the_dashboard_is_grafana_json_whose_panels_each_query_prometheus() {
    let dashboard: serde_json::Value = serde_json::from_str(&read("grafana/cosched-dashboard.json")).unwrap();
    assert_eq!(dashboard["uid"], "cosched");
    let panels = dashboard["panels"].as_array().unwrap();
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{panel}");
        for target in targets {
            assert!(target["expr"].as_str().is_some_and(|e| e.contains("cosched_")), "{target}");
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{target}");
        }
    }
    for name in ["cosched_switch_lateness_seconds_bucket", "cosched_slice_start_skew_seconds_bucket"] {
        assert!(panels.iter().any(|p| p.to_string().contains(name)), "no panel shows {name}");
    }
}
