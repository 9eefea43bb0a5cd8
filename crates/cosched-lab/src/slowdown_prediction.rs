//! The simulated side of `cosched bench slowdown`: each measured policy and
//! `j` run again in the simulator — the same `j` copies of the same program
//! starting together on the measured machine — and the analytic model
//! beside them. The only inputs are the machine file (`cosched calibrate`),
//! the program's command line and one dedicated run of it (`t_1`).

use cosched_bench_report::model::{self, CostParams, JobShape};
use cosched_bench_report::policy::Policy;
use cosched_bench_report::slowdown::{Sample, SlowdownReport};
use cosched_core::SimTime;
use cosched_sim::machine::printable;
use cosched_sim::reference_app::{DedicatedRun, ReferenceProgram, Structure, WaitMode};
use cosched_sim::run::{run, RunOptions};
use cosched_sim::{MachineModel, Program, Prologue, Rounds, Scheme, Shrink, SimConfig, SimJob};
use serde::Serialize;
use serde_json::Value;

/// Runs averaged per point when the machine file has background events (`bench background`: housekeeping
/// wakes, moves): each run draws them from its own seed, as each measured repeat met its own. Where ranks
/// share CPUs (spin barriers, mpi_lu under local) one point's seeds spread over a factor of 2 to 3, so the
/// mean of 8 (until 2026-11-27) was itself uncertain by some 5-10 %; 32 halve that.
const SEEDS_WITH_BACKGROUND_EVENTS: u64 = 32;

/// Largest `j` simulated, the most task-exchanges and scheduler instants
/// (ticks and slices of every CPU over the simulated span) one simulation may
/// take, and the most points of a report (a report may come from anyone).
const MAX_COPIES: u32 = 64;
const MAX_TASK_EXCHANGES: u64 = 50_000_000;
const MAX_SCHEDULER_INSTANTS: f64 = 5e7;
const MAX_POINTS: usize = 64;
/// The model's processes per CPU (local) or matrix rows (gang), at most.
const MAX_MPL: u32 = 1024;

/// One policy at one `j`: measured against predicted.
#[derive(Debug, Clone, Serialize)]
pub struct PredictedPoint {
    pub jobs: u32,
    /// `s_j` as `bench slowdown` reports it (mean `t_j` over mean `t_1`), and
    /// the smallest and largest of a repeat's `t_j` over the mean `t_1`.
    pub measured: f64,
    pub measured_min: f64,
    pub measured_max: f64,
    /// The simulator's `s_j` (its `t_j` over its `t_1`), the mean over its seeds (one without background
    /// events), and the smallest and largest of a seed's `t_j` over that `t_1`: the model's own spread.
    pub simulated: f64,
    pub simulated_min: f64,
    pub simulated_max: f64,
    pub simulated_tj_s: f64,
    /// The analytic model's `s_j` (`cosched model`), from the measured `t_1`.
    pub model: f64,
    /// Measured share of the time a copy had two runnable tasks on one CPU (`bench slowdown`'s sampler).
    pub measured_colocated: Option<f64>,
}

impl PredictedPoint {
    /// `simulated / measured − 1`.
    pub fn error(&self) -> f64 {
        self.simulated / self.measured - 1.0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyPrediction {
    pub policy: String,
    /// The scheme the simulator ran for it.
    pub scheme: String,
    pub gang_quantum_ms: Option<f64>,
    pub points: Vec<PredictedPoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlowdownPrediction {
    pub command: Vec<String>,
    /// The nodes the copies ran on, as simulated.
    pub layout: Layout,
    pub program: ReferenceProgram,
    pub structure: Structure,
    /// The dedicated run the program's timing came from.
    pub calibration: DedicatedRun,
    pub program_model: Program,
    pub policies: Vec<PolicyPrediction>,
    /// Policies of the report the simulator does not model, and why.
    pub not_predicted: Vec<(String, String)>,
}

/// Predict every policy of a slowdown report on `machine`.
pub fn predict(report: &SlowdownReport, machine: &MachineModel) -> Result<SlowdownPrediction, String> {
    machine.check()?;
    let layout = Layout::of(report, machine);
    let program = predictable_program(&report.command)?;
    let tasks = program.structure()?.tasks;
    check_layout(report, tasks)?;
    if report.points.len() > MAX_POINTS {
        return Err(format!("{} points, more than {MAX_POINTS}", report.points.len()));
    }
    let calibration = dedicated_run(report, &program)?;
    let (structure, program_model) = program.program(&calibration)?;
    let shape = shape_of(&structure, &calibration, layout.cpus());
    let costs = costs_of(machine, layout);
    let inputs = Inputs { machine, layout, structure: &structure, program: &program_model, calibration: &calibration };
    let mut policies = Vec::new();
    let mut not_predicted = Vec::new();
    for name in report.policies().into_iter().map(String::from) {
        let predicted = scheme_for_tasks(&name, tasks, layout).and_then(|scheme| {
            let points = predict_policy(report, &name, scheme, &inputs, &shape, &costs)?;
            Ok(PolicyPrediction {
                policy: name.clone(),
                scheme: scheme.0.name().to_string(),
                gang_quantum_ms: scheme.1,
                points,
            })
        });
        match predicted {
            Ok(policy) => policies.push(policy),
            Err(why) => not_predicted.push((name, why)),
        }
    }
    Ok(SlowdownPrediction {
        command: report.command.clone(),
        layout,
        program,
        structure,
        calibration,
        program_model,
        policies,
        not_predicted,
    })
}

/// A cluster run (`bench slowdown --nodes`) has one CPU per node and the same number of tasks on each.
fn check_layout(report: &SlowdownReport, tasks: u32) -> Result<(), String> {
    let cluster_misfit =
        tasks < report.nodes || !tasks.is_multiple_of(report.nodes.max(1)) || report.cpus_per_job != report.nodes;
    if report.nodes == 0 || (report.nodes > 1 && cluster_misfit) {
        return Err(format!(
            "a report of {} nodes and {} CPUs per job for {tasks} tasks: a cluster run has one CPU per node and \
             as many tasks on each",
            report.nodes, report.cpus_per_job
        ));
    }
    Ok(())
}

/// The simulation `predict` runs for `copies` copies of the report's program under `policy` (its first seed; with
/// background rates in the machine file it averages seeds 1 to 32): to look inside one, with a trace.
pub fn simulation(
    report: &SlowdownReport,
    machine: &MachineModel,
    policy: &str,
    copies: u32,
) -> Result<(SimConfig, Vec<SimJob>), String> {
    machine.check()?;
    let layout = Layout::of(report, machine);
    let program = predictable_program(&report.command)?;
    check_layout(report, program.structure()?.tasks)?;
    let calibration = dedicated_run(report, &program)?;
    let (structure, program_model) = program.program(&calibration)?;
    let scheme = scheme_for_tasks(policy, structure.tasks, layout)?;
    let inputs = Inputs { machine, layout, structure: &structure, program: &program_model, calibration: &calibration };
    copies_simulation(&inputs, scheme, copies)
}

/// For the examples that look inside a prediction: `MACHINE.json REPORT.json POLICY J [SEED]` read into the
/// traced simulation `predict` runs for `J` copies under `POLICY`, with that seed (1 by default).
pub fn traced_simulation_from_args(args: &[String], usage: &str) -> Result<(SimConfig, Vec<SimJob>), String> {
    let [machine, report, policy, copies, rest @ ..] = args else {
        return Err(format!("usage: {usage} MACHINE.json REPORT.json POLICY J [SEED]"));
    };
    let read = |path: &String| std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"));
    let machine = MachineModel::parse(&read(machine)?)?;
    let report: SlowdownReport = serde_json::from_str(&read(report)?).map_err(|e| format!("{report}: {e}"))?;
    let copies: u32 = copies.parse().map_err(|_| "J is a whole number")?;
    let seed: u64 = rest.first().map_or(Ok(1), |s| s.parse()).map_err(|_| "SEED is a whole number")?;
    let (cfg, jobs) = simulation(&report, &machine, policy, copies)?;
    Ok((SimConfig { seed, ..cfg }, jobs))
}

/// `copies` copies of the program arriving together on the machine as `inputs` lay it out, under `scheme`.
fn copies_simulation(
    inputs: &Inputs,
    (scheme, slice_ms): (Scheme, Option<f64>),
    copies: u32,
) -> Result<(SimConfig, Vec<SimJob>), String> {
    let Inputs { machine, layout, structure, .. } = *inputs;
    let program = program_under(slice_ms.is_some(), inputs.program);
    let cfg = copies_config(machine, layout, (scheme, slice_ms), copies, structure)?;
    check_work(&cfg, &program, copies, structure.tasks)?;
    let jobs = (0..copies)
        .map(|j| SimJob {
            job_number: j as u64 + 1,
            arrival: SimTime::ZERO,
            tasks: structure.tasks,
            // Oversubscribed, the copy holds every CPU and its tasks share them.
            cpus: structure.tasks.min(layout.cpus()),
            program,
            label: format!("copy{j}"),
            nice: 0,
            requested_ns: None,
        })
        .collect();
    Ok((cfg, jobs))
}

/// Where the copies ran: one node of the machine, or a cluster of namespace nodes of one CPU each
/// (`bench slowdown --nodes`), whose ranks on different nodes talk over TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub nodes: u32,
    pub cpus_per_node: u32,
}

impl Layout {
    pub fn of(report: &SlowdownReport, machine: &MachineModel) -> Layout {
        Layout::new(report.nodes, machine)
    }

    pub fn new(nodes: u32, machine: &MachineModel) -> Layout {
        match nodes {
            0 | 1 => Layout { nodes: 1, cpus_per_node: machine.cpus_per_node },
            nodes => Layout { nodes, cpus_per_node: 1 },
        }
    }

    pub fn cpus(self) -> u32 {
        self.nodes.saturating_mul(self.cpus_per_node)
    }
}

/// The program of a command, if the simulator can take it: a reference program whose waits spin. Checked
/// before anything is measured (`bench slowdown --predict-with`) and again when predicting.
pub fn predictable_program(command: &[String]) -> Result<ReferenceProgram, String> {
    let program = ReferenceProgram::from_command(command)?;
    if program.wait() != WaitMode::Spin {
        return Err(format!(
            "waits of {:?}: the programs' back-off polling (--wait block) and yielding are not modelled; \
             spinning waits are",
            program.wait()
        ));
    }
    // More tasks than CPUs are simulated too: the node's scheduler shares the CPUs (under gang slots, among the
    // running row's processes).
    program.structure()?;
    Ok(program)
}

/// The simulator's scheme for a policy of `tasks` tasks on `layout`, and the gang slice. A gang cell runs one
/// process: with more tasks than CPUs, gang slots run over the kernel's EEVDF (GS-cosched-kernel), which
/// shares each CPU of a slot among the running copy's tasks, as the runtime's freezer and the kernel do.
pub fn scheme_for_tasks(policy: &str, tasks: u32, layout: Layout) -> Result<(Scheme, Option<f64>), String> {
    let (scheme, slice_ms) = scheme_of(policy)?;
    if scheme.is_gang() && tasks > layout.cpus() {
        return Ok((Scheme::COSCHED_GANG_KERNEL, slice_ms));
    }
    Ok((scheme, slice_ms))
}

/// The simulator's scheme for a `bench slowdown` policy, and the gang slice.
pub fn scheme_of(policy: &str) -> Result<(Scheme, Option<f64>), String> {
    match policy.parse::<Policy>()? {
        Policy::Local => Ok((Scheme::LOCAL, None)),
        Policy::Gang { slice_ms } => Ok((Scheme::COSCHED_GANG, Some(slice_ms))),
        other => Err(format!("{other} is not a cosched policy the simulator runs")),
    }
}

/// What every policy's simulations share.
struct Inputs<'a> {
    machine: &'a MachineModel,
    layout: Layout,
    structure: &'a Structure,
    program: &'a Program,
    calibration: &'a DedicatedRun,
}

fn predict_policy(
    report: &SlowdownReport,
    policy: &str,
    (scheme, slice_ms): (Scheme, Option<f64>),
    inputs: &Inputs,
    shape: &JobShape,
    costs: &CostParams,
) -> Result<Vec<PredictedPoint>, String> {
    let calibration = inputs.calibration;
    // The finish of the last copy under each seed.
    let simulate = |copies: u32| -> Result<Vec<f64>, String> {
        let (cfg, jobs) = copies_simulation(inputs, (scheme, slice_ms), copies)?;
        // Background events are drawn from the seed: the prediction is their mean over seeds.
        let seeds =
            if cfg.scheduler.background_migration_interval_ns > 0 || cfg.scheduler.housekeeping_wake_interval_ns > 0 {
                SEEDS_WITH_BACKGROUND_EVENTS
            } else {
                1
            };
        (1..=seeds)
            .map(|seed| {
                let cfg = SimConfig { seed, ..cfg.clone() };
                let result = run(&cfg, jobs.clone(), &RunOptions::default(), |_| {}).map_err(|e| e.to_string())?;
                Ok(result.jobs.iter().map(|r| r.finish_s).fold(0.0, f64::max))
            })
            .collect()
    };
    let mean = |finishes: &[f64]| finishes.iter().sum::<f64>() / finishes.len() as f64;
    let t1_finishes = simulate(1)?;
    let t1_sim = mean(&t1_finishes);
    let t1_measured_mean = mean_elapsed(report, policy, 1)
        .filter(|&t| t > 0.0 && t.is_finite())
        .ok_or(format!("{policy} has no run of j = 1 that took time"))?;
    let mut points: Vec<PredictedPoint> = Vec::new();
    for point in report.points.iter().filter(|p| p.policy == policy) {
        if points.iter().any(|p| p.jobs == point.jobs) {
            continue; // a repeated point is the same experiment
        }
        let tj_finishes = if point.jobs == 1 { t1_finishes.clone() } else { simulate(point.jobs)? };
        let tj_sim = mean(&tj_finishes);
        let per_repeat: Vec<f64> =
            samples_of(report, policy, point.jobs).map(|s| s.elapsed_s / t1_measured_mean).collect();
        let t1 = calibration.elapsed_s;
        points.push(PredictedPoint {
            jobs: point.jobs,
            measured: point.slowdown.value,
            measured_min: per_repeat.iter().copied().fold(f64::INFINITY, f64::min),
            measured_max: per_repeat.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            simulated: tj_sim / t1_sim,
            simulated_min: tj_finishes.iter().copied().fold(f64::INFINITY, f64::min) / t1_sim,
            simulated_max: tj_finishes.iter().copied().fold(f64::NEG_INFINITY, f64::max) / t1_sim,
            simulated_tj_s: tj_sim,
            model: model::shared_time_s(point.jobs, t1, shape, costs) / t1,
            measured_colocated: point.colocated.map(|c| c.mean),
        });
    }
    Ok(points)
}

/// The program as a scheme runs it. Under gang scheduling the freezer
/// stops the whole job, its launcher included, so the start-up's waits
/// (processes waiting for one another) advance only in the job's own slot:
/// they fill it as its compute would. Under local scheduling the other
/// jobs use those waits, as they use any blocked time.
fn program_under(gang: bool, program: &Program) -> Program {
    if !gang {
        return *program;
    }
    let prologue = program.prologue;
    Program { prologue: Prologue { compute_ns: prologue.compute_ns + prologue.blocked_ns, blocked_ns: 0 }, ..*program }
}

/// The machine's nodes as `layout` has them, `copies` copies of the program, no skew.
fn copies_config(
    machine: &MachineModel,
    layout: Layout,
    (scheme, slice_ms): (Scheme, Option<f64>),
    copies: u32,
    structure: &Structure,
) -> Result<SimConfig, String> {
    if copies == 0 || copies > MAX_COPIES {
        return Err(format!("j = {copies}: 1 to {MAX_COPIES} copies are simulated"));
    }
    if copies.saturating_mul(structure.tasks) > MAX_MPL {
        return Err(format!(
            "j = {copies} copies of {} tasks: more than {MAX_MPL} processes on the node",
            structure.tasks
        ));
    }
    let task_exchanges = structure.exchanges.saturating_mul(structure.tasks as u64).saturating_mul(copies as u64);
    if task_exchanges > MAX_TASK_EXCHANGES {
        return Err(format!("{task_exchanges} exchanges of tasks to simulate, more than {MAX_TASK_EXCHANGES}"));
    }
    let mut cfg = SimConfig { scheme, nodes: layout.nodes, skew: 0.0, ..SimConfig::default() };
    machine.apply(&mut cfg);
    cfg.cpus_per_node = layout.cpus_per_node;
    // Every copy's tasks fit: as many rows (gang) or processes per CPU (local) as tasks of all copies.
    cfg.mpl = (copies * structure.tasks).max(1);
    cfg.network.message_bytes = u32::try_from(structure.message_bytes).map_err(|_| "a message over 4 GiB")?;
    if let Some(ms) = slice_ms {
        cfg.costs.gang_quantum_ns = (ms * 1e6).round() as u64;
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// Refuse a simulation whose span, at the model's finest scheduling grain,
/// would take too many steps: the span is at least what the copies ask of
/// the node (their compute and messages, one after another).
fn check_work(cfg: &SimConfig, program: &Program, copies: u32, tasks: u32) -> Result<(), String> {
    let bytes = cfg.network.message_bytes;
    let message_ns = cfg.network.shm_latency_ns(bytes).max(cfg.network.latency_ns(bytes)) as f64;
    if message_ns > 1e10 {
        return Err(format!("a message of {bytes} bytes takes over 10 s"));
    }
    let iteration_ns =
        program.iterations_compute_ns() as f64 / program.iterations.max(1) as f64 + program.io_ns as f64 + message_ns;
    let prologue_ns = (program.prologue.compute_ns + program.prologue.blocked_ns) as f64;
    // Tasks beyond the CPUs take turns on them.
    let turns = (tasks as f64 / cfg.cpu_count() as f64).max(1.0);
    let span_ns = copies as f64 * turns * (prologue_ns + program.iterations as f64 * iteration_ns);
    let grain_ns = match cfg.scheme.is_gang() {
        true => cfg.costs.gang_quantum_ns.min(cfg.scheduler.tick_ns),
        false => cfg.scheduler.tick_ns,
    } as f64;
    let instants = span_ns / grain_ns * cfg.cpu_count() as f64;
    if instants > MAX_SCHEDULER_INSTANTS {
        return Err(format!(
            "at least {:.0} s of simulated time at a {} µs grain on {} CPUs: more than {MAX_SCHEDULER_INSTANTS:.0e} \
             scheduler instants",
            span_ns / 1e9,
            grain_ns / 1e3,
            cfg.cpu_count()
        ));
    }
    Ok(())
}

fn samples_of<'a>(report: &'a SlowdownReport, policy: &'a str, jobs: u32) -> impl Iterator<Item = &'a Sample> {
    report.samples.iter().filter(move |s| s.policy == policy && s.jobs == jobs)
}

fn mean_elapsed(report: &SlowdownReport, policy: &str, jobs: u32) -> Option<f64> {
    let times: Vec<f64> = samples_of(report, policy, jobs).map(|s| s.elapsed_s).collect();
    (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64)
}

/// The calibration: of every dedicated run (`j = 1`, any cosched policy)
/// that carries the program's report and its CPU time, the one of median
/// wall time.
fn dedicated_run(report: &SlowdownReport, program: &ReferenceProgram) -> Result<DedicatedRun, String> {
    let mut runs: Vec<DedicatedRun> = report
        .samples
        .iter()
        .filter(|s| s.jobs == 1)
        .filter_map(|s| {
            let app = s.app_report.as_ref()?;
            let number = |key: &str| app.get(key).and_then(Value::as_f64);
            let timed_s = number("time_s")?;
            let compute_s_mean = number("compute_s_mean")?;
            // A spinning wait keeps its CPU: without a CPU figure, a task was busy all its timed region.
            let timed_cpu_s_mean = number("cpu_s_mean").unwrap_or(match program.wait() {
                WaitMode::Spin => timed_s,
                _ => compute_s_mean,
            });
            // Programs that split nothing out (and reports from before mpi_lu did) have no updates.
            let update_s_mean = number("update_s_mean").unwrap_or(0.0);
            Some(DedicatedRun {
                elapsed_s: s.elapsed_s,
                cpu_s: s.cpu_s?,
                timed_s,
                compute_s_mean,
                timed_cpu_s_mean,
                update_s_mean,
            })
        })
        .collect();
    if runs.is_empty() {
        return Err("no run of one copy carries the program's own report and its CPU time".into());
    }
    runs.sort_by(|a, b| a.elapsed_s.total_cmp(&b.elapsed_s));
    Ok(runs[(runs.len() - 1) / 2])
}

/// The analytic model's job: the dedicated run's compute, the structure's messages.
fn shape_of(structure: &Structure, run: &DedicatedRun, cpus: u32) -> JobShape {
    JobShape {
        compute_s: run.compute_s_mean,
        messages: structure.messages_per_task,
        doubles: structure.doubles_per_task,
        ranks: structure.tasks,
        cpus,
    }
}

/// The analytic model's costs: the machine's context switch, and its shared memory on one node or TCP
/// between nodes.
fn costs_of(machine: &MachineModel, layout: Layout) -> CostParams {
    let bytes_per_double = 8.0;
    let transport = if layout.nodes > 1 { &machine.tcp } else { &machine.shm };
    CostParams {
        alpha_c_s: machine.context_switch_ns as f64 * 1e-9,
        alpha_s: transport.latency_base_ns * 1e-9,
        beta_s_per_double: transport.latency_ns_per_byte * bytes_per_double * 1e-9,
        alpha_cpu_s: transport.cpu_base_ns * 1e-9,
        beta_cpu_s_per_double: transport.cpu_ns_per_byte * bytes_per_double * 1e-9,
    }
}

/// The layout in words, for the tables.
fn where_tasks_run(layout: Layout) -> String {
    match layout.nodes {
        1 => format!("one node of {} CPUs (shared memory between tasks)", layout.cpus_per_node),
        nodes => format!("{nodes} nodes of {} CPU (TCP between nodes)", layout.cpus_per_node),
    }
}

/// Mean and largest |error| of the simulator over the points with `j > 1`.
pub fn error_summary<'a>(points: impl IntoIterator<Item = &'a PredictedPoint>) -> Option<(f64, f64, usize)> {
    let errors: Vec<f64> = points.into_iter().filter(|p| p.jobs > 1).map(|p| p.error().abs()).collect();
    let worst = errors.iter().copied().fold(0.0, f64::max);
    (!errors.is_empty()).then(|| (errors.iter().sum::<f64>() / errors.len() as f64, worst, errors.len()))
}

/// How a program of rounds computes, after its short computes (nothing for one of even iterations).
fn rounds_text(rounds: &Rounds) -> String {
    if rounds.is_none() {
        return String::new();
    }
    let shrinking = match rounds.shrink {
        Shrink::None => "",
        Shrink::Quadratic => ", shrinking as the square of the rounds left",
    };
    format!(
        ", and every {} exchanges an update of {:.2} ms on average{shrinking}",
        rounds.iterations,
        rounds.long_compute_mean_ns as f64 / 1e6
    )
}

/// The prediction as Markdown: the inputs, then one row per policy and `j`.
pub fn table(name: &str, prediction: &SlowdownPrediction) -> String {
    let s = &prediction.structure;
    let p = &prediction.program_model;
    let mut text = format!(
        "### {}\n\n`{}`\n\nModel: {} tasks on {}, {} exchanges of {} bytes each; {:.1} µs of compute per exchange{}; \
         prologue {:.3} s CPU + {:.3} s blocked (from a dedicated run of {:.3} s, {:.3} s timed).\n\n\
         | policy | j | measured s_j [min – max] | simulated s_j [min – max] | error | model s_j | a copy's tasks on one CPU |\n\
         |---|---|---|---|---|---|---|\n",
        printable(name),
        printable(&prediction.command.join(" ")),
        s.tasks,
        where_tasks_run(prediction.layout),
        s.exchanges,
        s.message_bytes,
        p.compute_ns as f64 / 1e3,
        rounds_text(&p.rounds),
        p.prologue.compute_ns as f64 / 1e9,
        p.prologue.blocked_ns as f64 / 1e9,
        prediction.calibration.elapsed_s,
        prediction.calibration.timed_s,
    );
    for policy in &prediction.policies {
        for point in &policy.points {
            let error = if point.jobs == 1 { String::new() } else { format!("{:+.0} %", point.error() * 100.0) };
            let colocated = point.measured_colocated.map_or(String::new(), |c| format!("{:.0} %", c * 100.0));
            text += &format!(
                "| {} | {} | {:.2} [{:.2} – {:.2}] | {:.2} [{:.2} – {:.2}] | {} | {:.2} | {} |\n",
                printable(&policy.policy),
                point.jobs,
                point.measured,
                point.measured_min,
                point.measured_max,
                point.simulated,
                point.simulated_min,
                point.simulated_max,
                error,
                point.model,
                colocated
            );
        }
    }
    for (policy, why) in &prediction.not_predicted {
        text += &format!("\nNot predicted: {}: {}.\n", printable(policy), printable(why));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_bench_report::slowdown::Point;
    use cosched_core::stats::{Estimate, Ratio};
    use cosched_sim::machine::{Transport, FORMAT};

    fn machine() -> MachineModel {
        let shm =
            Transport { latency_base_ns: 32.0, latency_ns_per_byte: 0.095, cpu_base_ns: 65.0, cpu_ns_per_byte: 0.19 };
        MachineModel {
            format: FORMAT.into(),
            host: "test".into(),
            kernel: "6.18".into(),
            measured_at: "2026-11-26T00:00:00Z".into(),
            cpus_per_node: 2,
            hz: 250,
            context_switch_ns: 900,
            wake_ns: 20_000,
            wake_busy_ns: 0,
            shm,
            tcp: Transport { latency_base_ns: 25_000.0, ..shm },
            gang_switch_ns: 50_000,
            gang_slice_skew_ns: 10_000,
            cache_bytes: 0,
            cache_refill_ns: 0,
            background_migration_interval_ns: 0,
            housekeeping_wake_interval_ns: 0,
            sources: vec![],
        }
    }

    fn estimate(v: f64) -> Estimate {
        Estimate { mean: v, std_error: 0.0, min: v, max: v, n: 1 }
    }

    /// A report of spinbarrier under gang at 10 ms: 200 phases of 1 ms.
    fn report(elapsed: &[(u32, f64)]) -> SlowdownReport {
        let command: Vec<String> =
            "./spinbarrier --threads 2 --phases 200 --barrier spin".split(' ').map(String::from).collect();
        let app = serde_json::json!({"app": "spinbarrier", "time_s": 0.2, "compute_s_mean": 0.2, "comm_s_mean": 0.0});
        let samples = elapsed
            .iter()
            .map(|&(jobs, t)| Sample {
                policy: "gang:10ms".into(),
                jobs,
                repeat: 0,
                elapsed_s: t,
                copy_elapsed_s: vec![t],
                cpu_s: Some(0.42),
                peak_rss_bytes: None,
                app_report: (jobs == 1).then(|| app.clone()),
                overlap: None,
                colocated: None,
                machine_cpu: None,
            })
            .collect();
        let points = elapsed
            .iter()
            .map(|&(jobs, t)| Point {
                policy: "gang:10ms".into(),
                jobs,
                elapsed_s: estimate(t),
                slowdown: Ratio { value: t / elapsed[0].1, std_error: 0.0 },
                copy_elapsed_s: estimate(t),
                fairness_ratio: 1.0,
                cpu_s: Some(estimate(0.42)),
                cpu_percent: None,
                peak_rss_bytes: None,
                overlap: None,
                colocated: None,
            })
            .collect();
        SlowdownReport { command, cpus_per_job: 2, nodes: 1, repeat: 1, points, samples }
    }

    /// Gang scheduling of j copies of a busy program on its own CPUs gives
    /// each a j-th of the time: the simulated s_j is j, less the shared
    /// start-up, more the gang switches.
    #[test]
    fn gang_copies_of_a_busy_program_take_j_times_as_long() {
        let prediction = predict(&report(&[(1, 0.21), (2, 0.42), (4, 0.84)]), &machine()).unwrap();
        let points = &prediction.policies[0].points;
        assert_eq!(prediction.policies[0].scheme, "GS-cosched");
        for p in points {
            assert!((p.simulated / p.jobs as f64 - 1.0).abs() < 0.08, "{p:?}");
        }
        assert_eq!(prediction.structure.exchanges, 200);
        assert_eq!(prediction.program_model.compute_ns, 1_000_000);
        // Outside the timed region: 10 ms, of which (0.42 − 2·0.2)/2 = 10 ms of CPU per task.
        assert_eq!(prediction.program_model.prologue.compute_ns, 10_000_000);
        let (mean, worst, n) = error_summary(points).unwrap();
        assert!(mean <= worst && n == 2);
    }

    /// The runtime switches nothing while a copy is alone: the simulated `t_1` does not depend on the gang
    /// switch's cost, and the copies of `j > 1` pay it, so a dearer switch predicts a larger `s_j`.
    #[test]
    fn a_lone_copy_pays_no_gang_switch_and_shared_copies_do() {
        let r = report(&[(1, 0.21), (2, 0.42)]);
        let predict_with = |switch_ns: u64| {
            let prediction = predict(&r, &MachineModel { gang_switch_ns: switch_ns, ..machine() }).unwrap();
            let points = &prediction.policies[0].points;
            (points[0].simulated_tj_s, points[1].simulated)
        };
        let (cheap, dear) = (predict_with(0), predict_with(2_000_000));
        assert_eq!(cheap.0, dear.0, "t_1 pays no switch");
        // Two copies at 10 ms slices: about one switch of 2 ms per slice, a fifth of the time.
        assert!(dear.1 > cheap.1 * 1.15, "s_2 {} with a 2 ms switch, {} with none", dear.1, cheap.1);
    }

    /// A report inside every size bound may still ask for hours of simulation; it is refused per policy before
    /// it starts, as are zero copies, and a repeated point is simulated once.
    #[test]
    fn a_cluster_report_runs_on_nodes_of_one_cpu_and_must_match_its_tasks() {
        let mut cluster = report(&[(1, 0.21), (2, 0.42), (4, 0.84)]);
        cluster.nodes = 2;
        let prediction = predict(&cluster, &machine()).unwrap();
        assert_eq!(prediction.layout, Layout { nodes: 2, cpus_per_node: 1 });
        for p in &prediction.policies[0].points {
            assert!((p.simulated / p.jobs as f64 - 1.0).abs() < 0.08, "{p:?}");
        }
        // Messages between nodes go over TCP (25 µs), not shared memory: a cluster copy takes longer alone.
        let alone = |r: &SlowdownReport| predict(r, &machine()).unwrap().policies[0].points[0].simulated_tj_s;
        assert!(alone(&cluster) > alone(&report(&[(1, 0.21), (2, 0.42)])));
        for (nodes, cpus) in [(0, 2), (3, 3), (2, 4)] {
            let (mut bad, why) = (cluster.clone(), "one CPU per node and as many tasks on each");
            (bad.nodes, bad.cpus_per_job) = (nodes, cpus);
            let error = predict(&bad, &machine()).err().unwrap_or_default();
            assert!(error.contains(why), "nodes {nodes}, cpus {cpus}: {error}");
        }
    }

    /// Four tasks on two CPUs: local scheduling is simulated with the node's scheduler sharing the CPUs between
    /// them, gang scheduling with gang slots over it.
    #[test]
    fn an_oversubscribed_copy_is_predicted_under_local_and_gang_scheduling() {
        let mut r = report(&[(1, 0.21), (2, 0.42)]);
        r.command = "./spinbarrier --threads 4 --phases 200 --barrier spin".split(' ').map(String::from).collect();
        let mut local = r.clone();
        local.points.iter_mut().for_each(|p| p.policy = "local".into());
        local.samples.iter_mut().for_each(|s| s.policy = "local".into());
        r.points.extend(local.points);
        r.samples.extend(local.samples);
        let prediction = predict(&r, &machine()).unwrap();
        let schemes: Vec<(&str, &str)> =
            prediction.policies.iter().map(|p| (p.policy.as_str(), p.scheme.as_str())).collect();
        assert_eq!(schemes.len(), 2, "{:?}", prediction.not_predicted);
        assert!(schemes.contains(&("local", "Local")), "{schemes:?}");
        assert!(schemes.iter().any(|&(_, scheme)| scheme == "GS-cosched-kernel"), "{schemes:?}");
        for policy in &prediction.policies {
            let points = &policy.points;
            assert_eq!(points.iter().map(|p| p.jobs).collect::<Vec<_>>(), [1, 2]);
            assert!(points[1].simulated.is_finite() && points[1].simulated > 1.0, "{points:?}");
        }
    }

    /// Without background rates a point is one seed, so its range is its value; with them each seed draws its
    /// own wakes and moves, and the range holds every seed's, the mean inside it.
    #[test]
    fn the_simulated_range_is_the_seeds_and_holds_their_mean() {
        let mut r = report(&[(1, 0.21), (4, 0.84)]);
        for p in &mut r.points {
            p.policy = "local".into();
        }
        for s in &mut r.samples {
            s.policy = "local".into();
        }
        let point = |machine: &MachineModel| predict(&r, machine).unwrap().policies[0].points[1].clone();
        let quiet = point(&machine());
        assert_eq!((quiet.simulated_min, quiet.simulated_max), (quiet.simulated, quiet.simulated));
        let busy = MachineModel {
            housekeeping_wake_interval_ns: 3_000_000,
            background_migration_interval_ns: 50_000_000,
            ..machine()
        };
        let seeds = point(&busy);
        assert!(seeds.simulated_min < seeds.simulated_max, "{seeds:?}");
        assert!((seeds.simulated_min..=seeds.simulated_max).contains(&seeds.simulated), "{seeds:?}");
    }

    #[test]
    fn work_beyond_the_bounds_is_refused_before_it_starts() {
        let mut r = report(&[(1, 0.21), (2, 0.42), (2, 0.42), (0, 0.42)]);
        let prediction = predict(&r, &machine()).unwrap();
        let jobs: Vec<u32> = prediction.policies.iter().flat_map(|p| &p.points).map(|p| p.jobs).collect();
        assert_eq!(prediction.not_predicted[0].1, "j = 0: 1 to 64 copies are simulated", "{jobs:?}");
        for sample in r.samples.iter_mut().filter(|s| s.jobs == 1) {
            sample.app_report = Some(serde_json::json!({"time_s": 1e6, "compute_s_mean": 1e6}));
            sample.elapsed_s = 1e6;
        }
        r.points.retain(|p| p.jobs != 0);
        let prediction = predict(&r, &machine()).unwrap();
        assert!(prediction.not_predicted[0].1.contains("scheduler instants"), "{:?}", prediction.not_predicted);
        let fine = report(&[(1, 0.21), (2, 0.42), (2, 0.42)]);
        let points = &predict(&fine, &machine()).unwrap().policies[0].points;
        assert_eq!(points.iter().map(|p| p.jobs).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn a_policy_the_simulator_does_not_run_says_why() {
        let mut r = report(&[(1, 0.21), (2, 0.42)]);
        for p in &mut r.points {
            p.policy = "slurm".into();
        }
        let prediction = predict(&r, &machine()).unwrap();
        assert!(prediction.policies.is_empty());
        assert!(prediction.not_predicted[0].1.contains("not a cosched policy"));
        r.command.push("--barrier=block".into());
        assert!(predict(&r, &machine()).unwrap_err().contains("not modelled"));
    }
}
