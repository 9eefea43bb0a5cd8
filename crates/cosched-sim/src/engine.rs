//! The discrete-event engine: CPUs with their node schedulers, NICs, processes
//! running the application model, and the cluster-level admission.
//!
//! Tickless by construction: a CPU is visited only when something on it can
//! change (a compute phase ends, a quantum expires at a tick, a ready process
//! outranks the running one at the next tick, the 1 s raise, a switch ends, a
//! process wakes, a message reaches a spinning receiver). Each visit runs
//! [`Engine::update_cpu`], which first charges the elapsed time, then applies
//! the rules due at that instant, then books the next visit.

use crate::app::{balanced_comm_ns, dedicated_ns, Program};
use crate::config::{SimConfig, TOP_LEVEL};
use crate::metrics::{Breakdown, JobRecord};
use crate::mlfq::ReadyQueue;
use crate::net::Nic;
use crate::trace::{TraceEvent, TraceKind};
use cosched_core::{EventQueue, JobId, Rng, SimTime, StreamSeed};
use cosched_policy::{Admission, FcfsQueue, GangMatrix, LocalPlacement, Placement};

/// A job as the engine receives it.
#[derive(Clone, Debug)]
pub struct SimJob {
    pub job_number: u64,
    pub arrival: SimTime,
    pub tasks: u32,
    pub program: Program,
    /// "J1".."J6", or a free label for hand-made jobs.
    pub label: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Compute {
        remaining_ns: u64,
    },
    Io,
    /// Back from I/O: sends its messages as soon as it runs.
    Send,
    /// Waiting for one message from each neighbour.
    Recv,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcState {
    Running,
    /// Runnable but not on its CPU.
    Ready,
    Blocked,
    Exited,
}

const NO_PROC: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Proc {
    job: u32,
    cpu: u32,
    level: u8,
    quantum_left_ns: u64,
    phase: Phase,
    state: ProcState,
    iterations_done: u32,
    neighbours: [u32; 2],
    neighbour_count: u8,
    /// Messages waiting in the endpoint, per neighbour.
    received: [u32; 2],
    rng: Rng,
}

#[derive(Clone, Debug)]
struct Cpu {
    node: u32,
    running: Option<u32>,
    /// The CPU is switching until then; `running` starts after it.
    switch_until: SimTime,
    last_process: Option<u32>,
    ready: ReadyQueue,
    resident: u32,
    accounted_until: SimTime,
    time: Breakdown,
    /// The pending visit, if any (`SimTime::MAX` when none), and its ticket.
    visit_at: SimTime,
    visit_ticket: u32,
    last_raise: SimTime,
    /// Gang scheduling: the process of the current row's cell on this CPU.
    gang_cell: Option<u32>,
}

#[derive(Clone, Debug)]
struct JobState {
    spec: SimJob,
    start: Option<SimTime>,
    finish: Option<SimTime>,
    first_proc: u32,
    tasks_done: u32,
    placement: Option<Placement>,
    dedicated_ns: u64,
}

#[derive(Clone, Debug, Default)]
struct GangState {
    current_row: Option<u32>,
    tick_pending: bool,
    /// Process of each cell, row-major like the matrix.
    cell_procs: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
pub enum Event {
    Arrival(u32),
    Visit {
        cpu: u32,
        ticket: u32,
    },
    IoDone(u32),
    /// A message reaches the receiving interface (uncontended deposit time).
    NicArrival {
        dest: u32,
        side: u8,
    },
    /// A message lands in the receiver's endpoint.
    Deposit {
        dest: u32,
        side: u8,
    },
    GangQuantum,
}

impl Event {
    pub const KIND_NAMES: [&'static str; 7] = [
        "arrival",
        "visit",
        "stale-visit",
        "io-done",
        "nic-arrival",
        "deposit",
        "gang-quantum",
    ];

    fn kind_index(&self) -> usize {
        match self {
            Event::Arrival(_) => 0,
            Event::Visit { .. } => 1,
            Event::IoDone(_) => 3,
            Event::NicArrival { .. } => 4,
            Event::Deposit { .. } => 5,
            Event::GangQuantum => 6,
        }
    }
}

/// Progress reported to a caller every so many events.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub now: SimTime,
    pub jobs_completed: usize,
    pub jobs_total: usize,
    pub queued: usize,
    pub events: u64,
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
    pub event_counts: [u64; 7],
}

pub use Event as EngineEvent;
pub const EVENT_KIND_NAMES: [&str; 7] = Event::KIND_NAMES;

pub struct Engine<'a> {
    cfg: &'a SimConfig,
    queue: EventQueue<Event>,
    cpus: Vec<Cpu>,
    nics: Vec<Nic>,
    procs: Vec<Proc>,
    jobs: Vec<JobState>,
    admission: Admission,
    arrivals: FcfsQueue<u32>,
    gang: Option<GangState>,
    latency_ns: u64,
    shm_latency_ns: u64,
    completed: usize,
    seed: StreamSeed,
    trace: Option<Vec<TraceEvent>>,
    records: Vec<JobRecord>,
    bsld_threshold_s: f64,
    event_counts: [u64; 7],
}

/// Safety bound on the work done for one CPU at one instant.
const MAX_DISPATCHES_PER_VISIT: usize = 10_000;

impl<'a> Engine<'a> {
    /// `jobs` must be sorted by arrival and fit the machine (checked).
    pub fn new(
        cfg: &'a SimConfig,
        jobs: Vec<SimJob>,
        bsld_threshold_s: f64,
        record_trace: bool,
    ) -> Self {
        let cpu_count = cfg.cpu_count() as usize;
        assert!(
            jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival),
            "jobs must be sorted by arrival"
        );
        assert!(
            jobs.iter()
                .all(|j| j.tasks >= 1 && j.tasks as usize <= cpu_count),
            "every job must fit the machine"
        );
        let admission = if cfg.scheme.is_gang() {
            Admission::Gang(GangMatrix::new(cfg.mpl as usize, cpu_count))
        } else {
            Admission::Local(LocalPlacement::new(cpu_count, cfg.mpl))
        };
        let gang = cfg.scheme.is_gang().then(|| GangState {
            cell_procs: vec![NO_PROC; cfg.mpl as usize * cpu_count],
            ..GangState::default()
        });
        let cpus = (0..cpu_count as u32)
            .map(|c| Cpu {
                node: c / cfg.cpus_per_node,
                running: None,
                switch_until: SimTime::ZERO,
                last_process: None,
                ready: ReadyQueue::default(),
                resident: 0,
                accounted_until: SimTime::ZERO,
                time: Breakdown::default(),
                visit_at: SimTime::MAX,
                visit_ticket: 0,
                last_raise: SimTime::ZERO,
                gang_cell: None,
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
                placement: None,
            })
            .collect();
        let mut queue = EventQueue::new();
        if let Some(first) = jobs.first() {
            queue.schedule(first.spec.arrival, Event::Arrival(0));
        }
        Engine {
            cfg,
            queue,
            cpus,
            nics: vec![Nic::default(); cfg.nodes as usize],
            procs: Vec::new(),
            jobs,
            admission,
            arrivals: FcfsQueue::default(),
            gang,
            latency_ns: cfg.network.latency_ns(cfg.network.message_bytes),
            shm_latency_ns: cfg.network.shm_latency_ns(cfg.network.message_bytes),
            completed: 0,
            seed: StreamSeed(cfg.seed),
            trace: record_trace.then(Vec::new),
            records: Vec::new(),
            bsld_threshold_s,
            event_counts: [0; 7],
        }
    }

    /// Run to the last completion (or the horizon), reporting progress every
    /// `progress_every` events.
    pub fn run(
        mut self,
        progress_every: u64,
        mut progress: impl FnMut(&Progress),
    ) -> EngineOutcome {
        let horizon = self.cfg.horizon_ns.map(SimTime).unwrap_or(SimTime::MAX);
        let mut end = SimTime::ZERO;
        while self.completed < self.jobs.len() {
            let Some((now, event)) = self.queue.pop() else {
                panic!(
                    "deadlock: {} jobs unfinished and no event pending",
                    self.jobs.len() - self.completed
                )
            };
            if now > horizon {
                end = horizon;
                break;
            }
            end = now;
            self.handle(now, event);
            if progress_every > 0 && self.queue.popped().is_multiple_of(progress_every) {
                progress(&self.progress(now));
            }
        }
        self.finish(end)
    }

    fn progress(&self, now: SimTime) -> Progress {
        Progress {
            now,
            jobs_completed: self.completed,
            jobs_total: self.jobs.len(),
            queued: self.arrivals.len(),
            events: self.queue.popped(),
        }
    }

    fn finish(mut self, end: SimTime) -> EngineOutcome {
        for c in 0..self.cpus.len() as u32 {
            self.account(c, end);
        }
        let mut cpu_time = Breakdown::default();
        for cpu in &self.cpus {
            debug_assert_eq!(
                cpu.time.total_ns(),
                end.ns(),
                "CPU time must add up to the span"
            );
            cpu_time.add(&cpu.time);
        }
        if let Some(gang) = &self.gang {
            debug_assert!(self.completed < self.jobs.len() || gang.current_row.is_none());
        }
        if let Admission::Gang(matrix) = &self.admission {
            matrix.check_invariants();
        }
        EngineOutcome {
            records: self.records,
            per_cpu_time: self.cpus.iter().map(|c| c.time).collect(),
            cpu_time,
            end,
            events: self.queue.popped(),
            longest_queue: self.arrivals.longest(),
            jobs_submitted: self.jobs.len(),
            trace: self.trace.unwrap_or_default(),
            event_counts: self.event_counts,
        }
    }

    fn handle(&mut self, now: SimTime, event: Event) {
        self.event_counts[event.kind_index()] += 1;
        match event {
            Event::Arrival(j) => self.on_arrival(j, now),
            Event::Visit { cpu, ticket } => {
                if self.cpus[cpu as usize].visit_ticket == ticket {
                    self.cpus[cpu as usize].visit_at = SimTime::MAX;
                    self.update_cpu(cpu, now);
                } else {
                    self.event_counts[1] -= 1;
                    self.event_counts[2] += 1;
                }
            }
            Event::IoDone(p) => self.on_io_done(p, now),
            Event::NicArrival { dest, side } => {
                let node = self.cpus[self.procs[dest as usize].cpu as usize].node;
                let at =
                    self.nics[node as usize].deposit_time(now, self.cfg.network.nic_ns_per_message);
                if at == now {
                    self.deposit(dest, side, now);
                } else {
                    self.queue.schedule(at, Event::Deposit { dest, side });
                }
            }
            Event::Deposit { dest, side } => self.deposit(dest, side, now),
            Event::GangQuantum => self.on_gang_quantum(now),
        }
    }

    fn record(&mut self, now: SimTime, cpu: u32, kind: TraceKind) {
        if let Some(trace) = &mut self.trace {
            trace.push(TraceEvent {
                time_ns: now.ns(),
                cpu,
                kind,
            });
        }
    }

    // ---- jobs -------------------------------------------------------------

    fn on_arrival(&mut self, j: u32, now: SimTime) {
        let next = j as usize + 1;
        if next < self.jobs.len() {
            self.queue
                .schedule(self.jobs[next].spec.arrival, Event::Arrival(next as u32));
        }
        self.arrivals.push(j);
        self.admit_waiting(now);
    }

    /// Strict FCFS: admit from the head while the head fits.
    fn admit_waiting(&mut self, now: SimTime) {
        while let Some(&j) = self.arrivals.front() {
            let Some(placement) = self.admission.find(self.jobs[j as usize].spec.tasks) else {
                break;
            };
            self.arrivals.pop();
            self.start_job(j, placement, now);
        }
    }

    fn start_job(&mut self, j: u32, placement: Placement, now: SimTime) {
        self.admission.take(JobId(j), &placement);
        let tasks = self.jobs[j as usize].spec.tasks;
        let first_proc = self.procs.len() as u32;
        for rank in 0..tasks {
            let cpu = placement.cpus[rank as usize];
            let mut rng = self
                .seed
                .substream("task-skew", ((j as u64) << 32) | rank as u64);
            let compute_ns = skewed(
                self.cfg.skew,
                self.jobs[j as usize].spec.program.compute_ns,
                &mut rng,
            );
            let (neighbours, neighbour_count) = ring_neighbours(first_proc, rank, tasks);
            self.procs.push(Proc {
                job: j,
                cpu,
                level: TOP_LEVEL,
                quantum_left_ns: self.cfg.scheduler.quantum_ns(TOP_LEVEL),
                phase: Phase::Compute {
                    remaining_ns: compute_ns,
                },
                state: ProcState::Ready,
                iterations_done: 0,
                neighbours,
                neighbour_count,
                received: [0, 0],
                rng,
            });
            self.cpus[cpu as usize].resident += 1;
        }
        let job = &mut self.jobs[j as usize];
        job.start = Some(now);
        job.first_proc = first_proc;
        let row = placement.row;
        let cpus = placement.cpus.clone();
        job.placement = Some(placement);
        self.record(now, cpus[0], TraceKind::JobStart { job: j });
        match row {
            None => {
                for (rank, &cpu) in cpus.iter().enumerate() {
                    // A new process joins the tail of the top level (our choice).
                    self.cpus[cpu as usize]
                        .ready
                        .push_tail(first_proc + rank as u32, TOP_LEVEL);
                }
            }
            Some(row) => self.gang_place(row, &cpus, first_proc),
        }
        for &cpu in &cpus {
            self.update_cpu(cpu, now);
        }
        if row.is_some() {
            self.ensure_gang_quantum(now);
        }
    }

    fn task_exited(&mut self, p: u32, now: SimTime) {
        let j = self.procs[p as usize].job as usize;
        self.jobs[j].tasks_done += 1;
        if self.jobs[j].tasks_done == self.jobs[j].spec.tasks {
            self.job_finished(j as u32, now);
        }
    }

    fn job_finished(&mut self, j: u32, now: SimTime) {
        let placement = self.jobs[j as usize]
            .placement
            .take()
            .expect("a running job has a placement");
        self.jobs[j as usize].finish = Some(now);
        self.admission.give_back(JobId(j), &placement);
        if let Some(row) = placement.row {
            self.gang_release(row, &placement.cpus);
        }
        self.record(now, placement.cpus[0], TraceKind::JobFinish { job: j });
        self.completed += 1;
        self.records.push(self.job_record(j));
        self.admit_waiting(now);
        if placement.row.is_some() {
            self.ensure_gang_quantum(now);
        }
    }

    fn job_record(&self, j: u32) -> JobRecord {
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
            bounded_slowdown: crate::metrics::bounded_slowdown(
                response_s,
                dedicated_s,
                self.bsld_threshold_s,
            ),
        }
    }

    // ---- gang scheduling ----------------------------------------------------

    fn gang_place(&mut self, row: u32, cpus: &[u32], first_proc: u32) {
        let cpu_count = self.cpus.len();
        let gang = self
            .gang
            .as_mut()
            .expect("gang placement under gang scheduling");
        for (rank, &cpu) in cpus.iter().enumerate() {
            gang.cell_procs[row as usize * cpu_count + cpu as usize] = first_proc + rank as u32;
        }
        // An idle machine starts the new row at once, with no switch to pay.
        let current = *gang.current_row.get_or_insert(row);
        if current == row {
            for (rank, &cpu) in cpus.iter().enumerate() {
                self.cpus[cpu as usize].gang_cell = Some(first_proc + rank as u32);
            }
        }
    }

    fn gang_release(&mut self, row: u32, cpus: &[u32]) {
        let cpu_count = self.cpus.len();
        let gang = self
            .gang
            .as_mut()
            .expect("gang release under gang scheduling");
        for &cpu in cpus {
            gang.cell_procs[row as usize * cpu_count + cpu as usize] = NO_PROC;
            if gang.current_row == Some(row) {
                self.cpus[cpu as usize].gang_cell = None;
            }
        }
        if let Admission::Gang(matrix) = &self.admission {
            if matrix.next_occupied_row(None).is_none() {
                gang.current_row = None;
            }
        }
    }

    /// Book the next quantum boundary if some other row is waiting for its turn.
    fn ensure_gang_quantum(&mut self, now: SimTime) {
        let Admission::Gang(matrix) = &self.admission else {
            return;
        };
        let gang = self.gang.as_mut().expect("gang state");
        if gang.tick_pending {
            return;
        }
        let next = matrix.next_occupied_row(gang.current_row);
        if next.is_some() && next != gang.current_row {
            gang.tick_pending = true;
            self.queue.schedule(
                now.next_multiple_after(self.cfg.costs.gang_quantum_ns),
                Event::GangQuantum,
            );
        }
    }

    fn on_gang_quantum(&mut self, now: SimTime) {
        let Admission::Gang(matrix) = &self.admission else {
            unreachable!()
        };
        let gang = self.gang.as_mut().expect("gang state");
        gang.tick_pending = false;
        let next = matrix.next_occupied_row(gang.current_row);
        if let Some(row) = next.filter(|&r| Some(r) != gang.current_row) {
            gang.current_row = Some(row);
            self.switch_all_cpus_to_row(row, now);
        }
        self.ensure_gang_quantum(now);
    }

    fn switch_all_cpus_to_row(&mut self, row: u32, now: SimTime) {
        let cpu_count = self.cpus.len();
        for c in 0..cpu_count as u32 {
            self.account(c, now);
            let cell =
                self.gang.as_ref().expect("gang").cell_procs[row as usize * cpu_count + c as usize];
            let cpu = &mut self.cpus[c as usize];
            if let Some(p) = cpu.running.take() {
                self.procs[p as usize].state = ProcState::Ready;
            }
            cpu.gang_cell = (cell != NO_PROC).then_some(cell);
            cpu.switch_until = now + self.cfg.costs.gang_switch_ns;
            self.record(now, c, TraceKind::GangSwitch { row });
            self.update_cpu(c, now);
        }
    }

    // ---- processes ----------------------------------------------------------

    fn on_io_done(&mut self, p: u32, now: SimTime) {
        let proc = &mut self.procs[p as usize];
        debug_assert_eq!((proc.phase, proc.state), (Phase::Io, ProcState::Blocked));
        proc.phase = Phase::Send;
        self.wake(p, now);
    }

    /// A blocked process becomes runnable: to the head of the top level.
    fn wake(&mut self, p: u32, now: SimTime) {
        let cpu = self.procs[p as usize].cpu;
        let proc = &mut self.procs[p as usize];
        proc.state = ProcState::Ready;
        if !self.cfg.scheme.is_gang() {
            proc.level = TOP_LEVEL;
            proc.quantum_left_ns = self.cfg.scheduler.quantum_ns(TOP_LEVEL);
            self.cpus[cpu as usize].ready.push_head(p, TOP_LEVEL);
        }
        self.record(now, cpu, TraceKind::Wake { process: p });
        self.update_cpu(cpu, now);
    }

    fn deposit(&mut self, dest: u32, side: u8, now: SimTime) {
        self.record(
            now,
            self.procs[dest as usize].cpu,
            TraceKind::Deposit { process: dest },
        );
        let proc = &mut self.procs[dest as usize];
        proc.received[side as usize] += 1;
        let cpu = proc.cpu;
        if proc.state == ProcState::Running
            && proc.phase == Phase::Recv
            && self.has_all_messages(dest)
        {
            self.update_cpu(cpu, now);
        }
    }

    fn has_all_messages(&self, p: u32) -> bool {
        let proc = &self.procs[p as usize];
        proc.received[..proc.neighbour_count as usize]
            .iter()
            .all(|&n| n > 0)
    }

    /// Send one message to each neighbour: left first, then right.
    fn send_messages(&mut self, p: u32, now: SimTime) {
        let proc = &self.procs[p as usize];
        let (neighbours, count, node) = (
            proc.neighbours,
            proc.neighbour_count,
            self.cpus[proc.cpu as usize].node,
        );
        for (side, &dest) in neighbours.iter().enumerate().take(count as usize) {
            // With two neighbours, what I send left arrives on their right side.
            let dest_side = if count == 2 { 1 - side as u8 } else { 0 };
            let dest_node = self.cpus[self.procs[dest as usize].cpu as usize].node;
            if dest_node == node {
                let at = now + self.shm_latency_ns;
                self.queue.schedule(
                    at,
                    Event::Deposit {
                        dest,
                        side: dest_side,
                    },
                );
            } else {
                let leaves =
                    self.nics[node as usize].start_send(now, self.cfg.network.nic_ns_per_message);
                self.queue.schedule(
                    leaves + self.latency_ns,
                    Event::NicArrival {
                        dest,
                        side: dest_side,
                    },
                );
            }
        }
    }

    /// Let the running process `p` do everything it can at `now` without
    /// using CPU time. It may block or exit, leaving the CPU free.
    fn advance_running(&mut self, p: u32, now: SimTime) {
        let cpu = self.procs[p as usize].cpu;
        loop {
            match self.procs[p as usize].phase {
                Phase::Compute { remaining_ns: 0 } => {
                    let job = self.procs[p as usize].job as usize;
                    let io_nominal = self.jobs[job].spec.program.io_ns;
                    if io_nominal == 0 {
                        self.procs[p as usize].phase = Phase::Send;
                        continue;
                    }
                    let proc = &mut self.procs[p as usize];
                    let io_ns = skewed(self.cfg.skew, io_nominal, &mut proc.rng);
                    proc.phase = Phase::Io;
                    proc.state = ProcState::Blocked;
                    self.cpus[cpu as usize].running = None;
                    self.queue.schedule(now + io_ns, Event::IoDone(p));
                    self.record(now, cpu, TraceKind::Block { process: p });
                    return;
                }
                Phase::Compute { .. } => return,
                Phase::Send => {
                    self.send_messages(p, now);
                    self.procs[p as usize].phase = Phase::Recv;
                }
                Phase::Recv => {
                    if !self.has_all_messages(p) {
                        return; // busy-wait
                    }
                    let job = self.procs[p as usize].job as usize;
                    let program = self.jobs[job].spec.program;
                    let proc = &mut self.procs[p as usize];
                    let compute_ns = skewed(self.cfg.skew, program.compute_ns, &mut proc.rng);
                    let count = proc.neighbour_count as usize;
                    for r in &mut proc.received[..count] {
                        *r -= 1;
                    }
                    proc.iterations_done += 1;
                    proc.phase = if proc.iterations_done == program.iterations {
                        Phase::Done
                    } else {
                        Phase::Compute {
                            remaining_ns: compute_ns,
                        }
                    };
                }
                Phase::Done => {
                    let proc = &mut self.procs[p as usize];
                    debug_assert_eq!(proc.received, [0, 0], "every message is consumed");
                    proc.state = ProcState::Exited;
                    let c = &mut self.cpus[cpu as usize];
                    c.running = None;
                    c.resident -= 1;
                    if c.gang_cell == Some(p) {
                        c.gang_cell = None;
                    }
                    self.record(now, cpu, TraceKind::Exit { process: p });
                    self.task_exited(p, now);
                    return;
                }
                Phase::Io => unreachable!("a process doing I/O is not running"),
            }
        }
    }

    // ---- CPUs -----------------------------------------------------------------

    /// Charge the CPU's time since its last visit.
    fn account(&mut self, c: u32, now: SimTime) {
        let cpu = &mut self.cpus[c as usize];
        let mut from = cpu.accounted_until;
        if now <= from {
            return;
        }
        if cpu.switch_until > from {
            let until = now.min(cpu.switch_until);
            cpu.time.switch_ns += until - from;
            from = until;
        }
        if from < now {
            let elapsed = now - from;
            match cpu.running {
                None => cpu.time.idle_ns += elapsed,
                Some(p) => {
                    let proc = &mut self.procs[p as usize];
                    match &mut proc.phase {
                        Phase::Compute { remaining_ns } => {
                            debug_assert!(*remaining_ns >= elapsed, "compute overran its end");
                            *remaining_ns -= elapsed;
                            cpu.time.useful_ns += elapsed;
                        }
                        Phase::Recv => cpu.time.spin_ns += elapsed,
                        other => unreachable!("a running process cannot spend time in {other:?}"),
                    }
                    proc.quantum_left_ns = proc.quantum_left_ns.saturating_sub(elapsed);
                }
            }
        }
        cpu.accounted_until = now;
    }

    /// Visit a CPU at `now`: charge time, apply the rules due, book the next visit.
    fn update_cpu(&mut self, c: u32, now: SimTime) {
        self.account(c, now);
        if self.cpus[c as usize].switch_until > now {
            self.book_visit(c, now);
            return;
        }
        if let Some(p) = self.cpus[c as usize].running {
            self.advance_running(p, now);
        }
        if !self.cfg.scheme.is_gang() {
            let sched = &self.cfg.scheduler;
            if now.is_multiple_of(sched.raise_period_ns) && self.cpus[c as usize].last_raise < now {
                self.raise_all(c, now);
            }
            if now.is_multiple_of(sched.tick_ns) {
                self.tick(c, now);
            }
        }
        self.dispatch(c, now);
        self.book_visit(c, now);
    }

    /// The 1 s starvation avoidance: every process to the top level.
    fn raise_all(&mut self, c: u32, now: SimTime) {
        let top_quantum = self.cfg.scheduler.quantum_ns(TOP_LEVEL);
        let cpu = &mut self.cpus[c as usize];
        cpu.last_raise = now;
        cpu.ready.raise_all(TOP_LEVEL);
        for p in cpu.ready.processes().chain(cpu.running) {
            let proc = &mut self.procs[p as usize];
            proc.level = TOP_LEVEL;
            proc.quantum_left_ns = top_quantum;
        }
    }

    /// The scheduler tick: quantum expiry and preemption by a higher level.
    fn tick(&mut self, c: u32, now: SimTime) {
        let Some(p) = self.cpus[c as usize].running else {
            return;
        };
        let proc = &mut self.procs[p as usize];
        let cpu = &mut self.cpus[c as usize];
        if proc.quantum_left_ns == 0 {
            proc.level = proc.level.saturating_sub(1);
            proc.quantum_left_ns = self.cfg.scheduler.quantum_ns(proc.level);
            proc.state = ProcState::Ready;
            cpu.ready.push_tail(p, proc.level);
            cpu.running = None;
            let level = proc.level;
            self.record(now, c, TraceKind::Demote { process: p, level });
        } else if cpu.ready.best_level().is_some_and(|best| best > proc.level) {
            // Preempted before its quantum ran out: back to the head, quantum kept.
            proc.state = ProcState::Ready;
            cpu.ready.push_head(p, proc.level);
            cpu.running = None;
            self.record(now, c, TraceKind::Preempt { process: p });
        }
    }

    fn pick_next(&mut self, c: u32) -> Option<u32> {
        let cpu = &mut self.cpus[c as usize];
        if self.cfg.scheme.is_gang() {
            cpu.gang_cell
                .filter(|&p| self.procs[p as usize].state == ProcState::Ready)
        } else {
            cpu.ready.pop_best()
        }
    }

    /// While the CPU is free, give it to the next process.
    fn dispatch(&mut self, c: u32, now: SimTime) {
        for _ in 0..MAX_DISPATCHES_PER_VISIT {
            if self.cpus[c as usize].running.is_some() {
                return;
            }
            let Some(p) = self.pick_next(c) else { return };
            let cpu = &mut self.cpus[c as usize];
            cpu.running = Some(p);
            self.procs[p as usize].state = ProcState::Running;
            let switching =
                !self.cfg.scheme.is_gang() && cpu.last_process.is_some_and(|last| last != p);
            cpu.last_process = Some(p);
            if switching {
                cpu.switch_until = now + self.cfg.costs.context_switch_ns;
            }
            self.record(
                now,
                c,
                TraceKind::Dispatch {
                    process: p,
                    switch_cost: switching,
                },
            );
            if switching {
                return; // the process starts after the switch; the visit then advances it
            }
            self.advance_running(p, now);
        }
        panic!("CPU {c} dispatched {MAX_DISPATCHES_PER_VISIT} times at {now}: a process loops without using time");
    }

    /// The next instant anything can change on this CPU.
    fn next_change(&self, c: u32, now: SimTime) -> SimTime {
        let cpu = &self.cpus[c as usize];
        if cpu.switch_until > now {
            return cpu.switch_until;
        }
        let Some(p) = cpu.running else {
            return SimTime::MAX;
        };
        let proc = &self.procs[p as usize];
        let mut next = SimTime::MAX;
        if let Phase::Compute { remaining_ns } = proc.phase {
            next = now + remaining_ns;
        }
        if !self.cfg.scheme.is_gang() {
            let sched = &self.cfg.scheduler;
            // Expiry is noticed at the first tick at or after the quantum runs out.
            let quantum_end = (now + proc.quantum_left_ns).ceil_to_multiple(sched.tick_ns);
            next = next.min(quantum_end.max(now.next_multiple_after(sched.tick_ns)));
            if cpu.ready.best_level().is_some_and(|best| best > proc.level) {
                next = next.min(now.next_multiple_after(sched.tick_ns));
            }
            next = next.min(now.next_multiple_after(sched.raise_period_ns));
        }
        debug_assert!(
            next > now,
            "CPU {c}: next change {next:?} is not after {now:?}"
        );
        next
    }

    fn book_visit(&mut self, c: u32, now: SimTime) {
        let at = self.next_change(c, now);
        let cpu = &mut self.cpus[c as usize];
        if at == SimTime::MAX || at >= cpu.visit_at {
            return; // nothing to do, or an earlier visit will look again
        }
        cpu.visit_ticket = cpu.visit_ticket.wrapping_add(1);
        cpu.visit_at = at;
        let ticket = cpu.visit_ticket;
        self.queue.schedule(at, Event::Visit { cpu: c, ticket });
    }
}

/// A nominal duration times the skew factor `1 + U(-s/2, s/2)`.
fn skewed(skew: f64, nominal_ns: u64, rng: &mut Rng) -> u64 {
    if skew == 0.0 || nominal_ns == 0 {
        return nominal_ns;
    }
    let factor = 1.0 + rng.uniform_range(-skew / 2.0, skew / 2.0);
    (nominal_ns as f64 * factor).round() as u64
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

/// The communication time of a balanced iteration, re-exported for reports.
pub fn iteration_comm_ns(tasks: u32, cfg: &SimConfig) -> u64 {
    balanced_comm_ns(tasks, &cfg.network)
}
