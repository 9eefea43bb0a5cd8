//! The real coscheduler's plan for a cluster: which CPUs each job gets, which
//! time slots (matrix rows) it runs in, and which jobs are left to the local
//! (Linux) scheduler. Pure logic, recomputed from scratch whenever anything
//! changes; the controller drives it in real time.
//!
//! Rules (the LLNL gang scheduler's, see `docs/runtime.md`):
//! - jobs are taken by class (express, interactive, batch, standby), then in
//!   submission order; but a job that has started keeps its own row (the one
//!   it held, `row_held`) before any job that holds none (not started yet, or
//!   resumed, or displaced by express), so no later job of any
//!   class but express (administrators only) can push a running job out of the
//!   cycle: a job takes cells only where admission finds them free;
//! - *express* jobs run at once and always: their CPUs are taken out of every
//!   row, and a gang job that sits on them waits until they are gone;
//! - *interactive* and *batch* gang jobs own one row of the Ousterhout matrix
//!   (`GangMatrix`, the simulator's), first fit; a job that has started keeps
//!   its CPUs and only looks for a row where they are free;
//! - afterwards every gang job also runs in any other row where all its cells
//!   are free (one-node jobs filling free cells is the common case);
//! - a job spanning nodes runs in a share of the cycle's slots equal to its
//!   share of the runnable threads on the most loaded node it uses (CPUs over
//!   threads there, at most all): it gets no more fill-ins than that, and the
//!   cycle gets slots with no gang job in them (the local jobs' turn) when even
//!   one slot is more than its share;
//! - *standby* jobs own nothing and run only in rows where their cells are
//!   still free;
//! - *local* jobs are admitted up to the multiprogramming level per CPU
//!   (`LocalPlacement`, the simulator's) and run all the time;
//! - idle gang jobs run all the time outside the matrix, suspended jobs
//!   nowhere (a suspended job that owned a row keeps it, its cells left
//!   empty there, so that it comes back to its share when resumed);
//! - memory: the jobs placed on a node never ask for more than it has;
//! - the gang cap keeps CPUs out of gang use, and the over-allocation gives a
//!   job extra cells for its auxiliary threads.
//!
//! The reference study's plain matrix is a preset of the same code
//! (`PlanRules::STUDY`): strict FCFS, any CPUs of the machine, no fill-ins, no
//! thread shares, the next occupied row after the one that ran.

use crate::{GangMatrix, LocalPlacement};
use cosched_core::JobId;

/// Job classes, highest priority first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobClass {
    Express,
    Interactive,
    Batch,
    Standby,
}

impl JobClass {
    pub const ALL: [JobClass; 4] = [JobClass::Express, JobClass::Interactive, JobClass::Batch, JobClass::Standby];

    pub fn name(self) -> &'static str {
        match self {
            JobClass::Express => "express",
            JobClass::Interactive => "interactive",
            JobClass::Batch => "batch",
            JobClass::Standby => "standby",
        }
    }

    pub fn parse(text: &str) -> Option<JobClass> {
        JobClass::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(text.trim()))
    }

    /// May a user move a job from `self` to `to`? Users may only lower a
    /// job's class (or keep it); administrators may set any class.
    pub fn change_allowed(self, to: JobClass, by_admin: bool) -> bool {
        by_admin || to >= self
    }

    /// May a user submit a job in this class? Only administrators set express.
    pub fn submit_allowed(self, by_admin: bool) -> bool {
        by_admin || self != JobClass::Express
    }
}

/// How a job's CPUs are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the Ousterhout matrix, stopped and started together.
    Gang,
    /// Left to the node's scheduler, admitted up to the MPL.
    Local,
}

/// A job's CPUs on one node (CPU indices of that node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCpus {
    pub node: u32,
    pub cpus: Vec<u32>,
}

#[derive(Clone, Debug)]
pub struct PlanJob {
    pub id: JobId,
    pub class: JobClass,
    pub mode: Mode,
    pub tasks: u32,
    /// Spread the tasks over exactly this many nodes (else: as few as fit).
    pub nodes: Option<u32>,
    pub mem_bytes_per_node: u64,
    /// Fixed once the job has started: its processes exist there.
    pub placed: Option<Vec<NodeCpus>>,
    pub suspended: bool,
    /// A gang job that has used no CPU for a while: run it outside the matrix.
    pub idle: bool,
    /// The matrix row the job owned in the previous plan (`JobPlan::own_row`): kept if still free.
    pub row_held: Option<u32>,
    /// The wall time the job asked for (its estimate): what a backfilling queue expects it to hold its
    /// CPUs; `None`: unknown, held for ever.
    pub requested_ns: Option<u64>,
}

impl PlanJob {
    /// A new batch-class job of `tasks` tasks, spread as the rules choose, with no memory asked and nothing
    /// placed yet.
    pub fn new(id: JobId, mode: Mode, tasks: u32) -> PlanJob {
        PlanJob {
            id,
            class: JobClass::Batch,
            mode,
            tasks,
            nodes: None,
            mem_bytes_per_node: 0,
            placed: None,
            suspended: false,
            idle: false,
            row_held: None,
            requested_ns: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ClusterShape {
    pub cpus_per_node: Vec<u32>,
    pub mem_bytes_per_node: Vec<u64>,
    /// Nodes that may take new jobs (their agent is there); the others keep
    /// the jobs they have.
    pub accepting: Vec<bool>,
}

/// Where a new job's tasks go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// On as few nodes as hold them (or the nodes asked for), each node's
    /// share on its lowest usable CPUs (cosched's).
    WholeNodes,
    /// On any CPUs of the machine, as if it were one node: a gang job the
    /// lowest free columns of the first row with room, a local job the least
    /// loaded CPUs (the study's; requests for a node count are ignored).
    AnyCpus,
}

/// Which slot of the cycle runs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// The next occupied matrix row after the one that ran, round robin (the study's).
    NextOccupiedRow,
    /// Slice `k` of the clock runs slot `k mod n` of the cycle (`slot_for_slice`), so
    /// nodes agree on the slot without talking (cosched's).
    ClockAligned,
}

/// What a slot boundary stops and starts, and so who pays the gang switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switching {
    /// Every CPU switches at every boundary where a switch is due (the study's).
    EveryCpu,
    /// Only a CPU whose cell changes switches; a boundary that changes no cell costs
    /// nothing, so a job alone in the matrix is never switched (cosched's: an agent stops
    /// the jobs that leave the slot and starts those that enter it, nothing else).
    ChangedCells,
}

/// The rules of the coscheduler. cosched's own and the study's plain matrix
/// are two presets of the same planner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanRules {
    pub spread: Spread,
    /// A new job that does not fit blocks every later one (no backfilling);
    /// otherwise it is passed over until it fits.
    pub strict_fcfs: bool,
    /// Gang jobs also run in every other row where all their cells are free.
    pub fill_free_cells: bool,
    /// A spanning job runs in at most its share of the runnable threads on its
    /// most loaded node, and the cycle may get slots with no gang job in them.
    pub thread_shares: bool,
    pub rotation: Rotation,
    pub switching: Switching,
}

impl PlanRules {
    /// What `cosched up` runs.
    pub const COSCHED: PlanRules = PlanRules {
        spread: Spread::WholeNodes,
        strict_fcfs: false,
        fill_free_cells: true,
        thread_shares: true,
        rotation: Rotation::ClockAligned,
        switching: Switching::ChangedCells,
    };
    /// The reference study's gang scheduling and MPL admission.
    pub const STUDY: PlanRules = PlanRules {
        spread: Spread::AnyCpus,
        strict_fcfs: true,
        fill_free_cells: false,
        thread_shares: false,
        rotation: Rotation::NextOccupiedRow,
        switching: Switching::EveryCpu,
    };

    /// Whether a placed job never moves and the queue is strict FCFS: the coscheduler can then keep its planner
    /// standing, which backfilling and a chosen admission need.
    pub fn keep_placed_jobs(&self) -> bool {
        self.strict_fcfs && !self.fill_free_cells && !self.thread_shares
    }
}

/// The slot of a cycle of `slot_count` slots that runs in slice `slice` of the
/// clock (`Rotation::ClockAligned`).
pub fn slot_for_slice(slice: u64, slot_count: usize) -> usize {
    assert!(slot_count > 0, "a cycle has at least one slot");
    (slice % slot_count as u64) as usize
}

#[derive(Clone, Debug)]
pub struct PlanSettings {
    pub rules: PlanRules,
    /// Rows of the matrix (the gang multiprogramming level).
    pub rows: u32,
    /// Processes per CPU for local jobs.
    pub local_mpl: u32,
    /// Share of each node's CPUs that gang jobs may use (at least one CPU).
    pub gang_cpu_share: f64,
    /// Extra cells per task for auxiliary threads (0.25: one more cell per four tasks).
    pub over_allocation: f64,
    /// Whether later jobs may start before a waiting one that does not fit (under strict FCFS only).
    pub backfill: Backfill,
}

/// How jobs behind a waiting one that does not fit may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backfill {
    /// The rules' own queue: strict FCFS waits, cosched's passes over.
    #[default]
    None,
    /// EASY (the first waiting job gets a reservation at the earliest instant the requested times say it
    /// fits; a later job starts now if it fits now and, by what it asked for, does not delay that reservation).
    Easy,
    /// Conservative (every waiting job, in queue order, gets a reservation at the earliest instant it fits for its
    /// whole requested time beside the placed jobs and the reservations before it; a job whose reservation is now
    /// starts now).
    Conservative,
}

impl Backfill {
    pub const ALL: [Backfill; 3] = [Backfill::None, Backfill::Easy, Backfill::Conservative];

    pub fn name(self) -> &'static str {
        match self {
            Backfill::None => "none",
            Backfill::Easy => "easy",
            Backfill::Conservative => "conservative",
        }
    }

    pub fn parse(text: &str) -> Option<Backfill> {
        Backfill::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(text.trim()))
    }

    pub fn is_none(&self) -> bool {
        *self == Backfill::None
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Waiting for room.
    Queued,
    /// Has CPUs; runs in `rows` (indices into `Plan::rows`), or all the time.
    Placed { cpus: Vec<NodeCpus>, rows: Vec<u32>, always: bool },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobPlan {
    pub id: JobId,
    pub status: JobStatus,
    /// The matrix row the job owns (not a slot index): hand it back as `PlanJob::row_held` next time.
    pub own_row: Option<u32>,
}

impl JobPlan {
    /// Share of the time the job runs: rows it is in over rows in the cycle.
    pub fn slice_share(&self, row_count: usize) -> f64 {
        match &self.status {
            JobStatus::Queued => 0.0,
            JobStatus::Placed { always: true, .. } => 1.0,
            JobStatus::Placed { rows, .. } if row_count > 0 => rows.len() as f64 / row_count as f64,
            JobStatus::Placed { .. } => 0.0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The slots of the cycle (occupied matrix rows, then any slots left to the
    /// local jobs), each the gang jobs that run in it, in job order.
    pub rows: Vec<Vec<JobId>>,
    /// The matrix row of each slot, ascending (`None`: a slot left to the local jobs).
    pub slot_rows: Vec<Option<u32>>,
    /// Jobs that run all the time (express, local, idle).
    pub always: Vec<JobId>,
    /// One entry per job, in the order given.
    pub jobs: Vec<JobPlan>,
}

impl Plan {
    pub const EMPTY: Plan = Plan { rows: Vec::new(), slot_rows: Vec::new(), always: Vec::new(), jobs: Vec::new() };

    pub fn job(&self, id: JobId) -> Option<&JobPlan> {
        self.jobs.iter().find(|j| j.id == id)
    }

    /// The slot to run after the one holding matrix row `current` (or from the
    /// start): the next occupied row, round robin (`Rotation::NextOccupiedRow`).
    pub fn slot_after_row(&self, current: Option<u32>) -> Option<usize> {
        let after = |slot: &Option<u32>| slot.zip(current).is_some_and(|(row, current)| row > current);
        let first_row = self.slot_rows.iter().position(Option::is_some);
        self.slot_rows.iter().position(after).or(first_row)
    }
}

/// The machine's columns: node `n`'s CPU `c` is column `first[n] + c`.
#[derive(Clone, Debug)]
struct Columns {
    first: Vec<u32>,
    cpus: Vec<u32>,
    gang_cpus: Vec<u32>,
}

impl Columns {
    fn new(shape: &ClusterShape, settings: &PlanSettings) -> Columns {
        let mut first = Vec::with_capacity(shape.cpus_per_node.len());
        let mut next = 0;
        for &cpus in &shape.cpus_per_node {
            first.push(next);
            next += cpus;
        }
        let gang_cpus = shape
            .cpus_per_node
            .iter()
            .map(|&cpus| ((cpus as f64 * settings.gang_cpu_share).floor() as u32).clamp(cpus.min(1), cpus))
            .collect();
        Columns { first, cpus: shape.cpus_per_node.clone(), gang_cpus }
    }

    fn total(&self) -> usize {
        self.cpus.iter().sum::<u32>() as usize
    }

    fn of(&self, placement: &[NodeCpus]) -> Vec<u32> {
        placement.iter().flat_map(|nc| nc.cpus.iter().map(move |&c| self.first[nc.node as usize] + c)).collect()
    }

    fn node_of(&self, column: u32) -> u32 {
        (self.first.partition_point(|&first| first <= column) - 1) as u32
    }

    /// Columns as CPUs per node, in the order given (consecutive columns of a node together).
    fn placement(&self, columns: &[u32]) -> Vec<NodeCpus> {
        let mut placement: Vec<NodeCpus> = Vec::new();
        for &column in columns {
            let node = self.node_of(column);
            let cpu = column - self.first[node as usize];
            match placement.last_mut() {
                Some(last) if last.node == node => last.cpus.push(cpu),
                _ => placement.push(NodeCpus { node, cpus: vec![cpu] }),
            }
        }
        placement
    }
}

/// Cells a job needs on a node for `tasks` tasks there.
fn cells_for(tasks: u32, settings: &PlanSettings) -> u32 {
    (tasks as f64 * (1.0 + settings.over_allocation.max(0.0))).ceil() as u32
}

/// Tasks per node for a new job: `nodes` given → spread evenly over that
/// many; otherwise as few nodes as the per-node capacity allows. `None` when
/// that takes more than the `node_count` nodes there are, decided before
/// anything is allocated (a request may ask for 2³² tasks or nodes).
fn task_split(tasks: u32, nodes: Option<u32>, per_node_capacity: u32, node_count: usize) -> Option<Vec<u32>> {
    match nodes {
        Some(0) => None,
        Some(n) if n as usize > node_count => None,
        Some(n) => {
            let base = tasks / n;
            let extra = tasks % n;
            let split: Vec<u32> = (0..n).map(|i| base + u32::from(i < extra)).collect();
            (split[0] > 0).then_some(split)
        }
        None if per_node_capacity == 0 => None,
        None if tasks.div_ceil(per_node_capacity) as usize > node_count => None,
        None => {
            let mut split = vec![per_node_capacity; (tasks / per_node_capacity) as usize];
            if !tasks.is_multiple_of(per_node_capacity) {
                split.push(tasks % per_node_capacity);
            }
            Some(split)
        }
    }
}

/// Which cells are taken in each row (express and matrix owners, then fill-ins).
#[derive(Clone, Debug)]
struct Occupancy {
    rows: Vec<Vec<bool>>,
    /// Cells taken in each row: a full row is passed over without a scan of its columns.
    taken_in_row: Vec<usize>,
    /// Columns no gang job may use in any row (express jobs').
    blocked: Vec<bool>,
}

impl Occupancy {
    fn new(rows: usize, columns: usize) -> Occupancy {
        Occupancy { rows: vec![vec![false; columns]; rows], taken_in_row: vec![0; rows], blocked: vec![false; columns] }
    }
    fn free(&self, row: usize, columns: &[u32]) -> bool {
        columns.iter().all(|&c| !self.rows[row][c as usize] && !self.blocked[c as usize])
    }
    /// Whether `row` has `cells` cells not taken (blocked columns and the nodes' gang CPUs aside): a row
    /// without them cannot hold the job, whichever columns a scan would try.
    fn may_hold(&self, row: usize, cells: usize) -> bool {
        self.rows[row].len() - self.taken_in_row[row] >= cells
    }
    fn take(&mut self, row: usize, columns: &[u32]) {
        for &c in columns {
            let cell = &mut self.rows[row][c as usize];
            self.taken_in_row[row] += usize::from(!*cell);
            *cell = true;
        }
    }
    fn give_back(&mut self, row: usize, columns: &[u32]) {
        for &c in columns {
            let cell = &mut self.rows[row][c as usize];
            self.taken_in_row[row] -= usize::from(*cell);
            *cell = false;
        }
    }
    /// Take every cell `other` has taken too.
    fn take_also(&mut self, other: &Occupancy) {
        let rows = self.rows.iter_mut().zip(&other.rows).zip(&mut self.taken_in_row).zip(&other.taken_in_row);
        for (((cells, other_cells), taken), &other_taken) in rows {
            if other_taken == 0 {
                continue;
            }
            // Two plain passes the compiler vectorizes.
            cells.iter_mut().zip(other_cells).for_each(|(cell, &other_cell)| *cell |= other_cell);
            *taken = cells.iter().filter(|&&cell| cell).count();
        }
    }
    /// Become a copy of `other`, reusing what is allocated.
    fn copy_from(&mut self, other: &Occupancy) {
        self.rows.clone_from(&other.rows);
        self.taken_in_row.clone_from(&other.taken_in_row);
        self.blocked.clone_from(&other.blocked);
    }
}

/// A placed job's CPUs, matrix rows, and whether it runs all the time.
type Decision = (Vec<NodeCpus>, Vec<u32>, bool);

#[derive(Clone, Debug)]
pub(crate) struct Planner {
    settings: PlanSettings,
    shape: ClusterShape,
    columns: Columns,
    matrix: GangMatrix,
    occupancy: Occupancy,
    local: Vec<LocalPlacement>,
    /// Local admission over the whole machine (`Spread::AnyCpus`).
    local_any: LocalPlacement,
    mem_free: Vec<u64>,
    /// Per job (in input order): placement, rows, always.
    result: Vec<Option<Decision>>,
    /// Per job: the matrix row it owns.
    own_rows: Vec<Option<u32>>,
}

/// Compute the plan. Jobs are considered by class, then in the order given
/// (submission order); the result lists them in the order given.
pub fn plan(settings: &PlanSettings, shape: &ClusterShape, jobs: &[PlanJob]) -> Plan {
    assert_eq!(shape.cpus_per_node.len(), shape.mem_bytes_per_node.len(), "one memory size per node");
    assert_eq!(shape.cpus_per_node.len(), shape.accepting.len(), "one accepting flag per node");
    let mut planner = Planner::new(settings, shape, jobs.len());
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    // Express first (it may displace), then started jobs holding a row, then started jobs without one (resumed, or
    // displaced by express: they must not take a row another running job holds), then new ones; by class within.
    let key = |job: &PlanJob| (job.class != JobClass::Express, job.placed.is_none(), job.row_held.is_none(), job.class);
    order.sort_by_key(|&i| key(&jobs[i]));
    planner.account_started(jobs);
    let mut new_jobs_blocked = false;
    for &i in &order {
        if jobs[i].placed.is_none() && new_jobs_blocked {
            continue;
        }
        let placed = planner.place(i, &jobs[i]);
        new_jobs_blocked |= !placed && jobs[i].placed.is_none() && settings.rules.strict_fcfs;
    }
    let shares = planner.thread_shares(jobs);
    if settings.rules.fill_free_cells {
        planner.fill_free_cells(jobs, &order, &shares);
    }
    planner.finish(jobs, shares.slots)
}

/// Most slots a cycle gets to lower a spanning job's share (a job on a node with more runnable threads than this
/// many times its CPUs gets one slot in this many, not less): keeps the gap between its slots bounded.
const MAX_CYCLE_SLOTS: usize = 16;

/// The cycle's length in slots and, per job, the most slots it may run in (`None`: no limit).
struct ThreadShares {
    slots: usize,
    slots_allowed: Vec<Option<usize>>,
}

impl Planner {
    pub(crate) fn new(settings: &PlanSettings, shape: &ClusterShape, job_count: usize) -> Planner {
        let columns = Columns::new(shape, settings);
        let total = columns.total().max(1);
        let rows = settings.rows.max(1) as usize;
        Planner {
            settings: settings.clone(),
            shape: shape.clone(),
            matrix: GangMatrix::new(rows, total),
            occupancy: Occupancy::new(rows, total),
            local: shape.cpus_per_node.iter().map(|&c| LocalPlacement::new(c as usize, settings.local_mpl)).collect(),
            local_any: LocalPlacement::new(total, settings.local_mpl),
            mem_free: shape.mem_bytes_per_node.clone(),
            columns,
            result: vec![None; job_count],
            own_rows: vec![None; job_count],
        }
    }

    /// Place a new job against what is placed now (for rules under which a placed job never moves): its CPUs
    /// and the row it owns, taken; `None` when there is no room now. The same choice `plan` makes.
    pub(crate) fn place_new(&mut self, job: &PlanJob) -> Option<(Vec<NodeCpus>, Option<u32>)> {
        self.place_new_in(job, None)
    }

    /// `place_new`, a gang job only in matrix row `only_row` when one is named.
    pub(crate) fn place_new_in(
        &mut self,
        job: &PlanJob,
        only_row: Option<u32>,
    ) -> Option<(Vec<NodeCpus>, Option<u32>)> {
        debug_assert!(job.class == JobClass::Batch && !job.suspended && !job.idle, "only plain jobs stand");
        let cpus = self.choose_cpus_in(job, only_row)?;
        let row = match job.mode {
            Mode::Local => None,
            Mode::Gang => {
                let columns = self.columns.of(&cpus);
                Some(self.own_row(job.id, &columns, only_row).expect("the cells were chosen free in a row"))
            }
        };
        Some((cpus, row))
    }

    /// Give back what `place_new` took for `job`.
    pub(crate) fn unplace(&mut self, job: &PlanJob, cpus: &[NodeCpus], row: Option<u32>) {
        for nc in cpus {
            self.mem_free[nc.node as usize] += job.mem_bytes_per_node;
        }
        let columns = self.columns.of(cpus);
        match (job.mode, row) {
            (Mode::Local, _) => match self.settings.rules.spread {
                Spread::WholeNodes => cpus.iter().for_each(|nc| self.local[nc.node as usize].give_back(&nc.cpus)),
                Spread::AnyCpus => self.local_any.give_back(&columns),
            },
            (Mode::Gang, Some(row)) => {
                self.matrix.give_back(job.id, row, &columns);
                self.occupancy.give_back(row as usize, &columns);
            }
            (Mode::Gang, None) => {}
        }
    }

    /// Take exactly what `place_new` gave `job` (`cpus`, `row`): the inverse of `unplace`.
    pub(crate) fn take_placement(&mut self, job: &PlanJob, cpus: &[NodeCpus], row: Option<u32>) {
        for nc in cpus {
            self.mem_free[nc.node as usize] -= job.mem_bytes_per_node;
        }
        let columns = self.columns.of(cpus);
        match (job.mode, row) {
            (Mode::Local, _) => self.take_local(cpus, false),
            (Mode::Gang, Some(row)) => {
                self.matrix.take(job.id, row, &columns);
                self.occupancy.take(row as usize, &columns);
            }
            (Mode::Gang, None) => {}
        }
    }

    /// Become a copy of `other` (a planner of the same machine and settings), reusing what is allocated: a
    /// scratch planner copied many times a pass allocates nothing.
    pub(crate) fn copy_from(&mut self, other: &Planner) {
        self.matrix.copy_from(&other.matrix);
        self.occupancy.copy_from(&other.occupancy);
        for (local, other_local) in self.local.iter_mut().zip(&other.local) {
            local.copy_from(other_local);
        }
        self.local_any.copy_from(&other.local_any);
        self.mem_free.clone_from(&other.mem_free);
        self.result.clone_from(&other.result);
        self.own_rows.clone_from(&other.own_rows);
    }

    /// Hold, besides what it holds, whatever `other` (the same machine) holds: a job then placed here finds only
    /// cells, slots and memory free in both. The matrix keeps only its own jobs; it is not read to choose.
    pub(crate) fn take_also(&mut self, other: &Planner) {
        self.occupancy.take_also(&other.occupancy);
        for (local, other_local) in self.local.iter_mut().zip(&other.local) {
            local.load_at_least(other_local);
        }
        self.local_any.load_at_least(&other.local_any);
        for (free, &other_free) in self.mem_free.iter_mut().zip(&other.mem_free) {
            *free = (*free).min(other_free);
        }
    }

    /// Whether `job` might be placed now, by counts alone (cells left in a row, CPUs below the MPL): when not,
    /// it is not; when so, it may still not be.
    pub(crate) fn may_fit(&self, job: &PlanJob) -> bool {
        let tasks = job.tasks as usize;
        match job.mode {
            Mode::Gang => (0..self.matrix.rows()).any(|row| self.occupancy.may_hold(row, tasks)),
            Mode::Local => match self.settings.rules.spread {
                Spread::AnyCpus => self.local_any.cpus_with_room() >= tasks,
                Spread::WholeNodes => self.local.iter().map(LocalPlacement::cpus_with_room).sum::<usize>() >= tasks,
            },
        }
    }

    /// Whether a job that does not fit rules out every larger job of its mode: so when any CPUs of the machine
    /// will do (a node count asked for, or whole nodes, break the order).
    pub(crate) fn fit_grows_with_size(&self) -> bool {
        self.settings.rules.spread == Spread::AnyCpus
    }

    /// Whether `job` would be placed now; nothing changes.
    pub(crate) fn fits(&mut self, job: &PlanJob) -> bool {
        let Some((cpus, row)) = self.place_new(job) else { return false };
        self.unplace(job, &cpus, row);
        true
    }

    pub(crate) fn matrix(&self) -> &GangMatrix {
        &self.matrix
    }

    /// The matrix's column of each of `cpus`, in order.
    pub(crate) fn columns_of(&self, cpus: &[NodeCpus]) -> Vec<u32> {
        self.columns.of(cpus)
    }

    /// Started jobs hold their memory and their local CPU slots whatever else happens.
    fn account_started(&mut self, jobs: &[PlanJob]) {
        for job in jobs {
            let Some(placed) = &job.placed else { continue };
            for nc in placed {
                let free = &mut self.mem_free[nc.node as usize];
                *free = free.saturating_sub(job.mem_bytes_per_node);
            }
            if job.mode == Mode::Local {
                self.take_local(placed, true);
            }
        }
    }

    /// Count a local job's processes against the MPL. `tolerant`: a started job is there whatever the setting
    /// says now (the MPL may have been lowered), so CPUs already full are skipped.
    fn take_local(&mut self, placement: &[NodeCpus], tolerant: bool) {
        let room = |local: &LocalPlacement, cpus: Vec<u32>| -> Vec<u32> {
            cpus.into_iter().filter(|&c| !tolerant || local.load(c as usize) < local.mpl()).collect()
        };
        match self.settings.rules.spread {
            Spread::WholeNodes => {
                for nc in placement {
                    let local = &mut self.local[nc.node as usize];
                    let cpus = room(local, nc.cpus.clone());
                    local.take(&cpus);
                }
            }
            Spread::AnyCpus => {
                let cpus = room(&self.local_any, self.columns.of(placement));
                self.local_any.take(&cpus);
            }
        }
    }

    /// Place job `i`; false when it gets no CPUs, or a new gang job no row.
    fn place(&mut self, i: usize, job: &PlanJob) -> bool {
        let placement = match &job.placed {
            Some(p) => p.clone(),
            None => match self.choose_cpus(job) {
                Some(p) => p,
                None => return false,
            },
        };
        let columns = self.columns.of(&placement);
        let (rows, always) = match (job.mode, job.class) {
            _ if job.suspended => {
                self.hold_row_while_suspended(i, job, &columns);
                (vec![], false)
            }
            (Mode::Local, _) => (vec![], true),
            (Mode::Gang, _) if job.idle => (vec![], true),
            (Mode::Gang, JobClass::Express) => {
                for &c in &columns {
                    self.occupancy.blocked[c as usize] = true;
                }
                (vec![], true)
            }
            (Mode::Gang, JobClass::Standby) => (vec![], false),
            (Mode::Gang, _) => match self.own_row(job.id, &columns, job.row_held) {
                Some(row) => {
                    self.own_rows[i] = Some(row);
                    (vec![row], false)
                }
                None if job.placed.is_none() => return false,
                None => (vec![], false),
            },
        };
        self.result[i] = Some((placement, rows, always));
        true
    }

    /// A started gang job that owns a row keeps it while suspended (it runs in no slot meanwhile): otherwise the
    /// rows of a suspended job go to later jobs, and it would come back to a full matrix and a share of 0.
    fn hold_row_while_suspended(&mut self, i: usize, job: &PlanJob, columns: &[u32]) {
        let owns_rows = matches!(job.class, JobClass::Interactive | JobClass::Batch);
        if job.placed.is_some() && job.mode == Mode::Gang && owns_rows && !job.idle {
            self.own_rows[i] = self.own_row(job.id, columns, job.row_held);
        }
    }

    /// The row held before if its `columns` are still free there, else the lowest such row; taken for `job`.
    fn own_row(&mut self, job: JobId, columns: &[u32], held: Option<u32>) -> Option<u32> {
        let held = held.map(|r| r as usize).filter(|&r| r < self.matrix.rows() && self.occupancy.free(r, columns));
        let row = held.or_else(|| (0..self.matrix.rows()).find(|&r| self.occupancy.free(r, columns)))?;
        self.matrix.take(job, row as u32, columns);
        self.occupancy.take(row, columns);
        Some(row as u32)
    }

    /// CPUs for a job that has not started, or `None` if there is no room now.
    /// A gang job's cells on all its nodes must be free in one row.
    fn choose_cpus(&mut self, job: &PlanJob) -> Option<Vec<NodeCpus>> {
        self.choose_cpus_in(job, None)
    }

    /// `choose_cpus`, a gang job's cells only in row `only_row` when one is named.
    fn choose_cpus_in(&mut self, job: &PlanJob, only_row: Option<u32>) -> Option<Vec<NodeCpus>> {
        let in_one_row = job.mode == Mode::Gang && job.class != JobClass::Express;
        // A standby job starts only where it can run now: a free cell in a row
        // of the cycle.
        let mut rows =
            if job.class == JobClass::Standby { self.cycle_rows() } else { (0..self.matrix.rows()).collect() };
        if let Some(only) = only_row {
            rows.retain(|&r| r == only as usize);
        }
        let choose = |row: Option<usize>| match self.settings.rules.spread {
            Spread::WholeNodes => self.choose_nodes(job, row),
            Spread::AnyCpus => self.choose_any_cpus(job, row),
        };
        // Every task takes at least one cell (over-allocation only adds cells), so a row with fewer cells
        // left than tasks is passed over: at a saturated machine's many waiting jobs, most rows are full.
        let chosen = if in_one_row {
            let tasks = job.tasks as usize;
            rows.into_iter().filter(|&row| self.occupancy.may_hold(row, tasks)).find_map(|row| choose(Some(row)))
        } else {
            choose(None)
        }?;
        for nc in &chosen {
            self.mem_free[nc.node as usize] -= job.mem_bytes_per_node;
        }
        if job.mode == Mode::Local {
            self.take_local(&chosen, false);
        }
        Some(chosen)
    }

    /// May `job` use a CPU of `node`: the node takes new jobs and has the job's memory free.
    fn node_usable(&self, node: u32, job: &PlanJob) -> bool {
        self.shape.accepting[node as usize] && self.mem_free[node as usize] >= job.mem_bytes_per_node
    }

    /// `Spread::AnyCpus`: a gang job's cells are the lowest free gang columns of `row` (express: free in every
    /// row); a local job's CPUs the least loaded of the machine.
    fn choose_any_cpus(&self, job: &PlanJob, row: Option<usize>) -> Option<Vec<NodeCpus>> {
        let columns = if job.mode == Mode::Local {
            self.local_any.find(job.tasks)?
        } else {
            let cells = cells_for(job.tasks, &self.settings) as usize;
            let usable = (0..self.columns.total() as u32).filter(|&c| self.gang_cell_usable(c, row));
            let columns: Vec<u32> = usable.take(cells).collect();
            (columns.len() == cells).then_some(columns)?
        };
        let placement = self.columns.placement(&columns);
        placement.iter().all(|nc| self.node_usable(nc.node, job)).then_some(placement)
    }

    /// Column `c` is a gang CPU, free in `row` (`None`: in every row).
    fn gang_cell_usable(&self, c: u32, row: Option<usize>) -> bool {
        let node = self.columns.node_of(c) as usize;
        if c - self.columns.first[node] >= self.columns.gang_cpus[node] {
            return false;
        }
        match row {
            Some(r) => self.occupancy.free(r, &[c]),
            None => (0..self.matrix.rows()).all(|r| self.occupancy.free(r, &[c])),
        }
    }

    fn max_tasks_per_node(&self, gang: bool) -> u32 {
        let per_node = if gang { &self.columns.gang_cpus } else { &self.columns.cpus };
        let cells = per_node.iter().copied().max().unwrap_or(0);
        if !gang {
            return cells;
        }
        (0..=cells).rev().find(|&t| cells_for(t, &self.settings) <= cells).unwrap_or(0)
    }

    /// `Spread::WholeNodes`: distinct nodes, lowest index first, for each node's share of the tasks.
    fn choose_nodes(&self, job: &PlanJob, row: Option<usize>) -> Option<Vec<NodeCpus>> {
        let gang = job.mode == Mode::Gang;
        let split = task_split(job.tasks, job.nodes, self.max_tasks_per_node(gang), self.shape.cpus_per_node.len())?;
        let mut chosen: Vec<NodeCpus> = Vec::with_capacity(split.len());
        for tasks in split {
            let nc = (0..self.shape.cpus_per_node.len() as u32)
                .filter(|&n| chosen.iter().all(|c| c.node != n))
                .filter(|&n| self.node_usable(n, job))
                .find_map(|n| self.cpus_on(n, tasks, job, row).map(|cpus| NodeCpus { node: n, cpus }))?;
            chosen.push(nc);
        }
        Some(chosen)
    }

    /// `tasks` tasks' CPUs on `node`, if it has room: gang jobs need their
    /// cells free in `row` (express: in every row), local jobs a slot under
    /// the MPL per CPU.
    fn cpus_on(&self, node: u32, tasks: u32, job: &PlanJob, row: Option<usize>) -> Option<Vec<u32>> {
        if job.mode == Mode::Local {
            return self.local[node as usize].find(tasks);
        }
        let cells = cells_for(tasks, &self.settings) as usize;
        let first = self.columns.first[node as usize];
        let cpus: Vec<u32> = (0..self.columns.gang_cpus[node as usize])
            .filter(|&c| self.gang_cell_usable(first + c, row))
            .take(cells)
            .collect();
        (cpus.len() == cells).then_some(cpus)
    }

    /// Runnable threads per node: the cells or CPUs of every placed job that is neither suspended nor idle.
    fn runnable_threads(&self, jobs: &[PlanJob]) -> Vec<u32> {
        let mut threads = vec![0u32; self.shape.cpus_per_node.len()];
        for (job, result) in jobs.iter().zip(&self.result) {
            let Some((placement, _, _)) = result else { continue };
            if job.suspended || job.idle {
                continue;
            }
            for nc in placement {
                threads[nc.node as usize] += nc.cpus.len() as u32;
            }
        }
        threads
    }

    /// Each spanning gang job's share of the time: CPUs over runnable threads on its most loaded node (at most
    /// 1), the cycle length that lets every such job have no more than its share, and the slots each may use.
    fn thread_shares(&self, jobs: &[PlanJob]) -> ThreadShares {
        if !self.settings.rules.thread_shares {
            return ThreadShares { slots: self.cycle_rows().len(), slots_allowed: vec![None; jobs.len()] };
        }
        let threads = self.runnable_threads(jobs);
        let share_of = |placement: &[NodeCpus]| {
            placement
                .iter()
                .map(|nc| {
                    f64::from(self.shape.cpus_per_node[nc.node as usize]) / f64::from(threads[nc.node as usize].max(1))
                })
                .fold(1.0f64, f64::min)
        };
        let shares: Vec<Option<f64>> = jobs
            .iter()
            .zip(&self.result)
            .map(|(job, result)| match result {
                Some((placement, rows, false)) if placement.len() > 1 && !rows.is_empty() && !job.suspended => {
                    Some(share_of(placement))
                }
                _ => None,
            })
            .collect();
        let running = self.rows_with_a_running_owner(jobs);
        let owned_slots = self.cycle_rows().into_iter().filter(|&r| running[r]).count();
        let needed = shares.iter().flatten().map(|&s| (1.0 / s - 1e-9).ceil() as usize).max().unwrap_or(0);
        let slots = owned_slots.max(needed.min(MAX_CYCLE_SLOTS));
        let slots_allowed =
            shares.iter().map(|s| s.map(|s| ((s * slots as f64).round() as usize).clamp(1, slots))).collect();
        ThreadShares { slots, slots_allowed }
    }

    /// Per matrix row: whether it is a slot of the cycle by its owners, that is, not owned by suspended jobs alone
    /// (a row nobody owns counts, as `cycle_rows` gives it when no row is owned).
    fn rows_with_a_running_owner(&self, jobs: &[PlanJob]) -> Vec<bool> {
        let mut running: Vec<bool> = (0..self.matrix.rows()).map(|r| !self.matrix.row_is_occupied(r as u32)).collect();
        for (job, own) in jobs.iter().zip(&self.own_rows) {
            if let Some(row) = own.filter(|_| !job.suspended) {
                running[row as usize] = true;
            }
        }
        running
    }

    /// Every gang job with cells also runs in the rows where they are all free (a spanning job up to its share):
    /// owners first (by class and submission), then standby jobs.
    fn fill_free_cells(&mut self, jobs: &[PlanJob], order: &[usize], shares: &ThreadShares) {
        for &i in order {
            let job = &jobs[i];
            let Some((placement, rows, always)) = &self.result[i] else { continue };
            if *always || job.suspended || job.mode != Mode::Gang {
                continue;
            }
            if rows.is_empty() && job.class != JobClass::Standby {
                continue; // waiting for its own row: others keep the cells
            }
            let columns = self.columns.of(placement);
            let allowed = shares.slots_allowed[i].map_or(usize::MAX, |a| a.saturating_sub(rows.len()));
            let extra: Vec<u32> = self
                .cycle_rows()
                .into_iter()
                .filter(|&r| !rows.contains(&(r as u32)) && self.occupancy.free(r, &columns))
                .take(allowed)
                .map(|r| r as u32)
                .collect();
            for &r in &extra {
                self.occupancy.take(r as usize, &columns);
            }
            if let Some((_, rows, _)) = &mut self.result[i] {
                rows.extend(extra);
                rows.sort_unstable();
            }
        }
    }

    /// The rows the machine cycles through: those with an owner, or the first
    /// row alone when nobody owns one (standby jobs may then use it).
    fn cycle_rows(&self) -> Vec<usize> {
        let owned: Vec<usize> = (0..self.matrix.rows()).filter(|&r| self.matrix.row_is_occupied(r as u32)).collect();
        if owned.is_empty() {
            vec![0]
        } else {
            owned
        }
    }

    /// Number the occupied rows in order and express each job's rows as
    /// indices into them; the cycle is `slots` long (empty slots at its end).
    fn finish(self, jobs: &[PlanJob], slots: usize) -> Plan {
        let mut used: Vec<bool> = vec![false; self.matrix.rows()];
        for (_, rows, _) in self.result.iter().flatten() {
            for &r in rows {
                used[r as usize] = true;
            }
        }
        let slot_of: Vec<Option<u32>> = used
            .iter()
            .scan(0u32, |next, &u| {
                let slot = u.then_some(*next);
                *next += u32::from(u);
                Some(slot)
            })
            .collect();
        let mut slot_rows: Vec<Option<u32>> = (0..used.len() as u32).filter(|&r| used[r as usize]).map(Some).collect();
        if !slot_rows.is_empty() {
            slot_rows.resize(slot_rows.len().max(slots), None);
        }
        let mut rows: Vec<Vec<JobId>> = vec![Vec::new(); slot_rows.len()];
        let mut always = Vec::new();
        let mut plans = Vec::with_capacity(jobs.len());
        for ((job, result), own_row) in jobs.iter().zip(self.result).zip(self.own_rows) {
            let status = match result {
                None => JobStatus::Queued,
                Some((cpus, matrix_rows, is_always)) => {
                    let slots: Vec<u32> = matrix_rows.iter().filter_map(|&r| slot_of[r as usize]).collect();
                    for &s in &slots {
                        rows[s as usize].push(job.id);
                    }
                    if is_always {
                        always.push(job.id);
                    }
                    JobStatus::Placed { cpus, rows: slots, always: is_always }
                }
            };
            plans.push(JobPlan { id: job.id, status, own_row });
        }
        Plan { rows, slot_rows, always, jobs: plans }
    }
}

#[cfg(test)]
mod tests;
