//! Scheduling policy as pure logic: the Ousterhout matrix of gang scheduling,
//! multiprogramming-level admission for local scheduling, the FCFS arrival
//! queue, and the choice of periodic boost.
//!
//! Invariant: no clock, no I/O, no processes. The simulator drives these types
//! in simulated time; the real runtime drives the very same types in real time.

pub mod boost;
pub mod cluster;
pub mod fcfs;
pub mod gang;
pub mod local;

pub use boost::{periodic_boost_choice, BoostCandidate, BoostChoice};
pub use fcfs::FcfsQueue;
pub use gang::{GangMatrix, GangPlacement};
pub use local::LocalPlacement;

use cosched_core::JobId;

/// Where a job's tasks go: one CPU per task and, for gang scheduling, the
/// matrix row (time slot) they share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub cpus: Vec<u32>,
    pub row: Option<u32>,
}

/// The admission side of a scheme: find room for a job, take it, give it back.
#[derive(Clone, Debug)]
pub enum Admission {
    /// Local and dynamic coscheduling: at most `mpl` processes per CPU.
    Local(LocalPlacement),
    /// Gang scheduling: an Ousterhout matrix with `mpl` rows.
    Gang(GangMatrix),
}

impl Admission {
    pub fn find(&self, tasks: u32) -> Option<Placement> {
        match self {
            Admission::Local(local) => local.find(tasks).map(|cpus| Placement { cpus, row: None }),
            Admission::Gang(matrix) => {
                matrix.find(tasks).map(|GangPlacement { row, columns }| Placement { cpus: columns, row: Some(row) })
            }
        }
    }

    pub fn take(&mut self, job: JobId, placement: &Placement) {
        match self {
            Admission::Local(local) => local.take(&placement.cpus),
            Admission::Gang(matrix) => {
                let row = placement.row.expect("gang placement without a row");
                matrix.take(job, row, &placement.cpus)
            }
        }
    }

    pub fn give_back(&mut self, job: JobId, placement: &Placement) {
        match self {
            Admission::Local(local) => local.give_back(&placement.cpus),
            Admission::Gang(matrix) => {
                let row = placement.row.expect("gang placement without a row");
                matrix.give_back(job, row, &placement.cpus)
            }
        }
    }
}
