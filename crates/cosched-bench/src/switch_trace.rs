//! Where the time of slow gang switches goes, read from the kernel's own trace (tracefs text) of the scheduler,
//! the cgroup freezer and timers, as `cosched bench switch --trace` records it.
//!
//! A switch is slow in one of two places. The switching thread may wake late: its timer fired late (the CPU was not
//! running: a virtual CPU the hypervisor took away, or one it was slow to wake) or it waited for its CPU once woken.
//! Or the kernel's confirmation that the outgoing gang stopped came late: the last task to stop needs a CPU to reach
//! the freezer's trap, and either it waited for one behind other tasks (being asked to stop does not bring it
//! forward), or it was on a CPU that did not run (it would have trapped within microseconds of the kernel's kick),
//! or it was asleep inside the kernel. The straggler is the task that reported the cgroup frozen: the kernel does
//! that from the last task to trap.

use cosched_runtime::controller::skew::{summarize, Summary};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One trace line of interest.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub time_ns: u64,
    pub cpu: u32,
    /// The task the event happened in (for `Frozen`: the last task to stop).
    pub pid: i32,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Switch { prev_pid: i32, prev_state: char, next_pid: i32, next_comm: String },
    Freeze { path: String },
    Frozen { path: String },
    TimerStart { timer: String, expires_ns: u64, absolute: bool },
    TimerExpire { timer: String, now_ns: u64 },
}

/// Parse one line of the `trace` file (`<comm>-<pid> [<cpu>] <flags> <seconds>: <event>: <fields>`); `None` for
/// lines and events not used.
pub fn parse_line(line: &str) -> Option<Event> {
    let open = line.find(" [")?;
    let (_, pid) = line[..open].trim().rsplit_once('-')?;
    let close = open + line[open..].find(']')?;
    let cpu = line[open + 2..close].trim().parse().ok()?;
    let mut rest = line[close + 1..].split_whitespace();
    let _flags = rest.next()?;
    let seconds = rest.next()?.trim_end_matches(':');
    let event = rest.next()?.trim_end_matches(':');
    let fields: BTreeMap<&str, &str> = rest.filter_map(|f| f.split_once('=')).collect();
    let kind = match event {
        "sched_switch" => Kind::Switch {
            prev_pid: fields.get("prev_pid")?.parse().ok()?,
            prev_state: fields.get("prev_state")?.chars().next()?,
            next_pid: fields.get("next_pid")?.parse().ok()?,
            next_comm: fields.get("next_comm")?.to_string(),
        },
        "cgroup_freeze" => Kind::Freeze { path: fields.get("path")?.to_string() },
        "cgroup_notify_frozen" if fields.get("val") == Some(&"1") => {
            Kind::Frozen { path: fields.get("path")?.to_string() }
        }
        "hrtimer_start" if fields.get("function")?.starts_with("hrtimer_wakeup") => Kind::TimerStart {
            timer: fields.get("hrtimer")?.to_string(),
            expires_ns: fields.get("expires")?.parse().ok()?,
            absolute: fields.get("mode")?.starts_with("ABS"),
        },
        "hrtimer_expire_entry" if fields.get("function")?.starts_with("hrtimer_wakeup") => {
            Kind::TimerExpire { timer: fields.get("hrtimer")?.to_string(), now_ns: fields.get("now")?.parse().ok()? }
        }
        _ => return None,
    };
    Some(Event { time_ns: seconds_to_ns(seconds)?, cpu, pid: pid.parse().ok()?, kind })
}

fn seconds_to_ns(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.')?;
    let digits = format!("{fraction:0<9}");
    Some(whole.parse::<u64>().ok()? * 1_000_000_000 + digits.get(..9)?.parse::<u64>().ok()?)
}

pub fn parse(text: &str) -> Vec<Event> {
    text.lines().filter_map(parse_line).collect()
}

/// Who ran on one CPU from `start_ns` to `end_ns`.
#[derive(Clone, Debug)]
struct Run {
    start_ns: u64,
    end_ns: u64,
    pid: i32,
    comm: String,
}

/// The runs of every CPU, from the switches in the trace (the first task of each CPU is not known).
fn runs_per_cpu(events: &[Event]) -> BTreeMap<u32, Vec<Run>> {
    let mut runs: BTreeMap<u32, Vec<Run>> = BTreeMap::new();
    let end = events.last().map_or(0, |e| e.time_ns);
    for event in events {
        if let Kind::Switch { next_pid, next_comm, .. } = &event.kind {
            let cpu = runs.entry(event.cpu).or_default();
            if let Some(last) = cpu.last_mut() {
                last.end_ns = event.time_ns;
            }
            cpu.push(Run { start_ns: event.time_ns, end_ns: end, pid: *next_pid, comm: next_comm.clone() });
        }
    }
    runs
}

/// Why the last task of a gang took long to stop.
#[derive(Clone, Debug, PartialEq)]
pub enum Cause {
    /// It was runnable and waited for a CPU while these tasks ran on the CPU it then got (comm, ns), longest first.
    WaitedForCpu(Vec<(String, u64)>),
    /// It was on a CPU the whole wait and did not trap, which a running task does within microseconds of the
    /// kernel's kick: the CPU itself was not running (a virtual CPU the hypervisor took away).
    CpuNotRunning,
    /// It was asleep inside the kernel (uninterruptible) when asked.
    InKernel,
    /// The trace does not say (it began during the wait, or the task's history is missing).
    Unknown,
}

#[derive(Clone, Debug)]
pub struct SlowFreeze {
    pub path: String,
    pub wait_ns: u64,
    pub straggler: i32,
    pub cause: Cause,
}

/// A boundary wake-up of the switching thread: how late its timer fired, how long it then waited for its CPU, and
/// whether another CPU recorded events while the timer was late (it ran kernel code then: a switching thread there
/// could have switched on time).
#[derive(Clone, Copy, Debug)]
pub struct Wake {
    /// The boundary the timer was set for (in the timer's clock).
    pub boundary_ns: u64,
    pub timer_late_ns: u64,
    pub run_delay_ns: u64,
    pub other_cpu_alive: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Attribution {
    /// Every freeze confirmed in the trace, with how long it took (ns).
    pub freeze_waits_ns: Vec<u64>,
    pub slow_freezes: Vec<SlowFreeze>,
    pub wakes: Vec<Wake>,
}

/// Attribute the switches of the switching threads `switchers` (thread ids) on the gangs whose cgroup paths start
/// with `job_prefix`; freezes longer than `slow_ns` are explained.
pub fn attribute(events: &[Event], switchers: &[i32], job_prefix: &str, slow_ns: u64) -> Attribution {
    let runs = runs_per_cpu(events);
    // Every switching thread wakes at each boundary and the first switches: a boundary is as late as its first.
    let mut first: BTreeMap<u64, Wake> = BTreeMap::new();
    for wake in switchers.iter().flat_map(|&s| switcher_wakes(events, s)) {
        let earlier = |w: &Wake| w.timer_late_ns + w.run_delay_ns < wake.timer_late_ns + wake.run_delay_ns;
        if !first.get(&wake.boundary_ns).is_some_and(earlier) {
            first.insert(wake.boundary_ns, wake);
        }
    }
    let mut attribution = Attribution { wakes: first.into_values().collect(), ..Attribution::default() };
    let mut asked: BTreeMap<&str, u64> = BTreeMap::new();
    for event in events {
        match &event.kind {
            Kind::Freeze { path } if path.starts_with(job_prefix) => {
                asked.insert(path, event.time_ns);
            }
            Kind::Frozen { path } => {
                let Some(asked_ns) = asked.remove(path.as_str()) else { continue };
                let wait_ns = event.time_ns - asked_ns;
                attribution.freeze_waits_ns.push(wait_ns);
                if wait_ns > slow_ns {
                    let cause = cause(&runs, events, event.pid, asked_ns, event.time_ns);
                    attribution.slow_freezes.push(SlowFreeze {
                        path: path.clone(),
                        wait_ns,
                        straggler: event.pid,
                        cause,
                    });
                }
            }
            _ => {}
        }
    }
    attribution
}

/// Why task `pid` stopped only at `frozen_ns` though asked at `asked_ns`.
fn cause(runs: &BTreeMap<u32, Vec<Run>>, events: &[Event], pid: i32, asked_ns: u64, frozen_ns: u64) -> Cause {
    let on_cpu_at_ask = runs.values().flatten().find(|r| r.pid == pid && r.start_ns <= asked_ns && asked_ns < r.end_ns);
    if let Some(run) = on_cpu_at_ask {
        // Still on the same CPU, without a switch, until it trapped: that CPU did not run.
        return if run.end_ns >= frozen_ns { Cause::CpuNotRunning } else { Cause::Unknown };
    }
    let last_out = events.iter().rev().filter(|e| e.time_ns <= asked_ns).find_map(|e| match e.kind {
        Kind::Switch { prev_pid, prev_state, .. } if prev_pid == pid => Some(prev_state),
        _ => None,
    });
    match last_out {
        Some('D') => Cause::InKernel,
        Some(_) => waited_for_cpu(runs, pid, asked_ns, frozen_ns),
        None => Cause::Unknown,
    }
}

/// The tasks that ran on the CPU `pid` finally got, between `asked_ns` and the moment it got it.
fn waited_for_cpu(runs: &BTreeMap<u32, Vec<Run>>, pid: i32, asked_ns: u64, frozen_ns: u64) -> Cause {
    let got = runs.values().flatten().filter(|r| r.pid == pid && r.start_ns >= asked_ns && r.start_ns <= frozen_ns);
    let Some(got) = got.min_by_key(|r| r.start_ns) else { return Cause::Unknown };
    let cpu = runs.iter().find(|(_, list)| list.iter().any(|r| std::ptr::eq(r, got))).map(|(&c, _)| c);
    let mut by_comm: BTreeMap<String, u64> = BTreeMap::new();
    for run in cpu.and_then(|c| runs.get(&c)).into_iter().flatten() {
        let (start, end) = (run.start_ns.max(asked_ns), run.end_ns.min(got.start_ns));
        if start < end {
            *by_comm.entry(run.comm.clone()).or_default() += end - start;
        }
    }
    let mut list: Vec<(String, u64)> = by_comm.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Cause::WaitedForCpu(list)
}

/// The switching thread's wake-ups at slice boundaries (its absolute timers; the short relative sleeps of the
/// confirmation wait are not boundaries).
fn switcher_wakes(events: &[Event], switcher: i32) -> Vec<Wake> {
    let mut armed: BTreeMap<&str, u64> = BTreeMap::new();
    let mut fired: Option<(Wake, u64)> = None; // the wake-up and the trace time of its expiry, until the thread runs
    let mut wakes = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match &event.kind {
            Kind::TimerStart { timer, expires_ns, absolute: true } if event.pid == switcher => {
                armed.insert(timer, *expires_ns);
            }
            Kind::TimerExpire { timer, now_ns } => {
                if let Some(expires_ns) = armed.remove(timer.as_str()) {
                    let late_ns = now_ns.saturating_sub(expires_ns);
                    let since = event.time_ns.saturating_sub(late_ns);
                    let mut meanwhile = events[..i].iter().rev().take_while(|e| e.time_ns >= since);
                    let other_cpu_alive = meanwhile.any(|e| e.cpu != event.cpu);
                    let wake =
                        Wake { boundary_ns: expires_ns, timer_late_ns: late_ns, run_delay_ns: 0, other_cpu_alive };
                    fired = Some((wake, event.time_ns));
                }
            }
            Kind::Switch { next_pid, .. } if *next_pid == switcher => {
                if let Some((wake, expired_at)) = fired.take() {
                    wakes.push(Wake { run_delay_ns: event.time_ns - expired_at, ..wake });
                }
            }
            _ => {}
        }
    }
    wakes
}

/// What a trace says of the switches, for a report: how long confirmations and wake-ups took, and where the time of
/// the slow ones went.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TraceSummary {
    pub slow_ns: u64,
    pub freezes: usize,
    pub freeze_wait: Summary,
    /// Slow confirmations by cause: (cause, count, total ns).
    pub slow_by_cause: Vec<(String, usize, u64)>,
    /// The tasks slow stragglers waited behind, by name: (comm, total ns), longest first.
    pub waited_behind: Vec<(String, u64)>,
    pub wakes: usize,
    pub timer_late: Summary,
    pub run_delay: Summary,
    /// Boundary wake-ups later than `slow_ns` in all, those whose timer itself fired that late, and of these the
    /// ones during which another CPU recorded events.
    pub slow_wakes: usize,
    pub slow_timers: usize,
    pub slow_timers_other_cpu_alive: usize,
}

pub fn summarize_attribution(attribution: &Attribution, slow_ns: u64) -> TraceSummary {
    let mut by_cause: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut behind: BTreeMap<String, u64> = BTreeMap::new();
    for slow in &attribution.slow_freezes {
        let name = match &slow.cause {
            Cause::WaitedForCpu(tasks) => {
                for (comm, ns) in tasks {
                    *behind.entry(comm.clone()).or_default() += ns;
                }
                "waited for a CPU behind other tasks"
            }
            Cause::CpuNotRunning => "on a CPU that did not run",
            Cause::InKernel => "asleep in the kernel",
            Cause::Unknown => "not in the trace",
        };
        let entry = by_cause.entry(name).or_default();
        entry.0 += 1;
        entry.1 += slow.wait_ns;
    }
    let mut waited_behind: Vec<(String, u64)> = behind.into_iter().collect();
    waited_behind.sort_by_key(|&(_, ns)| std::cmp::Reverse(ns));
    let wakes = &attribution.wakes;
    TraceSummary {
        slow_ns,
        freezes: attribution.freeze_waits_ns.len(),
        freeze_wait: summarize(&attribution.freeze_waits_ns),
        slow_by_cause: by_cause.into_iter().map(|(cause, (n, ns))| (cause.to_string(), n, ns)).collect(),
        waited_behind,
        wakes: wakes.len(),
        timer_late: summarize(wakes.iter().map(|w| &w.timer_late_ns)),
        run_delay: summarize(wakes.iter().map(|w| &w.run_delay_ns)),
        slow_wakes: wakes.iter().filter(|w| w.timer_late_ns + w.run_delay_ns > slow_ns).count(),
        slow_timers: wakes.iter().filter(|w| w.timer_late_ns > slow_ns).count(),
        slow_timers_other_cpu_alive: wakes.iter().filter(|w| w.timer_late_ns > slow_ns && w.other_cpu_alive).count(),
    }
}

/// The kernel events a recording enables.
const EVENTS: [&str; 5] = [
    "sched/sched_switch",
    "cgroup/cgroup_freeze",
    "cgroup/cgroup_notify_frozen",
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
];

/// A recording of those events in a trace instance of our own (tracefs; root only): its buffer, clock and events
/// are apart from the machine's tracing, which is left as it was, and it is removed when dropped.
pub struct Recording {
    root: PathBuf,
}

/// The most kernel memory the recording's buffers take, over all CPUs (KiB), and the most per CPU.
const BUFFERS_KIB: usize = 256 * 1024;
const BUFFER_PER_CPU_KIB: usize = 32 * 1024;

impl Recording {
    /// Mount tracefs if it is not, make an instance, and start recording with a clock every CPU shares.
    pub fn start() -> Result<Recording, String> {
        let tracefs = PathBuf::from("/sys/kernel/tracing");
        if !tracefs.join("trace").exists() {
            let mounted = std::process::Command::new("mount").args(["-t", "tracefs", "nodev"]).arg(&tracefs).status();
            if !mounted.is_ok_and(|s| s.success()) || !tracefs.join("trace").exists() {
                return Err(format!(
                    "no tracefs at {} (the kernel's tracing is needed for --trace)",
                    tracefs.display()
                ));
            }
        }
        let root = tracefs.join("instances").join(format!("cosched-bench-{}", std::process::id()));
        std::fs::create_dir(&root).map_err(|e| format!("making the trace instance {}: {e}", root.display()))?;
        let recording = Recording { root };
        // A buffer per possible CPU, whether or not this process may use it.
        let cpus = std::fs::read_dir(tracefs.join("per_cpu")).map_or(1, |dir| dir.count().max(1));
        let per_cpu_kib = (BUFFERS_KIB / cpus).clamp(1024, BUFFER_PER_CPU_KIB);
        recording.write("trace_clock", "mono")?;
        recording.write("buffer_size_kb", &per_cpu_kib.to_string())?;
        for event in EVENTS {
            recording.write(&format!("events/{event}/enable"), "1")?;
        }
        recording.write("tracing_on", "1")?;
        Ok(recording)
    }

    /// Stop recording and return the trace's text (the buffer is emptied).
    pub fn finish(self) -> Result<String, String> {
        self.write("tracing_on", "0")?;
        // Lossy: task names are anyone's to choose, and one that is not UTF-8 must not lose the trace.
        let bytes = std::fs::read(self.root.join("trace")).map_err(|e| format!("reading the trace: {e}"))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        std::fs::write(self.root.join(file), value).map_err(|e| format!("{}/{file}: {e}", self.root.display()))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = self.write("tracing_on", "0");
        // Removing the instance frees its buffers (the kernel refuses while a reader holds them).
        if let Err(e) = std::fs::remove_dir(&self.root) {
            eprintln!("cosched bench: trace instance {} left behind: {e}", self.root.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the kernel writes them (from a trace of this machine, shortened).
    const TRACE: &str = "\
     request-bin-1006    [000] d..2.  7159.358280: hrtimer_start: hrtimer=000000004f3c function=hrtimer_wakeup expires=900 softexpires=900 mode=ABS was_armed=0
        switcher-25084   [000] d..2.  7159.358290: hrtimer_start: hrtimer=00000000aaaa function=hrtimer_wakeup expires=1000 softexpires=1000 mode=ABS was_armed=0
     request-bin-1006    [000] d.h2.  7159.358305: hrtimer_expire_entry: hrtimer=00000000aaaa function=hrtimer_wakeup now=1250
     request-bin-1006    [000] d..2.  7159.358315: sched_switch: prev_comm=request-bin prev_pid=1006 prev_prio=139 prev_state=R ==> next_comm=switcher next_pid=25084 next_prio=49
         swf-bin-1008    [001] d..2.  7159.358320: sched_switch: prev_comm=cosched prev_pid=25074 prev_prio=120 prev_state=R ==> next_comm=swf-bin next_pid=1008 next_prio=139
        switcher-25084   [000] d..1.  7159.358344: cgroup_freeze: root=0 id=18930 level=3 path=/cosched/bench-25073/job-1
        switcher-25084   [000] d..2.  7159.358371: sched_switch: prev_comm=switcher prev_pid=25084 prev_prio=49 prev_state=S ==> next_comm=cosched next_pid=25075 next_prio=120
         cosched-25075   [000] d..2.  7159.358380: sched_switch: prev_comm=cosched prev_pid=25075 prev_prio=120 prev_state=S ==> next_comm=switcher next_pid=25084 next_prio=49
         swf-bin-1008    [001] d..2.  7159.360034: sched_switch: prev_comm=swf-bin prev_pid=1008 prev_prio=139 prev_state=R ==> next_comm=cosched next_pid=25074 next_prio=120
         cosched-25074   [001] d..2.  7159.360045: cgroup_notify_frozen: root=0 id=18930 level=3 path=/cosched/bench-25073/job-1 val=1
         cosched-25074   [001] d..2.  7159.360049: sched_switch: prev_comm=cosched prev_pid=25074 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=25086 next_prio=120
";

    #[test]
    fn lines_are_parsed_with_their_time_cpu_task_and_fields() {
        let events = parse(TRACE);
        assert_eq!(events.len(), 11);
        assert_eq!(events[5].time_ns, 7_159_358_344_000);
        assert_eq!(events[5].kind, Kind::Freeze { path: "/cosched/bench-25073/job-1".into() });
        assert_eq!((events[9].pid, events[9].cpu), (25074, 1));
        assert!(matches!(events[9].kind, Kind::Frozen { .. }));
        assert!(parse_line("# tracer: nop").is_none());
        assert!(parse_line("  <idle>-0 [001] d..2. 1.5: sched_wakeup: comm=x pid=3 prio=120 target_cpu=001").is_none());
    }

    #[test]
    fn a_straggler_queued_behind_another_task_is_named_with_the_time_it_lost() {
        let attribution = attribute(&parse(TRACE), &[25084], "/cosched/bench-25073/", 200_000);
        assert_eq!(attribution.freeze_waits_ns, vec![1_701_000]);
        let slow = &attribution.slow_freezes[0];
        assert_eq!(slow.straggler, 25074);
        assert_eq!(slow.cause, Cause::WaitedForCpu(vec![("swf-bin".into(), 1_690_000)]));
        assert_eq!(attribution.wakes.len(), 1);
        assert_eq!((attribution.wakes[0].timer_late_ns, attribution.wakes[0].run_delay_ns), (250, 10_000));
    }

    #[test]
    fn a_straggler_that_stayed_on_its_cpu_without_trapping_had_a_cpu_that_did_not_run() {
        let trace = "\
        switcher-9   [000] d..2.  1.000000: sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=R ==> next_comm=switcher next_pid=9 next_prio=49
         cosched-7   [001] d..2.  1.000001: sched_switch: prev_comm=b prev_pid=6 prev_prio=120 prev_state=R ==> next_comm=cosched next_pid=7 next_prio=120
        switcher-9   [000] d..1.  1.000010: cgroup_freeze: root=0 id=1 level=3 path=/cosched/n/job-1
         cosched-7   [001] d..2.  1.003000: cgroup_notify_frozen: root=0 id=1 level=3 path=/cosched/n/job-1 val=1
         cosched-7   [001] d..2.  1.003001: sched_switch: prev_comm=cosched prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=b next_pid=6 next_prio=120
";
        let attribution = attribute(&parse(trace), &[9], "/cosched/n/", 200_000);
        assert_eq!(attribution.slow_freezes[0].cause, Cause::CpuNotRunning);
        assert_eq!(attribution.slow_freezes[0].wait_ns, 2_990_000);
    }
}
