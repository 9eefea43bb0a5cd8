//! `cosched bench node`: the scenarios of `cosched_bench_report::node`, run for real on this machine's kernel.
//! [`run::run_scenario`] runs one description and returns raw values per repeat; the report crate's `summary`
//! turns them into medians and ranges.

pub mod cpu_group;
pub mod process;
pub mod run;

pub use cosched_bench_report::node::*;
