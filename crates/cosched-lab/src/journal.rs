//! A study's finished runs, each kept as it ends, so that a study stopped
//! (Ctrl-C, a kill, a crash) resumes where it stopped and ends with the
//! files an uninterrupted run writes, byte for byte.
//!
//! The journal is a text file of JSON lines: a heading naming the study
//! (experiment, settings, cosched version), then one run's row per line,
//! each written whole and synced before the run counts as kept. A line cut
//! short by a crash can only be the last; it is left out on resume (that run
//! runs again). A run's row is a pure function of its spec, so a kept row is
//! the row the run would give again. The process that writes a journal holds
//! an exclusive lock on it: a second study on the same output waits for
//! nothing and is refused.

use crate::study::{Experiment, RunRow, RunSpec, StudySettings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const FORMAT: &str = "cosched study journal";
const FORMAT_VERSION: u32 = 2;
/// The largest journal read back (a full study's rows are a few MiB).
pub const MAX_JOURNAL_BYTES: u64 = 256 << 20;

#[derive(Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Heading {
    format: String,
    format_version: u32,
    cosched_version: String,
    /// The commit of the build that kept the rows: another build's runs might differ.
    cosched_build: String,
    experiment: Experiment,
    settings: StudySettings,
}

impl Heading {
    fn of(experiment: Experiment, settings: &StudySettings) -> Heading {
        Heading {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            cosched_version: env!("CARGO_PKG_VERSION").into(),
            cosched_build: crate::BUILD_COMMIT.into(),
            experiment,
            settings: settings.clone(),
        }
    }
}

/// Where finished runs are kept, and the rows kept by an earlier, interrupted run of the same study.
pub struct Journal {
    path: Option<PathBuf>,
    kept_by_label: BTreeMap<String, Vec<RunRow>>,
    file: Option<Mutex<Appender>>,
    /// The rows kept by this process, in the order they ended.
    kept_now: Mutex<Vec<RunRow>>,
    first_error: Mutex<Option<String>>,
}

/// The journal's file and the length of its complete lines: a failed write is cut back to it, and nothing more
/// is written after one (the rows after it run again on resume).
struct Appender {
    file: File,
    good_len: u64,
    failed: bool,
}

impl Appender {
    fn new(file: File, good_len: u64) -> Appender {
        Appender { file, good_len, failed: false }
    }

    /// One line, written whole and synced to the disk before it counts.
    fn append(&mut self, line: &str) -> std::io::Result<()> {
        if self.failed {
            return Err(std::io::Error::other("an earlier write failed"));
        }
        let bytes = format!("{line}\n");
        let written = self.file.write_all(bytes.as_bytes()).and_then(|_| self.file.sync_data());
        match written {
            Ok(()) => self.good_len += bytes.len() as u64,
            Err(_) => {
                self.failed = true;
                let _ = self.file.set_len(self.good_len);
            }
        }
        written
    }
}

/// Take the journal for this process alone.
fn lock(file: &File, path: &Path) -> Result<(), String> {
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => {
            format!("{}: another study is running with this journal (same --out); wait for it to end", path.display())
        }
        std::fs::TryLockError::Error(e) => format!("cannot lock {}: {e}", path.display()),
    })
}

/// Open `path` as a regular file of this user's that nobody else may write, not through a symbolic link (a FIFO
/// would block the read); one made is never writable by group or others. The journal sits beside the study's
/// output, perhaps in a shared folder: rows someone else could have written would be reported as results.
fn open_regular(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).mode(0o644).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(
            "another user owns it or may write it; a study's journal must be its own (if it is yours, `chmod go-w` it)",
        ));
    }
    Ok(file)
}

impl Journal {
    /// No journal: every run runs and nothing is kept (shards, tests, Python).
    pub fn none() -> Journal {
        Journal {
            path: None,
            kept_by_label: BTreeMap::new(),
            file: None,
            kept_now: Mutex::new(Vec::new()),
            first_error: Mutex::new(None),
        }
    }

    /// A new journal at `path` for this study; refused if a file is there (a study to resume, or to remove).
    pub fn create(path: &Path, experiment: Experiment, settings: &StudySettings) -> Result<Journal, String> {
        let mut options = OpenOptions::new();
        let file = open_regular(options.append(true).create_new(true), path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::Other {
                // Made here, but not as asked (a share that maps owners or fixes modes): not left behind to be
                // mistaken for an interrupted study.
                let _ = std::fs::remove_file(path);
                return format!(
                    "cannot keep a journal at {}: {e}; this file system does not keep the owner or mode a file is \
                     made with",
                    path.display()
                );
            }
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return format!("cannot create {}: {e}", path.display());
            }
            // Still locked: its study is running; else it was interrupted.
            let running = open_regular(OpenOptions::new().read(true), path).map(|f| lock(&f, path));
            match running {
                Ok(Err(busy)) => busy,
                _ => format!(
                    "{}: an interrupted study's runs are kept there: add --resume to finish it, or remove the file",
                    path.display()
                ),
            }
        })?;
        lock(&file, path)?;
        let heading = serde_json::to_string(&Heading::of(experiment, settings)).expect("plain data serializes");
        let mut appender = Appender::new(file, 0);
        appender.append(&heading).map_err(|e| format!("{}: {e}", path.display()))?;
        // The new name synced too: a power loss must not lose the file with the runs it then keeps.
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            File::open(folder).and_then(|f| f.sync_all()).map_err(|e| format!("{}: {e}", folder.display()))?;
        }
        Ok(Journal { path: Some(path.into()), file: Some(Mutex::new(appender)), ..Journal::none() })
    }

    /// The journal at `path` of an interrupted run of this very study (same experiment, settings and cosched
    /// version), its kept rows read back, open to keep the rest.
    pub fn resume(path: &Path, experiment: Experiment, settings: &StudySettings) -> Result<Journal, String> {
        let in_file = |e: String| format!("{}: {e}", path.display());
        let mut options = OpenOptions::new();
        let mut file = open_regular(options.read(true).append(true), path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                in_file("no interrupted study to resume (its runs would be kept in this file)".into())
            } else {
                in_file(e.to_string())
            }
        })?;
        lock(&file, path)?;
        let mut bytes = Vec::new();
        (&mut file).take(MAX_JOURNAL_BYTES + 1).read_to_end(&mut bytes).map_err(|e| in_file(e.to_string()))?;
        if bytes.len() as u64 > MAX_JOURNAL_BYTES {
            return Err(in_file(format!("larger than the {} MiB a journal may be", MAX_JOURNAL_BYTES >> 20)));
        }
        // A line cut short (a crash, a full disk) goes, wherever in a character it was cut: the next row starts
        // where it began.
        let complete_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |end| end + 1);
        bytes.truncate(complete_len);
        let text = String::from_utf8(bytes).map_err(|_| in_file("not UTF-8 text".into()))?;
        let rows = read_rows(&text, &Heading::of(experiment, settings)).map_err(in_file)?;
        let mut kept_by_label: BTreeMap<String, Vec<RunRow>> = BTreeMap::new();
        for row in rows {
            kept_by_label.entry(row.label()).or_default().push(row);
        }
        file.set_len(complete_len as u64).map_err(|e| in_file(e.to_string()))?;
        let appender = Appender::new(file, complete_len as u64);
        Ok(Journal { path: Some(path.into()), kept_by_label, file: Some(Mutex::new(appender)), ..Journal::none() })
    }

    /// The kept row that is the outcome of `spec`, if any.
    pub fn kept(&self, spec: &RunSpec) -> Option<RunRow> {
        self.kept_by_label.get(&spec.label())?.iter().find(|row| row.is_of(spec)).cloned()
    }

    /// How many rows an earlier run kept.
    pub fn kept_before(&self) -> usize {
        self.kept_by_label.values().map(Vec::len).sum()
    }

    /// How many rows the journal holds: kept before and since.
    pub fn kept_count(&self) -> usize {
        self.kept_before() + self.kept_now.lock().expect("no panics while holding the lock").len()
    }

    /// Every row the journal holds, kept before and since (in no particular order).
    pub fn rows(&self) -> Vec<RunRow> {
        let now = self.kept_now.lock().expect("no panics while holding the lock");
        self.kept_by_label.values().flatten().chain(now.iter()).cloned().collect()
    }

    /// Keep a finished run's row. A failure is kept too and given by [`Journal::check`]: the study goes on,
    /// and stops with the error when its batch ends.
    pub fn keep(&self, row: &RunRow) {
        let Some(file) = &self.file else { return };
        let line = serde_json::to_string(row).expect("plain data serializes");
        let written = file.lock().expect("no panics while holding the lock").append(&line);
        if written.is_ok() {
            self.kept_now.lock().expect("no panics while holding the lock").push(row.clone());
        }
        if let Err(e) = written {
            let path = self.path.as_deref().map_or_else(String::new, |p| p.display().to_string());
            self.first_error
                .lock()
                .expect("no panics while holding the lock")
                .get_or_insert(format!("cannot keep a finished run in {path}: {e}"));
        }
    }

    /// The first failure to keep a row, if any.
    pub fn check(&self) -> Result<(), String> {
        match self.first_error.lock().expect("no panics while holding the lock").clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The study ended and its files are written, or it kept nothing: the journal goes.
    pub fn finish(self) -> Result<(), String> {
        match &self.path {
            Some(path) => match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("cannot remove {}: {e}", path.display()))
                }
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }
}

/// The rows of a journal whose heading must be `expected`; a last line cut short is left out.
fn read_rows(text: &str, expected: &Heading) -> Result<Vec<RunRow>, String> {
    let mut lines = text.split_inclusive('\n').enumerate();
    let (_, first) = lines.next().ok_or("empty: not a study journal")?;
    let heading: Heading = serde_json::from_str(first).map_err(|e| format!("line 1: not a study journal: {e}"))?;
    if heading.format != FORMAT || heading.format_version != FORMAT_VERSION {
        return Err(format!("line 1: not a version {FORMAT_VERSION} study journal"));
    }
    if heading.cosched_version != expected.cosched_version {
        return Err(format!(
            "kept by cosched {}; this is {} (its runs might differ): remove the file to start again",
            heading.cosched_version, expected.cosched_version
        ));
    }
    if heading.cosched_build != expected.cosched_build {
        return Err(format!(
            "kept by the build of commit {}; this is {} (its runs might differ): rebuild that commit to resume, or \
             remove the file to start again",
            crate::short_commit(&heading.cosched_build),
            crate::short_commit(&expected.cosched_build)
        ));
    }
    if heading != *expected {
        return Err(format!(
            "kept for another study ({} with other settings): resume with the same flags, or remove the file",
            heading.experiment.name()
        ));
    }
    let mut rows = Vec::new();
    for (index, line) in lines {
        if !line.ends_with('\n') {
            break;
        }
        rows.push(serde_json::from_str(line).map_err(|e| format!("line {}: not a run's row: {e}", index + 1))?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchWatch, Unwatched};
    use crate::study::{in_study_order, run_study};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn settings() -> StudySettings {
        StudySettings {
            jobs_per_run: 20,
            runtime_scale: 0.0005,
            schemes: vec!["GS".parse().unwrap(), "Local".parse().unwrap()],
            replications: 1,
            capacity_jobs: 20,
            loads: Some(vec![1.6, 0.3, 0.8]),
            ..StudySettings::default()
        }
    }

    /// Counts the runs that start.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl BatchWatch for Counting {
        type Run = Unwatched;
        fn batch_started(&self, _: usize) {}
        fn run_started(&self, _: usize, _: &str) -> Unwatched {
            self.0.fetch_add(1, Ordering::Relaxed);
            Unwatched
        }
    }

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("cosched-journal-").tempdir().unwrap()
    }

    /// Any of a study's finished runs, kept in any order, are laid out as the whole study lists them: E1's climb,
    /// E2's grid and E3's two steps at each scheme's own capacity.
    #[test]
    fn an_interrupted_studys_rows_take_the_whole_studys_order() {
        let e3_settings = StudySettings { e3_load_fraction: 0.8, loads: None, ..settings() };
        for (experiment, settings) in
            [(Experiment::E1, settings()), (Experiment::E2, settings()), (Experiment::E3, e3_settings)]
        {
            let dir = scratch();
            let journal = Journal::create(&dir.path().join("j"), experiment, &settings).unwrap();
            let whole = run_study(experiment, &settings, &Unwatched, &journal).unwrap();
            let mut kept = journal.rows();
            assert_eq!(kept.len(), whole.len(), "{experiment:?}: every run kept once");
            // Subsets drawn by a fixed linear congruential sequence, each kept in a scrambled order.
            let mut state = 0x2545_f491_u64;
            for _ in 0..8 {
                let mut draw = || {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    state >> 33
                };
                // (E3's second step runs only once every capacity is kept.)
                let first_step = |r: &RunRow| experiment == Experiment::E3 && r.group == "capacity";
                let chosen: Vec<bool> = whole.iter().map(|r| draw() % 3 != 0 || first_step(r)).collect();
                for i in (1..kept.len()).rev() {
                    kept.swap(i, (draw() % (i as u64 + 1)) as usize);
                }
                let subset: Vec<RunRow> =
                    kept.iter().filter(|r| chosen[whole.iter().position(|w| w == *r).unwrap()]).cloned().collect();
                let expected: Vec<RunRow> =
                    whole.iter().zip(&chosen).filter(|(_, &c)| c).map(|(r, _)| r.clone()).collect();
                assert_eq!(in_study_order(experiment, &settings, subset), expected, "{experiment:?}");
            }
        }
    }

    #[test]
    fn a_resumed_study_runs_only_what_was_not_kept_and_gives_the_same_rows() {
        let dir = scratch();
        let path = dir.path().join("e1.journal");
        let settings = settings();
        // E1: capacity runs, then a climb whose steps depend on the rows before.
        let whole = run_study(
            Experiment::E1,
            &settings,
            &Unwatched,
            &Journal::create(&path, Experiment::E1, &settings).unwrap(),
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1 + whole.len(), "a heading and one line per run");
        // Interrupted after three runs, the fourth's line cut short by the crash.
        let lines: Vec<&str> = text.lines().collect();
        let cut = format!("{}\n{}", lines[..4].join("\n"), &lines[4][..lines[4].len() / 2]);
        std::fs::write(&path, cut).unwrap();
        let journal = Journal::resume(&path, Experiment::E1, &settings).unwrap();
        assert_eq!(journal.kept_before(), 3);
        let counting = Counting::default();
        let resumed = run_study(Experiment::E1, &settings, &counting, &journal).unwrap();
        assert_eq!(resumed, whole);
        assert_eq!(counting.0.load(Ordering::Relaxed), whole.len() - 3);
        // While one process holds it, another study on the same output is refused, resumed or not.
        let busy = Journal::resume(&path, Experiment::E1, &settings).err().unwrap();
        assert!(busy.contains("another study is running"), "{busy}");
        let busy = Journal::create(&path, Experiment::E1, &settings).err().unwrap();
        assert!(busy.contains("another study is running"), "{busy}");
        drop(journal);
        // The journal now holds every run once, the cut line ended: a second resume runs nothing.
        let again = Journal::resume(&path, Experiment::E1, &settings).unwrap();
        assert_eq!(again.kept_before(), whole.len());
        let counting = Counting::default();
        assert_eq!(run_study(Experiment::E1, &settings, &counting, &again).unwrap(), whole);
        assert_eq!(counting.0.load(Ordering::Relaxed), 0);
        again.finish().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_journal_of_another_study_or_a_damaged_one_is_refused_and_left_as_it_is() {
        let dir = scratch();
        let path = dir.path().join("e2.journal");
        let settings = settings();
        let journal = Journal::create(&path, Experiment::E2, &settings).unwrap();
        let first = run_study(Experiment::E2, &settings, &Unwatched, &journal).unwrap();
        drop(journal);
        let refused =
            |experiment, settings: &StudySettings| Journal::resume(&path, experiment, settings).err().unwrap();
        // A second start without --resume would lose what was kept.
        let again = Journal::create(&path, Experiment::E2, &settings).err().unwrap();
        assert!(again.contains("--resume"), "{again}");
        assert!(refused(Experiment::E4, &settings).contains("another study"));
        let other = StudySettings { first_seed: 9, ..settings.clone() };
        assert!(refused(Experiment::E2, &other).contains("another study"));
        let text = std::fs::read_to_string(&path).unwrap();
        // A damaged line other than the last is an error naming the line, not a run left out.
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines[2] = lines[2].replacen("\"seed\"", "\"seeed\"", 1);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let damaged = refused(Experiment::E2, &settings);
        assert!(damaged.contains("line 3: not a run's row"), "{damaged}");
        std::fs::write(&path, "{\"format\": \"something else\"}\n").unwrap();
        assert!(refused(Experiment::E2, &settings).contains("not a study journal"));
        // Kept by the build of another commit: its runs might differ.
        let other_build = text.replacen(crate::BUILD_COMMIT, "0123456789abcdef0123", 1);
        assert_ne!(other_build, text, "the heading names this build's commit");
        std::fs::write(&path, &other_build).unwrap();
        let foreign = refused(Experiment::E2, &settings);
        assert!(foreign.contains("kept by the build of commit 0123456789ab"), "{foreign}");
        std::fs::write(&path, &text).unwrap();
        // One others may write (or another user's) could hold rows someone else made up.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(refused(Experiment::E2, &settings).contains("another user owns it or may write it"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Journal::resume(&path, Experiment::E2, &settings).unwrap().kept_before(), first.len());
        // A last line cut inside a character (the variants' "µs") is a line cut short, not a damaged journal.
        let e5 = StudySettings { schemes: vec!["Local".parse().unwrap()], ..settings.clone() };
        let e5_path = dir.path().join("e5.journal");
        let journal = Journal::create(&e5_path, Experiment::E5, &e5).unwrap();
        let rows = run_study(Experiment::E5, &e5, &Unwatched, &journal).unwrap();
        drop(journal);
        let bytes = std::fs::read(&e5_path).unwrap();
        // Runs finish in any order, so the cut goes into the last row that names a variant in µs.
        let micro = bytes.windows(2).rposition(|w| w == "µ".as_bytes()).unwrap();
        let cut_line_start = bytes[..micro].iter().rposition(|&b| b == b'\n').unwrap() + 1;
        let rows_after_cut = bytes[micro..].iter().filter(|&&b| b == b'\n').count();
        std::fs::write(&e5_path, &bytes[..micro + 1]).unwrap();
        let kept = Journal::resume(&e5_path, Experiment::E5, &e5).unwrap().kept_before();
        assert_eq!(kept, rows.len() - rows_after_cut);
        assert_eq!(std::fs::read(&e5_path).unwrap(), bytes[..cut_line_start], "the cut line is gone");
        let missing = dir.path().join("none.journal");
        assert!(Journal::resume(&missing, Experiment::E2, &settings).err().unwrap().contains("no interrupted study"));
    }
}
