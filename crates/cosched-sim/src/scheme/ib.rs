//! IB: immediate blocking, the baseline two-phase spin-block was proposed
//! against (implicit coscheduling: Arpaci-Dusseau, Culler and Mainwaring).
//! A receive whose message is missing blocks at once, without spinning; the
//! interrupt of each message that lands wakes it, as in SB. Not one of the
//! study's schemes: it shows what SB's spin buys.
//!
//! It is also the example of a scheme with a part of its own: its receive
//! wait is defined here, and the one line `ib,` in `register!` adds it.

use super::Registered;
use crate::engine::arrival::NoReaction;
use crate::engine::runner::Os;
use crate::engine::view::Host;
use crate::config::SimConfig;
use crate::engine::receive::{blocked_in_receive, copy_block_and_wake_reads, interrupt_and_wake, ReceiveWait};
use cosched_core::SimTime;
use cosched_policy::PlanRules;

pub(super) const SCHEME: Registered = Registered::new::<(Os, ImmediateBlock, NoReaction)>("IB", PlanRules::STUDY);

/// Block as soon as a message is missing; wake on its interrupt.
pub(crate) struct ImmediateBlock;

impl ReceiveWait for ImmediateBlock {
    type Proc = ();
    const REACTS_TO_DEPOSITS: bool = true;

    fn new(_: &SimConfig) -> ImmediateBlock {
        ImmediateBlock
    }

    /// The same block and wake as spin-block's.
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        copy_block_and_wake_reads(from, to);
    }

    fn start_receive(&self, _: &mut ()) {}

    fn charge_spin(_: &mut (), _: u64) {}

    /// No spin: the wait ends where it starts.
    fn spin_deadline<H: Host<WaitProc = Self::Proc, Wait = Self>>(_: &H, _: u32, spinning_from: SimTime) -> Option<SimTime> {
        Some(spinning_from)
    }

    fn wait<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, p: u32, now: SimTime) {
        engine.block_in_recv(p, now);
    }

    fn may_react<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &H, dest: u32) -> bool {
        blocked_in_receive(engine, dest)
    }

    // `may_react_at` is the default: with no spin, any receiver may be blocked by then.

    /// The same interrupt and wake as spin-block's.
    fn on_deposit<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, dest: u32, now: SimTime) -> bool {
        if !blocked_in_receive(engine, dest) {
            return false;
        }
        interrupt_and_wake(engine, dest, now);
        true
    }
}
