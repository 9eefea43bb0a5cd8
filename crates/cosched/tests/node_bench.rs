//! `cosched bench node` end to end, every scenario at a tiny size. A wall-time benchmark on a shared machine:
//! the checks are on state (every scenario ran, every process was measured, shares are fractions of the CPUs
//! given, counts are positive), never on how fast anything was.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched")).args(args).output().expect("cosched runs")
}

fn number(v: &Value, field: &str) -> f64 {
    v[field].as_f64().unwrap_or_else(|| panic!("no {field} in {v}"))
}

fn scenario<'a>(report: &'a Value, name: &str) -> &'a Value {
    let all = report["scenarios"].as_array().expect("scenarios");
    all.iter().find(|s| s["scenario"]["name"] == name).unwrap_or_else(|| panic!("no {name} in the report"))
}

/// The runs of a process scenario's repeats, each checked: a positive window, every process measured, the shares
/// fractions of the CPUs the processes were given.
fn process_runs(report: &Value, name: &str) -> Vec<Value> {
    let s = scenario(report, name);
    let spec = &s["scenario"]["kind"]["processes"];
    let specs = spec["processes"].as_array().unwrap();
    let mut cpus: Vec<u64> =
        specs.iter().flat_map(|p| p["cpus"].as_array().unwrap().iter()).map(|c| c.as_u64().unwrap()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let runs: Vec<Value> = s["repeats"].as_array().unwrap().iter().map(|r| r["processes"].clone()).collect();
    assert_eq!(runs.len(), 1, "{name}: one repeat");
    for run in &runs {
        assert!(number(run, "window_ns") > 0.0, "{name}: {run}");
        let processes = run["processes"].as_array().unwrap();
        assert_eq!(processes.len(), specs.len(), "{name}: every process measured");
        let mut sum = 0.0;
        for (p, spec) in processes.iter().zip(specs) {
            assert_eq!(p["name"], spec["name"]);
            let share = number(p, "share");
            let allowed = spec["cpus"].as_array().unwrap().len() as f64;
            assert!(share > 0.0 && share <= allowed * 1.05, "{name}: share outside (0, {allowed}]: {p}");
            assert!(number(p, "runs") >= 1.0, "{name}: {p}");
            sum += share;
        }
        assert!(sum <= cpus.len() as f64 * 1.05, "{name}: the shares add up to more than the CPUs: {run}");
        assert_eq!(run["cpus"].as_array().unwrap().len(), cpus.len(), "{name}: one /proc/stat reading per CPU");
    }
    runs
}

fn process<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["processes"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn every_scenario_runs_at_a_tiny_size_and_reports_plausible_values() {
    let folder = tempfile::Builder::new().prefix("cosched-node-").tempdir().unwrap();
    let out = folder.path().join("node");
    let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apps");
    // Negative nice values need root (CAP_SYS_NICE); without it the shares scenarios use non-negative ones.
    let nices = if nix::unistd::geteuid().is_root() { "0,0,5,-5" } else { "0,5" };
    let o = cosched(&[
        "bench",
        "node",
        "--repeat",
        "1",
        "--warm-up-ms",
        "50",
        "--window-ms",
        "300",
        "--nices",
        nices,
        "--copies",
        "1,2",
        "--phases",
        "40",
        "--ctxswitch-yields",
        "2000",
        "--apps",
        apps.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("share sum") && table.contains("s_j j=2"), "{table}");
    assert_eq!(std::fs::read_to_string(out.join("table.txt")).unwrap(), table);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("node.json")).unwrap()).unwrap();
    let names: Vec<&str> =
        report["scenarios"].as_array().unwrap().iter().map(|s| s["scenario"]["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["shares-1cpu", "shares-2cpu", "sleeper", "sleeper-alone", "receivers", "spinbarrier", "ctxswitch"]
    );

    for name in ["shares-1cpu", "shares-2cpu"] {
        let runs = process_runs(&report, name);
        assert_eq!(runs[0]["processes"].as_array().unwrap().len(), nices.split(',').count());
    }
    for name in ["sleeper", "sleeper-alone"] {
        for run in process_runs(&report, name) {
            let sleeper = process(&run, "sleeper");
            let latencies = sleeper["wake_latencies_ns"].as_array().unwrap();
            assert!(!latencies.is_empty() && number(sleeper, "iterations_in_window") > 0.0, "{name}: {sleeper}");
        }
    }
    for run in process_runs(&report, "receivers") {
        let (a, b) = (process(&run, "receiver-a"), process(&run, "receiver-b"));
        let (ia, ib) = (number(a, "iterations_in_window"), number(b, "iterations_in_window"));
        // Each iteration is one message each way: the two counts differ by at most the one in flight at an edge.
        assert!(ia > 0.0 && (ia - ib).abs() <= 2.0, "receivers: {a} {b}");
    }
    let points = scenario(&report, "spinbarrier")["repeats"][0]["spin-barrier"].as_array().unwrap().clone();
    assert_eq!(points.iter().map(|p| p["copies"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    for p in &points {
        assert!(number(p, "elapsed_s") > 0.0 && number(p, "cpu_s") > 0.0, "{p}");
        assert_eq!(p["copy_elapsed_s"].as_array().unwrap().len() as u64, p["copies"].as_u64().unwrap());
    }
    let switch = &scenario(&report, "ctxswitch")["repeats"][0]["context-switch"];
    // The pair on one CPU switched at (nearly) every yield: that is what the measurement relies on.
    assert!(number(switch, "switches_per_yield") > 0.5, "{switch}");
}

#[test]
fn bad_requests_are_refused_before_anything_runs() {
    for (args, expected) in [
        (&["--scenario", "nope"][..], "unknown scenario"),
        (&["--copies", "2,4"][..], "--copies must start with 1"),
        (&["--nices", "0,25"][..], "--nices"),
        (&["--cpu-pair", "0,0"][..], "two different CPUs"),
    ] {
        let mut all = vec!["bench", "node"];
        all.extend_from_slice(args);
        let o = cosched(&all);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
    }
}
