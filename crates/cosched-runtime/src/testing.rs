//! Support for the tests of this crate and of the crates above it.

use std::io::Write;

/// Say loudly that a test (or part of one) did not run, and why. Written straight to the process's stderr: the
/// test harness captures `eprintln!` and shows it only for a failing test, which would hide every skip.
pub fn say_skipped(what: &str, reason: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {what}: {reason}");
}

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

/// The reference OpenMetrics parser (`prometheus_client`, Debian's `python3-prometheus-client` under
/// `/usr/bin/python3`) run over `text`: per family a line "name type unit", per sample a line "name label=value ...
/// value". `None` when the parser is not installed; `Some(Err(...))` with its complaint when it refuses the text.
pub fn parse_openmetrics(text: &str) -> Option<Result<String, String>> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(PYTHON)
        .args(["-c", OPENMETRICS_PARSER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let text = text.to_string();
    // Written from a thread: a large text would otherwise fill the pipe while the parser's output fills the other.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    match out.status.code() {
        Some(0) => Some(Ok(String::from_utf8_lossy(&out.stdout).into_owned())),
        Some(NO_PARSER) => None,
        _ => Some(Err(String::from_utf8_lossy(&out.stderr).into_owned())),
    }
}

/// Debian's Python, where `python3-prometheus-client` installs (a `python3` earlier in the path may be another).
const PYTHON: &str = "/usr/bin/python3";
const NO_PARSER: i32 = 3;
const OPENMETRICS_PARSER: &str = r#"
import sys
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    sys.exit(3)
for family in text_string_to_metric_families(sys.stdin.read()):
    print(family.name, family.type, family.unit)
    for s in family.samples:
        print(s.name, " ".join(f"{k}={v}" for k, v in s.labels.items()), s.value)
"#;
