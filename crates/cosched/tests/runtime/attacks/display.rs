//! Text a user chooses shown to others: terminal controls and forged lines in what `cosched status` prints.

use super::ATTACKER;
use crate::harness::*;

/// A command line with terminal controls: a title and clipboard write (OSC), a screen clear, a carriage return, a
/// forged second row, an 8-bit CSI and a right-to-left override.
const HOSTILE_ARGUMENT: &str =
    "x\u{1b}]0;owned\u{7}\u{1b}]52;c;ZWNobyBvd25lZA==\u{7}\u{1b}[2J\r\n 99  root  express  gang  running\u{9b}31m\u{202e}z";

/// Root (who sees every command line) and every user under `--public-data` print `cosched status` in a terminal:
/// a user's command line went there raw, escapes, carriage returns and line feeds included, so a user could set
/// an administrator's terminal title or clipboard, clear the screen, and add rows that looked like other users'
/// jobs. Every cell is printed with its control and invisible characters escaped, one row per job.
#[test]
fn terminal_controls_in_a_command_line_reach_status_escaped_on_one_row() {
    if skip_unless_root("terminal_controls_in_a_command_line_reach_status_escaped_on_one_row") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--public-data"]);
    let job = daemon.submit_as(Some(ATTACKER), &["--", "sleep", "300", HOSTILE_ARGUMENT]);
    for viewer in [None, Some(super::OTHER_USER)] {
        let out = match viewer {
            None => daemon.client(&["status"]),
            Some(uid) => daemon.client_as(uid, &["status"]),
        };
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let raw: Vec<char> =
            text.chars().filter(|&c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c)).collect();
        assert!(raw.is_empty(), "{viewer:?} got raw controls {raw:?} in:\n{text}");
        let rows: Vec<&str> = text.lines().filter(|l| l.contains(" running") || l.contains("root  express")).collect();
        assert_eq!(rows.len(), 1, "{viewer:?}: one job, rows:\n{text}");
        assert!(rows[0].trim_start().starts_with(&format!("{job} ")) && rows[0].contains("\\u{1b}]0;owned"), "{text}");
    }
}
