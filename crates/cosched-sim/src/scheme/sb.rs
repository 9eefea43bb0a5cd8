//! SB: spin-block receives under the node's own scheduler. A receive spins
//! for the spin time, then blocks; the interrupt of the awaited message
//! wakes it.

use super::Registered;
use crate::engine::arrival::NoReaction;
use crate::engine::runner::Os;
use crate::engine::receive::SpinBlock;

pub(super) const SCHEME: Registered = Registered::study::<(Os, SpinBlock, NoReaction)>("SB");
