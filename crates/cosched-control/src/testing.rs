//! Support for the tests of this crate and of the crates above it (`cosched_runtime::testing` adds the machine's
//! lock).

use std::io::Write;

/// Say loudly that a test (or part of one) did not run, and why. Written straight to the process's stderr: the
/// test harness captures `eprintln!` and shows it only for a failing test, which would hide every skip.
pub fn say_skipped(what: &str, reason: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {what}: {reason}");
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
