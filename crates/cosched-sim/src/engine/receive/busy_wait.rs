//! Busy-wait: the receiver spins on its CPU until every awaited message has
//! landed.

use super::ReceiveWait;
use crate::engine::parts::Parts;
use crate::engine::Engine;
use cosched_core::SimTime;

pub(crate) struct BusyWait;

impl ReceiveWait for BusyWait {
    const REACTS_TO_DEPOSITS: bool = false;

    fn spin_deadline<P: Parts>(_: &Engine<'_, P>, _: u32, _: SimTime) -> Option<SimTime> {
        None
    }

    fn wait<P: Parts>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn on_deposit<P: Parts>(_: &mut Engine<'_, P>, _: u32, _: SimTime) -> bool {
        false
    }
}
