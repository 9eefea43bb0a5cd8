//! PB-SB: periodic boost with spin-block receives.

use super::Registered;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::runner::Os;
use crate::engine::receive::SpinBlock;

pub(super) const SCHEME: Registered = Registered::study::<(Os, SpinBlock, PeriodicBoost)>("PB-SB");
