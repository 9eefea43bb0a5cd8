//! Per-entity load tracking (PELT) where the model uses it: the decayed runnable average of a process of a gang
//! job over EEVDF, which the thaw's wake placement weighs (`wake_affine_weight`) and whose sum over a node says
//! whether the wake may look for an idle CPU (SIS_UTIL). Kernel: kernel/sched/pelt.c, the geometric series with
//! y^32 = 1/2 over 1,024 µs periods, taken here in continuous time.

/// A load contribution halves in 32 PELT periods of 1,024 µs (`LOAD_AVG_PERIOD`).
const HALF_LIFE_NS: f64 = 32.0 * 1_024_000.0;

/// `imbalance_pct` of the CPUs sharing a cache (`sd_init`, SD_SHARE_LLC).
const LLC_IMBALANCE_PCT: f64 = 117.0;

/// A process's runnable average in [0, 1] (`se->avg.runnable_avg` / 1024), as of `at_ns`, and whether it has been
/// runnable since then. A new task starts at 1, runnable (`init_entity_runnable_average`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RunnableAverage {
    average: f64,
    at_ns: u64,
    runnable: bool,
}

impl Default for RunnableAverage {
    fn default() -> Self {
        RunnableAverage { average: 1.0, at_ns: 0, runnable: true }
    }
}

impl RunnableAverage {
    /// The average at `now_ns` (not before the last change).
    pub(crate) fn at(&self, now_ns: u64) -> f64 {
        let kept = (-(now_ns.saturating_sub(self.at_ns) as f64) / HALF_LIFE_NS).exp2();
        let gained = if self.runnable { 1.0 - kept } else { 0.0 };
        self.average * kept + gained
    }

    /// From `now_ns` on the process is runnable or not (`update_load_avg` at an enqueue or a dequeue).
    pub(crate) fn set_runnable(&mut self, now_ns: u64, runnable: bool) {
        *self = RunnableAverage { average: self.at(now_ns), at_ns: now_ns.max(self.at_ns), runnable };
    }

    /// A task starting at `now_ns`: full and runnable.
    pub(crate) fn started(now_ns: u64) -> RunnableAverage {
        RunnableAverage { at_ns: now_ns, ..RunnableAverage::default() }
    }
}

/// `update_idle_cpu_scan` (SIS_UTIL): how many CPUs of a cache domain of `cpus` CPUs a wake may scan for an idle one,
/// given the domain's mean utilization in [0, 1]. The number falls with the square of the utilization and is zero
/// from 85 % / (imbalance_pct / 100) of it; with two CPUs a wake scans only below 60 %.
pub(crate) fn idle_scan_cpus(cpus: u32, mean_utilization: f64) -> u32 {
    let x = mean_utilization.clamp(0.0, 1.0) * 1024.0;
    let squared = (x * x * LLC_IMBALANCE_PCT * LLC_IMBALANCE_PCT / (10_000.0 * 1024.0)).min(1024.0);
    ((1024.0 - squared) * cpus as f64 / 1024.0).floor() as u32
}

/// `wake_affine_weight` between the waker's CPU and the wakee's previous one, with equal capacities: the waker's
/// CPU if, with the wakee's load moved there, it is still less loaded than the previous one with a bias of half the
/// imbalance margin toward staying (WA_BIAS). Loads are the CPUs' decayed loads, the wakee's in `prev_load`.
pub(crate) fn affine_to_waker(waker_load: f64, prev_load: f64, wakee_load: f64) -> bool {
    let waker_side = (waker_load + wakee_load) * 100.0;
    let prev_side = (prev_load - wakee_load) * (100.0 + (LLC_IMBALANCE_PCT - 100.0) / 2.0);
    waker_side < prev_side
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_average_halves_in_thirty_two_periods_and_fills_as_it_halves() {
        let mut a = RunnableAverage::started(0);
        a.set_runnable(1_000, false);
        assert!((a.at(1_000 + 32_768_000) - 0.5).abs() < 1e-9);
        assert!((a.at(1_000 + 65_536_000) - 0.25).abs() < 1e-9);
        let mut b = RunnableAverage::started(0);
        b.set_runnable(0, false);
        b.set_runnable(100_000_000, true); // 2^-3.05 left: about 0.12
        let left = b.at(100_000_000);
        assert!((b.at(100_000_000 + 32_768_000) - (0.5 * left + 0.5)).abs() < 1e-9);
        assert_eq!(RunnableAverage::started(5).at(10_000_000_000), 1.0);
    }

    #[test]
    fn a_change_never_moves_the_average_back_in_time() {
        let mut a = RunnableAverage::started(10);
        a.set_runnable(5, false); // an older instant counts as the last one
        assert_eq!(a.at(10), 1.0);
        assert!(a.at(10 + 32_768_000) < 0.51);
    }

    #[test]
    fn two_busy_cpus_scan_for_no_idle_one_and_quiet_ones_scan_both() {
        assert_eq!(idle_scan_cpus(2, 1.0), 0);
        assert_eq!(idle_scan_cpus(2, 0.61), 0);
        assert_eq!(idle_scan_cpus(2, 0.60), 1);
        assert_eq!(idle_scan_cpus(2, 0.0), 2);
        assert_eq!(idle_scan_cpus(8, 0.5), 5); // 1024 - 0.342·1024 → 5.26 CPUs
        assert_eq!(idle_scan_cpus(8, 0.86), 0);
    }

    #[test]
    fn a_wake_goes_to_the_waker_only_if_its_cpu_stays_the_lighter_with_the_bias() {
        // Equal loads: moving the wakee's 0.1 makes the waker's side heavier unless the bias covers it.
        assert!(affine_to_waker(2.0, 2.0, 0.05));
        assert!(!affine_to_waker(2.0, 2.0, 0.1));
        assert!(affine_to_waker(0.0, 1.0, 0.0));
        assert!(!affine_to_waker(1.0, 1.0, 1.0));
    }
}
