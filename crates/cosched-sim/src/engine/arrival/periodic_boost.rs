//! Periodic boost: at every tick the kernel walks the CPU's processes,
//! starting with the running one, checking the endpoints of those inside a
//! receive, and boosts the first whose message is there; the boosted
//! process preempts the running one when the scheduler next acts.

use super::MessageArrival;
use crate::config::{BoostDisplaces, BoostReceive, BoostWalk, SimConfig};
use crate::engine::records::{Phase, ProcState};
use crate::engine::view::Host;
use crate::metrics::Displaced;
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

    /// The walk's timing, and its pick.
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        to.costs.boost_walk = from.costs.boost_walk;
        copy_pick_reads(from, to);
    }

    const REACTS_TO_DEPOSITS: bool = false;

    fn before_running_changes<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn on_deposit<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) -> bool {
        false
    }

    /// The walk just before the scheduler acts, in the same tick.
    fn before_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, c: u32, now: SimTime) {
        if engine.cfg().costs.boost_walk == BoostWalk::SameTick {
            walk(engine, c, now);
        }
    }

    /// Or the walk after it, starting with the process the scheduler has just
    /// chosen (its boost then waits for the next tick).
    fn after_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, c: u32, now: SimTime) {
        if engine.cfg().costs.boost_walk != BoostWalk::SameTick {
            engine.dispatch(c, now);
            walk(engine, c, now);
        }
    }

    /// The walk costs or changes something only when a process is inside a
    /// receive, or when, starting with the running process, it would find
    /// another first.
    fn acts_at<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &H, c: u32, now: SimTime) -> SimTime {
        let cpu = &engine.cpu(c);
        let active = (cpu.running.is_none() && engine.has_ready(c)) || cpu.residents_in_recv > 0;
        if active {
            engine.scheduler_acts_at(c, now)
        } else {
            SimTime::MAX
        }
    }
}

/// The 1 ms kernel activity on CPU `c`.
fn walk<H: Host<Arrival = PeriodicBoost>>(engine: &mut H, c: u32, now: SimTime) {
    let cpu = &engine.cpu(c);
    let start_with = cpu.running.or(cpu.last_process);
    let mut candidates = std::mem::take(&mut engine.arrival_mut().candidates);
    let (cost_ns, boosted) = boost_by_choice(engine, c, start_with, now, &mut candidates);
    engine.arrival_mut().candidates = candidates;
    if let Some((q, displaced)) = boosted {
        if displaces(engine.cfg(), displaced) {
            engine.preempt_for(c, q);
        }
    }
    engine.charge_kernel(c, now, cost_ns);
}

/// Walk the CPU's processes starting with `start_with` and have the node
/// scheduler favour the chosen one, unless it is `start_with` itself.
/// Returns the kernel time it took, whom it boosted and what the running
/// process was doing. (Spin-yield's pick too.) `candidates` is the caller's
/// buffer, reused between walks: no allocation per tick.
pub(crate) fn boost_by_choice<H: Host>(
    engine: &mut H,
    c: u32,
    start_with: Option<u32>,
    now: SimTime,
    candidates: &mut Vec<BoostCandidate>,
) -> (u64, Option<(u32, Displaced)>) {
    candidates.clear();
    let per_message = engine.cfg().costs.boost_receive == BoostReceive::PerMessage;
    let cpu = engine.cpu(c);
    let (residents, running) = (&cpu.residents, cpu.running);
    debug_assert!(residents.is_sorted(), "the walk goes in process order");
    candidates.extend(residents.iter().map(|&r| {
        let proc = &engine.proc(r);
        let in_receive = matches!(proc.phase, Phase::Recv);
        // (`&`, not `&&`: both are loads of this record, and one branch fewer is cheaper.)
        let complete = in_receive & engine.has_all_messages(r, now);
        // A receive per message: one it has not taken yet makes it a candidate (the running process has
        // taken every message in).
        let unseen = per_message && in_receive && Some(r) != running && engine.has_unseen_message(r, now);
        BoostCandidate {
            id: r,
            runnable: matches!(proc.state, ProcState::Ready | ProcState::Running),
            in_receive,
            message_ready: complete || unseen,
        }
    }));
    let choice = periodic_boost_choice(candidates, start_with);
    let costs = &engine.cfg().costs;
    let mut cost_ns = choice.endpoints_checked as u64 * costs.endpoint_check_ns;
    let boosted = choice.chosen.filter(|&q| engine.proc(q).state == ProcState::Ready);
    let Some(q) = boosted else {
        return (cost_ns, None);
    };
    cost_ns += costs.queue_move_ns;
    let displaced = match running.map(|r| engine.proc(r).phase) {
        None => Displaced::Nothing,
        Some(Phase::Recv) => Displaced::Spinning,
        Some(_) => Displaced::Computing,
    };
    if displaces(engine.cfg(), displaced) {
        engine.favour(q);
    } else {
        engine.favour_without_preempting(q);
    }
    let breaks_a_pair = running.is_some_and(|r| has_a_running_neighbour(engine, r, now));
    engine.count_boost(displaced, breaks_a_pair);
    engine.record(now, c, TraceKind::Boost { process: q, displaced });
    (cost_ns, Some((q, displaced)))
}

/// What [`boost_by_choice`] reads (periodic boost's walk and spin-yield's pick): the endpoint checks, the readings
/// of a receive and of what a boost displaces, and the queue move of the process it favours.
pub(crate) fn copy_pick_reads(from: &SimConfig, to: &mut SimConfig) {
    to.costs.endpoint_check_ns = from.costs.endpoint_check_ns;
    to.costs.boost_receive = from.costs.boost_receive;
    to.costs.boost_displaces = from.costs.boost_displaces;
    to.costs.queue_move_ns = from.costs.queue_move_ns;
}

/// Whether a boost may take the CPU from a process doing `displaced` (`--boost-displaces`).
fn displaces(cfg: &SimConfig, displaced: Displaced) -> bool {
    displaced != Displaced::Computing || cfg.costs.boost_displaces == BoostDisplaces::Any
}

/// Whether a ring neighbour of `p` runs at `now` (on its own CPU): `p` and it are coscheduled. The neighbour's CPU
/// is charged up to `now` first: a compute phase that ended since its last charge, followed by I/O, leaves the CPU
/// only when charged (`Engine::account`), so its recorded state may be stale. Charging changes nothing else; without
/// it the count moved with when CPUs happened to be charged (fast mode's windows charge them all).
fn has_a_running_neighbour<H: Host>(engine: &mut H, p: u32, now: SimTime) -> bool {
    let proc = engine.proc(p);
    let (neighbours, count) = (proc.neighbours, proc.neighbour_count as usize);
    neighbours[..count].iter().any(|&n| {
        engine.account(engine.proc(n).cpu, now);
        engine.proc(n).state == ProcState::Running
    })
}
