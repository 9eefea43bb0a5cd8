//! One supervisor per task, so that a task's exit status outlives a restart of its agent.
//!
//! An agent that restarts re-adopts its jobs' cgroups, but the tasks it had started are no longer its children:
//! only a parent can learn how a process ended. So, like Slurm's slurmstepd, each task has a parent that stays:
//! the agent spawns `cosched __supervise` (root, in the agent's cgroup — never in the job's, where it would be
//! frozen, killed with the job or listed among its processes — and in a process group of its own, so that a
//! Ctrl-C meant for the agent's terminal does not reach it). The supervisor starts the task through the launch
//! shim, which `exec`s into the command, so the task's pid is the one users see; it waits for the task and
//! records how it ended on the job's cgroup, as the extended attribute `trusted.cosched.task.<rank>`
//! (`job_tag::TaskStatus`), then exits with the same status. A command that never started (not found, arguments
//! and environment too large for the kernel, a working directory it cannot enter) is recorded as such, with the
//! shim's own report of why (`launch::LaunchFailure`): its exit status alone (127) cannot tell these apart from a
//! command that ran and exited 127.
//!
//! Nobody can forge a status: only root writes `trusted.` attributes, and users can neither signal nor trace a
//! root process, so the one thing a user controls is how their own task ends. While it waits, the attribute names
//! the supervisor (pid and start time): an agent that finds a job's cgroup empty knows the job is not over while
//! a supervisor of it still lives, and reads the statuses once they are written. The cgroup, attributes included,
//! is removed only when the controller has the job's end (`Forget`), and the watchdog leaves it in place.

use crate::agent::launch::{read_spec_from_stdin, spawn_shim, spawn_with_spec, LaunchSpec};
use crate::agent::log_pump::{pump, PumpBounds};
use crate::job_tag::{write_task_status, TaskStatus};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The subcommand of the agent's binary that runs [`run_supervisor_from_stdin`].
pub const SUPERVISE_SUBCOMMAND: &str = "__supervise";

/// What the supervisor of one task needs, written to its stdin as JSON.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SupervisedTask {
    /// The task's global rank: the name of its status on the job's cgroup.
    pub rank: u32,
    pub launch: LaunchSpec,
    /// How the task's output is copied into the supervisor's stdout and stderr, its logs.
    pub logs: PumpBounds,
}

/// Spawn the supervisor of one task: `<program> __supervise`. `setup` sets its stdout and stderr, the task's logs:
/// the supervisor copies the task's output into them (`crate::agent::log_pump`).
pub fn spawn_supervisor(program: &Path, task: &SupervisedTask, setup: impl FnOnce(&mut Command)) -> io::Result<Child> {
    let (child, _) = spawn_with_spec(program, SUPERVISE_SUBCOMMAND, task, |command| {
        command.process_group(0);
        setup(command);
    })?;
    Ok(child)
}

/// The `__supervise` subcommand: run the task and return the status to exit with (the task's, or 127 when it
/// could not be started).
pub fn run_supervisor_from_stdin() -> i32 {
    supervise().unwrap_or_else(|e| {
        eprintln!("cosched {SUPERVISE_SUBCOMMAND}: {e}");
        127
    })
}

fn supervise() -> io::Result<i32> {
    let (json, _) = read_spec_from_stdin()?;
    let task: SupervisedTask = serde_json::from_str(&json)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("bad supervisor spec: {e}")))?;
    let cgroup = job_cgroup(&task.launch)?;
    let me = std::process::id() as i32;
    let start_ticks = crate::agent::pid_guard::ProcessFacts::read(me).map_err(io::Error::other)?.start_ticks;
    // Before the task exists, so its cgroup never looks finished while this process still has a status to write.
    write_task_status(&cgroup, task.rank, TaskStatus::Running { pid: me, start_ticks })?;
    let shim = std::env::current_exe()?;
    let (out, err) = (std::io::pipe()?, std::io::pipe()?);
    let mut shim = spawn_shim(&shim, &task.launch, |command| {
        command.stdout(out.1).stderr(err.1);
    })?;
    let task_ended = Arc::new(AtomicBool::new(false));
    let pumps = [(out.0, std::io::stdout().as_fd()), (err.0, std::io::stderr().as_fd())].map(|(from, to)| {
        let to = std::fs::File::from(to.try_clone_to_owned().expect("a copy of the supervisor's own output"));
        let task_ended = task_ended.clone();
        std::thread::spawn(move || pump(from, to, task.logs, &task_ended))
    });
    let code = exit_code(shim.child.wait()?);
    task_ended.store(true, Ordering::Release);
    let unix_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let status = match shim.launch_failure() {
        Some(failure) => TaskStatus::Unstarted { failure, unix_ns },
        None => TaskStatus::Exited { code, unix_ns },
    };
    write_task_status(&cgroup, task.rank, status)?;
    // What the task wrote before it ended; a process it left behind ends with the job.
    for pump in pumps {
        let _ = pump.join();
    }
    Ok(code)
}

/// The job's cgroup in the primary hierarchy: the one that carries its tag.
fn job_cgroup(spec: &LaunchSpec) -> io::Result<PathBuf> {
    let procs = spec.procs_files.first().and_then(|f| f.parent());
    procs.map(Path::to_path_buf).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the spec names no cgroup"))
}

/// A process's status as a shell reports it: its exit code, or 128 + the signal that ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
