//! Keeping the controller's records when its storage fails.
//!
//! The controller's memory holds every record (jobs and nodes) and is never behind the database: a request is
//! written before memory changes, an event changes memory whether or not it could be written. So whatever happens
//! to the file — it becomes read-only or full, is deleted, replaced or corrupted — the fix is the same: write the
//! whole state from memory into a fresh file (a temporary file, synced, renamed over the old one). Meanwhile:
//!
//! - a request that cannot be written is refused and changes nothing (`save_job`);
//! - an event that cannot wait (a job ended, an agent connected) changes memory and is held until the fresh file
//!   is written (`save_job_or_hold`, `save_node_or_hold`);
//! - the fault is shown in `status` and logged once when it starts, once per new retry error, once when it ends.
//!
//! Faults are found by the writes themselves and by `maintain`, from the controller's periodic tick: the path
//! must still name the file that was opened (a deleted or replaced file would take writes that go nowhere), and
//! every `CHECK_PERIOD` the file must take a write and pass `quick_check`. While the file is sound, a consistent
//! copy is kept in `backup/cosched.db` (SQLite's backup API), taken at most every `BACKUP_AFTER_CHANGE` after
//! changes and every `BACKUP_PERIOD` anyway.
//!
//! At start the daemon refuses a damaged, unwritable or locked database, and a missing one when a backup or a
//! write-ahead log says there was one, with a message that says what to do: starting empty there would forget
//! every job.

use crate::controller::core::{Loaded, Records};
use crate::controller::db::{remove_if_present, with_suffix, Db, NodeRow};
use crate::wire::jobs::{unix_ms_now, JobRecord};
use crate::wire::protocol::{BackupStatus, StorageState, StorageStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a request that could not be written was refused.
fn refused_for(cause: &str) -> String {
    format!("storage error: {cause}; nothing was changed (see `cosched status`; retry once it is ok)")
}

/// How often the file must prove that it takes writes and is sound.
const CHECK_PERIOD: Duration = Duration::from_secs(5);
/// How often a faulted storage is tried again.
const RETRY_PERIOD: Duration = Duration::from_secs(1);
/// The shortest time between two backups while records change.
const BACKUP_AFTER_CHANGE: Duration = Duration::from_secs(5);
/// A backup at least this often, changes or not (it shows the backup still works).
const BACKUP_PERIOD: Duration = Duration::from_secs(3600);

const DATABASE_FILE: &str = "cosched.db";
const BACKUP_DIR: &str = "backup";

/// Where the docs say how to restore.
const RESTORE_DOCS: &str = "docs/security.md, \"Storage and backups\"";

/// A record changed in memory that the database does not have yet.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Held {
    Job(u64),
    Node(String),
}

#[derive(Debug)]
struct Fault {
    cause: String,
    since_unix_ms: u64,
    /// The last retry's error, if it differed from the cause (logged once per change).
    retry_error: Option<String>,
}

#[derive(Debug, Default)]
struct Backups {
    taken_unix_ms: Option<u64>,
    /// The last attempt, successful or not (attempts are rate-limited either way).
    tried_at: Option<Instant>,
    /// The backup holds every change the database holds, and memory holds nothing more.
    current: bool,
    error: Option<String>,
}

pub struct Storage {
    path: PathBuf,
    backup_path: PathBuf,
    /// `None` between closing a failed file and opening its replacement.
    db: Option<Db>,
    /// (device, inode) of the file `db` has open.
    file_id: Option<(u64, u64)>,
    fault: Option<Fault>,
    held: BTreeSet<Held>,
    ok_since_unix_ms: u64,
    checked_at: Instant,
    retried_at: Option<Instant>,
    backups: Backups,
    /// The lowest id no removed record had: kept when the file is written anew, so that ids are never reused.
    next_job_id: u64,
}

impl Storage {
    /// Open `<state_dir>/cosched.db` at start, or refuse with a message that says what to do.
    pub fn open(state_dir: &Path) -> io::Result<(Storage, Loaded)> {
        let path = state_dir.join(DATABASE_FILE);
        let backup_path = state_dir.join(BACKUP_DIR).join(DATABASE_FILE);
        refuse_lost_database(&path, &backup_path)?;
        check_writable(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{e}; make it writable and start again: cosched does not run without its records"),
            )
        })?;
        let (db, loaded) = open_and_load(&path).map_err(|e| explain_open_failure(e, &path, &backup_path))?;
        let storage = Storage {
            file_id: Some(file_id(&path)?),
            path,
            backup_path,
            db: Some(db),
            fault: None,
            held: BTreeSet::new(),
            ok_since_unix_ms: unix_ms_now(),
            checked_at: Instant::now(),
            retried_at: None,
            backups: Backups::default(),
            next_job_id: loaded.next_job_id,
        };
        Ok((storage, loaded))
    }

    /// For a request: write a new job, or say why not (then nothing may change). A record with its id already
    /// there is refused, never overwritten; it is not a fault of the storage.
    pub fn insert_job(&mut self, job: &JobRecord) -> Result<(), String> {
        let mut exists = false;
        self.write(|db| match db.insert_job(job) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                exists = true;
                Ok(())
            }
            other => other,
        })
        .map_err(|e| refused_for(&e))?;
        if exists {
            return Err(format!("job {} exists already in the database: nothing was changed", job.id));
        }
        Ok(())
    }

    /// For a request: write a change to a job, or say why not (then nothing may change).
    pub fn save_job(&mut self, job: &JobRecord) -> Result<(), String> {
        self.write(|db| db.update_job(job)).map_err(|e| refused_for(&e))
    }

    /// For an event that cannot wait: write a change to a job now, or when storage works again.
    pub fn save_job_or_hold(&mut self, job: &JobRecord) {
        if self.write(|db| db.update_job(job)).is_err() {
            self.held.insert(Held::Job(job.id));
        }
    }

    /// For the history's retention: remove the records of `ids`, all of jobs over, below `next_job_id`. A failure is
    /// a fault like any other; the file written anew from memory then lacks them too.
    pub fn delete_jobs(&mut self, ids: &[u64], next_job_id: u64) {
        self.next_job_id = self.next_job_id.max(next_job_id);
        let _ = self.write(|db| db.delete_jobs(ids, next_job_id));
    }

    /// For an agent that connected: write its node now, or when storage works again (the node is kept anyway).
    pub fn save_node_or_hold(&mut self, node: &NodeRow) {
        if self.write(|db| db.save_node(node)).is_err() {
            self.held.insert(Held::Node(node.name.clone()));
        }
    }

    fn write(&mut self, op: impl FnOnce(&Db) -> io::Result<()>) -> Result<(), String> {
        if let Some(fault) = &self.fault {
            return Err(fault.cause.clone());
        }
        let result = match &self.db {
            Some(db) => op(db).map_err(|e| e.to_string()),
            None => Err("the database is not open".to_string()),
        };
        self.backups.current = false;
        result.inspect_err(|cause| self.set_fault(cause.clone()))
    }

    /// Periodic work (the controller's tick): find faults, repair them from `jobs` and `nodes` (everything the
    /// controller holds), keep the backup.
    pub fn maintain(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]) {
        let now = Instant::now();
        let backup_due = self.backup_due(now);
        if self.fault.is_none() {
            if let Err(cause) = self.check_file(now, backup_due) {
                self.set_fault(cause);
            }
        }
        if self.fault.is_some() && self.retried_at.is_none_or(|at| now.duration_since(at) >= RETRY_PERIOD) {
            self.retried_at = Some(now);
            self.repair(jobs, nodes);
        }
        if self.fault.is_none() && backup_due {
            self.back_up(now);
        }
    }

    /// Is the path still the file that was opened, and (when due) does the file take writes and pass its check?
    fn check_file(&mut self, now: Instant, full_check: bool) -> Result<(), String> {
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(format!("the database file {} was deleted", self.path.display()))
            }
            Err(e) => return Err(format!("the database file {}: {e}", self.path.display())),
            Ok(meta) if Some(id_of(&meta)) != self.file_id => {
                return Err(format!("the database file {} was replaced by another file", self.path.display()))
            }
            Ok(_) => {}
        }
        if !full_check && now.duration_since(self.checked_at) < CHECK_PERIOD {
            return Ok(());
        }
        self.checked_at = now;
        let db = self.db.as_ref().ok_or("the database is not open")?;
        db.check().map_err(|e| {
            format!("the database {} failed its check (a write, a checkpoint, quick_check): {e}", self.path.display())
        })
    }

    /// Write everything into a fresh file in place of the failed one; on success the fault is over.
    fn repair(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]) {
        match self.rewrite(jobs, nodes) {
            Ok(()) => {
                crate::log_line!(
                    "cosched controller: storage works again: {} written anew from memory ({} jobs, {} nodes; {} \
                     changes had been held)",
                    self.path.display(),
                    jobs.len(),
                    nodes.len(),
                    self.held.len()
                );
                self.fault = None;
                self.held.clear();
                self.ok_since_unix_ms = unix_ms_now();
                self.checked_at = Instant::now();
                self.backups.current = false;
            }
            Err(e) => {
                let Some(fault) = self.fault.as_mut() else { return };
                if fault.retry_error.as_deref() != Some(e.as_str()) {
                    crate::log_line!("cosched controller: storage still at fault (retrying every second): {e}");
                    fault.retry_error = Some(e);
                }
            }
        }
    }

    fn rewrite(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]) -> Result<(), String> {
        // Closed first: closing any descriptor of the file, as the check below does, would drop the process's
        // POSIX locks on it, which SQLite's exclusive lock is.
        self.db = None;
        self.file_id = None;
        let fresh = with_suffix(&self.path, ".new");
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("state directory {}: {e}", dir.display()))?;
        // Fail early, before writing everything, while the old file still refuses to be replaced (immutable).
        check_writable(&self.path).map_err(|e| e.to_string())?;
        let next_job_id = jobs.keys().next_back().map_or(0, |id| id.saturating_add(1)).max(self.next_job_id);
        Db::write_fresh(&fresh, jobs.values(), nodes, next_job_id).map_err(|e| e.to_string())?;
        // The old file's WAL must never be applied to the new file.
        for journal in ["-wal", "-shm"] {
            remove_if_present(&with_suffix(&self.path, journal)).map_err(|e| e.to_string())?;
        }
        std::fs::rename(&fresh, &self.path)
            .map_err(|e| format!("replacing {} with {}: {e}", self.path.display(), fresh.display()))?;
        sync_dir(dir).map_err(|e| format!("syncing {}: {e}", dir.display()))?;
        let db = Db::open(&self.path).map_err(|e| e.to_string())?;
        self.file_id = Some(file_id(&self.path).map_err(|e| e.to_string())?);
        self.db = Some(db);
        Ok(())
    }

    fn set_fault(&mut self, cause: String) {
        if self.fault.is_some() {
            return;
        }
        crate::log_line!(
            "cosched controller: storage fault: {cause}; requests that change anything are refused and events are \
             kept in memory until the database can be written again"
        );
        self.fault = Some(Fault { cause, since_unix_ms: unix_ms_now(), retry_error: None });
    }

    fn backup_due(&self, now: Instant) -> bool {
        match self.backups.tried_at {
            None => true,
            Some(at) => {
                let since = now.duration_since(at);
                since >= BACKUP_PERIOD || (!self.backups.current && since >= BACKUP_AFTER_CHANGE)
            }
        }
    }

    /// Copy the (just checked) database to the backup: a temporary file, synced, renamed over the last backup.
    fn back_up(&mut self, now: Instant) {
        self.backups.tried_at = Some(now);
        let taken = self.take_backup();
        match (&taken, &self.backups.error) {
            (Err(e), previous) if previous.as_ref() != Some(e) => {
                crate::log_line!("cosched controller: backup failed: {e}")
            }
            (Ok(()), Some(_)) => crate::log_line!("cosched controller: backups work again"),
            _ => {}
        }
        match taken {
            Ok(()) => {
                self.backups.taken_unix_ms = Some(unix_ms_now());
                self.backups.current = true;
                self.backups.error = None;
            }
            Err(e) => self.backups.error = Some(e),
        }
    }

    fn take_backup(&self) -> Result<(), String> {
        let db = self.db.as_ref().ok_or("the database is not open")?;
        let dir = self.backup_path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| format!("backup directory {}: {e}", dir.display()))?;
        let fresh = with_suffix(&self.backup_path, ".new");
        db.backup_to(&fresh).map_err(|e| e.to_string())?;
        std::fs::rename(&fresh, &self.backup_path)
            .map_err(|e| format!("replacing {} with {}: {e}", self.backup_path.display(), fresh.display()))?;
        sync_dir(dir).map_err(|e| format!("syncing {}: {e}", dir.display()))
    }

    /// For `status`: whether storage works, since when, what is held, and the backup.
    pub fn status(&self) -> StorageStatus {
        let (state, error, since_unix_ms) = match &self.fault {
            None => (StorageState::Ok, None, self.ok_since_unix_ms),
            Some(f) => {
                let error = match &f.retry_error {
                    Some(retry) => format!("{}; retrying: {retry}", f.cause),
                    None => f.cause.clone(),
                };
                (StorageState::Error, Some(error), f.since_unix_ms)
            }
        };
        StorageStatus {
            state,
            error,
            since_unix_ms,
            held_changes: self.held.len() as u64,
            database: self.path.to_string_lossy().into_owned(),
            backup: BackupStatus {
                path: self.backup_path.to_string_lossy().into_owned(),
                taken_unix_ms: self.backups.taken_unix_ms,
                current: self.backups.current && self.fault.is_none(),
                error: self.backups.error.clone(),
            },
        }
    }
}

fn open_and_load(path: &Path) -> io::Result<(Db, Loaded)> {
    let db = Db::open(path)?;
    db.check()?;
    let loaded = Loaded { jobs: db.load_jobs()?, nodes: db.load_nodes()?, next_job_id: db.load_next_job_id()? };
    Ok((db, loaded))
}

/// A database that is missing (or empty) while its backup or its write-ahead log is there was lost: starting with
/// an empty one would forget every job, so say how to restore instead.
fn refuse_lost_database(path: &Path, backup: &Path) -> io::Result<()> {
    let present = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    let wal = with_suffix(path, "-wal");
    if present || !(backup.exists() || wal.exists()) {
        return Ok(());
    }
    let mut message = format!("the database {} is missing or empty", path.display());
    if backup.exists() {
        message += &format!(
            ", but a backup exists ({}{}). Restore it: `cp {} {}` (removing {} first if it is there) and start \
             again; to start with an empty database instead, move the backup aside first",
            backup.display(),
            age_of(backup),
            backup.display(),
            path.display(),
            wal.display()
        );
    } else {
        message += &format!(
            ", but its write-ahead log {} is there. Put the database back, or move the log aside to start with an \
             empty database",
            wal.display()
        );
    }
    Err(io::Error::other(format!("{message} ({RESTORE_DOCS})")))
}

/// Can the database (and its WAL) be opened for writing? SQLite would silently open a read-only file read-only.
/// Never while the database is open: closing a descriptor of the file drops the process's locks on it.
fn check_writable(path: &Path) -> io::Result<()> {
    for file in [path.to_path_buf(), with_suffix(path, "-wal")] {
        match std::fs::OpenOptions::new().write(true).open(&file) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "the database file {} cannot be written ({e}; see `lsattr`, `chattr -i`, read-only mounts, \
                         free space)",
                        file.display()
                    ),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn explain_open_failure(e: io::Error, path: &Path, backup: &Path) -> io::Error {
    let restore = if backup.exists() {
        format!(
            "Restore the last backup ({}{}): with cosched stopped, `rm -f {}; cp {} {}`, then start again",
            backup.display(),
            age_of(backup),
            with_suffix(path, "-wal").display(),
            backup.display(),
            path.display()
        )
    } else {
        format!("There is no backup at {}; move the database aside to start with an empty one", backup.display())
    };
    let message = match e.kind() {
        io::ErrorKind::InvalidData => format!("the database {} is damaged ({e}). {restore}", path.display()),
        io::ErrorKind::WouldBlock => format!(
            "the database {} is in use by another process (another cosched controller with the same \
             --state-dir?): {e}",
            path.display()
        ),
        _ => format!("the database {} cannot be used ({e}). {restore}", path.display()),
    };
    io::Error::new(e.kind(), format!("{message} ({RESTORE_DOCS})"))
}

/// ", taken N s ago" from the file's modification time.
fn age_of(file: &Path) -> String {
    let age = std::fs::metadata(file).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
    age.map(|a| format!(", taken {} s ago", a.as_secs())).unwrap_or_default()
}

fn id_of(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

fn file_id(path: &Path) -> io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|m| id_of(&m))
}

/// Make a rename in `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The daemon's records: the SQLite database and its backups.
impl Records for Storage {
    fn insert_job(&mut self, job: &JobRecord) -> Result<(), String> {
        Storage::insert_job(self, job)
    }
    fn save_job(&mut self, job: &JobRecord) -> Result<(), String> {
        Storage::save_job(self, job)
    }
    fn save_job_or_hold(&mut self, job: &JobRecord) {
        Storage::save_job_or_hold(self, job)
    }
    fn delete_jobs(&mut self, ids: &[u64], next_job_id: u64) {
        Storage::delete_jobs(self, ids, next_job_id)
    }
    fn save_node_or_hold(&mut self, node: &NodeRow) {
        Storage::save_node_or_hold(self, node)
    }
    fn maintain(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]) {
        Storage::maintain(self, jobs, nodes)
    }
    fn status(&self) -> StorageStatus {
        Storage::status(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::jobs::{Identity, JobState};
    use cosched_policy::cluster::JobClass;

    /// A fresh folder (mkdtemp: nobody else can have made it first), kept for a look if the test fails.
    fn temp_dir(name: &str) -> PathBuf {
        tempfile::Builder::new().prefix(&format!("cosched-storage-{name}-")).tempdir().unwrap().keep()
    }

    fn job(id: u64) -> JobRecord {
        JobRecord::new(id, &Identity { uid: 1000, gid: 1000, admin: false }, JobClass::Batch, false, 1)
    }

    fn node() -> NodeRow {
        NodeRow { name: "n1".into(), cpus: 4, mem_bytes: 1 << 30 }
    }

    /// Open, save jobs 1 and 2 and the node; return the storage and what memory holds.
    fn with_two_jobs(dir: &Path) -> (Storage, BTreeMap<u64, JobRecord>) {
        let (mut storage, loaded) = Storage::open(dir).unwrap();
        assert!(loaded.jobs.is_empty());
        let jobs: BTreeMap<u64, JobRecord> = [(1, job(1)), (2, job(2))].into();
        for j in jobs.values() {
            storage.insert_job(j).unwrap();
        }
        storage.save_node_or_hold(&node());
        (storage, jobs)
    }

    fn reopen(dir: &Path) -> Loaded {
        Storage::open(dir).unwrap().1
    }

    #[test]
    fn removed_records_stay_removed_and_their_ids_are_never_given_again() {
        let dir = temp_dir("removed");
        let (mut storage, mut jobs) = with_two_jobs(&dir);
        jobs.remove(&2);
        storage.delete_jobs(&[2], 3);
        assert!(storage.fault.is_none(), "{:?}", storage.fault);
        drop(storage);
        let loaded = reopen(&dir);
        assert_eq!(loaded.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1]);
        assert_eq!(loaded.next_job_id, 3, "job 2 was given out");
        // Written anew from memory (which holds job 1 alone), the file still says so.
        let (mut storage, _) = Storage::open(&dir).unwrap();
        std::fs::remove_file(dir.join(DATABASE_FILE)).unwrap();
        storage.maintain(&jobs, &[node()]);
        assert!(storage.fault.is_none(), "{:?}", storage.fault);
        drop(storage);
        assert_eq!(reopen(&dir).next_job_id, 3);
    }

    #[test]
    fn a_deleted_database_is_written_anew_from_memory() {
        let dir = temp_dir("deleted");
        let (mut storage, mut jobs) = with_two_jobs(&dir);
        std::fs::remove_file(dir.join(DATABASE_FILE)).unwrap();
        // The deletion is not seen by a write (it goes to the deleted file) but by the next check.
        let mut ended = job(2);
        ended.state = JobState::Finished;
        storage.save_job_or_hold(&ended);
        jobs.insert(2, ended);
        storage.maintain(&jobs, &[node()]);
        assert!(storage.fault.is_none(), "{:?}", storage.fault);
        drop(storage);
        let loaded = reopen(&dir);
        assert_eq!(loaded.jobs.len(), 2);
        assert_eq!(loaded.jobs[1].state, JobState::Finished);
        assert_eq!(loaded.nodes, [node()]);
    }

    #[test]
    fn a_database_overwritten_in_place_is_found_damaged_and_written_anew() {
        let dir = temp_dir("garbage");
        let (mut storage, jobs) = with_two_jobs(&dir);
        storage.maintain(&jobs, &[node()]); // checkpoint: the records are in the main file now
        std::fs::write(dir.join(DATABASE_FILE), vec![0x5a; 64 * 1024]).unwrap();
        storage.checked_at -= CHECK_PERIOD;
        storage.maintain(&jobs, &[node()]);
        assert!(storage.fault.is_none(), "{:?}", storage.fault);
        drop(storage);
        assert_eq!(reopen(&dir).jobs.len(), 2);
    }

    #[test]
    fn a_failed_request_changes_nothing_and_an_event_is_held_until_storage_works() {
        let dir = temp_dir("held");
        let (mut storage, mut jobs) = with_two_jobs(&dir);
        storage.set_fault("test fault".into());
        let refused = storage.insert_job(&job(3)).unwrap_err();
        assert!(refused.contains("test fault") && refused.contains("nothing was changed"), "{refused}");
        let mut ended = job(1);
        ended.state = JobState::Failed;
        storage.save_job_or_hold(&ended);
        jobs.insert(1, ended);
        assert_eq!(storage.status().held_changes, 1);
        assert_eq!(storage.status().state, StorageState::Error);
        storage.maintain(&jobs, &[node()]);
        assert_eq!(storage.status().state, StorageState::Ok);
        drop(storage);
        let loaded = reopen(&dir);
        assert_eq!(
            loaded.jobs.iter().map(|j| (j.id, j.state)).collect::<Vec<_>>(),
            [(1, JobState::Failed), (2, JobState::Queued)]
        );
    }

    #[test]
    fn backups_are_consistent_private_and_a_lost_or_damaged_database_is_refused_with_how_to_restore() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("backup");
        let (mut storage, jobs) = with_two_jobs(&dir);
        storage.maintain(&jobs, &[node()]);
        assert!(storage.status().backup.current);
        let backup = dir.join(BACKUP_DIR).join(DATABASE_FILE);
        assert_eq!(std::fs::metadata(&backup).unwrap().permissions().mode() & 0o777, 0o600);
        let copy = rusqlite::Connection::open(&backup).unwrap();
        let count: i64 = copy.query_row("SELECT count(*) FROM jobs", [], |r| r.get(0)).unwrap();
        assert_eq!(count, 2);
        drop(copy);
        let busy = Storage::open(&dir).err().unwrap().to_string();
        assert!(busy.contains("in use by another process"), "{busy}");
        drop(storage);

        std::fs::write(dir.join(DATABASE_FILE), b"SQLite format 3\0 and then garbage, garbage, garbage").unwrap();
        let damaged = Storage::open(&dir).err().unwrap().to_string();
        assert!(damaged.contains("damaged") && damaged.contains("cp "), "{damaged}");
        std::fs::remove_file(dir.join(DATABASE_FILE)).unwrap();
        let lost = Storage::open(&dir).err().unwrap().to_string();
        assert!(lost.contains("missing") && lost.contains("a backup exists"), "{lost}");
        std::fs::copy(&backup, dir.join(DATABASE_FILE)).unwrap();
        assert_eq!(reopen(&dir).jobs.len(), 2);
    }
}
