//! The controller's decisions and what crosses its links, with no I/O: the crate the daemon
//! (`cosched-runtime`), the simulator (`cosched-sim`, scheme GS-cosched) and the simulation tester
//! (`controller::simulation`, `cosched simtest`) all drive.
//!
//! - `controller::core`: the state machine of every rule — requests, admission, the plan, the idle rule, time
//!   limits, history — fed requests, agents' messages and the time, leaving effects to carry out;
//! - `controller`: its settings; `controller::{metrics, skew}`: the figures it keeps;
//! - `wire`: the messages between users, controller and agents (`wire::{protocol, jobs, output_files}`);
//! - `schedule`: the job set an agent runs in a slice, from the schedule the controller sends it;
//! - `slurm`, `slurm_time`: Slurm's host lists and the arithmetic of Slurm jobs' time limits.
//!
//! What does I/O — sockets, SQLite, the clock, cgroups, running Slurm's commands — is `cosched-runtime`'s.

pub mod calendar;
pub mod controller;
pub mod schedule;
pub mod slurm;
pub mod slurm_time;
#[doc(hidden)]
pub mod testing;
pub mod wire;
