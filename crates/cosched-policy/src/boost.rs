//! The choice of periodic boost (and of spin-yield's yield): walk the
//! processes of a node round-robin, starting with the running one (the
//! study: "in round-robin fashion starting with the current process"). First
//! pass: the first process inside a receive whose message is already in its
//! endpoint. Second pass: the first process not inside a receive. Otherwise
//! nobody. A walk that finds the running process itself changes nothing.
//!
//! Cost (our choice): the walk looks into the endpoint of each process it
//! passes that is inside a receive; whether a process is inside a receive is
//! a flag it reads for free, so the second pass checks no endpoint.

/// What the walk needs to know of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoostCandidate {
    pub id: u32,
    /// It runs or could run: not blocked, not exited.
    pub runnable: bool,
    pub in_receive: bool,
    /// Its receive could complete now: every awaited message is in its endpoint.
    pub message_ready: bool,
}

/// The outcome: whom to boost (if anyone) and how many endpoints were checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoostChoice {
    pub chosen: Option<u32>,
    pub endpoints_checked: u32,
}

/// `candidates` in the node's round-robin order (ascending id); the walk
/// starts with `start_with` (the running process), or with the first
/// process after it if it has left, wrapping around. The chosen process may
/// be `start_with` itself: then nothing is to be done.
pub fn periodic_boost_choice(candidates: &[BoostCandidate], start_with: Option<u32>) -> BoostChoice {
    let start = start_with.map_or(0, |s| candidates.iter().position(|c| c.id >= s).unwrap_or(0));
    // From `start` round to the one before it (no division per step: the
    // kernel walks every CPU's processes at every tick).
    let (before, from_start) = candidates.split_at(start);
    let order = from_start.iter().chain(before);
    let mut checked = 0;
    for candidate in order.clone().filter(|c| c.in_receive) {
        checked += 1;
        if candidate.runnable && candidate.message_ready {
            return BoostChoice { chosen: Some(candidate.id), endpoints_checked: checked };
        }
    }
    let chosen = order.clone().find(|c| c.runnable && !c.in_receive).map(|c| c.id);
    BoostChoice { chosen, endpoints_checked: checked }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u32, runnable: bool, in_receive: bool, message_ready: bool) -> BoostCandidate {
        BoostCandidate { id, runnable, in_receive, message_ready }
    }

    #[test]
    fn first_pass_prefers_a_receive_that_can_complete() {
        let procs =
            [c(1, true, false, false), c(2, true, true, false), c(3, true, true, true), c(4, true, false, false)];
        // Running 1 (computing): the walk looks into 2's endpoint, then 3's, which has its message.
        assert_eq!(periodic_boost_choice(&procs, Some(1)), BoostChoice { chosen: Some(3), endpoints_checked: 2 });
    }

    #[test]
    fn second_pass_takes_the_first_process_outside_a_receive_from_the_running_one() {
        let procs =
            [c(1, true, false, false), c(2, true, true, false), c(5, true, false, false), c(7, false, false, false)];
        // Running 2, spinning: the first pass checks only 2's endpoint; the second finds 5.
        assert_eq!(periodic_boost_choice(&procs, Some(2)), BoostChoice { chosen: Some(5), endpoints_checked: 1 });
        // Running 5, computing: the walk finds 5 itself, so nothing changes.
        assert_eq!(periodic_boost_choice(&procs, Some(5)).chosen, Some(5));
        // Running 7 has just blocked: the walk starts with it and wraps to 1.
        assert_eq!(periodic_boost_choice(&procs, Some(7)).chosen, Some(1));
        // The running process has left: the walk starts with the next one.
        assert_eq!(periodic_boost_choice(&procs, Some(6)).chosen, Some(1));
    }

    #[test]
    fn nobody_when_all_wait_or_block() {
        let procs = [c(1, true, true, false), c(2, false, false, false)];
        assert_eq!(periodic_boost_choice(&procs, Some(1)), BoostChoice { chosen: None, endpoints_checked: 1 });
        assert_eq!(periodic_boost_choice(&[], None).chosen, None);
    }
}
