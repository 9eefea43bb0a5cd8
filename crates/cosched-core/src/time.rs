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

/// A fixed period of simulated time (a scheduler tick, a raise period) that
/// instants are rounded to, many times per simulated millisecond.
///
/// A 64-bit division costs tens of cycles; dividing by a period fixed at
/// construction is instead a multiplication by its reciprocal, rounded up to
/// 128 bits, which gives the exact quotient for every 64-bit dividend
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019,
/// theorem 1: `c = ceil(2^128 / d)` suffices because `2^128 >= d * 2^64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    ns: u64,
    /// `ceil(2^128 / ns)`, high and low 64-bit halves (unused for `ns == 1`).
    reciprocal_hi: u64,
    reciprocal_lo: u64,
}

impl Period {
    pub fn new(ns: u64) -> Period {
        assert!(ns > 0, "a period is at least 1 ns");
        // ceil(2^128 / d) = floor((2^128 - 1) / d) + 1, which fits for d >= 2.
        let reciprocal = if ns == 1 { 0 } else { u128::MAX / ns as u128 + 1 };
        Period { ns, reciprocal_hi: (reciprocal >> 64) as u64, reciprocal_lo: reciprocal as u64 }
    }

    pub fn ns(self) -> u64 {
        self.ns
    }

    /// `t / ns`, rounded down: the number of whole periods before `t`.
    pub fn periods_before(self, t: SimTime) -> u64 {
        if self.ns == 1 {
            return t.0;
        }
        // floor(c * n / 2^128) for c = hi * 2^64 + lo: the low half's product
        // contributes only its carry into the high half (hi < 2^63, so no overflow).
        let n = t.0 as u128;
        let low = (self.reciprocal_lo as u128 * n) >> 64;
        let high = self.reciprocal_hi as u128 * n;
        ((high + low) >> 64) as u64
    }

    /// The last boundary at or before `t`.
    pub fn floor(self, t: SimTime) -> SimTime {
        SimTime(self.periods_before(t) * self.ns)
    }

    /// The first boundary at or after `t` (as [`SimTime::ceil_to_multiple`]).
    pub fn ceil(self, t: SimTime) -> SimTime {
        let floor = self.floor(t);
        if floor == t {
            t
        } else {
            floor + self.ns
        }
    }

    /// Whether `t` is a boundary (a multiple of the period).
    pub fn is_boundary(self, t: SimTime) -> bool {
        self.floor(t) == t
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

    #[test]
    fn period_division_at_the_edges() {
        for ns in [1, 2, 3, 7, NS_PER_MS, NS_PER_S, 1 << 32, (1 << 63) - 1, 1 << 63, u64::MAX - 1, u64::MAX] {
            let period = Period::new(ns);
            for n in [0, 1, ns - 1, ns, ns.saturating_add(1), u64::MAX / 2, u64::MAX - 1, u64::MAX] {
                assert_eq!(period.periods_before(SimTime(n)), n / ns, "{n} / {ns}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn period_rounds_as_division_does(ns in 1u64.., n: u64, small_ns in 1u64..5_000_000, near in 0u64..1u64 << 40) {
            for (ns, n) in [(ns, n), (small_ns, n), (small_ns, near)] {
                let period = Period::new(ns);
                proptest::prop_assert_eq!(period.periods_before(SimTime(n)), n / ns);
                proptest::prop_assert_eq!(period.is_boundary(SimTime(n)), n % ns == 0);
                if n <= u64::MAX - ns {
                    proptest::prop_assert_eq!(period.ceil(SimTime(n)), SimTime(n).ceil_to_multiple(ns));
                }
            }
        }
    }
}
