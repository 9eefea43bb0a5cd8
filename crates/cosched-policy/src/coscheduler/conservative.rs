//! Conservative backfilling over the standing planner (as Mu'alem and Feitelson state it): every waiting job, in queue
//! order, gets a reservation, the earliest instant at which it fits for the whole of its requested time beside
//! the placed jobs (each until its requested time says it ends) and the reservations made before it. A job whose
//! reservation is now starts now; so no job starts ahead of one queued before it if that would delay it.
//!
//! The resource is the planner's (a gang job's cells in one row, a local job's slots under the MPL, memory), kept
//! as a profile: the planner as it will be over each stretch between the instants something ends or a reservation
//! starts. A job fits from an instant if it fits then and the planner holding, cell by cell, what any stretch of
//! its span holds still places it: a job does not move once started, so its cells must be free throughout.
//!
//! Reservations are made anew at every arrival and end (our choice): when a job ends before its requested time,
//! the jobs behind it move forward at once, as the paper's compression does, in queue order.
//!
//! A pass's profile that started no job is kept for the next arrivals while nothing is placed or ends: a made-anew
//! pass would give the
//! earlier jobs the same reservations, so only the new jobs are reserved, and a deep queue costs one reservation
//! per arrival, not one per waiting job. At the same instant that is plain. At a later one, before the profile's
//! next stretch, only a job's reservation from now could differ, and it cannot: its span from now covers at least
//! the stretches its span from the last pass did, and where any CPUs will do and no job asks for memory, a job
//! that does not fit among fewer taken cells does not fit among more. Otherwise the profile is made anew.

use super::easy::SmallestUnfit;
use super::{Placed, Standing};
use crate::cluster::{NodeCpus, PlanJob, Planner};
use cosched_core::JobId;

/// The profile of a pass, with the reservations of the first `reserved` waiting jobs: still theirs while nothing is
/// placed or ends (see the module doc).
#[derive(Clone, Debug)]
pub(super) struct KeptProfile {
    at_ns: u64,
    changes: u64,
    reserved: usize,
    profile: Profile,
    /// Whether a fit among more taken cells implies one among fewer: any CPUs will do, no job asks for memory.
    fit_is_monotone: bool,
}

impl KeptProfile {
    /// The kept profile as a pass at `now_ns` would make it, if it may be reused then.
    fn reused_at(mut self, now_ns: u64, changes: u64) -> Option<KeptProfile> {
        if self.changes != changes || now_ns < self.at_ns {
            return None;
        }
        if now_ns > self.at_ns {
            let next_stretch_ns = self.profile.starts_ns.get(1).copied().unwrap_or(u64::MAX);
            if !self.fit_is_monotone || next_stretch_ns < now_ns {
                return None;
            }
            self.profile.starts_ns[0] = now_ns;
            self.at_ns = now_ns;
        }
        Some(self)
    }
}

impl Standing {
    /// Start the waiting jobs that conservative backfilling allows now, in queue order; the ones placed.
    pub(super) fn backfill_conservative(&mut self, now_ns: u64) -> Vec<JobId> {
        // Only a job that fits now may start, and the pass only takes: reservations are needed up to the last.
        let Some(mut last) = self.last_fitting_now() else { return Vec::new() };
        let kept = self.kept_profile.take().and_then(|kept| kept.reused_at(now_ns, self.changes));
        let (mut profile, mut k, mut fit_is_monotone) = match kept {
            Some(kept) => (kept.profile, kept.reserved, kept.fit_is_monotone),
            None => (Profile::of(self, now_ns), 0, self.planner.fit_grows_with_size()),
        };
        let mut started = Vec::new();
        while k <= last {
            let job = &self.waiting[k].1;
            fit_is_monotone &= job.mem_bytes_per_node == 0;
            match profile.reserve(job) {
                Some((0, cpus, row)) => {
                    let (number, job) = self.waiting.remove(k).expect("a waiting job at k");
                    self.planner.take_placement(&job, &cpus, row);
                    started.push(job.id);
                    self.record_placed(number, job, cpus, row, now_ns);
                    if last == k {
                        break;
                    }
                    last -= 1;
                }
                Some(_) => k += 1,
                // It fits after no stretch (a job with no estimate holds what it needs for ever): nothing behind it
                // could be said to leave it room.
                None => break,
            }
        }
        // A job started now was placed after the reservations before it were made: a pass made anew would make them
        // beside it, on other CPUs where it breaks a tie of loads, so the profile is not kept.
        if started.is_empty() {
            self.kept_profile =
                Some(KeptProfile { at_ns: now_ns, changes: self.changes, reserved: k, profile, fit_is_monotone });
        }
        started
    }

    /// The queue position of the last waiting job that fits now, if any does.
    fn last_fitting_now(&mut self) -> Option<usize> {
        let mut smallest_unfit = SmallestUnfit::default();
        let mut last = None;
        for k in 0..self.waiting.len() {
            let job = &self.waiting[k].1;
            if smallest_unfit.rules_out(job, &self.planner) {
                continue;
            }
            if self.planner.fits(job) {
                last = Some(k);
            } else {
                smallest_unfit.note(job);
            }
        }
        last
    }
}

/// The planner over time: stretch `i` runs from `starts_ns[i]` to the next start (the last for ever). Stretch 0 is
/// the planner now; only a job reserved there starts.
#[derive(Clone, Debug)]
struct Profile {
    starts_ns: Vec<u64>,
    planners: Vec<Planner>,
    /// Where a job's span is merged, kept to reuse its memory.
    throughout: Planner,
}

impl Profile {
    /// The placed jobs, each until its estimated end (one with no estimate never). A job at or past its estimate
    /// may end at any moment: from a stretch that starts now but is not now, since it still holds its cells now.
    /// (Jobs ending at one instant end one at a time, each end admitting: the others are then at their estimate.)
    fn of(standing: &Standing, now_ns: u64) -> Profile {
        let mut ends: Vec<(u64, u64)> =
            standing.placed.iter().filter_map(|(&n, p)| Some((p.estimated_end_ns(now_ns)?, n))).collect();
        ends.sort_unstable();
        let mut planner = standing.planner.clone();
        let mut profile =
            Profile { starts_ns: vec![now_ns], planners: vec![planner.clone()], throughout: planner.clone() };
        for (i, &(at_ns, number)) in ends.iter().enumerate() {
            let Placed { job, cpus, row, .. } = &standing.placed[&number];
            planner.unplace(job, cpus, *row);
            // Every job ending at the same instant has left by then.
            if ends.get(i + 1).is_none_or(|&(next_ns, _)| next_ns != at_ns) {
                profile.starts_ns.push(at_ns);
                profile.planners.push(planner.clone());
            }
        }
        profile
    }

    /// Reserve for `job` the earliest stretch from whose start it fits for its requested time (for ever without
    /// one), taking its cells in every stretch it spans; the stretch, the CPUs and the row. `None` if none.
    fn reserve(&mut self, job: &PlanJob) -> Option<(usize, Vec<NodeCpus>, Option<u32>)> {
        for first in 0..self.planners.len() {
            if !self.planners[first].may_fit(job) || !self.planners[first].fits(job) {
                continue;
            }
            // A job asking for no time still holds its cells for an instant.
            let end_ns = job.requested_ns.map(|r| self.starts_ns[first].saturating_add(r.max(1)));
            let past = self.first_stretch_from(first, end_ns);
            self.throughout.copy_from(&self.planners[first]);
            let mut may_fit = true;
            for later in &self.planners[first + 1..past] {
                self.throughout.take_also(later);
                may_fit = self.throughout.may_fit(job);
                if !may_fit {
                    break;
                }
            }
            let Some((cpus, row)) = may_fit.then(|| self.throughout.place_new(job)).flatten() else { continue };
            if let Some(end_ns) = end_ns.filter(|&e| self.starts_ns.get(past) != Some(&e)) {
                // The job's end starts a stretch of its own, as the one it falls in was before it.
                self.starts_ns.insert(past, end_ns);
                self.planners.insert(past, self.planners[past - 1].clone());
            }
            for planner in &mut self.planners[first..past] {
                planner.take_placement(job, &cpus, row);
            }
            return Some((first, cpus, row));
        }
        None
    }

    /// The first stretch after `first` that starts at or after `end_ns` (`None`: none does), or the count.
    fn first_stretch_from(&self, first: usize, end_ns: Option<u64>) -> usize {
        let Some(end_ns) = end_ns else { return self.starts_ns.len() };
        first + 1 + self.starts_ns[first + 1..].partition_point(|&s| s < end_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::super::queue_tests::{job, local_job as local, simulate, simulate_with, starts, study_queue, Drawn};
    use crate::cluster::{Backfill, Mode, PlanJob};
    use crate::Coscheduler;
    use cosched_core::JobId;

    fn conservative(cpus: u32, rows: u32) -> Coscheduler {
        study_queue(cpus, rows, Backfill::Conservative)
    }

    /// Arrivals on one row of 8 CPUs where EASY and conservative part: EASY guards only the first waiting job.
    fn arrivals() -> Vec<(u64, Result<PlanJob, u64>)> {
        vec![
            (0, Ok(job(1, 4, 10))),
            (0, Ok(job(2, 6, 10))),
            (0, Ok(job(3, 8, 10))),
            (1, Ok(job(4, 2, 30))),
            (2, Ok(job(5, 2, 5))),
        ]
    }

    /// Worked by hand, every job ending at its requested time:
    /// - 0: A (4 CPUs, 10 s) starts; B (6) waits, reserved from 10 (A's end) to 20; C (8) from 20 to 30.
    /// - 1: D (2, 30 s) fits now, but would hold 2 CPUs at 20 when C needs all 8: waits, reserved from 30.
    /// - 2: E (2, 5 s) ends at 7, before anything is reserved on its CPUs: starts.
    /// - 10: A ends, B starts; 20: B ends, C starts; 30: C ends, D starts.
    ///
    /// Under EASY, D starts at 1 (B still fits at 10 beside it) and C waits for D's end at 31.
    #[test]
    fn conservative_starts_the_hand_worked_schedule_and_easy_delays_the_second_job() {
        let mut events = arrivals();
        events.extend([(7, Err(5)), (10, Err(1)), (20, Err(2)), (30, Err(3))]);
        assert_eq!(starts(&mut conservative(8, 1), &events), vec![(1, 0), (2, 10), (3, 20), (4, 30), (5, 2)]);

        let mut events = arrivals();
        events.extend([(7, Err(5)), (10, Err(1)), (20, Err(2)), (31, Err(4))]);
        let easy = study_queue(8, 1, Backfill::Easy);
        assert_eq!(starts(&mut { easy }, &events), vec![(1, 0), (2, 10), (3, 31), (4, 1), (5, 2)]);
    }

    /// Gang scheduling: a job goes into a row's hole only if the hole stays free for its requested time. Two rows
    /// of 4 CPUs:
    /// - 0: A (3, 10 s) takes row 0, B (4, 20 s) row 1; C (4, 30 s) waits, reserved in row 0 from 10 to 40.
    /// - 1: D (1, 5 s) takes row 0's hole: it ends at 6, before C's reservation.
    /// - 2: E (1, 50 s): row 0 is C's from 10, row 1 B's until 20: reserved in row 1 from 20.
    /// - 10: A ends, C takes row 0; 20: B ends, E takes row 1.
    #[test]
    fn gang_backfilling_keeps_every_reserved_row() {
        let events = [
            (0, Ok(job(1, 3, 10))),
            (0, Ok(job(2, 4, 20))),
            (0, Ok(job(3, 4, 30))),
            (1, Ok(job(4, 1, 5))),
            (2, Ok(job(5, 1, 50))),
            (6, Err(4)),
            (10, Err(1)),
            (20, Err(2)),
        ];
        let mut c = conservative(4, 2);
        assert_eq!(starts(&mut c, &events), vec![(1, 0), (2, 0), (3, 10), (4, 1), (5, 20)]);
        let row_of = |c: &Coscheduler, id| c.placement(JobId(id)).map(|(_, rows)| rows);
        assert_eq!((row_of(&c, 3), row_of(&c, 5)), (Some(vec![0]), Some(vec![1])));
    }

    /// Local scheduling: the resource is a slot under the MPL on each CPU, held for the whole requested time. Two
    /// CPUs, MPL 2:
    /// - 0: A (2 tasks, 100 s) and B (2, 50 s) take both slots of both CPUs.
    /// - 1: C (2, 100 s) is reserved from 50 (B's end), beside A. D (1, 200 s) not from 50 (A and C fill both
    ///   CPUs until 100) but from 100, on CPU 0.
    /// - 2: E (1, 40 s) would end at 90, but A and C fill both CPUs from 50: from 100, on CPU 1.
    /// - 50: B ends, C starts; 100: A ends, D and E start.
    #[test]
    fn local_backfilling_counts_slots_under_the_mpl_over_the_whole_span() {
        let events = [
            (0, Ok(local(1, 2, 100))),
            (0, Ok(local(2, 2, 50))),
            (1, Ok(local(3, 2, 100))),
            (1, Ok(local(4, 1, 200))),
            (2, Ok(local(5, 1, 40))),
            (50, Err(2)),
            (100, Err(1)),
        ];
        assert_eq!(starts(&mut conservative(2, 2), &events), vec![(1, 0), (2, 0), (3, 50), (4, 100), (5, 100)]);
    }

    /// A pass that starts a job behind a reserved one keeps no profile: made anew, the reservation is made beside
    /// the started job, on other CPUs where that job breaks a tie of loads. Four CPUs, MPL 2, local jobs
    /// (found by a review's random search):
    /// - at 2, F's arrival reserves E (3 tasks) from 3 and starts F; G (1 task, 2 s) arrives at the same instant.
    ///   With the pass's profile kept, E's reservation leaves G no CPU until 3; made anew, G starts at 2.
    #[test]
    fn a_pass_that_starts_a_job_keeps_no_profile() {
        let events = [
            (0, Ok(local(1, 4, 1))),
            (0, Ok(local(2, 3, 3))),
            (0, Ok(local(3, 2, 1))),
            (1, Err(1)),
            (1, Ok(local(4, 2, 3))),
            (1, Ok(local(5, 3, 1))),
            (2, Err(3)),
            (2, Ok(local(6, 2, 2))),
            (2, Ok(local(7, 1, 2))),
        ];
        let started = starts(&mut conservative(4, 2), &events);
        assert!(started.contains(&(6, 2)) && started.contains(&(7, 2)), "{started:?}");
    }

    /// Conservative backfilling as the paper states it, written apart from the planner over explicit CPUs (a job
    /// takes the lowest CPUs free for its whole requested time): every waiting job in order reserved at the
    /// earliest of now and the ends of what runs or is reserved.
    fn textbook_conservative(drawn: &[Drawn], cpus: u32) -> Vec<u64> {
        let mut events: std::collections::BTreeSet<(u64, u8, usize)> = std::collections::BTreeSet::new();
        let mut at = 0;
        for (i, &(gap, ..)) in drawn.iter().enumerate() {
            at += gap;
            events.insert((at, 1, i));
        }
        let (mut queue, mut running) = (Vec::<usize>::new(), Vec::<(usize, u64)>::new());
        let mut start = vec![u64::MAX; drawn.len()];
        while let Some((now, kind, i)) = events.pop_first() {
            if kind == 1 {
                queue.push(i);
            } else {
                running.retain(|&(r, _)| r != i);
            }
            // Held CPUs over time: (from, until, CPUs as bits). A job at its estimate has left by the instant now,
            // but it holds its CPUs at the start of "now" itself (`None`), the only instant a job starts at.
            let running_now = running.iter().fold(0, |m, r| m | r.1);
            let mut held: Vec<(u64, u64, u64)> =
                running.iter().map(|&(r, mask)| (now, (start[r] + drawn[r].2).max(now), mask)).collect();
            let mut k = 0;
            while k < queue.len() {
                let j = queue[k];
                let (tasks, requested) = (drawn[j].1, drawn[j].2.max(1));
                let mut instants: Vec<u64> = held.iter().map(|h| h.1).collect();
                instants.sort_unstable();
                instants.dedup();
                let (from, mask) = [None]
                    .into_iter()
                    .chain(instants.into_iter().map(Some))
                    .find_map(|instant| {
                        let t = instant.unwrap_or(now);
                        let spanned = held.iter().filter(|h| h.0 < t + requested && h.1 > t).fold(0, |m, h| m | h.2);
                        let taken = if instant.is_none() { spanned | running_now } else { spanned };
                        let free: Vec<u32> = (0..cpus).filter(|c| taken & (1 << c) == 0).take(tasks as usize).collect();
                        (free.len() == tasks as usize).then(|| (instant, free.iter().fold(0u64, |m, c| m | (1 << c))))
                    })
                    .expect("every job fits once all before it end");
                let from_s = from.unwrap_or(now);
                held.push((from_s, from_s + requested, mask));
                if from.is_none() {
                    queue.remove(k);
                    running.push((j, mask));
                    start[j] = now;
                    events.insert((now + drawn[j].3, 0, j));
                } else {
                    k += 1;
                }
            }
        }
        start
    }

    /// `simulate` with jobs of `mode`; with `forget`, every pass is made anew (the kept profile dropped first).
    fn simulate_mode(c: &mut Coscheduler, drawn: &[Drawn], mode: Mode, forget: bool) -> Vec<u64> {
        simulate_with(c, drawn, mode, |c| {
            if let (true, crate::coscheduler::Book::Standing(standing)) = (forget, &mut c.book) {
                standing.kept_profile = None;
            }
        })
    }

    proptest::proptest! {
        /// On one row (space sharing), the planner's conservative backfilling starts every job when the textbook's
        /// does.
        #[test]
        fn conservative_on_one_row_starts_every_job_when_the_textbook_rule_does(
            drawn in proptest::collection::vec((0u64..4, 1u32..=8, 1u64..20, 0u64..20), 1..40),
        ) {
            let drawn: Vec<Drawn> = drawn.into_iter().map(|(gap, tasks, req, run)| (gap, tasks, req, 1 + run % req)).collect();
            proptest::prop_assert_eq!(simulate(&mut conservative(8, 1), &drawn), textbook_conservative(&drawn, 8));
        }

        /// Keeping a pass's profile for later arrivals changes no start: local jobs (ties of loads) and gang jobs
        /// in two rows, against every pass made anew.
        #[test]
        fn a_kept_profile_starts_every_job_when_a_pass_made_anew_does(
            drawn in proptest::collection::vec((0u64..3, 1u32..=4, 1u64..6, 0u64..6), 1..30),
            local in proptest::bool::ANY,
        ) {
            let drawn: Vec<Drawn> = drawn.into_iter().map(|(gap, tasks, req, run)| (gap, tasks, req, 1 + run % (2 * req))).collect();
            let mode = if local { Mode::Local } else { Mode::Gang };
            let kept = simulate_mode(&mut conservative(4, 2), &drawn, mode, false);
            proptest::prop_assert_eq!(kept, simulate_mode(&mut conservative(4, 2), &drawn, mode, true));
        }
    }
}
