//! GS: the study's gang scheduling. The plain Ousterhout matrix: jobs in
//! strict FCFS order, placed first-fit on any CPUs, and the rows run in turn
//! (the next occupied row), one gang quantum each. A receive busy-waits.

use super::Registered;
use crate::engine::arrival::NoReaction;
use crate::engine::node_scheduler::GangCell;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Registered = Registered::study::<(GangCell, BusyWait, NoReaction)>("GS");
