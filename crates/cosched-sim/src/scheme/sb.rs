//! SB: spin-block receives under the node's own scheduler. A receive spins
//! for the spin time, then blocks; the interrupt of the awaited message
//! wakes it.

use super::Scheme;
use crate::engine::arrival::NoReaction;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::SpinBlock;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, SpinBlock, NoReaction)>("SB");
