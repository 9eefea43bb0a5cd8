//! `cosched bench sim`: how fast the simulator runs, on fixed scenarios.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use clap::{Args, Subcommand};
use cosched_core::{RadixHeap, SimTime, StreamSeed};
use cosched_lab::workload::{load_workload, JobSizes, WorkloadSpec};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{run as run_sim, RunOptions};
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Simulator speed: events/s and simulated node-seconds per wall second.
    ///
    /// All scenarios: 1024 one-CPU nodes, MPL 4, WL7 job types, sizes
    /// from the Lublin-Feitelson model drawn for 64 CPUs (no job wider than
    /// 64), run times x0.002, seed 1. Timed from the first progress report
    /// past a 10 s warm-up to the horizon at 30 s.
    ///
    /// - full:  Local; jobs arrive ten times faster than the machine serves them
    ///   (offered load 10), so every CPU holds MPL = 4 processes: the
    ///   multiprogrammed steady state the MPL is about.
    /// - light: Local; offered load 0.9 (Local saturates below it, but in the first
    ///   30 s the machine holds about one process per CPU, each progressing
    ///   fast: the most events per simulated second).
    /// - pb-sb: as full, under PB-SB (periodic boost every tick, spin-block).
    ///
    /// A bare radix-heap loop measured in the same run is the baseline (the
    /// event queue of earlier builds, kept as a fixed yardstick of machine speed).
    Sim(BenchSimArgs),
    /// Gang switching on this machine (root, real cgroups and processes): switch latency, overlap of gangs,
    /// throughput of CPU-bound gangs at several slice lengths against no switching, and slice-start skew between
    /// agent processes. Two jobs of --procs-per-job CPU-bound processes each; see docs/performance.md.
    Switch(crate::bench_switch::BenchSwitchArgs),
    /// The controller's core as the cluster grows (32 to 4,096 simulated agents, in this process): the cost of
    /// an agent's hello, a submit, an agent's report, a job's end (replan and tell every agent), a status; the
    /// messages and bytes a replan sends. Median and range over --runs, and growth against the smallest size.
    Controller(crate::bench_controller::BenchControllerArgs),
    /// Slowdown of j simultaneous copies of any command under each policy.
    ///
    /// Starts j copies at the same moment on the same CPUs (through a private
    /// cosched runtime for local and gang, through Slurm for slurm, directly
    /// for none), repeats interleaved across policies, and reports per j the
    /// elapsed time t_j (mean ± standard error), the slowdown s_j = t_j / t_1
    /// with its error, each copy's own time (fairness), %CPU, and a single
    /// job's peak memory. An ideal time-sharing system gives s_j = j for a job
    /// that keeps its CPUs busy, less when jobs wait (I/O, messages).
    ///
    /// Example: cosched bench slowdown --jobs 1,2,4 --repeat 5
    ///   --policy local,gang:10ms,gang:100ms -- mpirun -np 2 ./mpi_mm --n 1024 --grid 2x1
    Slowdown(crate::bench_slowdown::BenchSlowdownArgs),
    /// Cost of a process context switch, α_c, on one CPU.
    ///
    /// A worker process runs y rounds of a short compute loop (--work-ns of
    /// arithmetic) each followed by sched_yield. Alone on its CPU a yield
    /// returns at once; two workers pinned to the same CPU switch to each
    /// other at every yield. With t1 the time of one worker alone and t2 the
    /// time of the two together, α_c = (t2 - 2 t1) / (2y), computed for each
    /// repeat from that repeat's pair. Times are the workers' CPU time (user +
    /// system), which equals the wall time on an idle CPU and leaves out other
    /// processes that share it; α_c from the wall clock is shown too. The
    /// context switches counted per yield show that the yields did switch.
    #[command(name = "ctxswitch")]
    CtxSwitch(crate::bench_micro::CtxSwitchArgs),
    /// Message cost t(n) = α + β·n and its CPU cost α_CPU + β_CPU·n (n doubles).
    ///
    /// Ping-pong between two endpoints pinned to two CPUs: tcp (two processes,
    /// TCP over loopback, blocking sockets: a waiting receiver sleeps) and shm
    /// (two threads, a shared buffer of atomic words and a release/acquire
    /// flag; the receiver polls it, --wait spin or yield). For each size the
    /// one-way time is half the round trip, and the CPU time per message is the
    /// CPU time (user + system) of both endpoints over the round trips divided
    /// by the one-way messages. α, β, α_CPU, β_CPU are least-squares line fits
    /// (weighted by 1/y², i.e. relative residuals) over the sizes, one per
    /// repeat; the spread is over the repeats. Each batch is timed in short
    /// chunks and only chunks undisturbed by other processes count (--chunk-us).
    #[command(name = "pingpong")]
    PingPong(crate::bench_micro::PingPongArgs),
    /// What a job pays to refill the caches when a gang switch gives its CPU back (`cosched calibrate`'s
    /// cache_refill_ns).
    ///
    /// On the first CPU this process may use: a pass (one byte read and written per 64-byte line) over the
    /// CPU's cache share (its data and unified caches from sysfs, each divided by the CPUs sharing it), warm,
    /// then again right after a pass over three times as much other data. The refill is the cold pass less the
    /// warm one: median over the repeats, with each pass's median. A wall-time benchmark: run it on a quiet
    /// machine.
    #[command(name = "cache-refill")]
    CacheRefill(CacheRefillArgs),
    /// What the rest of the node does to busy CPUs (`cosched calibrate`'s housekeeping_wake_interval_ns and
    /// background_migration_interval_ns).
    ///
    /// Wakes: one spinning thread pinned to each CPU this process may use, for a window; each thread's
    /// involuntary context switches (getrusage RUSAGE_THREAD) are the times another task (a kernel thread,
    /// a daemon) took its CPU; the rate is the median window's. Moves: two spinning threads per CPU, free to
    /// move among them, for windows four times as long (a thread moves once in seconds); each thread's
    /// se.nr_migrations (/proc/thread-self/sched) counts the kernel's moves while every CPU was busy; the
    /// rate is all windows' moves together. Each is printed as the mean time between events. Run it on a
    /// quiet machine: anything else running adds wakes and moves.
    Background(BackgroundArgs),
    /// Small scheduling scenarios run for real on this kernel, to check a node scheduler model against.
    ///
    /// Each scenario is a set of processes of this binary, each pinned (sched_setaffinity), at its nice
    /// value (SCHED_OTHER), iterating compute_ns of CPU work, then a sleep, then a message exchange with a
    /// partner; all start at one instant, and each one's CPU time is read from /proc/PID/schedstat at both
    /// ends of a window after a warm-up (share = CPU time / window):
    ///
    /// - shares-1cpu: CPU-bound processes at --nices on one CPU: each one's share.
    /// - shares-2cpu: the same, each allowed on both CPUs of --cpu-pair.
    /// - sleeper: a process computing --sleeper-compute-us then sleeping --sleeper-sleep-us (absolute
    ///   CLOCK_MONOTONIC timer, 1 ns timer slack) beside a CPU-bound one on one CPU: its wake-up latency
    ///   (return from the sleep minus the timer's due instant), both shares.
    /// - sleeper-alone: the sleeper alone: the machine's own wake-up cost.
    /// - receivers: two processes exchanging 8-byte messages through FIFOs, each computing
    ///   --receiver-compute-us then polling for its partner's message up to --receiver-spin-us before
    ///   blocking in poll(2), beside a CPU-bound process, one CPU: round trips per second, the shares.
    /// - spinbarrier: j = --copies simultaneous copies of apps/spinbarrier (2 threads, spin barriers) on
    ///   --cpu-pair: t_j and s_j = t_j / t_1.
    /// - ctxswitch: the context-switch cost α_c (as `cosched bench ctxswitch`, one pair per repeat).
    /// - sleeper-busy: the sleeper in the real-time class (SCHED_FIFO 1) beside a CPU-bound process: every
    ///   wake takes the CPU at once, so its latency is the machine's wake-up cost on a busy CPU (root only;
    ///   left out of the default list for other users).
    ///
    /// Scenario files (--scenario-file, JSON of format cosched-node-scenario/1, docs/bench.md) describe
    /// others: processes with their nice values, CPUs and start times, each CPU-bound, a run/sleep pattern
    /// or a member of a spinning or blocking barrier group (the summary's `barrier phase mean GROUP`). With
    /// --scenario-file alone only the file's scenarios run; the model's inputs then come from --machine, or
    /// from --scenario ctxswitch,sleeper-alone[,sleeper-busy] in the same run. --predict-from MACHINE_JSON --scenario-file
    /// FILE predicts them without measuring.
    ///
    /// A wall-time benchmark: run it on a quiet machine. Prints median [min – max] over the repeats.
    Node(crate::bench_node::BenchNodeArgs),
    /// Fast mode against the exact engine: the same workloads run both ways.
    ///
    /// Every scheme on each seed's workload (Lublin-Feitelson jobs, WL7) at
    /// each offered load, once exact and once in fast mode; per scheme and load,
    /// fast / exact - 1 of the mean response, the mean wait and the delivered
    /// utilization, as the mean over seeds with a 95 % interval, and whether the
    /// saturation verdicts agree. With several loads (--loads), also each
    /// scheme's saturation point per seed both ways. See docs/fast-mode.md.
    Fast(crate::bench_fast::BenchFastArgs),
    /// A site's trace at full run times in fast mode: wall time and peak memory per scheme.
    ///
    /// By default generates a trace shaped like a production log (the
    /// Lublin-Feitelson model sized to 128 nodes, 18,000 jobs at offered load
    /// 0.6: about 90 days), writes it as SWF beside the results so it can be
    /// replayed, and runs it at run-time scale 1 under GS, SB and PB-SB in turn.
    Site(crate::bench_fast::BenchSiteArgs),
    /// The exact simulator's speed and peak memory from 32 to 4,096 nodes, per scheme family.
    ///
    /// Each point is the `full` scenario of `bench sim` (offered load 10, MPL
    /// 4: every CPU holds four processes) at another size, run in a child
    /// process so its peak memory is its own; timed after 3 simulated seconds.
    Scaling(crate::bench_scaling::BenchScalingArgs),
    /// What one run would gain split across threads by node (a conservative partition, the network's latency as
    /// lookahead).
    ///
    /// Times the sequential engine on the `full` scenario at several sizes, records where each event takes
    /// place, counts the rounds a partition would need and their busiest thread's events, measures a barrier
    /// among the threads on this machine, and predicts the speed-up. Builds nothing parallel.
    Partition(crate::bench_partition::BenchPartitionArgs),
    #[command(name = "scaling-point", hide = true)]
    ScalingPoint(crate::bench_scaling::ScalingPointArgs),
    #[command(name = "ctxswitch-worker", hide = true)]
    CtxSwitchWorker(crate::bench_micro::WorkerArgs),
    #[command(name = "pingpong-peer", hide = true)]
    PingPongPeer(crate::bench_micro::WorkerArgs),
}

#[derive(Args, Debug)]
pub struct CacheRefillArgs {
    /// Warm and cold passes measured.
    #[arg(long, default_value_t = 31, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Also print the report (every pass) as JSON.
    #[arg(long)]
    pub json: bool,
}

fn bench_cache_refill(args: &CacheRefillArgs) -> Result<(), String> {
    let report = cosched_bench::cache_refill::measure(args.repeat as usize)?;
    println!(
        "CPU {}: {:.1} MiB of cache; warm pass {:.1} µs, cold pass {:.1} µs (medians of {}); refill {:.1} µs",
        report.cpu,
        report.cache_bytes as f64 / (1u64 << 20) as f64,
        report.warm_median_ns as f64 / 1e3,
        report.cold_median_ns as f64 / 1e3,
        report.warm_pass_ns.len(),
        report.refill_ns as f64 / 1e3
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct BackgroundArgs {
    /// Seconds of each window.
    #[arg(long, default_value_t = 5.0)]
    pub window_s: f64,
    /// Windows of each measurement.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Also print the report (every window) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A window in seconds, as the background measurement takes it; `flag` names it in the error.
pub fn background_window(seconds: f64, flag: &str) -> Result<std::time::Duration, String> {
    use cosched_bench::background::{MAX_WINDOW, MIN_WINDOW};
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|w| (MIN_WINDOW..=MAX_WINDOW).contains(w))
        .ok_or(format!("{flag} {seconds}: a window is {} to {} s", MIN_WINDOW.as_secs_f64(), MAX_WINDOW.as_secs()))
}

fn bench_background(args: &BackgroundArgs) -> Result<(), String> {
    let report =
        cosched_bench::background::measure(background_window(args.window_s, "--window-s")?, args.repeat as usize)?;
    println!("{}", describe_background(&report));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// One line per measurement: each window's rate and the interval the machine file takes.
pub fn describe_background(report: &cosched_bench::background::BackgroundReport) -> String {
    let per_window = |rates: &[f64]| rates.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", ");
    let interval =
        |ns: u64| if ns == 0 { "none seen".to_string() } else { format!("one per {:.1} ms", ns as f64 / 1e6) };
    format!(
        "{} CPUs, windows of {:.1} s (moves: {:.1} s)\nwakes taking a busy CPU, per CPU-second: {} (median: {})\n\
         moves of a spinning thread, per thread-second: {} ({} moves in all: {})",
        report.cpus,
        report.window_s,
        report.window_s * cosched_bench::background::MOVES_WINDOW_FACTOR as f64,
        per_window(&report.wakes_per_cpu_s),
        interval(report.housekeeping_wake_interval_ns),
        per_window(&report.migrations_per_thread_s),
        report.migrations_counted,
        interval(report.background_migration_interval_ns),
    )
}

#[derive(Args, Debug)]
pub struct BenchSimArgs {
    /// Repetitions of each scenario (the best is reported, and the worst).
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Also print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Run only these scenarios (full, light, pb-sb, gs-cosched, gs-cosched-model: GS-cosched decided by the
    /// controller's core, and by the plan's model alone).
    #[arg(long, value_delimiter = ',')]
    pub only: Option<Vec<String>>,
}

const WARM_UP_S: f64 = 10.0;
const TIMED_S: f64 = 20.0;
const NODES: u32 = 1024;

#[derive(Serialize)]
struct ScenarioResult {
    scenario: &'static str,
    scheme: String,
    offered_load: f64,
    simulated_s: f64,
    wall_s_best: f64,
    wall_s_worst: f64,
    events: u64,
    events_per_s: f64,
    node_seconds_per_wall_s: f64,
    events_per_node_second: f64,
    events_per_s_over_baseline: f64,
}

#[derive(Serialize)]
struct BenchReport {
    baseline_queue_ops_per_s: f64,
    scenarios: Vec<ScenarioResult>,
}

pub fn run(cmd: &BenchCommand) -> Result<(), String> {
    match cmd {
        BenchCommand::Sim(args) => bench_sim(args),
        BenchCommand::Switch(args) => crate::bench_switch::run(args),
        BenchCommand::Controller(args) => crate::bench_controller::run(args),
        BenchCommand::Fast(args) => crate::bench_fast::run_fast_check(args),
        BenchCommand::Site(args) => crate::bench_fast::run_site(args),
        BenchCommand::Scaling(args) => crate::bench_scaling::run(args),
        BenchCommand::Partition(args) => crate::bench_partition::run(args),
        BenchCommand::ScalingPoint(args) => crate::bench_scaling::run_point(args),
        BenchCommand::Slowdown(args) => crate::bench_slowdown::run(args),
        BenchCommand::CtxSwitch(args) => crate::bench_micro::run_ctxswitch(args),
        BenchCommand::PingPong(args) => crate::bench_micro::run_pingpong(args),
        BenchCommand::CacheRefill(args) => bench_cache_refill(args),
        BenchCommand::Background(args) => bench_background(args),
        BenchCommand::Node(args) => crate::bench_node::run(args),
        BenchCommand::CtxSwitchWorker(args) => crate::bench_micro::ctxswitch_worker(args),
        BenchCommand::PingPongPeer(args) => crate::bench_micro::pingpong_peer(args),
    }
}

/// One timed run: wall seconds, simulated seconds and events over the timed window.
fn timed_run(cfg: &SimConfig, jobs: Vec<cosched_sim::SimJob>, plan_model_only: bool) -> Result<TimedRun, String> {
    let options = RunOptions { progress_every_events: 1 << 14, plan_model_only, ..RunOptions::default() };
    let timed = run_after_warm_up(cfg, jobs, &options, WARM_UP_S)?;
    let kinds: Vec<String> = cosched_sim::engine::EVENT_KIND_NAMES
        .iter()
        .zip(timed.outcome.event_counts)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    eprintln!("events by kind over the whole run: {}", kinds.join(", "));
    Ok(timed)
}

/// A run timed from the first progress report at or past `warm_up_s` simulated seconds to its end.
pub struct TimedRun {
    pub wall_s: f64,
    /// Simulated seconds timed: from the report that started the timing to the run's end (the horizon, or
    /// the last job's end if the jobs ran out first).
    pub timed_sim_s: f64,
    /// Events after the warm-up.
    pub events: u64,
    pub outcome: cosched_sim::run::RunResult,
}

/// Run `jobs` and time what follows the warm-up, so that filling the machine does not count. The warm-up's end is
/// seen at a progress report: `options.progress_every_events` sets how close to it the timing starts.
pub fn run_after_warm_up(
    cfg: &SimConfig,
    jobs: Vec<cosched_sim::SimJob>,
    options: &RunOptions,
    warm_up_s: f64,
) -> Result<TimedRun, String> {
    let mut warm: Option<(Instant, u64, f64)> = None;
    let outcome = run_sim(cfg, jobs, options, |p| {
        if warm.is_none() && p.now.as_secs_f64() >= warm_up_s {
            warm = Some((Instant::now(), p.events, p.now.as_secs_f64()));
        }
    })
    .map_err(|e| e.to_string())?;
    let (warm_at, warm_events, warm_sim_s) = warm.ok_or_else(|| {
        format!(
            "no progress report came past the warm-up ({warm_up_s} simulated s) before the run ended: \
             time a longer stretch"
        )
    })?;
    Ok(TimedRun {
        wall_s: warm_at.elapsed().as_secs_f64(),
        // The report comes up to one interval after the warm-up; what precedes it is not timed.
        timed_sim_s: outcome.summary.span_s - warm_sim_s,
        events: outcome.summary.events.saturating_sub(warm_events),
        outcome,
    })
}

/// One scenario of `bench sim`: a scheme at an offered load; `plan_model_only` decides GS-cosched with the plan's
/// model instead of the controller's core (the difference is what driving the core costs).
struct SimScenario {
    name: &'static str,
    scheme: Scheme,
    load: f64,
    plan_model_only: bool,
}

fn scenario(
    SimScenario { name, scheme, load, plan_model_only }: SimScenario,
    repeat: u32,
    baseline: f64,
) -> Result<ScenarioResult, String> {
    let spec = WorkloadSpec {
        trace: None,
        skip_bad_lines: false,
        drop_oversized: false,
        drop_statuses: Vec::new(),
        jobs: Some(20_000),
        model_procs: 64,
        runtime_scale: 0.002,
        target_load: Some(load),
        seed: 1,
        hyper_erlang_params: None,
        job_sizes: JobSizes::Machine,
    };
    let loaded = load_workload(&spec, NODES)?;
    let requests = loaded.requests();
    let plan = WorkloadPlan { mix: Mix { number: 7 }, runtime_scale: 1.0 };
    let cfg = SimConfig {
        scheme,
        nodes: NODES,
        mpl: 4,
        seed: 1,
        horizon_ns: Some(((WARM_UP_S + TIMED_S) * 1e9) as u64),
        ..SimConfig::default()
    };
    let mut walls = Vec::new();
    let (mut events, mut timed_sim_s) = (0, TIMED_S);
    for round in 0..repeat {
        let timed = timed_run(&cfg, sim_jobs(&requests, &plan, &cfg), plan_model_only)?;
        eprintln!(
            "{name} round {}: {:.2} s wall for {:.3} simulated s, {} events",
            round + 1,
            timed.wall_s,
            timed.timed_sim_s,
            timed.events
        );
        walls.push(timed.wall_s);
        (events, timed_sim_s) = (timed.events, timed.timed_sim_s);
    }
    let best = walls.iter().copied().fold(f64::INFINITY, f64::min);
    let worst = walls.iter().copied().fold(0.0, f64::max);
    let events_per_s = events as f64 / best;
    Ok(ScenarioResult {
        scenario: name,
        scheme: scheme.name().to_string(),
        offered_load: load,
        simulated_s: timed_sim_s,
        wall_s_best: best,
        wall_s_worst: worst,
        events,
        events_per_s,
        node_seconds_per_wall_s: NODES as f64 * timed_sim_s / best,
        events_per_node_second: events as f64 / (NODES as f64 * timed_sim_s),
        events_per_s_over_baseline: events_per_s / baseline,
    })
}

fn bench_sim(args: &BenchSimArgs) -> Result<(), String> {
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    let baseline = baseline_queue_ops_per_s();
    let pb_sb: Scheme = "PB-SB".parse().expect("a known scheme");
    let sim = |name, scheme, load| SimScenario { name, scheme, load, plan_model_only: false };
    let all = [
        sim("full", Scheme::LOCAL, 10.0),
        sim("light", Scheme::LOCAL, 0.9),
        sim("pb-sb", pb_sb, 10.0),
        sim("gs-cosched", Scheme::COSCHED_GANG, 0.9),
        SimScenario { plan_model_only: true, ..sim("gs-cosched-model", Scheme::COSCHED_GANG, 0.9) },
    ];
    let names: Vec<&str> = all.iter().map(|s| s.name).collect();
    if let Some(only) = &args.only {
        if let Some(unknown) = only.iter().find(|o| !names.contains(&o.as_str())) {
            return Err(format!("unknown scenario '{unknown}'; known: {}", names.join(", ")));
        }
    }
    let wanted = |name: &str| args.only.as_ref().is_none_or(|only| only.iter().any(|o| o == name));
    let mut scenarios = Vec::new();
    for s in all {
        if wanted(s.name) {
            scenarios.push(scenario(s, args.repeat, baseline)?);
        }
    }
    println!("baseline (bare radix heap, 4096 pending): {:.2} M push+pop/s", baseline / 1e6);
    println!(
        "{:<8} {:>7} {:>6} {:>10} {:>10} {:>10} {:>16} {:>14} {:>10}",
        "scenario", "scheme", "load", "wall s", "worst s", "M ev/s", "node-s per wall s", "ev per node-s", "vs base"
    );
    for s in &scenarios {
        println!(
            "{:<8} {:>7} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>16.0} {:>14.0} {:>10.3}",
            s.scenario,
            s.scheme,
            s.offered_load,
            s.wall_s_best,
            s.wall_s_worst,
            s.events_per_s / 1e6,
            s.node_seconds_per_wall_s,
            s.events_per_node_second,
            s.events_per_s_over_baseline
        );
    }
    if args.json {
        let report = BenchReport { baseline_queue_ops_per_s: baseline, scenarios };
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// Push/pop throughput of a bare radix heap (the event queue of earlier builds) with a simulator-like mix of
/// horizons (about 4,000 pending events), as a yardstick of machine speed.
fn baseline_queue_ops_per_s() -> f64 {
    let mut rng = StreamSeed(99).stream("baseline");
    let mut queue: RadixHeap<u32> = RadixHeap::new();
    for i in 0..4_096 {
        queue.schedule(SimTime(rng.below(1_000_000) as u64), i);
    }
    let operations = 20_000_000u64;
    let start = Instant::now();
    let mut checksum = 0u64;
    for _ in 0..operations {
        let (now, e) = queue.pop().expect("never empty");
        checksum = checksum.wrapping_add(e as u64);
        queue.schedule(now + 1 + rng.below(2_000_000) as u64, e);
    }
    std::hint::black_box(checksum);
    operations as f64 / start.elapsed().as_secs_f64()
}
