//! `cosched bench switch`: the flags of the switch benchmark and its printed report. The measurements
//! (real job cgroups, the real freezer, real CPU-bound processes, agents for the skew) are
//! `cosched_bench::switch`; this binary's hidden modes `__spin` and `__bench-agent` run its job and agent processes.

use clap::{Args, ValueEnum};
use cosched_bench::switch::{Report, SwitchBenchSettings};
use cosched_bench::switch_load::{LoadBenchSettings, LoadReport};
use cosched_bench::switch_trace::TraceSummary;
use cosched_runtime::agent::freezer::FreezerKind;
use cosched_runtime::agent::switcher::ConfirmWait;
use cosched_runtime::controller::skew::Summary;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Instead of the measurements above: a whole `cosched up` in this process, the two gangs rotating, and this
    /// many clients submitting short jobs to it; the switch latency of a quiet window and of the load's window.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub clients: Option<u64>,
    /// With --clients: jobs the clients submit in all (each `true`, one task).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub load_jobs: u64,
    /// With --clients: the daemon's slice (ms).
    #[arg(long, default_value_t = cosched_runtime::agent::switcher::DEFAULT_SLICE_NS as f64 / 1e6)]
    pub load_slice_ms: f64,
    /// Also print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

impl BenchSwitchArgs {
    fn settings(&self) -> Result<SwitchBenchSettings, String> {
        if !(self.duration_s > 0.0 && self.duration_s <= 3600.0) {
            return Err("--duration-s must be in (0, 3600]".into());
        }
        let settings = SwitchBenchSettings {
            duration: Duration::from_secs_f64(self.duration_s),
            slices_ms: self.slices_ms.clone(),
            probe_slice_ms: self.probe_slice_ms,
            freezer: self.freezer.kind(),
            procs_per_job: self.procs_per_job,
            agents: self.agents,
            realtime: !self.no_realtime,
            confirm_wait: if self.strict { ConfirmWait::Strict } else { ConfirmWait::Bounded },
            switching_threads: self.switching_threads,
            trace: self.trace.clone(),
            trace_slow_us: self.trace_slow_us,
        };
        settings.check()?;
        Ok(settings)
    }
}

pub fn run(args: &BenchSwitchArgs) -> Result<(), String> {
    if let Some(clients) = args.clients {
        return run_under_load(args, clients as usize);
    }
    let report = cosched_bench::switch::run(&args.settings()?)?;
    print_report(&report);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    }
    Ok(())
}

fn run_under_load(args: &BenchSwitchArgs, clients: usize) -> Result<(), String> {
    let settings = LoadBenchSettings {
        clients,
        jobs: args.load_jobs as usize,
        slice_ms: args.load_slice_ms,
        quiet: Duration::from_secs_f64(args.duration_s),
        realtime: !args.no_realtime,
        confirm_wait: if args.strict { ConfirmWait::Strict } else { ConfirmWait::Bounded },
        switching_threads: args.switching_threads,
        helper_program: std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?,
    };
    eprintln!("bench switch: cosched up in this process, {clients} clients submitting {} jobs", settings.jobs);
    // The daemon runs on threads of this process until it exits: its state directory goes last.
    let state = tempfile::Builder::new().prefix("cosched-bench-load").tempdir().map_err(|e| e.to_string())?;
    let report = cosched_bench::switch_load::run(&settings, state.path())?;
    print_load_report(&report);
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
        // The targets are on the work done per CPU-second: the plain ratio also holds the share of the machine
        // that other work took while half the tasks were stopped (docs/performance.md, "Switching").
        let (target, result) = match s.slice_ms {
            2 => ("≥ 90 %", verdict(s.ratio_per_cpu >= 0.90)),
            5 => ("≥ 95 %", verdict(s.ratio_per_cpu >= 0.95)),
            _ => ("", ""),
        };
        print_row(
            &format!("throughput per CPU-second at {} ms / none", s.slice_ms),
            format!("{:.1} %", s.ratio_per_cpu * 100.0),
            target,
            result,
        );
        print_row(
            &format!("  throughput at {} ms / none (other work too)", s.slice_ms),
            format!("{:.1} %", s.ratio * 100.0),
            "",
            "",
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

fn print_load_report(r: &LoadReport) {
    println!(
        "{} clients submitted {} jobs ({} requests, {} refused) in {:.1} s; slices of {} ms",
        r.clients, r.jobs, r.requests, r.refused, r.load_s, r.slice_ms
    );
    print_row("metric", "value".into(), "target", "result");
    for (window, t) in [("quiet", &r.quiet), ("under load", &r.loaded)] {
        let name = |what: &str, p: &str| format!("switch {what} {p} ({window}, {} switches)", t.latency.count);
        print_row(&name("latency", "p50"), us(t.latency.p50_ns), "", "");
        let target_met = t.latency.count > 0 && t.latency.p99_ns <= 1_000_000;
        print_row(&name("latency", "p99"), us(t.latency.p99_ns), "≤ 1 ms", verdict(target_met));
        print_row(&name("latency", "max"), us(t.latency.max_ns), "", "");
        print_row(&name("lateness", "p99"), us(t.lateness.p99_ns), "", "");
    }
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
