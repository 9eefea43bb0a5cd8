//! `cosched bench node`: small scenarios run for real on this machine's kernel, to check a node scheduler
//! model against (issue 41, part 3).
//!
//! Every scenario is plain data ([`Scenario`]) that says exactly what runs, in the terms of the simulator's
//! application model, so that the same description can be turned into simulator jobs: each process iterates
//! `compute_ns` of CPU work, then blocks for `sleep_ns`, then (in a pair) sends one message to its partner and
//! waits for the partner's; it has a nice value and the CPUs it may run on. The bench's `node::run` runs one
//! description for real and returns raw values per repeat ([`runs`]); [`summary`] turns them into medians and
//! ranges. Besides the seven standard scenarios, a scenario file ([`file`], `cosched bench node --scenario-file`)
//! describes others in the same terms: processes that start later, run/sleep patterns, barrier groups.

pub mod file;
pub mod runs;
pub mod summary;

use serde::{Deserialize, Serialize};

/// One process of a scenario, as the simulator's application model can express it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSpec {
    /// For the tables (e.g. `nice-5`, `sleeper`).
    pub name: String,
    /// Its nice value (SCHED_OTHER), -20 to 19.
    pub nice: i32,
    /// The CPUs it may run on (its affinity).
    pub cpus: Vec<usize>,
    /// CPU work of each iteration (CPU time of the process, not wall time).
    pub compute_ns: u64,
    /// After the work, it sleeps this long (an absolute timer due `sleep_ns` after the work ended); 0: no sleep.
    pub sleep_ns: u64,
    /// After the sleep, one message to the partner and a wait for the partner's.
    pub exchange: Option<Exchange>,
    /// Iterations to run; `None`: until the end of the run.
    pub iterations: Option<u64>,
    /// From the common start to this process's own: it sleeps until then (0, and not written, for every standard
    /// scenario's process).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start_ns: u64,
    /// A member of a barrier group: after each iteration's work it tells every other member and waits until each
    /// has told it (not written when `None`, as for every standard scenario's process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier: Option<BarrierMember>,
    /// Runs in the real-time class (SCHED_FIFO, priority 1), which takes the CPU from any process of the fair
    /// class at once: a probe of the machine's own wake-up cost on a busy CPU. Standard scenarios only (a
    /// scenario file cannot ask for it); not written when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub realtime: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One process's place in a barrier group (the processes of a set naming the same group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarrierMember {
    /// The group's name, shared by its members (the summary's `barrier phase mean GROUP`).
    pub group: String,
    /// How a member waits for the others: `spin` (polls, never blocks) or `spin-then-block` with `spin_ns` 0
    /// (blocks at once).
    pub wait: ReceiveWait,
}

/// The longest work or sleep of one iteration: far above any scenario's, far below where `now + it` could
/// overflow the clock's u64 ns.
pub const MAX_STEP_NS: u64 = 3_600_000_000_000;

impl ProcessSpec {
    /// Its own rules: CPUs given, a nice in range, some work, steps and a start of at most [`MAX_STEP_NS`].
    pub fn check(&self) -> Result<(), String> {
        let steps_in_range = (1..=MAX_STEP_NS).contains(&self.compute_ns)
            && self.sleep_ns <= MAX_STEP_NS
            && self.start_ns <= MAX_STEP_NS;
        if self.cpus.is_empty() || !(-20..=19).contains(&self.nice) || !steps_in_range {
            return Err(format!(
                "{}: needs CPUs, a nice in -20..=19, compute_ns in 1..={MAX_STEP_NS} and sleep_ns and start_ns at \
                 most that",
                self.name
            ));
        }
        if self.realtime && (self.exchange.is_some() || self.barrier.is_some() || self.sleep_ns < 4 * self.compute_ns) {
            return Err(format!(
                "{}: a real-time process sleeps at least four times as long as it computes, and waits for nobody \
                 (so it takes at most a fifth of its CPU, whatever group it runs in)",
                self.name
            ));
        }
        if let Some(member) = &self.barrier {
            if member.group.is_empty() || member.group.len() > 64 || self.exchange.is_some() {
                return Err(format!(
                    "{}: a barrier group's name of 1 to 64 bytes, and no exchange beside it",
                    self.name
                ));
            }
        }
        Ok(())
    }

    /// A CPU-bound process: work in 10 ms pieces, never blocking.
    pub fn cpu_bound(name: &str, nice: i32, cpus: &[usize]) -> ProcessSpec {
        ProcessSpec {
            name: name.into(),
            nice,
            cpus: cpus.to_vec(),
            compute_ns: 10_000_000,
            sleep_ns: 0,
            exchange: None,
            iterations: None,
            start_ns: 0,
            barrier: None,
            realtime: false,
        }
    }
}

/// A message exchange with another process of the same scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    /// The partner's index in [`ProcessSet::processes`] (each names the other).
    pub partner: usize,
    pub wait: ReceiveWait,
}

/// How a process waits for its partner's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiveWait {
    /// Polls until the message is there, never blocking.
    Spin,
    /// Polls for up to `spin_ns` (wall time since the wait began), then blocks until the message arrives.
    SpinThenBlock { spin_ns: u64 },
}

/// Processes started together; their CPU use is measured over a window after a warm-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSet {
    pub processes: Vec<ProcessSpec>,
    /// From the common start to the window's opening.
    pub warm_up_ns: u64,
    /// The measured window.
    pub window_ns: u64,
}

/// `copies` simultaneous copies of apps/spinbarrier, each `threads` threads with spin barriers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpinBarrierSet {
    /// The values of j, each run in turn (1 first: t_1 is the reference).
    pub copies: Vec<u32>,
    pub threads: u32,
    /// Compute phases of each copy, separated by barriers.
    pub phases: u32,
    /// Work of each thread in each phase, MFLOP.
    pub work_mflop: f64,
    /// The CPUs all copies may run on.
    pub cpus: Vec<usize>,
}

/// The context-switch cost `α_c` (the bench's `ctxswitch`): a machine input of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSwitchProbe {
    pub yields: u64,
    pub work_ns: u64,
    pub cpu: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioKind {
    Processes(ProcessSet),
    SpinBarrier(SpinBarrierSet),
    ContextSwitch(ContextSwitchProbe),
}

/// What one scenario runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub name: String,
    /// One line on what it shows.
    pub about: String,
    pub kind: ScenarioKind,
}

/// The knobs of the standard scenarios (the flags of `cosched bench node`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioSizes {
    pub warm_up_ns: u64,
    pub window_ns: u64,
    /// Nice values of the shares scenarios' CPU-bound processes.
    pub nices: Vec<i32>,
    /// The CPU of the one-CPU scenarios, and the pair of the two-CPU ones.
    pub cpu: usize,
    pub cpu_pair: [usize; 2],
    pub sleeper_compute_ns: u64,
    pub sleeper_sleep_ns: u64,
    /// Work of each receiver between two exchanges.
    pub receiver_compute_ns: u64,
    pub receiver_spin_ns: u64,
    pub spinbarrier_copies: Vec<u32>,
    pub spinbarrier_phases: u32,
    pub spinbarrier_work_mflop: f64,
    pub ctxswitch_yields: u64,
    pub ctxswitch_work_ns: u64,
}

impl Default for ScenarioSizes {
    fn default() -> ScenarioSizes {
        ScenarioSizes {
            warm_up_ns: 500_000_000,
            window_ns: 2_000_000_000,
            nices: vec![0, 0, 5, -5],
            cpu: 0,
            cpu_pair: [0, 1],
            sleeper_compute_ns: 200_000,
            sleeper_sleep_ns: 4_000_000,
            receiver_compute_ns: 50_000,
            receiver_spin_ns: 100_000,
            spinbarrier_copies: vec![1, 2, 3, 4],
            spinbarrier_phases: 2000,
            spinbarrier_work_mflop: 1.0,
            ctxswitch_yields: 20_000,
            ctxswitch_work_ns: 2_000,
        }
    }
}

/// The names of the standard scenarios, in the order they run.
pub const SCENARIO_NAMES: [&str; 8] =
    ["shares-1cpu", "shares-2cpu", "sleeper", "sleeper-alone", "receivers", "spinbarrier", "ctxswitch", "sleeper-busy"];

/// The standard scenarios at these sizes.
pub fn standard_scenarios(sizes: &ScenarioSizes) -> Vec<Scenario> {
    let set = |processes| ProcessSet { processes, warm_up_ns: sizes.warm_up_ns, window_ns: sizes.window_ns };
    let cpu_bound_nices = |cpus: &[usize]| {
        sizes
            .nices
            .iter()
            .enumerate()
            .map(|(i, &nice)| ProcessSpec::cpu_bound(&format!("p{i}-nice{nice}"), nice, cpus))
            .collect::<Vec<_>>()
    };
    let one = [sizes.cpu];
    let sleeper = ProcessSpec {
        name: "sleeper".into(),
        nice: 0,
        cpus: one.to_vec(),
        compute_ns: sizes.sleeper_compute_ns,
        sleep_ns: sizes.sleeper_sleep_ns,
        exchange: None,
        iterations: None,
        start_ns: 0,
        barrier: None,
        realtime: false,
    };
    let realtime_sleeper = ProcessSpec { name: "sleeper".into(), realtime: true, ..sleeper.clone() };
    let receiver = |name: &str, partner| ProcessSpec {
        name: name.into(),
        nice: 0,
        cpus: one.to_vec(),
        compute_ns: sizes.receiver_compute_ns,
        sleep_ns: 0,
        exchange: Some(Exchange { partner, wait: ReceiveWait::SpinThenBlock { spin_ns: sizes.receiver_spin_ns } }),
        iterations: None,
        start_ns: 0,
        barrier: None,
        realtime: false,
    };
    vec![
        Scenario {
            name: SCENARIO_NAMES[0].into(),
            about: "CPU-bound processes with mixed nice values on one CPU: each one's share".into(),
            kind: ScenarioKind::Processes(set(cpu_bound_nices(&one))),
        },
        Scenario {
            name: SCENARIO_NAMES[1].into(),
            about: "the same processes, each allowed on two CPUs: each one's share (of one CPU)".into(),
            kind: ScenarioKind::Processes(set(cpu_bound_nices(&sizes.cpu_pair))),
        },
        Scenario {
            name: SCENARIO_NAMES[2].into(),
            about: "a periodic sleeper beside a CPU-bound process on one CPU: wake-up latency, shares".into(),
            kind: ScenarioKind::Processes(set(vec![sleeper.clone(), ProcessSpec::cpu_bound("cpu-bound", 0, &one)])),
        },
        Scenario {
            name: SCENARIO_NAMES[3].into(),
            about: "the sleeper alone on its CPU: the machine's own wake-up cost".into(),
            kind: ScenarioKind::Processes(set(vec![sleeper])),
        },
        Scenario {
            name: SCENARIO_NAMES[4].into(),
            about: "two spin-then-block receivers exchanging messages beside a CPU-bound process, one CPU".into(),
            kind: ScenarioKind::Processes(set(vec![
                receiver("receiver-a", 1),
                receiver("receiver-b", 0),
                ProcessSpec::cpu_bound("cpu-bound", 0, &one),
            ])),
        },
        Scenario {
            name: SCENARIO_NAMES[5].into(),
            about: "j copies of apps/spinbarrier (2 threads, spin barriers) on two CPUs: s_j = t_j / t_1".into(),
            kind: ScenarioKind::SpinBarrier(SpinBarrierSet {
                copies: sizes.spinbarrier_copies.clone(),
                threads: 2,
                phases: sizes.spinbarrier_phases,
                work_mflop: sizes.spinbarrier_work_mflop,
                cpus: sizes.cpu_pair.to_vec(),
            }),
        },
        Scenario {
            name: SCENARIO_NAMES[6].into(),
            about: "the cost of a context switch on one CPU (as `cosched bench ctxswitch`)".into(),
            kind: ScenarioKind::ContextSwitch(ContextSwitchProbe {
                yields: sizes.ctxswitch_yields,
                work_ns: sizes.ctxswitch_work_ns,
                cpu: sizes.cpu,
            }),
        },
        Scenario {
            name: SCENARIO_NAMES[7].into(),
            about: "the sleeper in the real-time class beside a CPU-bound process, one CPU: the machine's own \
                    wake-up cost on a busy CPU (every wake takes the CPU at once)"
                .into(),
            kind: ScenarioKind::Processes(set(vec![realtime_sleeper, ProcessSpec::cpu_bound("cpu-bound", 0, &one)])),
        },
    ]
}

impl ProcessSet {
    /// The description's own rules: CPUs given, nice in range, partners that name each other, barrier groups of
    /// two or more members that wait alike.
    pub fn check(&self) -> Result<(), String> {
        if self.processes.is_empty() || self.window_ns == 0 {
            return Err("a process set needs processes and a window".into());
        }
        for (index, p) in self.processes.iter().enumerate() {
            p.check().map_err(|e| format!("process {index}: {e}"))?;
            if let Some(exchange) = p.exchange {
                let partner = self.processes.get(exchange.partner);
                if exchange.partner == index || partner.and_then(|q| q.exchange).map(|e| e.partner) != Some(index) {
                    return Err(format!("process {index} ({}): its partner must name it back", p.name));
                }
            }
        }
        for (group, members) in self.barrier_groups() {
            let wait = self.processes[members[0]].barrier.as_ref().map(|m| m.wait);
            if members.len() < 2 || members.iter().any(|&i| self.processes[i].barrier.as_ref().map(|m| m.wait) != wait)
            {
                return Err(format!("barrier group {group}: two or more members, all waiting alike"));
            }
        }
        Ok(())
    }

    /// Each barrier group's name and its members' indices, groups in order of their first member.
    pub fn barrier_groups(&self) -> Vec<(&str, Vec<usize>)> {
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (index, p) in self.processes.iter().enumerate() {
            if let Some(member) = &p.barrier {
                match groups.iter_mut().find(|(name, _)| *name == member.group) {
                    Some((_, members)) => members.push(index),
                    None => groups.push((&member.group, vec![index])),
                }
            }
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real-time process takes at most a fifth of its CPU by its own rules, whatever group it runs in.
    #[test]
    fn a_real_time_process_must_sleep_four_times_its_work_and_wait_for_nobody() {
        let sleeper = |compute_ns, sleep_ns| ProcessSpec {
            realtime: true,
            compute_ns,
            sleep_ns,
            ..ProcessSpec::cpu_bound("rt", 0, &[0])
        };
        assert!(sleeper(200_000, 4_000_000).check().is_ok());
        assert!(sleeper(1_000_000, 4_000_000).check().is_ok(), "exactly a fifth");
        for (compute_ns, sleep_ns) in [(1_000_001, 4_000_000), (1_000, 0), (10_000_000, 0)] {
            let refused = sleeper(compute_ns, sleep_ns).check().unwrap_err();
            assert!(refused.contains("four times as long"), "{refused}");
        }
        let waits = ProcessSpec {
            barrier: Some(BarrierMember { group: "g".into(), wait: ReceiveWait::Spin }),
            ..sleeper(1_000, 1_000_000)
        };
        assert!(waits.check().is_err(), "a real-time barrier member could spin a CPU away");
    }

    #[test]
    fn standard_scenarios_are_well_formed_and_round_trip_as_json() {
        let scenarios = standard_scenarios(&ScenarioSizes::default());
        let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, SCENARIO_NAMES);
        for scenario in &scenarios {
            if let ScenarioKind::Processes(set) = &scenario.kind {
                set.check().unwrap();
            }
            let json = serde_json::to_string(scenario).unwrap();
            assert_eq!(&serde_json::from_str::<Scenario>(&json).unwrap(), scenario);
        }
    }

    #[test]
    fn a_partner_that_does_not_name_back_is_refused() {
        let mut a = ProcessSpec::cpu_bound("a", 0, &[0]);
        a.exchange = Some(Exchange { partner: 1, wait: ReceiveWait::Spin });
        let b = ProcessSpec::cpu_bound("b", 0, &[0]);
        let set = ProcessSet { processes: vec![a, b], warm_up_ns: 0, window_ns: 1 };
        assert!(set.check().unwrap_err().contains("name it back"));
    }
}
