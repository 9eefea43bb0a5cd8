//! Scheduling policies for the columnsort pipeline's stages, named after the
//! study they come from (Roysden's "nice up/down I/O", "dynamic up, down").

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::{Adjust, Pipeline, Priority, SchedPolicy};

/// Which stages a policy touches.
const IO_STAGES: [&str; 2] = ["read", "write"];
const COMPUTE_STAGES: [&str; 2] = ["sort", "permute"];

#[derive(Debug, Clone, PartialEq)]
pub enum StagePolicy {
    /// Every thread as Linux starts it.
    Default,
    /// Fixed: the read and write threads at this nice (positive lowers them).
    IoNice(i32),
    /// Fixed: the sort and permute threads at this nice.
    ComputeNice(i32),
    /// Fixed: the read and write threads request this EEVDF slice.
    IoSlice(Duration),
    /// Fixed: the sort and permute threads run SCHED_BATCH.
    ComputeBatch,
    /// Adjusting: every stage lowers itself once when its output backs up.
    AdjustOnce,
    /// Adjusting: lower on a backup, raise again when the queue is empty.
    AdjustReversible,
}

impl StagePolicy {
    /// Sets the priority and adjusting of the thread group just added, `stage`.
    pub fn apply<'a, T: Send + 'a>(&self, pipeline: Pipeline<'a, T>, stage: &str) -> Pipeline<'a, T> {
        let io = IO_STAGES.contains(&stage);
        let compute = COMPUTE_STAGES.contains(&stage);
        match self {
            StagePolicy::Default => pipeline,
            StagePolicy::IoNice(n) if io => pipeline.priority(Priority::default().nice(*n)),
            StagePolicy::ComputeNice(n) if compute => pipeline.priority(Priority::default().nice(*n)),
            StagePolicy::IoSlice(d) if io => pipeline.priority(Priority::default().slice(*d)),
            StagePolicy::ComputeBatch if compute => pipeline.priority(Priority::default().policy(SchedPolicy::Batch)),
            StagePolicy::AdjustOnce => pipeline.adjust(Adjust::LowerOnce),
            StagePolicy::AdjustReversible => pipeline.adjust(Adjust::Reversible),
            _ => pipeline,
        }
    }
}

impl fmt::Display for StagePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StagePolicy::Default => f.write_str("default"),
            StagePolicy::IoNice(n) => write!(f, "io-nice:{n:+}"),
            StagePolicy::ComputeNice(n) => write!(f, "compute-nice:{n:+}"),
            StagePolicy::IoSlice(d) => write!(f, "io-slice:{}ms", d.as_secs_f64() * 1e3),
            StagePolicy::ComputeBatch => f.write_str("compute-batch"),
            StagePolicy::AdjustOnce => f.write_str("adjust-once"),
            StagePolicy::AdjustReversible => f.write_str("adjust-reversible"),
        }
    }
}

pub const POLICY_HELP: &str =
    "default | io-nice:N | compute-nice:N | io-slice:MSms | compute-batch | adjust-once | adjust-reversible";

impl FromStr for StagePolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("bad policy {text:?}: {why} (expected {POLICY_HELP})");
        let nice = |n: &str| -> Result<i32, String> {
            n.parse()
                .ok()
                .filter(|n| (-20..=19).contains(n))
                .ok_or_else(|| bad("nice must be a whole number from -20 to 19"))
        };
        match text.split_once(':') {
            None => match text {
                "default" => Ok(StagePolicy::Default),
                "compute-batch" => Ok(StagePolicy::ComputeBatch),
                "adjust-once" => Ok(StagePolicy::AdjustOnce),
                "adjust-reversible" => Ok(StagePolicy::AdjustReversible),
                _ => Err(bad("unknown policy")),
            },
            Some(("io-nice", n)) => Ok(StagePolicy::IoNice(nice(n)?)),
            Some(("compute-nice", n)) => Ok(StagePolicy::ComputeNice(nice(n)?)),
            Some(("io-slice", ms)) => {
                let ms: f64 = ms
                    .trim_end_matches("ms")
                    .parse()
                    .map_err(|_| bad("the slice is in milliseconds, e.g. io-slice:0.5ms"))?;
                if !(0.1..=100.0).contains(&ms) {
                    return Err(bad("Linux takes slices from 0.1 to 100 ms"));
                }
                Ok(StagePolicy::IoSlice(Duration::from_secs_f64(ms / 1e3)))
            }
            Some(_) => Err(bad("unknown policy")),
        }
    }
}
