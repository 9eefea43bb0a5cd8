//! The machine model's flags — network, costs, the nodes' scheduler — shared by `sim` and `bench fast`, so that
//! fast mode can be measured on any model `sim` runs, and so that a command can be written for a model
//! ([`ModelFlags::arguments_for`]) and read back to the same one.

use clap::Args;
use cosched_sim::config::{
    quantum_table_from_bands_ms, BoostDisplaces, BoostReceive, BoostWalk, CostConfig, NetworkConfig,
    NodeSchedulerConfig, YieldCycle,
};
use cosched_sim::{OsScheduler, SimConfig};

/// A flag's unit: values are given in it and kept in nanoseconds, converted here only.
#[derive(Copy, Clone)]
pub(crate) struct Unit {
    ns_per_unit: f64,
}

pub(crate) const MICROSECONDS: Unit = Unit { ns_per_unit: 1e3 };
pub(crate) const MILLISECONDS: Unit = Unit { ns_per_unit: 1e6 };
pub(crate) const SECONDS: Unit = Unit { ns_per_unit: 1e9 };

impl Unit {
    /// A whole number of nanoseconds from a flag's value.
    pub(crate) fn ns(self, value: f64, flag: &str) -> Result<u64, String> {
        if !value.is_finite() || value < 0.0 {
            return Err(format!("{flag} must be a finite non-negative number, got {value}"));
        }
        Ok((value * self.ns_per_unit).round() as u64)
    }

    /// Nanoseconds (or nanoseconds per byte) from a flag's value, as a rate or fractional time.
    pub(crate) fn ns_f64(self, value: f64) -> f64 {
        value * self.ns_per_unit
    }

    /// A library default in nanoseconds, in this unit: the flag's default.
    pub(crate) fn of_ns(self, ns: u64) -> f64 {
        ns as f64 / self.ns_per_unit
    }

    pub(crate) fn of_ns_f64(self, ns: f64) -> f64 {
        ns / self.ns_per_unit
    }
}

/// The flags a machine file (`--machine`) sets, which cannot be given with it.
pub const SET_BY_MACHINE_FILE: [&str; 10] = [
    "cpus_per_node",
    "cs_us",
    "gang_cs_ms",
    "tick_ms",
    "latency_base_us",
    "latency_us_per_byte",
    "nic_us",
    "shm_base_us",
    "shm_us_per_byte",
    "node_scheduler",
];

// The flags' defaults, taken from the library's so that each value is written once.
fn network() -> NetworkConfig {
    NetworkConfig::default()
}
fn costs() -> CostConfig {
    CostConfig::default()
}
fn scheduler() -> NodeSchedulerConfig {
    NodeSchedulerConfig::default()
}

/// The quanta of the six 10-level bands (levels 0, 10, … 50), ms.
fn bands_ms(scheduler: &NodeSchedulerConfig) -> Vec<u64> {
    scheduler.quantum_ns_by_level.iter().step_by(10).map(|&ns| MILLISECONDS.of_ns(ns) as u64).collect()
}
fn default_bands_ms() -> Vec<u64> {
    bands_ms(&scheduler())
}

/// The machine model: network, costs and the nodes' scheduler (a machine file, `--machine`, sets some of them).
#[derive(Args, Debug, Clone)]
pub struct ModelFlags {
    /// Message latency L(n) = a + b n: the constant a, in µs.
    #[arg(long, default_value_t = MICROSECONDS.of_ns_f64(network().latency_base_ns), help_heading = "Network")]
    pub latency_base_us: f64,
    /// Message latency L(n) = a + b n: b, in µs per byte (default gives L(4096) = 185.48 µs).
    #[arg(long, default_value_t = MICROSECONDS.of_ns_f64(network().latency_ns_per_byte), help_heading = "Network")]
    pub latency_us_per_byte: f64,
    /// Time a message occupies the sending or the receiving interface, µs.
    #[arg(long, default_value_t = MICROSECONDS.of_ns(network().nic_ns_per_message), help_heading = "Network")]
    pub nic_us: f64,
    /// Shared-memory latency between tasks on one node: constant part, µs.
    #[arg(long, default_value_t = MICROSECONDS.of_ns_f64(network().shm_base_ns), help_heading = "Network")]
    pub shm_base_us: f64,
    /// Shared-memory latency: µs per byte.
    #[arg(long, default_value_t = MICROSECONDS.of_ns_f64(network().shm_ns_per_byte), help_heading = "Network")]
    pub shm_us_per_byte: f64,
    /// Size of every message, bytes.
    #[arg(long, default_value_t = network().message_bytes, help_heading = "Network")]
    pub message_bytes: u32,

    /// Context switch CS, µs.
    #[arg(long, default_value_t = MICROSECONDS.of_ns(costs().context_switch_ns), help_heading = "Costs")]
    pub cs_us: f64,
    /// Gang switch CS_GS (includes the cross-node synchronisation), ms.
    #[arg(long, default_value_t = MILLISECONDS.of_ns(costs().gang_switch_ns), help_heading = "Costs")]
    pub gang_cs_ms: f64,
    /// Gang quantum Q, ms.
    #[arg(long, default_value_t = MILLISECONDS.of_ns(costs().gang_quantum_ns), help_heading = "Costs")]
    pub gang_quantum_ms: f64,
    /// Interrupt I, µs (dynamic schemes).
    #[arg(long, default_value_t = MICROSECONDS.of_ns(costs().interrupt_ns), help_heading = "Costs")]
    pub interrupt_us: f64,
    /// Moving a process between scheduler queues, µs (dynamic schemes).
    #[arg(long, default_value_t = MICROSECONDS.of_ns(costs().queue_move_ns), help_heading = "Costs")]
    pub queue_move_us: f64,
    /// Checking one endpoint, µs (periodic boost, spin-yield).
    #[arg(long, default_value_t = MICROSECONDS.of_ns(costs().endpoint_check_ns), help_heading = "Costs")]
    pub endpoint_check_us: f64,
    /// A system call (spin-block's block, spin-yield's yield), µs, besides its queue moves.
    #[arg(long, default_value_t = MICROSECONDS.of_ns(costs().syscall_ns), help_heading = "Costs")]
    pub syscall_us: f64,
    /// Spin time before blocking or yielding, as a multiple of the message latency L(n).
    #[arg(long, default_value_t = costs().spin_factor, help_heading = "Costs")]
    pub spin_factor: f64,
    /// A boost to the top level keeps the remaining quantum (default: a fresh quantum).
    #[arg(long, help_heading = "Node scheduler")]
    pub boost_keeps_quantum: bool,
    /// When periodic boost's 1 ms walk runs: a tick before the scheduler acts on its
    /// boost (tick-before: the study's "at the next millisecond boundary") or just
    /// before it at the same boundary (same-tick). See docs/model.md.
    #[arg(long, default_value = costs().boost_walk.name(), help_heading = "Node scheduler")]
    pub boost_walk: BoostWalk,
    /// When a process inside a receive is a candidate of the boost walk (PB, SY's pick): whole (one receive
    /// awaits every neighbour's message: a candidate once all are in) or per-message (a receive per neighbour,
    /// taken as they land: a candidate once one it has not taken is in). See docs/model.md.
    #[arg(long, default_value = costs().boost_receive.name(), help_heading = "Node scheduler")]
    pub boost_receive: BoostReceive,
    /// Which running process a periodic boost displaces: any (the study's "pre-empt the current process") or
    /// spinning (only one inside a receive; a computing process keeps its CPU). See docs/model.md.
    #[arg(long, default_value = costs().boost_displaces.name(), help_heading = "Node scheduler")]
    pub boost_displaces: BoostDisplaces,
    /// Spin-yield: yield once per receive, then spin to its end (once, the study's "then keeps spinning"), or
    /// again after every spin time (repeated). See docs/model.md.
    #[arg(long, default_value = costs().yield_cycle.name(), help_heading = "Node scheduler")]
    pub yield_cycle: YieldCycle,
    /// GS: no gang switch cost at a quantum's end while one row holds every job
    /// (default: charged at the end of every quantum, as the study says).
    #[arg(long, help_heading = "Costs")]
    pub gang_free_same_row: bool,
    /// An I/O shorter than this keeps its CPU, as kernel work (no block, no switch), µs; 0: every I/O blocks,
    /// the study's reading. The study does not say what a short I/O does (docs/model.md). Not GS.
    #[arg(long, default_value_t = MICROSECONDS.of_ns(costs().io_keeps_cpu_below_ns), help_heading = "Costs")]
    pub io_keeps_cpu_below_us: f64,
    /// GS: a job placed in the running row waits for the next quantum (default: it starts at once,
    /// mid-quantum; the study does not say which, docs/model.md).
    #[arg(long, help_heading = "Costs")]
    pub gang_start_next_quantum: bool,

    /// The OS scheduler of every node, under every scheme but the gang schemes (whose nodes run the gang cell):
    /// mlfq, the study's Solaris-like multilevel feedback queue; eevdf, Linux's fair class since 6.6 (its
    /// rules and simplifications in docs/model.md; its tick is --tick-ms: 1 for HZ=1000, 4 for HZ=250).
    #[arg(long, default_value = "mlfq", help_heading = "Node scheduler")]
    pub node_scheduler: OsScheduler,
    /// Scheduler tick, ms.
    #[arg(long, default_value_t = MILLISECONDS.of_ns(scheduler().tick_ns), help_heading = "Node scheduler")]
    pub tick_ms: f64,
    /// Period of the raise of every process to the top level, ms.
    #[arg(long, default_value_t = MILLISECONDS.of_ns(scheduler().raise_period_ns), help_heading = "Node scheduler")]
    pub raise_period_ms: f64,
    /// Quanta of the six 10-level bands, levels 0-9 first, ms.
    #[arg(long, value_delimiter = ',', default_values_t = default_bands_ms(), help_heading = "Node scheduler")]
    pub quanta_ms: Vec<u64>,
}

impl ModelFlags {
    /// Set `cfg`'s network, costs, nodes' scheduler and its settings from the flags. The costs only a machine file
    /// measures (cache refills, background work) are left at none.
    pub fn apply(&self, cfg: &mut SimConfig) -> Result<(), String> {
        let bands: [u64; 6] =
            self.quanta_ms.clone().try_into().map_err(|_| {
                format!("--quanta-ms needs 6 values (levels 0-9 .. 50-59), got {}", self.quanta_ms.len())
            })?;
        cfg.network = NetworkConfig {
            latency_base_ns: MICROSECONDS.ns_f64(self.latency_base_us),
            latency_ns_per_byte: MICROSECONDS.ns_f64(self.latency_us_per_byte),
            nic_ns_per_message: MICROSECONDS.ns(self.nic_us, "--nic-us")?,
            shm_base_ns: MICROSECONDS.ns_f64(self.shm_base_us),
            shm_ns_per_byte: MICROSECONDS.ns_f64(self.shm_us_per_byte),
            message_bytes: self.message_bytes,
        };
        cfg.costs = CostConfig {
            context_switch_ns: MICROSECONDS.ns(self.cs_us, "--cs-us")?,
            gang_switch_ns: MILLISECONDS.ns(self.gang_cs_ms, "--gang-cs-ms")?,
            interrupt_ns: MICROSECONDS.ns(self.interrupt_us, "--interrupt-us")?,
            queue_move_ns: MICROSECONDS.ns(self.queue_move_us, "--queue-move-us")?,
            endpoint_check_ns: MICROSECONDS.ns(self.endpoint_check_us, "--endpoint-check-us")?,
            gang_quantum_ns: MILLISECONDS.ns(self.gang_quantum_ms, "--gang-quantum-ms")?,
            syscall_ns: MICROSECONDS.ns(self.syscall_us, "--syscall-us")?,
            spin_factor: self.spin_factor,
            boost_keeps_quantum: self.boost_keeps_quantum,
            boost_walk: self.boost_walk,
            boost_receive: self.boost_receive,
            boost_displaces: self.boost_displaces,
            yield_cycle: self.yield_cycle,
            gang_switch_every_quantum: !self.gang_free_same_row,
            io_keeps_cpu_below_ns: MICROSECONDS.ns(self.io_keeps_cpu_below_us, "--io-keeps-cpu-below-us")?,
            gang_start_waits_for_quantum: self.gang_start_next_quantum,
            // Measured machines only (`--machine`).
            cache_refill_ns: 0,
            cache_bytes: 0,
        };
        cfg.scheduler = NodeSchedulerConfig {
            tick_ns: MILLISECONDS.ns(self.tick_ms, "--tick-ms")?,
            raise_period_ns: MILLISECONDS.ns(self.raise_period_ms, "--raise-period-ms")?,
            quantum_ns_by_level: quantum_table_from_bands_ms(&bands),
            // Measured machines only (`--machine`).
            background_migration_interval_ns: 0,
            housekeeping_wake_interval_ns: 0,
            // Each node a machine of its own: its CPUs make its base slice.
            base_slice_cpus: 0,
        };
        cfg.node_scheduler = self.node_scheduler;
        Ok(())
    }

    /// The flags that turn `base`'s model into `cfg`'s, as a command line spells them: one per value that
    /// differs. None when a value differs that no flag sets (what only a machine file measures). A unit test reads
    /// them back through these flags, so that the two never drift apart.
    pub fn arguments_for(cfg: &SimConfig, base: &SimConfig) -> Option<Vec<String>> {
        let only_measured = |c: &SimConfig| {
            let s = &c.scheduler;
            let measured = (s.background_migration_interval_ns, s.housekeeping_wake_interval_ns, s.base_slice_cpus);
            (c.costs.cache_refill_ns, c.costs.cache_bytes, measured)
        };
        if only_measured(cfg) != only_measured(base) {
            return None;
        }
        let mut words = Words::default();
        let (net, was) = (&cfg.network, &base.network);
        let us_f64 = |ns: f64| MICROSECONDS.of_ns_f64(ns).to_string();
        let (us, ms) = (|ns: u64| MICROSECONDS.of_ns(ns).to_string(), |ns: u64| MILLISECONDS.of_ns(ns).to_string());
        words.differs("--latency-base-us", net.latency_base_ns, was.latency_base_ns, us_f64);
        words.differs("--latency-us-per-byte", net.latency_ns_per_byte, was.latency_ns_per_byte, us_f64);
        words.differs("--nic-us", net.nic_ns_per_message, was.nic_ns_per_message, us);
        words.differs("--shm-base-us", net.shm_base_ns, was.shm_base_ns, us_f64);
        words.differs("--shm-us-per-byte", net.shm_ns_per_byte, was.shm_ns_per_byte, us_f64);
        words.differs("--message-bytes", net.message_bytes, was.message_bytes, |b| b.to_string());
        let (costs, was) = (&cfg.costs, &base.costs);
        words.differs("--cs-us", costs.context_switch_ns, was.context_switch_ns, us);
        words.differs("--gang-cs-ms", costs.gang_switch_ns, was.gang_switch_ns, ms);
        words.differs("--gang-quantum-ms", costs.gang_quantum_ns, was.gang_quantum_ns, ms);
        words.differs("--interrupt-us", costs.interrupt_ns, was.interrupt_ns, us);
        words.differs("--queue-move-us", costs.queue_move_ns, was.queue_move_ns, us);
        words.differs("--endpoint-check-us", costs.endpoint_check_ns, was.endpoint_check_ns, us);
        words.differs("--syscall-us", costs.syscall_ns, was.syscall_ns, us);
        words.differs("--spin-factor", costs.spin_factor, was.spin_factor, |f| f.to_string());
        words.differs("--io-keeps-cpu-below-us", costs.io_keeps_cpu_below_ns, was.io_keeps_cpu_below_ns, us);
        words.differs("--boost-walk", costs.boost_walk, was.boost_walk, |w| w.name().to_string());
        words.differs("--boost-receive", costs.boost_receive, was.boost_receive, |r| r.name().to_string());
        words.differs("--boost-displaces", costs.boost_displaces, was.boost_displaces, |d| d.name().to_string());
        words.differs("--yield-cycle", costs.yield_cycle, was.yield_cycle, |y| y.name().to_string());
        // The switches: a flag that sets what the default does not (and none can unset it).
        for (flag, set, set_in_base) in [
            ("--boost-keeps-quantum", costs.boost_keeps_quantum, was.boost_keeps_quantum),
            ("--gang-free-same-row", !costs.gang_switch_every_quantum, !was.gang_switch_every_quantum),
            ("--gang-start-next-quantum", costs.gang_start_waits_for_quantum, was.gang_start_waits_for_quantum),
        ] {
            match (set, set_in_base) {
                (true, false) => words.0.push(flag.to_string()),
                (false, true) => return None,
                _ => {}
            }
        }
        let (sched, was) = (&cfg.scheduler, &base.scheduler);
        words.differs("--node-scheduler", cfg.node_scheduler, base.node_scheduler, |s| s.to_string());
        words.differs("--tick-ms", sched.tick_ns, was.tick_ns, ms);
        words.differs("--raise-period-ms", sched.raise_period_ns, was.raise_period_ns, ms);
        let bands = bands_ms(sched);
        if sched.quantum_ns_by_level != was.quantum_ns_by_level {
            let table: Result<[u64; 6], _> = bands.clone().try_into();
            if table.ok().is_none_or(|b| quantum_table_from_bands_ms(&b) != sched.quantum_ns_by_level) {
                return None; // not a table of six bands
            }
            let listed: Vec<String> = bands.iter().map(u64::to_string).collect();
            words.0.extend(["--quanta-ms".to_string(), listed.join(",")]);
        }
        Some(words.0)
    }
}

/// A command line's words, built flag by flag.
#[derive(Default)]
struct Words(Vec<String>);

impl Words {
    /// `flag value` where `value` is not `base`'s.
    fn differs<T: PartialEq>(&mut self, flag: &str, value: T, base: T, spell: impl Fn(T) -> String) {
        if value != base {
            self.0.extend([flag.to_string(), spell(value)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use proptest::prelude::*;

    #[derive(Parser)]
    struct ModelCommand {
        #[command(flatten)]
        model: ModelFlags,
    }

    /// The model the flags give.
    fn model_of(words: &[String]) -> SimConfig {
        let parsed = ModelCommand::try_parse_from(std::iter::once("model".to_string()).chain(words.iter().cloned()));
        let mut cfg = SimConfig::default();
        parsed.unwrap_or_else(|e| panic!("{words:?}: {e}")).model.apply(&mut cfg).unwrap();
        cfg
    }

    /// What the flags set of a run's configuration.
    fn model(cfg: &SimConfig) -> (NetworkConfig, CostConfig, NodeSchedulerConfig, OsScheduler) {
        (cfg.network.clone(), cfg.costs.clone(), cfg.scheduler.clone(), cfg.node_scheduler)
    }

    /// Flags as a user gives them: any of them, with values drawn over wide ranges (a float of any digits).
    fn drawn_flags() -> impl Strategy<Value = Vec<String>> {
        let value = |flag: &'static str, values: BoxedStrategy<String>| {
            prop::option::of(values).prop_map(move |v| v.map(|v| vec![flag.to_string(), v]).unwrap_or_default())
        };
        let float = |max: f64| (0.0..max).prop_map(|f: f64| f.to_string()).boxed();
        let whole = |max: u64| (0..max).prop_map(|n| n.to_string()).boxed();
        let name = |names: &'static [&'static str]| prop::sample::select(names).prop_map(str::to_string).boxed();
        let switch =
            |flag: &'static str| any::<bool>().prop_map(move |on| if on { vec![flag.to_string()] } else { vec![] });
        let bands = prop::collection::vec(1u64..500, 6)
            .prop_map(|b| vec!["--quanta-ms".to_string(), b.iter().map(u64::to_string).collect::<Vec<_>>().join(",")]);
        (
            (
                value("--latency-base-us", float(1e4)),
                value("--latency-us-per-byte", float(1.0)),
                value("--nic-us", float(1e3)),
                value("--shm-base-us", float(100.0)),
                value("--shm-us-per-byte", float(0.1)),
                value("--message-bytes", whole(1 << 20)),
                value("--cs-us", float(1e3)),
                value("--gang-cs-ms", float(10.0)),
                value("--gang-quantum-ms", float(1e3)),
                value("--interrupt-us", float(200.0)),
            ),
            (
                value("--queue-move-us", float(20.0)),
                value("--endpoint-check-us", float(20.0)),
                value("--syscall-us", float(20.0)),
                value("--spin-factor", float(10.0)),
                value("--io-keeps-cpu-below-us", float(1e3)),
                value("--boost-walk", name(&["tick-before", "same-tick"])),
                value("--boost-receive", name(&["whole", "per-message"])),
                value("--boost-displaces", name(&["any", "spinning"])),
                value("--yield-cycle", name(&["once", "repeated"])),
                value("--node-scheduler", name(&["mlfq", "eevdf"])),
            ),
            (
                value("--tick-ms", (1u64..10).prop_map(|n| n.to_string()).boxed()),
                value("--raise-period-ms", whole(5_000)),
                prop::option::of(bands).prop_map(Option::unwrap_or_default),
                switch("--boost-keeps-quantum"),
                switch("--gang-free-same-row"),
                switch("--gang-start-next-quantum"),
            ),
        )
            .prop_map(|(a, b, c)| {
                let mut words = Vec::new();
                for part in [a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7, a.8, a.9] {
                    words.extend(part);
                }
                for part in [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7, b.8, b.9] {
                    words.extend(part);
                }
                for part in [c.0, c.1, c.2, c.3, c.4, c.5] {
                    words.extend(part);
                }
                words
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// The words written for a model read back, through the flags, as that very model: a suggested
        /// `bench fast` runs the model `sim` ran.
        #[test]
        fn the_words_for_a_model_read_back_as_that_model(words in drawn_flags()) {
            let cfg = model_of(&words);
            let written = ModelFlags::arguments_for(&cfg, &SimConfig::default()).expect("flags set every value");
            prop_assert_eq!(model(&model_of(&written)), model(&cfg), "{:?} wrote {:?}", words, written);
        }
    }

    #[test]
    fn the_default_model_needs_no_words_and_a_machine_files_costs_none_can_write() {
        let default = SimConfig::default();
        assert_eq!(model(&model_of(&[])), model(&default), "the flags' defaults are the library's");
        assert_eq!(ModelFlags::arguments_for(&default, &default), Some(Vec::new()));
        let mut measured = default.clone();
        measured.costs.cache_refill_ns = 5_000;
        assert_eq!(ModelFlags::arguments_for(&measured, &default), None, "only a machine file sets it");
        assert_eq!(ModelFlags::arguments_for(&measured, &measured), Some(Vec::new()), "over that file: nothing");
        // A switch set in the base can be unset by no flag.
        let mut keeps = default.clone();
        keeps.costs.boost_keeps_quantum = true;
        assert_eq!(ModelFlags::arguments_for(&default, &keeps), None);
    }
}
