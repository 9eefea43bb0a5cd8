//! What one repeat of a scenario measured, raw: per process, per CPU, per spin-barrier copy count, or the
//! context-switch cost.

use serde::{Deserialize, Serialize};

/// One process over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRun {
    pub name: String,
    /// CPU time over the window (schedstat's sum_exec_runtime), ns.
    pub cpu_ns: u64,
    /// Time spent runnable but waiting for a CPU over the window (schedstat's run_delay), ns.
    pub run_delay_ns: u64,
    /// Times it was put on a CPU over the window (schedstat's pcount).
    pub runs: u64,
    /// `cpu_ns / window_ns`: its share of one CPU.
    pub share: f64,
    pub iterations_in_window: u64,
    /// Its wake-up latencies (sleeps due in the window), ns.
    pub wake_latencies_ns: Vec<u64>,
}

/// One repeat of a process set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSetRun {
    /// The window as the runner read it (between the midpoints of its two readings), ns.
    pub window_ns: u64,
    pub processes: Vec<ProcessRun>,
    /// Each CPU the scenario uses, over the window, from /proc/stat: how busy it was with anything (the
    /// scenario's processes, other processes, interrupts) and how much the hypervisor took (steal).
    pub cpus: Vec<CpuUse>,
}

/// One CPU over a window, from the tick counts of /proc/stat (10 ms resolution).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    pub cpu: usize,
    /// user + nice + system + irq + softirq + steal over all.
    pub busy_share: f64,
    pub steal_share: f64,
}

/// One run of j spin-barrier copies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpinBarrierPoint {
    pub copies: u32,
    /// From release to the end of the last copy.
    pub elapsed_s: f64,
    pub copy_elapsed_s: Vec<f64>,
    /// User + system time of all copies.
    pub cpu_s: f64,
}

/// One repeat of the context-switch measurement (one lone worker and one pair).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextSwitchRun {
    pub alpha_c_ns: f64,
    pub alpha_c_wall_ns: f64,
    /// Switches per yield of the pair (about 1 when every yield switched).
    pub switches_per_yield: f64,
}

/// What one repeat of a scenario measured: raw values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepeatRun {
    Processes(ProcessSetRun),
    SpinBarrier(Vec<SpinBarrierPoint>),
    ContextSwitch(ContextSwitchRun),
}
