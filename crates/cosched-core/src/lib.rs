//! Shared vocabulary of cosched: simulated time, identifiers, seeded random
//! streams, the discrete-event queue, and the statistics that the simulator,
//! the lab and the bench all report with.
//!
//! Invariant: nothing in this crate performs I/O, reads a clock or keeps global
//! state. Everything is a pure function of its inputs, so simulations built on
//! it are reproducible bit for bit.

pub mod events;
pub mod ids;
pub mod rng;
pub mod special;
pub mod stats;
pub mod time;
pub mod timers;

pub use events::{EventQueue, RadixHeap};
pub use ids::{CpuId, JobId, NodeId};
pub use rng::{Rng, StreamSeed};
pub use time::{Period, SimTime};
pub use timers::TimerTree;
