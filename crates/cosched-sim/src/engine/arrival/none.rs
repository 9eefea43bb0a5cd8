//! No reaction: a message lands in its endpoint and the receiver finds it
//! when it next runs.

use super::MessageArrival;
use crate::config::SimConfig;
use crate::engine::parts::Parts;
use crate::engine::Engine;
use cosched_core::SimTime;

pub(crate) struct NoReaction;

impl MessageArrival for NoReaction {
    type Cpu = ();

    fn new(_: &SimConfig) -> NoReaction {
        NoReaction
    }

    const REACTS_TO_DEPOSITS: bool = false;

    fn before_running_changes<P: Parts<Arrival = Self>>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn on_deposit<P: Parts<Arrival = Self>>(_: &mut Engine<'_, P>, _: u32, _: SimTime) -> bool {
        false
    }

    fn before_tick<P: Parts<Arrival = Self>>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn after_tick<P: Parts<Arrival = Self>>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn acts_at<P: Parts<Arrival = Self>>(_: &Engine<'_, P>, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }
}
