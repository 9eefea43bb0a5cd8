//! Local: no coscheduling. Each node's scheduler runs its processes on its
//! own; a receive busy-waits, and a message's arrival changes nothing.

use super::Scheme;
use crate::engine::arrival::NoReaction;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, BusyWait, NoReaction)>("Local");
