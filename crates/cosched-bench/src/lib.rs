//! Measuring real jobs on this machine: how `j` simultaneous copies of a
//! parallel job slow down under each policy, the microbenchmarks that explain
//! why, and the analytic model that predicts it (spec: `bench.md`).
// Measuring elapsed time on the wall clock is what this crate is for.
#![allow(clippy::disallowed_methods)]

pub mod background;
pub mod cache_refill;
pub mod cluster;
pub mod copies;
pub mod ctxswitch;
pub mod node;
pub mod os;
pub mod overlap;
pub mod pingpong;
pub mod pipeline;
pub mod runtime;
pub mod slowdown;
pub mod slurm;
pub mod switch;
pub mod switch_load;
pub mod switch_trace;

/// Policy names and the analytic model are data, shared with the lab (`cosched-bench-report`).
pub use cosched_bench_report::{model, policy};
/// The statistics live in `cosched-core`, shared with the simulator and the lab.
pub use cosched_core::stats;
