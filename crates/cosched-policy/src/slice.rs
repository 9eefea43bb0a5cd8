//! How long a gang's time slice may be, in one place: the flags, the controller's settings, every schedule an
//! agent receives, the switcher and the bench all check against these bounds.

/// The shortest slice: a switch takes up to about half a millisecond at its tail on a loaded machine
/// (docs/performance.md), so a shorter slice would give a gang less than half of its own slot.
pub const MIN_SLICE_NS: u64 = 1_000_000;
/// The longest slice: a minute (longer stops being time-sharing, and `inf` would starve every gang but one).
pub const MAX_SLICE_NS: u64 = 60_000_000_000;
/// The slice when none is given: short enough for interactive response, long enough that switching costs a few
/// per cent at most.
pub const DEFAULT_SLICE_NS: u64 = 10_000_000;

/// Refuse a slice the switcher cannot honour.
pub fn check_slice_ns(slice_ns: u64) -> Result<(), String> {
    if (MIN_SLICE_NS..=MAX_SLICE_NS).contains(&slice_ns) {
        Ok(())
    } else {
        Err(format!(
            "a slice of {} ms is outside {} to {} ms",
            slice_ns as f64 / 1e6,
            MIN_SLICE_NS as f64 / 1e6,
            MAX_SLICE_NS as f64 / 1e6
        ))
    }
}

/// A slice given in milliseconds (fractions allowed), in ns and checked: `inf`, `NaN` and negative values are
/// refused, not saturated.
pub fn slice_ns_from_ms(slice_ms: f64) -> Result<u64, String> {
    let ns = slice_ms * 1e6;
    let slice_ns = if ns.is_finite() && ns > 0.0 && ns < u64::MAX as f64 { ns.round() as u64 } else { 0 };
    check_slice_ns(slice_ns)?;
    Ok(slice_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_outside_the_bounds_are_refused() {
        assert!(check_slice_ns(MIN_SLICE_NS).is_ok());
        assert!(check_slice_ns(MAX_SLICE_NS).is_ok());
        assert!(check_slice_ns(DEFAULT_SLICE_NS).is_ok());
        for refused in [0, 500_000, MIN_SLICE_NS - 1, MAX_SLICE_NS + 1, u64::MAX] {
            assert!(check_slice_ns(refused).unwrap_err().contains("outside 1 to 60000 ms"), "{refused}");
        }
        assert_eq!(slice_ns_from_ms(2.5), Ok(2_500_000));
        for refused in [f64::INFINITY, f64::NAN, -5.0, 0.5, 1e30] {
            assert!(slice_ns_from_ms(refused).is_err(), "{refused}");
        }
    }
}
