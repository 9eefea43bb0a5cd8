//! The one coscheduler: the jobs in the machine, the plan, and which slot of
//! the cycle runs. The simulator's engine drives it in simulated time, the
//! runtime's controller in real time; both see the same decisions.
//!
//! Jobs come in (`arrive`, `started`, `finish`, class, idle and suspension
//! changes); every change recomputes the plan (`cluster::plan`) with each job's
//! row from the previous plan held, and answers which jobs the plan newly
//! placed. Which slot runs in a given slice comes from `Rotation`.

use crate::cluster::{
    plan, slot_for_slice, ClusterShape, JobClass, JobStatus, NodeCpus, Plan, PlanJob, PlanSettings, Rotation,
};
use cosched_core::JobId;

#[derive(Clone, Debug)]
pub struct Coscheduler {
    settings: PlanSettings,
    shape: ClusterShape,
    /// Jobs not over, in submission order.
    jobs: Vec<PlanJob>,
    plan: Plan,
}

impl Coscheduler {
    pub fn new(settings: PlanSettings, shape: ClusterShape) -> Coscheduler {
        Coscheduler { settings, shape, jobs: Vec::new(), plan: Plan::EMPTY }
    }

    pub fn settings(&self) -> &PlanSettings {
        &self.settings
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn jobs(&self) -> &[PlanJob] {
        &self.jobs
    }

    /// A new job, after every job already in. Returns the jobs placed and not
    /// started, in submission order: the driver starts them and says `started`.
    pub fn arrive(&mut self, job: PlanJob) -> Vec<JobId> {
        assert!(self.index(job.id).is_none(), "{} arrives twice", job.id);
        self.jobs.push(job);
        self.replan()
    }

    /// The job's processes exist on the CPUs the plan gave it: they are its own from now on.
    pub fn started(&mut self, id: JobId) {
        let i = self.index(id).expect("a started job is known");
        let JobStatus::Placed { cpus, .. } = &self.plan.jobs[i].status else { panic!("{id} starts without CPUs") };
        self.jobs[i].placed = Some(cpus.clone());
    }

    /// The job is over. Returns the jobs placed and not started.
    pub fn finish(&mut self, id: JobId) -> Vec<JobId> {
        let i = self.index(id).expect("a finishing job is known");
        self.jobs.remove(i);
        self.plan.jobs.remove(i);
        self.replan()
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
        self.shape = shape;
        self.replan()
    }

    /// The whole job table at once, for a driver that keeps its own records (the controller's database):
    /// the same as the arrivals, finishes and changes that lead to it. Rows held are kept.
    pub fn sync(&mut self, shape: ClusterShape, jobs: Vec<PlanJob>) -> Vec<JobId> {
        let held: std::collections::BTreeMap<JobId, u32> =
            self.plan.jobs.iter().filter_map(|j| Some((j.id, j.own_row?))).collect();
        self.shape = shape;
        self.jobs = jobs.into_iter().map(|job| PlanJob { row_held: held.get(&job.id).copied(), ..job }).collect();
        self.replan()
    }

    /// What the plan would do with `job` added after every job in, on a machine of `shape` (e.g. only one node
    /// accepting): its status. Nothing changes.
    pub fn probe(&self, shape: ClusterShape, job: PlanJob) -> JobStatus {
        let mut jobs = self.jobs.clone();
        jobs.push(job);
        let probed = plan(&self.settings, &shape, &jobs);
        probed.jobs.last().expect("the probed job").status.clone()
    }

    /// What the plan would do with `job` alone on an empty machine of `shape`: whether it can ever run there.
    pub fn probe_alone(&self, shape: ClusterShape, job: PlanJob) -> JobStatus {
        plan(&self.settings, &shape, &[job]).jobs[0].status.clone()
    }

    /// The slot to run next: after the slot holding matrix row `current_row` ran
    /// (`Rotation::NextOccupiedRow`), or in clock slice `slice`
    /// (`Rotation::ClockAligned`). `None` when the cycle is empty.
    pub fn slot_to_run(&self, current_row: Option<u32>, slice: u64) -> Option<usize> {
        if self.plan.rows.is_empty() {
            return None;
        }
        match self.settings.rules.rotation {
            Rotation::NextOccupiedRow => self.plan.slot_after_row(current_row),
            Rotation::ClockAligned => Some(slot_for_slice(slice, self.plan.rows.len())),
        }
    }

    /// A placed job's CPUs and the matrix rows it runs in.
    pub fn placement(&self, id: JobId) -> Option<(&[NodeCpus], Vec<u32>)> {
        match &self.plan.job(id)?.status {
            JobStatus::Placed { cpus, rows, .. } => {
                Some((cpus, rows.iter().filter_map(|&s| self.plan.slot_rows[s as usize]).collect()))
            }
            JobStatus::Queued => None,
        }
    }

    fn index(&self, id: JobId) -> Option<usize> {
        self.jobs.iter().position(|j| j.id == id)
    }

    fn change(&mut self, id: JobId, edit: impl FnOnce(&mut PlanJob)) -> Vec<JobId> {
        let i = self.index(id).expect("a changed job is known");
        edit(&mut self.jobs[i]);
        self.replan()
    }

    /// Recompute the plan, each job holding the row it owned; the jobs placed and not started.
    fn replan(&mut self) -> Vec<JobId> {
        self.plan = plan(&self.settings, &self.shape, &self.jobs);
        let mut waiting_to_start = Vec::new();
        for (job, planned) in self.jobs.iter_mut().zip(&self.plan.jobs) {
            job.row_held = planned.own_row;
            if job.placed.is_none() && matches!(planned.status, JobStatus::Placed { .. }) {
                waiting_to_start.push(job.id);
            }
        }
        waiting_to_start
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
        let settings = PlanSettings { rules, rows: 3, local_mpl: 2, gang_cpu_share: 1.0, over_allocation: 0.0 };
        let shape = ClusterShape {
            cpus_per_node: vec![CPUS; NODES],
            mem_bytes_per_node: vec![1 << 30; NODES],
            accepting: vec![true; NODES],
        };
        Coscheduler::new(settings, shape)
    }

    fn job(id: u64, tasks: u32, mode: Mode) -> PlanJob {
        PlanJob {
            id: JobId(id),
            class: JobClass::Batch,
            mode,
            tasks,
            nodes: None,
            mem_bytes_per_node: 0,
            placed: None,
            suspended: false,
            idle: false,
            row_held: None,
        }
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
        let pick = |c: &Coscheduler, k: usize| (!c.jobs().is_empty()).then(|| c.jobs()[k % c.jobs().len()].id);
        match op {
            Op::Arrive { tasks, gang } => {
                *next_id += 1;
                let mode = if gang { Mode::Gang } else { Mode::Local };
                c.arrive(job(*next_id, tasks, mode))
            }
            Op::Finish(k) => pick(c, k).map(|id| c.finish(id)).unwrap_or_default(),
            // The study has no classes or idle jobs: it only arrives and finishes.
            Op::Lower(_) | Op::Idle(..) if study => vec![],
            Op::Lower(k) => pick(c, k).map(|id| c.set_class(id, JobClass::Standby)).unwrap_or_default(),
            Op::Idle(k, idle) => pick(c, k).map(|id| c.set_idle(id, idle)).unwrap_or_default(),
        }
    }

    /// No CPU runs two gang jobs in a slot; a local CPU holds at most the MPL; every job has one CPU per task.
    fn check_plan(c: &Coscheduler) {
        let plan = c.plan();
        let cpus_of = |id: JobId| c.placement(id).map(|(cpus, _)| cpus.to_vec()).unwrap_or_default();
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
        for job in c.jobs() {
            let Some((cpus, rows)) = c.placement(job.id) else { continue };
            let tasks: usize = cpus.iter().map(|nc| nc.cpus.len()).sum();
            assert_eq!(tasks, job.tasks as usize, "{} has one CPU per task", job.id);
            if job.mode == Mode::Local {
                for nc in cpus {
                    for &cpu in &nc.cpus {
                        *local_load.entry((nc.node, cpu)).or_default() += 1;
                    }
                }
            }
            let own = plan.job(job.id).and_then(|j| j.own_row);
            assert!(own.is_none_or(|row| rows.contains(&row)), "{} runs in the row it owns", job.id);
        }
        assert!(local_load.values().all(|&load| load <= 2), "local MPL 2: {local_load:?}");
        assert!(plan.slot_rows.windows(2).all(|w| w[0] < w[1] || w[1].is_none()), "slots in row order");
    }

    /// Strict FCFS: every placed job comes before every waiting one.
    fn check_fcfs(c: &Coscheduler) {
        let placed: Vec<bool> = c.jobs().iter().map(|j| c.placement(j.id).is_some()).collect();
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
                kept.retain(|id, _| c.jobs().iter().any(|j| j.id == *id));
                for job in c.jobs().iter().filter(|j| j.placed.is_some()) {
                    let now = (c.placement(job.id).expect("placed").0.to_vec(), c.plan().job(job.id).and_then(|j| j.own_row));
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
            for started in c.arrive(job(id, tasks, Mode::Gang)) {
                c.started(started);
            }
        };
        for (id, tasks) in [(1, 7), (2, 6), (3, 5), (4, 12), (5, 1), (6, 12), (7, 1)] {
            arrive(&mut c, id, tasks);
        }
        let placed = |c: &Coscheduler, id| c.placement(JobId(id)).map(|(cpus, rows)| (cpus.to_vec(), rows));
        assert_eq!(placed(&c, 1), Some((vec![nc(0, &[0, 1, 2, 3]), nc(1, &[0, 1, 2])], vec![0])));
        assert_eq!(placed(&c, 2), Some((vec![nc(0, &[0, 1, 2, 3]), nc(1, &[0, 1])], vec![1])), "row 0 is too full");
        assert_eq!(placed(&c, 3), Some((vec![nc(1, &[3]), nc(2, &[0, 1, 2, 3])], vec![0])), "the rest of row 0");
        assert_eq!(placed(&c, 4).map(|p| p.1), Some(vec![2]));
        assert_eq!(placed(&c, 5), Some((vec![nc(1, &[2])], vec![1])), "the lowest free column of row 1");
        assert_eq!(placed(&c, 6), None, "no row has 12 free cells");
        assert_eq!(placed(&c, 7), None, "strict FCFS: job 7 waits behind job 6");
        assert_eq!(c.plan().slot_rows, vec![Some(0), Some(1), Some(2)]);
        assert_eq!(c.slot_to_run(Some(0), 0), Some(1));
        assert_eq!(c.slot_to_run(Some(2), 0), Some(0), "round robin");
        for id in [2, 5] {
            for started in c.finish(JobId(id)) {
                c.started(started);
            }
        }
        assert_eq!(placed(&c, 6).map(|p| p.1), Some(vec![1]), "the freed row 1 takes job 6");
        assert_eq!(placed(&c, 7), None, "every row is full");
        for started in c.finish(JobId(4)) {
            c.started(started);
        }
        assert_eq!(placed(&c, 7), Some((vec![nc(0, &[0])], vec![2])));
        assert_eq!(c.slot_to_run(Some(1), 7), Some(2), "the study's rotation ignores the clock");
    }

    fn nc(node: u32, cpus: &[u32]) -> NodeCpus {
        NodeCpus { node, cpus: cpus.to_vec() }
    }
}
