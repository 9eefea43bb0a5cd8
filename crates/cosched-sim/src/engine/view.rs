//! What a part sees of the engine: the records it shares with the engine
//! (its own among them, by their own types) and the few engine services it
//! uses, never the engine itself. The engine is the one implementation;
//! the parts are generic over it, so every call is direct and inlined.

use super::proc_table::ProcTable;
use super::records::{Cpu, Proc};
use super::scheduler_clock::SchedulerClock;
use crate::config::SimConfig;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::Coscheduler;

/// The shared records, borrowed at once (a rule that reads one CPU's
/// record and writes its processes').
pub(crate) struct RecordsMut<'e, NodeCpu, ArrivalCpu, NodeProc, WaitProc> {
    pub cfg: &'e SimConfig,
    pub cpus: &'e mut [Cpu<NodeCpu, ArrivalCpu>],
    pub procs: &'e mut ProcTable<Proc<NodeProc, WaitProc>>,
}

pub(crate) trait Host {
    /// The node scheduler's record of a CPU, of a process and of the whole machine.
    type NodeCpu;
    type NodeProc;
    type NodeMachine;
    /// The receive wait's record of a process, and its run state.
    type WaitProc;
    type Wait;
    /// The arrival reaction's record of a CPU, and its run state.
    type ArrivalCpu;
    type Arrival;

    // ---- the shared records

    fn cfg(&self) -> &SimConfig;
    fn clock(&self) -> &SchedulerClock;
    fn cpu(&self, c: u32) -> &Cpu<Self::NodeCpu, Self::ArrivalCpu>;
    fn cpu_mut(&mut self, c: u32) -> &mut Cpu<Self::NodeCpu, Self::ArrivalCpu>;
    fn proc(&self, p: u32) -> &Proc<Self::NodeProc, Self::WaitProc>;
    fn proc_mut(&mut self, p: u32) -> &mut Proc<Self::NodeProc, Self::WaitProc>;
    fn records_mut(&mut self) -> RecordsMut<'_, Self::NodeCpu, Self::ArrivalCpu, Self::NodeProc, Self::WaitProc>;
    fn wait(&self) -> &Self::Wait;
    fn wait_mut(&mut self) -> &mut Self::Wait;
    fn arrival_mut(&mut self) -> &mut Self::Arrival;
    fn node_machine(&self) -> &Self::NodeMachine;
    fn node_machine_mut(&mut self) -> &mut Self::NodeMachine;
    /// The cluster-level policy: placement, matrix rows and the row to run.
    fn coscheduler(&self) -> &Coscheduler;

    // ---- engine services

    /// Note a scheduling decision in the trace (when one is kept).
    fn record(&mut self, now: SimTime, c: u32, kind: TraceKind);
    /// Kernel work of `ns` on CPU `c`, accounted up to `now`: it delays the
    /// running process, and counts as overhead.
    fn charge_kernel(&mut self, c: u32, now: SimTime, ns: u64);
    /// A boost chose another process than the running one, which was doing `displaced` (and had a ring
    /// neighbour running: `breaks_a_pair`).
    fn count_boost(&mut self, displaced: crate::metrics::Displaced, breaks_a_pair: bool);
    /// Whether a message landed in `p`'s endpoint since it last left its CPU, by `now`: one it has not yet taken.
    fn has_unseen_message(&self, p: u32, now: SimTime) -> bool;
    /// What process `p` pays to refill the caches when its job takes a CPU back from another.
    fn cache_refill_ns(&self, p: u32) -> u64;
    /// The blocked process `p` becomes runnable at `when` and joins its node scheduler.
    fn wake(&mut self, p: u32, when: SimTime);
    /// The running receiver `p` blocks with a system call.
    fn block_in_recv(&mut self, p: u32, now: SimTime);
    /// CPU `c` runs nothing from `at` on (its process was put back by its scheduler).
    fn release_cpu(&mut self, c: u32, at: SimTime, cause: crate::metrics::SwitchCause);
    /// While CPU `c` is free, give it to the next process.
    fn dispatch(&mut self, c: u32, now: SimTime);
    /// Whether every message `p` awaits is in its endpoints at `now`.
    fn has_all_messages(&self, p: u32, now: SimTime) -> bool;
    /// Charge CPU `c`'s time up to `now`.
    fn account(&mut self, c: u32, now: SimTime);
    /// Visit CPU `c` at `now`: apply the rules due, book its next visit.
    fn visit(&mut self, c: u32, now: SimTime);
    /// Book CPU `c`'s next visit again (what it may do has changed from
    /// elsewhere at `now`).
    fn rebook(&mut self, c: u32, now: SimTime);
    /// Move process `p`, not running, to CPU `to` of its node at `now`: the
    /// engine's records of where it lives (both CPUs accounted first). The
    /// node scheduler moves its own records around the call.
    fn migrate(&mut self, p: u32, to: u32, now: SimTime);
    /// The node scheduler's own event (`NodeScheduler::on_event`) at `at`.
    fn book_scheduler_event(&mut self, at: SimTime);
    /// Each placed job's matrix rows, CPUs, first process and number of
    /// processes (its ranks, dealt over its CPUs in blocks), from the
    /// coscheduler's plan, in the plan's order.
    fn placed_jobs(&self, each: impl FnMut(&[u32], &[u32], u32, u32));

    // ---- the node scheduler, for the other parts

    /// The node scheduler favours the ready process `p`: it runs next.
    fn favour(&mut self, p: u32);
    /// The node scheduler favours `p` but lets the running process keep its CPU until it gives it up.
    fn favour_without_preempting(&mut self, p: u32);
    /// The favoured `p` takes CPU `c` when its scheduler next acts.
    fn preempt_for(&mut self, c: u32, p: u32);
    /// The running `p` drops below every other process of CPU `c`: its new level, if there is another.
    fn yield_below_others(&mut self, c: u32, p: u32) -> Option<u8>;
    /// The first instant at or after `from` at which CPU `c`'s scheduler acts on its own.
    fn scheduler_acts_at(&self, c: u32, from: SimTime) -> SimTime;
    /// Whether CPU `c`'s scheduler has a process ready to run.
    fn has_ready(&self, c: u32) -> bool;
}
