//! `cosched pipeline`: columnsort from the command line (generate, sort,
//! verify, bad input), the priority study and the overhead benchmark against
//! oneTBB, each run small.
//!
//! The overhead test builds bench/tbb with g++ and oneTBB (scripts/setup
//! installs both); without them it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched")).args(args).output().expect("cosched runs")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn columnsort_generates_sorts_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for config in ["compute", "io"] {
        let out = cosched(&[
            "pipeline",
            "columnsort",
            "--config",
            config,
            "--records",
            "20000",
            "--dir",
            d,
            "--policy",
            "io-nice:3",
        ]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{config}: {stderr}");
        assert!(stdout.contains("verified: 20000 records in order"), "{stdout}");
    }
    // A non-power-of-two shape given explicitly, on the file left behind.
    let input = dir.path().join("columnsort.in");
    let out = cosched(&[
        "pipeline",
        "columnsort",
        "--config",
        "io",
        "--input",
        input.to_str().unwrap(),
        "--rows",
        "4000",
        "--policy",
        "adjust-reversible",
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && stdout.contains("4000 rows x 5 columns"), "{stdout}{stderr}");
}

fn error_of(args: &[&str]) -> String {
    let out = cosched(args);
    assert!(!out.status.success(), "{args:?} should fail");
    text(&out).1
}

#[test]
fn columnsort_explains_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("odd.bin");
    std::fs::write(&input, vec![7u8; 16 * 100 + 3]).unwrap();
    let path = input.to_str().unwrap();
    let e = error_of(&["pipeline", "columnsort", "--input", path]);
    assert!(e.contains("1603 bytes is not a whole number of 16-byte records (100 records and 3 bytes over)"), "{e}");
    std::fs::write(&input, vec![7u8; 16 * 100]).unwrap();
    let e = error_of(&["pipeline", "columnsort", "--input", path, "--rows", "20"]);
    assert!(e.contains("s = 5 does not divide r = 20") || e.contains("r >= 2(s-1)^2"), "{e}");
    assert!(e.contains("valid --rows for 100 records"), "{e}");
    let e = error_of(&["pipeline", "columnsort", "--input", path, "--policy", "io-nice:99"]);
    assert!(e.contains("nice must be a whole number from -20 to 19"), "{e}");
    let e = error_of(&["pipeline", "columnsort", "--input", path, "--policy", "fastest"]);
    assert!(e.contains("unknown policy") && e.contains("adjust-reversible"), "{e}");
    let e = error_of(&["pipeline", "columnsort", "--input", dir.path().join("missing").to_str().unwrap()]);
    assert!(e.contains("missing") && e.contains("No such file"), "{e}");
}

#[test]
fn bench_writes_tables_tests_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("study");
    let out = cosched(&[
        "pipeline",
        "bench",
        "--records",
        "30000",
        "--repeats",
        "3",
        "--policies",
        "default,io-nice:+5,adjust-once",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("io-nice:+5") && stdout.contains("wall = "), "{stdout}");
    let summary = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 4, "{summary}");
    let samples = std::fs::read_to_string(out_dir.join("samples.csv")).unwrap();
    assert_eq!(samples.lines().count(), 1 + 9);
    for file in ["report.json", "runs.png", "means.png", "table.txt"] {
        assert!(out_dir.join(file).exists(), "{file} missing");
    }
    // The data files are removed afterwards.
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("cosched-pipeline-bench"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn build_tbb(build: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/tbb");
    let out = Command::new("make")
        .arg("-C")
        .arg(&source)
        .arg(format!("BUILD={}", build.display()))
        .output()
        .expect("make runs");
    assert!(
        out.status.success(),
        "building bench/tbb failed (run scripts/setup: it installs g++ and libtbb-dev):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    build.join("tbb_pipeline_overhead")
}

#[test]
fn overhead_compares_with_onetbb() {
    let dir = tempfile::tempdir().unwrap();
    let tbb = build_tbb(&dir.path().join("tbb"));
    let out_dir = dir.path().join("overhead");
    let out = cosched(&[
        "pipeline",
        "overhead",
        "--items",
        "20000",
        "--repeats",
        "2",
        "--stages",
        "3,5",
        "--threads",
        "2",
        "--tbb",
        tbb.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    for needle in ["oneTBB parallel_pipeline", "a thread per stage", "as many threads", "vs oneTBB"] {
        assert!(stdout.contains(needle), "{needle} missing: {stdout}");
    }
    let csv = std::fs::read_to_string(out_dir.join("overhead.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
    let e = error_of(&["pipeline", "overhead", "--tbb", "/nonexistent/tbb"]);
    assert!(e.contains("make -C bench/tbb"), "{e}");
}

/// Runs cosched as uid/gid 65534 with RLIMIT_NICE 0, from a world-readable copy.
fn cosched_unprivileged(dir: &Path, args: &[&str]) -> Output {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let copy = dir.join("cosched");
    std::fs::copy(env!("CARGO_BIN_EXE_cosched"), &copy).unwrap();
    for path in [dir, copy.as_path()] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    Command::new("bash")
        .arg("-c")
        .arg("ulimit -e 0 && exec \"$0\" \"$@\"")
        .arg(&copy)
        .args(args)
        .current_dir(dir)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("bash runs")
}

#[test]
fn refused_controls_are_reported_not_skipped() {
    assert!(nix::unistd::geteuid().is_root(), "this test drops to uid 65534 and so needs root");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = cosched_unprivileged(
        dir.path(),
        &["pipeline", "columnsort", "--records", "5000", "--dir", d, "--policy", "io-nice:-5"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("verified"), "{stdout}");
    assert!(stderr.contains("warning: refused control: read: nice -5") && stderr.contains("not permitted"), "{stderr}");
    let out = cosched_unprivileged(
        dir.path(),
        &[
            "pipeline",
            "bench",
            "--records",
            "5000",
            "--repeats",
            "2",
            "--policies",
            "default,io-nice:-5",
            "--data-dir",
            d,
            "--out",
            "study",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("REFUSED (this policy did not run as named): io-nice:-5: write: nice -5"), "{stdout}");
    assert!(!stdout.contains("REFUSED (this policy did not run as named): default"), "{stdout}");
}

/// A `--tbb` program another user owns (or could change) is never run: the
/// command may run as root.
#[test]
fn a_tbb_program_another_user_could_change_is_never_run() {
    if !nix::unistd::geteuid().is_root() {
        cosched_runtime::testing::say_skipped(
            "a_tbb_program_another_user_could_change_is_never_run",
            "needs root (chown)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("program-ran");
    let program = dir.path().join("tbb_pipeline_overhead");
    std::fs::write(&program, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    nix::unistd::chown(&program, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let out =
        cosched(&["pipeline", "overhead", "--items", "100", "--repeats", "1", "--tbb", program.to_str().unwrap()]);
    let (_, stderr) = text(&out);
    assert!(!ran.exists(), "ran another user's program: {stderr}");
    assert!(!out.status.success() && stderr.contains("another user's"), "{stderr}");
}
