//! How a process waits inside a receive while a message is missing: spin
//! (busy-wait), spin a while then block until a message lands (spin-block),
//! or spin a while then yield once and spin on (spin-yield).
//!
//! Each wait keeps its part of `Engine::next_change` here: when the spin
//! runs out (`spin_deadline`).

mod busy_wait;
mod spin_block;
mod spin_yield;

pub(crate) use busy_wait::BusyWait;
pub(crate) use spin_block::SpinBlock;
pub(crate) use spin_yield::SpinYield;

use super::parts::Parts;
use super::Engine;
use cosched_core::SimTime;

pub(crate) trait ReceiveWait: 'static {
    /// Whether every message deposit must be an event (the wait reacts to it).
    const REACTS_TO_DEPOSITS: bool;

    /// When the receive of `p`, spinning from `spinning_from`, stops
    /// spinning to block or yield; `None` if it spins until its messages land.
    fn spin_deadline<P: Parts>(engine: &Engine<'_, P>, p: u32, spinning_from: SimTime) -> Option<SimTime>;

    /// The running process `p` is in a receive with a message missing at `now`.
    fn wait<P: Parts>(engine: &mut Engine<'_, P>, p: u32, now: SimTime);

    /// A message has landed in `dest`'s endpoint at `now` (accounted): react,
    /// and say whether it did (the CPU is then visited).
    fn on_deposit<P: Parts>(engine: &mut Engine<'_, P>, dest: u32, now: SimTime) -> bool;
}
