//! Per-thread scheduling controls, applied by the thread itself, and read back
//! from `/proc` so that what the kernel actually did can be reported.

use std::fmt;
use std::time::Duration;

use crate::sys;

/// Linux clamps a fair task's slice request to this range (EEVDF, 6.12+).
pub const SLICE_MIN: Duration = Duration::from_micros(100);
pub const SLICE_MAX: Duration = Duration::from_millis(100);

/// By how much the adjusting policies raise a stage's nice (our choice: the
/// thesis does not give its step; 5 is a quarter of the range above 0).
pub const ADJUST_NICE_STEP: i32 = 5;

const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;
const CAP_SYS_NICE: u32 = 23;

/// The fair-class policies a thread may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedPolicy {
    Normal,
    Batch,
    Idle,
}

impl SchedPolicy {
    fn to_linux(self) -> u32 {
        match self {
            SchedPolicy::Normal => SCHED_OTHER,
            SchedPolicy::Batch => SCHED_BATCH,
            SchedPolicy::Idle => SCHED_IDLE,
        }
    }

    /// The policy named by Linux's number, if it is one of the fair ones.
    pub fn from_linux(number: u32) -> Option<SchedPolicy> {
        match number {
            SCHED_OTHER => Some(SchedPolicy::Normal),
            SCHED_BATCH => Some(SchedPolicy::Batch),
            SCHED_IDLE => Some(SchedPolicy::Idle),
            _ => None,
        }
    }
}

impl fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchedPolicy::Normal => "normal",
            SchedPolicy::Batch => "batch",
            SchedPolicy::Idle => "idle",
        })
    }
}

/// Fixed controls for one thread, applied before its stages' `init`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Priority {
    pub nice: Option<i32>,
    pub policy: Option<SchedPolicy>,
    pub slice: Option<Duration>,
    pub cpus: Option<Vec<usize>>,
}

impl Priority {
    pub fn nice(mut self, nice: i32) -> Self {
        self.nice = Some(nice);
        self
    }
    pub fn policy(mut self, policy: SchedPolicy) -> Self {
        self.policy = Some(policy);
        self
    }
    pub fn slice(mut self, slice: Duration) -> Self {
        self.slice = Some(slice);
        self
    }
    pub fn cpus(mut self, cpus: Vec<usize>) -> Self {
        self.cpus = Some(cpus);
        self
    }
    pub fn is_default(&self) -> bool {
        *self == Priority::default()
    }
}

/// One control as asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    Nice(i32),
    Policy(SchedPolicy),
    Slice(Duration),
    Cpus(Vec<usize>),
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Control::Nice(n) => write!(f, "nice {n}"),
            Control::Policy(p) => write!(f, "policy {p}"),
            Control::Slice(s) => write!(f, "slice {:.1} ms", s.as_secs_f64() * 1e3),
            Control::Cpus(c) => write!(f, "cpus {c:?}"),
        }
    }
}

/// What became of one control on one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlOutcome {
    /// The thread group's name and copy number.
    pub thread: String,
    pub tid: i32,
    pub control: Control,
    /// `Err` says why the kernel refused it (typically missing privilege).
    pub result: Result<(), String>,
}

/// The calling thread's kernel id.
pub fn current_tid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// Applies every control in `priority` to the calling thread, each on its own,
/// and returns what happened to each one.
pub fn apply(priority: &Priority) -> Vec<(Control, Result<(), String>)> {
    let tid = current_tid();
    let mut outcomes = Vec::new();
    if let Some(policy) = priority.policy {
        outcomes.push((Control::Policy(policy), set_policy(tid, policy)));
    }
    if let Some(nice) = priority.nice {
        outcomes.push((Control::Nice(nice), set_nice(tid, nice)));
    }
    if let Some(slice) = priority.slice {
        outcomes.push((Control::Slice(slice), set_slice(tid, Some(slice))));
    }
    if let Some(cpus) = &priority.cpus {
        outcomes.push((Control::Cpus(cpus.clone()), set_cpus(tid, cpus)));
    }
    outcomes
}

fn explain(what: &str, err: std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("{what}: not permitted ({err}); needs CAP_SYS_NICE or a higher RLIMIT_NICE")
        }
        _ => format!("{what}: {err}"),
    }
}

/// `setpriority` on the thread id.
pub fn set_nice(tid: i32, nice: i32) -> Result<(), String> {
    sys::set_thread_nice(tid, nice).map_err(|e| explain(&format!("setpriority(tid {tid}, {nice})"), e))
}

/// Changes the fair policy, keeping nice and clearing any slice request.
pub fn set_policy(tid: i32, policy: SchedPolicy) -> Result<(), String> {
    let mut attr = sys::sched_getattr(tid).map_err(|e| explain("sched_getattr", e))?;
    attr.policy = policy.to_linux();
    attr.runtime_ns = 0;
    sys::sched_setattr(tid, &attr).map_err(|e| explain(&format!("sched_setattr(policy {policy})"), e))
}

/// Requests an EEVDF slice (clamped to 0.1–100 ms), or the default with `None`.
/// Checks `/proc` afterwards: kernels before 6.12 accept the call and ignore it.
pub fn set_slice(tid: i32, slice: Option<Duration>) -> Result<(), String> {
    let mut attr = sys::sched_getattr(tid).map_err(|e| explain("sched_getattr", e))?;
    let wanted_ns = slice.map_or(0, |s| s.clamp(SLICE_MIN, SLICE_MAX).as_nanos() as u64);
    attr.runtime_ns = wanted_ns;
    sys::sched_setattr(tid, &attr).map_err(|e| explain("sched_setattr(slice)", e))?;
    if wanted_ns == 0 {
        return Ok(());
    }
    match read_thread_sched(tid) {
        Ok(ThreadSched { slice_ns: Some(got), .. }) if got == wanted_ns => Ok(()),
        Ok(seen) => Err(format!(
            "the kernel did not apply the slice request ({wanted_ns} ns asked, {:?} ns in effect); it needs Linux 6.12 or later",
            seen.slice_ns
        )),
        Err(e) => Err(e),
    }
}

/// Pins the thread to `cpus`.
pub fn set_cpus(tid: i32, cpus: &[usize]) -> Result<(), String> {
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|e| format!("cpu {cpu}: {e}"))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(tid), &set)
        .map_err(|e| format!("sched_setaffinity(tid {tid}, {cpus:?}): {e}"))
}

/// Whether this process may lower a thread's nice back to `nice`: with
/// CAP_SYS_NICE, or when RLIMIT_NICE allows it.
pub fn may_lower_nice_to(nice: i32) -> bool {
    has_cap_sys_nice() || rlimit_nice_floor().is_some_and(|floor| nice >= floor)
}

fn rlimit_nice_floor() -> Option<i32> {
    let (soft, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NICE).ok()?;
    // RLIMIT_NICE n lets the nice go down to 20 - n.
    Some(20 - soft.min(40) as i32)
}

fn has_cap_sys_nice() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/thread-self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}

/// A thread's scheduling state as the kernel shows it in `/proc`.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSched {
    pub nice: i32,
    /// Linux's policy number (0 normal, 3 batch, 5 idle, ...).
    pub policy: u32,
    /// `se.slice` from `/proc/<pid>/task/<tid>/sched`, when the kernel shows it.
    pub slice_ns: Option<u64>,
    /// `Cpus_allowed_list`, expanded.
    pub cpus: Vec<usize>,
}

/// Reads a thread of this process back from `/proc/self/task/<tid>`.
pub fn read_thread_sched(tid: i32) -> Result<ThreadSched, String> {
    let dir = format!("/proc/self/task/{tid}");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).map_err(|e| format!("{dir}/{name}: {e}"));
    let stat = read("stat")?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).ok_or_else(|| format!("{dir}/stat: no ')'"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| -> Result<i64, String> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("{dir}/stat: field {n} missing or not a number"))
    };
    let nice = field(19)? as i32;
    let policy = field(41)? as u32;
    let slice_ns = read("sched").ok().and_then(|text| {
        text.lines()
            .find(|l| l.starts_with("se.slice"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse().ok())
    });
    let status = read("status")?;
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|list| parse_cpu_list(list.trim()))
        .ok_or_else(|| format!("{dir}/status: no Cpus_allowed_list"))??;
    Ok(ThreadSched { nice, policy, slice_ns, cpus })
}

/// Parses a kernel CPU list such as `0-3,6`.
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list {list:?} at {part:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}

/// When a stage changes its own priority while the pipeline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Adjust {
    #[default]
    Off,
    /// Lower the priority once, the first time ≥ 2 buffers wait in the output queue.
    LowerOnce,
    /// As `LowerOnce`, and raise it back whenever no other buffer waits.
    Reversible,
}

/// How an adjusting stage changes its priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lever {
    /// Nice up by [`ADJUST_NICE_STEP`]; back down when permitted.
    Nice,
    /// The longest slice request when lowered, the default one when raised:
    /// for a process that may not lower its nice again.
    Slice,
}

impl fmt::Display for Lever {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lever::Nice => "nice",
            Lever::Slice => "slice",
        })
    }
}

/// A priority change made while running.
#[derive(Debug, Clone, PartialEq)]
pub struct AdjustEvent {
    pub thread: String,
    /// The buffer being conveyed when the stage changed its priority.
    pub seq: u64,
    pub lowered: bool,
    pub lever: Lever,
    pub result: Result<(), String>,
}

/// The state of one adjusting thread.
#[derive(Debug)]
pub(crate) struct Adjuster {
    mode: Adjust,
    lever: Lever,
    tid: i32,
    base_nice: i32,
    lowered: bool,
    lowered_once: bool,
}

impl Adjuster {
    /// Chooses the lever from what this process is allowed, on the calling thread.
    pub(crate) fn new(mode: Adjust) -> Adjuster {
        let tid = current_tid();
        let base_nice = read_thread_sched(tid).map(|s| s.nice).unwrap_or(0);
        let lever = match mode {
            Adjust::Reversible if !may_lower_nice_to(base_nice) => Lever::Slice,
            _ => Lever::Nice,
        };
        Adjuster { mode, lever, tid, base_nice, lowered: false, lowered_once: false }
    }

    /// Looks at the output queue after conveying buffer `seq`; returns the
    /// change made, if any.
    pub(crate) fn observe(&mut self, thread: &str, seq: u64, waiting: usize) -> Option<AdjustEvent> {
        let lower = match self.mode {
            Adjust::Off => return None,
            Adjust::LowerOnce => !self.lowered_once && waiting >= 2,
            Adjust::Reversible => !self.lowered && waiting >= 2,
        };
        let raise = self.mode == Adjust::Reversible && self.lowered && waiting <= 1;
        if !lower && !raise {
            return None;
        }
        let result = match (self.lever, lower) {
            (Lever::Nice, true) => set_nice(self.tid, self.base_nice + ADJUST_NICE_STEP),
            (Lever::Nice, false) => set_nice(self.tid, self.base_nice),
            (Lever::Slice, true) => set_slice(self.tid, Some(SLICE_MAX)),
            (Lever::Slice, false) => set_slice(self.tid, None),
        };
        self.lowered = lower;
        self.lowered_once |= lower;
        Some(AdjustEvent { thread: thread.to_string(), seq, lowered: lower, lever: self.lever, result })
    }
}
