//! Ping-pong between two endpoints (Strazdins & Uhlmann, ANU TR-CS-04-01):
//! the message cost `t(n) = α + β·n` for messages of `n` doubles, and the CPU
//! time messaging consumes, `α_CPU + β_CPU·n` per one-way message.
//!
//! One side sends `n` doubles, the other receives them and sends them back;
//! the one-way time is half the round trip. The CPU time is that of both
//! endpoints over the same round trips (user + system, exact per thread),
//! divided by the number of one-way messages. Two transports:
//!
//! - `tcp`: TCP over loopback between two processes, TCP_NODELAY, blocking
//!   sockets: a waiting receiver sleeps in the kernel, so its CPU time is small.
//! - `shm`: shared memory between two threads of one process, a buffer of
//!   atomic words published by a release/acquire sequence number; the receiver
//!   polls it (`spin`, like MPI's busy polling, or `yield`: poll and yield), so
//!   both endpoints are busy all the time.
//!
//! The endpoints are pinned to two different CPUs. Each size is warmed up and
//! calibrated; then the repeats run all sizes in turn, and the lines are fitted
//! per repeat so that the estimates of `α` and `β` carry the spread between
//! repeats. A timed batch (about the target batch time) is made of short
//! chunks (about the target chunk time, 0.5 ms by default) timed one by one,
//! and only chunks in the faster half count (see [`Batch::undisturbed`]): a
//! chunk during which another process preempted an endpoint is slow, and in
//! spin mode it also charges the partner's polling to the CPU time. On an idle
//! machine the faster half is like the whole; on a busy one it is what an
//! undisturbed node does.

mod shm;
mod tcp;

use crate::os;
use crate::stats::{weighted_least_squares, Estimate};
use serde::{Deserialize, Serialize};
use std::process::Command;

pub use tcp::{peer_main, PeerSpec};

/// Message sizes measured by default, in doubles (8 bytes each): 8 B to 2 MiB.
pub const DEFAULT_SIZES_DOUBLES: [usize; 7] = [1, 16, 128, 1024, 8192, 65536, 262144];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Shm,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Shm => "shm",
        }
    }
}

/// How a shared-memory receiver waits for the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Poll the sequence word continuously.
    Spin,
    /// Poll, calling sched_yield between polls.
    Yield,
}

impl Wait {
    pub fn name(self) -> &'static str {
        match self {
            Wait::Spin => "spin",
            Wait::Yield => "yield",
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct PingPongConfig {
    pub sizes_doubles: Vec<usize>,
    pub repeats: usize,
    /// Wall time aimed at for each batch of round trips of one size.
    pub target_batch_s: f64,
    /// Wall time aimed at for each chunk of a batch (at least one round trip).
    pub target_chunk_s: f64,
    /// Fewest round trips in a batch, however slow.
    pub min_round_trips: u64,
    /// How the shared-memory receiver waits (TCP always blocks).
    pub wait: Wait,
    /// CPUs of the two endpoints; default: the first two this process may use.
    pub cpus: Option<[usize; 2]>,
}

impl Default for PingPongConfig {
    fn default() -> Self {
        PingPongConfig {
            sizes_doubles: DEFAULT_SIZES_DOUBLES.to_vec(),
            repeats: 5,
            target_batch_s: 0.1,
            target_chunk_s: 0.0005,
            min_round_trips: 10,
            wait: Wait::Spin,
            cpus: None,
        }
    }
}

/// One message size over the repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizePoint {
    pub doubles: usize,
    /// Half a round trip.
    pub one_way_s: Estimate,
    /// CPU time of both endpoints per one-way message.
    pub cpu_per_message_s: Estimate,
    /// Round trips in each timed batch (those of its undisturbed chunks count).
    pub round_trips: u64,
    /// Chunks of each timed batch.
    pub chunks: u64,
}

/// The measurement of one transport; the fitted parameters summarise one fit per repeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingPongResult {
    pub transport: String,
    /// `block` for TCP, `spin` or `yield` for shared memory.
    pub wait: String,
    pub sizes: Vec<SizePoint>,
    pub alpha_s: Estimate,
    pub beta_s_per_double: Estimate,
    pub alpha_cpu_s: Estimate,
    pub beta_cpu_s_per_double: Estimate,
    pub repeats: usize,
    /// CPUs of the pinging and the echoing endpoint.
    pub cpus: [usize; 2],
}

/// What one timed batch does: `chunks` chunks of `round_trips_per_chunk` round trips of `doubles` doubles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    doubles: usize,
    chunks: u64,
    round_trips_per_chunk: u64,
}

/// Wall time and CPU time (both endpoints) of one chunk of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    wall_ns: u64,
    cpu_ns: u64,
}

/// Two connected endpoints; the pinging side runs on the calling thread.
trait Link {
    fn batch(&mut self, plan: Plan) -> Result<Vec<Chunk>, String>;
}

/// The pinging side of a batch: run `round_trip` chunk by chunk, reading the
/// clocks only between chunks. The CPU time is this thread's only.
fn time_chunks(plan: Plan, mut round_trip: impl FnMut() -> Result<(), String>) -> Result<Vec<Chunk>, String> {
    let mut chunks = Vec::with_capacity(plan.chunks as usize);
    let (mut wall_ns, mut cpu_ns) = (os::monotonic_ns(), os::thread_cpu_ns());
    for _ in 0..plan.chunks {
        for _ in 0..plan.round_trips_per_chunk {
            round_trip()?;
        }
        let (wall_end_ns, cpu_end_ns) = (os::monotonic_ns(), os::thread_cpu_ns());
        chunks.push(Chunk { wall_ns: wall_end_ns - wall_ns, cpu_ns: cpu_end_ns - cpu_ns });
        (wall_ns, cpu_ns) = (wall_end_ns, cpu_end_ns);
    }
    Ok(chunks)
}

/// The echoing side of a batch: this thread's CPU time per chunk.
fn echo_cpu_per_chunk(plan: Plan, mut echo: impl FnMut() -> Result<(), String>) -> Result<Vec<u64>, String> {
    let mut cpu_ns = Vec::with_capacity(plan.chunks as usize);
    let mut start_ns = os::thread_cpu_ns();
    for _ in 0..plan.chunks {
        for _ in 0..plan.round_trips_per_chunk {
            echo()?;
        }
        let end_ns = os::thread_cpu_ns();
        cpu_ns.push(end_ns - start_ns);
        start_ns = end_ns;
    }
    Ok(cpu_ns)
}

/// Add the echoing side's CPU time to the pinging side's chunks.
fn add_echo_cpu(chunks: &mut [Chunk], echo_cpu_ns: &[u64]) {
    for (chunk, echo_ns) in chunks.iter_mut().zip(echo_cpu_ns) {
        chunk.cpu_ns += echo_ns;
    }
}

/// The round trips that count from a batch (see [`Batch::undisturbed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Batch {
    round_trips: u64,
    wall_ns: u64,
    cpu_ns: u64,
}

impl Batch {
    /// The chunks in the faster half whose predecessor is in the faster half
    /// too. The predecessor matters because the two endpoints' chunks are
    /// offset by a message: if the pinger is preempted at the end of a chunk,
    /// a spinning echo thread burns that time in its next chunk, which is
    /// otherwise fast. The first chunk, without a predecessor, never counts
    /// (unless nothing else would).
    fn undisturbed(chunks: &[Chunk], round_trips_per_chunk: u64) -> Batch {
        let mut by_wall: Vec<usize> = (0..chunks.len()).collect();
        by_wall.sort_by_key(|&i| chunks[i].wall_ns);
        let mut fast = vec![false; chunks.len()];
        for &i in &by_wall[..chunks.len().div_ceil(2)] {
            fast[i] = true;
        }
        let mut kept: Vec<&Chunk> = (1..chunks.len()).filter(|&i| fast[i] && fast[i - 1]).map(|i| &chunks[i]).collect();
        if kept.is_empty() {
            kept = (0..chunks.len()).filter(|&i| fast[i]).map(|i| &chunks[i]).collect();
        }
        Batch {
            round_trips: kept.len() as u64 * round_trips_per_chunk,
            wall_ns: kept.iter().map(|c| c.wall_ns).sum(),
            cpu_ns: kept.iter().map(|c| c.cpu_ns).sum(),
        }
    }

    fn one_way_s(&self) -> f64 {
        self.wall_ns as f64 * 1e-9 / (2 * self.round_trips) as f64
    }

    fn cpu_per_message_s(&self) -> f64 {
        self.cpu_ns as f64 * 1e-9 / (2 * self.round_trips) as f64
    }
}

/// Measure one transport. `make_peer_command` builds the command that runs
/// [`peer_main`] (the spec JSON is appended); only TCP uses it.
pub fn measure(
    config: &PingPongConfig,
    transport: Transport,
    make_peer_command: &(dyn Fn() -> Command + Sync),
) -> Result<PingPongResult, String> {
    validate(config)?;
    let cpus = endpoint_cpus(config)?;
    // The pinging side runs on its own thread so that pinning it leaves the caller's affinity alone.
    std::thread::scope(|s| {
        s.spawn(|| -> Result<PingPongResult, String> {
            os::pin_current_thread(cpus[0])?;
            let mut link: Box<dyn Link> = match transport {
                Transport::Tcp => Box::new(tcp::TcpLink::start(make_peer_command, cpus[1])?),
                Transport::Shm => Box::new(shm::ShmLink::new(
                    config.sizes_doubles.iter().copied().max().unwrap_or(0),
                    cpus[1],
                    config.wait,
                )),
            };
            let (plans, batches) = run_batches(link.as_mut(), config)?;
            let wait = if transport == Transport::Tcp { "block" } else { config.wait.name() };
            summarise(transport.name(), wait, config, cpus, &plans, &batches)
        })
        .join()
        .map_err(|_| "the ping-pong thread panicked".to_string())?
    })
}

fn validate(config: &PingPongConfig) -> Result<(), String> {
    if config.repeats == 0 {
        return Err("--repeat must be at least 1".to_string());
    }
    let mut distinct = config.sizes_doubles.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 || distinct[0] == 0 {
        return Err("give at least two different message sizes of at least 1 double".to_string());
    }
    if !(config.target_batch_s > 0.0 && config.target_chunk_s > 0.0) {
        return Err("the target batch and chunk times must be positive".to_string());
    }
    Ok(())
}

fn endpoint_cpus(config: &PingPongConfig) -> Result<[usize; 2], String> {
    let allowed = os::allowed_cpus()?;
    match config.cpus {
        Some(cpus) => match cpus.iter().find(|cpu| !allowed.contains(cpu)) {
            Some(cpu) => Err(format!("CPU {cpu} is not available to this process")),
            None => Ok(cpus),
        },
        None => match allowed[..] {
            [first, second, ..] => Ok([first, second]),
            [only] => Ok([only, only]),
            [] => Err("no CPU available".to_string()),
        },
    }
}

/// Plan a batch of about the target time in chunks of about the chunk time.
/// The time of a round trip is found by doubling a warm-up run until it takes
/// 2 ms (this also warms caches, the TCP window and the CPU clock); the best
/// of three such runs counts, so that a preemption does not inflate it.
fn calibrate(link: &mut dyn Link, doubles: usize, config: &PingPongConfig) -> Result<Plan, String> {
    const WARM_UP_NS: u64 = 2_000_000;
    let mut round_trips = 1u64;
    let mut best_round_trip_s = f64::INFINITY;
    let mut runs_long_enough = 0;
    while runs_long_enough < 3 {
        let plan = Plan { doubles, chunks: 1, round_trips_per_chunk: round_trips };
        let wall_ns: u64 = link.batch(plan)?.iter().map(|c| c.wall_ns).sum();
        if wall_ns >= WARM_UP_NS || round_trips >= 1 << 30 {
            runs_long_enough += 1;
            best_round_trip_s = best_round_trip_s.min(wall_ns.max(1) as f64 * 1e-9 / round_trips as f64);
        } else {
            round_trips *= 2;
        }
    }
    Ok(plan_batch(doubles, best_round_trip_s, config))
}

fn plan_batch(doubles: usize, round_trip_s: f64, config: &PingPongConfig) -> Plan {
    let round_trips_per_chunk = ((config.target_chunk_s / round_trip_s).round() as u64).max(1);
    let chunk_s = round_trips_per_chunk as f64 * round_trip_s;
    let chunks = ((config.target_batch_s / chunk_s).round() as u64)
        .max(config.min_round_trips.div_ceil(round_trips_per_chunk))
        .max(1);
    Plan { doubles, chunks, round_trips_per_chunk }
}

/// `batches[repeat][size]`: all sizes in turn within a repeat, so that each
/// repeat's fit sees the machine in one state.
fn run_batches(link: &mut dyn Link, config: &PingPongConfig) -> Result<(Vec<Plan>, Vec<Vec<Batch>>), String> {
    let plans = config.sizes_doubles.iter().map(|&n| calibrate(link, n, config)).collect::<Result<Vec<_>, _>>()?;
    let timed_batch = |link: &mut dyn Link, plan: &Plan| -> Result<Batch, String> {
        Ok(Batch::undisturbed(&link.batch(*plan)?, plan.round_trips_per_chunk))
    };
    let batches = (0..config.repeats)
        .map(|_| plans.iter().map(|plan| timed_batch(link, plan)).collect())
        .collect::<Result<Vec<_>, String>>()?;
    Ok((plans, batches))
}

/// `(α, β)` of one repeat, weighted by 1/y²: relative residuals, so that the
/// small sizes determine α and the large ones β (unweighted, the microsecond
/// intercept would drown in the noise of the millisecond large messages).
fn fit(sizes_doubles: &[usize], ys: &[f64]) -> Result<(f64, f64), String> {
    let xs: Vec<f64> = sizes_doubles.iter().map(|&n| n as f64).collect();
    let ws: Vec<f64> = ys.iter().map(|y| 1.0 / y.max(1e-12).powi(2)).collect();
    weighted_least_squares(&xs, ys, &ws).ok_or_else(|| "the line fit needs two distinct sizes".to_string())
}

fn estimate(samples: &[f64]) -> Result<Estimate, String> {
    Estimate::of(samples).ok_or_else(|| "no repeats".to_string())
}

fn summarise(
    transport: &str,
    wait: &str,
    config: &PingPongConfig,
    cpus: [usize; 2],
    plans: &[Plan],
    batches: &[Vec<Batch>],
) -> Result<PingPongResult, String> {
    let sizes = &config.sizes_doubles;
    let per_repeat = |f: fn(&Batch) -> f64| -> Vec<Vec<f64>> {
        batches.iter().map(|repeat| repeat.iter().map(f).collect()).collect()
    };
    let one_way = per_repeat(Batch::one_way_s);
    let cpu = per_repeat(Batch::cpu_per_message_s);
    let time_fits = one_way.iter().map(|ys| fit(sizes, ys)).collect::<Result<Vec<_>, _>>()?;
    let cpu_fits = cpu.iter().map(|ys| fit(sizes, ys)).collect::<Result<Vec<_>, _>>()?;
    let column = |rows: &[Vec<f64>], i: usize| rows.iter().map(|row| row[i]).collect::<Vec<f64>>();
    let points = sizes
        .iter()
        .enumerate()
        .map(|(i, &doubles)| {
            Ok(SizePoint {
                doubles,
                one_way_s: estimate(&column(&one_way, i))?,
                cpu_per_message_s: estimate(&column(&cpu, i))?,
                round_trips: plans[i].chunks * plans[i].round_trips_per_chunk,
                chunks: plans[i].chunks,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let intercepts = |fits: &[(f64, f64)]| fits.iter().map(|f| f.0).collect::<Vec<f64>>();
    let slopes = |fits: &[(f64, f64)]| fits.iter().map(|f| f.1).collect::<Vec<f64>>();
    Ok(PingPongResult {
        transport: transport.to_string(),
        wait: wait.to_string(),
        sizes: points,
        alpha_s: estimate(&intercepts(&time_fits))?,
        beta_s_per_double: estimate(&slopes(&time_fits))?,
        alpha_cpu_s: estimate(&intercepts(&cpu_fits))?,
        beta_cpu_s_per_double: estimate(&slopes(&cpu_fits))?,
        repeats: batches.len(),
        cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link whose times follow exact lines: 10 us + 1 ns/double one way, CPU 60 % of it;
    /// every fourth chunk is slowed down (and charged CPU) as if an endpoint had been preempted.
    struct LineLink;

    impl Link for LineLink {
        fn batch(&mut self, plan: Plan) -> Result<Vec<Chunk>, String> {
            let one_way_ns = 10_000 + plan.doubles as u64;
            let wall_ns = 2 * plan.round_trips_per_chunk * one_way_ns;
            let chunk = |i: u64| {
                let slowdown = if i % 4 == 3 { 3 } else { 1 };
                Chunk { wall_ns: wall_ns * slowdown, cpu_ns: wall_ns * 6 / 10 * slowdown }
            };
            Ok((0..plan.chunks).map(chunk).collect())
        }
    }

    #[test]
    fn batches_are_calibrated_and_lines_fitted() {
        let config = PingPongConfig { sizes_doubles: vec![1, 1000, 100_000], repeats: 3, ..PingPongConfig::default() };
        let (plans, batches) = run_batches(&mut LineLink, &config).unwrap();
        assert_eq!((batches.len(), batches[0].len()), (3, 3));
        // 1 double: 20.002 us per round trip; 0.5 ms chunks of 25 round trips; 0.1 s batches of 200 chunks.
        assert_eq!(plans[0], Plan { doubles: 1, chunks: 200, round_trips_per_chunk: 25 });
        // 100 000 doubles: 220 us per round trip; 2 per chunk, 227 chunks.
        assert_eq!(plans[2], Plan { doubles: 100_000, chunks: 227, round_trips_per_chunk: 2 });
        let result = summarise("test", "spin", &config, [0, 1], &plans, &batches).unwrap();
        assert!((result.alpha_s.mean - 10e-6).abs() < 1e-12, "{:?}", result.alpha_s);
        assert!((result.beta_s_per_double.mean - 1e-9).abs() < 1e-15);
        assert!((result.alpha_cpu_s.mean - 6e-6).abs() < 1e-12);
        assert!((result.beta_cpu_s_per_double.mean - 0.6e-9).abs() < 1e-15);
        assert_eq!(result.alpha_s.std_error, 0.0);
        assert!((result.sizes[2].one_way_s.mean - 110e-6).abs() < 1e-12);
        assert_eq!((result.sizes[0].round_trips, result.sizes[0].chunks), (5000, 200));
    }

    #[test]
    fn fast_chunks_after_fast_chunks_count() {
        let chunks: Vec<Chunk> =
            [10, 11, 50, 12, 13, 90, 14].iter().zip(1..).map(|(&wall_ns, cpu_ns)| Chunk { wall_ns, cpu_ns }).collect();
        // Faster half: chunks 0, 1, 3, 4. Chunk 0 has no predecessor and 3 follows the slow 2: 1 and 4 count.
        assert_eq!(Batch::undisturbed(&chunks, 4), Batch { round_trips: 8, wall_ns: 24, cpu_ns: 7 });
        // Nothing qualifies: the faster half counts.
        let two = [Chunk { wall_ns: 10, cpu_ns: 1 }, Chunk { wall_ns: 50, cpu_ns: 5 }];
        assert_eq!(Batch::undisturbed(&two, 3), Batch { round_trips: 3, wall_ns: 10, cpu_ns: 1 });
    }

    #[test]
    fn small_and_slow_plans() {
        let config = PingPongConfig { min_round_trips: 10, ..PingPongConfig::default() };
        // 5 ms round trips: one per chunk, 20 chunks for 0.1 s.
        assert_eq!(plan_batch(8, 5e-3, &config), Plan { doubles: 8, chunks: 20, round_trips_per_chunk: 1 });
        // 50 ms round trips: the minimum of 10 round trips wins.
        assert_eq!(plan_batch(8, 50e-3, &config), Plan { doubles: 8, chunks: 10, round_trips_per_chunk: 1 });
    }

    #[test]
    fn one_size_is_refused() {
        let config = PingPongConfig { sizes_doubles: vec![8, 8], ..PingPongConfig::default() };
        assert!(validate(&config).is_err());
    }
}
