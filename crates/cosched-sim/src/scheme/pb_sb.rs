//! PB-SB: periodic boost with spin-block receives.

use super::Scheme;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::SpinBlock;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, SpinBlock, PeriodicBoost)>("PB-SB");
