//! How far apart the agents' slice switches start: the start offsets (slice boundary to switch start) of several
//! agents, paired by slice number. Agents align slices to CLOCK_REALTIME, so on one host (or hosts whose clocks
//! agree) the spread of the offsets of one slice is the skew between the nodes' switches; across hosts the clocks'
//! own disagreement comes on top.

use std::collections::BTreeMap;

pub use crate::wire::protocol::Summary;

pub fn summarize<'a>(samples: impl IntoIterator<Item = &'a u64>) -> Summary {
    let mut sorted: Vec<u64> = samples.into_iter().copied().collect();
    sorted.sort_unstable();
    let Some(&max_ns) = sorted.last() else { return Summary::default() };
    let rank = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    Summary { count: sorted.len(), p50_ns: rank(0.50), p99_ns: rank(0.99), max_ns }
}

#[derive(Clone, Copy, Debug)]
struct SliceStarts {
    earliest_ns: u64,
    latest_ns: u64,
    agents: u32,
}

/// The latest `slices_kept` slices' start offsets, from any number of agents.
#[derive(Debug)]
pub struct SliceStartSkew {
    slices: BTreeMap<u64, SliceStarts>,
    slices_kept: usize,
    /// The spread of every complete slice that left the window, since the start (for `/metrics`): by then every
    /// agent has long reported it.
    spreads_seen: crate::controller::metrics::Histogram,
}

impl SliceStartSkew {
    pub fn new(slices_kept: usize) -> SliceStartSkew {
        assert!(slices_kept > 0);
        SliceStartSkew { slices: BTreeMap::new(), slices_kept, spreads_seen: Default::default() }
    }

    /// One agent switched at `offset_ns` after the boundary of `slice` (each agent reports a slice once).
    pub fn add(&mut self, slice: u64, offset_ns: u64) {
        let entry =
            self.slices.entry(slice).or_insert(SliceStarts { earliest_ns: offset_ns, latest_ns: offset_ns, agents: 0 });
        entry.earliest_ns = entry.earliest_ns.min(offset_ns);
        entry.latest_ns = entry.latest_ns.max(offset_ns);
        entry.agents += 1;
        if self.slices.len() <= self.slices_kept {
            return;
        }
        // One scan per slice that leaves (a slice arrives per report of each agent, not per entry of a long one).
        let all = self.most_agents();
        while self.slices.len() > self.slices_kept {
            if let Some((_, gone)) = self.slices.pop_first().filter(|(_, s)| s.agents >= 2 && s.agents >= all) {
                self.spreads_seen.observe(gone.latest_ns - gone.earliest_ns);
            }
        }
    }

    fn most_agents(&self) -> u32 {
        self.slices.values().map(|s| s.agents).max().unwrap_or(0)
    }

    /// The spreads of the complete slices that have left the window.
    pub fn spreads_seen(&self) -> &crate::controller::metrics::Histogram {
        &self.spreads_seen
    }

    /// Latest minus earliest start of every slice that all agents switched at (as many as the most seen in any
    /// kept slice, at least two): a slice still missing an agent's report would understate the spread.
    pub fn spreads_ns(&self) -> Vec<u64> {
        let all = self.most_agents();
        if all < 2 {
            return vec![];
        }
        self.slices.values().filter(|s| s.agents == all).map(|s| s.latest_ns - s.earliest_ns).collect()
    }

    pub fn summary(&self) -> Summary {
        summarize(&self.spreads_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = summarize(&(1..=100).collect::<Vec<u64>>());
        assert_eq!((s.count, s.p50_ns, s.p99_ns, s.max_ns), (100, 50, 99, 100));
        assert_eq!(summarize(&[] as &[u64]), Summary::default());
        assert_eq!(summarize(&[7]).p99_ns, 7);
    }

    #[test]
    fn spreads_pair_slices_and_skip_incomplete_ones() {
        let mut skew = SliceStartSkew::new(3);
        for (slice, offset) in [(10, 5), (10, 30), (10, 20), (11, 7), (11, 9), (12, 1), (12, 4), (12, 100)] {
            skew.add(slice, offset);
        }
        // Slice 11 lacks the third agent; 10 and 12 are complete.
        assert_eq!(skew.spreads_ns(), vec![25, 99]);
        skew.add(13, 0); // slice 10 falls out of the window, into the histogram
        assert_eq!(skew.spreads_ns(), vec![99]);
        assert_eq!(skew.spreads_seen().count(), 1);
        skew.add(14, 0); // slice 11 leaves incomplete: not counted
        assert_eq!(skew.spreads_seen().count(), 1);
        let mut one = SliceStartSkew::new(10);
        one.add(1, 5);
        assert!(one.spreads_ns().is_empty(), "one agent has no skew");
    }
}
