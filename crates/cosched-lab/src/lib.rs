//! The experiment layer over the simulator: where a run's jobs come from
//! (`workload`), many runs in parallel (`batch`), schemes side by side on one
//! workload (`sim`), the reference study's experiments E1-E5 (`study`), a
//! study cut into shards run anywhere and merged (`shard`), and the CSV files
//! of their results (`csv`; `batsim`: a run's jobs as Batsim's `jobs.csv`).
//! Settings come in as plain structs; flags, printing, plots and output
//! folders belong to the binary.

pub mod batch;
pub mod batsim;
pub mod csv;
pub mod fast_check;
pub mod journal;
pub mod node_model;
pub mod shard;
pub mod sim;
pub mod slowdown_prediction;
pub mod study;
pub mod workload;
