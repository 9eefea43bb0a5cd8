//! What of the machine model each scheme reads (`scheme::model_as_read`): a value the scheme's parts do not read
//! changes nothing in its runs, exact or fast. Fast mode's bounds rest on it: a run whose model reads as the
//! measured one keeps them (`engine::fast::machine_as_measured` of the model as read).

mod common;
use common::*;
use cosched_sim::config::{
    BoostDisplaces, BoostReceive, BoostWalk, CostConfig, NetworkConfig, NodeSchedulerConfig, YieldCycle, TOP_LEVEL,
};
use cosched_sim::engine::fast::{machine_as_measured, same_machine_model, FastSettings};
use cosched_sim::run::{run, RunOptions, RunResult};
use cosched_sim::scheme::model_as_read;
use cosched_sim::{SimConfig, SimJob};
use proptest::prelude::*;

/// One value of the model that only some schemes read, set from `drawn`.
type Change = fn(&mut SimConfig, &SimConfig);

const SCHEME_SPECIFIC_VALUES: [(&str, Change); 18] = [
    ("context switch", |c, d| c.costs.context_switch_ns = d.costs.context_switch_ns),
    ("gang quantum", |c, d| c.costs.gang_quantum_ns = d.costs.gang_quantum_ns),
    ("gang switch", |c, d| c.costs.gang_switch_ns = d.costs.gang_switch_ns),
    ("gang switch every quantum", |c, d| c.costs.gang_switch_every_quantum = d.costs.gang_switch_every_quantum),
    ("gang start waits", |c, d| c.costs.gang_start_waits_for_quantum = d.costs.gang_start_waits_for_quantum),
    ("I/O keeps its CPU", |c, d| c.costs.io_keeps_cpu_below_ns = d.costs.io_keeps_cpu_below_ns),
    ("boost keeps quantum", |c, d| c.costs.boost_keeps_quantum = d.costs.boost_keeps_quantum),
    ("interrupt", |c, d| c.costs.interrupt_ns = d.costs.interrupt_ns),
    ("queue move", |c, d| c.costs.queue_move_ns = d.costs.queue_move_ns),
    ("endpoint check", |c, d| c.costs.endpoint_check_ns = d.costs.endpoint_check_ns),
    ("system call", |c, d| c.costs.syscall_ns = d.costs.syscall_ns),
    ("spin factor", |c, d| c.costs.spin_factor = d.costs.spin_factor),
    ("boost walk", |c, d| c.costs.boost_walk = d.costs.boost_walk),
    ("boost receive", |c, d| c.costs.boost_receive = d.costs.boost_receive),
    ("boost displaces", |c, d| c.costs.boost_displaces = d.costs.boost_displaces),
    ("yield cycle", |c, d| c.costs.yield_cycle = d.costs.yield_cycle),
    ("MLFQ quanta", |c, d| c.scheduler.quantum_ns_by_level.clone_from(&d.scheduler.quantum_ns_by_level)),
    ("MLFQ raise", |c, d| c.scheduler.raise_period_ns = d.scheduler.raise_period_ns),
];

/// A model with every scheme-specific value drawn anew.
fn drawn_model() -> impl Strategy<Value = SimConfig> {
    let gang = (50u64..400, 0u64..5_000, any::<bool>(), any::<bool>(), 0u64..1_000);
    let costs = (0u64..3_000, any::<bool>(), 0u64..200, 0u64..20, 0u64..20, 0u64..20, 1u32..50);
    let readings = (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>());
    let mlfq = (prop::collection::vec(5u64..300, 6), 1u64..2_000);
    (gang, costs, readings, mlfq).prop_map(|(gang, costs, readings, (bands, raise_extra_ticks))| {
        let mut m = SimConfig::default();
        m.costs.context_switch_ns = gang.4 * US;
        m.costs.gang_quantum_ns = gang.0 * MS;
        m.costs.gang_switch_ns = gang.1 * US;
        m.costs.gang_switch_every_quantum = gang.2;
        m.costs.gang_start_waits_for_quantum = gang.3;
        m.costs.io_keeps_cpu_below_ns = costs.0 * US;
        m.costs.boost_keeps_quantum = costs.1;
        m.costs.interrupt_ns = costs.2 * US;
        m.costs.queue_move_ns = costs.3 * US;
        m.costs.endpoint_check_ns = costs.4 * US;
        m.costs.syscall_ns = costs.5 * US;
        m.costs.spin_factor = costs.6 as f64 / 10.0;
        m.costs.boost_walk = if readings.0 { BoostWalk::SameTick } else { BoostWalk::TickBefore };
        m.costs.boost_receive = if readings.1 { BoostReceive::PerMessage } else { BoostReceive::Whole };
        m.costs.boost_displaces = if readings.2 { BoostDisplaces::Spinning } else { BoostDisplaces::Any };
        m.costs.yield_cycle = if readings.3 { YieldCycle::Repeated } else { YieldCycle::Once };
        let bands: [u64; 6] = bands.try_into().unwrap();
        m.scheduler.quantum_ns_by_level = cosched_sim::config::quantum_table_from_bands_ms(&bands);
        // A whole number of ticks above the top quantum, as the MLFQ needs.
        let tick = m.scheduler.tick_ns;
        let top_quantum_ticks = m.scheduler.quantum_ns(TOP_LEVEL).div_ceil(tick);
        m.scheduler.raise_period_ns = (top_quantum_ticks + raise_extra_ticks) * tick;
        m
    })
}

/// `cfg` with every scheme-specific value its scheme does not read taken from `drawn`: the values it does read
/// stay.
fn unread_changed(cfg: &SimConfig, drawn: &SimConfig) -> (SimConfig, Vec<&'static str>) {
    let (mut changed, mut names) = (cfg.clone(), Vec::new());
    for (name, change) in SCHEME_SPECIFIC_VALUES {
        let mut probe = cfg.clone();
        change(&mut probe, drawn);
        if same_machine_model(&model_as_read(&probe), &model_as_read(cfg)) {
            change(&mut changed, drawn);
            if !same_machine_model(&probe, cfg) {
                names.push(name);
            }
        }
    }
    (changed, names)
}

fn outputs(r: &RunResult) -> String {
    format!("{:?}\n{:?}\n{:?}\n{}", r.jobs, r.trace, r.per_cpu_time, serde_json::to_string(&r.summary).unwrap())
}

fn run_both_ways(cfg: &SimConfig, jobs: &[SimJob]) -> (String, String) {
    let exact = RunOptions { record_trace: true, ..RunOptions::default() };
    let fast = RunOptions {
        fast: Some(FastSettings { warmup_ns: MS, window_ns: 5 * MS, ..FastSettings::default() }),
        fast_unvalidated: true,
        ..RunOptions::default()
    };
    let run_with = |options: &RunOptions| outputs(&run(cfg, jobs.to_vec(), options, |_| {}).unwrap());
    (run_with(&exact), run_with(&fast))
}

proptest! {
    // About 40 cases per scheme and node scheduler, four small runs each (exact and fast, as drawn and changed).
        #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_model_value_the_scheme_does_not_read_changes_none_of_its_runs(
        (cfg, jobs) in small_runs(),
        drawn in drawn_model(),
    ) {
        let (changed, names) = unread_changed(&cfg, &drawn);
        let (exact, fast) = run_both_ways(&cfg, &jobs);
        let (exact_changed, fast_changed) = run_both_ways(&changed, &jobs);
        prop_assert!(exact == exact_changed, "{}: exact runs differ with {:?} changed", cfg.scheme.name(), names);
        prop_assert!(fast == fast_changed, "{}: fast runs differ with {:?} changed", cfg.scheme.name(), names);
    }
}

/// A model with every value moved from the default. Written field by field, with no `..`: a value added to the
/// model fails to compile here until it is moved too, and so reaches the test below.
fn every_value_moved() -> SimConfig {
    let stock = SimConfig::default();
    let network = NetworkConfig {
        latency_base_ns: 2.0 * stock.network.latency_base_ns,
        latency_ns_per_byte: 2.0 * stock.network.latency_ns_per_byte,
        nic_ns_per_message: 2 * stock.network.nic_ns_per_message,
        shm_base_ns: 2.0 * stock.network.shm_base_ns,
        shm_ns_per_byte: 2.0 * stock.network.shm_ns_per_byte,
        message_bytes: 2 * stock.network.message_bytes,
    };
    let c = &stock.costs;
    let costs = CostConfig {
        context_switch_ns: 2 * c.context_switch_ns,
        gang_switch_ns: 2 * c.gang_switch_ns,
        interrupt_ns: 2 * c.interrupt_ns,
        queue_move_ns: 2 * c.queue_move_ns,
        endpoint_check_ns: 2 * c.endpoint_check_ns,
        gang_quantum_ns: 2 * c.gang_quantum_ns,
        syscall_ns: 2 * c.syscall_ns,
        spin_factor: 2.0 * c.spin_factor,
        boost_keeps_quantum: !c.boost_keeps_quantum,
        boost_walk: if c.boost_walk == BoostWalk::SameTick { BoostWalk::TickBefore } else { BoostWalk::SameTick },
        boost_receive: if c.boost_receive == BoostReceive::Whole {
            BoostReceive::PerMessage
        } else {
            BoostReceive::Whole
        },
        boost_displaces: if c.boost_displaces == BoostDisplaces::Any {
            BoostDisplaces::Spinning
        } else {
            BoostDisplaces::Any
        },
        yield_cycle: if c.yield_cycle == YieldCycle::Once { YieldCycle::Repeated } else { YieldCycle::Once },
        gang_switch_every_quantum: !c.gang_switch_every_quantum,
        io_keeps_cpu_below_ns: c.io_keeps_cpu_below_ns + 100 * US,
        gang_start_waits_for_quantum: !c.gang_start_waits_for_quantum,
        cache_refill_ns: c.cache_refill_ns + 1_000,
        cache_bytes: c.cache_bytes + (1 << 20),
    };
    let s = &stock.scheduler;
    let scheduler = NodeSchedulerConfig {
        tick_ns: 2 * s.tick_ns,
        raise_period_ns: 2 * s.raise_period_ns,
        quantum_ns_by_level: s.quantum_ns_by_level.iter().map(|q| 2 * q).collect(),
        background_migration_interval_ns: s.background_migration_interval_ns + MS,
        housekeeping_wake_interval_ns: s.housekeeping_wake_interval_ns + MS,
        base_slice_cpus: s.base_slice_cpus + 1,
    };
    SimConfig { network, costs, scheduler, ..stock }
}

/// The values the tests change are every scheme-specific value: set one by one from a model with every value
/// moved, onto that model with the scheme-specific values at the default, they give the model back.
#[test]
fn the_values_the_tests_change_are_every_scheme_specific_one() {
    let moved = every_value_moved();
    let mut put_back = moved.scheme_specific_values_at_default();
    assert!(!same_machine_model(&put_back, &moved), "some value is scheme-specific");
    for (_, change) in SCHEME_SPECIFIC_VALUES {
        change(&mut put_back, &moved);
    }
    assert!(same_machine_model(&put_back, &moved), "a scheme-specific value the tests leave out");
}

/// The parts declare each scheme-specific value read by some scheme and not by another, and a scheme keeps fast
/// mode's bounds over a value it does not declare read.
#[test]
fn each_scheme_specific_value_is_declared_read_by_some_scheme_and_not_by_another() {
    let schemes: Vec<SimConfig> = cosched_sim::Scheme::all_names()
        .into_iter()
        .flat_map(|name| {
            let scheme = name.parse().unwrap();
            [cosched_sim::OsScheduler::Mlfq, cosched_sim::OsScheduler::Eevdf].map(|node_scheduler| SimConfig {
                scheme,
                node_scheduler,
                ..SimConfig::default()
            })
        })
        .collect();
    let drawn = every_value_moved();
    for (name, change) in SCHEME_SPECIFIC_VALUES {
        let readers: Vec<String> = schemes
            .iter()
            .filter(|cfg| {
                let mut probe = (*cfg).clone();
                change(&mut probe, &drawn);
                !machine_as_measured(&model_as_read(&probe))
            })
            .map(|cfg| format!("{} on {}", cfg.scheme.name(), cfg.node_scheduler))
            .collect();
        assert!(!readers.is_empty(), "{name}: no scheme reads it");
        assert!(readers.len() < schemes.len(), "{name}: every scheme reads it");
    }
}
