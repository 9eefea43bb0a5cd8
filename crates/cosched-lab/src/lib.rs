//! The experiment layer over the simulator: where a run's jobs come from
//! (`workload`), many runs in parallel (`batch`), schemes side by side on one
//! workload (`sim`), the reference study's experiments E1-E5 (`study`), a
//! study cut into shards run anywhere and merged (`shard`), and the CSV files
//! of their results (`csv`; `batsim`: a run's jobs as Batsim's `jobs.csv`).
//! Settings come in as plain structs; flags, printing, plots and output
//! folders belong to the binary.

/// The commit this build was made from ("unknown" outside a git checkout; see build.rs).
pub const BUILD_COMMIT: &str = env!("COSCHED_BUILD_COMMIT");

/// A commit as people read it: its first 12 hex digits.
pub fn short_commit(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

pub mod batch;
pub mod batsim;
pub mod csv;
pub mod fast_check;
pub mod jitter;
pub mod journal;
pub mod node_model;
pub mod series;
pub mod shard;
pub mod sim;
pub mod slowdown_prediction;
pub mod study;
pub mod workload;
