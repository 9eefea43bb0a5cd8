//! Workloads for cosched: where jobs (arrival time, size, nominal run time)
//! come from, and how their load is changed.
//!
//! - [`swf`]: Standard Workload Format traces, read (plain or gzip) and
//!   written, losing none of the 18 fields.
//! - [`alibaba_gpu`]: Alibaba's GPU cluster trace of 2023 (its pod lists) read
//!   as an SWF workload.
//! - [`lublin`]: the Lublin–Feitelson (2003) model, the default generator.
//! - [`hyper_erlang`]: the hyper-Erlang model of common order (Jann et al.
//!   1997), fitted per size class to a trace, saved as text and generated from.
//! - [`trace_model`]: a model fitted to a trace that keeps its sizes,
//!   burstiness (shared arrivals, daily cycle) and load; `workload fit`'s default.
//! - [`load`]: offered load and the scalings that change it.
//! - [`inspect`]: a summary of a workload, for `workload inspect`-style reports.
//!
//! Every generator takes a [`cosched_core::StreamSeed`] and draws from named
//! streams, so the same seed gives the same jobs byte for byte, whatever else
//! the run draws.

pub mod alibaba_gpu;
#[doc(hidden)]
pub mod fuzz_check;
pub mod hyper_erlang;
pub mod inspect;
pub mod load;
pub mod lublin;
mod param_text;
pub mod swf;
pub mod trace_model;

pub use swf::{ReadOptions, SwfError, TraceJob, Workload};
