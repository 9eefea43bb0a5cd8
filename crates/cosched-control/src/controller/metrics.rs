//! The controller's figures in the OpenMetrics text format, served at the monitor's `/metrics` for Prometheus and
//! its kin (Slurm 25.11 has such an endpoint too).
//!
//! No token is asked: like `squeue` or `cosched status`, it shows every user's jobs. It shows only what `status`
//! shows everyone — job ids, users, classes, modes, states, CPUs and CPU time — and is built from a snapshot type
//! that has no command, environment, directory, token or log, so none of them can slip into it.

use crate::wire::jobs::{mode_text, JobState};
use cosched_policy::cluster::{JobClass, Mode};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The two text formats served: OpenMetrics 1.0, and Prometheus's own (0.0.4) for a reader that does not ask for
/// OpenMetrics (`curl`, `promtool check metrics`). They differ only in the families' headers and the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    OpenMetrics,
    Prometheus,
}

impl Syntax {
    /// The one an `Accept` header asks for: OpenMetrics when it is named (as Prometheus names it), else Prometheus's.
    pub fn for_accept(accept: Option<&str>) -> Syntax {
        match accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
            true => Syntax::OpenMetrics,
            false => Syntax::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Syntax::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Syntax::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Jobs given per-job series in one answer. The controller does not bound its jobs, and each job costs about a
/// kilobyte of text, so a queue of a million jobs would make a gigabyte answer; beyond the cap the jobs still count
/// in `cosched_jobs`, and `cosched_metrics_jobs_omitted` says how many were left out.
pub const MAX_JOB_SERIES: usize = 4096;

/// Who may read `/metrics` (the controller's `--metrics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsAccess {
    /// Not served: `/metrics` answers 404.
    Off,
    /// Served to anyone who reaches the monitor's address, without a token.
    Public,
}

impl MetricsAccess {
    pub fn parse(text: &str) -> Result<MetricsAccess, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(MetricsAccess::Off),
            "public" => Ok(MetricsAccess::Public),
            other => Err(format!("unknown metrics access {other:?} (off or public)")),
        }
    }
}

/// The upper bounds of the duration histograms' buckets (ns): from a few µs (a switch on an idle host) to a tenth
/// of a second (a host the hypervisor held back), about three per decade.
/// 2 ms is a bound of its own: the switch-lateness alert's threshold, which must not be interpolated.
#[rustfmt::skip]
pub const BUCKET_BOUNDS_NS: [u64; 14] = [
    10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_000_000, 2_500_000, 5_000_000, 10_000_000,
    25_000_000, 50_000_000, 100_000_000,
];

/// Durations counted in the buckets of [`BUCKET_BOUNDS_NS`] (each duration in the first bucket it fits, the
/// last one open), with their count and sum, since the controller started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    in_bucket: [u64; BUCKET_BOUNDS_NS.len() + 1],
    sum_ns: u128,
}

impl Histogram {
    pub fn observe(&mut self, ns: u64) {
        let bucket = BUCKET_BOUNDS_NS.iter().position(|&bound| ns <= bound).unwrap_or(BUCKET_BOUNDS_NS.len());
        self.in_bucket[bucket] = self.in_bucket[bucket].saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(u128::from(ns));
    }

    pub fn count(&self) -> u64 {
        self.in_bucket.iter().fold(0u64, |sum, &n| sum.saturating_add(n))
    }

    /// (upper bound in seconds, or `+Inf`; how many durations were at most that), as OpenMetrics buckets are.
    fn cumulative(&self) -> Vec<(String, u64)> {
        let mut total = 0u64;
        let bounds = BUCKET_BOUNDS_NS.iter().map(|&ns| Value::Float(ns as f64 / 1e9).to_string());
        let bounds = bounds.chain(["+Inf".to_string()]);
        bounds
            .zip(&self.in_bucket)
            .map(|(bound, &n)| {
                total = total.saturating_add(n);
                (bound, total)
            })
            .collect()
    }
}

/// What the controller knows, as the endpoint shows it: figures only.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSnapshot {
    pub slice_ns: u64,
    /// Latest minus earliest switch start of each slice that every node switched at (`skew`).
    pub slice_start_skew: Histogram,
    /// The database takes writes (no storage fault reported).
    pub storage_ok: bool,
    pub nodes: Vec<NodeFigures>,
    /// Every job `status` lists, counted by state (every state, zero included).
    pub jobs_by_state: Vec<(JobState, u64)>,
    /// At most [`MAX_JOB_SERIES`]: jobs not over first, then ended ones, each in id order.
    pub jobs: Vec<JobFigures>,
    /// Jobs `status` lists that did not fit under the cap.
    pub jobs_omitted: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeFigures {
    pub name: String,
    pub cpus: u32,
    pub mem_bytes: u64,
    pub connected: bool,
    /// The 1-minute load average, as the agent last reported it.
    pub load_avg: f64,
    /// Since the agent started.
    pub switches: u64,
    pub switch_errors: u64,
    /// Jobs not over that hold CPUs of the node.
    pub jobs: u64,
    /// Jobs whose cgroup the node's agent could not empty, and the processes left in them.
    pub stuck_jobs: u64,
    pub stuck_processes: u64,
    /// Slice boundary to the switch's start, per switch the node reported.
    pub switch_lateness: Histogram,
    /// Slice boundary to the incoming gang thawed, per switch the node reported.
    pub switch_latency: Histogram,
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobFigures {
    pub id: u64,
    pub uid: u32,
    pub class: JobClass,
    pub mode: Mode,
    pub state: JobState,
    /// CPUs held over all its nodes (none while queued or once ended).
    pub cpus: u32,
    /// CPU time of its processes, summed over its nodes' last reports.
    pub cpu_ns: u64,
    pub processes: u64,
    pub slice_share: f64,
    /// Since it started, up to its end once ended (`None`: not started).
    pub elapsed_ms: Option<u64>,
    /// How long every process of the running job has been frozen on every node, as the reports since then showed
    /// (`None`: not frozen, or not running).
    pub frozen_ms: Option<u64>,
}

enum Kind {
    Gauge,
    Counter,
    Histogram,
    /// Labels that describe a job, on one series of value 1 (OpenMetrics' info; a gauge to Prometheus's format).
    Info,
}

/// A metric family: its name carries its unit as a suffix (OpenMetrics requires it when `unit` is given); a
/// counter's samples add `_total`.
struct Family {
    name: &'static str,
    kind: Kind,
    unit: Option<&'static str>,
    help: &'static str,
}

const fn gauge(name: &'static str, unit: Option<&'static str>, help: &'static str) -> Family {
    Family { name, kind: Kind::Gauge, unit, help }
}

const fn counter(name: &'static str, unit: Option<&'static str>, help: &'static str) -> Family {
    Family { name, kind: Kind::Counter, unit, help }
}

const fn info(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Info, unit: None, help }
}

const fn histogram(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Histogram, unit: Some("seconds"), help }
}

const JOBS: Family =
    gauge("cosched_jobs", None, "Jobs cosched status lists, by state (ended ones for --keep-finished-s).");
const NODES: Family = gauge("cosched_nodes", None, "Nodes the controller knows.");
const NODES_CONNECTED: Family = gauge("cosched_nodes_connected", None, "Nodes whose agent is connected.");
const SLICE: Family = gauge("cosched_slice_seconds", Some("seconds"), "The length of a time slice.");
const STORAGE_HEALTHY: Family =
    gauge("cosched_storage_healthy", None, "1 while the database takes writes, 0 while status reports a fault.");
const SLICE_START_SKEW: Family = histogram(
    "cosched_slice_start_skew_seconds",
    "Latest minus earliest switch start of each slice every node switched at (clocks' disagreement included).",
);
const JOBS_OMITTED: Family =
    gauge("cosched_metrics_jobs_omitted", None, "Jobs left out of the per-job families beyond their cap.");

const NODE_CPUS: Family = gauge("cosched_node_cpus", None, "CPUs the node's agent offers.");
const NODE_MEMORY: Family = gauge("cosched_node_memory_bytes", Some("bytes"), "Memory of the node.");
const NODE_LOAD: Family = gauge("cosched_node_load_average", None, "The node's 1-minute load average.");
const NODE_SWITCHES: Family = counter("cosched_node_switches", None, "Gang switches since the node's agent started.");
const NODE_SWITCH_ERRORS: Family =
    counter("cosched_node_switch_errors", None, "Failed gang switches since the node's agent started.");
const NODE_JOBS: Family = gauge("cosched_node_jobs", None, "Jobs not over that hold CPUs of the node.");
const NODE_CONNECTED: Family = gauge("cosched_node_connected", None, "1 while the node's agent is connected.");
const NODE_STUCK_JOBS: Family = gauge(
    "cosched_node_stuck_jobs",
    None,
    "Jobs whose cgroup the node's agent could not empty (processes that survived SIGKILL); it keeps retrying.",
);
const NODE_STUCK_PROCESSES: Family =
    gauge("cosched_node_stuck_processes", None, "Processes left in the node's stuck job cgroups.");
const NODE_SWITCH_LATENESS: Family =
    histogram("cosched_switch_lateness_seconds", "Slice boundary to the start of the node's switch, per switch.");
const NODE_SWITCH_LATENCY: Family = histogram(
    "cosched_switch_latency_seconds",
    "Slice boundary to the incoming gang thawed on the node, per switch (lateness plus the switch itself).",
);

const JOB_INFO: Family = info(
    "cosched_job",
    "A job's class, mode and state, which change during its life: on this series alone, so that the job's other \
     series stay one each (join on job_id).",
);
const JOB_CPUS: Family = gauge("cosched_job_cpus", None, "CPUs the job holds over all its nodes.");
const JOB_CPU: Family =
    counter("cosched_job_cpu_seconds", Some("seconds"), "CPU time of the job's processes, over all its nodes.");
const JOB_PROCESSES: Family = gauge("cosched_job_processes", None, "Processes of the job, over all its nodes.");
const JOB_SLICE_SHARE: Family =
    gauge("cosched_job_slice_share_ratio", Some("ratio"), "The share of the cycle's slots the job runs in.");
const JOB_ELAPSED: Family =
    gauge("cosched_job_elapsed_seconds", Some("seconds"), "Time since the job started (to its end once ended).");
const JOB_FROZEN: Family = gauge(
    "cosched_job_frozen_seconds",
    Some("seconds"),
    "How long every process of the running job has been frozen on every node (absent while it runs somewhere).",
);

/// A sample's value, written as OpenMetrics numbers are.
#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match *self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Float(x) if x.is_nan() => f.write_str("NaN"),
            Value::Float(x) if x.is_infinite() => f.write_str(if x > 0.0 { "+Inf" } else { "-Inf" }),
            Value::Float(x) => write!(f, "{x}"),
        }
    }
}

fn flag(on: bool) -> Value {
    Value::Int(on as u64)
}

fn seconds_of_ns(ns: u64) -> Value {
    Value::Float(ns as f64 / 1e9)
}

/// The exposition: cluster, node and job families, then `# EOF`. `names` gives each job's user name by uid (a uid
/// without one is shown as its number).
pub fn render(snapshot: &MetricsSnapshot, names: &BTreeMap<u32, String>, syntax: Syntax) -> String {
    let mut out = String::new();
    write_cluster(&mut out, snapshot, syntax);
    write_nodes(&mut out, &snapshot.nodes, syntax);
    write_jobs(&mut out, &snapshot.jobs, names, syntax);
    if syntax == Syntax::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn write_cluster(out: &mut String, s: &MetricsSnapshot, syntax: Syntax) {
    header(out, &JOBS, syntax);
    for (state, count) in &s.jobs_by_state {
        sample(out, &JOBS, &labels(&[("state", state.name())]), Value::Int(*count));
    }
    let connected = s.nodes.iter().filter(|n| n.connected).count() as u64;
    for (family, value) in [
        (&NODES, Value::Int(s.nodes.len() as u64)),
        (&NODES_CONNECTED, Value::Int(connected)),
        (&SLICE, seconds_of_ns(s.slice_ns)),
        (&STORAGE_HEALTHY, flag(s.storage_ok)),
        (&JOBS_OMITTED, Value::Int(s.jobs_omitted)),
    ] {
        header(out, family, syntax);
        sample(out, family, "", value);
    }
    header(out, &SLICE_START_SKEW, syntax);
    histogram_samples(out, &SLICE_START_SKEW, &[], &s.slice_start_skew);
}

/// A histogram's series for one label set: its cumulative buckets, its count and its sum.
fn histogram_samples(out: &mut String, family: &Family, pairs: &[(&str, &str)], h: &Histogram) {
    for (bound, count) in h.cumulative() {
        let mut with_le = pairs.to_vec();
        with_le.push(("le", &bound));
        let _ = writeln!(out, "{}_bucket{} {count}", family.name, labels(&with_le));
    }
    let _ = writeln!(out, "{}_count{} {}", family.name, labels(pairs), h.count());
    let _ = writeln!(out, "{}_sum{} {}", family.name, labels(pairs), Value::Float(h.sum_ns as f64 / 1e9));
}

/// A node family and its value for one node.
type NodeFamily = (&'static Family, fn(&NodeFigures) -> Value);
/// A node histogram family and the node's histogram.
type NodeHistogram = (&'static Family, fn(&NodeFigures) -> &Histogram);
/// A job family and its value for one job, if the job has one.
type JobFamily = (&'static Family, fn(&JobFigures) -> Option<Value>);

fn write_nodes(out: &mut String, nodes: &[NodeFigures], syntax: Syntax) {
    let node_labels: Vec<String> = nodes.iter().map(|n| labels(&[("node", &n.name)])).collect();
    let families: [NodeFamily; 9] = [
        (&NODE_CPUS, |n| Value::Int(n.cpus.into())),
        (&NODE_MEMORY, |n| Value::Int(n.mem_bytes)),
        (&NODE_LOAD, |n| Value::Float(n.load_avg)),
        (&NODE_SWITCHES, |n| Value::Int(n.switches)),
        (&NODE_SWITCH_ERRORS, |n| Value::Int(n.switch_errors)),
        (&NODE_JOBS, |n| Value::Int(n.jobs)),
        (&NODE_CONNECTED, |n| flag(n.connected)),
        (&NODE_STUCK_JOBS, |n| Value::Int(n.stuck_jobs)),
        (&NODE_STUCK_PROCESSES, |n| Value::Int(n.stuck_processes)),
    ];
    for (family, value) in families {
        header(out, family, syntax);
        for (node, text) in nodes.iter().zip(&node_labels) {
            sample(out, family, text, value(node));
        }
    }
    let histograms: [NodeHistogram; 2] =
        [(&NODE_SWITCH_LATENESS, |n| &n.switch_lateness), (&NODE_SWITCH_LATENCY, |n| &n.switch_latency)];
    for (family, histogram) in histograms {
        header(out, family, syntax);
        for node in nodes {
            histogram_samples(out, family, &[("node", &node.name)], histogram(node));
        }
    }
}

fn write_jobs(out: &mut String, jobs: &[JobFigures], names: &BTreeMap<u32, String>, syntax: Syntax) {
    header(out, &JOB_INFO, syntax);
    for job in jobs {
        let id = job.id.to_string();
        let described = [
            ("job_id", id.as_str()),
            ("class", job.class.name()),
            ("mode", mode_text(job.mode)),
            ("state", job.state.name()),
        ];
        sample(out, &JOB_INFO, &labels(&described), Value::Int(1));
    }
    let job_labels: Vec<String> = jobs.iter().map(|j| job_labels(j, names)).collect();
    let families: [JobFamily; 6] = [
        (&JOB_CPUS, |j| Some(Value::Int(j.cpus.into()))),
        (&JOB_CPU, |j| Some(seconds_of_ns(j.cpu_ns))),
        (&JOB_PROCESSES, |j| Some(Value::Int(j.processes))),
        (&JOB_SLICE_SHARE, |j| Some(Value::Float(j.slice_share))),
        // A job that has not started has no elapsed time (not zero of it).
        (&JOB_ELAPSED, |j| j.elapsed_ms.map(|ms| Value::Float(ms as f64 / 1e3))),
        (&JOB_FROZEN, |j| j.frozen_ms.map(|ms| Value::Float(ms as f64 / 1e3))),
    ];
    for (family, value) in families {
        header(out, family, syntax);
        for (job, text) in jobs.iter().zip(&job_labels) {
            if let Some(value) = value(job) {
                sample(out, family, text, value);
            }
        }
    }
}

/// `job_id`, not `job`: Prometheus sets `job` on every series it scrapes (the scrape job's name) and would rename
/// ours to `exported_job`. Only what never changes in a job's life: its class, mode and state are on its info
/// series.
fn job_labels(j: &JobFigures, names: &BTreeMap<u32, String>) -> String {
    let user = names.get(&j.uid).cloned().unwrap_or_else(|| j.uid.to_string());
    labels(&[("job_id", &j.id.to_string()), ("user", &user)])
}

/// A family's header. OpenMetrics names the family, and has units and info; Prometheus's format names the
/// samples (a counter's `_total`), and has neither.
fn header(out: &mut String, family: &Family, syntax: Syntax) {
    let kind = match (&family.kind, syntax) {
        (Kind::Gauge, _) | (Kind::Info, Syntax::Prometheus) => "gauge",
        (Kind::Counter, _) => "counter",
        (Kind::Histogram, _) => "histogram",
        (Kind::Info, Syntax::OpenMetrics) => "info",
    };
    let name = match syntax {
        Syntax::OpenMetrics => family.name.to_string(),
        Syntax::Prometheus => format!("{}{}", family.name, sample_suffix(family)),
    };
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if let (Some(unit), Syntax::OpenMetrics) = (family.unit, syntax) {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
    let _ = writeln!(out, "# HELP {name} {}", escape(family.help));
}

/// What a family's samples add to its name.
fn sample_suffix(family: &Family) -> &'static str {
    match family.kind {
        Kind::Gauge | Kind::Histogram => "",
        Kind::Counter => "_total",
        Kind::Info => "_info",
    }
}

fn sample(out: &mut String, family: &Family, labels: &str, value: Value) {
    let suffix = sample_suffix(family);
    let _ = writeln!(out, "{}{suffix}{labels} {value}", family.name);
}

/// `{name="value",...}` with each value escaped; nothing for no labels.
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs.iter().map(|(name, value)| format!("{name}=\"{}\"", escape(value))).collect();
    format!("{{{}}}", inner.join(","))
}

/// OpenMetrics escapes backslash, double quote and line feed in label values and help texts; anything else is
/// taken as it is, and a raw line feed would end the line.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> MetricsSnapshot {
        let job = |id, uid, state, elapsed_ms| JobFigures {
            id,
            uid,
            class: JobClass::Batch,
            mode: Mode::Gang,
            state,
            cpus: 2,
            cpu_ns: 1_500_000_000,
            processes: 4,
            slice_share: 0.5,
            elapsed_ms,
            frozen_ms: None,
        };
        let mut lateness = Histogram::default();
        for ns in [40_000, 90_000, 90_000, 3_000_000, 200_000_000] {
            lateness.observe(ns);
        }
        MetricsSnapshot {
            slice_ns: 10_000_000,
            slice_start_skew: Histogram::default(),
            storage_ok: true,
            nodes: vec![NodeFigures {
                name: "n1".into(),
                cpus: 4,
                mem_bytes: 1 << 30,
                connected: true,
                load_avg: 1.25,
                switches: 300,
                switch_errors: 1,
                jobs: 2,
                stuck_jobs: 1,
                stuck_processes: 3,
                switch_lateness: lateness,
                switch_latency: Histogram::default(),
            }],
            jobs_by_state: vec![(JobState::Queued, 1), (JobState::Running, 1)],
            jobs: vec![job(7, 1000, JobState::Running, Some(2_500)), job(8, 4242, JobState::Queued, None)],
            jobs_omitted: 0,
        }
    }

    fn rendered() -> String {
        rendered_in(Syntax::OpenMetrics)
    }

    fn rendered_in(syntax: Syntax) -> String {
        let names = BTreeMap::from([(1000, "al\\ice \"the\"\nadmin".to_string())]);
        render(&snapshot(), &names, syntax)
    }

    #[test]
    fn label_values_escape_backslash_quote_and_line_feed() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(labels(&[("node", "x\"y"), ("state", "up")]), "{node=\"x\\\"y\",state=\"up\"}");
        assert_eq!(labels(&[]), "");
        let text = rendered();
        assert!(text.contains("user=\"al\\\\ice \\\"the\\\"\\nadmin\""), "{text}");
        assert!(!text.lines().any(|line| line.starts_with("admin")), "a raw line feed split a line");
    }

    #[test]
    fn the_exposition_ends_with_eof_and_declares_every_family_before_its_samples() {
        let text = rendered();
        assert!(text.ends_with("\n# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        let mut declared: Vec<(String, String)> = Vec::new();
        for line in text.lines().filter(|l| *l != "# EOF") {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(!declared.iter().any(|(n, _)| n == name), "{name} declared twice");
                declared.push((name.to_string(), kind.to_string()));
                continue;
            }
            if line.starts_with("# ") {
                let name = line.split(' ').nth(2).unwrap();
                assert_eq!(declared.last().map(|(n, _)| n.as_str()), Some(name), "{line} outside its family");
                continue;
            }
            let series = line.split(['{', ' ']).next().unwrap();
            let (family, kind) = declared.last().unwrap();
            let expected: Vec<String> = match kind.as_str() {
                "counter" => vec![format!("{family}_total")],
                "histogram" => ["_bucket", "_count", "_sum"].iter().map(|s| format!("{family}{s}")).collect(),
                "info" => vec![format!("{family}_info")],
                _ => vec![family.clone()],
            };
            assert!(expected.iter().any(|e| e == series), "{line} under {family}");
        }
        assert!(declared.iter().all(|(_, kind)| ["gauge", "counter", "histogram", "info"].contains(&kind.as_str())));
    }

    #[test]
    fn families_carry_types_units_and_counters_end_in_total() {
        let text = rendered();
        for expected in [
            "# TYPE cosched_job_cpu_seconds counter",
            "# UNIT cosched_job_cpu_seconds seconds",
            "cosched_job_cpu_seconds_total{job_id=\"7\",user=\"al\\\\ice \\\"the\\\"\\nadmin\"} 1.5",
            "# TYPE cosched_job info",
            "cosched_job_info{job_id=\"7\",class=\"batch\",mode=\"gang\",state=\"running\"} 1",
            "cosched_job_info{job_id=\"8\",class=\"batch\",mode=\"gang\",state=\"queued\"} 1",
            "# UNIT cosched_node_memory_bytes bytes",
            "cosched_node_memory_bytes{node=\"n1\"} 1073741824",
            "cosched_node_switches_total{node=\"n1\"} 300",
            "cosched_node_load_average{node=\"n1\"} 1.25",
            "cosched_node_stuck_processes{node=\"n1\"} 3",
            "cosched_jobs{state=\"queued\"} 1",
            "cosched_slice_seconds 0.01",
            "cosched_job_elapsed_seconds{job_id=\"7\",user=\"al\\\\ice \\\"the\\\"\\nadmin\"} 2.5",
        ] {
            assert!(text.lines().any(|l| l == expected), "{expected} missing from\n{text}");
        }
        // Every unit is the name's suffix; the job without a user name shows its uid; a queued job has no elapsed time.
        for line in text.lines().filter_map(|l| l.strip_prefix("# UNIT ")) {
            let (name, unit) = line.split_once(' ').unwrap();
            assert!(name.ends_with(&format!("_{unit}")), "{line}");
        }
        assert!(text.contains("user=\"4242\""));
        assert!(!text.lines().any(|l| l.starts_with("cosched_job_elapsed_seconds{job_id=\"8\"")));
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_ending_in_inf_then_its_count_and_sum() {
        let text = rendered();
        let node = |rest: &str| format!("cosched_switch_lateness_seconds_{rest}");
        for expected in [
            "# TYPE cosched_switch_lateness_seconds histogram",
            "# UNIT cosched_switch_lateness_seconds seconds",
            &node("bucket{node=\"n1\",le=\"0.00001\"} 0"),
            &node("bucket{node=\"n1\",le=\"0.00005\"} 1"),
            &node("bucket{node=\"n1\",le=\"0.0001\"} 3"),
            &node("bucket{node=\"n1\",le=\"0.0025\"} 3"),
            &node("bucket{node=\"n1\",le=\"0.005\"} 4"),
            &node("bucket{node=\"n1\",le=\"0.1\"} 4"),
            &node("bucket{node=\"n1\",le=\"+Inf\"} 5"),
            &node("count{node=\"n1\"} 5"),
            &node("sum{node=\"n1\"} 0.20322"),
            "cosched_slice_start_skew_seconds_count 0",
        ] {
            assert!(text.lines().any(|l| l == expected), "{expected} missing from\n{text}");
        }
    }

    #[test]
    fn numbers_are_written_as_openmetrics_reads_them() {
        assert_eq!(Value::Float(f64::NAN).to_string(), "NaN");
        assert_eq!(Value::Float(f64::INFINITY).to_string(), "+Inf");
        assert_eq!(Value::Float(f64::NEG_INFINITY).to_string(), "-Inf");
        assert_eq!(Value::Float(0.25).to_string(), "0.25");
        assert_eq!(Value::Int(u64::MAX).to_string(), "18446744073709551615");
    }

    #[test]
    fn access_parses_off_and_public_only() {
        assert_eq!(MetricsAccess::parse("off"), Ok(MetricsAccess::Off));
        assert_eq!(MetricsAccess::parse("Public"), Ok(MetricsAccess::Public));
        assert!(MetricsAccess::parse("token").is_err());
    }

    /// Prometheus's own format, for a reader that does not ask for OpenMetrics: samples' names in the headers, no
    /// units, info as a gauge, no `# EOF`; `promtool check metrics` (Debian's prometheus, from `scripts/setup`)
    /// accepts it.
    #[test]
    fn prometheus_text_is_served_to_a_reader_that_does_not_ask_for_openmetrics() {
        assert_eq!(Syntax::for_accept(None), Syntax::Prometheus);
        assert_eq!(
            Syntax::for_accept(Some("application/openmetrics-text;version=1.0.0,*/*;q=0.1")),
            Syntax::OpenMetrics
        );
        let text = rendered_in(Syntax::Prometheus);
        for expected in [
            "# TYPE cosched_job_cpu_seconds_total counter",
            "# TYPE cosched_job_info gauge",
            "cosched_job_info{job_id=\"7\",class=\"batch\",mode=\"gang\",state=\"running\"} 1",
        ] {
            assert!(text.lines().any(|l| l == expected), "{expected} missing from\n{text}");
        }
        assert!(!text.contains("# UNIT") && !text.contains("# EOF"), "{text}");
        let promtool = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        let Ok(mut promtool) = promtool else {
            return crate::testing::say_skipped(
                "prometheus_text_is_served_to_a_reader_that_does_not_ask_for_openmetrics",
                "promtool is not installed (scripts/setup installs Debian's prometheus package)",
            );
        };
        use std::io::Write;
        promtool.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = promtool.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "promtool check metrics refused it:\n{said}\n{text}");
    }

    /// The reference parser (Debian's `python3-prometheus-client`, installed by `scripts/setup`) reads the whole
    /// exposition: types, units, escapes and `# EOF` as OpenMetrics 1.0 has them.
    #[test]
    fn the_reference_parser_reads_the_exposition() {
        let Some(parsed) = crate::testing::parse_openmetrics(&rendered()) else {
            return crate::testing::say_skipped(
                "the_reference_parser_reads_the_exposition",
                "no prometheus_client for /usr/bin/python3 (scripts/setup installs python3-prometheus-client)",
            );
        };
        let parsed = parsed.unwrap_or_else(|e| panic!("the parser refused the exposition: {e}"));
        assert!(parsed.contains("cosched_job_cpu_seconds counter seconds"), "{parsed}");
        assert!(parsed.contains("cosched_job_cpu_seconds_total job_id=7 user=al\\ice \"the\"\nadmin"), "{parsed}");
    }
}
