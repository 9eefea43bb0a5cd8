//! `cosched bench node`: small scheduling scenarios run for real on this machine's kernel (the scenarios and
//! the runner are in `cosched_bench::node`); a table on stdout and every repeat's raw values in a JSON file.
//! Besides the standard scenarios, scenario files (`--scenario-file`, `cosched_bench::node::file`), measured and
//! predicted alike.

use crate::output::read_bounded;
use crate::sim_cmd::read_machine;
use crate::trusted_source::check_nobody_else_could_change;
use clap::Args;
use cosched_bench::node::cpu_group::{CpuGroup, MAX_SHARES};
use cosched_bench::node::file;
use cosched_bench::node::run::{run_scenario, Launcher};
use cosched_bench::node::summary::{summarise, table, NodeReport, ScenarioReport};
use cosched_bench::node::{standard_scenarios, Scenario, ScenarioKind, ScenarioSizes, SCENARIO_NAMES};
use cosched_bench::os;
use cosched_bench::os::kernel_config;
use cosched_lab::node_model::MachineInputs;
use cosched_sim::machine::MachineModel;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct BenchNodeArgs {
    /// Scenarios to run, comma-separated (default all, or none with --scenario-file): shares-1cpu, shares-2cpu,
    /// sleeper, sleeper-alone, receivers, spinbarrier, ctxswitch, sleeper-busy (its sleeper runs in the real-time
    /// class: as root only, and left out of the default for other users).
    #[arg(long, value_delimiter = ',')]
    pub scenario: Option<Vec<String>>,
    /// Scenario files to run after the standard scenarios --scenario names, repeatable or comma-separated: JSON of
    /// format cosched-node-scenario/1 (docs/bench.md, "Node scenario files"; examples in docs/node-bench/scenarios/).
    /// Data only: processes of this command with the nice values, CPUs, start times and behaviours it describes.
    #[arg(long, value_delimiter = ',', value_name = "FILE")]
    pub scenario_file: Vec<PathBuf>,
    /// Repeats of each scenario (all scenarios in turn, then again).
    #[arg(long, default_value_t = 5)]
    pub repeat: u32,
    /// Folder for node.json (every repeat's raw values) and table.txt.
    #[arg(long, default_value = "node-results")]
    pub out: PathBuf,
    /// From the common start of a scenario's processes to its measured window.
    #[arg(long, default_value_t = 500)]
    pub warm_up_ms: u64,
    /// The measured window of the process scenarios.
    #[arg(long, default_value_t = 2000)]
    pub window_ms: u64,
    /// Nice values of the CPU-bound processes of shares-1cpu and shares-2cpu.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true, default_value = "0,0,5,-5")]
    pub nices: Vec<i32>,
    /// The CPU of the one-CPU scenarios (default: the first this process may use).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// The two CPUs of shares-2cpu and spinbarrier, e.g. 0,1 (default: the first two this process may use).
    #[arg(long, value_delimiter = ',')]
    pub cpu_pair: Option<Vec<usize>>,
    /// The sleeper's work before each sleep, µs.
    #[arg(long, default_value_t = 200)]
    pub sleeper_compute_us: u64,
    /// The sleeper's sleep (an absolute timer, 1 ns of slack), µs.
    #[arg(long, default_value_t = 4000)]
    pub sleeper_sleep_us: u64,
    /// Each receiver's work between two exchanges, µs.
    #[arg(long, default_value_t = 50)]
    pub receiver_compute_us: u64,
    /// How long a receiver polls for its partner's message before it blocks, µs.
    #[arg(long, default_value_t = 100)]
    pub receiver_spin_us: u64,
    /// The numbers of simultaneous spin-barrier copies (1 first: the reference t_1).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    pub copies: Vec<u32>,
    /// Phases of each spin-barrier copy (--phases of apps/spinbarrier).
    #[arg(long, default_value_t = 2000)]
    pub phases: u32,
    /// Work per thread per phase of each copy, MFLOP.
    #[arg(long, default_value_t = 1.0)]
    pub work_mflop: f64,
    /// apps/spinbarrier, built (default: built from --apps with make into a scratch folder).
    #[arg(long)]
    pub spinbarrier: Option<PathBuf>,
    /// The apps/ folder of the source tree, to build spinbarrier from.
    #[arg(long, default_value = "apps")]
    pub apps: PathBuf,
    /// Compute-then-yield rounds of each context-switch worker.
    #[arg(long, default_value_t = 20_000)]
    pub ctxswitch_yields: u64,
    /// Leave the scenarios in this session's own scheduling group. By default they run in a cgroup-v1 cpu
    /// group of their own with the largest weight (262144 shares), so that other sessions' processes take
    /// almost none of their CPUs (see cosched_bench::node::cpu_group).
    #[arg(long)]
    pub no_cpu_group: bool,
    /// Leave sleeper-busy out with a note, even when named, if its sleeper cannot enter the real-time class
    /// here (`cosched calibrate`: the machine file then says the busy wake cost was not measured).
    #[arg(skip)]
    pub realtime_optional: bool,
    /// Run nothing. Given a node.json this command wrote: put the EEVDF model's predictions beside its
    /// measurements (the model's inputs, switch and wake costs and the tick, from the same file, or --machine).
    /// Given a machine file (`cosched calibrate`'s machine.json): predict the --scenario-file scenarios with its
    /// inputs, on as many CPUs as it has.
    #[arg(long, value_name = "NODE_JSON|MACHINE_JSON")]
    pub predict_from: Option<PathBuf>,
    /// The model's inputs (switch, wake, HZ) from this machine file (`cosched calibrate`'s machine.json, or its
    /// folder) instead of the report's own ctxswitch, sleeper-alone and CONFIG_HZ: for a run of scenario files alone.
    #[arg(long, value_name = "MACHINE_JSON")]
    pub machine: Option<PathBuf>,
    /// Give up on a spin-barrier run after this many seconds.
    #[arg(long, default_value_t = 300.0)]
    pub timeout_s: f64,
}

fn sizes_from(args: &BenchNodeArgs) -> Result<ScenarioSizes, String> {
    let allowed = os::allowed_cpus()?;
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => *allowed.first().ok_or("no CPU available")?,
    };
    let cpu_pair = match args.cpu_pair.as_deref() {
        Some(&[a, b]) if a != b => [a, b],
        Some(_) => return Err("--cpu-pair takes two different CPUs, e.g. 0,1".into()),
        None if allowed.len() >= 2 => [allowed[0], allowed[1]],
        None => return Err("the two-CPU scenarios need two CPUs (this process may use one)".into()),
    };
    for c in [cpu, cpu_pair[0], cpu_pair[1]] {
        if !allowed.contains(&c) {
            return Err(format!("CPU {c} is not available to this process"));
        }
    }
    if args.nices.is_empty() || args.nices.iter().any(|n| !(-20..=19).contains(n)) {
        return Err("--nices: one or more values in -20..=19".into());
    }
    if args.window_ms == 0 || args.repeat == 0 || args.copies.first() != Some(&1) {
        return Err("--window-ms and --repeat must be positive, and --copies must start with 1".into());
    }
    if ![args.timeout_s, args.work_mflop].iter().all(|x| x.is_finite() && *x > 0.0) {
        return Err("--timeout-s and --work-mflop must be positive".into());
    }
    Ok(ScenarioSizes {
        warm_up_ns: args.warm_up_ms * 1_000_000,
        window_ns: args.window_ms * 1_000_000,
        nices: args.nices.clone(),
        cpu,
        cpu_pair,
        sleeper_compute_ns: args.sleeper_compute_us * 1000,
        sleeper_sleep_ns: args.sleeper_sleep_us * 1000,
        receiver_compute_ns: args.receiver_compute_us * 1000,
        receiver_spin_ns: args.receiver_spin_us * 1000,
        spinbarrier_copies: args.copies.clone(),
        spinbarrier_phases: args.phases,
        spinbarrier_work_mflop: args.work_mflop,
        ctxswitch_yields: args.ctxswitch_yields,
        ..ScenarioSizes::default()
    })
}

/// `make -C apps BUILD=<scratch>/apps <scratch>/apps/spinbarrier`, from sources nobody else could change.
fn build_spinbarrier(apps: &Path, scratch: &Path) -> Result<PathBuf, String> {
    check_nobody_else_could_change(apps, "--apps")
        .map_err(|e| format!("{e}; give --spinbarrier, a program only root can change"))?;
    let build = scratch.join("apps");
    let program = build.join("spinbarrier");
    let out = Command::new("make")
        .arg("-C")
        .arg(apps)
        .arg(format!("BUILD={}", build.display()))
        .arg(&program)
        .output()
        .map_err(|e| format!("make: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building spinbarrier from {} failed (give --apps or --spinbarrier):\n{}{}",
            apps.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(program)
}

/// Every key and string of `value` prints as itself (`machine::is_printable`) and holds no `|`; else the JSON
/// pointer of the first that does not.
fn text_prints_as_itself(value: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value;
    let prints = |text: &str| text.chars().all(|c| cosched_sim::machine::is_printable(c) && c != '|');
    match value {
        Value::String(text) if !prints(text) => Err(at.to_string()),
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| text_prints_as_itself(v, &format!("{at}/{i}")))
        }
        Value::Object(fields) => fields.iter().try_for_each(|(key, v)| {
            // The key as written into the pointer: its own characters are checked first.
            let pointer = format!("{at}/{}", if prints(key) { key.as_str() } else { "(a key)" });
            if !prints(key) {
                return Err(pointer);
            }
            text_prints_as_itself(v, &pointer)
        }),
        _ => Ok(()),
    }
}

pub fn run(args: &BenchNodeArgs) -> Result<(), String> {
    if let Some(path) = &args.predict_from {
        let text = read_bounded(path, MAX_NODE_JSON_BYTES)?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let is_machine =
            value.get("format").and_then(|f| f.as_str()).is_some_and(|f| f.starts_with("cosched-machine/"));
        if is_machine {
            print!("{}", predict_only(args, path, &text)?);
            return Ok(());
        }
        // Everything a node.json says may be echoed to root's terminal (names, quantities, serde's errors): refused
        // whole if any of its text would not print as itself or could forge a table's cell.
        text_prints_as_itself(&value, "").map_err(|at| {
            format!(
                "{} is not a node.json: the text at {at} holds a control, formatting or '|' character",
                path.display()
            )
        })?;
        if !args.scenario_file.is_empty() {
            return Err(format!(
                "{} is a node.json, whose own scenarios are compared: --scenario-file needs a machine file in \
                 --predict-from (or a run that measures them)",
                path.display()
            ));
        }
        let report =
            NodeReport::deserialize(value).map_err(|e| format!("{} is not a node.json: {e}", path.display()))?;
        let machine = args.machine.as_deref().map(read_machine).transpose()?;
        print!("{}", prediction_text(&report, machine.as_ref())?);
        return Ok(());
    }
    // Read before anything runs or is made (the check of --out makes missing folders): a bad machine or scenario
    // file is refused with nothing written, not found out after the measurements.
    let machine = args.machine.as_deref().map(read_machine).transpose()?;
    let planned = plan(args)?;
    let checked_out = check_root_out(&args.out)?;
    let report = measure_planned(args, planned)?;
    let mut text = table(&report);
    match prediction_text(&report, machine.as_ref()) {
        Ok(prediction) => text += &format!("\nMeasured beside the EEVDF model's prediction\n{prediction}"),
        Err(why) if args.machine.is_none() => {
            text += &format!("\nNo prediction: {why} (or give the model's inputs with --machine MACHINE_JSON)\n")
        }
        Err(why) => text += &format!("\nNo prediction: {why}\n"),
    }
    print!("{text}");
    write_results(&checked_out, &report, &text)
}

/// The standard scenarios `--scenario` names (all of them when neither it nor a scenario file is given).
fn wanted_standard(args: &BenchNodeArgs) -> Result<Vec<String>, String> {
    let wanted = match &args.scenario {
        Some(names) => names.clone(),
        None if args.scenario_file.is_empty() => SCENARIO_NAMES.map(String::from).to_vec(),
        None => Vec::new(),
    };
    if let Some(unknown) = wanted.iter().find(|w| !SCENARIO_NAMES.contains(&w.as_str())) {
        return Err(format!("unknown scenario {unknown:?} (known: {})", SCENARIO_NAMES.join(", ")));
    }
    Ok(wanted)
}

/// Scenario files read at most (each of at most `file::MAX_FILE_BYTES`).
const MAX_SCENARIO_FILES: usize = 16;

/// The scenarios of every `--scenario-file`, in order, each file bounded and checked before anything runs; an
/// error names the file (and the scenario and field).
fn file_scenarios(paths: &[PathBuf], allowed_cpus: &[usize]) -> Result<Vec<Scenario>, String> {
    if paths.len() > MAX_SCENARIO_FILES {
        return Err(format!("--scenario-file: {} files, at most {MAX_SCENARIO_FILES}", paths.len()));
    }
    let mut all: Vec<Scenario> = Vec::new();
    for path in paths {
        let text = read_bounded(path, file::MAX_FILE_BYTES)?;
        let scenarios = file::parse(&text, allowed_cpus).map_err(|e| format!("{}: {e}", path.display()))?;
        for scenario in scenarios {
            if all.iter().any(|s| s.name == scenario.name) {
                return Err(format!(
                    "{}: scenario \"{}\", field name: a scenario of an earlier file has that name",
                    path.display(),
                    scenario.name
                ));
            }
            all.push(scenario);
        }
        if all.len() > file::MAX_SCENARIOS_IN_ALL {
            return Err(format!(
                "{}: more than {} scenarios in all the files",
                path.display(),
                file::MAX_SCENARIOS_IN_ALL
            ));
        }
    }
    Ok(all)
}

/// The scenarios `args` asks for, standard ones by name and every scenario file's, each checked: all that can be
/// refused in what was asked is refused here, before anything runs or is made.
struct Planned {
    wanted_standard: Vec<String>,
    scenarios: Vec<Scenario>,
}

fn plan(args: &BenchNodeArgs) -> Result<Planned, String> {
    let sizes = sizes_from(args)?;
    let wanted = wanted_standard(args)?;
    let mut scenarios: Vec<_> = standard_scenarios(&sizes).into_iter().filter(|s| wanted.contains(&s.name)).collect();
    scenarios.extend(file_scenarios(&args.scenario_file, &os::allowed_cpus()?)?);
    // Every process set's own rules, before anything runs (a real-time sleeper's duty among them).
    for scenario in &scenarios {
        if let ScenarioKind::Processes(set) = &scenario.kind {
            set.check().map_err(|e| format!("scenario {}: {e}", scenario.name))?;
        }
    }
    Ok(Planned { wanted_standard: wanted, scenarios })
}

/// Run the scenarios `args` asks for, in turn, `--repeat` times.
pub fn measure(args: &BenchNodeArgs) -> Result<NodeReport, String> {
    measure_planned(args, plan(args)?)
}

fn measure_planned(args: &BenchNodeArgs, planned: Planned) -> Result<NodeReport, String> {
    let Planned { wanted_standard: wanted, mut scenarios } = planned;
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    // Made new (mkdtemp): FIFOs and programs in a folder nobody else made or can write.
    let scratch = tempfile::Builder::new()
        .prefix("cosched-node-")
        .tempdir_in(&base)
        .map_err(|e| format!("a scratch folder in {}: {e}", base.display()))?;
    let spinbarrier = match (&args.spinbarrier, wanted.iter().any(|w| w == "spinbarrier")) {
        (Some(path), _) => {
            check_nobody_else_could_change(path, "--spinbarrier")
                .map_err(|e| format!("{e}; give a program only root can change"))?;
            Some(path.clone())
        }
        (None, true) => Some(build_spinbarrier(&args.apps, scratch.path())?),
        (None, false) => None,
    };
    let launcher = Launcher {
        exe: std::env::current_exe().map_err(|e| format!("cannot find the cosched binary: {e}"))?,
        process_args: vec!["__node-proc".into()],
        ctxswitch_args: vec!["bench".into(), "ctxswitch-worker".into()],
        spinbarrier,
        scratch: scratch.path().to_path_buf(),
        timeout: Duration::from_secs_f64(args.timeout_s),
    };
    let group = if args.no_cpu_group {
        None
    } else {
        match CpuGroup::enter(MAX_SHARES) {
            Ok(group) => Some(group),
            Err(e) => {
                eprintln!("WARNING: no cpu group of its own ({e}): the scenarios share their CPUs with other sessions");
                None
            }
        }
    };
    keep_realtime_scenarios_if_possible(args, &mut scenarios, group.as_ref())?;
    let stop = crate::interrupt::stop_on_interrupt()?;
    let mut repeats = vec![Vec::new(); scenarios.len()];
    for repeat in 0..args.repeat {
        for (scenario, runs) in scenarios.iter().zip(repeats.iter_mut()) {
            if stop.load(Ordering::Relaxed) {
                return Err("interrupted".into());
            }
            eprintln!("[repeat {}/{}] {}...", repeat + 1, args.repeat, scenario.name);
            runs.push(run_scenario(scenario, &launcher, &stop)?);
        }
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let report = NodeReport {
        kernel_config: kernel_config(&kernel),
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_group_shares: group.as_ref().map(|_| MAX_SHARES),
        scenarios: scenarios
            .into_iter()
            .zip(repeats)
            .map(|(scenario, repeats)| ScenarioReport { summary: summarise(&scenario, &repeats), scenario, repeats })
            .collect(),
    };
    Ok(report)
}

/// Whether a scenario has a process in the real-time class.
fn needs_realtime(scenario: &Scenario) -> bool {
    matches!(&scenario.kind, ScenarioKind::Processes(set) if set.processes.iter().any(|p| p.realtime))
}

/// Before anything runs: the scenarios with a real-time process stay if such a process could enter the class
/// here (a budget for the run's group, then a try on a thread). Otherwise each is left out with a note when it
/// was not named (the default list) or may be (`realtime_optional`), and named, refused with the reason.
fn keep_realtime_scenarios_if_possible(
    args: &BenchNodeArgs,
    scenarios: &mut Vec<Scenario>,
    group: Option<&CpuGroup>,
) -> Result<(), String> {
    if !scenarios.iter().any(needs_realtime) {
        return Ok(());
    }
    let budget = group.map_or(Ok(()), CpuGroup::grant_realtime_budget);
    let Err(why) = budget.and_then(|()| cosched_bench::node::process::realtime_available()) else {
        return Ok(());
    };
    for scenario in scenarios.iter().filter(|s| needs_realtime(s)) {
        let named = args.scenario.as_ref().is_some_and(|names| names.contains(&scenario.name));
        if named && !args.realtime_optional {
            return Err(format!("{}: its sleeper cannot run in the real-time class here: {why}", scenario.name));
        }
        eprintln!("note: {} left out: its sleeper cannot run in the real-time class here: {why}", scenario.name);
    }
    scenarios.retain(|s| !needs_realtime(s));
    Ok(())
}

/// The largest node.json `--predict-from` reads: a run at the defaults writes under 1 MiB.
const MAX_NODE_JSON_BYTES: u64 = 16 << 20;

/// The EEVDF model's predictions beside the report's measurements, with the report's own inputs or a machine
/// file's.
fn prediction_text(report: &NodeReport, machine: Option<&MachineModel>) -> Result<String, String> {
    let inputs = match machine {
        Some(machine) => MachineInputs::from_machine(machine),
        None => MachineInputs::from_report(report)?,
    };
    Ok(cosched_lab::node_model::comparison_table(report, &inputs))
}

/// `--predict-from MACHINE_JSON`: the model's predictions for the scenario files on that machine, nothing
/// measured.
fn predict_only(args: &BenchNodeArgs, path: &Path, text: &str) -> Result<String, String> {
    let machine = MachineModel::parse(text).map_err(|e| format!("{}: {e}", path.display()))?;
    if args.machine.is_some() {
        return Err("--predict-from already names the machine file: leave out --machine".into());
    }
    if args.scenario.is_some() {
        return Err("--predict-from a machine file predicts scenario files only: leave out --scenario".into());
    }
    let cpus: Vec<usize> = (0..machine.cpus_per_node as usize).collect();
    let scenarios = file_scenarios(&args.scenario_file, &cpus)?;
    if scenarios.is_empty() {
        return Err(format!(
            "{} is a machine file: give the scenarios to predict on it with --scenario-file",
            path.display()
        ));
    }
    let inputs = MachineInputs::from_machine(&machine);
    Ok(format!(
        "Predicted by the EEVDF model on {} ({} CPUs, measured {}), nothing measured\n{}",
        cosched_sim::machine::printable(&machine.host),
        machine.cpus_per_node,
        cosched_sim::machine::printable(&machine.measured_at),
        cosched_lab::node_model::prediction_table(&scenarios, &inputs)
    ))
}

/// node.json and table.txt, through a scratch folder beside `out` that replaces it when complete (as every
/// `--out` of cosched): nothing is written by its name inside a folder that may be another user's, whose
/// marker or files could be links to root's files.
fn write_results(out: &crate::output::CheckedOut, report: &NodeReport, text: &str) -> Result<(), String> {
    let dir = crate::output::OutputDir::begin(out)?;
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    dir.write("node.json", &format!("{json}\n"))?;
    dir.write("table.txt", text)?;
    dir.commit().map(|_| ())
}

/// `--out` of a command root runs, checked before any work: a folder cosched may replace, in a folder that
/// nobody but root can change, nor anything above it (`private_dir`). The files are written beside it and it is
/// replaced by name, so a user who could change its folder could swap a link in and have root write or delete
/// elsewhere.
pub fn check_root_out(out: &std::path::Path) -> Result<crate::output::CheckedOut, String> {
    if nix::unistd::geteuid().is_root() {
        // First: the output check makes missing folders, which must not be made through another user's link.
        let folder = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        cosched_runtime::private_dir::ensure(folder, "--out's folder").map_err(|e| e.to_string())?;
    }
    crate::output::OutputDir::check(out)
}
