//! DCS: demand-based coscheduling. A message for a process its CPU is not
//! running (by the NIC's view) interrupts and moves the receiver to the
//! head of the top level; a receive busy-waits.

use super::Registered;
use crate::engine::arrival::Interrupt;
use crate::engine::runner::Os;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Registered = Registered::study::<(Os, BusyWait, Interrupt)>("DCS");
