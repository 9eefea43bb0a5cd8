//! The daemon's log: each line on stderr after the time it was written, in UTC to the millisecond
//! (`[2026-11-28T08:30:00.123Z] cosched controller: ...`), as Slurm's daemons stamp theirs. A log file or a
//! terminal keeps no time of its own; journald keeps its own beside it. UTC, so that the logs of nodes in different
//! time zones, and `cosched history`, speak one time.

use std::time::{SystemTime, UNIX_EPOCH};

/// Write one line of the daemon's log, stamped with the time, in one write: a reader of the log (or another
/// thread's line) never sees it in pieces, as it could the several writes of `eprintln!` on unbuffered stderr.
pub fn write(args: std::fmt::Arguments) {
    use std::io::Write;
    let line = format!("{} {args}\n", stamp(SystemTime::now()));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `[YYYY-MM-DDTHH:MM:SS.mmmZ]` for `time`.
pub fn stamp(time: SystemTime) -> String {
    let unix_ms = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    format!("[{}]", crate::calendar::utc_millis_text(unix_ms))
}

/// A line of the daemon's log (`eprintln!` with the time in front): see the module.
#[macro_export]
macro_rules! log_line {
    ($($arg:tt)*) => {
        $crate::log_line::write(format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_starts_with_the_time_in_brackets() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_764_318_600_123);
        assert_eq!(super::stamp(at), "[2025-11-28T08:30:00.123Z]");
    }
}
