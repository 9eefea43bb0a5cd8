//! A node's CPU scheduler: which ready process a CPU runs, when it acts on
//! its own (ticks), and when it may take the CPU from the running process.
//!
//! Each scheduler keeps its part of `Engine::next_change` here: the engine
//! asks it when a wake is noticed and when the running process may lose
//! the CPU, and never tests which scheduler it has. Each keeps its own
//! records of a CPU and of a process (`NodeScheduler::Cpu`, `::Proc`), which
//! the engine stores in its records without looking inside, and sees the
//! engine only through [`Host`]. A scheduler with state shared by every
//! CPU (the gang cell's gang quantum) keeps it in its own record of the
//! whole machine (`NodeScheduler::Machine`), told of jobs' starts and
//! finishes and of the plan's changes, with a timed event of its own.

mod gang_cell;

pub(crate) use gang_cell::GangCell;

pub mod os;

use super::view::Host;
use crate::config::SimConfig;
use cosched_core::SimTime;
use cosched_policy::{Coscheduler, Mode};
use os::os_schedulers;
pub use os::OsScheduler;

/// The folder's files of the OS schedulers (`os.rs` lists them).
macro_rules! os_scheduler_modules {
    ($($file:ident :: $ty:ident = $name:literal,)*) => {
        $(pub(crate) mod $file;)*
    };
}

os_schedulers!(os_scheduler_modules);

pub(crate) trait NodeScheduler: 'static {
    /// The scheduler's record of one CPU (its run queue, its clocks), kept in
    /// the engine's CPU record.
    type Cpu: Default;

    /// The scheduler's record of one process (its priority, what is left of
    /// its quantum), kept in the engine's process record.
    type Proc;

    /// The scheduler's record of the whole machine (the gang cell: the gang
    /// quantum), kept by the engine without looking inside. A scheduler of
    /// each CPU alone has none and writes `type Machine = ();` (stable Rust
    /// has no default for an associated type); the hooks that use it do
    /// nothing unless overridden.
    type Machine: Default;

    /// The record of a process that starts, with its nice value and whether it reads its own CPU clock all
    /// along (`Program::reads_cpu_clock`).
    fn new_proc(cfg: &SimConfig, nice: i8, reads_cpu_clock: bool) -> Self::Proc;

    /// The machine's record at the run's start.
    fn new_machine(_cfg: &SimConfig, _cosched: &Coscheduler) -> Self::Machine {
        Self::Machine::default()
    }

    /// A job starts at `now`: its `tasks` processes from `first_proc` on,
    /// dealt over `cpus` in blocks (one per CPU: rank `i` on `cpus[i]`), in
    /// the coscheduler's matrix `rows` (after each process's `admit`, before
    /// its CPUs are visited).
    fn job_started<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc, NodeMachine = Self::Machine>>(
        _engine: &mut H,
        _rows: &[u32],
        _cpus: &[u32],
        _first_proc: u32,
        _tasks: u32,
        _now: SimTime,
    ) {
    }

    /// A job on `cpus` in `rows` has finished; `jobs_running` are left.
    fn job_finished<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc, NodeMachine = Self::Machine>>(
        _engine: &mut H,
        _rows: &[u32],
        _cpus: &[u32],
        _jobs_running: usize,
    ) {
    }

    /// The coscheduler's plan has changed at `now` (every job it placed has
    /// started): running jobs' rows may have moved.
    fn plan_changed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc, NodeMachine = Self::Machine>>(
        _engine: &mut H,
        _now: SimTime,
    ) {
    }

    /// After a job's start or finish at `now`, its CPUs visited: the
    /// scheduler may book its own event (`Host::book_scheduler_event`).
    fn jobs_changed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc, NodeMachine = Self::Machine>>(
        _engine: &mut H,
        _now: SimTime,
    ) {
    }

    /// The event the scheduler booked is due at `now`.
    fn on_event<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc, NodeMachine = Self::Machine>>(
        _engine: &mut H,
        _now: SimTime,
    ) {
    }

    /// The matrix row whose cells the CPUs run now (gang slots; fast mode's
    /// measures per row), if any.
    fn running_row(_machine: &Self::Machine) -> Option<u32> {
        None
    }

    /// Every matrix cell's process, row-major, one per CPU in each row
    /// (`NO_PROC`: empty); none under a scheduler without rows.
    fn cells(_machine: &Self::Machine) -> &[u32] {
        &[]
    }

    /// A process that starts on CPU `c` joins the scheduler (the gang cell:
    /// its cells are set at `job_started` instead).
    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32);

    /// The running process `proc` of CPU `cpu` has used `ran_ns` of CPU time,
    /// the time just before `until`.
    /// `computing`: the time was its compute (not a spinning receive).
    fn charge(cpu: &mut Self::Cpu, proc: &mut Self::Proc, ran_ns: u64, until: SimTime, computing: bool);

    /// CPU `c` has just been given to `p`.
    fn dispatched<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32);

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

    /// The running process `p` of the CPU has blocked (I/O, a receive): it
    /// has left the CPU, and comes back through `make_ready` when it wakes.
    fn blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32);

    /// Process `p` of the CPU has exited.
    fn exited(cpu: &mut Self::Cpu, p: u32);

    /// How the scheduler shares a CPU among jobs: the gang cell runs only
    /// the current row's process (gang slots); the others run any resident.
    const MODE: Mode;

    /// Whether a dispatch of another process than the last one costs a
    /// context switch (a gang switch is charged by the gang quantum instead).
    const CHARGES_DISPATCH_SWITCH: bool;

    /// Copy into `to` the values of the machine model, among those only some schemes read
    /// ([`crate::config::SimConfig::scheme_specific_values_at_default`]), that this scheduler reads besides the context switch
    /// (`runner::copy_node_reads` adds that where the scheduler charges it).
    fn copy_what_it_reads(_from: &SimConfig, _to: &mut SimConfig) {}

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

    /// A visit between the scheduler's own instants, once the running
    /// process is brought up to `now`: a preemption a wake asked for acts
    /// here. (The multilevel feedback queue preempts only at its tick.)
    fn between_ticks<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_engine: &mut H, _c: u32, _now: SimTime) {}

    /// The scheduler's activity at `now`, an instant `acts_at` gave, went by
    /// with nothing to do: only its bookkeeping (`Engine::pass_tick_visited_earlier`).
    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime);

    /// Whether `pick_next` would find a process now.
    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool;

    /// Take the next process to run off the CPU's ready processes.
    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32>;

    /// The CPU of its node on which the blocked `p`, waking at `now`, is to
    /// run (the engine moves it there first): by default its own.
    fn wake_cpu<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, p: u32, _now: SimTime) -> u32 {
        engine.proc(p).cpu
    }

    /// Whether a wake may move its process to another CPU (`wake_cpu`): an
    /// I/O that ends while its CPU is in kernel work with a process ready
    /// then matters at its end, not at the kernel work's.
    fn wakes_may_move<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_engine: &H) -> bool {
        false
    }

    /// CPU `c`, free at `now`, has nothing to run: the scheduler may move a
    /// ready process of another CPU of its node to it (through
    /// `Host::migrate`). Whether it did. By default it never does.
    fn pull_when_idle<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        _engine: &mut H,
        _c: u32,
        _now: SimTime,
    ) -> bool {
        false
    }

    /// Whether CPU `c`, idle, will try `pull_when_idle` once it is free
    /// (it became idle inside kernel work, whose end then matters). By
    /// default it never pulls.
    fn pulls_when_free<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_engine: &H, _c: u32) -> bool {
        false
    }

    /// A woken process (already marked ready) joins the scheduler.
    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32);

    /// Favour a ready process: it runs next (demand-based coscheduling,
    /// periodic boost).
    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32);

    /// Favour a ready process without preempting the running one: it runs when the CPU is next given up (a
    /// periodic boost that may not displace a computing process). Where favouring never preempts by itself,
    /// `favour`.
    fn favour_without_preempting<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        Self::favour(engine, p);
    }

    /// When a wake at `wake_at` on a busy CPU can change anything.
    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        wake_at: SimTime,
    ) -> SimTime;

    /// Whether the CPU stays idle while its running process is blocked in I/O
    /// (nothing else may run), so that the compute's end needs no visit. By
    /// default: when the process is alone on its CPU.
    fn idle_while_blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        engine.cpu(c).residents.len() == 1
    }

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

/// The first tick at or after `from`, not before `first_unacted_tick` (each
/// tick acts once), except that a tick falling inside kernel work is
/// deferred to the work's end.
pub(super) fn tick_at_or_after<H: Host>(engine: &H, c: u32, from: SimTime, first_unacted_tick: SimTime) -> SimTime {
    let cpu = &engine.cpu(c);
    let end = cpu.switch_until;
    let lower = cpu.kernel_start.max(first_unacted_tick);
    if from <= end && end > lower && engine.clock().tick_ceil(lower) < end {
        return end;
    }
    engine.clock().tick_ceil(from).max(first_unacted_tick)
}

/// The first tick after an act at `now` (a tick, or a deferred one).
pub(super) fn first_tick_after<H: Host>(engine: &H, now: SimTime) -> SimTime {
    let ceil = engine.clock().tick_ceil(now);
    if ceil == now {
        now + engine.clock().tick.ns()
    } else {
        ceil
    }
}
