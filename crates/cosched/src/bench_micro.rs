//! `cosched bench ctxswitch` and `cosched bench pingpong`: the microbenchmarks
//! behind the analytic model (the context-switch cost `α_c`, the message cost
//! `α + β·n` and its CPU cost `α_CPU + β_CPU·n`), and their hidden worker
//! modes: this binary re-executes itself as the processes being measured.

use clap::{Args, ValueEnum};
use cosched_bench::ctxswitch::{self, CtxSwitchConfig, CtxSwitchResult};
use cosched_bench::os;
use cosched_bench::pingpong::{self, PingPongConfig, PingPongResult, Transport, Wait};
use cosched_bench::stats::Estimate;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Args, Debug)]
pub struct CtxSwitchArgs {
    /// Compute-then-yield rounds of each worker process (y).
    #[arg(long, default_value_t = 50_000)]
    pub yields: u64,
    /// Compute time before each yield, in nanoseconds (calibrated into loop iterations on the CPU).
    #[arg(long, default_value_t = 2_000)]
    pub work_ns: u64,
    /// Measurements of one worker alone and of a pair, interleaved.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// The CPU the workers are pinned to (default: the first this process may use).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Print the result as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the result as JSON to this file (read by `cosched model`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    Tcp,
    Shm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WaitArg {
    Spin,
    Yield,
}

#[derive(Args, Debug)]
pub struct PingPongArgs {
    /// Transports to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tcp,shm")]
    pub transport: Vec<TransportArg>,
    /// Message sizes in doubles (8 bytes each); at least two different sizes for the fit.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128,1024,8192,65536,262144")]
    pub sizes: Vec<usize>,
    /// Timed batches of each size (all sizes in turn, one line fit per repeat).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// How the shared-memory receiver waits: poll continuously, or poll and yield the CPU.
    #[arg(long, value_enum, default_value_t = WaitArg::Spin)]
    pub wait: WaitArg,
    /// Wall time aimed at for each timed batch, in milliseconds (the round trips are calibrated to it).
    #[arg(long, default_value_t = 100.0)]
    pub batch_ms: f64,
    /// Wall time aimed at for each chunk of a batch, in microseconds: chunks are timed one by one and only
    /// those in the faster half (after a chunk in the faster half) count, which leaves out chunks in which
    /// another process preempted an endpoint.
    #[arg(long, default_value_t = 500.0)]
    pub chunk_us: f64,
    /// Fewest round trips in a timed batch.
    #[arg(long, default_value_t = 10)]
    pub min_round_trips: u64,
    /// CPUs of the two endpoints, e.g. 0,1 (default: the first two this process may use).
    #[arg(long, value_parser = parse_cpu_pair, value_name = "A,B")]
    pub cpus: Option<[usize; 2]>,
    /// Print the results as JSON on stdout (the tables go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the results as a JSON array, one object per transport, to this file (read by `cosched model`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn parse_cpu_pair(text: &str) -> Result<[usize; 2], String> {
    let cpus: Vec<usize> = text
        .split(',')
        .map(|c| c.trim().parse().map_err(|_| format!("{c:?} is not a CPU number")))
        .collect::<Result<_, _>>()?;
    match cpus[..] {
        [a, b] => Ok([a, b]),
        _ => Err("give two CPUs, e.g. 0,1".to_string()),
    }
}

/// The hidden worker modes: their spec comes as JSON from the measuring process.
#[derive(Args, Debug)]
pub struct WorkerArgs {
    pub spec: String,
}

/// A command that runs this binary with `args` (the library appends the spec).
fn self_command(args: &'static [&'static str]) -> Result<impl Fn() -> Command + Sync, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?;
    Ok(move || {
        let mut command = Command::new(&exe);
        command.args(args);
        command
    })
}

pub fn ctxswitch_worker(args: &WorkerArgs) -> Result<(), String> {
    ctxswitch::worker_main(&args.spec)
}

pub fn pingpong_peer(args: &WorkerArgs) -> Result<(), String> {
    pingpong::peer_main(&args.spec)
}

pub fn run_ctxswitch(args: &CtxSwitchArgs) -> Result<(), String> {
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => *os::allowed_cpus()?.first().ok_or("no CPU available")?,
    };
    let config = CtxSwitchConfig { yields: args.yields, work_ns: args.work_ns, repeats: args.repeat, cpu };
    let worker = self_command(&["bench", "ctxswitch-worker"])?;
    eprintln!("measuring the context switch on CPU {cpu} ({} repeats)...", args.repeat);
    let result = ctxswitch::measure(&config, &worker)?;
    report(&ctxswitch_table(&result), &result, args.json, args.out.as_deref())
}

pub fn run_pingpong(args: &PingPongArgs) -> Result<(), String> {
    let config = PingPongConfig {
        sizes_doubles: args.sizes.clone(),
        repeats: args.repeat,
        target_batch_s: args.batch_ms / 1e3,
        target_chunk_s: args.chunk_us / 1e6,
        min_round_trips: args.min_round_trips,
        wait: match args.wait {
            WaitArg::Spin => Wait::Spin,
            WaitArg::Yield => Wait::Yield,
        },
        cpus: args.cpus,
    };
    let peer = self_command(&["bench", "pingpong-peer"])?;
    let mut results = Vec::new();
    for transport in &args.transport {
        let transport = match transport {
            TransportArg::Tcp => Transport::Tcp,
            TransportArg::Shm => Transport::Shm,
        };
        eprintln!(
            "measuring ping-pong over {} ({} sizes, {} repeats)...",
            transport.name(),
            args.sizes.len(),
            args.repeat
        );
        results.push(pingpong::measure(&config, transport, &peer)?);
    }
    let table: String = results.iter().map(pingpong_table).collect::<Vec<_>>().join("\n");
    report(&table, &results, args.json, args.out.as_deref())
}

/// The table on stdout, or the JSON on stdout and the table on stderr; and the JSON file.
fn report<T: Serialize>(table: &str, result: &T, json: bool, out: Option<&Path>) -> Result<(), String> {
    let text = serde_json::to_string_pretty(result).map_err(|e| e.to_string())?;
    if json {
        eprint!("{table}");
        println!("{text}");
    } else {
        print!("{table}");
    }
    match out {
        Some(path) => write_atomically(path, &text),
        None => Ok(()),
    }
}

/// Write beside the destination, then rename: a reader never sees half a file.
fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    crate::output::write_file_atomically(path, |mut file| writeln!(file, "{text}"))
}

/// `mean ± standard error` scaled into a unit, and the coefficient of variation.
fn with_spread(e: &Estimate, scale: f64, unit: &str) -> String {
    format!(
        "{:>10.3} ± {:<8.3} {unit:<9} CV {:>5.1} %",
        e.mean * scale,
        e.std_error * scale,
        100.0 * e.coefficient_of_variation()
    )
}

fn ctxswitch_table(r: &CtxSwitchResult) -> String {
    let mut t = format!(
        "Context switch on CPU {}: {} yields per worker, {} ns of work ({} iterations) before each, {} repeats\n",
        r.cpu, r.yields, r.work_ns, r.work_iters, r.repeats
    );
    t += "CPU time of the workers (user + system):\n";
    t += &format!("  t1   one worker alone     {}\n", with_spread(&r.t1_s, 1e3, "ms"));
    t += &format!("  t2   two on one CPU       {}\n", with_spread(&r.t2_s, 1e3, "ms"));
    t += &format!("  α_c = (t2 - 2 t1) / 2y    {}\n", with_spread(&r.alpha_c_s, 1e6, "µs"));
    t += &format!("  α_c from wall-clock times {}\n", with_spread(&r.alpha_c_wall_s, 1e6, "µs"));
    t += &format!(
        "context switches per yield: {:.3} with two workers (1 if every yield switched), {:.3} alone\n",
        r.switches_per_yield, r.switches_per_yield_alone
    );
    t
}

fn pingpong_table(r: &PingPongResult) -> String {
    let mut t = format!(
        "Ping-pong over {} (receiver {}), endpoints on CPUs {} and {}, {} repeats\n",
        r.transport, r.wait, r.cpus[0], r.cpus[1], r.repeats
    );
    if r.cpus[0] == r.cpus[1] {
        t += "warning: only one CPU: both endpoints share it\n";
    }
    t += &format!(
        "{:>8} {:>11}  {:<42} {:<42} {:>8}\n",
        "doubles", "round trips", "one-way time", "CPU per message", "CPU/time"
    );
    for p in &r.sizes {
        t += &format!(
            "{:>8} {:>11}  {} {} {:>8.2}\n",
            p.doubles,
            p.round_trips,
            with_spread(&p.one_way_s, 1e6, "µs"),
            with_spread(&p.cpu_per_message_s, 1e6, "µs"),
            p.cpu_per_message_s.mean / p.one_way_s.mean
        );
    }
    t += &format!(
        "  t(n) = α + β·n          α     {}  β     {}\n",
        with_spread(&r.alpha_s, 1e6, "µs"),
        with_spread(&r.beta_s_per_double, 1e9, "ns/double")
    );
    t += &format!(
        "  CPU = α_CPU + β_CPU·n    α_CPU {}  β_CPU {}\n",
        with_spread(&r.alpha_cpu_s, 1e6, "µs"),
        with_spread(&r.beta_cpu_s_per_double, 1e9, "ns/double")
    );
    t
}
