//! PB: periodic boost. Every tick a walk of the endpoints boosts a receiver
//! whose message is there (or else a process not in a receive); a receive
//! busy-waits.

use super::Registered;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::runner::Os;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Registered = Registered::study::<(Os, BusyWait, PeriodicBoost)>("PB");
