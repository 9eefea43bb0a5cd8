use super::*;
use proptest::prelude::*;

fn settings() -> PlanSettings {
    PlanSettings { rows: 4, local_mpl: 2, gang_cpu_share: 1.0, over_allocation: 0.0 }
}

fn shape(nodes: usize, cpus: u32) -> ClusterShape {
    ClusterShape {
        cpus_per_node: vec![cpus; nodes],
        mem_bytes_per_node: vec![1 << 30; nodes],
        accepting: vec![true; nodes],
    }
}

fn gang(id: u32, tasks: u32) -> PlanJob {
    PlanJob {
        id: JobId(id),
        class: JobClass::Batch,
        mode: Mode::Gang,
        tasks,
        nodes: None,
        mem_bytes_per_node: 0,
        placed: None,
        suspended: false,
        idle: false,
    }
}

fn with_class(mut job: PlanJob, class: JobClass) -> PlanJob {
    job.class = class;
    job
}

fn placed(plan: &Plan, id: u32) -> (Vec<NodeCpus>, Vec<u32>, bool) {
    match &plan.job(JobId(id)).unwrap().status {
        JobStatus::Placed { cpus, rows, always } => (cpus.clone(), rows.clone(), *always),
        JobStatus::Queued => panic!("J{id} is queued"),
    }
}

fn on(node: u32, cpus: &[u32]) -> NodeCpus {
    NodeCpus { node, cpus: cpus.to_vec() }
}

#[test]
fn two_gangs_on_one_node_alternate() {
    let p = plan(&settings(), &shape(1, 2), &[gang(1, 2), gang(2, 2)]);
    assert_eq!(p.rows, vec![vec![JobId(1)], vec![JobId(2)]]);
    assert_eq!(placed(&p, 1), (vec![on(0, &[0, 1])], vec![0], false));
    assert_eq!(p.job(JobId(2)).unwrap().slice_share(p.rows.len()), 0.5);
}

#[test]
fn one_node_job_fills_free_cells_of_other_rows() {
    let p = plan(&settings(), &shape(1, 4), &[gang(1, 3), gang(2, 3), gang(3, 1)]);
    assert_eq!(p.rows, vec![vec![JobId(1), JobId(3)], vec![JobId(2), JobId(3)]]);
    assert_eq!(placed(&p, 3), (vec![on(0, &[3])], vec![0, 1], false));
    assert_eq!(p.job(JobId(3)).unwrap().slice_share(2), 1.0);
}

#[test]
fn a_spanning_job_gets_one_row_on_every_node() {
    let mut wide = gang(2, 4);
    wide.nodes = Some(2);
    let p = plan(&settings(), &shape(2, 2), &[gang(1, 1), wide]);
    // Row 0 has only one free CPU on node 0, so the wide job goes to row 1,
    // where it holds both nodes: job 1 cannot fill row 1.
    assert_eq!(placed(&p, 2), (vec![on(0, &[0, 1]), on(1, &[0, 1])], vec![1], false));
    assert_eq!(placed(&p, 1).1, vec![0]);
}

#[test]
fn higher_class_owns_the_first_row() {
    let p = plan(&settings(), &shape(1, 2), &[gang(1, 2), with_class(gang(2, 2), JobClass::Interactive)]);
    assert_eq!(p.rows, vec![vec![JobId(2)], vec![JobId(1)]]);
}

#[test]
fn express_runs_always_and_displaces_a_started_gang_on_its_cpus() {
    let mut started = gang(1, 2);
    started.placed = Some(vec![on(0, &[0, 1])]);
    let p = plan(&settings(), &shape(1, 2), &[started, with_class(gang(2, 2), JobClass::Express)]);
    assert_eq!(placed(&p, 2), (vec![on(0, &[0, 1])], vec![], true));
    assert_eq!(placed(&p, 1), (vec![on(0, &[0, 1])], vec![], false), "waits frozen, keeps its CPUs");
    assert!(p.rows.is_empty());
    assert_eq!(p.always, vec![JobId(2)]);
}

#[test]
fn express_waits_when_no_cpu_is_free_in_every_row() {
    let p = plan(&settings(), &shape(1, 2), &[gang(1, 1), with_class(gang(2, 2), JobClass::Express)]);
    // Express is considered first, so it takes both CPUs and job 1 queues.
    assert!(placed(&p, 2).2);
    assert_eq!(p.job(JobId(1)).unwrap().status, JobStatus::Queued);
}

#[test]
fn standby_runs_only_in_otherwise_idle_cells() {
    let p = plan(&settings(), &shape(1, 2), &[gang(1, 2), gang(2, 1), with_class(gang(3, 1), JobClass::Standby)]);
    // Job 2 owns row 1 (CPU 0) and cannot fill row 0; standby gets CPU 1 in row 1.
    assert_eq!(placed(&p, 3), (vec![on(0, &[1])], vec![1], false));
    // One CPU, owned in the only row of the cycle: nothing is idle.
    let full = plan(&settings(), &shape(1, 1), &[gang(1, 1), with_class(gang(2, 1), JobClass::Standby)]);
    assert_eq!(full.job(JobId(2)).unwrap().status, JobStatus::Queued);
    let mut one_row = settings();
    one_row.rows = 1;
    let starved = plan(&one_row, &shape(1, 1), &[gang(1, 1), with_class(gang(2, 1), JobClass::Standby)]);
    assert_eq!(starved.job(JobId(2)).unwrap().status, JobStatus::Queued);
}

#[test]
fn local_jobs_are_admitted_up_to_the_mpl_and_always_run() {
    let local = |id| PlanJob { mode: Mode::Local, ..gang(id, 2) };
    let p = plan(&settings(), &shape(1, 2), &[local(1), local(2), local(3)]);
    assert_eq!(placed(&p, 1), (vec![on(0, &[0, 1])], vec![], true));
    assert!(placed(&p, 2).2);
    assert_eq!(p.job(JobId(3)).unwrap().status, JobStatus::Queued, "MPL 2 per CPU");
    assert_eq!(p.always, vec![JobId(1), JobId(2)]);
}

#[test]
fn memory_admission_counts_every_placed_job_on_a_node() {
    let big = |id| PlanJob { mem_bytes_per_node: 600 << 20, ..gang(id, 1) };
    let p = plan(&settings(), &shape(1, 2), &[big(1), big(2)]);
    assert!(matches!(p.job(JobId(1)).unwrap().status, JobStatus::Placed { .. }));
    assert_eq!(p.job(JobId(2)).unwrap().status, JobStatus::Queued, "1 GiB node, 600 MiB each");
}

#[test]
fn gang_cap_and_over_allocation_limit_cells() {
    let mut s = settings();
    s.gang_cpu_share = 0.5;
    let p = plan(&s, &shape(1, 4), &[gang(1, 2), gang(2, 3)]);
    assert_eq!(placed(&p, 1).0, vec![on(0, &[0, 1])]);
    assert_eq!(p.job(JobId(2)).unwrap().status, JobStatus::Queued, "only 2 of 4 CPUs are for gangs");
    let mut s = settings();
    s.over_allocation = 0.5;
    let p = plan(&s, &shape(1, 4), &[gang(1, 2)]);
    assert_eq!(placed(&p, 1).0, vec![on(0, &[0, 1, 2])], "2 tasks x 1.5 = 3 cells");
}

#[test]
fn idle_jobs_run_outside_the_matrix_and_suspended_ones_nowhere() {
    let mut idle = gang(1, 2);
    idle.placed = Some(vec![on(0, &[0, 1])]);
    idle.idle = true;
    let mut suspended = gang(2, 2);
    suspended.placed = Some(vec![on(0, &[0, 1])]);
    suspended.suspended = true;
    let p = plan(&settings(), &shape(1, 2), &[idle, suspended, gang(3, 2)]);
    assert_eq!(placed(&p, 1), (vec![on(0, &[0, 1])], vec![], true));
    assert_eq!(placed(&p, 2), (vec![on(0, &[0, 1])], vec![], false));
    assert_eq!(p.rows, vec![vec![JobId(3)]], "their cells are free for job 3");
}

#[test]
fn new_jobs_go_only_to_accepting_nodes() {
    let mut s = shape(2, 2);
    s.accepting[0] = false;
    let p = plan(&settings(), &s, &[gang(1, 2)]);
    assert_eq!(placed(&p, 1).0, vec![on(1, &[0, 1])]);
}

#[test]
fn class_rights() {
    assert!(JobClass::Batch.change_allowed(JobClass::Standby, false));
    assert!(!JobClass::Batch.change_allowed(JobClass::Interactive, false));
    assert!(JobClass::Batch.change_allowed(JobClass::Express, true));
    assert!(!JobClass::Express.submit_allowed(false));
    assert_eq!(JobClass::parse(" Interactive"), Some(JobClass::Interactive));
    assert_eq!(JobClass::parse("urgent"), None);
}

fn arbitrary_job() -> impl Strategy<Value = (u32, u8, bool, bool)> {
    (1u32..5, 0u8..4, any::<bool>(), any::<bool>())
}

proptest! {
    /// In every slot no CPU holds two jobs, and jobs that run always never
    /// share a CPU with a slot's job unless that job is local.
    #[test]
    fn no_cell_is_double_booked(specs in proptest::collection::vec(arbitrary_job(), 1..12), nodes in 1usize..4) {
        let jobs: Vec<PlanJob> = specs
            .iter()
            .enumerate()
            .map(|(i, &(tasks, class, local, idle))| PlanJob {
                class: JobClass::ALL[class as usize],
                mode: if local { Mode::Local } else { Mode::Gang },
                idle,
                ..gang(i as u32, tasks)
            })
            .collect();
        let p = plan(&settings(), &shape(nodes, 2), &jobs);
        let cells = |id: JobId| match &p.job(id).unwrap().status {
            JobStatus::Placed { cpus, .. } => cpus.iter().flat_map(|nc| nc.cpus.iter().map(move |&c| (nc.node, c))).collect::<Vec<_>>(),
            JobStatus::Queued => vec![],
        };
        let express_always: Vec<JobId> = jobs
            .iter()
            .filter(|j| j.class == JobClass::Express && j.mode == Mode::Gang && !j.idle)
            .map(|j| j.id)
            .filter(|id| p.always.contains(id))
            .collect();
        for slot in &p.rows {
            let mut seen = std::collections::BTreeSet::new();
            for &id in slot.iter().chain(&express_always) {
                for cell in cells(id) {
                    prop_assert!(seen.insert(cell), "cell {cell:?} twice in a slot");
                }
            }
        }
        for (job, jp) in jobs.iter().zip(&p.jobs) {
            if let JobStatus::Placed { cpus, .. } = &jp.status {
                let tasks: usize = cpus.iter().map(|nc| nc.cpus.len()).sum();
                prop_assert_eq!(tasks, job.tasks as usize);
            }
        }
    }
}
