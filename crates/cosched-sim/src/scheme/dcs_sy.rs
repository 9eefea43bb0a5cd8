//! DCS-SY: demand-based coscheduling with spin-yield receives.

use super::Scheme;
use crate::engine::arrival::Interrupt;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, SpinYield, Interrupt)>("DCS-SY");
