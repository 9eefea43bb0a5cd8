//! The cosched simulator: a cluster time-sharing parallel jobs, every CPU's
//! native scheduler modelled at its 1 ms tick, the NICs and network, and the
//! cluster-level placement of the ten schemes.
//!
//! Invariants: no I/O and no wall clock in this crate; time is integer
//! nanoseconds; randomness comes only from named streams of the run's seed;
//! the same inputs give the same bytes of output.

pub mod app;
pub mod config;
pub mod cost;
pub mod cpu_set;
pub mod endpoint;
pub mod engine;
pub mod exact_f64;
pub mod input;
pub mod machine;
pub mod metrics;
pub mod mlfq;
pub mod net;
pub mod partition;
pub mod reference_app;
pub mod run;
pub mod scheme;
pub mod trace;

pub use app::{JobType, Mix, Program, Prologue, Rounds, Shrink};
pub use config::{ConfigError, SimConfig};
pub use cpu_set::CpuSet;
pub use engine::node_scheduler::OsScheduler;
pub use engine::{Progress, SimJob};
pub use machine::MachineModel;
pub use metrics::{Breakdown, JobRecord, Summary};
pub use run::{run, RunResult};
pub use scheme::{NodeKind, Scheme};
