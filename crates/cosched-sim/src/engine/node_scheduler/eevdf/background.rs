//! What the rest of a real node does to its processes, which the model does
//! not simulate but a measured machine file states: kernel threads and other
//! programs that wake on a CPU and take it for a moment (`bench
//! background`), and the moves between busy CPUs the kernel makes for such
//! causes and for its averaged loads (`bench background`). Both are drawn
//! from hashes of the run's seed, the CPU and a counter (the tick window, the
//! gap's number), so the same seed gives the same run.

use super::{EevdfCpu, EevdfProc};
use crate::engine::view::Host;
use cosched_core::{SimTime, StreamSeed};

/// One uniform draw in [0, 2^64) for `purpose` at CPU `c`, the `index`-th (a tick window, a gap).
pub(super) fn draw<H: Host>(engine: &H, purpose: &str, c: u32, index: u64) -> u64 {
    StreamSeed(engine.cfg().seed).substream(purpose, ((c as u64) << 40) ^ index).next_u64()
}

/// Whether, at this tick of the busy CPU `c` (no sibling idle), the kernel moves one of its processes for a
/// cause the model does not simulate (`background_migration_interval_ns`). Each of its ready processes is
/// moved once per interval on average, counting the move the balancing makes back: the measured
/// interval holds both, the draw here makes the first and `balance_at_tick` the second, so a tick draws
/// with probability ready × tick / (2 × interval).
pub(super) fn background_move_due<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(
    engine: &H,
    c: u32,
    now: SimTime,
    ready: u32,
) -> bool {
    let interval_ns = engine.cfg().scheduler.background_migration_interval_ns;
    if interval_ns == 0 {
        return false;
    }
    let tick_ns = engine.clock().tick.ns();
    let u = draw(engine, "background-migration", c, now.0 / tick_ns);
    // u / 2^64 < ready × tick / (2 × interval), exactly in integers.
    (u as u128) * 2 * (interval_ns as u128) < (ready as u128 * tick_ns as u128) << 64
}

/// A CPU's housekeeping wakes (`housekeeping_wake_interval_ns`): a Poisson process, its gaps drawn one
/// after another from hashes of the seed, the CPU and the gap's number. Only a CPU with a process queued
/// looks at them; one that comes back to them after its next wake has passed starts the process again
/// from then (memoryless, so the draws stay the process's), which costs one visit and acts on nothing.
#[derive(Default)]
pub(crate) struct HousekeepingWakes {
    /// The next wake; `SimTime::ZERO`: none drawn yet.
    next: SimTime,
    /// Gaps drawn so far.
    drawn: u64,
}

impl HousekeepingWakes {
    /// The first instant at or after `from` at which CPU's scheduler must look at its wakes: the next one,
    /// or `from` itself when that one has passed unseen (or none was drawn) and the process must start again.
    pub(super) fn due_at_or_after(&self, cfg: &crate::config::SimConfig, from: SimTime) -> SimTime {
        if cfg.scheduler.housekeeping_wake_interval_ns == 0 {
            return SimTime::MAX;
        }
        if self.next == SimTime::ZERO || self.next < from {
            return from;
        }
        self.next
    }
}

/// At an instant CPU `c`'s scheduler acts (`now`): whether a housekeeping wake falls exactly now, and the
/// next one drawn when this one is due or has passed.
pub(super) fn take_housekeeping_wake<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(
    engine: &mut H,
    c: u32,
    now: SimTime,
) -> bool {
    let interval_ns = engine.cfg().scheduler.housekeeping_wake_interval_ns;
    let wakes = &engine.cpu(c).sched.housekeeping;
    if interval_ns == 0 || (wakes.next != SimTime::ZERO && wakes.next > now) {
        return false;
    }
    let due = wakes.next == now;
    let number = wakes.drawn;
    let u = draw(engine, "housekeeping-wake", c, number) | 1;
    // An exponential gap: −ln(u / 2^64) × interval, at least a nanosecond.
    let gap_ns = (-(u as f64 / 2f64.powi(64)).ln() * interval_ns as f64).ceil().max(1.0) as u64;
    let wakes = &mut engine.cpu_mut(c).sched.housekeeping;
    wakes.next = now + gap_ns;
    wakes.drawn = number + 1;
    due
}
