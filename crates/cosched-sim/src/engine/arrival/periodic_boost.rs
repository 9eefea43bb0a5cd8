//! Periodic boost: at every tick the kernel walks the CPU's processes,
//! starting with the running one, checking the endpoints of those inside a
//! receive, and boosts the first whose message is there; the boosted
//! process preempts the running one when the scheduler next acts.

use super::MessageArrival;
use crate::config::{BoostWalk, SimConfig};
use crate::engine::node_scheduler::NodeScheduler;
use crate::engine::parts::Parts;
use crate::engine::{Engine, Phase, ProcState};
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::{periodic_boost_choice, BoostCandidate};

pub(crate) struct PeriodicBoost {
    /// The walk's candidates, kept to reuse their allocation.
    candidates: Vec<BoostCandidate>,
}

impl MessageArrival for PeriodicBoost {
    type Cpu = ();

    fn new(_: &SimConfig) -> PeriodicBoost {
        PeriodicBoost { candidates: Vec::new() }
    }

    const REACTS_TO_DEPOSITS: bool = false;

    fn before_running_changes<P: Parts<Arrival = Self>>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn on_deposit<P: Parts<Arrival = Self>>(_: &mut Engine<'_, P>, _: u32, _: SimTime) -> bool {
        false
    }

    /// The walk just before the scheduler acts, in the same tick.
    fn before_tick<P: Parts<Arrival = Self>>(engine: &mut Engine<'_, P>, c: u32, now: SimTime) {
        if engine.cfg.costs.boost_walk == BoostWalk::SameTick {
            walk(engine, c, now);
        }
    }

    /// Or the walk after it, starting with the process the scheduler has just
    /// chosen (its boost then waits for the next tick).
    fn after_tick<P: Parts<Arrival = Self>>(engine: &mut Engine<'_, P>, c: u32, now: SimTime) {
        if engine.cfg.costs.boost_walk != BoostWalk::SameTick {
            engine.dispatch(c, now);
            walk(engine, c, now);
        }
    }

    /// The walk costs or changes something only when a process is inside a
    /// receive, or when, starting with the running process, it would find
    /// another first.
    fn acts_at<P: Parts<Arrival = Self>>(engine: &Engine<'_, P>, c: u32, now: SimTime) -> SimTime {
        let cpu = &engine.cpus[c as usize];
        let active = (cpu.running.is_none() && P::Node::has_ready(engine, c)) || cpu.residents_in_recv > 0;
        if active {
            P::Node::acts_at(engine, c, now)
        } else {
            SimTime::MAX
        }
    }
}

/// The 1 ms kernel activity on CPU `c`.
fn walk<P: Parts<Arrival = PeriodicBoost>>(engine: &mut Engine<'_, P>, c: u32, now: SimTime) {
    let cpu = &engine.cpus[c as usize];
    let start_with = cpu.running.or(cpu.last_process);
    let mut candidates = std::mem::take(&mut engine.arrival.candidates);
    let (cost_ns, boosted) = boost_by_choice(engine, c, start_with, now, &mut candidates);
    engine.arrival.candidates = candidates;
    if let Some(q) = boosted {
        P::Node::preempt_for(&mut engine.cpus[c as usize].sched, q);
    }
    engine.charge_kernel(c, now, cost_ns);
}

/// Walk the CPU's processes starting with `start_with` and have the node
/// scheduler favour the chosen one, unless it is `start_with` itself.
/// Returns the kernel time it took and whom it boosted. (Spin-yield's pick
/// too.) `candidates` is the caller's buffer, reused between walks: no
/// allocation per tick.
pub(crate) fn boost_by_choice<P: Parts>(
    engine: &mut Engine<'_, P>,
    c: u32,
    start_with: Option<u32>,
    now: SimTime,
    candidates: &mut Vec<BoostCandidate>,
) -> (u64, Option<u32>) {
    candidates.clear();
    let residents = &engine.cpus[c as usize].residents;
    debug_assert!(residents.is_sorted(), "the walk goes in process order");
    candidates.extend(residents.iter().map(|&r| {
        let proc = &engine.procs[r as usize];
        BoostCandidate {
            id: r,
            runnable: matches!(proc.state, ProcState::Ready | ProcState::Running),
            in_receive: matches!(proc.phase, Phase::Recv),
            // (`&`, not `&&`: both are loads of this record, and one branch fewer is cheaper.)
            message_ready: matches!(proc.phase, Phase::Recv) & engine.has_all_messages(r, now),
        }
    }));
    let choice = periodic_boost_choice(candidates, start_with);
    let costs = &engine.cfg.costs;
    let mut cost_ns = choice.endpoints_checked as u64 * costs.endpoint_check_ns;
    let boosted = choice.chosen.filter(|&q| engine.procs[q as usize].state == ProcState::Ready);
    if let Some(q) = boosted {
        cost_ns += costs.queue_move_ns;
        P::Node::favour(engine, q);
        engine.record(now, c, TraceKind::Boost { process: q });
    }
    (cost_ns, boosted)
}
