//! A study as a real Slurm job array: `scripts/study-array.sbatch` submitted with `sbatch --array=1-3` to the private
//! Slurm of `scripts/slurm`, then a merge job that depends on the array, as docs/reproduction.md ("A study as a
//! Slurm job array") says; the merged folder must hold, byte for byte, what the study run whole writes.
#![allow(clippy::disallowed_methods)] // the wait for real Slurm jobs is bounded by the wall clock

use cosched_bench::slurm::{SlurmInstance, SlurmSetup};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const COSCHED: &str = env!("CARGO_BIN_EXE_cosched");
/// The study and its flags after the script: a few seconds of work in all.
const STUDY: [&str; 7] = ["e2", "--jobs", "10", "--replications", "1", "--schemes", "gs,sb"];
const TASKS: u32 = 3;
/// How long the array and the merge may take together, from the submission: generous, for a busy machine.
const JOBS_TIMEOUT: Duration = Duration::from_secs(300);
/// Reasons a pending job gives when it will never run as it is (as `scripts/slurm run` reads them).
const NEVER: [&str; 6] = ["PartitionConfig", "BadConstraints", "NodeLimit", "NotAvail", "Held", "launch"];
/// A job's states once it has ended (Slurm's `JobState`).
const ENDED: [&str; 9] =
    ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"];

/// What this test needs that the machine may lack, if anything: root and Slurm's and MUNGE's programs.
fn missing_capability() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (scripts/slurm start runs slurmd, which runs jobs as their user)".into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<&str> = ["slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sinfo", "munged", "munge"]
        .into_iter()
        .filter(|program| !std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .collect();
    (!missing.is_empty()).then(|| {
        format!("Slurm is not installed ({} not found; scripts/setup installs slurm-wlm and munge)", missing.join(", "))
    })
}

/// The private Slurm (stopped with its jobs on drop) and the folder the jobs are submitted from.
struct Cluster {
    _slurm: SlurmInstance,
    conf: PathBuf,
    log: PathBuf,
    submit_dir: PathBuf,
    results: PathBuf,
}

impl Cluster {
    /// A Slurm command from the submission folder, with the environment sbatch passes on to the jobs.
    fn command(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .env("COSCHED", COSCHED)
            .env("STUDY_RESULTS", &self.results)
            .current_dir(&self.submit_dir)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Submit with `sbatch --parsable`; the job's id.
    fn sbatch(&self, args: &[&str]) -> u32 {
        let out = self.command("sbatch", &[&["--parsable"], args].concat());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "sbatch {args:?}: {}{stdout}", String::from_utf8_lossy(&out.stderr));
        let id = stdout.trim().split(';').next().unwrap_or("");
        id.parse().unwrap_or_else(|_| panic!("sbatch --parsable printed {stdout:?}"))
    }

    /// `scontrol show job -o` of a job: one line per job, per array task once Slurm has split the array.
    fn show(&self, job: u32) -> Vec<String> {
        let out = self.command("scontrol", &["show", "job", "-o", &job.to_string()]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
    }

    /// `JobState` and `Reason` of each line of `show`.
    fn states(&self, job: u32) -> Vec<(String, String)> {
        self.show(job).iter().map(|line| (field(line, "JobState"), field(line, "Reason"))).collect()
    }

    /// Everything that tells what became of the jobs: Slurm's view of each, its record, the jobs' output files,
    /// the controller's last log lines.
    fn report(&self, jobs: &[u32]) -> String {
        let mut report = String::new();
        for &job in jobs {
            report += &format!("---- scontrol show job {job}\n{}\n", self.show(job).join("\n"));
        }
        let records = std::fs::read_to_string(self.log.join("jobcomp.txt")).unwrap_or_default();
        report += &format!("---- Slurm's records of ended jobs (jobcomp.txt)\n{records}");
        let mut outputs: Vec<PathBuf> = std::fs::read_dir(&self.submit_dir)
            .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_file()).collect())
            .unwrap_or_default();
        outputs.sort();
        for file in outputs {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| format!("(unreadable: {e})"));
            report += &format!("---- {}\n{text}\n", file.display());
        }
        let log = std::fs::read_to_string(self.log.join("slurmctld.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        report +=
            &format!("---- last lines of slurmctld.log\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        report
    }

    /// Wait until `merge` has ended: it runs only once every task of `array` has succeeded (afterok), and stays
    /// pending for ever if one failed, which fails the test at once. Panics with the report past `JOBS_TIMEOUT`.
    fn wait_for_merge(&self, array: u32, merge: u32, since: Instant) -> String {
        loop {
            let states = self.states(merge);
            let (state, reason) = states.first().cloned().unwrap_or_default();
            if ENDED.contains(&state.as_str()) {
                return state;
            }
            if reason == "DependencyNeverSatisfied" {
                panic!("an array task failed, so the merge will never run:\n{}", self.report(&[array, merge]));
            }
            // Pending for a reason that never passes (a request the node cannot meet, a launch that failed).
            if let Some((_, why)) = self
                .states(array)
                .into_iter()
                .find(|(state, why)| state == "PENDING" && NEVER.iter().any(|never| why.contains(never)))
            {
                panic!("the array can never run (pending: {why}):\n{}", self.report(&[array, merge]));
            }
            if since.elapsed() > JOBS_TIMEOUT {
                panic!(
                    "the array and its merge did not end within {JOBS_TIMEOUT:?} (merge: {state} {reason}):\n{}",
                    self.report(&[array, merge])
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// A field `NAME=value` of an `scontrol -o` line.
fn field(line: &str, name: &str) -> String {
    let prefix = format!("{name}=");
    line.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).unwrap_or("").to_string()
}

/// The files below `dir`, as paths relative to it, sorted.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![];
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_study_run_as_a_slurm_job_array_merges_into_the_bytes_of_the_study_run_whole() {
    let test = "a_study_run_as_a_slurm_job_array_merges_into_the_bytes_of_the_study_run_whole";
    if let Some(why) = missing_capability() {
        cosched_runtime::testing::say_skipped(test, &why);
        return;
    }
    // Removed after the Slurm below has stopped (and its jobs with it): locals drop in reverse order.
    let work = tempfile::Builder::new().prefix("cosched-study-array-").tempdir().unwrap();
    // Short (Slurm's sockets live in it), mode 0700, removed by `SlurmInstance` once stopped.
    let slurm_dir = tempfile::Builder::new().prefix("cosched-slurm-").tempdir().unwrap().keep();
    let script = Path::new(REPO).join("scripts/slurm");
    let slurm = SlurmInstance::start(&script, &slurm_dir, SlurmSetup::Gang).unwrap_or_else(|e| {
        let _ = std::fs::remove_dir_all(&slurm_dir);
        panic!("starting the private Slurm: {e}")
    });
    let submit_dir = work.path().join("submit");
    std::fs::create_dir(&submit_dir).unwrap();
    let cluster = Cluster {
        _slurm: slurm,
        conf: slurm_dir.join("slurm.conf"),
        log: slurm_dir.join("log"),
        submit_dir,
        results: work.path().join("results"),
    };

    // The array as the docs submit it, at the script's own defaults (one CPU per task unless told otherwise),
    // then the merge that depends on it. sbatch passes COSCHED and STUDY_RESULTS on to the jobs.
    let submitted = Instant::now();
    let array_script = Path::new(REPO).join("scripts/study-array.sbatch");
    let array_flag = format!("--array=1-{TASKS}");
    let array = cluster.sbatch(&[&[array_flag.as_str(), array_script.to_str().unwrap()], &STUDY[..]].concat());
    let study = format!("study-{}", STUDY[0]);
    let merge_command =
        format!("\"$COSCHED\" study merge \"$STUDY_RESULTS\"/{study}/shard-* --out \"$STUDY_RESULTS\"/{study}/merged");
    let dependency = format!("--dependency=afterok:{array}");
    let merge = cluster.sbatch(&[&dependency, "--job-name=cosched-merge", "--wrap", &merge_command]);
    let state = cluster.wait_for_merge(array, merge, submitted);
    let report = || cluster.report(&[array, merge]);
    assert_eq!(state, "COMPLETED", "the merge job:\n{}", report());
    let tasks = cluster.show(array);
    assert_eq!(tasks.len(), TASKS as usize, "one line per array task:\n{}", report());
    for task in &tasks {
        assert_eq!((field(task, "JobState"), field(task, "ExitCode")), ("COMPLETED".into(), "0:0".into()), "{task}");
    }
    eprintln!("array {array} and merge {merge} ended in {:.1} s", submitted.elapsed().as_secs_f64());
    let results = cluster.results.join(&study);
    for i in 1..=TASKS {
        assert!(results.join(format!("shard-{i}/shard.json")).is_file(), "shard {i} missing:\n{}", report());
    }

    // The same study run whole, here, by the same binary: every file the same, byte for byte, and no other.
    let whole = work.path().join("whole");
    let out = Command::new(COSCHED)
        .arg("study")
        .args(STUDY)
        .args(["--quiet", "--out", whole.to_str().unwrap()])
        .output()
        .expect("cosched runs");
    assert!(out.status.success(), "the study run whole: {}", String::from_utf8_lossy(&out.stderr));
    let merged = results.join("merged");
    let files = files_below(&whole);
    assert_eq!(files, files_below(&merged), "the files of {} and {}", whole.display(), merged.display());
    for name in ["runs.csv", "points.csv", "table.md", "manifest.json"] {
        assert!(files.contains(&PathBuf::from(name)), "{name} missing from the study's files {files:?}");
    }
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "png")), "no figure in {files:?}");
    for file in &files {
        let (a, b) = (std::fs::read(whole.join(file)).unwrap(), std::fs::read(merged.join(file)).unwrap());
        assert!(a == b, "{} differs between the study run whole and the merged array", file.display());
    }
}
