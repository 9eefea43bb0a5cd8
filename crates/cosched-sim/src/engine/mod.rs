//! The discrete-event engine: CPUs with their node schedulers, NICs, processes
//! running the application model, and the cluster-level admission.
//!
//! Tickless by construction: a CPU is visited only when something on it can
//! change (a compute phase ends, a quantum expires at a tick, a ready process
//! outranks the running one at the next tick, the 1 s raise, a switch ends, a
//! process wakes, a message reaches a spinning receiver). Each visit runs
//! [`Engine::update_cpu`], which first charges the elapsed time, then applies
//! the rules due at that instant, then books the next visit.
//!
//! What differs between schemes lives in three parts, chosen once in
//! [`parts`]: the node scheduler ([`node_scheduler`]: the MLFQ, the gang
//! cell), how a receive waits ([`receive`]) and what message arrival does
//! ([`arrival`]). Each part keeps its own records of CPUs and processes
//! inside the shared ones ([`records`]) and sees the engine through
//! [`view::Host`] only. This file holds what every scheme shares: the event
//! loop, processes and their application model, messages, accounting, and
//! the cluster-level admission.

use crate::app::{dedicated_ns, Program};
use crate::config::SimConfig;
use crate::cpu_set::CpuSet;
use crate::endpoint::Inbox;
use crate::metrics::{BoostCounts, Breakdown, Displaced, JobRecord, SwitchCause, SwitchCounts};
use crate::net::{Nic, Undecided};
use crate::trace::{TraceEvent, TraceKind};
use arrival::MessageArrival;
use coordinator::Coordinator;
use cosched_core::{EventQueue, Rng, SimTime, StreamSeed, TimerTree};
use cosched_policy::cluster::JobStatus;
use cosched_policy::coscheduler::external::SharedChooser;
use cosched_policy::Coscheduler;
use fast::{FastReport, FastSettings, FastState};
use node_scheduler::NodeScheduler;
use parts::Parts;
use proc_table::ProcTable;
use receive::ReceiveWait;
use records::{Phase, ProcState, NO_PROC};
use scheduler_clock::SchedulerClock;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use view::{Host, RecordsMut};

pub(crate) mod arrival;
pub(crate) mod coordinator;
pub mod fast;
pub(crate) mod node_scheduler;
pub(crate) mod parts;
pub(crate) mod proc_table;
pub(crate) mod receive;
pub(crate) mod records;
pub(crate) mod runner;
pub(crate) mod scheduler_clock;
pub(crate) mod view;

/// A job as the engine receives it.
#[derive(Clone, Debug)]
pub struct SimJob {
    pub job_number: u64,
    pub arrival: SimTime,
    pub tasks: u32,
    /// The CPUs it asks for, from 1 to `tasks`: the number of tasks for every job of a workload; fewer
    /// when a real job runs more processes than it holds CPUs (oversubscribed). Its tasks are dealt
    /// over its CPUs in blocks, as an MPI launcher maps ranks by slot; only schemes whose node is the
    /// OS's scheduler take fewer CPUs than tasks (a gang cell runs one process).
    pub cpus: u32,
    pub program: Program,
    /// "J1".."J6", or a free label for hand-made jobs.
    pub label: String,
    /// The nice value of its processes (only a node scheduler with weights
    /// reads it; 0 for every job of a workload).
    pub nice: i8,
    /// The wall time it asked for, a backfilling queue's estimate; `None`: its dedicated time (alone on the
    /// machine, no skew, no switches: close to, not above, what it takes).
    pub requested_ns: Option<u64>,
}

#[derive(Clone, Debug)]
struct JobState {
    spec: SimJob,
    start: Option<SimTime>,
    finish: Option<SimTime>,
    first_proc: u32,
    tasks_done: u32,
    /// Its tasks at the barrier of the current iteration (a job whose exchange is a barrier).
    barrier_arrivals: u32,
    placement: Option<Placement>,
    /// Its CPUs, noted at its start for its record.
    cpus: CpuSet,
    dedicated_ns: u64,
}

impl JobState {
    /// Iterations of all its processes together.
    fn process_iterations(&self) -> u64 {
        self.spec.program.iterations as u64 * self.spec.tasks as u64
    }
}

/// Where a running job's tasks are: CPU of each rank, and the matrix rows it runs in (gang schemes).
#[derive(Clone, Debug)]
struct Placement {
    cpus: Vec<u32>,
    rows: Vec<u32>,
}

pub use records::NO_ROW;

#[derive(Clone, Copy, Debug)]
pub enum Event {
    Arrival(u32),
    /// The node scheduler's own event (the gang cell: a quantum's boundary).
    Scheduler,
    /// A message lands (only for schemes that react: spin-block's interrupt,
    /// demand-based coscheduling).
    Deposit {
        dest: u32,
        /// Queued only to check (debug builds) that no part reacts: the
        /// engine judged at the send that none could (`deposit_needs_event`).
        judged_quiet: bool,
    },
    /// An undecided message reaches its receiving node (only for schemes that
    /// react to deposits, which must be known by the time they happen).
    Decide {
        node: u32,
    },
}

impl Event {
    /// Kinds of events counted: the two queued kinds, then CPU visits. (The
    /// node scheduler's events keep the name of the one that books them.)
    pub const KIND_NAMES: [&'static str; EVENT_KINDS] = ["arrival", "gang-quantum", "cpu-visit", "deposit"];

    fn kind_index(&self) -> usize {
        match self {
            Event::Arrival(_) => 0,
            Event::Scheduler => 1,
            Event::Deposit { .. } | Event::Decide { .. } => 3,
        }
    }
}

pub const EVENT_KINDS: usize = 4;
const CPU_VISIT: usize = 2;

/// Progress reported to a caller every so many events.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub now: SimTime,
    pub jobs_completed: usize,
    pub jobs_total: usize,
    pub queued: usize,
    pub events: u64,
    /// Iterations the processes have done (in fast mode, those its jumps
    /// credited too), and will have done once every job has finished: the
    /// work the engine's cost follows (see [`crate::cost`]).
    pub process_iterations_done: u64,
    pub process_iterations_total: u64,
}

/// The raw outcome of a run; [`crate::run::RunResult`] derives the reports.
pub struct EngineOutcome {
    pub records: Vec<JobRecord>,
    pub cpu_time: Breakdown,
    pub per_cpu_time: Vec<Breakdown>,
    pub end: SimTime,
    pub events: u64,
    pub longest_queue: usize,
    pub jobs_submitted: usize,
    pub trace: Vec<TraceEvent>,
    /// Events handled, by kind (see `EVENT_KIND_NAMES`).
    pub event_counts: [u64; EVENT_KINDS],
    /// Boosts by what they displaced.
    pub boosts: BoostCounts,
    /// Context switches by cause.
    pub switches: SwitchCounts,
    /// The work done and offered from time 0 to the last arrival.
    pub arrival_window: ArrivalWindow,
    /// The run was asked to stop before its last job finished (`end` is when).
    pub stopped_early: bool,
    /// The most processes any CPU held at once.
    pub peak_processes_per_cpu: usize,
    /// (arrival time, jobs in the machine just after it: queued or running), per arrival.
    pub jobs_in_system: Vec<(SimTime, u32)>,
    /// What fast mode did (`None`: the exact engine alone).
    pub fast: Option<FastReport>,
    /// What each of fast mode's windows measured (empty unless asked for).
    pub fast_windows: fast::WindowLog,
    /// Where each event took place (empty unless asked for).
    pub event_log: Vec<LoggedEvent>,
}

/// The events of a run with where they took place: what a partition of the nodes across threads would have to
/// synchronise (`cosched bench partition`).
pub(crate) struct EventLog {
    from_ns: u64,
    events: Vec<LoggedEvent>,
}

impl EventLog {
    /// An event that acts on every node: an arrival, a gang quantum, a job's end (the coordinator may start jobs
    /// anywhere).
    pub const WHOLE_MACHINE: u32 = u32::MAX;
}

/// One event: when, and on which node ([`EventLog::WHOLE_MACHINE`]: on all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedEvent {
    pub time_ns: u64,
    pub node: u32,
}

/// The node value of an event that acts on every node.
pub const WHOLE_MACHINE: u32 = EventLog::WHOLE_MACHINE;

/// What happened from time 0 to the last arrival, while jobs kept coming: the
/// window in which a scheme shows the utilization it sustains.
#[derive(Clone, Copy, Debug, Default)]
pub struct ArrivalWindow {
    pub last_arrival: SimTime,
    /// Compute time of the processes, summed over CPUs (CPU-ns).
    pub compute_ns: u64,
    /// Work delivered: each process's completed iterations at their
    /// dedicated (nominal) time (CPU-ns).
    pub delivered_ns: f64,
    /// Work offered: what a machine with a CPU free for every task would have
    /// delivered by then, each job's tasks x min(dedicated time, time since
    /// its arrival) (CPU-ns).
    pub offered_ns: f64,
    /// The work done by the arrival of the middle job (number n/2 from 0),
    /// if later ones follow: the second half of the arrivals, from it to the
    /// last, is where an overloaded run shows its capacity.
    pub middle: Option<WorkMark>,
}

/// Work done by an instant (in the run's clock).
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkMark {
    pub at: SimTime,
    /// As [`ArrivalWindow::compute_ns`] and [`ArrivalWindow::delivered_ns`], by `at`.
    pub compute_ns: u64,
    pub delivered_ns: f64,
}

pub const EVENT_KIND_NAMES: [&str; EVENT_KINDS] = Event::KIND_NAMES;

/// The engine with its parts `P` (see [`parts`]).
pub(crate) struct Engine<'a, P: Parts> {
    cfg: &'a SimConfig,
    queue: EventQueue<Event>,
    cpus: Vec<Cpu<P>>,
    nics: Vec<Nic>,
    /// Every process by its number; finished ones are released (see [`proc_table`]).
    procs: ProcTable<Proc<P>>,
    /// Jobs by start order (the order of their process numbers), from the oldest not yet finished.
    started: std::collections::VecDeque<u32>,
    /// Work of the released processes, summed in number order (the arrival window's sum goes on from it).
    released_delivered_ns: f64,
    jobs: Vec<JobState>,
    /// The cluster-level policy: placement, matrix rows and the cycle (the model's, or the controller's).
    coordinator: Coordinator,
    /// Jobs that arrived and have not started.
    waiting: usize,
    longest_queue: usize,
    /// Jobs started and not finished.
    running: usize,
    /// The node scheduler's record of the whole machine (the gang cell's gang quantum).
    node_machine: <P::Node as NodeScheduler>::Machine,
    latency_ns: u64,
    shm_latency_ns: u64,
    completed: usize,
    seed: StreamSeed,
    trace: Option<Vec<TraceEvent>>,
    records: Vec<JobRecord>,
    bsld_threshold_s: f64,
    /// The CPU whose visit is in progress (a visit may deliver messages).
    visiting: Option<u32>,
    /// The instant and CPU of the main loop's last CPU visit: at that
    /// instant, a run visited at every tick has visited every CPU up to it.
    visited_through: (SimTime, u32),
    /// When each CPU is next to be looked at.
    visits: TimerTree,
    /// The process each CPU runs (`NO_PROC`: none), as in `Cpu::running`:
    /// a small array, read at a visit's start without waiting for the CPU's
    /// record (see `Engine::visit_cpu`).
    running_on: Vec<u32>,
    events_handled: u64,
    boosts: BoostCounts,
    switches: SwitchCounts,
    /// Iterations of the processes of the finished jobs, and of every job (for progress reports).
    finished_iterations: u64,
    total_iterations: u64,
    stopped_early: bool,
    arrival_window: ArrivalWindow,
    peak_processes_per_cpu: usize,
    jobs_in_system: Vec<(SimTime, u32)>,
    /// The node scheduler's tick and the MLFQ's raise period (see [`scheduler_clock`]).
    clock: SchedulerClock,
    /// Testing aid: also visit every CPU at every tick and at the end of its
    /// kernel work (where a tick inside it acts). A correct tickless engine
    /// gives exactly the same results either way.
    /// Where each event took place, for the partition study (`None`: not recorded; see [`EventLog`]).
    event_log: Option<EventLog>,
    visit_every_tick: bool,
    /// The receive wait's settings.
    wait: P::Wait,
    /// An I/O shorter than this keeps the CPU (`CostConfig::io_keeps_cpu_below_ns`; 0 under GS).
    io_keeps_cpu_below_ns: u64,
    event_counts: [u64; EVENT_KINDS],
    /// Fast mode (`None`: exact).
    fast: Option<FastState>,
    /// The arrival reaction's state.
    arrival: P::Arrival,
    parts: PhantomData<P>,
}

/// A process's record under the parts `P`.
type Proc<P> = records::Proc<<<P as Parts>::Node as NodeScheduler>::Proc, <<P as Parts>::Wait as ReceiveWait>::Proc>;

/// A CPU's record under the parts `P`.
type Cpu<P> = records::Cpu<<<P as Parts>::Node as NodeScheduler>::Cpu, <<P as Parts>::Arrival as MessageArrival>::Cpu>;

/// Safety bound on the work done for one CPU at one instant.
const MAX_DISPATCHES_PER_VISIT: usize = 10_000;

impl<'a, P: Parts> Engine<'a, P> {
    /// Whether deposits are events (a part reacts to them).
    const DEPOSIT_EVENTS: bool = P::Wait::REACTS_TO_DEPOSITS || P::Arrival::REACTS_TO_DEPOSITS;

    /// Whether the CPUs take turns in the coscheduler's matrix rows (gang
    /// slots), whose cycle fast mode's windows follow.
    const RUNS_ROWS: bool = matches!(<P::Node as NodeScheduler>::MODE, cosched_policy::Mode::Gang);

    /// `jobs` must be sorted by arrival and fit the machine (checked).
    pub fn new(cfg: &'a SimConfig, jobs: Vec<SimJob>, bsld_threshold_s: f64, record_trace: bool) -> Self {
        let cpu_count = cfg.cpu_count() as usize;
        assert!(jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival), "jobs must be sorted by arrival");
        assert!(
            jobs.iter().all(|j| (1..=j.tasks).contains(&j.cpus) && j.cpus as usize <= cpu_count),
            "every job must fit the machine"
        );
        let coordinator = Coordinator::for_run(cfg);
        let node_machine = P::Node::new_machine(cfg, coordinator.coscheduler());
        let cpus = (0..cpu_count as u32)
            .map(|c| records::Cpu {
                node: c / cfg.cpus_per_node,
                running: None,
                switch_until: SimTime::ZERO,
                overhead_pending_ns: 0,
                last_process: None,
                left_because: SwitchCause::default(),
                residents: Vec::new(),
                in_io: Vec::new(),
                earliest_io_end: SimTime::MAX,
                residents_in_recv: 0,
                accounted_until: SimTime::ZERO,
                time: Breakdown::default(),
                kernel_start: SimTime::ZERO,
                sched: Default::default(),
                arrival: Default::default(),
            })
            .collect();
        let jobs: Vec<JobState> = jobs
            .into_iter()
            .map(|spec| JobState {
                dedicated_ns: dedicated_ns(&spec.program, spec.tasks, &cfg.network),
                spec,
                start: None,
                finish: None,
                first_proc: NO_PROC,
                tasks_done: 0,
                barrier_arrivals: 0,
                placement: None,
                cpus: CpuSet::default(),
            })
            .collect();
        let total_iterations = jobs.iter().map(JobState::process_iterations).fold(0, u64::saturating_add);
        let mut queue = EventQueue::new();
        if let Some(first) = jobs.first() {
            queue.schedule(first.spec.arrival, Event::Arrival(0));
        }
        Engine {
            cfg,
            queue,
            cpus,
            nics: vec![Nic::default(); cfg.nodes as usize],
            procs: ProcTable::new(),
            started: std::collections::VecDeque::new(),
            released_delivered_ns: 0.0,
            jobs,
            coordinator,
            waiting: 0,
            longest_queue: 0,
            running: 0,
            node_machine,
            latency_ns: cfg.network.latency_ns(cfg.network.message_bytes),
            shm_latency_ns: cfg.network.shm_latency_ns(cfg.network.message_bytes),
            completed: 0,
            seed: StreamSeed(cfg.seed),
            trace: record_trace.then(Vec::new),
            records: Vec::new(),
            bsld_threshold_s,
            visiting: None,
            visited_through: (SimTime::MAX, 0),
            visits: TimerTree::new(cpu_count),
            running_on: vec![NO_PROC; cpu_count],
            events_handled: 0,
            boosts: BoostCounts::default(),
            switches: SwitchCounts::default(),
            finished_iterations: 0,
            total_iterations,
            stopped_early: false,
            arrival_window: ArrivalWindow::default(),
            peak_processes_per_cpu: 0,
            jobs_in_system: Vec::new(),
            clock: SchedulerClock::new(cfg.scheduler.tick_ns, cfg.scheduler.raise_period_ns),
            visit_every_tick: false,
            event_log: None,
            wait: P::Wait::new(cfg),
            // Under GS nothing else may use a blocked process's CPU: keeping it changes nothing.
            io_keeps_cpu_below_ns: match <P::Node as NodeScheduler>::MODE {
                cosched_policy::Mode::Gang => 0,
                _ => cfg.costs.io_keeps_cpu_below_ns,
            },
            event_counts: [0; EVENT_KINDS],
            fast: None,
            arrival: P::Arrival::new(cfg),
            parts: PhantomData,
        }
    }

    /// Skip the stationary stretches between changes (see [`fast`]).
    pub fn with_fast_mode(mut self, settings: FastSettings, record_windows: bool) -> Self {
        self.fast = Some(FastState::new(
            settings,
            self.cpus.len(),
            self.row_measures(),
            record_windows,
            self.cfg.cpus_per_node == 1,
        ));
        self
    }

    /// Record where each event from `from_ns` on takes place (`RunOptions::event_log_from_ns`).
    pub fn with_event_log(mut self, from_ns: u64) -> Self {
        self.event_log = Some(EventLog { from_ns, events: Vec::new() });
        self
    }

    /// Decide with the model of the plan even where the scheme runs the controller (`RunOptions::plan_model_only`).
    pub fn with_plan_model_only(mut self) -> Self {
        self.coordinator =
            Coordinator::Model(Box::new(Coscheduler::new(self.cfg.plan_settings(), self.cfg.cluster_shape())));
        self
    }

    /// Admission decided by `chooser` (`RunOptions::chooser`).
    pub fn with_chooser(mut self, chooser: SharedChooser) -> Self {
        let cosched = Coscheduler::new(self.cfg.plan_settings(), self.cfg.cluster_shape());
        self.coordinator = Coordinator::Model(Box::new(cosched.with_chooser(chooser)));
        self
    }

    /// Visit every CPU at every tick and at the end of its kernel work as
    /// well (for tests of the tickless logic).
    pub fn with_visits_every_tick(mut self) -> Self {
        self.visit_every_tick = true;
        self
    }

    /// Run to the last completion (or the horizon), reporting progress every
    /// `progress_every` events.
    /// `stop`, when set, ends the run at the next progress report, or at once if set already (an interrupted
    /// run keeps what finished).
    pub fn run(
        mut self,
        progress_every: u64,
        stop: Option<&std::sync::atomic::AtomicBool>,
        progress: &mut dyn FnMut(&Progress),
    ) -> EngineOutcome {
        let horizon = self.cfg.horizon_ns.map(SimTime).unwrap_or(SimTime::MAX);
        let mut end = SimTime::ZERO;
        // A countdown, not a division per event; 0 means never.
        let progress_every = if progress_every == 0 { u64::MAX } else { progress_every };
        let mut until_progress = progress_every;
        let stop_asked = || stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
        // A run that begins once the stop was asked for (the rest of a batch) ends at once.
        self.stopped_early = stop_asked();
        while !self.stopped_early && self.completed < self.jobs.len() {
            // Queued events go first at equal times; then CPUs by number.
            let queued = self.queue.peek_time();
            let visit = self.visits.peek();
            let now = match (queued, visit) {
                (None, None) => {
                    panic!("deadlock: {} jobs unfinished and nothing pending", self.jobs.len() - self.completed)
                }
                (Some(t), None) => t,
                (None, Some((t, _))) => t,
                (Some(q), Some((v, _))) => q.min(v),
            };
            // Before fast mode's bookkeeping, which subtracts instants.
            check_clock_forward(end, now, self.events_handled);
            // Before fast mode's checkpoint too: a window it closed or opened past the horizon would charge the CPUs
            // beyond the run's end.
            if self.run_clock(now) > horizon {
                // `end` is on the engine's clock.
                end = SimTime(horizon.ns() - self.run_clock(SimTime::ZERO).ns());
                self.fast_note_end(end);
                break;
            }
            if self.fast.is_some() && self.fast_checkpoint(now) {
                continue;
            }
            end = now;
            if queued == Some(now) {
                let (_, event) = self.queue.pop().expect("peeked");
                if let Event::Deposit { dest, judged_quiet: true } = event {
                    // Debug builds only: a check, not an event (not counted,
                    // so that every build reports the same counts).
                    self.check_judged_quiet(dest);
                    continue;
                }
                // (Only when logging: the place of a deposit is a load from the process table.)
                let logged = self.event_log.is_some().then(|| (self.event_place(&event), self.completed));
                self.handle(now, event);
                if let Some((place, completed)) = logged {
                    self.log_event(now, place, completed);
                }
            } else {
                // The visit re-arms the CPU's timer when it books the next one.
                let (_, cpu) = visit.expect("a visit is due");
                self.event_counts[CPU_VISIT] += 1;
                self.visited_through = (now, cpu);
                self.visiting = Some(cpu);
                let logged = self.event_log.is_some().then_some(self.completed);
                self.visit_cpu(cpu, now);
                self.visiting = None;
                if let Some(completed) = logged {
                    self.log_event(now, cpu / self.cfg.cpus_per_node, completed);
                }
            }
            self.events_handled += 1;
            until_progress -= 1;
            if until_progress == 0 {
                until_progress = progress_every;
                progress(&self.progress(now));
                if stop_asked() {
                    self.stopped_early = true;
                    break;
                }
            }
        }
        self.finish(end)
    }

    /// The node an event acts on, or [`EventLog::WHOLE_MACHINE`] (arrivals and the gang cell's quanta act on all).
    fn event_place(&self, event: &Event) -> u32 {
        match *event {
            Event::Arrival(_) | Event::Scheduler => EventLog::WHOLE_MACHINE,
            Event::Deposit { dest, .. } => self.procs[dest as usize].cpu / self.cfg.cpus_per_node,
            Event::Decide { node } => node,
        }
    }

    /// Log an event at `place`; one that ended a job acted on the whole machine (the coordinator starts others).
    #[cold]
    #[inline(never)]
    fn log_event(&mut self, now: SimTime, place: u32, completed_before: usize) {
        if let Some(log) = &mut self.event_log {
            if now.ns() >= log.from_ns {
                let node = if self.completed != completed_before { EventLog::WHOLE_MACHINE } else { place };
                log.events.push(LoggedEvent { time_ns: now.ns(), node });
            }
        }
    }

    fn progress(&self, now: SimTime) -> Progress {
        Progress {
            now: self.run_clock(now),
            jobs_completed: self.completed,
            jobs_total: self.jobs.len(),
            queued: self.waiting,
            events: self.events_handled,
            process_iterations_done: self.finished_iterations.saturating_add(self.running_iterations()),
            process_iterations_total: self.total_iterations,
        }
    }

    /// Iterations done so far by the processes of the jobs running.
    fn running_iterations(&self) -> u64 {
        let running = self.started.iter().map(|&j| &self.jobs[j as usize]).filter(|job| job.finish.is_none());
        running
            .flat_map(|job| {
                let first = job.first_proc as usize;
                self.procs[first..first + job.spec.tasks as usize].iter().map(|p| p.iterations_done as u64)
            })
            .sum()
    }

    fn finish(mut self, end: SimTime) -> EngineOutcome {
        for c in 0..self.cpus.len() as u32 {
            self.account(c, end);
        }
        let mut cpu_time = Breakdown::default();
        for cpu in &self.cpus {
            debug_assert_eq!(cpu.time.total_ns(), self.run_clock(end).ns(), "CPU time must add up to the span");
            cpu_time.add(&cpu.time);
        }
        debug_assert!(self.completed < self.jobs.len() || P::Node::running_row(&self.node_machine).is_none());
        if let Some(trace) = &mut self.trace {
            // Some lines are recorded late (a block found when the CPU's time
            // is charged) or early (a message's landing): put them in time
            // order, then CPU order, keeping the order of decisions on a CPU
            // within an instant. (When a CPU's time is charged is the
            // engine's business: the order must not depend on it.)
            trace.sort_by_key(|e| (e.time_ns, e.cpu));
        }
        EngineOutcome {
            end: self.run_clock(end),
            fast: self.fast.as_ref().map(FastState::report),
            fast_windows: self.fast.as_mut().map(FastState::take_window_log).unwrap_or_default(),
            records: self.records,
            per_cpu_time: self.cpus.iter().map(|c| c.time).collect(),
            cpu_time,
            events: self.events_handled,
            longest_queue: self.longest_queue,
            jobs_submitted: self.jobs.len(),
            trace: self.trace.unwrap_or_default(),
            event_counts: self.event_counts,
            boosts: self.boosts,
            switches: self.switches,
            arrival_window: self.arrival_window,
            peak_processes_per_cpu: self.peak_processes_per_cpu,
            jobs_in_system: self.jobs_in_system,
            stopped_early: self.stopped_early,
            event_log: self.event_log.map(|log| log.events).unwrap_or_default(),
        }
    }

    fn handle(&mut self, now: SimTime, event: Event) {
        if let (Event::Arrival(j), Some(fast)) = (event, &self.fast) {
            if j as usize != fast.next_arrival {
                return; // booked before a jump moved it earlier
            }
        }
        self.event_counts[event.kind_index()] += 1;
        match event {
            Event::Arrival(j) => self.on_arrival(j, now),
            Event::Scheduler => self.on_scheduler_event(now),
            Event::Deposit { dest, .. } => self.on_deposit(dest, now),
            Event::Decide { node } => self.decide_deposits(node, now),
        }
    }

    fn record(&mut self, now: SimTime, cpu: u32, kind: TraceKind) {
        if let Some(trace) = &mut self.trace {
            let time_ns = now.ns() + self.fast.as_ref().map_or(0, |f| f.offset_ns);
            trace.push(TraceEvent { time_ns, cpu, kind });
        }
    }

    // ---- jobs -------------------------------------------------------------

    fn on_arrival(&mut self, j: u32, now: SimTime) {
        let next = j as usize + 1;
        if let Some(fast) = &mut self.fast {
            fast.next_arrival = next;
        }
        if next < self.jobs.len() {
            let at = SimTime(self.jobs[next].spec.arrival.ns() - self.run_clock(SimTime::ZERO).ns());
            self.queue.schedule(at, Event::Arrival(next as u32));
        }
        self.waiting += 1;
        self.longest_queue = self.longest_queue.max(self.waiting);
        let job = &self.jobs[j as usize];
        let (mode, cpus, run_ns) = (self.cfg.scheme.mode(), job.spec.cpus, self.run_clock(now).ns());
        let requested_ns = job.spec.requested_ns.unwrap_or(job.dedicated_ns);
        let to_start = self.coordinator.arrive(j, mode, cpus, requested_ns, run_ns);
        self.start_jobs(&to_start, now);
        self.jobs_in_system.push((self.run_clock(now), (next - self.completed) as u32));
        if next == self.jobs.len() {
            self.close_arrival_window(now);
        } else if j as usize == self.jobs.len() / 2 {
            self.arrival_window.middle = Some(self.work_mark(now));
        }
    }

    /// Work done and offered while jobs still arrive: what a scheme sustains.
    fn close_arrival_window(&mut self, now: SimTime) {
        let mark = self.work_mark(now);
        let offered_ns =
            self.jobs.iter().map(|j| j.spec.tasks as f64 * j.dedicated_ns.min(mark.at - j.spec.arrival) as f64).sum();
        self.arrival_window = ArrivalWindow {
            last_arrival: mark.at,
            compute_ns: mark.compute_ns,
            delivered_ns: mark.delivered_ns,
            offered_ns,
            middle: self.arrival_window.middle,
        };
    }

    /// The work done by `now`, every CPU charged up to it.
    fn work_mark(&mut self, now: SimTime) -> WorkMark {
        for c in 0..self.cpus.len() as u32 {
            self.account(c, now);
        }
        // Summed in process order, continuing from the released processes.
        let delivered_ns =
            self.procs.kept().fold(self.released_delivered_ns, |sum, p| sum + delivered_work_ns(&self.jobs, p));
        WorkMark { at: self.run_clock(now), compute_ns: self.cpus.iter().map(|c| c.time.useful_ns).sum(), delivered_ns }
    }

    /// Start the jobs the coordinator placed, in its order; then follow the plan's other changes.
    fn start_jobs(&mut self, placed: &[u32], now: SimTime) {
        for &j in placed {
            self.coordinator.started(j);
            let (cpus, rows) = self.coordinator.placement(j, self.cfg.cpus_per_node);
            self.waiting -= 1;
            self.start_job(j, Placement { cpus, rows }, now);
        }
        P::Node::plan_changed(self, now);
    }

    fn start_job(&mut self, j: u32, placement: Placement, now: SimTime) {
        self.running += 1;
        let tasks = self.jobs[j as usize].spec.tasks;
        let first_proc = self.procs.next_number() as u32;
        self.started.push_back(j);
        let cpu_of = |rank: u32| placement.cpus[cpu_index_of_rank(rank, tasks, placement.cpus.len())];
        for rank in 0..tasks {
            let cpu = cpu_of(rank);
            let mut rng = self.seed.substream("task-skew", ((j as u64) << 32) | rank as u64);
            let (program, nice) = (self.jobs[j as usize].spec.program, self.jobs[j as usize].spec.nice);
            let compute_ns = skewed(self.cfg.skew, program.compute_ns_of(0), &mut rng) + program.prologue.compute_ns;
            let io_next_ns = skewed(self.cfg.skew, program.io_ns, &mut rng) + program.prologue.blocked_ns;
            // With two tasks the ring is the barrier.
            let barrier = program.barrier && tasks > 2;
            let (neighbours, neighbour_count) =
                if barrier { ([NO_PROC; 2], 1) } else { ring_neighbours(first_proc, rank, tasks) };
            let node_of = |neighbour: u32| {
                let rank = neighbour.wrapping_sub(first_proc);
                if rank < tasks {
                    self.cpus[cpu_of(rank) as usize].node
                } else {
                    u32::MAX
                }
            };
            let neighbour_nodes = neighbours.map(node_of);
            self.procs.push(records::Proc {
                job: j,
                cpu,
                sched: P::Node::new_proc(self.cfg, nice, program.reads_cpu_clock),
                wait: Default::default(),
                phase: Phase::Compute { remaining_ns: compute_ns },
                state: ProcState::Ready,
                iterations_done: 0,
                iterations: program.iterations,
                nominal_compute_ns: program.compute_ns,
                nominal_io_ns: program.io_ns,
                neighbours,
                neighbour_nodes,
                neighbour_count,
                inbox: [Inbox::default(); 2],
                io_next_ns,
                next_compute_ns: 0,
                next_io_ns: 0,
                undecided: [0; 2],
                barrier,
                rng,
                cpu_ns: 0,
                off_cpu_since_ns: 0,
            });
            let residents = &mut self.cpus[cpu as usize].residents;
            residents.push(first_proc + rank);
            self.peak_processes_per_cpu = self.peak_processes_per_cpu.max(residents.len());
        }
        let run_now = self.run_clock(now);
        let job = &mut self.jobs[j as usize];
        job.start = Some(run_now);
        job.first_proc = first_proc;
        job.cpus = CpuSet::from_cpus(placement.cpus.iter().copied());
        let Placement { cpus, rows } = placement.clone();
        job.placement = Some(placement);
        if self.fast.is_some() {
            self.fast_note_change(j, &cpus, &rows, true, now);
        }
        self.record(now, cpus[0], TraceKind::JobStart { job: j });
        let cpu_of = |rank: u32| cpus[cpu_index_of_rank(rank, tasks, cpus.len())];
        for rank in 0..tasks {
            self.record(now, cpu_of(rank), TraceKind::TaskPlaced { job: j, process: first_proc + rank });
        }
        for rank in 0..tasks {
            // The scheduler sees its running process charged up to now.
            let cpu = cpu_of(rank);
            self.account(cpu, now);
            P::Node::admit(self, cpu, first_proc + rank);
        }
        P::Node::job_started(self, &rows, &cpus, first_proc, tasks, now);
        for &cpu in &cpus {
            self.update_cpu(cpu, now);
        }
        P::Node::jobs_changed(self, now);
    }

    fn task_exited(&mut self, p: u32, now: SimTime) {
        let j = self.procs[p as usize].job as usize;
        self.jobs[j].tasks_done += 1;
        if self.jobs[j].tasks_done == self.jobs[j].spec.tasks {
            self.job_finished(j as u32, now);
        }
    }

    fn job_finished(&mut self, j: u32, now: SimTime) {
        let placement = self.jobs[j as usize].placement.take().expect("a running job has a placement");
        let cpu_ns_by_node: Vec<(u32, u64)> =
            self.job_on_nodes(j, now).into_iter().map(|(node, cpu_ns, _)| (node, cpu_ns)).collect();
        self.jobs[j as usize].finish = Some(self.run_clock(now));
        self.running -= 1;
        P::Node::job_finished(self, &placement.rows, &placement.cpus, self.running);
        self.record(now, placement.cpus[0], TraceKind::JobFinish { job: j });
        self.completed += 1;
        self.finished_iterations = self.finished_iterations.saturating_add(self.jobs[j as usize].process_iterations());
        let cpus = std::mem::take(&mut self.jobs[j as usize].cpus);
        self.records.push(self.job_record(j, cpus));
        self.release_finished_processes();
        let to_start = self.coordinator.finish(j, self.run_clock(now).ns(), &cpu_ns_by_node);
        if self.fast.is_some() {
            self.fast_note_change(j, &placement.cpus, &placement.rows, false, now);
        }
        self.start_jobs(&to_start, now);
        P::Node::jobs_changed(self, now);
    }

    /// The processes of the oldest jobs, once all of them have finished, are
    /// not looked at again: release them (memory follows the jobs alive).
    fn release_finished_processes(&mut self) {
        while let Some(&oldest) = self.started.front() {
            if self.jobs[oldest as usize].finish.is_none() {
                break;
            }
            self.started.pop_front();
        }
        let alive_from = match self.started.front() {
            Some(&oldest) => self.jobs[oldest as usize].first_proc as usize,
            None => self.procs.next_number(),
        };
        let (jobs, sum) = (&self.jobs, &mut self.released_delivered_ns);
        self.procs.finished_below(alive_from, |p| *sum += delivered_work_ns(jobs, p));
    }

    fn job_record(&self, j: u32, cpus: CpuSet) -> JobRecord {
        let job = &self.jobs[j as usize];
        let arrival_s = job.spec.arrival.as_secs_f64();
        let start_s = job.start.expect("started").as_secs_f64();
        let finish_s = job.finish.expect("finished").as_secs_f64();
        let response_s = finish_s - arrival_s;
        let dedicated_s = job.dedicated_ns as f64 / 1e9;
        JobRecord {
            job_number: job.spec.job_number,
            job_type: job.spec.label.clone(),
            tasks: job.spec.tasks,
            iterations: job.spec.program.iterations,
            arrival_s,
            start_s,
            finish_s,
            wait_s: start_s - arrival_s,
            execution_s: finish_s - start_s,
            response_s,
            dedicated_s,
            slowdown: response_s / dedicated_s,
            bounded_slowdown: crate::metrics::bounded_slowdown(response_s, dedicated_s, self.bsld_threshold_s),
            cpus,
        }
    }

    // ---- the node scheduler's jobs and event ----------------------------------

    /// The node scheduler's own event (the gang quantum's boundary); fast
    /// mode first notes what the quantum that ends did.
    fn on_scheduler_event(&mut self, now: SimTime) {
        if self.fast.is_some() {
            self.fast_quantum_ends(now);
        }
        P::Node::on_event(self, now);
        let run_ns = self.run_clock(now).ns();
        if self.coordinator.next_report_ns().is_some_and(|due_ns| run_ns >= due_ns) {
            self.report_to_controller(now, run_ns);
        }
    }

    // ---- the controller's agents (schemes that run the controller) -----------------

    /// The nodes report their jobs' CPU time, as agents do at every report period (read at the first gang quantum's
    /// end on or after it: the nodes' reports and the controller's tick come in between quanta), and the
    /// controller does its periodic work. Reading changes nothing in the simulation.
    fn report_to_controller(&mut self, now: SimTime, run_ns: u64) {
        let mut usage = coordinator::UsageByNode::new();
        for &j in &self.started {
            if self.jobs[j as usize].placement.is_some() {
                for (node, cpu_ns, pids) in self.job_on_nodes(j, now) {
                    usage.entry(node).or_default().push((j, cpu_ns, pids));
                }
            }
        }
        if self.coordinator.report(run_ns, &usage) {
            P::Node::plan_changed(self, now);
        }
    }

    /// What each node of job `j` reads of it by `now` from its cgroup, in one pass over its processes: the CPU
    /// time its processes used there and those still alive, its nodes in the order its ranks reach them. The time
    /// since a CPU was last accounted is read, not charged, and only to the end of a compute phase (past it the
    /// process may be in I/O).
    fn job_on_nodes(&self, j: u32, now: SimTime) -> Vec<(u32, u64, Vec<i32>)> {
        let job = &self.jobs[j as usize];
        let mut on_nodes: Vec<(u32, u64, Vec<i32>)> = Vec::new();
        let mut index_of_node: BTreeMap<u32, usize> = BTreeMap::new();
        for p in job.first_proc..job.first_proc + job.spec.tasks {
            let proc = &self.procs[p as usize];
            let cpu = &self.cpus[proc.cpu as usize];
            let since_accounted_ns = now.ns().saturating_sub(cpu.accounted_until.max(cpu.switch_until).ns());
            let unaccounted_ns = match proc.phase {
                _ if cpu.running != Some(p) => 0,
                Phase::Compute { remaining_ns } => since_accounted_ns.min(remaining_ns),
                Phase::Recv => since_accounted_ns,
                _ => 0,
            };
            let i = *index_of_node.entry(cpu.node).or_insert_with(|| {
                on_nodes.push((cpu.node, 0, Vec::new()));
                on_nodes.len() - 1
            });
            on_nodes[i].1 += proc.cpu_ns + unaccounted_ns;
            if proc.state != ProcState::Exited {
                on_nodes[i].2.push(p as i32);
            }
        }
        on_nodes
    }

    /// Each placed job's rows, CPUs and first process (see `Host::placed_jobs`).
    fn placed_jobs(&self, mut each: impl FnMut(&[u32], &[u32], u32, u32)) {
        for (j, rows) in self.running_jobs_rows() {
            let job = &self.jobs[j as usize];
            if let Some(Placement { cpus, .. }) = &job.placement {
                each(&rows, cpus, job.first_proc, job.spec.tasks);
            }
        }
    }

    /// (job, matrix rows it runs in) of every placed job, from the full plan when there is one (one pass).
    fn running_jobs_rows(&self) -> Vec<(u32, Vec<u32>)> {
        let cosched = self.coordinator.coscheduler();
        match cosched.plan() {
            Some(plan) => plan
                .jobs
                .iter()
                .filter_map(|planned| match &planned.status {
                    JobStatus::Placed { rows: slots, .. } => Some((
                        self.coordinator.sim_job(planned.id),
                        slots.iter().filter_map(|&s| plan.slot_rows[s as usize]).collect(),
                    )),
                    JobStatus::Queued => None,
                })
                .collect(),
            None => (0..self.jobs.len() as u32)
                .filter(|&j| self.jobs[j as usize].placement.is_some())
                .map(|j| (j, self.coordinator.placement(j, self.cfg.cpus_per_node).1))
                .collect(),
        }
    }

    // ---- processes ----------------------------------------------------------

    /// Processes of this CPU whose I/O has completed by `now` become runnable,
    /// in order of completion.
    ///
    /// Inlined: at most visits no I/O has ended, which one comparison tells.
    #[inline(always)]
    pub(super) fn complete_io(&mut self, c: u32, now: SimTime) {
        if self.cpus[c as usize].earliest_io_end <= now {
            self.wake_after_io(c, now);
        }
    }

    fn wake_after_io(&mut self, c: u32, now: SimTime) {
        while let Some(&(io_end, p)) = self.cpus[c as usize].in_io.first().filter(|&&(end, _)| end <= now) {
            let cpu = &mut self.cpus[c as usize];
            cpu.in_io.remove(0);
            cpu.earliest_io_end = cpu.in_io.first().map_or(SimTime::MAX, |&(end, _)| end);
            self.procs[p as usize].phase = Phase::Send;
            self.wake(p, io_end, now);
        }
    }

    /// Whether `in_io` holds exactly the residents in `Phase::Io`, in order (a debug check).
    fn in_io_is_consistent(&self, c: u32) -> bool {
        let cpu = &self.cpus[c as usize];
        let doing_io = cpu.residents.iter().filter(|&&p| self.procs[p as usize].phase == Phase::Io).count();
        cpu.in_io.is_sorted()
            && cpu.in_io.len() == doing_io
            && cpu.in_io.iter().all(|&(_, p)| cpu.residents.contains(&p) && self.procs[p as usize].phase == Phase::Io)
            && cpu.earliest_io_end == cpu.in_io.first().map_or(SimTime::MAX, |&(end, _)| end)
    }

    /// A blocked process becomes runnable (at `when`, noticed at `now`) and
    /// joins its node scheduler, on the CPU of its node the scheduler
    /// chooses (its own, unless the scheduler places wakes); a CPU it moves
    /// to is visited at once.
    fn wake(&mut self, p: u32, when: SimTime, now: SimTime) {
        let proc = &mut self.procs[p as usize];
        debug_assert_eq!(proc.state, ProcState::Blocked);
        proc.state = ProcState::Ready;
        let from = proc.cpu;
        let to = P::Node::wake_cpu(self, p, now);
        if to == from {
            P::Node::make_ready(self, p);
            self.record(when, to, TraceKind::Wake { process: p });
            return;
        }
        // (The wake first: the trace stays in time order when `when < now`.)
        self.record(when, to, TraceKind::Wake { process: p });
        self.migrate(p, to, now);
        P::Node::make_ready(self, p);
        self.update_cpu(to, now);
    }

    /// Move `p` (not running) to CPU `to` of its node: its residence, its
    /// receive's count, its record's CPU (see `Host::migrate`).
    fn migrate(&mut self, p: u32, to: u32, now: SimTime) {
        let from = self.procs[p as usize].cpu;
        debug_assert_eq!(self.cpus[from as usize].node, self.cpus[to as usize].node, "a move within a node");
        debug_assert_ne!(self.procs[p as usize].state, ProcState::Running);
        debug_assert!(self.cpus[from as usize].in_io.iter().all(|&(_, q)| q != p), "a process in I/O stays");
        self.account(from, now);
        self.account(to, now);
        let receiving = matches!(self.procs[p as usize].phase, Phase::Recv) as u32;
        let source = &mut self.cpus[from as usize];
        source.residents.retain(|&q| q != p);
        source.residents_in_recv -= receiving;
        let target = &mut self.cpus[to as usize];
        let at = target.residents.partition_point(|&q| q < p);
        target.residents.insert(at, p);
        target.residents_in_recv += receiving;
        self.peak_processes_per_cpu = self.peak_processes_per_cpu.max(target.residents.len());
        self.procs[p as usize].cpu = to;
        self.record(now, to, TraceKind::Migrate { process: p, from });
    }

    /// A message for `dest` lands in its endpoint at `at` (now or later).
    fn deliver(&mut self, dest: u32, side: u8, at: SimTime, now: SimTime) {
        let cpu = self.procs[dest as usize].cpu;
        self.record(at, cpu, TraceKind::Deposit { process: dest });
        let inbox = &mut self.procs[dest as usize].inbox[side as usize];
        let queued_behind = !inbox.is_empty();
        inbox.push(at);
        if Self::DEPOSIT_EVENTS {
            let needed = self.deposit_needs_event(dest, at, now);
            // Debug builds queue the others too, to check the judgement.
            if needed || cfg!(debug_assertions) {
                self.queue.schedule(at, Event::Deposit { dest, judged_quiet: !needed });
            }
        }
        self.notify_spinning_receiver(dest, queued_behind, now);
    }

    /// A deposit judged at its send to need no event has landed (queued in
    /// debug builds only): no part may react to it.
    fn check_judged_quiet(&self, dest: u32) {
        assert!(
            !self.deposit_may_be_reacted_to(dest),
            "a deposit judged to need no event finds a receiver a part may react to"
        );
    }

    /// Whether a part may react to a message landing for `dest` now, judged
    /// from `dest`'s own record (`ReceiveWait::may_react`).
    fn deposit_may_be_reacted_to(&self, dest: u32) -> bool {
        P::Arrival::REACTS_TO_DEPOSITS || P::Wait::may_react(self, dest)
    }

    /// Whether a landing at `at` needs an event: a reaction to arrivals
    /// (demand-based coscheduling) always does, a receive wait only when its
    /// receiver may be blocked by then. Fast mode keeps every event: it acts
    /// at their instants (a window closes at the first one after its end).
    fn deposit_needs_event(&self, dest: u32, at: SimTime, now: SimTime) -> bool {
        P::Arrival::REACTS_TO_DEPOSITS || self.fast.is_some() || P::Wait::may_react_at(self, dest, at, now)
    }

    /// A receiver spinning on its CPU must be looked at again when a message
    /// it may be waiting for is decided or sent. The CPU being visited books
    /// its next visit itself. A message that lands now is seen at a booked
    /// visit too, never by a visit nested in this one: the landing's event
    /// comes first, and the instant's visits go in CPU order whenever the
    /// message was decided.
    ///
    /// Two messages need no new booking, as the booking would keep its
    /// instant: one `queued_behind` another from the same neighbour (the
    /// endpoint's first message stays the same), and one for a receiver
    /// that still awaits a message its neighbour has not sent (its receive
    /// cannot complete and none of its missing messages can be decided, as
    /// when its CPU was last booked: a message only goes from unsent to
    /// undecided to landed). Fast mode keeps every booking: it closes its
    /// windows at the instants the engine handles.
    ///
    /// Inlined: most messages need no booking, which the receiver's record
    /// tells; the booking is the call.
    #[inline(always)]
    fn notify_spinning_receiver(&mut self, dest: u32, queued_behind: bool, now: SimTime) {
        let proc = &self.procs[dest as usize];
        let cpu = proc.cpu;
        if proc.state != ProcState::Running || !matches!(proc.phase, Phase::Recv) || self.visiting == Some(cpu) {
            return;
        }
        if self.fast.is_none() && (queued_behind || self.awaits_unsent_message(dest)) {
            return;
        }
        self.book_visit(cpu, now);
    }

    /// Whether an endpoint of `p` is empty with no message for it undecided
    /// at the interface: its neighbour has not sent it yet.
    fn awaits_unsent_message(&self, p: u32) -> bool {
        let proc = &self.procs[p as usize];
        let count = proc.neighbour_count as usize;
        proc.inbox[..count].iter().zip(proc.undecided).any(|(inbox, undecided)| inbox.is_empty() && undecided == 0)
    }

    /// Decide the deposits of messages to `node` that can be decided by `now`.
    ///
    /// Inlined: at most visits nothing can be decided, which one comparison tells.
    #[inline(always)]
    fn decide_deposits(&mut self, node: u32, now: SimTime) {
        if self.nics[node as usize].may_decide_by(now, self.latency_ns) {
            self.decide_deposits_now(node, now);
        }
    }

    fn decide_deposits_now(&mut self, node: u32, now: SimTime) {
        let occupancy = self.cfg.network.nic_ns_per_message;
        while let Some(m) = self.nics[node as usize].take_decidable(now, self.latency_ns) {
            self.procs[m.dest as usize].undecided[m.side as usize] -= 1;
            let at = self.nics[node as usize].deposit_time(m.arrival, occupancy);
            self.deliver(m.dest, m.side, at, now);
        }
    }

    fn has_all_messages(&self, p: u32, now: SimTime) -> bool {
        debug_assert!(now != SimTime::MAX);
        self.procs[p as usize].latest_first_deposit_ns() <= now.ns()
    }

    /// When every awaited message will be in the endpoint, if all are sent.
    fn messages_complete_at(&self, p: u32) -> Option<SimTime> {
        let latest = self.procs[p as usize].latest_first_deposit_ns();
        (latest != Inbox::EMPTY_NS).then_some(SimTime(latest))
    }

    /// The first instant a visit may find `p`'s receive complete, when every
    /// message it still misses is on its way (undecided at its node's
    /// interface): the latest of their arrivals. A message is decided at the
    /// first visit to its node after it left its sender, and lands no sooner
    /// than it arrives. `None` when a missing message is not sent yet (its
    /// send books the receiver's visit: `notify_spinning_receiver`) or none
    /// is undecided.
    fn missing_messages_decidable_at(&self, p: u32) -> Option<SimTime> {
        let proc = &self.procs[p as usize];
        let nic = &self.nics[self.cpus[proc.cpu as usize].node as usize];
        let mut latest = None;
        for (side, inbox) in proc.inbox[..proc.neighbour_count as usize].iter().enumerate() {
            if inbox.front().is_none() {
                if proc.undecided[side] == 0 {
                    debug_assert_eq!(nic.undecided_arrival_for(p, side as u8), None, "undecided count of {p}");
                    return None;
                }
                let arrival = nic.undecided_arrival_for(p, side as u8)?;
                latest = latest.max(Some(arrival));
            }
        }
        latest
    }

    /// Send one message to each neighbour: left first, then right; or arrive at the job's barrier.
    fn send_messages(&mut self, p: u32, now: SimTime) {
        let proc = &self.procs[p as usize];
        if proc.barrier {
            self.arrive_at_barrier(p, now);
            return;
        }
        let (neighbours, dest_nodes, count) = (proc.neighbours, proc.neighbour_nodes, proc.neighbour_count);
        let node = self.cpus[proc.cpu as usize].node;
        for (side, (&dest, &dest_node)) in neighbours.iter().zip(&dest_nodes).enumerate().take(count as usize) {
            // With two neighbours, what I send left arrives on their right side.
            let dest_side = if count == 2 { 1 - side as u8 } else { 0 };
            self.send_one(node, dest, dest_node, dest_side, now);
        }
    }

    /// `p` arrives at its job's barrier. The last task to arrive releases them all: a message from it to each
    /// other task (through shared memory or the network, as any message), and its own release at once.
    fn arrive_at_barrier(&mut self, p: u32, now: SimTime) {
        let (job, cpu) = (self.procs[p as usize].job, self.procs[p as usize].cpu);
        let job = &mut self.jobs[job as usize];
        job.barrier_arrivals += 1;
        if job.barrier_arrivals < job.spec.tasks {
            return;
        }
        job.barrier_arrivals = 0;
        let (first, tasks) = (job.first_proc, job.spec.tasks);
        let node = self.cpus[cpu as usize].node;
        for dest in first..first + tasks {
            if dest == p {
                self.record(now, cpu, TraceKind::Deposit { process: p });
                self.procs[p as usize].inbox[0].push(now);
                continue;
            }
            let dest_node = self.cpus[self.procs[dest as usize].cpu as usize].node;
            self.send_one(node, dest, dest_node, 0, now);
        }
    }

    /// Send one message from `node` to endpoint `dest_side` of `dest`, on `dest_node`.
    fn send_one(&mut self, node: u32, dest: u32, dest_node: u32, dest_side: u8, now: SimTime) {
        debug_assert_eq!(dest_node, self.cpus[self.procs[dest as usize].cpu as usize].node);
        if dest_node == node {
            self.deliver(dest, dest_side, now + self.shm_latency_ns, now);
            return;
        }
        let occupancy = self.cfg.network.nic_ns_per_message;
        let leaves = self.nics[node as usize].start_send(now, occupancy);
        let arrives = leaves + self.latency_ns;
        let receiver = &mut self.nics[dest_node as usize];
        // (`&`: both are at hand, and a branch fewer is cheaper than the call it may spare.)
        if (leaves == now) & receiver.can_decide_at_send(arrives) {
            let at = receiver.deposit_time(arrives, occupancy);
            self.deliver(dest, dest_side, at, now);
        } else {
            receiver.add_undecided(Undecided { arrival: arrives, dest, side: dest_side });
            let proc = &mut self.procs[dest as usize];
            proc.undecided[dest_side as usize] += 1;
            let queued_behind = !proc.inbox[dest_side as usize].is_empty();
            if Self::DEPOSIT_EVENTS {
                self.queue.schedule(arrives, Event::Decide { node: dest_node });
            }
            self.notify_spinning_receiver(dest, queued_behind, now);
        }
    }

    /// Let the running process `p` do everything it can at `now` without
    /// using CPU time. It may block or exit, leaving the CPU free.
    fn advance_running(&mut self, p: u32, now: SimTime) {
        let cpu = self.procs[p as usize].cpu;
        loop {
            match self.procs[p as usize].phase {
                Phase::Compute { remaining_ns: 0 } => {
                    let io_ns = self.procs[p as usize].io_next_ns;
                    if io_ns == 0 {
                        self.procs[p as usize].phase = Phase::Send;
                        continue;
                    }
                    if self.io_keeps_cpu(io_ns) {
                        self.io_on_cpu(p, now);
                    } else {
                        self.block_for_io(p, now);
                    }
                    return;
                }
                Phase::Compute { .. } => return,
                Phase::Send => {
                    self.send_messages(p, now);
                    self.start_recv(p);
                }
                Phase::Recv => {
                    if self.has_all_messages(p, now) {
                        self.finish_recv(p);
                        continue;
                    }
                    P::Wait::wait(self, p, now);
                    return;
                }
                Phase::Done => {
                    let proc = &mut self.procs[p as usize];
                    debug_assert!(proc.inbox.iter().all(Inbox::is_empty), "every message is consumed");
                    proc.state = ProcState::Exited;
                    self.leave_cpu(cpu, now, SwitchCause::Exit);
                    let c = &mut self.cpus[cpu as usize];
                    c.residents.retain(|&r| r != p);
                    P::Node::exited(&mut c.sched, p);
                    self.record(now, cpu, TraceKind::Exit { process: p });
                    self.task_exited(p, now);
                    return;
                }
                Phase::Io => unreachable!("a process doing I/O is not running"),
            }
        }
    }

    fn start_recv(&mut self, p: u32) {
        let proc = &mut self.procs[p as usize];
        proc.phase = Phase::Recv;
        self.cpus[proc.cpu as usize].residents_in_recv += 1;
        self.wait.start_receive(&mut proc.wait);
        let rounds = self.jobs[proc.job as usize].spec.program.rounds;
        let next = proc.iterations_done + 1;
        let nominal_ns = rounds.long_compute_ns_of(next, proc.iterations).unwrap_or(proc.nominal_compute_ns);
        proc.next_compute_ns = skewed(self.cfg.skew, nominal_ns, &mut proc.rng);
        proc.next_io_ns = skewed(self.cfg.skew, proc.nominal_io_ns, &mut proc.rng);
    }

    /// Every awaited message is there: consume them and start the next
    /// iteration, or finish.
    fn finish_recv(&mut self, p: u32) {
        let proc = &mut self.procs[p as usize];
        let count = proc.neighbour_count as usize;
        for inbox in &mut proc.inbox[..count] {
            inbox.consume();
        }
        self.cpus[proc.cpu as usize].residents_in_recv -= 1;
        proc.iterations_done += 1;
        proc.phase = if proc.iterations_done == proc.iterations {
            Phase::Done
        } else {
            proc.io_next_ns = proc.next_io_ns;
            Phase::Compute { remaining_ns: proc.next_compute_ns }
        };
    }

    /// Whether `p`'s receive ends at `m` with more iterations to go: then it
    /// just computes on, and nothing happens at `m` worth a visit.
    fn recv_continues_at(&self, p: u32, spinning_from: SimTime) -> Option<SimTime> {
        let proc = &self.procs[p as usize];
        if proc.iterations_done + 1 >= proc.iterations {
            return None;
        }
        let complete = self.messages_complete_at(p)?;
        // Spin-block and spin-yield act when the spin time runs out first.
        match P::Wait::spin_deadline(self, p, spinning_from) {
            Some(deadline) if complete.max(spinning_from) > deadline => None,
            _ => Some(complete),
        }
    }

    /// The running receiver `p` blocks with a system call until an awaited
    /// message arrives (spin-block's wait once its spin runs out).
    pub(crate) fn block_in_recv(&mut self, p: u32, now: SimTime) {
        let cpu = self.procs[p as usize].cpu;
        let proc = &mut self.procs[p as usize];
        proc.state = ProcState::Blocked;
        P::Node::blocked(self, cpu, p);
        self.leave_cpu(cpu, now, SwitchCause::Block);
        self.charge_kernel(cpu, now, self.cfg.costs.syscall_ns);
        self.record(now, cpu, TraceKind::Block { process: p });
    }

    /// The running process `p` ends its compute at `at` and blocks for its I/O.
    fn block_for_io(&mut self, p: u32, at: SimTime) {
        let proc = &mut self.procs[p as usize];
        debug_assert_eq!(proc.phase, Phase::Compute { remaining_ns: 0 });
        proc.phase = Phase::Io;
        proc.state = ProcState::Blocked;
        // Its completion is one of this CPU's instants (see `next_change`).
        let io = (at + proc.io_next_ns, p);
        let cpu = proc.cpu;
        let in_io = &mut self.cpus[cpu as usize].in_io;
        let place = in_io.partition_point(|&other| other < io);
        in_io.insert(place, io);
        self.cpus[cpu as usize].earliest_io_end = in_io[0].0;
        P::Node::blocked(self, cpu, p);
        self.leave_cpu(cpu, at, SwitchCause::Block);
        self.record(at, cpu, TraceKind::Block { process: p });
    }

    /// Whether an I/O of `io_ns` keeps its process's CPU instead of blocking.
    #[inline(always)]
    fn io_keeps_cpu(&self, io_ns: u64) -> bool {
        io_ns < self.io_keeps_cpu_below_ns
    }

    /// The running process `p` does its I/O on its CPU, as kernel work
    /// (counted as overhead): no block, no switch, no wake boost. It sends
    /// when the work ends. (Like a yield's system call, the work goes on
    /// even if the scheduler, acting at this instant, preempts it.)
    fn io_on_cpu(&mut self, p: u32, now: SimTime) {
        let proc = &mut self.procs[p as usize];
        debug_assert_eq!(proc.phase, Phase::Compute { remaining_ns: 0 });
        proc.phase = Phase::Send;
        let (cpu, io_ns) = (proc.cpu, proc.io_next_ns);
        self.charge_kernel(cpu, now, io_ns);
        self.record(now, cpu, TraceKind::IoOnCpu { process: p });
    }

    // ---- CPUs -----------------------------------------------------------------

    /// Charge the CPU's time since its last visit. A compute phase that ended
    /// in between (only when `next_change` saw the CPU would stay idle through
    /// the I/O that follows) is closed here, at its exact end.
    ///
    /// Inlined: a CPU is often accounted again at the same instant (a visit
    /// books its next one), which one comparison tells.
    #[inline(always)]
    fn account(&mut self, c: u32, now: SimTime) {
        if now > self.cpus[c as usize].accounted_until {
            self.account_since_last(c, now);
        }
    }

    fn account_since_last(&mut self, c: u32, now: SimTime) {
        let cpu = &mut self.cpus[c as usize];
        let mut from = cpu.accounted_until;
        if cpu.switch_until > from {
            let until = now.min(cpu.switch_until);
            let kernel = until - from;
            let overhead = kernel.min(cpu.overhead_pending_ns);
            cpu.overhead_pending_ns -= overhead;
            cpu.time.overhead_ns += overhead;
            cpu.time.switch_ns += kernel - overhead;
            from = until;
        }
        cpu.accounted_until = now;
        // The running process may pass phase ends that `next_change` chose not
        // to visit: a receive that completes mid-way, a compute followed by I/O.
        while from < now {
            let Some(p) = self.cpus[c as usize].running else {
                self.cpus[c as usize].time.idle_ns += now - from;
                break;
            };
            let (until, phase) = match self.procs[p as usize].phase {
                Phase::Compute { remaining_ns } => (now.min(from + remaining_ns), Phase::Compute { remaining_ns }),
                Phase::Recv => match self.recv_continues_at(p, from) {
                    Some(m) if m < now => (m.max(from), Phase::Recv),
                    _ => (now, Phase::Recv),
                },
                other => unreachable!("a running process cannot spend time in {other:?}"),
            };
            let ran = until - from;
            let cpu = &mut self.cpus[c as usize];
            let proc = &mut self.procs[p as usize];
            let computing = matches!(phase, Phase::Compute { .. });
            proc.cpu_ns += ran;
            P::Node::charge(&mut cpu.sched, &mut proc.sched, ran, until, computing);
            from = until;
            match phase {
                Phase::Compute { remaining_ns } => {
                    cpu.time.useful_ns += ran;
                    proc.phase = Phase::Compute { remaining_ns: remaining_ns - ran };
                    if remaining_ns == ran && from < now {
                        debug_assert!(
                            proc.io_next_ns > 0 && proc.io_next_ns >= self.io_keeps_cpu_below_ns,
                            "compute overran its end"
                        );
                        self.block_for_io(p, from);
                    }
                }
                _ => {
                    cpu.time.spin_ns += ran;
                    P::Wait::charge_spin(&mut proc.wait, ran);
                    if from < now {
                        self.finish_recv(p);
                    }
                }
            }
        }
    }

    /// A run visited at every tick visits the CPUs at a tick in number order.
    /// So when the visit of CPU `v` at `now` (or an event it queued for
    /// `now`) reaches a CPU below it whose scheduler acts at `now`, that CPU
    /// has had its visit at `now` already, before `v` changed anything: its
    /// scheduler acted then, with nothing to do (had there been anything,
    /// the CPU would have been booked for `now` and visited before `v`).
    /// The tickless engine skipped that visit; this passes the tick as the
    /// visit did, so that what `v` changed waits for the next tick here too.
    #[inline]
    fn pass_tick_visited_earlier(&mut self, c: u32, now: SimTime) {
        let (at, v) = self.visited_through;
        if at == now && c < v && P::Node::acts_at(self, c, now) == now {
            P::Node::tick_passed(self, c, now);
        }
    }

    /// Visit a CPU at `now` outside the main loop's order (an event's, or
    /// one nested in another visit): charge time, apply the rules due, book
    /// the next visit.
    fn update_cpu(&mut self, c: u32, now: SimTime) {
        let outer_visit = self.visiting.replace(c);
        self.pass_tick_visited_earlier(c, now);
        self.visit_cpu(c, now);
        self.visiting = outer_visit;
    }

    /// The visit proper, once any tick passed earlier at `now` is passed.
    fn visit_cpu(&mut self, c: u32, now: SimTime) {
        self.clock.round_at(now);
        // The CPU's record, its running process's and its interface's are
        // most often out of the nearest caches by the time the CPU is
        // visited again. Their addresses do not depend on one another: read
        // from all three first, so that the misses overlap rather than
        // follow one another. (Charging the time changes no interface.)
        let node = c / self.cfg.cpus_per_node;
        let may_decide = self.nics[node as usize].may_decide_by(now, self.latency_ns);
        let running = self.running_on[c as usize];
        if running != NO_PROC {
            std::hint::black_box(self.procs[running as usize].phase);
        }
        debug_assert_eq!(node, self.cpus[c as usize].node);
        debug_assert_eq!(Some(running).filter(|&p| p != NO_PROC), self.cpus[c as usize].running);
        self.account(c, now);
        debug_assert_eq!(may_decide, self.nics[node as usize].may_decide_by(now, self.latency_ns));
        if may_decide {
            self.decide_deposits_now(node, now);
        }
        self.complete_io(c, now);
        P::Node::on_visit(self, c, now);
        if self.cpus[c as usize].switch_until > now {
            // In the kernel: a tick now waits for the end of the kernel work.
            self.book_next_visit(c, now);
            return;
        }
        let tick_due = P::Node::acts_at(self, c, now) == now;
        if let Some(p) = self.cpus[c as usize].running {
            self.advance_running(p, now);
        }
        if tick_due {
            self.scheduler_tick(c, now);
        } else {
            P::Node::between_ticks(self, c, now);
        }
        self.dispatch(c, now);
        self.book_next_visit(c, now);
    }

    /// The node scheduler's activity at a tick (or a deferred one), with the
    /// arrival reaction's periodic work around it.
    fn scheduler_tick(&mut self, c: u32, now: SimTime) {
        P::Arrival::before_tick(self, c, now);
        P::Node::tick(self, c, now);
        P::Arrival::after_tick(self, c, now);
    }

    /// While the CPU is free, give it to the next process.
    fn dispatch(&mut self, c: u32, now: SimTime) {
        for _ in 0..MAX_DISPATCHES_PER_VISIT {
            if self.cpus[c as usize].running.is_some() {
                return;
            }
            let Some(p) = P::Node::pick_next(self, c) else {
                // A CPU about to idle may take work from its node's others.
                if P::Node::pull_when_idle(self, c, now) {
                    continue;
                }
                return;
            };
            self.set_running(c, now, Some(p));
            self.procs[p as usize].state = ProcState::Running;
            let cpu = &mut self.cpus[c as usize];
            // A free switch (`--cs-us 0`) is none: the process must go on at
            // once, for no switch's end will come to advance it.
            let switching = P::Node::CHARGES_DISPATCH_SWITCH
                && cpu.last_process.is_some_and(|last| last != p)
                && self.cfg.costs.context_switch_ns > 0;
            cpu.last_process = Some(p);
            P::Node::dispatched(self, c, p);
            let cpu = &mut self.cpus[c as usize];
            if switching {
                cpu.add_kernel_work(now, self.cfg.costs.context_switch_ns);
                self.switches.count(cpu.left_because);
            }
            self.record(now, c, TraceKind::Dispatch { process: p, switch_cost: switching });
            if switching {
                return; // the process starts after the switch; the visit then advances it
            }
            self.advance_running(p, now);
        }
        panic!("CPU {c} dispatched {MAX_DISPATCHES_PER_VISIT} times at {now}: a process loops without using time");
    }

    /// CPU `c`'s process leaves it at `at`, for `cause`.
    fn leave_cpu(&mut self, c: u32, at: SimTime, cause: SwitchCause) {
        self.cpus[c as usize].left_because = cause;
        self.set_running(c, at, None);
    }

    /// Set what CPU `c` runs from `at` on.
    fn set_running(&mut self, c: u32, at: SimTime, process: Option<u32>) {
        P::Arrival::before_running_changes(self, c, at);
        if let Some(leaving) = self.cpus[c as usize].running.filter(|&r| Some(r) != process) {
            self.procs[leaving as usize].off_cpu_since_ns = at.ns();
        }
        self.cpus[c as usize].running = process;
        self.running_on[c as usize] = process.unwrap_or(NO_PROC);
    }

    /// Kernel work of `ns` on CPU `c` (accounted up to `now`): it runs after
    /// any kernel work already under way and delays the running process.
    /// Counted as overhead.
    fn charge_kernel(&mut self, c: u32, now: SimTime, ns: u64) {
        if ns == 0 {
            return;
        }
        let cpu = &mut self.cpus[c as usize];
        debug_assert_eq!(cpu.accounted_until, now, "charge kernel time on an accounted CPU");
        cpu.add_kernel_work(now, ns);
        cpu.overhead_pending_ns += ns;
    }

    /// A message has landed in `dest`'s endpoint (an event only when a part
    /// reacts to deposits): the receive wait's reaction, else the arrival's.
    fn on_deposit(&mut self, dest: u32, now: SimTime) {
        // Most deposits find a receiver no part reacts to: its CPU's charge
        // and I/O ends then wait for the CPU's next visit (charging at more
        // instants changes nothing: see `with_visits_every_tick`).
        if !self.deposit_may_be_reacted_to(dest) {
            debug_assert!(
                !(P::Wait::on_deposit(self, dest, now) || P::Arrival::on_deposit(self, dest, now)),
                "a part reacted to a deposit it said it would not"
            );
            return;
        }
        let cpu = self.procs[dest as usize].cpu;
        // Phase ends and I/O completions the CPU has not been visited for happen first.
        self.account(cpu, now);
        self.complete_io(cpu, now);
        if P::Wait::on_deposit(self, dest, now) || P::Arrival::on_deposit(self, dest, now) {
            self.update_cpu(cpu, now);
        }
    }

    /// The next instant anything can change on this CPU. The parts give
    /// their own instants: the node scheduler when a wake is noticed, when
    /// the running process may lose the CPU and when a rule of its visits is
    /// due (the raise), the receive wait when a spin runs out, the arrival
    /// reaction when it acts by itself.
    fn next_change(&self, c: u32, now: SimTime) -> SimTime {
        let cpu = &self.cpus[c as usize];
        // An I/O may have ended unnoticed while the CPU ran another process (a gang cell notices another row's
        // wake only at a later visit), and that process may then have blocked in the accounting with no visit of
        // its own: on the idle CPU the wake matters at once, never at its past instant.
        let io_end = cpu.earliest_io_end.max(now);
        debug_assert!(self.in_io_is_consistent(c));
        let busy = cpu.switch_until > now || cpu.running.is_some();
        // A wake on a busy CPU changes nothing before its node scheduler
        // notices it. Waiting for that instant saves a visit per I/O.
        let wake_matters_at =
            if !busy || io_end == SimTime::MAX { io_end } else { P::Node::wake_noticed_at(self, c, io_end) };
        let switching = cpu.switch_until > now;
        // The parts' own instants (periodic boost's tick, the raise), which
        // kernel work does not put off.
        let parts_act_at = P::Arrival::acts_at(self, c, now).min(P::Node::on_visit_due_at(self, c, now));
        let Some(p) = cpu.running else {
            // An idle CPU dispatches at the end of its kernel work what is
            // ready by then, and a process waking later when it wakes: after
            // a receiver blocks with nothing else ready, the end of its
            // system call needs no visit.
            // (Unless a wake may go to another CPU: then it matters at once.)
            let may_move = P::Node::wakes_may_move(self);
            // (A CPU left idle inside kernel work may take a sibling's
            // process once the work ends: that end matters too.)
            let idle_next = if !switching {
                wake_matters_at
            } else if P::Node::has_ready(self, c) || P::Node::pulls_when_free(self, c) {
                if may_move {
                    cpu.switch_until.min(io_end)
                } else {
                    cpu.switch_until
                }
            } else if may_move {
                io_end
            } else {
                io_end.max(cpu.switch_until)
            };
            return idle_next.min(parts_act_at);
        };
        let proc = &self.procs[p as usize];
        // The incoming process starts when the switch ends. If it is
        // computing, nothing happens then: its next instants follow from there.
        let start = now.max(cpu.switch_until);
        // One back from I/O sends its messages then, or now if its switch is
        // over (a visit of another CPU may book this one's next visit at the
        // instant its switch ends, before that switch's own visit has come).
        // A receiver just spins on: its instants follow from there too.
        if matches!(proc.phase, Phase::Send) {
            return wake_matters_at.min(start).min(parts_act_at);
        }
        let mut next = wake_matters_at;
        // While it runs, the node scheduler may take the CPU; once it
        // blocks, only its own wake does.
        let mut running_until = SimTime::MAX;
        // A receive that completes before more iterations computes on from then.
        let computing = match proc.phase {
            Phase::Compute { remaining_ns } => Some((start, remaining_ns, proc.io_next_ns)),
            Phase::Recv => {
                self.recv_continues_at(p, start).map(|m| (m.max(start), proc.next_compute_ns, proc.next_io_ns))
            }
            _ => None,
        };
        match (proc.phase, computing) {
            (_, Some((compute_start, remaining_ns, io_next_ns))) => {
                let compute_end = compute_start + remaining_ns;
                // If nothing else may use the CPU, a process that goes on to
                // I/O leaves it idle until it wakes: nothing happens at the
                // compute's end worth a visit.
                if io_next_ns > 0 && !self.io_keeps_cpu(io_next_ns) && P::Node::idle_while_blocked(self, c) {
                    next = next.min(compute_end + io_next_ns);
                    running_until = compute_end;
                } else {
                    next = next.min(compute_end);
                }
            }
            (Phase::Recv, None) => match self.messages_complete_at(p).filter(|&complete| {
                P::Wait::spin_deadline(self, p, start).is_none_or(|deadline| complete.max(start) <= deadline)
            }) {
                // (Complete before a switch ends: the receive ends with it.)
                Some(complete) => next = next.min(complete.max(start)),
                None => {
                    if let Some(decidable) = self.missing_messages_decidable_at(p) {
                        next = next.min(decidable.max(now));
                    }
                }
            },
            _ => {}
        }
        if matches!(proc.phase, Phase::Recv) {
            if let Some(deadline) = P::Wait::spin_deadline(self, p, start) {
                next = next.min(deadline.max(now));
            }
        }
        next = next.min(parts_act_at);
        let preempts_at = P::Node::preempts_at(self, c, p, start, now);
        if preempts_at <= running_until {
            next = next.min(preempts_at);
        }
        debug_assert!(
            next >= now,
            "CPU {c}: next change {next:?} is before {now:?}: running {:?} {:?}, switch until {:?}, io {:?}",
            cpu.running,
            proc.phase,
            cpu.switch_until,
            wake_matters_at
        );
        next
    }

    /// Book the next visit of CPU `c` from another CPU's visit or an event.
    #[inline(never)]
    fn book_visit(&mut self, c: u32, now: SimTime) {
        self.pass_tick_visited_earlier(c, now);
        // The running process's remaining compute and quantum are as of the
        // last accounting: bring them up to now first.
        self.account(c, now);
        self.book_next_visit(c, now);
    }

    /// Book the next visit of CPU `c`, accounted up to `now` and past any
    /// tick passed earlier at `now` (as at the end of its own visit).
    fn book_next_visit(&mut self, c: u32, now: SimTime) {
        debug_assert_eq!(self.cpus[c as usize].accounted_until, now);
        let mut at = self.next_change(c, now);
        debug_assert!(at >= now, "CPU {c}'s next change ({at:?}) comes before now ({now:?})");
        if self.visit_every_tick {
            at = at.min(now.next_multiple_after(self.cfg.scheduler.tick_ns));
            let kernel_end = self.cpus[c as usize].switch_until;
            if kernel_end > now {
                at = at.min(kernel_end);
            }
        }
        // A receiver's CPU booked again after a send often keeps its instant.
        if self.visits.armed_at(c) != at {
            self.visits.set(c, at);
        }
    }
}

/// The parts' view of the engine (see [`view`]).
impl<P: Parts> Host for Engine<'_, P> {
    type NodeCpu = <P::Node as NodeScheduler>::Cpu;
    type NodeProc = <P::Node as NodeScheduler>::Proc;
    type NodeMachine = <P::Node as NodeScheduler>::Machine;
    type WaitProc = <P::Wait as ReceiveWait>::Proc;
    type Wait = P::Wait;
    type ArrivalCpu = <P::Arrival as MessageArrival>::Cpu;
    type Arrival = P::Arrival;

    #[inline(always)]
    fn cfg(&self) -> &SimConfig {
        self.cfg
    }
    #[inline(always)]
    fn clock(&self) -> &SchedulerClock {
        &self.clock
    }
    #[inline(always)]
    fn cpu(&self, c: u32) -> &Cpu<P> {
        &self.cpus[c as usize]
    }
    #[inline(always)]
    fn cpu_mut(&mut self, c: u32) -> &mut Cpu<P> {
        &mut self.cpus[c as usize]
    }
    #[inline(always)]
    fn proc(&self, p: u32) -> &Proc<P> {
        &self.procs[p as usize]
    }
    #[inline(always)]
    fn proc_mut(&mut self, p: u32) -> &mut Proc<P> {
        &mut self.procs[p as usize]
    }
    #[inline(always)]
    fn records_mut(&mut self) -> RecordsMut<'_, Self::NodeCpu, Self::ArrivalCpu, Self::NodeProc, Self::WaitProc> {
        RecordsMut { cfg: self.cfg, cpus: &mut self.cpus, procs: &mut self.procs }
    }
    #[inline(always)]
    fn wait(&self) -> &P::Wait {
        &self.wait
    }
    #[inline(always)]
    fn wait_mut(&mut self) -> &mut P::Wait {
        &mut self.wait
    }
    #[inline(always)]
    fn arrival_mut(&mut self) -> &mut P::Arrival {
        &mut self.arrival
    }
    #[inline(always)]
    fn node_machine(&self) -> &Self::NodeMachine {
        &self.node_machine
    }
    #[inline(always)]
    fn node_machine_mut(&mut self) -> &mut Self::NodeMachine {
        &mut self.node_machine
    }
    #[inline(always)]
    fn coscheduler(&self) -> &Coscheduler {
        self.coordinator.coscheduler()
    }

    #[inline(always)]
    fn record(&mut self, now: SimTime, c: u32, kind: TraceKind) {
        Engine::record(self, now, c, kind);
    }
    #[inline(always)]
    fn charge_kernel(&mut self, c: u32, now: SimTime, ns: u64) {
        Engine::charge_kernel(self, c, now, ns);
    }
    fn count_boost(&mut self, displaced: Displaced, breaks_a_pair: bool) {
        self.boosts.count(displaced, breaks_a_pair);
    }
    fn has_unseen_message(&self, p: u32, now: SimTime) -> bool {
        let proc = &self.procs[p as usize];
        let unseen = |inbox: &Inbox| (proc.off_cpu_since_ns + 1..=now.ns()).contains(&inbox.front_ns());
        proc.inbox[..proc.neighbour_count as usize].iter().any(unseen)
    }
    fn cache_refill_ns(&self, p: u32) -> u64 {
        let job = &self.jobs[self.procs[p as usize].job as usize];
        self.cfg.costs.cache_refill_ns(job.spec.program.working_set_bytes)
    }
    #[inline(always)]
    fn wake(&mut self, p: u32, when: SimTime) {
        Engine::wake(self, p, when, when);
    }
    #[inline(always)]
    fn block_in_recv(&mut self, p: u32, now: SimTime) {
        Engine::block_in_recv(self, p, now);
    }
    #[inline(always)]
    fn release_cpu(&mut self, c: u32, at: SimTime, cause: SwitchCause) {
        self.leave_cpu(c, at, cause);
    }
    #[inline(always)]
    fn dispatch(&mut self, c: u32, now: SimTime) {
        Engine::dispatch(self, c, now);
    }
    #[inline(always)]
    fn has_all_messages(&self, p: u32, now: SimTime) -> bool {
        Engine::has_all_messages(self, p, now)
    }
    #[inline(always)]
    fn account(&mut self, c: u32, now: SimTime) {
        Engine::account(self, c, now);
    }
    #[inline(always)]
    fn visit(&mut self, c: u32, now: SimTime) {
        self.update_cpu(c, now);
    }
    fn rebook(&mut self, c: u32, now: SimTime) {
        self.book_visit(c, now);
    }
    fn migrate(&mut self, p: u32, to: u32, now: SimTime) {
        Engine::migrate(self, p, to, now);
    }
    #[inline(always)]
    fn book_scheduler_event(&mut self, at: SimTime) {
        self.queue.schedule(at, Event::Scheduler);
    }
    fn placed_jobs(&self, each: impl FnMut(&[u32], &[u32], u32, u32)) {
        Engine::placed_jobs(self, each);
    }

    #[inline(always)]
    fn favour(&mut self, p: u32) {
        P::Node::favour(self, p);
    }
    #[inline(always)]
    fn favour_without_preempting(&mut self, p: u32) {
        P::Node::favour_without_preempting(self, p);
    }
    #[inline(always)]
    fn preempt_for(&mut self, c: u32, p: u32) {
        P::Node::preempt_for(&mut self.cpus[c as usize].sched, p);
    }
    #[inline(always)]
    fn yield_below_others(&mut self, c: u32, p: u32) -> Option<u8> {
        P::Node::yield_below_others(self, c, p)
    }
    #[inline(always)]
    fn scheduler_acts_at(&self, c: u32, from: SimTime) -> SimTime {
        P::Node::acts_at(self, c, from)
    }
    #[inline(always)]
    fn has_ready(&self, c: u32) -> bool {
        P::Node::has_ready(self, c)
    }
}

/// Stop a run whose clock went back: a visit or event booked in the past breaks the model's invariants, and a run
/// that went on would report wrong numbers without a sign. Kept in release builds (one comparison per event), so
/// that such a fault on a user's run is a report, not a result.
#[inline(always)]
fn check_clock_forward(previous: SimTime, now: SimTime, events_handled: u64) {
    if now < previous {
        clock_went_back(previous, now, events_handled);
    }
}

#[cold]
#[inline(never)]
fn clock_went_back(previous: SimTime, now: SimTime, events_handled: u64) -> ! {
    panic!(
        "internal error: the simulated clock went back from {previous:?} to {now:?} after {events_handled} events; \
         the run's results would be wrong, so it stops. Please report it with the command (its seed and flags)"
    )
}

/// Work a process delivered: its iterations at its job's dedicated time (CPU-ns).
fn delivered_work_ns<N, W>(jobs: &[JobState], p: &records::Proc<N, W>) -> f64 {
    let job = &jobs[p.job as usize];
    job.dedicated_ns as f64 * p.iterations_done as f64 / job.spec.program.iterations.max(1) as f64
}

/// A nominal duration times the skew factor `1 + U(-s/2, s/2)`.
fn skewed(skew: f64, nominal_ns: u64, rng: &mut Rng) -> u64 {
    if skew == 0.0 || nominal_ns == 0 {
        return nominal_ns;
    }
    let factor = 1.0 + rng.uniform_range(-skew / 2.0, skew / 2.0);
    round_to_u64(nominal_ns as f64 * factor)
}

/// `x.round() as u64`, without the call to the C library's `round` (the
/// default x86-64 target has no rounding instruction): for `x >= 0` the
/// fraction `x - trunc(x)` is exact, and a half rounds away from zero.
/// Negative and NaN give 0 and too large saturates, as the cast does.
fn round_to_u64(x: f64) -> u64 {
    // Below 2^53 every value is an integer plus an exact fraction, and the
    // signed conversion (one instruction) gives the same integer part as the
    // saturating unsigned one (a dozen): the common case takes the short way.
    if (0.0..MAX_EXACT_INTEGER_F64).contains(&x) {
        let truncated = x as i64;
        let fraction = x - truncated as f64;
        return truncated as u64 + (fraction >= 0.5) as u64;
    }
    let truncated = x as u64;
    let fraction = x - truncated as f64;
    truncated.saturating_add((fraction >= 0.5) as u64)
}

/// 2^53: from there on an `f64` has no fraction.
const MAX_EXACT_INTEGER_F64: f64 = 9_007_199_254_740_992.0;

/// The index in a job's CPUs of rank `rank`'s, its `tasks` dealt over `cpus` CPUs in blocks (rank
/// `i` on CPU `i` when there are as many CPUs as tasks).
fn cpu_index_of_rank(rank: u32, tasks: u32, cpus: usize) -> usize {
    (rank as u64 * cpus as u64 / tasks as u64) as usize
}

/// Ring neighbours of `rank` in a job of `tasks` tasks whose processes start at
/// `first_proc`: left (rank - 1) then right (rank + 1); one for two tasks.
fn ring_neighbours(first_proc: u32, rank: u32, tasks: u32) -> ([u32; 2], u8) {
    match tasks {
        1 => ([NO_PROC, NO_PROC], 0),
        2 => ([first_proc + (1 - rank), NO_PROC], 1),
        _ => {
            let left = first_proc + (rank + tasks - 1) % tasks;
            let right = first_proc + (rank + 1) % tasks;
            ([left, right], 2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_clock_forward, round_to_u64};
    use cosched_core::SimTime;

    #[test]
    fn a_clock_that_stays_or_moves_on_passes() {
        check_clock_forward(SimTime(5), SimTime(5), 1);
        check_clock_forward(SimTime(5), SimTime(6), 2);
    }

    #[test]
    #[should_panic(expected = "the simulated clock went back from")]
    fn a_clock_that_goes_back_stops_the_run() {
        check_clock_forward(SimTime(6), SimTime(5), 3);
    }

    #[test]
    fn rounds_as_the_library_does() {
        let edges = [
            0.0,
            -0.0,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.7,
            4503599627370495.5,
            4503599627370497.0,
            9007199254740991.0,
            9007199254740992.0,
            9007199254740993.0,
            1.8446744073709552e19,
            1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for x in edges {
            assert_eq!(round_to_u64(x), x.round() as u64, "{x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn rounds_any_value_as_the_library_does(bits: u64, scaled in 0.0f64..1e12) {
            for x in [f64::from_bits(bits), scaled] {
                proptest::prop_assert_eq!(round_to_u64(x), x.round() as u64, "{}", x);
            }
        }
    }
}
