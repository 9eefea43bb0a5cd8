//! The records the engine and its parts share: a process and a CPU, each
//! with the record its parts keep of it (their own types, see
//! [`super::parts`]).

use crate::endpoint::Inbox;
use crate::metrics::Breakdown;
use cosched_core::{Rng, SimTime};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Compute {
        remaining_ns: u64,
    },
    Io,
    /// Back from I/O: sends its messages as soon as it runs.
    Send,
    /// Waiting for one message from each neighbour.
    Recv,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcState {
    Running,
    /// Runnable but not on its CPU.
    Ready,
    Blocked,
    Exited,
}

pub(crate) const NO_PROC: u32 = u32::MAX;

/// Trace value of a gang switch to a slot with no matrix row (left to local jobs).
pub const NO_ROW: u32 = u32::MAX;

/// A process. The fields are in a fixed order, hottest first: first what
/// every visit and every periodic-boost walk reads (phase, endpoints, state,
/// its CPU, its iterations: 64 bytes), then what a visit to the running
/// process reads and writes, last what only a new iteration needs. With
/// thousands of processes the records outgrow the core's L1 cache, and a
/// walk reads four of them at every tick.
#[repr(C)]
pub(crate) struct Proc<NodeProc, WaitProc> {
    // -- read by every visit and walk: 64 bytes
    pub(crate) phase: Phase,
    /// Endpoint per neighbour (deposit times, some maybe in the future).
    pub(crate) inbox: [Inbox; 2],
    pub(crate) cpu: u32,
    pub(crate) iterations_done: u32,
    /// The job's iterations (a copy: the job's record is not touched per visit).
    pub(crate) iterations: u32,
    pub(crate) state: ProcState,
    pub(crate) neighbour_count: u8,
    /// Messages to each endpoint sent but still undecided at the node's
    /// interface. (A message is unsent, then undecided, then in the endpoint.)
    pub(crate) undecided: [u8; 2],
    /// Its exchange is its job's barrier (one endpoint: the release), not the ring.
    pub(crate) barrier: bool,
    // -- read and written by a visit to the running process
    /// The receive wait's record of the process.
    pub(crate) wait: WaitProc,
    /// The node scheduler's record of the process.
    pub(crate) sched: NodeProc,
    /// (Next to the parts' records: they may end on a 4-byte boundary.)
    pub(crate) job: u32,
    /// Length of the I/O that follows the current compute phase (drawn with
    /// it, so that the engine can look past the compute's end).
    pub(crate) io_next_ns: u64,
    /// The next iteration's compute and I/O, drawn when the receive starts
    /// (the same draws in the same order as drawing them after it), so that
    /// the engine can look past the receive's end.
    pub(crate) next_compute_ns: u64,
    pub(crate) next_io_ns: u64,
    pub(crate) neighbours: [u32; 2],
    /// The neighbours' nodes (a process may move between the CPUs of its
    /// node, never to another node): a send finds the
    /// interfaces without first reading the neighbours' records and CPUs.
    pub(crate) neighbour_nodes: [u32; 2],
    // -- once per iteration
    /// The job's nominal compute and I/O per iteration (copies).
    pub(crate) nominal_compute_ns: u64,
    pub(crate) nominal_io_ns: u64,
    pub(crate) rng: Rng,
    /// CPU time it used: computing and spinning (what its cgroup's `cpu.stat` counts; kernel switches aside).
    pub(crate) cpu_ns: u64,
    /// When it last left its CPU: a message that landed since, it has not seen (`BoostReceive::PerMessage`).
    pub(crate) off_cpu_since_ns: u64,
}

impl<NodeProc, WaitProc> Proc<NodeProc, WaitProc> {
    /// The latest of the first deposits in the endpoints it awaits,
    /// `Inbox::EMPTY_NS` when one is empty (0 when it awaits none). Without
    /// a loop over its 0, 1 or 2 neighbours: a branch on their number is
    /// mispredicted as often as not, and this is asked at most visits and
    /// of every resident at every periodic-boost walk.
    pub(crate) fn latest_first_deposit_ns(&self) -> u64 {
        let count = self.neighbour_count;
        let left = if count >= 1 { self.inbox[0].front_ns() } else { 0 };
        let right = if count >= 2 { self.inbox[1].front_ns() } else { 0 };
        left.max(right)
    }
}

pub(crate) struct Cpu<NodeCpu, ArrivalCpu> {
    pub(crate) node: u32,
    pub(crate) running: Option<u32>,
    /// The CPU is in the kernel (switching, interrupts, boosts) until then;
    /// `running` resumes after it.
    pub(crate) switch_until: SimTime,
    /// Part of the kernel period still to come that is overhead, not switching.
    pub(crate) overhead_pending_ns: u64,
    pub(crate) last_process: Option<u32>,
    /// Why `last_process` left the CPU (for the switch to the next).
    pub(crate) left_because: crate::metrics::SwitchCause,
    /// Processes placed on this CPU that have not exited (at most MPL), in
    /// increasing order (processes are numbered as they start).
    pub(crate) residents: Vec<u32>,
    /// The residents in `Phase::Io`, by (end of their I/O, process): who
    /// wakes next, without looking at every resident.
    pub(crate) in_io: Vec<(SimTime, u32)>,
    /// The first end in `in_io` (`SimTime::MAX`: none), for a visit's check.
    pub(crate) earliest_io_end: SimTime,
    /// Residents in `Phase::Recv`.
    pub(crate) residents_in_recv: u32,
    pub(crate) accounted_until: SimTime,
    pub(crate) time: Breakdown,
    /// Start of the current (or last) period of kernel work, which ends at `switch_until`.
    pub(crate) kernel_start: SimTime,
    /// The node scheduler's record of the CPU.
    pub(crate) sched: NodeCpu,
    /// The arrival reaction's record of the CPU.
    pub(crate) arrival: ArrivalCpu,
}

impl<NodeCpu, ArrivalCpu> Cpu<NodeCpu, ArrivalCpu> {
    /// Kernel work of `ns` from `now`, after any already under way (work that
    /// follows on at once extends the same period).
    pub(crate) fn add_kernel_work(&mut self, now: SimTime, ns: u64) {
        if self.switch_until < now {
            self.kernel_start = now;
        }
        self.switch_until = self.switch_until.max(now) + ns;
    }
}
