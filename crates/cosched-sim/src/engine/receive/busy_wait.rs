//! Busy-wait: the receiver spins on its CPU until every awaited message has
//! landed.

use super::ReceiveWait;
use crate::config::SimConfig;
use crate::engine::view::Host;
use cosched_core::SimTime;

pub(crate) struct BusyWait;

impl ReceiveWait for BusyWait {
    type Proc = ();
    const REACTS_TO_DEPOSITS: bool = false;

    fn new(_: &SimConfig) -> BusyWait {
        BusyWait
    }

    fn start_receive(&self, _: &mut ()) {}

    fn charge_spin(_: &mut (), _: u64) {}

    fn spin_deadline<H: Host<WaitProc = Self::Proc, Wait = Self>>(_: &H, _: u32, _: SimTime) -> Option<SimTime> {
        None
    }

    fn wait<H: Host<WaitProc = Self::Proc, Wait = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn on_deposit<H: Host<WaitProc = Self::Proc, Wait = Self>>(_: &mut H, _: u32, _: SimTime) -> bool {
        false
    }
}
