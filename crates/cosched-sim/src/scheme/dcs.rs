//! DCS: demand-based coscheduling. A message for a process its CPU is not
//! running (by the NIC's view) interrupts and moves the receiver to the
//! head of the top level; a receive busy-waits.

use super::Scheme;
use crate::engine::arrival::Interrupt;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, BusyWait, Interrupt)>("DCS");
