//! How the model interleaves the copies of a prediction: for one policy and `j` of a `bench slowdown` report,
//! the simulation `cosched predict` runs, traced, and per copy the share of time its first two tasks sat on
//! one CPU, the share they ran at once, and the moves of its tasks; the median turn, and how long the stretches
//! on one CPU lasted. The model's side of the
//! kernel trace in docs/reproduction-real/kernel-trace-lu/.
//!
//! cargo run --release -p cosched-lab --example copy_overlap -- MACHINE.json REPORT.json POLICY J [SEED]

use cosched_lab::slowdown_prediction::traced_simulation_from_args;
use cosched_sim::run::{run, RunOptions};
use cosched_sim::trace::{TraceEvent, TraceKind};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cfg, jobs) = traced_simulation_from_args(&args, "copy_overlap")?;
    let (tasks, copies, seed) = (jobs[0].tasks as usize, jobs.len(), cfg.seed);
    let options = RunOptions { record_trace: true, ..RunOptions::default() };
    let result = run(&cfg, jobs, &options, |_| {}).map_err(|e| e.to_string())?;
    let mut overlap = Overlap::of(&result.trace, copies, tasks, cfg.cpu_count() as usize);
    let span_s = result.trace.last().map_or(0.0, |e| e.time_ns as f64 / 1e9);
    let (stretches, median_s, longest_s) = overlap.stretches();
    println!(
        "{copies} copies, seed {seed}: last finish {span_s:.2} s, median turn {:.2} ms; {stretches} stretches of a copy's \
         tasks 0 and 1 on one CPU, median {median_s:.3} s, longest {longest_s:.3} s",
        overlap.median_turn_ms()
    );
    for (copy, record) in result.jobs.iter().enumerate() {
        let share = |ns: u64| 100.0 * ns as f64 / (span_s * 1e9);
        println!(
            "copy {copy}: finish {:.2} s; tasks 0 and 1 on one CPU {:.1} %, running at once {:.1} %; {} moves \
             ({:.2} per task-second)",
            record.finish_s,
            share(overlap.colocated_ns[copy]),
            share(overlap.both_running_ns[copy]),
            overlap.moves[copy],
            overlap.moves[copy] as f64 / (span_s * tasks as f64)
        );
    }
    Ok(())
}

/// What the trace says of each copy's tasks 0 and 1 (copy `c` has processes `c·tasks ..`, as placed).
struct Overlap {
    colocated_ns: Vec<u64>,
    /// Each stretch a copy's tasks 0 and 1 spent on one CPU, ended before the trace did.
    colocated_stretches_ns: Vec<u64>,
    both_running_ns: Vec<u64>,
    moves: Vec<u64>,
    turns_ns: Vec<u64>,
}

impl Overlap {
    fn of(trace: &[TraceEvent], copies: usize, tasks: usize, cpus: usize) -> Overlap {
        let mut o = Overlap {
            colocated_ns: vec![0; copies],
            colocated_stretches_ns: vec![],
            both_running_ns: vec![0; copies],
            moves: vec![0; copies],
            turns_ns: vec![],
        };
        let (mut cpu_of, mut running) = (vec![u32::MAX; copies * tasks], vec![u32::MAX; cpus]);
        let (mut turn_start_ns, mut last_ns) = (vec![0u64; cpus], 0u64);
        let mut together_since: Vec<Option<u64>> = vec![None; copies];
        for e in trace {
            for (copy, since) in together_since.iter_mut().enumerate() {
                let (a, b) = (copy * tasks, copy * tasks + 1);
                let gap_ns = e.time_ns - last_ns;
                let together = cpu_of[a] != u32::MAX && cpu_of[a] == cpu_of[b];
                if together {
                    o.colocated_ns[copy] += gap_ns;
                }
                match (together, *since) {
                    (true, None) => *since = Some(e.time_ns),
                    (false, Some(from_ns)) => {
                        o.colocated_stretches_ns.push(e.time_ns - from_ns);
                        *since = None;
                    }
                    _ => {}
                }
                if running.contains(&(a as u32)) && running.contains(&(b as u32)) {
                    o.both_running_ns[copy] += gap_ns;
                }
            }
            last_ns = e.time_ns;
            let cpu = e.cpu as usize;
            match e.kind {
                TraceKind::TaskPlaced { process, .. } => cpu_of[process as usize] = e.cpu,
                TraceKind::Migrate { process, .. } => {
                    cpu_of[process as usize] = e.cpu;
                    o.moves[process as usize / tasks] += 1;
                }
                TraceKind::Dispatch { process, .. } if running[cpu] != process => {
                    o.turns_ns.push(e.time_ns - turn_start_ns[cpu]);
                    (turn_start_ns[cpu], running[cpu]) = (e.time_ns, process);
                }
                TraceKind::Exit { process } | TraceKind::Block { process } if running[cpu] == process => {
                    running[cpu] = u32::MAX;
                }
                _ => {}
            }
        }
        o
    }

    /// How many stretches on one CPU, their median and longest, in seconds.
    fn stretches(&mut self) -> (usize, f64, f64) {
        self.colocated_stretches_ns.sort_unstable();
        let s = &self.colocated_stretches_ns;
        let at = |i: usize| s.get(i).map_or(0.0, |&ns| ns as f64 / 1e9);
        (s.len(), at(s.len() / 2), at(s.len().saturating_sub(1)))
    }

    fn median_turn_ms(&mut self) -> f64 {
        self.turns_ns.sort_unstable();
        self.turns_ns.get(self.turns_ns.len() / 2).map_or(0.0, |&ns| ns as f64 / 1e6)
    }
}
