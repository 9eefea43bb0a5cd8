//! EASY backfilling over the standing planner (Lifka's rule as Mu'alem and Feitelson state it): the first
//! waiting job gets a reservation, the earliest instant at which it fits if every placed job ends when its
//! requested time says; a later job starts now if it fits now and either ends (by its own request) before that
//! instant or leaves the first job still fitting then.
//!
//! The resource is the planner's, not a count of processors: a gang job needs its cells free in one row of
//! the matrix, a local job a slot under the MPL on each CPU, so a backfilled gang job goes into a row's hole
//! (Slurm's gang scheduling with backfilling). "Fits at the reservation" is asked of the planner as it will be
//! then: the placed jobs still running, the backfilled ones that end later at the cells they took.

use super::{Placed, Standing};
use crate::cluster::{Mode, PlanJob, Planner};
use cosched_core::JobId;

impl Standing {
    /// Start the waiting jobs behind the first that EASY allows, in queue order; the ones placed.
    pub(super) fn backfill_easy(&mut self, now_ns: u64) -> Vec<JobId> {
        let first = self.waiting.front().expect("a waiting job").1.clone();
        // Built when a job first fits now: most passes over a saturated queue place nothing.
        let mut reservation: Option<Option<Reservation>> = None;
        let mut smallest_unfit = SmallestUnfit::default();
        let mut started = Vec::new();
        let mut k = 1;
        while k < self.waiting.len() {
            let job = &self.waiting[k].1;
            if smallest_unfit.rules_out(job, &self.planner) {
                k += 1;
                continue;
            }
            // The reservation is made of the planner before this job takes anything.
            if reservation.is_none() && self.planner.fits(job) {
                reservation = Some(self.reservation(&first, now_ns));
            }
            let placed = reservation.is_some().then(|| self.planner.place_new(job)).flatten();
            let Some((cpus, row)) = placed else {
                smallest_unfit.note(job);
                k += 1;
                continue;
            };
            let Some(reservation) = reservation.as_mut().expect("made above") else {
                // The first job waits for a job with no estimate: nothing may be said to leave it room.
                self.planner.unplace(job, &cpus, row);
                return started;
            };
            if reservation.admits(job, &cpus, row, &first, now_ns) {
                let (number, job) = self.waiting.remove(k).expect("a waiting job at k");
                started.push(job.id);
                self.record_placed(number, job, cpus, row, now_ns);
            } else {
                self.planner.unplace(job, &cpus, row);
                k += 1;
            }
        }
        started
    }

    /// When `first` can start if every placed job ends at its estimate, and the planner as it will be then;
    /// `None` when it fits only after a job that has no estimate.
    fn reservation(&self, first: &PlanJob, now_ns: u64) -> Option<Reservation> {
        let mut ends: Vec<(u64, u64)> =
            self.placed.iter().filter_map(|(&n, p)| Some((p.estimated_end_ns(now_ns)?, n))).collect();
        ends.sort_unstable();
        let mut then = self.planner.clone();
        let mut i = 0;
        while i < ends.len() {
            let at_ns = ends[i].0;
            // Every job ending at the same instant has left by then.
            while i < ends.len() && ends[i].0 == at_ns {
                let Placed { job, cpus, row, .. } = &self.placed[&ends[i].1];
                then.unplace(job, cpus, *row);
                i += 1;
            }
            if then.fits(first) {
                return Some(Reservation { at_ns, then });
            }
        }
        None
    }
}

/// The first waiting job's reservation: its instant and the planner as it will be then.
struct Reservation {
    at_ns: u64,
    then: Planner,
}

impl Reservation {
    /// Whether `job`, placed now at `cpus` and `row`, leaves `first` its reservation: it ends before it, or
    /// `first` still fits then beside it (and it is then counted there).
    fn admits(
        &mut self,
        job: &PlanJob,
        cpus: &[crate::cluster::NodeCpus],
        row: Option<u32>,
        first: &PlanJob,
        now_ns: u64,
    ) -> bool {
        if job.requested_ns.is_some_and(|r| now_ns.saturating_add(r) <= self.at_ns) {
            return true;
        }
        self.then.take_placement(job, cpus, row);
        let fits = self.then.fits(first);
        if !fits {
            self.then.unplace(job, cpus, row);
        }
        fits
    }
}

/// The fewest tasks, per mode, of a job that did not fit now in this pass: a larger job of the same mode does
/// not fit either, while nothing is given back (the pass only takes), when any CPUs of the machine will do.
#[derive(Default)]
pub(super) struct SmallestUnfit {
    gang: Option<u32>,
    local: Option<u32>,
}

impl SmallestUnfit {
    fn slot(&mut self, mode: Mode) -> &mut Option<u32> {
        match mode {
            Mode::Gang => &mut self.gang,
            Mode::Local => &mut self.local,
        }
    }

    /// Memory is chosen after the CPUs, so a job asking for memory may fail where a larger one asking none fits:
    /// only jobs asking for none are noted or ruled out.
    pub(super) fn note(&mut self, job: &PlanJob) {
        if job.mem_bytes_per_node > 0 || job.tasks == 0 {
            return;
        }
        let slot = self.slot(job.mode);
        *slot = Some(slot.map_or(job.tasks, |t| t.min(job.tasks)));
    }

    pub(super) fn rules_out(&mut self, job: &PlanJob, planner: &Planner) -> bool {
        planner.fit_grows_with_size()
            && job.mem_bytes_per_node == 0
            && self.slot(job.mode).is_some_and(|t| job.tasks >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::queue_tests::{job, local_job as local, simulate, starts, study_queue, Drawn};
    use crate::cluster::{Backfill, NodeCpus};
    use crate::Coscheduler;
    use cosched_core::JobId;

    /// A study machine of `cpus` CPUs on one node, `rows` matrix rows, EASY.
    fn easy(cpus: u32, rows: u32) -> Coscheduler {
        study_queue(cpus, rows, Backfill::Easy)
    }

    /// The same machine, its queue strict FCFS.
    fn fcfs(cpus: u32, rows: u32) -> Coscheduler {
        study_queue(cpus, rows, Backfill::None)
    }

    /// Worked by hand, one row of 8 CPUs (space sharing), every job ending at its requested time:
    /// - 0: A (4, 10 s) starts; B (6) waits, its reservation at 10 when A ends, with 2 CPUs to spare then.
    /// - 1: C (2, 20 s) ends after 10 but takes only the spare CPUs: starts.
    /// - 2: D (2, 5 s) ends at 7, before the reservation: starts.
    /// - 3: E (1, 3 s): no CPU free; waits.
    /// - 7: D ends; E would end at 10, by the reservation: starts.
    /// - 8: F (1, 5 s) fits, but would hold at 10 a CPU B needs (C 2 + F 1 leave 5): waits.
    /// - 10: A and E end; B starts (C holds 2). F waits for 1 CPU: B and C hold all 8.
    /// - 20: B ends; F starts.
    #[test]
    fn easy_starts_the_hand_worked_schedule() {
        let mut c = easy(8, 1);
        let events = [
            (0, Ok(job(1, 4, 10))),
            (0, Ok(job(2, 6, 10))),
            (1, Ok(job(3, 2, 20))),
            (2, Ok(job(4, 2, 5))),
            (3, Ok(job(5, 1, 3))),
            (7, Err(4)),
            (8, Ok(job(6, 1, 5))),
            (10, Err(1)),
            (10, Err(5)),
            (20, Err(2)),
        ];
        assert_eq!(starts(&mut c, &events), vec![(1, 0), (2, 10), (3, 1), (4, 2), (5, 7), (6, 20)]);
    }

    /// Without backfilling the same arrivals wait behind B.
    #[test]
    fn the_same_arrivals_under_strict_fcfs_wait_behind_the_first() {
        let mut c = fcfs(8, 1);
        let events = [
            (0, Ok(job(1, 4, 10))),
            (0, Ok(job(2, 6, 10))),
            (1, Ok(job(3, 2, 20))),
            (2, Ok(job(4, 2, 5))),
            (10, Err(1)),
        ];
        assert_eq!(starts(&mut c, &events), vec![(1, 0), (2, 10), (3, 10)], "D waits: 8 CPUs, B 6 and C 2");
    }

    /// Gang scheduling with backfilling: a job goes into a hole of a matrix row, and one that would keep the first
    /// waiting job out of every row at its reservation waits. Two rows of 4 CPUs:
    /// - 0: A (3, 10 s) takes row 0, B (4, 20 s) row 1; C (4) waits, its reservation at 10 (A's row).
    /// - 1: D (1, 5 s) goes into row 0's hole: it ends at 6, before 10.
    /// - 2: E (1, 50 s): no hole (D holds row 0's).
    /// - 6: D ends; E fits in row 0 but would leave it 3 CPUs at 10: waits.
    /// - 10: A ends; C takes row 0; E waits for a hole.
    #[test]
    fn gang_backfilling_fills_a_rows_hole_and_keeps_the_reserved_row() {
        let mut c = easy(4, 2);
        let events = [
            (0, Ok(job(1, 3, 10))),
            (0, Ok(job(2, 4, 20))),
            (0, Ok(job(3, 4, 30))),
            (1, Ok(job(4, 1, 5))),
            (2, Ok(job(5, 1, 50))),
            (6, Err(4)),
            (10, Err(1)),
        ];
        assert_eq!(starts(&mut c, &events), vec![(1, 0), (2, 0), (3, 10), (4, 1)]);
        let row_of = |c: &Coscheduler, id| c.placement(JobId(id)).map(|(_, rows)| rows);
        assert_eq!(row_of(&c, 3), Some(vec![0]), "C in the row A left");
        assert_eq!(c.placement(JobId(5)), None, "E waits: both rows are full");
        let _ = NodeCpus { node: 0, cpus: vec![] };
    }

    /// Local scheduling with backfilling: the resource is a slot under the MPL on each CPU, not a CPU. Two CPUs,
    /// MPL 2 (each CPU holds two processes):
    /// - 0: A (2 tasks, 100 s) takes a slot on each CPU; 1: B (1, 100 s) the second slot of CPU 0.
    /// - 2: C (2) needs a slot on two CPUs: only CPU 1 has one; waits, its reservation at 100 (A's end).
    /// - 3: D (1, 200 s) fits on CPU 1 and ends long after 100, but at 100 B and D hold one slot each, which
    ///   leaves C a slot on both CPUs: starts (a processor count would have held it back).
    /// - 4: E (1, 10 s): no slot free; waits.
    /// - 100: A ends; C starts. 101: B ends; E starts.
    #[test]
    fn local_backfilling_counts_slots_under_the_mpl() {
        let events = [
            (0, Ok(local(1, 2, 100))),
            (1, Ok(local(2, 1, 100))),
            (2, Ok(local(3, 2, 100))),
            (3, Ok(local(4, 1, 200))),
            (4, Ok(local(5, 1, 10))),
            (100, Err(1)),
            (101, Err(2)),
        ];
        assert_eq!(starts(&mut easy(2, 2), &events), vec![(1, 0), (2, 1), (3, 100), (4, 3), (5, 101)]);
        assert_eq!(starts(&mut fcfs(2, 2), &events[..6]), vec![(1, 0), (2, 1), (3, 100), (4, 100)], "D waits behind C");
    }

    /// EASY as the textbook counts it, written apart from the planner: free processors now, and at the first
    /// waiting job's reservation the processors to spare.
    fn textbook_easy(drawn: &[Drawn], cpus: u32) -> Vec<u64> {
        let mut events: std::collections::BTreeSet<(u64, u8, usize)> = std::collections::BTreeSet::new();
        let mut at = 0;
        for (i, &(gap, ..)) in drawn.iter().enumerate() {
            at += gap;
            events.insert((at, 1, i));
        }
        let (mut free, mut queue, mut running) = (cpus, std::collections::VecDeque::new(), Vec::<usize>::new());
        let mut start = vec![u64::MAX; drawn.len()];
        while let Some((now, kind, i)) = events.pop_first() {
            if kind == 1 {
                queue.push_back(i);
            } else {
                running.retain(|&r| r != i);
                free += drawn[i].1;
            }
            while let Some(&head) = queue.front() {
                if drawn[head].1 > free {
                    break;
                }
                queue.pop_front();
                free -= drawn[head].1;
                running.push(head);
                start[head] = now;
                events.insert((now + drawn[head].3, 0, head));
            }
            let Some(&head) = queue.front() else { continue };
            let mut ends: Vec<(u64, u32)> =
                running.iter().map(|&r| ((start[r] + drawn[r].2).max(now), drawn[r].1)).collect();
            ends.sort_unstable();
            let (mut spare_then, mut shadow) = (free, None);
            for (end, tasks) in ends {
                spare_then += tasks;
                if spare_then >= drawn[head].1 && shadow.is_none_or(|s| s == end) {
                    shadow = Some(end);
                }
            }
            let Some(shadow) = shadow else { continue };
            // Processors free at the reservation beyond the first job's: every job ending by then has left.
            let ended_by: u32 =
                running.iter().filter(|&&r| (start[r] + drawn[r].2).max(now) <= shadow).map(|&r| drawn[r].1).sum();
            let mut extra = free + ended_by - drawn[head].1;
            let mut k = 1;
            while k < queue.len() {
                let j = queue[k];
                let ends_before = now + drawn[j].2 <= shadow;
                if drawn[j].1 <= free && (ends_before || drawn[j].1 <= extra) {
                    if !ends_before {
                        extra -= drawn[j].1;
                    }
                    queue.remove(k);
                    free -= drawn[j].1;
                    running.push(j);
                    start[j] = now;
                    events.insert((now + drawn[j].3, 0, j));
                } else {
                    k += 1;
                }
            }
        }
        start
    }

    proptest::proptest! {
        /// On one row (space sharing), the planner's EASY starts every job when the textbook's does.
        #[test]
        fn easy_on_one_row_starts_every_job_when_the_textbook_rule_does(
            drawn in proptest::collection::vec((0u64..4, 1u32..=8, 1u64..20, 0u64..20), 1..40),
        ) {
            let drawn: Vec<Drawn> = drawn.into_iter().map(|(gap, tasks, req, run)| (gap, tasks, req, 1 + run % req)).collect();
            let mut c = easy(8, 1);
            proptest::prop_assert_eq!(simulate(&mut c, &drawn), textbook_easy(&drawn, 8));
        }
    }
}
