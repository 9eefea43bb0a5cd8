//! Spin-yield: spin for the spin time, then drop below every other process
//! of the CPU, boost one other as periodic boost would choose, and spin on:
//! to the end of the receive (the default), or to the next yield after
//! another spin time (`YieldCycle::Repeated`).

use super::{spin_ns, ReceiveWait};
use crate::config::{SimConfig, YieldCycle};
use crate::engine::arrival::{boost_by_choice, copy_pick_reads};
use crate::engine::view::Host;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::BoostCandidate;

pub(crate) struct SpinYield {
    /// The spin time before yielding.
    spin_ns: u64,
    /// It yields after every spin time (`YieldCycle::Repeated`), not once per receive.
    repeats: bool,
    /// The pick's candidates, kept to reuse their allocation.
    candidates: Vec<BoostCandidate>,
}

/// A process's spin in its receive.
#[derive(Default)]
pub(crate) struct SpinOnce {
    /// Spinning left before yielding.
    spin_left_ns: u64,
    /// This receive has yielded already (it yields once).
    yielded: bool,
}

impl ReceiveWait for SpinYield {
    type Proc = SpinOnce;
    const REACTS_TO_DEPOSITS: bool = false;

    fn new(cfg: &SimConfig) -> SpinYield {
        let spin_ns = spin_ns(cfg);
        // (With no spin time, yields would follow one another at one instant.)
        let repeats = cfg.costs.yield_cycle == YieldCycle::Repeated && spin_ns > 0;
        SpinYield { spin_ns, repeats, candidates: Vec::new() }
    }

    /// The spin, the yield's system call, queue move and cycle, and its pick (periodic boost's walk).
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        to.costs.spin_factor = from.costs.spin_factor;
        to.costs.syscall_ns = from.costs.syscall_ns;
        to.costs.queue_move_ns = from.costs.queue_move_ns;
        to.costs.yield_cycle = from.costs.yield_cycle;
        copy_pick_reads(from, to);
    }

    fn start_receive(&self, proc: &mut SpinOnce) {
        proc.spin_left_ns = self.spin_ns;
        proc.yielded = false;
    }

    fn charge_spin(proc: &mut SpinOnce, ran_ns: u64) {
        proc.spin_left_ns = proc.spin_left_ns.saturating_sub(ran_ns);
    }

    fn spin_deadline<H: Host<WaitProc = Self::Proc, Wait = Self>>(
        engine: &H,
        p: u32,
        spinning_from: SimTime,
    ) -> Option<SimTime> {
        let proc = &engine.proc(p).wait;
        (!proc.yielded).then(|| spinning_from + proc.spin_left_ns)
    }

    fn wait<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, p: u32, now: SimTime) {
        let proc = &engine.proc(p).wait;
        if proc.spin_left_ns == 0 && !proc.yielded {
            spin_yield(engine, p, now);
        }
    }

    fn on_deposit<H: Host<WaitProc = Self::Proc, Wait = Self>>(_: &mut H, _: u32, _: SimTime) -> bool {
        false
    }
}

/// The spin time ran out: yield once.
fn spin_yield<H: Host<WaitProc = SpinOnce, Wait = SpinYield>>(engine: &mut H, p: u32, now: SimTime) {
    let cpu = engine.proc(p).cpu;
    let mut cost_ns = engine.cfg().costs.syscall_ns;
    if let Some(level) = engine.yield_below_others(cpu, p) {
        cost_ns += engine.cfg().costs.queue_move_ns;
        engine.record(now, cpu, TraceKind::Yield { process: p, level });
    }
    // Yield again after another spin time, or spin on to the end.
    let (repeats, again_ns) = (engine.wait().repeats, engine.wait().spin_ns);
    let proc = &mut engine.proc_mut(p).wait;
    if repeats {
        proc.spin_left_ns = again_ns;
    } else {
        proc.yielded = true;
    }
    let mut candidates = std::mem::take(&mut engine.wait_mut().candidates);
    let (walk_cost_ns, _) = boost_by_choice(engine, cpu, Some(p), now, &mut candidates);
    engine.wait_mut().candidates = candidates;
    engine.charge_kernel(cpu, now, cost_ns + walk_cost_ns);
}
