//! The real coscheduler: a controller that holds the job database and the
//! Ousterhout matrix, node agents that start, freeze, thaw and measure the
//! processes of jobs, and the API between them and their users.
//!
//! The scheduling decisions are `cosched-policy` code (`cluster::plan`), the
//! same crate the simulator drives; this crate only does the I/O around them.
//!
//! Three parts, a folder each:
//! - `controller`: the job database, the plan, the request server, the
//!   monitor and its metrics (`controller::{db, storage, server, monitor,
//!   metrics, skew}`);
//! - `agent`: a node's side, which starts, freezes, thaws, measures and ends
//!   the jobs' processes (`agent::{launch, supervisor, switcher, freezer,
//!   ender, logs, mpi, pid_guard, watchdog}`);
//! - `wire`: what crosses a connection between them and their users
//!   (`wire::{protocol, conn, auth, seal, client, http, jobs, output_files}`).
//!
//! Beside them, what both sides use: `daemon` (starting either or both),
//! `gate` (connection limits), `job_tag`, `private_dir`, `slurm`,
//! `slurm_time`, `systemd_notify`, `testing`. Nothing in `wire` uses the
//! controller or the agent; the agent uses nothing of the controller's; the
//! controller reads two of the agent's constants (the default slice, and how
//! long an agent may take to kill a job).

// The runtime works in real time: the workspace's clock bans protect the
// simulator's determinism and do not apply here.
#![allow(clippy::disallowed_methods)]

pub mod agent;
pub mod controller;
pub mod daemon;
pub mod gate;
pub mod job_tag;
pub mod log_line;
pub mod private_dir;
pub use cosched_control::calendar;
pub use cosched_control::slurm;
pub mod slurm_time;
pub mod systemd_notify;
pub mod testing;
pub mod trusted_source;
pub mod wire;
