//! Where the core's records go. The daemon's are the SQLite database (`controller::storage`); a simulation's are
//! in memory (`MemoryRecords`), where a test can make writes fail and restart a core from what was written.

use crate::wire::jobs::JobRecord;
use crate::wire::protocol::{BackupStatus, StorageState, StorageStatus};
use std::collections::BTreeMap;

/// A node as the records keep it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub cpus: u32,
    pub mem_bytes: u64,
}

/// The records a core writes through. Every call returns only once the write is done or known to have failed:
/// a reply that depends on a record is built after the record is written.
pub trait Records: Send {
    /// For a request: write a new job, or say why not (then nothing may change).
    fn insert_job(&mut self, job: &JobRecord) -> Result<(), String>;
    /// For a request: write a change to a job, or say why not (then nothing may change).
    fn save_job(&mut self, job: &JobRecord) -> Result<(), String>;
    /// For an event that cannot wait: write a change to a job now, or once storage works again.
    fn save_job_or_hold(&mut self, job: &JobRecord);
    /// For the history's retention: remove the records of `ids`, all of jobs over, below `next_job_id`.
    fn delete_jobs(&mut self, ids: &[u64], next_job_id: u64);
    /// For an agent that connected: write its node now, or once storage works again.
    fn save_node_or_hold(&mut self, node: &NodeRow);
    /// Periodic work: find faults and repair them from everything the core holds.
    fn maintain(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]);
    fn status(&self) -> StorageStatus;
}

/// What the records held when the core started.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub jobs: Vec<JobRecord>,
    pub nodes: Vec<NodeRow>,
    /// The lowest id no job has had, as far as removed records tell (0 when none was removed).
    pub next_job_id: u64,
}

/// Records in memory, for simulations: what was written survives a core's restart (`loaded`), and writes can be
/// made to fail (`failing`). A failed write of an event is held and written by the next `maintain` that works, as
/// the database does.
#[derive(Clone, Debug, Default)]
pub struct MemoryRecords {
    pub jobs: BTreeMap<u64, JobRecord>,
    pub nodes: BTreeMap<String, NodeRow>,
    pub next_job_id: u64,
    /// While set, every write fails with this cause.
    pub failing: Option<String>,
    /// Some change is in memory only (a write failed): `maintain` writes everything anew.
    held: bool,
    pub writes: u64,
}

impl MemoryRecords {
    /// What a core restarted from these records loads.
    pub fn loaded(&self) -> Loaded {
        Loaded {
            jobs: self.jobs.values().cloned().collect(),
            nodes: self.nodes.values().cloned().collect(),
            next_job_id: self.next_job_id,
        }
    }

    fn write(&mut self, change: impl FnOnce(&mut Self)) -> Result<(), String> {
        if let Some(cause) = &self.failing {
            self.held = true;
            return Err(format!("storage error: {cause}; nothing was changed"));
        }
        self.writes += 1;
        change(self);
        Ok(())
    }
}

impl Records for MemoryRecords {
    fn insert_job(&mut self, job: &JobRecord) -> Result<(), String> {
        if self.jobs.contains_key(&job.id) {
            return Err(format!("job {} exists already in the database: nothing was changed", job.id));
        }
        self.write(|r| {
            r.jobs.insert(job.id, job.clone());
        })
    }
    fn save_job(&mut self, job: &JobRecord) -> Result<(), String> {
        self.write(|r| {
            r.jobs.insert(job.id, job.clone());
        })
    }
    fn save_job_or_hold(&mut self, job: &JobRecord) {
        let _ = self.save_job(job);
    }
    fn delete_jobs(&mut self, ids: &[u64], next_job_id: u64) {
        let _ = self.write(|r| {
            for id in ids {
                r.jobs.remove(id);
            }
            r.next_job_id = r.next_job_id.max(next_job_id);
        });
    }
    fn save_node_or_hold(&mut self, node: &NodeRow) {
        let _ = self.write(|r| {
            r.nodes.insert(node.name.clone(), node.clone());
        });
    }
    fn maintain(&mut self, jobs: &BTreeMap<u64, JobRecord>, nodes: &[NodeRow]) {
        if !self.held || self.failing.is_some() {
            return;
        }
        self.held = false;
        self.jobs = jobs.clone();
        self.nodes = nodes.iter().map(|n| (n.name.clone(), n.clone())).collect();
        self.writes += 1;
    }
    fn status(&self) -> StorageStatus {
        let faulted = self.failing.is_some() || self.held;
        StorageStatus {
            state: if faulted { StorageState::Error } else { StorageState::Ok },
            error: self.failing.clone(),
            since_unix_ms: 0,
            held_changes: u64::from(self.held),
            database: "memory".into(),
            backup: BackupStatus { path: String::new(), taken_unix_ms: None, current: false, error: None },
        }
    }
}
