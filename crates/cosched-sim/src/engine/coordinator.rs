//! Who decides which jobs start, where, and in which rows: the model of a scheme's plan (`Coscheduler`, the
//! study's schemes), or cosched's controller itself (`ControllerCore`, the daemon's decisions: admission, rows, the
//! idle rule, time limits, history), for the schemes whose rules are the runtime's (GS-cosched and
//! GS-cosched-kernel). The controller's agents are then the simulated nodes: they say hello, start what the core
//! tells them to start, report their jobs' CPU time at the agent's period and say when a job's processes ended,
//! and the core is ticked at the daemon's period, all in simulated time.

use crate::SimConfig;
use cosched_control::controller::core::{ControllerCore, Loaded, MemoryRecords, Now};
use cosched_control::controller::{ControllerSettings, JobLimits};
use cosched_control::wire::jobs::Identity;
use cosched_control::wire::protocol::{
    AgentHello, FromAgent, JobUsage, ReplyData, Request, SubmitRequest, ToAgent, REPORT_PERIOD,
};
use cosched_core::JobId;
use cosched_policy::cluster::PlanJob;
use cosched_policy::{Coscheduler, Mode};
use std::collections::BTreeMap;

/// The wall clock a simulated controller reads at simulated time 0 (any fixed instant: runs must replay).
const EPOCH_UNIX_MS: u64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// How long the simulated controller keeps an ended job.
const HISTORY_KEPT: std::time::Duration = std::time::Duration::from_secs(1);

/// The one user who submits a simulated workload.
const SUBMITTER: Identity = Identity { uid: 1000, gid: 1000, admin: false };

/// What a node's agent reports of one job: (job, CPU time its processes used on the node, those processes).
pub(crate) type JobOnNode = (u32, u64, Vec<i32>);

/// Every reporting node's jobs, by node.
pub(crate) type UsageByNode = BTreeMap<u32, Vec<JobOnNode>>;

pub(crate) enum Coordinator {
    Model(Box<Coscheduler>),
    Controller(Box<ControllerDriver>),
}

impl Coordinator {
    pub(crate) fn for_run(cfg: &SimConfig) -> Coordinator {
        if cfg.scheme.runs_the_controller() {
            Coordinator::Controller(Box::new(ControllerDriver::new(cfg)))
        } else {
            Coordinator::Model(Box::new(Coscheduler::new(cfg.plan_settings(), cfg.cluster_shape())))
        }
    }

    /// The coscheduler holding the plan the nodes follow (under the controller, the core's own).
    pub(crate) fn coscheduler(&self) -> &Coscheduler {
        match self {
            Coordinator::Model(cosched) => cosched,
            Coordinator::Controller(driver) => driver.core.coscheduler(),
        }
    }

    /// Job `j` (`cpus` CPUs, asking for `requested_ns` of wall time) arrives at `run_ns`: the jobs that start, in
    /// the order they start.
    pub(crate) fn arrive(&mut self, j: u32, mode: Mode, cpus: u32, requested_ns: u64, run_ns: u64) -> Vec<u32> {
        match self {
            Coordinator::Model(cosched) => {
                let job = PlanJob { requested_ns: Some(requested_ns), ..PlanJob::new(JobId(j.into()), mode, cpus) };
                sim_jobs(cosched.arrive(job, run_ns))
            }
            Coordinator::Controller(driver) => driver.submit(j, mode, cpus, run_ns),
        }
    }

    /// Job `j` ended at `run_ns`, having used `cpu_ns_by_node` on each of its nodes: the jobs that start.
    pub(crate) fn finish(&mut self, j: u32, run_ns: u64, cpu_ns_by_node: &[(u32, u64)]) -> Vec<u32> {
        match self {
            Coordinator::Model(cosched) => sim_jobs(cosched.finish(JobId(j.into()), run_ns)),
            Coordinator::Controller(driver) => driver.ended(j, run_ns, cpu_ns_by_node),
        }
    }

    /// Job `j`, which the coordinator started, has processes on its CPUs.
    pub(crate) fn started(&mut self, j: u32) {
        if let Coordinator::Model(cosched) = self {
            cosched.started(JobId(j.into()));
        }
    }

    /// The CPUs (numbered across the machine, in rank order) and matrix rows of running job `j`.
    pub(crate) fn placement(&self, j: u32, cpus_per_node: u32) -> (Vec<u32>, Vec<u32>) {
        let (node_cpus, rows) = self.coscheduler().placement(self.plan_id(j)).expect("a placed job");
        #[cfg(debug_assertions)]
        if let Coordinator::Controller(driver) = self {
            // The agents were told which CPUs to start it on: they must be the plan's.
            let planned: Vec<(u32, Vec<u32>)> = node_cpus.iter().map(|nc| (nc.node, nc.cpus.clone())).collect();
            assert_eq!(driver.started_on[&j], planned, "job {j}: the agents were told other CPUs than the plan's");
        }
        let cpus = node_cpus.iter().flat_map(|nc| nc.cpus.iter().map(|&c| nc.node * cpus_per_node + c)).collect();
        (cpus, rows)
    }

    /// The simulator's job of a job of the plan.
    pub(crate) fn sim_job(&self, id: JobId) -> u32 {
        match self {
            Coordinator::Model(_) => id.0 as u32,
            Coordinator::Controller(_) => ControllerDriver::sim_job(id.0),
        }
    }

    fn plan_id(&self, j: u32) -> JobId {
        match self {
            Coordinator::Model(_) => JobId(j.into()),
            Coordinator::Controller(_) => JobId(ControllerDriver::controller_id(j)),
        }
    }

    /// When the nodes next report and the controller next does its periodic work (`None`: never, the model).
    pub(crate) fn next_report_ns(&self) -> Option<u64> {
        match self {
            Coordinator::Model(_) => None,
            Coordinator::Controller(driver) => Some(driver.next_report_ns),
        }
    }

    /// The nodes report their jobs' CPU time at `run_ns` (`usage`: per node, (job, CPU ns, its processes)), and the
    /// controller does its periodic work if due. Whether the plan changed.
    pub(crate) fn report(&mut self, run_ns: u64, usage: &UsageByNode) -> bool {
        match self {
            Coordinator::Model(_) => false,
            Coordinator::Controller(driver) => driver.report(run_ns, usage),
        }
    }
}

fn sim_jobs(ids: Vec<JobId>) -> Vec<u32> {
    ids.into_iter().map(|id| id.0 as u32).collect()
}

/// The controller's core with the simulated nodes as its agents.
pub(crate) struct ControllerDriver {
    core: ControllerCore,
    /// Per started job: the (node, CPUs of that node) its agents were told to start it on.
    started_on: BTreeMap<u32, Vec<(u32, Vec<u32>)>>,
    next_report_ns: u64,
    next_tick_ns: u64,
    report_period_ns: u64,
    tick_period_ns: u64,
}

impl ControllerDriver {
    fn new(cfg: &SimConfig) -> ControllerDriver {
        let settings = ControllerSettings {
            slice_ns: cfg.costs.gang_quantum_ns,
            plan: cfg.plan_settings(),
            nodes: (0..cfg.nodes).map(node_name).collect(),
            // A trace's jobs were all accepted by its site: no bound on the jobs queued.
            job_limits: JobLimits { per_user: usize::MAX, total: usize::MAX, ..JobLimits::default() },
            // Ended jobs leave the core within a second (the run keeps its own records): the daemon's month of
            // history would make every tick walk every job of the trace so far. Retention decides nothing else.
            keep_finished: HISTORY_KEPT,
            keep_history: HISTORY_KEPT,
            slurm_time: None,
            ..ControllerSettings::default()
        };
        let tick_period_ns = settings.tick_period().as_nanos() as u64;
        let core = ControllerCore::open(settings, Box::<MemoryRecords>::default(), Loaded::default(), now_at(0));
        let mut driver = ControllerDriver {
            core,
            started_on: BTreeMap::new(),
            next_report_ns: REPORT_PERIOD.as_nanos() as u64,
            next_tick_ns: tick_period_ns,
            report_period_ns: REPORT_PERIOD.as_nanos() as u64,
            tick_period_ns,
        };
        for node in 0..cfg.nodes {
            // The model has no memory limits, and jobs ask for none.
            let hello = AgentHello::new(&node_name(node), cfg.cpus_per_node, u64::MAX / 2, "simulated");
            driver.core.agent_connected(now_at(0), &hello).expect("a configured node's agent is accepted");
        }
        driver.follow_effects();
        driver
    }

    /// The controller numbers jobs from 1 in submission order; the simulator from 0 in arrival order.
    fn controller_id(j: u32) -> u64 {
        u64::from(j) + 1
    }

    fn sim_job(id: u64) -> u32 {
        (id - 1) as u32
    }

    fn submit(&mut self, j: u32, mode: Mode, cpus: u32, run_ns: u64) -> Vec<u32> {
        let request = SubmitRequest {
            tasks: cpus,
            local: mode == Mode::Local,
            name: format!("job-{j}"),
            ..SubmitRequest::new(vec!["simulated".into()], "/".into())
        };
        let reply = self.core.handle(now_at(run_ns), &SUBMITTER, Request::Submit(request), format!("token-{j}"));
        match reply {
            Ok(ReplyData::Submit(submitted)) => {
                assert_eq!(submitted.job, Self::controller_id(j), "the controller numbers jobs as they arrive")
            }
            other => panic!("the controller refused job {j} of {cpus} CPUs: {other:?}"),
        }
        self.follow_effects()
    }

    fn ended(&mut self, j: u32, run_ns: u64, cpu_ns_by_node: &[(u32, u64)]) -> Vec<u32> {
        self.started_on.remove(&j);
        let job = Self::controller_id(j);
        for &(node, cpu_ns) in cpu_ns_by_node {
            let ended = FromAgent::Ended { job, exit_code: Some(0), error: None, cpu_ns: Some(cpu_ns) };
            self.core.agent_event(now_at(run_ns), &node_name(node), ended);
        }
        self.follow_effects()
    }

    fn report(&mut self, run_ns: u64, usage: &UsageByNode) -> bool {
        let now = now_at(run_ns);
        let rows_before = self.core.coscheduler().slot_count();
        let placed_before = self.placed_jobs();
        for (&node, jobs) in usage {
            let jobs = jobs
                .iter()
                .map(|(j, cpu_ns, pids)| JobUsage {
                    job: Self::controller_id(*j),
                    cpu_ns: *cpu_ns,
                    pids: pids.clone(),
                    frozen: false,
                })
                .collect();
            self.core.agent_event(now, &node_name(node), FromAgent::usage_report(jobs));
        }
        self.next_report_ns = next_after(self.next_report_ns, run_ns, self.report_period_ns);
        if run_ns >= self.next_tick_ns {
            if let Some((_, fingerprint)) = self.core.tick(now) {
                self.core.status_written(fingerprint);
            }
            self.next_tick_ns = next_after(self.next_tick_ns, run_ns, self.tick_period_ns);
        }
        let started = self.follow_effects();
        self.refuse_idle_jobs();
        assert!(started.is_empty(), "jobs {started:?} started without an arrival or an end");
        self.core.coscheduler().slot_count() != rows_before || self.placed_jobs() != placed_before
    }

    /// The running jobs' rows, as the plan has them.
    fn placed_jobs(&self) -> Vec<(JobId, Vec<u32>)> {
        self.started_on.keys().filter_map(|&j| Some((JobId(Self::controller_id(j)), self.rows_of(j)?))).collect()
    }

    fn rows_of(&self, j: u32) -> Option<Vec<u32>> {
        Some(self.core.coscheduler().placement(JobId(Self::controller_id(j)))?.1)
    }

    /// A job the idle rule took out of the matrix runs beside the gangs under the node's own scheduler, which the
    /// simulated nodes do not model: say so rather than leave it stopped. (A simulated job uses no CPU for
    /// `idle_revert`, ten minutes, only if its program sleeps that long.)
    fn refuse_idle_jobs(&self) {
        let running = self.started_on.keys().filter_map(|&j| self.core.jobs().get(&Self::controller_id(j)));
        let idle: Vec<u64> = running.filter(|job| job.idle || job.mode == Mode::Local).map(|job| job.id).collect();
        assert!(
            idle.is_empty(),
            "jobs {idle:?} used no CPU for the idle rule's {} s and would run outside the matrix, which the \
             simulated nodes do not model",
            self.core.settings().idle_revert.as_secs()
        );
    }

    /// Read what the core told the agents: the jobs it started, in order.
    fn follow_effects(&mut self) -> Vec<u32> {
        let mut started = Vec::new();
        for (node, message) in self.core.take_effects().to_agents {
            if let ToAgent::Start(start) = message {
                let j = Self::sim_job(start.job);
                if !started.contains(&j) {
                    started.push(j);
                }
                self.started_on.entry(j).or_default().push((node_index(&node), start.cpus));
            }
        }
        started
    }
}

fn node_name(node: u32) -> String {
    format!("n{node}")
}

fn node_index(name: &str) -> u32 {
    name.strip_prefix('n').and_then(|n| n.parse().ok()).expect("a simulated node's name")
}

/// The controller's clocks at simulated instant `run_ns`.
fn now_at(run_ns: u64) -> Now {
    Now { mono_ns: run_ns, unix_ms: EPOCH_UNIX_MS + run_ns / 1_000_000 }
}

/// The first instant of the series `due + k * period` after `now`.
fn next_after(due_ns: u64, now_ns: u64, period_ns: u64) -> u64 {
    if now_ns < due_ns {
        return due_ns;
    }
    due_ns + ((now_ns - due_ns) / period_ns + 1) * period_ns
}
