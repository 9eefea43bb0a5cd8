//! The one coscheduler: the jobs in the machine, the plan, and which slot of
//! the cycle runs. The simulator's engine drives it in simulated time, the
//! runtime's controller in real time; both see the same decisions.
//!
//! Jobs come in (`arrive`, `started`, `finish`, class, idle and suspension
//! changes); every change recomputes the plan (`cluster::plan`) with each job's
//! row from the previous plan held, and answers which jobs the plan newly
//! placed. Which slot runs in a given slice comes from `Rotation`.
//!
//! Under rules where a placed job never moves and a new job never passes a
//! waiting one (the study's), a plan from scratch at every change would cost
//! the whole machine per arrival: the coscheduler then keeps the planner's
//! state standing and places only the jobs at the head of the queue, with the
//! same placement code (`Planner::place_new`). A change only the full plan
//! knows (a class, idle, suspension, a new shape) turns it into a full plan
//! for good.

mod conservative;
mod easy;
pub mod external;
#[cfg(test)]
mod queue_tests;

use crate::cluster::{
    plan, slot_for_slice, Backfill, ClusterShape, JobClass, JobStatus, NodeCpus, Plan, PlanJob, PlanSettings, Planner,
    Rotation,
};
use cosched_core::JobId;
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug)]
pub struct Coscheduler {
    settings: PlanSettings,
    shape: ClusterShape,
    book: Book,
}

#[derive(Clone, Debug)]
enum Book {
    /// Every job not over, in submission order, and the plan made from scratch for them.
    Replanned {
        jobs: Vec<PlanJob>,
        plan: Plan,
    },
    Standing(Box<Standing>),
}

/// Placed jobs keep their CPUs and rows; the queue is served from its head (and, backfilling, from behind it).
#[derive(Clone, Debug)]
struct Standing {
    planner: Planner,
    /// By submission number.
    placed: BTreeMap<u64, Placed>,
    numbers: BTreeMap<JobId, u64>,
    waiting: VecDeque<(u64, PlanJob)>,
    next_number: u64,
    backfill: Backfill,
    /// Admission chosen outside (`external`): then neither FCFS nor backfilling decides.
    external: Option<external::External>,
    /// Placements and ends so far: what a pass kept holds only while none happens.
    changes: u64,
    /// Conservative backfilling's last profile, kept for arrivals at the same instant.
    kept_profile: Option<conservative::KeptProfile>,
}

/// A job the standing book placed: its CPUs, the row it owns, and when it started.
#[derive(Clone, Debug)]
struct Placed {
    job: PlanJob,
    cpus: Vec<NodeCpus>,
    row: Option<u32>,
    start_ns: u64,
}

impl Placed {
    /// When its requested time says it ends, seen at `now_ns`: a job past its estimate may end at any moment,
    /// so now; `None`: no estimate, never.
    fn estimated_end_ns(&self, now_ns: u64) -> Option<u64> {
        Some(self.start_ns.saturating_add(self.job.requested_ns?).max(now_ns))
    }
}

impl Coscheduler {
    /// A coscheduler that keeps its planner standing when the rules allow it (see the module doc).
    pub fn new(settings: PlanSettings, shape: ClusterShape) -> Coscheduler {
        let standing = settings.rules.keep_placed_jobs();
        Coscheduler::build(settings, shape, standing)
    }

    /// A coscheduler that makes the full plan at every change, whatever the rules: for a driver that reads
    /// the whole plan (the controller sends it to the agents).
    pub fn replanning(settings: PlanSettings, shape: ClusterShape) -> Coscheduler {
        Coscheduler::build(settings, shape, false)
    }

    fn build(settings: PlanSettings, shape: ClusterShape, standing: bool) -> Coscheduler {
        assert!(
            standing || settings.backfill == Backfill::None,
            "backfilling needs rules under which a placed job never moves and the queue is strict FCFS"
        );
        let book = if standing {
            Book::Standing(Box::new(Standing {
                planner: Planner::new(&settings, &shape, 0),
                placed: BTreeMap::new(),
                numbers: BTreeMap::new(),
                waiting: VecDeque::new(),
                next_number: 0,
                backfill: settings.backfill,
                external: None,
                changes: 0,
                kept_profile: None,
            }))
        } else {
            Book::Replanned { jobs: Vec::new(), plan: Plan::EMPTY }
        };
        Coscheduler { settings, shape, book }
    }

    /// Admission decided by `chooser`: for the study's rules (a standing planner) without backfilling.
    pub fn with_chooser(mut self, chooser: external::SharedChooser) -> Coscheduler {
        let Book::Standing(standing) = &mut self.book else {
            panic!("a chosen admission needs rules under which a placed job never moves")
        };
        assert!(standing.backfill == Backfill::None, "a chosen admission replaces backfilling");
        standing.external = Some(external::External::new(chooser));
        self
    }

    pub fn settings(&self) -> &PlanSettings {
        &self.settings
    }

    /// The full plan of every job not over; `None` while the planner stands (see the module doc).
    pub fn plan(&self) -> Option<&Plan> {
        match &self.book {
            Book::Replanned { plan, .. } => Some(plan),
            Book::Standing(_) => None,
        }
    }

    /// Every job not over, in submission order.
    pub fn jobs(&mut self) -> &[PlanJob] {
        self.replanned().0
    }

    /// A new job, after every job already in, at `now_ns` (read only by a backfilling queue). Returns the jobs
    /// placed and not started, in the order placed: the driver starts them and says `started`.
    pub fn arrive(&mut self, job: PlanJob, now_ns: u64) -> Vec<JobId> {
        match &mut self.book {
            Book::Standing(standing) => {
                assert!(!standing.numbers.contains_key(&job.id), "{} arrives twice", job.id);
                let number = standing.next_number;
                standing.next_number += 1;
                standing.numbers.insert(job.id, number);
                standing.waiting.push_back((number, job));
                if let Some(external) = &mut standing.external {
                    external.arrived(number, now_ns);
                }
                standing.admit(now_ns)
            }
            Book::Replanned { jobs, .. } => {
                assert!(jobs.iter().all(|j| j.id != job.id), "{} arrives twice", job.id);
                jobs.push(job);
                self.replan()
            }
        }
    }

    /// The job's processes exist on the CPUs the plan gave it: they are its own from now on.
    pub fn started(&mut self, id: JobId) {
        match &mut self.book {
            Book::Standing(standing) => {
                let number = standing.numbers[&id];
                let placed = standing.placed.get_mut(&number).expect("a started job is placed");
                placed.job.placed = Some(placed.cpus.clone());
            }
            Book::Replanned { jobs, plan } => {
                let i = jobs.iter().position(|j| j.id == id).expect("a started job is known");
                let JobStatus::Placed { cpus, .. } = &plan.jobs[i].status else { panic!("{id} starts without CPUs") };
                jobs[i].placed = Some(cpus.clone());
            }
        }
    }

    /// The job is over at `now_ns`. Returns the jobs placed and not started.
    pub fn finish(&mut self, id: JobId, now_ns: u64) -> Vec<JobId> {
        match &mut self.book {
            Book::Standing(standing) => standing.finish(id, now_ns),
            Book::Replanned { jobs, plan } => {
                let i = jobs.iter().position(|j| j.id == id).expect("a finishing job is known");
                jobs.remove(i);
                plan.jobs.remove(i);
                self.replan()
            }
        }
    }

    pub fn set_class(&mut self, id: JobId, class: JobClass) -> Vec<JobId> {
        self.change(id, |job| job.class = class)
    }

    /// A gang job that uses no CPU runs outside the matrix until it does again.
    pub fn set_idle(&mut self, id: JobId, idle: bool) -> Vec<JobId> {
        self.change(id, |job| job.idle = idle)
    }

    pub fn set_suspended(&mut self, id: JobId, suspended: bool) -> Vec<JobId> {
        self.change(id, |job| job.suspended = suspended)
    }

    /// The machine changed (a node came or went, memory, accepting).
    pub fn set_shape(&mut self, shape: ClusterShape) -> Vec<JobId> {
        self.replanned();
        self.shape = shape;
        self.replan()
    }

    /// The whole job table at once, for a driver that keeps its own records (the controller's database):
    /// the same as the arrivals, finishes and changes that lead to it. Rows held are kept.
    pub fn sync(&mut self, shape: ClusterShape, jobs: Vec<PlanJob>) -> Vec<JobId> {
        let held: BTreeMap<JobId, u32> =
            self.replanned().1.jobs.iter().filter_map(|j| Some((j.id, j.own_row?))).collect();
        self.shape = shape;
        // The row this coscheduler gave the job last, or else the one its caller says it held (a restarted
        // controller's, from its records).
        let jobs = jobs
            .into_iter()
            .map(|job| PlanJob { row_held: held.get(&job.id).copied().or(job.row_held), ..job })
            .collect();
        self.book = Book::Replanned { jobs, plan: Plan::EMPTY };
        self.replan()
    }

    /// What the plan would do with `job` added after every job in, on a machine of `shape` (e.g. only one node
    /// accepting): its status. Nothing changes.
    pub fn probe(&self, shape: ClusterShape, job: PlanJob) -> JobStatus {
        let mut jobs = match &self.book {
            Book::Standing(standing) => standing.jobs_in_order(),
            Book::Replanned { jobs, .. } => jobs.clone(),
        };
        jobs.push(job);
        let probed = plan(&self.settings, &shape, &jobs);
        probed.jobs.last().expect("the probed job").status.clone()
    }

    /// What the plan would do with `job` alone on an empty machine of `shape`: whether it can ever run there.
    pub fn probe_alone(&self, shape: ClusterShape, job: PlanJob) -> JobStatus {
        plan(&self.settings, &shape, &[job]).jobs[0].status.clone()
    }

    /// Slots in the cycle (0: no gang job is placed).
    pub fn slot_count(&self) -> usize {
        match &self.book {
            Book::Standing(standing) => standing.planner.matrix().occupied_rows(),
            Book::Replanned { plan, .. } => plan.rows.len(),
        }
    }

    /// The matrix row to run next: after `current_row` ran (`Rotation::NextOccupiedRow`), or in clock slice
    /// `slice` (`Rotation::ClockAligned`). `None` when the cycle is empty or the slot is left to local jobs.
    pub fn row_to_run(&self, current_row: Option<u32>, slice: u64) -> Option<u32> {
        match (&self.book, self.settings.rules.rotation) {
            (Book::Standing(standing), Rotation::NextOccupiedRow) => {
                standing.planner.matrix().next_occupied_row(current_row)
            }
            (Book::Standing(standing), Rotation::ClockAligned) => {
                let matrix = standing.planner.matrix();
                let slots = matrix.occupied_rows();
                let slot = (slots > 0).then(|| slot_for_slice(slice, slots))?;
                (0..matrix.rows() as u32).filter(|&r| matrix.row_is_occupied(r)).nth(slot)
            }
            (Book::Replanned { plan, .. }, rotation) if !plan.rows.is_empty() => match rotation {
                Rotation::NextOccupiedRow => plan.slot_rows[plan.slot_after_row(current_row)?],
                Rotation::ClockAligned => plan.slot_rows[slot_for_slice(slice, plan.rows.len())],
            },
            (Book::Replanned { .. }, _) => None,
        }
    }

    /// A placed job's CPUs and the matrix rows it runs in.
    pub fn placement(&self, id: JobId) -> Option<(Vec<NodeCpus>, Vec<u32>)> {
        match &self.book {
            Book::Standing(standing) => {
                let placed = standing.placed.get(standing.numbers.get(&id)?)?;
                Some((placed.cpus.clone(), placed.row.iter().copied().collect()))
            }
            Book::Replanned { jobs, plan } => {
                let i = jobs.iter().position(|j| j.id == id)?;
                match &plan.jobs[i].status {
                    JobStatus::Placed { cpus, rows, .. } => {
                        Some((cpus.clone(), rows.iter().filter_map(|&s| plan.slot_rows[s as usize]).collect()))
                    }
                    JobStatus::Queued => None,
                }
            }
        }
    }

    /// Every job not over, in submission order.
    pub fn job_ids(&self) -> Vec<JobId> {
        match &self.book {
            Book::Standing(standing) => standing.jobs_in_order().iter().map(|j| j.id).collect(),
            Book::Replanned { jobs, .. } => jobs.iter().map(|j| j.id).collect(),
        }
    }

    /// Jobs that arrived and are not placed.
    pub fn waiting(&self) -> usize {
        match &self.book {
            Book::Standing(standing) => standing.waiting.len(),
            Book::Replanned { plan, .. } => plan.jobs.iter().filter(|j| j.status == JobStatus::Queued).count(),
        }
    }

    fn change(&mut self, id: JobId, edit: impl FnOnce(&mut PlanJob)) -> Vec<JobId> {
        let jobs = &mut self.replanned_mut().0;
        let i = jobs.iter().position(|j| j.id == id).expect("a changed job is known");
        edit(&mut jobs[i]);
        self.replan()
    }

    /// The full plan's view; a standing book becomes a full plan for good.
    fn replanned(&mut self) -> (&[PlanJob], &Plan) {
        let (jobs, plan) = self.replanned_mut();
        (jobs, plan)
    }

    fn replanned_mut(&mut self) -> (&mut Vec<PlanJob>, &mut Plan) {
        if let Book::Standing(standing) = &self.book {
            // The full plan has no backfilling nor chooser: it would drop the queue's rule silently.
            assert!(standing.backfill == Backfill::None, "a backfilling coscheduler keeps its planner standing");
            assert!(standing.external.is_none(), "a coscheduler with a chooser keeps its planner standing");
            let jobs = standing.jobs_in_order();
            self.book = Book::Replanned { jobs, plan: Plan::EMPTY };
            self.replan();
        }
        match &mut self.book {
            Book::Replanned { jobs, plan } => (jobs, plan),
            Book::Standing(_) => unreachable!("just replanned"),
        }
    }

    /// Recompute the plan, each job holding the row it owned; the jobs placed and not started.
    fn replan(&mut self) -> Vec<JobId> {
        let Book::Replanned { jobs, plan: current } = &mut self.book else { unreachable!("a full plan") };
        *current = plan(&self.settings, &self.shape, jobs);
        let mut waiting_to_start = Vec::new();
        for (job, planned) in jobs.iter_mut().zip(&current.jobs) {
            job.row_held = planned.own_row;
            if job.placed.is_none() && matches!(planned.status, JobStatus::Placed { .. }) {
                waiting_to_start.push(job.id);
            }
        }
        waiting_to_start
    }
}

impl Standing {
    /// Place jobs from the head of the queue while they fit, then backfill behind it; the ones placed.
    fn admit(&mut self, now_ns: u64) -> Vec<JobId> {
        if self.external.is_some() {
            return self.admit_chosen(now_ns);
        }
        let mut placed = Vec::new();
        while let Some((_, job)) = self.waiting.front() {
            let Some((cpus, row)) = self.planner.place_new(job) else { break };
            let (number, job) = self.waiting.pop_front().expect("the front job");
            placed.push(job.id);
            self.record_placed(number, job, cpus, row, now_ns);
        }
        if !self.waiting.is_empty() {
            match self.backfill {
                Backfill::None => {}
                Backfill::Easy => placed.extend(self.backfill_easy(now_ns)),
                Backfill::Conservative => placed.extend(self.backfill_conservative(now_ns)),
            }
        }
        placed
    }

    fn record_placed(&mut self, number: u64, mut job: PlanJob, cpus: Vec<NodeCpus>, row: Option<u32>, now_ns: u64) {
        self.changes += 1;
        job.row_held = row;
        self.placed.insert(number, Placed { job, cpus, row, start_ns: now_ns });
    }

    fn finish(&mut self, id: JobId, now_ns: u64) -> Vec<JobId> {
        self.changes += 1;
        let number = self.numbers.remove(&id).expect("a finishing job is known");
        match self.placed.remove(&number) {
            Some(p) => self.planner.unplace(&p.job, &p.cpus, p.row),
            None => {
                self.waiting.retain(|(n, _)| *n != number);
                if let Some(external) = &mut self.external {
                    external.left_queue(number, now_ns, false);
                }
            }
        }
        self.admit(now_ns)
    }

    fn jobs_in_order(&self) -> Vec<PlanJob> {
        let placed = self.placed.iter().map(|(&n, p)| (n, p.job.clone()));
        let mut jobs: Vec<(u64, PlanJob)> = placed.chain(self.waiting.iter().cloned()).collect();
        jobs.sort_by_key(|(n, _)| *n);
        jobs.into_iter().map(|(_, job)| job).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{Mode, PlanRules};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const NODES: usize = 3;
    const CPUS: u32 = 4;

    fn coscheduler(rules: PlanRules) -> Coscheduler {
        let settings = PlanSettings {
            rules,
            rows: 3,
            local_mpl: 2,
            gang_cpu_share: 1.0,
            over_allocation: 0.0,
            backfill: Backfill::None,
        };
        let shape = ClusterShape {
            cpus_per_node: vec![CPUS; NODES],
            mem_bytes_per_node: vec![1 << 30; NODES],
            accepting: vec![true; NODES],
        };
        Coscheduler::new(settings, shape)
    }

    fn job(id: u64, tasks: u32, mode: Mode) -> PlanJob {
        PlanJob::new(JobId(id), mode, tasks)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Arrive { tasks: u32, gang: bool },
        Finish(usize),
        Lower(usize),
        Idle(usize, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u32..=9, any::<bool>()).prop_map(|(tasks, gang)| Op::Arrive { tasks, gang }),
            3 => (0usize..32).prop_map(Op::Finish),
            1 => (0usize..32).prop_map(Op::Lower),
            1 => (0usize..32, any::<bool>()).prop_map(|(k, idle)| Op::Idle(k, idle)),
        ]
    }

    fn apply(c: &mut Coscheduler, op: Op, next_id: &mut u64, study: bool) -> Vec<JobId> {
        let pick = |c: &mut Coscheduler, k: usize| {
            let ids = c.job_ids();
            (!ids.is_empty()).then(|| ids[k % ids.len()])
        };
        match op {
            Op::Arrive { tasks, gang } => {
                *next_id += 1;
                let mode = if gang { Mode::Gang } else { Mode::Local };
                c.arrive(job(*next_id, tasks, mode), 0)
            }
            Op::Finish(k) => pick(c, k).map(|id| c.finish(id, 0)).unwrap_or_default(),
            // The study has no classes or idle jobs: it only arrives and finishes.
            Op::Lower(_) | Op::Idle(..) if study => vec![],
            Op::Lower(k) => pick(c, k).map(|id| c.set_class(id, JobClass::Standby)).unwrap_or_default(),
            Op::Idle(k, idle) => pick(c, k).map(|id| c.set_idle(id, idle)).unwrap_or_default(),
        }
    }

    /// No CPU runs two gang jobs in a slot; a local CPU holds at most the MPL; every job has one CPU per task.
    fn check_plan(c: &Coscheduler) {
        let plan = c.plan().expect("a full plan");
        let cpus_of = |id: JobId| c.placement(id).map(|(cpus, _)| cpus).unwrap_or_default();
        for (slot, jobs) in plan.rows.iter().enumerate() {
            let mut cells: Vec<(u32, u32)> = jobs
                .iter()
                .flat_map(|&id| cpus_of(id))
                .flat_map(|nc| nc.cpus.iter().map(move |&c| (nc.node, c)).collect::<Vec<_>>())
                .collect();
            let count = cells.len();
            cells.sort_unstable();
            cells.dedup();
            assert_eq!(cells.len(), count, "a CPU runs two gang jobs in slot {slot}: {plan:?}");
        }
        let mut local_load: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        for (job, planned) in c.clone().jobs().iter().zip(&plan.jobs) {
            let Some((cpus, rows)) = c.placement(job.id) else { continue };
            let tasks: usize = cpus.iter().map(|nc| nc.cpus.len()).sum();
            assert_eq!(tasks, job.tasks as usize, "{} has one CPU per task", job.id);
            if job.mode == Mode::Local {
                for nc in &cpus {
                    for &cpu in &nc.cpus {
                        *local_load.entry((nc.node, cpu)).or_default() += 1;
                    }
                }
            }
            let own = planned.own_row;
            assert!(own.is_none_or(|row| rows.contains(&row)), "{} runs in the row it owns", job.id);
        }
        assert!(local_load.values().all(|&load| load <= 2), "local MPL 2: {local_load:?}");
        assert!(plan.slot_rows.windows(2).all(|w| w[0] < w[1] || w[1].is_none()), "slots in row order");
    }

    /// Strict FCFS: every placed job comes before every waiting one.
    fn check_fcfs(c: &Coscheduler) {
        let placed: Vec<bool> = c.clone().jobs().iter().map(|j| c.placement(j.id).is_some()).collect();
        assert!(placed.windows(2).all(|w| w[0] || !w[1]), "a job passed one that waits: {placed:?}");
    }

    proptest! {
        #[test]
        fn every_plan_keeps_its_invariants_and_started_jobs_keep_their_cpus_and_rows(
            study in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let rules = if study { PlanRules::STUDY } else { PlanRules::COSCHED };
            let mut c = coscheduler(rules);
            c.jobs(); // the full plan at every step, for the checks
            let mut next_id = 0;
            let mut kept: BTreeMap<JobId, (Vec<NodeCpus>, Option<u32>)> = BTreeMap::new();
            for op in ops {
                for id in apply(&mut c, op, &mut next_id, study) {
                    c.started(id);
                }
                check_plan(&c);
                if study {
                    check_fcfs(&c);
                }
                let jobs = c.jobs().to_vec();
                kept.retain(|id, _| jobs.iter().any(|j| j.id == *id));
                for job in jobs.iter().filter(|j| j.placed.is_some()) {
                    let own_row = c.plan().expect("a full plan").job(job.id).and_then(|j| j.own_row);
                    let now = (c.placement(job.id).expect("placed").0, own_row);
                    let before = kept.entry(job.id).or_insert_with(|| now.clone());
                    prop_assert_eq!(&before.0, &now.0, "{} keeps its CPUs", job.id);
                    if before.1.is_some() && !job.idle && job.class != JobClass::Standby {
                        prop_assert_eq!(before.1, now.1, "{} keeps its row", job.id);
                    }
                    before.1 = now.1;
                }
            }
        }
    }

    #[test]
    fn the_study_preset_places_first_fit_across_nodes_and_rotates_through_occupied_rows() {
        let mut c = coscheduler(PlanRules::STUDY);
        let arrive = |c: &mut Coscheduler, id, tasks| {
            for started in c.arrive(job(id, tasks, Mode::Gang), 0) {
                c.started(started);
            }
        };
        for (id, tasks) in [(1, 7), (2, 6), (3, 5), (4, 12), (5, 1), (6, 12), (7, 1)] {
            arrive(&mut c, id, tasks);
        }
        let placed = |c: &Coscheduler, id| c.placement(JobId(id));
        assert_eq!(placed(&c, 1), Some((vec![nc(0, &[0, 1, 2, 3]), nc(1, &[0, 1, 2])], vec![0])));
        assert_eq!(placed(&c, 2), Some((vec![nc(0, &[0, 1, 2, 3]), nc(1, &[0, 1])], vec![1])), "row 0 is too full");
        assert_eq!(placed(&c, 3), Some((vec![nc(1, &[3]), nc(2, &[0, 1, 2, 3])], vec![0])), "the rest of row 0");
        assert_eq!(placed(&c, 4).map(|p| p.1), Some(vec![2]));
        assert_eq!(placed(&c, 5), Some((vec![nc(1, &[2])], vec![1])), "the lowest free column of row 1");
        assert_eq!(placed(&c, 6), None, "no row has 12 free cells");
        assert_eq!(placed(&c, 7), None, "strict FCFS: job 7 waits behind job 6");
        assert_eq!(c.slot_count(), 3);
        assert_eq!(c.row_to_run(Some(0), 0), Some(1));
        assert_eq!(c.row_to_run(Some(2), 0), Some(0), "round robin");
        for id in [2, 5] {
            for started in c.finish(JobId(id), 0) {
                c.started(started);
            }
        }
        assert_eq!(placed(&c, 6).map(|p| p.1), Some(vec![1]), "the freed row 1 takes job 6");
        assert_eq!(placed(&c, 7), None, "every row is full");
        for started in c.finish(JobId(4), 0) {
            c.started(started);
        }
        assert_eq!(placed(&c, 7), Some((vec![nc(0, &[0])], vec![2])));
        assert_eq!(c.row_to_run(Some(1), 7), Some(2), "the study's rotation ignores the clock");
    }

    proptest! {
        /// The standing planner places exactly what the full plan places, under the rules that allow it.
        #[test]
        fn a_standing_coscheduler_decides_what_the_full_plan_decides(
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut standing = coscheduler(PlanRules::STUDY);
            let mut full = Coscheduler::replanning(standing.settings().clone(), standing.shape.clone());
            let (mut next_standing, mut next_full) = (0, 0);
            for op in ops {
                let started = apply(&mut standing, op.clone(), &mut next_standing, true);
                prop_assert_eq!(&started, &apply(&mut full, op, &mut next_full, true));
                for id in started {
                    standing.started(id);
                    full.started(id);
                }
                prop_assert!(standing.plan().is_none(), "still standing");
                for id in 1..=next_full {
                    prop_assert_eq!(standing.placement(JobId(id)), full.placement(JobId(id)), "job {}", id);
                }
                prop_assert_eq!(standing.slot_count(), full.slot_count());
                prop_assert_eq!(standing.waiting(), full.waiting());
                for row in [None, Some(0), Some(1), Some(2)] {
                    prop_assert_eq!(standing.row_to_run(row, 0), full.row_to_run(row, 0));
                }
            }
        }
    }

    fn nc(node: u32, cpus: &[u32]) -> NodeCpus {
        NodeCpus { node, cpus: cpus.to_vec() }
    }
}
