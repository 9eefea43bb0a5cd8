//! DCS-SY: demand-based coscheduling with spin-yield receives.

use super::Registered;
use crate::engine::arrival::Interrupt;
use crate::engine::runner::Os;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Registered = Registered::study::<(Os, SpinYield, Interrupt)>("DCS-SY");
