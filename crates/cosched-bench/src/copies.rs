//! Running `j` copies of a command at the same moment and timing each.
//!
//! Each copy starts as `sh -c 'read _ && exec "$@"'`, held on its stdin
//! until every copy exists (and, under cosched, has been moved into its job's
//! cgroup, so its children are born inside it). Then all are released in one
//! pass and waited for. The copies are children of this process, so the CPU
//! time of everything they ran is in `getrusage(RUSAGE_CHILDREN)`. Each copy's
//! environment marks it, so the processes it starts anywhere (under Slurm too)
//! can be told apart (`crate::overlap`).
//!
//! Each copy also gets its own empty `TMPDIR`, a fresh folder in this process's
//! temporary folder, removed when the run ends: copies share no scratch files,
//! as jobs with per-job temporary folders do. Open MPI 4's `mpirun` needs it:
//! it keeps its session in `$TMPDIR/ompi.<host>.<uid>`, and two launchers of one
//! user started in the same instant race to create that folder, and one fails
//! with "mkdir ... File exists" (open-mpi/ompi#8510).

use crate::overlap::{marker_value, OverlapCount, OverlapSampler, COPY_MARKER};
use cosched_runtime::trusted_source::CheckedCommand;
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one run of `j` copies measured.
#[derive(Debug, Clone)]
pub struct CopiesRun {
    /// From release to the end of the last copy.
    pub elapsed_s: f64,
    /// From release to the end of each copy.
    pub copy_elapsed_s: Vec<f64>,
    /// User + system time of all copies and their descendants.
    pub cpu_s: f64,
    /// Largest summed resident memory of each copy's process tree, sampled.
    pub peak_rss_bytes: Option<u64>,
    /// How often two or more copies ran at once (`crate::overlap`); `None` for a single copy.
    pub overlap: Option<OverlapCount>,
}

/// How a copy's process is started, before the hold is released.
pub struct CopySpec<'a> {
    /// What each copy runs; as root, checked for root to run (`CheckedCommand`), with the environment it gives.
    pub command: &'a CheckedCommand,
    pub log_dir: &'a Path,
    pub timeout: Duration,
    pub sample_memory: bool,
    /// Set to stop: the copies are killed and the run fails.
    pub stop: &'a AtomicBool,
}

struct HeldCopy {
    child: Child,
    stderr_log: PathBuf,
    /// The copy's `TMPDIR`; removed when the copy is dropped.
    _scratch: tempfile::TempDir,
}

/// Run `count` copies; `before_release` is called with each copy's pid (to
/// register it with a scheduler) before any is released.
pub fn run_copies(
    spec: &CopySpec,
    count: u32,
    mut before_release: impl FnMut(u32) -> Result<(), String>,
) -> Result<CopiesRun, String> {
    let run = new_run_name()?;
    refuse_if_sigchld_ignored()?;
    let mut held = Vec::new();
    for index in 0..count {
        held.push(spawn_held(spec, &run, index)?);
    }
    for copy in &held {
        if let Err(e) = before_release(copy.child.id()) {
            kill_all(&mut held);
            return Err(e);
        }
    }
    let ended = match start_waiters(&held) {
        Ok(ended) => ended,
        Err(e) => {
            kill_all(&mut held);
            return Err(e);
        }
    };
    let cpu_before_s = children_cpu_s();
    let roots: Vec<u32> = held.iter().map(|c| c.child.id()).collect();
    let sampler = spec.sample_memory.then(|| MemorySampler::start(roots));
    let overlap_sampler = (count >= 2).then(|| OverlapSampler::start(run.clone()));
    let start = Instant::now();
    for copy in &mut held {
        if let Some(mut stdin) = copy.child.stdin.take() {
            // A copy that died already shows up when it is waited for.
            let _ = stdin.write_all(b"go\n");
        }
    }
    let ends = wait_all(&mut held, &ended, start, spec);
    let peak_rss_bytes = sampler.map(MemorySampler::stop);
    let overlap = overlap_sampler.map(OverlapSampler::stop);
    let ends = ends?;
    let cpu_s = children_cpu_s() - cpu_before_s;
    check_exits(&held, &ends)?;
    let copy_elapsed_s: Vec<f64> = ends.iter().map(|(t, _)| *t).collect();
    let elapsed_s = copy_elapsed_s.iter().copied().fold(0.0, f64::max);
    Ok(CopiesRun { elapsed_s, copy_elapsed_s, cpu_s, peak_rss_bytes, overlap })
}

/// A name for this run's copy markers, unique on the machine, with a random
/// part: another user's process cannot carry a marker it cannot guess (nor
/// read ours: /proc/PID/environ is its owner's), so it cannot join a run's
/// overlap count.
fn new_run_name() -> Result<String, String> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let mut nonce = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut nonce))
        .map_err(|e| format!("reading /dev/urandom for a run's name: {e}"))?;
    Ok(format!("{}-{}-{:016x}", std::process::id(), RUNS.fetch_add(1, Ordering::Relaxed), u64::from_le_bytes(nonce)))
}

fn spawn_held(spec: &CopySpec, run: &str, index: u32) -> Result<HeldCopy, String> {
    let stdout_log = spec.log_dir.join(format!("copy-{index}.out"));
    let stderr_log = spec.log_dir.join(format!("copy-{index}.err"));
    let create = |p: &Path| std::fs::File::create(p).map_err(|e| format!("creating {}: {e}", p.display()));
    let scratch = tempfile::Builder::new()
        .prefix(&format!("cosched-copy-{index}-"))
        .tempdir()
        .map_err(|e| format!("creating copy {index}'s TMPDIR in {}: {e}", std::env::temp_dir().display()))?;
    let child = spec
        .command
        .apply_environment(&mut Command::new("/bin/sh"))
        .arg("-c")
        .arg("read _ && exec \"$@\"")
        .arg("cosched-copy")
        .args(spec.command.argv())
        .env(COPY_MARKER, marker_value(run, index))
        .env("TMPDIR", scratch.path())
        .stdin(Stdio::piped())
        .stdout(create(&stdout_log)?)
        .stderr(create(&stderr_log)?)
        // Its own process group, so a timeout can kill everything it started.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting sh for {:?}: {e}", spec.command.argv()))?;
    Ok(HeldCopy { child, stderr_log, _scratch: scratch })
}

/// Threads that each sleep in `waitid` until one copy ends, without reaping it, and send its index, the instant
/// and how the wait went. No poll wakes on the CPUs the copies share: a wake there every 2 ms (as before
/// 2026-11-27) ended their turns between ticks and sped up programs that spin.
fn start_waiters(held: &[HeldCopy]) -> Result<mpsc::Receiver<CopyEnded>, String> {
    let (ended_tx, ended_rx) = mpsc::channel();
    for (index, copy) in held.iter().enumerate() {
        let pid = nix::unistd::Pid::from_raw(copy.child.id() as i32);
        let ended = ended_tx.clone();
        std::thread::Builder::new()
            .name("copy-wait".into())
            .spawn(move || {
                let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
                let outcome = loop {
                    match waitid(Id::Pid(pid), flags) {
                        Err(nix::errno::Errno::EINTR) => continue,
                        outcome => break outcome.map(drop),
                    }
                };
                let _ = ended.send(CopyEnded { index, at: Instant::now(), outcome });
            })
            .map_err(|e| format!("starting a thread to wait for copy {index}: {e}"))?;
    }
    Ok(ended_rx)
}

struct CopyEnded {
    index: usize,
    at: Instant,
    outcome: nix::Result<()>,
}

/// Wait for every copy; returns each one's end (seconds since `start`) and exit status. On any error every copy is
/// killed.
fn wait_all(
    held: &mut [HeldCopy],
    ended: &mpsc::Receiver<CopyEnded>,
    start: Instant,
    spec: &CopySpec,
) -> Result<Vec<(f64, ExitStatus)>, String> {
    let result = wait_for_ends(held.len(), ended, start, spec).and_then(|ends| {
        end_what_they_left(held);
        reap(held, ends)
    });
    if result.is_err() {
        kill_all(held);
    }
    result
}

/// A copy's run ends with it: whatever it left running in its process group (a background child, a daemon
/// that kept the group) is killed before the copies are reaped, while each group is still its copy's, so it
/// neither outlives the bench as root nor holds a registered job's cgroup into the next run. (A process that
/// left the group with `setsid` is out of reach here; under local and gang scheduling the job's cgroup still
/// holds it.)
fn end_what_they_left(held: &[HeldCopy]) {
    for copy in held {
        let group = nix::unistd::Pid::from_raw(-(copy.child.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// The copies' waits and kills rely on each copy staying a zombie until reaped. A process that ignores SIGCHLD
/// (inherited: some launchers pass it on) has the kernel reap its children at once: the waits would fail and a
/// kill could reach a pid another process has taken. So such a bench refuses to start.
fn refuse_if_sigchld_ignored() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    if ignores_sigchld(&status) {
        return Err("this process ignores SIGCHLD (its parent left it so): the copies would be reaped before they \
                    could be waited for; run it from a shell that does not ignore SIGCHLD"
            .into());
    }
    Ok(())
}

/// Whether `/proc/PID/status` text says SIGCHLD (17) is ignored (`SigIgn`, a hexadecimal mask, bit 16).
fn ignores_sigchld(status: &str) -> bool {
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).map(str::trim);
    mask.and_then(|m| u64::from_str_radix(m, 16).ok()).is_some_and(|m| m & (1 << 16) != 0)
}

fn wait_for_ends(
    count: usize,
    ended: &mpsc::Receiver<CopyEnded>,
    start: Instant,
    spec: &CopySpec,
) -> Result<Vec<f64>, String> {
    let mut ends: Vec<Option<f64>> = vec![None; count];
    while ends.iter().any(Option::is_none) {
        match ended.recv_timeout(STOP_CHECK_PERIOD) {
            Ok(CopyEnded { index, outcome: Err(e), .. }) => return Err(format!("waiting for copy {index}: {e}")),
            Ok(CopyEnded { index, at, outcome: Ok(()) }) => ends[index] = Some((at - start).as_secs_f64()),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err("the copies' waiting threads ended early".into()),
        }
        if start.elapsed() > spec.timeout {
            return Err(format!(
                "the copies were still running after the {:.0} s timeout; killed",
                spec.timeout.as_secs_f64()
            ));
        }
        if spec.stop.load(Ordering::Relaxed) {
            return Err("interrupted; the copies were killed".into());
        }
    }
    Ok(ends.into_iter().flatten().collect())
}

/// Reap the copies once all have ended: until then each is a zombie, so its pid and process group cannot be
/// reused, and `kill_all` signals only the copies' own groups.
fn reap(held: &mut [HeldCopy], ends: Vec<f64>) -> Result<Vec<(f64, ExitStatus)>, String> {
    let reaped = held.iter_mut().zip(ends).enumerate().map(|(index, (copy, at))| {
        copy.child.wait().map(|status| (at, status)).map_err(|e| format!("reaping copy {index}: {e}"))
    });
    reaped.collect()
}

fn check_exits(held: &[HeldCopy], ends: &[(f64, ExitStatus)]) -> Result<(), String> {
    for (index, (copy, (_, status))) in held.iter().zip(ends).enumerate() {
        if !status.success() {
            let stderr = std::fs::read_to_string(&copy.stderr_log).unwrap_or_default();
            let how = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                _ => "failed".into(),
            };
            return Err(format!(
                "copy {index} {how}; its stderr ({}) ends with:\n{}",
                copy.stderr_log.display(),
                crate::runtime::tail(&stderr, 1500)
            ));
        }
    }
    Ok(())
}

/// The first copy's standard output, for programs that report their own figures.
pub fn first_copy_stdout(log_dir: &Path) -> String {
    std::fs::read_to_string(log_dir.join("copy-0.out")).unwrap_or_default()
}

fn kill_all(held: &mut [HeldCopy]) {
    for copy in held.iter_mut() {
        let pgid = nix::unistd::Pid::from_raw(-(copy.child.id() as i32));
        let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = copy.child.kill();
        let _ = copy.child.wait();
    }
}

fn children_cpu_s() -> f64 {
    crate::os::children_user_sys_s().map_or(0.0, |(user, sys)| user + sys)
}

/// Samples the resident memory of the copies' process trees every 100 ms (few wakes on the copies' CPUs).
struct MemorySampler {
    stop: Arc<AtomicBool>,
    peak_bytes: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

const MEMORY_SAMPLE_PERIOD: Duration = Duration::from_millis(100);
/// How often the wait for the copies looks at the timeout and at Ctrl-C.
const STOP_CHECK_PERIOD: Duration = Duration::from_millis(100);

impl MemorySampler {
    fn start(roots: Vec<u32>) -> MemorySampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_bytes = Arc::new(AtomicU64::new(0));
        let (stop2, peak2) = (stop.clone(), peak_bytes.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                peak2.fetch_max(tree_rss_bytes(&roots), Ordering::Relaxed);
                std::thread::sleep(MEMORY_SAMPLE_PERIOD);
            }
        });
        MemorySampler { stop, peak_bytes, thread }
    }

    /// The largest sum seen (one job's peak when there is one copy).
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak_bytes.load(Ordering::Relaxed)
    }
}

/// Sum of VmRSS over `roots` and all their descendants.
fn tree_rss_bytes(roots: &[u32]) -> u64 {
    let mut parent_of: BTreeMap<u32, u32> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if let Some(ppid) = read_ppid(pid) {
            parent_of.insert(pid, ppid);
        }
    }
    let in_tree = |mut pid: u32| {
        for _ in 0..64 {
            if roots.contains(&pid) {
                return true;
            }
            match parent_of.get(&pid) {
                Some(&parent) if parent > 1 => pid = parent,
                _ => return false,
            }
        }
        false
    };
    parent_of.keys().filter(|&&pid| in_tree(pid)).map(|&pid| rss_bytes(pid)).sum()
}

fn read_ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(1)?.parse().ok()
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies released together each see their own empty TMPDIR, and the folders are gone after the run.
    #[test]
    fn a_process_ignoring_sigchld_is_told_apart() {
        assert!(ignores_sigchld("Name:\tx\nSigIgn:\t0000000000010000\nSigCgt:\t0\n"));
        assert!(!ignores_sigchld("SigIgn:\t0000000000001000\n"));
        assert!(!ignores_sigchld("SigIgn:\tzz\n"));
        assert!(!ignores_sigchld(""));
    }

    #[test]
    fn each_copy_has_its_own_empty_tmpdir_removed_after_the_run() {
        let logs = tempfile::tempdir().unwrap();
        let argv: Vec<String> =
            ["sh", "-c", r#"printf '%s %s' "$TMPDIR" "$(ls -A "$TMPDIR" | wc -l)"; touch "$TMPDIR/mine""#]
                .map(String::from)
                .into();
        let stop = AtomicBool::new(false);
        // The copies run in a fresh folder of this user's: as root, the folder is checked with all it holds.
        let cwd = tempfile::tempdir().unwrap();
        let command = CheckedCommand::check(&argv, cwd.path(), "test").unwrap();
        let spec = CopySpec {
            command: &command,
            log_dir: logs.path(),
            timeout: Duration::from_secs(120),
            sample_memory: false,
            stop: &stop,
        };
        run_copies(&spec, 3, |_| Ok(())).unwrap();
        let seen: Vec<String> =
            (0..3).map(|i| std::fs::read_to_string(logs.path().join(format!("copy-{i}.out"))).unwrap()).collect();
        let dirs: std::collections::BTreeSet<&str> = seen.iter().map(|s| s.split(' ').next().unwrap()).collect();
        assert_eq!(dirs.len(), 3, "one TMPDIR per copy: {seen:?}");
        assert!(seen.iter().all(|line| line.ends_with(" 0")), "each TMPDIR starts empty: {seen:?}");
        for dir in dirs {
            assert!(!Path::new(dir).exists(), "{dir} is removed after the run");
        }
    }
}
