//! Never leave a job frozen when the agent dies.
//!
//! A frozen job whose agent crashed (or was killed with SIGKILL) would stay frozen forever, holding its memory and
//! looking hung to its user. So the agent starts a separate watchdog process whose stdin is a pipe from the agent.
//! Only the agent holds the write end, so the pipe reaches end-of-file exactly when the agent is gone, however it
//! ended; the kernel closes the pipe even on SIGKILL. The watchdog then thaws every job of the agent and exits.

use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread;
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

use crate::agent::freezer::{check_agent_name, monotonic_now, thaw_all_under, CgroupParent};

/// The subcommand of the agent's binary that runs [`run_watchdog`].
pub const WATCHDOG_SUBCOMMAND: &str = "__watchdog";

/// How long dropping the guard waits for the watchdog to thaw and exit before leaving it to finish alone.
const STOP_WAIT: Duration = Duration::from_secs(3);

/// Guard for a running watchdog: holds the write end of its stdin pipe and the child. Dropping it (or [`stop`])
/// closes the pipe, which makes the watchdog thaw all jobs of the agent and exit.
///
/// [`stop`]: Watchdog::stop
#[derive(Debug)]
pub struct Watchdog {
    pipe: Option<ChildStdin>,
    child: Child,
}

impl Watchdog {
    /// Process id of the watchdog.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the watchdog has exited (then nobody would thaw the jobs if the agent died).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Close the pipe (the watchdog thaws all jobs of the agent) and wait for the watchdog to exit.
    pub fn stop(mut self) -> io::Result<ExitStatus> {
        self.pipe.take();
        let pid = self.child.id();
        self.child.wait().map_err(|e| io::Error::new(e.kind(), format!("cannot wait for watchdog pid {pid}: {e}")))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.pipe.take();
        let start = monotonic_now();
        while matches!(self.child.try_wait(), Ok(None)) && start.elapsed() < STOP_WAIT {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The watchdog's option naming the cgroup that holds the agent's job cgroups, when not the hierarchy's top.
pub const CGROUP_PARENT_OPTION: &str = "--cgroup-parent";

/// Start the watchdog `<program> __watchdog <agent_name> [--cgroup-parent PATH]` (program is normally
/// `std::env::current_exe()`).
/// It gets a process group of its own so signals a terminal sends to the agent's group (Ctrl-C) do not reach it;
/// stdout is discarded and stderr shared with the agent for its messages.
pub fn start_watchdog(program: &Path, agent_name: &str, parent: &CgroupParent) -> io::Result<Watchdog> {
    check_agent_name(agent_name)?;
    let mut command = Command::new(program);
    command.arg(WATCHDOG_SUBCOMMAND).arg(agent_name);
    if parent != &CgroupParent::top() {
        command.arg(CGROUP_PARENT_OPTION).arg(parent.path());
    }
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::inherit()).process_group(0).spawn().map_err(
            |e| {
                let msg = format!("cannot start watchdog {} for agent {agent_name:?}: {e}", program.display());
                io::Error::new(e.kind(), msg)
            },
        )?;
    let pipe = child.stdin.take();
    Ok(Watchdog { pipe, child })
}

/// Block the signals that would end the watchdog before the agent: terminal signals, and SIGTERM, which a service
/// manager sends to every process of the agent's service; the watchdog outlives the agent by moments and then
/// exits by itself. Blocking (not ignoring) needs no `unsafe`; blocked signals simply stay pending.
fn block_stop_signals() -> io::Result<()> {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGTSTP] {
        set.add(signal);
    }
    set.add(Signal::SIGTTIN);
    set.add(Signal::SIGTTOU);
    set.thread_block().map_err(|e| io::Error::other(format!("watchdog cannot block signals: {e}")))
}

/// Read stdin until end-of-file: the agent never writes, so this returns when the last write end closes. A read
/// error counts as the agent being gone too, since thawing needlessly is harmless and staying frozen is not.
fn wait_for_agent_exit() {
    let mut stdin = io::stdin().lock();
    let mut buf = [0u8; 64];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The watchdog's body, for the binary's `__watchdog` subcommand: wait until the agent is gone, then thaw every
/// job of `agent_name`. Messages go to stderr, ignoring write failures (the agent's stderr may be gone too).
pub fn run_watchdog(agent_name: &str, parent: &CgroupParent) -> io::Result<()> {
    check_agent_name(agent_name)?;
    block_stop_signals()?;
    wait_for_agent_exit();
    let result = thaw_all_under(agent_name, parent);
    if let Err(e) = &result {
        let _ = writeln!(io::stderr(), "cosched watchdog: thawing the jobs of agent {agent_name:?}: {e}");
    }
    result
}
