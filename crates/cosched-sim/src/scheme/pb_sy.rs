//! PB-SY: periodic boost with spin-yield receives.

use super::Registered;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::runner::Os;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Registered = Registered::study::<(Os, SpinYield, PeriodicBoost)>("PB-SY");
