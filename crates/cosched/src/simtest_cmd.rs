//! `cosched simtest`: the controller's core under simulated agents, users, network and faults, for as many seeds
//! as asked (`cosched_runtime::controller::simulation`).

use cosched_runtime::controller::simulation::{run, Summary, TesterSettings};

#[derive(clap::Args, Debug)]
pub struct SimtestArgs {
    /// Seeds to run, from --first-seed on.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub seeds: u64,
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Run this one seed (a failure's replay); --seeds is then ignored.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated agents (nodes).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub agents: u64,
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub cpus: u32,
    /// Inputs per seed (requests, messages, ticks, faults).
    #[arg(long, default_value_t = 3_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub steps: u64,
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub users: u32,
    /// No crashes, link drops, partitions, failing writes or clock steps.
    #[arg(long)]
    pub no_faults: bool,
    /// Inputs a failure prints (the last ones before it).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub trace: u64,
}

pub fn run_command(args: &SimtestArgs) -> Result<(), String> {
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.first_seed..args.first_seed.saturating_add(args.seeds)).collect(),
    };
    let mut total = Summary::default();
    let progress_every = (seeds.len() / 10).max(1);
    for (done, &seed) in seeds.iter().enumerate() {
        let settings = TesterSettings {
            seed,
            agents: args.agents as usize,
            cpus_per_agent: args.cpus,
            steps: args.steps as usize,
            users: args.users,
            faults: !args.no_faults,
            trace: args.trace as usize,
        };
        let summary = run(&settings).map_err(|failure| failure.to_string())?;
        total.add(&summary);
        if seeds.len() > 1 && (done + 1) % progress_every == 0 {
            eprintln!("simtest: {} of {} seeds passed", done + 1, seeds.len());
        }
    }
    println!(
        "{} seeds passed ({} agents, {} steps each): {} requests, {} jobs accepted, {} ended; {} controller and {} \
         agent restarts, {} link drops, {} write failures, {} clock steps; {:.0} simulated seconds",
        seeds.len(),
        args.agents,
        args.steps,
        total.requests,
        total.jobs_accepted,
        total.jobs_ended,
        total.controller_restarts,
        total.agent_restarts,
        total.link_drops,
        total.write_failures,
        total.clock_steps,
        total.simulated_ns as f64 / 1e9
    );
    Ok(())
}
