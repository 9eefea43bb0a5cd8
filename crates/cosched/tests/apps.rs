//! The reference programs in `apps/` (spinbarrier, mpi_mm, mpi_lu): built with their Makefile into a
//! temporary directory and run, the MPI ones with Open MPI's mpirun over shared memory (and their MPICH
//! build with MPICH's mpiexec). Each program checks its own numerical result; here we check that the
//! check passed, the JSON report, the message counts where they follow from the algorithm, and the
//! usage errors.
//!
//! Needs mpicc, mpirun, MPICH and OpenBLAS (scripts/setup installs them); without them these tests fail.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const SETUP_HINT: &str = "run scripts/setup (it installs Open MPI, MPICH and OpenBLAS for apps/)";

fn require_tool(tool: &str) {
    let works = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(works, "{tool} is missing or does not run: {SETUP_HINT}");
}

/// Builds the programs once per test run; the directory holding them.
fn apps_build() -> &'static Path {
    static BUILD: OnceLock<PathBuf> = OnceLock::new();
    BUILD.get_or_init(|| {
        require_tool("mpicc");
        require_tool("mpirun");
        require_tool("mpicc.mpich");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apps");
        // Fresh (mkdtemp): the programs run as root, from a folder nobody else made or can write.
        let build = tempfile::Builder::new().prefix("cosched-apps-").tempdir().unwrap().keep();
        let out = Command::new("make")
            .arg("-C")
            .arg(&source)
            .arg(format!("BUILD={}", build.display()))
            .arg("all")
            .output()
            .unwrap_or_else(|e| panic!("make: {e}: {SETUP_HINT}"));
        assert!(
            out.status.success(),
            "building apps/ failed ({SETUP_HINT} if OpenBLAS is missing):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        build
    })
}

/// `mpirun -np NP PROGRAM ARGS` over shared memory, as README.md documents; the environment lets
/// Open MPI run as root and keeps OpenBLAS to one thread per process. Each run has its own TMPDIR:
/// Open MPI 4 keeps its session in `$TMPDIR/ompi.<host>.<uid>`, and two launchers of one user started
/// together (these tests run in parallel) race to create it, one failing with "File exists".
fn mpirun(np: usize, program: &str, args: &[&str]) -> Output {
    let scratch = tempfile::Builder::new().prefix("cosched-apps-mpirun-").tempdir().unwrap();
    Command::new("mpirun")
        .env("TMPDIR", scratch.path())
        .args(["--oversubscribe", "--mca", "btl", "vader,self", "-np", &np.to_string()])
        .arg(apps_build().join(program))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .output()
        .expect("mpirun runs")
}

fn describe(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The single JSON line of a successful run whose self-check passed.
fn report(o: &Output) -> Value {
    assert!(o.status.success(), "{}", describe(o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stdout:\n{}", describe(o));
    let json: Value = serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {}", lines[0]));
    assert_eq!(json["passed"], true, "{json}");
    let time = json["time_s"].as_f64().unwrap();
    assert!(time > 0.0 && json["mflops"].as_f64().unwrap() > 0.0, "{json}");
    for field in ["compute_s", "comm_s", "compute_s_mean", "comm_s_mean"] {
        let seconds = json[field].as_f64().unwrap_or_else(|| panic!("{field} in {json}"));
        assert!((0.0..=time + 0.01).contains(&seconds), "{field} outside the timed region: {json}");
    }
    json
}

fn number(json: &Value, field: &str) -> f64 {
    json[field].as_f64().unwrap_or_else(|| panic!("{field} in {json}"))
}

fn grid_of(grid: &str) -> (usize, usize) {
    let (p, q) = grid.split_once('x').unwrap();
    (p.parse().unwrap(), q.parse().unwrap())
}

// ---- spinbarrier ------------------------------------------------------------------------------

#[test]
fn spinbarrier_agrees_with_its_serial_reference_under_every_barrier() {
    for barrier in ["spin", "yield", "block"] {
        let out = Command::new(apps_build().join("spinbarrier"))
            .args(["--threads", "2", "--phases", "200", "--work-mflop", "0.05", "--barrier", barrier])
            .output()
            .unwrap();
        let json = report(&out);
        assert_eq!(json["app"], "spinbarrier");
        assert_eq!(json["barrier"], barrier);
        assert_eq!((json["threads"].as_u64(), json["phases"].as_u64()), (Some(2), Some(200)), "{json}");
        assert_eq!(json["checked"], true, "{json}");
    }
}

#[test]
fn spinbarrier_refuses_bad_options() {
    let run = |args: &[&str]| Command::new(apps_build().join("spinbarrier")).args(args).output().unwrap();
    for (args, message) in [
        (&["--barrier", "nap"][..], "unknown --barrier 'nap'"),
        (&["--threads", "0"][..], "--threads must be an integer"),
        (&["--work-mflop", "-1"][..], "--work-mflop must be a positive number"),
        (&["--colour", "red"][..], "unknown option '--colour'"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(message), "{args:?}: {}", describe(&out));
    }
}

// ---- mpi_mm -------------------------------------------------------------------------------------

/// Panels of mpi_mm: at most k wide and cut where the owner of the row or column block changes.
fn mm_panels(n: usize, p: usize, q: usize, k: usize) -> usize {
    let (mb, nbk) = (n / p, n / q);
    let (mut k0, mut count) = (0, 0);
    while k0 < n {
        k0 = (k0 + k).min((k0 / nbk + 1) * nbk).min((k0 / mb + 1) * mb).min(n);
        count += 1;
    }
    count
}

fn run_mm(grid: &str, n: usize, k: usize, repeat: usize, wait: &str) {
    let (p, q) = grid_of(grid);
    let (n_s, k_s, r_s) = (n.to_string(), k.to_string(), repeat.to_string());
    let args = ["--n", &n_s, "--grid", grid, "--k", &k_s, "--repeat", &r_s, "--wait", wait];
    let json = report(&mpirun(p * q, "mpi_mm", &args));
    let case = format!("mm {grid} n={n} k={k} repeat={repeat} wait={wait}: {json}");
    assert_eq!(json["app"], "mm", "{case}");
    assert_eq!(json["grid"], grid, "{case}");
    assert_eq!(json["wait"], wait, "{case}");
    assert!(number(&json, "residual") < 16.0, "{case}");
    // Each panel goes once round every process row (Q - 1 sends) and every process column
    // (P - 1 sends); its doubles add up to N^2 (P + Q - 2) per multiplication.
    let ranks = (p * q) as f64;
    let messages = (repeat * mm_panels(n, p, q, k) * (p * (q - 1) + q * (p - 1))) as f64 / ranks;
    let doubles = (repeat * n * n * (p + q - 2)) as f64 / ranks;
    assert!((number(&json, "messages_per_rank_mean") - messages).abs() < 0.06, "expected {messages}: {case}");
    assert!((number(&json, "doubles_per_rank_mean") - doubles).abs() < 0.06, "expected {doubles}: {case}");
    assert!(number(&json, "messages_per_rank") >= messages && number(&json, "doubles_per_rank") >= doubles);
}

#[test]
fn mpi_mm_is_right_on_one_and_two_processes() {
    run_mm("1x1", 200, 128, 1, "spin");
    run_mm("1x1", 1, 128, 1, "spin");
    run_mm("2x1", 200, 128, 1, "spin");
    run_mm("1x2", 200, 128, 1, "spin");
    run_mm("2x1", 96, 32, 2, "yield");
    run_mm("1x2", 64, 24, 1, "block");
}

#[test]
fn mpi_mm_is_right_on_four_processes_with_panels_cut_at_owner_boundaries() {
    run_mm("2x2", 96, 32, 1, "spin");
    run_mm("2x2", 200, 128, 2, "spin");
    run_mm("4x1", 96, 40, 1, "block");
    run_mm("1x4", 100, 7, 1, "yield");
}

// ---- mpi_lu -------------------------------------------------------------------------------------

fn run_lu(grid: &str, n: usize, nb: usize, wait: &str) {
    let (p, q) = grid_of(grid);
    let (n_s, nb_s) = (n.to_string(), nb.to_string());
    let json = report(&mpirun(p * q, "mpi_lu", &["--n", &n_s, "--grid", grid, "--nb", &nb_s, "--wait", wait]));
    let case = format!("lu {grid} n={n} nb={nb} wait={wait}: {json}");
    assert_eq!(json["app"], "lu", "{case}");
    assert_eq!((json["n"].as_u64(), json["nb"].as_u64()), (Some(n as u64), Some(nb as u64)), "{case}");
    assert_eq!(json["grid"], grid, "{case}");
    assert!(number(&json, "residual") < 16.0, "{case}");
    let messages = number(&json, "messages_per_rank");
    if p * q == 1 {
        assert_eq!(messages, 0.0, "{case}");
    } else {
        assert!(messages > 0.0 && number(&json, "doubles_per_rank") > 0.0, "{case}");
    }
    if p > 1 && n > 1 {
        // The pivot search alone is one message per column on every rank of the panel's column.
        assert!(messages >= (n / q) as f64, "{case}");
    }
}

#[test]
fn mpi_lu_is_right_on_one_and_two_processes() {
    run_lu("1x1", 1, 60, "spin");
    run_lu("1x1", 7, 60, "spin");
    run_lu("1x1", 301, 60, "spin");
    run_lu("2x1", 100, 60, "spin");
    run_lu("2x1", 301, 7, "spin");
    run_lu("1x2", 301, 60, "spin");
    run_lu("2x1", 7, 2, "yield");
    run_lu("1x2", 100, 9, "block");
}

#[test]
fn mpi_lu_is_right_on_four_processes_for_sizes_that_do_not_fill_the_blocks() {
    run_lu("2x2", 1, 60, "spin");
    run_lu("2x2", 7, 2, "spin");
    run_lu("2x2", 100, 60, "spin");
    run_lu("2x2", 301, 16, "spin");
    run_lu("4x1", 100, 7, "block");
    run_lu("1x4", 61, 5, "yield");
}

#[test]
fn the_mpich_build_is_right_under_mpichs_own_launcher() {
    for (program, args) in [("mpi_mm", ["--n", "128", "--grid", "2x1"]), ("mpi_lu", ["--n", "100", "--grid", "1x2"])] {
        let out = Command::new("mpiexec.mpich")
            .args(["-n", "2"])
            .arg(apps_build().join("mpich").join(program))
            .args(args)
            .env("OPENBLAS_NUM_THREADS", "1")
            .output()
            .unwrap_or_else(|e| panic!("mpiexec.mpich: {e}: {SETUP_HINT}"));
        let json = report(&out);
        assert_eq!(json["p"], 2, "{program}: {json}");
    }
}

// ---- usage errors -------------------------------------------------------------------------------

fn assert_usage_error(np: usize, program: &str, args: &[&str], message: &str) {
    let out = mpirun(np, program, args);
    let case = format!("{program} -np {np} {args:?}");
    assert_eq!(out.status.code(), Some(2), "{case}: {}", describe(&out));
    assert!(out.stdout.is_empty(), "{case}: no report on bad usage: {}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{program}: {message}")), "{case}: wanted '{message}': {}", describe(&out));
    // Only rank 0 reports.
    assert_eq!(stderr.matches(message).count(), 1, "{case}: {}", describe(&out));
}

/// Concurrently: after a non-zero exit mpirun waits about 2 s before it finishes
/// (its odls_base_sigkill_timeout), and these runs would otherwise add up.
#[test]
fn the_mpi_programs_explain_bad_usage_and_exit_2() {
    let cases: [(usize, &str, &[&str], &str); 11] = [
        (2, "mpi_mm", &["--n", "64", "--grid", "2x2"], "grid 2x2 needs 4 processes, got 2"),
        (2, "mpi_lu", &["--n", "64", "--grid", "2x2"], "grid 2x2 needs 4 processes, got 2"),
        (2, "mpi_mm", &["--n", "101", "--grid", "2x1"], "--n 101 is not divisible by P=2"),
        (2, "mpi_mm", &["--n", "101", "--grid", "1x2"], "--n 101 is not divisible by Q=2"),
        (1, "mpi_mm", &["--n", "64", "--grid", "2by2"], "malformed --grid '2by2'"),
        (1, "mpi_lu", &["--n", "64", "--grid", "2by2"], "malformed --grid '2by2'"),
        (1, "mpi_mm", &["--n", "0"], "--n must be a positive integer, got '0'"),
        (1, "mpi_lu", &["--n", "10", "--nb", "-4"], "--nb must be a positive integer, got '-4'"),
        (1, "mpi_mm", &["--n", "64", "--k", "0"], "--k must be a positive integer, got '0'"),
        (1, "mpi_lu", &["--n", "10", "--pivot", "none"], "unknown option '--pivot'"),
        (1, "mpi_mm", &["--n", "64", "--wait", "nap"], "unknown --wait 'nap'"),
    ];
    apps_build();
    std::thread::scope(|s| {
        for (np, program, args, message) in cases {
            s.spawn(move || assert_usage_error(np, program, args, message));
        }
    });
}
