//! Running a [`Scenario`] for real: its processes started as separate processes of this binary (pinned, at
//! their nice values, SCHED_OTHER), their CPU time read from `/proc/PID/schedstat` at the two ends of the window.

use super::process::{nice_of, Instants, LaunchSpec, ProcessReport};
use super::{ContextSwitchProbe, ProcessSet, Scenario, ScenarioKind, SpinBarrierSet};
use crate::copies::{run_copies, CopySpec};
use crate::ctxswitch::{self, CtxSwitchConfig};
use crate::os;
use cosched_runtime::trusted_source::CheckedCommand;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How the runner starts the processes it measures.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The program that runs [`super::process::process_main`] and the context-switch worker (this binary).
    pub exe: PathBuf,
    /// Its arguments before the spec JSON, for a scenario process (`__node-proc`).
    pub process_args: Vec<String>,
    /// Its arguments before the spec JSON, for a context-switch worker (`bench ctxswitch-worker`).
    pub ctxswitch_args: Vec<String>,
    /// apps/spinbarrier, built (needed by the spin-barrier scenario only).
    pub spinbarrier: Option<PathBuf>,
    /// Where FIFOs and the copies' logs go (a folder of the runner's own).
    pub scratch: PathBuf,
    /// Give up on a spin-barrier run after this long.
    pub timeout: Duration,
}

pub use cosched_bench_report::node::runs::{
    ContextSwitchRun, CpuUse, ProcessRun, ProcessSetRun, RepeatRun, SpinBarrierPoint,
};

/// Run one repeat of `scenario`.
pub fn run_scenario(scenario: &Scenario, launcher: &Launcher, stop: &AtomicBool) -> Result<RepeatRun, String> {
    match &scenario.kind {
        ScenarioKind::Processes(set) => run_process_set(set, launcher).map(RepeatRun::Processes),
        ScenarioKind::SpinBarrier(set) => run_spinbarrier(set, launcher, stop).map(RepeatRun::SpinBarrier),
        ScenarioKind::ContextSwitch(probe) => run_ctxswitch(probe, launcher).map(RepeatRun::ContextSwitch),
    }
}

/// `setpriv --pdeathsig KILL --` (util-linux) before each program the runner starts: the program gets SIGKILL
/// when the runner dies, however it dies (SIGKILL, a second Ctrl-C, a hang-up), instead of running on in the
/// runner's cpu group at its weight (the spin-barrier copies are in process groups of their own, out of reach
/// of the terminal's signals). The kernel keeps the setting across the execs that follow (`nice`, the program).
const DIE_WITH_RUNNER: [&str; 4] = ["setpriv", "--pdeathsig", "KILL", "--"];

/// Time from the go lines to the common start: every process has read its line by then.
const START_DELAY_NS: u64 = 30_000_000;
/// Processes go on past the window's end, so that they are all still running at the second reading.
const STOP_AFTER_WINDOW_NS: u64 = 100_000_000;

/// Start every process of `set`, release them at one instant (each then waits for its own start offset), read
/// their CPU time at both ends of the window.
pub fn run_process_set(set: &ProcessSet, launcher: &Launcher) -> Result<ProcessSetRun, String> {
    set.check()?;
    let fifos = tempfile::Builder::new()
        .prefix("node-fifos-")
        .tempdir_in(&launcher.scratch)
        .map_err(|e| format!("a folder for FIFOs in {}: {e}", launcher.scratch.display()))?;
    let inbox = |index: usize| fifos.path().join(format!("inbox-{index}"));
    let groups = set.barrier_groups();
    for (index, process) in set.processes.iter().enumerate() {
        if process.exchange.is_some() || process.barrier.is_some() {
            nix::unistd::mkfifo(&inbox(index), nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR)
                .map_err(|e| format!("mkfifo: {e}"))?;
        }
    }
    let own_nice = nice_of("self")?;
    let mut running = Running(Vec::new());
    for (index, process) in set.processes.iter().enumerate() {
        // The other members of its barrier group, if it is in one.
        let others = groups
            .iter()
            .find(|(_, members)| members.contains(&index))
            .map_or(Vec::new(), |(_, members)| members.iter().filter(|&&m| m != index).map(|&m| inbox(m)).collect());
        let spec = LaunchSpec {
            process: process.clone(),
            inbox: (process.exchange.is_some() || process.barrier.is_some()).then(|| inbox(index)),
            partner_inbox: process.exchange.map(|e| inbox(e.partner)),
            barrier_inboxes: others,
        };
        running.0.push(Started::spawn(launcher, &spec, process.nice - own_nice)?);
    }
    let now_ns = os::monotonic_ns();
    let start_ns = now_ns + START_DELAY_NS;
    let window_start_ns = start_ns + set.warm_up_ns;
    let window_end_ns = window_start_ns + set.window_ns;
    let at = Instants { start_ns, window_start_ns, window_end_ns, stop_ns: window_end_ns + STOP_AFTER_WINDOW_NS };
    for started in &mut running.0 {
        started.go(&at)?;
    }
    let pids: Vec<u32> = running.0.iter().map(|s| s.child.id()).collect();
    let mut used_cpus: Vec<usize> = set.processes.iter().flat_map(|p| p.cpus.iter().copied()).collect();
    used_cpus.sort_unstable();
    used_cpus.dedup();
    sleep_until(window_start_ns);
    let (first_ns, first) = read_schedstats(&pids)?;
    let ticks_before = read_cpu_ticks(&used_cpus)?;
    sleep_until(window_end_ns);
    let (second_ns, second) = read_schedstats(&pids)?;
    let ticks_after = read_cpu_ticks(&used_cpus)?;
    let cpus = used_cpus
        .iter()
        .zip(ticks_before.iter().zip(&ticks_after))
        .map(|(&cpu, (before, after))| cpu_use(cpu, before, after))
        .collect();
    let window_ns = second_ns - first_ns;
    let mut processes = Vec::new();
    for ((started, process), (a, b)) in running.0.iter_mut().zip(&set.processes).zip(first.iter().zip(&second)) {
        let report = started.finish()?;
        let cpu_ns = b.cpu_ns - a.cpu_ns;
        processes.push(ProcessRun {
            name: process.name.clone(),
            cpu_ns,
            run_delay_ns: b.run_delay_ns - a.run_delay_ns,
            runs: b.runs - a.runs,
            share: cpu_ns as f64 / window_ns as f64,
            iterations_in_window: report.iterations_in_window,
            wake_latencies_ns: report.wake_latencies_ns,
        });
    }
    Ok(ProcessSetRun { window_ns, processes, cpus })
}

fn read_cpu_ticks(cpus: &[usize]) -> Result<Vec<[u64; 8]>, String> {
    os::read_stat_cpu_lines(&cpus.iter().map(|cpu| format!("cpu{cpu}")).collect::<Vec<_>>())
}

fn cpu_use(cpu: usize, before: &[u64; 8], after: &[u64; 8]) -> CpuUse {
    let delta: Vec<f64> = before.iter().zip(after).map(|(b, a)| a.saturating_sub(*b) as f64).collect();
    let total = delta.iter().sum::<f64>().max(1.0);
    let (idle, iowait) = (delta[3], delta[4]);
    CpuUse { cpu, busy_share: (total - idle - iowait) / total, steal_share: delta[7] / total }
}

fn sleep_until(at_ns: u64) {
    let now_ns = os::monotonic_ns();
    if at_ns > now_ns {
        std::thread::sleep(Duration::from_nanos(at_ns - now_ns));
    }
}

/// The three counters of `/proc/PID/schedstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedStat {
    pub cpu_ns: u64,
    pub run_delay_ns: u64,
    pub runs: u64,
}

pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some(SchedStat { cpu_ns: fields.next()??, run_delay_ns: fields.next()??, runs: fields.next()?? })
}

/// Every process's counters, and the instant they were read (the midpoint of the readings).
fn read_schedstats(pids: &[u32]) -> Result<(u64, Vec<SchedStat>), String> {
    let before_ns = os::monotonic_ns();
    let stats = pids
        .iter()
        .map(|pid| {
            let path = format!("/proc/{pid}/schedstat");
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            parse_schedstat(&text).ok_or_else(|| format!("{path}: {text:?}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let after_ns = os::monotonic_ns();
    Ok((before_ns + (after_ns - before_ns) / 2, stats))
}

/// A scenario process: this binary under `nice`, talking on its stdin and stdout.
struct Started {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    name: String,
}

/// The started processes, killed if the run fails half-way.
struct Running(Vec<Started>);

impl Started {
    fn spawn(launcher: &Launcher, spec: &LaunchSpec, nice_increment: i32) -> Result<Started, String> {
        let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        // `setpriv` and `nice` (coreutils) set their values and exec: the pid is the process's own. The process
        // checks its nice value.
        let mut child = Command::new(DIE_WITH_RUNNER[0])
            .args(&DIE_WITH_RUNNER[1..])
            .arg("nice")
            .arg("-n")
            .arg(nice_increment.to_string())
            .arg(&launcher.exe)
            .args(&launcher.process_args)
            .arg(json)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", spec.process.name))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut started = Started { child, stdin, stdout, name: spec.process.name.clone() };
        let line = started.read_line()?;
        if line.trim() != "ready" {
            return Err(format!("{} said {line:?} instead of ready", started.name));
        }
        Ok(started)
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err(format!("{} exited early (see its message above)", self.name)),
            Ok(_) => Ok(line),
            Err(e) => Err(format!("reading from {}: {e}", self.name)),
        }
    }

    fn go(&mut self, at: &Instants) -> Result<(), String> {
        self.stdin
            .write_all(at.go_line().as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("starting {}: {e}", self.name))
    }

    fn finish(&mut self) -> Result<ProcessReport, String> {
        let line = self.read_line()?;
        let report = serde_json::from_str(&line).map_err(|e| format!("{}'s report {line:?}: {e}", self.name))?;
        self.child.wait().map_err(|e| e.to_string())?;
        Ok(report)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for started in &mut self.0 {
            if let Ok(None) = started.child.try_wait() {
                let _ = started.child.kill();
                let _ = started.child.wait();
            }
        }
    }
}

/// Each j of `set.copies` in turn: j copies of apps/spinbarrier released at once on `set.cpus`.
pub fn run_spinbarrier(
    set: &SpinBarrierSet,
    launcher: &Launcher,
    stop: &AtomicBool,
) -> Result<Vec<SpinBarrierPoint>, String> {
    let program = launcher.spinbarrier.as_ref().ok_or("the spin-barrier scenario needs apps/spinbarrier built")?;
    let mut argv: Vec<String> = DIE_WITH_RUNNER.map(String::from).to_vec();
    argv.extend([
        program.display().to_string(),
        "--threads".into(),
        set.threads.to_string(),
        "--phases".into(),
        set.phases.to_string(),
        "--work-mflop".into(),
        set.work_mflop.to_string(),
        "--barrier".into(),
        "spin".into(),
    ]);
    let mut cpus = nix::sched::CpuSet::new();
    for &cpu in &set.cpus {
        cpus.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    }
    let cwd = std::env::current_dir().map_err(|e| format!("this process's folder: {e}"))?;
    let command = CheckedCommand::check(&argv, &cwd, "--spinbarrier")?;
    let mut points = Vec::new();
    for &copies in &set.copies {
        let log_dir = tempfile::Builder::new()
            .prefix(&format!("spinbarrier-{copies}-"))
            .tempdir_in(&launcher.scratch)
            .map_err(|e| format!("a log folder in {}: {e}", launcher.scratch.display()))?;
        let spec = CopySpec {
            command: &command,
            log_dir: log_dir.path(),
            timeout: launcher.timeout,
            sample_memory: false,
            stop,
        };
        // Set on each copy's shell before it execs the program: its threads inherit the affinity.
        let run = run_copies(&spec, copies, |pid| {
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid as i32), &cpus)
                .map_err(|e| format!("sched_setaffinity on copy {pid}: {e}"))
        })?;
        check_spinbarrier_output(log_dir.path(), copies)?;
        points.push(SpinBarrierPoint {
            copies,
            elapsed_s: run.elapsed_s,
            copy_elapsed_s: run.copy_elapsed_s,
            cpu_s: run.cpu_s,
        });
    }
    Ok(points)
}

/// Every copy printed its JSON line with its self-check passed.
fn check_spinbarrier_output(log_dir: &Path, copies: u32) -> Result<(), String> {
    for index in 0..copies {
        let path = log_dir.join(format!("copy-{index}.out"));
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let json: serde_json::Value =
            serde_json::from_str(text.trim()).map_err(|e| format!("spinbarrier copy {index} printed {text:?}: {e}"))?;
        if json["passed"] != serde_json::Value::Bool(true) {
            return Err(format!("spinbarrier copy {index} failed its self-check: {text}"));
        }
    }
    Ok(())
}

/// One lone worker and one pair, as `cosched bench ctxswitch --repeat 1`.
pub fn run_ctxswitch(probe: &ContextSwitchProbe, launcher: &Launcher) -> Result<ContextSwitchRun, String> {
    let config = CtxSwitchConfig { yields: probe.yields, work_ns: probe.work_ns, repeats: 1, cpu: probe.cpu };
    let worker = || {
        let mut command = Command::new(&launcher.exe);
        command.args(&launcher.ctxswitch_args);
        command
    };
    let result = ctxswitch::measure(&config, &worker)?;
    Ok(ContextSwitchRun {
        alpha_c_ns: result.alpha_c_s.mean * 1e9,
        alpha_c_wall_ns: result.alpha_c_wall_s.mean * 1e9,
        switches_per_yield: result.switches_per_yield,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_parses_its_three_fields() {
        let stat = parse_schedstat("115247 7673574 2\n").unwrap();
        assert_eq!(stat, SchedStat { cpu_ns: 115_247, run_delay_ns: 7_673_574, runs: 2 });
        assert_eq!(parse_schedstat("1 2"), None);
        assert!(parse_schedstat(&std::fs::read_to_string("/proc/self/schedstat").unwrap()).is_some());
    }

    #[test]
    fn cpu_use_from_two_stat_lines() {
        let before = os::parse_stat_cpu_line("cpu1 100 0 50 800 0 0 0 50 0 0", "cpu1").unwrap();
        let after = os::parse_stat_cpu_line("cpu1 160 0 60 820 0 0 0 60 0 0", "cpu1").unwrap();
        assert_eq!(os::parse_stat_cpu_line("cpu10 1 2 3 4 5 6 7 8", "cpu1"), None);
        // 100 ticks: 20 idle, 10 stolen.
        assert_eq!(cpu_use(1, &before, &after), CpuUse { cpu: 1, busy_share: 0.8, steal_share: 0.1 });
    }
}
