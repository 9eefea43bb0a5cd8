//! The simulation face's commands — `simulate`, `study`, `workload` — from their flags to what they print and
//! write: tables, figures (SVG and PNG), progress, and the atomic output folders. The `cosched` command and the
//! Python package (`crates/cosched-python`) both call these, so they take the same settings, give the same errors
//! and write byte-identical files; neither path links the runtime, SQLite or MUNGE through here.

pub mod interrupt;
pub mod jitter;
pub mod model_flags;
pub mod output;
pub mod plot;
pub mod progress;
pub mod run_info;
pub mod sim_cmd;
pub mod study;
pub mod workload_cmd;
