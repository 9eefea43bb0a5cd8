//! DCS-SB: demand-based coscheduling with spin-block receives.

use super::Registered;
use crate::engine::arrival::Interrupt;
use crate::engine::runner::Os;
use crate::engine::receive::SpinBlock;

pub(super) const SCHEME: Registered = Registered::study::<(Os, SpinBlock, Interrupt)>("DCS-SB");
