//! The simulation tester: the controller's real core, driven from a seed by simulated agents, users, a network
//! and faults, with the controller's invariants checked after every step.
//!
//! What is simulated is what the daemon's shell and the agents would do, no more:
//!
//! - **The network** is the daemon's: each agent's link is one ordered stream (TCP), with a delay drawn per
//!   message, so messages reorder only across links and against users' requests. A stream does not lose or
//!   duplicate a message; it breaks (a *link drop*: both ends see it, what was in flight is lost, the agent says
//!   hello again a second later, as the real agent does). A *partition* holds a node away for seconds.
//!   Duplicates come from the agents, at least once: an agent whose link dropped says again, on the new link,
//!   the ends it had sent on the old one.
//! - **Faults**: the controller crashes and restarts from what its records hold (every link drops; anything only
//!   in its memory is lost); an agent crashes and restarts with its jobs frozen or running, as its cgroups hold
//!   them; writes fail for a while (then every write fails, as a full or read-only disk makes them); the wall
//!   clock steps forwards or back (the monotonic one never does).
//! - **Users** submit (some with time limits), kill, suspend and resume jobs, theirs or another's, and read the
//!   status; all share one group, as users of a cluster usually do.
//!
//! The invariants (`World::check`): no CPU of a node in two jobs of one slot; every job the core accepted has a
//! record, and a request's change is in the records when its reply leaves; the records hold what memory holds
//! once storage works again; no job left frozen that its user did not suspend (or put in the standby class, which
//! runs only in cells left free) for longer than
//! `FROZEN_BOUND_NS` after its node's agent is connected (a lost controller must not leave jobs frozen: its agents keep switching on their last
//! schedule, so this holds only if every schedule sent runs each job); a user is refused others' jobs and sees
//! no other user's command; each job with a time limit is charged, in its slots, exactly the share of the time
//! the plan gave it (less what a restart loses: at most `time_limit::SAVE_EVERY`), and is ended at its limit.
//!
//! A failure names the seed, the step and the invariant, and prints the last inputs: the same seed replays it
//! exactly (`cosched simtest --seed`).

use crate::controller::core::NodeRow;
use crate::controller::core::{ControllerCore, Loaded, MemoryRecords, Now, Records};
use crate::controller::ControllerSettings;
use crate::wire::jobs::{Identity, JobRecord, JobState};
use crate::wire::protocol::{
    AdoptedJob, AgentHello, FromAgent, JobUsage, ReplyData, Request, Schedule, StorageStatus, SubmitRequest, ToAgent,
};
use cosched_core::rng::{Rng, StreamSeed};
use cosched_policy::cluster::JobClass;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a job its user did not suspend may stay frozen on a node: an agent's reconnection (a second), the
/// controller's answer and one cycle of the plan, with room.
pub const FROZEN_BOUND_NS: u64 = 5 * SECOND_NS;

const SECOND_NS: u64 = 1_000_000_000;
const MS_NS: u64 = 1_000_000;
/// How often an agent reports, and how long it waits before saying hello again.
const REPORT_PERIOD_NS: u64 = SECOND_NS;
const RECONNECT_NS: u64 = SECOND_NS;
/// The controller's tick (`daemon::start_controller`: every slice, at least 50 ms apart).
const TICK_NS: u64 = 100 * MS_NS;
const FIRST_UID: u32 = 1000;
/// Every simulated user's group: one group, as on most clusters.
const USERS_GID: u32 = 100;

/// One run of the tester.
#[derive(Clone, Debug)]
pub struct TesterSettings {
    pub seed: u64,
    pub agents: usize,
    pub cpus_per_agent: u32,
    /// Inputs (requests, messages, ticks, faults) to run.
    pub steps: usize,
    pub users: u32,
    /// Draw faults (crashes, link drops, partitions, failing writes, clock steps).
    pub faults: bool,
    /// Inputs a failure shows (the last ones).
    pub trace: usize,
}

impl Default for TesterSettings {
    fn default() -> TesterSettings {
        TesterSettings { seed: 1, agents: 8, cpus_per_agent: 4, steps: 2_000, users: 4, faults: true, trace: 40 }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub steps: usize,
    pub requests: u64,
    pub jobs_accepted: u64,
    pub jobs_ended: u64,
    pub messages_to_agents: u64,
    pub messages_from_agents: u64,
    pub controller_restarts: u64,
    pub agent_restarts: u64,
    pub link_drops: u64,
    pub write_failures: u64,
    pub clock_steps: u64,
    pub simulated_ns: u64,
}

impl Summary {
    /// Add another run's counts to these.
    pub fn add(&mut self, other: &Summary) {
        self.steps += other.steps;
        self.requests += other.requests;
        self.jobs_accepted += other.jobs_accepted;
        self.jobs_ended += other.jobs_ended;
        self.messages_to_agents += other.messages_to_agents;
        self.messages_from_agents += other.messages_from_agents;
        self.controller_restarts += other.controller_restarts;
        self.agent_restarts += other.agent_restarts;
        self.link_drops += other.link_drops;
        self.write_failures += other.write_failures;
        self.clock_steps += other.clock_steps;
        self.simulated_ns += other.simulated_ns;
    }
}

/// An invariant that did not hold.
#[derive(Clone, Debug)]
pub struct Failure {
    pub seed: u64,
    pub step: usize,
    pub invariant: String,
    /// The last inputs, oldest first.
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} failed at step {}: {}", self.seed, self.step, self.invariant)?;
        writeln!(f, "the last {} inputs (replay: cosched simtest --seed {}):", self.trace.len(), self.seed)?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Run one seed: `Ok` with what happened, or the first invariant that failed.
pub fn run(settings: &TesterSettings) -> Result<Summary, Failure> {
    let mut world = World::new(settings);
    for step in 0..settings.steps {
        world.step = step;
        world.advance();
        if let Err(invariant) = world.check() {
            return Err(Failure { seed: settings.seed, step, invariant, trace: world.trace.into() });
        }
    }
    world.summary.steps = settings.steps;
    world.summary.simulated_ns = world.now_ns;
    Ok(world.summary)
}

/// Records in memory that the tester keeps when the core crashes.
#[derive(Clone, Default)]
struct SharedRecords(Arc<Mutex<MemoryRecords>>);

impl Records for SharedRecords {
    fn insert_job(&mut self, job: &JobRecord) -> Result<(), String> {
        self.0.lock().unwrap().insert_job(job)
    }
    fn save_job(&mut self, job: &JobRecord) -> Result<(), String> {
        self.0.lock().unwrap().save_job(job)
    }
    fn save_job_or_hold(&mut self, job: &JobRecord) {
        self.0.lock().unwrap().save_job_or_hold(job)
    }
    fn delete_jobs(&mut self, ids: &[u64], next_job_id: u64) {
        self.0.lock().unwrap().delete_jobs(ids, next_job_id)
    }
    fn save_node_or_hold(&mut self, node: &NodeRow) {
        self.0.lock().unwrap().save_node_or_hold(node)
    }
    fn maintain(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]) {
        self.0.lock().unwrap().maintain(jobs, nodes)
    }
    fn status(&self) -> StorageStatus {
        self.0.lock().unwrap().status()
    }
}

/// A message on its way, ordered by arrival (then by when it was sent).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at_ns: u64,
    seq: u64,
    node: usize,
    /// The link it was sent on: a message of a dropped link never arrives.
    link: u64,
    to_agent: bool,
    payload: String,
}

/// A simulated agent: its jobs as its cgroups hold them, the schedule it follows.
struct Agent {
    name: String,
    /// The link it is connected on (`None`: away).
    link: Option<u64>,
    /// When it says hello again.
    hello_at_ns: Option<u64>,
    jobs: BTreeMap<u64, AgentJob>,
    schedule: Option<Schedule>,
    next_report_ns: u64,
    /// Ends it has sent, said again on a new link (at least once).
    ends_sent: Vec<FromAgent>,
    ran_until_ns: u64,
    /// When its current link was accepted.
    connected_since_ns: u64,
}

struct AgentJob {
    owner: u32,
    token: String,
    /// The node's CPUs it was given.
    cpus: Vec<u32>,
    work_left_ns: u64,
    cpu_ns: u64,
    /// When a kill ends it.
    ends_at_ns: Option<u64>,
    /// Since when it has been frozen by its schedule (not running in any slot).
    frozen_since_ns: Option<u64>,
}

struct World {
    settings: TesterSettings,
    rng: Rng,
    step: usize,
    now_ns: u64,
    /// The wall clock's offset from the monotonic one (clock steps move it).
    wall_offset_ms: i64,
    core: ControllerCore,
    records: SharedRecords,
    agents: Vec<Agent>,
    network: BinaryHeap<std::cmp::Reverse<InFlight>>,
    next_seq: u64,
    next_link: u64,
    next_tick_ns: u64,
    /// Jobs the core accepted, with their owners.
    accepted: BTreeMap<u64, u32>,
    /// Jobs their users suspended (and not resumed since).
    suspended_by_user: BTreeSet<u64>,
    /// When each job last stopped being suspended by its user: it may have been frozen since before.
    resumed_at_ns: BTreeMap<u64, u64>,
    /// What each job with a time limit should have been charged, in ns, by the plan since it started.
    expected_in_slot_ns: BTreeMap<u64, f64>,
    /// Partitions: a node away until then.
    away_until_ns: BTreeMap<usize, u64>,
    /// Per node, when the last message on its link arrives, each way (a stream keeps its order).
    stream_tail_ns: Vec<[u64; 2]>,
    /// How much less than the plan's share a job may have been charged: what restarts lose.
    in_slot_slack_ns: BTreeMap<u64, f64>,
    /// A user's request whose effect `check` looks at.
    pending_check: Option<RequestCheck>,
    violations: Vec<String>,
    trace: VecDeque<String>,
    summary: Summary,
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Kill,
    Suspend,
    Resume,
    /// SIGTERM, by `kill --signal`.
    Signal,
    /// Another class (raising one is an administrator's).
    Class(&'static str),
    Usage,
}

/// A request on a job and what the job was before it.
struct RequestCheck {
    id: u64,
    /// The request changes the job (its change must be written before the reply).
    changes: bool,
    owner: Option<u32>,
    who: Identity,
    ok: bool,
    before: Option<JobRecord>,
}

impl World {
    fn new(settings: &TesterSettings) -> World {
        let records = SharedRecords::default();
        let mut world = World {
            settings: settings.clone(),
            rng: StreamSeed(settings.seed).stream("controller simulation"),
            step: 0,
            now_ns: 0,
            wall_offset_ms: 1_700_000_000_000,
            core: open_core(settings, &records, Loaded::default(), Now::default()),
            records,
            agents: (0..settings.agents).map(|i| Agent::new(format!("node{i:04}"))).collect(),
            network: BinaryHeap::new(),
            next_seq: 0,
            next_link: 1,
            next_tick_ns: TICK_NS,
            accepted: BTreeMap::new(),
            suspended_by_user: BTreeSet::new(),
            resumed_at_ns: BTreeMap::new(),
            expected_in_slot_ns: BTreeMap::new(),
            away_until_ns: BTreeMap::new(),
            stream_tail_ns: vec![[0; 2]; settings.agents],
            in_slot_slack_ns: BTreeMap::new(),
            pending_check: None,
            violations: Vec::new(),
            trace: VecDeque::new(),
            summary: Summary::default(),
        };
        for node in 0..world.agents.len() {
            world.hello(node);
        }
        world
    }

    fn now(&self) -> Now {
        Now { mono_ns: self.now_ns, unix_ms: (self.now_ns / MS_NS) as i64 as u64 + self.wall_offset_ms.max(0) as u64 }
    }

    fn note(&mut self, line: String) {
        if self.trace.len() >= self.settings.trace.max(1) {
            self.trace.pop_front();
        }
        self.trace.push_back(format!("{:>9.3} s  {line}", self.now_ns as f64 / 1e9));
    }

    /// One step: time moves to the next thing that happens (a message, a report, a tick) or to a user's or a
    /// fault's input, whichever comes first.
    fn advance(&mut self) {
        let user_at = self.now_ns + 1 + u64::from(self.rng.below(50)) * MS_NS;
        let next_message = self.network.peek().map(|m| m.0.at_ns).unwrap_or(u64::MAX);
        let next_agent = self.agents.iter().map(Agent::next_due_ns).min().unwrap_or(u64::MAX);
        let at = user_at.min(next_message).min(next_agent).min(self.next_tick_ns);
        self.charge_plan_until(at);
        self.now_ns = at;
        self.run_agents();
        if next_message == at {
            self.deliver();
        } else if self.next_tick_ns == at {
            self.next_tick_ns += TICK_NS;
            self.tick();
        } else if user_at == at {
            self.user_or_fault();
        }
    }

    /// The time limits' model: each running job with a limit is owed its share of the plan since the last input.
    fn charge_plan_until(&mut self, at_ns: u64) {
        let plan = self.core.plan();
        let slots = plan.rows.len();
        for (id, job) in self.core.jobs() {
            if job.time_limit_s.is_none() || job.state != JobState::Running {
                continue;
            }
            let share = plan.job(cosched_core::JobId(*id)).map_or(1.0, |p| p.slice_share(slots)).clamp(0.0, 1.0);
            *self.expected_in_slot_ns.entry(*id).or_default() += (at_ns - self.now_ns) as f64 * share;
        }
    }

    fn tick(&mut self) {
        let now = self.now();
        if let Some((_, fingerprint)) = self.core.tick(now) {
            self.core.status_written(fingerprint);
        }
        self.send_effects();
        if let Err(e) = self.check_time_limits() {
            self.violations.push(e);
        }
    }

    /// Hand the core's messages to the network, on each node's current link.
    fn send_effects(&mut self) {
        let effects = self.core.take_effects();
        for line in effects.logs {
            self.note(format!("(log) {}", line.trim_start_matches("cosched controller: ")));
        }
        for (node, message) in effects.to_agents {
            let Some(index) = self.agents.iter().position(|a| a.name == node) else { continue };
            let Some(link) = self.agents[index].link else { continue };
            self.summary.messages_to_agents += 1;
            let payload = serde_json::to_string(&message).expect("a message serializes");
            self.send(index, link, true, payload);
        }
    }

    fn send(&mut self, node: usize, link: u64, to_agent: bool, payload: String) {
        // Mostly sub-millisecond; sometimes a congested link.
        let delay_ns = if self.rng.bernoulli(0.02) {
            u64::from(self.rng.below(200)) * MS_NS
        } else {
            u64::from(self.rng.below(1_000)) * 1_000
        };
        // One stream per link and direction: never before what was sent earlier on it.
        let tail = &mut self.stream_tail_ns[node][usize::from(to_agent)];
        let at_ns = (self.now_ns + delay_ns).max(*tail);
        *tail = at_ns;
        self.next_seq += 1;
        self.network.push(std::cmp::Reverse(InFlight { at_ns, seq: self.next_seq, node, link, to_agent, payload }));
    }

    fn deliver(&mut self) {
        let Some(std::cmp::Reverse(m)) = self.network.pop() else { return };
        if self.agents[m.node].link != Some(m.link) {
            return; // the link it was sent on has dropped
        }
        if m.to_agent {
            let message: ToAgent = serde_json::from_str(&m.payload).expect("a message parses");
            self.note(format!("to {}: {}", self.agents[m.node].name, short(&m.payload)));
            self.agent_receives(m.node, message);
        } else {
            let event: FromAgent = serde_json::from_str(&m.payload).expect("an event parses");
            self.summary.messages_from_agents += 1;
            let name = self.agents[m.node].name.clone();
            self.note(format!("{name} says {}", short(&m.payload)));
            let now = self.now();
            self.core.agent_event(now, &name, event);
            self.send_effects();
        }
    }

    fn agent_says(&mut self, node: usize, event: &FromAgent) {
        let Some(link) = self.agents[node].link else { return };
        let payload = serde_json::to_string(event).expect("an event serializes");
        self.send(node, link, false, payload);
    }

    fn agent_receives(&mut self, node: usize, message: ToAgent) {
        let now_ns = self.now_ns;
        let mut unreported = Vec::new();
        let answer = {
            let agent = &mut self.agents[node];
            match message {
                ToAgent::Start(start) => {
                    let work_ms = start.argv.get(1).and_then(|w| w.parse::<u64>().ok()).unwrap_or(1_000);
                    agent.jobs.entry(start.job).or_insert(AgentJob {
                        owner: start.uid,
                        token: start.token,
                        cpus: start.cpus,
                        work_left_ns: work_ms * MS_NS,
                        cpu_ns: 0,
                        ends_at_ns: None,
                        frozen_since_ns: None,
                    });
                    None
                }
                ToAgent::Schedule(schedule) => {
                    agent.schedule = Some(schedule);
                    None
                }
                ToAgent::Terminate { job, grace_ms } => {
                    if let Some(j) = agent.jobs.get_mut(&job) {
                        j.ends_at_ns.get_or_insert(now_ns + grace_ms.min(50) * MS_NS);
                    }
                    None
                }
                ToAgent::Forget { job, ack } => {
                    // As the real agent: a job whose end it has not reported yet says so, with its CPU time.
                    if let Some(ended) = agent.jobs.remove(&job) {
                        unreported.push(FromAgent::Ended {
                            job,
                            exit_code: None,
                            error: None,
                            cpu_ns: Some(ended.cpu_ns),
                        });
                    }
                    ack.map(|ack| FromAgent::Forgotten { ack, stuck: None })
                }
                ToAgent::AddPid { ack, .. } | ToAgent::RemovePid { ack, .. } => {
                    Some(FromAgent::PidMoved { ack, error: None })
                }
                ToAgent::ReadLogs { ack, .. } => Some(FromAgent::Logs { ack, files: vec![] }),
                ToAgent::Exec { ack, .. } => Some(FromAgent::ExecEnded { ack, exit_code: Some(0), error: None }),
                _ => None,
            }
        };
        for event in unreported.iter().chain(&answer) {
            self.agent_says(node, event);
        }
    }

    /// Each agent's jobs run as its schedule says; ended jobs and due reports are said, away agents say hello.
    fn run_agents(&mut self) {
        for node in 0..self.agents.len() {
            let now_ns = self.now_ns;
            if self.agents[node].hello_at_ns.is_some_and(|at| at <= now_ns)
                && self.away_until_ns.get(&node).is_none_or(|&until| until <= now_ns)
            {
                self.hello(node);
            }
            let ended = self.agents[node].run_until(now_ns);
            for event in ended {
                self.summary.jobs_ended += 1;
                self.agents[node].ends_sent.push(event.clone());
                self.agent_says(node, &event);
            }
            if self.agents[node].next_report_ns <= now_ns {
                self.agents[node].next_report_ns = now_ns + REPORT_PERIOD_NS;
                let report = self.agents[node].report();
                self.agent_says(node, &report);
            }
        }
    }

    /// An agent says hello on a new link with the jobs its cgroups hold; its ends are said again.
    fn hello(&mut self, node: usize) {
        let agent = &mut self.agents[node];
        agent.hello_at_ns = None;
        let adopted = agent
            .jobs
            .iter()
            .map(|(&job, j)| AdoptedJob { job, pids: vec![1], owner: Some(j.owner), token: Some(j.token.clone()) })
            .collect();
        let hello =
            AgentHello { adopted, ..AgentHello::new(&agent.name, self.settings.cpus_per_agent, 64 << 30, "simulated") };
        let name = agent.name.clone();
        let now = self.now();
        match self.core.agent_connected(now, &hello) {
            Ok(_) => {
                self.next_link += 1;
                self.agents[node].link = Some(self.next_link);
                self.agents[node].connected_since_ns = self.now_ns;
                let ids: Vec<u64> = hello.adopted.iter().map(|a| a.job).collect();
                self.note(format!("{name} hello with jobs {ids:?}: accepted"));
                for event in self.agents[node].ends_sent.clone() {
                    self.agent_says(node, &event);
                }
            }
            Err(reason) => {
                self.note(format!("{name} hello refused: {reason}"));
                self.agents[node].hello_at_ns = Some(self.now_ns + RECONNECT_NS);
            }
        }
        self.send_effects();
    }

    fn drop_link(&mut self, node: usize, away_ns: u64) {
        if self.agents[node].link.take().is_none() {
            return;
        }
        self.summary.link_drops += 1;
        self.agents[node].hello_at_ns = Some(self.now_ns + RECONNECT_NS.max(away_ns));
        let name = self.agents[node].name.clone();
        let now = self.now();
        self.core.agent_disconnected(now, &name);
        self.send_effects();
    }

    fn user_or_fault(&mut self) {
        let faults = self.settings.faults;
        match self.rng.below(1000) {
            0..=299 => self.submit(),
            300..=369 => self.act_on_a_job(Act::Kill),
            370..=439 => self.act_on_a_job(Act::Suspend),
            440..=509 => self.act_on_a_job(Act::Resume),
            510..=524 => self.act_on_a_job(Act::Signal),
            525..=534 => {
                let class = ["standby", "batch", "interactive"][self.rng.below(3) as usize];
                self.act_on_a_job(Act::Class(class));
            }
            535..=559 => self.act_on_a_job(Act::Usage),
            560..=659 => self.read_status(),
            660..=679 if faults => {
                let node = self.rng.below(self.agents.len() as u32) as usize;
                self.note(format!("fault: {}'s link drops", self.agents[node].name));
                self.drop_link(node, 0);
            }
            680..=684 if faults => {
                let node = self.rng.below(self.agents.len() as u32) as usize;
                let away_ns = u64::from(1 + self.rng.below(10)) * SECOND_NS;
                self.note(format!("fault: {} partitioned for {} s", self.agents[node].name, away_ns / SECOND_NS));
                self.away_until_ns.insert(node, self.now_ns + away_ns);
                self.drop_link(node, away_ns);
            }
            685..=689 if faults => self.restart_agent(),
            690..=692 if faults => self.restart_controller(),
            693..=702 if faults => self.toggle_writes(),
            703..=705 if faults => {
                let step_ms = i64::from(self.rng.below(7_200_000)) - 3_600_000;
                self.summary.clock_steps += 1;
                self.note(format!("fault: the wall clock steps {step_ms} ms"));
                self.wall_offset_ms += step_ms;
            }
            _ => {}
        }
    }

    fn user(&mut self) -> Identity {
        let uid = FIRST_UID + self.rng.below(self.settings.users.max(1));
        Identity { uid, gid: USERS_GID, admin: false }
    }

    fn submit(&mut self) {
        let who = self.user();
        let cpus = self.settings.cpus_per_agent * self.agents.len() as u32;
        let tasks = 1 + self.rng.below(self.settings.cpus_per_agent.min(cpus) * 2);
        let work_ms = 200 + self.rng.below(20_000);
        let time_limit_s = self.rng.bernoulli(0.4).then(|| u64::from(1 + self.rng.below(15)));
        let request = SubmitRequest {
            tasks: tasks.min(cpus),
            time_limit_s,
            ..SubmitRequest::new(vec!["work".into(), work_ms.to_string()], "/".into())
        };
        let token = format!("{:016x}", self.rng.next_u64());
        self.summary.requests += 1;
        let now = self.now();
        let reply = self.core.handle(now, &who, Request::Submit(request), token);
        self.note(format!(
            "uid {} submits {tasks} tasks, {work_ms} ms, limit {time_limit_s:?}: {}",
            who.uid,
            brief(&reply)
        ));
        if let Ok(ReplyData::Submit(r)) = &reply {
            self.summary.jobs_accepted += 1;
            self.accepted.insert(r.job, who.uid);
        }
        self.send_effects();
    }

    fn act_on_a_job(&mut self, act: Act) {
        let Some(&last) = self.accepted.keys().next_back() else { return };
        let id = 1 + u64::from(self.rng.below(last as u32));
        let who = self.user();
        let request = match act {
            Act::Kill => Request::Kill { job: id },
            Act::Suspend => Request::Suspend { job: id },
            Act::Resume => Request::Resume { job: id },
            Act::Signal => Request::Signal { job: id, signal: "TERM".into() },
            Act::Class(class) => Request::SetClass { job: id, class: class.into() },
            Act::Usage => Request::Usage { job: id },
        };
        self.summary.requests += 1;
        let before = self.core.jobs().get(&id).cloned();
        let now = self.now();
        let reply = self.core.handle(now, &who, request, String::new());
        self.note(format!("uid {} {act:?} job {id}: {}", who.uid, brief(&reply)));
        let owner = self.accepted.get(&id).copied();
        match act {
            Act::Suspend if reply.is_ok() => {
                self.suspended_by_user.insert(id);
            }
            Act::Resume if reply.is_ok() => self.user_resumed(id),
            _ => {}
        }
        self.send_effects();
        let changes = !matches!(act, Act::Signal | Act::Usage);
        self.pending_check = Some(RequestCheck { id, changes, owner, who, ok: reply.is_ok(), before });
    }

    fn read_status(&mut self) {
        let who = self.user();
        let now = self.now();
        self.summary.requests += 1;
        let reply = self.core.handle(now, &who, Request::Status {}, String::new());
        let Ok(ReplyData::Status(status)) = reply else { return };
        let shown: Vec<String> = status
            .jobs
            .iter()
            .filter(|j| j.uid != who.uid && (j.command != "(hidden)" || j.name != "(hidden)"))
            .map(|j| format!("job {} of uid {}", j.id, j.uid))
            .collect();
        self.note(format!("uid {} reads the status ({} jobs)", who.uid, status.jobs.len()));
        if !shown.is_empty() {
            self.violations.push(format!("uid {} was shown the command of {}", who.uid, shown.join(", ")));
        }
    }
}

impl World {
    /// An agent crashes and restarts: its link drops, its schedule is gone (its watchdog thawed its jobs), its
    /// cgroups and so its jobs stay.
    fn restart_agent(&mut self) {
        let node = self.rng.below(self.agents.len() as u32) as usize;
        self.summary.agent_restarts += 1;
        self.note(format!("fault: agent {} crashes and restarts", self.agents[node].name));
        self.drop_link(node, 0);
        self.agents[node].schedule = None;
    }

    /// The controller crashes and restarts from its records: every link drops, anything only in memory is gone.
    fn restart_controller(&mut self) {
        self.summary.controller_restarts += 1;
        self.note("fault: the controller crashes and restarts".into());
        for agent in &mut self.agents {
            if agent.link.take().is_some() {
                agent.hello_at_ns = Some(self.now_ns + RECONNECT_NS);
            }
        }
        let loaded = self.records.0.lock().unwrap().loaded();
        self.core = open_core(&self.settings, &self.records, loaded, self.now());
        let _ = self.core.take_effects();
        // What the records say is the truth now: a suspension or a time in the slots not yet written is lost.
        let suspended: BTreeSet<u64> =
            self.core.jobs().values().filter(|j| j.state == JobState::Suspended).map(|j| j.id).collect();
        for id in self.suspended_by_user.difference(&suspended).copied().collect::<Vec<_>>() {
            self.user_resumed(id);
        }
        self.suspended_by_user = suspended;
        for (id, job) in self.core.jobs() {
            if job.time_limit_s.is_some() {
                self.expected_in_slot_ns.insert(*id, job.in_slot_ms as f64 * MS_NS as f64);
                // Until the first tick of the new controller, nothing is charged.
                *self.in_slot_slack_ns.entry(*id).or_default() += (2 * TICK_NS) as f64;
            }
        }
    }

    fn user_resumed(&mut self, id: u64) {
        self.suspended_by_user.remove(&id);
        self.resumed_at_ns.insert(id, self.now_ns);
    }

    fn toggle_writes(&mut self) {
        let mut records = self.records.0.lock().unwrap();
        if records.failing.take().is_none() {
            records.failing = Some("the disk is full".into());
            drop(records);
            self.summary.write_failures += 1;
            self.note("fault: writes fail from now on".into());
        } else {
            drop(records);
            self.note("fault: writes work again".into());
        }
    }

    /// The invariants, after every step.
    fn check(&mut self) -> Result<(), String> {
        if let Some(violation) = self.violations.first() {
            return Err(violation.clone());
        }
        if let Some(c) = self.pending_check.take() {
            self.check_request(&c)?;
        }
        self.check_cpus_once()?;
        self.check_schedules()?;
        self.check_records()?;
        self.check_frozen()
    }

    /// A user's request on a job: refused unless the job is theirs; its change in the records when it answered;
    /// a refused request changes nothing.
    fn check_request(&self, c: &RequestCheck) -> Result<(), String> {
        let now = self.core.jobs().get(&c.id);
        if c.ok && c.owner != Some(c.who.uid) {
            return Err(format!("uid {} acted on job {} of uid {:?}", c.who.uid, c.id, c.owner));
        }
        if !c.ok {
            let same = |a: &JobRecord, b: &JobRecord| (a.state, &a.error, a.class) == (b.state, &b.error, b.class);
            if c.before.as_ref().zip(now).is_some_and(|(a, b)| !same(a, b)) {
                return Err(format!("a refused request changed job {}", c.id));
            }
            return Ok(());
        }
        if !c.changes {
            return Ok(());
        }
        let records = self.records.0.lock().unwrap();
        let saved = records.jobs.get(&c.id);
        match (now, saved) {
            (Some(now), Some(saved))
                if (now.state, &now.error, now.class) == (saved.state, &saved.error, saved.class) =>
            {
                Ok(())
            }
            _ => Err(format!("job {}: the reply left before its change was written", c.id)),
        }
    }

    /// No CPU of a node in two gang jobs of one slot, by the placements the agents were given.
    fn check_cpus_once(&self) -> Result<(), String> {
        let jobs = self.core.jobs();
        for (slot, row) in self.core.plan().rows.iter().enumerate() {
            let mut taken: BTreeMap<(&str, u32), u64> = BTreeMap::new();
            for id in row {
                let Some(job) = jobs.get(&id.0).filter(|j| !j.state.is_over()) else { continue };
                for p in &job.placement {
                    for &cpu in &p.cpus {
                        if let Some(other) = taken.insert((p.node.as_str(), cpu), job.id) {
                            return Err(format!(
                                "slot {slot}: CPU {cpu} of {} is granted to jobs {other} and {}",
                                p.node, job.id
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// No CPU in two jobs of one slot as each agent runs them: its schedule's rows, the CPUs each job was started
    /// on.
    fn check_schedules(&self) -> Result<(), String> {
        for agent in &self.agents {
            let Some(schedule) = &agent.schedule else { continue };
            for (slot, row) in schedule.rows.iter().enumerate() {
                let mut taken: BTreeMap<u32, u64> = BTreeMap::new();
                for (id, job) in row.iter().filter_map(|id| Some((*id, agent.jobs.get(id)?))) {
                    if let Some(other) = job.cpus.iter().find_map(|&cpu| taken.insert(cpu, id)) {
                        return Err(format!(
                            "{} runs jobs {other} and {id} on one CPU in slot {slot} of its schedule",
                            agent.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every accepted job has a record, in memory and in the records; once storage works, the records hold what
    /// memory holds.
    fn check_records(&self) -> Result<(), String> {
        let records = self.records.0.lock().unwrap();
        let jobs = self.core.jobs();
        if let Some(id) = self.accepted.keys().find(|id| !jobs.contains_key(id) || !records.jobs.contains_key(id)) {
            return Err(format!("job {id} was accepted and has no record"));
        }
        if records.status().state != crate::wire::protocol::StorageState::Ok {
            return Ok(());
        }
        let same = |a: &JobRecord, b: &JobRecord| {
            (a.state, &a.error, &a.placement, a.mode, &a.ended_on)
                == (b.state, &b.error, &b.placement, b.mode, &b.ended_on)
        };
        for (id, job) in jobs {
            if !records.jobs.get(id).is_some_and(|saved| same(job, saved)) {
                return Err(format!("job {id}: memory and the records differ while storage works"));
            }
        }
        Ok(())
    }

    /// No job its user did not suspend stays frozen on a node beyond the bound (unless it is over).
    fn check_frozen(&self) -> Result<(), String> {
        // An agent away cannot be told to thaw a job: the bound counts from its (re)connection.
        for agent in self.agents.iter().filter(|a| a.link.is_some()) {
            for (id, job) in &agent.jobs {
                let Some(since) = job.frozen_since_ns else { continue };
                let since = since.max(self.resumed_at_ns.get(id).copied().unwrap_or(0)).max(agent.connected_since_ns);
                // A standby job runs only in cells the others leave free: it may wait as long as they run.
                let exempt = |j: &JobRecord| j.state.is_over() || j.error.is_some() || j.class == JobClass::Standby;
                let over = self.core.jobs().get(id).is_none_or(exempt);
                if self.now_ns - since > FROZEN_BOUND_NS && !over && !self.suspended_by_user.contains(id) {
                    let state = self.core.jobs().get(id).map(|j| j.state.name());
                    return Err(format!(
                        "job {id} ({state:?} in the controller) has been frozen on {} for {:.1} s",
                        agent.name,
                        (self.now_ns - since) as f64 / 1e9
                    ));
                }
            }
        }
        Ok(())
    }

    /// Each running job with a limit has been charged its share of the plan (less what restarts lost), and one
    /// past its limit is being ended.
    fn check_time_limits(&self) -> Result<(), String> {
        for (id, job) in self.core.jobs() {
            let Some(limit_s) = job.time_limit_s else { continue };
            if job.state != JobState::Running {
                continue;
            }
            let expected_ns = self.expected_in_slot_ns.get(id).copied().unwrap_or(0.0);
            let slack_ns = self.in_slot_slack_ns.get(id).copied().unwrap_or(0.0);
            let charged_ns = job.in_slot_ms as f64 * MS_NS as f64;
            if charged_ns > expected_ns + 2.0 * MS_NS as f64 || charged_ns < expected_ns - slack_ns - 2.0 * MS_NS as f64
            {
                return Err(format!(
                    "job {id} was charged {:.3} s in its slots; its share of the plan was {:.3} s",
                    charged_ns / 1e9,
                    expected_ns / 1e9
                ));
            }
            if job.in_slot_ms >= limit_s * 1000 && job.error.is_none() {
                return Err(format!("job {id} ran its limit of {limit_s} s in its slots and is not being ended"));
            }
        }
        Ok(())
    }
}

impl Agent {
    fn new(name: String) -> Agent {
        Agent {
            name,
            link: None,
            hello_at_ns: None,
            jobs: BTreeMap::new(),
            schedule: None,
            next_report_ns: REPORT_PERIOD_NS,
            ends_sent: Vec::new(),
            ran_until_ns: 0,
            connected_since_ns: 0,
        }
    }

    fn next_due_ns(&self) -> u64 {
        let ends = self.jobs.values().filter_map(|j| j.ends_at_ns).min().unwrap_or(u64::MAX);
        self.next_report_ns.min(self.hello_at_ns.unwrap_or(u64::MAX)).min(ends)
    }

    /// The share of the time job `id` runs under this agent's schedule (with none, a restarted agent's, all).
    fn share(&self, id: u64) -> f64 {
        let Some(s) = &self.schedule else { return 1.0 };
        if s.suspended.contains(&id) || !s.jobs.contains(&id) {
            return 0.0;
        }
        if s.always.contains(&id) {
            return 1.0;
        }
        let rows = s.rows.iter().filter(|row| row.contains(&id)).count();
        if s.rows.is_empty() {
            0.0
        } else {
            rows as f64 / s.rows.len() as f64
        }
    }

    /// Run the jobs up to `now_ns` since the last call; return the ends (work done, or killed).
    fn run_until(&mut self, now_ns: u64) -> Vec<FromAgent> {
        let elapsed_ns = now_ns.saturating_sub(self.last_run_ns());
        let shares: BTreeMap<u64, f64> = self.jobs.keys().map(|&id| (id, self.share(id))).collect();
        let mut ended = Vec::new();
        for (&id, job) in &mut self.jobs {
            let share = shares[&id];
            let ran_ns = (elapsed_ns as f64 * share) as u64;
            job.cpu_ns += ran_ns * job.cpus.len() as u64;
            job.work_left_ns = job.work_left_ns.saturating_sub(ran_ns);
            job.frozen_since_ns = if share == 0.0 { job.frozen_since_ns.or(Some(now_ns)) } else { None };
            let killed = job.ends_at_ns.is_some_and(|at| at <= now_ns);
            if killed || job.work_left_ns == 0 {
                let exit_code = if killed { 143 } else { 0 };
                ended.push(FromAgent::Ended {
                    job: id,
                    exit_code: Some(exit_code),
                    error: None,
                    cpu_ns: Some(job.cpu_ns),
                });
            }
        }
        for event in &ended {
            if let FromAgent::Ended { job, .. } = event {
                self.jobs.remove(job);
            }
        }
        let excess = self.ends_sent.len().saturating_sub(16);
        self.ends_sent.drain(..excess);
        self.ran_until_ns = now_ns;
        ended
    }

    fn last_run_ns(&self) -> u64 {
        self.ran_until_ns
    }

    fn report(&self) -> FromAgent {
        FromAgent::usage_report(
            self.jobs
                .iter()
                .map(|(&job, j)| JobUsage { job, cpu_ns: j.cpu_ns, pids: vec![1], frozen: j.frozen_since_ns.is_some() })
                .collect(),
        )
    }
}

/// A core over the tester's records, with the nodes the tester's agents name and settings a test can see move
/// (every other setting as the daemon's defaults).
fn open_core(settings: &TesterSettings, records: &SharedRecords, loaded: Loaded, now: Now) -> ControllerCore {
    let core_settings = ControllerSettings {
        nodes: (0..settings.agents).map(|i| format!("node{i:04}")).collect(),
        slice_ns: 100 * MS_NS,
        kill_wait: Duration::from_millis(50),
        ..ControllerSettings::default()
    };
    ControllerCore::open(core_settings, Box::new(records.clone()), loaded, now)
}

/// The first words of a message, for the trace.
fn short(payload: &str) -> String {
    payload.chars().take(160).collect()
}

fn brief(reply: &Result<ReplyData, String>) -> String {
    match reply {
        Ok(ReplyData::Submit(r)) => format!("job {} {}", r.job, r.state.name()),
        Ok(_) => "ok".into(),
        Err(e) => format!("refused ({})", e.chars().take(60).collect::<String>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::core::planted::{plant, Bug};

    /// The suite's budget of seeds: small clusters, many seeds, every fault.
    const SEEDS: u64 = 100;
    const STEPS: usize = 3_000;

    fn settings(seed: u64) -> TesterSettings {
        TesterSettings { seed, steps: STEPS, ..TesterSettings::default() }
    }

    /// The first seed of the budget that fails, if any.
    fn first_failure() -> Option<Failure> {
        (1..=SEEDS).find_map(|seed| run(&settings(seed)).err())
    }

    #[test]
    fn the_budget_of_seeds_passes_every_invariant() {
        plant(None);
        let mut total = Summary::default();
        for seed in 1..=SEEDS {
            match run(&settings(seed)) {
                Ok(s) => total.add(&s),
                Err(failure) => panic!("{failure}"),
            }
        }
        // The faults were exercised, not only drawn: every kind happened across the budget.
        let happened = [
            total.jobs_accepted,
            total.controller_restarts,
            total.link_drops,
            total.write_failures,
            total.agent_restarts,
            total.clock_steps,
        ];
        assert!(happened.iter().all(|&n| n > 0), "{total:?}");
    }

    /// Large clusters: the same invariants with hundreds and thousands of agents.
    #[test]
    fn large_clusters_pass_every_invariant() {
        plant(None);
        for (seed, agents, steps) in [(1, 256, 4_000), (2, 256, 4_000), (3, 4_096, 3_000)] {
            let settings = TesterSettings { seed, agents, steps, users: 32, ..TesterSettings::default() };
            if let Err(failure) = run(&settings) {
                panic!("{agents} agents: {failure}");
            }
        }
    }

    #[test]
    fn a_seed_replays_exactly() {
        plant(None);
        let (a, b) = (run(&settings(7)), run(&settings(7)));
        assert_eq!(a.as_ref().ok(), b.as_ref().ok());
        let mut world = World::new(&settings(7));
        let mut again = World::new(&settings(7));
        for _ in 0..500 {
            world.advance();
            again.advance();
        }
        assert_eq!(world.trace, again.trace);
        assert_ne!(run(&settings(8)).ok(), a.ok(), "another seed, another run");
    }

    /// Each planted bug is caught within the budget, and the failure names the seed.
    fn caught(bug: Bug, words: &str) {
        plant(Some(bug));
        let failure = first_failure();
        plant(None);
        let failure = failure.unwrap_or_else(|| panic!("{bug:?} went unnoticed in {SEEDS} seeds"));
        eprintln!("{bug:?}: {failure}");
        assert!(failure.invariant.contains(words), "{bug:?}: {}", failure.invariant);
        assert!(failure.to_string().contains(&format!("--seed {}", failure.seed)));
        assert!(!failure.trace.is_empty());
    }

    #[test]
    fn a_cpu_granted_twice_is_caught() {
        caught(Bug::CpuTwice, "on one CPU in slot");
    }

    #[test]
    fn a_reply_before_its_record_is_written_is_caught() {
        caught(Bug::ReplyBeforeSave, "before its change was written");
    }

    #[test]
    fn a_thaw_forgotten_after_a_restart_is_caught() {
        caught(Bug::ThawForgotten, "has been frozen");
    }

    #[test]
    fn another_users_command_shown_is_caught() {
        caught(Bug::OthersShown, "was shown the command");
    }

    #[test]
    fn a_time_limit_not_charged_is_caught() {
        caught(Bug::TimeLimitNotCharged, "in its slots");
    }
}
