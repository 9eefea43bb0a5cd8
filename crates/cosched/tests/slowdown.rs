//! `cosched bench slowdown` on programs whose slowdown is known: a loop that
//! keeps every CPU busy slows down by j, a program that sleeps does not slow
//! down. Runs the local and gang policies through a real private runtime (root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const COSCHED: &str = env!("CARGO_BIN_EXE_cosched");
/// Where a run puts its results: `out` in a fresh folder (mkdtemp), so that nobody can have made it first or put
/// a link there. Removed with [`remove_out`].
fn fresh_out(name: &str) -> PathBuf {
    tempfile::Builder::new().prefix(&format!("cosched-slowdown-{name}-")).tempdir().unwrap().keep().join("out")
}

fn remove_out(out: &Path) {
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

fn slowdown(out: &Path, args: &[&str], command: &[&str]) -> Output {
    Command::new(COSCHED)
        .args(["bench", "slowdown", "--json", "--out", out.to_str().unwrap()])
        .args(args)
        .arg("--")
        .args(command)
        .output()
        .unwrap()
}

fn report(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "bench slowdown failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn point(report: &serde_json::Value, policy: &str, jobs: u64) -> serde_json::Value {
    report["points"].as_array().unwrap().iter().find(|p| p["policy"] == policy && p["jobs"] == jobs).unwrap().clone()
}

/// A loop on every CPU of this machine, for about `iterations` / 1e6 s each.
fn busy_loop(iterations: u32) -> Vec<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let one = format!("i=0; while [ $i -lt {iterations} ]; do i=$((i+1)); done");
    let all = vec![format!("({one}) &"); cpus - 1].join(" ") + &format!(" {one}; wait");
    vec!["sh".into(), "-c".into(), all]
}

#[test]
fn a_busy_loop_slows_down_by_j_under_every_policy() {
    let _machine = cosched_runtime::testing::whole_machine();
    if !nix::unistd::geteuid().is_root() {
        let why = "needs root: the local and gang policies start a private cosched runtime (cgroups)";
        cosched_runtime::testing::say_skipped("a_busy_loop_slows_down_by_j_under_every_policy", why);
        return;
    }
    let out = fresh_out("busy");
    let command = busy_loop(400_000);
    let argv: Vec<&str> = command.iter().map(String::as_str).collect();
    let output = slowdown(&out, &["--jobs", "1,2", "--repeat", "2", "--policy", "none,local,gang:20ms"], &argv);
    let report = report(&output);
    // Whether s_2 comes out near 2 depends on what else the machine runs: that is `cosched bench slowdown`'s
    // to measure, not a test's. A test checks what load cannot change: the ratio is the ratio of the reported
    // times, and the work is conserved: two copies use about twice the CPU time of one (contention for caches
    // and memory adds some; on a shared VM a single run can cost up to a third more, so the bound is loose
    // — a harness that counted one copy only would give 1).
    for policy in ["none", "local", "gang:20ms"] {
        let (one, two) = (point(&report, policy, 1), point(&report, policy, 2));
        let s2 = two["slowdown"]["value"].as_f64().unwrap();
        let t_ratio = two["elapsed_s"]["mean"].as_f64().unwrap() / one["elapsed_s"]["mean"].as_f64().unwrap();
        assert!((s2 - t_ratio).abs() < 1e-9, "{policy}: s_2 = {s2} is not t_2 / t_1 = {t_ratio}");
        let cpu = |p: &serde_json::Value| p["cpu_s"]["mean"].as_f64().unwrap();
        let work_ratio = cpu(&two) / cpu(&one);
        assert!((1.25..=3.0).contains(&work_ratio), "{policy}: two copies used {work_ratio} times one copy's CPU time");
    }
    // The machine's CPUs over each run: a window around the copies, busy with at least their work.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for sample in report["samples"].as_array().unwrap() {
        let machine = &sample["machine_cpu"];
        let (busy, all) = (machine["busy_s"].as_f64().unwrap(), machine["all_s"].as_f64().unwrap());
        let (elapsed, copies) = (sample["elapsed_s"].as_f64().unwrap(), sample["cpu_s"].as_f64().unwrap());
        // /proc/stat counts in ticks of 10 ms, its user and system time sampled at the scheduler's tick.
        assert!(all >= cpus * (elapsed - 0.05), "{all} CPU-s in a window of a {elapsed} s run: {sample}");
        assert!(busy >= 0.8 * copies - 0.1, "the machine was busy {busy} CPU-s, the copies used {copies}: {sample}");
        assert!(busy + machine["steal_s"].as_f64().unwrap() <= all + 1e-9, "{sample}");
    }
    // Every result file is there, and the plot is a PNG.
    for name in ["table.txt", "points.csv", "samples.csv", "report.json", "slowdown.svg"] {
        assert!(out.join(name).exists(), "{name} missing");
    }
    assert!(std::fs::read(out.join("slowdown.png")).unwrap().starts_with(b"\x89PNG"));
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert_eq!(samples.lines().count(), 1 + 2 * 2 * 3, "a line per run:\n{samples}");
    remove_out(&out);
}

#[test]
fn a_sleeping_program_does_not_slow_down() {
    let _machine = cosched_runtime::testing::whole_machine();
    let out = fresh_out("sleep");
    let output = slowdown(&out, &["--jobs", "1,4", "--repeat", "2", "--policy", "none"], &["sleep", "0.4"]);
    let report = report(&output);
    let s4 = point(&report, "none", 4)["slowdown"]["value"].as_f64().unwrap();
    assert!((0.9..=1.25).contains(&s4), "s_4 = {s4}, expected about 1");
    let fairness = point(&report, "none", 4)["fairness_ratio"].as_f64().unwrap();
    assert!(fairness < 1.2, "four sleeps ended {fairness} apart");
    remove_out(&out);
}

#[test]
fn a_failing_copy_is_reported_with_its_output_and_nothing_measured_is_lost() {
    let out = fresh_out("fail");
    let output = slowdown(
        &out,
        &["--jobs", "1,2", "--repeat", "1", "--policy", "none", "--warmup", "0"],
        &["sh", "-c", "[ -e \"$0.flag\" ] && { echo broken >&2; exit 3; }; touch \"$0.flag\"", out.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(out.with_extension("flag"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("none, j = 2, repeat 1"), "{stderr}");
    assert!(stderr.contains("exited with status 3") && stderr.contains("broken"), "{stderr}");
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert!(samples.lines().nth(1).is_some_and(|l| l.starts_with("none,1,1,")), "{samples}");
    remove_out(&out);
}

/// What a copy leaves running in its process group ends with the run: root's bench leaves no stray processes.
#[test]
fn a_copy_leaves_nothing_running_after_the_run() {
    let out = fresh_out("leftover");
    let pid_file = out.with_extension("pid");
    let script = "sleep 300 & echo $! > \"$0\"";
    let output = slowdown(
        &out,
        &["--jobs", "1", "--repeat", "1", "--policy", "none", "--warmup", "0"],
        &["sh", "-c", script, pid_file.to_str().unwrap()],
    );
    report(&output);
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    let _ = std::fs::remove_file(&pid_file);
    let still_sleeping = || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x00300"));
    // The kill is sent before the bench returns; the process's end is the kernel's, a moment later (up to 10 s).
    for _ in 0..500 {
        if !still_sleeping() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!still_sleeping(), "the copy's background sleep (pid {pid}) outlived the bench");
    remove_out(&out);
}

/// A bench started with SIGCHLD ignored could not wait for its copies (the kernel reaps them at once): it says so
/// and runs nothing, rather than failing each run and signalling pids that may be another process's by then.
#[test]
fn a_bench_that_ignores_sigchld_refuses_to_start_copies() {
    let out = fresh_out("sigchld");
    let ignoring =
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])";
    let output = Command::new("python3")
        .args(["-c", ignoring, COSCHED, "bench", "slowdown", "--out", out.to_str().unwrap()])
        .args(["--jobs", "1", "--repeat", "1", "--policy", "none", "--warmup", "0", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("ignores SIGCHLD"), "{stderr}");
    remove_out(&out);
}

/// A warm-up run is timed and thrown away; one that fails is named as the warm-up, and nothing is measured.
#[test]
fn a_warm_up_run_is_not_measured_and_its_failure_says_so() {
    let out = fresh_out("warmup");
    let ok = slowdown(&out, &["--jobs", "1", "--repeat", "1", "--policy", "none", "--warmup", "2"], &["true"]);
    let stderr = String::from_utf8_lossy(&ok.stderr);
    assert!(ok.status.success() && stderr.matches("not measured").count() == 2, "{stderr}");
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert_eq!(samples.lines().count(), 2, "the header and the one measured run: {samples}");
    let failed = slowdown(&out, &["--jobs", "1", "--repeat", "1", "--policy", "none"], &["sh", "-c", "exit 3"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success() && stderr.contains("none, warm-up 1"), "{stderr}");
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert_eq!(samples.lines().count(), 1, "only the header: {samples}");
    remove_out(&out);
}

#[test]
fn bad_arguments_are_named() {
    let check = |args: &[&str], expected: &str| {
        let output = Command::new(COSCHED).args(["bench", "slowdown"]).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
    };
    check(&["--policy", "fifo", "--", "true"], "unknown policy \"fifo\"");
    check(&["--policy", "local:5ms", "--", "true"], "only gang and slurm+cosched take a slice");
    check(&["--jobs", "2,4", "--out", "/tmp/cosched-never", "--", "true"], "--jobs must include 1");
    check(&["--cpus", "999", "--", "true"], "--cpus 999");
}

#[test]
fn a_cluster_larger_than_the_cpus_or_with_a_host_policy_is_refused() {
    let check = |args: &[&str], expected: &str| {
        let output = Command::new(COSCHED).args(["bench", "slowdown", "--repeat", "1"]).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
    };
    check(&["--nodes", "2", "--policy", "none", "--", "true"], "none runs on this host only");
    check(&["--nodes", "2", "--policy", "slurm", "--", "true"], "slurm runs on this host only");
    if nix::unistd::geteuid().is_root() {
        check(&["--nodes", "4096", "--policy", "gang", "--", "true"], "each namespace node is a CPU of its own");
    }
}

/// `--nodes 2`: each copy of mpi_mm an MPI job with a rank on each of two namespace nodes, talking over TCP.
/// The job's CPU time is its cgroups' at the end (sent by each agent with the end): at least what the ranks
/// themselves counted in their timed region, though the job is shorter than the agents' report period.
#[test]
fn a_cluster_bench_runs_mpi_copies_across_namespace_nodes() {
    let _machine = cosched_runtime::testing::whole_machine();
    let name = "a_cluster_bench_runs_mpi_copies_across_namespace_nodes";
    if !nix::unistd::geteuid().is_root() {
        cosched_runtime::testing::say_skipped(name, "needs root: namespaces, cgroups and a private cluster");
        return;
    }
    if cosched_bench::cluster::allowed_cpus().len() < 2 {
        cosched_runtime::testing::say_skipped(name, "needs two CPUs: a namespace node is a CPU of its own");
        return;
    }
    let out = fresh_out("cluster");
    let build = out.parent().unwrap().join("apps");
    let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apps");
    let made = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&apps)
        .arg(format!("BUILD={}", build.display()))
        .arg("openmpi")
        .output()
        .expect("make (scripts/setup installs it)");
    assert!(made.status.success(), "make openmpi: {}", String::from_utf8_lossy(&made.stderr));
    let mpirun = "mpirun --allow-run-as-root --bind-to none --mca btl self,tcp -x OPENBLAS_NUM_THREADS=1 -np 2";
    let command: Vec<&str> =
        mpirun.split(' ').chain(["./mpi_mm", "--n", "256", "--grid", "2x1", "--wait", "spin"]).collect();
    let o = Command::new(COSCHED)
        .args([
            "bench",
            "slowdown",
            "--json",
            "--nodes",
            "2",
            "--policy",
            "gang:100ms",
            "--jobs",
            "1,2",
            "--repeat",
            "1",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--")
        .args(&command)
        .current_dir(&build)
        .output()
        .unwrap();
    let report = report(&o);
    remove_out(&out);
    assert_eq!(report["nodes"], 2, "{report}");
    for sample in report["samples"].as_array().unwrap() {
        let app = &sample["app_report"];
        assert!(app["p"] == 2 && app["passed"] == true, "rank 0's report: {sample}");
        let ranks_cpu_s = 2.0 * app["cpu_s_mean"].as_f64().unwrap();
        let job_cpu_s = sample["cpu_s"].as_f64().expect("every node gave its CPU time at the end");
        assert!(sample["machine_cpu"]["all_s"].as_f64().unwrap() > 0.0, "the machine's CPU time: {sample}");
        assert!(
            job_cpu_s >= 0.95 * ranks_cpu_s,
            "the job's CPU time {job_cpu_s} s is below its ranks' {ranks_cpu_s} s"
        );
    }
}

/// Root writes its results by name in --out: a folder another user made (who could put a link in it where root
/// writes) is refused before anything runs or is written.
#[test]
fn an_out_folder_another_user_made_is_refused_as_root() {
    if !nix::unistd::geteuid().is_root() {
        let why = "needs root: the check is what root does with another user's folder";
        cosched_runtime::testing::say_skipped("an_out_folder_another_user_made_is_refused_as_root", why);
        return;
    }
    let out = fresh_out("foreign");
    std::fs::create_dir(&out).unwrap();
    let nobody = nix::unistd::Uid::from_raw(65534);
    nix::unistd::chown(&out, Some(nobody), None).unwrap();
    let victim = out.parent().unwrap().join("victim");
    std::fs::write(&victim, "root's file\n").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("samples.csv")).unwrap();
    let o = slowdown(&out, &["--policy", "none", "--jobs", "1", "--repeat", "1"], &["true"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let untouched = std::fs::read_to_string(&victim).unwrap();
    remove_out(&out);
    assert!(!o.status.success() && err.contains("--out"), "{err}");
    assert_eq!(untouched, "root's file\n", "root wrote through the link");
}

/// `--predict-with` refuses, before measuring anything, a command the simulator could not take.
#[test]
fn predict_with_refuses_an_unpredictable_command_before_measuring() {
    let out = fresh_out("predict-with");
    let machine = out.parent().unwrap().join("machine.json");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reproduction-real/prediction/machine/machine.json"),
    )
    .unwrap();
    std::fs::write(&machine, text).unwrap();
    let machine = machine.to_str().unwrap().to_string();
    for (command, expect) in [
        (vec!["true"], "none of the reference programs"),
        (vec!["./spinbarrier", "--barrier", "block"], "not modelled"),
    ] {
        let o =
            slowdown(&out, &["--policy", "none", "--jobs", "1", "--repeat", "1", "--predict-with", &machine], &command);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!o.status.success() && err.contains(expect), "{command:?}: {err}");
        assert!(!out.join("samples.csv").exists(), "{command:?}: measured before refusing");
    }
    remove_out(&out);
}

/// Root runs only what nobody else could change (`CheckedCommand`): a program of another user's is refused before
/// anything runs — started from their folder, named by its full path, given to a launcher as a file, found
/// through their folder on PATH, or read unasked from root's folder (a Makefile) — on one node and across
/// namespace nodes. Root's own program in root's folder
/// runs (so the rule does not refuse everything). Run by another user, the bench runs that user's command as
/// them: nothing is gained, and the rule is root's.
#[test]
fn root_runs_no_program_another_user_could_change() {
    let name = "root_runs_no_program_another_user_could_change";
    if !nix::unistd::geteuid().is_root() {
        cosched_runtime::testing::say_skipped(name, "needs root: the rule is what root runs");
        return;
    }
    let base = tempfile::Builder::new().prefix("cosched-root-runs-").tempdir().unwrap();
    let ran = base.path().join("ran");
    let users = base.path().join("users-folder");
    std::fs::create_dir(&users).unwrap();
    let script = format!("#!/bin/sh\nid -u >> {}\n", ran.display());
    let write_program = |path: &Path, owner: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, &script).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        nix::unistd::chown(path, Some(nix::unistd::Uid::from_raw(owner)), None).unwrap();
    };
    write_program(&users.join("prog"), 65534);
    nix::unistd::chown(&users, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let roots = base.path().join("roots-folder");
    std::fs::create_dir(&roots).unwrap();
    write_program(&roots.join("prog"), 0);
    let theirs = users.join("prog").to_str().unwrap().to_string();
    let their_path = format!("{}:{}", users.display(), std::env::var("PATH").unwrap_or_default());
    let once = ["--policy", "none", "--jobs", "1", "--repeat", "1", "--warmup", "0"];
    let cluster = ["--nodes", "2", "--cpus", "2", "--policy", "local", "--jobs", "1", "--repeat", "1"];
    // A folder of root's holding a file of theirs that the program reads unasked (make's Makefile).
    let with_theirs = base.path().join("roots-folder-with-theirs");
    std::fs::create_dir(&with_theirs).unwrap();
    std::fs::write(with_theirs.join("Makefile"), format!("all:\n\tid -u >> {}\n", ran.display())).unwrap();
    nix::unistd::chown(&with_theirs.join("Makefile"), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    // What the case is, the folder root runs in, the bench's options, the command, what the refusal says.
    type Case<'a> = (&'a str, &'a Path, &'a [&'a str], Vec<&'a str>, &'a str);
    let cases: [Case; 6] = [
        ("their folder", &users, &once, vec!["./prog"], "the folder the command runs in"),
        ("their folder, across nodes", &users, &cluster, vec!["./prog"], "the folder the command runs in"),
        ("their program by path", &roots, &once, vec![theirs.as_str()], "belongs to nobody"),
        ("their file given to a launcher", &roots, &once, vec!["sh", theirs.as_str()], "belongs to nobody"),
        ("their folder on PATH", &roots, &once, vec!["prog"], "not found in the folders of PATH"),
        ("their Makefile in root's folder", &with_theirs, &once, vec!["make"], "another user's (uid 65534)"),
    ];
    let out = base.path().join("out");
    for (what, cwd, args, command, refusal) in cases {
        let o = Command::new(COSCHED)
            .current_dir(cwd)
            .env("PATH", &their_path)
            .args(["bench", "slowdown", "--out", out.to_str().unwrap()])
            .args(args)
            .arg("--")
            .args(&command)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(refusal), "{what}: expected a refusal naming {refusal:?}:\n{err}");
        assert!(!ran.exists(), "{what}: their program ran as root");
    }
    let o = Command::new(COSCHED)
        .current_dir(&roots)
        .args(["bench", "slowdown", "--out", out.to_str().unwrap()])
        .args(once)
        .args(["--", "./prog"])
        .output()
        .unwrap();
    assert!(o.status.success(), "root's own program: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "0\n", "root's program ran once, as root");
}
