//! `cosched sim`: simulate schemes side by side on one workload.

use crate::output::{csv_field, num, push_row, OutputDir};
use crate::plot::{StackedBar, StackedBarChart};
use crate::progress::ProgressLine;
use crate::workload_source::{load_workload, WorkloadReport, WorkloadSpec};
use clap::Args;
use cosched_sim::config::{quantum_table_from_bands_ms, BoostWalk, CostConfig, NetworkConfig, NodeSchedulerConfig};
use cosched_sim::input::{sim_jobs, WorkloadPlan};
use cosched_sim::run::{run as run_sim, RunOptions, RunResult};
use cosched_sim::trace::TraceEvent;
use cosched_sim::{Mix, Scheme, SimConfig};
use serde::Serialize;
use std::path::PathBuf;

const NS_PER_US: f64 = 1e3;
const NS_PER_MS: f64 = 1e6;

/// Simulate time-sharing schemes side by side on one workload.
///
/// With no options: WL7 (job types J1-J6 mixed), 300 jobs of the
/// Lublin-Feitelson model on 32 one-CPU nodes, MPL 5, skew 20 %, Local and GS.
/// Results go to the terminal and to --out as CSV and JSON.
#[derive(Args, Debug)]
#[command(after_help = "Model parameters and their meaning: docs/model.md. Every default is the \
reference study's value or is marked there as our choice.")]
pub struct SimArgs {
    /// Schemes to compare, comma-separated: Local GS SB SY DCS PB DCS-SB DCS-SY PB-SB PB-SY (any case).
    #[arg(long, value_delimiter = ',', default_value = "Local,GS")]
    pub schemes: Vec<Scheme>,

    // ---- workload -------------------------------------------------------------
    /// Workload mix: WL1..WL6 use only job type J1..J6, WL7 all six, WL8 J2, J4, J5.
    #[arg(long, default_value = "WL7", help_heading = "Workload")]
    pub workload: Mix,
    /// Read jobs from this SWF trace (plain or gzip) instead of generating them.
    #[arg(long, value_name = "FILE.swf", help_heading = "Workload")]
    pub trace: Option<PathBuf>,
    /// Skip malformed trace lines (they are counted and reported) instead of stopping.
    #[arg(long, help_heading = "Workload")]
    pub skip_bad_lines: bool,
    /// Leave out trace jobs wider than the machine (counted and reported) instead of stopping.
    #[arg(long, help_heading = "Workload")]
    pub drop_oversized: bool,
    /// Leave out trace jobs with these SWF statuses (names or numbers: failed, completed, partial, last-partial,
    /// failed-partial, cancelled, unknown), e.g. `failed,cancelled`. By default every job is simulated: failed and
    /// cancelled jobs ran until they ended and loaded the machine too. The summary says what was simulated.
    #[arg(long, value_delimiter = ',', value_parser = cosched_workload::swf::parse_status, requires = "trace", help_heading = "Workload")]
    pub drop_status: Vec<i64>,
    /// Jobs to generate (with --trace: keep only the first N).
    #[arg(long, help_heading = "Workload")]
    pub jobs: Option<usize>,
    /// Target offered load (CPU demand / capacity), set by scaling inter-arrival times
    /// (--natural-load keeps the workload's own instead).
    #[arg(long, default_value = "0.4", help_heading = "Workload")]
    pub load: Option<f64>,
    /// Keep the workload's own inter-arrival times (after the run-time scale) instead of --load.
    #[arg(long, conflicts_with = "load", help_heading = "Workload")]
    pub natural_load: bool,
    /// Multiply every nominal run time by this (the model's run times are hours; see docs/model.md).
    #[arg(long, default_value_t = 0.002, help_heading = "Workload")]
    pub runtime_scale: f64,

    // ---- machine --------------------------------------------------------------
    /// Nodes in the cluster (p).
    #[arg(long, default_value_t = 32, help_heading = "Machine")]
    pub nodes: u32,
    /// CPUs per node (c); one task per CPU.
    #[arg(long, default_value_t = 1, help_heading = "Machine")]
    pub cpus_per_node: u32,
    /// Multiprogramming level: processes per CPU (Local), matrix rows (GS).
    #[arg(long, default_value_t = 5, help_heading = "Machine")]
    pub mpl: u32,
    /// Skew s: compute and I/O of every iteration are scaled by 1 + U(-s/2, s/2).
    #[arg(long, default_value_t = 0.20, help_heading = "Machine")]
    pub skew: f64,
    /// Seed of every random stream (workload, job types, skew).
    #[arg(long, default_value_t = 1, help_heading = "Machine")]
    pub seed: u64,

    // ---- network --------------------------------------------------------------
    /// Message latency L(n) = a + b n: the constant a, in µs.
    #[arg(long, default_value_t = 25.0, help_heading = "Network")]
    pub latency_base_us: f64,
    /// Message latency L(n) = a + b n: b, in µs per byte (default gives L(4096) = 185.48 µs).
    #[arg(long, default_value_t = 0.039_179_687_5, help_heading = "Network")]
    pub latency_us_per_byte: f64,
    /// Time a message occupies the sending or the receiving interface, µs.
    #[arg(long, default_value_t = 10.0, help_heading = "Network")]
    pub nic_us: f64,
    /// Shared-memory latency between tasks on one node: constant part, µs.
    #[arg(long, default_value_t = 2.0, help_heading = "Network")]
    pub shm_base_us: f64,
    /// Shared-memory latency: µs per byte.
    #[arg(long, default_value_t = 0.001, help_heading = "Network")]
    pub shm_us_per_byte: f64,
    /// Size of every message, bytes.
    #[arg(long, default_value_t = 4096, help_heading = "Network")]
    pub message_bytes: u32,

    // ---- costs ----------------------------------------------------------------
    /// Context switch CS, µs.
    #[arg(long, default_value_t = 200.0, help_heading = "Costs")]
    pub cs_us: f64,
    /// Gang switch CS_GS (includes the cross-node synchronisation), ms.
    #[arg(long, default_value_t = 2.0, help_heading = "Costs")]
    pub gang_cs_ms: f64,
    /// Gang quantum Q, ms.
    #[arg(long, default_value_t = 200.0, help_heading = "Costs")]
    pub gang_quantum_ms: f64,
    /// Interrupt I, µs (dynamic schemes).
    #[arg(long, default_value_t = 50.0, help_heading = "Costs")]
    pub interrupt_us: f64,
    /// Moving a process between scheduler queues, µs (dynamic schemes).
    #[arg(long, default_value_t = 3.0, help_heading = "Costs")]
    pub queue_move_us: f64,
    /// Checking one endpoint, µs (periodic boost, spin-yield).
    #[arg(long, default_value_t = 2.0, help_heading = "Costs")]
    pub endpoint_check_us: f64,
    /// A system call (spin-block's block, spin-yield's yield), µs, besides its queue moves.
    #[arg(long, default_value_t = 3.0, help_heading = "Costs")]
    pub syscall_us: f64,
    /// Spin time before blocking or yielding, as a multiple of the message latency L(n).
    #[arg(long, default_value_t = 1.1, help_heading = "Costs")]
    pub spin_factor: f64,
    /// A boost to the top level keeps the remaining quantum (default: a fresh quantum).
    #[arg(long, help_heading = "Node scheduler")]
    pub boost_keeps_quantum: bool,
    /// When periodic boost's 1 ms walk runs: a tick before the scheduler acts on its
    /// boost (tick-before: the study's "at the next millisecond boundary") or just
    /// before it at the same boundary (same-tick). See docs/model.md.
    #[arg(long, default_value = "tick-before", help_heading = "Node scheduler")]
    pub boost_walk: BoostWalk,
    /// GS: no gang switch cost at a quantum's end while one row holds every job
    /// (default: charged at the end of every quantum, as the study says).
    #[arg(long, help_heading = "Costs")]
    pub gang_free_same_row: bool,

    // ---- node scheduler -------------------------------------------------------
    /// Scheduler tick, ms.
    #[arg(long, default_value_t = 1.0, help_heading = "Node scheduler")]
    pub tick_ms: f64,
    /// Period of the raise of every process to the top level, ms.
    #[arg(long, default_value_t = 1000.0, help_heading = "Node scheduler")]
    pub raise_period_ms: f64,
    /// Quanta of the six 10-level bands, levels 0-9 first, ms.
    #[arg(long, value_delimiter = ',', default_value = "200,160,120,80,40,20", help_heading = "Node scheduler")]
    pub quanta_ms: Vec<u64>,

    // ---- output ---------------------------------------------------------------
    /// Folder for summary.csv, jobs.csv, summary.json and workload.swf (replaced if it is cosched output).
    #[arg(long, default_value = "cosched-out/sim", help_heading = "Output")]
    pub out: PathBuf,
    /// Bounded-slowdown threshold, s (default: 10 s times the run-time scale).
    #[arg(long, help_heading = "Output")]
    pub bsld_threshold_s: Option<f64>,
    /// Stop each run at this simulated time, s (jobs not finished are not reported).
    #[arg(long, help_heading = "Output")]
    pub horizon_s: Option<f64>,
    /// Also write every scheduling decision to trace-SCHEME.jsonl (small runs only).
    #[arg(long, help_heading = "Output")]
    pub trace_events: bool,
    /// No progress lines.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

pub const DEFAULT_JOBS: usize = 300;

fn ns_from(value: f64, ns_per_unit: f64, flag: &str) -> Result<u64, String> {
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{flag} must be a finite non-negative number, got {value}"));
    }
    Ok((value * ns_per_unit).round() as u64)
}

impl SimArgs {
    pub fn config(&self, scheme: Scheme) -> Result<SimConfig, String> {
        let bands: [u64; 6] =
            self.quanta_ms.clone().try_into().map_err(|_| {
                format!("--quanta-ms needs 6 values (levels 0-9 .. 50-59), got {}", self.quanta_ms.len())
            })?;
        let cfg = SimConfig {
            scheme,
            nodes: self.nodes,
            cpus_per_node: self.cpus_per_node,
            mpl: self.mpl,
            skew: self.skew,
            seed: self.seed,
            network: NetworkConfig {
                latency_base_ns: self.latency_base_us * NS_PER_US,
                latency_ns_per_byte: self.latency_us_per_byte * NS_PER_US,
                nic_ns_per_message: ns_from(self.nic_us, NS_PER_US, "--nic-us")?,
                shm_base_ns: self.shm_base_us * NS_PER_US,
                shm_ns_per_byte: self.shm_us_per_byte * NS_PER_US,
                message_bytes: self.message_bytes,
            },
            costs: CostConfig {
                context_switch_ns: ns_from(self.cs_us, NS_PER_US, "--cs-us")?,
                gang_switch_ns: ns_from(self.gang_cs_ms, NS_PER_MS, "--gang-cs-ms")?,
                interrupt_ns: ns_from(self.interrupt_us, NS_PER_US, "--interrupt-us")?,
                queue_move_ns: ns_from(self.queue_move_us, NS_PER_US, "--queue-move-us")?,
                endpoint_check_ns: ns_from(self.endpoint_check_us, NS_PER_US, "--endpoint-check-us")?,
                gang_quantum_ns: ns_from(self.gang_quantum_ms, NS_PER_MS, "--gang-quantum-ms")?,
                syscall_ns: ns_from(self.syscall_us, NS_PER_US, "--syscall-us")?,
                spin_factor: self.spin_factor,
                boost_keeps_quantum: self.boost_keeps_quantum,
                boost_walk: self.boost_walk,
                gang_switch_every_quantum: !self.gang_free_same_row,
            },
            scheduler: NodeSchedulerConfig {
                tick_ns: ns_from(self.tick_ms, NS_PER_MS, "--tick-ms")?,
                raise_period_ns: ns_from(self.raise_period_ms, NS_PER_MS, "--raise-period-ms")?,
                quantum_ns_by_level: quantum_table_from_bands_ms(&bands),
            },
            horizon_ns: self.horizon_s.map(|h| ns_from(h, 1e9, "--horizon-s")).transpose()?,
        };
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }

    fn workload_spec(&self) -> Result<WorkloadSpec, String> {
        if !(self.runtime_scale.is_finite() && self.runtime_scale > 0.0) {
            return Err(format!("--runtime-scale must be positive, got {}", self.runtime_scale));
        }
        let target_load = if self.natural_load { None } else { self.load };
        if let Some(load) = target_load {
            if !(load.is_finite() && load > 0.0) {
                return Err(format!("--load must be positive, got {load}"));
            }
        }
        if self.jobs == Some(0) {
            return Err("--jobs must be at least 1".into());
        }
        Ok(WorkloadSpec {
            trace: self.trace.clone(),
            skip_bad_lines: self.skip_bad_lines,
            drop_oversized: self.drop_oversized,
            drop_statuses: self.drop_status.clone(),
            jobs: self.jobs.or(self.trace.is_none().then_some(DEFAULT_JOBS)),
            model_procs: self.nodes.saturating_mul(self.cpus_per_node),
            runtime_scale: self.runtime_scale,
            target_load,
            seed: self.seed,
            hyper_erlang_params: None,
        })
    }

    fn bsld_threshold_s(&self) -> f64 {
        self.bsld_threshold_s.unwrap_or(10.0 * self.runtime_scale)
    }
}

/// The machine-readable record of a run: everything needed to repeat it.
#[derive(Serialize)]
struct SummaryDocument<'a> {
    cosched_version: &'static str,
    command: String,
    seed: u64,
    workload: &'a WorkloadReport,
    mix: String,
    configs: Vec<SimConfig>,
    results: Vec<&'a cosched_sim::Summary>,
}

pub fn run(args: &SimArgs) -> Result<(), String> {
    if args.schemes.is_empty() {
        return Err("--schemes needs at least one scheme".into());
    }
    // Validate everything before doing any work or touching the output folder.
    let configs = args.schemes.iter().map(|&s| args.config(s)).collect::<Result<Vec<_>, _>>()?;
    let spec = args.workload_spec()?;
    OutputDir::check(&args.out)?;
    let machine_cpus = configs[0].cpu_count();
    let loaded = load_workload(&spec, machine_cpus)?;
    let plan = WorkloadPlan { mix: args.workload, runtime_scale: 1.0 };
    eprintln!("workload: {}, mix {}", loaded.report.describe(), args.workload);
    let requests = loaded.requests();
    let interrupted = stop_on_interrupt()?;
    let options = RunOptions {
        bounded_slowdown_threshold_s: args.bsld_threshold_s(),
        record_trace: args.trace_events,
        progress_every_events: 1 << 18,
        visit_every_tick: false,
        stop: Some(interrupted.clone()),
    };
    let labels: Vec<String> = configs.iter().map(|c| c.scheme.name().to_string()).collect();
    let results = run_all(&configs, &labels, |i| sim_jobs(&requests, &plan, &configs[i]), &options, !args.quiet)?;
    print_table(&results);
    let out = OutputDir::begin(&args.out)?;
    write_outputs(&out, args, &configs, &loaded.report, &results)?;
    cosched_workload::swf::write_path(&out.file("workload.swf"), &loaded.workload)
        .map_err(|e| format!("cannot write workload.swf: {e}"))?;
    let path = out.commit()?;
    eprintln!(
        "results in {}/ (summary.csv, jobs.csv, summary.json, response.svg, cpu-time.svg, workload.swf)",
        path.display()
    );
    if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(format!(
            "interrupted: {} holds the records of the jobs finished by then (interrupted_at_s in summary.json)",
            path.display()
        ));
    }
    Ok(())
}

/// A flag that the first Ctrl-C (or SIGTERM) sets: the runs stop at their next progress report and what finished
/// is written. A second one ends the process at once.
fn stop_on_interrupt() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>, String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // Registered first: with the flag already set, the signal exits (status 1) instead.
        signal_hook::flag::register_conditional_shutdown(signal, 1, flag.clone())
            .and_then(|_| signal_hook::flag::register(signal, flag.clone()))
            .map_err(|e| format!("cannot catch signal {signal}: {e}"))?;
    }
    Ok(flag)
}

/// Run every configuration, in parallel on the available cores; results in
/// the order of `configs`.
pub fn run_all(
    configs: &[SimConfig],
    labels: &[String],
    jobs_for: impl Fn(usize) -> Vec<cosched_sim::SimJob> + Sync,
    options: &RunOptions,
    show_progress: bool,
) -> Result<Vec<RunResult>, String> {
    assert_eq!(configs.len(), labels.len(), "one label per run");
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(configs.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<RunResult, String>>> = (0..configs.len()).map(|_| None).collect();
    let slots_lock = std::sync::Mutex::new(&mut slots);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(cfg) = configs.get(i) else { break };
                let mut line = ProgressLine::new(&labels[i], show_progress);
                let result = run_sim(cfg, jobs_for(i), options, |p| line.update(p)).map_err(|e| e.to_string());
                let done = finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if show_progress {
                    if let Ok(r) = &result {
                        let interrupted = if r.summary.interrupted_at_s.is_some() { " (interrupted)" } else { "" };
                        eprintln!(
                            "[{done}/{}] {}: {} jobs, simulated {:.1} s in {:.1} s wall{interrupted}",
                            configs.len(),
                            labels[i],
                            r.summary.jobs_completed,
                            r.summary.span_s,
                            line.elapsed_s()
                        );
                    }
                }
                slots_lock.lock().expect("no panics while holding the lock")[i] = Some(result);
            });
        }
    });
    slots.into_iter().map(|s| s.expect("every run reports")).collect()
}

fn print_table(results: &[RunResult]) {
    println!(
        "{:<8} {:>5} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "scheme",
        "jobs",
        "response",
        "wait",
        "execution",
        "delivered",
        "compute",
        "slowdown",
        "bsld",
        "useful",
        "spin",
        "switch",
        "idle"
    );
    for r in results {
        let s = &r.summary;
        let [useful, spin, switch, overhead, idle] = s.cpu_time.shares();
        println!(
            "{:<8} {:>5} {:>9.2}s {:>9.2}s {:>9.2}s {:>8.1}% {:>7.1}% {:>9.2} {:>9.2} {:>6.1}% {:>6.1}% {:>6.1}% {:>6.1}%",
            s.scheme,
            s.jobs_completed,
            s.mean_response_s,
            s.mean_wait_s,
            s.mean_execution_s,
            100.0 * s.delivered_utilization,
            100.0 * s.compute_utilization,
            s.mean_slowdown,
            s.mean_bounded_slowdown,
            100.0 * useful,
            100.0 * spin,
            100.0 * (switch + overhead),
            100.0 * idle
        );
    }
    println!("delivered, compute: utilization by the work the jobs were given (the study's) and by compute time alone");
    for s in results.iter().map(|r| &r.summary).filter(|s| s.saturation.saturated) {
        eprintln!(
            "warning: {} saturated the machine: {}; its means describe a growing backlog",
            s.scheme, s.saturation.why
        );
    }
}

fn write_outputs(
    out: &OutputDir,
    args: &SimArgs,
    configs: &[SimConfig],
    workload: &WorkloadReport,
    results: &[RunResult],
) -> Result<(), String> {
    out.write("summary.csv", &summary_csv(results))?;
    out.write("response.svg", &response_chart(results).to_svg())?;
    out.write("cpu-time.svg", &cpu_time_chart(results).to_svg())?;
    out.write("jobs.csv", &jobs_csv(results))?;
    let doc = SummaryDocument {
        cosched_version: env!("CARGO_PKG_VERSION"),
        command: command_line(),
        seed: args.seed,
        workload,
        mix: args.workload.to_string(),
        configs: configs.to_vec(),
        results: results.iter().map(|r| &r.summary).collect(),
    };
    let json = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    out.write("summary.json", &(json + "\n"))?;
    if args.trace_events {
        for r in results {
            out.write(&format!("trace-{}.jsonl", r.summary.scheme), &trace_jsonl(&r.trace))?;
        }
    }
    Ok(())
}

/// Mean response per scheme, split into wait and execution.
fn response_chart(results: &[RunResult]) -> StackedBarChart {
    StackedBarChart {
        title: "Mean response time".into(),
        unit: "seconds (simulated)".into(),
        segment_names: vec!["wait".into(), "execution".into()],
        bars: results
            .iter()
            .map(|r| StackedBar {
                label: r.summary.scheme.clone(),
                segments: vec![r.summary.mean_wait_s, r.summary.mean_execution_s],
                error: 0.0,
            })
            .collect(),
        note: None,
    }
}

/// Where the CPUs' time went, per scheme, in percent.
fn cpu_time_chart(results: &[RunResult]) -> StackedBarChart {
    StackedBarChart {
        title: "CPU time".into(),
        unit: "% of all CPU time".into(),
        segment_names: ["useful", "spin", "switch", "overhead", "idle"].map(String::from).to_vec(),
        bars: results
            .iter()
            .map(|r| StackedBar {
                label: r.summary.scheme.clone(),
                segments: r.summary.cpu_time.shares().iter().map(|s| 100.0 * s).collect(),
                error: 0.0,
            })
            .collect(),
        note: None,
    }
}

pub fn command_line() -> String {
    std::env::args().map(|a| if a.contains(' ') { format!("'{a}'") } else { a }).collect::<Vec<_>>().join(" ")
}

pub fn summary_csv(results: &[RunResult]) -> String {
    let mut text = String::from(
        "scheme,jobs_submitted,jobs_completed,span_s,mean_response_s,mean_wait_s,mean_execution_s,\
         p50_response_s,p95_response_s,throughput_jobs_per_s,delivered_utilization,compute_utilization,\
         delivered_utilization_during_arrivals,compute_utilization_during_arrivals,offered_utilization_during_arrivals,\
         saturated,delivered_share,backlog_growth,wait_growth,mean_slowdown,mean_bounded_slowdown,bounded_slowdown_threshold_s,longest_queue,useful_s,spin_s,switch_s,overhead_s,idle_s,events\n",
    );
    for r in results {
        let s = &r.summary;
        let t = &s.cpu_time;
        let fields = [
            csv_field(&s.scheme),
            s.jobs_submitted.to_string(),
            s.jobs_completed.to_string(),
            num(s.span_s),
            num(s.mean_response_s),
            num(s.mean_wait_s),
            num(s.mean_execution_s),
            num(s.p50_response_s),
            num(s.p95_response_s),
            num(s.throughput_jobs_per_s),
            num(s.delivered_utilization),
            num(s.compute_utilization),
            num(s.delivered_utilization_during_arrivals),
            num(s.compute_utilization_during_arrivals),
            num(s.offered_utilization_during_arrivals),
            s.saturation.saturated.to_string(),
            num(s.saturation.delivered_share),
            num(s.saturation.backlog_growth),
            num(s.saturation.wait_growth),
            num(s.mean_slowdown),
            num(s.mean_bounded_slowdown),
            num(s.bounded_slowdown_threshold_s),
            s.longest_queue.to_string(),
            num(t.useful_ns as f64 / 1e9),
            num(t.spin_ns as f64 / 1e9),
            num(t.switch_ns as f64 / 1e9),
            num(t.overhead_ns as f64 / 1e9),
            num(t.idle_ns as f64 / 1e9),
            s.events.to_string(),
        ];
        push_row(&mut text, &fields);
    }
    text
}

fn jobs_csv(results: &[RunResult]) -> String {
    let mut text = String::from(
        "scheme,job_number,job_type,tasks,iterations,arrival_s,start_s,finish_s,wait_s,execution_s,response_s,\
         dedicated_s,slowdown,bounded_slowdown\n",
    );
    for r in results {
        for j in &r.jobs {
            let fields = [
                csv_field(&r.summary.scheme),
                j.job_number.to_string(),
                csv_field(&j.job_type),
                j.tasks.to_string(),
                j.iterations.to_string(),
                num(j.arrival_s),
                num(j.start_s),
                num(j.finish_s),
                num(j.wait_s),
                num(j.execution_s),
                num(j.response_s),
                num(j.dedicated_s),
                num(j.slowdown),
                num(j.bounded_slowdown),
            ];
            push_row(&mut text, &fields);
        }
    }
    text
}

fn trace_jsonl(trace: &[TraceEvent]) -> String {
    trace.iter().map(|e| serde_json::to_string(e).expect("plain data") + "\n").collect()
}
