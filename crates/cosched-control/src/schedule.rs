//! What an agent runs in a slice, from the schedule the controller sent it: the rule the agent's switcher
//! follows and the simulator's nodes follow too.

use crate::wire::protocol::Schedule;
use std::collections::BTreeSet;

/// The jobs a node runs in clock slice `slice` (`None`: no rows are cycling): those that always run, and the row
/// whose slot it is, less the suspended.
pub fn target_jobs(schedule: &Schedule, slice: Option<u64>) -> BTreeSet<u64> {
    let mut target: BTreeSet<u64> = schedule.always.iter().copied().collect();
    if !schedule.rows.is_empty() {
        let slot = slice.map_or(0, |s| cosched_policy::cluster::slot_for_slice(s, schedule.rows.len()));
        target.extend(schedule.rows[slot].iter().copied());
    }
    for job in &schedule.suspended {
        target.remove(job);
    }
    target
}
