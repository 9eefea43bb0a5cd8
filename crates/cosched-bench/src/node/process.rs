//! The body of one scenario process (`cosched __node-proc <spec JSON>`): this binary re-executed, pinned, at
//! its nice value, running the loop its [`ProcessSpec`] describes between two instants the runner gives it.
//!
//! Protocol on stdin/stdout: it prints `ready` once set up, reads one line `go START WINDOW_START WINDOW_END
//! STOP` (CLOCK_MONOTONIC ns), sleeps until START, runs until STOP (or its iterations are done) and prints a
//! [`ProcessReport`] as one JSON line.
//!
//! Messages go through FIFOs (8 bytes each, the sender's iteration number): the process's inbox is opened
//! non-blocking; spinning is a loop of non-blocking reads, blocking is `poll` on the inbox. A pair's exchange is one
//! message each way per iteration; a barrier group's is one from every member to every other, so a member leaves
//! an iteration's barrier once it has one message of that iteration from each of the others.
//!
//! A process with a start offset (`start_ns`) sleeps from START until its own start.

use super::{ProcessSpec, ReceiveWait};
use crate::ctxswitch::work;
use crate::os;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::sys::time::TimeSpec;
use nix::time::{clock_nanosleep, ClockId, ClockNanosleepFlags};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// What the runner sends a process on its command line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub process: ProcessSpec,
    /// FIFOs of the exchange: its own inbox and its partner's.
    pub inbox: Option<PathBuf>,
    pub partner_inbox: Option<PathBuf>,
    /// A barrier member's: the inboxes of the group's other members (its own is `inbox`).
    #[serde(default)]
    pub barrier_inboxes: Vec<PathBuf>,
}

/// What a process measured of itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcessReport {
    /// Iterations that ended inside the window.
    pub iterations_in_window: u64,
    pub iterations: u64,
    /// For each sleep due inside the window: how late it returned (CLOCK_MONOTONIC on return minus the due
    /// instant), ns.
    pub wake_latencies_ns: Vec<u64>,
}

/// The instants of a run, CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instants {
    pub start_ns: u64,
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub stop_ns: u64,
}

impl Instants {
    pub fn go_line(&self) -> String {
        format!("go {} {} {} {}\n", self.start_ns, self.window_start_ns, self.window_end_ns, self.stop_ns)
    }

    fn parse(line: &str) -> Result<Instants, String> {
        let numbers: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|w| w.parse().map_err(|_| format!("bad go line {line:?}")))
            .collect::<Result<_, _>>()?;
        match numbers[..] {
            [start_ns, window_start_ns, window_end_ns, stop_ns] if line.starts_with("go ") => {
                Ok(Instants { start_ns, window_start_ns, window_end_ns, stop_ns })
            }
            _ => Err(format!("bad go line {line:?}")),
        }
    }

    fn in_window(&self, t_ns: u64) -> bool {
        (self.window_start_ns..self.window_end_ns).contains(&t_ns)
    }
}

/// Iterations of [`work`] between two readings of the clocks: a few µs.
const WORK_CHUNK: u64 = 2048;
/// Non-blocking reads between two readings of the clock while spinning.
const SPIN_CHUNK: u32 = 16;

pub fn process_main(spec_json: &str) -> Result<(), String> {
    let spec: LaunchSpec = serde_json::from_str(spec_json).map_err(|e| format!("process spec: {e}"))?;
    let process = &spec.process;
    process.check()?;
    let mut set = CpuSet::new();
    for &cpu in &process.cpus {
        set.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("sched_setaffinity: {e}"))?;
    // The runner started it under `nice`; a wrong value would silently change the scenario.
    let nice = own_nice()?;
    if nice != process.nice {
        return Err(format!("{} runs at nice {nice}, not {}", process.name, process.nice));
    }
    if process.realtime {
        enter_realtime_class().map_err(|e| format!("{}: {e}", process.name))?;
    }
    // Timers fire when due, not up to 50 µs later (the default slack), so the latency is the scheduler's.
    nix::sys::prctl::set_timerslack(1).map_err(|e| format!("PR_SET_TIMERSLACK: {e}"))?;
    let mut channel = match (process.exchange, &process.barrier, &spec.inbox, &spec.partner_inbox) {
        (Some(exchange), None, Some(inbox), Some(outbox)) => {
            Some(Channel::open(exchange.wait, inbox, std::slice::from_ref(outbox))?)
        }
        (None, Some(member), Some(inbox), None) if !spec.barrier_inboxes.is_empty() => {
            Some(Channel::open(member.wait, inbox, &spec.barrier_inboxes)?)
        }
        (None, None, _, _) => None,
        _ => return Err("an exchange needs both FIFOs, a barrier member its own and the other members'".into()),
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready").and_then(|_| stdout.flush()).map_err(|e| e.to_string())?;
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).map_err(|e| e.to_string())?;
    let instants = Instants::parse(go.trim())?;
    sleep_until(instants.start_ns.saturating_add(process.start_ns));
    let report = run_loop(process, channel.as_mut(), &instants)?;
    let line = serde_json::to_string(&report).map_err(|e| e.to_string())?;
    writeln!(stdout, "{line}").and_then(|_| stdout.flush()).map_err(|e| e.to_string())
}

/// SCHED_FIFO at the lowest real-time priority: above every process of the fair class, below the kernel's own
/// real-time threads. The kernel's real-time throttling (95 % of each second by default) bounds what a process
/// in it can take, and the scenario's process sleeps most of the time.
fn enter_realtime_class() -> Result<(), String> {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy, ScheduleParams, ThreadPriority,
        ThreadSchedulePolicy,
    };
    let priority = ThreadPriority::from_posix(ScheduleParams { sched_priority: 1 });
    let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    set_thread_priority_and_policy(thread_native_id(), priority, fifo).map_err(|e| match e {
        thread_priority::Error::OS(code) => format!(
            "entering SCHED_FIFO: {} (it needs CAP_SYS_NICE, and real-time time in its cpu group)",
            std::io::Error::from_raw_os_error(code)
        ),
        other => format!("entering SCHED_FIFO: {other:?}"),
    })
}

/// Whether a process started now, in this process's cpu group and with its rights, could enter the real-time
/// class: tried on a thread of its own, which ends at once.
pub fn realtime_available() -> Result<(), String> {
    std::thread::spawn(enter_realtime_class).join().map_err(|_| "the real-time probe panicked".to_string())?
}

/// The nice value of this process (field 19 of /proc/self/stat).
pub fn own_nice() -> Result<i32, String> {
    nice_of("self")
}

/// The nice value of a process (`self` or a pid).
pub fn nice_of(pid: &str) -> Result<i32, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // The command name may hold spaces: fields start after the last ')', with field 3 (state) first.
    let after = stat.rfind(')').map(|i| &stat[i + 1..]).ok_or("odd /proc stat")?;
    after.split_whitespace().nth(16).and_then(|f| f.parse().ok()).ok_or_else(|| "no nice in /proc stat".to_string())
}

fn sleep_until(at_ns: u64) {
    let target = TimeSpec::new((at_ns / 1_000_000_000) as i64, (at_ns % 1_000_000_000) as i64);
    // Interrupted (EINTR): sleep again to the same absolute instant.
    while clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &target).is_err() {
        if os::monotonic_ns() >= at_ns {
            return;
        }
    }
}

fn run_loop(process: &ProcessSpec, mut channel: Option<&mut Channel>, at: &Instants) -> Result<ProcessReport, String> {
    let mut report = ProcessReport::default();
    let mut seed = at.start_ns;
    while process.iterations.is_none_or(|n| report.iterations < n) {
        if !compute(process.compute_ns, at.stop_ns, &mut seed) {
            break;
        }
        if process.sleep_ns > 0 {
            let due_ns = os::monotonic_ns().saturating_add(process.sleep_ns);
            if due_ns >= at.stop_ns {
                break;
            }
            sleep_until(due_ns);
            let woke_ns = os::monotonic_ns();
            if at.in_window(due_ns) {
                report.wake_latencies_ns.push(woke_ns.saturating_sub(due_ns));
            }
        }
        if let Some(channel) = channel.as_deref_mut() {
            channel.send(report.iterations)?;
            if !channel.receive(report.iterations, at.stop_ns)? {
                break;
            }
        }
        report.iterations += 1;
        if at.in_window(os::monotonic_ns()) {
            report.iterations_in_window += 1;
        }
    }
    std::hint::black_box(seed);
    Ok(report)
}

/// `compute_ns` of this thread's CPU time in [`work`]; false if the stop instant came first.
fn compute(compute_ns: u64, stop_ns: u64, seed: &mut u64) -> bool {
    let start_ns = os::thread_cpu_ns();
    loop {
        *seed = work(WORK_CHUNK, *seed);
        if os::thread_cpu_ns() - start_ns >= compute_ns {
            return true;
        }
        if os::monotonic_ns() >= stop_ns {
            return false;
        }
    }
}

/// The FIFOs of an exchange or a barrier: its own inbox, and the inboxes it sends to (the partner's, or every
/// other member's).
struct Channel {
    wait: ReceiveWait,
    inbox: File,
    outboxes: Vec<File>,
    /// Messages of the next iteration already read: a member that left this iteration's barrier first may have
    /// sent its next one before the last message of this one arrived.
    early: usize,
}

impl Channel {
    fn open(wait: ReceiveWait, inbox: &PathBuf, outboxes: &[PathBuf]) -> Result<Channel, String> {
        // Read-write: on Linux opening a FIFO so never waits for the other end to open it.
        let open = |path: &PathBuf, flags: i32| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(flags)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))
        };
        let non_blocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
        let outboxes = outboxes.iter().map(|path| open(path, 0)).collect::<Result<Vec<_>, _>>()?;
        Ok(Channel { wait, inbox: open(inbox, non_blocking)?, outboxes, early: 0 })
    }

    fn send(&mut self, iteration: u64) -> Result<(), String> {
        for outbox in &mut self.outboxes {
            outbox.write_all(&iteration.to_le_bytes()).map_err(|e| format!("sending: {e}"))?;
        }
        Ok(())
    }

    /// Wait for one message of `iteration` from each of the others; false if the stop instant came first.
    fn receive(&mut self, iteration: u64, stop_ns: u64) -> Result<bool, String> {
        let mut missing = self.outboxes.len().saturating_sub(std::mem::take(&mut self.early));
        let spin_until_ns = match self.wait {
            ReceiveWait::Spin => u64::MAX,
            ReceiveWait::SpinThenBlock { spin_ns } => os::monotonic_ns().saturating_add(spin_ns),
        };
        while missing > 0 {
            for _ in 0..SPIN_CHUNK {
                if let Some(message) = self.try_read()? {
                    self.count(message, iteration, &mut missing)?;
                    if missing == 0 {
                        return Ok(true);
                    }
                }
            }
            let now_ns = os::monotonic_ns();
            if now_ns >= stop_ns {
                return Ok(false);
            }
            if now_ns >= spin_until_ns {
                return self.block(iteration, &mut missing, stop_ns);
            }
        }
        Ok(true)
    }

    /// One message read while waiting for `iteration`'s.
    fn count(&mut self, message: u64, iteration: u64, missing: &mut usize) -> Result<(), String> {
        if message == iteration {
            *missing -= 1;
        } else if message == iteration + 1 {
            self.early += 1;
        } else {
            return Err(format!("a message of iteration {message} while waiting for those of {iteration}"));
        }
        Ok(())
    }

    fn block(&mut self, iteration: u64, missing: &mut usize, stop_ns: u64) -> Result<bool, String> {
        loop {
            while let Some(message) = self.try_read()? {
                self.count(message, iteration, missing)?;
                if *missing == 0 {
                    return Ok(true);
                }
            }
            let left_ms = stop_ns.saturating_sub(os::monotonic_ns()) / 1_000_000;
            if left_ms == 0 {
                return Ok(false);
            }
            let mut fds = [PollFd::new(self.inbox.as_fd(), PollFlags::POLLIN)];
            let timeout = PollTimeout::try_from(left_ms.min(1000)).unwrap_or(PollTimeout::MAX);
            match poll(&mut fds, timeout) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("poll: {e}")),
            }
        }
    }

    /// One whole message if there is one (8-byte writes to a pipe are atomic, so never half of one).
    fn try_read(&mut self) -> Result<Option<u64>, String> {
        let mut message = [0u8; 8];
        match self.inbox.read(&mut message) {
            Ok(8) => Ok(Some(u64::from_le_bytes(message))),
            Ok(n) => Err(format!("a message of {n} bytes")),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(format!("receiving: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_line_round_trips() {
        let at = Instants { start_ns: 1, window_start_ns: 2, window_end_ns: 3, stop_ns: 4 };
        assert_eq!(Instants::parse(at.go_line().trim()).unwrap(), at);
        assert!(Instants::parse("go 1 2 3").is_err());
        assert!(Instants::parse("stop 1 2 3 4").is_err());
    }

    #[test]
    fn own_nice_reads_this_process() {
        let nice = own_nice().unwrap();
        assert!((-20..=19).contains(&nice));
    }
}
