//! What the bench measures, as data: the policies a slowdown experiment compares, its reports and their
//! summaries, a node scenario's specification and its raw runs, and the analytic model the measurements are
//! compared with (spec: `bench.md`). Nothing here starts a process or reads a clock: `cosched-bench` measures and
//! writes these; the lab and the predictor read them without linking the runtime.

pub mod model;
pub mod node;
pub mod policy;
pub mod slowdown;
