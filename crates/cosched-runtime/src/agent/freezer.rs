//! Job cgroups: membership, stopping and starting a whole job, CPU accounting.
//!
//! Every job of an agent gets a cgroup `<mount>/<parent>/cosched/<agent_name>/job-<id>` in each hierarchy used, so
//! the agent can find all processes of a job (however they forked) and stop them together. The parent is empty (the
//! hierarchy's top) unless the daemon runs in a cgroup delegated to it, a systemd unit with `Delegate=yes`
//! ([`CgroupParent`], [`enter_delegated_cgroup`]). Stopping prefers the v2
//! freezer (`cgroup.freeze`), then the v1 freezer (`freezer.state`), then SIGSTOP/SIGCONT to each member: the
//! freezers are atomic with respect to forks and invisible to the job, signals are a fallback for machines without
//! them. Mount points are read from `/proc/self/mountinfo`, never assumed, because hybrid, pure v1 and pure v2
//! machines put them in different places.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long `freeze` may wait for the kernel before it gives up: long enough for a loaded machine, short enough
/// that a stuck job (e.g. a task in uninterruptible sleep) does not stall the agent's slice switching.
pub const FREEZE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long waits re-check every 10 µs before they back off. Not `sched_yield`: the switching thread runs in
/// SCHED_FIFO, where yielding keeps the CPU from the very task that must run to reach the freezer.
const SPIN_PHASE: Duration = Duration::from_millis(1);
/// How long `remove` retries while the kernel finishes tearing down tasks that were just killed.
const REMOVE_RETRY: Duration = Duration::from_millis(500);
/// Directory under every hierarchy's mount point (or the delegated cgroup) that holds all agents.
const TOP_DIR: &str = "cosched";
/// The leaf of a delegated cgroup the daemon and its helpers move to: cgroup v2 keeps processes out of inner
/// cgroups once controllers are enabled below them, and a delegated subtree's owner must be ready for that.
pub const DAEMON_LEAF: &str = "daemon";
const JOB_PREFIX: &str = "job-";
const AGENT_NAME_MAX: usize = 64;

/// The mechanism used to stop and start jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FreezerKind {
    /// cgroup v2 `cgroup.freeze` / `cgroup.events`.
    V2,
    /// cgroup v1 freezer controller `freezer.state`.
    V1,
    /// SIGSTOP / SIGCONT to every member process (membership still comes from a cgroup).
    Signals,
}

/// One cgroup hierarchy as mounted on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mount {
    mount_point: PathBuf,
    /// The hierarchy path the mount shows at its mount point (not `/` inside some containers).
    root: String,
    v2: bool,
    /// v1 only: superblock options, which name the controllers bound to the hierarchy (`cpu`, `cpuacct`, ...).
    options: Vec<String>,
}

impl Mount {
    fn has(&self, controller: &str) -> bool {
        self.options.iter().any(|o| o == controller)
    }

    fn is_named(&self) -> bool {
        self.options.iter().any(|o| o.starts_with("name="))
    }
}

/// The hint of `Groups::favordynmods_hint` for a cgroup2 mount, if it lacks the option.
fn favordynmods_hint_for(mount: &Mount) -> Option<String> {
    if !mount.v2 || mount.has("favordynmods") {
        return None;
    }
    let at = mount.mount_point.display();
    Some(format!(
        "cgroup2 at {at} is mounted without favordynmods: slice switches may wait for a task joining a job (10-15 ms \
         at times here); an administrator may `mount -o remount,favordynmods {at}` with the mount's other options \
         (docs/runtime.md, \"Switches that wait for the kernel\")"
    ))
}

/// The monotonic clock, for timeouts of waits on the kernel. The workspace bans `Instant::now` because the simulator
/// must not read clocks; the runtime works in real time, so it opts out here, in one place.
#[allow(clippy::disallowed_methods)]
pub(crate) fn monotonic_now() -> Instant {
    Instant::now()
}

/// Decode the octal escapes (`\040` for a space) mountinfo uses in paths.
fn unescape_mount_path(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal =
            bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse one mountinfo line into a cgroup mount; `None` for other file systems and read-only mounts (a read-only
/// cgroup mount, as in many containers, cannot hold our job cgroups).
fn parse_mountinfo_line(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    let sep = fields.iter().position(|f| *f == "-")?;
    let (fstype, super_options) = (*fields.get(sep + 1)?, *fields.get(sep + 3)?);
    let v2 = match fstype {
        "cgroup2" => true,
        "cgroup" => false,
        _ => return None,
    };
    if fields.get(5)?.split(',').any(|o| o == "ro") {
        return None;
    }
    let options = super_options.split(',').map(str::to_string).collect();
    Some(Mount {
        mount_point: PathBuf::from(unescape_mount_path(fields[4])),
        root: unescape_mount_path(fields[3]),
        v2,
        options,
    })
}

/// All writable cgroup hierarchies, the first mount of each (bind mounts of the same hierarchy are skipped).
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    let mut mounts: Vec<Mount> = Vec::new();
    for mount in text.lines().filter_map(parse_mountinfo_line) {
        if !mounts.iter().any(|m| m.v2 == mount.v2 && m.options == mount.options) {
            mounts.push(mount);
        }
    }
    mounts
}

fn detect_mounts() -> io::Result<Vec<Mount>> {
    let path = "/proc/self/mountinfo";
    let text = fs::read_to_string(path).map_err(|e| with_path(e, "cannot read", Path::new(path)))?;
    Ok(parse_mountinfo(&text))
}

/// The cgroup this process is in within `mount`, as a directory: where `remove_pid` sends processes back to, so a
/// process leaves the job for the place the agent (its launcher) lives in, which is always a valid place for
/// processes (cgroup v2 forbids processes in inner cgroups that distribute controllers).
fn own_cgroup_dir(mount: &Mount, proc_self_cgroup: &str) -> PathBuf {
    let entry = proc_self_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if mount.v2 {
            id == "0" && controllers.is_empty()
        } else {
            !controllers.is_empty() && controllers.split(',').all(|c| mount.has(c))
        };
        matches.then_some(path)
    });
    let relative = entry.and_then(|path| if mount.root == "/" { Some(path) } else { path.strip_prefix(&mount.root) });
    // A cgroup outside a namespace's root reads `/../x`: never a place below the mount.
    match relative.filter(|rel| !rel.split('/').any(|c| c == "..")) {
        Some(rel) => mount.mount_point.join(rel.trim_start_matches('/')),
        None => mount.mount_point.clone(),
    }
}

/// Where the `cosched/<agent>` directories are: a path below each hierarchy's mount point, empty for the top.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupParent(PathBuf);

impl CgroupParent {
    /// The hierarchy's top: `<mount>/cosched/<agent>`.
    pub fn top() -> CgroupParent {
        CgroupParent::default()
    }

    /// A cgroup given as a path below the mount point (`system.slice/cosched.service`), as the agent passes it to
    /// its watchdog; only plain components, so it cannot climb out of the hierarchy.
    pub fn below_mount(path: &str) -> io::Result<CgroupParent> {
        let relative = Path::new(path.trim_start_matches('/'));
        let plain = relative.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || path.len() > 4096 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid cgroup parent {path:?}")));
        }
        Ok(CgroupParent(relative.to_path_buf()))
    }

    /// The path below the mount point (empty for the top).
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// For a daemon started in a cgroup delegated to it (a systemd unit with `Delegate=yes`): move this process into the
/// leaf `<that cgroup>/daemon` of the cgroup v2 hierarchy, and return that cgroup as the parent of the job cgroups.
/// Every process the daemon starts afterwards (watchdog, supervisors, launch shims) is born in the leaf. A daemon
/// already in such a leaf (started again from it) keeps the same parent, so its jobs are found again.
pub fn enter_delegated_cgroup() -> io::Result<CgroupParent> {
    let mounts = detect_mounts()?;
    let not_v2 = || io::Error::new(io::ErrorKind::Unsupported, "job cgroups in the service need a cgroup v2 hierarchy");
    let mount = mounts.iter().find(|m| m.v2).ok_or_else(not_v2)?;
    let self_cgroup = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| with_path(e, "cannot read", Path::new("/proc/self/cgroup")))?;
    let service = service_cgroup_dir(mount, &self_cgroup);
    let below = service.strip_prefix(&mount.mount_point).unwrap_or(Path::new("")).to_path_buf();
    if below.as_os_str().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "this daemon runs in the root cgroup of {}: job cgroups in the service need a cgroup of its own, as \
                 a systemd unit with Delegate=yes gives",
                mount.mount_point.display()
            ),
        ));
    }
    let parent = CgroupParent::below_mount(&below.to_string_lossy())?;
    check_root_only_cgroups(&mount.mount_point, &service)?;
    let leaf = service.join(DAEMON_LEAF);
    fs::create_dir_all(&leaf).map_err(|e| with_path(e, "cannot create", &leaf))?;
    write_control(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
    Ok(parent)
}

/// The cgroup a daemon started in: its own, or the parent of its own when it sits in a `daemon` leaf already.
fn service_cgroup_dir(mount: &Mount, self_cgroup: &str) -> PathBuf {
    let own = own_cgroup_dir(mount, self_cgroup);
    match own.file_name().is_some_and(|n| n == DAEMON_LEAF) {
        true => own.parent().unwrap_or(&own).to_path_buf(),
        false => own,
    }
}

/// Root puts every user's job below `service`: it and every cgroup above it must be root's, and none writable by
/// group or others, nor their files that move processes or enable controllers. Otherwise the owner of a subtree
/// it was started in (a user's `user@UID.service`, from `sudo` in a desktop session) could move or freeze the
/// daemon and other users' jobs.
fn check_root_only_cgroups(mount_point: &Path, service: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut dir = service;
    loop {
        for path in [
            dir.to_path_buf(),
            dir.join("cgroup.procs"),
            dir.join("cgroup.threads"),
            dir.join("cgroup.subtree_control"),
        ] {
            let meta = fs::metadata(&path).map_err(|e| with_path(e, "cannot inspect", &path))?;
            if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} belongs to uid {} with mode {:o}: job cgroups go only below cgroups root alone may \
                         change, as a system service's are",
                        path.display(),
                        meta.uid(),
                        meta.mode() & 0o7777
                    ),
                ));
            }
        }
        match dir.parent() {
            Some(up) if dir != mount_point && up.starts_with(mount_point) => dir = up,
            _ => return Ok(()),
        }
    }
}

/// A previous agent of this node may have left jobs at the other place (`--job-cgroups` changed across a restart):
/// this agent would neither schedule nor report them. So they are thawed, and the agent refuses to start, naming them.
pub fn refuse_jobs_left_elsewhere(agent_name: &str, parent: &CgroupParent) -> io::Result<()> {
    let mounts = detect_mounts()?;
    let self_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let other = match (parent == &CgroupParent::top(), mounts.iter().find(|m| m.v2)) {
        (false, _) => CgroupParent::top(),
        (true, None) => return Ok(()),
        (true, Some(mount)) => {
            let service = service_cgroup_dir(mount, &self_cgroup);
            let below = service.strip_prefix(&mount.mount_point).unwrap_or(Path::new(""));
            match CgroupParent::below_mount(&below.to_string_lossy()) {
                Ok(other) if other != CgroupParent::top() => other,
                _ => return Ok(()),
            }
        }
    };
    let left: Vec<String> = hierarchies_of(agent_name, &other)?
        .iter()
        .flat_map(|h| h.job_ids().unwrap_or_default().into_iter().map(|job| h.job_dir(job).display().to_string()))
        .collect();
    if left.is_empty() {
        return Ok(());
    }
    let _ = thaw_unsuspended_under(agent_name, &other);
    let setting = if other == CgroupParent::top() { "top" } else { "service" };
    Err(io::Error::other(format!(
        "jobs of node {agent_name} are still in {}, left by an agent started with --job-cgroups {setting}; this \
         agent would not see them. They are thawed. Start the agent with --job-cgroups {setting} until they have \
         ended (cosched kill ends them), then change the setting",
        left.join(", ")
    )))
}

/// Reject names that could escape `<mount>/cosched/` or hide (`/`, `..`, leading dot) and keep them short and plain.
pub(crate) fn check_agent_name(name: &str) -> io::Result<()> {
    let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if name.is_empty() || name.len() > AGENT_NAME_MAX || name.starts_with('.') || !plain {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid agent name {name:?}: use 1-{AGENT_NAME_MAX} of [A-Za-z0-9._-], not starting with '.'"),
        ));
    }
    Ok(())
}

/// Wrap an error so its message names the action and the path, keeping its kind.
fn with_path(e: io::Error, action: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{action} {}: {e}", path.display()))
}

fn errno_to_io(e: Errno, what: String) -> io::Error {
    let e = io::Error::from(e);
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Write a cgroup control file in one `write(2)`, as kernfs requires.
fn write_control(path: &Path, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path).map_err(|e| with_path(e, "cannot open", path))?;
    file.write_all(value.as_bytes()).map_err(|e| with_path(e, &format!("cannot write {value:?} to"), path))
}

fn read_control(path: &Path) -> io::Result<String> {
    fs::read_to_string(path).map_err(|e| with_path(e, "cannot read", path))
}

fn parse_pids(text: &str, path: &Path) -> io::Result<Vec<i32>> {
    let mut pids = text
        .lines()
        .map(|l| {
            l.trim().parse::<i32>().map_err(|e| io::Error::other(format!("bad pid {l:?} in {}: {e}", path.display())))
        })
        .collect::<io::Result<Vec<i32>>>()?;
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// Members of the cgroup at `dir`; empty if the cgroup does not exist (a finished, removed job).
fn read_procs(dir: &Path) -> io::Result<Vec<i32>> {
    let path = dir.join("cgroup.procs");
    match fs::read_to_string(&path) {
        Ok(text) => parse_pids(&text, &path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(with_path(e, "cannot read", &path)),
    }
}

/// Send `signal` to `pid`; a process that has already gone is not an error (jobs exit while we work on them).
fn signal_pid(pid: i32, signal: Signal) -> io::Result<()> {
    match kill(Pid::from_raw(pid), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(errno_to_io(e, format!("cannot send {signal} to pid {pid}"))),
    }
}

/// Scheduler state letter and utime+stime (clock ticks) from `/proc/<pid>/stat`; `None` if the process is gone.
/// The command name may contain spaces and parentheses, so fields are counted after its last `)`.
fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&text)
}

fn parse_proc_stat(text: &str) -> Option<(char, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((state, utime + stime))
}

/// True when the process cannot run user code: stopped, traced-stopped, zombie, dead or already gone — or in an
/// uninterruptible wait with a SIGSTOP pending, which it takes on its way back to user mode. (A shell that forked
/// with `vfork` waits uninterruptibly until its child execs; a child stopped before its exec holds it there.)
fn is_stopped(pid: i32) -> bool {
    match proc_stat(pid) {
        Some(('D', _)) => fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| stop_pending(&s)),
        Some((state, _)) => matches!(state, 'T' | 't' | 'Z' | 'X' | 'x'),
        None => true,
    }
}

/// Whether `/proc/<pid>/status` shows SIGSTOP pending, for the thread or its whole process.
fn stop_pending(status: &str) -> bool {
    let stop_bit = 1u64 << (Signal::SIGSTOP as u32 - 1);
    status
        .lines()
        .filter_map(|line| line.strip_prefix("SigPnd:").or_else(|| line.strip_prefix("ShdPnd:")))
        .any(|mask| u64::from_str_radix(mask.trim(), 16).is_ok_and(|bits| bits & stop_bit != 0))
}

/// USER_HZ, read from the auxiliary vector (`AT_CLKTCK`) because `sysconf` is not available without `unsafe` here.
fn clock_ticks_per_s() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        const AT_CLKTCK: usize = 17;
        let word = std::mem::size_of::<usize>();
        let auxv = fs::read("/proc/self/auxv").unwrap_or_default();
        auxv.chunks_exact(2 * word)
            .find_map(|pair| {
                let key = usize::from_ne_bytes(pair[..word].try_into().ok()?);
                let value = usize::from_ne_bytes(pair[word..].try_into().ok()?);
                (key == AT_CLKTCK && value > 0).then_some(value as u64)
            })
            .unwrap_or(100)
    })
}

/// Re-check `done` until it holds (true) or `deadline` passes (false): every 10 µs for the first millisecond
/// (stopping a few tasks takes microseconds), then with growing pauses so a long wait does not burn a CPU the jobs
/// need. Not `sched_yield`, which in SCHED_FIFO keeps the CPU from the very task that must run to be stopped.
fn poll_until(deadline: Instant, mut done: impl FnMut() -> io::Result<bool>) -> io::Result<bool> {
    let start = monotonic_now();
    let mut pause_us = 20;
    loop {
        if done()? {
            return Ok(true);
        }
        let now = monotonic_now();
        if now >= deadline {
            return Ok(false);
        }
        let pause = if now.duration_since(start) < SPIN_PHASE {
            Duration::from_micros(10)
        } else {
            pause_us = (pause_us * 2).min(5_000);
            Duration::from_micros(pause_us)
        };
        thread::sleep(pause.min(deadline.duration_since(now)));
    }
}

/// `frozen` flag of an open `cgroup.events`.
fn read_frozen_flag(file: &File, path: &Path) -> io::Result<bool> {
    let mut buf = [0u8; 512];
    let len = file.read_at(&mut buf, 0).map_err(|e| with_path(e, "cannot read", path))?;
    let text = String::from_utf8_lossy(&buf[..len]);
    Ok(text.lines().any(|l| l.trim() == "frozen 1"))
}

/// One hierarchy an agent uses.
#[derive(Clone, Debug)]
struct Hierarchy {
    mount: Mount,
    /// `<mount>/<parent>/cosched/<agent_name>`.
    base: PathBuf,
    /// Where `remove_pid` puts processes: the agent's own cgroup in this hierarchy.
    home: PathBuf,
}

impl Hierarchy {
    fn new(mount: &Mount, agent_name: &str, parent: &CgroupParent, proc_self_cgroup: &str) -> Hierarchy {
        let base = mount.mount_point.join(&parent.0).join(TOP_DIR).join(agent_name);
        Hierarchy { home: own_cgroup_dir(mount, proc_self_cgroup), mount: mount.clone(), base }
    }

    fn job_dir(&self, job: u64) -> PathBuf {
        self.base.join(format!("{JOB_PREFIX}{job}"))
    }

    fn label(&self) -> String {
        if self.mount.v2 {
            "v2".to_string()
        } else {
            let controllers: Vec<&str> =
                self.mount.options.iter().map(String::as_str).filter(|o| !matches!(*o, "rw" | "ro")).collect();
            format!("v1[{}]", controllers.join(","))
        }
    }

    /// Job ids with a directory under `base`; none when `base` does not exist.
    fn job_ids(&self) -> io::Result<Vec<u64>> {
        let entries = match fs::read_dir(&self.base) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(with_path(e, "cannot list", &self.base)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| with_path(e, "cannot list", &self.base))?;
            let name = entry.file_name();
            let id = name.to_str().and_then(|n| n.strip_prefix(JOB_PREFIX)).and_then(|n| n.parse::<u64>().ok());
            ids.extend(id);
        }
        Ok(ids)
    }
}

/// Where a job's CPU time comes from.
#[derive(Clone, Copy, Debug)]
enum CpuSource {
    /// `cpu.stat` `usage_usec` of the hierarchy at this index.
    V2Stat(usize),
    /// `cpuacct.usage` (ns) of the hierarchy at this index.
    Cpuacct(usize),
    /// utime+stime of the current members from `/proc/<pid>/stat`.
    Proc,
}

/// The cgroups of one agent's jobs: `<mount>/cosched/<agent_name>/job-<id>` in each hierarchy used.
#[derive(Debug)]
pub struct JobGroups {
    agent_name: String,
    kind: FreezerKind,
    /// `hierarchies[0]` is the primary one: it freezes (v2, v1) and lists members; the others only add accounting.
    hierarchies: Vec<Hierarchy>,
    cpu: CpuSource,
}

/// Hierarchy for membership in signals mode: v2 if there is one, else a v1 hierarchy, preferring ones that also
/// account CPU time, and a named (controller-less, e.g. systemd's) one only as the last resort.
fn signals_mount(mounts: &[Mount]) -> Option<&Mount> {
    let rank = |m: &Mount| match () {
        _ if m.v2 => 0,
        _ if m.has("cpuacct") => 1,
        _ if m.has("pids") => 2,
        _ if !m.is_named() => 3,
        _ => 4,
    };
    mounts.iter().min_by_key(|m| rank(m))
}

/// An agent's hierarchy in a mount: where its directory is and where its own processes live.
type Place<'a> = &'a dyn Fn(&Mount) -> Hierarchy;

/// Create `<mount>/<parent>/cosched/<agent>` for the v2 mount and report whether it offers `cgroup.freeze`
/// (kernel >= 5.2).
fn v2_with_freeze(mounts: &[Mount], place: Place) -> io::Result<Option<Hierarchy>> {
    let Some(mount) = mounts.iter().find(|m| m.v2) else { return Ok(None) };
    let hierarchy = place(mount);
    fs::create_dir_all(&hierarchy.base).map_err(|e| with_path(e, "cannot create", &hierarchy.base))?;
    if hierarchy.base.join("cgroup.freeze").exists() {
        return Ok(Some(hierarchy));
    }
    // Not usable for freezing: leave nothing behind (fails harmlessly if a signals-mode agent uses the directory).
    let _ = fs::remove_dir(&hierarchy.base);
    Ok(None)
}

/// The v1 freezer hierarchy plus a separate cpuacct hierarchy (if any) for accounting.
fn v1_hierarchies(mounts: &[Mount], place: Place) -> Option<Vec<Hierarchy>> {
    let freezer = mounts.iter().find(|m| !m.v2 && m.has("freezer"))?;
    let mut hierarchies = vec![place(freezer)];
    if let Some(cpuacct) = mounts.iter().find(|m| !m.v2 && m.has("cpuacct") && !m.has("freezer")) {
        hierarchies.push(place(cpuacct));
    }
    Some(hierarchies)
}

fn choose(
    mounts: &[Mount],
    agent_name: &str,
    force: Option<FreezerKind>,
    place: Place,
) -> io::Result<(FreezerKind, Vec<Hierarchy>)> {
    if matches!(force, None | Some(FreezerKind::V2)) {
        if let Some(v2) = v2_with_freeze(mounts, place)? {
            return Ok((FreezerKind::V2, vec![v2]));
        }
    }
    if matches!(force, None | Some(FreezerKind::V1)) {
        if let Some(v1) = v1_hierarchies(mounts, place) {
            return Ok((FreezerKind::V1, v1));
        }
    }
    if matches!(force, None | Some(FreezerKind::Signals)) {
        if let Some(mount) = signals_mount(mounts) {
            return Ok((FreezerKind::Signals, vec![place(mount)]));
        }
    }
    let found: Vec<String> = mounts.iter().map(|m| m.mount_point.display().to_string()).collect();
    let wanted = force.map_or("any freezer".to_string(), |k| format!("freezer kind {k:?}"));
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{wanted} is not available for agent {agent_name:?}: writable cgroup mounts found: {found:?}"),
    ))
}

/// Job cgroups inside a service are in the cgroup v2 hierarchy only (a hybrid machine's v1 hierarchies are
/// systemd's or the kernel's to arrange), under a parent that exists: nothing creates the service's own cgroup.
fn check_delegated_parent(mounts: &[Mount], force: Option<FreezerKind>, parent: &CgroupParent) -> io::Result<()> {
    let unsupported = |why: String| Err(io::Error::new(io::ErrorKind::Unsupported, why));
    if force == Some(FreezerKind::V1) {
        return unsupported("job cgroups in the service need the cgroup v2 hierarchy, not the v1 freezer".into());
    }
    let Some(mount) = mounts.iter().find(|m| m.v2) else {
        return unsupported("job cgroups in the service need a cgroup v2 hierarchy; this machine mounts none".into());
    };
    let dir = mount.mount_point.join(&parent.0);
    if !dir.join("cgroup.procs").is_file() {
        return unsupported(format!("{} is not a cgroup: the service's cgroup must exist", dir.display()));
    }
    if force.is_none() && !dir.join("cgroup.freeze").exists() {
        return unsupported(format!("{} offers no cgroup.freeze (kernel 5.2 or later)", dir.display()));
    }
    Ok(())
}

fn cpu_source(hierarchies: &[Hierarchy]) -> CpuSource {
    if let Some(i) = hierarchies.iter().position(|h| h.mount.v2) {
        CpuSource::V2Stat(i)
    } else if let Some(i) = hierarchies.iter().position(|h| h.mount.has("cpuacct")) {
        CpuSource::Cpuacct(i)
    } else {
        CpuSource::Proc
    }
}

impl JobGroups {
    /// Detect what the machine offers, preferring v2 `cgroup.freeze`, then the v1 freezer, then signals (which
    /// still needs a cgroup hierarchy for membership). `force` picks a kind explicitly (error if unavailable).
    /// Creates `<mount>/cosched/<agent_name>` directories as needed.
    pub fn open(agent_name: &str, force: Option<FreezerKind>) -> io::Result<JobGroups> {
        JobGroups::open_in(agent_name, force, &CgroupParent::top())
    }

    /// `open` with the agent's directories in `parent` (`<mount>/<parent>/cosched/<agent_name>`), which must exist
    /// already in the cgroup v2 hierarchy: a cgroup delegated to the daemon ([`enter_delegated_cgroup`]).
    pub fn open_in(agent_name: &str, force: Option<FreezerKind>, parent: &CgroupParent) -> io::Result<JobGroups> {
        check_agent_name(agent_name)?;
        let mounts = detect_mounts()?;
        let self_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        if parent != &CgroupParent::top() {
            check_delegated_parent(&mounts, force, parent)?;
        }
        let place = |mount: &Mount| Hierarchy::new(mount, agent_name, parent, &self_cgroup);
        let (kind, hierarchies) = choose(&mounts, agent_name, force, &place)?;
        for h in &hierarchies {
            fs::create_dir_all(&h.base).map_err(|e| with_path(e, "cannot create", &h.base))?;
        }
        let cpu = cpu_source(&hierarchies);
        Ok(JobGroups { agent_name: agent_name.to_string(), kind, hierarchies, cpu })
    }

    pub fn kind(&self) -> FreezerKind {
        self.kind
    }

    pub fn agent_name(&self) -> &str {
        &self.agent_name
    }

    /// The agent's directory as the kernel names cgroups (in its trace events): the path from the root of the
    /// primary hierarchy, which a mount inside a container may not show (`/cosched/<agent>`).
    pub fn kernel_path(&self) -> String {
        let primary = self.primary();
        let below = primary.base.strip_prefix(&primary.mount.mount_point).unwrap_or(&primary.base);
        format!("{}/{}", primary.mount.root.trim_end_matches('/'), below.display())
    }

    /// Human-readable description of the paths used (for logs and status pages).
    pub fn describe(&self) -> String {
        let places: Vec<String> =
            self.hierarchies.iter().map(|h| format!("{} {}", h.label(), h.base.display())).collect();
        let cpu = match self.cpu {
            CpuSource::V2Stat(_) => "cpu.stat",
            CpuSource::Cpuacct(_) => "cpuacct.usage",
            CpuSource::Proc => "/proc/<pid>/stat",
        };
        format!("freezer {:?} for agent {:?}: {}; cpu time from {cpu}", self.kind, self.agent_name, places.join(", "))
    }

    /// What to tell an administrator when the cgroup2 mount lacks `favordynmods`. Without it, every task that
    /// joins a job (a write to `cgroup.procs`) takes the kernel's global threadgroup lock for writing, which waits
    /// for an RCU grace period while holding the cgroup mutex that every freeze and thaw also takes: under jobs
    /// coming and going, 1 % of slice switches here waited 10-15 ms for it (docs/runtime.md, "Switches that wait
    /// for the kernel").
    pub fn favordynmods_hint(&self) -> Option<String> {
        self.hierarchies.iter().find(|h| h.mount.v2).and_then(|h| favordynmods_hint_for(&h.mount))
    }

    fn primary(&self) -> &Hierarchy {
        &self.hierarchies[0]
    }

    fn primary_file(&self, job: u64, name: &str) -> PathBuf {
        self.primary().job_dir(job).join(name)
    }

    /// Create the job's cgroup(s), marked with how this agent stops them. Idempotent.
    pub fn create(&self, job: u64) -> io::Result<()> {
        for h in &self.hierarchies {
            let dir = h.job_dir(job);
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(with_path(e, &format!("cannot create cgroup of job {job}:"), &dir)),
            }
        }
        self.mark_how_stopped(job)
    }

    /// Record on the job's cgroups whether this agent stops them with signals (`job_tag::mark_stopped_by_signals`):
    /// at creation, and for a job adopted from an agent that may have used another freezer.
    pub fn mark_how_stopped(&self, job: u64) -> io::Result<()> {
        let by_signals = self.kind == FreezerKind::Signals;
        self.hierarchies.iter().try_for_each(|h| crate::job_tag::mark_stopped_by_signals(&h.job_dir(job), by_signals))
    }

    /// Paths of the `cgroup.procs` files a process must be written into to join the job (one per hierarchy).
    pub fn procs_files(&self, job: u64) -> Vec<PathBuf> {
        self.hierarchies.iter().map(|h| h.job_dir(job).join("cgroup.procs")).collect()
    }

    /// Move an existing process (all its threads) into the job.
    pub fn add_pid(&self, job: u64, pid: i32) -> io::Result<()> {
        for file in self.procs_files(job) {
            write_control(&file, &pid.to_string())
                .map_err(|e| io::Error::new(e.kind(), format!("cannot add pid {pid} to job {job}: {e}")))?;
        }
        Ok(())
    }

    /// Where process `pid` is now in each hierarchy (in the order of `put_back`), read before a move that may
    /// have to be undone.
    pub fn places_of(&self, pid: i32) -> io::Result<Vec<PathBuf>> {
        let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
        Ok(self.hierarchies.iter().map(|h| own_cgroup_dir(&h.mount, &text)).collect())
    }

    /// Undo a move of `pid`: back into the cgroups `places_of` read, not the agent's own (which would take it out
    /// of its user's slice and into the daemon's).
    pub fn put_back(&self, pid: i32, places: &[PathBuf]) -> io::Result<()> {
        for place in places {
            write_control(&place.join("cgroup.procs"), &pid.to_string()).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot put pid {pid} back in {}: {e}", place.display()))
            })?;
        }
        Ok(())
    }

    /// Move a process out of the job, back into the cgroup the agent itself is in (in each hierarchy).
    pub fn remove_pid(&self, job: u64, pid: i32) -> io::Result<()> {
        for h in &self.hierarchies {
            write_control(&h.home.join("cgroup.procs"), &pid.to_string())
                .map_err(|e| io::Error::new(e.kind(), format!("cannot remove pid {pid} from job {job}: {e}")))?;
        }
        Ok(())
    }

    /// Processes currently in the job, sorted (empty when the cgroup is gone).
    pub fn pids(&self, job: u64) -> io::Result<Vec<i32>> {
        read_procs(&self.primary().job_dir(job))
    }

    /// Stop every process of the job and return only once the kernel confirms it is stopped; error after 2 s.
    pub fn freeze(&self, job: u64) -> io::Result<()> {
        self.freeze_within(job, FREEZE_TIMEOUT)
    }

    /// `freeze` with a bound of `timeout`. A freeze that does not complete is undone: a half-frozen job (some
    /// tasks stopped, others not) would hang on its own stopped tasks, so it is thawed back and the error says so.
    pub fn freeze_within(&self, job: u64, timeout: Duration) -> io::Result<()> {
        let deadline = monotonic_now() + timeout;
        let confirmed = self.request_freeze(job).and_then(|()| self.confirm_frozen(job, deadline));
        let error = match confirmed {
            Ok(true) => return Ok(()),
            Ok(false) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "job {job} of agent {:?} not stopped after {timeout:?}{}",
                    self.agent_name,
                    self.members_still_running(job)
                ),
            ),
            Err(e) => e,
        };
        Err(match self.thaw(job) {
            Ok(()) => io::Error::new(error.kind(), format!("{error}; job {job} thawed back")),
            Err(t) => io::Error::new(error.kind(), format!("{error}; thawing job {job} back failed too: {t}")),
        })
    }

    /// Ask the kernel to stop every process of the job, and return at once. From then on none of them runs user
    /// code: the kernel marks each and kicks it, and a marked task stops on its way back to user mode — one on a
    /// CPU within microseconds (the kick is an interrupt), one off a CPU before its next instruction (cgroup v2's
    /// `JOBCTL_TRAP_FREEZE`, v1's freezer and SIGSTOP all take effect there). `confirm_frozen` says when the
    /// kernel counts every task stopped, which may take longer: a task needs a CPU to reach the trap.
    pub fn request_freeze(&self, job: u64) -> io::Result<()> {
        match self.kind {
            FreezerKind::V2 => write_control(&self.primary_file(job, "cgroup.freeze"), "1"),
            FreezerKind::V1 => write_control(&self.primary_file(job, "freezer.state"), "FROZEN"),
            FreezerKind::Signals => self.pids(job)?.into_iter().try_for_each(|pid| signal_pid(pid, Signal::SIGSTOP)),
        }
    }

    /// Wait until the kernel reports every process of the job stopped (true), or until `deadline` (false). In
    /// signals mode every pass also stops members that were not yet (a process forked before its parent stopped).
    pub fn confirm_frozen(&self, job: u64, deadline: Instant) -> io::Result<bool> {
        match self.kind {
            FreezerKind::V2 => {
                // Re-read, not poll(2): the kernel sends at most one `cgroup.events` notification per 10 ms.
                let events = self.primary_file(job, "cgroup.events");
                let file = File::open(&events).map_err(|e| with_path(e, "cannot open", &events))?;
                poll_until(deadline, || read_frozen_flag(&file, &events))
            }
            FreezerKind::V1 => {
                let state = self.primary_file(job, "freezer.state");
                poll_until(deadline, || Ok(read_control(&state)?.trim() == "FROZEN"))
            }
            FreezerKind::Signals => poll_until(deadline, || {
                let pids = self.pids(job)?;
                for &pid in pids.iter().filter(|&&p| !is_stopped(p)) {
                    signal_pid(pid, Signal::SIGSTOP)?;
                }
                Ok(pids.iter().all(|&p| is_stopped(p)) && self.pids(job)? == pids)
            }),
        }
    }

    /// For a freeze's error in signals mode: the first members not stopped, with their states.
    fn members_still_running(&self, job: u64) -> String {
        if self.kind != FreezerKind::Signals {
            return String::new();
        }
        let running: Vec<String> = (self.pids(job).unwrap_or_default().into_iter())
            .filter(|&pid| !is_stopped(pid))
            .take(5)
            .map(|pid| format!("{pid} ({})", proc_stat(pid).map_or('?', |(state, _)| state)))
            .collect();
        format!(" (still running: {})", running.join(", "))
    }

    /// Let the job run again. Returns once the request is written (the kernel resumes tasks asynchronously).
    pub fn thaw(&self, job: u64) -> io::Result<()> {
        match self.kind {
            FreezerKind::V2 => write_control(&self.primary_file(job, "cgroup.freeze"), "0"),
            FreezerKind::V1 => write_control(&self.primary_file(job, "freezer.state"), "THAWED"),
            FreezerKind::Signals => self.pids(job)?.into_iter().try_for_each(|pid| signal_pid(pid, Signal::SIGCONT)),
        }
    }

    /// Whether the kernel reports the job stopped. In signals mode: every member stopped, and at least one member
    /// (there is no freezer state to ask, and an empty job has nothing stopped).
    pub fn is_frozen(&self, job: u64) -> io::Result<bool> {
        match self.kind {
            FreezerKind::V2 => {
                let events = self.primary_file(job, "cgroup.events");
                let file = File::open(&events).map_err(|e| with_path(e, "cannot open", &events))?;
                read_frozen_flag(&file, &events)
            }
            FreezerKind::V1 => Ok(read_control(&self.primary_file(job, "freezer.state"))?.trim() == "FROZEN"),
            FreezerKind::Signals => {
                let pids = self.pids(job)?;
                Ok(!pids.is_empty() && pids.iter().all(|&p| is_stopped(p)))
            }
        }
    }

    /// Send `signal` to every process of the job. SIGKILL uses `cgroup.kill` where the kernel has it; otherwise the
    /// job is frozen first so no process can fork past the sweep. After SIGKILL or SIGTERM the job is thawed so its
    /// processes can act on the signal and die (a frozen or stopped process would hold it pending).
    pub fn signal(&self, job: u64, signal: Signal) -> io::Result<()> {
        let kill_file = self.primary_file(job, "cgroup.kill");
        if signal == Signal::SIGKILL && self.kind == FreezerKind::V2 && kill_file.exists() {
            return write_control(&kill_file, "1");
        }
        if signal == Signal::SIGKILL {
            // Best effort: a job that cannot be frozen (a task stuck in the kernel) must still be killed.
            let _ = self.freeze(job);
        }
        for pid in self.pids(job)? {
            signal_pid(pid, signal).map_err(|e| io::Error::new(e.kind(), format!("job {job}: {e}")))?;
        }
        if matches!(signal, Signal::SIGKILL | Signal::SIGTERM) {
            self.thaw(job)?;
        }
        Ok(())
    }

    /// Send SIGKILL to every process of the job, frozen or not, and return at once (a process leaves the cgroup
    /// when the kernel has ended it: `members` says who is left). `cgroup.kill` where the kernel has it: it kills
    /// frozen tasks and every task forked meanwhile. Otherwise each member is signalled inside a freeze request, so
    /// that stopped members cannot fork past the sweep, then thawed: the v1 freezer holds a frozen task's SIGKILL
    /// until it thaws (a task stopped by SIGSTOP dies of SIGKILL anyway). A caller repeats it until the cgroup is
    /// empty: a fork the sweep missed, or a task that was in the kernel, is caught by the next call.
    pub fn kill_all(&self, job: u64) -> io::Result<()> {
        let kill_file = self.primary_file(job, "cgroup.kill");
        if self.primary().mount.v2 && kill_file.exists() {
            return write_control(&kill_file, "1");
        }
        let freezes = self.kind != FreezerKind::Signals;
        if freezes {
            // Not confirmed: a member waiting in the kernel may never reach the freezer, and must be killed anyway.
            let _ = self.request_freeze(job);
        }
        for pid in self.members(job)? {
            signal_pid(pid, Signal::SIGKILL).map_err(|e| io::Error::new(e.kind(), format!("job {job}: {e}")))?;
        }
        if freezes {
            self.thaw(job)?;
        }
        Ok(())
    }

    /// Processes in the job's cgroup in any hierarchy it uses (sorted; empty once the cgroups are gone). A process
    /// that root moved between hierarchies' cgroups still keeps the job's cgroup in that one busy.
    pub fn members(&self, job: u64) -> io::Result<Vec<i32>> {
        let mut members = BTreeSet::new();
        for h in &self.hierarchies {
            members.extend(read_procs(&h.job_dir(job))?);
        }
        Ok(members.into_iter().collect())
    }

    /// CPU time used by the job's processes so far, in ns. From the cgroup's accounting when a hierarchy in use
    /// has it (this includes processes that already exited); else the current members' utime+stime.
    pub fn cpu_usage_ns(&self, job: u64) -> io::Result<u64> {
        match self.cpu {
            CpuSource::V2Stat(i) => {
                let path = self.hierarchies[i].job_dir(job).join("cpu.stat");
                let text = read_control(&path)?;
                let usage_us = text.lines().find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse::<u64>().ok());
                let usage_us =
                    usage_us.ok_or_else(|| io::Error::other(format!("no usage_usec in {}", path.display())))?;
                Ok(usage_us * 1_000)
            }
            CpuSource::Cpuacct(i) => {
                let path = self.hierarchies[i].job_dir(job).join("cpuacct.usage");
                read_control(&path)?
                    .trim()
                    .parse::<u64>()
                    .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
            }
            CpuSource::Proc => {
                let ticks: u64 = self.pids(job)?.into_iter().filter_map(proc_stat).map(|(_, t)| t).sum();
                Ok(ticks * 1_000_000_000 / clock_ticks_per_s())
            }
        }
    }

    /// Remove the job's (empty) cgroups; a job whose cgroups are already gone is fine. Processes that were just
    /// killed may keep a cgroup busy for a moment after leaving `cgroup.procs`, hence a short retry.
    pub fn remove(&self, job: u64) -> io::Result<()> {
        for h in &self.hierarchies {
            let dir = h.job_dir(job);
            let start = monotonic_now();
            loop {
                match fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) => {
                        let members = read_procs(&dir)?;
                        if !members.is_empty() || start.elapsed() > REMOVE_RETRY {
                            let msg = format!(
                                "cannot remove {} of job {job} ({} left)",
                                dir.display(),
                                crate::wire::protocol::processes(members.len() as u64)
                            );
                            return Err(io::Error::new(e.kind(), format!("{msg}: {e}")));
                        }
                        thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        Ok(())
    }

    /// Job ids that have a cgroup under this agent (adoption after an agent restart), sorted.
    pub fn existing_jobs(&self) -> io::Result<Vec<u64>> {
        let mut ids = BTreeSet::new();
        for h in &self.hierarchies {
            ids.extend(h.job_ids()?);
        }
        Ok(ids.into_iter().collect())
    }

    /// Thaw every job of this agent (on shutdown and by the watchdog). Best effort: tries all, returns the first error.
    pub fn thaw_all(&self) -> io::Result<()> {
        let mut first_error = None;
        for job in self.existing_jobs()? {
            if let Err(e) = self.thaw(job) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Remove this agent's own (empty) directories `<mount>/cosched/<agent_name>`: for decommissioning and tests.
    /// The shared `<mount>/cosched` stays, since other agents may be creating theirs at the same time.
    pub fn remove_agent_dirs(&self) -> io::Result<()> {
        for h in &self.hierarchies {
            match fs::remove_dir(&h.base) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(with_path(e, "cannot remove", &h.base)),
            }
        }
        Ok(())
    }
}

/// Thaw one job directory by every means its hierarchy offers, then SIGCONT its members.
fn thaw_dir(mount: &Mount, dir: &Path) -> io::Result<()> {
    let freeze = dir.join("cgroup.freeze");
    if mount.v2 && freeze.exists() {
        write_control(&freeze, "0")?;
    }
    if !mount.v2 && mount.has("freezer") {
        write_control(&dir.join("freezer.state"), "THAWED")?;
    }
    if !crate::job_tag::is_stopped_by_signals(dir) {
        return Ok(()); // a process stopped by its own user stays stopped
    }
    read_procs(dir)?.into_iter().try_for_each(|pid| signal_pid(pid, Signal::SIGCONT))
}

/// Every writable hierarchy as agent `agent_name` sees it (whether or not it made directories there).
fn hierarchies_of(agent_name: &str, parent: &CgroupParent) -> io::Result<Vec<Hierarchy>> {
    check_agent_name(agent_name)?;
    let self_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    Ok(detect_mounts()?.iter().map(|mount| Hierarchy::new(mount, agent_name, parent, &self_cgroup)).collect())
}

/// Thaw every job of `agent_name` that is not marked suspended, in every hierarchy, whatever kind the agent used,
/// and SIGCONT the members of jobs marked as stopped with signals, so that they resume too. Needs no state from the agent: the watchdog
/// calls it when the agent died, and a starting agent before anything else, since a watchdog that died with its
/// agent thawed nothing. Creates nothing. Best effort: tries all, returns the first error.
pub fn thaw_unsuspended_under(agent_name: &str, parent: &CgroupParent) -> io::Result<()> {
    let mut first_error = None;
    for hierarchy in hierarchies_of(agent_name, parent)? {
        let jobs = hierarchy.job_ids().unwrap_or_else(|e| {
            first_error.get_or_insert(e);
            Vec::new()
        });
        for job in jobs {
            let dir = hierarchy.job_dir(job);
            if crate::job_tag::is_suspended(&dir) {
                continue; // a suspension holds until it is lifted
            }
            match thaw_dir(&hierarchy.mount, &dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    first_error.get_or_insert(e);
                }
                _ => {} // thawed, or removed meanwhile: nothing left to thaw
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `thaw_unsuspended_under`, then remove what the agent left empty (the watchdog's work once the agent is gone):
/// the cgroups of jobs whose processes are all gone, then the agent's own directory. A cgroup with processes
/// refuses removal (EBUSY) and stays for the agent to re-adopt, and so does one whose tasks' exit statuses the
/// agent has not reported yet (`job_tag::holds_task_statuses`).
pub fn thaw_all_under(agent_name: &str, parent: &CgroupParent) -> io::Result<()> {
    let thawed = thaw_unsuspended_under(agent_name, parent);
    let hierarchies = hierarchies_of(agent_name, parent)?;
    let unreported: BTreeSet<u64> = hierarchies
        .iter()
        .flat_map(|h| {
            let jobs = h.job_ids().unwrap_or_default().into_iter();
            jobs.filter(|&job| crate::job_tag::holds_task_statuses(&h.job_dir(job)))
        })
        .collect();
    for hierarchy in &hierarchies {
        for job in hierarchy.job_ids().unwrap_or_default() {
            if !unreported.contains(&job) {
                let _ = fs::remove_dir(hierarchy.job_dir(job));
            }
        }
        let _ = fs::remove_dir(&hierarchy.base);
    }
    thawed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup2_mount_without_favordynmods_gets_a_hint_and_one_with_it_none() {
        let without = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";
        let with = "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,nsdelegate,favordynmods";
        let v1 = "33 31 0:30 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu";
        let hint = parse_mountinfo_line(without).and_then(|m| favordynmods_hint_for(&m)).unwrap();
        assert!(hint.contains("remount,favordynmods /sys/fs/cgroup/unified"), "{hint}");
        assert_eq!(parse_mountinfo_line(with).and_then(|m| favordynmods_hint_for(&m)), None);
        assert_eq!(parse_mountinfo_line(v1).and_then(|m| favordynmods_hint_for(&m)), None);
    }

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:34 / /mnt/freezer\\040copy rw,relatime - cgroup cgroup rw,freezer
43 31 0:39 / /sys/fs/cgroup/pids ro,relatime - cgroup cgroup rw,pids
";

    #[test]
    fn mountinfo_finds_each_writable_hierarchy_once() {
        let mounts = parse_mountinfo(HYBRID);
        let points: Vec<&Path> = mounts.iter().map(|m| m.mount_point.as_path()).collect();
        let expected = [
            "/sys/fs/cgroup/cpu,cpuacct",
            "/sys/fs/cgroup/freezer",
            "/sys/fs/cgroup/systemd",
            "/sys/fs/cgroup/unified",
        ];
        assert_eq!(points, expected.map(Path::new));
        assert!(mounts[0].has("cpuacct") && mounts[1].has("freezer") && mounts[2].is_named() && mounts[3].v2);
        assert_eq!(unescape_mount_path("/mnt/a\\040b"), "/mnt/a b");
    }

    #[test]
    fn kinds_are_chosen_by_preference() {
        let mounts = parse_mountinfo(HYBRID);
        let v1 = v1_hierarchies(&mounts, &|m: &Mount| Hierarchy::new(m, "a", &CgroupParent::top(), "")).unwrap();
        assert_eq!(v1.len(), 2);
        assert_eq!(v1[0].base, Path::new("/sys/fs/cgroup/freezer/cosched/a"));
        assert!(matches!(cpu_source(&v1), CpuSource::Cpuacct(1)));
        assert!(signals_mount(&mounts).unwrap().v2);
        let pure_v1: Vec<Mount> = mounts.iter().filter(|m| !m.v2).cloned().collect();
        assert!(signals_mount(&pure_v1).unwrap().has("cpuacct"));
        assert!(signals_mount(&[]).is_none());
    }

    #[test]
    fn own_cgroup_is_found_per_hierarchy() {
        let mounts = parse_mountinfo(HYBRID);
        let self_cgroup = "4:cpu,cpuacct:/user/x\n6:freezer:/\n0::/system.slice/a.service\n";
        assert_eq!(own_cgroup_dir(&mounts[0], self_cgroup), Path::new("/sys/fs/cgroup/cpu,cpuacct/user/x"));
        assert_eq!(own_cgroup_dir(&mounts[1], self_cgroup), Path::new("/sys/fs/cgroup/freezer"));
        assert_eq!(own_cgroup_dir(&mounts[3], self_cgroup), Path::new("/sys/fs/cgroup/unified/system.slice/a.service"));
        assert_eq!(own_cgroup_dir(&mounts[2], self_cgroup), Path::new("/sys/fs/cgroup/systemd"));
        // Outside a cgroup namespace's root: never a place above the mount.
        assert_eq!(own_cgroup_dir(&mounts[3], "0::/../other\n"), Path::new("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn a_stop_pending_is_read_from_either_pending_mask() {
        let status =
            |sig: &str, shd: &str| format!("Name:\tsh\nState:\tD (disk sleep)\nSigPnd:\t{sig}\nShdPnd:\t{shd}\n");
        assert!(stop_pending(&status("0000000000000000", "0000000000040000")));
        assert!(stop_pending(&status("0000000000040000", "0000000000000000")));
        // SIGCONT (bit 18) and SIGTSTP (bit 20) are not SIGSTOP.
        assert!(!stop_pending(&status("0000000000020000", "0000000000080000")));
        assert!(!stop_pending("State:\tD (disk sleep)\n"));
    }

    #[test]
    fn proc_stat_parsing_survives_odd_names() {
        let line = "42 (a) b (c)) T 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 1 1 1 1";
        assert_eq!(parse_proc_stat(line), Some(('T', 12)));
        assert!(clock_ticks_per_s() > 0);
    }

    #[test]
    fn a_cgroup_parent_stays_below_the_mount() {
        let parent = CgroupParent::below_mount("/system.slice/cosched.service").unwrap();
        assert_eq!(parent.path(), Path::new("system.slice/cosched.service"));
        let mounts = parse_mountinfo(HYBRID);
        let v2 = Hierarchy::new(&mounts[3], "n1", &parent, "");
        assert_eq!(v2.base, Path::new("/sys/fs/cgroup/unified/system.slice/cosched.service/cosched/n1"));
        for bad in ["a/../..", "..", "./a", &"x/".repeat(2049)] {
            assert!(CgroupParent::below_mount(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn agent_names_cannot_escape() {
        for bad in ["", ".", "..", "a/b", "../x", ".hidden", "a b", &"x".repeat(65)] {
            assert_eq!(check_agent_name(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        for good in ["node-1", "a.b_c", "X9"] {
            check_agent_name(good).unwrap();
        }
    }
}
