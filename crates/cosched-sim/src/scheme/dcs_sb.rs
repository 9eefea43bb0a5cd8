//! DCS-SB: demand-based coscheduling with spin-block receives.

use super::Scheme;
use crate::engine::arrival::Interrupt;
use crate::engine::node_scheduler::Os;
use crate::engine::receive::SpinBlock;

pub(super) const SCHEME: Scheme = Scheme::study::<(Os, SpinBlock, Interrupt)>("DCS-SB");
