//! Thin wrappers over the operating-system calls the microbenchmarks need:
//! CPU affinity, CPU-time clocks and context-switch counters (all Linux).

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::sys::resource::{getrusage, UsageWho};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;

/// The CPUs this process may run on, in increasing order.
pub fn allowed_cpus() -> Result<Vec<usize>, String> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("sched_getaffinity: {e}"))?;
    Ok((0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect())
}

/// Pin the calling thread (pid 0 means "this thread" to sched_setaffinity) to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("pinning to CPU {cpu}: {e}"))
}

fn clock_ns(clock: ClockId) -> u64 {
    // These clocks exist on every Linux since 2.6; a failure is a broken system.
    let t = clock_gettime(clock).expect("clock_gettime");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// CPU time (user + system) consumed so far by the calling thread. The
/// kernel keeps it in nanoseconds (the scheduler's sum_exec_runtime), so it
/// is exact, unlike the tick-sampled user/system split of getrusage.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time (user + system) consumed so far by all threads of this process.
pub fn process_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

/// A monotonic clock shared by all processes of the machine, so that
/// timestamps taken in different processes can be compared.
pub fn monotonic_ns() -> u64 {
    clock_ns(ClockId::CLOCK_MONOTONIC)
}

/// Context switches of this process so far: voluntary (blocked) plus
/// involuntary (preempted, or gave the CPU away with sched_yield).
pub fn context_switches() -> Result<u64, String> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).map_err(|e| format!("getrusage: {e}"))?;
    Ok((usage.voluntary_context_switches() + usage.involuntary_context_switches()) as u64)
}

/// The first eight counters of the /proc/stat line named `name` (`cpu`: all CPUs together; `cpuN`: one), in
/// clock ticks: user nice system idle iowait irq softirq steal.
pub fn parse_stat_cpu_line(line: &str, name: &str) -> Option<[u64; 8]> {
    let mut words = line.split_whitespace();
    if words.next()? != name {
        return None;
    }
    let mut ticks = [0u64; 8];
    for tick in &mut ticks {
        *tick = words.next()?.parse().ok()?;
    }
    Some(ticks)
}

/// The counters of each /proc/stat line in `names`, in that order.
pub fn read_stat_cpu_lines(names: &[String]) -> Result<Vec<[u64; 8]>, String> {
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    names
        .iter()
        .map(|name| {
            let found = stat.lines().find_map(|line| parse_stat_cpu_line(line, name));
            found.ok_or_else(|| format!("no {name} line in /proc/stat"))
        })
        .collect()
}

/// The machine's CPU time so far, all CPUs together (the `cpu` line of /proc/stat).
#[derive(Clone, Copy, Debug)]
pub struct MachineCpuTicks([u64; 8]);

impl MachineCpuTicks {
    pub fn read() -> Result<Self, String> {
        Ok(Self(read_stat_cpu_lines(&["cpu".to_string()])?[0]))
    }

    /// What the machine's CPUs did since `earlier`, in CPU-seconds.
    pub fn since(&self, earlier: &Self) -> cosched_bench_report::slowdown::MachineCpu {
        let delta: Vec<u64> = self.0.iter().zip(&earlier.0).map(|(now, then)| now.saturating_sub(*then)).collect();
        let ticks_per_s = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64;
        let seconds = |ticks: u64| ticks as f64 / ticks_per_s;
        let (idle, iowait, steal) = (delta[3], delta[4], delta[7]);
        let all: u64 = delta.iter().sum();
        cosched_bench_report::slowdown::MachineCpu {
            busy_s: seconds(all - idle - iowait - steal),
            steal_s: seconds(steal),
            all_s: seconds(all),
        }
    }
}

/// User and system CPU seconds of every waited-for child so far (`RUSAGE_CHILDREN`).
pub fn children_user_sys_s() -> Result<(f64, f64), String> {
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(|e| format!("getrusage: {e}"))?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    Ok((seconds(usage.user_time()), seconds(usage.system_time())))
}

/// The scheduler settings of the running kernel that a model needs (`NodeReport::kernel_config`).
pub fn kernel_config(release: &str) -> Vec<String> {
    let config = std::fs::read_to_string(format!("/boot/config-{release}")).unwrap_or_else(|_| proc_config_gz());
    let mut lines: Vec<String> = config
        .lines()
        .filter(|l| l.starts_with("CONFIG_HZ=") || (l.starts_with("CONFIG_PREEMPT") && l.ends_with("=y")))
        .filter(|l| !l.starts_with("CONFIG_PREEMPT_NOTIFIERS") && !l.starts_with("CONFIG_PREEMPT_COUNT"))
        .map(String::from)
        .collect();
    if let Ok(autogroup) = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled") {
        lines.push(format!("sched_autogroup_enabled={}", autogroup.trim()));
    }
    lines
}

/// The running kernel's own build options (/proc/config.gz, when it was built with them); empty if absent.
fn proc_config_gz() -> String {
    let mut text = String::new();
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let _ = std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text);
    }
    text
}
