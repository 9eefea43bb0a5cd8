//! Support for the tests of this crate and of the crates above it.

pub use cosched_control::testing::*;

/// Where the test programs of one suite run take turns at the whole machine: in `/run`, which only root writes
/// (the tests that hold it run as root).
const WHOLE_MACHINE_LOCK: &str = "/run/cosched-tests-whole-machine.lock";

/// A hold on the whole machine, given back when dropped.
#[must_use = "the machine is held only while this lives"]
pub struct WholeMachine {
    _across_processes: Option<nix::fcntl::Flock<std::fs::File>>,
    _within_process: std::sync::MutexGuard<'static, ()>,
}

/// Held by the tests that play a whole cluster on this machine's CPUs: two clusters switching gangs on the same
/// wall-clock boundaries starve each other's gangs (one cosched per node is the supported set-up). `scripts/test`
/// runs the runtime's tests beside the other test programs, so the hold is a file lock across processes, and a
/// mutex within one so that its threads queue without polling. Plain load from other processes is fine. Without
/// root only the mutex is held (the tests that need the machine skip then).
pub fn whole_machine() -> WholeMachine {
    use std::os::unix::fs::OpenOptionsExt;
    static WITHIN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let within = WITHIN_PROCESS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let file =
        std::fs::OpenOptions::new().create(true).write(true).truncate(false).mode(0o600).open(WHOLE_MACHINE_LOCK);
    let across = file.ok().and_then(|file| nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok());
    WholeMachine { _across_processes: across, _within_process: within }
}
