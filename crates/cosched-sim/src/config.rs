//! Every parameter of the simulated machine, with the defaults of the spec.
//! Values the reference study left open are marked *our choice* in `docs/model.md`.

use crate::engine::node_scheduler::os::OsScheduler;
use crate::scheme::policy::Scheme;
use cosched_core::time::{NS_PER_MS, NS_PER_S, NS_PER_US};
pub use cosched_policy::cluster::Backfill;
use cosched_policy::cluster::{ClusterShape, PlanSettings};
use serde::{Deserialize, Serialize};

/// Number of priority levels of the node scheduler (0 lowest, 59 highest).
pub const LEVELS: usize = 60;
pub const TOP_LEVEL: u8 = (LEVELS - 1) as u8;

/// Network and interface model. One-way latency of an `n`-byte message is
/// `latency_base_ns + latency_ns_per_byte * n`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkConfig {
    pub latency_base_ns: f64,
    pub latency_ns_per_byte: f64,
    /// Time a message occupies the sending or the receiving interface.
    pub nic_ns_per_message: u64,
    pub shm_base_ns: f64,
    pub shm_ns_per_byte: f64,
    pub message_bytes: u32,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            latency_base_ns: 25_000.0,
            // 160.48 µs for 4096 bytes, so that L(4096) = 185.48 µs as required (see docs/model.md).
            latency_ns_per_byte: 39.179_687_5,
            nic_ns_per_message: 10 * NS_PER_US,
            shm_base_ns: 2_000.0,
            shm_ns_per_byte: 1.0,
            message_bytes: 4096,
        }
    }
}

impl NetworkConfig {
    pub fn latency_ns(&self, bytes: u32) -> u64 {
        (self.latency_base_ns + self.latency_ns_per_byte * bytes as f64).round() as u64
    }
    pub fn shm_latency_ns(&self, bytes: u32) -> u64 {
        (self.shm_base_ns + self.shm_ns_per_byte * bytes as f64).round() as u64
    }
}

/// CPU-time costs of the scheduling mechanisms.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostConfig {
    pub context_switch_ns: u64,
    pub gang_switch_ns: u64,
    pub interrupt_ns: u64,
    pub queue_move_ns: u64,
    pub endpoint_check_ns: u64,
    pub gang_quantum_ns: u64,
    /// A system call of the dynamic schemes (spin-block's block, spin-yield's
    /// yield), on top of the queue moves it makes (our choice: 3 µs).
    pub syscall_ns: u64,
    /// Spin time before blocking or yielding, as a multiple of the expected
    /// latency of the awaited message (our choice: 1.1, i.e. L(n) + 10 %).
    pub spin_factor: f64,
    /// A boost (periodic boost, spin-yield's, an interrupt's) keeps the
    /// process's remaining quantum instead of giving it a fresh one (our
    /// choice: fresh; this switch is for studying that choice).
    pub boost_keeps_quantum: bool,
    /// Whether periodic boost's walk runs a tick before the scheduler acts
    /// on its boost or just before it at the same boundary (not stated in the study).
    pub boost_walk: BoostWalk,
    /// When a receive is a candidate of the walk (not stated in the study).
    #[serde(skip_serializing_if = "BoostReceive::is_default")]
    pub boost_receive: BoostReceive,
    /// Whether a boost displaces a computing process (the study: "pre-empt the current process").
    #[serde(skip_serializing_if = "BoostDisplaces::is_default")]
    pub boost_displaces: BoostDisplaces,
    /// Whether spin-yield yields once per receive or after every spin time.
    #[serde(skip_serializing_if = "YieldCycle::is_default")]
    pub yield_cycle: YieldCycle,
    /// GS pays the gang switch at the end of every quantum, also while one
    /// row holds every job and the rows do not change (the study's reading).
    pub gang_switch_every_quantum: bool,
    /// An I/O shorter than this keeps the CPU: the process does it on its
    /// CPU as kernel work (no block, no switch, no wake boost) instead of
    /// blocking. 0 (the default): every I/O blocks, as the study has it (a
    /// process returns "to the runnable state from the blocked state
    /// (completion of I/O ...)"). Schemes with a node scheduler of their
    /// own only; under GS nothing else may run on the CPU anyway.
    pub io_keeps_cpu_below_ns: u64,
    /// GS: a job placed in the row that is running waits for the next
    /// quantum to start (default: it starts at once, mid-quantum; the study
    /// does not say which).
    pub gang_start_waits_for_quantum: bool,
    /// Time to refill a CPU's share of the caches after another job ran there: charged on each
    /// CPU a gang switch gives to another job, in proportion to the incoming job's working set
    /// up to `cache_bytes` (a measured machine's; 0: caches not modelled, as in the study).
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_refill_ns: u64,
    /// The cache a CPU may fill alone: its private levels and its share of the shared ones.
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_bytes: u64,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CostConfig {
    /// The cache refill a process of `working_set_bytes` pays when its job takes a CPU back.
    pub fn cache_refill_ns(&self, working_set_bytes: u64) -> u64 {
        if self.cache_bytes == 0 {
            return 0;
        }
        let filled = working_set_bytes.min(self.cache_bytes) as u128;
        (self.cache_refill_ns as u128 * filled / self.cache_bytes as u128) as u64
    }
}

/// An open choice of the model: an enum whose variants have the names the command line and the documents use.
macro_rules! named_choice {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name {
            #[default]
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// Its name, as the command line takes it.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            pub fn is_default(&self) -> bool {
                *self == $name::default()
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!("unknown {} '{other}' (known: {})", $what, $name::NAMES.join(", "))),
                }
            }
        }
    };
}

named_choice!(
    /// When periodic boost's 1 ms walk runs relative to the scheduler that
    /// preempts in favour of the boosted process.
    BoostWalk, "boost walk timing" {
        /// The walk runs at one 1 ms boundary and the scheduler acts on its
        /// boost at the next ("at the next millisecond boundary"; default).
        TickBefore = "tick-before",
        /// The walk runs just before the scheduler at the same boundary.
        SameTick = "same-tick",
    }
);

named_choice!(
    /// When a process inside a receive is a candidate of the boost walk (periodic boost, spin-yield's pick).
    BoostReceive, "receive reading" {
        /// One receive awaits a message from each neighbour: a candidate once all are in (default).
        Whole = "whole",
        /// Each neighbour's message is a receive of its own, taken in the order they land: a candidate
        /// once a message it has not yet taken is in (one that landed while it was on the CPU, it took).
        PerMessage = "per-message",
    }
);

named_choice!(
    /// Which running process a periodic boost displaces at the scheduler's next activity.
    BoostDisplaces, "boost displacement" {
        /// Whatever it does ("pre-empt the current process"; default).
        Any = "any",
        /// Only one inside a receive (spinning) or none: a computing process keeps its CPU, and the
        /// boosted process, first in line, runs when it leaves.
        Spinning = "spinning",
    }
);

named_choice!(
    /// How often a spin-yield receive yields.
    YieldCycle, "spin-yield cycle" {
        /// Once: spin, yield, then spin until the messages are in ("then keeps spinning"; default).
        Once = "once",
        /// Again after every spin time without its messages.
        Repeated = "repeated",
    }
);

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            context_switch_ns: 200 * NS_PER_US,
            gang_switch_ns: 2 * NS_PER_MS,
            interrupt_ns: 50 * NS_PER_US,
            queue_move_ns: 3 * NS_PER_US,
            endpoint_check_ns: 2 * NS_PER_US,
            gang_quantum_ns: 200 * NS_PER_MS,
            syscall_ns: 3 * NS_PER_US,
            spin_factor: 1.1,
            boost_keeps_quantum: false,
            boost_walk: BoostWalk::TickBefore,
            boost_receive: BoostReceive::Whole,
            boost_displaces: BoostDisplaces::Any,
            yield_cycle: YieldCycle::Once,
            gang_switch_every_quantum: true,
            io_keeps_cpu_below_ns: 0,
            gang_start_waits_for_quantum: false,
            cache_refill_ns: 0,
            cache_bytes: 0,
        }
    }
}

/// The Solaris-like multilevel feedback queue of every CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeSchedulerConfig {
    pub tick_ns: u64,
    pub raise_period_ns: u64,
    /// Quantum of each of the 60 levels, level 0 first.
    pub quantum_ns_by_level: Vec<u64>,
    /// EEVDF on nodes of several CPUs: the mean time between the kernel's moves of one runnable
    /// process while every CPU of its node is busy, for causes the model does not simulate
    /// (housekeeping wakes, PELT's averages lagging a change). A measured machine's
    /// (`bench background`); 0: none, the balancing rules alone move processes.
    #[serde(skip_serializing_if = "is_zero")]
    pub background_migration_interval_ns: u64,
    /// EEVDF: the mean time between wakes, on one CPU, of kernel threads and other programs that take
    /// the CPU from a process past its protection, after which the scheduler picks again off the tick.
    /// A measured machine's (`bench background`); 0: none, every CPU's turns keep to the tick.
    #[serde(skip_serializing_if = "is_zero")]
    pub housekeeping_wake_interval_ns: u64,
    /// EEVDF: the CPUs the kernel counted for its base slice at boot (`update_sysctl`: the online
    /// CPUs of the whole machine, not of a task's affinity); 0: the node's. A node of one CPU measured
    /// on a machine of two has the two-CPU slice (1.4 ms).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub base_slice_cpus: u32,
}

impl Default for NodeSchedulerConfig {
    fn default() -> Self {
        NodeSchedulerConfig {
            tick_ns: NS_PER_MS,
            raise_period_ns: NS_PER_S,
            quantum_ns_by_level: quantum_table_from_bands_ms(&[200, 160, 120, 80, 40, 20]),
            background_migration_interval_ns: 0,
            housekeeping_wake_interval_ns: 0,
            base_slice_cpus: 0,
        }
    }
}

/// Expand six 10-level bands (levels 0–9, 10–19, ... 50–59) into 60 quanta.
pub fn quantum_table_from_bands_ms(bands_ms: &[u64; 6]) -> Vec<u64> {
    (0..LEVELS).map(|level| bands_ms[level / 10] * NS_PER_MS).collect()
}

impl NodeSchedulerConfig {
    pub fn quantum_ns(&self, level: u8) -> u64 {
        self.quantum_ns_by_level[level as usize]
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    pub scheme: Scheme,
    pub nodes: u32,
    pub cpus_per_node: u32,
    /// Multiprogramming level: processes per CPU (Local) or matrix rows (GS).
    pub mpl: u32,
    /// Skew `s`: per-iteration factors are drawn from `1 + U(-s/2, s/2)`.
    pub skew: f64,
    pub seed: u64,
    pub network: NetworkConfig,
    pub costs: CostConfig,
    pub scheduler: NodeSchedulerConfig,
    /// The OS scheduler of every node whose scheme has one (not GS). Written
    /// in a run's record only when it is not the study's MLFQ, so that the
    /// records of the study's runs stay as they were.
    #[serde(skip_serializing_if = "OsScheduler::is_default")]
    pub node_scheduler: OsScheduler,
    /// Stop at this simulated time even if jobs remain (benchmarks).
    pub horizon_ns: Option<u64>,
    /// Whether jobs may start past a waiting one (EASY); written in a run's record only when on.
    #[serde(skip_serializing_if = "Backfill::is_none")]
    pub backfill: Backfill,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            scheme: Scheme::LOCAL,
            nodes: 32,
            cpus_per_node: 1,
            mpl: 5,
            skew: 0.20,
            seed: 1,
            network: NetworkConfig::default(),
            costs: CostConfig::default(),
            scheduler: NodeSchedulerConfig::default(),
            node_scheduler: OsScheduler::default(),
            horizon_ns: None,
            backfill: Backfill::None,
        }
    }
}

/// A configuration that cannot describe a machine.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

impl SimConfig {
    pub fn cpu_count(&self) -> u32 {
        self.nodes * self.cpus_per_node
    }

    /// This configuration with every value of the machine model that only some schemes read at the default: the
    /// context switch (charged at dispatch by every node scheduler but the gang cell), the gang matrix's costs, the MLFQ's quanta, raise and boosts, a short
    /// I/O keeping its CPU, and the dynamic schemes' costs and readings. Each scheme's parts put back what they
    /// read (`scheme::model_as_read`).
    pub fn scheme_specific_values_at_default(&self) -> SimConfig {
        let (stock, mut read) = (SimConfig::default(), self.clone());
        let (costs, stock_costs) = (&mut read.costs, &stock.costs);
        costs.context_switch_ns = stock_costs.context_switch_ns;
        costs.gang_quantum_ns = stock_costs.gang_quantum_ns;
        costs.gang_switch_ns = stock_costs.gang_switch_ns;
        costs.gang_switch_every_quantum = stock_costs.gang_switch_every_quantum;
        costs.gang_start_waits_for_quantum = stock_costs.gang_start_waits_for_quantum;
        costs.io_keeps_cpu_below_ns = stock_costs.io_keeps_cpu_below_ns;
        costs.boost_keeps_quantum = stock_costs.boost_keeps_quantum;
        costs.interrupt_ns = stock_costs.interrupt_ns;
        costs.queue_move_ns = stock_costs.queue_move_ns;
        costs.endpoint_check_ns = stock_costs.endpoint_check_ns;
        costs.syscall_ns = stock_costs.syscall_ns;
        costs.spin_factor = stock_costs.spin_factor;
        costs.boost_walk = stock_costs.boost_walk;
        costs.boost_receive = stock_costs.boost_receive;
        costs.boost_displaces = stock_costs.boost_displaces;
        costs.yield_cycle = stock_costs.yield_cycle;
        read.scheduler.quantum_ns_by_level = stock.scheduler.quantum_ns_by_level;
        read.scheduler.raise_period_ns = stock.scheduler.raise_period_ns;
        read
    }

    /// The coscheduler's settings for this machine: the scheme's rules, the MPL
    /// as matrix rows and as processes per CPU, every CPU usable by gangs, no
    /// auxiliary threads.
    pub fn plan_settings(&self) -> PlanSettings {
        PlanSettings {
            rules: self.scheme.plan_rules(),
            rows: self.mpl,
            local_mpl: self.mpl,
            gang_cpu_share: 1.0,
            over_allocation: 0.0,
            backfill: self.backfill,
        }
    }

    /// The machine as the coscheduler sees it (the model has no memory limits).
    pub fn cluster_shape(&self) -> ClusterShape {
        let nodes = self.nodes as usize;
        ClusterShape {
            cpus_per_node: vec![self.cpus_per_node; nodes],
            mem_bytes_per_node: vec![0; nodes],
            accepting: vec![true; nodes],
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |msg: String| Err(ConfigError(msg));
        if self.nodes == 0 {
            return fail("--nodes must be at least 1".into());
        }
        if self.cpus_per_node == 0 {
            return fail("--cpus-per-node must be at least 1".into());
        }
        if self.nodes.checked_mul(self.cpus_per_node).is_none_or(|c| c > 1 << 24) {
            return fail("nodes x cpus-per-node is too large (at most 16,777,216 CPUs)".into());
        }
        if self.mpl == 0 {
            return fail("--mpl must be at least 1 (0 would admit no job at all)".into());
        }
        if !self.backfill.is_none() && self.scheme.runs_the_controller() {
            return fail(format!(
                "--backfill {}: {} runs cosched's own queue, which passes over a job that does not fit \
                 without reservations; backfilling applies to the study's schemes",
                self.backfill.name(),
                self.scheme
            ));
        }
        if self.mpl > 1024 {
            return fail(format!("--mpl {} is above the supported 1024", self.mpl));
        }
        if !(0.0..2.0).contains(&self.skew) || !self.skew.is_finite() {
            return fail(format!(
                "--skew {} must be in [0, 2): factors 1 + U(-s/2, s/2) must stay positive",
                self.skew
            ));
        }
        let net = &self.network;
        for (name, v) in [
            ("--latency-base-us", net.latency_base_ns),
            ("--latency-us-per-byte", net.latency_ns_per_byte),
            ("--shm-base-us", net.shm_base_ns),
            ("--shm-us-per-byte", net.shm_ns_per_byte),
        ] {
            if !v.is_finite() || v < 0.0 {
                return fail(format!("{name} must be a finite non-negative number"));
            }
        }
        if net.latency_ns(net.message_bytes) < net.nic_ns_per_message {
            return fail("message latency must be at least the interface time per message (--nic-us)".into());
        }
        let s = &self.scheduler;
        if s.tick_ns == 0 {
            return fail("--tick-ms must be positive".into());
        }
        if s.raise_period_ns == 0 || !s.raise_period_ns.is_multiple_of(s.tick_ns) {
            return fail("--raise-period-ms must be a positive multiple of the tick".into());
        }
        if s.quantum_ns_by_level.len() != LEVELS || s.quantum_ns_by_level.contains(&0) {
            return fail("the quantum table needs 60 positive quanta".into());
        }
        // A raise gives every process a fresh quantum, and at a raise boundary
        // the raise comes before the tick. A quantum's end is noticed at the
        // first tick after it: if that tick can be the next raise boundary, a
        // process spinning at the top never runs out of its quantum, and its
        // CPU's others never run (a whole run can livelock so).
        let top_quantum_noticed_ns = s.quantum_ns(TOP_LEVEL).div_ceil(s.tick_ns) * s.tick_ns;
        if s.raise_period_ns <= top_quantum_noticed_ns {
            return fail(format!(
                "--raise-period-ms ({} ms) must be longer than the top level's quantum ({} ms) rounded up to a whole \
                 tick ({} ms): a raise renews every quantum, so a busy-waiting process would never lose its CPU",
                s.raise_period_ns as f64 / 1e6,
                s.quantum_ns(TOP_LEVEL) as f64 / 1e6,
                top_quantum_noticed_ns as f64 / 1e6
            ));
        }
        if self.scheme.node() == crate::scheme::NodeKind::GangSlotsOverEevdf
            && self.node_scheduler != OsScheduler::Eevdf
        {
            return fail(format!(
                "{} runs gang slots over the kernel's EEVDF: add --node-scheduler eevdf (the run names {})",
                self.scheme.name(),
                self.node_scheduler
            ));
        }
        if self.costs.gang_quantum_ns <= self.costs.gang_switch_ns {
            return fail("--gang-quantum-ms must be longer than the gang switch cost".into());
        }
        // A switch and the largest refill must leave the slot some time, or the jobs would never progress.
        let switch_and_refill_ns = self.costs.gang_switch_ns.saturating_add(self.costs.cache_refill_ns(u64::MAX));
        if self.scheme.is_gang() && self.costs.gang_quantum_ns <= switch_and_refill_ns {
            return fail(format!(
                "a gang slice of {} µs must be longer than the gang switch and cache refill ({} µs)",
                self.costs.gang_quantum_ns / 1_000,
                switch_and_refill_ns / 1_000
            ));
        }
        if !(self.costs.spin_factor.is_finite() && self.costs.spin_factor > 0.0) {
            return fail(format!("--spin-factor must be positive, got {}", self.costs.spin_factor));
        }
        if self.horizon_ns == Some(0) {
            return fail("--horizon-s must be positive: a run that stops at time 0 measures nothing".into());
        }
        Ok(())
    }
}
