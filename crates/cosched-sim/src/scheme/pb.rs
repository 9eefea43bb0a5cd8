//! PB: periodic boost. Every tick a walk of the endpoints boosts a receiver
//! whose message is there (or else a process not in a receive); a receive
//! busy-waits.

use super::Scheme;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, BusyWait, PeriodicBoost)>("PB");
