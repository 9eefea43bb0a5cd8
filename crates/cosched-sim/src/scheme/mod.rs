//! The schemes the simulator runs. A scheme is a policy of the coscheduler
//! (a `Mode` and `PlanRules` of `cosched-policy`, the vocabulary the runtime
//! speaks too) and the engine parts that model each node: its scheduler, how
//! a receive waits, and what a message's arrival does.
//!
//! Each scheme is one file in this folder, and one line of `register!` below
//! makes it known: to the command line, the help text, studies and figures.
//! A scheme built from new parts defines them in its own file (see `ib.rs`).

use crate::config::SimConfig;
use crate::engine::arrival::MessageArrival;
use crate::engine::receive::ReceiveWait;
use crate::engine::runner::EngineRun;
use crate::engine::runner::NodeChoice;
use crate::engine::EngineOutcome;
use cosched_policy::{Mode, PlanRules};
use serde::{Deserialize, Deserializer};
use std::str::FromStr;

pub(crate) mod policy;
pub use policy::{NodeKind, Scheme};

/// Each line registers the scheme of the file of that name; the order is the
/// order of the help text, of `--schemes all` and of every figure's styles.
macro_rules! register {
    ($($file:ident,)*) => {
        $(mod $file;)*
        const ALL: &[Registered] = &[$($file::SCHEME,)*];
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
    gs_cosched_kernel,
}

/// A registered scheme: its policy and the runner of the engine built
/// from its parts.
#[derive(Copy, Clone)]
pub(crate) struct Registered {
    scheme: Scheme,
    run: fn(EngineRun<'_, '_>) -> EngineOutcome,
    copy_what_it_reads: fn(&SimConfig, &mut SimConfig),
}

impl Registered {
    /// A scheme outside the reference study whose engine is built from the
    /// parts `P`; its mode (gang slots or the node's own scheduler) is the
    /// node scheduler's.
    const fn new<P: SchemeParts>(name: &'static str, rules: PlanRules) -> Registered {
        Registered {
            scheme: Scheme::with_policy(name, P::MODE, rules, false, P::NODE),
            run: P::run,
            copy_what_it_reads: P::copy_what_it_reads,
        }
    }

    /// One of the reference study's schemes: the study's plain matrix and
    /// admission (`PlanRules::STUDY`).
    const fn study<P: SchemeParts>(name: &'static str) -> Registered {
        Registered {
            scheme: Scheme::with_policy(name, P::MODE, PlanRules::STUDY, true, P::NODE),
            run: P::run,
            copy_what_it_reads: P::copy_what_it_reads,
        }
    }

    /// A study scheme whose policy is written where the rest of the crate
    /// reads it (`Scheme::LOCAL`, the configuration's default): its parts
    /// must give the same mode.
    const fn of<P: SchemeParts>(scheme: Scheme) -> Registered {
        assert!(P::MODE as u8 == scheme.mode() as u8, "the parts' mode differs from the scheme's");
        assert!(P::NODE as u8 == scheme.node() as u8, "the parts' node differs from the scheme's");
        Registered { scheme, run: P::run, copy_what_it_reads: P::copy_what_it_reads }
    }
}

impl Scheme {
    pub const GANG: Scheme = gs::SCHEME.scheme;
    pub const COSCHED_GANG: Scheme = gs_cosched::SCHEME.scheme;
    pub const COSCHED_GANG_KERNEL: Scheme = gs_cosched_kernel::SCHEME.scheme;

    pub fn all_names() -> Vec<&'static str> {
        ALL.iter().map(|r| r.scheme.name()).collect()
    }

    /// The ten schemes of the reference study, in the table's order.
    pub fn study_names() -> Vec<&'static str> {
        ALL.iter().filter(|r| r.scheme.in_study()).map(|r| r.scheme.name()).collect()
    }
}

/// Build the engine from the scheme's parts and run it.
pub(crate) fn run_scheme(scheme: Scheme, run: EngineRun<'_, '_>) -> EngineOutcome {
    (registered(scheme).run)(run)
}

fn registered(scheme: Scheme) -> &'static Registered {
    ALL.iter().find(|r| r.scheme == scheme).expect("every scheme is registered")
}

/// `cfg` as its scheme's parts read it: every value of the machine model that only some schemes read
/// ([`SimConfig::scheme_specific_values_at_default`]) at the default unless a part of this scheme reads it. Two runs of a
/// scheme whose models read alike run alike (a property test holds it, exact and fast).
pub fn model_as_read(cfg: &SimConfig) -> SimConfig {
    let mut read = cfg.scheme_specific_values_at_default();
    (registered(cfg.scheme).copy_what_it_reads)(cfg, &mut read);
    read
}

/// A scheme's parts as its file names them: `(node, receive wait, arrival
/// reaction)`, where the node is the gang cell or the run's OS scheduler.
trait SchemeParts {
    const MODE: Mode;
    const NODE: NodeKind;
    fn run(run: EngineRun<'_, '_>) -> EngineOutcome;
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig);
}

impl<N: NodeChoice, W: ReceiveWait, A: MessageArrival> SchemeParts for (N, W, A) {
    const MODE: Mode = N::MODE;
    const NODE: NodeKind = N::NODE;
    fn run(run: EngineRun<'_, '_>) -> EngineOutcome {
        N::run::<W, A>(run)
    }
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        N::copy_what_it_reads(from, to);
        W::copy_what_it_reads(from, to);
        A::copy_what_it_reads(from, to);
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
            .map(|r| r.scheme)
            .find(|s| s.name().eq_ignore_ascii_case(text.trim()))
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
        let study: Vec<Scheme> = ALL.iter().map(|r| r.scheme).filter(|s| s.in_study()).collect();
        assert_eq!(study.len(), 10);
        assert!(study.iter().all(|s| s.plan_rules() == PlanRules::STUDY));
        assert_eq!(Scheme::study_names()[..2], ["Local", "GS"]);
    }

    /// `Scheme::LOCAL`, written in policy.rs for the configuration, is the
    /// one registered (the registration checks its mode at compile time).
    #[test]
    fn the_default_scheme_is_registered_local() {
        assert_eq!("Local".parse::<Scheme>().unwrap(), Scheme::LOCAL);
        assert_eq!(Scheme::LOCAL.mode(), Mode::Local);
    }
}
