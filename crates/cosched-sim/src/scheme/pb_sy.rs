//! PB-SY: periodic boost with spin-yield receives.

use super::Scheme;
use crate::engine::arrival::PeriodicBoost;
use crate::engine::node_scheduler::Mlfq;
use crate::engine::receive::SpinYield;

pub(super) const SCHEME: Scheme = Scheme::study::<(Mlfq, SpinYield, PeriodicBoost)>("PB-SY");
