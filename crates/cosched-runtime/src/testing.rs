//! Support for the tests of this crate and of the crates above it.

use std::io::Write;

/// Say loudly that a test (or part of one) did not run, and why. Written straight to the process's stderr: the
/// test harness captures `eprintln!` and shows it only for a failing test, which would hide every skip.
pub fn say_skipped(what: &str, reason: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {what}: {reason}");
}
