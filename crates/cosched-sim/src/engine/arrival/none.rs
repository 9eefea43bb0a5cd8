//! No reaction: a message lands in its endpoint and the receiver finds it
//! when it next runs.

use super::MessageArrival;
use crate::config::SimConfig;
use crate::engine::view::Host;
use cosched_core::SimTime;

pub(crate) struct NoReaction;

impl MessageArrival for NoReaction {
    type Cpu = ();

    fn new(_: &SimConfig) -> NoReaction {
        NoReaction
    }

    const REACTS_TO_DEPOSITS: bool = false;

    fn before_running_changes<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn on_deposit<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) -> bool {
        false
    }

    fn before_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn after_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn acts_at<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }
}
