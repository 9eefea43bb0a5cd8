//! Where the model's gang thaws put a copy's tasks: for one gang policy and `j` of a `bench slowdown` report,
//! the simulation `cosched predict` runs, traced; for each slot, how many of the running copy's tasks were first
//! dispatched on each CPU, and whether one of them ran on a second CPU within the slot (moved). The model's side
//! of docs/reproduction-real/spin-barrier-copies/gang-63ms-slots.txt.
//!
//! cargo run --release -p cosched-lab --example gang_thaws -- MACHINE.json REPORT.json POLICY J [SEED]
//!
//! With GANG_THAWS_WINDOW_MS=FROM,TO it also prints every traced event between those instants.

use cosched_lab::slowdown_prediction::traced_simulation_from_args;
use cosched_sim::run::{run, RunOptions};
use cosched_sim::trace::TraceKind;
use std::collections::BTreeMap;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cfg, jobs) = traced_simulation_from_args(&args, "gang_thaws")?;
    let tasks = jobs[0].tasks;
    let options = RunOptions { record_trace: true, ..RunOptions::default() };
    let result = run(&cfg, jobs, &options, |_| {}).map_err(|e| e.to_string())?;
    // Per slot: each task's CPUs in the order it ran on them.
    let mut slot: Option<(u64, BTreeMap<u32, Vec<u32>>)> = None;
    let mut counts = BTreeMap::<String, u32>::new();
    let mut report_slot = |start_ns: u64, ran: &BTreeMap<u32, Vec<u32>>| {
        if ran.is_empty() {
            return;
        }
        let mut first_on = BTreeMap::<u32, u32>::new();
        for cpus in ran.values() {
            *first_on.entry(cpus[0]).or_default() += 1;
        }
        let moved = ran.values().any(|cpus| cpus.iter().any(|&c| c != cpus[0]));
        let copy = ran.keys().next().unwrap() / tasks;
        let shape = format!("{:?}{}", first_on.values().collect::<Vec<_>>(), if moved { " moved" } else { "" });
        println!(
            "{:9.1} ms copy {copy} first CPUs {first_on:?}{}",
            start_ns as f64 / 1e6,
            if moved { ", moved" } else { "" }
        );
        *counts.entry(shape).or_default() += 1;
    };
    let window: Option<(f64, f64)> = std::env::var("GANG_THAWS_WINDOW_MS")
        .ok()
        .and_then(|w| w.split_once(',').map(|(a, b)| (a.parse().unwrap_or(0.0), b.parse().unwrap_or(0.0))));
    for e in &result.trace {
        if let Some((from, to)) = window {
            let ms = e.time_ns as f64 / 1e6;
            if ms >= from && ms <= to {
                println!("  {ms:10.4} cpu {} {:?}", e.cpu, e.kind);
            }
        }
        match e.kind {
            TraceKind::GangSwitch { .. } if e.cpu == 0 => {
                if let Some((start, ran)) = slot.take() {
                    report_slot(start, &ran);
                }
                slot = Some((e.time_ns, BTreeMap::new()));
            }
            TraceKind::Dispatch { process, .. } => {
                if let Some((_, ran)) = slot.as_mut() {
                    let cpus = ran.entry(process).or_default();
                    if cpus.last() != Some(&e.cpu) {
                        cpus.push(e.cpu);
                    }
                }
            }
            _ => {}
        }
    }
    println!("slots by first placement: {counts:?}");
    Ok(())
}
