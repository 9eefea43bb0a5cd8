//! A cgroup-v1 `cpu` group of the runner's own, with the largest weight, holding the runner and every process it
//! starts. On a shared machine the kernel schedules groups first (each session is an autogroup, or a cgroup)
//! and nice values count only inside a group: without this, a scenario's processes would share their CPUs with
//! other sessions' groups at equal weight and the measured shares and latencies would be theirs as much as
//! the scenario's. With 262144 shares against 1024 per other group, others get under 0.5 % while the scenario
//! runs, and inside the group the scenario's processes compete among themselves only (a flat run queue).

use std::fs;
use std::path::{Path, PathBuf};

/// cgroup v1's largest `cpu.shares` (the kernel's MAX_SHARES, 2^18).
pub const MAX_SHARES: u64 = 1 << 18;

const CPU_MOUNT: &str = "/sys/fs/cgroup/cpu";

/// The name of a runner's group before its pid.
const GROUP_PREFIX: &str = "cosched-node-";

/// A group's real-time budget, with real-time group scheduling (CONFIG_RT_GROUP_SCHED).
const RT_RUNTIME_FILE: &str = "cpu.rt_runtime_us";

/// The group's real-time budget per CPU in each period (1 s by default): a fifth of a CPU, four times what the
/// real-time sleeper of `sleeper-busy` uses.
const RT_RUNTIME_US: u64 = 200_000;

/// The weight given back to the group of a run that died with processes still in it: the kernel's default.
const DEFAULT_SHARES: u64 = 1024;

/// The group; leaving it (on drop) moves the runner back and removes the group.
pub struct CpuGroup {
    path: PathBuf,
    previous: PathBuf,
}

impl CpuGroup {
    /// Create the group and move this process into it; `Err` says why not (no v1 `cpu` hierarchy, not root).
    pub fn enter(shares: u64) -> Result<CpuGroup, String> {
        let mount = Path::new(CPU_MOUNT);
        if !mount.join("cpu.shares").exists() {
            return Err(format!("no cgroup-v1 cpu hierarchy at {CPU_MOUNT}"));
        }
        let previous = mount.join(own_cpu_group()?.trim_start_matches('/'));
        clean_groups_of_dead_runs(mount);
        let path = mount.join(format!("{GROUP_PREFIX}{}", std::process::id()));
        fs::create_dir(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        let group = CpuGroup { path, previous };
        group.write("cpu.shares", &shares.to_string())?;
        group.write("cgroup.procs", &std::process::id().to_string())?;
        Ok(group)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.path.join(file);
        fs::write(&path, value).map_err(|e| format!("writing {value} to {}: {e}", path.display()))
    }

    /// With real-time group scheduling a group starts with no real-time time at all, and its processes may not
    /// enter the class (the sleeper-busy scenario's sleeper): give it a budget, which also bounds what they could
    /// take. `Err` (the parent's budget already given to other groups, a kernel limit below it) leaves the group
    /// as it was, without real-time time. Nothing to do where the kernel does not group real-time time.
    pub fn grant_realtime_budget(&self) -> Result<(), String> {
        if !self.path.join(RT_RUNTIME_FILE).exists() {
            return Ok(());
        }
        self.write(RT_RUNTIME_FILE, &RT_RUNTIME_US.to_string())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        let _ = fs::write(self.previous.join("cgroup.procs"), std::process::id().to_string());
        // Given back at once: a removed group's budget counts against the others' until the kernel frees it.
        let _ = fs::write(self.path.join(RT_RUNTIME_FILE), "0");
        // Empty once every process started in it has been waited for; a leftover one keeps it (named by pid).
        let _ = fs::remove_dir(&self.path);
    }
}

/// The groups of runs that ended without leaving theirs (SIGKILL, a second Ctrl-C, a crash): an empty one is
/// removed; one whose processes still run (a run's spin-barrier copies, in process groups of their own, outlive
/// it) gets the default weight back, so that they no longer take the CPUs from everyone else. Only root can make
/// groups at the top of the hierarchy, and a live run holds its own (named by its pid), so neither is touched.
fn clean_groups_of_dead_runs(mount: &Path) {
    let Ok(entries) = fs::read_dir(mount) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(GROUP_PREFIX)).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || run_is_alive(pid) {
            continue;
        }
        let group = entry.path();
        // Fails (EBUSY) while processes are in it.
        if fs::remove_dir(&group).is_err() {
            let _ = fs::write(group.join("cpu.shares"), DEFAULT_SHARES.to_string());
            // Its real-time process died with the run; the budget goes back to the others.
            let _ = fs::write(group.join(RT_RUNTIME_FILE), "0");
            eprintln!(
                "WARNING: {} is left by a run that ended ({pid}) with processes still in it; their weight is now {DEFAULT_SHARES}",
                group.display()
            );
        }
    }
}

/// Whether a process of that pid exists (a reused pid counts as alive: its group is then left alone).
fn run_is_alive(pid: i32) -> bool {
    !matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None), Err(nix::errno::Errno::ESRCH))
}

/// This process's group in the v1 `cpu` hierarchy (`/` for the root).
fn own_cpu_group() -> Result<String, String> {
    let text = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    cpu_group_in(&text).ok_or_else(|| "this process is in no cgroup-v1 cpu group".to_string())
}

/// The path of the `cpu` controller's line of a /proc/PID/cgroup text (`ID:CONTROLLERS:PATH`).
fn cpu_group_in(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "cpu").then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_is_found_alone_or_joined() {
        assert_eq!(cpu_group_in("2:cpuacct:/\n1:cpu:/a/b\n0::/"), Some("/a/b".into()));
        assert_eq!(cpu_group_in("3:cpu,cpuacct:/x:y\n"), Some("/x:y".into()));
        assert_eq!(cpu_group_in("2:cpuacct:/\n0::/"), None);
    }
}
