//! `cosched bench switch`: gang-switch latency, overlap, throughput against no switching, and slice-start skew
//! between agents, measured on this machine with real job cgroups, the real freezer and real CPU-bound processes.
//!
//! The jobs' processes are this binary in the hidden mode `__spin <file>`: a fixed unit of integer work in a loop
//! that publishes its iteration count to `<file>` every 2^20 iterations. The skew measurement runs separate agent
//! processes, this binary in the hidden mode `__bench-agent <spec JSON>`, each with its own jobs and switcher.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use clap::{Args, ValueEnum};
use cosched_runtime::freezer::{FreezerKind, JobGroups};
use cosched_runtime::launch::{spawn_shim, LaunchSpec};
use cosched_runtime::protocol::Schedule;
use cosched_runtime::skew::{summarize, SliceStartSkew, Summary};
use cosched_runtime::switcher::{realtime_ns, SwitchStats, Switcher};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Iterations between two publications of a spinner's count.
const SPIN_CHUNK: u64 = 1 << 20;
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
    /// Seconds of each measurement window (nine windows: overlap, two baselines, one per slice, skew).
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
    /// Also print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

// ---------------------------------------------------------------------------------------------------------------
// The CPU-bound job process.

/// Body of `cosched __spin <file>`: count iterations of a fixed unit of work forever, publishing the count as two
/// equal little-endian u64 (a reader that sees them differ caught a write half-done and reads again). Exits when
/// its parent (the bench or agent) is gone, so a crashed bench leaves no spinning processes behind.
pub fn spin(file: &Path) -> Result<(), String> {
    let out = OpenOptions::new().write(true).create(true).truncate(false).open(file).map_err(|e| e.to_string())?;
    let parent = std::os::unix::process::parent_id();
    let (mut count, mut x) = (0u64, 1u64);
    loop {
        for _ in 0..SPIN_CHUNK {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407));
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
    thread: Option<JoinHandle<()>>,
}

impl Switching {
    /// Rotate the two jobs, one per slot, every `slice_ns`.
    fn start(groups: &Arc<JobGroups>, slice_ns: u64, realtime: bool) -> Switching {
        let switcher = Arc::new(Switcher::new(groups.clone()));
        let schedule = Schedule {
            slice_ns,
            rows: JOBS.iter().map(|&j| vec![j]).collect(),
            always: vec![],
            jobs: JOBS.to_vec(),
            suspended: vec![],
        };
        switcher.set_schedule(schedule);
        let runner = switcher.clone();
        let thread = thread::Builder::new()
            .name("switcher".into())
            .spawn(move || runner.run(realtime))
            .expect("cannot start a thread");
        Switching { switcher, thread: Some(thread) }
    }

    fn finish(mut self) -> SwitchStats {
        self.stop();
        self.switcher.stats()
    }

    fn stop(&mut self) {
        self.switcher.stop();
        if let Some(thread) = self.thread.take() {
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
// Statistics.

// ---------------------------------------------------------------------------------------------------------------
// Throughput.

#[derive(Clone, Debug, Serialize)]
struct Window {
    wall_s: f64,
    iterations_per_s: f64,
    /// CPU time of both jobs over the window, in CPUs (2.0 = both CPUs of a 2-CPU machine all the time).
    cpus_used: f64,
}

fn measure_window(gangs: &Gangs, duration: Duration) -> Window {
    let (start, iterations, cpu_ns) = (Instant::now(), gangs.iterations(), gangs.cpu_ns());
    thread::sleep(duration);
    let (end_iterations, end_cpu_ns) = (gangs.iterations(), gangs.cpu_ns());
    let wall_s = start.elapsed().as_secs_f64();
    Window {
        wall_s,
        iterations_per_s: end_iterations.saturating_sub(iterations) as f64 / wall_s,
        cpus_used: end_cpu_ns.saturating_sub(cpu_ns) as f64 / 1e9 / wall_s,
    }
}

#[derive(Clone, Debug, Serialize)]
struct SliceResult {
    slice_ms: u64,
    switches: u64,
    errors: u64,
    latency: Summary,
    window: Window,
    /// Iterations per second over the mean of the two baselines.
    ratio: f64,
    #[serde(skip)]
    latency_ns: Vec<u64>,
}

fn measure_slice(gangs: &Gangs, slice_ms: u64, duration: Duration, realtime: bool) -> SliceResult {
    let switching = Switching::start(&gangs.groups, slice_ms * 1_000_000, realtime);
    thread::sleep(SETTLE);
    let window = measure_window(gangs, duration);
    let stats = switching.finish();
    eprintln!("slice {slice_ms} ms: {:.1} M iterations/s, {} switches", window.iterations_per_s / 1e6, stats.switches);
    SliceResult {
        slice_ms,
        switches: stats.switches,
        errors: stats.errors,
        latency: summarize(&stats.latency_ns),
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
// Overlap.

#[derive(Clone, Debug, Default, Serialize)]
struct Overlap {
    slice_ms: u64,
    /// Sweeps that took less than half a slice (so at most one switch can fall inside one).
    samples: u64,
    /// Sweeps where the outer gang ran in both its reads and the inner gang in its read (see `read_gang`).
    overlaps: u64,
    /// As `overlaps`, counting a gang as soon as one of its processes is runnable, even if the freezer reports
    /// the gang stopped.
    runnable_overlaps: u64,
    /// Sweeps where the inner gang and the outer gang in at least one of its reads ran (counts sweeps
    /// that straddle a switch too: an upper bound, not overlap).
    loose: u64,
    /// Sweeps where no process of either gang was runnable in any read.
    neither: u64,
    /// Sweeps discarded for taking half a slice or more.
    discarded: u64,
    sweep_p50_ns: u64,
    latency: Summary,
    switches: u64,
}

/// `/proc/<pid>/stat` of every process of a job, kept open (pread re-generates it).
fn open_stats(groups: &JobGroups, job: u64) -> Result<Vec<File>, String> {
    let pids = groups.pids(job).map_err(|e| e.to_string())?;
    pids.iter().map(|p| File::open(format!("/proc/{p}/stat")).map_err(|e| format!("pid {p}: {e}"))).collect()
}

/// Whether any of the processes is runnable ('R': running or waiting for a CPU).
fn any_runnable(stats: &[File]) -> bool {
    let mut buf = [0u8; 512];
    stats.iter().any(|f| {
        let len = f.read_at(&mut buf, 0).unwrap_or(0);
        let text = &buf[..len];
        let close = text.iter().rposition(|&b| b == b')');
        close.and_then(|i| text.get(i + 2)) == Some(&b'R')
    })
}

/// One read of a gang: (a process is runnable, the gang runs: a process is runnable and the kernel does not
/// report the job stopped). The second excludes a task woken by a thaw and caught by the next freeze before it
/// ran: it is runnable only to re-enter the freezer and runs no user code, and the freezer counts it as frozen.
fn read_gang(groups: &JobGroups, job: u64, stats: &[File]) -> (bool, bool) {
    let runnable = any_runnable(stats);
    (runnable, runnable && !groups.is_frozen(job).unwrap_or(false))
}

/// Sample the two gangs as fast as possible for `duration`. Each sweep reads the outer gang, the inner gang, the
/// outer gang again (the roles alternate); a sweep shorter than half a slice contains at most one switch, so
/// "outer runs, inner runs, outer runs" can only mean both gangs ran at one instant.
fn sample_overlap(gangs: &Gangs, slice_ms: u64, duration: Duration) -> Result<Overlap, String> {
    let files = [open_stats(&gangs.groups, JOBS[0])?, open_stats(&gangs.groups, JOBS[1])?];
    let mut result = Overlap { slice_ms, ..Overlap::default() };
    let mut sweeps_ns = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let (outer, inner) = if result.samples.is_multiple_of(2) { (0, 1) } else { (1, 0) };
        let read = |i: usize| read_gang(&gangs.groups, JOBS[i], &files[i]);
        let t0 = Instant::now();
        let (before, during, after) = (read(outer), read(inner), read(outer));
        let sweep_ns = t0.elapsed().as_nanos() as u64;
        if sweep_ns * 2 >= slice_ms * 1_000_000 {
            result.discarded += 1;
            continue;
        }
        sweeps_ns.push(sweep_ns);
        result.samples += 1;
        result.overlaps += u64::from(before.1 && during.1 && after.1);
        result.runnable_overlaps += u64::from(before.0 && during.0 && after.0);
        result.loose += u64::from((before.1 || after.1) && during.1);
        result.neither += u64::from(!before.0 && !during.0 && !after.0);
    }
    result.sweep_p50_ns = summarize(&sweeps_ns).p50_ns;
    Ok(result)
}

fn measure_overlap(gangs: &Gangs, slice_ms: u64, duration: Duration, realtime: bool) -> Result<Overlap, String> {
    let switching = Switching::start(&gangs.groups, slice_ms * 1_000_000, realtime);
    thread::sleep(SETTLE);
    let mut overlap = sample_overlap(gangs, slice_ms, duration)?;
    let stats = switching.finish();
    overlap.latency = summarize(&stats.latency_ns);
    overlap.switches = stats.switches;
    eprintln!("overlap at {slice_ms} ms: {} of {} samples", overlap.overlaps, overlap.samples);
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
    realtime: bool,
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
    let switching = Switching::start(&gangs.groups, spec.slice_ns, spec.realtime);
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
            realtime: !args.no_realtime,
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
    procs_per_job: u32,
    duration_s: f64,
    /// All switches of the throughput runs together (no observer running).
    latency: Summary,
    overlap: Overlap,
    baselines: Vec<Window>,
    slices: Vec<SliceResult>,
    skew: Option<Skew>,
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
    let realtime = !args.no_realtime;
    let gangs = Gangs::start(&format!("bench-{}", std::process::id()), args.freezer.kind(), args.procs_per_job)?;
    let overlap = measure_overlap(&gangs, args.probe_slice_ms, duration, realtime)?;
    let probe = Switching::start(&gangs.groups, 100_000_000, realtime);
    thread::sleep(Duration::from_millis(50));
    let switcher_fifo = has_fifo_thread();
    drop(probe);
    let mut baselines = vec![measure_baseline(&gangs, duration)?];
    let mut slices: Vec<SliceResult> =
        args.slices_ms.iter().map(|&s| measure_slice(&gangs, s, duration, realtime)).collect();
    baselines.push(measure_baseline(&gangs, duration)?);
    let base = baselines.iter().map(|w| w.iterations_per_s).sum::<f64>() / baselines.len() as f64;
    for slice in &mut slices {
        slice.ratio = slice.window.iterations_per_s / base;
    }
    let pooled: Vec<u64> = slices.iter().flat_map(|s| s.latency_ns.iter().copied()).collect();
    Ok(Report {
        freezer: gangs.groups.describe(),
        switcher_fifo,
        procs_per_job: args.procs_per_job,
        duration_s: args.duration_s,
        latency: summarize(&pooled),
        overlap,
        baselines,
        slices,
        skew: None,
    })
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
    let overlap = format!("{} / {}", o.overlaps, o.samples);
    print_row(&format!("overlap samples ({} ms slices)", o.slice_ms), overlap, "0", verdict(o.overlaps == 0));
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
    println!();
    println!(
        "{:>8} {:>9} {:>11} {:>11} {:>11} {:>12} {:>8} {:>9}",
        "slice", "switches", "lat p50", "lat p99", "lat max", "M iter/s", "ratio", "CPUs used"
    );
    for (i, b) in report.baselines.iter().enumerate() {
        let name = if i == 0 { "none" } else { "none (2)" };
        println!(
            "{name:>8} {:>9} {:>11} {:>11} {:>11} {:>12.1} {:>8} {:>9.2}",
            "-",
            "-",
            "-",
            "-",
            b.iterations_per_s / 1e6,
            "-",
            b.cpus_used
        );
    }
    for s in &report.slices {
        println!(
            "{:>8} {:>9} {:>11} {:>11} {:>11} {:>12.1} {:>7.1}% {:>9.2}",
            format!("{} ms", s.slice_ms),
            s.switches,
            us(s.latency.p50_ns),
            us(s.latency.p99_ns),
            us(s.latency.max_ns),
            s.window.iterations_per_s / 1e6,
            s.ratio * 100.0,
            s.window.cpus_used
        );
    }
}

fn print_report(report: &Report) {
    println!("{}", report.freezer);
    println!(
        "switching thread in SCHED_FIFO: {}; {} processes per job, 2 jobs",
        report.switcher_fifo, report.procs_per_job
    );
    print_summary(report);
    print_details(report);
    let o = &report.overlap;
    println!(
        "\noverlap run: {} switches, latency p50 {} p99 {}; sweep p50 {}; {} sweeps with a runnable process of both gangs; {} with neither gang runnable, {} straddling a switch, {} discarded",
        o.switches,
        us(o.latency.p50_ns),
        us(o.latency.p99_ns),
        us(o.sweep_p50_ns),
        o.runnable_overlaps,
        o.neither,
        o.loose - o.overlaps,
        o.discarded
    );
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
