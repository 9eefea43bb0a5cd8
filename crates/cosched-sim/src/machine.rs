//! A machine model measured on the machine itself (`cosched calibrate`
//! writes it, `cosched sim --machine` and the predictions read it): the
//! costs the simulator charges, in place of the reference study's values.
//!
//! The file may come from anyone, so `parse` bounds every value before a
//! configuration is built from it.

use crate::config::SimConfig;
use crate::OsScheduler;
use serde::{Deserialize, Serialize};

/// The format name written in every machine file; a file of another format is refused.
pub const FORMAT: &str = "cosched-machine/1";
/// Largest machine file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// A measured cost, at most (10 ms): anything larger is not a cost this model can use.
const MAX_COST_NS: f64 = 1e7;
/// A per-byte cost, at most (1 µs/byte, 1 MB/s: slower than any network a job would share).
const MAX_NS_PER_BYTE: f64 = 1e3;
const MAX_CPUS_PER_NODE: u32 = 4096;
/// Kernels tick at 100 to 1000 Hz; below 10 Hz no scheduler configuration of the model holds together.
const MIN_HZ: u32 = 10;
const MAX_HZ: u32 = 10_000;
const MAX_TEXT: usize = 256;
/// A CPU's share of the caches, at most (1 GiB).
const MAX_CACHE_BYTES: u64 = 1 << 30;
/// An hour between background events (moves, housekeeping wakes): beyond it, none is seen in a run.
const MAX_BACKGROUND_INTERVAL_NS: u64 = 3_600_000_000_000;
/// A millisecond between them, at least: a CPU its other tasks take more than a thousand times a second is
/// not one to calibrate on, and the model visits a CPU at each wake.
const MIN_BACKGROUND_INTERVAL_NS: u64 = 1_000_000;

/// One message transport: the time a message takes and the CPU time it
/// costs its two ends, each `base + per_byte · bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// One-way latency of an empty message (half a ping-pong round trip).
    pub latency_base_ns: f64,
    pub latency_ns_per_byte: f64,
    /// CPU time of both endpoints per message (the analytic model's α_CPU, β_CPU).
    pub cpu_base_ns: f64,
    pub cpu_ns_per_byte: f64,
}

/// The measured machine. Medians or means over the calibration's repeats;
/// the raw measurements are kept beside the file (`sources`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineModel {
    pub format: String,
    pub host: String,
    pub kernel: String,
    /// When it was measured (UTC, RFC 3339).
    pub measured_at: String,
    pub cpus_per_node: u32,
    /// The kernel's CONFIG_HZ: the scheduler tick is 1 s / hz.
    pub hz: u32,
    /// A context switch between two processes of one CPU (`bench ctxswitch`'s α_c).
    pub context_switch_ns: u64,
    /// From a timer's expiry to its sleeper running on an idle CPU (`bench node`'s sleeper-alone).
    pub wake_ns: u64,
    /// The same on a CPU busy with another process, for a sleeper that takes it at once (`bench node`'s
    /// sleeper-busy). Absent in files written before it was measured, or 0: `wake_ns` stands for it.
    #[serde(default)]
    pub wake_busy_ns: u64,
    /// Shared memory between processes of one node (`bench pingpong --transport shm`).
    pub shm: Transport,
    /// TCP (`bench pingpong --transport tcp`; loopback when measured on one node).
    pub tcp: Transport,
    /// CPU time a gang switch takes from the jobs, per CPU (`bench switch`: the jobs' CPU time lost at its
    /// shortest slice against no switching, per switch, at most the median time from the slice boundary to the
    /// incoming gang thawed).
    pub gang_switch_ns: u64,
    /// Spread of slice starts across agents (`bench switch`'s skew, median); not yet charged by the engine.
    pub gang_slice_skew_ns: u64,
    /// The cache one CPU may fill alone: its private levels and its share of the shared ones
    /// (sysfs). Absent in files written before it was measured: then caches are not modelled.
    #[serde(default)]
    pub cache_bytes: u64,
    /// Time to read `cache_bytes` back after another process on the CPU replaced them
    /// (`bench cache-refill`, median, less a warm pass): what a switch to another job costs it.
    #[serde(default)]
    pub cache_refill_ns: u64,
    /// The mean time between the kernel's moves of one spinning process while every CPU is busy with two
    /// (`bench background`, median): moves the node model does not otherwise make. Absent in files written
    /// before it was measured, or 0: none.
    #[serde(default)]
    pub background_migration_interval_ns: u64,
    /// The mean time between wakes of other tasks that take a CPU from the spinning process pinned there
    /// (`bench background`, median). Absent in files written before it was measured, or 0: none.
    #[serde(default)]
    pub housekeeping_wake_interval_ns: u64,
    /// The files of raw measurements this model was derived from, relative to the machine file.
    #[serde(default)]
    pub sources: Vec<String>,
}

impl MachineModel {
    /// Read a machine file's text; an error names the field that is wrong.
    pub fn parse(text: &str) -> Result<MachineModel, String> {
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("a machine file is at most {MAX_FILE_BYTES} bytes"));
        }
        let model: MachineModel =
            serde_json::from_str(text).map_err(|e| format!("not a machine file: {}", printable(&e.to_string())))?;
        model.check()?;
        Ok(model)
    }

    /// The bounds every value must be within.
    pub fn check(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!("format '{}' is not {FORMAT}", printable(&self.format)));
        }
        for (name, text) in [("host", &self.host), ("kernel", &self.kernel), ("measured_at", &self.measured_at)] {
            if text.len() > MAX_TEXT || text.chars().any(|c| !is_printable(c)) {
                return Err(format!("{name}: at most {MAX_TEXT} printable characters"));
            }
        }
        if self.sources.len() > 32 || self.sources.iter().any(|s| s.len() > MAX_TEXT || !s.chars().all(is_printable)) {
            return Err("sources: at most 32 names".into());
        }
        if !(1..=MAX_CPUS_PER_NODE).contains(&self.cpus_per_node) {
            return Err(format!("cpus_per_node {} is not in 1..={MAX_CPUS_PER_NODE}", self.cpus_per_node));
        }
        if !(MIN_HZ..=MAX_HZ).contains(&self.hz) {
            return Err(format!("hz {} is not in {MIN_HZ}..={MAX_HZ}", self.hz));
        }
        for (name, ns) in [
            ("context_switch_ns", self.context_switch_ns),
            ("wake_ns", self.wake_ns),
            ("wake_busy_ns", self.wake_busy_ns),
            ("gang_switch_ns", self.gang_switch_ns),
            ("gang_slice_skew_ns", self.gang_slice_skew_ns),
            ("cache_refill_ns", self.cache_refill_ns),
        ] {
            check_cost(name, ns as f64, MAX_COST_NS)?;
        }
        for (name, ns) in [
            ("background_migration_interval_ns", self.background_migration_interval_ns),
            ("housekeeping_wake_interval_ns", self.housekeeping_wake_interval_ns),
        ] {
            if ns != 0 && !(MIN_BACKGROUND_INTERVAL_NS..=MAX_BACKGROUND_INTERVAL_NS).contains(&ns) {
                return Err(format!(
                    "{name} {ns} is neither 0 (none) nor in {MIN_BACKGROUND_INTERVAL_NS}..={MAX_BACKGROUND_INTERVAL_NS}"
                ));
            }
        }
        if self.cache_bytes > MAX_CACHE_BYTES {
            return Err(format!("cache_bytes {} is more than {MAX_CACHE_BYTES}", self.cache_bytes));
        }
        for (transport, t) in [("shm", &self.shm), ("tcp", &self.tcp)] {
            for (field, ns) in [
                ("latency_base_ns", t.latency_base_ns),
                ("latency_ns_per_byte", t.latency_ns_per_byte),
                ("cpu_base_ns", t.cpu_base_ns),
                ("cpu_ns_per_byte", t.cpu_ns_per_byte),
            ] {
                let max = if field.ends_with("per_byte") { MAX_NS_PER_BYTE } else { MAX_COST_NS };
                check_cost(&format!("{transport}.{field}"), ns, max)?;
            }
        }
        Ok(())
    }

    /// The scheduler tick, 1 s / CONFIG_HZ.
    pub fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.hz as u64
    }

    /// Put this machine's measured costs into a configuration: CPUs per
    /// node, the tick, the context and gang switch costs, shared memory
    /// within a node and TCP between nodes, the cache refill, and every node on the EEVDF
    /// model (what a node of today's Linux runs). What the file does not
    /// measure (the study's dynamic-coscheduling costs) stays as it was.
    pub fn apply(&self, cfg: &mut SimConfig) {
        cfg.cpus_per_node = self.cpus_per_node;
        cfg.node_scheduler = OsScheduler::Eevdf;
        let tick_ns = self.tick_ns();
        cfg.scheduler.tick_ns = tick_ns;
        // The MLFQ's raise period must stay a whole number of ticks (unused under EEVDF).
        cfg.scheduler.raise_period_ns = cfg.scheduler.raise_period_ns.div_ceil(tick_ns).max(1) * tick_ns;
        cfg.costs.context_switch_ns = self.context_switch_ns;
        cfg.costs.gang_switch_ns = self.gang_switch_ns;
        cfg.costs.cache_bytes = self.cache_bytes;
        cfg.costs.cache_refill_ns = self.cache_refill_ns;
        cfg.scheduler.background_migration_interval_ns = self.background_migration_interval_ns;
        cfg.scheduler.housekeeping_wake_interval_ns = self.housekeeping_wake_interval_ns;
        cfg.network.shm_base_ns = self.shm.latency_base_ns;
        cfg.network.shm_ns_per_byte = self.shm.latency_ns_per_byte;
        cfg.network.latency_base_ns = self.tcp.latency_base_ns;
        cfg.network.latency_ns_per_byte = self.tcp.latency_ns_per_byte;
        // The measured latency already holds the time a message spends in the
        // sending and receiving kernels; no interface is modelled on top.
        cfg.network.nic_ns_per_message = 0;
    }
}

fn check_cost(name: &str, ns: f64, max: f64) -> Result<(), String> {
    if ns.is_finite() && (0.0..=max).contains(&ns) {
        Ok(())
    } else {
        Err(format!("{name} {ns:.4e} is not a cost in 0..={max} ns"))
    }
}

/// Neither a control character nor an invisible formatting one (bidirectional overrides, zero-width marks):
/// text that prints as what it says.
pub fn is_printable(c: char) -> bool {
    !c.is_control()
        && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}')
}

/// `text` with every character that does not print as itself replaced by U+FFFD, for echoing what a file said.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if is_printable(c) { c } else { '\u{fffd}' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn example() -> MachineModel {
        MachineModel {
            format: FORMAT.into(),
            host: "node1".into(),
            kernel: "6.18.0".into(),
            measured_at: "2026-11-26T10:00:00Z".into(),
            cpus_per_node: 2,
            hz: 250,
            context_switch_ns: 920,
            wake_ns: 23_000,
            wake_busy_ns: 0,
            shm: Transport {
                latency_base_ns: 32.0,
                latency_ns_per_byte: 0.095,
                cpu_base_ns: 65.0,
                cpu_ns_per_byte: 0.19,
            },
            tcp: Transport {
                latency_base_ns: 25_600.0,
                latency_ns_per_byte: 0.104,
                cpu_base_ns: 19_800.0,
                cpu_ns_per_byte: 0.18,
            },
            gang_switch_ns: 60_000,
            gang_slice_skew_ns: 15_000,
            cache_bytes: 17 << 20,
            cache_refill_ns: 900_000,
            background_migration_interval_ns: 4_000_000_000,
            housekeeping_wake_interval_ns: 20_000_000,
            sources: vec!["ctxswitch.json".into()],
        }
    }

    #[test]
    fn a_machine_file_round_trips() {
        let model = example();
        let text = serde_json::to_string_pretty(&model).unwrap();
        assert_eq!(MachineModel::parse(&text).unwrap(), model);
    }

    #[test]
    fn apply_sets_what_was_measured_and_validates() {
        let mut cfg = SimConfig::default();
        example().apply(&mut cfg);
        assert_eq!((cfg.cpus_per_node, cfg.node_scheduler), (2, OsScheduler::Eevdf));
        assert_eq!((cfg.scheduler.tick_ns, cfg.costs.context_switch_ns), (4_000_000, 920));
        assert_eq!((cfg.costs.gang_switch_ns, cfg.network.shm_base_ns), (60_000, 32.0));
        assert_eq!(cfg.network.latency_base_ns, 25_600.0);
        assert_eq!((cfg.costs.cache_bytes, cfg.costs.cache_refill_ns), (17 << 20, 900_000));
        assert_eq!(cfg.scheduler.background_migration_interval_ns, 4_000_000_000);
        assert_eq!(cfg.scheduler.housekeeping_wake_interval_ns, 20_000_000);
        assert_eq!(cfg.scheduler.raise_period_ns % cfg.scheduler.tick_ns, 0);
        cfg.validate().unwrap();
    }

    #[test]
    fn a_file_from_before_the_cache_was_measured_models_no_cache() {
        let mut value = serde_json::to_value(example()).unwrap();
        let fields = value.as_object_mut().unwrap();
        fields.remove("cache_bytes");
        fields.remove("cache_refill_ns");
        fields.remove("background_migration_interval_ns");
        fields.remove("housekeeping_wake_interval_ns");
        let old = MachineModel::parse(&value.to_string()).unwrap();
        let mut cfg = SimConfig::default();
        old.apply(&mut cfg);
        assert_eq!(cfg.costs.cache_refill_ns(1 << 30), 0);
        assert_eq!(cfg.scheduler.background_migration_interval_ns, 0);
        assert_eq!(cfg.scheduler.housekeeping_wake_interval_ns, 0);
    }

    #[test]
    fn background_intervals_outside_a_millisecond_to_an_hour_are_refused() {
        for ns in [1, MIN_BACKGROUND_INTERVAL_NS - 1, MAX_BACKGROUND_INTERVAL_NS + 1] {
            let moves = MachineModel { background_migration_interval_ns: ns, ..example() };
            assert!(moves.check().unwrap_err().contains("background_migration_interval_ns"), "{ns}");
            let wakes = MachineModel { housekeeping_wake_interval_ns: ns, ..example() };
            assert!(wakes.check().unwrap_err().contains("housekeeping_wake_interval_ns"), "{ns}");
        }
        MachineModel { housekeeping_wake_interval_ns: 0, background_migration_interval_ns: 0, ..example() }
            .check()
            .unwrap();
    }

    /// A refill as long as the slice would leave the jobs no time: such a configuration is refused, not run for
    /// ever.
    #[test]
    fn a_gang_slice_must_outlast_the_switch_and_the_refill() {
        let mut cfg = SimConfig { scheme: crate::Scheme::COSCHED_GANG, ..SimConfig::default() };
        MachineModel { cache_bytes: 1, cache_refill_ns: 10_000_000, ..example() }.apply(&mut cfg);
        cfg.costs.gang_quantum_ns = 5_000_000;
        assert!(cfg.validate().unwrap_err().to_string().contains("cache refill"));
        cfg.costs.gang_quantum_ns = 20_000_000;
        cfg.validate().unwrap();
    }

    #[test]
    fn what_a_file_says_is_echoed_without_terminal_escapes() {
        let mut m = example();
        m.format = "x\u{1b}[2J".into();
        assert!(!m.check().unwrap_err().contains('\u{1b}'));
        let unknown = serde_json::to_string(&example()).unwrap().replacen('{', "{\"\\u001b[31mevil\":1,", 1);
        assert!(!MachineModel::parse(&unknown).unwrap_err().contains('\u{1b}'));
    }

    #[test]
    fn a_bad_file_is_refused_naming_the_field() {
        let mut text = serde_json::to_string(&example()).unwrap();
        text = text.replace("\"hz\":250", "\"hz\":0");
        assert!(MachineModel::parse(&text).unwrap_err().contains("hz"));
        let mut m = example();
        m.tcp.latency_ns_per_byte = f64::NAN;
        assert!(m.check().unwrap_err().contains("tcp.latency_ns_per_byte"));
        m = example();
        m.host = "node\u{202e}1".into();
        assert!(m.check().unwrap_err().contains("host"));
        m = example();
        m.shm.latency_ns_per_byte = 1e6;
        assert!(m.check().unwrap_err().contains("shm.latency_ns_per_byte"));
        m = example();
        m.cache_bytes = u64::MAX;
        assert!(m.check().unwrap_err().contains("cache_bytes"));
        m = example();
        m.format = "other".into();
        assert!(m.check().unwrap_err().contains("format"));
        let unknown = serde_json::to_string(&example()).unwrap().replacen('{', "{\"extra\":1,", 1);
        assert!(MachineModel::parse(&unknown).unwrap_err().contains("extra"));
        assert!(MachineModel::parse(&" ".repeat(MAX_FILE_BYTES as usize + 1)).is_err());
    }
}
