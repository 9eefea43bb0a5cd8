//! A node's CPU scheduler: which ready process a CPU runs, when it acts on
//! its own (ticks), and when it may take the CPU from the running process.
//!
//! Each scheduler keeps its part of `Engine::next_change` here: the engine
//! asks it when a wake is noticed and when the running process may lose
//! the CPU, and never tests which scheduler it has. Each keeps its own
//! records of a CPU and of a process (`NodeScheduler::Cpu`, `::Proc`), which
//! the engine stores in its records without looking inside, and sees the
//! engine only through [`Host`].

mod gang_cell;
mod mlfq;

pub(crate) use gang_cell::{GangCell, GangQuantum};
pub(crate) use mlfq::Mlfq;

use super::view::Host;
use crate::config::SimConfig;
use cosched_core::SimTime;
use cosched_policy::Mode;

pub(crate) trait NodeScheduler: 'static {
    /// The scheduler's record of one CPU (its run queue, its clocks), kept in
    /// the engine's CPU record.
    type Cpu: Default;

    /// The scheduler's record of one process (its priority, what is left of
    /// its quantum), kept in the engine's process record.
    type Proc;

    /// The record of a process that starts.
    fn new_proc(cfg: &SimConfig) -> Self::Proc;

    /// A process that starts on CPU `c` joins the scheduler (the gang cell:
    /// its cells are set by the gang quantum instead).
    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32);

    /// The running process `proc` of CPU `cpu` has used `ran_ns` of CPU time.
    fn charge(cpu: &mut Self::Cpu, proc: &mut Self::Proc, ran_ns: u64);

    /// CPU `c` has just been given to `p`.
    fn dispatched(cpu: &mut Self::Cpu, p: u32);

    /// Periodic boost: `p`, just favoured, must take the CPU from the
    /// running process when the scheduler next acts.
    fn preempt_for(cpu: &mut Self::Cpu, p: u32);

    /// Spin-yield: the running process `p` drops below every other process
    /// of its CPU. Returns its new priority level, if another process is
    /// there to drop below.
    fn yield_below_others<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &mut H,
        c: u32,
        p: u32,
    ) -> Option<u8>;

    /// Gang scheduling: the process of the current row's cell on the CPU.
    fn cell(_cpu: &Self::Cpu) -> Option<u32> {
        None
    }

    /// Gang scheduling: the CPU's cell now holds `cell`.
    fn set_cell(_cpu: &mut Self::Cpu, _cell: Option<u32>) {}

    /// The running process `p` of the CPU has blocked (I/O, a receive): it
    /// has left the CPU, and comes back through `make_ready` when it wakes.
    fn blocked(cpu: &mut Self::Cpu, proc: &mut Self::Proc, p: u32);

    /// Process `p` of the CPU has exited.
    fn exited(cpu: &mut Self::Cpu, p: u32);

    /// How the scheduler shares a CPU among jobs: the gang cell runs only
    /// the current row's process (gang slots); the others run any resident.
    const MODE: Mode;

    /// Whether a dispatch of another process than the last one costs a
    /// context switch (a gang switch is charged by the gang quantum instead).
    const CHARGES_DISPATCH_SWITCH: bool;

    /// Rules due at any visit, even while the CPU is in the kernel.
    fn on_visit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime);

    /// The first instant at or after `now` at which `on_visit` has a rule
    /// due that may change anything, even inside kernel work; `SimTime::MAX`
    /// if none.
    fn on_visit_due_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        now: SimTime,
    ) -> SimTime;

    /// The first instant at or after `from` at which the scheduler acts on
    /// its own (its tick); `SimTime::MAX` if it never does.
    fn acts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, from: SimTime) -> SimTime;

    /// The scheduler's own activity at an instant `acts_at` gave.
    fn tick<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime);

    /// The scheduler's activity at `now`, an instant `acts_at` gave, went by
    /// with nothing to do: only its bookkeeping (`Engine::pass_tick_visited_earlier`).
    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime);

    /// Whether `pick_next` would find a process now.
    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool;

    /// Take the next process to run off the CPU's ready processes.
    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32>;

    /// A woken process (already marked ready) joins the scheduler.
    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32);

    /// Favour a ready process: it runs next (demand-based coscheduling,
    /// periodic boost).
    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32);

    /// When a wake at `wake_at` on a busy CPU can change anything.
    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        wake_at: SimTime,
    ) -> SimTime;

    /// Whether the CPU stays idle while its running process is blocked in I/O
    /// (nothing else may run), so that the compute's end needs no visit.
    fn idle_while_blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool;

    /// When the running process `p`, running from `start`, may lose the CPU
    /// to the scheduler.
    fn preempts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        p: u32,
        start: SimTime,
        now: SimTime,
    ) -> SimTime;
}
