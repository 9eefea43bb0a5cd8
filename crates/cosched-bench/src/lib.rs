//! Measuring real jobs on this machine: how `j` simultaneous copies of a
//! parallel job slow down under each policy, the microbenchmarks that explain
//! why, and the analytic model that predicts it (spec: `bench.md`).
// Measuring elapsed time on the wall clock is what this crate is for.
#![allow(clippy::disallowed_methods)]

pub mod cluster;
pub mod copies;
pub mod ctxswitch;
pub mod model;
pub mod node;
pub mod os;
pub mod overlap;
pub mod pingpong;
pub mod pipeline;
pub mod policy;
pub mod runtime;
pub mod slowdown;
pub mod slurm;
pub mod stats;
pub mod switch;
pub mod switch_load;
pub mod switch_trace;
