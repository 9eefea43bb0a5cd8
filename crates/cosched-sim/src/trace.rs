//! An optional log of scheduling decisions, for tests and for looking inside
//! small runs (`cosched sim --trace-events`), in time order (decisions at one
//! instant in the order they were made). A block the engine finds when it
//! charges a CPU's time (a compute that ended in I/O between two visits) is
//! made when that CPU is next charged: two such blocks at one instant on two
//! CPUs come in the order the CPUs were charged, which the engine's choice of
//! when to look at each CPU decides, not the model.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "what")]
pub enum TraceKind {
    JobStart {
        job: u32,
    },
    /// Task `process` of `job` is placed on this CPU (follows `JobStart`, one per task in rank order).
    TaskPlaced {
        job: u32,
        process: u32,
    },
    JobFinish {
        job: u32,
    },
    /// The process gets the CPU; `switch_cost` if a context switch is charged first.
    Dispatch {
        process: u32,
        switch_cost: bool,
    },
    /// Quantum expired: the process moves to the tail of `level`.
    Demote {
        process: u32,
        level: u8,
    },
    /// A higher level took the CPU at a tick.
    Preempt {
        process: u32,
    },
    Block {
        process: u32,
    },
    /// An I/O short enough to keep the CPU starts, as kernel work on it (`--io-keeps-cpu-below-us`).
    IoOnCpu {
        process: u32,
    },
    Wake {
        process: u32,
    },
    Exit {
        process: u32,
    },
    /// The gang slot changes to matrix `row` (`NO_ROW`: a slot with no gang job); this CPU's cell is `cell`.
    GangSwitch {
        row: u32,
        cell: Option<u32>,
    },
    /// A message lands in the endpoint of `process`.
    Deposit {
        process: u32,
    },
    /// The NIC interrupts the CPU for a message to `process` (spin-block's
    /// wake-up, or demand-based coscheduling).
    Interrupt {
        process: u32,
    },
    /// Periodic boost (or a yield) puts `process` at the head of level 59.
    Boost {
        process: u32,
        /// What the running process was doing.
        displaced: crate::metrics::Displaced,
    },
    /// Spin-yield: `process` drops itself to `level`.
    Yield {
        process: u32,
        level: u8,
    },
    /// The node scheduler moves `process` to this CPU from CPU `from` of
    /// the same node (EEVDF on nodes of several CPUs: wake placement and
    /// load balancing).
    Migrate {
        process: u32,
        from: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceEvent {
    pub time_ns: u64,
    pub cpu: u32,
    #[serde(flatten)]
    pub kind: TraceKind,
}
