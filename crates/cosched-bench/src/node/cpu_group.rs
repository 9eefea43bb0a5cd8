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
        let path = mount.join(format!("cosched-node-{}", std::process::id()));
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

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        let _ = fs::write(self.previous.join("cgroup.procs"), std::process::id().to_string());
        // Empty once every process started in it has been waited for; a leftover one keeps it (named by pid).
        let _ = fs::remove_dir(&self.path);
    }
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
