//! Simulated time: integer nanoseconds since the start of a run.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time, in nanoseconds. Integer so that event order never
/// depends on floating-point rounding.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub fn from_secs_f64(secs: f64) -> SimTime {
        assert!(secs.is_finite() && secs >= 0.0, "time must be finite and non-negative: {secs}");
        SimTime((secs * NS_PER_S as f64).round() as u64)
    }
    pub fn from_us(us: u64) -> SimTime {
        SimTime(us * NS_PER_US)
    }
    pub fn from_ms(ms: u64) -> SimTime {
        SimTime(ms * NS_PER_MS)
    }
    pub fn ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    /// The first multiple of `period_ns` that is strictly after `self`.
    pub fn next_multiple_after(self, period_ns: u64) -> SimTime {
        debug_assert!(period_ns > 0);
        SimTime((self.0 / period_ns + 1) * period_ns)
    }
    /// The first multiple of `period_ns` at or after `self`.
    pub fn ceil_to_multiple(self, period_ns: u64) -> SimTime {
        debug_assert!(period_ns > 0);
        SimTime(self.0.div_ceil(period_ns) * period_ns)
    }
    pub fn is_multiple_of(self, period_ns: u64) -> bool {
        self.0.is_multiple_of(period_ns)
    }
    pub fn saturating_sub(self, other: SimTime) -> u64 {
        self.0.saturating_sub(other.0)
    }
}

impl Add<u64> for SimTime {
    type Output = SimTime;
    fn add(self, ns: u64) -> SimTime {
        SimTime(self.0.checked_add(ns).expect("simulated time overflow"))
    }
}

impl AddAssign<u64> for SimTime {
    fn add_assign(&mut self, ns: u64) {
        *self = *self + ns;
    }
}

impl Sub for SimTime {
    type Output = u64;
    fn sub(self, earlier: SimTime) -> u64 {
        debug_assert!(self >= earlier, "time went backwards: {self:?} - {earlier:?}");
        self.0 - earlier.0
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_rounding() {
        let t = SimTime(2_500_000);
        assert_eq!(t.next_multiple_after(NS_PER_MS), SimTime(3_000_000));
        assert_eq!(SimTime(3_000_000).next_multiple_after(NS_PER_MS), SimTime(4_000_000));
        assert_eq!(SimTime(3_000_000).ceil_to_multiple(NS_PER_MS), SimTime(3_000_000));
        assert_eq!(t.ceil_to_multiple(NS_PER_MS), SimTime(3_000_000));
    }
}
