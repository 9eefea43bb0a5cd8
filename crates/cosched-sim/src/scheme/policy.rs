//! What a scheme is to the rest of the crate: its name and its policy (a
//! `Mode` and `PlanRules` of `cosched-policy`). Plain data: the
//! configuration holds one, and this file imports nothing of the crate. The
//! table of schemes, with each one's engine parts, is `scheme/mod.rs`.

use cosched_policy::{Mode, PlanRules};
use serde::{Serialize, Serializer};
use std::fmt;

/// A named scheme and its policy.
#[derive(Copy, Clone)]
pub struct Scheme {
    name: &'static str,
    mode: Mode,
    rules: PlanRules,
    in_study: bool,
    node: NodeKind,
}

/// What shares a node's CPUs under a scheme.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// The gang cell: a CPU runs the one process of the running row's cell on it.
    GangCell,
    /// The node's OS scheduler the run names (`--node-scheduler`), among every process on the CPU.
    OsScheduler,
    /// Gang slots over the kernel's EEVDF: the processes of the running row's jobs are thawed and EEVDF shares
    /// the CPUs among them; the others are frozen, as the runtime's freezer leaves them.
    GangSlotsOverEevdf,
}

impl Scheme {
    /// Local, the configuration's default: its policy is written here, and
    /// `scheme/local.rs` registers it with its parts.
    pub const LOCAL: Scheme = Scheme::with_policy("Local", Mode::Local, PlanRules::STUDY, true, NodeKind::OsScheduler);

    pub(crate) const fn with_policy(
        name: &'static str,
        mode: Mode,
        rules: PlanRules,
        in_study: bool,
        node: NodeKind,
    ) -> Scheme {
        Scheme { name, mode, rules, in_study, node }
    }

    pub fn name(self) -> &'static str {
        self.name
    }

    /// One of the reference study's ten schemes (not cosched's own or an addition).
    pub fn in_study(self) -> bool {
        self.in_study
    }

    pub fn is_gang(self) -> bool {
        self.mode == Mode::Gang
    }

    /// What shares a node's CPUs.
    pub const fn node(self) -> NodeKind {
        self.node
    }

    /// Whether a job may run more tasks than it holds CPUs: a node scheduler shares each CPU among them (a gang
    /// cell runs one process).
    pub fn takes_more_tasks_than_cpus(self) -> bool {
        self.node != NodeKind::GangCell
    }

    /// How the scheme shares a CPU among jobs: gang slots, or the node's scheduler.
    pub const fn mode(self) -> Mode {
        self.mode
    }

    /// The coscheduler's rules for this scheme.
    pub fn plan_rules(self) -> PlanRules {
        self.rules
    }

    /// Whether runs are decided by cosched's controller core, the daemon's own decisions, rather than by the
    /// model of the scheme's plan: the schemes whose rules are the runtime's.
    pub fn runs_the_controller(self) -> bool {
        self.rules == PlanRules::COSCHED
    }
}

/// Names are unique (a test checks it), so a scheme is its name.
impl PartialEq for Scheme {
    fn eq(&self, other: &Scheme) -> bool {
        self.name == other.name
    }
}
impl Eq for Scheme {}

impl fmt::Debug for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// A configuration names its scheme as a user does.
impl Serialize for Scheme {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name)
    }
}
