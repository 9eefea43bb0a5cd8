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
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
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
    let mut expected =
        vec!["shares-1cpu", "shares-2cpu", "sleeper", "sleeper-alone", "receivers", "spinbarrier", "ctxswitch"];
    // sleeper-busy runs where its sleeper may enter the real-time class (root here), and is otherwise left out
    // with a note that says why.
    let left_out = String::from_utf8_lossy(&o.stderr).contains("note: sleeper-busy left out: its sleeper cannot");
    if !left_out {
        expected.push("sleeper-busy");
    }
    assert!(left_out != is_root(), "sleeper-busy left out: {left_out}, as root: {}", is_root());
    assert_eq!(names, expected, "every standard scenario runs, sleeper-busy where it can");

    for name in ["shares-1cpu", "shares-2cpu"] {
        let runs = process_runs(&report, name);
        assert_eq!(runs[0]["processes"].as_array().unwrap().len(), nices.split(',').count());
    }
    for name in ["sleeper", "sleeper-alone", "sleeper-busy"] {
        if !names.contains(&name) {
            continue;
        }
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
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
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

/// The smallest real run: the lone sleeper, one repeat of a 20 ms window.
fn tiny_run(extra: &[&str]) -> Output {
    let mut args = vec!["bench", "node", "--scenario", "sleeper-alone", "--repeat", "1", "--warm-up-ms", "0"];
    args.extend_from_slice(&["--window-ms", "20"]);
    args.extend_from_slice(extra);
    cosched(&args)
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True, after saying so where the harness cannot hide it, when the test needs root and this is not root.
fn skipped_unless_root(test: &str, why: &str) -> bool {
    let skip = !is_root();
    if skip {
        cosched_runtime::testing::say_skipped(test, why);
    }
    skip
}

/// An --out folder another user made in a shared folder, its marker a link to a file of root's: a marker that is a
/// link is not cosched's, so the folder is refused, and nothing is written through the links.
#[test]
fn an_out_folder_whose_marker_is_a_link_is_refused_and_never_written_through() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let folder = tempfile::Builder::new().prefix("cosched-node-out-").tempdir().unwrap();
    let victim = folder.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = folder.path().join("node");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join(".cosched-output")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("table.txt")).unwrap();
    let o = tiny_run(&["--no-cpu-group", "--out", out.to_str().unwrap()]);
    assert!(!o.status.success(), "a folder with a linked marker was taken");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds files that cosched did not write"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "written through a link");
    assert!(out.join(".cosched-output").symlink_metadata().unwrap().file_type().is_symlink());
    assert!(!out.join("node.json").exists());
}

/// An --out inside a folder another user owns (a checkout of theirs, a folder of theirs in /tmp): that user could
/// swap the folder root writes its files into for a link, or a folder elsewhere for the one root replaces, so
/// root refuses it before measuring anything; in a folder only root can change, the same run goes on.
#[test]
fn an_out_in_a_folder_another_user_owns_is_refused_as_root() {
    let _machine = cosched_runtime::testing::whole_machine();
    if skipped_unless_root("an_out_in_a_folder_another_user_owns_is_refused_as_root", "needs root (chown)") {
        return;
    }
    let folder = tempfile::Builder::new().prefix("cosched-node-theirs-").tempdir().unwrap();
    let theirs = folder.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let out = theirs.join("node");
    let o = tiny_run(&["--no-cpu-group", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("--out's folder") && stderr.contains("uid 65534"), "{stderr}");
    assert!(!out.exists() && std::fs::read_dir(&theirs).unwrap().next().is_none(), "nothing written: {stderr}");
    // calibrate, which writes its machine files the same way, too.
    let o = cosched(&["calibrate", "--out", theirs.join("machine").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("--out's folder") && stderr.contains("uid 65534"), "{stderr}");
    assert!(std::fs::read_dir(&theirs).unwrap().next().is_none(), "nothing written: {stderr}");
}

/// Missing folders on the way to --out, under a link another user planted: root refuses before it makes any,
/// so no folder of root's appears where the link points.
#[test]
fn root_makes_no_folder_through_a_link_on_the_way_to_out() {
    let _machine = cosched_runtime::testing::whole_machine();
    if skipped_unless_root("root_makes_no_folder_through_a_link_on_the_way_to_out", "needs root (chown)") {
        return;
    }
    let folder = tempfile::Builder::new().prefix("cosched-node-link-").tempdir().unwrap();
    let (shared, target) = (folder.path().join("shared"), folder.path().join("target"));
    std::fs::create_dir(&shared).unwrap();
    std::fs::create_dir(&target).unwrap();
    let nobody = Some(nix::unistd::Uid::from_raw(65534));
    nix::unistd::chown(&shared, nobody, None).unwrap();
    std::os::unix::fs::symlink(&target, shared.join("runs")).unwrap();
    nix::unistd::fchownat(None, &shared.join("runs"), nobody, None, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).unwrap();
    let out = shared.join("runs/2026/node");
    let o = tiny_run(&["--no-cpu-group", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "taken: {stderr}");
    assert!(std::fs::read_dir(&target).unwrap().next().is_none(), "made through the link: {stderr}");
}

/// An apps folder that another user owns (a checkout of theirs): root never runs its Makefile nor builds its
/// sources, and says to give --spinbarrier instead.
#[test]
fn an_apps_folder_another_user_could_change_is_never_built_by_root() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    if skipped_unless_root("an_apps_folder_another_user_could_change_is_never_built_by_root", "needs root (chown)") {
        return;
    }
    let folder = tempfile::Builder::new().prefix("cosched-node-apps-").tempdir().unwrap();
    let apps = folder.path().join("apps");
    std::fs::create_dir(&apps).unwrap();
    let ran = folder.path().join("makefile-ran");
    std::fs::write(apps.join("Makefile"), format!("%:\n\ttouch {}\n", ran.display())).unwrap();
    let nobody = Some(nix::unistd::Uid::from_raw(65534));
    nix::unistd::chown(&apps, nobody, None).unwrap();
    nix::unistd::chown(&apps.join("Makefile"), nobody, None).unwrap();
    let out = folder.path().join("out");
    let args = ["--scenario", "spinbarrier", "--repeat", "1", "--copies", "1", "--phases", "2", "--no-cpu-group"];
    let o = cosched(
        &[&["bench", "node"][..], &args, &["--apps", apps.to_str().unwrap(), "--out", out.to_str().unwrap()]].concat(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!ran.exists(), "root ran another user's Makefile: {stderr}");
    assert!(!o.status.success() && stderr.contains("--spinbarrier"), "{stderr}");
}

const CPU_MOUNT: &str = "/sys/fs/cgroup/cpu";

/// A cpu group named as the runner names its own, with the largest weight, holding `pids`.
fn cpu_group_holding(name: &str, pids: &[u32]) -> std::path::PathBuf {
    let group = Path::new(CPU_MOUNT).join(name);
    std::fs::create_dir(&group).unwrap();
    std::fs::write(group.join("cpu.shares"), "262144").unwrap();
    for pid in pids {
        std::fs::write(group.join("cgroup.procs"), pid.to_string()).unwrap();
    }
    group
}

fn shares_of(group: &Path) -> String {
    std::fs::read_to_string(group.join("cpu.shares")).unwrap().trim().to_string()
}

/// A real-time sleeper where the run's group can get no real-time time (the parent's budget given to another
/// group): named, sleeper-busy is refused before anything runs, with the reason; the kernel's budget is as before.
#[test]
fn sleeper_busy_without_real_time_time_is_refused_with_the_reason() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let root_budget = Path::new(CPU_MOUNT).join("cpu.rt_runtime_us");
    if !is_root() || !root_budget.exists() {
        let why = "needs root and real-time group scheduling in a v1 cpu hierarchy";
        cosched_runtime::testing::say_skipped("sleeper_busy_without_real_time_time_is_refused_with_the_reason", why);
        return;
    }
    let parent: u64 = std::fs::read_to_string(&root_budget).unwrap().trim().parse().unwrap();
    let hog = cpu_group_holding(&format!("cosched-test-rt-{}", std::process::id()), &[]);
    // All but 100 ms of the parent's budget: less than the run's group asks for.
    // A group removed a moment ago may still count against the parent's budget: try for a while.
    let all_but_100_ms = parent.saturating_sub(100_000).to_string();
    let mut taken = false;
    for _ in 0..50 {
        taken = std::fs::write(hog.join("cpu.rt_runtime_us"), &all_but_100_ms).is_ok();
        if taken {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let folder = tempfile::Builder::new().prefix("cosched-node-rt-").tempdir().unwrap();
    let o = cosched(&[
        "bench",
        "node",
        "--scenario",
        "sleeper-busy",
        "--repeat",
        "1",
        "--warm-up-ms",
        "0",
        "--window-ms",
        "20",
        "--out",
        folder.path().join("out").to_str().unwrap(),
    ]);
    let _ = std::fs::write(hog.join("cpu.rt_runtime_us"), "0");
    let _ = std::fs::remove_dir(&hog);
    assert!(taken, "could not take {all_but_100_ms} µs of real-time time for the test's own group");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "ran without real-time time: {stderr}");
    assert!(stderr.contains("sleeper-busy: its sleeper cannot run in the real-time class here"), "{stderr}");
    assert!(!stderr.contains("[repeat"), "refused only after running: {stderr}");
    assert!(!stderr.contains("no cpu group of its own"), "lost its cpu group too: {stderr}");
}

/// Groups left by runs killed with SIGKILL (or a second Ctrl-C): the next run removes an empty one and takes the
/// weight from one whose processes still run, and the real-time budget it had; it leaves a live run's group alone.
#[test]
fn cpu_groups_left_by_killed_runs_are_cleaned_by_the_next_run() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    if !is_root() || !Path::new(CPU_MOUNT).join("cpu.shares").exists() {
        let why = "needs root and a v1 cpu hierarchy";
        cosched_runtime::testing::say_skipped("cpu_groups_left_by_killed_runs_are_cleaned_by_the_next_run", why);
        return;
    }
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    // Pids above pid_max never run: runs that are surely dead.
    let empty = cpu_group_holding(&format!("cosched-node-{}", pid_max + 1), &[]);
    let mut orphan = Command::new("sleep").arg("120").spawn().unwrap();
    let populated = cpu_group_holding(&format!("cosched-node-{}", pid_max + 2), &[orphan.id()]);
    let rt_budget = populated.join("cpu.rt_runtime_us");
    if rt_budget.exists() {
        std::fs::write(&rt_budget, "200000").unwrap();
    }
    // A live run's group: named after this test process, which is alive.
    let mut member = Command::new("sleep").arg("120").spawn().unwrap();
    let live = cpu_group_holding(&format!("cosched-node-{}", std::process::id()), &[member.id()]);
    let folder = tempfile::Builder::new().prefix("cosched-node-groups-").tempdir().unwrap();
    let o = tiny_run(&["--out", folder.path().join("out").to_str().unwrap()]);
    let seen = (empty.exists(), populated.exists().then(|| shares_of(&populated)), shares_of(&live));
    let budget_left = std::fs::read_to_string(&rt_budget).ok().map(|b| b.trim().to_string());
    for child in [&mut orphan, &mut member] {
        let _ = child.kill();
        let _ = child.wait();
    }
    for group in [&empty, &populated, &live] {
        let _ = std::fs::remove_dir(group);
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        seen,
        (false, Some("1024".to_string()), "262144".to_string()),
        "empty gone, orphan's weight 1024, live kept"
    );
    assert!(
        budget_left.as_deref().is_none_or(|b| b == "0"),
        "the orphan's group kept a real-time budget of {budget_left:?} µs"
    );
}

/// A node.json from someone else: the model refuses what it cannot take with a message, never a panic.
#[test]
fn a_hostile_node_json_is_refused_with_a_message() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let folder = tempfile::Builder::new().prefix("cosched-node-predict-").tempdir().unwrap();
    let row = |quantity: &str| serde_json::json!({"quantity": quantity, "unit": "µs", "spread": {"median": 1.0, "min": 1.0, "max": 1.0, "n": 1}});
    let report = |hz: &str, processes: Value| {
        serde_json::json!({
            "kernel": "6.1", "cpus": 2, "kernel_config": [format!("CONFIG_HZ={hz}")], "cpu_group_shares": null,
            "scenarios": [
                {"scenario": {"name": "ctxswitch", "about": "", "kind": {"context-switch": {"yields": 1, "work_ns": 1, "cpu": 0}}},
                 "repeats": [], "summary": [row("α_c (CPU time)")]},
                {"scenario": {"name": "sleeper-alone", "about": "", "kind": {"context-switch": {"yields": 1, "work_ns": 1, "cpu": 0}}},
                 "repeats": [], "summary": [row("wake latency p50 sleeper")]},
                {"scenario": {"name": "shares-1cpu", "about": "", "kind": {"processes": {"processes": processes, "warm_up_ns": 0, "window_ns": 1000000}}},
                 "repeats": [], "summary": []}
            ]
        })
    };
    let one = serde_json::json!([{"name": "p", "nice": 0, "cpus": [0], "compute_ns": 1000000, "sleep_ns": 0, "exchange": null, "iterations": null}]);
    // Work beyond the model's bounds: a 1 ns iteration over 100 s, four billion spin-barrier copies.
    let tiny = serde_json::json!([{"name": "p", "nice": 0, "cpus": [0], "compute_ns": 1, "sleep_ns": 0, "exchange": null, "iterations": null}]);
    let mut endless = report("250", tiny);
    endless["scenarios"][2]["scenario"]["kind"]["processes"]["window_ns"] = serde_json::json!(100_000_000_000u64);
    let spin = serde_json::json!({"copies": [1, 4_000_000_000u32], "threads": 2, "phases": 2000, "work_mflop": 1.0, "cpus": [0, 1]});
    endless["scenarios"].as_array_mut().unwrap().push(serde_json::json!({
        "scenario": {"name": "spinbarrier", "about": "", "kind": {"spin-barrier": spin}},
        "repeats": [], "summary": [row("t_j j=1")]}));
    // A tick of 0 ns refuses the whole report; a scenario the model cannot take is named with its reason.
    for (name, json, refused, expected) in [
        ("tick", report("2000000000", one.clone()), true, "CONFIG_HZ"),
        ("empty", report("250", serde_json::json!([])), false, "Not predicted: shares-1cpu"),
        ("endless", endless.clone(), false, "Not predicted: shares-1cpu: 100000000002 iterations"),
        ("endless", endless, false, "Not predicted: spinbarrier: "),
    ] {
        let path = folder.path().join(format!("{name}.json"));
        std::fs::write(&path, json.to_string()).unwrap();
        let o = cosched(&["bench", "node", "--predict-from", path.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
        assert!(!said.contains("panicked"), "{name}: {said}");
        assert!(o.status.success() != refused && said.contains(expected), "{name}: {said}");
    }
    // Text that would reach root's terminal as escapes, or forge a table's cells, is refused whole, naming where.
    let mut escape = report("250", one.clone());
    escape["scenarios"][0]["scenario"]["name"] = serde_json::json!("\u{1b}]0;OWNED\u{7}\u{1b}[2J");
    let mut forged = report("250", one.clone());
    forged["scenarios"][1]["summary"][0]["quantity"] = serde_json::json!("wake | forged | 1 | 2 | yes");
    let mut odd_key = report("250", one);
    odd_key["scenarios"][2]["scenario"]["kind"] = serde_json::json!({"\u{1b}[2J": {}});
    for (name, json, at) in [
        ("escape", escape, "/scenarios/0/scenario/name"),
        ("forged", forged, "/scenarios/1/summary/0/quantity"),
        ("key", odd_key, "/scenarios/2/scenario/kind/(a key)"),
    ] {
        let path = folder.path().join(format!("{name}.json"));
        std::fs::write(&path, json.to_string()).unwrap();
        let o = cosched(&["bench", "node", "--predict-from", path.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && said.contains(&format!("the text at {at} holds")), "{name}: {said}");
        assert!(!said.contains('\u{1b}') && !said.contains("| forged |"), "{name}: {said}");
    }
    let huge = folder.path().join("huge.json");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(1 << 30).unwrap();
    let o = cosched(&["bench", "node", "--predict-from", huge.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("larger than"), "{stderr}");
}

/// The pids of `parent`'s children whose command name is `comm`.
fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(close) = stat.rfind(')') else { continue };
        let name = &stat[stat.find('(').unwrap() + 1..close];
        let ppid = stat[close + 2..].split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if name == comm && ppid == Some(parent) {
            found.push(pid);
        }
    }
    found
}

/// Running, not gone and not a zombie.
fn is_running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')').and_then(|i| stat[i + 2..].chars().next()).is_some_and(|state| state != 'Z')
}

/// A run killed with SIGKILL (or ended by a second Ctrl-C) takes its spin-barrier copies with it: they are in
/// process groups of their own, out of reach of the terminal's signals, and would otherwise run on at the
/// group's weight until their phases end.
#[test]
fn the_spin_barrier_copies_end_with_a_killed_run() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let folder = tempfile::Builder::new().prefix("cosched-node-kill-").tempdir().unwrap();
    let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apps");
    let mut runner = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["bench", "node", "--scenario", "spinbarrier", "--repeat", "1", "--copies", "1", "--phases"])
        .args(["100000000", "--no-cpu-group", "--apps", apps.to_str().unwrap(), "--out"])
        .arg(folder.path().join("out"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Polls of 50 ms: generous bounds (2 minutes for make and the start, 30 s after the kill); state is asserted.
    let poll = std::time::Duration::from_millis(50);
    let mut copies = Vec::new();
    for _ in 0..2400 {
        copies = children_named(runner.id(), "spinbarrier");
        if !copies.is_empty() {
            break;
        }
        std::thread::sleep(poll);
    }
    // The killed run cannot remove its scratch folder: the test does, found from the copy's program path.
    let program = copies.first().and_then(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).ok());
    runner.kill().unwrap();
    runner.wait().unwrap();
    let in_shm = |a: &&Path| a.parent() == Some(Path::new("/dev/shm"));
    let scratch = program.as_ref().and_then(|p| p.ancestors().find(in_shm).map(Path::to_path_buf));
    if let Some(scratch) = scratch.filter(|s| s.to_string_lossy().starts_with("/dev/shm/cosched-node-")) {
        let _ = std::fs::remove_dir_all(scratch);
    }
    assert!(!copies.is_empty(), "the copy never started");
    for _ in 0..600 {
        if !copies.iter().any(|&pid| is_running(pid)) {
            break;
        }
        std::thread::sleep(poll);
    }
    let left: Vec<u32> = copies.iter().copied().filter(|&pid| is_running(pid)).collect();
    for &pid in &left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
    }
    assert!(left.is_empty(), "copies {left:?} still ran 30 s after their run was killed");
}

/// `cosched __node-proc` with a spec of hostile sizes: the run is refused or ends with a report, never a panic.
/// (It has the rights of whoever runs it; the runner gives it only specs of its own.)
#[test]
fn a_scenario_process_of_hostile_sizes_never_panics() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let spec = |compute_ns: u64, sleep_ns: u64, nice: i32| {
        let process = serde_json::json!({"name": "p", "nice": nice, "cpus": [0], "compute_ns": compute_ns,
            "sleep_ns": sleep_ns, "exchange": null, "iterations": 3});
        serde_json::json!({"process": process, "inbox": null, "partner_inbox": null}).to_string()
    };
    let own_nice = {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        stat[stat.rfind(')').unwrap() + 2..].split_whitespace().nth(16).unwrap().parse::<i32>().unwrap()
    };
    for (name, spec) in [
        ("a sleep of u64::MAX ns", spec(1000, u64::MAX, own_nice)),
        ("no work", spec(0, 0, own_nice)),
        ("nice 100", spec(1000, 0, 100)),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cosched"))
            .args(["__node-proc", &spec])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Started at once, stopping in about 11 days: a process that does not stop on its own hangs the test.
        let _ = std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"go 0 0 1 1000000000000000\n");
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert!(o.status.success() || stderr.contains("compute_ns") || stderr.contains("nice"), "{name}: {stderr}");
    }
}

/// A --spinbarrier program another user owns (or could replace) is never run by root.
#[test]
fn a_spinbarrier_program_another_user_could_change_is_never_run_by_root() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    if skipped_unless_root("a_spinbarrier_program_another_user_could_change_is_never_run_by_root", "needs root (chown)")
    {
        return;
    }
    let folder = tempfile::Builder::new().prefix("cosched-node-program-").tempdir().unwrap();
    let ran = folder.path().join("program-ran");
    let program = folder.path().join("spinbarrier");
    std::fs::write(&program, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    nix::unistd::chown(&program, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let out = folder.path().join("out");
    let args = ["bench", "node", "--scenario", "spinbarrier", "--repeat", "1", "--copies", "1", "--no-cpu-group"];
    let o =
        cosched(&[&args[..], &["--spinbarrier", program.to_str().unwrap(), "--out", out.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!ran.exists(), "root ran another user's program: {stderr}");
    assert!(!o.status.success() && stderr.contains("--spinbarrier"), "{stderr}");
}

fn repo_file(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path).to_str().unwrap().to_string()
}

/// The smallest scenario file with each new behaviour: a CPU-bound process, a sleeper that starts 100 ms late and a
/// blocking barrier pair, two CPUs, one repeat of a 200 ms window; the model's inputs from the recorded machine
/// file. State only: every process measured, the pair in step, the late sleeper's wakes seen, every row of the
/// summary predicted too.
#[test]
fn a_scenario_file_runs_at_a_tiny_size_measured_and_predicted() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let folder = tempfile::Builder::new().prefix("cosched-node-file-").tempdir().unwrap();
    let file = folder.path().join("tiny.json");
    std::fs::write(
        &file,
        r#"{"format": "cosched-node-scenario/1", "scenarios": [{
            "name": "tiny", "about": "a late sleeper and a blocking pair beside a hog", "cpus": 2, "window_ms": 200,
            "barrier_groups": [{"name": "g", "wait": "block", "work_per_phase_us": 200}],
            "processes": [
                {"name": "hog", "behaviour": "cpu-bound"},
                {"name": "late", "start_ms": 100, "behaviour": {"kind": "run-sleep", "compute_us": 100, "sleep_ms": 2}},
                {"name": "m", "copies": 2, "behaviour": {"kind": "barrier", "group": "g"}}]}]}"#,
    )
    .unwrap();
    let out = folder.path().join("node");
    // The machine file's folder, as every command takes it.
    let machine = repo_file("docs/reproduction-real/prediction/machine");
    let o = cosched(&[
        "bench",
        "node",
        "--scenario-file",
        file.to_str().unwrap(),
        "--repeat",
        "1",
        "--no-cpu-group",
        "--machine",
        &machine,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("node.json")).unwrap()).unwrap();
    let names: Vec<&str> =
        report["scenarios"].as_array().unwrap().iter().map(|s| s["scenario"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tiny"], "a file alone runs no standard scenario");
    let spec = &scenario(&report, "tiny")["scenario"]["kind"]["processes"]["processes"];
    assert_eq!(spec[1]["start_ns"], 100_000_000);
    assert_eq!(spec[2]["barrier"], serde_json::json!({"group": "g", "wait": {"spin-then-block": {"spin_ns": 0}}}));
    let run = &process_runs(&report, "tiny")[0];
    let (a, b) =
        (number(process(run, "m-0"), "iterations_in_window"), number(process(run, "m-1"), "iterations_in_window"));
    // One barrier: the two members' phase counts differ by at most the one in progress at an edge.
    assert!(a > 0.0 && (a - b).abs() <= 1.0, "{run}");
    assert!(!process(run, "late")["wake_latencies_ns"].as_array().unwrap().is_empty(), "{run}");
    for quantity in ["share late", "wake latency p50 late", "wake latency mean late", "barrier phase mean g"] {
        assert!(table.contains(&format!("| tiny | {quantity} |")), "{quantity} not compared:\n{table}");
    }
}

/// A bad file is refused before anything runs or is made, the error naming the file, the scenario and the field.
#[test]
fn a_bad_scenario_file_is_refused_naming_file_scenario_and_field() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let folder = tempfile::Builder::new().prefix("cosched-node-badfile-").tempdir().unwrap();
    let good = r#"{"format": "cosched-node-scenario/1", "scenarios": [{"name": "x", "cpus": 1, "window_ms": 100,
        "processes": [{"name": "p", "nice": 0, "behaviour": "cpu-bound"}]}]}"#;
    let huge = " ".repeat(300 * 1024) + good;
    for (name, text, expected) in [
        (
            "nice",
            good.replace("\"nice\": 0", "\"nice\": 25"),
            "scenario \"x\" (scenarios[0]), process \"p\" (processes[0]), field nice",
        ),
        (
            "command",
            good.replace("\"cpus\": 1", "\"command\": \"id\", \"cpus\": 1"),
            "scenario \"x\" (scenarios[0]), field command: unknown",
        ),
        ("cpus", good.replace("\"cpus\": 1", "\"cpus\": [4096]"), "scenario \"x\" (scenarios[0]), field cpus: 4096"),
        ("window", good.replace("\"window_ms\": 100", "\"window_s\": 3600"), "field window_s: 3600 s is not in"),
        ("huge", huge, "larger than"),
    ] {
        let path = folder.path().join(format!("{name}.json"));
        std::fs::write(&path, text).unwrap();
        // An --out whose folder is missing too: refused before the check of --out would make it.
        let parent = folder.path().join(format!("{name}-parent"));
        let out = parent.join("out");
        let o = cosched(&["bench", "node", "--scenario-file", path.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && stderr.contains(path.to_str().unwrap()) && stderr.contains(expected),
            "{name}: {stderr}"
        );
        assert!(!stderr.contains("[repeat") && !parent.exists(), "{name}: something ran or was made: {stderr}");
    }
}

/// The example files of docs/node-bench/scenarios/ predicted on the recorded machine, nothing measured; a
/// node.json in --predict-from compares its own scenarios, so a scenario file beside it is refused.
#[test]
fn scenario_files_are_predicted_from_a_machine_file() {
    // One at a time: runs make cpu groups with real-time time, which one test takes away on purpose.
    let _machine = cosched_runtime::testing::whole_machine();
    let machine = repo_file("docs/reproduction-real/prediction/machine/machine.json");
    let files = [
        repo_file("docs/node-bench/scenarios/late-sleeper.json"),
        repo_file("docs/node-bench/scenarios/nice-sleeper-spinner.json"),
        repo_file("docs/node-bench/scenarios/barriers.json"),
        repo_file("docs/node-bench/scenarios/spin-barrier-copies.json"),
    ]
    .join(",");
    let o = cosched(&["bench", "node", "--predict-from", &machine, "--scenario-file", &files]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for row in [
        "| late-sleeper | share sleeper |",
        "| late-sleeper | wake latency mean sleeper |",
        "| nice-sleeper-spinner | share spinner |",
        "| two-spin-pairs | barrier phase mean b |",
        "| block-pair-and-hog | barrier phase mean p |",
        "| spin4-on-2cpus | barrier phase mean g |",
        "| spin4x3-2cpus-100us | barrier phase mean c |",
    ] {
        assert!(stdout.contains(row), "{row}:\n{stdout}");
    }
    let recorded = repo_file("docs/node-bench/2026-11-26/node.json");
    let o = cosched(&["bench", "node", "--predict-from", &recorded, "--scenario-file", &files]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("needs a machine file"));
}
