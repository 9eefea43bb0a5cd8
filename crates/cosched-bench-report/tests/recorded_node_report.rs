//! The built-in scenarios of `cosched bench node` are unchanged by the scenario files: a report the command wrote
//! before they existed (docs/node-bench/2026-11-26/node.json) reads back and writes out byte for byte, its
//! summaries are what `summarise` computes from its raw repeats today, and the scenarios the defaults make are
//! the ones recorded (at the recorded sizes).

use cosched_bench_report::node::summary::{summarise, NodeReport};
use cosched_bench_report::node::{standard_scenarios, ScenarioSizes};
use std::path::Path;

fn recorded() -> (String, NodeReport) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/node-bench/2026-11-26/node.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let report: NodeReport = serde_json::from_str(&text).unwrap();
    (text, report)
}

#[test]
fn a_recorded_report_writes_out_byte_for_byte() {
    let (text, report) = recorded();
    assert_eq!(serde_json::to_string_pretty(&report).unwrap() + "\n", text);
}

#[test]
fn the_recorded_summaries_are_computed_again_from_their_repeats() {
    let (_, report) = recorded();
    for s in &report.scenarios {
        assert_eq!(summarise(&s.scenario, &s.repeats), s.summary, "{}", s.scenario.name);
    }
}

#[test]
fn the_default_scenarios_are_the_recorded_ones() {
    let (_, report) = recorded();
    // The recorded run used the defaults but for the CPUs (0, and 0,1: the defaults' too on that machine).
    let made = standard_scenarios(&ScenarioSizes::default());
    // sleeper-busy came after the recording (2026-11-27), last in the list: the others are as recorded.
    let added: Vec<&str> = made[report.scenarios.len()..].iter().map(|s| s.name.as_str()).collect();
    assert_eq!(added, ["sleeper-busy"]);
    for (made, recorded) in made.iter().zip(&report.scenarios) {
        assert_eq!(
            serde_json::to_string_pretty(made).unwrap(),
            serde_json::to_string_pretty(&recorded.scenario).unwrap(),
            "{}",
            made.name
        );
    }
}
