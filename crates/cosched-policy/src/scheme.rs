//! The time-sharing schemes, named once for the simulator and the runtime: the
//! study's ten (gang scheduling, and the 3 x 3 table of (how a receive waits)
//! x (what happens when a message arrives)), and cosched's own gang
//! scheduling, the policy `cosched up` runs.

use crate::cluster::{Mode, PlanRules};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// How a process waits inside a receive.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum WaitMode {
    BusyWait,
    SpinBlock,
    SpinYield,
}

/// What the node does when a message arrives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum ArrivalReaction {
    Nothing,
    InterruptAndReschedule,
    PeriodicBoost,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Scheme {
    /// The study's gang scheduling: the plain Ousterhout matrix.
    Gang,
    /// cosched's own gang scheduling, as `cosched up` runs it: fill-ins,
    /// spanning jobs' thread shares, clock-aligned slots (`PlanRules::COSCHED`).
    CoschedGang,
    Dynamic {
        wait: WaitMode,
        on_arrival: ArrivalReaction,
    },
}

const TABLE: [(&str, Scheme); 11] = [
    ("Local", Scheme::LOCAL),
    ("GS", Scheme::Gang),
    ("SB", Scheme::dynamic(WaitMode::SpinBlock, ArrivalReaction::Nothing)),
    ("SY", Scheme::dynamic(WaitMode::SpinYield, ArrivalReaction::Nothing)),
    ("DCS", Scheme::dynamic(WaitMode::BusyWait, ArrivalReaction::InterruptAndReschedule)),
    ("PB", Scheme::dynamic(WaitMode::BusyWait, ArrivalReaction::PeriodicBoost)),
    ("DCS-SB", Scheme::dynamic(WaitMode::SpinBlock, ArrivalReaction::InterruptAndReschedule)),
    ("DCS-SY", Scheme::dynamic(WaitMode::SpinYield, ArrivalReaction::InterruptAndReschedule)),
    ("PB-SB", Scheme::dynamic(WaitMode::SpinBlock, ArrivalReaction::PeriodicBoost)),
    ("PB-SY", Scheme::dynamic(WaitMode::SpinYield, ArrivalReaction::PeriodicBoost)),
    ("GS-cosched", Scheme::CoschedGang),
];

impl Scheme {
    pub const LOCAL: Scheme = Scheme::dynamic(WaitMode::BusyWait, ArrivalReaction::Nothing);

    pub const fn dynamic(wait: WaitMode, on_arrival: ArrivalReaction) -> Scheme {
        Scheme::Dynamic { wait, on_arrival }
    }

    pub fn name(self) -> &'static str {
        TABLE.iter().find(|(_, s)| *s == self).map(|(n, _)| *n).expect("every scheme is named")
    }

    pub fn all_names() -> Vec<&'static str> {
        TABLE.iter().map(|(n, _)| *n).collect()
    }

    /// The ten schemes of the reference study, in the table's order.
    pub fn study_names() -> Vec<&'static str> {
        TABLE.iter().filter(|(_, s)| s.in_study()).map(|(n, _)| *n).collect()
    }

    /// One of the reference study's ten schemes (not cosched's own).
    pub fn in_study(self) -> bool {
        self != Scheme::CoschedGang
    }

    pub fn wait_mode(self) -> WaitMode {
        match self {
            Scheme::Gang | Scheme::CoschedGang => WaitMode::BusyWait,
            Scheme::Dynamic { wait, .. } => wait,
        }
    }

    pub fn on_arrival(self) -> ArrivalReaction {
        match self {
            Scheme::Gang | Scheme::CoschedGang => ArrivalReaction::Nothing,
            Scheme::Dynamic { on_arrival, .. } => on_arrival,
        }
    }

    pub fn is_gang(self) -> bool {
        self.mode() == Mode::Gang
    }

    /// How the scheme shares a CPU among jobs: gang slots, or the node's scheduler.
    pub fn mode(self) -> Mode {
        match self {
            Scheme::Gang | Scheme::CoschedGang => Mode::Gang,
            Scheme::Dynamic { .. } => Mode::Local,
        }
    }

    /// The coscheduler's rules for this scheme: cosched's own for
    /// `CoschedGang`, the study's plain matrix and MPL admission otherwise.
    pub fn plan_rules(self) -> PlanRules {
        match self {
            Scheme::CoschedGang => PlanRules::COSCHED,
            _ => PlanRules::STUDY,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scheme {
    type Err = String;
    fn from_str(text: &str) -> Result<Scheme, String> {
        TABLE
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(text.trim()))
            .map(|(_, s)| *s)
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
}
