//! How a process waits inside a receive while a message is missing: spin
//! (busy-wait), spin a while then block until a message lands (spin-block),
//! or spin a while then yield once and spin on (spin-yield).
//!
//! Each wait keeps its part of `Engine::next_change` here: when the spin
//! runs out (`spin_deadline`). Each keeps its own record of a process
//! (`ReceiveWait::Proc`: the spin left) and its run settings (the spin time),
//! and sees the engine only through [`Host`].

mod busy_wait;
mod spin_block;
mod spin_yield;

pub(crate) use busy_wait::BusyWait;
pub(crate) use spin_block::{blocked_in_receive, copy_block_and_wake_reads, interrupt_and_wake, SpinBlock};
pub(crate) use spin_yield::SpinYield;

use super::view::Host;
use crate::config::SimConfig;
use cosched_core::SimTime;

pub(crate) trait ReceiveWait: 'static {
    /// The wait's record of one process (its spin), kept in the engine's
    /// process record.
    type Proc: Default;

    /// The wait's settings for a run (the engine holds one).
    fn new(cfg: &SimConfig) -> Self;

    /// Copy into `to` the values of the machine model, among those only some schemes read
    /// ([`crate::config::SimConfig::scheme_specific_values_at_default`]), that this part reads.
    fn copy_what_it_reads(_from: &SimConfig, _to: &mut SimConfig) {}

    /// Process `p` enters a receive.
    fn start_receive(&self, proc: &mut Self::Proc);

    /// The receiving process has spun `ran_ns` while its messages were missing.
    fn charge_spin(proc: &mut Self::Proc, ran_ns: u64);

    /// Whether every message deposit must be an event (the wait reacts to it).
    const REACTS_TO_DEPOSITS: bool;

    /// When the receive of `p`, spinning from `spinning_from`, stops
    /// spinning to block or yield; `None` if it spins until its messages land.
    fn spin_deadline<H: Host<WaitProc = Self::Proc, Wait = Self>>(
        engine: &H,
        p: u32,
        spinning_from: SimTime,
    ) -> Option<SimTime>;

    /// The running process `p` is in a receive with a message missing at `now`.
    fn wait<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, p: u32, now: SimTime);

    /// Whether `on_deposit` may react to a message for `dest`, judged from
    /// `dest`'s own record before its CPU is charged: when it is `false`,
    /// `on_deposit` would return `false` after the charge too, and the
    /// engine skips the charge. (Charging a CPU and ending its I/Os change
    /// only its running process and the processes whose I/O ended.) By
    /// default: whenever the wait reacts to deposits at all.
    fn may_react<H: Host<WaitProc = Self::Proc, Wait = Self>>(_engine: &H, _dest: u32) -> bool {
        Self::REACTS_TO_DEPOSITS
    }

    /// Whether `on_deposit` may react to a message for `dest` that lands at
    /// `at`, judged at `now` (the message is decided): when it is `false`,
    /// the landing needs no event. By default: whenever the wait reacts.
    fn may_react_at<H: Host<WaitProc = Self::Proc, Wait = Self>>(
        _engine: &H,
        _dest: u32,
        _at: SimTime,
        _now: SimTime,
    ) -> bool {
        Self::REACTS_TO_DEPOSITS
    }

    /// A message has landed in `dest`'s endpoint at `now` (accounted): react,
    /// and say whether it did (the CPU is then visited).
    fn on_deposit<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, dest: u32, now: SimTime) -> bool;
}

/// Spin time of spin-block and spin-yield receives: the spin factor times
/// the message latency.
fn spin_ns(cfg: &SimConfig) -> u64 {
    (cfg.network.latency_ns(cfg.network.message_bytes) as f64 * cfg.costs.spin_factor).round() as u64
}
