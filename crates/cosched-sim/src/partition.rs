//! What one run would gain split across threads by node: the synchronisation a conservative partition needs,
//! read off the events of a sequential run (`cosched bench partition`).
//!
//! The nodes are cut into `threads` contiguous blocks, one per thread. Nodes act on each other only through
//! messages, which land at least the network's latency after they are sent: that latency is the lookahead.
//! A round starts at the earliest pending event and runs every event before start + lookahead, each thread its
//! own block's, in parallel; then all threads meet. An event that acts on the whole machine (an arrival, a gang
//! quantum, a job's end, after which the coordinator may start jobs anywhere) is a round of its own, on one
//! thread. The round's time is its busiest thread's events; the threads' meeting costs a barrier.

use crate::engine::{LoggedEvent, WHOLE_MACHINE};
use serde::Serialize;

/// The rounds a partition would run, from the events of one sequential run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PartitionRounds {
    pub threads: u32,
    pub lookahead_ns: u64,
    pub events: u64,
    /// Events that act on the whole machine (each a round of its own).
    pub whole_machine_events: u64,
    /// Rounds, each ending in a barrier.
    pub rounds: u64,
    /// The sum over rounds of the busiest thread's events: the run's length in events on `threads` threads.
    pub critical_events: u64,
}

impl PartitionRounds {
    /// The speed-up over the sequential run if each event costs `ns_per_event` wherever it runs and a barrier
    /// `barrier_ns` (0: the bound no synchronisation cost could beat).
    pub fn speedup(&self, ns_per_event: f64, barrier_ns: f64) -> f64 {
        let parallel_ns = self.critical_events as f64 * ns_per_event + self.rounds as f64 * barrier_ns;
        if parallel_ns <= 0.0 {
            return 1.0;
        }
        self.events as f64 * ns_per_event / parallel_ns
    }

    pub fn events_per_round(&self) -> f64 {
        self.events as f64 / self.rounds.max(1) as f64
    }
}

/// The rounds of a conservative partition of `nodes` into `threads` blocks with `lookahead_ns`, over `events`
/// in the order the sequential run handled them (time order).
pub fn partition_rounds(events: &[LoggedEvent], nodes: u32, threads: u32, lookahead_ns: u64) -> PartitionRounds {
    let threads = threads.max(1);
    let block = |node: u32| (node as u64 * threads as u64 / nodes.max(1) as u64) as usize;
    let mut rounds = PartitionRounds { threads, lookahead_ns, events: events.len() as u64, ..Default::default() };
    let mut per_thread = vec![0u64; threads as usize];
    let mut round_end: Option<u64> = None;
    for event in events {
        if event.node == WHOLE_MACHINE {
            if round_end.take().is_some() {
                close_round(&mut per_thread, &mut rounds);
            }
            rounds.whole_machine_events += 1;
            rounds.critical_events += 1;
            rounds.rounds += 1;
            continue;
        }
        if round_end.is_some_and(|end| event.time_ns >= end) {
            close_round(&mut per_thread, &mut rounds);
            round_end = None;
        }
        if round_end.is_none() {
            round_end = Some(event.time_ns.saturating_add(lookahead_ns));
        }
        per_thread[block(event.node).min(threads as usize - 1)] += 1;
    }
    if round_end.is_some() {
        close_round(&mut per_thread, &mut rounds);
    }
    rounds
}

/// End a round: its length is its busiest thread's events.
fn close_round(per_thread: &mut [u64], rounds: &mut PartitionRounds) {
    rounds.critical_events += per_thread.iter().copied().max().unwrap_or(0);
    rounds.rounds += 1;
    per_thread.iter_mut().for_each(|n| *n = 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(time_ns: u64, node: u32) -> LoggedEvent {
        LoggedEvent { time_ns, node }
    }

    #[test]
    fn events_within_the_lookahead_share_a_round_and_the_busiest_block_sets_its_length() {
        // Nodes 0-1 on thread 0, 2-3 on thread 1; lookahead 10.
        let events = [at(0, 0), at(3, 0), at(5, 2), at(9, 1), at(10, 3), at(25, 2)];
        let r = partition_rounds(&events, 4, 2, 10);
        // Rounds [0, 10): thread 0 three events, thread 1 one; [10, 20): one; [25, 35): one.
        assert_eq!((r.rounds, r.critical_events, r.whole_machine_events), (3, 5, 0));
        assert!((r.speedup(1.0, 0.0) - 6.0 / 5.0).abs() < 1e-12);
        assert!((r.speedup(1.0, 1.0) - 6.0 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn an_event_on_the_whole_machine_ends_the_round_and_runs_alone() {
        let events = [at(0, 0), at(1, 3), at(2, WHOLE_MACHINE), at(3, 0), at(4, 3)];
        let r = partition_rounds(&events, 4, 2, 10);
        assert_eq!((r.rounds, r.critical_events, r.whole_machine_events), (3, 3, 1));
    }

    #[test]
    fn one_thread_gains_nothing_and_pays_every_barrier() {
        let events: Vec<LoggedEvent> = (0..100).map(|i| at(i * 7, (i % 5) as u32)).collect();
        let r = partition_rounds(&events, 5, 1, 20);
        assert_eq!(r.critical_events, 100);
        assert!((r.speedup(50.0, 0.0) - 1.0).abs() < 1e-12);
        assert!(r.speedup(50.0, 100.0) < 1.0);
    }

    #[test]
    fn evenly_spread_events_in_one_long_round_halve_on_two_threads() {
        let events: Vec<LoggedEvent> = (0..1000).map(|i| at(i, (i % 8) as u32)).collect();
        let r = partition_rounds(&events, 8, 2, u64::MAX / 2);
        assert_eq!((r.rounds, r.critical_events), (1, 500));
        assert!((r.speedup(1.0, 0.0) - 2.0).abs() < 1e-12);
    }
}
