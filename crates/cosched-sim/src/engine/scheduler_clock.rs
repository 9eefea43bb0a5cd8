//! The node scheduler's tick and the MLFQ's raise period, with both
//! rounded once at the instant being visited.
//!
//! A visit asks where that instant falls several times over: whether it is
//! a tick, the scheduler's next tick (once by the visit, again to book the
//! next one), the raise boundary. Each rounding is a pair of wide multiplies;
//! rounding the visit's instant once and answering the repeats from that
//! saves about a third of them. Other instants are rounded when asked.

use cosched_core::{Period, SimTime};

#[derive(Clone, Copy, Debug)]
pub(crate) struct SchedulerClock {
    pub tick: Period,
    pub raise_period: Period,
    /// The instant rounded last, with its tick ceiling and raise floor.
    rounded_at: SimTime,
    tick_ceil: SimTime,
    raise_floor: SimTime,
}

impl SchedulerClock {
    pub fn new(tick_ns: u64, raise_period_ns: u64) -> SchedulerClock {
        let (tick, raise_period) = (Period::new(tick_ns), Period::new(raise_period_ns));
        SchedulerClock {
            tick,
            raise_period,
            rounded_at: SimTime::ZERO,
            tick_ceil: SimTime::ZERO,
            raise_floor: SimTime::ZERO,
        }
    }

    /// Round `now` ahead of the questions a visit at `now` asks.
    #[inline]
    pub fn round_at(&mut self, now: SimTime) {
        self.rounded_at = now;
        self.tick_ceil = self.tick.ceil(now);
        self.raise_floor = self.raise_period.floor(now);
    }

    /// The first tick at or after `t`.
    #[inline]
    pub fn tick_ceil(&self, t: SimTime) -> SimTime {
        if t == self.rounded_at {
            self.tick_ceil
        } else {
            self.tick.ceil(t)
        }
    }

    /// The last raise boundary at or before `t`.
    #[inline]
    pub fn raise_floor(&self, t: SimTime) -> SimTime {
        if t == self.rounded_at {
            self.raise_floor
        } else {
            self.raise_period.floor(t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rounded_instant_and_any_other_give_the_periods_own_answers() {
        let mut clock = SchedulerClock::new(1_000_000, 20_000_000);
        for now in [0, 1, 999_999, 1_000_000, 1_000_001, 39_999_999, 40_000_000] {
            clock.round_at(SimTime(now));
            for t in [now, now + 1, now.saturating_sub(1), now + 1_000_000, 123_456_789] {
                let t = SimTime(t);
                assert_eq!(clock.tick_ceil(t), clock.tick.ceil(t), "tick ceiling of {t:?} rounded at {now}");
                assert_eq!(clock.raise_floor(t), clock.raise_period.floor(t), "raise floor of {t:?} rounded at {now}");
            }
        }
    }
}
