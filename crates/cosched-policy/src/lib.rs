//! Scheduling policy as pure logic: the one coscheduler (`Coscheduler`: the
//! plan of `cluster`, with the study's plain matrix as a preset), the
//! Ousterhout matrix, multiprogramming-level admission, and the choice of periodic
//! boost.
//!
//! Invariant: no clock, no I/O, no processes. The simulator drives these types
//! in simulated time; the real runtime drives the very same types in real time.

pub mod boost;
pub mod cluster;
pub mod coscheduler;
pub mod gang;
pub mod local;
pub mod slice;

pub use boost::{periodic_boost_choice, BoostCandidate, BoostChoice};
pub use cluster::{JobClass, Mode, PlanRules};
pub use coscheduler::Coscheduler;
pub use gang::GangMatrix;
pub use local::LocalPlacement;
