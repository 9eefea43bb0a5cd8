//! The `cosched` command. Glue only: parse and validate arguments into
//! settings, call the library crates, present the results.

mod bench;
mod output;
mod plot;
mod progress;
mod sim_cmd;
mod study;
mod workload_cmd;
mod workload_source;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cosched",
    version,
    about = "Time-sharing of parallel jobs on clusters: simulate, measure and run gang, local and dynamic coscheduling",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate time-sharing schemes on a workload (default: WL7 on 32 nodes, Local vs GS).
    Sim(Box<sim_cmd::SimArgs>),
    /// Reproduce the reference study's experiments E1-E5 (tables, figures, manifest).
    #[command(subcommand)]
    Study(study::StudyCommand),
    /// Generate, inspect and convert workloads (SWF traces, the Lublin-Feitelson model).
    #[command(subcommand)]
    Workload(workload_cmd::WorkloadCommand),
    /// Benchmarks of cosched itself.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Sim(args) => sim_cmd::run(&args),
        Command::Study(cmd) => study::run(&cmd),
        Command::Workload(cmd) => workload_cmd::run(&cmd),
        Command::Bench(cmd) => bench::run(&cmd),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}
