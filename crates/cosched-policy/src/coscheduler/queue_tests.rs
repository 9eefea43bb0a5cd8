//! What the queue rules' tests share: a study machine of one node, jobs by CPUs and requested seconds, and a
//! driver that starts what the coscheduler places.

use crate::cluster::{Backfill, ClusterShape, Mode, PlanJob, PlanRules, PlanSettings};
use crate::Coscheduler;
use cosched_core::JobId;

/// A study machine of `cpus` CPUs on one node, `rows` matrix rows, its queue served by `backfill`.
pub(super) fn study_queue(cpus: u32, rows: u32, backfill: Backfill) -> Coscheduler {
    let settings = PlanSettings {
        rules: PlanRules::STUDY,
        rows,
        local_mpl: rows,
        gang_cpu_share: 1.0,
        over_allocation: 0.0,
        backfill,
    };
    let shape = ClusterShape { cpus_per_node: vec![cpus], mem_bytes_per_node: vec![0], accepting: vec![true] };
    Coscheduler::new(settings, shape)
}

pub(super) fn job(id: u64, tasks: u32, requested_s: u64) -> PlanJob {
    job_of(Mode::Gang, id, tasks, requested_s)
}

pub(super) fn local_job(id: u64, tasks: u32, requested_s: u64) -> PlanJob {
    job_of(Mode::Local, id, tasks, requested_s)
}

fn job_of(mode: Mode, id: u64, tasks: u32, requested_s: u64) -> PlanJob {
    PlanJob { requested_ns: Some(requested_s * NS), ..PlanJob::new(JobId(id), mode, tasks) }
}

/// Drive `c` through arrivals and ends (each `(instant s, job or end)`), starting what it places; the start
/// instant of each job.
pub(super) fn starts(c: &mut Coscheduler, events: &[(u64, Result<PlanJob, u64>)]) -> Vec<(u64, u64)> {
    let mut started = Vec::new();
    for (at_s, event) in events {
        let now_ns = at_s * 1_000_000_000;
        let placed = match event {
            Ok(job) => c.arrive(job.clone(), now_ns),
            Err(id) => c.finish(JobId(*id), now_ns),
        };
        for id in placed {
            c.started(id);
            started.push((id.0, *at_s));
        }
    }
    started.sort_unstable();
    started
}

/// A job of the property test: (arrival gap s, CPUs, requested s, run s, which is at most requested).
pub(super) type Drawn = (u64, u32, u64, u64);

/// Run `drawn` on `c` as gang jobs, each ending `run` after it starts; the start of each job. At one instant ends
/// come before arrivals, and ends and arrivals in job order.
pub(super) fn simulate(c: &mut Coscheduler, drawn: &[Drawn]) -> Vec<u64> {
    simulate_with(c, drawn, Mode::Gang, |_| {})
}

/// `simulate` with jobs of `mode`, `before_each` called on `c` before every arrival and end.
pub(super) fn simulate_with(
    c: &mut Coscheduler,
    drawn: &[Drawn],
    mode: Mode,
    mut before_each: impl FnMut(&mut Coscheduler),
) -> Vec<u64> {
    let mut events: std::collections::BTreeSet<(u64, u8, u64)> = std::collections::BTreeSet::new();
    let mut at = 0;
    for (i, &(gap, ..)) in drawn.iter().enumerate() {
        at += gap;
        events.insert((at, 1, i as u64));
    }
    let mut start = vec![u64::MAX; drawn.len()];
    while let Some((now, kind, i)) = events.pop_first() {
        before_each(c);
        let (_, tasks, requested, _) = drawn[i as usize];
        let placed = if kind == 1 {
            c.arrive(job_of(mode, i, tasks, requested), now * NS)
        } else {
            c.finish(JobId(i), now * NS)
        };
        for id in placed {
            c.started(id);
            start[id.0 as usize] = now;
            events.insert((now + drawn[id.0 as usize].3, 0, id.0));
        }
    }
    start
}

pub(super) const NS: u64 = 1_000_000_000;
