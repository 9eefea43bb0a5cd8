//! Copying a task's output into its log, bounded at every write.
//!
//! A task never holds its log file: its stdout and stderr are pipes, and a root process of the daemon (the task's
//! supervisor, or a `__pump` beside a remote command) copies what comes out of them into the log, which is root's
//! (mode 0600; users read it through `cosched logs`). So the bounds hold at each write, not at the agent's next look:
//!
//! - a write that would leave less than `reserve_bytes` free on the log's file system (counting what unprivileged
//!   users may still take) is dropped, so that the controller's database beside the logs always has that room; a
//!   line in the log says where output was dropped;
//! - once the log takes more than `file_bytes` on disk, its head is freed and its tail kept (as the agent's look
//!   does, `crate::agent::logs`).
//!
//! The pipe is always drained: a task whose output is dropped goes on running, as it would writing to a full disk
//! whose errors it ignores.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The subcommand of the agent's binary that runs [`run_pump`] (stdin to stdout).
pub const PUMP_SUBCOMMAND: &str = "__pump";

/// What one copy may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PumpBounds {
    /// The most the log may take on disk before its head is freed.
    pub file_bytes: u64,
    /// What the log's file system keeps free of users' output.
    pub reserve_bytes: u64,
}

const CHUNK_BYTES: usize = 64 << 10;

/// What a copy still takes from the pipe once its task has ended: what the task wrote before it ended, not what a
/// process it left behind goes on writing (which ends with the job).
const LAST_WORDS_BYTES: u64 = 1 << 20;

/// Copy `from` into `to` within `bounds` until every writer of `from` has closed it or, once `task_ended` is set,
/// until the pipe holds nothing more (a process the task left behind may keep it open until the job ends).
pub fn pump(mut from: impl Read + AsFd, mut to: File, bounds: PumpBounds, task_ended: &AtomicBool) {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut dropping = false;
    let mut after_end = 0u64;
    loop {
        let ended = task_ended.load(Ordering::Acquire);
        if ended && (after_end > LAST_WORDS_BYTES || !readable_within(&from, 0)) {
            return;
        }
        if !ended && !readable_within(&from, 100) {
            continue;
        }
        let n = match from.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if ended {
            after_end += n as u64;
        }
        let fits = free_bytes(&to).is_some_and(|free| free >= bounds.reserve_bytes.saturating_add(n as u64));
        if !fits {
            if !dropping {
                let _ = to.write_all(dropped_note(bounds.reserve_bytes).as_bytes());
            }
            dropping = true;
            continue;
        }
        dropping = false;
        if to.write_all(&buffer[..n]).is_err() {
            continue;
        }
        if to.metadata().is_ok_and(|m| m.blocks() * 512 > bounds.file_bytes) {
            crate::agent::logs::free_head(&to);
        }
    }
}

/// Whether `from` has something to read, or its writers are gone, within `timeout_ms`.
fn readable_within(from: &impl AsFd, timeout_ms: u16) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(from.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(timeout_ms)).is_ok_and(|ready| ready > 0)
}

fn dropped_note(reserve_bytes: u64) -> String {
    format!("\n[cosched: output dropped here: the file system of the logs is down to its reserve of {reserve_bytes} bytes]\n")
}

/// Bytes of `file`'s file system that unprivileged users may still take.
fn free_bytes(file: &File) -> Option<u64> {
    let stats = nix::sys::statvfs::fstatvfs(file).ok()?;
    Some((stats.blocks_available() as u64).saturating_mul(stats.fragment_size() as u64))
}

/// Start `<program> __pump` copying into `log` (in a process group of its own, so that a Ctrl-C meant for the
/// agent does not reach it, and outliving a restart of the agent); the returned child's stdin is the pipe to give
/// the command as its output.
pub fn spawn_pump(program: &Path, log: File, bounds: PumpBounds) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    Command::new(program)
        .arg(PUMP_SUBCOMMAND)
        .args([bounds.file_bytes.to_string(), bounds.reserve_bytes.to_string()])
        .stdin(Stdio::piped())
        .stdout(log)
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
}

/// The `__pump FILE_BYTES RESERVE_BYTES` subcommand: copy stdin into stdout within the bounds.
pub fn run_pump(args: &[String]) -> i32 {
    let numbers: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let [file_bytes, reserve_bytes] = numbers[..] else {
        eprintln!("cosched {PUMP_SUBCOMMAND}: expected FILE_BYTES RESERVE_BYTES, got {args:?}");
        return 2;
    };
    let Ok(stdout) = std::io::stdout().as_fd().try_clone_to_owned() else { return 1 };
    let never = AtomicBool::new(false);
    pump(std::io::stdin().lock(), File::from(stdout), PumpBounds { file_bytes, reserve_bytes }, &never);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_in(dir: &Path) -> File {
        std::fs::OpenOptions::new().append(true).create(true).open(dir.join("log")).unwrap()
    }

    /// Copy `text`, written into a pipe by another thread, into `log` within `bounds`.
    fn pump_text(text: Vec<u8>, log: File, bounds: PumpBounds) {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let writing = std::thread::spawn(move || writer.write_all(&text).unwrap());
        pump(reader, log, bounds, &AtomicBool::new(false));
        writing.join().unwrap();
    }

    #[test]
    fn output_is_copied_whole_within_the_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"line one\nline two\n".repeat(10_000);
        pump_text(text.clone(), log_in(dir.path()), PumpBounds { file_bytes: 1 << 30, reserve_bytes: 0 });
        assert_eq!(std::fs::read(dir.path().join("log")).unwrap(), text);
    }

    #[test]
    fn a_log_past_its_bound_keeps_its_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = vec![b'x'; 8 << 20];
        text.extend_from_slice(b"THE-END\n");
        pump_text(text, log_in(dir.path()), PumpBounds { file_bytes: 1 << 20, reserve_bytes: 0 });
        let meta = std::fs::metadata(dir.path().join("log")).unwrap();
        assert!(meta.blocks() * 512 <= (1 << 20) + CHUNK_BYTES as u64 + 4096, "{} bytes on disk", meta.blocks() * 512);
        let kept = std::fs::read(dir.path().join("log")).unwrap();
        assert!(kept.ends_with(b"THE-END\n"));
    }

    #[test]
    fn nothing_is_written_into_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path());
        let free = free_bytes(&log).unwrap();
        // A reserve above what is free: every chunk is dropped, and the log says so once.
        pump_text(vec![b'x'; 1 << 20], log, PumpBounds { file_bytes: 1 << 30, reserve_bytes: free + (1 << 30) });
        let kept = std::fs::read_to_string(dir.path().join("log")).unwrap();
        assert_eq!(kept.matches("output dropped here").count(), 1, "{kept}");
        assert!(!kept.contains('x'));
    }

    #[test]
    fn once_its_task_has_ended_a_copy_takes_what_is_left_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"last words\n").unwrap();
        // The writer stays open, as a process the task left behind would keep it.
        pump(reader, log_in(dir.path()), PumpBounds { file_bytes: 1 << 30, reserve_bytes: 0 }, &AtomicBool::new(true));
        assert_eq!(std::fs::read_to_string(dir.path().join("log")).unwrap(), "last words\n");
        drop(writer);
    }
}
