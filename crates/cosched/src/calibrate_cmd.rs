//! `cosched calibrate`: measure this machine with the existing benchmarks
//! (`bench node`'s context switch and wake-up, `bench pingpong` over shared
//! memory and TCP, `bench switch`'s gang switch and slice-start skew, and a cache refill) and
//! write the machine file the simulator reads (`cosched sim --machine`,
//! `cosched predict`), with every raw measurement beside it.

use crate::bench::background_window;
use crate::bench_node::{self, BenchNodeArgs};
use clap::{Args, Parser};
use cosched_bench::pingpong::{self, PingPongConfig, PingPongResult, Transport as PingTransport};
use cosched_bench::switch::{self, SwitchBenchSettings};
use cosched_bench::{background, cache_refill, os};
use cosched_lab::node_model::MachineInputs;
use cosched_runtime::agent::freezer::FreezerKind;
use cosched_runtime::agent::switcher::ConfirmWait;
use cosched_sim::machine::{MachineModel, Transport, FORMAT};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// Passes of the cache refill measurement (each about a millisecond per MiB of cache).
const CACHE_REFILL_REPEATS: usize = 31;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Folder for machine.json and the raw measurements (node.json, pingpong.json, switch.json).
    #[arg(long, default_value = "machine")]
    pub out: PathBuf,
    /// Repeats of each measurement.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub repeat: u32,
    /// Seconds of each window of the gang switch measurement.
    #[arg(long, default_value_t = 2.0)]
    pub switch_window_s: f64,
    /// Seconds of each window of the background measurement (wakes and moves on busy CPUs).
    #[arg(long, default_value_t = 5.0)]
    pub background_window_s: f64,
}

/// `bench node`'s own flags, for its two scenarios that give model inputs.
#[derive(Parser)]
struct NodeFlags {
    #[command(flatten)]
    args: BenchNodeArgs,
}

pub fn run(args: &CalibrateArgs) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("calibrate measures the gang switch with real job cgroups and the freezer: run it as root".into());
    }
    let checked_out = crate::bench_node::check_root_out(&args.out)?;
    let switch_settings = switch_settings(args.switch_window_s)?;
    let background_window = background_window(args.background_window_s, "--background-window-s")?;
    let repeat = args.repeat.to_string();
    eprintln!("[1/6] context switch and wake-up (bench node: ctxswitch, sleeper-alone, sleeper-busy)...");
    let scenarios = "ctxswitch,sleeper-alone,sleeper-busy";
    let node_args = NodeFlags::try_parse_from(["node", "--scenario", scenarios, "--repeat", &repeat])
        .map_err(|e| e.to_string())?
        .args;
    // Where the real-time sleeper cannot run, the machine file says the busy wake cost was not measured.
    let node_args = BenchNodeArgs { realtime_optional: true, ..node_args };
    let node = bench_node::measure(&node_args)?;
    let inputs = MachineInputs::from_report(&node)?;
    eprintln!("[2/6] messages over shared memory and TCP (bench pingpong)...");
    let pings = measure_pingpong(args.repeat as usize)?;
    eprintln!("[3/6] gang switches (bench switch: slices of 10 and 100 ms, three agents for the skew)...");
    let switch = switch::run(&switch_settings)?;
    eprintln!("[4/6] cache refill (a warm pass over the CPU's cache share against one after another job's data)...");
    let cache = cache_refill::measure(CACHE_REFILL_REPEATS)?;
    eprintln!("[5/6] what the rest of the node does to busy CPUs (spinning threads: wakes that take a CPU, moves)...");
    let background = background::measure(background_window, args.repeat as usize)?;
    eprintln!("[6/6] writing {}", args.out.display());
    let gang_switch_ns = gang_switch_cost_ns(&switch)?;
    let model = MachineModel {
        format: FORMAT.into(),
        host: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: node.kernel.clone(),
        measured_at: utc_rfc3339(measured_now()),
        cpus_per_node: os::allowed_cpus()?.len() as u32,
        hz: (1_000_000_000 / inputs.tick_ns) as u32,
        context_switch_ns: inputs.switch_ns,
        wake_ns: inputs.wake_ns,
        wake_busy_ns: inputs.wake_busy_ns.unwrap_or(0),
        shm: transport_of(&pings, "shm")?,
        tcp: transport_of(&pings, "tcp")?,
        gang_switch_ns,
        gang_slice_skew_ns: switch.skew.as_ref().map_or(0, |s| s.spread.p50_ns),
        cache_bytes: cache.cache_bytes,
        cache_refill_ns: cache.refill_ns,
        background_migration_interval_ns: background.background_migration_interval_ns,
        housekeeping_wake_interval_ns: background.housekeeping_wake_interval_ns,
        sources: vec![
            "node.json".into(),
            "pingpong.json".into(),
            "switch.json".into(),
            "cache.json".into(),
            "background.json".into(),
        ],
    };
    model.check().map_err(|e| format!("the measurements do not make a machine model: {e}"))?;
    let dir = crate::output::OutputDir::begin(&checked_out)?;
    dir.write("machine.json", &json(&model)?)?;
    dir.write("node.json", &json(&node)?)?;
    dir.write("pingpong.json", &json(&pings)?)?;
    dir.write("switch.json", &json(&switch)?)?;
    dir.write("cache.json", &json(&cache)?)?;
    dir.write("background.json", &json(&background)?)?;
    let out = dir.commit()?;
    print!("{}", describe(&model));
    eprintln!("machine model: {}", out.join("machine.json").display());
    Ok(())
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, String> {
    serde_json::to_string_pretty(value).map(|text| text + "\n").map_err(|e| e.to_string())
}

fn measure_pingpong(repeats: usize) -> Result<Vec<PingPongResult>, String> {
    let config = PingPongConfig { repeats, ..PingPongConfig::default() };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?;
    let peer = move || {
        let mut command = Command::new(&exe);
        command.args(["bench", "pingpong-peer"]);
        command
    };
    [PingTransport::Shm, PingTransport::Tcp].into_iter().map(|t| pingpong::measure(&config, t, &peer)).collect()
}

/// The CPU time a gang switch takes from the jobs, per CPU: the CPU time the two jobs used at the shortest
/// slice against the mean of the baselines without switching, per switch, at most the median time from the
/// slice boundary to the incoming gang thawed (part of which the outgoing gang still runs). CPU time, not the
/// jobs' iterations: their rate also moves with the VM's clock and caches by a few per cent between windows.
fn gang_switch_cost_ns(report: &switch::Report) -> Result<u64, String> {
    let shortest = report.slices.iter().min_by_key(|s| s.slice_ms).ok_or("bench switch measured no slice")?;
    let baseline_cpus =
        report.baselines.iter().map(|w| w.cpus_used).sum::<f64>() / report.baselines.len().max(1) as f64;
    if baseline_cpus.is_nan() || baseline_cpus <= 0.0 {
        return Err("bench switch's baselines used no CPU time".into());
    }
    let lost_share = 1.0 - shortest.window.cpus_used / baseline_cpus;
    let lost_ns = lost_share * shortest.slice_ms as f64 * 1e6;
    Ok((lost_ns.max(0.0).round() as u64).min(report.latency.p50_ns))
}

fn switch_settings(window_s: f64) -> Result<SwitchBenchSettings, String> {
    if !(window_s > 0.0 && window_s <= 600.0) {
        return Err("--switch-window-s must be in (0, 600]".into());
    }
    let settings = SwitchBenchSettings {
        duration: Duration::from_secs_f64(window_s),
        slices_ms: vec![10, 100],
        probe_slice_ms: 10,
        freezer: FreezerKind::V2,
        procs_per_job: 2,
        agents: 3,
        realtime: true,
        confirm_wait: ConfirmWait::Bounded,
        switching_threads: 2,
        trace: None,
        trace_slow_us: 200,
    };
    settings.check()?;
    Ok(settings)
}

/// A transport's line fits (means over the repeats), per byte.
fn transport_of(results: &[PingPongResult], name: &str) -> Result<Transport, String> {
    let r = results.iter().find(|r| r.transport == name).ok_or(format!("no {name} measurement"))?;
    let per_byte = |s_per_double: f64| (s_per_double * 1e9 / 8.0).max(0.0);
    Ok(Transport {
        latency_base_ns: (r.alpha_s.mean * 1e9).max(0.0),
        latency_ns_per_byte: per_byte(r.beta_s_per_double.mean),
        cpu_base_ns: (r.alpha_cpu_s.mean * 1e9).max(0.0),
        cpu_ns_per_byte: per_byte(r.beta_cpu_s_per_double.mean),
    })
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default().trim().chars().filter(|c| !c.is_control()).take(64).collect()
}

fn describe(m: &MachineModel) -> String {
    format!(
        "machine {} (Linux {}), {} CPUs, HZ {}, measured {}\n\
         context switch {:.2} µs, wake-up {:.1} µs on an idle CPU, {:.1} µs on a busy one\n\
         shared memory: {:.3} µs + {:.4} ns/byte (CPU {:.3} µs + {:.4} ns/byte)\n\
         TCP:           {:.1} µs + {:.4} ns/byte (CPU {:.1} µs + {:.4} ns/byte)\n\
         gang switch {:.1} µs of lost CPU time, slice-start skew {:.1} µs\n\
         cache refill {:.1} µs for a CPU's {:.1} MiB of cache\n\
         busy CPUs: a wake takes one every {:.1} ms, a process moves every {:.2} s (0: none seen)\n",
        m.host,
        m.kernel,
        m.cpus_per_node,
        m.hz,
        m.measured_at,
        m.context_switch_ns as f64 / 1e3,
        m.wake_ns as f64 / 1e3,
        m.wake_busy_ns as f64 / 1e3,
        m.shm.latency_base_ns / 1e3,
        m.shm.latency_ns_per_byte,
        m.shm.cpu_base_ns / 1e3,
        m.shm.cpu_ns_per_byte,
        m.tcp.latency_base_ns / 1e3,
        m.tcp.latency_ns_per_byte,
        m.tcp.cpu_base_ns / 1e3,
        m.tcp.cpu_ns_per_byte,
        m.gang_switch_ns as f64 / 1e3,
        m.gang_slice_skew_ns as f64 / 1e3,
        m.cache_refill_ns as f64 / 1e3,
        m.cache_bytes as f64 / (1u64 << 20) as f64,
        m.housekeeping_wake_interval_ns as f64 / 1e6,
        m.background_migration_interval_ns as f64 / 1e9,
    )
}

/// When the machine was measured: the calendar date written in its file.
#[allow(clippy::disallowed_methods)] // a measurement's date is the wall clock's
fn measured_now() -> SystemTime {
    SystemTime::now()
}

/// `2026-11-26T10:00:00Z` for a time after 1970.
fn utc_rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (year, month, day) = crate::calendar::date_of_day(secs / 86_400);
    let rest = secs % 86_400;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_by_hand() {
        let at = |secs: u64| utc_rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_685_400), "2026-11-26T09:30:00Z");
    }
}
