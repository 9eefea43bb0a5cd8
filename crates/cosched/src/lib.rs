//! The `cosched` command's library half: the flags of every command parsed
//! into the library crates' settings, and what each command prints and
//! writes. The binary (`main.rs`) only dispatches; the Python package
//! (`crates/cosched-python`) parses the same flags, so both take the same
//! settings and give the same errors.

pub mod bench;
pub mod bench_controller;
pub mod bench_fast;
pub mod bench_micro;
pub mod bench_node;
pub mod bench_partition;
pub mod bench_scaling;
pub mod bench_slowdown;
pub mod bench_switch;
pub use cosched_runtime::calendar;
pub mod calibrate_cmd;
pub mod config_file;
pub mod history_cmd;
pub mod manual;
pub mod model_cmd;
pub mod pipeline_cmd;
pub mod predict_cmd;
pub mod runtime_cmd;
pub mod simtest_cmd;
pub mod slurm_cmd;
pub mod status_view;
pub use cosched_runtime::trusted_source;

/// The simulation commands live in `cosched-sim-commands`, shared with the Python package.
pub use cosched_sim_commands::{interrupt, jitter, model_flags, output, plot, progress, sim_cmd, study, workload_cmd};
