//! The policies a slowdown experiment compares, as the user names them: the
//! two modes of cosched (`cosched_policy::Mode`) with a slice, the baselines
//! outside it (Linux alone, Slurm's gang scheduling), and Slurm jobs gang
//! scheduled by cosched (its SPANK plugin).

use cosched_policy::Mode;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Default gang time slice when `gang` is given without one: the runtime's own.
pub const DEFAULT_GANG_SLICE_MS: f64 = cosched_policy::slice::DEFAULT_SLICE_NS as f64 / 1e6;

/// How the `j` copies of a job share the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Policy {
    /// Started directly; Linux schedules them (no cosched involved).
    None,
    /// Registered with cosched as local-class jobs: Linux schedules them.
    Local,
    /// Registered with cosched as gang jobs: one job at a time, slices of `slice_ms`.
    Gang { slice_ms: f64 },
    /// Each copy a Slurm batch job, gang-scheduled by Slurm (`scripts/slurm`).
    Slurm,
    /// Each copy a Slurm batch job on CPUs Slurm shares without slicing, gang scheduled by a private cosched
    /// with slices of `slice_ms` through its SPANK plugin.
    SlurmCosched { slice_ms: f64 },
}

impl Policy {
    /// How cosched shares the CPUs among the copies (`None`: cosched is not involved).
    pub fn cosched_mode(&self) -> Option<Mode> {
        match self {
            Policy::Local => Some(Mode::Local),
            Policy::Gang { .. } => Some(Mode::Gang),
            Policy::None | Policy::Slurm | Policy::SlurmCosched { .. } => None,
        }
    }

    /// Whether the copies go through a private cosched runtime (registered by the bench or by Slurm's plugin).
    pub fn uses_runtime(&self) -> bool {
        self.cosched_mode().is_some() || matches!(self, Policy::SlurmCosched { .. })
    }

    /// Whether each copy is a Slurm job.
    pub fn uses_slurm(&self) -> bool {
        matches!(self, Policy::Slurm | Policy::SlurmCosched { .. })
    }

    /// The time slice of cosched's gang scheduling under this policy.
    pub fn gang_slice_ms(&self) -> Option<f64> {
        match self {
            Policy::Gang { slice_ms } | Policy::SlurmCosched { slice_ms } => Some(*slice_ms),
            _ => None,
        }
    }
}

/// "10ms", or "1500us" for a fraction of a millisecond.
fn slice_text(slice_ms: f64) -> String {
    if slice_ms.fract() == 0.0 {
        format!("{slice_ms}ms")
    } else {
        format!("{}us", (slice_ms * 1000.0).round())
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::None => write!(f, "none"),
            Policy::Local => write!(f, "local"),
            Policy::Gang { slice_ms } => write!(f, "gang:{}", slice_text(*slice_ms)),
            Policy::Slurm => write!(f, "slurm"),
            Policy::SlurmCosched { slice_ms } => write!(f, "slurm+cosched:{}", slice_text(*slice_ms)),
        }
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(text: &str) -> Result<Policy, String> {
        let lower = text.trim().to_ascii_lowercase();
        let (name, slice) = match lower.split_once(':') {
            Some((name, slice)) => (name, Some(slice)),
            None => (lower.as_str(), None),
        };
        let no_slice = |p: Policy| match slice {
            None => Ok(p),
            Some(_) => Err(format!("policy {text:?}: only gang and slurm+cosched take a slice (gang:10ms)")),
        };
        let slice_ms = || {
            let slice_ms = slice.map_or(Ok(DEFAULT_GANG_SLICE_MS), parse_duration_ms)?;
            cosched_policy::slice::slice_ns_from_ms(slice_ms).map_err(|e| format!("policy {text:?}: {e}"))?;
            Ok::<f64, String>(slice_ms)
        };
        match name {
            "none" => no_slice(Policy::None),
            "local" => no_slice(Policy::Local),
            "slurm" => no_slice(Policy::Slurm),
            "gang" => Ok(Policy::Gang { slice_ms: slice_ms()? }),
            "slurm+cosched" => Ok(Policy::SlurmCosched { slice_ms: slice_ms()? }),
            _ => Err(format!(
                "unknown policy {text:?} (none, local, gang[:SLICE] such as gang:100ms, slurm, or \
                 slurm+cosched[:SLICE])"
            )),
        }
    }
}

/// "10ms", "0.5s", "250us" or a bare number of milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("bad duration {text:?} (e.g. 10ms, 0.1s)"))?;
    let factor = match unit {
        "" | "ms" => 1.0,
        "s" => 1000.0,
        "us" | "µs" => 0.001,
        _ => return Err(format!("bad duration unit in {text:?} (us, ms or s)")),
    };
    Ok(value * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for text in ["none", "local", "gang:10ms", "gang:100ms", "slurm", "gang:1500us", "slurm+cosched:100ms"] {
            assert_eq!(text.parse::<Policy>().unwrap().to_string(), text);
        }
        assert_eq!("gang".parse::<Policy>().unwrap(), Policy::Gang { slice_ms: 10.0 });
        assert_eq!("GANG:0.1s".parse::<Policy>().unwrap(), Policy::Gang { slice_ms: 100.0 });
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        assert!("fifo".parse::<Policy>().unwrap_err().contains("unknown policy \"fifo\""));
        assert!("local:10ms".parse::<Policy>().unwrap_err().contains("only gang and slurm+cosched take a slice"));
        assert_eq!("slurm+cosched".parse::<Policy>().unwrap(), Policy::SlurmCosched { slice_ms: 10.0 });
        assert!("gang:10h".parse::<Policy>().unwrap_err().contains("unit"));
        for refused in ["gang:0.01ms", "gang:500us", "gang:61s"] {
            assert!(refused.parse::<Policy>().unwrap_err().contains("outside 1 to 60000 ms"), "{refused}");
        }
    }
}
