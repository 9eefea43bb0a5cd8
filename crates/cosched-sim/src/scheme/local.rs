//! Local: no coscheduling. Each node's scheduler runs its processes on its
//! own; a receive busy-waits, and a message's arrival changes nothing.

use super::{Registered, Scheme};
use crate::engine::arrival::NoReaction;
use crate::engine::runner::Os;
use crate::engine::receive::BusyWait;

pub(super) const SCHEME: Registered = Registered::of::<(Os, BusyWait, NoReaction)>(Scheme::LOCAL);
