//! GS-cosched: the gang scheduling `cosched up` runs, from the same code
//! (`PlanRules::COSCHED`): whole nodes, no head-of-line blocking, one-node
//! jobs filling free cells, spanning jobs' thread shares, clock-aligned
//! slots. Not one of the study's schemes.

use super::Registered;
use crate::engine::arrival::NoReaction;
use crate::engine::node_scheduler::GangCell;
use crate::engine::receive::BusyWait;
use cosched_policy::PlanRules;

pub(super) const SCHEME: Registered = Registered::new::<(GangCell, BusyWait, NoReaction)>("GS-cosched", PlanRules::COSCHED);
