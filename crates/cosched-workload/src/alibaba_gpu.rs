//! Alibaba's GPU cluster trace of 2023 (`cluster-trace-gpu-v2023` in github.com/alibaba/clusterdata: the pod
//! lists `openb_pod_list_*.csv` of Weng et al., "Beware of Fragmentation", USENIX ATC '23) read as an SWF
//! workload.
//!
//! A row is a pod: CPUs (milli), memory (MiB) and GPUs asked for, its QoS class and phase, and when it was
//! created, scheduled and deleted (seconds from the trace's start). A pod becomes a job of `num_gpu`
//! processors (or, with [`Resource::Cpu`], of its CPUs rounded up): submitted at creation, waiting until
//! scheduled, running until deleted. What the SWF cannot say is counted in [`Imported`]: pods that never
//! started (Pending), pods that ask for none of the resource, pods sharing part of one GPU (taken whole),
//! and pods still running when the trace ends (their run time is a lower bound).
//!
//! Every size is bounded before it is used: lines within [`swf::MAX_LINE_BYTES`], rows within
//! [`MAX_ROWS`], each number within its field's SWF bounds. A malformed row stops the import with its line
//! and column named.

use crate::swf::{self, next_line, Line, TraceJob, Workload, MAX_LINE_BYTES, MAX_PROCS, MAX_TIME_S};
use flate2::read::MultiGzDecoder;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// The trace's machine (`openb_node_list_all_node.csv`): nodes, GPUs and CPUs.
pub const TRACE_NODES: u32 = 1523;
pub const TRACE_GPUS: u32 = 6212;
pub const TRACE_CPUS: u32 = 125_514;

/// The most rows read: the published lists hold 8,152.
pub const MAX_ROWS: u64 = 10_000_000;

/// What a job's processors are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Gpu,
    Cpu,
}

impl Resource {
    pub fn parse(text: &str) -> Option<Resource> {
        match text {
            "gpu" => Some(Resource::Gpu),
            "cpu" => Some(Resource::Cpu),
            _ => None,
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Resource::Gpu => "GPUs",
            Resource::Cpu => "CPUs",
        }
    }
}

/// The QoS classes, numbered as the SWF's partition (field 16): the queue's numbers 0 and 1 mean interactive and
/// batch by convention, which a QoS class is not.
const QOS_PARTITIONS: [(&str, i64); 4] = [("LS", 1), ("Burstable", 2), ("BE", 3), ("Guaranteed", 4)];

/// The pod phases and the SWF status each becomes (`None`: the pod never started).
const PHASE_STATUS: [(&str, Option<i64>); 4] =
    [("Succeeded", Some(1)), ("Failed", Some(0)), ("Running", Some(-1)), ("Pending", None)];

/// The columns read, by name (the lists also have `gpu_spec`, which is not).
const COLUMNS: [&str; 10] = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// A pod list read as a workload, and what of it the workload leaves out or only approximates.
#[derive(Clone, Debug)]
pub struct Imported {
    pub workload: Workload,
    pub rows: u64,
    /// Pods left out, by reason.
    pub left_out: BTreeMap<&'static str, u64>,
    /// GPU pods asking for part of one GPU (`gpu_milli` below 1000), each taken as a whole GPU.
    pub shared_gpu: u64,
    /// Jobs deleted at the trace's last instant: running when it ended, their run time a lower bound.
    pub still_running: u64,
}

impl Imported {
    /// One paragraph for a person: what was read, written and left out.
    pub fn describe(&self) -> String {
        let mut text = format!("{} pods read, {} jobs written", self.rows, self.workload.jobs.len());
        for (reason, count) in &self.left_out {
            text += &format!("; {count} left out: {reason}");
        }
        if self.shared_gpu > 0 {
            text += &format!("; {} share part of one GPU, taken whole", self.shared_gpu);
        }
        if self.still_running > 0 {
            text += &format!("; {} still running at the trace's end (run time a lower bound)", self.still_running);
        }
        text
    }
}

/// One row's values.
struct Pod {
    cpu_milli: u64,
    memory_mib: u64,
    num_gpu: u32,
    gpu_milli: u32,
    partition: i64,
    status: Option<i64>,
    creation_s: f64,
    scheduled_s: Option<f64>,
    deletion_s: Option<f64>,
}

/// Read a pod list (`source_name` names it in messages) with each job's processors of `resource`.
pub fn read_pod_list(mut reader: impl BufRead, source_name: &str, resource: Resource) -> Result<Imported, String> {
    let at = |line: u64, message: String| format!("{}:{line}: {message}", swf::printable(source_name));
    let mut buf = Vec::new();
    let columns = match next_line(&mut reader, &mut buf, MAX_LINE_BYTES).map_err(|e| at(1, e.to_string()))? {
        None => return Err(at(1, "empty file: a pod list starts with its header".into())),
        Some(Line::TooLong) => return Err(at(1, format!("line longer than {MAX_LINE_BYTES} bytes"))),
        Some(Line::Read) => header_columns(&buf).map_err(|e| at(1, e))?,
    };
    let mut pods = Vec::new();
    let mut line_no = 1;
    while let Some(line) =
        next_line(&mut reader, &mut buf, MAX_LINE_BYTES).map_err(|e| at(line_no + 1, e.to_string()))?
    {
        line_no += 1;
        if line == Line::TooLong {
            return Err(at(line_no, format!("line longer than {MAX_LINE_BYTES} bytes")));
        }
        let text = String::from_utf8_lossy(&buf);
        if text.trim().is_empty() {
            continue;
        }
        if pods.len() as u64 >= MAX_ROWS {
            return Err(at(line_no, format!("more than {MAX_ROWS} rows")));
        }
        pods.push((line_no, parse_pod(text.trim_end_matches(['\n', '\r']), &columns).map_err(|e| at(line_no, e))?));
    }
    Ok(to_workload(&pods, resource))
}

/// Read a pod list file, plain or gzip-compressed (recognised by its magic bytes).
pub fn read_pod_list_path(path: &Path, resource: Resource) -> Result<Imported, String> {
    let name = path.display().to_string();
    let shown = swf::printable(&name);
    let file = File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut reader = BufReader::new(file);
    let head = reader.fill_buf().map_err(|e| format!("{shown}: {e}"))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return read_pod_list(BufReader::new(MultiGzDecoder::new(reader)), &name, resource);
    }
    if let Some(what) = swf::binary_kind(&head[..head.len().min(4096)]) {
        return Err(format!("{shown}: this is {what}, not a pod list (CSV text, gzip-compressed or not)"));
    }
    read_pod_list(reader, &name, resource)
}

/// Where each column read is in a row.
fn header_columns(bytes: &[u8]) -> Result<[usize; COLUMNS.len()], String> {
    let text = String::from_utf8_lossy(bytes);
    let names: Vec<&str> = text.trim().trim_start_matches('\u{feff}').split(',').map(str::trim).collect();
    let mut found = [0; COLUMNS.len()];
    for (slot, wanted) in found.iter_mut().zip(COLUMNS) {
        *slot = names.iter().position(|n| *n == wanted).ok_or_else(|| {
            format!(
                "the header has no column `{wanted}`: is this an openb_pod_list_*.csv of cluster-trace-gpu-v2023? \
                 (it needs {})",
                COLUMNS.join(", ")
            )
        })?;
    }
    Ok(found)
}

fn parse_pod(line: &str, columns: &[usize; COLUMNS.len()]) -> Result<Pod, String> {
    let fields: Vec<&str> = line.split(',').collect();
    let field = |k: usize| -> Result<&str, String> {
        let value = fields.get(columns[k]).ok_or_else(|| format!("no column `{}`: the row is short", COLUMNS[k]))?;
        Ok(value.trim())
    };
    let whole = |k: usize, max: u64| -> Result<u64, String> {
        let text = field(k)?;
        let value: u64 =
            text.parse().map_err(|_| format!("`{}` is `{}`, not a whole number", COLUMNS[k], swf::printable(text)))?;
        (value <= max)
            .then_some(value)
            .ok_or_else(|| format!("`{}` is {value}, beyond the {max} we accept", COLUMNS[k]))
    };
    let time = |k: usize| -> Result<Option<f64>, String> {
        let text = field(k)?;
        if text.is_empty() {
            return Ok(None);
        }
        let value: f64 =
            text.parse().map_err(|_| format!("`{}` is `{}`, not seconds", COLUMNS[k], swf::printable(text)))?;
        match (0.0..=MAX_TIME_S).contains(&value) {
            true => Ok(Some(value)),
            false => Err(format!("`{}` is {value} s, outside 0 to {MAX_TIME_S} s", COLUMNS[k])),
        }
    };
    let named = |k: usize, table: &[(&str, i64)]| -> Result<i64, String> {
        let text = field(k)?;
        let known = table.iter().find(|(name, _)| *name == text).map(|&(_, value)| value);
        let names: Vec<&str> = table.iter().map(|(name, _)| *name).collect();
        known.ok_or_else(|| format!("`{}` is `{}`, not one of {}", COLUMNS[k], swf::printable(text), names.join(", ")))
    };
    let phases: Vec<(&str, i64)> =
        PHASE_STATUS.iter().map(|&(name, status)| (name, status.unwrap_or(i64::MIN))).collect();
    let status = named(6, &phases)?;
    let pod = Pod {
        cpu_milli: whole(1, u64::from(MAX_PROCS) * 1000)?,
        memory_mib: whole(2, 1 << 40)?,
        num_gpu: whole(3, u64::from(MAX_PROCS))? as u32,
        gpu_milli: whole(4, 1000)? as u32,
        partition: named(5, &QOS_PARTITIONS)?,
        status: (status != i64::MIN).then_some(status),
        creation_s: time(7)?.ok_or("`creation_time` is empty")?,
        deletion_s: time(8)?,
        scheduled_s: time(9)?,
    };
    check_order(&pod)?;
    Ok(pod)
}

/// Created, then scheduled, then deleted.
fn check_order(pod: &Pod) -> Result<(), String> {
    if let Some(scheduled) = pod.scheduled_s.filter(|&s| s < pod.creation_s) {
        return Err(format!("scheduled at {scheduled} s, before its creation at {} s", pod.creation_s));
    }
    match (pod.scheduled_s, pod.deletion_s) {
        (Some(scheduled), Some(deleted)) if deleted < scheduled => {
            Err(format!("deleted at {deleted} s, before it was scheduled at {scheduled} s"))
        }
        _ => Ok(()),
    }
}

fn to_workload(pods: &[(u64, Pod)], resource: Resource) -> Imported {
    let trace_end_s = pods.iter().filter_map(|(_, p)| p.deletion_s).fold(0.0, f64::max);
    let mut imported = Imported {
        workload: Workload { header: header(resource, pods.len()), ..Workload::default() },
        rows: pods.len() as u64,
        left_out: BTreeMap::new(),
        shared_gpu: 0,
        still_running: 0,
    };
    for (row, (line, pod)) in pods.iter().enumerate() {
        match job_of(row as u64 + 1, pod, resource) {
            Err(reason) => *imported.left_out.entry(reason).or_default() += 1,
            Ok(mut job) => {
                job.source_line = *line;
                imported.shared_gpu += u64::from(resource == Resource::Gpu && pod.num_gpu == 1 && pod.gpu_milli < 1000);
                imported.still_running += u64::from(pod.deletion_s == Some(trace_end_s));
                imported.workload.jobs.push(job);
            }
        }
    }
    // SWF lists jobs by submission; the published lists already are (a stable sort keeps their order).
    imported.workload.jobs.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    imported
}

/// The job a pod becomes (numbered by its row), or why it is left out.
fn job_of(number: u64, pod: &Pod, resource: Resource) -> Result<TraceJob, &'static str> {
    let (Some(status), Some(scheduled_s)) = (pod.status, pod.scheduled_s) else {
        return Err("never started (Pending)");
    };
    let deleted_s = pod.deletion_s.ok_or("started but never deleted (no end)")?;
    let procs = match resource {
        Resource::Gpu => pod.num_gpu,
        Resource::Cpu => pod.cpu_milli.div_ceil(1000).min(u64::from(MAX_PROCS)) as u32,
    };
    if procs == 0 {
        return Err(match resource {
            Resource::Gpu => "asks for no GPU (CPU only)",
            Resource::Cpu => "asks for no CPU",
        });
    }
    let run_s = deleted_s - scheduled_s;
    if run_s <= 0.0 {
        return Err("ran 0 s");
    }
    let mut job = TraceJob::new(number, pod.creation_s, run_s, procs, -1);
    job.fields[swf::F_PARTITION] = pod.partition as f64;
    job.wait_s = scheduled_s - pod.creation_s;
    job.fields[swf::F_REQ_PROCS] = f64::from(procs);
    job.fields[swf::F_REQ_MEMORY] = pod.memory_mib as f64 * 1024.0 / f64::from(procs);
    job.fields[swf::F_STATUS] = status as f64;
    job.sync_fields();
    Ok(job)
}

/// The SWF header: where the trace comes from, its terms, and how it was converted.
fn header(resource: Resource, rows: usize) -> Vec<String> {
    let procs = match resource {
        Resource::Gpu => TRACE_GPUS,
        Resource::Cpu => TRACE_CPUS,
    };
    let partitions: Vec<String> = QOS_PARTITIONS.iter().map(|(name, n)| format!("{n} {name}")).collect();
    vec![
        "Version: 2.2".into(),
        format!(
            "Computer: Alibaba heterogeneous GPU cluster ({TRACE_NODES} nodes, {TRACE_GPUS} GPUs, {TRACE_CPUS} CPUs)"
        ),
        "Installation: Alibaba cluster-trace-gpu-v2023 (Weng et al., Beware of Fragmentation, USENIX ATC '23)".into(),
        "Information: https://github.com/alibaba/clusterdata/tree/master/cluster-trace-gpu-v2023".into(),
        "Acknowledge: Alibaba Cluster Trace Program; its terms: use for research or study purposes".into(),
        format!(
            "Conversion: cosched workload import alibaba-gpu-2023; processors are {}; partition is the pod's QoS",
            resource.plural()
        ),
        format!("Partitions: {}", partitions.join(", ")),
        format!("MaxRecords: {rows}"),
        format!("MaxNodes: {TRACE_NODES}"),
        format!("MaxProcs: {procs}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,\
                          deletion_time,scheduled_time\n";

    fn import(rows: &str, resource: Resource) -> Result<Imported, String> {
        read_pod_list(format!("{HEADER}{rows}").as_bytes(), "pods.csv", resource)
    }

    #[test]
    fn a_pod_becomes_a_job_submitted_at_creation_waiting_until_scheduled_running_until_deleted() {
        let rows = "p0,12000,16384,2,1000,,LS,Succeeded,100,400,130\n\
                    p1,6000,12288,1,460,,BE,Running,200,900,200\n\
                    p2,4000,8192,0,0,,LS,Failed,210,300,220\n\
                    p3,4000,8192,1,1000,,Burstable,Pending,250,,\n";
        let imported = import(rows, Resource::Gpu).unwrap();
        let jobs = &imported.workload.jobs;
        assert_eq!(jobs.len(), 2);
        let (first, second) = (&jobs[0], &jobs[1]);
        assert_eq!(
            (first.job_number, first.submit_s, first.wait_s, first.run_s, first.procs),
            (1, 100.0, 30.0, 270.0, 2)
        );
        assert_eq!(
            (first.status(), first.fields[swf::F_PARTITION], first.fields[swf::F_REQ_MEMORY]),
            (1, 1.0, 16384.0 * 1024.0 / 2.0)
        );
        assert_eq!((second.job_number, second.status(), second.fields[swf::F_PARTITION]), (2, -1, 3.0));
        assert_eq!(imported.shared_gpu, 1);
        assert_eq!(imported.still_running, 1, "p1 ends at the last instant of the list");
        assert_eq!(imported.left_out["asks for no GPU (CPU only)"], 1);
        assert_eq!(imported.left_out["never started (Pending)"], 1);
        let cpus = import(rows, Resource::Cpu).unwrap();
        let procs: Vec<u32> = cpus.workload.jobs.iter().map(|j| j.procs).collect();
        assert_eq!(procs, vec![12, 6, 4], "CPU-only p2 is a job of 4 CPUs");
    }

    #[test]
    fn what_is_written_reads_back_as_the_same_swf() {
        let imported = import("p0,12000,16384,2,1000,,LS,Succeeded,100,400,130\n", Resource::Gpu).unwrap();
        let mut text = Vec::new();
        swf::write_to(&mut text, &imported.workload).unwrap();
        let back = swf::read_from(text.as_slice(), "back.swf", swf::ReadOptions::default()).unwrap();
        assert_eq!(back.jobs, imported.workload.jobs);
        assert_eq!(back.max_procs(), Some(TRACE_GPUS));
    }

    #[test]
    fn a_malformed_row_names_its_line_and_column() {
        let cases = [
            ("p0,12000,16384,x,1000,,LS,Succeeded,100,400,130\n", "pods.csv:2: `num_gpu` is `x`"),
            ("p0,12000,16384,1,1000,,LS,Succeeded,100,400,130\np1,1,1,1,1,,Gold,Running,1,2,1\n", "pods.csv:3: `qos`"),
            ("p0,12000,16384,1,1000,,LS,Done,100,400,130\n", "`pod_phase` is `Done`"),
            ("p0,12000,16384,1,1001,,LS,Running,100,400,130\n", "`gpu_milli` is 1001"),
            ("p0,12000,16384,1,1000,,LS,Running,100,400,90\n", "before its creation"),
            ("p0,12000,16384,1,1000,,LS,Running,100,99,100\n", "before it was scheduled"),
            ("p0,12000,16384,1,1000,,LS,Running,-5,400,130\n", "outside 0"),
            ("p0,12000,16384,1,1000\n", "the row is short"),
        ];
        for (rows, expected) in cases {
            let error = import(rows, Resource::Gpu).unwrap_err();
            assert!(error.contains(expected), "{rows:?}: {error}");
        }
        let error = read_pod_list("a,b\n1,2\n".as_bytes(), "x.csv", Resource::Gpu).unwrap_err();
        assert!(error.starts_with("x.csv:1: the header has no column `name`"), "{error}");
        let long = format!("{HEADER}{}\n", "9".repeat(MAX_LINE_BYTES + 1));
        assert!(read_pod_list(long.as_bytes(), "x.csv", Resource::Gpu).unwrap_err().contains("line longer"));
    }
}
