//! How often the copies of a run use the CPUs at the same moment: the overlap
//! between gangs that a gang scheduler exists to prevent.
//!
//! Every process a copy starts carries a marker in its environment
//! (`COPY_MARKER=<run>.<copy>`), inherited by its children and handed on by
//! Slurm to the job it runs, wherever in the process tree that lands. A thread
//! finds the marked processes by scanning /proc every `SCAN_PERIOD` and then
//! samples their states every few milliseconds: a copy "runs" when a thread of
//! one of its processes is runnable (state `R`: on a CPU or waiting for one)
//! and has not been asked to stop. A thread asked to stop (its cgroup asked to
//! freeze, as cosched does, or a stop signal pending, as Slurm sends) stays
//! runnable until it next gets a CPU, but runs no user code any more: on a
//! busy CPU that tail can last a whole short slice, and it would be counted
//! as overlap that no program ever sees. A sample
//! counts when at least two copies are still in the system; the overlap is the
//! share of those samples in which two or more copies ran.

use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that names a process's copy.
pub const COPY_MARKER: &str = "COSCHED_BENCH_COPY";

const SCAN_PERIOD: Duration = Duration::from_millis(100);
/// Samples come every 10 to 20 ms, never in step with clock-aligned slices. Each wakes on a CPU the copies
/// share and may end a copy's turn between ticks: every 2 to 4 ms (as before 2026-11-27) that changed what spinning
/// programs measured (docs/reproduction-real.md, "What the bench itself does to the node").
const SAMPLE_PERIOD_MIN_US: u64 = 10_000;
const SAMPLE_PERIOD_SPREAD_US: u64 = 10_000;

/// The samples of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OverlapCount {
    /// Samples taken while two or more copies were still in the system.
    pub contended: u64,
    /// Of those, samples in which two or more copies had a runnable process.
    pub overlapping: u64,
    /// Of those, samples in which some copy had two runnable threads on one CPU's run queue (two of its
    /// ranks or threads, or one and its launcher): a copy's tasks sharing a CPU (what placement by the
    /// kernel can do).
    pub colocated: u64,
}

impl OverlapCount {
    /// The share of contended samples that overlapped (`None`: never contended).
    pub fn fraction(&self) -> Option<f64> {
        (self.contended > 0).then(|| self.overlapping as f64 / self.contended as f64)
    }

    /// The share of contended samples in which a copy's tasks shared a CPU (`None`: never contended).
    pub fn colocated_fraction(&self) -> Option<f64> {
        (self.contended > 0).then(|| self.colocated as f64 / self.contended as f64)
    }

    fn add(&mut self, sample: SampleState) {
        if sample.alive >= 2 {
            self.contended += 1;
            self.overlapping += u64::from(sample.running >= 2);
            self.colocated += u64::from(sample.colocated);
        }
    }
}

/// One sample: copies with a live process, copies with a runnable thread, and whether a copy had two runnable
/// threads on one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SampleState {
    alive: usize,
    running: usize,
    colocated: bool,
}

/// The marker value of copy `index` of run `run`.
pub fn marker_value(run: &str, index: u32) -> String {
    format!("{run}.{index}")
}

/// A sampling thread, from `start` until `stop`.
pub struct OverlapSampler {
    stop: Arc<AtomicBool>,
    count: Arc<Mutex<OverlapCount>>,
    thread: std::thread::JoinHandle<()>,
}

impl OverlapSampler {
    /// Sample the processes marked with `run`'s copies.
    pub fn start(run: String) -> OverlapSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(Mutex::new(OverlapCount::default()));
        let (stop2, count2) = (stop.clone(), count.clone());
        let thread = std::thread::spawn(move || sample_until(&run, &stop2, &count2));
        OverlapSampler { stop, count, thread }
    }

    pub fn stop(self) -> OverlapCount {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        let count = *self.count.lock().unwrap_or_else(|p| p.into_inner());
        count
    }
}

fn sample_until(run: &str, stop: &AtomicBool, count: &Mutex<OverlapCount>) {
    let prefix = format!("{COPY_MARKER}={run}.");
    let mut processes = MarkedProcesses::default();
    let mut last_scan: Option<Instant> = None;
    let mut jitter = Jitter(0x9e37_79b9_7f4a_7c15);
    while !stop.load(Ordering::Relaxed) {
        if last_scan.is_none_or(|t| t.elapsed() >= SCAN_PERIOD) {
            processes.scan(&prefix);
            last_scan = Some(Instant::now());
        }
        let sample = processes.sample();
        count.lock().unwrap_or_else(|p| p.into_inner()).add(sample);
        std::thread::sleep(Duration::from_micros(SAMPLE_PERIOD_MIN_US + jitter.next() % SAMPLE_PERIOD_SPREAD_US));
    }
}

/// A marked process: its copy and its cgroup's `cgroup.freeze` (v2), read again at every scan.
struct Marked {
    copy: u32,
    freeze_file: Option<PathBuf>,
}

/// The marked processes found so far: pid → copy, and the processes known to be unmarked.
#[derive(Default)]
struct MarkedProcesses {
    copy_of: BTreeMap<i32, Marked>,
    /// (pid, start time, command name): a pid reused by a marked process, or a process that exec'd since (a
    /// child scanned between its fork and its exec still had its parent's environment), is looked at again.
    unmarked: BTreeSet<(i32, u64, String)>,
}

impl MarkedProcesses {
    fn scan(&mut self, prefix: &str) {
        let Ok(entries) = std::fs::read_dir("/proc") else { return };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if let Some(marked) = self.copy_of.get_mut(&pid) {
                marked.freeze_file = freeze_file_of(pid); // a launcher may have moved it since
                continue;
            }
            let Some(stat) = read_stat(pid) else { continue };
            let identity = (pid, stat.start_ticks, stat.command);
            if self.unmarked.contains(&identity) {
                continue;
            }
            match copy_in_environment(pid, prefix) {
                Some(Some(copy)) => {
                    self.copy_of.insert(pid, Marked { copy, freeze_file: freeze_file_of(pid) });
                }
                Some(None) => {
                    self.unmarked.insert(identity);
                }
                None => {} // read again at the next scan
            }
        }
    }

    /// The processes' states now; forgets the processes that are gone.
    fn sample(&mut self) -> SampleState {
        let mut alive = BTreeSet::new();
        // copy → the CPUs of its threads that may run user code now
        let mut cpus_of: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        self.copy_of.retain(|&pid, marked| match read_stat(pid) {
            Some(stat) if stat.state != 'Z' && stat.state != 'X' => {
                alive.insert(marked.copy);
                let cpus = runnable_cpus(pid, marked.freeze_file.as_deref());
                if !cpus.is_empty() {
                    cpus_of.entry(marked.copy).or_default().extend(cpus);
                }
                true
            }
            _ => false,
        });
        let colocated = cpus_of.values_mut().any(|cpus| {
            cpus.sort_unstable();
            cpus.windows(2).any(|pair| pair[0] == pair[1])
        });
        SampleState { alive: alive.len(), running: cpus_of.len(), colocated }
    }
}

/// The CPUs (the run queues) of the process's threads that may run user code now: runnable, its cgroup not
/// asked to freeze, no stop pending.
fn runnable_cpus(pid: i32, freeze_file: Option<&Path>) -> Vec<u32> {
    if freeze_file.is_some_and(|file| std::fs::read_to_string(file).is_ok_and(|v| v.trim() == "1")) {
        return Vec::new();
    }
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    threads
        .flatten()
        .filter_map(|thread| {
            let text = std::fs::read_to_string(thread.path().join("stat")).ok()?;
            let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
            // After the command: state is the first field, the CPU last run on (processor) the 37th.
            let cpu = fields.get(36)?.parse().ok()?;
            (*fields.first()? == "R" && !stop_pending(&thread.path())).then_some(cpu)
        })
        .collect()
}

#[cfg(test)]
fn runs_user_code(pid: i32, freeze_file: Option<&Path>) -> bool {
    !runnable_cpus(pid, freeze_file).is_empty()
}

/// Is a signal that will stop the thread pending: SIGSTOP, or SIGTSTP that the process does not catch?
fn stop_pending(thread_dir: &Path) -> bool {
    let Ok(status) = std::fs::read_to_string(thread_dir.join("status")) else { return false };
    let mask = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let bit = |signal: i32| 1u64 << (signal - 1);
    let pending = mask("SigPnd:").unwrap_or(0) | mask("ShdPnd:").unwrap_or(0);
    let caught = mask("SigCgt:").unwrap_or(0);
    let (stop, tstp) = (bit(Signal::SIGSTOP as i32), bit(Signal::SIGTSTP as i32));
    pending & stop != 0 || (pending & tstp != 0 && caught & tstp == 0)
}

/// The `cgroup.freeze` file of the process's v2 cgroup (`None`: no v2 hierarchy, or the root cgroup).
fn freeze_file_of(pid: i32) -> Option<PathBuf> {
    static V2_MOUNT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let mount = V2_MOUNT.get_or_init(|| {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let line = mountinfo.lines().find(|l| l.contains(" - cgroup2 "))?;
        Some(PathBuf::from(line.split_whitespace().nth(4)?))
    });
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::/"))?;
    (!path.is_empty()).then(|| mount.as_ref().map(|m| m.join(path).join("cgroup.freeze")))?
}

struct Stat {
    state: char,
    start_ticks: u64,
    /// The name of what it runs, which changes when it execs another program.
    command: String,
}

fn read_stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let (open, close) = (text.find('(')?, text.rfind(')')?);
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        start_ticks: fields.get(19)?.parse().ok()?,
        command: text.get(open + 1..close)?.to_string(),
    })
}

/// The copy named in the process's environment by a marker that starts with `prefix`.
/// `None` when the environment cannot be read or reads empty, as it does for
/// a moment while the process execs: it is not known unmarked yet.
fn copy_in_environment(pid: i32, prefix: &str) -> Option<Option<u32>> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok().filter(|e| !e.is_empty())?;
    Some(
        environ
            .split(|&b| b == 0)
            .find_map(|entry| std::str::from_utf8(entry).ok()?.strip_prefix(prefix)?.parse().ok()),
    )
}

/// A small xorshift generator: the sampling period's spread needs no quality, only no period in step with slices.
struct Jitter(u64);

impl Jitter {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn only_samples_with_two_copies_alive_count() {
        let mut count = OverlapCount::default();
        let state = |alive, running, colocated| SampleState { alive, running, colocated };
        count.add(state(1, 1, true));
        count.add(state(2, 1, true));
        count.add(state(3, 2, false));
        count.add(state(2, 0, false));
        assert_eq!(count, OverlapCount { contended: 3, overlapping: 1, colocated: 1 });
        assert_eq!(count.colocated_fraction(), Some(1.0 / 3.0));
        assert_eq!(OverlapCount::default().fraction(), None);
    }

    /// Two marked spinning processes overlap when the machine lets them; a marked sleeper never runs.
    #[test]
    fn marked_processes_are_found_and_their_states_read() {
        let run = format!("test-{}", std::process::id());
        let spawn = |index: u32, script: &str| {
            Command::new("sh")
                .args(["-c", script])
                .env(COPY_MARKER, marker_value(&run, index))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        };
        let mut sleeper = spawn(0, "exec sleep 30");
        let mut spinner = spawn(1, "while :; do :; done");
        let mut found = MarkedProcesses::default();
        // A scan may land while the sleeper's shell execs `sleep`, when its
        // environment reads empty: the next scan finds it.
        let mut copies = BTreeSet::new();
        for _ in 0..500 {
            found.scan(&format!("{COPY_MARKER}={run}."));
            copies = found.copy_of.values().map(|m| m.copy).collect();
            if copies.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let alive = found.sample().alive;
        for child in [&mut sleeper, &mut spinner] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert_eq!(copies, BTreeSet::from([0, 1]));
        assert_eq!(alive, 2);
        assert_eq!(found.sample(), SampleState::default(), "the killed processes are forgotten");
    }

    /// Two spinning processes of one copy on one CPU are co-located; on two CPUs they are not.
    #[test]
    fn a_copys_threads_on_one_cpu_are_seen_colocated() {
        let cpus = crate::os::allowed_cpus().unwrap();
        if cpus.len() < 2 {
            let why = "needs two CPUs, this process may use one";
            cosched_runtime::testing::say_skipped("a_copys_threads_on_one_cpu_are_seen_colocated", why);
            return;
        }
        let colocated_on = |first: usize, second: usize| {
            let run = format!("colocated-{}-{first}-{second}", std::process::id());
            let spawn = |cpu: usize| {
                Command::new("taskset")
                    .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
                    .env(COPY_MARKER, marker_value(&run, 0))
                    .spawn()
                    .unwrap()
            };
            let mut spinners = [spawn(first), spawn(second)];
            let mut found = MarkedProcesses::default();
            let mut seen = SampleState::default();
            for _ in 0..500 {
                found.scan(&format!("{COPY_MARKER}={run}."));
                seen = found.sample();
                // Both found and both runnable: each spinner is on its CPU's run queue.
                if found.copy_of.len() == 2 && seen.running == 1 && (seen.colocated || first != second) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            for child in &mut spinners {
                child.kill().unwrap();
                child.wait().unwrap();
            }
            seen.colocated
        };
        assert!(colocated_on(cpus[0], cpus[0]));
        assert!(!colocated_on(cpus[0], cpus[1]));
    }

    /// A spinning process may run user code; once stopped it may not, though it still exists.
    #[test]
    fn a_stopped_process_does_not_run() {
        let mut spinner = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let pid = spinner.id() as i32;
        let running = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            runs_user_code(pid, None)
        });
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let stopped = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            read_stat(pid).is_some_and(|s| s.state == 'T')
        });
        let runs_when_stopped = runs_user_code(pid, None);
        spinner.kill().unwrap();
        spinner.wait().unwrap();
        assert!(running && stopped, "the spinner was seen runnable ({running}) and then stopped ({stopped})");
        assert!(!runs_when_stopped);
    }
}
