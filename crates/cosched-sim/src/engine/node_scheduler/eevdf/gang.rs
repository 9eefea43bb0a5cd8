//! Gang slots over EEVDF: cosched's gang scheduling as the runtime does it on Linux. The gang quantum
//! (`GangQuantum`, the gang cell's) picks the row that runs; the jobs of every other row are frozen, as the
//! runtime's freezer leaves them, and EEVDF shares each CPU among the running row's processes, however many a
//! job runs per CPU. Freezing is a sleep to the kernel (the frozen task dequeues as a sleeping one does, and may
//! stay queued delayed); a thaw is the agent's wake of each process in its job's order, placed as the kernel
//! places a task's wake of another (`balance::thaw_cpu`: toward the agent's CPU by the decayed loads the gate
//! keeps, no idle scan on a busy node), so the ranks of a job can share one CPU until a balance parts them.
//! Every other rule is EEVDF's own (`mod.rs`).

use super::background::draw;
use super::pelt::RunnableAverage;
use super::{avg_vruntime, eligible, update_running, Eevdf, EevdfCpu, EevdfProc};
use crate::config::SimConfig;
use crate::engine::node_scheduler::gang_cell::{
    book_boundary_if_due, realign_row, row_at_boundary, GangQuantum, HoldsQuantum,
};
use crate::engine::node_scheduler::NodeScheduler;
use crate::engine::records::{ProcState, NO_ROW};
use crate::engine::view::Host;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::cluster::Switching;
use cosched_policy::{Coscheduler, Mode};

pub(crate) struct GangEevdf;

/// The gang quantum, and which job each CPU last ran thawed (a thaw of another job's process there refills the
/// caches).
#[derive(Default)]
pub(crate) struct GangGate {
    quantum: GangQuantum,
    last_job_on_cpu: Vec<Option<u32>>,
}

impl HoldsQuantum for GangGate {
    fn quantum(&self) -> &GangQuantum {
        &self.quantum
    }
    fn quantum_mut(&mut self) -> &mut GangQuantum {
        &mut self.quantum
    }
}

/// What the gate's hooks see of the engine.
pub(crate) trait GateHost: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc, NodeMachine = GangGate> {}

impl<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc, NodeMachine = GangGate>> GateHost for H {}

impl NodeScheduler for GangEevdf {
    type Cpu = EevdfCpu;
    type Proc = EevdfProc;
    type Machine = GangGate;
    const MODE: Mode = Mode::Gang;
    const CHARGES_DISPATCH_SWITCH: bool = <Eevdf as NodeScheduler>::CHARGES_DISPATCH_SWITCH;

    fn new_proc(cfg: &SimConfig, nice: i8, reads_cpu_clock: bool) -> EevdfProc {
        Eevdf::new_proc(cfg, nice, reads_cpu_clock)
    }

    fn new_machine(cfg: &SimConfig, cosched: &Coscheduler) -> GangGate {
        GangGate { quantum: GangQuantum::for_run(cfg, cosched), last_job_on_cpu: vec![None; cfg.cpu_count() as usize] }
    }

    /// Its processes were admitted as new tasks; unless its row runs now and it need not wait for the boundary,
    /// they are frozen at once (where the plan is realigned after every start, `plan_changed` decides).
    fn job_started<H: GateHost>(engine: &mut H, rows: &[u32], cpus: &[u32], first_proc: u32, tasks: u32, now: SimTime) {
        let waits = engine.cfg().costs.gang_start_waits_for_quantum;
        for p in first_proc..first_proc + tasks {
            engine.proc_mut(p).sched.runnable_average = RunnableAverage::started(now.0);
        }
        let runs_now = engine.node_machine_mut().quantum.place(rows, cpus, first_proc, waits);
        if runs_now {
            note_jobs_on_cpus(engine, cpus, first_proc);
        }
        if runs_now || engine.node_machine().quantum.follows_every_plan() {
            return;
        }
        for p in first_proc..first_proc + tasks {
            freeze(engine, p, now);
        }
    }

    fn job_finished<H: GateHost>(engine: &mut H, rows: &[u32], cpus: &[u32], jobs_running: usize) {
        engine.node_machine_mut().quantum.release(rows, cpus, jobs_running);
    }

    /// The plan realigned: the row that runs now thawed, every other frozen, with no switch paid (the slot goes
    /// on) but the caches refilled.
    fn plan_changed<H: GateHost>(engine: &mut H, now: SimTime) {
        if let Some(row) = realign_row(engine, now) {
            switch_to_row(engine, row, now, 0);
        }
    }

    fn jobs_changed<H: GateHost>(engine: &mut H, now: SimTime) {
        book_boundary_if_due(engine, now);
    }

    /// A quantum boundary: the next row's jobs thawed and the others frozen, each CPU whose job changes paying
    /// the gang switch and the cache refill.
    fn on_event<H: GateHost>(engine: &mut H, now: SimTime) {
        if let Some(next) = row_at_boundary(engine, now) {
            switch_to_row(engine, next, now, engine.cfg().costs.gang_switch_ns);
        }
        book_boundary_if_due(engine, now);
    }

    fn running_row(gate: &GangGate) -> Option<u32> {
        gate.quantum.current_row()
    }

    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        Eevdf::admit(engine, c, p);
    }

    fn charge(cpu: &mut EevdfCpu, proc: &mut EevdfProc, ran_ns: u64, until: SimTime, computing: bool) {
        Eevdf::charge(cpu, proc, ran_ns, until, computing);
    }

    fn dispatched<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        Eevdf::dispatched(engine, c, p);
    }

    fn preempt_for(cpu: &mut EevdfCpu, p: u32) {
        Eevdf::preempt_for(cpu, p);
    }

    fn yield_below_others<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &mut H,
        c: u32,
        p: u32,
    ) -> Option<u8> {
        Eevdf::yield_below_others(engine, c, p)
    }

    fn blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        Eevdf::blocked(engine, c, p);
    }

    fn exited(cpu: &mut EevdfCpu, p: u32) {
        Eevdf::exited(cpu, p);
    }

    fn on_visit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        Eevdf::on_visit(engine, c, now);
    }

    fn on_visit_due_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, now: SimTime) -> SimTime {
        Eevdf::on_visit_due_at(engine, c, now)
    }

    fn acts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, from: SimTime) -> SimTime {
        Eevdf::acts_at(engine, c, from)
    }

    fn tick<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        Eevdf::tick(engine, c, now);
    }

    fn between_ticks<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        Eevdf::between_ticks(engine, c, now);
    }

    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        Eevdf::tick_passed(engine, c, now);
    }

    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        Eevdf::has_ready(engine, c)
    }

    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32> {
        Eevdf::pick_next(engine, c)
    }

    fn wake_cpu<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, p: u32, now: SimTime) -> u32 {
        Eevdf::wake_cpu(engine, p, now)
    }

    fn wakes_may_move<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H) -> bool {
        Eevdf::wakes_may_move(engine)
    }

    fn pull_when_idle<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) -> bool {
        Eevdf::pull_when_idle(engine, c, now)
    }

    fn pulls_when_free<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        Eevdf::pulls_when_free(engine, c)
    }

    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        Eevdf::make_ready(engine, p);
    }

    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        Eevdf::favour(engine, p);
    }

    fn favour_without_preempting<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        Eevdf::favour_without_preempting(engine, p);
    }

    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, wake_at: SimTime) -> SimTime {
        Eevdf::wake_noticed_at(engine, c, wake_at)
    }

    fn idle_while_blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        Eevdf::idle_while_blocked(engine, c)
    }

    fn preempts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        p: u32,
        start: SimTime,
        now: SimTime,
    ) -> SimTime {
        Eevdf::preempts_at(engine, c, p, start, now)
    }
}

/// The job of a job starting to run on its CPUs at once is the last one there.
fn note_jobs_on_cpus<H: GateHost>(engine: &mut H, cpus: &[u32], first_proc: u32) {
    let job = engine.proc(first_proc).job;
    for &c in cpus {
        engine.node_machine_mut().last_job_on_cpu[c as usize] = Some(job);
    }
}

/// Every CPU runs `row`'s jobs from `now` on: the other jobs' processes frozen first, then the row's thawed in
/// their order. A CPU a job is thawed on pays `switch_ns` and, when that job is not the last one there, the
/// cache refill (the agent's freeze and thaw, as the gang cell charges them); under `Switching::ChangedCells`
/// a CPU whose job stays pays nothing.
fn switch_to_row<H: GateHost>(engine: &mut H, row: Option<u32>, now: SimTime, switch_ns: u64) {
    let mut jobs = Vec::new();
    engine.placed_jobs(|rows, cpus, first_proc, tasks| {
        let runs = row.is_some_and(|r| rows.contains(&r));
        jobs.push((runs, first_proc, tasks, cpus.to_vec()));
    });
    for c in 0..engine.cfg().cpu_count() {
        engine.account(c, now);
    }
    for (_, first_proc, tasks, _) in jobs.iter().filter(|job| !job.0) {
        for p in *first_proc..first_proc + tasks {
            freeze(engine, p, now);
        }
    }
    charge_switch(engine, row, &jobs, now, switch_ns);
    for (_, first_proc, tasks, _) in jobs.iter().filter(|job| job.0) {
        for p in *first_proc..first_proc + tasks {
            let waker = thawing_cpu(engine, engine.proc(p).cpu, now);
            thaw(engine, p, waker, now);
        }
    }
    for c in 0..engine.cfg().cpu_count() {
        engine.visit(c, now);
    }
}

/// The switch's kernel work on each CPU whose job changes (see `switch_to_row`).
fn charge_switch<H: GateHost>(
    engine: &mut H,
    row: Option<u32>,
    jobs: &[(bool, u32, u32, Vec<u32>)],
    now: SimTime,
    switch_ns: u64,
) {
    let changed_only = engine.coscheduler().settings().rules.switching == Switching::ChangedCells;
    for c in 0..engine.cfg().cpu_count() {
        let incoming = jobs.iter().find(|(runs, _, _, cpus)| *runs && cpus.contains(&c)).map(|job| job.1);
        let incoming_job = incoming.map(|first_proc| engine.proc(first_proc).job);
        let last_job = engine.node_machine().last_job_on_cpu[c as usize];
        // A CPU left with no job thawed on it (a row with a free cell, none at all) idles: nothing to pay.
        if incoming_job.is_none() || (changed_only && incoming_job == last_job) {
            continue;
        }
        let refill_ns = match (incoming, last_job) {
            (Some(first_proc), Some(last)) if Some(last) != incoming_job => engine.cache_refill_ns(first_proc),
            _ => 0,
        };
        engine.node_machine_mut().last_job_on_cpu[c as usize] = incoming_job;
        engine.cpu_mut(c).add_kernel_work(now, switch_ns + refill_ns);
        engine.record(now, c, TraceKind::GangSwitch { row: row.unwrap_or(NO_ROW), cell: incoming });
    }
}

/// The CPU of the agent's thread that switches `c`'s node at `now`: the agent has one on each CPU and the first to
/// wake at the boundary switches, so any of them, drawn from the seed.
fn thawing_cpu<H: GateHost>(engine: &H, c: u32, now: SimTime) -> u32 {
    let per_node = engine.cfg().cpus_per_node;
    let first = c / per_node * per_node;
    first + (draw(engine, "thawing-cpu", first, now.0) % per_node as u64) as u32
}

/// The freezer stops `p` (nothing if it has exited or is frozen): running, it sleeps at once; queued, it leaves
/// its queue as a sleeper does (or stays delayed, not eligible); blocked, its wake will leave it frozen.
fn freeze<H: GateHost>(engine: &mut H, p: u32, now: SimTime) {
    let proc = engine.proc(p);
    if proc.state == ProcState::Exited || proc.sched.frozen {
        return;
    }
    let c = proc.cpu;
    let runnable = match proc.state {
        ProcState::Running => {
            engine.proc_mut(p).state = ProcState::Blocked;
            Eevdf::blocked(engine, c, p);
            engine.release_cpu(c, now, crate::metrics::SwitchCause::Block);
            engine.record(now, c, TraceKind::Block { process: p });
            true
        }
        ProcState::Ready => {
            dequeue_sleeping(engine, c, p);
            engine.proc_mut(p).state = ProcState::Blocked;
            true
        }
        ProcState::Blocked | ProcState::Exited => false,
    };
    let sched = &mut engine.proc_mut(p).sched;
    sched.frozen = true;
    sched.runnable_when_thawed = runnable;
    sched.runnable_average.set_runnable(now.0, false);
}

/// The thaw of `p` by the agent's thread on CPU `waker`: if it would be runnable, it wakes, placed as the kernel
/// places a task's wake of another (`balance::thaw_cpu`); else its own wake comes later. Its runnable average
/// counts it runnable from the thaw (a process that blocks within its slot is counted runnable: our
/// simplification, docs/model.md).
fn thaw<H: GateHost>(engine: &mut H, p: u32, waker: u32, now: SimTime) {
    let sched = &mut engine.proc_mut(p).sched;
    if !sched.frozen {
        return;
    }
    sched.frozen = false;
    if std::mem::take(&mut sched.runnable_when_thawed) {
        sched.runnable_average.set_runnable(now.0, true);
        sched.thawed_from = Some(waker);
        let prev = engine.proc(p).cpu;
        // A process that woke while frozen is marked ready by the engine; the thaw is its wake.
        engine.proc_mut(p).state = ProcState::Blocked;
        engine.wake(p, now);
        let sched = &mut engine.proc_mut(p).sched;
        sched.thawed_from = None;
        sched.recent_used_cpu = Some(prev);
    }
}

/// `dequeue_entity` of a queued process that sleeps (frozen before it ran again): it leaves with its lag, or
/// stays queued delayed if not eligible (DELAY_DEQUEUE), as `Eevdf::blocked` for a running one.
fn dequeue_sleeping<H: GateHost>(engine: &mut H, c: u32, p: u32) {
    update_running(engine, c);
    if engine.proc(p).sched.delayed {
        return;
    }
    if !eligible(engine, c, p) {
        engine.proc_mut(p).sched.delayed = true;
        return;
    }
    let average = avg_vruntime(engine, c);
    let proc = &mut engine.proc_mut(p).sched;
    proc.vlag = (average - proc.vruntime).clamp(-proc.lag_limit, proc.lag_limit);
    let cpu = engine.cpu(c);
    let left_idle = cpu.running.is_none() && cpu.sched.queue.iter().all(|&q| q == p);
    let sched = &mut engine.cpu_mut(c).sched;
    sched.queue.retain(|&q| q != p);
    if sched.next_buddy == Some(p) {
        sched.next_buddy = None;
    }
    if left_idle {
        sched.idle_vruntime = average;
    }
}
