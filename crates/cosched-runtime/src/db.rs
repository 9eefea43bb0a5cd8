//! The controller's database: one SQLite file with the jobs and the nodes.
//!
//! A job is stored as its record in JSON beside the columns queries need
//! (id, owner, state); every change is written before the reply goes out, so
//! a controller restarted at any moment reloads what its users were told.

use crate::jobs::JobRecord;
use rusqlite::{params, Connection};
use std::path::Path;

pub struct Db {
    conn: Connection,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub cpus: u32,
    pub mem_bytes: u64,
}

fn sql_error(what: &str, path: &Path, e: rusqlite::Error) -> std::io::Error {
    std::io::Error::other(format!("database {}: {what}: {e}", path.display()))
}

impl Db {
    pub fn open(path: &Path) -> std::io::Result<Db> {
        // SQLite gives the -wal and -shm files the database file's mode: 0600 covers all three.
        if !path.exists() {
            write_private(path, b"")?;
        }
        restrict_to_owner(path)?;
        let conn = Connection::open(path).map_err(|e| sql_error("open", path, e))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
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
             );",
        )
        .map_err(|e| sql_error("create tables", path, e))?;
        Ok(Db { conn })
    }

    pub fn save_job(&self, job: &JobRecord) -> std::io::Result<()> {
        let record = serde_json::to_string(job).map_err(std::io::Error::other)?;
        self.conn
            .execute(
                "INSERT INTO jobs (id, uid, state, record) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id) DO UPDATE SET uid = ?2, state = ?3, record = ?4",
                params![job.id as i64, job.uid, job.state.name(), record],
            )
            .map_err(|e| std::io::Error::other(format!("saving job {}: {e}", job.id)))?;
        Ok(())
    }

    pub fn load_jobs(&self) -> std::io::Result<Vec<JobRecord>> {
        let mut stmt = self.conn.prepare("SELECT id, record FROM jobs ORDER BY id").map_err(std::io::Error::other)?;
        let rows = stmt
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
            .map_err(std::io::Error::other)?;
        let mut jobs = Vec::new();
        for row in rows {
            let (id, text) = row.map_err(std::io::Error::other)?;
            let job = serde_json::from_str(&text)
                .map_err(|e| std::io::Error::other(format!("job {id} in the database is unreadable: {e}")))?;
            jobs.push(job);
        }
        Ok(jobs)
    }

    pub fn save_node(&self, node: &NodeRow) -> std::io::Result<()> {
        self.conn
            .execute(
                "INSERT INTO nodes (name, cpus, mem_bytes) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET cpus = ?2, mem_bytes = ?3",
                params![node.name, node.cpus, node.mem_bytes as i64],
            )
            .map_err(|e| std::io::Error::other(format!("saving node {}: {e}", node.name)))?;
        Ok(())
    }

    pub fn load_nodes(&self) -> std::io::Result<Vec<NodeRow>> {
        let mut stmt = self
            .conn
            .prepare("SELECT name, cpus, mem_bytes FROM nodes ORDER BY rowid")
            .map_err(std::io::Error::other)?;
        let rows = stmt
            .query_map([], |row| {
                Ok(NodeRow { name: row.get(0)?, cpus: row.get(1)?, mem_bytes: row.get::<_, i64>(2)? as u64 })
            })
            .map_err(std::io::Error::other)?;
        rows.collect::<Result<_, _>>().map_err(std::io::Error::other)
    }
}

/// Make a file readable and writable by its owner (root) alone; its journal files follow it.
pub fn restrict_to_owner(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for file in [path.to_path_buf(), path.with_extension("db-wal"), path.with_extension("db-shm")] {
        match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(e.kind(), format!("{}: {e}", file.display())))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Write a file created with mode 0600 (never readable by others, not even for a moment).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}
