//! The Standard Workload Format (SWF) of the Parallel Workloads Archive.
//!
//! One job per line, 18 whitespace-separated numeric fields, `-1` for
//! unknown, `;` lines for the header. Reading keeps all 18 raw fields of each
//! job so that writing back loses nothing; the fields the simulator uses are
//! also lifted into named members of [`TraceJob`].
//!
//! What counts as malformed (the read stops, or with
//! [`ReadOptions::skip_bad_lines`] the line is skipped and its number kept):
//! a field count other than 18, a field that is not a finite number, a job
//! number that is unknown or used twice, and a field outside what its meaning
//! in the SWF definition allows, whether the simulator reads it or not: every
//! field is -1 (unknown) or a value of its kind, a time (seconds, within
//! [`MAX_TIME_S`]), a processor count (whole, within [`MAX_PROCS`]), memory
//! (KB per processor, within [`MAX_MEMORY_KB`]), a status (0 to 5) or an id
//! (job, user, group, application, queue, partition: whole, within
//! [`MAX_ID`]). Garbage in a field we never read (a requested time of 1e300,
//! a user 2^63) is garbage in the trace, so it is reported like any other.
//!
//! A well-formed job that cannot be simulated (unknown or non-positive run
//! time or processor count, unknown submit time, a fractional count of the
//! processors it is sized by) is not an error: it is listed in [`Workload::unusable`] with the reason, so
//! a report can say how many jobs were left out and why.
//!
//! Limits, so that every value can become simulated time (u64 ns) and memory
//! grows only with the jobs read (about 200 bytes each): the field bounds
//! above, the `MaxProcs` and `MaxNodes` header entries within [`MAX_PROCS`],
//! lines within [`MAX_LINE_BYTES`], the header within [`MAX_HEADER_BYTES`].
//! Beyond them a line is malformed. A UTF-8 byte order mark before the first line is skipped;
//! anywhere else it makes the field it is in fail. Messages escape control
//! and invisible characters (`\0`, `\u{feff}`), so they show what is there.

use std::collections::btree_map::{BTreeMap, Entry};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

/// Number of fields in an SWF job line.
pub const FIELD_COUNT: usize = 18;

/// Field names, 0-based, for error messages.
pub const FIELD_NAMES: [&str; FIELD_COUNT] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
];

// 0-based indices of the fields the simulator interprets.
const F_JOB: usize = 0;
const F_SUBMIT: usize = 1;
const F_WAIT: usize = 2;
const F_RUN: usize = 3;
const F_ALLOC: usize = 4;
/// Average CPU time used per processor (s), -1 unknown.
pub(crate) const F_CPU_TIME: usize = 5;
pub(crate) const F_REQ_PROCS: usize = 7;
/// Requested time (s), -1 unknown.
pub(crate) const F_REQ_TIME: usize = 8;
pub(crate) const F_REQ_MEMORY: usize = 9;
/// Wait time (s), -1 unknown.
pub(crate) const F_WAIT_TIME: usize = F_WAIT;
pub(crate) const F_STATUS: usize = 10;
const F_QUEUE: usize = 14;
pub(crate) const F_PARTITION: usize = 15;

/// The largest submit, wait or run time accepted, in seconds: 1e9 s is 31.7
/// years, longer than any archive trace spans, and leaves the simulator's
/// clock (u64 ns, 584 years) room to run past the last arrival. Every other
/// time (CPU, requested, think time) is held to it too.
pub const MAX_TIME_S: f64 = 1e9;
/// The most processors a job or a machine may have: a hundred times the
/// largest machine built so far.
pub const MAX_PROCS: u32 = 1_000_000_000;
/// The most memory per processor a job may use or request, in KB (1e13 KB, 10 PB): hundreds of times the
/// memory of the largest single machine built so far, let alone one processor's share.
pub const MAX_MEMORY_KB: f64 = 1e13;
/// The largest id (job, user, group, application, queue, partition): the widest the systems that write traces use
/// (a Unix uid or gid, a Slurm job id: 32 bits), where archive traces number their users and jobs from 1.
pub const MAX_ID: u32 = u32::MAX;

/// What a field means in the SWF definition, and so what it may hold besides -1 (unknown).
#[derive(Clone, Copy, PartialEq)]
enum FieldKind {
    /// Seconds, fractions allowed, from 0 to [`MAX_TIME_S`].
    Time,
    /// Processors: a whole number from 0 to [`MAX_PROCS`] (a fractional count the job is sized by leaves the job
    /// out as unusable instead, see [`Workload::unusable`]).
    Processors,
    /// Kilobytes per processor, fractions allowed (an average), from 0 to [`MAX_MEMORY_KB`].
    MemoryKb,
    /// What became of the job: a whole number from 0 to 5 (see [`STATUS_NAMES`]).
    Status,
    /// A number naming something: a whole number from 0 to [`MAX_ID`].
    Id,
}

/// Each field's kind, in field order.
const FIELD_KINDS: [FieldKind; FIELD_COUNT] = {
    use FieldKind::*;
    [Id, Time, Time, Time, Processors, Time, MemoryKb, Processors, Time, MemoryKb, Status, Id, Id, Id, Id, Id, Id, Time]
};

/// The largest status the SWF defines (5, cancelled).
const MAX_STATUS: f64 = 5.0;

/// The longest line read, in bytes: SWF lines are about 100 bytes, and a
/// longer one is refused before it fills memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// The most header (`;` lines) kept, in bytes: archive headers are a few KiB, and a compressed file of nothing but
/// `;` lines would otherwise fill memory a thousand times faster than it is read.
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;
/// Header entries that count processors or nodes, checked like field 5.
const HEADER_COUNTS: [&str; 2] = ["MaxProcs", "MaxNodes"];

/// The SWF statuses (field 11) by name, as the Parallel Workloads Archive defines them.
pub const STATUS_NAMES: [(i64, &str); 7] = [
    (-1, "unknown"),
    (0, "failed"),
    (1, "completed"),
    (2, "partial"),
    (3, "last-partial"),
    (4, "failed-partial"),
    (5, "cancelled"),
];

/// The name of a status, or its number when the archive defines none.
pub fn status_name(status: i64) -> String {
    STATUS_NAMES.iter().find(|(n, _)| *n == status).map_or_else(|| status.to_string(), |(_, name)| name.to_string())
}

/// A status given by name or number.
pub fn parse_status(text: &str) -> Result<i64, String> {
    let text = text.trim();
    STATUS_NAMES
        .iter()
        .find(|(_, name)| name.eq_ignore_ascii_case(text))
        .map(|(n, _)| *n)
        .or_else(|| text.parse().ok())
        .ok_or_else(|| {
            let names: Vec<&str> = STATUS_NAMES.iter().map(|(_, name)| *name).collect();
            format!("unknown job status '{text}' (one of {}, or a number)", names.join(", "))
        })
}

/// One job of a trace.
///
/// The named members are what the simulator uses; `fields` keeps every raw
/// field. The named members win: [`write_to`] writes them over `fields`, so
/// code that changes `submit_s` or `run_s` (load scaling) need not touch
/// `fields`, though [`crate::load`] keeps both in step anyway.
#[derive(Clone, Debug)]
pub struct TraceJob {
    /// SWF field 1.
    pub job_number: u64,
    /// Field 2, seconds (>= 0).
    pub submit_s: f64,
    /// Field 3 (-1 unknown).
    pub wait_s: f64,
    /// Field 4, seconds (> 0 for usable jobs).
    pub run_s: f64,
    /// Field 5 allocated processors, or field 8 requested if 5 is -1.
    pub procs: u32,
    /// Field 15 (-1 unknown; by convention 0 = interactive, 1 = batch).
    pub queue: i64,
    /// 1-based line in the file it was read from; 0 when generated.
    pub source_line: u64,
    /// All 18 raw fields, so that writing back loses nothing.
    pub fields: [f64; FIELD_COUNT],
}

/// Equality of content: `source_line` says where a job came from, not what it
/// is, so a job written and read back equals the original.
impl PartialEq for TraceJob {
    fn eq(&self, other: &TraceJob) -> bool {
        self.job_number == other.job_number
            && self.submit_s == other.submit_s
            && self.wait_s == other.wait_s
            && self.run_s == other.run_s
            && self.procs == other.procs
            && self.queue == other.queue
            && self.fields == other.fields
    }
}

impl TraceJob {
    /// A completed job (status 1) with every other field unknown.
    pub fn new(job_number: u64, submit_s: f64, run_s: f64, procs: u32, queue: i64) -> TraceJob {
        let mut fields = [-1.0; FIELD_COUNT];
        fields[F_JOB] = job_number as f64;
        fields[F_SUBMIT] = submit_s;
        fields[F_RUN] = run_s;
        fields[F_ALLOC] = procs as f64;
        fields[F_STATUS] = 1.0;
        fields[F_QUEUE] = queue as f64;
        TraceJob { job_number, submit_s, wait_s: -1.0, run_s, procs, queue, source_line: 0, fields }
    }

    /// SWF field 9, the wall time the user asked for, if recorded (above 0).
    pub fn requested_s(&self) -> Option<f64> {
        let requested = self.fields[F_REQ_TIME];
        (requested > 0.0).then_some(requested)
    }

    /// SWF field 11, what became of the job: see [`status_name`].
    pub fn status(&self) -> i64 {
        self.fields[F_STATUS] as i64
    }

    /// The raw fields with the named members written over them. The processor
    /// count goes back to the field it was read from (requested processors
    /// when the allocated count was unknown), so a round trip is exact.
    pub fn synced_fields(&self) -> [f64; FIELD_COUNT] {
        let mut f = self.fields;
        f[F_JOB] = self.job_number as f64;
        f[F_SUBMIT] = self.submit_s;
        f[F_WAIT] = self.wait_s;
        f[F_RUN] = self.run_s;
        f[F_QUEUE] = self.queue as f64;
        if self.procs_from_requested() {
            f[F_REQ_PROCS] = self.procs as f64;
        } else {
            f[F_ALLOC] = self.procs as f64;
        }
        f
    }

    /// True when `procs` came from the requested-processors field.
    pub fn procs_from_requested(&self) -> bool {
        self.fields[F_ALLOC] == -1.0 && self.fields[F_REQ_PROCS] != -1.0
    }

    /// Bring `fields` in step with the named members.
    pub fn sync_fields(&mut self) {
        self.fields = self.synced_fields();
    }
}

/// A trace: its header, its usable jobs and what was left out.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    /// The ';' comment lines, without the leading ';' and one space.
    pub header: Vec<String>,
    /// Usable jobs, in file order (sorted by submit time when generated).
    pub jobs: Vec<TraceJob>,
    /// Line numbers of malformed lines skipped (only with `skip_bad_lines`).
    pub skipped_bad_lines: Vec<u64>,
    /// (job_number, reason) for well-formed lines that cannot be simulated.
    pub unusable: Vec<(u64, String)>,
}

impl Workload {
    /// The value of a `Key: value` header line (first match, key compared
    /// without case), e.g. `"128"` for `MaxProcs` from `; MaxProcs: 128`.
    pub fn header_value(&self, key: &str) -> Option<&str> {
        self.header.iter().find_map(|line| {
            let (k, v) = split_header_key(line.trim_start())?;
            k.eq_ignore_ascii_case(key).then_some(v)
        })
    }

    /// The machine's processors from the `MaxProcs` header entry (checked when
    /// read: a whole number from 1 to [`MAX_PROCS`], maybe followed by words).
    pub fn max_procs(&self) -> Option<u32> {
        self.header_value("MaxProcs").and_then(|v| header_count(v).ok())
    }

    /// Replace the first `key:` header line, or append one.
    pub fn set_header_value(&mut self, key: &str, value: &str) {
        let line = format!("{key}: {value}");
        let found = self
            .header
            .iter()
            .position(|l| split_header_key(l.trim_start()).is_some_and(|(k, _)| k.eq_ignore_ascii_case(key)));
        match found {
            Some(i) => self.header[i] = line,
            None => self.header.push(line),
        }
    }
}

/// `Key: value` with a key of letters, digits and underscores.
fn split_header_key(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let mut chars = key.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some((key, value.trim()))
}

/// The count a `MaxProcs` or `MaxNodes` entry holds: its first word, a whole
/// number from 1 to [`MAX_PROCS`] (archive headers may add words after it).
fn header_count(value: &str) -> Result<u32, String> {
    let word = value.split_ascii_whitespace().next().unwrap_or("");
    match word.parse::<u32>() {
        Ok(n) if (1..=MAX_PROCS).contains(&n) => Ok(n),
        _ => Err(format!("is '{}': it must be a whole number from 1 to {MAX_PROCS}", printable(value))),
    }
}

/// Refuse a header entry we interpret whose value makes no sense.
fn check_header_line(comment: &str) -> Result<(), String> {
    match split_header_key(comment.trim_start()) {
        Some((key, value)) if HEADER_COUNTS.iter().any(|k| k.eq_ignore_ascii_case(key)) => {
            header_count(value).map(drop).map_err(|e| format!("header entry {key} {e}"))
        }
        _ => Ok(()),
    }
}

/// `text` with control and invisible characters escaped (`\0`, `\t`,
/// `\u{feff}`), so that a message shows what is really there.
pub fn printable(text: &str) -> String {
    let invisible = |c: char| {
        c.is_control()
            || (c.is_whitespace() && c != ' ')
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c if invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A number for a message: exponent form when it is very large or small, so
/// that 1e308 is not 309 digits.
pub(crate) fn show(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e7).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// How to read a trace.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions {
    /// Skip malformed lines (recording their numbers) instead of failing.
    pub skip_bad_lines: bool,
}

/// Why a trace could not be read.
#[derive(Debug)]
pub enum SwfError {
    Io {
        path: String,
        source: io::Error,
    },
    Malformed {
        path: String,
        line: u64,
        message: String,
    },
    /// The file is no text (a program, an archive): `what` it looks like.
    NotText {
        path: String,
        what: &'static str,
    },
}

impl fmt::Display for SwfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwfError::Io { path, source } => write!(f, "{}: {source}", printable(path)),
            SwfError::Malformed { path, line, message } => {
                let path = printable(path);
                write!(f, "{path}:{line}: {message} (use --skip-bad-lines to skip malformed lines)")
            }
            SwfError::NotText { path, what } => {
                write!(f, "{}: this is {what}, not an SWF trace (plain text, gzip-compressed or not)", printable(path))
            }
        }
    }
}

impl std::error::Error for SwfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SwfError::Io { source, .. } => Some(source),
            SwfError::Malformed { .. } | SwfError::NotText { .. } => None,
        }
    }
}

/// Read a trace file, plain or gzip-compressed.
pub fn read_path(path: &Path, opts: ReadOptions) -> Result<Workload, SwfError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|source| SwfError::Io { path: name.clone(), source })?;
    read_any(BufReader::new(file), &name, opts)
}

/// Read a trace, plain or gzip-compressed. Compression is recognised by the
/// gzip magic bytes, since archive files are often renamed.
pub fn read_any(mut reader: impl BufRead, source_name: &str, opts: ReadOptions) -> Result<Workload, SwfError> {
    let head = reader.fill_buf().map_err(|source| SwfError::Io { path: source_name.to_string(), source })?;
    if head.starts_with(&[0x1f, 0x8b]) {
        read_from(BufReader::new(MultiGzDecoder::new(reader)), source_name, opts)
    } else {
        read_from(reader, source_name, opts)
    }
}

/// Read a plain-text trace. `source_name` is used in error messages.
pub fn read_from(mut reader: impl BufRead, source_name: &str, opts: ReadOptions) -> Result<Workload, SwfError> {
    let io_error = |source| SwfError::Io { path: source_name.to_string(), source };
    let head = reader.fill_buf().map_err(io_error)?;
    if let Some(what) = binary_kind(&head[..head.len().min(BINARY_SNIFF_BYTES)]) {
        return Err(SwfError::NotText { path: source_name.to_string(), what });
    }
    let mut workload = Workload::default();
    let mut seen = Seen::default();
    let mut buf = Vec::new();
    let mut line_no: u64 = 0;
    while let Some(line) = next_line(&mut reader, &mut buf, MAX_LINE_BYTES).map_err(io_error)? {
        line_no += 1;
        let outcome = if line == Line::TooLong {
            Err(format!("line longer than {MAX_LINE_BYTES} bytes"))
        } else {
            let bytes = if line_no == 1 { buf.strip_prefix(UTF8_BOM).unwrap_or(&buf) } else { &buf };
            read_line(bytes, line_no, &mut workload, &mut seen)
        };
        match outcome {
            Ok(()) => {}
            Err(_) if opts.skip_bad_lines => workload.skipped_bad_lines.push(line_no),
            Err(message) => return Err(SwfError::Malformed { path: source_name.to_string(), line: line_no, message }),
        }
    }
    Ok(workload)
}

const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// How much of a file's start is looked at for signs of a binary file.
const BINARY_SNIFF_BYTES: usize = 4096;

/// What a file that is no text at its start looks like (a program, an archive, a first line with NUL bytes), so
/// that it is named as such rather than its first line's fields reported as numbers that do not parse.
pub(crate) fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const KNOWN: [(&[u8], &str); 6] = [
        (b"\x7fELF", "an ELF program"),
        (b"PK\x03\x04", "a zip archive"),
        (b"\xfd7zXZ\x00", "an xz archive"),
        (b"BZh9", "a bzip2 archive"),
        (b"\x28\xb5\x2f\xfd", "a zstd archive"),
        (b"%PDF-", "a PDF document"),
    ];
    let what = KNOWN.iter().find(|(magic, _)| head.starts_with(magic)).map(|(_, what)| *what);
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or(head);
    what.or_else(|| first_line.contains(&0).then_some("a binary file (its first line holds NUL bytes)"))
}

/// What [`next_line`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// In the buffer, with its newline if it had one.
    Read,
    /// Longer than the bound: skipped to its end, the buffer holding its start.
    TooLong,
}

/// Read the next line into `buf` (cleared first), holding at most `max_bytes` of it in memory; `None` at the end.
pub(crate) fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max_bytes: usize) -> io::Result<Option<Line>> {
    buf.clear();
    let n = reader.by_ref().take(max_bytes as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > max_bytes && buf.last() != Some(&b'\n') {
        discard_rest_of_line(reader)?;
        return Ok(Some(Line::TooLong));
    }
    Ok(Some(Line::Read))
}

/// Skip to the next line without keeping what is read.
fn discard_rest_of_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let len = chunk.len();
                reader.consume(len);
            }
        }
    }
}

/// What the lines read so far hold that bounds the next ones.
#[derive(Default)]
struct Seen {
    /// Where each job number was first seen, to refuse a second use.
    first_line_of_job: BTreeMap<u64, u64>,
    header_bytes: usize,
    /// The latest submit time of a job so far, and its line: SWF lists jobs in order of submission.
    latest_submit: Option<(f64, u64)>,
}

/// Add one line (a comment, a job or nothing) to `workload`, or say why it is malformed.
fn read_line(bytes: &[u8], line_no: u64, workload: &mut Workload, seen: &mut Seen) -> Result<(), String> {
    // Lossy: a stray Latin-1 byte in a comment must not stop a read; in a
    // job line it makes a field fail to parse, which is reported.
    let text = String::from_utf8_lossy(bytes);
    let line = text.trim();
    if line.is_empty() {
        return Ok(());
    }
    if let Some(comment) = line.strip_prefix(';') {
        let comment = comment.strip_prefix(' ').unwrap_or(comment);
        check_header_line(comment)?;
        seen.header_bytes += comment.len();
        if seen.header_bytes > MAX_HEADER_BYTES {
            return Err(format!("the header passes {MAX_HEADER_BYTES} bytes (`;` lines)"));
        }
        workload.header.push(comment.to_string());
        return Ok(());
    }
    let parsed = parse_job_line(line, line_no)?;
    let job_number = match &parsed {
        Parsed::Job(job) => job.job_number,
        Parsed::Unusable(job_number, _) => *job_number,
    };
    match seen.first_line_of_job.entry(job_number) {
        Entry::Occupied(first) => {
            return Err(format!(
                "field 1 (job number) {job_number} is the number of the job on line {} too",
                first.get()
            ))
        }
        Entry::Vacant(slot) => slot.insert(line_no),
    };
    if let Parsed::Job(job) = &parsed {
        if let Some((latest_s, latest_line)) = seen.latest_submit.filter(|(latest_s, _)| job.submit_s < *latest_s) {
            return Err(format!(
                "field 2 (submit time) {} is before {latest_s} on line {latest_line}: SWF lists jobs in order of \
                 submission (sort the file by field 2)",
                job.submit_s
            ));
        }
        seen.latest_submit = Some((job.submit_s, line_no));
    }
    match parsed {
        Parsed::Job(job) => workload.jobs.push(job),
        Parsed::Unusable(job_number, reason) => workload.unusable.push((job_number, reason)),
    }
    Ok(())
}

enum Parsed {
    Job(TraceJob),
    Unusable(u64, String),
}

fn parse_job_line(line: &str, line_no: u64) -> Result<Parsed, String> {
    let mut fields = [0.0; FIELD_COUNT];
    let mut count = 0;
    for (i, token) in line.split_ascii_whitespace().enumerate() {
        if i < FIELD_COUNT {
            fields[i] = parse_field(token, i)?;
        }
        count = i + 1;
    }
    if count != FIELD_COUNT {
        return Err(format!("expected {FIELD_COUNT} fields, found {count}"));
    }
    let procs_field = if fields[F_ALLOC] == -1.0 { F_REQ_PROCS } else { F_ALLOC };
    for (i, &value) in fields.iter().enumerate() {
        // The count the job is sized by may be fractional: the job is then unusable, not malformed.
        let whole_needed = i != procs_field;
        field_problem(FIELD_KINDS[i], value, whole_needed)
            .map_err(|problem| format!("field {} ({}) {problem}", i + 1, FIELD_NAMES[i]))?;
    }
    if fields[F_JOB] < 0.0 {
        return Err("field 1 (job number) is -1: job numbers must be known".to_string());
    }
    let job_number = fields[F_JOB] as u64;
    let unusable = |reason: String| Ok(Parsed::Unusable(job_number, reason));

    let procs_raw = fields[procs_field];
    if fields[F_SUBMIT] == -1.0 {
        return unusable("submit time unknown".to_string());
    }
    if fields[F_RUN] == -1.0 {
        return unusable("run time unknown".to_string());
    }
    if fields[F_RUN] <= 0.0 {
        return unusable(format!("run time is {}", show(fields[F_RUN])));
    }
    if procs_raw == -1.0 {
        return unusable("processor count unknown (allocated and requested)".to_string());
    }
    if procs_raw <= 0.0 {
        return unusable(format!("{} is {}", FIELD_NAMES[procs_field], show(procs_raw)));
    }
    if procs_raw.fract() != 0.0 {
        return unusable(format!("{} is {}: not a whole number of processors", FIELD_NAMES[procs_field], procs_raw));
    }
    Ok(Parsed::Job(TraceJob {
        job_number,
        submit_s: fields[F_SUBMIT],
        wait_s: fields[F_WAIT],
        run_s: fields[F_RUN],
        procs: procs_raw as u32,
        queue: fields[F_QUEUE] as i64,
        source_line: line_no,
        fields,
    }))
}

/// Why `value` cannot be in a field of `kind` (what follows the field's name in the message); `whole_needed`: a
/// fractional value is malformed even where the kind is whole by nature (false only for the processor count the job
/// is sized by). Order: too large, then negative, then not whole, so the message names the grossest fault.
fn field_problem(kind: FieldKind, value: f64, whole_needed: bool) -> Result<(), String> {
    if value == -1.0 {
        return Ok(());
    }
    let shown = show(value);
    let beyond = match kind {
        FieldKind::Time => {
            (value.abs() > MAX_TIME_S).then(|| format!("{shown} s is beyond the {} s we accept", show(MAX_TIME_S)))
        }
        FieldKind::Processors => {
            (value > MAX_PROCS as f64).then(|| format!("{shown} is beyond the {MAX_PROCS} processors we accept"))
        }
        FieldKind::MemoryKb => (value.abs() > MAX_MEMORY_KB)
            .then(|| format!("{shown} KB is beyond the {} KB we accept", show(MAX_MEMORY_KB))),
        FieldKind::Status => None,
        FieldKind::Id => {
            (value.abs() > MAX_ID as f64).then(|| format!("{shown} is beyond {MAX_ID}, the largest id we accept"))
        }
    };
    if let Some(beyond) = beyond {
        return Err(beyond);
    }
    if value < 0.0 {
        return Err(format!("is {shown}: negative values other than -1 are not allowed"));
    }
    let whole_by_nature = matches!(kind, FieldKind::Processors | FieldKind::Status | FieldKind::Id);
    if whole_by_nature && whole_needed && value.fract() != 0.0 {
        return Err(format!("is {shown}: it must be a whole number"));
    }
    if kind == FieldKind::Status && value > MAX_STATUS {
        return Err(format!("is {shown}: the SWF statuses are 0 to 5, or -1 for unknown"));
    }
    Ok(())
}

fn parse_field(token: &str, index: usize) -> Result<f64, String> {
    let describe = || format!("field {} ({})", index + 1, FIELD_NAMES[index]);
    match token.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(_) => Err(format!("{} is '{}': not a finite number", describe(), printable(token))),
        Err(_) => Err(format!("{} is '{}': not a number", describe(), printable(token))),
    }
}

/// Write a trace; gzip-compressed if the path ends in `.gz`.
pub fn write_path(path: &Path, workload: &Workload) -> io::Result<()> {
    write_file(&File::create(path)?, is_gzip_path(path), workload)
}

/// Whether a trace at `path` is written gzip-compressed: its name ends in `.gz`.
pub fn is_gzip_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// Write a trace into an open file, gzip-compressed if `gz`.
pub fn write_file(file: &File, gz: bool, workload: &Workload) -> io::Result<()> {
    let file = BufWriter::new(file);
    if gz {
        let mut encoder = GzEncoder::new(file, Compression::default());
        write_to(&mut encoder, workload)?;
        encoder.finish()?.flush()
    } else {
        let mut file = file;
        write_to(&mut file, workload)?;
        file.flush()
    }
}

/// Keys the writer produces itself (stale copies from the input are dropped).
const WRITER_KEYS: [&str; 4] = ["Version", "MaxJobs", "MaxRecords", "MaxProcs"];

/// Write a trace as plain text.
///
/// The header is `Version: 2.2`, the `Computer` and `Note` entries of the
/// workload's header, `MaxJobs`/`MaxRecords` (the jobs written), `MaxProcs`
/// (the header's, else the widest job), then the rest of the header in its
/// order. A header entry is a `Key: value` line with the indented lines that
/// continue it, so multi-line notes stay whole.
pub fn write_to(mut writer: impl Write, workload: &Workload) -> io::Result<()> {
    let groups = header_groups(&workload.header);
    let key_is = |g: &HeaderGroup, k: &str| g.key.as_deref().is_some_and(|gk| gk.eq_ignore_ascii_case(k));
    let write_group = |w: &mut dyn Write, g: &HeaderGroup| -> io::Result<()> {
        for line in &g.lines {
            writeln!(w, "; {line}")?;
        }
        Ok(())
    };

    writeln!(writer, "; Version: 2.2")?;
    for key in ["Computer", "Note"] {
        for g in groups.iter().filter(|g| key_is(g, key)) {
            write_group(&mut writer, g)?;
        }
    }
    writeln!(writer, "; MaxJobs: {}", workload.jobs.len())?;
    writeln!(writer, "; MaxRecords: {}", workload.jobs.len())?;
    match workload.header_value("MaxProcs") {
        Some(v) => writeln!(writer, "; MaxProcs: {v}")?,
        None => {
            if let Some(max) = workload.jobs.iter().map(|j| j.procs).max() {
                writeln!(writer, "; MaxProcs: {max}")?;
            }
        }
    }
    let carried_elsewhere =
        |g: &HeaderGroup| ["Computer", "Note"].iter().chain(WRITER_KEYS.iter()).any(|k| key_is(g, k));
    for g in groups.iter().filter(|g| !carried_elsewhere(g)) {
        write_group(&mut writer, g)?;
    }

    let mut line = String::with_capacity(128);
    for job in &workload.jobs {
        line.clear();
        for (i, x) in job.synced_fields().iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            push_field(&mut line, *x);
        }
        line.push('\n');
        writer.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// Shortest decimal that reads back to the same f64; whole numbers get no
/// decimals. (`Display` for f64 never uses exponents.)
fn push_field(out: &mut String, x: f64) {
    use std::fmt::Write as _;
    debug_assert!(x.is_finite());
    let x = if x == 0.0 { 0.0 } else { x }; // no "-0"
    let _ = write!(out, "{x}");
}

struct HeaderGroup<'a> {
    key: Option<String>,
    lines: Vec<&'a str>,
}

/// Split header lines into entries: an unindented line opens one (keyed if
/// it reads `Key: value`), and indented lines continue the entry before them.
fn header_groups(header: &[String]) -> Vec<HeaderGroup<'_>> {
    let mut groups: Vec<HeaderGroup<'_>> = Vec::new();
    for line in header {
        if line.starts_with(char::is_whitespace) {
            if let Some(last) = groups.last_mut() {
                last.lines.push(line);
                continue;
            }
        }
        let key = split_header_key(line).map(|(k, _)| k.to_string());
        groups.push(HeaderGroup { key, lines: vec![line] });
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_str(text: &str, opts: ReadOptions) -> Result<Workload, SwfError> {
        read_from(text.as_bytes(), "trace.swf", opts)
    }

    const GOOD: &str = "1 0 5 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1";

    #[test]
    fn malformed_line_reports_its_exact_line_number() {
        // Header, a blank line, good jobs; the bad line is line 7.
        let text = format!(
            "; Version: 2.2\n; MaxProcs: 8\n\n{}\n{}\n   \n1 2 3 4 5 6 7 8 9 10 11 12\n{}\n",
            job(1),
            job(2),
            job(3)
        );
        let err = read_str(&text, ReadOptions::default()).unwrap_err();
        match &err {
            SwfError::Malformed { line, .. } => assert_eq!(*line, 7),
            other => panic!("expected Malformed, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "trace.swf:7: expected 18 fields, found 12 (use --skip-bad-lines to skip malformed lines)"
        );
    }

    #[test]
    fn each_kind_of_malformed_field_is_rejected() {
        let cases = [
            ("1 0 5 abc 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1", "field 4 (run time) is 'abc': not a number"),
            ("1 0 5 NaN 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1", "not a finite number"),
            ("1 0 5 100 inf -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1", "not a finite number"),
            ("1 0 5 -2 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1", "negative values other than -1"),
            ("1 -5 5 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1", "field 2 (submit time)"),
            ("1.5 0 5 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1", "whole number"),
            ("1 0 5 100 4 -1 -1 4 200 -1 1 3 1 -1 0.5 -1 -1 -1", "field 15 (queue)"),
            ("1 0 5 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1 7", "found 19"),
        ];
        for (line, want) in cases {
            let err = read_str(&format!("; x\n{line}\n"), ReadOptions::default()).unwrap_err();
            let msg = err.to_string();
            assert!(msg.starts_with("trace.swf:2: "), "{msg}");
            assert!(msg.contains(want), "{line:?}: {msg:?} lacks {want:?}");
        }
    }

    /// `GOOD` with field `field` (1-based) replaced by `value`.
    fn good_with(field: usize, value: &str) -> String {
        let mut fields: Vec<&str> = GOOD.split(' ').collect();
        fields[field - 1] = value;
        fields.join(" ")
    }

    /// `GOOD` with each (field, value) of `changes` (fields 1-based).
    fn good_with_all(changes: &[(usize, &str)]) -> String {
        let mut fields: Vec<&str> = GOOD.split(' ').collect();
        for &(field, value) in changes {
            fields[field - 1] = value;
        }
        fields.join(" ")
    }

    /// `GOOD` numbered `number`.
    fn job(number: u64) -> String {
        good_with(1, &number.to_string())
    }

    fn error_of(text: &str) -> String {
        read_str(text, ReadOptions::default()).unwrap_err().to_string()
    }

    #[test]
    fn times_beyond_the_limit_are_errors_naming_line_and_field() {
        let cases = [
            (4, "1e15", "field 4 (run time) 1e15 s is beyond the 1e9 s we accept"),
            (4, "1e308", "field 4 (run time) 1e308 s is beyond the 1e9 s we accept"),
            (2, "1e308", "field 2 (submit time) 1e308 s is beyond"),
            (3, "-1e12", "field 3 (wait time) -1e12 s is beyond"),
            (5, "1e12", "field 5 (allocated processors) 1e12 is beyond the 1000000000 processors we accept"),
            (8, "4294967296", "field 8 (requested processors) 4.294967296e9 is beyond"),
        ];
        for (field, value, want) in cases {
            let msg = error_of(&format!("{GOOD}\n{}\n", good_with(field, value)));
            assert!(msg.starts_with(&format!("trace.swf:2: {want}")), "{msg}");
        }
        let w = read_str(&good_with(4, "1e9"), ReadOptions::default()).unwrap();
        assert_eq!(w.jobs[0].run_s, MAX_TIME_S, "the limit itself is accepted");
    }

    /// Issue 39 item 16: numeric garbage in fields the simulator never reads (requested time 1e300, uid 2^63) was
    /// carried without a word. Every field is held to what its meaning in the SWF definition allows.
    #[test]
    fn every_field_is_held_to_the_bound_its_meaning_allows() {
        let cases = [
            (9, "1e300", "field 9 (requested time) 1e300 s is beyond the 1e9 s we accept"),
            (6, "1e12", "field 6 (average CPU time) 1e12 s is beyond the 1e9 s we accept"),
            (18, "2e9", "field 18 (think time) 2e9 s is beyond the 1e9 s we accept"),
            (18, "-5", "field 18 (think time) is -5: negative values other than -1 are not allowed"),
            (3, "-2", "field 3 (wait time) is -2: negative values other than -1 are not allowed"),
            (
                12,
                "9223372036854775808",
                "field 12 (user) 9.223372036854776e18 is beyond 4294967295, the largest id we accept",
            ),
            (1, "4294967296", "field 1 (job number) 4.294967296e9 is beyond 4294967295, the largest id we accept"),
            (14, "4294967296", "field 14 (executable) 4.294967296e9 is beyond 4294967295, the largest id we accept"),
            (17, "1e10", "field 17 (preceding job) 1e10 is beyond 4294967295, the largest id we accept"),
            (13, "1.5", "field 13 (group) is 1.5: it must be a whole number"),
            (15, "-3", "field 15 (queue) is -3: negative values other than -1 are not allowed"),
            (16, "-2", "field 16 (partition) is -2: negative values other than -1 are not allowed"),
            (7, "1e300", "field 7 (used memory) 1e300 KB is beyond the 1e13 KB we accept"),
            (10, "-7", "field 10 (requested memory) is -7: negative values other than -1 are not allowed"),
            (11, "9", "field 11 (status) is 9: the SWF statuses are 0 to 5, or -1 for unknown"),
            (11, "1.5", "field 11 (status) is 1.5: it must be a whole number"),
            // Allocated processors (4) size the job; the requested count is carried, and must be whole too.
            (8, "2.5", "field 8 (requested processors) is 2.5: it must be a whole number"),
        ];
        for (field, value, want) in cases {
            let text = format!("{GOOD}\n{}\n", good_with_all(&[(1, "2"), (field, value)]));
            let msg = error_of(&text);
            assert!(msg.starts_with(&format!("trace.swf:2: {want} (use --skip-bad-lines")), "{msg}");
            let w = read_str(&text, ReadOptions { skip_bad_lines: true }).unwrap();
            assert_eq!(w.skipped_bad_lines, vec![2], "field {field} = {value}");
        }
        // Each bound itself, -1 (unknown) in every field but the job number, and fractions where they mean something.
        let unknown_all: Vec<(usize, &str)> = (2..=FIELD_COUNT).map(|field| (field, "-1")).collect();
        let at_the_bounds = [
            good_with_all(&[(1, "2"), (9, "1e9")]),
            good_with_all(&[(1, "3"), (12, "4294967295"), (13, "0"), (17, "4294967295")]),
            good_with_all(&[(1, "4294967295")]),
            good_with_all(&[(1, "5"), (7, "1e13"), (10, "2048.5")]),
            good_with_all(&[(1, "6"), (11, "5"), (6, "12.25"), (18, "1e9")]),
            good_with_all(&[&[(1, "7")][..], &unknown_all].concat()),
        ];
        let w = read_str(&at_the_bounds.join("\n"), ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((w.jobs.len(), w.unusable.len()), (at_the_bounds.len() - 1, 1));
    }

    #[test]
    fn a_job_number_used_twice_is_an_error() {
        let text = format!("{GOOD}\n{}\n{GOOD}\n", good_with(1, "2"));
        assert_eq!(
            error_of(&text),
            "trace.swf:3: field 1 (job number) 1 is the number of the job on line 1 too \
             (use --skip-bad-lines to skip malformed lines)"
        );
        // Unusable jobs hold their number too.
        let text = format!("{}\n{GOOD}\n", good_with(4, "-1"));
        assert!(error_of(&text).starts_with("trace.swf:2: field 1 (job number) 1 is the number of the job on line 1"));
        let thirty = vec![GOOD; 30].join("\n");
        let w = read_str(&thirty, ReadOptions { skip_bad_lines: true }).unwrap();
        assert_eq!((w.jobs.len(), w.skipped_bad_lines.len()), (1, 29));
    }

    #[test]
    fn processor_counts_of_the_header_must_be_whole_and_positive() {
        for (entry, shown) in [
            ("MaxProcs: -5", "MaxProcs is '-5'"),
            ("MaxNodes: 0", "MaxNodes is '0'"),
            ("maxprocs: many", "maxprocs is 'many'"),
            ("MaxProcs: 1e308", "MaxProcs is '1e308'"),
            ("MaxNodes:", "MaxNodes is ''"),
        ] {
            let msg = error_of(&format!("; Version: 2.2\n; {entry}\n{GOOD}\n"));
            let want = format!("trace.swf:2: header entry {shown}: it must be a whole number from 1 to 1000000000");
            assert!(msg.starts_with(&want), "{msg}");
        }
        let w = read_str(&format!("; MaxProcs: 128 (4 per node)\n; MaxNodes: 32\n{GOOD}\n"), ReadOptions::default())
            .unwrap();
        assert_eq!(w.max_procs(), Some(128));
        let w = read_str(&format!(";MaxProcs: -5\n{GOOD}\n"), ReadOptions { skip_bad_lines: true }).unwrap();
        assert_eq!((w.max_procs(), w.skipped_bad_lines.clone()), (None, vec![1]));
    }

    #[test]
    fn a_binary_file_is_named_as_such() {
        for (head, what) in [
            (&b"\x7fELF\x02\x01\x01\x00\x00"[..], "this is an ELF program, not an SWF trace"),
            (b"PK\x03\x04\x14\x00", "this is a zip archive"),
            (b"\xfd7zXZ\x00\x00", "this is an xz archive"),
            (b"1 0 5\x00\x00 100", "this is a binary file (its first line holds NUL bytes)"),
        ] {
            let msg = read_from(head, "trace.swf", ReadOptions::default()).unwrap_err().to_string();
            assert!(msg.starts_with(&format!("trace.swf: {what}")), "{msg}");
        }
    }

    #[test]
    fn jobs_out_of_submission_order_are_refused_naming_both_lines() {
        let text = format!("{}\n{}\n{}\n", job(1), good_with_all(&[(1, "2"), (2, "50")]), good_with(1, "3"));
        let msg = error_of(&text);
        let want = "trace.swf:3: field 2 (submit time) 0 is before 50 on line 2: SWF lists jobs in order of submission";
        assert!(msg.starts_with(want), "{msg}");
        // Equal submit times are in order.
        assert_eq!(read_str(&format!("{}\n{}\n", job(1), job(2)), ReadOptions::default()).unwrap().jobs.len(), 2);
    }

    #[test]
    fn messages_escape_control_characters_and_a_leading_bom_is_skipped() {
        let w = read_str(&format!("\u{feff}{GOOD}\n"), ReadOptions::default()).unwrap();
        assert_eq!(w.jobs.len(), 1, "a BOM before the first line is skipped");
        let cases = [
            (format!("{GOOD}\n\u{feff}{}\n", good_with(1, "2")), "field 1 (job number) is '\\u{feff}2': not a number"),
            (format!("{GOOD}\n{}\n", good_with(4, "100\0")), "field 4 (run time) is '100\\0': not a number"),
            (format!("{GOOD}\n{}\n", good_with(4, "1\u{1b}[2J")), "is '1\\u{1b}[2J': not a number"),
            (format!("{GOOD}\n{}\n", good_with(4, "1\u{a0}")), "is '1\\u{a0}': not a number"),
            (format!("{GOOD}\n; MaxProcs: \u{200b}8\n"), "MaxProcs is '\\u{200b}8'"),
        ];
        for (text, want) in cases {
            let msg = error_of(&text);
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            assert_eq!(printable(&msg), msg, "raw control characters in {msg:?}");
        }
        let err = read_from(format!("{GOOD}\n1 x").as_bytes(), "bad\nname\r.swf", ReadOptions::default()).unwrap_err();
        assert!(err.to_string().starts_with("bad\\nname\\r.swf:2: "), "{err}");
    }

    #[test]
    fn an_overlong_line_is_an_error_found_without_keeping_it() {
        let huge_line = || io::repeat(b'7').take(16 << 20);
        let middle = format!("\n{GOOD}\n");
        let trace = || huge_line().chain(middle.as_bytes()).chain(huge_line());
        let err = read_from(BufReader::new(trace()), "trace.swf", ReadOptions::default()).unwrap_err();
        assert!(err.to_string().starts_with("trace.swf:1: line longer than 65536 bytes"), "{err}");
        let w = read_from(BufReader::new(trace()), "trace.swf", ReadOptions { skip_bad_lines: true }).unwrap();
        assert_eq!((w.jobs.len(), w.skipped_bad_lines.clone()), (1, vec![1, 3]));
        // The same through gzip.
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        io::copy(&mut trace(), &mut gz).unwrap();
        let err = read_any(&gz.finish().unwrap()[..], "trace.swf.gz", ReadOptions::default()).unwrap_err();
        assert!(err.to_string().starts_with("trace.swf.gz:1: line longer than 65536 bytes"), "{err}");
        // A line of exactly the limit is read.
        let padded = format!("{GOOD}{}\n", " ".repeat(MAX_LINE_BYTES - GOOD.len()));
        assert_eq!(read_str(&padded, ReadOptions::default()).unwrap().jobs.len(), 1);
    }

    #[test]
    fn skip_bad_lines_counts_what_it_skipped() {
        let text = format!(
            "{}\nnot a job\n{}\n1 2 3\n\n; comment\n{}\n9 0 5 nan 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1\n",
            job(1),
            job(2),
            job(3)
        );
        let w = read_str(&text, ReadOptions { skip_bad_lines: true }).unwrap();
        assert_eq!(w.skipped_bad_lines, vec![2, 4, 8]);
        assert_eq!(w.jobs.len(), 3);
        assert_eq!(w.jobs.iter().map(|j| j.source_line).collect::<Vec<_>>(), vec![1, 3, 7]);
        assert!(read_str(&text, ReadOptions::default()).is_err());
    }

    #[test]
    fn unusable_jobs_are_listed_with_reasons() {
        let text = "\
10 0 5 0 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1
11 0 5 -1 4 -1 -1 4 200 -1 0 3 1 -1 1 -1 -1 -1
12 0 5 100 0 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1
13 0 5 100 -1 -1 -1 -1 200 -1 1 3 1 -1 1 -1 -1 -1
14 -1 5 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1
15 0 5 100 2.5 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1
16 0 5 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1
";
        let w = read_str(text, ReadOptions::default()).unwrap();
        assert_eq!(w.jobs.len(), 1);
        assert_eq!(w.jobs[0].job_number, 16);
        let numbers: Vec<u64> = w.unusable.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, vec![10, 11, 12, 13, 14, 15]);
        assert!(w.unusable[0].1.contains("run time is 0"), "{:?}", w.unusable[0]);
        assert!(w.unusable[1].1.contains("run time unknown"));
        assert!(w.unusable[2].1.contains("allocated processors is 0"));
        assert!(w.unusable[3].1.contains("processor count unknown"));
        assert!(w.unusable[4].1.contains("submit time unknown"));
        assert!(w.unusable[5].1.contains("2.5"));
    }

    #[test]
    fn requested_processors_are_used_when_allocated_is_unknown() {
        let text =
            "7 30 -1 50 -1 -1 -1 16 200 -1 1 3 1 -1 0 -1 -1 -1\n8 40 -1 50 8 -1 -1 16 200 -1 1 3 1 -1 0 -1 -1 -1\n";
        let w = read_str(text, ReadOptions::default()).unwrap();
        assert_eq!(w.jobs[0].procs, 16);
        assert!(w.jobs[0].procs_from_requested());
        assert_eq!(w.jobs[1].procs, 8, "allocated wins when known");
        assert!(!w.jobs[1].procs_from_requested());
        // Changing procs writes back to the field it came from.
        let mut job = w.jobs[0].clone();
        job.procs = 32;
        let f = job.synced_fields();
        assert_eq!((f[4], f[7]), (-1.0, 32.0));
    }

    #[test]
    fn a_header_past_its_bound_is_malformed() {
        let line = format!(";{}\n", "x".repeat(1000));
        let text = line.repeat(MAX_HEADER_BYTES / 1000 + 1);
        let err = read_from(text.as_bytes(), "t", ReadOptions::default()).unwrap_err().to_string();
        assert!(err.contains("header passes"), "{err}");
        let kept = read_from(line.repeat(10).as_bytes(), "t", ReadOptions::default()).unwrap();
        assert_eq!(kept.header.len(), 10);
    }

    #[test]
    fn header_value_finds_keys() {
        let text = ";   Version: 2.2\n; Computer: Cray T3D\n; MaxProcs: 256\n; Note: two\n;       lines\n; Information: http://example.org/\n";
        let w = read_str(text, ReadOptions::default()).unwrap();
        assert_eq!(w.header[1], "Computer: Cray T3D");
        assert_eq!(w.header_value("MaxProcs"), Some("256"));
        assert_eq!(w.header_value("maxprocs"), Some("256"));
        assert_eq!(w.header_value("Version"), Some("2.2"));
        assert_eq!(w.header_value("Information"), Some("http://example.org/"));
        assert_eq!(w.header_value("MaxNodes"), None);
        let mut w = w;
        w.set_header_value("MaxProcs", "128");
        w.set_header_value("MaxNodes", "64");
        assert_eq!(w.header_value("MaxProcs"), Some("128"));
        assert_eq!(w.header_value("MaxNodes"), Some("64"));
    }

    #[test]
    fn decimal_fields_and_crlf_load() {
        // Archive traces carry decimals in some fields and CRLF line ends.
        let text = "; Version: 2.2\r\n1 0 12 3600.5 64 3590.25 -1 64 7200 -1 1 12 3 -1 1 1 -1 -1\r\n2   15.0\t0 10 1 0.5 1024 1 60 -1 0 4 1 -1 0 1 -1 -1\r\n";
        let w = read_str(text, ReadOptions::default()).unwrap();
        assert_eq!(w.jobs.len(), 2);
        assert_eq!(w.jobs[0].run_s, 3600.5);
        assert_eq!(w.jobs[0].fields[5], 3590.25);
        assert_eq!(w.jobs[1].submit_s, 15.0);
        assert_eq!(w.header, vec!["Version: 2.2"]);
    }

    #[test]
    fn writer_orders_header_and_keeps_multiline_entries() {
        let w = Workload {
            header: vec![
                "free text first".into(),
                "Version: 2.1".into(),
                "Installation: somewhere".into(),
                "Note: first".into(),
                "      continued".into(),
                "MaxJobs: 999".into(),
                "Computer: Test box".into(),
                "MaxProcs: 64".into(),
            ],
            jobs: vec![TraceJob::new(1, 0.0, 10.0, 4, 1)],
            ..Default::default()
        };
        let mut out = Vec::new();
        write_to(&mut out, &w).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = "\
; Version: 2.2
; Computer: Test box
; Note: first
;       continued
; MaxJobs: 1
; MaxRecords: 1
; MaxProcs: 64
; free text first
; Installation: somewhere
1 0 -1 10 4 -1 -1 -1 -1 -1 1 -1 -1 -1 1 -1 -1 -1
";
        assert_eq!(text, want);
        // Writing what was read gives the same text again.
        let back = read_from(text.as_bytes(), "x", ReadOptions::default()).unwrap();
        let mut again = Vec::new();
        write_to(&mut again, &back).unwrap();
        assert_eq!(String::from_utf8(again).unwrap(), want);
    }
}
