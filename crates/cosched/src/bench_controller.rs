//! `cosched bench controller`: what the controller's core costs as the cluster grows, measured on the real core
//! with simulated agents in this process (no sockets, no database: the core's own work only).

use cosched_core::rng::StreamSeed;
use cosched_runtime::controller::core::{ControllerCore, Loaded, MemoryRecords, Now};
use cosched_runtime::controller::ControllerSettings;
use cosched_runtime::wire::jobs::Identity;
use cosched_runtime::wire::protocol::{AgentHello, FromAgent, JobUsage, Request, SubmitRequest, ToAgent};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct BenchControllerArgs {
    /// Cluster sizes (agents), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "32,128,512,1024,4096")]
    pub agents: Vec<u32>,
    /// CPUs of each node.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub cpus: u32,
    /// Jobs per node in the steady state measured (queued ones included).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs_per_node: u32,
    /// Runs per size (the table gives the median and the range).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
}

/// One run at one size: seconds per operation, and what a replan sends.
#[derive(Clone, Copy, Default)]
struct Costs {
    connect_s: f64,
    submit_s: f64,
    report_s: f64,
    replan_s: f64,
    status_s: f64,
    replan_messages: f64,
    replan_bytes: f64,
}

/// An operation's name and its cost in one run.
type Operation = (&'static str, fn(&Costs) -> f64);

const OPERATIONS: [Operation; 5] = [
    ("agent hello", |c| c.connect_s),
    ("submit", |c| c.submit_s),
    ("report (one agent's)", |c| c.report_s),
    ("job end: replan and tell the agents", |c| c.replan_s),
    ("status (an administrator's)", |c| c.status_s),
];

pub fn run(args: &BenchControllerArgs) -> Result<(), String> {
    if args.agents.iter().any(|&n| n == 0 || n > 4096) {
        return Err("--agents: each size must be 1 to 4096".into());
    }
    let mut table: Vec<(u32, Vec<Costs>)> = Vec::new();
    for &agents in &args.agents {
        let runs: Vec<Costs> = (0..args.runs).map(|r| measure(agents, args, u64::from(r))).collect();
        eprintln!("bench controller: {agents} agents measured");
        table.push((agents, runs));
    }
    print_table(&table);
    Ok(())
}

fn now_at(s: u64) -> Now {
    Now { mono_ns: s * 1_000_000_000, unix_ms: 1_700_000_000_000 + s * 1000 }
}

fn measure(agents: u32, args: &BenchControllerArgs, run: u64) -> Costs {
    let names: Vec<String> = (0..agents).map(|i| format!("node{i:04}")).collect();
    let settings = ControllerSettings { nodes: names.clone(), ..ControllerSettings::default() };
    let mut core = ControllerCore::open(settings, Box::<MemoryRecords>::default(), Loaded::default(), now_at(0));
    let mut costs = Costs::default();
    #[allow(clippy::disallowed_methods)] // a benchmark of the core's work in wall time
    let clock = Instant::now;
    let started = clock();
    for name in &names {
        let hello = AgentHello::new(name, args.cpus, 256 << 30, "bench");
        core.agent_connected(now_at(1), &hello).expect("a configured node");
    }
    costs.connect_s = started.elapsed().as_secs_f64() / f64::from(agents);
    let _ = core.take_effects();
    let mut rng = StreamSeed(run).stream("bench controller");
    let jobs = agents * args.jobs_per_node;
    let started = clock();
    for i in 0..jobs {
        // Mostly one node's worth or less, some spanning two nodes.
        let tasks = if rng.bernoulli(0.1) { args.cpus + 1 + rng.below(args.cpus) } else { 1 + rng.below(args.cpus) };
        let who = Identity { uid: 1000 + rng.below(64), gid: 100, admin: false };
        let request = SubmitRequest { tasks, ..SubmitRequest::new(vec!["prog".into()], "/".into()) };
        let _ = core.handle(now_at(2), &who, Request::Submit(request), format!("{i:032x}"));
    }
    costs.submit_s = started.elapsed().as_secs_f64() / f64::from(jobs);
    let _ = core.take_effects();
    let running: Vec<(u64, Vec<String>)> = core
        .jobs()
        .values()
        .filter(|j| !j.placement.is_empty())
        .map(|j| (j.id, j.placement.iter().map(|p| p.node.clone()).collect()))
        .collect();
    let reports: Vec<(String, FromAgent)> = names.iter().map(|name| (name.clone(), report(&running, name))).collect();
    let started = clock();
    for (name, event) in reports {
        core.agent_event(now_at(3), &name, event);
    }
    costs.report_s = started.elapsed().as_secs_f64() / f64::from(agents);
    let _ = core.take_effects();
    let ends: Vec<&(u64, Vec<String>)> = running.iter().take(16).collect();
    let started = clock();
    let (mut messages, mut bytes) = (0usize, 0usize);
    for (job, nodes) in &ends {
        for node in nodes {
            let ended = FromAgent::Ended { job: *job, exit_code: Some(0), error: None, cpu_ns: Some(1) };
            core.agent_event(now_at(4), node, ended);
        }
        let sent = core.take_effects().to_agents;
        messages += sent.len();
        bytes +=
            sent.iter().map(|(_, m): &(String, ToAgent)| serde_json::to_vec(m).map_or(0, |v| v.len())).sum::<usize>();
    }
    let ended = ends.len().max(1) as f64;
    costs.replan_s = started.elapsed().as_secs_f64() / ended;
    costs.replan_messages = messages as f64 / ended;
    costs.replan_bytes = bytes as f64 / ended;
    let admin = Identity { uid: 0, gid: 0, admin: true };
    let started = clock();
    let _ = core.handle(now_at(5), &admin, Request::Status {}, String::new());
    costs.status_s = started.elapsed().as_secs_f64();
    costs
}

fn report(running: &[(u64, Vec<String>)], node: &str) -> FromAgent {
    let jobs = running
        .iter()
        .filter(|(_, nodes)| nodes.iter().any(|n| n == node))
        .map(|(job, _)| JobUsage { job: *job, cpu_ns: 1_000_000_000, pids: vec![1, 2], frozen: false })
        .collect();
    FromAgent::usage_report(jobs)
}

fn median_and_range(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (values[values.len() / 2], values[0], values[values.len() - 1])
}

fn print_table(table: &[(u32, Vec<Costs>)]) {
    let Some((base_agents, base_runs)) = table.first() else { return };
    println!("| operation | agents | median | range | ÷ {base_agents} agents | growth exponent |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, cost) in OPERATIONS {
        let base = median_and_range(&mut base_runs.iter().map(cost).collect::<Vec<_>>()).0;
        for (agents, runs) in table {
            let (median, lo, hi) = median_and_range(&mut runs.iter().map(cost).collect::<Vec<_>>());
            let ratio = median / base;
            let size = f64::from(*agents) / f64::from(*base_agents);
            let exponent = if size > 1.0 { format!("{:.2}", ratio.ln() / size.ln()) } else { "–".into() };
            println!("| {name} | {agents} | {} | {}–{} | {ratio:.1} | {exponent} |", time(median), time(lo), time(hi));
        }
    }
    println!();
    println!("| agents | messages per job end | bytes per job end |");
    println!("|---:|---:|---:|");
    for (agents, runs) in table {
        let messages = median_and_range(&mut runs.iter().map(|c| c.replan_messages).collect::<Vec<_>>()).0;
        let bytes = median_and_range(&mut runs.iter().map(|c| c.replan_bytes).collect::<Vec<_>>()).0;
        println!("| {agents} | {messages:.1} | {bytes:.0} |");
    }
}

fn time(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.1} µs", seconds * 1e6)
    }
}
