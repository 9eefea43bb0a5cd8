//! PB-SY: periodic boost with spin-yield receives.

use super::Scheme;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, SpinYield, PeriodicBoost)>("PB-SY");
