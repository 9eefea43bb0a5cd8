//! The controller's database: one SQLite file with the jobs and the nodes.
//!
//! A job is stored as its record in JSON beside the columns queries need
//! (id, owner, state); every change is written before the reply goes out, so
//! a controller restarted at any moment reloads what its users were told.
//!
//! The file is in WAL mode under an exclusive lock that the connection holds for its whole life
//! (`locking_mode = EXCLUSIVE`). SQLite then keeps the WAL index in the process's heap instead of a `-shm` file
//! mapped into memory: a mapped file that cannot be grown or read (a read-only or full file system, a file
//! truncated by someone else) kills the process with SIGBUS, where heap memory cannot. The lock also keeps a
//! second controller (or any other program) from writing the same file. Memory-mapped I/O of the database itself
//! stays off (`mmap_size = 0`) for the same reason. What to do when the file fails is `storage`'s business.

use crate::wire::jobs::JobRecord;
use rusqlite::{params, Connection, ErrorCode};
use std::io;
use std::path::Path;

pub struct Db {
    conn: Connection,
}

pub use cosched_control::controller::core::NodeRow;

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY,
        uid INTEGER NOT NULL,
        state TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS nodes (
        name TEXT PRIMARY KEY,
        cpus INTEGER NOT NULL,
        mem_bytes INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );";

/// An SQLite error as an I/O error whose kind says what can be done about it: `InvalidData` for a damaged file,
/// `WouldBlock` for a file another process holds.
fn sql_error(what: &str, path: &Path, e: rusqlite::Error) -> io::Error {
    io::Error::new(kind_of(&e), format!("database {}: {what}: {e}", path.display()))
}

fn kind_of(e: &rusqlite::Error) -> io::ErrorKind {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => io::ErrorKind::InvalidData,
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => io::ErrorKind::WouldBlock,
        _ => io::ErrorKind::Other,
    }
}

impl Db {
    /// Open the live database for writing (creating an empty one where there is none) and hold it. Fails when the
    /// file cannot be written or is damaged, never later with a signal.
    pub fn open(path: &Path) -> io::Result<Db> {
        // SQLite gives the -wal file the database file's mode: 0600 covers both.
        if !path.exists() {
            write_private(path, b"")?;
        }
        restrict_to_owner(path)?;
        let error = |what: &'static str| move |e| sql_error(what, path, e);
        let conn = Connection::open(path).map_err(error("open"))?;
        // Before WAL is entered: only then does the WAL index live in heap memory.
        conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE; PRAGMA mmap_size = 0;").map_err(error("settings"))?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(error("WAL mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(io::Error::other(format!("database {}: WAL mode refused ({mode})", path.display())));
        }
        // FULL: a change is on disk before its reply goes out, even across a power loss.
        conn.execute_batch("PRAGMA synchronous = FULL;").map_err(error("settings"))?;
        conn.execute_batch(SCHEMA).map_err(error("create tables"))?;
        let db = Db { conn };
        // A first write takes the exclusive lock now and proves the file writable.
        db.touch("opened_unix_ms")
            .map_err(|e| io::Error::new(e.kind(), format!("database {}: {e}", path.display())))?;
        Ok(db)
    }

    /// Write a new database file at `path` holding exactly these records. The file is a temporary one that the
    /// caller renames into place once it is complete, so it needs no journal; it is synced before this returns.
    pub fn write_fresh<'a>(
        path: &Path,
        jobs: impl IntoIterator<Item = &'a JobRecord>,
        nodes: &[NodeRow],
        next_job_id: u64,
    ) -> io::Result<()> {
        remove_if_present(path)?;
        remove_if_present(&with_suffix(path, "-journal"))?;
        write_private(path, b"")?;
        let error = |what: &'static str| move |e| sql_error(what, path, e);
        let mut conn = Connection::open(path).map_err(error("open"))?;
        conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;").map_err(error("settings"))?;
        conn.execute_batch(SCHEMA).map_err(error("create tables"))?;
        let tx = conn.transaction().map_err(error("begin"))?;
        for job in jobs {
            insert_job(&tx, job)?;
        }
        for node in nodes {
            insert_node(&tx, node)?;
        }
        set_meta(&tx, NEXT_JOB_ID, next_job_id).map_err(error("next job id"))?;
        tx.commit().map_err(error("commit"))?;
        conn.close().map_err(|(_, e)| sql_error("close", path, e))?;
        std::fs::File::open(path)?.sync_all()
    }

    /// A new job's record. A record with that id already there is an error (nothing is written): a record is
    /// never overwritten by an insert.
    pub fn insert_job(&self, job: &JobRecord) -> io::Result<()> {
        insert_job(&self.conn, job)
    }

    /// A change to a job's record, which must be there already.
    pub fn update_job(&self, job: &JobRecord) -> io::Result<()> {
        let record = serde_json::to_string(job).map_err(io::Error::other)?;
        let changed = self
            .conn
            .execute(
                "UPDATE jobs SET uid = ?2, state = ?3, record = ?4 WHERE id = ?1",
                params![job_key(job.id)?, job.uid, job.state.name(), record],
            )
            .map_err(|e| io::Error::new(kind_of(&e), format!("saving job {}: {e}", job.id)))?;
        if changed != 1 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("saving job {}: no such record", job.id)));
        }
        Ok(())
    }

    pub fn load_jobs(&self) -> io::Result<Vec<JobRecord>> {
        let mut stmt = self.conn.prepare("SELECT id, record FROM jobs ORDER BY id").map_err(read_error)?;
        let rows =
            stmt.query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))).map_err(read_error)?;
        let mut jobs = Vec::new();
        for row in rows {
            let (id, text) = row.map_err(read_error)?;
            let job = serde_json::from_str(&text).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("job {id} in the database is unreadable: {e}"))
            })?;
            jobs.push(job);
        }
        Ok(jobs)
    }

    /// Remove the records of `ids` (jobs past their history's retention) and remember that ids below `next_job_id`
    /// were given out: a job id is never given twice, even once every record that had it is gone. One transaction:
    /// either both happen or neither.
    pub fn delete_jobs(&self, ids: &[u64], next_job_id: u64) -> io::Result<()> {
        let error = |e: rusqlite::Error| io::Error::new(kind_of(&e), format!("removing old jobs: {e}"));
        // Unchecked: this connection is the only one and runs no other transaction meanwhile.
        let tx = self.conn.unchecked_transaction().map_err(error)?;
        set_meta(&tx, NEXT_JOB_ID, next_job_id).map_err(error)?;
        for &id in ids {
            tx.execute("DELETE FROM jobs WHERE id = ?1", [job_key(id)?]).map_err(error)?;
        }
        tx.commit().map_err(error)
    }

    /// The lowest id no job ever had, as far as removed records tell (`delete_jobs`); 0 when none was removed.
    pub fn load_next_job_id(&self) -> io::Result<u64> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [NEXT_JOB_ID], |r| r.get(0))
            .map(Some)
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })
            .map_err(read_error)?;
        text.map_or(Ok(0), |t| {
            t.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("meta {NEXT_JOB_ID}: {t:?}")))
        })
    }

    pub fn save_node(&self, node: &NodeRow) -> io::Result<()> {
        insert_node(&self.conn, node)
    }

    pub fn load_nodes(&self) -> io::Result<Vec<NodeRow>> {
        let mut stmt =
            self.conn.prepare("SELECT name, cpus, mem_bytes FROM nodes ORDER BY rowid").map_err(read_error)?;
        let rows = stmt
            .query_map([], |row| {
                Ok(NodeRow { name: row.get(0)?, cpus: row.get(1)?, mem_bytes: row.get::<_, i64>(2)? as u64 })
            })
            .map_err(read_error)?;
        rows.collect::<Result<_, _>>().map_err(read_error)
    }

    /// Is the file still writable and sound? A small write, a checkpoint that moves the WAL into the main file
    /// (so a file that no longer takes writes shows even when nothing else is written), then `quick_check` on what
    /// the file holds now: the page cache is dropped first, since under an exclusive lock SQLite trusts its cache
    /// and would check its own memory instead of the disk.
    pub fn check(&self) -> io::Result<()> {
        self.touch("checked_unix_ms")?;
        let busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(check_error("checkpoint"))?;
        if busy != 0 {
            return Err(io::Error::other("checkpoint: the write-ahead log could not be moved into the database"));
        }
        self.conn.execute_batch("PRAGMA shrink_memory").map_err(check_error("dropping the page cache"))?;
        let mut stmt = self.conn.prepare("PRAGMA quick_check").map_err(check_error("quick_check"))?;
        let findings: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect())
            .map_err(check_error("quick_check"))?;
        if findings != ["ok"] {
            let shown = findings.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("quick_check found damage: {shown}")));
        }
        Ok(())
    }

    /// A consistent copy of the database at `dest` (a new 0600 file, synced), through SQLite's backup API: a
    /// plain copy of a live WAL database misses what is still in the WAL. The copy uses a rollback journal, so
    /// reading it never creates WAL files beside it, and records when it was taken (`meta.backup_unix_ms`).
    pub fn backup_to(&self, dest: &Path) -> io::Result<()> {
        remove_if_present(dest)?;
        write_private(dest, b"")?;
        let error = |what: &'static str| move |e| sql_error(what, dest, e);
        let mut copy = Connection::open(dest).map_err(error("open"))?;
        // All pages in one step: the source is this connection's own file, which nobody else can be writing.
        let step = rusqlite::backup::Backup::new(&self.conn, &mut copy).and_then(|b| b.step(-1));
        match step.map_err(error("backup"))? {
            rusqlite::backup::StepResult::Done => {}
            other => return Err(io::Error::other(format!("backup to {}: stopped ({other:?})", dest.display()))),
        }
        copy.execute_batch("PRAGMA journal_mode = DELETE").map_err(error("journal mode"))?;
        set_meta(&copy, "backup_unix_ms", crate::wire::jobs::unix_ms_now()).map_err(error("timestamp"))?;
        copy.close().map_err(|(_, e)| sql_error("close", dest, e))?;
        std::fs::File::open(dest)?.sync_all()
    }

    /// Record the time under `key`: a write that proves the file takes writes.
    fn touch(&self, key: &str) -> io::Result<()> {
        set_meta(&self.conn, key, crate::wire::jobs::unix_ms_now())
            .map_err(|e| io::Error::new(kind_of(&e), e.to_string()))
    }
}

/// The `meta` key holding the lowest id never given out.
const NEXT_JOB_ID: &str = "next_job_id";

fn set_meta(conn: &Connection, key: &str, value: u64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2",
        params![key, value.to_string()],
    )
    .map(|_| ())
}

/// A plain insert: a conflict with an existing id fails the statement, which changes nothing.
fn insert_job(conn: &Connection, job: &JobRecord) -> io::Result<()> {
    let record = serde_json::to_string(job).map_err(io::Error::other)?;
    conn.execute(
        "INSERT INTO jobs (id, uid, state, record) VALUES (?1, ?2, ?3, ?4)",
        params![job_key(job.id)?, job.uid, job.state.name(), record],
    )
    .map_err(|e| {
        let kind = match e.sqlite_error_code() {
            Some(ErrorCode::ConstraintViolation) => io::ErrorKind::AlreadyExists,
            _ => kind_of(&e),
        };
        io::Error::new(kind, format!("saving new job {}: {e}", job.id))
    })?;
    Ok(())
}

/// A job id as SQLite's key, which is signed: ids above `i64::MAX` are never made (`controller::MAX_JOB_ID`).
fn job_key(id: u64) -> io::Result<i64> {
    i64::try_from(id).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("job id {id} is out of range")))
}

fn insert_node(conn: &Connection, node: &NodeRow) -> io::Result<()> {
    conn.execute(
        "INSERT INTO nodes (name, cpus, mem_bytes) VALUES (?1, ?2, ?3)
         ON CONFLICT(name) DO UPDATE SET cpus = ?2, mem_bytes = ?3",
        params![node.name, node.cpus, node.mem_bytes as i64],
    )
    .map_err(|e| io::Error::new(kind_of(&e), format!("saving node {}: {e}", node.name)))?;
    Ok(())
}

fn read_error(e: rusqlite::Error) -> io::Error {
    io::Error::new(kind_of(&e), format!("reading: {e}"))
}

fn check_error(what: &'static str) -> impl Fn(rusqlite::Error) -> io::Error {
    move |e| io::Error::new(kind_of(&e), format!("{what}: {e}"))
}

/// `path` with `suffix` appended to its file name (`cosched.db` → `cosched.db-wal`).
pub fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

pub fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io::Error::new(e.kind(), format!("removing {}: {e}", path.display())))
        }
        _ => Ok(()),
    }
}

/// Make a file readable and writable by its owner (root) alone; its journal files follow it.
pub fn restrict_to_owner(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for file in [path.to_path_buf(), with_suffix(path, "-wal"), with_suffix(path, "-shm")] {
        match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io::Error::new(e.kind(), format!("{}: {e}", file.display())))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Write a file created with mode 0600 (never readable by others, not even for a moment).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::jobs::Identity;
    use cosched_policy::cluster::{JobClass, Mode};

    fn temp_db(name: &str) -> std::path::PathBuf {
        // A fresh folder (mkdtemp: nobody else can have made it first).
        let dir = tempfile::Builder::new().prefix(&format!("cosched-db-{name}-")).tempdir().unwrap().keep();
        dir.join("cosched.db")
    }

    fn stored_record(db: &Db, id: u64) -> String {
        db.conn.query_row("SELECT record FROM jobs WHERE id = ?1", [id as i64], |r| r.get(0)).unwrap()
    }

    #[test]
    fn class_and_mode_are_stored_by_name_as_before_the_enums() {
        let db = Db::open(&temp_db("names")).unwrap();
        let job = JobRecord::new(7, &Identity { uid: 1, gid: 1, admin: false }, JobClass::Standby, true, 1);
        db.insert_job(&job).unwrap();
        let record = stored_record(&db, 7);
        assert!(record.contains(r#""class":"standby","mode":"local""#), "{record}");
        let loaded = db.load_jobs().unwrap();
        assert_eq!((loaded[0].class, loaded[0].mode), (JobClass::Standby, Mode::Local));
        assert_eq!(loaded, [job]);
    }

    #[test]
    fn an_unknown_class_or_mode_in_the_database_is_an_error_naming_the_job() {
        let db = Db::open(&temp_db("unknown")).unwrap();
        let job = JobRecord::new(7, &Identity { uid: 1, gid: 1, admin: false }, JobClass::Batch, false, 1);
        db.insert_job(&job).unwrap();
        let garble = |from: &str, to: &str| {
            let record = stored_record(&db, 7).replace(from, to);
            db.conn.execute("UPDATE jobs SET record = ?1 WHERE id = 7", [record]).unwrap();
            db.load_jobs().unwrap_err().to_string()
        };
        let error = garble(r#""class":"batch""#, r#""class":"royal""#);
        assert!(error.contains("job 7") && error.contains(r#"unknown class "royal""#), "{error}");
        let error = garble(r#""class":"royal","mode":"gang""#, r#""class":"batch","mode":"solo""#);
        assert!(error.contains("job 7") && error.contains(r#"unknown mode "solo""#), "{error}");
    }

    #[test]
    fn an_insert_never_overwrites_a_record_and_an_update_needs_one() {
        let db = Db::open(&temp_db("insert")).unwrap();
        let owner = Identity { uid: 1, gid: 1, admin: false };
        let first = JobRecord::new(7, &owner, JobClass::Batch, false, 1);
        db.insert_job(&first).unwrap();
        let intruder = JobRecord::new(7, &Identity { uid: 2, gid: 2, admin: false }, JobClass::Batch, false, 1);
        let refused = db.insert_job(&intruder).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists, "{refused}");
        assert_eq!(db.load_jobs().unwrap(), std::slice::from_ref(&first));
        let missing = db.update_job(&JobRecord::new(8, &owner, JobClass::Batch, false, 1)).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound, "{missing}");
        assert!(db.insert_job(&JobRecord::new(u64::MAX, &owner, JobClass::Batch, false, 1)).is_err());
        let mut ended = first;
        ended.state = crate::wire::jobs::JobState::Finished;
        db.update_job(&ended).unwrap();
        assert_eq!(db.load_jobs().unwrap(), [ended]);
    }
}
