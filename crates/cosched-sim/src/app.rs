//! The application model: jobs whose tasks iterate compute → I/O → send to
//! ring neighbours → receive from them, and the job types J1–J6 and mixes
//! WL1–WL8 of the reference study.

use crate::config::NetworkConfig;
use crate::net::Nic;
use cosched_core::{Rng, SimTime};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A job type by its shares of a nominal iteration, in percent.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobType {
    pub number: u8,
    pub compute_pct: u32,
    pub io_pct: u32,
    pub comm_pct: u32,
}

pub const JOB_TYPES: [JobType; 6] = [
    JobType { number: 1, compute_pct: 35, io_pct: 15, comm_pct: 50 },
    JobType { number: 2, compute_pct: 35, io_pct: 50, comm_pct: 15 },
    JobType { number: 3, compute_pct: 35, io_pct: 35, comm_pct: 30 },
    JobType { number: 4, compute_pct: 90, io_pct: 5, comm_pct: 5 },
    JobType { number: 5, compute_pct: 35, io_pct: 5, comm_pct: 60 },
    JobType { number: 6, compute_pct: 65, io_pct: 5, comm_pct: 30 },
];

impl JobType {
    pub fn by_number(number: u8) -> Option<JobType> {
        JOB_TYPES.iter().copied().find(|t| t.number == number)
    }
}

impl fmt::Display for JobType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "J{}", self.number)
    }
}

/// A workload mix: which job types occur, each equally likely.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mix {
    pub number: u8,
}

impl Mix {
    pub fn types(self) -> &'static [u8] {
        match self.number {
            1 => &[1],
            2 => &[2],
            3 => &[3],
            4 => &[4],
            5 => &[5],
            6 => &[6],
            7 => &[1, 2, 3, 4, 5, 6],
            8 => &[2, 4, 5],
            _ => unreachable!("mixes are WL1..WL8"),
        }
    }

    /// Draw one job's type.
    pub fn draw(self, rng: &mut Rng) -> JobType {
        let types = self.types();
        let pick = types[rng.below(types.len() as u32) as usize];
        JobType::by_number(pick).expect("mix names only known types")
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WL{}", self.number)
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(text: &str) -> Result<Mix, String> {
        let t = text.trim().to_ascii_uppercase();
        match t.strip_prefix("WL").and_then(|n| n.parse::<u8>().ok()) {
            Some(n @ 1..=8) => Ok(Mix { number: n }),
            _ => Err(format!("unknown workload mix '{text}'; known mixes: WL1 .. WL8")),
        }
    }
}

/// What one task does per iteration, and how many iterations it runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Program {
    /// Nominal compute time per iteration (before the skew factor).
    pub compute_ns: u64,
    /// Nominal I/O time per iteration (before the skew factor).
    pub io_ns: u64,
    pub iterations: u32,
    pub message_bytes: u32,
    /// Work outside the iterations (a real program's start-up and final
    /// check), done before the first one; none for the study's jobs.
    #[serde(skip_serializing_if = "Prologue::is_none")]
    pub prologue: Prologue,
    /// The memory a task works over (a real program's, from its command line; 0 for the
    /// study's jobs): what it refills of the caches when its job takes a CPU back.
    #[serde(skip_serializing_if = "is_zero")]
    pub working_set_bytes: u64,
    /// Iterations in rounds, each ended by a long compute (an LU's panels); none for the study's jobs.
    #[serde(skip_serializing_if = "Rounds::is_none")]
    pub rounds: Rounds,
    /// Its compute reads the task's own CPU-time clock all along (a benchmark's worker timing its work with
    /// `CLOCK_THREAD_CPUTIME_ID`; false for the study's jobs and the reference programs). Each read runs the
    /// kernel's `update_curr` (`task_sched_runtime`), so under EEVDF its slice ends when used up, not at the
    /// next tick; its receives spin without reading it.
    #[serde(skip_serializing_if = "is_false")]
    pub reads_cpu_clock: bool,
    /// Its exchange is a barrier of all the job's tasks: each waits until every task has arrived (a
    /// spinbarrier's threads), where the study's jobs exchange with their ring neighbours only. With two tasks
    /// the two are the same; with more, a ring lets a task go on before the tasks across the ring arrive.
    #[serde(skip_serializing_if = "is_false")]
    pub barrier: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Program {
    /// The nominal compute of iteration `i` (from 0), before the skew factor.
    pub fn compute_ns_of(&self, i: u32) -> u64 {
        self.rounds.long_compute_ns_of(i, self.iterations).unwrap_or(self.compute_ns)
    }

    /// The nominal compute of all iterations of one task, the prologue's not included.
    pub fn iterations_compute_ns(&self) -> u64 {
        if self.rounds.is_none() {
            return self.iterations as u64 * self.compute_ns;
        }
        (0..self.iterations).map(|i| self.compute_ns_of(i)).sum()
    }
}

/// A program whose exchanges come in bursts between long computes: its iterations in rounds of `iterations`,
/// the last iteration of each computing the round's long compute in place of the short one. An LU factorisation
/// is so: per panel, many exchanges with little arithmetic between them (pivot searches, row swaps), then the
/// update of the trailing matrix, which shrinks as the square of the panels still to come.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Rounds {
    /// Iterations per round (0: no rounds).
    pub iterations: u32,
    /// The long compute, as its mean over the rounds.
    pub long_compute_mean_ns: u64,
    pub shrink: Shrink,
}

/// How a round's long compute changes over the rounds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Shrink {
    /// The same in every round.
    #[default]
    None,
    /// As the square of the rounds after it: round `r` of `R` computes `mean · R · m² / Σ m²`, `m = R − 1 − r`.
    Quadratic,
}

impl Rounds {
    pub const NONE: Rounds = Rounds { iterations: 0, long_compute_mean_ns: 0, shrink: Shrink::None };

    pub fn is_none(&self) -> bool {
        self.iterations == 0
    }

    /// The long compute of iteration `i` of `total`, if it ends a round.
    pub fn long_compute_ns_of(&self, i: u32, total: u32) -> Option<u64> {
        let per_round = self.iterations;
        if per_round == 0 || i % per_round != per_round - 1 {
            return None;
        }
        let mean_ns = self.long_compute_mean_ns;
        Some(match self.shrink {
            Shrink::None => mean_ns,
            Shrink::Quadratic => {
                let rounds = total.div_ceil(per_round) as u64;
                let after = rounds.saturating_sub(1 + (i / per_round) as u64);
                // Σ m² for m in 0..rounds, in u128: no overflow for any u32 count.
                let squares =
                    rounds.saturating_sub(1) as u128 * rounds as u128 * (2 * rounds).saturating_sub(1) as u128 / 6;
                let share = (mean_ns as u128 * rounds as u128 * (after * after) as u128).checked_div(squares);
                share.map_or(mean_ns, |ns| ns as u64)
            }
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A task's work before its first iteration: CPU time, then time blocked.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Prologue {
    pub compute_ns: u64,
    pub blocked_ns: u64,
}

impl Prologue {
    pub const NONE: Prologue = Prologue { compute_ns: 0, blocked_ns: 0 };

    pub fn is_none(&self) -> bool {
        *self == Prologue::NONE
    }
}

/// The communication time of one balanced iteration on a dedicated machine:
/// every task sends to its ring neighbours at the same instant and waits for
/// their messages. Computed with the same interface arithmetic the simulator
/// uses, assuming every task on its own node (our choice for `c > 1`).
pub fn balanced_comm_ns(tasks: u32, net: &NetworkConfig) -> u64 {
    let messages_per_task = match tasks {
        0 | 1 => return 0,
        2 => 1,
        _ => 2,
    };
    let latency = net.latency_ns(net.message_bytes);
    let mut out = Nic::default();
    let mut inbound = Nic::default();
    // Every node does the same; look at one: its sends leave one after the
    // other, and the matching messages from its neighbours arrive in that order.
    let last_deposit = (0..messages_per_task)
        .map(|_| {
            let leaves = out.start_send(SimTime::ZERO, net.nic_ns_per_message);
            inbound.deposit_time(leaves + latency, net.nic_ns_per_message)
        })
        .max()
        .expect("at least one message");
    last_deposit.ns()
}

/// Turn a job's type, width and nominal run time into its iteration program,
/// so that alone on the machine with no skew it runs for (the nearest whole
/// number of iterations to) its nominal time.
pub fn program_for(job_type: JobType, tasks: u32, nominal_ns: u64, net: &NetworkConfig) -> Program {
    assert!(tasks >= 1);
    // A communicating job's iteration is fixed by its communication share.
    let reference_tasks = tasks.max(3);
    let iteration_ns = balanced_comm_ns(reference_tasks, net) as f64 * 100.0 / job_type.comm_pct as f64;
    let compute_ns = (iteration_ns * job_type.compute_pct as f64 / 100.0).round() as u64;
    let io_ns = (iteration_ns * job_type.io_pct as f64 / 100.0).round() as u64;
    // A single task sends nothing: it keeps the compute and I/O of the type.
    let comm_ns = balanced_comm_ns(tasks, net);
    let actual_iteration_ns = compute_ns + io_ns + comm_ns;
    let iterations = ((nominal_ns as f64 / actual_iteration_ns as f64).round() as u64).clamp(1, u32::MAX as u64);
    Program {
        compute_ns,
        io_ns,
        iterations: iterations as u32,
        message_bytes: net.message_bytes,
        prologue: Prologue::NONE,
        working_set_bytes: 0,
        rounds: Rounds::NONE,
        reads_cpu_clock: false,
        barrier: false,
    }
}

/// Run time of a program alone on the machine with no skew.
pub fn dedicated_ns(program: &Program, tasks: u32, net: &NetworkConfig) -> u64 {
    let comm_ns = balanced_comm_ns(tasks, &NetworkConfig { message_bytes: program.message_bytes, ..net.clone() });
    let prologue_ns = program.prologue.compute_ns + program.prologue.blocked_ns;
    program.iterations_compute_ns() + program.iterations as u64 * (program.io_ns + comm_ns) + prologue_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_communication_time_is_latency_plus_one_serialisation() {
        let net = NetworkConfig::default();
        assert_eq!(net.latency_ns(4096), 185_480);
        assert_eq!(balanced_comm_ns(1, &net), 0);
        assert_eq!(balanced_comm_ns(2, &net), 185_480);
        assert_eq!(balanced_comm_ns(3, &net), 195_480);
        assert_eq!(balanced_comm_ns(32, &net), 195_480);
    }

    #[test]
    fn programs_follow_the_type_shares() {
        let net = NetworkConfig::default();
        let j1 = JobType::by_number(1).unwrap();
        let p = program_for(j1, 8, 1_000_000_000, &net);
        // J1: communication is 50 % of 390.96 µs.
        assert_eq!(p.compute_ns, 136_836);
        assert_eq!(p.io_ns, 58_644);
        let d = dedicated_ns(&p, 8, &net);
        assert!((d as i64 - 1_000_000_000).abs() <= 390_960 / 2 + 1, "dedicated {d}");
        let serial = program_for(j1, 1, 1_000_000_000, &net);
        assert_eq!((serial.compute_ns, serial.io_ns), (p.compute_ns, p.io_ns));
    }

    /// Rounds of 4 iterations over 10: rounds 0, 1 and a short 2; iterations 3 and 7 end rounds 0 and 1.
    #[test]
    fn a_rounds_last_iteration_computes_its_long_compute_shrinking_as_a_square() {
        let rounds = Rounds { iterations: 4, long_compute_mean_ns: 1_000, shrink: Shrink::Quadratic };
        let program = Program {
            compute_ns: 10,
            io_ns: 0,
            iterations: 10,
            message_bytes: 64,
            prologue: Prologue::NONE,
            working_set_bytes: 0,
            rounds,
            reads_cpu_clock: false,
            barrier: false,
        };
        let computes: Vec<u64> = (0..10).map(|i| program.compute_ns_of(i)).collect();
        // R = 3 rounds, Σ m² = 0 + 1 + 4 = 5: round 0 (m = 2) 1000·3·4/5, round 1 (m = 1) 1000·3/5.
        assert_eq!(computes, [10, 10, 10, 2_400, 10, 10, 10, 600, 10, 10]);
        // The long computes' mean over the 3 rounds is the mean given (the last round's is 0).
        assert_eq!(program.iterations_compute_ns(), 8 * 10 + 3_000);
        let constant = Program { rounds: Rounds { shrink: Shrink::None, ..rounds }, ..program };
        assert_eq!(
            (constant.compute_ns_of(3), constant.compute_ns_of(7), constant.compute_ns_of(9)),
            (1_000, 1_000, 10)
        );
        let one_round = Rounds { iterations: 10, ..rounds };
        assert_eq!(one_round.long_compute_ns_of(9, 10), Some(1_000));
        let plain = Program { rounds: Rounds::NONE, ..program };
        assert!((0..10).all(|i| plain.compute_ns_of(i) == 10));
        assert_eq!(plain.iterations_compute_ns(), 100);
    }

    #[test]
    fn mixes() {
        assert_eq!("wl7".parse::<Mix>().unwrap().types().len(), 6);
        assert_eq!("WL8".parse::<Mix>().unwrap().types(), &[2, 4, 5]);
        assert!("WL9".parse::<Mix>().is_err());
    }
}
