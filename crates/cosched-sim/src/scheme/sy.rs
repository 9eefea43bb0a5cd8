//! SY: spin-yield receives under the node's own scheduler. A receive spins
//! for the spin time, then yields once (dropping its own priority and
//! boosting another process) and spins on.

use super::Registered;
use crate::engine::arrival::NoReaction;
use crate::engine::runner::Os;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Registered = Registered::study::<(Os, SpinYield, NoReaction)>("SY");
