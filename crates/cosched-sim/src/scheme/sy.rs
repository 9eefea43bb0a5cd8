//! SY: spin-yield receives under the node's own scheduler. A receive spins
//! for the spin time, then yields once (dropping its own priority and
//! boosting another process) and spins on.

use super::Scheme;
use crate::engine::arrival::NoReaction;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, SpinYield, NoReaction)>("SY");
