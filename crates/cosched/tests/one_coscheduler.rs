//! One coscheduler, two drivers. The simulator's engine (simulated time) and
//! the runtime's controller with the agents' slot choice (real time) are given
//! the same job sequence, and must make the same decisions: which jobs start
//! after each arrival and finish, on which CPUs, and which job every CPU runs
//! in every gang slice.
//!
//! The simulator runs cosched's own gang scheme (`GS-cosched`); its trace says
//! what it decided. The same arrivals and finishes are then replayed, in the
//! simulator's order, to a controller in this process whose agents are
//! capture buffers; what it tells the agents is compared with the trace.

use cosched_core::SimTime;
use cosched_runtime::agent::switcher::target_jobs;
use cosched_runtime::controller::{Controller, ControllerSettings};
use cosched_runtime::wire::jobs::Identity;
use cosched_runtime::wire::protocol::{AgentHello, FromAgent, Request, Schedule, SubmitRequest, ToAgent};
use cosched_sim::run::{run, RunOptions};
use cosched_sim::trace::TraceKind;
use cosched_sim::{Program, Prologue, Scheme, SimConfig, SimJob};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// An agent's connection: every line the controller sends, kept.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    fn take_messages(&self) -> Vec<ToAgent> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        let text = String::from_utf8(bytes).expect("JSON lines");
        text.lines().map(|line| serde_json::from_str(line).expect("a message to an agent")).collect()
    }
}

/// The controller and what it has told each node so far.
struct Runtime {
    controller: Controller,
    agents: Vec<Capture>,
    schedules: Vec<Option<Schedule>>,
    /// Per runtime job id: (node, CPUs of that node) of each node it started on.
    cpus: BTreeMap<u64, Vec<(u32, Vec<u32>)>>,
    _state_dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Runtime {
    fn new(cfg: &SimConfig) -> Runtime {
        let dir = tempfile::Builder::new().prefix("cosched-one-coscheduler-").tempdir().unwrap().keep();
        let settings = ControllerSettings {
            state_dir: dir.clone(),
            slice_ns: cfg.costs.gang_quantum_ns,
            plan: cfg.plan_settings(),
            idle_revert: Duration::from_secs(86_400),
            idle_forget: Duration::from_secs(2 * 86_400),
            admin_uids: vec![],
            kill_wait: Duration::from_secs(1),
            keep_finished: Duration::from_secs(86_400),
            keep_history: Duration::from_secs(30 * 86_400),
            private_data: false,
            metrics: cosched_runtime::controller::metrics::MetricsAccess::Off,
            nodes: (0..cfg.nodes).map(|node| format!("n{node}")).collect(),
            job_limits: cosched_runtime::controller::JobLimits::default(),
            empty_job_grace: Duration::from_secs(86_400),
            slurm_time: None,
        };
        let controller = Controller::open(settings).expect("a controller on a fresh state directory");
        let mut agents = Vec::new();
        for node in 0..cfg.nodes {
            let hello = AgentHello {
                node: format!("n{node}"),
                cpus: cfg.cpus_per_node,
                mem_bytes: 1 << 30,
                adopted: vec![],
                freezer: "test".into(),
                features: vec![],
            };
            let capture = Capture::default();
            controller.agent_connected(&hello, Arc::new(Mutex::new(Box::new(capture.clone())))).expect("agent");
            agents.push(capture);
        }
        let schedules = vec![None; cfg.nodes as usize];
        let mut runtime = Runtime { controller, agents, schedules, cpus: BTreeMap::new(), _state_dir: TempDir(dir) };
        runtime.read_agents();
        runtime
    }

    /// Jobs started since the last look.
    fn read_agents(&mut self) -> Vec<u64> {
        let mut started = Vec::new();
        for (node, agent) in self.agents.iter().enumerate() {
            for message in agent.take_messages() {
                match message {
                    ToAgent::Schedule(schedule) => self.schedules[node] = Some(schedule),
                    ToAgent::Start(start) => {
                        self.cpus.entry(start.job).or_default().push((node as u32, start.cpus));
                        started.push(start.job);
                    }
                    _ => {}
                }
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
        let reply = self.controller.handle(&user, request);
        assert!(reply.ok, "submit refused: {:?}", reply.error);
    }

    fn finish(&mut self, id: u64) {
        for (node, _) in self.cpus[&id].clone() {
            self.controller.agent_event(
                &format!("n{node}"),
                FromAgent::Ended { job: id, exit_code: Some(0), error: None, cpu_ns: None },
            );
        }
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
    let report = |cpu_ns| FromAgent::Report {
        jobs: vec![usage(cpu_ns)],
        load_avg: 0.0,
        switches: 0,
        switch_errors: 0,
        slice_starts: vec![],
        switch_latencies_ns: vec![],
        stuck_jobs: vec![],
    };
    runtime.controller.agent_event("n0", report(100));
    runtime.controller.agent_event("n1", report(900));
    let ended = |cpu_ns| FromAgent::Ended { job, exit_code: Some(0), error: None, cpu_ns: Some(cpu_ns) };
    runtime.controller.agent_event("n0", ended(400));
    runtime.controller.agent_event("n1", ended(700)); // below its report: the report stands
    let user = Identity { uid: 1000, gid: 1000, admin: false };
    let reply = runtime.controller.handle(&user, Request::Status {});
    let Some(cosched_runtime::wire::protocol::ReplyData::Status(status)) = reply.data else {
        panic!("{:?}", reply.error)
    };
    let record = status.jobs.iter().find(|j| j.id == job).unwrap();
    assert!(record.state.is_over(), "{record:?}");
    assert_eq!(record.cpu_ns, 400 + 900, "{record:?}");
}
