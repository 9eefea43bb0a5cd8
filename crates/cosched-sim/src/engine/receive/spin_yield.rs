//! Spin-yield: spin for the spin time, then (once per receive) drop below
//! every other process of the CPU, boost one other as periodic boost would
//! choose, and spin on.

use super::ReceiveWait;
use crate::engine::arrival::boost_by_choice;
use crate::engine::parts::Parts;
use crate::engine::Engine;
use crate::trace::TraceKind;
use cosched_core::SimTime;

pub(crate) struct SpinYield;

impl ReceiveWait for SpinYield {
    const REACTS_TO_DEPOSITS: bool = false;

    fn spin_deadline<P: Parts>(engine: &Engine<'_, P>, p: u32, spinning_from: SimTime) -> Option<SimTime> {
        let proc = &engine.procs[p as usize];
        (!proc.yielded).then(|| spinning_from + proc.spin_left_ns)
    }

    fn wait<P: Parts>(engine: &mut Engine<'_, P>, p: u32, now: SimTime) {
        let proc = &engine.procs[p as usize];
        if proc.spin_left_ns == 0 && !proc.yielded {
            spin_yield(engine, p, now);
        }
    }

    fn on_deposit<P: Parts>(_: &mut Engine<'_, P>, _: u32, _: SimTime) -> bool {
        false
    }
}

/// The spin time ran out: yield once (the levels are the MLFQ's, the only
/// node scheduler spin-yield runs under).
fn spin_yield<P: Parts>(engine: &mut Engine<'_, P>, p: u32, now: SimTime) {
    let cpu = engine.procs[p as usize].cpu;
    let lowest_other =
        engine.cpus[cpu as usize].residents.iter().filter(|&&r| r != p).map(|&r| engine.procs[r as usize].level).min();
    let costs = &engine.cfg.costs;
    let mut cost_ns = costs.syscall_ns;
    if let Some(lowest) = lowest_other {
        // (Never upwards: our reading of "drops".)
        let level = lowest.saturating_sub(1).min(engine.procs[p as usize].level);
        engine.procs[p as usize].level = level;
        cost_ns += costs.queue_move_ns;
        engine.record(now, cpu, TraceKind::Yield { process: p, level });
    }
    engine.procs[p as usize].yielded = true;
    let (walk_cost_ns, _) = boost_by_choice(engine, cpu, Some(p), now);
    engine.charge_kernel(cpu, now, cost_ns + walk_cost_ns);
}
