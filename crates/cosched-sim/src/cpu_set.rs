//! A set of the machine's CPUs kept as sorted ranges: a job's CPUs are mostly
//! consecutive, so its record holds a few pairs rather than one entry per CPU.

use serde::{Serialize, Serializer};
use std::fmt;

/// CPUs by machine-wide index (node × CPUs per node + CPU within the node),
/// as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet {
    ranges: Vec<CpuRange>,
}

/// The CPUs `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuRange {
    pub first: u32,
    pub last: u32,
}

impl CpuRange {
    pub fn cpu_count(self) -> usize {
        (self.last - self.first) as usize + 1
    }
}

impl CpuSet {
    /// The set of `cpus`, in any order, repeats counted once.
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> CpuSet {
        let mut sorted: Vec<u32> = cpus.into_iter().collect();
        sorted.sort_unstable();
        let mut ranges: Vec<CpuRange> = Vec::new();
        for cpu in sorted {
            match ranges.last_mut() {
                Some(range) if cpu <= range.last.saturating_add(1) => range.last = cpu,
                _ => ranges.push(CpuRange { first: cpu, last: cpu }),
            }
        }
        CpuSet { ranges }
    }

    pub fn ranges(&self) -> &[CpuRange] {
        &self.ranges
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.ranges.iter().map(|r| r.cpu_count()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Every CPU, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|r| r.first..=r.last)
    }
}

/// Batsim's canonical interval-set string (`0-3 8 10-11`), which evalys and
/// procset parse; the empty set is the empty string.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            match range.cpu_count() {
                1 => write!(f, "{}", range.first)?,
                _ => write!(f, "{}-{}", range.first, range.last)?,
            }
        }
        Ok(())
    }
}

/// As its interval-set string: what a reader of JSON would want of it.
impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_in_any_order_become_sorted_merged_ranges() {
        let set = CpuSet::from_cpus([11, 2, 0, 8, 3, 1, 10, 2]);
        assert_eq!(
            set.ranges(),
            [CpuRange { first: 0, last: 3 }, CpuRange { first: 8, last: 8 }, CpuRange { first: 10, last: 11 }]
        );
        assert_eq!(set.len(), 7);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(set.to_string(), "0-3 8 10-11");
    }

    #[test]
    fn the_empty_set_and_the_last_index() {
        let empty = CpuSet::from_cpus([]);
        assert!(empty.is_empty() && empty.iter().next().is_none() && empty.to_string().is_empty());
        assert_eq!(CpuSet::from_cpus([u32::MAX, u32::MAX - 1]).to_string(), format!("{}-{}", u32::MAX - 1, u32::MAX));
    }

    #[test]
    fn it_serializes_as_its_interval_string() {
        assert_eq!(serde_json::to_string(&CpuSet::from_cpus([4, 5, 7])).unwrap(), "\"4-5 7\"");
    }
}
