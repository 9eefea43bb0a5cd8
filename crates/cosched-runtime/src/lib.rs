//! The real coscheduler: a controller that holds the job database and the
//! Ousterhout matrix, node agents that start, freeze, thaw and measure the
//! processes of jobs, and the API between them and their users.
//!
//! The scheduling decisions are `cosched-policy` code (`cluster::plan`), the
//! same crate the simulator drives; this crate only does the I/O around them.

// The runtime works in real time: the workspace's clock bans protect the
// simulator's determinism and do not apply here.
#![allow(clippy::disallowed_methods)]

pub mod agent;
pub mod auth;
pub mod client;
pub mod conn;
pub mod controller;
pub mod daemon;
pub mod db;
pub mod ender;
pub mod freezer;
pub mod gate;
pub mod http;
pub mod job_tag;
pub mod jobs;
pub mod launch;
pub mod logs;
pub mod metrics;
pub mod monitor;
pub mod mpi;
pub mod output_files;
pub mod pid_guard;
pub mod private_dir;
pub mod protocol;
pub mod seal;
pub mod server;
pub mod skew;
pub mod slurm;
pub mod slurm_time;
pub mod storage;
pub mod supervisor;
pub mod switcher;
pub mod systemd_notify;
pub mod testing;
pub mod watchdog;
