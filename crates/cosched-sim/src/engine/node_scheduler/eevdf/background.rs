//! What the rest of a real node does to its processes, which the model does
//! not simulate but a measured machine file states: kernel threads and other
//! programs that wake on a CPU and take it for a moment (`bench
//! housekeeping`), and the moves between busy CPUs the kernel makes for such
//! causes and for its averaged loads (`bench migrations`). Both are drawn
//! from hashes of the run's seed, the CPU and the tick window, so the same
//! seed gives the same run, and a CPU's next draw needs no stored state.

use super::{EevdfCpu, EevdfProc};
use crate::engine::view::Host;
use cosched_core::{SimTime, StreamSeed};

/// How far ahead a housekeeping wake is looked for, in tick windows: beyond
/// it the next visit looks again.
const HOUSEKEEPING_LOOKAHEAD_WINDOWS: u64 = 4096;

/// One uniform draw in [0, 2^64) for `purpose` at CPU `c` and tick window `window`.
fn draw<H: Host>(engine: &H, purpose: &str, c: u32, window: u64) -> u64 {
    StreamSeed(engine.cfg().seed).substream(purpose, ((c as u64) << 40) ^ window).next_u64()
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

/// The first instant at or after `from` at which a housekeeping task wakes on CPU `c` and takes it
/// (`housekeeping_wake_interval_ns`); `SimTime::MAX` if none is due or none is modelled. At most one
/// wake per tick window, with probability 1 − e^(−tick / interval) (a Poisson process's chance of
/// one or more), at a drawn offset strictly inside the window: never on a tick itself.
pub(super) fn housekeeping_at_or_after<H: Host>(engine: &H, c: u32, from: SimTime) -> SimTime {
    let interval_ns = engine.cfg().scheduler.housekeeping_wake_interval_ns;
    let tick_ns = engine.clock().tick.ns();
    if interval_ns == 0 || tick_ns < 2 {
        return SimTime::MAX;
    }
    let threshold = housekeeping_threshold(tick_ns, interval_ns);
    let first_window = from.0 / tick_ns;
    for window in first_window..first_window + HOUSEKEEPING_LOOKAHEAD_WINDOWS {
        if draw(engine, "housekeeping-wake", c, window) >= threshold {
            continue;
        }
        let offset_ns = 1 + draw(engine, "housekeeping-offset", c, window) % (tick_ns - 1);
        let at = SimTime(window * tick_ns + offset_ns);
        if at >= from {
            return at;
        }
    }
    SimTime::MAX
}

/// The draw below which a tick window holds a housekeeping wake: 2^64 × (1 − e^(−tick / interval)).
fn housekeeping_threshold(tick_ns: u64, interval_ns: u64) -> u64 {
    let chance = -(-(tick_ns as f64) / interval_ns as f64).exp_m1();
    (chance * u64::MAX as f64) as u64
}
