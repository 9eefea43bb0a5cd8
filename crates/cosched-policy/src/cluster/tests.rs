use super::*;
use proptest::prelude::*;

fn settings() -> PlanSettings {
    PlanSettings {
        rules: PlanRules::COSCHED,
        rows: 4,
        local_mpl: 2,
        gang_cpu_share: 1.0,
        over_allocation: 0.0,
        backfill: Backfill::None,
    }
}

fn shape(nodes: usize, cpus: u32) -> ClusterShape {
    ClusterShape {
        cpus_per_node: vec![cpus; nodes],
        mem_bytes_per_node: vec![1 << 30; nodes],
        accepting: vec![true; nodes],
    }
}

fn gang(id: u64, tasks: u32) -> PlanJob {
    PlanJob::new(JobId(id), Mode::Gang, tasks)
}

fn with_class(mut job: PlanJob, class: JobClass) -> PlanJob {
    job.class = class;
    job
}

fn placed(plan: &Plan, id: u64) -> (Vec<NodeCpus>, Vec<u32>, bool) {
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

/// Mark every placed job of `p` as started where the plan put it, holding the row it owns.
fn started_as_planned(jobs: &[PlanJob], p: &Plan) -> Vec<PlanJob> {
    jobs.iter()
        .zip(&p.jobs)
        .map(|(job, jp)| match &jp.status {
            JobStatus::Placed { cpus, .. } => {
                PlanJob { placed: Some(cpus.clone()), row_held: jp.own_row, ..job.clone() }
            }
            JobStatus::Queued => job.clone(),
        })
        .collect()
}

#[test]
fn a_started_job_keeps_its_row_when_higher_classes_arrive() {
    let first = plan(&settings(), &shape(1, 2), &[gang(1, 2)]);
    let mut jobs = started_as_planned(&[gang(1, 2)], &first);
    jobs.extend((2..=5).map(|id| with_class(gang(id, 2), JobClass::Interactive)));
    let p = plan(&settings(), &shape(1, 2), &jobs);
    assert_eq!(placed(&p, 1).1, vec![0], "the running batch job keeps its row");
    for id in 2..=4 {
        assert_eq!(placed(&p, id).1.len(), 1, "J{id} gets one of the free rows");
    }
    assert_eq!(p.job(JobId(5)).unwrap().status, JobStatus::Queued, "no fifth row: it waits");
    assert_eq!(p.job(JobId(1)).unwrap().slice_share(p.rows.len()), 0.25);
}

#[test]
fn a_resumed_job_takes_a_free_row_not_the_row_a_later_running_job_holds() {
    // J1 was suspended (it holds no row now) and is resumed; J2, submitted later, runs in row 0.
    let mut resumed = gang(1, 2);
    resumed.placed = Some(vec![on(0, &[0, 1])]);
    let mut running = gang(2, 2);
    running.placed = Some(vec![on(0, &[0, 1])]);
    running.row_held = Some(0);
    let p = plan(&settings(), &shape(1, 2), &[resumed, running]);
    assert_eq!(placed(&p, 2).1, vec![0], "the running job keeps its row");
    assert_eq!(placed(&p, 1).1, vec![1], "the resumed job takes the next free one");
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

fn spanning(id: u64, tasks: u32, nodes: u32) -> PlanJob {
    PlanJob { nodes: Some(nodes), ..gang(id, tasks) }
}

fn local(id: u64, tasks: u32) -> PlanJob {
    PlanJob { mode: Mode::Local, ..gang(id, tasks) }
}

#[test]
fn a_spanning_job_runs_its_share_of_threads_on_its_most_loaded_node() {
    // Node 0 has the local job's 2 threads besides the gang's 2: 2 CPUs for 4 threads, half the slots.
    let p = plan(&settings(), &shape(2, 2), &[spanning(1, 4, 2), local(2, 2)]);
    assert_eq!(p.rows, vec![vec![JobId(1)], vec![]], "a slot of the cycle is left to the local job");
    assert_eq!(p.job(JobId(1)).unwrap().slice_share(p.rows.len()), 0.5);
    assert_eq!(p.always, vec![JobId(2)]);
    // Without the local load it runs all the time; a suspended or idle local job is no load either.
    let alone = plan(&settings(), &shape(2, 2), &[spanning(1, 4, 2)]);
    assert_eq!(alone.rows, vec![vec![JobId(1)]]);
    let quiet = PlanJob { suspended: true, ..local(2, 2) };
    assert_eq!(plan(&settings(), &shape(2, 2), &[spanning(1, 4, 2), quiet]).rows, vec![vec![JobId(1)]]);
}

#[test]
fn the_llnl_example_four_of_eight_cpus_with_twelve_other_threads_is_every_other_slice() {
    // A program on 4 CPUs of each of two 8-CPU nodes; node 0 also runs 12 other threads: 16 threads on 8 CPUs,
    // "25 percent of Ousterhout matrix entries on that computer, or four processors every other time-slice".
    let p = plan(&settings(), &shape(2, 8), &[spanning(1, 8, 2), local(2, 12)]);
    let (cpus, rows, _) = placed(&p, 1);
    assert_eq!(cpus.iter().map(|nc| nc.cpus.len()).collect::<Vec<_>>(), vec![4, 4]);
    assert_eq!((rows.len(), p.rows.len()), (1, 2));
}

#[test]
fn one_node_jobs_are_not_limited_and_the_cycle_stays_bounded() {
    // A one-node gang job beside local load keeps every slot (it fills free cells each slice).
    let p = plan(&settings(), &shape(1, 2), &[gang(1, 2), local(2, 2)]);
    assert_eq!(p.rows, vec![vec![JobId(1)]]);
    // 20 threads on a 1-CPU node would ask for 1 slot in 20: the cycle stops at 16.
    let many = PlanSettings { local_mpl: 20, ..settings() };
    let jobs: Vec<PlanJob> = std::iter::once(spanning(1, 2, 2)).chain((2..21).map(|id| local(id, 1))).collect();
    let p = plan(&many, &shape(2, 1), &jobs);
    assert!((2..21).all(|id| placed(&p, id).0 == vec![on(0, &[0])]), "the local jobs fill node 0 first");
    assert_eq!(p.rows.len(), MAX_CYCLE_SLOTS);
    assert_eq!(placed(&p, 1).1, vec![0]);
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
    /// Jobs that started keep the rows they own whatever non-express jobs arrive after them.
    #[test]
    fn started_jobs_keep_their_rows(
        before in proptest::collection::vec(arbitrary_job(), 1..8),
        after in proptest::collection::vec(arbitrary_job(), 0..8),
        nodes in 1usize..3,
    ) {
        let make = |offset: usize, specs: &[(u32, u8, bool, bool)]| -> Vec<PlanJob> {
            specs.iter().enumerate().map(|(i, &(tasks, class, local, _))| PlanJob {
                class: JobClass::ALL[1 + class as usize % 3],
                mode: if local { Mode::Local } else { Mode::Gang },
                ..gang((offset + i) as u64, tasks)
            }).collect()
        };
        let first_jobs = make(0, &before);
        let first = plan(&settings(), &shape(nodes, 2), &first_jobs);
        let mut jobs = started_as_planned(&first_jobs, &first);
        jobs.extend(make(before.len(), &after));
        let second = plan(&settings(), &shape(nodes, 2), &jobs);
        for jp in &first.jobs {
            if jp.own_row.is_some() {
                prop_assert_eq!(second.job(jp.id).unwrap().own_row, jp.own_row, "{:?} lost its row", jp.id);
            }
        }
    }

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
                ..gang(i as u64, tasks)
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
        prop_assert!(p.rows.len() <= MAX_CYCLE_SLOTS.max(settings().rows as usize), "cycle of {} slots", p.rows.len());
        for (job, jp) in jobs.iter().zip(&p.jobs) {
            if let JobStatus::Placed { cpus, rows, always } = &jp.status {
                let tasks: usize = cpus.iter().map(|nc| nc.cpus.len()).sum();
                prop_assert_eq!(tasks, job.tasks as usize);
                // A job that owns a row keeps at least that slot, whatever its share.
                let owns = job.mode == Mode::Gang && !job.idle && !job.suspended && !*always;
                if owns && job.class != JobClass::Standby {
                    prop_assert!(!rows.is_empty(), "J{} lost every slot", job.id.0);
                }
            }
        }
    }
}

proptest! {
    /// The count of taken cells per row, by which full rows are passed over, is the number of cells taken,
    /// whatever the takes and give-backs (a cell taken twice counts once; giving back a free cell is nothing).
    #[test]
    fn taken_cells_are_counted_per_row(ops in proptest::collection::vec((any::<bool>(), 0usize..3, 0u32..6), 0..60)) {
        let mut occupancy = Occupancy::new(3, 6);
        for (take, row, column) in ops {
            if take {
                occupancy.take(row, &[column]);
            } else {
                occupancy.give_back(row, &[column]);
            }
            for r in 0..3 {
                let taken = occupancy.rows[r].iter().filter(|&&t| t).count();
                prop_assert_eq!(occupancy.taken_in_row[r], taken);
                prop_assert_eq!(occupancy.may_hold(r, 6 - taken), true);
                prop_assert_eq!(occupancy.may_hold(r, 7 - taken), false);
            }
        }
    }
}

/// A gang job passes over the rows too full for its tasks and takes the first with room.
#[test]
fn full_rows_are_passed_over() {
    let jobs = [gang(1, 4), gang(2, 2), gang(3, 2), gang(4, 3)];
    let p = plan(&settings(), &shape(1, 4), &jobs);
    assert_eq!(placed(&p, 1).1, vec![0]);
    assert_eq!(placed(&p, 2).1, vec![1]);
    assert_eq!(placed(&p, 3).1, vec![1], "two cells are left in row 1, none in row 0");
    assert_eq!(placed(&p, 4), (vec![on(0, &[0, 1, 2])], vec![2], false), "rows 0 and 1 are full");
}

#[test]
fn a_suspended_job_keeps_the_row_it_owns_and_has_it_again_when_resumed() {
    let mut s = settings();
    s.rows = 2;
    let mut suspended = gang(1, 2);
    suspended.placed = Some(vec![on(0, &[0, 1])]);
    suspended.suspended = true;
    suspended.row_held = Some(1);
    let p = plan(&s, &shape(1, 2), &[suspended.clone(), gang(2, 2), gang(3, 2)]);
    assert_eq!(placed(&p, 1), (vec![on(0, &[0, 1])], vec![], false), "a suspended job runs in no slot");
    assert_eq!(p.job(JobId(1)).unwrap().own_row, Some(1));
    assert_eq!(placed(&p, 2).1, vec![0]);
    assert_eq!(p.job(JobId(3)).unwrap().status, JobStatus::Queued, "the other row is the suspended job's");
    assert_eq!(p.rows, vec![vec![JobId(2)]], "its empty row is no slot of the cycle");
    suspended.suspended = false;
    let mut two = gang(2, 2);
    two.placed = Some(vec![on(0, &[0, 1])]);
    two.row_held = Some(0);
    let p = plan(&s, &shape(1, 2), &[suspended, two, gang(3, 2)]);
    assert_eq!(p.job(JobId(1)).unwrap().slice_share(p.rows.len()), 0.5, "resumed, it has its row again");
}
