//! The schemes the simulator runs. A scheme is a policy of the coscheduler
//! (a `Mode` and `PlanRules` of `cosched-policy`, the vocabulary the runtime
//! speaks too) and the engine parts that model each node: its scheduler, how
//! a receive waits, and what a message's arrival does.
//!
//! Each scheme is one file in this folder, and one line of `register!` below
//! makes it known: to the command line, the help text, studies and figures.
//! A scheme built from new parts defines them in its own file (see `ib.rs`).

use crate::engine::arrival::MessageArrival;
use crate::engine::node_scheduler::NodeChoice;
use crate::engine::receive::ReceiveWait;
use crate::engine::runner::EngineRun;
use crate::engine::EngineOutcome;
use cosched_policy::{Mode, PlanRules};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Each line registers the scheme of the file of that name; the order is the
/// order of the help text, of `--schemes all` and of every figure's styles.
macro_rules! register {
    ($($file:ident,)*) => {
        $(mod $file;)*
        const ALL: &[Scheme] = &[$($file::SCHEME,)*];
    };
}

register! {
    local,
    gs,
    sb,
    sy,
    dcs,
    pb,
    dcs_sb,
    dcs_sy,
    pb_sb,
    pb_sy,
    gs_cosched,
    ib,
}

/// A named scheme: its policy and a runner of the engine built from its parts.
#[derive(Copy, Clone)]
pub struct Scheme {
    name: &'static str,
    mode: Mode,
    rules: PlanRules,
    in_study: bool,
    run: fn(EngineRun<'_, '_>) -> EngineOutcome,
}

impl Scheme {
    pub const LOCAL: Scheme = local::SCHEME;
    pub const GANG: Scheme = gs::SCHEME;
    pub const COSCHED_GANG: Scheme = gs_cosched::SCHEME;

    /// A scheme outside the reference study whose engine is built from the
    /// parts `P`; its mode (gang slots or the node's own scheduler) is the
    /// node scheduler's.
    const fn new<P: SchemeParts>(name: &'static str, rules: PlanRules) -> Scheme {
        Scheme { name, mode: P::MODE, rules, in_study: false, run: P::run }
    }

    /// One of the reference study's schemes: the study's plain matrix and
    /// admission (`PlanRules::STUDY`).
    const fn study<P: SchemeParts>(name: &'static str) -> Scheme {
        Scheme { in_study: true, ..Scheme::new::<P>(name, PlanRules::STUDY) }
    }

    pub fn name(self) -> &'static str {
        self.name
    }

    pub fn all_names() -> Vec<&'static str> {
        ALL.iter().map(|s| s.name).collect()
    }

    /// The ten schemes of the reference study, in the table's order.
    pub fn study_names() -> Vec<&'static str> {
        ALL.iter().filter(|s| s.in_study).map(|s| s.name).collect()
    }

    /// One of the reference study's ten schemes (not cosched's own or an addition).
    pub fn in_study(self) -> bool {
        self.in_study
    }

    pub fn is_gang(self) -> bool {
        self.mode == Mode::Gang
    }

    /// How the scheme shares a CPU among jobs: gang slots, or the node's scheduler.
    pub fn mode(self) -> Mode {
        self.mode
    }

    /// The coscheduler's rules for this scheme.
    pub fn plan_rules(self) -> PlanRules {
        self.rules
    }

    /// Build the engine from the scheme's parts and run it.
    pub(crate) fn run(self, run: EngineRun<'_, '_>) -> EngineOutcome {
        (self.run)(run)
    }
}

/// A scheme's parts as its file names them: `(node, receive wait, arrival
/// reaction)`, where the node is the gang cell or the run's OS scheduler.
trait SchemeParts {
    const MODE: Mode;
    fn run(run: EngineRun<'_, '_>) -> EngineOutcome;
}

impl<N: NodeChoice, W: ReceiveWait, A: MessageArrival> SchemeParts for (N, W, A) {
    const MODE: Mode = N::MODE;
    fn run(run: EngineRun<'_, '_>) -> EngineOutcome {
        N::run::<W, A>(run)
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

/// Read back by name, as the command line reads it.
impl<'de> Deserialize<'de> for Scheme {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Scheme, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for Scheme {
    type Err = String;
    fn from_str(text: &str) -> Result<Scheme, String> {
        ALL.iter()
            .find(|s| s.name.eq_ignore_ascii_case(text.trim()))
            .copied()
            .ok_or_else(|| format!("unknown scheme '{text}'; known schemes: {}", Scheme::all_names().join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_case_insensitively() {
        for name in Scheme::all_names() {
            let s: Scheme = name.to_lowercase().parse().unwrap();
            assert_eq!(s.name(), name);
        }
        assert!("gang".parse::<Scheme>().unwrap_err().contains("known schemes"));
    }

    #[test]
    fn names_are_unique() {
        let mut names = Scheme::all_names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn the_study_has_ten_schemes_with_the_studys_rules() {
        let study: Vec<&Scheme> = ALL.iter().filter(|s| s.in_study).collect();
        assert_eq!(study.len(), 10);
        assert!(study.iter().all(|s| s.rules == PlanRules::STUDY));
        assert_eq!(Scheme::study_names()[..2], ["Local", "GS"]);
    }
}
