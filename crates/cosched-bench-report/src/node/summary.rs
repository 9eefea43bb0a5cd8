//! Medians and ranges over the repeats of a scenario, and the readable table.

use super::runs::RepeatRun;
use super::{Scenario, ScenarioKind};
use serde::{Deserialize, Serialize};

/// Median and range of one quantity over the repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Spread { median: quantile(&sorted, 0.5), min: sorted[0], max: sorted[sorted.len() - 1], n: sorted.len() })
    }
}

/// The `q` quantile of sorted samples, interpolated between neighbours.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

/// One line of a scenario's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// e.g. `share p0-nice0`, `wake latency p50 sleeper`, `s_j j=2`.
    pub quantity: String,
    pub unit: String,
    pub spread: Spread,
}

/// A scenario, its raw repeats and their summary: one entry of the JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioReport {
    pub scenario: Scenario,
    pub repeats: Vec<RepeatRun>,
    pub summary: Vec<SummaryRow>,
}

/// The whole JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub kernel: String,
    pub cpus: usize,
    /// The scheduler's build options (`CONFIG_HZ`, `CONFIG_PREEMPT*` from /boot/config-RELEASE or /proc/config.gz) and settings
    /// (`kernel.sched_autogroup_enabled`) that a model of it needs, as `NAME=VALUE`.
    pub kernel_config: Vec<String>,
    /// The `cpu.shares` of the scenarios' own cgroup-v1 group; `None`: they ran in the session's group.
    pub cpu_group_shares: Option<u64>,
    pub scenarios: Vec<ScenarioReport>,
}

/// Quantities per repeat, in order of first appearance, each with its unit.
#[derive(Default)]
struct Columns(Vec<(String, String, Vec<f64>)>);

impl Columns {
    fn push(&mut self, quantity: String, unit: &str, value: f64) {
        match self.0.iter_mut().find(|(q, _, _)| *q == quantity) {
            Some((_, _, values)) => values.push(value),
            None => self.0.push((quantity, unit.into(), vec![value])),
        }
    }
}

/// The summary rows of a scenario's repeats.
pub fn summarise(scenario: &Scenario, repeats: &[RepeatRun]) -> Vec<SummaryRow> {
    let exchanges = |index: usize| match &scenario.kind {
        ScenarioKind::Processes(set) => set.processes.get(index).is_some_and(|p| p.exchange.is_some()),
        _ => false,
    };
    let groups = match &scenario.kind {
        ScenarioKind::Processes(set) => set.barrier_groups(),
        _ => Vec::new(),
    };
    let mut columns = Columns::default();
    for repeat in repeats {
        match repeat {
            RepeatRun::Processes(run) => {
                let window_s = run.window_ns as f64 * 1e-9;
                for p in &run.processes {
                    columns.push(format!("share {}", p.name), "%", 100.0 * p.share);
                }
                columns.push("share sum".into(), "%", 100.0 * run.processes.iter().map(|p| p.share).sum::<f64>());
                for p in run.processes.iter().filter(|p| !p.wake_latencies_ns.is_empty()) {
                    let mut sorted: Vec<f64> = p.wake_latencies_ns.iter().map(|&ns| ns as f64 * 1e-3).collect();
                    sorted.sort_by(f64::total_cmp);
                    for (label, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
                        columns.push(format!("wake latency {label} {}", p.name), "µs", quantile(&sorted, q));
                    }
                    let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
                    columns.push(format!("wake latency mean {}", p.name), "µs", mean);
                }
                for (_, p) in run.processes.iter().enumerate().filter(|(i, _)| exchanges(*i)) {
                    columns.push(format!("round trips/s {}", p.name), "/s", p.iterations_in_window as f64 / window_s);
                }
                // A phase ends when its member leaves the barrier: the window over the phases that ended in it.
                for (group, members) in &groups {
                    let ended: Vec<f64> = members
                        .iter()
                        .filter_map(|&i| run.processes.get(i))
                        .map(|p| p.iterations_in_window as f64)
                        .collect();
                    let mean = ended.iter().sum::<f64>() / ended.len().max(1) as f64;
                    if mean > 0.0 {
                        columns.push(format!("barrier phase mean {group}"), "µs", run.window_ns as f64 * 1e-3 / mean);
                    }
                }
                let busy = run.cpus.iter().map(|c| c.busy_share).sum::<f64>();
                let ours = run.processes.iter().map(|p| p.share).sum::<f64>();
                // Ticks (10 ms) against exact times: a small negative value is rounding, not a finding.
                columns.push("other load (busy - ours)".into(), "%", 100.0 * (busy - ours));
                columns.push("steal".into(), "%", 100.0 * run.cpus.iter().map(|c| c.steal_share).sum::<f64>());
            }
            RepeatRun::SpinBarrier(points) => {
                let t1_s = points.iter().find(|p| p.copies == 1).map(|p| p.elapsed_s);
                for point in points {
                    columns.push(format!("t_j j={}", point.copies), "s", point.elapsed_s);
                    if let Some(t1_s) = t1_s {
                        columns.push(format!("s_j j={}", point.copies), "", point.elapsed_s / t1_s);
                    }
                }
            }
            RepeatRun::ContextSwitch(run) => {
                columns.push("α_c (CPU time)".into(), "µs", run.alpha_c_ns * 1e-3);
                columns.push("α_c (wall time)".into(), "µs", run.alpha_c_wall_ns * 1e-3);
                columns.push("switches per yield".into(), "", run.switches_per_yield);
            }
        }
    }
    columns
        .0
        .into_iter()
        .filter_map(|(quantity, unit, values)| Spread::of(&values).map(|spread| SummaryRow { quantity, unit, spread }))
        .collect()
}

/// The readable table: one block per scenario, median [min – max] over the repeats.
pub fn table(report: &NodeReport) -> String {
    let mut t = format!("Node scenarios on this machine: Linux {}, {} CPUs\n", report.kernel, report.cpus);
    t += &match report.cpu_group_shares {
        Some(shares) => format!("in a cpu cgroup of their own ({shares} shares against 1024 per other group)\n"),
        None => "in this session's scheduling group, beside other sessions' groups at equal weight\n".into(),
    };
    if !report.kernel_config.is_empty() {
        t += &format!("kernel: {}\n", report.kernel_config.join(" "));
    }
    for s in &report.scenarios {
        t += &format!("\n{} ({} repeats): {}\n", s.scenario.name, s.repeats.len(), s.scenario.about);
        for row in &s.summary {
            let v = |x: f64| format!("{x:.3}");
            t += &format!(
                "  {:<34} {:>12} {:<4} [{} – {}]\n",
                row.quantity,
                v(row.spread.median),
                row.unit,
                v(row.spread.min),
                v(row.spread.max)
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::runs::{CpuUse, ProcessRun, ProcessSetRun, SpinBarrierPoint};
    use crate::node::{standard_scenarios, ScenarioSizes};

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 10.0, 4));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.9), 4.6);
    }

    fn process(name: &str, share: f64, latencies: Vec<u64>) -> ProcessRun {
        ProcessRun {
            name: name.into(),
            cpu_ns: 0,
            run_delay_ns: 0,
            runs: 0,
            share,
            iterations_in_window: 100,
            wake_latencies_ns: latencies,
        }
    }

    #[test]
    fn summary_of_processes_and_copies_by_hand() {
        let run = |share: f64| {
            RepeatRun::Processes(ProcessSetRun {
                window_ns: 2_000_000_000,
                processes: vec![
                    process("sleeper", share, vec![1000, 3000]),
                    process("receiver-a", 0.5, vec![]),
                    process("receiver-b", 0.5, vec![]),
                ],
                cpus: vec![CpuUse { cpu: 0, busy_share: 1.5, steal_share: 0.0 }],
            })
        };
        let scenarios = standard_scenarios(&ScenarioSizes::default());
        // Its processes 0 and 1 exchange messages.
        let receivers = scenarios.iter().find(|s| s.name == "receivers").unwrap();
        let rows = summarise(receivers, &[run(0.25), run(0.75), run(0.5)]);
        let row =
            |q: &str| rows.iter().find(|r| r.quantity == q).unwrap_or_else(|| panic!("{q} not in {rows:?}")).spread;
        assert_eq!(row("share sleeper").median, 50.0);
        assert_eq!(row("share sum").max, 175.0);
        assert_eq!(row("wake latency p50 sleeper").median, 2.0);
        assert_eq!(row("round trips/s receiver-a").median, 50.0);
        assert!(!rows.iter().any(|r| r.quantity.ends_with("receiver-b") && r.quantity.starts_with("round")));
        assert_eq!(row("other load (busy - ours)").median, 0.0);
        let points = |t2: f64| {
            RepeatRun::SpinBarrier(vec![
                SpinBarrierPoint { copies: 1, elapsed_s: 2.0, copy_elapsed_s: vec![2.0], cpu_s: 4.0 },
                SpinBarrierPoint { copies: 2, elapsed_s: t2, copy_elapsed_s: vec![t2, t2], cpu_s: 8.0 },
            ])
        };
        let spinbarrier = scenarios.iter().find(|s| s.name == "spinbarrier").unwrap();
        let rows = summarise(spinbarrier, &[points(4.0), points(5.0)]);
        let s2 = rows.iter().find(|r| r.quantity == "s_j j=2").unwrap().spread;
        assert_eq!((s2.median, s2.min, s2.max), (2.25, 2.0, 2.5));
    }

    /// A barrier group's phase: the window over the phases its members ended in it (their mean); a process that
    /// is in no group has no such row, and none has a round-trip row.
    #[test]
    fn barrier_phase_mean_of_a_group() {
        let text = r#"{"format": "cosched-node-scenario/1", "scenarios": [{"name": "b", "cpus": 1, "window_ms": 100,
            "barrier_groups": [{"name": "g", "wait": "block", "work_per_phase_us": 100}],
            "processes": [{"name": "m", "copies": 2, "behaviour": {"kind": "barrier", "group": "g"}},
                          {"name": "hog", "behaviour": "cpu-bound"}]}]}"#;
        let scenario = crate::node::file::parse(text, &[0]).unwrap().remove(0);
        let mut member = process("m-0", 0.25, vec![]);
        member.iterations_in_window = 400;
        let mut other = process("m-1", 0.25, vec![]);
        other.iterations_in_window = 399;
        let run = RepeatRun::Processes(ProcessSetRun {
            window_ns: 100_000_000,
            processes: vec![member, other, process("hog", 0.5, vec![])],
            cpus: vec![CpuUse { cpu: 0, busy_share: 1.0, steal_share: 0.0 }],
        });
        let rows = summarise(&scenario, &[run]);
        let phase = rows.iter().find(|r| r.quantity == "barrier phase mean g").unwrap();
        assert_eq!(phase.unit, "µs");
        assert!((phase.spread.median - 100_000.0 / 399.5).abs() < 1e-9, "{rows:?}");
        assert!(!rows.iter().any(|r| r.quantity.starts_with("round trips")), "{rows:?}");
    }
}
