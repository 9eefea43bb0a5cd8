//! The Solaris-like multilevel feedback queue at a 1 ms tick: a quantum per
//! level, demotion when it runs out, preemption by a higher level at a tick,
//! a woken process to the head of the top level, every process raised to
//! the top each raise period. A tick falling inside kernel work is deferred
//! to the work's end; each tick acts once.

use super::{first_tick_after, tick_at_or_after, NodeScheduler};
use crate::config::{SimConfig, TOP_LEVEL};
use crate::engine::records::ProcState;
use crate::engine::view::Host;
use crate::mlfq::ReadyQueue;
use crate::metrics::SwitchCause;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::Mode;

pub(crate) struct Mlfq;

/// A CPU's multilevel feedback queue.
#[derive(Default)]
pub(crate) struct MlfqCpu {
    ready: ReadyQueue,
    last_raise: SimTime,
    /// The first tick the scheduler has not acted on (each tick acts once).
    first_unacted_tick: SimTime,
    /// Periodic boost: the process the scheduler must run at its next tick.
    boosted: Option<u32>,
}

/// A process's place in the multilevel feedback queue. Packed to 12 bytes
/// (its quantum on a 4-byte boundary), so that a process record keeps its
/// 160 bytes under periodic boost with spin-block, as when the engine held
/// these fields (see docs/performance/2026-11-26-sim-speed.md).
#[repr(C, packed(4))]
pub(crate) struct MlfqProc {
    quantum_left_ns: u64,
    level: u8,
}

impl NodeScheduler for Mlfq {
    type Cpu = MlfqCpu;
    type Proc = MlfqProc;
    type Machine = ();
    const MODE: Mode = Mode::Local;
    const CHARGES_DISPATCH_SWITCH: bool = true;

    /// The quanta, the periodic raise and what a boost does to the quantum.
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        to.scheduler.quantum_ns_by_level.clone_from(&from.scheduler.quantum_ns_by_level);
        to.scheduler.raise_period_ns = from.scheduler.raise_period_ns;
        to.costs.boost_keeps_quantum = from.costs.boost_keeps_quantum;
    }

    /// At the top level with a full quantum.
    fn new_proc(cfg: &SimConfig, _nice: i8, _reads_cpu_clock: bool) -> MlfqProc {
        MlfqProc { level: TOP_LEVEL, quantum_left_ns: cfg.scheduler.quantum_ns(TOP_LEVEL) }
    }

    /// A new process joins the tail of the top level (our choice).
    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        engine.cpu_mut(c).sched.ready.push_tail(p, TOP_LEVEL);
    }

    fn charge(_: &mut MlfqCpu, proc: &mut MlfqProc, ran_ns: u64, _: SimTime, _: bool) {
        proc.quantum_left_ns = proc.quantum_left_ns.saturating_sub(ran_ns);
    }

    fn dispatched<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        let cpu = &mut engine.cpu_mut(c).sched;
        if cpu.boosted == Some(p) {
            cpu.boosted = None;
        }
    }

    fn preempt_for(cpu: &mut MlfqCpu, p: u32) {
        cpu.boosted = Some(p);
    }

    /// One level below the lowest other resident (never upwards: our
    /// reading of "drops").
    fn yield_below_others<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &mut H,
        c: u32,
        p: u32,
    ) -> Option<u8> {
        let residents = &engine.cpu(c).residents;
        let lowest_other = residents.iter().filter(|&&r| r != p).map(|&r| engine.proc(r).sched.level).min()?;
        let proc = &mut engine.proc_mut(p).sched;
        proc.level = lowest_other.saturating_sub(1).min(proc.level);
        Some(proc.level)
    }

    /// A blocked process is in no queue: it rejoins at its wake.
    fn blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: u32) {}

    fn exited(_: &mut MlfqCpu, _: u32) {}

    /// The starvation avoidance, due at a raise boundary (a whole number of
    /// ticks) even inside kernel work.
    fn on_visit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        if ceil_tick(engine, now) == now
            && engine.clock().raise_floor(now) == now
            && engine.cpu(c).sched.last_raise < now
        {
            raise_all(engine, c, now);
        }
    }

    /// The next raise boundary, when there is a process to raise (a blocked
    /// one goes to the top when it wakes anyway).
    fn on_visit_due_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        now: SimTime,
    ) -> SimTime {
        let cpu = &engine.cpu(c);
        if cpu.running.is_none() && !Self::has_ready(engine, c) {
            return SimTime::MAX;
        }
        raise_at_or_after(engine, now, cpu.sched.last_raise)
    }

    /// The first instant at or after `from` (not before the CPU's last visit)
    /// at which the scheduler acts: the next tick not yet acted on, except
    /// that a tick falling inside kernel work is deferred to the work's end.
    fn acts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, from: SimTime) -> SimTime {
        tick_at_or_after(engine, c, from, engine.cpu(c).sched.first_unacted_tick)
    }

    /// Quantum expiry, preemption by a higher level, and preemption in favour
    /// of a process periodic boost has chosen.
    fn tick<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        Self::tick_passed(engine, c, now);
        let boosted = engine.cpu_mut(c).sched.boosted.take();
        let Some(p) = engine.cpu(c).running else {
            return;
        };
        let boosted = boosted.filter(|&q| q != p && engine.proc(q).state == ProcState::Ready);
        let records = engine.records_mut();
        let proc = &mut records.procs[p as usize];
        let (state, proc) = (&mut proc.state, &mut proc.sched);
        let cpu = &mut records.cpus[c as usize].sched;
        let cause = if boosted.is_some() { SwitchCause::Boost } else { SwitchCause::Tick };
        let trace = if proc.quantum_left_ns == 0 {
            proc.level = proc.level.saturating_sub(1);
            proc.quantum_left_ns = records.cfg.scheduler.quantum_ns(proc.level);
            cpu.ready.push_tail(p, proc.level);
            TraceKind::Demote { process: p, level: proc.level }
        } else if boosted.is_some() || cpu.ready.best_level().is_some_and(|best| best > proc.level) {
            // Preempted before its quantum ran out: back to the head, quantum kept.
            cpu.ready.push_head(p, proc.level);
            TraceKind::Preempt { process: p }
        } else {
            return;
        };
        *state = ProcState::Ready;
        if let Some(q) = boosted {
            // The boosted process runs next, whatever has joined its level since.
            let level = engine.proc(q).sched.level;
            let ready = &mut engine.cpu_mut(c).sched.ready;
            ready.remove(q);
            ready.push_head(q, level);
        }
        engine.release_cpu(c, now, cause);
        engine.record(now, c, trace);
    }

    /// Each tick acts once: the next one is the first after `now`.
    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        engine.cpu_mut(c).sched.first_unacted_tick = first_tick_after(engine, now);
    }

    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        !engine.cpu(c).sched.ready.is_empty()
    }

    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32> {
        engine.cpu_mut(c).sched.ready.pop_best()
    }

    /// To the head of the top level, with a fresh quantum.
    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        let top_quantum = engine.cfg().scheduler.quantum_ns(TOP_LEVEL);
        let proc = engine.proc_mut(p);
        proc.sched.level = TOP_LEVEL;
        proc.sched.quantum_left_ns = top_quantum;
        let cpu = proc.cpu;
        engine.cpu_mut(cpu).sched.ready.push_head(p, TOP_LEVEL);
    }

    /// To the head of the top level, with a fresh quantum (or, with
    /// `boost_keeps_quantum`, what was left of its own).
    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, q: u32) {
        let top_quantum = engine.cfg().scheduler.quantum_ns(TOP_LEVEL);
        let keep = engine.cfg().costs.boost_keeps_quantum;
        let proc = engine.proc_mut(q);
        debug_assert_eq!(proc.state, ProcState::Ready);
        proc.sched.level = TOP_LEVEL;
        if !keep {
            proc.sched.quantum_left_ns = top_quantum;
        }
        let cpu = proc.cpu;
        let ready = &mut engine.cpu_mut(cpu).sched.ready;
        ready.remove(q);
        ready.push_head(q, TOP_LEVEL);
    }

    /// A wake on a busy CPU may preempt only at the scheduler's next tick.
    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        wake_at: SimTime,
    ) -> SimTime {
        Self::acts_at(engine, c, wake_at)
    }

    /// Expiry is noticed at the first tick at or after the quantum runs out;
    /// a waiting higher level or a boosted process preempts at the first
    /// tick. (The raise may reorder at its boundary: `on_visit_due_at`.)
    fn preempts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        p: u32,
        start: SimTime,
        now: SimTime,
    ) -> SimTime {
        let cpu = &engine.cpu(c).sched;
        let proc = &engine.proc(p).sched;
        // (A quantum that ran out before kernel work is noticed by the tick
        // deferred to the work's end, if one fell inside it.)
        let quantum_end = Self::acts_at(engine, c, start + proc.quantum_left_ns);
        let first_tick = Self::acts_at(engine, c, now);
        let mut preempt_at = quantum_end.max(first_tick);
        if cpu.boosted.is_some() || cpu.ready.best_level().is_some_and(|best| best > proc.level) {
            preempt_at = preempt_at.min(first_tick);
        }
        preempt_at
    }
}

/// The 1 s starvation avoidance: every process to the top level.
fn raise_all<H: Host<NodeCpu = MlfqCpu, NodeProc = MlfqProc>>(engine: &mut H, c: u32, now: SimTime) {
    let records = engine.records_mut();
    let top_quantum = records.cfg.scheduler.quantum_ns(TOP_LEVEL);
    let cpu = &mut records.cpus[c as usize];
    cpu.sched.last_raise = now;
    cpu.sched.ready.raise_all(TOP_LEVEL);
    for p in cpu.sched.ready.processes().chain(cpu.running) {
        let proc = &mut records.procs[p as usize].sched;
        proc.level = TOP_LEVEL;
        proc.quantum_left_ns = top_quantum;
    }
}

/// The first tick at or after `t`.
fn ceil_tick<H: Host>(engine: &H, t: SimTime) -> SimTime {
    engine.clock().tick_ceil(t)
}

/// The raise boundary a CPU must still act on: `now` if it is one the CPU
/// has not raised at, else the next.
fn raise_at_or_after<H: Host>(engine: &H, now: SimTime, last_raise: SimTime) -> SimTime {
    let start = engine.clock().raise_floor(now);
    if start == now && last_raise < now {
        now
    } else {
        start + engine.clock().raise_period.ns()
    }
}
