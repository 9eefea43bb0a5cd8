//! The switch benchmark (`cosched bench switch`): gang-switch latency, overlap, throughput against no switching, and slice-start skew
//! between agents, measured on this machine with real job cgroups, the real freezer and real CPU-bound processes.
//!
//! The jobs' processes are this binary in the hidden mode `__spin <file>`: a fixed unit of integer work in a loop
//! that publishes its iteration count to `<file>` every 2^20 iterations. The skew measurement runs separate agent
//! processes, this binary in the hidden mode `__bench-agent <spec JSON>`, each with its own jobs and switcher.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use crate::switch_trace::{self, summarize_attribution, Recording, TraceSummary};
use cosched_runtime::agent::freezer::{FreezerKind, JobGroups};
use cosched_runtime::agent::launch::{spawn_shim, LaunchSpec};
use cosched_runtime::agent::switcher::{check_slice_ns, realtime_ns, ConfirmWait, SwitchStats, Switcher};
use cosched_runtime::controller::skew::{summarize, SliceStartSkew, Summary};
use cosched_runtime::wire::protocol::Schedule;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Iterations between two readings of the clock by a spinner (a few µs of work, well under `SEGMENT_GAP_NS`).
const SPIN_CHECK: u64 = 1 << 12;
/// Iterations between two publications of a spinner's count.
const SPIN_CHUNK: u64 = 1 << 20;
/// A spinner that saw no clock reading of its own for this long was stopped in between: it ends a segment.
const SEGMENT_GAP_NS: u64 = 20_000;
/// Time after a change of configuration before a measurement window opens.
const SETTLE: Duration = Duration::from_millis(300);
/// How long the gangs may take to start counting.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The two jobs of the local measurements (and of every skew agent).
const JOBS: [u64; 2] = [1, 2];

/// How the benchmark runs (the flags of `cosched bench switch`).
#[derive(Clone, Debug)]
pub struct SwitchBenchSettings {
    /// Each measurement window (overlap, two baselines, one per slice, skew; one more with a trace).
    pub duration: Duration,
    /// Slice lengths of the throughput measurements, ms.
    pub slices_ms: Vec<u64>,
    /// Slice length of the overlap and skew measurements, ms.
    pub probe_slice_ms: u64,
    /// How jobs are stopped and started.
    pub freezer: FreezerKind,
    /// CPU-bound processes per job (two jobs).
    pub procs_per_job: u32,
    /// Agent processes of the skew measurement; fewer than 2 skips it.
    pub agents: u32,
    /// Switching threads in SCHED_FIFO, as the agent runs them.
    pub realtime: bool,
    pub confirm_wait: ConfirmWait,
    /// Switching threads, each on a CPU of its own.
    pub switching_threads: usize,
    /// Record the kernel's trace over one more window at the probe slice into this file.
    pub trace: Option<PathBuf>,
    /// With a trace: a confirmation or wake-up later than this counts as slow, µs.
    pub trace_slow_us: u64,
}

impl SwitchBenchSettings {
    /// The settings' own limits, checked before anything starts.
    pub fn check(&self) -> Result<(), String> {
        let duration_s = self.duration.as_secs_f64();
        if !(duration_s > 0.0 && duration_s <= 3600.0) {
            return Err("--duration-s must be in (0, 3600]".into());
        }
        for &slice_ms in self.slices_ms.iter().chain([&self.probe_slice_ms]) {
            check_slice_ns(slice_ms.saturating_mul(1_000_000))?;
        }
        if self.procs_per_job == 0 {
            return Err("--procs-per-job must be at least 1".into());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The CPU-bound job process.

/// Body of `cosched __spin <file>`: count iterations of a fixed unit of work forever, publishing the count as two
/// equal little-endian u64 (a reader that sees them differ caught a write half-done and reads again). It also
/// appends to `<file>.segments` every stretch of time it ran user code without a break of `SEGMENT_GAP_NS`, as two
/// little-endian u64 of CLOCK_MONOTONIC (first and last reading), for the overlap measurement. Exits when its
/// parent (the bench or agent) is gone, so a crashed bench leaves no spinning processes behind.
pub fn spin(file: &Path) -> Result<(), String> {
    let out = OpenOptions::new().write(true).create(true).truncate(false).open(file).map_err(|e| e.to_string())?;
    let mut segments =
        OpenOptions::new().append(true).create(true).open(segments_path(file)).map_err(|e| e.to_string())?;
    let parent = std::os::unix::process::parent_id();
    let (mut count, mut x) = (0u64, 1u64);
    let mut segment = [monotonic_ns(); 2];
    loop {
        for _ in 0..SPIN_CHUNK / SPIN_CHECK {
            for _ in 0..SPIN_CHECK {
                x = std::hint::black_box(
                    x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407),
                );
            }
            let now = monotonic_ns();
            if now - segment[1] > SEGMENT_GAP_NS {
                let mut record = [0u8; 16];
                record[..8].copy_from_slice(&segment[0].to_le_bytes());
                record[8..].copy_from_slice(&segment[1].to_le_bytes());
                std::io::Write::write_all(&mut segments, &record).map_err(|e| e.to_string())?;
                segment[0] = now;
            }
            segment[1] = now;
        }
        count += SPIN_CHUNK;
        let mut record = [0u8; 16];
        record[..8].copy_from_slice(&count.to_le_bytes());
        record[8..].copy_from_slice(&count.to_le_bytes());
        out.write_at(&record, 0).map_err(|e| e.to_string())?;
        if std::os::unix::process::parent_id() != parent {
            return Ok(());
        }
    }
}

fn segments_path(counter: &Path) -> PathBuf {
    counter.with_extension("segments")
}

/// CLOCK_MONOTONIC in ns, the clock every spinner process shares.
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The segments a spinner recorded that lie (at least in part) in `[from_ns, to_ns]`, clipped to it.
fn read_segments(counter: &Path, from_ns: u64, to_ns: u64) -> Vec<(u64, u64)> {
    let bytes = fs::read(segments_path(counter)).unwrap_or_default();
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    bytes
        .chunks_exact(16)
        .map(|r| (word(&r[..8]), word(&r[8..])))
        .filter(|&(start, end)| end > from_ns && start < to_ns)
        .map(|(start, end)| (start.max(from_ns), end.min(to_ns)))
        .collect()
}

/// The last count a spinner published (0 before its first).
fn read_count(path: &Path) -> u64 {
    for _ in 0..100 {
        let mut record = [0u8; 16];
        let Ok(len) = File::open(path).and_then(|mut f| f.read(&mut record)) else { return 0 };
        if len < 16 {
            return 0;
        }
        let (a, b) = record.split_at(8);
        if a == b {
            return u64::from_le_bytes(a.try_into().expect("8 bytes"));
        }
    }
    0
}

// ---------------------------------------------------------------------------------------------------------------
// Jobs of spinners, cleaned up on drop.

struct Gangs {
    groups: Arc<JobGroups>,
    jobs: Vec<u64>,
    children: Vec<Child>,
    counters: Vec<PathBuf>,
    scratch: PathBuf,
}

impl Gangs {
    /// Create the jobs' cgroups under agent `agent` and start `procs_per_job` spinners in each.
    fn start(agent: &str, kind: FreezerKind, procs_per_job: u32) -> Result<Gangs, String> {
        let groups = Arc::new(JobGroups::open(agent, Some(kind)).map_err(|e| e.to_string())?);
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        // Made new (mkdtemp): a fixed name in a directory every user may write could be another user's, or a link.
        let scratch = tempfile::Builder::new()
            .prefix(&format!("cosched-{agent}-"))
            .tempdir_in(&base)
            .map_err(|e| format!("a scratch folder in {}: {e}", base.display()))?
            .keep();
        let mut gangs = Gangs { groups, jobs: Vec::new(), children: Vec::new(), counters: Vec::new(), scratch };
        for job in JOBS {
            gangs.jobs.push(job);
            gangs.groups.create(job).map_err(|e| e.to_string())?;
            for rank in 0..procs_per_job {
                gangs.launch(job, rank)?;
            }
        }
        gangs.wait_counting()?;
        Ok(gangs)
    }

    fn launch(&mut self, job: u64, rank: u32) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?;
        let me = fs::metadata("/proc/self").map_err(|e| e.to_string())?;
        let counter = self.scratch.join(format!("job-{job}.{rank}"));
        let spec = LaunchSpec {
            procs_files: self.groups.procs_files(job),
            uid: me.uid(),
            gid: me.gid(),
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            argv: vec![exe.display().to_string(), "__spin".into(), counter.display().to_string()],
            open_files_soft_limit: None,
            files: None,
            umask: None,
        };
        let shim = spawn_shim(&exe, &spec, |command| {
            command.stdout(Stdio::null());
        });
        self.children.push(shim.map_err(|e| format!("cannot start a spinner of job {job}: {e}"))?.child);
        self.counters.push(counter);
        Ok(())
    }

    /// Wait until every spinner is in its job and has published a count.
    fn wait_counting(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let per_job = self.children.len() / self.jobs.len();
        loop {
            let members: usize = self.jobs.iter().map(|&j| self.groups.pids(j).map_or(0, |p| p.len())).sum();
            let counting = self.counters.iter().all(|c| read_count(c) > 0);
            if members == self.children.len() && counting {
                return Ok(());
            }
            if let Some((i, status)) =
                self.children.iter_mut().enumerate().find_map(|(i, c)| c.try_wait().ok().flatten().map(|s| (i, s)))
            {
                return Err(format!("spinner {i} of {per_job} per job exited at start: {status}"));
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(format!("spinners not all counting after {START_TIMEOUT:?} ({members} in their jobs)"));
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn iterations(&self) -> u64 {
        self.counters.iter().map(|c| read_count(c)).sum()
    }

    fn cpu_ns(&self) -> u64 {
        self.jobs.iter().map(|&j| self.groups.cpu_usage_ns(j).unwrap_or(0)).sum()
    }

    fn thaw_all(&self) -> Result<(), String> {
        self.jobs.iter().try_for_each(|&j| self.groups.thaw(j)).map_err(|e| e.to_string())
    }
}

impl Drop for Gangs {
    fn drop(&mut self) {
        let _ = self.thaw_all();
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for &job in &self.jobs {
            if let Err(e) = self.groups.remove(job) {
                eprintln!("cosched bench switch: {e}");
            }
        }
        if let Err(e) = self.groups.remove_agent_dirs() {
            eprintln!("cosched bench switch: {e}");
        }
        let _ = fs::remove_dir_all(&self.scratch);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// A switcher thread, stopped and joined on drop.

struct Switching {
    switcher: Arc<Switcher>,
    threads: Vec<JoinHandle<()>>,
}

/// How the bench's switching threads work (as an agent's would, from its settings).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct SwitchSettings {
    realtime: bool,
    confirm_wait: ConfirmWait,
    threads: usize,
}

impl SwitchSettings {
    fn from_settings(settings: &SwitchBenchSettings) -> SwitchSettings {
        SwitchSettings {
            realtime: settings.realtime,
            confirm_wait: settings.confirm_wait,
            threads: settings.switching_threads.max(1),
        }
    }
}

impl Switching {
    /// Rotate the two jobs, one per slot, every `slice_ns`.
    fn start(groups: &Arc<JobGroups>, slice_ns: u64, settings: SwitchSettings) -> Switching {
        let switcher = Arc::new(Switcher::new(groups.clone(), settings.confirm_wait));
        let schedule = Schedule {
            slice_ns,
            rows: JOBS.iter().map(|&j| vec![j]).collect(),
            always: vec![],
            jobs: JOBS.to_vec(),
            suspended: vec![],
        };
        switcher.set_schedule(schedule).expect("the settings' slices passed the switcher's bounds");
        let threads = switcher.start_threads(settings.threads, settings.realtime).expect("cannot start a thread");
        Switching { switcher, threads }
    }

    fn finish(mut self) -> SwitchStats {
        self.stop();
        self.switcher.stats()
    }

    fn stop(&mut self) {
        self.switcher.stop();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Switching {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a thread of this process runs in SCHED_FIFO (policy field 41 of `/proc/self/task/<tid>/stat` is 1).
fn has_fifo_thread() -> bool {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else { return false };
    tasks.flatten().any(|task| {
        let text = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let rest = text.rfind(')').map_or("", |i| &text[i + 1..]);
        rest.split_whitespace().nth(38) == Some("1")
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Throughput.

#[derive(Clone, Debug, Serialize)]
pub struct Window {
    pub wall_s: f64,
    pub iterations_per_s: f64,
    /// CPU time of both jobs over the window, in CPUs (2.0 = both CPUs of a 2-CPU machine all the time).
    pub cpus_used: f64,
    /// Share of the machine's CPU time the hypervisor gave to others over the window (`steal` of /proc/stat).
    pub steal: f64,
}

impl Window {
    /// Iterations per second of CPU time the jobs had.
    pub fn iterations_per_cpu_s(&self) -> f64 {
        self.iterations_per_s / self.cpus_used.max(f64::MIN_POSITIVE)
    }
}

fn measure_window(gangs: &Gangs, duration: Duration) -> Window {
    let ticks = crate::os::MachineCpuTicks::read().ok();
    let (start, iterations, cpu_ns) = (Instant::now(), gangs.iterations(), gangs.cpu_ns());
    thread::sleep(duration);
    let (end_iterations, end_cpu_ns) = (gangs.iterations(), gangs.cpu_ns());
    let machine = ticks.zip(crate::os::MachineCpuTicks::read().ok()).map(|(before, after)| after.since(&before));
    let wall_s = start.elapsed().as_secs_f64();
    Window {
        wall_s,
        iterations_per_s: end_iterations.saturating_sub(iterations) as f64 / wall_s,
        cpus_used: end_cpu_ns.saturating_sub(cpu_ns) as f64 / 1e9 / wall_s,
        steal: machine.map_or(0.0, |m| m.steal_s / m.all_s.max(f64::MIN_POSITIVE)),
    }
}

/// Where the time of a switch goes: from the slice boundary to the end of each phase.
#[derive(Clone, Debug, Serialize)]
pub struct Phases {
    /// The switching thread woke (the timer's and the scheduler's delay).
    pub woke: Summary,
    /// Every outgoing gang asked to stop.
    pub requested: Summary,
    /// The kernel confirmed them stopped, or the wait's bound passed.
    pub confirmed: Summary,
}

impl Phases {
    fn of(stats: &SwitchStats) -> Phases {
        Phases {
            woke: summarize(&stats.start_offset_ns),
            requested: summarize(&stats.requested_ns),
            confirmed: summarize(&stats.confirmed_ns),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SliceResult {
    pub slice_ms: u64,
    pub switches: u64,
    pub errors: u64,
    /// Switches that started the incoming gang before the outgoing one was confirmed stopped.
    pub late: u64,
    pub latency: Summary,
    pub phases: Phases,
    pub window: Window,
    /// Iterations per second over the mean of the two baselines.
    pub ratio: f64,
    /// Iterations per CPU-second of the jobs over the baselines': what switching costs the work itself, apart from
    /// the share of the machine the jobs get. Each task is a session of its own, so on a machine with other work
    /// the kernel's autogroups give a gang that has half its tasks stopped a smaller share, and `ratio` falls with
    /// the other work's load while this one does not (docs/performance.md, "Switching").
    pub ratio_per_cpu: f64,
    #[serde(skip)]
    pub latency_ns: Vec<u64>,
}

fn measure_slice(gangs: &Gangs, slice_ms: u64, duration: Duration, switch: SwitchSettings) -> SliceResult {
    let switching = Switching::start(&gangs.groups, slice_ms * 1_000_000, switch);
    thread::sleep(SETTLE);
    let window = measure_window(gangs, duration);
    let stats = switching.finish();
    eprintln!("slice {slice_ms} ms: {:.1} M iterations/s, {} switches", window.iterations_per_s / 1e6, stats.switches);
    SliceResult {
        slice_ms,
        switches: stats.switches,
        errors: stats.errors,
        late: stats.late,
        latency: summarize(&stats.latency_ns),
        phases: Phases::of(&stats),
        window,
        ratio: 0.0,
        ratio_per_cpu: 0.0,
        latency_ns: stats.latency_ns.into(),
    }
}

fn measure_baseline(gangs: &Gangs, duration: Duration) -> Result<Window, String> {
    gangs.thaw_all()?;
    thread::sleep(SETTLE);
    let window = measure_window(gangs, duration);
    eprintln!("no switching: {:.1} M iterations/s", window.iterations_per_s / 1e6);
    Ok(window)
}

// ---------------------------------------------------------------------------------------------------------------
// Overlap: did the two gangs ever run user code at the same time? Read from the spinners' own records of when they
// ran (`spin`), not from process states: a task the kernel was asked to stop may show as runnable while it runs
// no user code (it is on its way to the freezer's trap).

#[derive(Clone, Debug, Default, Serialize)]
pub struct Overlap {
    pub slice_ms: u64,
    pub window_s: f64,
    /// Time each gang ran user code (any of its processes), in ns: the measurement saw both gangs run.
    pub ran_ns: [u64; 2],
    /// Stretches longer than `SEGMENT_GAP_NS` in which both gangs ran user code, and their total time. Shorter
    /// stretches are not conclusive: a process may pause that long between two of its clock readings.
    pub overlaps: u64,
    pub overlap_ns: u64,
    pub switches: u64,
    pub late: u64,
    pub latency: Summary,
}

/// The union of the segments of a gang's spinners, sorted and merged.
fn gang_segments(gangs: &Gangs, job_index: usize, from_ns: u64, to_ns: u64) -> Vec<(u64, u64)> {
    let per_job = gangs.counters.len() / gangs.jobs.len();
    let counters = &gangs.counters[job_index * per_job..(job_index + 1) * per_job];
    let mut all: Vec<(u64, u64)> = counters.iter().flat_map(|c| read_segments(c, from_ns, to_ns)).collect();
    all.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (start, end) in all {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The stretches where two sorted, disjoint lists of segments intersect.
fn intersections(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<u64> {
    let (mut i, mut j, mut found) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let (start, end) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if start < end {
            found.push(end - start);
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    found
}

fn measure_overlap(
    gangs: &Gangs,
    slice_ms: u64,
    duration: Duration,
    switch: SwitchSettings,
) -> Result<Overlap, String> {
    let switching = Switching::start(&gangs.groups, slice_ms * 1_000_000, switch);
    thread::sleep(SETTLE);
    let from_ns = monotonic_ns();
    thread::sleep(duration);
    let to_ns = monotonic_ns();
    let stats = switching.finish();
    let (a, b) = (gang_segments(gangs, 0, from_ns, to_ns), gang_segments(gangs, 1, from_ns, to_ns));
    let both = intersections(&a, &b);
    let total = |segments: &[(u64, u64)]| segments.iter().map(|(s, e)| e - s).sum::<u64>();
    let conclusive: Vec<u64> = both.into_iter().filter(|&d| d > SEGMENT_GAP_NS).collect();
    let overlap = Overlap {
        slice_ms,
        window_s: (to_ns - from_ns) as f64 / 1e9,
        ran_ns: [total(&a), total(&b)],
        overlaps: conclusive.len() as u64,
        overlap_ns: conclusive.iter().sum(),
        switches: stats.switches,
        late: stats.late,
        latency: summarize(&stats.latency_ns),
    };
    if overlap.ran_ns.contains(&0) {
        return Err(format!("a gang never ran during the overlap window: {:?} ns", overlap.ran_ns));
    }
    eprintln!(
        "overlap at {slice_ms} ms: {} stretches of user code of both gangs ({} late switches)",
        overlap.overlaps, overlap.late
    );
    Ok(overlap)
}

// ---------------------------------------------------------------------------------------------------------------
// Skew between agent processes.

#[derive(Debug, Serialize, Deserialize)]
struct AgentSpec {
    name: String,
    freezer: FreezerKind,
    slice_ns: u64,
    start_realtime_ns: u64,
    duration_ns: u64,
    switch: SwitchSettings,
}

#[derive(Debug, Serialize, Deserialize)]
struct AgentReport {
    start_offset_ns: Vec<u64>,
    slice_numbers: Vec<u64>,
    latency_ns: Vec<u64>,
    errors: u64,
    fifo: bool,
}

fn sleep_until_realtime_ns(at_ns: u64) {
    thread::sleep(Duration::from_nanos(at_ns.saturating_sub(realtime_ns())));
}

/// Body of `cosched __bench-agent <spec>`: two jobs of one spinner each, switched from the given wall-clock instant
/// for the given time; prints an [`AgentReport`] as JSON.
pub fn agent_main(spec_json: &str) -> Result<(), String> {
    let spec: AgentSpec = serde_json::from_str(spec_json).map_err(|e| format!("bad agent spec: {e}"))?;
    let gangs = Gangs::start(&spec.name, spec.freezer, 1)?;
    sleep_until_realtime_ns(spec.start_realtime_ns);
    let switching = Switching::start(&gangs.groups, spec.slice_ns, spec.switch);
    thread::sleep(Duration::from_millis(50));
    let fifo = has_fifo_thread();
    sleep_until_realtime_ns(spec.start_realtime_ns + spec.duration_ns);
    let stats = switching.finish();
    drop(gangs);
    let report = AgentReport {
        start_offset_ns: stats.start_offset_ns.into(),
        slice_numbers: stats.slice_numbers.into(),
        latency_ns: stats.latency_ns.into(),
        errors: stats.errors,
        fifo,
    };
    println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
    Ok(())
}

/// Agent processes, killed on drop if still running.
struct Agents(Vec<Child>);

impl Drop for Agents {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Skew {
    pub agents: u32,
    pub slice_ms: u64,
    /// Slices every agent switched at.
    pub paired_slices: usize,
    /// Per paired slice: latest minus earliest start of the switch across agents.
    pub spread: Summary,
    /// Per agent, per switch: slice boundary to incoming thawed.
    pub latency: Summary,
    pub errors: u64,
    pub all_fifo: bool,
}

fn spawn_agents(settings: &SwitchBenchSettings, duration: Duration) -> Result<Agents, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?;
    let start_realtime_ns = realtime_ns() + 2_000_000_000; // time for every agent to start its jobs
    let mut agents = Agents(Vec::new());
    for i in 0..settings.agents {
        let spec = AgentSpec {
            name: format!("bench-{}-a{i}", std::process::id()),
            freezer: settings.freezer,
            slice_ns: settings.probe_slice_ms * 1_000_000,
            start_realtime_ns,
            duration_ns: duration.as_nanos() as u64,
            switch: SwitchSettings::from_settings(settings),
        };
        let json = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        let child =
            Command::new(&exe).arg("__bench-agent").arg(json).stdin(Stdio::null()).stdout(Stdio::piped()).spawn();
        agents.0.push(child.map_err(|e| format!("cannot start agent {i}: {e}"))?);
    }
    Ok(agents)
}

fn collect_agents(mut agents: Agents) -> Result<Vec<AgentReport>, String> {
    let mut reports = Vec::new();
    for (i, child) in agents.0.iter_mut().enumerate() {
        let mut text = String::new();
        child.stdout.take().map(|mut out| out.read_to_string(&mut text));
        let status = child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("agent {i} failed: {status}"));
        }
        reports.push(serde_json::from_str(text.trim()).map_err(|e| format!("agent {i} report: {e}"))?);
    }
    Ok(reports)
}

fn measure_skew(settings: &SwitchBenchSettings, duration: Duration) -> Result<Skew, String> {
    let reports = collect_agents(spawn_agents(settings, duration)?)?;
    let mut starts = SliceStartSkew::new(usize::MAX);
    for report in &reports {
        for (&slice, &offset) in report.slice_numbers.iter().zip(&report.start_offset_ns) {
            starts.add(slice, offset);
        }
    }
    let spreads = starts.spreads_ns();
    let latencies: Vec<u64> = reports.iter().flat_map(|r| r.latency_ns.iter().copied()).collect();
    let skew = Skew {
        agents: settings.agents,
        slice_ms: settings.probe_slice_ms,
        paired_slices: spreads.len(),
        spread: summarize(&spreads),
        latency: summarize(&latencies),
        errors: reports.iter().map(|r| r.errors).sum(),
        all_fifo: reports.iter().all(|r| r.fifo),
    };
    eprintln!("skew over {} agents: {} paired slices", settings.agents, skew.paired_slices);
    Ok(skew)
}

// ---------------------------------------------------------------------------------------------------------------
// The command.

#[derive(Debug, Serialize)]
pub struct Report {
    pub freezer: String,
    pub switcher_fifo: bool,
    pub confirm_wait: ConfirmWait,
    pub switching_threads: usize,
    pub procs_per_job: u32,
    pub duration_s: f64,
    /// All switches of the throughput runs together (no observer running).
    pub latency: Summary,
    pub overlap: Overlap,
    pub baselines: Vec<Window>,
    pub slices: Vec<SliceResult>,
    pub skew: Option<Skew>,
    pub trace: Option<TraceSummary>,
}

fn run_local(settings: &SwitchBenchSettings, duration: Duration) -> Result<Report, String> {
    let switch = SwitchSettings::from_settings(settings);
    let gangs = Gangs::start(&format!("bench-{}", std::process::id()), settings.freezer, settings.procs_per_job)?;
    let overlap = measure_overlap(&gangs, settings.probe_slice_ms, duration, switch)?;
    let probe = Switching::start(&gangs.groups, 100_000_000, switch);
    thread::sleep(Duration::from_millis(50));
    let switcher_fifo = has_fifo_thread();
    drop(probe);
    let mut baselines = vec![measure_baseline(&gangs, duration)?];
    let mut slices: Vec<SliceResult> =
        settings.slices_ms.iter().map(|&s| measure_slice(&gangs, s, duration, switch)).collect();
    baselines.push(measure_baseline(&gangs, duration)?);
    let mean = |of: fn(&Window) -> f64| baselines.iter().map(of).sum::<f64>() / baselines.len() as f64;
    let (base, base_per_cpu) = (mean(|w| w.iterations_per_s), mean(Window::iterations_per_cpu_s));
    for slice in &mut slices {
        slice.ratio = slice.window.iterations_per_s / base;
        slice.ratio_per_cpu = slice.window.iterations_per_cpu_s() / base_per_cpu;
    }
    let pooled: Vec<u64> = slices.iter().flat_map(|s| s.latency_ns.iter().copied()).collect();
    Ok(Report {
        freezer: gangs.groups.describe(),
        switcher_fifo,
        confirm_wait: switch.confirm_wait,
        switching_threads: switch.threads,
        procs_per_job: settings.procs_per_job,
        duration_s: settings.duration.as_secs_f64(),
        latency: summarize(&pooled),
        overlap,
        baselines,
        slices,
        skew: None,
        trace: settings.trace.as_deref().map(|file| measure_traced(&gangs, settings, duration, file)).transpose()?,
    })
}

/// One window at the probe slice under the kernel's trace: the raw trace goes to `file`, the attribution of the
/// slow switches to the report.
fn measure_traced(
    gangs: &Gangs,
    settings: &SwitchBenchSettings,
    duration: Duration,
    file: &Path,
) -> Result<TraceSummary, String> {
    let switching =
        Switching::start(&gangs.groups, settings.probe_slice_ms * 1_000_000, SwitchSettings::from_settings(settings));
    thread::sleep(SETTLE);
    let switchers = thread_ids_named("switch");
    if switchers.is_empty() {
        return Err("cannot find the switching threads".into());
    }
    let recording = Recording::start()?;
    thread::sleep(duration);
    let text = recording.finish()?;
    drop(switching);
    fs::write(file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
    let events = switch_trace::parse(&text);
    let job_prefix = format!("{}/", gangs.groups.kernel_path());
    let slow_ns = settings.trace_slow_us * 1_000;
    let summary = summarize_attribution(&switch_trace::attribute(&events, &switchers, &job_prefix, slow_ns), slow_ns);
    eprintln!("trace: {} events, {} confirmations, {} wake-ups", events.len(), summary.freezes, summary.wakes);
    Ok(summary)
}

/// The ids of this process's threads named `name`.
fn thread_ids_named(name: &str) -> Vec<i32> {
    let tasks = fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
    tasks
        .filter_map(|task| {
            let comm = fs::read_to_string(task.path().join("comm")).ok()?;
            (comm.trim() == name).then(|| task.file_name().to_str()?.parse().ok()).flatten()
        })
        .collect()
}

/// Every measurement the settings ask for, local and (with two agents or more) between agents.
pub fn run(settings: &SwitchBenchSettings) -> Result<Report, String> {
    settings.check()?;
    let mut report = run_local(settings, settings.duration)?;
    if settings.agents >= 2 {
        report.skew = Some(measure_skew(settings, settings.duration)?);
    }
    Ok(report)
}
