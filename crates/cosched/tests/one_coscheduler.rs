//! One coscheduler, two drivers. Under `GS-cosched` the simulator's engine
//! drives the controller's core (`ControllerCore`, with its default settings:
//! the idle rule and the history's retention on), the simulated nodes acting
//! as its agents; `cosched-sim`'s `controller_decides` test checks on drawn
//! workloads that it decides as the plan's model does. Here the other half:
//! what the nodes did, read from the simulator's trace, must be what the
//! daemon's agents would do. The same arrivals and finishes are replayed, in
//! the simulator's order and at its times, to a second core, with every node
//! reporting its jobs' CPU time as busy jobs use it; the CPUs it tells the
//! agents to start each job on, and the job each agent's switcher runs in
//! every clock slice (`target_jobs`), are compared with the trace.

use cosched_core::SimTime;
use cosched_runtime::agent::switcher::target_jobs;
use cosched_runtime::controller::core::{ControllerCore, Loaded, MemoryRecords, Now};
use cosched_runtime::controller::ControllerSettings;
use cosched_runtime::wire::jobs::Identity;
use cosched_runtime::wire::protocol::{AgentHello, FromAgent, Request, Schedule, SubmitRequest, ToAgent};
use cosched_sim::run::{run, RunOptions};
use cosched_sim::trace::TraceKind;
use cosched_sim::{Program, Prologue, Scheme, SimConfig, SimJob};
use std::collections::BTreeMap;

const MS: u64 = 1_000_000;
const NODES: u32 = 4;
const CPUS_PER_NODE: u32 = 2;

/// Jobs of 1 to 6 tasks every 70 ms, a few hundred ms of work each: enough to
/// fill the three rows, queue, fill free cells and span nodes.
fn scenario() -> (SimConfig, Vec<SimJob>) {
    let cfg = SimConfig {
        scheme: Scheme::COSCHED_GANG,
        nodes: NODES,
        cpus_per_node: CPUS_PER_NODE,
        mpl: 3,
        skew: 0.0,
        ..SimConfig::default()
    };
    let sizes = [3, 1, 6, 2, 1, 4, 8, 1, 2, 5, 1, 3, 2, 7, 1, 1];
    let jobs = sizes
        .iter()
        .enumerate()
        .map(|(i, &tasks)| SimJob {
            job_number: i as u64 + 1,
            arrival: SimTime(i as u64 * 70 * MS),
            tasks,
            cpus: tasks,
            program: Program {
                compute_ns: (150 + 97 * (i as u64 % 5)) * MS,
                io_ns: 0,
                iterations: 2,
                message_bytes: 4096,
                prologue: Prologue::NONE,
                working_set_bytes: 0,
                rounds: cosched_sim::Rounds::NONE,
                reads_cpu_clock: false,
                barrier: false,
            },
            label: format!("j{i}"),
            nice: 0,
            requested_ns: None,
        })
        .collect();
    (cfg, jobs)
}

/// What the simulator decided, read from its trace.
#[derive(Default)]
struct SimDecisions {
    /// Per job (0-based, arrival order): the CPU of each rank.
    cpus: BTreeMap<u32, Vec<u32>>,
    process_job: BTreeMap<u32, u32>,
    /// Arrivals and finishes in the simulator's order: (time, job, arrived?).
    events: Vec<(u64, u32, bool)>,
    /// Per job: the time it started.
    start_ns: BTreeMap<u32, u64>,
    /// (time, CPU, job whose cell the CPU runs) at every gang switch.
    switches: Vec<(u64, u32, Option<u32>)>,
}

fn simulate(cfg: &SimConfig, jobs: &[SimJob]) -> SimDecisions {
    let options = RunOptions { record_trace: true, ..RunOptions::default() };
    let result = run(cfg, jobs.to_vec(), &options, |_| {}).expect("a valid scenario");
    assert_eq!(result.jobs.len(), jobs.len(), "every job finished");
    let mut sim = SimDecisions::default();
    let mut arrivals = jobs.iter().enumerate().map(|(j, job)| (job.arrival.ns(), j as u32)).peekable();
    for event in &result.trace {
        while let Some(&(t, j)) = arrivals.peek().filter(|(t, _)| *t <= event.time_ns) {
            sim.events.push((t, j, true));
            arrivals.next();
        }
        match event.kind {
            TraceKind::JobStart { job } => {
                sim.start_ns.insert(job, event.time_ns);
            }
            TraceKind::TaskPlaced { job, process } => {
                sim.cpus.entry(job).or_default().push(event.cpu);
                sim.process_job.insert(process, job);
            }
            TraceKind::JobFinish { job } => sim.events.push((event.time_ns, job, false)),
            TraceKind::GangSwitch { cell, .. } => {
                sim.switches.push((event.time_ns, event.cpu, cell.map(|p| sim.process_job[&p])));
            }
            _ => {}
        }
    }
    sim.events.extend(arrivals.map(|(t, j)| (t, j, true)));
    sim
}

/// The controller's core and what it has told each node so far.
struct Runtime {
    core: ControllerCore,
    nodes: u32,
    schedules: Vec<Option<Schedule>>,
    /// Per runtime job id: (node, CPUs of that node) of each node it started on.
    cpus: BTreeMap<u64, Vec<(u32, Vec<u32>)>>,
    /// Per running job: when it started (ns), for the CPU time its nodes report.
    started_ns: BTreeMap<u64, u64>,
    now_ns: u64,
}

impl Runtime {
    fn new(cfg: &SimConfig) -> Runtime {
        let settings = ControllerSettings {
            slice_ns: cfg.costs.gang_quantum_ns,
            plan: cfg.plan_settings(),
            private_data: false,
            nodes: (0..cfg.nodes).map(|node| format!("n{node}")).collect(),
            slurm_time: None,
            ..ControllerSettings::default()
        };
        let core = ControllerCore::open(settings, Box::<MemoryRecords>::default(), Loaded::default(), Now::default());
        let mut runtime = Runtime {
            core,
            nodes: cfg.nodes,
            schedules: vec![None; cfg.nodes as usize],
            cpus: BTreeMap::new(),
            started_ns: BTreeMap::new(),
            now_ns: 0,
        };
        for node in 0..cfg.nodes {
            let hello = AgentHello::new(&format!("n{node}"), cfg.cpus_per_node, 1 << 30, "test");
            runtime.core.agent_connected(Now::default(), &hello).expect("agent");
        }
        runtime.read_agents();
        runtime
    }

    fn now(&self) -> Now {
        Now { mono_ns: self.now_ns, unix_ms: 1_700_000_000_000 + self.now_ns / 1_000_000 }
    }

    /// Time moves to `t_ns`: every node reports its jobs busy since they started (so the idle rule, on, finds
    /// none idle), as an agent reports once a second.
    fn advance_to(&mut self, t_ns: u64) {
        self.now_ns = self.now_ns.max(t_ns);
        let now = self.now();
        for node in 0..self.nodes {
            let jobs = self
                .cpus
                .iter()
                .filter(|(id, _)| self.started_ns.contains_key(id))
                .filter_map(|(&job, places)| {
                    let cpus = places.iter().find(|(n, _)| *n == node)?.1.len() as u64;
                    let cpu_ns = (self.now_ns - self.started_ns[&job]) * cpus;
                    Some(cosched_runtime::wire::protocol::JobUsage { job, cpu_ns, pids: vec![1], frozen: false })
                })
                .collect();
            self.core.agent_event(now, &format!("n{node}"), report(jobs));
        }
        self.read_agents();
    }

    /// Jobs started since the last look.
    fn read_agents(&mut self) -> Vec<u64> {
        let mut started = Vec::new();
        for (node, message) in self.core.take_effects().to_agents {
            let node: usize = node[1..].parse().expect("a node named n<i>");
            match message {
                ToAgent::Schedule(schedule) => self.schedules[node] = Some(schedule),
                ToAgent::Start(start) => {
                    self.cpus.entry(start.job).or_default().push((node as u32, start.cpus));
                    self.started_ns.insert(start.job, self.now_ns);
                    started.push(start.job);
                }
                _ => {}
            }
        }
        started.sort_unstable();
        started.dedup();
        started
    }

    fn submit(&mut self, tasks: u32) {
        let user = Identity { uid: 1000, gid: 1000, admin: false };
        let request =
            Request::Submit(SubmitRequest { tasks, ..SubmitRequest::new(vec!["/bin/true".into()], "/".into()) });
        let reply = self.core.handle(self.now(), &user, request, "token".into());
        assert!(reply.is_ok(), "submit refused: {reply:?}");
    }

    fn finish(&mut self, id: u64) {
        let now = self.now();
        for (node, _) in self.cpus[&id].clone() {
            let ended = FromAgent::Ended { job: id, exit_code: Some(0), error: None, cpu_ns: None };
            self.core.agent_event(now, &format!("n{node}"), ended);
        }
        self.started_ns.remove(&id);
    }

    /// The job CPU `cpu` of `node` runs in clock slice `slice`, as its agent decides.
    fn job_on(&self, node: u32, cpu: u32, slice: u64) -> Option<u64> {
        let schedule = self.schedules[node as usize].as_ref()?;
        target_jobs(schedule, Some(slice))
            .into_iter()
            .find(|id| self.cpus[id].iter().any(|(n, cpus)| *n == node && cpus.contains(&cpu)))
    }
}

/// The simulator numbers jobs from 0 in arrival order; the controller from 1 in submission order.
fn runtime_id(sim_job: u32) -> u64 {
    u64::from(sim_job) + 1
}

#[test]
fn the_simulator_and_the_runtime_make_the_same_placement_and_slot_decisions() {
    let (cfg, jobs) = scenario();
    let sim = simulate(&cfg, &jobs);
    let mut runtime = Runtime::new(&cfg);
    let quantum_ns = cfg.costs.gang_quantum_ns;
    let mut switches = sim.switches.iter().peekable();
    let mut slices_compared = 0;
    let mut fill_ins_seen = false;
    for &(t, j, arrived) in &sim.events {
        // Every gang slice that began before this event: both drivers run the same job on every CPU.
        while let Some(&&(switch_t, cpu, sim_job)) = switches.peek().filter(|s| s.0 < t) {
            let (node, local_cpu) = (cpu / CPUS_PER_NODE, cpu % CPUS_PER_NODE);
            let runtime_job = runtime.job_on(node, local_cpu, switch_t / quantum_ns);
            assert_eq!(runtime_job, sim_job.map(runtime_id), "CPU {cpu} in the slice at {switch_t} ns");
            slices_compared += 1;
            switches.next();
        }
        runtime.advance_to(t);
        if arrived {
            runtime.submit(jobs[j as usize].tasks);
        } else {
            runtime.finish(runtime_id(j));
        }
        let started_here: Vec<u64> =
            sim.start_ns.iter().filter(|(_, &s)| s == t).map(|(&j, _)| runtime_id(j)).collect();
        assert_eq!(runtime.read_agents(), started_here, "jobs started at {t} ns");
        for id in started_here {
            let sim_cpus: Vec<(u32, u32)> =
                sim.cpus[&(id as u32 - 1)].iter().map(|c| (c / CPUS_PER_NODE, c % CPUS_PER_NODE)).collect();
            let runtime_cpus: Vec<(u32, u32)> =
                runtime.cpus[&id].iter().flat_map(|(n, cpus)| cpus.iter().map(move |&c| (*n, c))).collect();
            assert_eq!(runtime_cpus, sim_cpus, "CPUs of job {id}");
        }
        let rows_in_use = runtime.schedules.iter().flatten().map(|s| s.rows.len()).max().unwrap_or(0);
        fill_ins_seen |= runtime.schedules.iter().flatten().any(|s| {
            s.rows.iter().flatten().filter(|&&id| s.rows.iter().filter(|row| row.contains(&id)).count() > 1).count() > 0
        }) && rows_in_use > 1;
    }
    assert!(slices_compared > 50, "the scenario must exercise the cycle ({slices_compared} CPU slices compared)");
    assert!(fill_ins_seen, "the scenario must exercise fill-ins");
}

/// A node's CPU time at a job's end replaces its last report (which runs up to a report period behind), never
/// lowers it, and counts toward the job's total.
#[test]
fn a_nodes_cpu_time_at_the_end_of_a_job_is_kept() {
    let cfg = SimConfig { nodes: 2, cpus_per_node: 1, ..SimConfig::default() };
    let mut runtime = Runtime::new(&cfg);
    runtime.submit(2);
    let job = runtime.read_agents()[0];
    let usage = |cpu_ns| cosched_runtime::wire::protocol::JobUsage { job, cpu_ns, pids: vec![], frozen: false };
    let now = runtime.now();
    runtime.core.agent_event(now, "n0", report(vec![usage(100)]));
    runtime.core.agent_event(now, "n1", report(vec![usage(900)]));
    let ended = |cpu_ns| FromAgent::Ended { job, exit_code: Some(0), error: None, cpu_ns: Some(cpu_ns) };
    runtime.core.agent_event(now, "n0", ended(400));
    runtime.core.agent_event(now, "n1", ended(700)); // below its report: the report stands
    let user = Identity { uid: 1000, gid: 1000, admin: false };
    let reply = runtime.core.handle(now, &user, Request::Status {}, String::new());
    let Ok(cosched_runtime::wire::protocol::ReplyData::Status(status)) = reply else { panic!("{reply:?}") };
    let record = status.jobs.iter().find(|j| j.id == job).unwrap();
    assert!(record.state.is_over(), "{record:?}");
    assert_eq!(record.cpu_ns, 400 + 900, "{record:?}");
}

/// A node's periodic report of its jobs' usage.
fn report(jobs: Vec<cosched_runtime::wire::protocol::JobUsage>) -> FromAgent {
    FromAgent::usage_report(jobs)
}
