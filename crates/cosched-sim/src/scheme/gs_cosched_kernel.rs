//! GS-cosched-kernel: cosched's gang scheduling (`PlanRules::COSCHED`, as GS-cosched) with each node's CPUs
//! shared by the kernel's EEVDF among the processes of the running row's jobs, the other jobs frozen, as the
//! runtime's freezer leaves them. A job may run more tasks than CPUs; a thaw wakes its processes where the
//! kernel's wake placement puts them. Needs `--node-scheduler eevdf`. Not one of the study's schemes.

use super::Registered;
use crate::engine::arrival::NoReaction;
use crate::engine::receive::BusyWait;
use crate::engine::runner::GangSlotsOverEevdf;
use cosched_policy::PlanRules;

pub(super) const SCHEME: Registered =
    Registered::new::<(GangSlotsOverEevdf, BusyWait, NoReaction)>("GS-cosched-kernel", PlanRules::COSCHED);
