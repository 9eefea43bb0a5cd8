//! Admission for local scheduling and the dynamic coscheduling schemes: each
//! CPU holds at most MPL processes; a job goes to the least loaded CPUs.

#[derive(Clone, Debug)]
pub struct LocalPlacement {
    mpl: u32,
    processes_per_cpu: Vec<u32>,
    /// The sum of `processes_per_cpu`: an empty placement is known without a scan.
    processes: u64,
}

impl LocalPlacement {
    pub fn new(cpu_count: usize, mpl: u32) -> LocalPlacement {
        assert!(mpl >= 1, "MPL must be at least 1");
        assert!(cpu_count >= 1, "need at least one CPU");
        LocalPlacement { mpl, processes_per_cpu: vec![0; cpu_count], processes: 0 }
    }

    pub fn cpu_count(&self) -> usize {
        self.processes_per_cpu.len()
    }
    pub fn mpl(&self) -> u32 {
        self.mpl
    }
    pub fn load(&self, cpu: usize) -> u32 {
        self.processes_per_cpu[cpu]
    }

    /// `tasks` distinct CPUs that still have room, least loaded first and ties
    /// to the lowest index (our choice), returned in ascending CPU order so that
    /// neighbouring ranks land on neighbouring CPUs.
    pub fn find(&self, tasks: u32) -> Option<Vec<u32>> {
        let tasks = tasks as usize;
        let mut candidates: Vec<u32> = (0..self.processes_per_cpu.len() as u32)
            .filter(|&cpu| self.processes_per_cpu[cpu as usize] < self.mpl)
            .collect();
        if tasks == 0 || candidates.len() < tasks {
            return None;
        }
        candidates.sort_by_key(|&cpu| (self.processes_per_cpu[cpu as usize], cpu));
        candidates.truncate(tasks);
        candidates.sort_unstable();
        Some(candidates)
    }

    pub fn take(&mut self, cpus: &[u32]) {
        for &cpu in cpus {
            let load = &mut self.processes_per_cpu[cpu as usize];
            assert!(*load < self.mpl, "CPU {cpu} is already at MPL {}", self.mpl);
            *load += 1;
            self.processes += 1;
        }
    }

    /// Become a copy of `other`, reusing what is allocated.
    pub fn copy_from(&mut self, other: &LocalPlacement) {
        self.mpl = other.mpl;
        self.processes_per_cpu.clone_from(&other.processes_per_cpu);
        self.processes = other.processes;
    }

    /// How many CPUs are below the MPL.
    pub fn cpus_with_room(&self) -> usize {
        self.processes_per_cpu.iter().filter(|&&load| load < self.mpl).count()
    }

    /// Raise each CPU's load to `other`'s where that is higher.
    pub fn load_at_least(&mut self, other: &LocalPlacement) {
        if other.processes == 0 {
            return;
        }
        for (load, &other_load) in self.processes_per_cpu.iter_mut().zip(&other.processes_per_cpu) {
            self.processes += u64::from(other_load.saturating_sub(*load));
            *load = (*load).max(other_load);
        }
    }

    pub fn give_back(&mut self, cpus: &[u32]) {
        for &cpu in cpus {
            let load = &mut self.processes_per_cpu[cpu as usize];
            assert!(*load > 0, "CPU {cpu} gives back a process it does not hold");
            *load -= 1;
            self.processes -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn least_loaded_first_ties_to_lowest_index() {
        let mut local = LocalPlacement::new(4, 2);
        local.take(&[0, 1]);
        assert_eq!(local.find(2), Some(vec![2, 3]));
        assert_eq!(local.find(3), Some(vec![0, 2, 3]));
        local.take(&[2, 3]);
        local.take(&[0, 1, 2]);
        assert_eq!(local.find(2), None, "only CPU 3 has room");
        assert_eq!(local.find(1), Some(vec![3]));
    }

    proptest! {
        #[test]
        fn never_exceeds_mpl(sizes in proptest::collection::vec(1u32..6, 1..40), mpl in 1u32..4) {
            let mut local = LocalPlacement::new(5, mpl);
            let mut placed = Vec::new();
            for size in sizes {
                if let Some(cpus) = local.find(size) {
                    prop_assert_eq!(cpus.len(), size as usize);
                    let mut dedup = cpus.clone();
                    dedup.dedup();
                    prop_assert_eq!(dedup.len(), cpus.len(), "distinct CPUs");
                    local.take(&cpus);
                    placed.push(cpus);
                } else if let Some(cpus) = placed.pop() {
                    local.give_back(&cpus);
                }
                for cpu in 0..5 {
                    prop_assert!(local.load(cpu) <= mpl);
                }
            }
        }
    }
}
