//! The choice of periodic boost (and of spin-yield's yield): walk the
//! processes of a node round-robin, starting after the running one. First
//! pass: the first process inside a receive whose message is already in its
//! endpoint. Second pass: the first process not inside a receive. Otherwise
//! nobody.

/// What the walk needs to know of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoostCandidate {
    pub id: u32,
    /// It could be put in a run queue (not blocked, not exited, not running).
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
/// starts after `after` (the running process), wrapping around, and never
/// picks `after` itself.
pub fn periodic_boost_choice(candidates: &[BoostCandidate], after: Option<u32>) -> BoostChoice {
    let n = candidates.len();
    let start = after.map_or(0, |a| candidates.iter().position(|c| c.id > a).unwrap_or(0));
    let order = (0..n).map(|k| &candidates[(start + k) % n]).filter(|c| Some(c.id) != after);
    let mut checked = 0;
    for candidate in order.clone() {
        checked += 1;
        if candidate.runnable && candidate.in_receive && candidate.message_ready {
            return BoostChoice { chosen: Some(candidate.id), endpoints_checked: checked };
        }
    }
    for candidate in order {
        checked += 1;
        if candidate.runnable && !candidate.in_receive {
            return BoostChoice { chosen: Some(candidate.id), endpoints_checked: checked };
        }
    }
    BoostChoice { chosen: None, endpoints_checked: checked }
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
        // Running 1: walk 2, 3 -> 3 has its message.
        assert_eq!(periodic_boost_choice(&procs, Some(1)), BoostChoice { chosen: Some(3), endpoints_checked: 2 });
    }

    #[test]
    fn second_pass_takes_the_first_process_outside_a_receive_after_the_running_one() {
        let procs =
            [c(1, true, false, false), c(2, true, true, false), c(5, true, false, false), c(7, false, false, false)];
        // Running 2: first pass walks 5, 7, 1 (3 checks, nothing); second pass finds 5.
        assert_eq!(periodic_boost_choice(&procs, Some(2)), BoostChoice { chosen: Some(5), endpoints_checked: 4 });
        // Running 5: the walk wraps to 1 (7 is blocked).
        assert_eq!(periodic_boost_choice(&procs, Some(5)).chosen, Some(1));
    }

    #[test]
    fn nobody_when_all_wait_or_block() {
        let procs = [c(1, true, true, false), c(2, false, false, false)];
        assert_eq!(periodic_boost_choice(&procs, Some(1)), BoostChoice { chosen: None, endpoints_checked: 2 });
        assert_eq!(periodic_boost_choice(&[], None).chosen, None);
    }
}
