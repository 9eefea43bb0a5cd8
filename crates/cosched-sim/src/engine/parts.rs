//! The one place a scheme becomes engine parts: a node scheduler, a receive
//! wait and a reaction to message arrival, chosen once from `cfg.scheme`.
//!
//! The parts are type parameters of the engine (monomorphised): each rule
//! they hold is a direct, inlinable call in the hot path, with no scheme test
//! left there. A new scheme is a new arm here; a new node scheduler, receive
//! wait or arrival reaction is a new file in its folder plus an arm here.

use super::arrival::{Interrupt, MessageArrival, NoReaction, PeriodicBoost};
use super::node_scheduler::{GangCell, Mlfq, NodeScheduler};
use super::receive::{BusyWait, ReceiveWait, SpinBlock, SpinYield};
use super::{Engine, EngineOutcome, Progress, SimJob};
use crate::config::SimConfig;
use crate::scheme::{ArrivalReaction, WaitMode};
use std::sync::atomic::AtomicBool;

/// The engine's parts, as one type: `(node scheduler, receive wait, arrival reaction)`.
pub(crate) trait Parts: 'static {
    type Node: NodeScheduler;
    type Wait: ReceiveWait;
    type Arrival: MessageArrival;
}

impl<N: NodeScheduler, W: ReceiveWait, A: MessageArrival> Parts for (N, W, A) {
    type Node = N;
    type Wait = W;
    type Arrival = A;
}

/// Everything one run of the engine needs besides its parts.
pub(crate) struct EngineRun<'a, 'p> {
    pub cfg: &'a SimConfig,
    pub jobs: Vec<SimJob>,
    pub bounded_slowdown_threshold_s: f64,
    pub record_trace: bool,
    pub visit_every_tick: bool,
    pub progress_every_events: u64,
    pub stop: Option<&'a AtomicBool>,
    pub progress: &'p mut dyn FnMut(&Progress),
}

impl EngineRun<'_, '_> {
    /// Build the engine with the parts of `cfg.scheme` and run it.
    pub(crate) fn run(self) -> EngineOutcome {
        let scheme = self.cfg.scheme;
        if scheme.is_gang() {
            // Gang scheduling runs only the current row's cell: receives busy-wait, arrivals change nothing.
            debug_assert!(scheme.wait_mode() == WaitMode::BusyWait && scheme.on_arrival() == ArrivalReaction::Nothing);
            return self.with_parts::<(GangCell, BusyWait, NoReaction)>();
        }
        match scheme.wait_mode() {
            WaitMode::BusyWait => self.with_arrival::<Mlfq, BusyWait>(),
            WaitMode::SpinBlock => self.with_arrival::<Mlfq, SpinBlock>(),
            WaitMode::SpinYield => self.with_arrival::<Mlfq, SpinYield>(),
        }
    }

    fn with_arrival<N: NodeScheduler, W: ReceiveWait>(self) -> EngineOutcome {
        match self.cfg.scheme.on_arrival() {
            ArrivalReaction::Nothing => self.with_parts::<(N, W, NoReaction)>(),
            ArrivalReaction::InterruptAndReschedule => self.with_parts::<(N, W, Interrupt)>(),
            ArrivalReaction::PeriodicBoost => self.with_parts::<(N, W, PeriodicBoost)>(),
        }
    }

    fn with_parts<P: Parts>(self) -> EngineOutcome {
        let mut engine = Engine::<P>::new(self.cfg, self.jobs, self.bounded_slowdown_threshold_s, self.record_trace);
        if self.visit_every_tick {
            engine = engine.with_visits_every_tick();
        }
        engine.run(self.progress_every_events, self.stop, self.progress)
    }
}
