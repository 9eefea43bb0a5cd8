//! The cache refill a job pays when the gang switch gives its CPU back: the
//! time to read its data again after another job's data replaced it in the
//! caches. Measured on one CPU: a warm pass over a buffer of the CPU's cache
//! share, then a pass over a larger buffer (the other job), then the first
//! buffer again; the refill is the cold pass less the warm one. A property of
//! the machine (cache sizes and memory bandwidth), never of a slowdown.

use crate::os;
use serde::Serialize;
use std::hint::black_box;
use std::path::Path;

/// A CPU's cache share, at most (256 MiB, above any CPU's share today): it bounds the buffers
/// allocated, four times this.
pub const MAX_CACHE_BYTES: u64 = 256 << 20;
/// The other job's data: this many times the cache share, so that none of the first buffer survives.
const POLLUTION_FACTOR: u64 = 3;
const LINE_BYTES: usize = 64;
/// A cache level sysfs lists for a CPU, at most (sizes and sharing are read per level).
const MAX_LEVELS: usize = 16;

/// One cache of a CPU, as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheLevel {
    pub level: u32,
    /// "Data" or "Unified" (instruction caches are not counted).
    pub kind: String,
    pub size_bytes: u64,
    /// CPUs that share it.
    pub shared_by: u32,
}

impl CacheLevel {
    /// What one CPU may fill of it alone.
    pub fn share_bytes(&self) -> u64 {
        self.size_bytes / self.shared_by.max(1) as u64
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CacheRefillReport {
    pub cpu: usize,
    pub levels: Vec<CacheLevel>,
    /// The sum of the levels' shares: the buffer the passes read.
    pub cache_bytes: u64,
    pub warm_pass_ns: Vec<u64>,
    pub cold_pass_ns: Vec<u64>,
    pub warm_median_ns: u64,
    pub cold_median_ns: u64,
    /// Median of (cold − warm) over the repeats.
    pub refill_ns: u64,
}

/// The data and unified caches of `cpu` (sysfs), with the CPUs sharing each.
pub fn cache_levels(sysfs_cpu: &Path) -> Result<Vec<CacheLevel>, String> {
    let dir = sysfs_cpu.join("cache");
    let mut levels = Vec::new();
    for index in 0..MAX_LEVELS {
        let entry = dir.join(format!("index{index}"));
        if !entry.exists() {
            break;
        }
        let read = |name: &str| {
            std::fs::read_to_string(entry.join(name))
                .map(|text| text.trim().to_string())
                .map_err(|e| format!("{}: {e}", entry.join(name).display()))
        };
        let kind = read("type")?;
        if kind == "Instruction" {
            continue;
        }
        let level = read("level")?.parse().map_err(|_| format!("{}: level is not a number", entry.display()))?;
        let size_bytes = parse_size(&read("size")?).ok_or(format!("{}: size is not a size", entry.display()))?;
        let shared_by = cpu_list_count(&read("shared_cpu_list")?)
            .ok_or(format!("{}: shared_cpu_list is not a CPU list", entry.display()))?;
        levels.push(CacheLevel { level, kind, size_bytes, shared_by });
    }
    Ok(levels)
}

/// "32K", "1024K", "32M", "512" (bytes).
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// The number of CPUs in a list such as "0-3,8,10-11".
fn cpu_list_count(text: &str) -> Option<u32> {
    let mut count = 0u32;
    for part in text.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => (part.parse::<u32>().ok()?, part.parse::<u32>().ok()?),
        };
        count = count.checked_add(last.checked_sub(first)?.checked_add(1)?)?;
    }
    (count > 0).then_some(count)
}

/// Measure the refill on the first CPU this process may use, `repeats` times.
pub fn measure(repeats: usize) -> Result<CacheRefillReport, String> {
    let cpus = os::allowed_cpus()?;
    let cpu = *cpus.first().ok_or("no CPU allowed")?;
    let levels = cache_levels(&Path::new("/sys/devices/system/cpu").join(format!("cpu{cpu}")))?;
    let cache_bytes: u64 = levels.iter().map(CacheLevel::share_bytes).sum();
    if cache_bytes == 0 || cache_bytes > MAX_CACHE_BYTES {
        return Err(format!("CPU {cpu}'s cache share of {cache_bytes} bytes is not in 1..={MAX_CACHE_BYTES}"));
    }
    os::pin_current_thread(cpu)?;
    let result = passes(cache_bytes as usize, repeats.max(1));
    // Back to every allowed CPU: the rest of the calibration runs where it likes.
    let mut all = nix::sched::CpuSet::new();
    for &c in &cpus {
        all.set(c).map_err(|e| e.to_string())?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &all).map_err(|e| e.to_string())?;
    let (warm_pass_ns, cold_pass_ns) = result;
    let refills: Vec<u64> = cold_pass_ns.iter().zip(&warm_pass_ns).map(|(c, w)| c.saturating_sub(*w)).collect();
    Ok(CacheRefillReport {
        cpu,
        levels,
        cache_bytes,
        warm_median_ns: median(warm_pass_ns.clone()),
        cold_median_ns: median(cold_pass_ns.clone()),
        warm_pass_ns,
        cold_pass_ns,
        refill_ns: median(refills),
    })
}

/// The middle value (the lower of the two middle ones for an even count; 0 for none).
fn median(values: Vec<u64>) -> u64 {
    cosched_core::stats::lower_median(&values).unwrap_or(0)
}

/// (warm, cold) pass times over a buffer of `bytes`, `repeats` of each.
fn passes(bytes: usize, repeats: usize) -> (Vec<u64>, Vec<u64>) {
    let mut own = vec![1u8; bytes];
    let mut other = vec![2u8; bytes * POLLUTION_FACTOR as usize];
    let (mut warm, mut cold) = (Vec::with_capacity(repeats), Vec::with_capacity(repeats));
    for _ in 0..repeats {
        read_lines(&mut own);
        warm.push(timed_pass(&mut own));
        read_lines(&mut other);
        cold.push(timed_pass(&mut own));
    }
    (warm, cold)
}

fn timed_pass(buffer: &mut [u8]) -> u64 {
    let start = os::monotonic_ns();
    read_lines(buffer);
    os::monotonic_ns() - start
}

/// Read and write one byte of every cache line, as a job working over its data would.
fn read_lines(buffer: &mut [u8]) {
    let mut sum = 0u8;
    for line in buffer.chunks_mut(LINE_BYTES) {
        sum = sum.wrapping_add(line[0]);
        line[0] = sum;
    }
    black_box(sum);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_cpu_lists_read_as_sysfs_writes_them() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("1T"), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(cpu_list_count("0"), Some(1));
        assert_eq!(cpu_list_count("0-1"), Some(2));
        assert_eq!(cpu_list_count("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_count("3-1"), None);
        assert_eq!(cpu_list_count(""), None);
    }

    #[test]
    fn a_cpu_counts_its_share_of_data_and_unified_caches_only() {
        let dir = tempfile::tempdir().unwrap();
        for (index, level, kind, size, shared) in
            [(0, 1, "Data", "32K", "0"), (1, 1, "Instruction", "32K", "0"), (2, 3, "Unified", "32768K", "0-1")]
        {
            let entry = dir.path().join(format!("cache/index{index}"));
            std::fs::create_dir_all(&entry).unwrap();
            for (name, value) in [("level", level.to_string()), ("type", kind.into()), ("size", size.into())] {
                std::fs::write(entry.join(name), value + "\n").unwrap();
            }
            std::fs::write(entry.join("shared_cpu_list"), shared).unwrap();
        }
        let levels = cache_levels(dir.path()).unwrap();
        assert_eq!(levels.len(), 2, "{levels:?}");
        assert_eq!(levels.iter().map(CacheLevel::share_bytes).sum::<u64>(), (32 << 10) + (16 << 20));
    }
}
