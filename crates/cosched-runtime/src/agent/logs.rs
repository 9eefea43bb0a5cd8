//! Keeping the jobs' logs within bounds on a node.
//!
//! The logs live in `<state-dir>/logs`, on the file system that also holds the controller's database (on the
//! controller's node). Each is root's (0600) and written only by a root copy of the task's output
//! (`crate::agent::log_pump`), which keeps a reserve free on the file system and each log within `file_bytes` at
//! every write; users read them through `cosched logs`. Every `KEEPING_PERIOD` the agent also looks at the folder
//! and
//!
//! - frees the head of any log that takes more than `file_bytes` on disk, keeping its tail (what `cosched logs`
//!   shows): `fallocate(PUNCH_HOLE)` releases the blocks while the copy goes on writing at the end, and the file
//!   reads as zeros before the tail; where the file system cannot punch holes the file is emptied instead;
//! - does the same to a user's largest logs while all that user's logs on the node take more than `user_bytes`,
//!   and then removes that user's logs of jobs no longer running here, oldest first;
//! - removes the logs of jobs that no longer run here once they were last written `retention` ago.
//!
//! Sizes are what the files take on disk (their blocks), not their apparent length. A log's owner is in its name
//! (`job-<id>.u<uid>.<rank>.out`), which only root chooses: the files themselves are all root's, so that no user
//! can write one, take a lease on one (`F_SETLEASE`, which would make root's every open wait for its break) or
//! change its mode. Every open the agent makes in the folder is non-blocking and never follows a link all the same.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How often the agent keeps its logs within their bounds.
pub const KEEPING_PERIOD: Duration = Duration::from_secs(1);

/// What a log keeps when its head is freed: at least what `cosched logs` shows of it.
const TAIL_KEPT_BYTES: u64 = crate::wire::protocol::LOG_TAIL_BYTES;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogBounds {
    /// The most one log file may take on disk.
    pub file_bytes: u64,
    /// The most one user's logs on a node may take on disk together.
    pub user_bytes: u64,
    /// How long the logs of a job that no longer runs on the node stay (after their last write).
    pub retention: Duration,
    /// What the logs' file system keeps free of jobs' output (`crate::agent::log_pump`).
    pub reserve_bytes: u64,
}

impl Default for LogBounds {
    fn default() -> LogBounds {
        LogBounds {
            file_bytes: 64 << 20,
            user_bytes: 1 << 30,
            retention: Duration::from_secs(86_400),
            reserve_bytes: 64 << 20,
        }
    }
}

impl LogBounds {
    /// What each copy of a task's output keeps to.
    pub fn pump(&self) -> crate::agent::log_pump::PumpBounds {
        crate::agent::log_pump::PumpBounds { file_bytes: self.file_bytes, reserve_bytes: self.reserve_bytes }
    }
}

/// One file of the log folder.
#[derive(Clone, Debug)]
struct LogFile {
    path: PathBuf,
    uid: u32,
    /// On disk (blocks), which is what fills the file system.
    allocated: u64,
    len: u64,
    modified: SystemTime,
    /// The job it belongs to (`job-<id>.…`), if its name says.
    job: Option<u64>,
    /// The remote command it is the log of (`….exec-<n>.…`), if any.
    exec: Option<u64>,
}

/// What may still write logs on this node: the jobs that run here, and the remote commands still running (by their
/// number, the `<n>` of `exec-<n>`).
#[derive(Clone, Debug, Default)]
pub struct Writers {
    pub jobs: BTreeSet<u64>,
    pub execs: BTreeSet<u64>,
}

impl Writers {
    /// Only jobs run (no remote command).
    pub fn jobs(jobs: impl IntoIterator<Item = u64>) -> Writers {
        Writers { jobs: jobs.into_iter().collect(), execs: BTreeSet::new() }
    }
}

impl LogFile {
    /// Nothing writes it any more: its job ended here, or it is the log of a remote command that ended. A running
    /// job's ended commands count too: otherwise one job and many short commands would keep a 64 KiB tail each,
    /// beyond the user's bound (a reviewer kept 2.2 MiB under a 1 MiB bound).
    fn is_done(&self, writers: &Writers) -> bool {
        let job_ended = self.job.is_some_and(|job| !writers.jobs.contains(&job));
        job_ended || self.exec.is_some_and(|exec| !writers.execs.contains(&exec))
    }
}

/// A log opened for writing by the agent: never through a link, never waiting for a lease's break.
fn open_log(path: &Path) -> std::io::Result<File> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    std::fs::OpenOptions::new().write(true).custom_flags(flags.bits()).open(path)
}

/// Apply the bounds to the files of `dir`; `live` says what may still write there.
pub fn keep_within_bounds(dir: &Path, bounds: &LogBounds, live: &Writers) {
    let now = SystemTime::now();
    let mut files = log_files(dir);
    files.retain(|f| {
        let expired = f.is_done(live) && now.duration_since(f.modified).is_ok_and(|age| age >= bounds.retention);
        !(expired && remove(&f.path))
    });
    for file in files.iter_mut().filter(|f| f.allocated > bounds.file_bytes) {
        cut_head(file);
    }
    let mut by_user: BTreeMap<u32, Vec<LogFile>> = BTreeMap::new();
    for file in files {
        by_user.entry(file.uid).or_default().push(file);
    }
    for (uid, files) in by_user {
        keep_user_within(uid, files, bounds.user_bytes, live);
    }
    make_room_for_others(dir, bounds.reserve_bytes, live);
}

/// While the file system holds less than twice the reserve free, remove the logs of ended jobs, of the user whose
/// logs take the most first, oldest first: one user's ended jobs must not leave everyone else's output dropped
/// until their retention is up.
fn make_room_for_others(dir: &Path, reserve_bytes: u64, live: &Writers) {
    let wanted = reserve_bytes.saturating_mul(2);
    if free_bytes(dir).is_none_or(|free| free >= wanted) {
        return;
    }
    let mut ended: Vec<LogFile> = log_files(dir).into_iter().filter(|f| f.is_done(live)).collect();
    let mut by_user: BTreeMap<u32, u64> = BTreeMap::new();
    for file in &ended {
        *by_user.entry(file.uid).or_default() += file.allocated;
    }
    // The heaviest user's files first, each user's oldest first.
    ended.sort_by_key(|f| (std::cmp::Reverse(by_user[&f.uid]), f.uid, f.modified));
    for file in ended {
        if free_bytes(dir).is_none_or(|free| free >= wanted) {
            return;
        }
        remove(&file.path);
    }
}

/// Bytes of `path`'s file system that unprivileged users may still take.
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    let stats = nix::sys::statvfs::statvfs(path).ok()?;
    Some((stats.blocks_available() as u64).saturating_mul(stats.fragment_size() as u64))
}

/// Bring one user's logs under `user_bytes`: free the heads of the largest first, then remove the oldest logs of
/// jobs no longer running here.
fn keep_user_within(uid: u32, mut files: Vec<LogFile>, user_bytes: u64, live: &Writers) {
    let total = |files: &[LogFile]| files.iter().map(|f| f.allocated).sum::<u64>();
    if total(&files) <= user_bytes {
        return;
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.allocated));
    for i in 0..files.len() {
        if total(&files) <= user_bytes {
            return;
        }
        cut_head(&mut files[i]);
    }
    files.sort_by_key(|f| f.modified);
    while total(&files) > user_bytes {
        let Some(i) = files.iter().position(|f| f.is_done(live)) else { break };
        remove(&files.remove(i).path);
    }
    if total(&files) > user_bytes {
        crate::log_line!(
            "cosched agent: the logs of uid {uid} take {} bytes on this node, over the bound of {user_bytes}, in \
             files of running jobs only (each cut to its tail)",
            total(&files)
        );
    }
}

/// The regular files of `dir` (nothing else is ever made there; anything else is left alone).
fn log_files(dir: &Path) -> Vec<LogFile> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries
        .filter_map(|entry| {
            let meta = entry.path().symlink_metadata().ok().filter(|m| m.file_type().is_file())?;
            let name = entry.file_name().into_string().ok()?;
            Some(LogFile {
                path: entry.path(),
                uid: owner_of_name(&name).unwrap_or(meta.uid()),
                allocated: meta.blocks() * 512,
                len: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                job: job_of_name(&name),
                exec: exec_of_name(&name),
            })
        })
        .collect()
}

/// The job of a log's name: `job-<id>.u<uid>.<rank>.out`, `job-<id>.u<uid>.exec-<n>.err`, `job-<id>.hosts`.
fn job_of_name(name: &str) -> Option<u64> {
    name.strip_prefix("job-")?.split('.').next()?.parse().ok()
}

/// The remote command of a log's name: `job-<id>.u<uid>.exec-<n>.<stream>`.
fn exec_of_name(name: &str) -> Option<u64> {
    name.strip_prefix("job-")?.split('.').nth(2)?.strip_prefix("exec-")?.parse().ok()
}

/// The owner a log's name gives (`job-<id>.u<uid>.…`).
fn owner_of_name(name: &str) -> Option<u32> {
    name.strip_prefix("job-")?.split('.').nth(1)?.strip_prefix('u')?.parse().ok()
}

/// The name of the log of `stream` ("out", "err") of `job`'s task `task` (its rank, or `exec-<n>`), owned by `uid`.
pub fn log_name(job: u64, uid: u32, task: &str, stream: &str) -> String {
    format!("job-{job}.u{uid}.{task}.{stream}")
}

/// Free the head of a log (see [`free_head`]) and note what it takes now.
fn cut_head(file: &mut LogFile) {
    let Ok(handle) = open_log(&file.path) else { return };
    free_head(&handle);
    if let Ok(meta) = handle.metadata() {
        file.allocated = meta.blocks() * 512;
        file.len = meta.len();
    }
}

/// Free the head of the open log `file`, keeping its last `TAIL_KEPT_BYTES` (rounded to whole blocks); empty it
/// where the file system cannot punch holes. Its writer goes on at the end either way (logs are opened to append).
pub(crate) fn free_head(file: &File) {
    use nix::fcntl::{fallocate, FallocateFlags};
    use std::os::fd::AsRawFd;
    let block = 4096;
    // Its size now, not at the look: it may have grown since.
    let Ok(meta) = file.metadata() else { return };
    let head = meta.len().saturating_sub(TAIL_KEPT_BYTES) / block * block;
    let punch = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
    let freed = head > 0 && fallocate(file.as_raw_fd(), punch, 0, head as i64).is_ok();
    if !freed && meta.blocks() * 512 > TAIL_KEPT_BYTES + block {
        let _ = file.set_len(0);
    }
}

fn remove(path: &Path) -> bool {
    std::fs::remove_file(path).is_ok()
}

/// Remove every file of job `job` in `dir` (its logs and host file): a job whose cgroup is made new has none yet,
/// and files left under its number belong to another job (an id given again after the database was lost).
pub fn remove_job_files(dir: &Path, job: u64) {
    for file in log_files(dir).into_iter().filter(|f| f.job == Some(job)) {
        remove(&file.path);
    }
}

/// One log file, known by its path and by the file it named when it was made: a later file at the same path
/// (a command numbered again after the controller started anew) is another log.
#[derive(Clone, Debug)]
pub struct MadeLog {
    path: PathBuf,
    device: u64,
    inode: u64,
}

impl MadeLog {
    pub fn of(path: PathBuf, file: &std::fs::File) -> std::io::Result<MadeLog> {
        let made = file.metadata()?;
        Ok(MadeLog { path, device: made.dev(), inode: made.ino() })
    }

    /// Remove the log if nothing was written to it (an `exec` that printed nothing) and the path still names it.
    pub fn remove_if_empty(&self) {
        let still_it = |m: &std::fs::Metadata| m.dev() == self.device && m.ino() == self.inode;
        if self.path.symlink_metadata().is_ok_and(|m| m.file_type().is_file() && m.len() == 0 && still_it(&m)) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A fresh folder (mkdtemp: nobody else can have made it first or put links in it).
    fn folder(name: &str) -> PathBuf {
        tempfile::Builder::new().prefix(&format!("cosched-logs-{name}-")).tempdir().unwrap().keep()
    }

    fn write(path: &Path, bytes: usize, last: &str) {
        let mut file = std::fs::File::create(path).unwrap();
        file.write_all(&vec![b'x'; bytes]).unwrap();
        file.write_all(last.as_bytes()).unwrap();
        file.sync_all().unwrap();
    }

    /// Bounds where only a user's total can bind.
    fn user_bound(user_bytes: u64) -> LogBounds {
        LogBounds { file_bytes: 1 << 30, user_bytes, retention: Duration::from_secs(3600), reserve_bytes: 0 }
    }

    fn on_disk(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
    }

    #[test]
    fn a_long_log_keeps_its_tail_and_ended_jobs_logs_go_after_their_retention() {
        let dir = folder("bounds");
        let (long, old) = (dir.join("job-1.0.out"), dir.join("job-2.0.out"));
        write(&long, 4 << 20, "the end\n");
        write(&old, 10, "");
        let bounds =
            LogBounds { file_bytes: 1 << 20, user_bytes: 1 << 40, retention: Duration::ZERO, reserve_bytes: 0 };
        keep_within_bounds(&dir, &bounds, &Writers::jobs([1]));
        assert!(!old.exists(), "the ended job's log stayed");
        assert!(on_disk(&long) <= 2 * TAIL_KEPT_BYTES, "{} bytes on disk", on_disk(&long));
        let text = std::fs::read(&long).unwrap();
        assert_eq!(text.len(), (4 << 20) + 8, "the length stays, the head reads as zeros");
        assert!(text.ends_with(b"xthe end\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_system_near_its_reserve_loses_the_logs_of_ended_jobs_and_keeps_the_running_ones() {
        let dir = folder("pressure");
        let (running, ended) = (dir.join("job-1.u7.0.out"), dir.join("job-2.u7.0.out"));
        write(&running, 4096, "");
        write(&ended, 4096, "");
        let free = free_bytes(&dir).unwrap();
        let bounds = |reserve_bytes| LogBounds {
            file_bytes: 1 << 30,
            user_bytes: 1 << 40,
            retention: Duration::from_secs(3600),
            reserve_bytes,
        };
        keep_within_bounds(&dir, &bounds(0), &Writers::jobs([1]));
        assert!(ended.exists(), "removed with room to spare");
        // A reserve beyond what the file system has: it is under pressure whatever is removed.
        keep_within_bounds(&dir, &bounds(free + (1 << 40)), &Writers::jobs([1]));
        assert!(!ended.exists() && running.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_users_logs_together_are_cut_then_ended_ones_removed_oldest_first() {
        let dir = folder("user");
        for job in 1..=4 {
            write(&dir.join(format!("job-{job}.0.out")), 512 << 10, "tail\n");
        }
        let bounds = user_bound(200 << 10);
        keep_within_bounds(&dir, &bounds, &Writers::jobs([4]));
        let left: u64 = (1..=4).map(|job| on_disk(&dir.join(format!("job-{job}.0.out")))).sum();
        assert!(left <= 200 << 10, "{left} bytes left");
        assert!(dir.join("job-4.0.out").exists(), "a running job's log was removed");
        assert_eq!(job_of_name("job-12.u7.exec-3.err"), Some(12));
        assert_eq!(owner_of_name("job-12.u7.exec-3.err"), Some(7));
        assert_eq!(owner_of_name("job-12.hosts"), None);
        assert_eq!(job_of_name("notes"), None);
        assert_eq!(exec_of_name("job-12.u7.exec-3.err"), Some(3));
        assert_eq!(exec_of_name("job-12.u7.0.err"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Found by a reviewer: a command numbered again (the controller started anew) makes its log at the path of
    /// an older command's whose copy still drains; the older copy's end must not remove the newer, empty log.
    #[test]
    fn an_empty_log_goes_only_while_its_path_still_names_it() {
        let dir = folder("made");
        let path = dir.join("job-1.u7.exec-3.out");
        let made = |path: &Path| {
            let file = File::create(path).unwrap();
            (MadeLog::of(path.to_path_buf(), &file).unwrap(), file)
        };
        // The older copy holds its file open when the newer is made (so the two are different files).
        let (older, held) = made(&path);
        let _ = std::fs::remove_file(&path);
        let (newer, _) = made(&path);
        drop(held);
        older.remove_if_empty();
        assert!(path.exists(), "the older log's end removed the newer log");
        write(&path, 3, "");
        newer.remove_if_empty();
        assert!(path.exists(), "a log with output was removed");
        std::fs::File::create(&path).unwrap();
        newer.remove_if_empty();
        assert!(!path.exists(), "the empty log stayed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Found by a reviewer: one running job and many short remote commands kept a tail per command, beyond the
    /// user's bound. The logs of commands that ended go (oldest first); the running command's and the task's stay.
    #[test]
    fn a_running_jobs_ended_commands_give_their_logs_up_to_the_users_bound() {
        let dir = folder("execs");
        let task = dir.join("job-1.u7.0.out");
        write(&task, 64 << 10, "");
        for exec in 1..=8 {
            write(&dir.join(format!("job-1.u7.exec-{exec}.out")), 64 << 10, "");
        }
        let bounds = user_bound(256 << 10);
        let writers = Writers { jobs: BTreeSet::from([1]), execs: BTreeSet::from([8]) };
        keep_within_bounds(&dir, &bounds, &writers);
        let left: u64 = log_files(&dir).iter().map(|f| f.allocated).sum();
        assert!(left <= 256 << 10, "{left} bytes left");
        assert!(task.exists() && dir.join("job-1.u7.exec-8.out").exists(), "a log still written was removed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
