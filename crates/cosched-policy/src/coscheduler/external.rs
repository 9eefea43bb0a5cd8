//! Admission decided outside the coscheduler: whenever a waiting job could start, a [`Chooser`] (a Python
//! policy through the gym interface, or any rule) is shown the queue, the matrix and the CPUs' loads, and says
//! which job starts and in which row, or that the queue waits for the next arrival or end. The coscheduler
//! places the chosen job with the planner's own code and asks again, until nothing fits or the chooser waits.
//!
//! Every choice is checked against the view it was made on ([`QueueView::check`]) before it moves anything,
//! so a driver can refuse a bad choice with a message and ask again.

use super::Standing;
use crate::cluster::{Mode, PlanJob};
use cosched_core::JobId;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// What starts now: a waiting job (in a matrix row of the chooser's, or the planner's first fit), or nothing
/// until the next change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Start { job: JobId, row: Option<u32> },
    Wait,
}

/// Decides admission from a view of the machine.
pub trait Chooser: Send {
    /// One choice, which must pass `view.check`.
    fn choose(&mut self, view: &QueueView) -> Choice;
}

/// A chooser the coscheduler and its driver share, and how many waiting jobs (from the head) it is shown.
#[derive(Clone)]
pub struct SharedChooser {
    pub chooser: Arc<Mutex<dyn Chooser>>,
    pub window: usize,
}

impl fmt::Debug for SharedChooser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedChooser")
    }
}

/// The machine as a chooser sees it at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueView {
    pub now_ns: u64,
    /// The first waiting jobs (at most the window), in submission order.
    pub waiting: Vec<WaitingJob>,
    /// Every waiting job, the window's and the rest.
    pub waiting_count: usize,
    pub running_jobs: usize,
    /// The job holding each matrix cell, row by row (gang jobs; empty cells under local scheduling).
    pub matrix: Vec<Vec<Option<JobId>>>,
    /// Processes placed on each CPU (the matrix's columns, node by node), of every placed job.
    pub processes_per_cpu: Vec<u32>,
    /// Nanoseconds waited so far, summed over every job: started jobs until their start, waiting ones until now.
    pub waited_ns_total: u128,
}

/// A waiting job and where it could start now.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitingJob {
    pub id: JobId,
    pub tasks: u32,
    pub requested_ns: Option<u64>,
    pub waited_ns: u64,
    pub fits: bool,
    /// Per matrix row, whether a gang job fits in that row now (empty for a local job).
    pub fits_in_row: Vec<bool>,
}

impl QueueView {
    /// Why `choice` cannot be made on this view, if it cannot.
    pub fn check(&self, choice: Choice) -> Result<(), String> {
        let (job, row) = match choice {
            Choice::Wait if self.running_jobs == 0 => {
                return Err("nothing runs: a queue that waits now may wait for ever; start a job".into())
            }
            Choice::Wait => return Ok(()),
            Choice::Start { job, row } => (job, row),
        };
        let Some(waiting) = self.waiting.iter().find(|w| w.id == job) else {
            return Err(format!("{job} is not among the {} waiting jobs shown", self.waiting.len()));
        };
        match row {
            None if waiting.fits => Ok(()),
            None => Err(format!("{job} does not fit now")),
            Some(_) if waiting.fits_in_row.is_empty() => Err(format!("{job} runs under local scheduling: no row")),
            Some(r) => match waiting.fits_in_row.get(r as usize) {
                Some(true) => Ok(()),
                Some(false) => Err(format!("{job} does not fit in row {r} now")),
                None => Err(format!("row {r} is beyond the matrix's {} rows", waiting.fits_in_row.len())),
            },
        }
    }
}

/// The chooser and what it is shown of the queue's past.
#[derive(Clone, Debug)]
pub(super) struct External {
    chooser: SharedChooser,
    /// By submission number, the waiting jobs' arrival.
    arrived_ns: BTreeMap<u64, u64>,
    waited_ns_started: u128,
}

impl External {
    pub(super) fn new(chooser: SharedChooser) -> External {
        assert!(chooser.window >= 1, "a chooser is shown at least one waiting job");
        External { chooser, arrived_ns: BTreeMap::new(), waited_ns_started: 0 }
    }

    pub(super) fn arrived(&mut self, number: u64, now_ns: u64) {
        self.arrived_ns.insert(number, now_ns);
    }

    /// The job `number` leaves the queue at `now_ns`, started (its wait counts) or not.
    pub(super) fn left_queue(&mut self, number: u64, now_ns: u64, started: bool) {
        let arrived_ns = self.arrived_ns.remove(&number).expect("a waiting job arrived");
        if started {
            self.waited_ns_started += u128::from(now_ns - arrived_ns);
        }
    }
}

impl Standing {
    /// Ask the chooser while a shown job fits; the jobs placed, in order.
    pub(super) fn admit_chosen(&mut self, now_ns: u64) -> Vec<JobId> {
        let mut placed = Vec::new();
        loop {
            let view = self.view(now_ns);
            if !view.waiting.iter().any(|w| w.fits) {
                return placed;
            }
            let chooser = self.external.as_ref().expect("a chooser").chooser.clone();
            let choice = chooser.chooser.lock().expect("a chooser never panics holding its lock").choose(&view);
            if let Err(why) = view.check(choice) {
                panic!("the chooser chose what its view refuses ({why}): the driver must check first");
            }
            let Choice::Start { job, row } = choice else { return placed };
            let k = self.waiting.iter().position(|(_, j)| j.id == job).expect("a shown job waits");
            let (cpus, row) = self.planner.place_new_in(&self.waiting[k].1, row).expect("checked to fit");
            let (number, job) = self.waiting.remove(k).expect("a waiting job at k");
            self.external.as_mut().expect("a chooser").left_queue(number, now_ns, true);
            placed.push(job.id);
            self.record_placed(number, job, cpus, row, now_ns);
        }
    }

    fn view(&mut self, now_ns: u64) -> QueueView {
        let external = self.external.as_ref().expect("a chooser");
        let window: Vec<(u64, PlanJob)> = self.waiting.iter().take(external.chooser.window).cloned().collect();
        let waited_ns = |number: u64| now_ns - external.arrived_ns[&number];
        let waited_ns_waiting: u128 = self.waiting.iter().map(|(n, _)| u128::from(waited_ns(*n))).sum();
        let waited_ns_total = external.waited_ns_started + waited_ns_waiting;
        let waited: Vec<u64> = window.iter().map(|(n, _)| waited_ns(*n)).collect();
        let waiting = window.into_iter().zip(waited).map(|((_, job), waited_ns)| self.where_fits(job, waited_ns));
        QueueView {
            now_ns,
            waiting: waiting.collect(),
            waiting_count: self.waiting.len(),
            running_jobs: self.placed.len(),
            matrix: self.matrix_cells(),
            processes_per_cpu: self.processes_per_cpu(),
            waited_ns_total,
        }
    }

    fn where_fits(&mut self, job: PlanJob, waited_ns: u64) -> WaitingJob {
        let rows = self.planner.matrix().rows() as u32;
        let fits_in_row: Vec<bool> = match job.mode {
            Mode::Gang => (0..rows).map(|r| self.fits_in(&job, Some(r))).collect(),
            Mode::Local => Vec::new(),
        };
        let fits = match job.mode {
            Mode::Gang => fits_in_row.contains(&true),
            Mode::Local => self.fits_in(&job, None),
        };
        WaitingJob { id: job.id, tasks: job.tasks, requested_ns: job.requested_ns, waited_ns, fits, fits_in_row }
    }

    fn fits_in(&mut self, job: &PlanJob, row: Option<u32>) -> bool {
        let Some((cpus, row)) = self.planner.place_new_in(job, row) else { return false };
        self.planner.unplace(job, &cpus, row);
        true
    }

    fn matrix_cells(&self) -> Vec<Vec<Option<JobId>>> {
        let matrix = self.planner.matrix();
        let row_cells = |r: u32| (0..matrix.columns() as u32).map(|c| matrix.cell(r, c)).collect();
        (0..matrix.rows() as u32).map(row_cells).collect()
    }

    fn processes_per_cpu(&self) -> Vec<u32> {
        let mut per_cpu = vec![0; self.planner.matrix().columns()];
        for placed in self.placed.values() {
            for column in self.planner.columns_of(&placed.cpus) {
                per_cpu[column as usize] += 1;
            }
        }
        per_cpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{Backfill, ClusterShape, PlanRules, PlanSettings};
    use crate::Coscheduler;

    /// Starts the shown job with the shortest request that fits (then the lowest row it fits in), else waits.
    struct ShortestFirst {
        views: Vec<QueueView>,
    }

    impl Chooser for ShortestFirst {
        fn choose(&mut self, view: &QueueView) -> Choice {
            self.views.push(view.clone());
            let best = view.waiting.iter().filter(|w| w.fits).min_by_key(|w| w.requested_ns);
            match best {
                Some(w) if view.running_jobs > 0 && w.tasks > 2 => Choice::Wait,
                Some(w) => Choice::Start { job: w.id, row: w.fits_in_row.iter().position(|&f| f).map(|r| r as u32) },
                None => Choice::Wait,
            }
        }
    }

    fn chosen(mode_rows: u32) -> (Coscheduler, Arc<Mutex<ShortestFirst>>) {
        let settings = PlanSettings {
            rules: PlanRules::STUDY,
            rows: mode_rows,
            local_mpl: 1,
            gang_cpu_share: 1.0,
            over_allocation: 0.0,
            backfill: Backfill::None,
        };
        let shape =
            ClusterShape { cpus_per_node: vec![2, 2], mem_bytes_per_node: vec![0, 0], accepting: vec![true; 2] };
        let chooser = Arc::new(Mutex::new(ShortestFirst { views: Vec::new() }));
        let cosched =
            Coscheduler::new(settings, shape).with_chooser(SharedChooser { chooser: chooser.clone(), window: 8 });
        (cosched, chooser)
    }

    fn job(id: u64, tasks: u32, requested_s: u64) -> PlanJob {
        PlanJob { requested_ns: Some(requested_s * 1_000_000_000), ..PlanJob::new(JobId(id), Mode::Gang, tasks) }
    }

    #[test]
    fn the_chooser_decides_who_starts_and_sees_the_queue_the_matrix_and_the_waits() {
        let (mut c, chooser) = chosen(2);
        assert_eq!(c.arrive(job(1, 4, 100), 0), vec![JobId(1)], "an empty machine: the first job starts");
        // A full row 0 and a free row 1: job 2 (3 tasks) may start in row 1, but the rule waits for jobs over 2.
        assert_eq!(c.arrive(job(2, 3, 50), 10), vec![]);
        assert_eq!(c.arrive(job(3, 2, 10), 20), vec![JobId(3)], "the shortest that fits, in row 1");
        let last = chooser.lock().unwrap().views.last().unwrap().clone();
        assert_eq!(last.waiting.iter().map(|w| w.id.0).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(last.waiting[1].fits_in_row, vec![false, true]);
        assert_eq!(last.matrix[0], vec![Some(JobId(1)); 4]);
        assert_eq!(last.processes_per_cpu, vec![1; 4]);
        assert_eq!(last.waited_ns_total, 10, "job 2 waited 10 ns, job 3 nothing yet");
    }

    #[test]
    fn a_view_refuses_what_cannot_be_done() {
        let (mut c, chooser) = chosen(1);
        c.arrive(job(1, 4, 100), 0);
        c.arrive(job(2, 1, 100), 5);
        c.finish(JobId(1), 10);
        let view = chooser.lock().unwrap().views.last().unwrap().clone();
        assert_eq!(view.running_jobs, 0);
        assert!(view.check(Choice::Wait).unwrap_err().contains("nothing runs"));
        assert!(view.check(Choice::Start { job: JobId(9), row: None }).unwrap_err().contains("not among"));
        assert!(view.check(Choice::Start { job: JobId(2), row: Some(3) }).unwrap_err().contains("beyond"));
        assert_eq!(view.check(Choice::Start { job: JobId(2), row: Some(0) }), Ok(()));
    }
}
