//! `cosched bench switch`: gang-switch latency, overlap, throughput against no switching, and slice-start skew
//! between agents, measured on this machine with real job cgroups, the real freezer and real CPU-bound processes.
//!
//! The jobs' processes are this binary in the hidden mode `__spin <file>`: a fixed unit of integer work in a loop
//! that publishes its iteration count to `<file>` every 2^20 iterations. The skew measurement runs separate agent
//! processes, this binary in the hidden mode `__bench-agent <spec JSON>`, each with its own jobs and switcher.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use clap::{Args, ValueEnum};
use cosched_bench::switch_trace::{self, summarize_attribution, Recording, TraceSummary};
use cosched_runtime::freezer::{FreezerKind, JobGroups};
use cosched_runtime::launch::{spawn_shim, LaunchSpec};
use cosched_runtime::protocol::Schedule;
use cosched_runtime::skew::{summarize, SliceStartSkew, Summary};
use cosched_runtime::switcher::{realtime_ns, ConfirmWait, SwitchStats, Switcher};
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

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FreezerArg {
    V2,
    V1,
    Signals,
}

impl FreezerArg {
    fn kind(self) -> FreezerKind {
        match self {
            FreezerArg::V2 => FreezerKind::V2,
            FreezerArg::V1 => FreezerKind::V1,
            FreezerArg::Signals => FreezerKind::Signals,
        }
    }
}

#[derive(Args, Debug)]
pub struct BenchSwitchArgs {
    /// Seconds of each measurement window (overlap, two baselines, one per slice, skew; one more with --trace).
    #[arg(long, default_value_t = 6.0)]
    pub duration_s: f64,
    /// Slice lengths of the throughput measurements (ms, at least 1).
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,10,100")]
    pub slices_ms: Vec<u64>,
    /// Slice length of the overlap and skew measurements (ms).
    #[arg(long, default_value_t = 2)]
    pub probe_slice_ms: u64,
    /// How jobs are stopped and started.
    #[arg(long, value_enum, default_value_t = FreezerArg::V2)]
    pub freezer: FreezerArg,
    /// CPU-bound processes per job (two jobs).
    #[arg(long, default_value_t = 2)]
    pub procs_per_job: u32,
    /// Agent processes of the skew measurement (each: two jobs of one process); 0 or 1 skips it.
    #[arg(long, default_value_t = 3)]
    pub agents: u32,
    /// Keep switching threads in the normal class (default: SCHED_FIFO priority 50, as the agent does).
    #[arg(long)]
    pub no_realtime: bool,
    /// Switch as `cosched agent --strict-switch`: start the incoming gang only once the outgoing one is confirmed
    /// stopped, however long that takes (default: wait at most a twentieth of the slice, at most 1 ms).
    #[arg(long)]
    pub strict: bool,
    /// Switching threads, each on a CPU of its own (as `cosched agent --switching-threads`).
    #[arg(long, default_value_t = 2)]
    pub switching_threads: usize,
    /// Also record the kernel's trace of the scheduler, the freezer and timers (tracefs) over one more window at
    /// the probe slice, keep it in this file, and say where the time of the slow switches went.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// With --trace: a confirmation or wake-up later than this (µs) counts as slow.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub trace_slow_us: u64,
    /// Also print the results as JSON.
    #[arg(long)]
    pub json: bool,
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
        let scratch = base.join(format!("cosched-{agent}"));
        let mut gangs = Gangs { groups, jobs: Vec::new(), children: Vec::new(), counters: Vec::new(), scratch };
        fs::create_dir_all(&gangs.scratch).map_err(|e| format!("{}: {e}", gangs.scratch.display()))?;
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
        };
        let child = spawn_shim(&exe, &spec, |command| {
            command.stdout(Stdio::null());
        });
        self.children.push(child.map_err(|e| format!("cannot start a spinner of job {job}: {e}"))?);
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
    fn from_args(args: &BenchSwitchArgs) -> SwitchSettings {
        let confirm_wait = if args.strict { ConfirmWait::Strict } else { ConfirmWait::Bounded };
        SwitchSettings { realtime: !args.no_realtime, confirm_wait, threads: args.switching_threads.max(1) }
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
        switcher.set_schedule(schedule);
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
struct Window {
    wall_s: f64,
    iterations_per_s: f64,
    /// CPU time of both jobs over the window, in CPUs (2.0 = both CPUs of a 2-CPU machine all the time).
    cpus_used: f64,
    /// Share of the machine's CPU time the hypervisor gave to others over the window (`steal` of /proc/stat).
    steal: f64,
}

/// (steal, all) CPU time of every CPU together from `/proc/stat`, in clock ticks.
fn cpu_ticks() -> (u64, u64) {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .map(|rest| rest.split_whitespace().take(8).filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default();
    (fields.get(7).copied().unwrap_or(0), fields.iter().sum())
}

fn measure_window(gangs: &Gangs, duration: Duration) -> Window {
    let (start, iterations, cpu_ns, ticks) = (Instant::now(), gangs.iterations(), gangs.cpu_ns(), cpu_ticks());
    thread::sleep(duration);
    let (end_iterations, end_cpu_ns, end_ticks) = (gangs.iterations(), gangs.cpu_ns(), cpu_ticks());
    let wall_s = start.elapsed().as_secs_f64();
    Window {
        wall_s,
        iterations_per_s: end_iterations.saturating_sub(iterations) as f64 / wall_s,
        cpus_used: end_cpu_ns.saturating_sub(cpu_ns) as f64 / 1e9 / wall_s,
        steal: end_ticks.0.saturating_sub(ticks.0) as f64 / end_ticks.1.saturating_sub(ticks.1).max(1) as f64,
    }
}

/// Where the time of a switch goes: from the slice boundary to the end of each phase.
#[derive(Clone, Debug, Serialize)]
struct Phases {
    /// The switching thread woke (the timer's and the scheduler's delay).
    woke: Summary,
    /// Every outgoing gang asked to stop.
    requested: Summary,
    /// The kernel confirmed them stopped, or the wait's bound passed.
    confirmed: Summary,
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
struct SliceResult {
    slice_ms: u64,
    switches: u64,
    errors: u64,
    /// Switches that started the incoming gang before the outgoing one was confirmed stopped.
    late: u64,
    latency: Summary,
    phases: Phases,
    window: Window,
    /// Iterations per second over the mean of the two baselines.
    ratio: f64,
    #[serde(skip)]
    latency_ns: Vec<u64>,
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
struct Overlap {
    slice_ms: u64,
    window_s: f64,
    /// Time each gang ran user code (any of its processes), in ns: the measurement saw both gangs run.
    ran_ns: [u64; 2],
    /// Stretches longer than `SEGMENT_GAP_NS` in which both gangs ran user code, and their total time. Shorter
    /// stretches are not conclusive: a process may pause that long between two of its clock readings.
    overlaps: u64,
    overlap_ns: u64,
    switches: u64,
    late: u64,
    latency: Summary,
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
struct Skew {
    agents: u32,
    slice_ms: u64,
    /// Slices every agent switched at.
    paired_slices: usize,
    /// Per paired slice: latest minus earliest start of the switch across agents.
    spread: Summary,
    /// Per agent, per switch: slice boundary to incoming thawed.
    latency: Summary,
    errors: u64,
    all_fifo: bool,
}

fn spawn_agents(args: &BenchSwitchArgs, duration: Duration) -> Result<Agents, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?;
    let start_realtime_ns = realtime_ns() + 2_000_000_000; // time for every agent to start its jobs
    let mut agents = Agents(Vec::new());
    for i in 0..args.agents {
        let spec = AgentSpec {
            name: format!("bench-{}-a{i}", std::process::id()),
            freezer: args.freezer.kind(),
            slice_ns: args.probe_slice_ms * 1_000_000,
            start_realtime_ns,
            duration_ns: duration.as_nanos() as u64,
            switch: SwitchSettings::from_args(args),
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

fn measure_skew(args: &BenchSwitchArgs, duration: Duration) -> Result<Skew, String> {
    let reports = collect_agents(spawn_agents(args, duration)?)?;
    let mut starts = SliceStartSkew::new(usize::MAX);
    for report in &reports {
        for (&slice, &offset) in report.slice_numbers.iter().zip(&report.start_offset_ns) {
            starts.add(slice, offset);
        }
    }
    let spreads = starts.spreads_ns();
    let latencies: Vec<u64> = reports.iter().flat_map(|r| r.latency_ns.iter().copied()).collect();
    let skew = Skew {
        agents: args.agents,
        slice_ms: args.probe_slice_ms,
        paired_slices: spreads.len(),
        spread: summarize(&spreads),
        latency: summarize(&latencies),
        errors: reports.iter().map(|r| r.errors).sum(),
        all_fifo: reports.iter().all(|r| r.fifo),
    };
    eprintln!("skew over {} agents: {} paired slices", args.agents, skew.paired_slices);
    Ok(skew)
}

// ---------------------------------------------------------------------------------------------------------------
// The command.

#[derive(Debug, Serialize)]
struct Report {
    freezer: String,
    switcher_fifo: bool,
    confirm_wait: ConfirmWait,
    switching_threads: usize,
    procs_per_job: u32,
    duration_s: f64,
    /// All switches of the throughput runs together (no observer running).
    latency: Summary,
    overlap: Overlap,
    baselines: Vec<Window>,
    slices: Vec<SliceResult>,
    skew: Option<Skew>,
    trace: Option<TraceSummary>,
}

fn check_args(args: &BenchSwitchArgs) -> Result<Duration, String> {
    if !(args.duration_s > 0.0 && args.duration_s <= 3600.0) {
        return Err("--duration-s must be in (0, 3600]".into());
    }
    if args.slices_ms.iter().chain([&args.probe_slice_ms]).any(|&s| s == 0) {
        return Err("slices must be at least 1 ms".into());
    }
    if args.procs_per_job == 0 {
        return Err("--procs-per-job must be at least 1".into());
    }
    Ok(Duration::from_secs_f64(args.duration_s))
}

fn run_local(args: &BenchSwitchArgs, duration: Duration) -> Result<Report, String> {
    let switch = SwitchSettings::from_args(args);
    let gangs = Gangs::start(&format!("bench-{}", std::process::id()), args.freezer.kind(), args.procs_per_job)?;
    let overlap = measure_overlap(&gangs, args.probe_slice_ms, duration, switch)?;
    let probe = Switching::start(&gangs.groups, 100_000_000, switch);
    thread::sleep(Duration::from_millis(50));
    let switcher_fifo = has_fifo_thread();
    drop(probe);
    let mut baselines = vec![measure_baseline(&gangs, duration)?];
    let mut slices: Vec<SliceResult> =
        args.slices_ms.iter().map(|&s| measure_slice(&gangs, s, duration, switch)).collect();
    baselines.push(measure_baseline(&gangs, duration)?);
    let base = baselines.iter().map(|w| w.iterations_per_s).sum::<f64>() / baselines.len() as f64;
    for slice in &mut slices {
        slice.ratio = slice.window.iterations_per_s / base;
    }
    let pooled: Vec<u64> = slices.iter().flat_map(|s| s.latency_ns.iter().copied()).collect();
    Ok(Report {
        freezer: gangs.groups.describe(),
        switcher_fifo,
        confirm_wait: switch.confirm_wait,
        switching_threads: switch.threads,
        procs_per_job: args.procs_per_job,
        duration_s: args.duration_s,
        latency: summarize(&pooled),
        overlap,
        baselines,
        slices,
        skew: None,
        trace: args.trace.as_deref().map(|file| measure_traced(&gangs, args, duration, file)).transpose()?,
    })
}

/// One window at the probe slice under the kernel's trace: the raw trace goes to `file`, the attribution of the
/// slow switches to the report.
fn measure_traced(
    gangs: &Gangs,
    args: &BenchSwitchArgs,
    duration: Duration,
    file: &Path,
) -> Result<TraceSummary, String> {
    let switching = Switching::start(&gangs.groups, args.probe_slice_ms * 1_000_000, SwitchSettings::from_args(args));
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
    let slow_ns = args.trace_slow_us * 1_000;
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

pub fn run(args: &BenchSwitchArgs) -> Result<(), String> {
    let duration = check_args(args)?;
    let mut report = run_local(args, duration)?;
    if args.agents >= 2 {
        report.skew = Some(measure_skew(args, duration)?);
    }
    print_report(&report);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// Output.

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

fn verdict(pass: bool) -> &'static str {
    if pass {
        "pass"
    } else {
        "MISS"
    }
}

fn print_row(metric: &str, value: String, target: &str, result: &str) {
    println!("{metric:<44} {value:>16} {target:>10} {result:>6}");
}

fn print_summary(report: &Report) {
    let (l, o) = (&report.latency, &report.overlap);
    print_row("metric", "value".into(), "target", "result");
    print_row("switch latency p50", us(l.p50_ns), "≤ 100 µs", verdict(l.p50_ns <= 100_000));
    print_row("switch latency p99", us(l.p99_ns), "≤ 1 ms", verdict(l.p99_ns <= 1_000_000));
    print_row("switch latency max", us(l.max_ns), "", "");
    let overlap = format!("{} ({:.0} µs)", o.overlaps, o.overlap_ns as f64 / 1e3);
    print_row(
        &format!("user code of both gangs at once ({} ms slices)", o.slice_ms),
        overlap,
        "0",
        verdict(o.overlaps == 0),
    );
    for s in &report.slices {
        let (target, result) = match s.slice_ms {
            2 => ("≥ 90 %", verdict(s.ratio >= 0.90)),
            5 => ("≥ 95 %", verdict(s.ratio >= 0.95)),
            _ => ("", ""),
        };
        print_row(
            &format!("throughput at {} ms / no switching", s.slice_ms),
            format!("{:.1} %", s.ratio * 100.0),
            target,
            result,
        );
    }
    if let Some(k) = &report.skew {
        let name = |p: &str| format!("skew {p} ({} agents, {} ms slices)", k.agents, k.slice_ms);
        print_row(&name("p50"), us(k.spread.p50_ns), "", "");
        print_row(&name("p99"), us(k.spread.p99_ns), "≤ 200 µs", verdict(k.spread.p99_ns <= 200_000));
        print_row(&name("max"), us(k.spread.max_ns), "", "");
    }
}

fn print_details(report: &Report) {
    println!(
        "\nphases of a switch, from its slice boundary to: the switching thread woke, every outgoing gang was asked"
    );
    println!(
        "to stop, the kernel confirmed it (or the wait's bound passed), the incoming gang was started (p50 / p99)"
    );
    println!(
        "{:>8} {:>9} {:>6} {:>17} {:>17} {:>17} {:>17} {:>9} {:>7} {:>6} {:>6}",
        "slice", "switches", "late", "woke", "asked", "confirmed", "started", "M iter/s", "ratio", "CPUs", "steal"
    );
    let both = |s: &Summary| format!("{:.0} / {:.0} µs", s.p50_ns as f64 / 1e3, s.p99_ns as f64 / 1e3);
    for (i, b) in report.baselines.iter().enumerate() {
        let name = if i == 0 { "none" } else { "none (2)" };
        let dash = "-";
        println!(
            "{name:>8} {dash:>9} {dash:>6} {dash:>17} {dash:>17} {dash:>17} {dash:>17} {:>9.1} {dash:>7} {:>6.2} {:>5.1}%",
            b.iterations_per_s / 1e6,
            b.cpus_used,
            b.steal * 100.0
        );
    }
    for s in &report.slices {
        println!(
            "{:>8} {:>9} {:>6} {:>17} {:>17} {:>17} {:>17} {:>9.1} {:>6.1}% {:>6.2} {:>5.1}%",
            format!("{} ms", s.slice_ms),
            s.switches,
            s.late,
            both(&s.phases.woke),
            both(&s.phases.requested),
            both(&s.phases.confirmed),
            both(&s.latency),
            s.window.iterations_per_s / 1e6,
            s.ratio * 100.0,
            s.window.cpus_used,
            s.window.steal * 100.0
        );
    }
}

fn print_trace(t: &TraceSummary) {
    let three = |s: &Summary| format!("p50 {} p99 {} max {}", us(s.p50_ns), us(s.p99_ns), us(s.max_ns));
    println!("\nwhere the time of slow switches went (kernel trace, slow = over {}):", us(t.slow_ns));
    println!("  confirmations of a gang stopped: {}, {}", t.freezes, three(&t.freeze_wait));
    for (cause, count, ns) in &t.slow_by_cause {
        println!("    {count:>5} slow: {cause} ({:.1} ms in all)", *ns as f64 / 1e6);
    }
    let behind: Vec<String> =
        t.waited_behind.iter().take(5).map(|(c, ns)| format!("{c} {:.1} ms", *ns as f64 / 1e6)).collect();
    if !behind.is_empty() {
        println!("    stragglers waited behind: {}", behind.join(", "));
    }
    println!("  boundary wake-ups of the switching thread: {}", t.wakes);
    println!("    its timer fired late by {}", three(&t.timer_late));
    println!("    then it waited for its CPU {}", three(&t.run_delay));
    println!("    {} wake-ups slow in all, {} of them because the timer fired that late", t.slow_wakes, t.slow_timers);
    println!("    while such a timer was late, another CPU recorded events in {} cases", t.slow_timers_other_cpu_alive);
}

fn print_report(report: &Report) {
    println!("{}", report.freezer);
    println!(
        "switching threads in SCHED_FIFO: {}; {} processes per job, 2 jobs; confirmation wait: {:?}; {} switching threads",
        report.switcher_fifo, report.procs_per_job, report.confirm_wait, report.switching_threads
    );
    print_summary(report);
    print_details(report);
    let o = &report.overlap;
    println!(
        "\noverlap run: {} switches ({} late), latency p50 {} p99 {}; gangs ran {:.2} s and {:.2} s of {:.2} s",
        o.switches,
        o.late,
        us(o.latency.p50_ns),
        us(o.latency.p99_ns),
        o.ran_ns[0] as f64 / 1e9,
        o.ran_ns[1] as f64 / 1e9,
        o.window_s
    );
    if let Some(t) = &report.trace {
        print_trace(t);
    }
    if let Some(k) = &report.skew {
        println!(
            "skew run: {} paired slices, agents' latency p50 {} p99 {} max {}, {} errors, all agents SCHED_FIFO: {}",
            k.paired_slices,
            us(k.latency.p50_ns),
            us(k.latency.p99_ns),
            us(k.latency.max_ns),
            k.errors,
            k.all_fifo
        );
    }
}
