//! The reference study's experiments E1-E5. Every experiment is a list of
//! independent runs (a scheme, a workload mix, a load, machine parameters and
//! a replication seed) executed in parallel. Every reported point is the mean
//! over its replications with a 95 % confidence interval.
//!
//! An experiment's [`design`] is its full, ordered list of runs. [`run_study`]
//! runs it here (E1 adaptively, leaving out what saturation makes needless);
//! [`run_selected`] runs any subset of it (a shard, a worker's share) and
//! [`assemble`] puts the pieces together into exactly `run_study`'s rows.

use crate::batch::{run_all, BatchWatch, RunWatch};
use crate::csv::{csv_field, flag, float, int, kinds, num, text, to_csv, Column, ColumnKinds};
use crate::journal::Journal;
use crate::workload::{bounded_slowdown_threshold_s, load_workload, JobSizes, WorkloadSpec};
use cosched_core::stats::Estimate;
use cosched_sim::config::{Backfill, BoostDisplaces, BoostReceive, BoostWalk, CostConfig, YieldCycle};
use cosched_sim::exact_f64;
use cosched_sim::input::{sim_jobs, JobRequest, WorkloadPlan};
use cosched_sim::metrics::SaturationVerdict;
use cosched_sim::run::{RunOptions, RunResult};
use cosched_sim::{Mix, OsScheduler, Scheme, SimConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::str::FromStr;

/// The five experiments; written and read as their names (`e1`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Load: response against delivered utilization as load rises.
    E1,
    /// Nature of the workload.
    E2,
    /// Multiprogramming level.
    E3,
    /// Skew.
    E4,
    /// System overheads.
    E5,
    /// E1's sensitivity to the model's open choices: every scheme's capacity
    /// and E2's runs under each choice.
    E1s,
}

impl Experiment {
    pub const ALL: [Experiment; 6] =
        [Experiment::E1, Experiment::E2, Experiment::E3, Experiment::E4, Experiment::E5, Experiment::E1s];

    pub fn name(self) -> &'static str {
        match self {
            Experiment::E1 => "e1",
            Experiment::E2 => "e2",
            Experiment::E3 => "e3",
            Experiment::E4 => "e4",
            Experiment::E5 => "e5",
            Experiment::E1s => "e1s",
        }
    }
}

impl FromStr for Experiment {
    type Err = String;
    fn from_str(text: &str) -> Result<Experiment, String> {
        Experiment::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| format!("unknown experiment '{text}'; known: e1, e2, e3, e4, e5, e1s"))
    }
}

/// Jobs per run and run-time scale of the study at full size (`--full`).
pub const FULL_JOBS_PER_RUN: usize = 1000;
pub const FULL_RUNTIME_SCALE: f64 = 0.01;

/// How a study is run. Written and read back without loss (shard documents
/// hold it, and shards merge only with the same settings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudySettings {
    /// Jobs per run (the Lublin-Feitelson model sized to the machine).
    pub jobs_per_run: usize,
    /// Multiplies every nominal run time.
    #[serde(with = "exact_f64")]
    pub runtime_scale: f64,
    /// Offered loads: E1's steps, or the others' single load (its first value); `None`: the experiment's own.
    #[serde(with = "exact_f64::option_list")]
    pub loads: Option<Vec<f64>>,
    pub schemes: Vec<Scheme>,
    /// Seed of the first replication; replication k uses `first_seed + k`.
    pub first_seed: u64,
    pub replications: u32,
    /// A run stops at this many times (arrival span + MPL x longest run time).
    #[serde(with = "exact_f64")]
    pub horizon_factor: f64,
    /// E1: also run a scheme at the loads above the one where it saturated.
    pub keep_saturated: bool,
    /// Where the jobs' sizes come from (left out of documents at its default,
    /// so those of earlier builds read and merge as before).
    #[serde(default, skip_serializing_if = "JobSizes::is_machine")]
    pub job_sizes: JobSizes,
    /// E1, E1s: the offered load of the capacity runs (overloaded: the queue never empties).
    #[serde(default = "default_capacity_load", with = "exact_f64")]
    pub capacity_load: f64,
    /// E1, E1s: jobs per capacity run; capacity is measured over the second half of their arrivals.
    #[serde(default = "default_capacity_jobs")]
    pub capacity_jobs: usize,
    /// The model's open choices every run starts from (docs/model.md).
    #[serde(default)]
    pub model: ModelChoices,
    /// E3: run each scheme and workload at this fraction of its own capacity at MPL 2, measured first (0: every
    /// run at the experiment's offered load; absent from documents then).
    #[serde(default, skip_serializing_if = "is_zero", with = "exact_f64")]
    pub e3_load_fraction: f64,
    /// E1s: the keys of the variants to run beside the model as set (`ModelChoices::SENSITIVITY_KEYS`); empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e1s_variants: Vec<String>,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

fn default_capacity_load() -> f64 {
    2.0
}

fn default_capacity_jobs() -> usize {
    2000
}

/// The choices of the model the study's text leaves open (docs/model.md),
/// as a study sets them for every run. The defaults are the model's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelChoices {
    /// The context switch `CS` (E5 sets its own).
    pub context_switch_ns: u64,
    /// An I/O shorter than this keeps the CPU (0: every I/O blocks).
    pub io_keeps_cpu_below_ns: u64,
    /// GS: a job placed in the running row waits for the next quantum.
    pub gang_start_waits_for_quantum: bool,
    /// When periodic boost's walk runs.
    pub boost_walk: BoostWalk,
    /// When a receive is a candidate of the boost walk (absent: whole, so that earlier documents read the same).
    #[serde(default, skip_serializing_if = "BoostReceive::is_default")]
    pub boost_receive: BoostReceive,
    /// Which running process a boost displaces (absent: any).
    #[serde(default, skip_serializing_if = "BoostDisplaces::is_default")]
    pub boost_displaces: BoostDisplaces,
    /// Spin-yield's cycle (absent: once).
    #[serde(default, skip_serializing_if = "YieldCycle::is_default")]
    pub yield_cycle: YieldCycle,
    /// The OS scheduler of the nodes of every scheme but GS (absent: the
    /// study's MLFQ, so that earlier documents read the same).
    #[serde(default, skip_serializing_if = "OsScheduler::is_default")]
    pub node_scheduler: OsScheduler,
    /// The queue behind a job that does not fit (absent: the study's strict FCFS, so that earlier documents
    /// read the same).
    #[serde(default, skip_serializing_if = "Backfill::is_none")]
    pub backfill: Backfill,
}

impl Default for ModelChoices {
    fn default() -> Self {
        let costs = CostConfig::default();
        ModelChoices {
            context_switch_ns: costs.context_switch_ns,
            io_keeps_cpu_below_ns: costs.io_keeps_cpu_below_ns,
            gang_start_waits_for_quantum: costs.gang_start_waits_for_quantum,
            boost_walk: costs.boost_walk,
            boost_receive: costs.boost_receive,
            boost_displaces: costs.boost_displaces,
            yield_cycle: costs.yield_cycle,
            node_scheduler: OsScheduler::default(),
            backfill: Backfill::None,
        }
    }
}

impl ModelChoices {
    /// `config` with these choices.
    pub fn applied(&self, config: SimConfig) -> SimConfig {
        let mut config = config;
        config.costs.context_switch_ns = self.context_switch_ns;
        config.costs.io_keeps_cpu_below_ns = self.io_keeps_cpu_below_ns;
        config.costs.gang_start_waits_for_quantum = self.gang_start_waits_for_quantum;
        config.costs.boost_walk = self.boost_walk;
        config.costs.boost_receive = self.boost_receive;
        config.costs.boost_displaces = self.boost_displaces;
        config.costs.yield_cycle = self.yield_cycle;
        config.node_scheduler = self.node_scheduler;
        config.backfill = self.backfill;
        config
    }

    /// The keys of E1s's variants after the first (`--variants`), in their order.
    pub const SENSITIVITY_KEYS: [&'static str; 8] =
        ["cs", "io", "gang-start", "walk", "receive", "displaces", "yield", "together"];

    /// E1s's variants, each with its key: these choices ("as-set"), then each open choice turned the other way
    /// (`SENSITIVITY_KEYS` in order), then the two cost choices and the three readings of periodic boost and
    /// spin-yield turned together.
    pub fn sensitivity_variants(&self) -> Vec<(&'static str, String, ModelChoices)> {
        let stock = self.clone();
        let cs_us = self.context_switch_ns / 1_000;
        let other_cs_ns = if self.context_switch_ns == 100_000 { 200_000 } else { 100_000 };
        let io_keeps = if self.io_keeps_cpu_below_ns == 0 { self.context_switch_ns } else { 0 };
        let walk = other_of(self.boost_walk, [BoostWalk::TickBefore, BoostWalk::SameTick]);
        let receive = other_of(self.boost_receive, [BoostReceive::Whole, BoostReceive::PerMessage]);
        let displaces = other_of(self.boost_displaces, [BoostDisplaces::Any, BoostDisplaces::Spinning]);
        let cycle = other_of(self.yield_cycle, [YieldCycle::Once, YieldCycle::Repeated]);
        let turned = vec![
            (
                format!("CS {} µs", other_cs_ns / 1_000),
                ModelChoices { context_switch_ns: other_cs_ns, ..stock.clone() },
            ),
            (
                if io_keeps > 0 { format!("I/O < {cs_us} µs keeps CPU") } else { "every I/O blocks".into() },
                ModelChoices { io_keeps_cpu_below_ns: io_keeps, ..stock.clone() },
            ),
            (
                if self.gang_start_waits_for_quantum { "GS start mid-quantum" } else { "GS start next quantum" }.into(),
                ModelChoices { gang_start_waits_for_quantum: !self.gang_start_waits_for_quantum, ..stock.clone() },
            ),
            (format!("PB walk {}", walk.name()), ModelChoices { boost_walk: walk, ..stock.clone() }),
            (format!("receive {}", receive.name()), ModelChoices { boost_receive: receive, ..stock.clone() }),
            (
                format!("boost displaces {}", displaces.name()),
                ModelChoices { boost_displaces: displaces, ..stock.clone() },
            ),
            (format!("SY yields {}", cycle.name()), ModelChoices { yield_cycle: cycle, ..stock.clone() }),
            (
                "CS, I/O and readings turned".into(),
                ModelChoices {
                    context_switch_ns: other_cs_ns,
                    io_keeps_cpu_below_ns: if io_keeps > 0 { other_cs_ns } else { 0 },
                    boost_receive: receive,
                    boost_displaces: displaces,
                    yield_cycle: cycle,
                    ..stock.clone()
                },
            ),
        ];
        let keyed = Self::SENSITIVITY_KEYS.into_iter().zip(turned).map(|(key, (label, choices))| (key, label, choices));
        std::iter::once(("as-set", "as set".into(), stock)).chain(keyed).collect()
    }
}

/// Of a choice's two readings, the one that is not `current`.
fn other_of<T: PartialEq + Copy>(current: T, both: [T; 2]) -> T {
    if current == both[0] {
        both[1]
    } else {
        both[0]
    }
}

impl Default for StudySettings {
    fn default() -> Self {
        StudySettings {
            jobs_per_run: 150,
            runtime_scale: 0.001,
            loads: None,
            schemes: Scheme::study_names().iter().map(|n| n.parse().expect("the table's names parse")).collect(),
            first_seed: 1,
            replications: 3,
            horizon_factor: 3.0,
            keep_saturated: false,
            job_sizes: JobSizes::Machine,
            capacity_load: default_capacity_load(),
            capacity_jobs: default_capacity_jobs(),
            model: ModelChoices::default(),
            e3_load_fraction: 0.0,
            e1s_variants: Vec::new(),
        }
    }
}

/// The most runs a design may hold: far beyond a full study (E1 at full size
/// is 270 runs), and a bound on what a settings file can make us allocate.
pub const MAX_DESIGN_RUNS: usize = 100_000;

impl StudySettings {
    pub fn seeds(&self) -> Vec<u64> {
        (0..self.replications as u64).map(|k| self.first_seed.wrapping_add(k)).collect()
    }

    /// Settings a study can run with, named by the flags that set them.
    pub fn check(&self, experiment: Experiment) -> Result<(), String> {
        if self.jobs_per_run < 10 {
            return Err("--jobs must be at least 10".into());
        }
        if !self.runtime_scale.is_finite() || self.runtime_scale <= 0.0 {
            return Err("--runtime-scale must be positive".into());
        }
        if self.horizon_factor.is_nan() || self.horizon_factor < 1.0 {
            return Err("--horizon-factor must be at least 1".into());
        }
        if !(1..=100).contains(&self.replications) {
            return Err(format!("--replications must be 1 to 100, got {}", self.replications));
        }
        if let Some(loads) = &self.loads {
            if loads.is_empty() || loads.iter().any(|l| !l.is_finite() || *l <= 0.0) {
                return Err("--loads must be positive numbers".into());
            }
        }
        crate::sim::check_schemes(&self.schemes)?;
        if !self.capacity_load.is_finite() || self.capacity_load <= 0.0 {
            return Err("--capacity-load must be positive".into());
        }
        if self.capacity_jobs < 10 {
            return Err("--capacity-jobs must be at least 10".into());
        }
        if !(0.0..1.0).contains(&self.e3_load_fraction) || self.e3_load_fraction.is_nan() {
            return Err("--e3-load-fraction must be at least 0 and below 1 (0: the fixed offered load)".into());
        }
        if self.e3_at_own_capacity() && (experiment != Experiment::E3 || self.loads.is_some()) {
            return Err("--e3-load-fraction is E3's alone, and sets its loads: not with --loads".into());
        }
        if !self.e1s_variants.is_empty() && experiment != Experiment::E1s {
            return Err("--variants is E1s's alone".into());
        }
        if let Some(unknown) = self.e1s_variants.iter().find(|k| !ModelChoices::SENSITIVITY_KEYS.contains(&k.as_str()))
        {
            let known = ModelChoices::SENSITIVITY_KEYS.join(", ");
            return Err(format!("--variants: no variant {unknown:?} (the variants: {known})"));
        }
        if self.model.context_switch_ns == 0 {
            // (A free switch lets a process send while it is being switched in: the engine refuses it.)
            return Err("--cs-us must be positive".into());
        }
        let runs = design_len(experiment, self);
        if runs > MAX_DESIGN_RUNS {
            return Err(format!("{runs} runs: a study may hold at most {MAX_DESIGN_RUNS}"));
        }
        Ok(())
    }

    /// E3 runs each scheme at a fraction of its own capacity.
    pub fn e3_at_own_capacity(&self) -> bool {
        self.e3_load_fraction > 0.0
    }

    fn single_load(&self, default: f64) -> f64 {
        self.loads.as_ref().and_then(|l| l.first().copied()).unwrap_or(default)
    }
}

/// Default loads. E1 climbs until the best schemes saturate. E3-E5 run where
/// their effects can show (docs/reproduction.md, "Choosing the loads"): at
/// 0.9, jobs queue at MPL 2 and CPUs hold more than 5 processes at MPL 16.
const E1_LOADS: [f64; 9] = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const E2_LOAD: f64 = 0.5;
const E2_MIXES: [&str; 4] = ["WL4", "WL5", "WL2", "WL3"];
const E3_TO_E5_LOAD: f64 = 0.9;
const E3_MIXES: [&str; 3] = ["WL2", "WL4", "WL5"];
/// E3's multiprogramming levels, the baseline first.
const E3_MPLS: [u32; 3] = [2, 5, 16];
const TWO_STEPS: &str = "--e3-load-fraction runs in two steps, the second at loads the first measures: it cannot \
                         run in shards or by index";

/// The machine and cost model every run of a study starts from.
pub fn base_config(scheme: Scheme, seed: u64) -> SimConfig {
    SimConfig { scheme, nodes: 32, cpus_per_node: 1, mpl: 5, skew: 0.2, seed, ..SimConfig::default() }
}

/// A run's machine: the base, with the settings' open choices.
pub fn study_config(settings: &StudySettings, scheme: Scheme, seed: u64) -> SimConfig {
    settings.model.applied(base_config(scheme, seed))
}

/// The group of E1's and E1s's capacity runs.
pub const CAPACITY_GROUP: &str = "capacity";

/// One run of a study: where it stands in the tables (group, variant), its
/// workload (mix, load) and the machine and scheme it runs (its config,
/// whose seed is the replication's).
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub group: String,
    pub variant: String,
    pub mix: Mix,
    pub load: f64,
    /// Jobs in its workload.
    pub jobs: usize,
    pub replication: u32,
    pub config: SimConfig,
}

impl RunSpec {
    /// A short name for progress lines and errors.
    pub fn label(&self) -> String {
        run_label(self.config.scheme.name(), &self.mix.to_string(), &self.group, &self.variant, self.config.seed)
    }
}

fn run_label(scheme: &str, mix: &str, group: &str, variant: &str, seed: u64) -> String {
    let named: Vec<&str> = [scheme, mix, group, variant].into_iter().filter(|part| !part.is_empty()).collect();
    format!("{} seed {seed}", named.join(" "))
}

/// One run's outcome, as reported. Written and read back without loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRow {
    pub group: String,
    pub variant: String,
    pub scheme: String,
    pub mix: String,
    #[serde(with = "exact_f64")]
    pub load: f64,
    pub replication: u32,
    pub seed: u64,
    pub mpl: u32,
    #[serde(with = "exact_f64")]
    pub skew: f64,
    #[serde(with = "exact_f64")]
    pub offered_load: f64,
    pub jobs: usize,
    pub completed: usize,
    #[serde(with = "exact_f64")]
    pub delivered_utilization: f64,
    #[serde(with = "exact_f64")]
    pub compute_utilization: f64,
    /// Delivered utilization from the middle arrival to the last: in an
    /// overloaded run, the scheme's capacity.
    #[serde(with = "exact_f64")]
    pub delivered_utilization_second_half: f64,
    #[serde(with = "exact_f64")]
    pub compute_utilization_second_half: f64,
    #[serde(with = "exact_f64")]
    pub mean_response_s: f64,
    #[serde(with = "exact_f64")]
    pub mean_wait_s: f64,
    #[serde(with = "exact_f64")]
    pub mean_execution_s: f64,
    #[serde(with = "exact_f64")]
    pub mean_slowdown: f64,
    pub peak_processes_per_cpu: usize,
    pub saturation: SaturationVerdict,
}

impl RunRow {
    pub fn label(&self) -> String {
        run_label(&self.scheme, &self.mix, &self.group, &self.variant, self.seed)
    }

    /// Whether this is the outcome of `spec`: the same place in the tables,
    /// workload, scheme, seed and machine.
    pub fn is_of(&self, spec: &RunSpec) -> bool {
        self.group == spec.group
            && self.variant == spec.variant
            && self.scheme == spec.config.scheme.name()
            && self.mix == spec.mix.to_string()
            && self.load.to_bits() == spec.load.to_bits()
            && self.replication == spec.replication
            && self.seed == spec.config.seed
            && self.mpl == spec.config.mpl
            && self.skew.to_bits() == spec.config.skew.to_bits()
    }
}

/// The runs of one (group, variant, scheme) over its replications.
pub struct Point<'a> {
    pub runs: Vec<&'a RunRow>,
}

impl Point<'_> {
    pub fn first(&self) -> &RunRow {
        self.runs[0]
    }
    pub fn estimate(&self, value: impl Fn(&RunRow) -> f64) -> Estimate {
        let values: Vec<f64> = self.runs.iter().map(|r| value(r)).collect();
        Estimate::of(&values).expect("a point has runs")
    }
    pub fn saturated_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.saturation.saturated).count()
    }
    /// Saturated when most of its replications saturate.
    pub fn saturated(&self) -> bool {
        2 * self.saturated_runs() > self.runs.len()
    }
}

/// Every run of the experiment, in design order (E1: load by load, leaving
/// out a scheme's runs above its first saturated load unless `keep_saturated`).
pub fn run_study<W: BatchWatch>(
    experiment: Experiment,
    settings: &StudySettings,
    watch: &W,
    journal: &Journal,
) -> Result<Vec<RunRow>, String> {
    match experiment {
        Experiment::E1 => execute_e1(settings, watch, journal),
        Experiment::E3 if settings.e3_at_own_capacity() => execute_e3_at_own_capacity(settings, watch, journal),
        _ => execute(&plan(experiment, settings), settings, watch, journal),
    }
}

/// The experiment's runs, in order: E1 load by load (each load's schemes,
/// each scheme's replications), E2-E5 replication by replication (each
/// replication's schemes, each scheme's variants). E1's design is its full
/// grid, saturated runs included; [`assemble`] leaves those out as
/// [`run_study`] does.
pub fn design(experiment: Experiment, settings: &StudySettings) -> Vec<RunSpec> {
    match experiment {
        Experiment::E1 => {
            e1_capacity_runs(settings).into_iter().chain(e1_steps(settings).into_iter().flatten()).collect()
        }
        _ => plan(experiment, settings),
    }
}

/// How many runs [`design`] holds, counted without building it (a
/// settings file's counts may be absurd).
pub fn design_len(experiment: Experiment, settings: &StudySettings) -> usize {
    let per_scheme_and_replication = match experiment {
        Experiment::E1 => 1 + settings.loads.as_ref().map_or(E1_LOADS.len(), Vec::len),
        Experiment::E3 if settings.e3_at_own_capacity() => E3_MIXES.len() * (1 + E3_MPLS.len()),
        _ => settings.schemes.first().map_or(0, |&s| variants(experiment, settings, &base_config(s, 0), 0).len()),
    };
    per_scheme_and_replication.saturating_mul(settings.schemes.len()).saturating_mul(settings.replications as usize)
}

/// Run the design's runs at `indices` (each at most once), in parallel,
/// generating only the workloads they need: `(index, row)` in the order given.
/// A run's row does not depend on which other runs run beside it.
pub fn run_selected<W: BatchWatch>(
    experiment: Experiment,
    settings: &StudySettings,
    indices: &[usize],
    watch: &W,
) -> Result<Vec<(usize, RunRow)>, String> {
    settings.check(experiment)?;
    if experiment == Experiment::E3 && settings.e3_at_own_capacity() {
        return Err(TWO_STEPS.into());
    }
    let design = design(experiment, settings);
    IndexAudit::of(indices, design.len(), |_| true).refuse_extra(&the_design(design.len()))?;
    if indices.is_empty() {
        return Ok(Vec::new());
    }
    let specs: Vec<RunSpec> = indices.iter().map(|&i| design[i].clone()).collect();
    let rows = execute(&specs, settings, watch, &Journal::none())?;
    Ok(indices.iter().copied().zip(rows).collect())
}

/// The rows [`run_study`] gives, from the rows of every run of the design
/// (each index exactly once, in any order): ordered by index, each checked
/// to be the outcome of its run, and for E1 the runs above a scheme's first
/// saturated load left out unless `keep_saturated`.
pub fn assemble(
    experiment: Experiment,
    settings: &StudySettings,
    mut results: Vec<(usize, RunRow)>,
) -> Result<Vec<RunRow>, String> {
    settings.check(experiment)?;
    let design = design(experiment, settings);
    let indices: Vec<usize> = results.iter().map(|(i, _)| *i).collect();
    IndexAudit::of(&indices, design.len(), |_| true).refuse(&the_design(design.len()))?;
    results.sort_by_key(|(i, _)| *i);
    check_runs_match(&design, &results)?;
    let rows = results.into_iter().map(|(_, row)| row).collect();
    Ok(match experiment {
        Experiment::E1 => leave_out_saturated(settings, rows),
        _ => rows,
    })
}

/// The finished runs of an interrupted study (`kept`, in any order) in the order [`run_study`] lists them, so
/// that a partial study's tables lay out as the whole one's. A row that is the outcome of no run of the
/// study is left out.
pub fn in_study_order(experiment: Experiment, settings: &StudySettings, kept: Vec<RunRow>) -> Vec<RunRow> {
    let mut kept_by_label: BTreeMap<String, Vec<RunRow>> = BTreeMap::new();
    for row in kept {
        kept_by_label.entry(row.label()).or_default().push(row);
    }
    let mut take_in_order = |specs: &[RunSpec]| -> Vec<RunRow> {
        let mut take = |spec: &RunSpec| {
            let same_label = kept_by_label.get_mut(&spec.label())?;
            let at = same_label.iter().position(|r| r.is_of(spec))?;
            Some(same_label.swap_remove(at))
        };
        specs.iter().filter_map(&mut take).collect()
    };
    if experiment == Experiment::E3 && settings.e3_at_own_capacity() {
        let mut rows = take_in_order(&e3_capacity_runs(settings));
        // The second step ran only once every capacity was kept; its loads come from them.
        if let Ok(specs) = e3_runs_at_own_capacity(settings, &rows) {
            rows.extend(take_in_order(&specs));
        }
        return rows;
    }
    take_in_order(&design(experiment, settings))
}

/// Every row is the outcome of the design's run at its index.
pub(crate) fn check_runs_match(design: &[RunSpec], results: &[(usize, RunRow)]) -> Result<(), String> {
    for (index, row) in results {
        let spec = design.get(*index).ok_or_else(|| format!("run {index} is not in the design"))?;
        if !row.is_of(spec) {
            return Err(format!("run {index} should be '{}' but holds '{}'", spec.label(), row.label()));
        }
    }
    Ok(())
}

/// Of a list of indices into a design `0..len`, part of which (`belongs`)
/// is wanted: the indices that are not (out of range, or not wanted), those
/// given more than once, and the wanted ones absent.
pub(crate) struct IndexAudit {
    unexpected: Vec<usize>,
    duplicated: Vec<usize>,
    missing: Vec<usize>,
}

impl IndexAudit {
    pub(crate) fn of(indices: &[usize], len: usize, belongs: impl Fn(usize) -> bool) -> IndexAudit {
        let mut seen = vec![0u32; len];
        let mut unexpected = Vec::new();
        for &i in indices {
            match seen.get_mut(i).filter(|_| belongs(i)) {
                Some(count) => *count = count.saturating_add(1),
                None => unexpected.push(i),
            }
        }
        let missing = (0..len).filter(|&i| belongs(i) && seen[i] == 0).collect();
        let duplicated = (0..len).filter(|&i| seen[i] > 1).collect();
        IndexAudit { unexpected, duplicated, missing }
    }

    /// An error naming the runs that are not `whose` (what the indices are
    /// of), or given more than once.
    pub(crate) fn refuse_extra(&self, whose: &str) -> Result<(), String> {
        if !self.unexpected.is_empty() {
            return Err(format!("runs not in {whose}: {}", some_of(&self.unexpected)));
        }
        if !self.duplicated.is_empty() {
            return Err(format!("runs given more than once: {}", some_of(&self.duplicated)));
        }
        Ok(())
    }

    /// As [`IndexAudit::refuse_extra`], and also naming the wanted runs absent.
    pub(crate) fn refuse(&self, whose: &str) -> Result<(), String> {
        self.refuse_extra(whose)?;
        if !self.missing.is_empty() {
            return Err(format!("runs of {whose} missing: {}", some_of(&self.missing)));
        }
        Ok(())
    }
}

/// How errors name a design's indices.
fn the_design(len: usize) -> String {
    format!("the design ({len} runs, numbered from 0)")
}

/// The first few numbers of a list, and how many more there are.
pub(crate) fn some_of<T: std::fmt::Display>(items: &[T]) -> String {
    const SHOWN: usize = 12;
    let shown: Vec<String> = items.iter().take(SHOWN).map(T::to_string).collect();
    match items.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{} and {more} more", shown.join(", ")),
        _ => shown.join(", "),
    }
}

fn mix(name: &str) -> Mix {
    name.parse().expect("known mix")
}

/// E1's offered loads, lowest first.
fn e1_loads(settings: &StudySettings) -> Vec<f64> {
    let mut loads = settings.loads.clone().unwrap_or_else(|| E1_LOADS.to_vec());
    loads.sort_by(f64::total_cmp);
    loads
}

/// E1's full grid, one step per load: every scheme, every replication.
fn e1_steps(settings: &StudySettings) -> Vec<Vec<RunSpec>> {
    let step = |load: f64| {
        let mut specs = Vec::new();
        for &s in &settings.schemes {
            for (k, seed) in settings.seeds().into_iter().enumerate() {
                let config = study_config(settings, s, seed);
                specs.push(spec(
                    format!("load {load}"),
                    String::new(),
                    mix("WL7"),
                    load,
                    settings.jobs_per_run,
                    k,
                    config,
                ));
            }
        }
        specs
    };
    e1_loads(settings).into_iter().map(step).collect()
}

/// E1's capacity runs: every scheme overloaded, replication by replication.
fn e1_capacity_runs(settings: &StudySettings) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for (k, seed) in settings.seeds().into_iter().enumerate() {
        for &s in &settings.schemes {
            specs.push(capacity_run(settings, String::new(), k, study_config(settings, s, seed)));
        }
    }
    specs
}

/// A capacity run: WL7 at the settings' overload.
fn capacity_run(settings: &StudySettings, variant: String, replication: usize, config: SimConfig) -> RunSpec {
    capacity_run_of(settings, "WL7", variant, replication, config)
}

/// A capacity run of workload `mix_name` at the settings' overload.
fn capacity_run_of(
    settings: &StudySettings,
    mix_name: &str,
    variant: String,
    replication: usize,
    config: SimConfig,
) -> RunSpec {
    let (load, jobs) = (settings.capacity_load, settings.capacity_jobs);
    spec(CAPACITY_GROUP.into(), variant, mix(mix_name), load, jobs, replication, config)
}

/// E3's first step at its own capacity: every scheme's capacity on each workload at the baseline MPL.
fn e3_capacity_runs(settings: &StudySettings) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for (k, seed) in settings.seeds().into_iter().enumerate() {
        for &s in &settings.schemes {
            for wl in E3_MIXES {
                let config = SimConfig { mpl: E3_MPLS[0], ..study_config(settings, s, seed) };
                specs.push(capacity_run_of(settings, wl, E3_MPLS[0].to_string(), k, config));
            }
        }
    }
    specs
}

/// E3's second step: each scheme on each workload at `e3_load_fraction` of its mean capacity over the
/// replications (`capacity_rows`), at every MPL; the same jobs for every MPL of a replication.
fn e3_runs_at_own_capacity(settings: &StudySettings, capacity_rows: &[RunRow]) -> Result<Vec<RunSpec>, String> {
    let mut specs = Vec::new();
    for (k, seed) in settings.seeds().into_iter().enumerate() {
        for &s in &settings.schemes {
            for wl in E3_MIXES {
                let measured: Vec<f64> =
                    capacity_rows.iter().filter(|r| r.scheme == s.name() && r.mix == wl).map(capacity_of).collect();
                let capacity = measured.iter().sum::<f64>() / measured.len().max(1) as f64;
                if capacity.is_nan() || capacity <= 0.0 {
                    return Err(format!(
                        "{} delivered nothing on {wl} at MPL {}: no load to run it at",
                        s.name(),
                        E3_MPLS[0]
                    ));
                }
                let load = settings.e3_load_fraction * capacity;
                for mpl in E3_MPLS {
                    let config = SimConfig { mpl, ..study_config(settings, s, seed) };
                    specs.push(spec(wl.into(), mpl.to_string(), mix(wl), load, settings.jobs_per_run, k, config));
                }
            }
        }
    }
    Ok(specs)
}

/// E3 at each scheme's own capacity: the capacities first, then the runs at loads they give.
fn execute_e3_at_own_capacity<W: BatchWatch>(
    settings: &StudySettings,
    watch: &W,
    journal: &Journal,
) -> Result<Vec<RunRow>, String> {
    let mut rows = execute(&e3_capacity_runs(settings), settings, watch, journal)?;
    let specs = e3_runs_at_own_capacity(settings, &rows)?;
    rows.extend(execute(&specs, settings, watch, journal)?);
    Ok(rows)
}

/// E1's rule: a scheme that saturated at one load (in most of its
/// replications, or its utilization stopped rising) is left out above it
/// unless `keep_saturated`; its backlog only grows there, and those runs are
/// the longest.
struct Climb {
    climbing: Vec<Scheme>,
    keep_saturated: bool,
}

impl Climb {
    fn new(settings: &StudySettings) -> Climb {
        Climb { climbing: settings.schemes.clone(), keep_saturated: settings.keep_saturated }
    }

    fn runs(&self, scheme: &str) -> bool {
        self.climbing.iter().any(|s| s.name() == scheme)
    }

    /// After a load's rows joined `rows` (every row so far).
    fn next_load(&mut self, rows: &[RunRow]) {
        if !self.keep_saturated {
            self.climbing.retain(|s| curve(rows, s.name()).first_saturated.is_none());
        }
    }
}

/// E1 climbs the loads, running at each only the schemes still climbing.
fn execute_e1<W: BatchWatch>(settings: &StudySettings, watch: &W, journal: &Journal) -> Result<Vec<RunRow>, String> {
    let mut climb = Climb::new(settings);
    let mut rows: Vec<RunRow> = execute(&e1_capacity_runs(settings), settings, watch, journal)?;
    for step in e1_steps(settings) {
        let specs: Vec<RunSpec> = step.into_iter().filter(|s| climb.runs(s.config.scheme.name())).collect();
        if specs.is_empty() {
            break;
        }
        rows.extend(execute(&specs, settings, watch, journal)?);
        climb.next_load(&rows);
    }
    Ok(rows)
}

/// The rows E1's climb would have run, from the full grid's rows in design order.
fn leave_out_saturated(settings: &StudySettings, grid: Vec<RunRow>) -> Vec<RunRow> {
    let mut climb = Climb::new(settings);
    let mut grid = grid.into_iter();
    let mut rows: Vec<RunRow> = grid.by_ref().take(e1_capacity_runs(settings).len()).collect();
    for step in e1_steps(settings) {
        rows.extend(grid.by_ref().take(step.len()).filter(|r| climb.runs(&r.scheme)));
        climb.next_load(&rows);
    }
    rows
}

fn spec(
    group: String,
    variant: String,
    mix: Mix,
    load: f64,
    jobs: usize,
    replication: usize,
    config: SimConfig,
) -> RunSpec {
    RunSpec { group, variant, mix, load, jobs, replication: replication as u32, config }
}

/// The runs of E2-E5.
fn plan(experiment: Experiment, settings: &StudySettings) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for (k, seed) in settings.seeds().into_iter().enumerate() {
        for &s in &settings.schemes {
            specs.extend(variants(experiment, settings, &study_config(settings, s, seed), k));
        }
    }
    specs
}

/// One scheme's runs in replication `k` of E2-E5 (none for E1, which climbs loads).
fn variants(experiment: Experiment, settings: &StudySettings, base: &SimConfig, k: usize) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    let mut add = |group: &str, variant: String, mix_name: &str, load: f64, config: SimConfig| {
        let jobs = if group == CAPACITY_GROUP { settings.capacity_jobs } else { settings.jobs_per_run };
        specs.push(spec(group.to_string(), variant, mix(mix_name), load, jobs, k, config))
    };
    match experiment {
        Experiment::E2 => {
            for wl in E2_MIXES {
                add(wl, String::new(), wl, settings.single_load(E2_LOAD), base.clone());
            }
        }
        Experiment::E1s => {
            let chosen = |key: &str| {
                key == "as-set" || settings.e1s_variants.is_empty() || settings.e1s_variants.iter().any(|k| k == key)
            };
            for (_, label, choices) in settings.model.sensitivity_variants().into_iter().filter(|(key, ..)| chosen(key))
            {
                let config = choices.applied(base.clone());
                let capacity = capacity_run(settings, label.clone(), k, config.clone());
                add(&capacity.group, label.clone(), "WL7", capacity.load, config.clone());
                for wl in E2_MIXES {
                    add(wl, label.clone(), wl, settings.single_load(E2_LOAD), config.clone());
                }
            }
        }
        Experiment::E3 => {
            for wl in E3_MIXES {
                for mpl in E3_MPLS {
                    let config = SimConfig { mpl, ..base.clone() };
                    add(wl, mpl.to_string(), wl, settings.single_load(E3_TO_E5_LOAD), config);
                }
            }
        }
        Experiment::E4 => {
            for skew in [0.2, 1.5] {
                let config = SimConfig { skew, ..base.clone() };
                add(&format!("s = {skew}"), String::new(), "WL4", settings.single_load(E3_TO_E5_LOAD), config);
            }
        }
        Experiment::E5 => {
            for (label, config) in cost_variants(base) {
                add("WL5", label.to_string(), "WL5", settings.single_load(E3_TO_E5_LOAD), config);
            }
        }
        Experiment::E1 => {}
    }
    specs
}

/// E5's three cost settings of a scheme: GS varies quantum and gang switch,
/// the others context switch and interrupt.
fn cost_variants(base: &SimConfig) -> Vec<(&'static str, SimConfig)> {
    let variants: [(&str, u64, u64); 3] = if base.scheme.is_gang() {
        [("defaults", 200, 2_000), ("Q 100 ms, CS_GS 1 ms", 100, 1_000), ("Q 100 ms, CS_GS 2 ms", 100, 2_000)]
    } else {
        [("defaults", 200, 50), ("CS 100 µs, I 25 µs", 100, 25), ("CS 100 µs, I 50 µs", 100, 50)]
    };
    variants
        .into_iter()
        .map(|(label, a, b)| {
            let mut cfg = base.clone();
            if cfg.scheme.is_gang() {
                cfg.costs.gang_quantum_ns = a * 1_000_000;
                cfg.costs.gang_switch_ns = b * 1_000;
            } else {
                cfg.costs.context_switch_ns = a * 1_000;
                cfg.costs.interrupt_ns = b * 1_000;
            }
            (label, cfg)
        })
        .collect()
}

type WorkloadKey = (u8, u64, usize, u32, u64);

fn workload_key(spec: &RunSpec) -> WorkloadKey {
    (spec.mix.number, spec.load.to_bits(), spec.jobs, spec.config.cpu_count(), spec.config.seed)
}

/// A run's jobs and the offered load they make.
type StudyWorkload = (Vec<JobRequest>, f64);

/// The workload of every (mix, load, machine, seed), generated once.
fn workloads_of(specs: &[RunSpec], settings: &StudySettings) -> Result<BTreeMap<WorkloadKey, StudyWorkload>, String> {
    let mut workloads = BTreeMap::new();
    for spec in specs {
        if workloads.contains_key(&workload_key(spec)) {
            continue;
        }
        let workload_spec = WorkloadSpec {
            jobs: Some(spec.jobs),
            model_procs: spec.config.cpu_count(),
            runtime_scale: settings.runtime_scale,
            target_load: Some(spec.load),
            seed: spec.config.seed,
            job_sizes: settings.job_sizes.clone(),
            ..WorkloadSpec::default()
        };
        let loaded = load_workload(&workload_spec, spec.config.cpu_count())?;
        workloads.insert(workload_key(spec), (loaded.requests(), loaded.report.offered_load.unwrap_or(f64::NAN)));
    }
    Ok(workloads)
}

/// Run in parallel every run `journal` has not kept, keeping each as it ends; the rows in `specs`' order.
fn execute<W: BatchWatch>(
    specs: &[RunSpec],
    settings: &StudySettings,
    watch: &W,
    journal: &Journal,
) -> Result<Vec<RunRow>, String> {
    let mut rows: Vec<Option<RunRow>> = specs.iter().map(|spec| journal.kept(spec)).collect();
    let to_run: Vec<RunSpec> =
        specs.iter().zip(&rows).filter(|(_, kept)| kept.is_none()).map(|(s, _)| s.clone()).collect();
    if to_run.is_empty() {
        return Ok(rows.into_iter().flatten().collect());
    }
    let mut ran = run_specs(&to_run, settings, watch, journal)?.into_iter();
    for row in rows.iter_mut().filter(|row| row.is_none()) {
        *row = ran.next();
    }
    Ok(rows.into_iter().map(|row| row.expect("every run kept or run")).collect())
}

fn run_specs<W: BatchWatch>(
    specs: &[RunSpec],
    settings: &StudySettings,
    watch: &W,
    journal: &Journal,
) -> Result<Vec<RunRow>, String> {
    let workloads = workloads_of(specs, settings)?;
    let configs: Vec<SimConfig> = specs
        .iter()
        .map(|spec| {
            let requests = &workloads[&workload_key(spec)].0;
            let horizon_s = if spec.group == CAPACITY_GROUP {
                // Capacity is measured by the last arrival: the drain after it (for a slow scheme many times
                // longer than the arrivals) would change nothing.
                arrival_span_s(requests) + CAPACITY_RUN_PAST_LAST_ARRIVAL_S
            } else {
                horizon_s(requests, spec.config.mpl, settings.horizon_factor)
            };
            SimConfig { horizon_ns: Some((horizon_s * 1e9) as u64), ..spec.config.clone() }
        })
        .collect();
    let options = RunOptions {
        bounded_slowdown_threshold_s: bounded_slowdown_threshold_s(settings.runtime_scale),
        stop: watch.stop(),
        ..RunOptions::default()
    };
    let labels: Vec<String> = specs.iter().map(RunSpec::label).collect();
    let offered_loads: Vec<f64> = specs.iter().map(|spec| workloads[&workload_key(spec)].1).collect();
    let keeping = KeepingWatch { inner: watch, specs, offered_loads: &offered_loads, journal };
    let results = run_all(
        &configs,
        &labels,
        |i| {
            let requests = &workloads[&workload_key(&specs[i])].0;
            sim_jobs(requests, &WorkloadPlan { mix: specs[i].mix, runtime_scale: 1.0 }, &configs[i])
        },
        &options,
        &keeping,
    )?;
    journal.check()?;
    if keeping.stopped() {
        return Err(INTERRUPTED.into());
    }
    Ok(specs.iter().zip(results).zip(&offered_loads).map(|((spec, r), &offered)| row_of(spec, &r, offered)).collect())
}

/// What a study's run gives when its stop flag ended it.
pub const INTERRUPTED: &str = "interrupted";

/// A run's row, from its spec, its result and its workload's offered load.
fn row_of(spec: &RunSpec, result: &RunResult, offered_load: f64) -> RunRow {
    let s = &result.summary;
    RunRow {
        group: spec.group.clone(),
        variant: spec.variant.clone(),
        scheme: s.scheme.clone(),
        mix: spec.mix.to_string(),
        load: spec.load,
        replication: spec.replication,
        seed: spec.config.seed,
        mpl: spec.config.mpl,
        skew: spec.config.skew,
        offered_load,
        jobs: s.jobs_submitted,
        completed: s.jobs_completed,
        delivered_utilization: s.delivered_utilization_during_arrivals,
        compute_utilization: s.compute_utilization_during_arrivals,
        delivered_utilization_second_half: s.delivered_utilization_second_half,
        compute_utilization_second_half: s.compute_utilization_second_half,
        mean_response_s: s.mean_response_s,
        mean_wait_s: s.mean_wait_s,
        mean_execution_s: s.mean_execution_s,
        mean_slowdown: s.mean_slowdown,
        peak_processes_per_cpu: s.peak_processes_per_cpu,
        saturation: s.saturation.clone(),
    }
}

/// The caller's watch, and each run's row kept in the journal as the run ends (unless the stop flag ended it).
struct KeepingWatch<'a, W> {
    inner: &'a W,
    specs: &'a [RunSpec],
    offered_loads: &'a [f64],
    journal: &'a Journal,
}

impl<W: BatchWatch> KeepingWatch<'_, W> {
    fn stopped(&self) -> bool {
        self.inner.stop().is_some_and(|stop| stop.load(std::sync::atomic::Ordering::SeqCst))
    }
}

struct KeepingRun<'a, R> {
    inner: R,
    keep: Box<dyn Fn(&RunResult) + Send + 'a>,
}

impl<R: RunWatch> RunWatch for KeepingRun<'_, R> {
    fn progress(&mut self, progress: &cosched_sim::Progress) {
        self.inner.progress(progress);
    }
    fn finished(self, result: &Result<RunResult, String>) {
        if let Ok(r) = result {
            (self.keep)(r);
        }
        self.inner.finished(result);
    }
}

impl<'a, W: BatchWatch> BatchWatch for KeepingWatch<'a, W> {
    type Run = KeepingRun<'a, W::Run>;
    fn batch_started(&self, runs: usize) {
        self.inner.batch_started(runs);
    }
    fn run_started(&self, index: usize, label: &str) -> Self::Run {
        let (spec, offered, journal) = (&self.specs[index], self.offered_loads[index], self.journal);
        let keep = move |r: &RunResult| {
            // A run the stop flag ended is not the run's outcome: it runs again on resume.
            if r.summary.interrupted_at_s.is_none() {
                journal.keep(&row_of(spec, r, offered));
            }
        };
        KeepingRun { inner: self.inner.run_started(index, label), keep: Box::new(keep) }
    }
    fn stop(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        self.inner.stop()
    }
}

/// Long enough for the longest job to time-share with MPL others after the last arrival.
fn horizon_s(requests: &[JobRequest], mpl: u32, factor: f64) -> f64 {
    let longest_run = requests.iter().map(|r| r.run_s).fold(0.0, f64::max);
    (arrival_span_s(requests) + longest_run * mpl as f64).max(1.0) * factor
}

/// From the first arrival to the last.
fn arrival_span_s(requests: &[JobRequest]) -> f64 {
    let last_submit = requests.iter().map(|r| r.submit_s).fold(0.0, f64::max);
    let first_submit = requests.iter().map(|r| r.submit_s).fold(f64::INFINITY, f64::min);
    last_submit - first_submit
}

/// A capacity run stops this long after its last arrival.
const CAPACITY_RUN_PAST_LAST_ARRIVAL_S: f64 = 0.001;

fn run_columns() -> Vec<Column<RunRow>> {
    vec![
        text("group", |r| csv_field(&r.group)),
        text("variant", |r| csv_field(&r.variant)),
        text("scheme", |r| csv_field(&r.scheme)),
        text("mix", |r| r.mix.clone()),
        float("load", |r| num(r.load)),
        int("replication", |r| r.replication.to_string()),
        int("seed", |r| r.seed.to_string()),
        int("mpl", |r| r.mpl.to_string()),
        float("skew", |r| num(r.skew)),
        float("offered_load", |r| num(r.offered_load)),
        int("jobs", |r| r.jobs.to_string()),
        int("completed", |r| r.completed.to_string()),
        float("delivered_utilization", |r| num(r.delivered_utilization)),
        float("compute_utilization", |r| num(r.compute_utilization)),
        float("delivered_utilization_second_half", |r| num(r.delivered_utilization_second_half)),
        float("compute_utilization_second_half", |r| num(r.compute_utilization_second_half)),
        float("mean_response_s", |r| num(r.mean_response_s)),
        float("mean_wait_s", |r| num(r.mean_wait_s)),
        float("mean_execution_s", |r| num(r.mean_execution_s)),
        float("mean_slowdown", |r| num(r.mean_slowdown)),
        int("peak_processes_per_cpu", |r| r.peak_processes_per_cpu.to_string()),
        flag("saturated", |r| r.saturation.saturated.to_string()),
        float("delivered_share", |r| num(r.saturation.delivered_share)),
        float("backlog_growth", |r| num(r.saturation.backlog_growth)),
        float("wait_growth", |r| num(r.saturation.wait_growth)),
    ]
}

/// `runs.csv`: one row per run.
pub fn runs_csv(rows: &[RunRow]) -> String {
    to_csv(&run_columns(), rows)
}

/// The columns of `runs_csv` and of `points_csv`, with what each holds.
pub fn runs_and_points_kinds() -> (ColumnKinds, ColumnKinds) {
    (kinds(&run_columns()), kinds(&point_columns()))
}

fn mean_of(point: &Point, value: fn(&RunRow) -> f64) -> String {
    num(point.estimate(value).mean)
}

fn ci95_of(point: &Point, value: fn(&RunRow) -> f64) -> String {
    num(point.estimate(value).ci95_half_width())
}

fn point_columns<'a>() -> Vec<Column<Point<'a>>> {
    vec![
        text("group", |p| csv_field(&p.first().group)),
        text("variant", |p| csv_field(&p.first().variant)),
        text("scheme", |p| csv_field(&p.first().scheme)),
        text("mix", |p| p.first().mix.clone()),
        float("load", |p| num(p.first().load)),
        int("replications", |p| p.runs.len().to_string()),
        int("saturated_replications", |p| p.saturated_runs().to_string()),
        float("delivered_utilization", |p| mean_of(p, |r| r.delivered_utilization)),
        float("delivered_utilization_ci95", |p| ci95_of(p, |r| r.delivered_utilization)),
        float("compute_utilization", |p| mean_of(p, |r| r.compute_utilization)),
        float("compute_utilization_ci95", |p| ci95_of(p, |r| r.compute_utilization)),
        float("mean_response_s", |p| mean_of(p, |r| r.mean_response_s)),
        float("mean_response_s_ci95", |p| ci95_of(p, |r| r.mean_response_s)),
        float("mean_wait_s", |p| mean_of(p, |r| r.mean_wait_s)),
        float("mean_wait_s_ci95", |p| ci95_of(p, |r| r.mean_wait_s)),
        float("mean_execution_s", |p| mean_of(p, |r| r.mean_execution_s)),
        float("mean_execution_s_ci95", |p| ci95_of(p, |r| r.mean_execution_s)),
    ]
}

/// `points.csv`: every point with its means and 95 % confidence half-widths.
pub fn points_csv(rows: &[RunRow]) -> String {
    to_csv(&point_columns(), &points(rows))
}

/// The points of the rows, in first-seen order of (group, variant, scheme).
pub fn points(rows: &[RunRow]) -> Vec<Point<'_>> {
    let mut keys: Vec<(&str, &str, &str)> = Vec::new();
    for r in rows {
        let key = (r.group.as_str(), r.variant.as_str(), r.scheme.as_str());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(g, v, s)| Point {
            runs: rows.iter().filter(|r| r.group == g && r.variant == v && r.scheme == s).collect(),
        })
        .collect()
}

/// The schemes of the rows, in first-seen order.
pub fn schemes_in_order(rows: &[RunRow]) -> Vec<String> {
    first_seen(rows, |r| r.scheme.as_str()).into_iter().map(String::from).collect()
}

/// The distinct values of a field, in first-seen order.
pub fn first_seen<'a>(rows: &'a [RunRow], field: impl Fn(&'a RunRow) -> &'a str) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for r in rows {
        if !seen.contains(&field(r)) {
            seen.push(field(r));
        }
    }
    seen
}

/// The knee of a scheme's E1 curve is where its mean response reaches this
/// many times its value at the lightest load: response has left the flat part
/// of the curve and grows without bound (our choice). On a machine of known
/// capacity the knee falls at 0.8 to 1.0 of it (`tests/knee.rs`); the older
/// rule (utilization rising by less than half the load step) read a true
/// capacity ratio of 1.34 as 1.01.
pub const KNEE_RESPONSE_FACTOR: f64 = 5.0;

/// A scheme's E1 curve: its points by load; its first point past the knee,
/// saturated, or delivering less than the one before (the climb stops there); the delivered utilization at the knee,
/// read off response against delivered utilization between the points either
/// side of it; and the best point before it, with its interval.
pub struct Curve<'a> {
    pub scheme: String,
    pub points: Vec<Point<'a>>,
    pub sustained: Option<Estimate>,
    pub knee_utilization: Option<f64>,
    pub first_saturated: Option<usize>,
}

pub fn curve<'a>(rows: &'a [RunRow], scheme: &str) -> Curve<'a> {
    let mut points: Vec<Point> =
        points(rows).into_iter().filter(|p| p.first().scheme == scheme && p.first().group != CAPACITY_GROUP).collect();
    points.sort_by(|a, b| a.first().load.total_cmp(&b.first().load));
    let past_knee = |k: usize| response(&points[k]) >= KNEE_RESPONSE_FACTOR * response(&points[0]);
    let first_saturated = (0..points.len()).find(|&k| points[k].saturated() || past_knee(k) || fell(&points, k));
    let knee_utilization = first_saturated.filter(|&k| k > 0 && past_knee(k)).map(|k| knee_between(&points, k));
    let sustained = points[..first_saturated.unwrap_or(points.len())]
        .iter()
        .map(|p| p.estimate(|r| r.delivered_utilization))
        .max_by(|a, b| a.mean.total_cmp(&b.mean));
    Curve { scheme: scheme.to_string(), points, sustained, knee_utilization, first_saturated }
}

/// Whether point `k` delivered less than the point before it: more offered
/// work, less done, saturated by any reading.
fn fell(points: &[Point], k: usize) -> bool {
    let utilization = |p: &Point| p.estimate(|r| r.delivered_utilization).mean;
    k > 0 && utilization(&points[k]) < utilization(&points[k - 1])
}

fn response(point: &Point) -> f64 {
    point.estimate(|r| r.mean_response_s).mean
}

/// The delivered utilization where the response crosses the knee's, linear
/// between point `k` (the first past it) and the point before.
fn knee_between(points: &[Point], k: usize) -> f64 {
    let utilization = |p: &Point| p.estimate(|r| r.delivered_utilization).mean;
    let target = KNEE_RESPONSE_FACTOR * response(&points[0]);
    let (below, above) = (&points[k - 1], &points[k]);
    let share = ((target - response(below)) / (response(above) - response(below))).clamp(0.0, 1.0);
    utilization(below) + share * (utilization(above) - utilization(below))
}

/// A scheme's capacity under one variant of the model: its delivered
/// utilization in the second half of an overloaded run's arrivals, over the
/// replications, and paired with GS's on the same seeds (ratio and
/// difference per replication, then their mean and t-interval).
pub struct Capacity {
    pub scheme: String,
    pub variant: String,
    pub estimate: Estimate,
    pub ratio_to_gs: Option<Estimate>,
    pub difference_to_gs: Option<Estimate>,
    /// Runs judged saturated (jobs unfinished, or the queue's wait growing): the overload held.
    pub overloaded_runs: usize,
    pub runs: usize,
}

/// The capacity of a capacity run.
pub fn capacity_of(row: &RunRow) -> f64 {
    row.delivered_utilization_second_half
}

/// Capacities of every (variant, scheme) of the capacity runs, in first-seen order.
pub fn capacities(rows: &[RunRow]) -> Vec<Capacity> {
    let runs: Vec<RunRow> = rows.iter().filter(|r| r.group == CAPACITY_GROUP).cloned().collect();
    points(&runs)
        .iter()
        .map(|p| {
            let first = p.first();
            let gs_of = |r: &RunRow| {
                runs.iter().find(|g| {
                    g.scheme == Scheme::GANG.name() && g.variant == r.variant && g.replication == r.replication
                })
            };
            let paired = |f: fn(f64, f64) -> f64| -> Option<Estimate> {
                let values: Vec<f64> =
                    p.runs.iter().filter_map(|r| gs_of(r).map(|g| f(capacity_of(r), capacity_of(g)))).collect();
                Estimate::of(&values)
            };
            Capacity {
                scheme: first.scheme.clone(),
                variant: first.variant.clone(),
                estimate: p.estimate(capacity_of),
                ratio_to_gs: paired(|a, b| a / b),
                difference_to_gs: paired(|a, b| a - b),
                overloaded_runs: p.saturated_runs(),
                runs: p.runs.len(),
            }
        })
        .collect()
}

/// E1s: the paired difference of a measure between a variant and the first
/// variant (the model as set), per replication, for one scheme and group.
pub fn paired_effect(
    rows: &[RunRow],
    group: &str,
    scheme: &str,
    variant: &str,
    measure: fn(&RunRow) -> f64,
) -> Option<Estimate> {
    let base_variant = first_seen(rows, |r| r.variant.as_str()).first().copied()?;
    let of = |v: &str, k: u32| {
        rows.iter().find(|r| r.group == group && r.scheme == scheme && r.variant == v && r.replication == k)
    };
    let values: Vec<f64> = rows
        .iter()
        .filter(|r| r.group == group && r.scheme == scheme && r.variant == variant)
        .filter_map(|r| of(base_variant, r.replication).map(|b| measure(r) - measure(b)))
        .collect();
    Estimate::of(&values)
}

/// Rows with made-up outcomes, for tests.
#[cfg(test)]
pub(crate) mod made_up {
    use super::*;

    /// An E1 row.
    pub(crate) fn row(
        scheme: &str,
        load: f64,
        replication: u32,
        delivered_utilization: f64,
        saturated: bool,
    ) -> RunRow {
        RunRow {
            group: format!("load {load}"),
            variant: String::new(),
            scheme: scheme.into(),
            mix: "WL7".into(),
            load,
            replication,
            seed: 1 + replication as u64,
            mpl: 5,
            skew: 0.2,
            offered_load: load,
            jobs: 10,
            completed: 10,
            delivered_utilization,
            compute_utilization: delivered_utilization / 2.0,
            delivered_utilization_second_half: delivered_utilization,
            compute_utilization_second_half: delivered_utilization / 2.0,
            mean_response_s: 1.0,
            mean_wait_s: 0.5,
            mean_execution_s: 0.5,
            mean_slowdown: 2.0,
            peak_processes_per_cpu: 5,
            saturation: SaturationVerdict {
                saturated,
                wait_growth: 0.0,
                delivered_share: 1.0,
                backlog_growth: 0.0,
                why: String::new(),
            },
        }
    }

    /// A row of the run `spec`.
    pub(crate) fn row_of(spec: &RunSpec, delivered_utilization: f64, saturated: bool) -> RunRow {
        RunRow {
            group: spec.group.clone(),
            variant: spec.variant.clone(),
            mix: spec.mix.to_string(),
            seed: spec.config.seed,
            mpl: spec.config.mpl,
            skew: spec.config.skew,
            ..row(spec.config.scheme.name(), spec.load, spec.replication, delivered_utilization, saturated)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::made_up::{row, row_of};
    use super::*;

    #[test]
    fn the_knee_is_where_response_reaches_its_factor_read_on_delivered_utilization() {
        // Response 1 s, 2 s, then 9 s: five times the lightest (5 s) is crossed three sevenths of the way
        // from 0.4 to 0.5 of delivered utilization.
        let rows: Vec<RunRow> = [(0.2, 0.2, 1.0), (0.4, 0.4, 2.0), (0.6, 0.5, 9.0)]
            .into_iter()
            .flat_map(|(load, util, response_s)| {
                [row("GS", load, 0, util - 0.01, false), row("GS", load, 1, util + 0.01, false)]
                    .map(|r| RunRow { mean_response_s: response_s, ..r })
            })
            .collect();
        let gs = curve(&rows, "GS");
        assert_eq!(gs.first_saturated, Some(2));
        assert!((gs.sustained.unwrap().mean - 0.4).abs() < 1e-12);
        let knee = gs.knee_utilization.unwrap();
        assert!((knee - (0.4 + 0.1 * 3.0 / 7.0)).abs() < 1e-12, "knee {knee}");
    }

    #[test]
    fn a_curve_saturated_before_its_knee_has_no_knee() {
        let rows = [row("SB", 0.2, 0, 0.2, false), row("SB", 0.4, 0, 0.3, true)];
        let sb = curve(&rows, "SB");
        assert_eq!(sb.first_saturated, Some(1));
        assert!(sb.knee_utilization.is_none());
    }

    #[test]
    fn a_point_is_saturated_when_most_replications_are() {
        let rows = [row("SB", 0.5, 0, 0.5, true), row("SB", 0.5, 1, 0.5, false), row("SB", 0.5, 2, 0.5, true)];
        let found = points(&rows);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].saturated_runs(), 2);
        assert!(found[0].saturated());
        assert!(curve(&rows, "SB").first_saturated == Some(0));
    }

    #[test]
    fn points_csv_pairs_each_header_with_its_value() {
        let rows = [row("GS", 0.5, 0, 0.4, false), row("GS", 0.5, 1, 0.6, false)];
        let text = points_csv(&rows);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let values: Vec<&str> = lines.next().unwrap().split(',').collect();
        let value_of = |name: &str| values[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(value_of("replications"), "2");
        assert_eq!(value_of("delivered_utilization"), "0.5");
        assert_eq!(value_of("compute_utilization"), "0.25");
    }

    /// A small E1 where Local saturates at 0.4 and GS at 0.8 (seen with `--keep-saturated`).
    fn tiny_e1() -> StudySettings {
        StudySettings {
            jobs_per_run: 40,
            runtime_scale: 0.0005,
            loads: Some(vec![1.6, 0.2, 0.4, 0.8]),
            schemes: vec!["GS".parse().unwrap(), "Local".parse().unwrap()],
            first_seed: 3,
            replications: 1,
            capacity_jobs: 20,
            ..StudySettings::default()
        }
    }

    #[test]
    fn e3_at_its_own_capacity_runs_each_scheme_at_the_fraction_of_its_mean_capacity() {
        let settings = StudySettings { replications: 2, e3_load_fraction: 0.8, loads: None, ..tiny_e1() };
        let capacity_specs = e3_capacity_runs(&settings);
        assert_eq!(capacity_specs.len(), 2 * 2 * 3, "seeds x schemes x workloads");
        assert!(capacity_specs.iter().all(|s| s.group == CAPACITY_GROUP && s.config.mpl == 2));
        // GS delivers 0.5 and 0.7 on every workload, Local 0.2 and 0.4.
        let delivered = |s: &RunSpec| {
            let base = if s.config.scheme.name() == "GS" { 0.5 } else { 0.2 };
            base + 0.2 * s.replication as f64
        };
        let rows: Vec<RunRow> = capacity_specs.iter().map(|s| made_up::row_of(s, delivered(s), true)).collect();
        let specs = e3_runs_at_own_capacity(&settings, &rows).unwrap();
        assert_eq!(specs.len(), 2 * 2 * 3 * 3, "seeds x schemes x workloads x MPLs");
        let loads = |scheme: &str| -> Vec<f64> {
            specs.iter().filter(|s| s.config.scheme.name() == scheme).map(|s| s.load).collect()
        };
        assert!(loads("GS").iter().all(|&l| (l - 0.8 * 0.6).abs() < 1e-12), "{:?}", loads("GS"));
        assert!(loads("Local").iter().all(|&l| (l - 0.8 * 0.3).abs() < 1e-12), "{:?}", loads("Local"));
        let mpls: Vec<u32> = specs.iter().take(3).map(|s| s.config.mpl).collect();
        assert_eq!(mpls, E3_MPLS);
        // A scheme that delivered nothing has no load to run at.
        let nothing: Vec<RunRow> = capacity_specs.iter().map(|s| made_up::row_of(s, 0.0, true)).collect();
        assert!(e3_runs_at_own_capacity(&settings, &nothing).unwrap_err().contains("delivered nothing"));
        let with_loads = StudySettings { loads: Some(vec![0.5]), ..settings.clone() };
        assert!(with_loads.check(Experiment::E3).unwrap_err().contains("not with --loads"));
        assert!(settings.check(Experiment::E2).unwrap_err().contains("E3's alone"));
        // The second step depends on the first: no shards.
        let refused = run_selected(Experiment::E3, &settings, &[0], &crate::batch::Unwatched).unwrap_err();
        assert!(refused.contains("cannot run in shards"), "{refused}");
        assert_eq!(design_len(Experiment::E3, &settings), 2 * 2 * (3 + 9));
    }

    #[test]
    fn e3_at_its_own_capacity_runs_its_capacities_then_the_mpls() {
        let settings = StudySettings {
            jobs_per_run: 10,
            schemes: vec![Scheme::GANG],
            e3_load_fraction: 0.8,
            loads: None,
            ..tiny_e1()
        };
        let rows = run_study(Experiment::E3, &settings, &crate::batch::Unwatched, &Journal::none()).unwrap();
        assert_eq!(rows.len(), 3 + 9);
        let capacity = capacity_of(&rows[0]);
        assert!(capacity > 0.0 && rows[..3].iter().all(|r| r.group == CAPACITY_GROUP));
        let wl2: Vec<&RunRow> = rows[3..].iter().filter(|r| r.mix == "WL2").collect();
        assert!(wl2.iter().all(|r| (r.load - 0.8 * capacity).abs() < 1e-12), "{wl2:?}");
    }

    /// Rows as written: NaN is not equal to itself, its text is.
    fn as_text(rows: &[RunRow]) -> String {
        serde_json::to_string_pretty(rows).unwrap()
    }

    #[test]
    fn e1s_full_grid_assembled_is_what_its_climb_runs() {
        let settings = tiny_e1();
        let climbed = run_study(Experiment::E1, &settings, &crate::batch::Unwatched, &Journal::none()).unwrap();
        let every_run: Vec<usize> = (0..design(Experiment::E1, &settings).len()).rev().collect();
        let grid = run_selected(Experiment::E1, &settings, &every_run, &crate::batch::Unwatched).unwrap();
        assert_eq!(grid.len(), 10, "2 capacity runs, then 8 of the climb");
        let runs_of = |scheme: &str| climbed.iter().filter(|r| r.scheme == scheme && r.group != CAPACITY_GROUP).count();
        assert_eq!((runs_of("GS"), runs_of("Local")), (4, 2), "Local left out above 0.4:\n{}", runs_csv(&climbed));
        let assembled = assemble(Experiment::E1, &settings, grid.clone()).unwrap();
        assert_eq!(as_text(&assembled), as_text(&climbed));
        let keep = StudySettings { keep_saturated: true, ..settings };
        let mut by_index = grid.clone();
        by_index.sort_by_key(|(i, _)| *i);
        let every_row: Vec<RunRow> = by_index.into_iter().map(|(_, r)| r).collect();
        assert_eq!(as_text(&assemble(Experiment::E1, &keep, grid).unwrap()), as_text(&every_row));
    }

    #[test]
    fn assembling_wants_every_run_once_and_each_the_outcome_of_its_own() {
        let settings = tiny_e1();
        let specs = design(Experiment::E1, &settings);
        let made_up = |i: usize| (i, row_of(&specs[i], 0.5, false));
        let all: Vec<(usize, RunRow)> = (0..10).map(made_up).collect();
        assert!(assemble(Experiment::E1, &settings, all.clone()).is_ok());
        let error = |results: Vec<(usize, RunRow)>| assemble(Experiment::E1, &settings, results).unwrap_err();
        assert_eq!(error(all[..8].to_vec()), "runs of the design (10 runs, numbered from 0) missing: 8, 9");
        assert_eq!(error([all.clone(), vec![made_up(3)]].concat()), "runs given more than once: 3");
        let mut beyond = all.clone();
        beyond[0].0 = 10;
        assert_eq!(error(beyond), "runs not in the design (10 runs, numbered from 0): 10");
        let mut swapped = all;
        swapped.swap(2, 9);
        swapped[2].0 = 2;
        swapped[9].0 = 9;
        assert_eq!(error(swapped), "run 2 should be 'GS WL7 load 0.2 seed 3' but holds 'Local WL7 load 1.6 seed 3'");
    }

    /// A capacity run's row.
    fn capacity_row(scheme: &str, replication: u32, capacity: f64) -> RunRow {
        RunRow {
            group: CAPACITY_GROUP.into(),
            delivered_utilization_second_half: capacity,
            ..row(scheme, 2.0, replication, capacity, true)
        }
    }

    #[test]
    fn capacity_ratios_are_paired_by_seed() {
        // Seeds differ by far more than the schemes: unpaired, the ratio's interval would hold 1.
        let gs = [0.4, 0.6, 0.8];
        let rows: Vec<RunRow> = (0..3)
            .flat_map(|k| [capacity_row("GS", k, gs[k as usize]), capacity_row("SB", k, 1.25 * gs[k as usize])])
            .collect();
        let found = capacities(&rows);
        let sb = found.iter().find(|c| c.scheme == "SB").unwrap();
        let ratio = sb.ratio_to_gs.unwrap();
        assert!((ratio.mean - 1.25).abs() < 1e-12 && ratio.ci95_half_width() < 1e-9, "{ratio:?}");
        let difference = sb.difference_to_gs.unwrap();
        assert!((difference.mean - 0.15).abs() < 1e-12);
        assert!(sb.estimate.ci95_half_width() > 0.25, "each scheme's own interval is wide");
        assert_eq!((sb.overloaded_runs, sb.runs), (3, 3));
    }

    #[test]
    fn e1s_runs_every_open_choice_for_every_scheme_and_seed() {
        let settings = StudySettings { replications: 2, ..tiny_e1() };
        let specs = design(Experiment::E1s, &settings);
        assert_eq!(specs.len(), design_len(Experiment::E1s, &settings));
        assert_eq!(specs.len(), 2 * 2 * 9 * 5, "seeds x schemes x variants x (capacity + 4 mixes)");
        let variants: Vec<&str> = first_seen_specs(&specs);
        assert_eq!(
            variants,
            [
                "as set",
                "CS 100 µs",
                "I/O < 200 µs keeps CPU",
                "GS start next quantum",
                "PB walk same-tick",
                "receive per-message",
                "boost displaces spinning",
                "SY yields repeated",
                "CS, I/O and readings turned"
            ]
        );
        let turned = |label: &str| specs.iter().find(|s| s.variant == label).unwrap().config.costs.clone();
        assert_eq!(turned("CS 100 µs").context_switch_ns, 100_000);
        assert_eq!(turned("I/O < 200 µs keeps CPU").io_keeps_cpu_below_ns, 200_000);
        assert!(turned("GS start next quantum").gang_start_waits_for_quantum);
        assert_eq!(turned("PB walk same-tick").boost_walk, BoostWalk::SameTick);
        assert_eq!(turned("receive per-message").boost_receive, BoostReceive::PerMessage);
        assert_eq!(turned("boost displaces spinning").boost_displaces, BoostDisplaces::Spinning);
        assert_eq!(turned("SY yields repeated").yield_cycle, YieldCycle::Repeated);
        let all = turned("CS, I/O and readings turned");
        assert_eq!((all.context_switch_ns, all.io_keeps_cpu_below_ns), (100_000, 100_000));
        assert_eq!((all.boost_receive, all.boost_walk), (BoostReceive::PerMessage, BoostWalk::TickBefore));
        let stock = CostConfig::default();
        let as_set = turned("as set");
        assert_eq!(
            (as_set.context_switch_ns, as_set.io_keeps_cpu_below_ns, as_set.gang_start_waits_for_quantum),
            (stock.context_switch_ns, stock.io_keeps_cpu_below_ns, stock.gang_start_waits_for_quantum)
        );
        assert_eq!(as_set.boost_walk, stock.boost_walk);
        let capacity = specs.iter().find(|s| s.group == CAPACITY_GROUP).unwrap();
        assert_eq!((capacity.load, capacity.jobs), (settings.capacity_load, settings.capacity_jobs));
    }

    #[test]
    fn e1s_runs_the_chosen_variants_beside_the_model_as_set_as_the_whole_study_would() {
        let whole = design(Experiment::E1s, &StudySettings { replications: 2, ..tiny_e1() });
        let settings =
            StudySettings { replications: 2, e1s_variants: vec!["yield".into(), "receive".into()], ..tiny_e1() };
        settings.check(Experiment::E1s).unwrap();
        let chosen = design(Experiment::E1s, &settings);
        assert_eq!(chosen.len(), design_len(Experiment::E1s, &settings));
        // In the study's order, whatever order they were asked in.
        assert_eq!(first_seen_specs(&chosen), ["as set", "receive per-message", "SY yields repeated"]);
        for spec in &chosen {
            let same = whole.iter().find(|w| w.label() == spec.label()).expect("a run of the whole study");
            assert_eq!(format!("{:?}", same.config), format!("{:?}", spec.config), "{}", spec.label());
        }
        let refused = |variants: &[&str], experiment| {
            let settings =
                StudySettings { e1s_variants: variants.iter().map(|v| v.to_string()).collect(), ..tiny_e1() };
            settings.check(experiment).unwrap_err()
        };
        assert!(refused(&["yields"], Experiment::E1s).contains("no variant \"yields\""));
        assert!(refused(&["yield"], Experiment::E2).contains("E1s's alone"));
    }

    fn first_seen_specs(specs: &[RunSpec]) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for s in specs {
            if !seen.contains(&s.variant.as_str()) {
                seen.push(&s.variant);
            }
        }
        seen
    }

    #[test]
    fn a_design_is_as_long_as_counted_without_building_it() {
        let schemes = ["Local", "GS", "SB"].map(|n| n.parse().unwrap()).to_vec();
        let settings = StudySettings { schemes, replications: 2, ..StudySettings::default() };
        for experiment in Experiment::ALL {
            assert_eq!(design_len(experiment, &settings), design(experiment, &settings).len(), "{experiment:?}");
        }
        assert_eq!(design_len(Experiment::E1, &settings), (1 + 9) * 3 * 2);
        let many = StudySettings { loads: Some(vec![0.5; 20_000]), ..settings };
        assert!(many.check(Experiment::E1).unwrap_err().contains("at most 100000"));
    }

    #[test]
    fn the_default_study_runs_the_ten_schemes_of_the_study() {
        let names: Vec<&str> = StudySettings::default().schemes.iter().map(|s| s.name()).collect();
        assert_eq!(names, Scheme::study_names());
        assert_eq!(names.len(), 10);
    }
}
