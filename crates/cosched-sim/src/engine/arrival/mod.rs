//! What a node does when a message arrives: nothing, interrupt and move the
//! receiver to the front (demand-based coscheduling), or look at every
//! endpoint at each tick and boost a receiver whose message is there
//! (periodic boost). Every cost is kernel time, counted as overhead.
//!
//! Each reaction keeps its part of `Engine::next_change` here: when it acts
//! on a CPU on its own (`acts_at`). Each keeps its own record of a CPU
//! (`MessageArrival::Cpu`: the NIC's view) and its run state (the walk's
//! buffer), and sees the engine only through [`Host`].

mod interrupt;
mod none;
mod periodic_boost;

pub(crate) use interrupt::Interrupt;
pub(crate) use none::NoReaction;
pub(crate) use periodic_boost::{boost_by_choice, copy_pick_reads, PeriodicBoost};

use super::view::Host;
use crate::config::SimConfig;
use cosched_core::SimTime;

pub(crate) trait MessageArrival: 'static + Sized {
    /// The reaction's record of one CPU, kept in the engine's CPU record.
    type Cpu: Default;

    /// The reaction's state for a run (the engine holds one).
    fn new(cfg: &SimConfig) -> Self;

    /// Copy into `to` the values of the machine model, among those only some schemes read
    /// ([`crate::config::SimConfig::scheme_specific_values_at_default`]), that this part reads.
    fn copy_what_it_reads(_from: &SimConfig, _to: &mut SimConfig) {}

    /// Whether every message deposit must be an event (the reaction needs it).
    const REACTS_TO_DEPOSITS: bool;

    /// What CPU `c` runs is about to change at `at`.
    fn before_running_changes<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, c: u32, at: SimTime);

    /// A message has landed in `dest`'s endpoint at `now` (accounted): react,
    /// and say whether it did (the CPU is then visited).
    fn on_deposit<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, dest: u32, now: SimTime) -> bool;

    /// Work at the node scheduler's tick, just before it acts.
    fn before_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, c: u32, now: SimTime);

    /// Work at the node scheduler's tick, just after it has acted.
    fn after_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, c: u32, now: SimTime);

    /// The first instant at or after `now` at which the reaction can cost or
    /// change anything on CPU `c` by itself; `SimTime::MAX` if none.
    fn acts_at<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &H, c: u32, now: SimTime) -> SimTime;
}
