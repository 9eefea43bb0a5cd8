//! A study cut into shards, each run anywhere (a Slurm array task), then
//! merged: shard I of N runs the design's runs i with i % N == I - 1 (round
//! robin, so the long runs of high loads spread over the shards), and
//! writes them with the experiment and the settings into a shard document;
//! [`merge`] checks that the documents make one whole study and assembles
//! its rows, exactly those of an unsharded run.
//!
//! The document is JSON (`to_text`, `from_text`), and every number in it
//! reads back to the bits written (`cosched_sim::exact_f64`):
//!
//! ```json
//! {
//!   "format": "cosched study shard",
//!   "format_version": 1,
//!   "cosched_version": "0.1.0",
//!   "experiment": "e1",
//!   "settings": { "jobs_per_run": 150, "runtime_scale": 0.001, "loads": null, "schemes": ["GS", "SB"],
//!                 "first_seed": 1, "replications": 3, "horizon_factor": 3.0, "keep_saturated": false },
//!   "shard": { "index": 2, "count": 3 },
//!   "design_runs": 54,
//!   "results": [[1, { "group": "load 0.2", "scheme": "GS", …, "saturation": { … } }], [4, { … }], …]
//! }
//! ```

use crate::batch::BatchWatch;
use crate::study::{
    assemble, check_runs_match, design, design_len, run_selected, some_of, Experiment, IndexAudit, RunRow,
    StudySettings,
};
use serde::{Deserialize, Serialize};
use serde_json::error::Category;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

/// The most shards a study may be cut into (Slurm's default `MaxArraySize` is 1001).
pub const MAX_SHARDS: u32 = 10_000;

/// The largest shard document read: a full study's every run is a few MB.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// What a shard document says it is, and the version of its layout.
pub const FORMAT: &str = "cosched study shard";
pub const FORMAT_VERSION: u32 = 1;

/// Shard `index` of `count`, numbered from 1 as Slurm numbers array tasks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(format!("shard {index}/{count}: the number of shards must be 1 to {MAX_SHARDS}"));
        }
        if !(1..=count).contains(&index) {
            return Err(format!("shard {index}/{count}: shards are numbered 1 to {count} (sbatch --array=1-{count})"));
        }
        Ok(Shard { index, count })
    }

    /// Whether design index `run` belongs to this shard.
    pub fn holds(self, run: usize) -> bool {
        run % self.count as usize == (self.index - 1) as usize
    }

    /// This shard's indices of a design of `design_runs` runs, in order.
    pub fn runs(self, design_runs: usize) -> Vec<usize> {
        ((self.index - 1) as usize..design_runs).step_by(self.count as usize).collect()
    }

    /// How errors name this shard's indices.
    fn of_design(self, design_runs: usize) -> String {
        format!("shard {self} of the design's {design_runs} runs (numbered from 0)")
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `I/N`, as `--shard` takes it.
impl FromStr for Shard {
    type Err = String;
    fn from_str(text: &str) -> Result<Shard, String> {
        let number = |part: &str| part.trim().parse::<u32>().ok();
        match text.split_once('/').map(|(i, n)| (number(i), number(n))) {
            Some((Some(index), Some(count))) => Shard::new(index, count),
            _ => Err(format!("'{text}' is not I/N: shard I of N, both whole numbers, e.g. 2/8")),
        }
    }
}

/// One shard's results, with what produced them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardDocument {
    pub format: String,
    pub format_version: u32,
    pub cosched_version: String,
    /// The commit of the build that ran it (`BUILD_COMMIT`): shards of other builds are not merged.
    #[serde(default)]
    pub cosched_build: String,
    pub experiment: Experiment,
    pub settings: StudySettings,
    pub shard: Shard,
    /// Runs in the whole design, of which this shard holds its share.
    pub design_runs: usize,
    /// `(design index, row)`, by index.
    pub results: Vec<(usize, RunRow)>,
}

/// Run one shard of an experiment's design here.
pub fn run_shard<W: BatchWatch>(
    experiment: Experiment,
    settings: &StudySettings,
    shard: Shard,
    watch: &W,
) -> Result<ShardDocument, String> {
    settings.check(experiment)?;
    let design_runs = design_len(experiment, settings);
    let results = run_selected(experiment, settings, &shard.runs(design_runs), watch)?;
    Ok(ShardDocument {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        cosched_version: env!("CARGO_PKG_VERSION").into(),
        cosched_build: crate::BUILD_COMMIT.into(),
        experiment,
        settings: settings.clone(),
        shard,
        design_runs,
        results,
    })
}

/// The beginning of any document: enough to say what it is before reading the rest strictly.
#[derive(Deserialize)]
struct Heading {
    format: Option<String>,
    format_version: Option<u32>,
}

impl ShardDocument {
    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes") + "\n"
    }

    /// Read a document, refusing anything that is not one shard's complete
    /// results of a valid design: an error says what is wrong (and for JSON,
    /// where), never a panic.
    pub fn from_text(text: &str) -> Result<ShardDocument, String> {
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("larger than the {} MiB a shard document may be", MAX_DOCUMENT_BYTES >> 20));
        }
        let heading: Heading = serde_json::from_str(text).map_err(|e| match e.classify() {
            Category::Eof => format!("cut short (a shard still running, or a copy that failed?): {e}"),
            Category::Syntax | Category::Io => format!("not JSON: {e}"),
            Category::Data => format!("not a shard document: {e}"),
        })?;
        if heading.format.as_deref() != Some(FORMAT) {
            return Err(format!("not a shard document (no \"format\": \"{FORMAT}\")"));
        }
        if heading.format_version != Some(FORMAT_VERSION) {
            let version = heading.format_version.map_or("missing".into(), |v| v.to_string());
            return Err(format!("shard document version {version}; this cosched reads version {FORMAT_VERSION}"));
        }
        let document: ShardDocument = serde_json::from_str(text).map_err(|e| format!("shard document: {e}"))?;
        document.check()?;
        Ok(document)
    }

    /// Read a document from a file, within [`MAX_DOCUMENT_BYTES`]; errors name the file.
    pub fn read(path: &Path) -> Result<ShardDocument, String> {
        let in_file = |e: String| format!("{}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(|e| in_file(e.to_string()))?;
        let mut bytes = Vec::new();
        file.take(MAX_DOCUMENT_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| in_file(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| in_file("not UTF-8 text".into()))?;
        ShardDocument::from_text(&text).map_err(in_file)
    }

    /// Its shard's runs of the design, each the outcome of its run.
    fn check(&self) -> Result<(), String> {
        let shard = Shard::new(self.shard.index, self.shard.count)?;
        self.settings.check(self.experiment).map_err(|e| format!("settings: {e}"))?;
        let design_runs = design_len(self.experiment, &self.settings);
        if self.design_runs != design_runs {
            return Err(format!("says {} runs, but its settings make {design_runs}", self.design_runs));
        }
        let indices: Vec<usize> = self.results.iter().map(|(i, _)| *i).collect();
        IndexAudit::of(&indices, design_runs, |i| shard.holds(i)).refuse(&shard.of_design(design_runs))?;
        check_runs_match(&design(self.experiment, &self.settings), &self.results)
    }
}

/// A study put together from its shards.
#[derive(Clone, Debug, PartialEq)]
pub struct MergedStudy {
    pub experiment: Experiment,
    pub settings: StudySettings,
    /// Exactly the rows `run_study` gives with these settings.
    pub rows: Vec<RunRow>,
}

/// Merge shard documents (each with a name for errors, such as its file):
/// all of one experiment, settings, number of shards and of this cosched's
/// version (another's runs might differ), each shard once and none missing.
pub fn merge(shards: Vec<(String, ShardDocument)>) -> Result<MergedStudy, String> {
    let Some((first_name, first)) = shards.first() else { return Err("no shards to merge".into()) };
    let version = env!("CARGO_PKG_VERSION");
    if first.cosched_version != version {
        let made_by = &first.cosched_version;
        return Err(format!(
            "{first_name}: made by cosched {made_by}, merged by {version}; merge with the shards' own"
        ));
    }
    if first.cosched_build != crate::BUILD_COMMIT {
        let (made_by, merging) = (crate::short_commit(&first.cosched_build), crate::short_commit(crate::BUILD_COMMIT));
        return Err(format!(
            "{first_name}: run by the build of commit {made_by:?}, merged by {merging}; merge with that build"
        ));
    }
    first.settings.check(first.experiment).map_err(|e| format!("{first_name}: settings: {e}"))?;
    for (name, doc) in &shards {
        Shard::new(doc.shard.index, doc.shard.count).map_err(|e| format!("{name}: {e}"))?;
        same_study(first, doc)
            .map_err(|what| format!("{first_name} and {name} are not shards of one study: {what}"))?;
    }
    let count = first.shard.count;
    let mut by_index: Vec<Option<&str>> = vec![None; count as usize];
    for (name, doc) in &shards {
        let slot = &mut by_index[(doc.shard.index - 1) as usize];
        if let Some(other) = slot.replace(name) {
            return Err(format!("{other} and {name} are both shard {}", doc.shard));
        }
    }
    let missing: Vec<u32> = (1..=count).filter(|&i| by_index[(i - 1) as usize].is_none()).collect();
    if !missing.is_empty() {
        return Err(format!("shards missing (of {count}): {}", some_of(&missing)));
    }
    let (experiment, settings) = (first.experiment, first.settings.clone());
    let results = shards.into_iter().flat_map(|(_, doc)| doc.results).collect();
    let rows = assemble(experiment, &settings, results)?;
    Ok(MergedStudy { experiment, settings, rows })
}

/// What differs between two shards' studies, if anything.
fn same_study(a: &ShardDocument, b: &ShardDocument) -> Result<(), String> {
    if a.cosched_version != b.cosched_version {
        return Err(format!("made by cosched {} and {}", a.cosched_version, b.cosched_version));
    }
    if a.cosched_build != b.cosched_build {
        return Err(format!("run by the builds of commits {} and {}", a.cosched_build, b.cosched_build));
    }
    if a.experiment != b.experiment {
        return Err(format!("experiments {} and {}", a.experiment.name(), b.experiment.name()));
    }
    if a.settings != b.settings {
        return Err(format!("settings differ: {}", settings_difference(&a.settings, &b.settings)));
    }
    if a.shard.count != b.shard.count {
        return Err(format!("cut into {} and {} shards", a.shard.count, b.shard.count));
    }
    Ok(())
}

/// The first setting that differs, with both values, as the documents write them.
fn settings_difference(a: &StudySettings, b: &StudySettings) -> String {
    let as_map = |s: &StudySettings| match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (a, b) = (as_map(a), as_map(b));
    a.iter()
        .find(|(key, value)| b.get(*key) != Some(value))
        .map_or("in a value's last digits".into(), |(key, value)| {
            format!("{key} {value} and {}", b.get(key).unwrap_or(&serde_json::Value::Null))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::made_up::row_of;

    #[test]
    fn shards_are_read_as_i_of_n_and_bounded() {
        assert_eq!("2/8".parse::<Shard>(), Ok(Shard { index: 2, count: 8 }));
        assert_eq!(" 1 / 1 ".parse::<Shard>(), Ok(Shard { index: 1, count: 1 }));
        for (text, says) in [
            ("0/3", "numbered 1 to 3"),
            ("4/3", "numbered 1 to 3"),
            ("1/0", "must be 1 to 10000"),
            ("1/10001", "must be 1 to 10000"),
            ("3", "not I/N"),
            ("a/b", "not I/N"),
            ("-1/3", "not I/N"),
            ("1/99999999999", "not I/N"),
        ] {
            let error = text.parse::<Shard>().unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn shards_take_the_design_round_robin_and_together_all_of_it() {
        let shards: Vec<Shard> = (1..=3).map(|i| Shard::new(i, 3).unwrap()).collect();
        assert_eq!(shards[1].runs(8), [1, 4, 7]);
        let mut all: Vec<usize> = shards.iter().flat_map(|s| s.runs(8)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
        assert!(shards.iter().all(|s| s.runs(8).into_iter().all(|i| s.holds(i))));
        assert_eq!(Shard::new(1, 1).unwrap().runs(5), (0..5).collect::<Vec<_>>());
        assert!(Shard::new(9, 10).unwrap().runs(5).is_empty(), "more shards than runs: some run nothing");
    }

    fn settings() -> StudySettings {
        StudySettings {
            loads: Some(vec![0.3, 0.7]),
            schemes: vec!["GS".parse().unwrap(), "SB".parse().unwrap()],
            replications: 2,
            ..StudySettings::default()
        }
    }

    /// A document whose rows are the design's runs with made-up outcomes
    /// (the awkward numbers a run can give among them).
    fn document(shard: Shard) -> ShardDocument {
        let settings = settings();
        let specs = design(Experiment::E1, &settings);
        let awkward = [f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.1 + 0.2, 5e-324, 1e300];
        let results = shard
            .runs(specs.len())
            .into_iter()
            .map(|i| {
                let odd = awkward[i % awkward.len()];
                let mut row = row_of(&specs[i], 1.0 / 3.0, true);
                row.offered_load = odd;
                row.compute_utilization = odd;
                row.mean_wait_s = odd;
                row.mean_execution_s = 1e-9;
                row.saturation.wait_growth = odd;
                row.saturation.backlog_growth = -odd;
                row.saturation.why = "1 of 150 jobs unfinished \"at\" the horizon\n".into();
                (i, row)
            })
            .collect();
        ShardDocument {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            cosched_version: env!("CARGO_PKG_VERSION").into(),
            cosched_build: crate::BUILD_COMMIT.into(),
            experiment: Experiment::E1,
            design_runs: specs.len(),
            settings,
            shard,
            results,
        }
    }

    #[test]
    fn a_document_reads_back_to_the_same_bits() {
        let doc = document(Shard::new(1, 1).unwrap());
        let text = doc.to_text();
        let back = ShardDocument::from_text(&text).unwrap();
        // NaN is not equal to itself: compare what is written, which carries every bit.
        assert_eq!(back.to_text(), text);
        let bits = |d: &ShardDocument| -> Vec<u64> {
            d.results
                .iter()
                .flat_map(|(_, r)| [r.offered_load, r.saturation.backlog_growth])
                .map(f64::to_bits)
                .collect()
        };
        assert_eq!(bits(&back), bits(&doc));
        assert!(text.contains("\"NaN:0xfff8000000000000\"") && text.contains("\"-inf\""), "{text}");
    }

    #[test]
    fn truncated_or_garbled_documents_are_errors_not_panics() {
        let text = document(Shard::new(1, 2).unwrap()).to_text();
        let text = text.trim_end();
        for end in (0..text.len()).filter(|&e| text.is_char_boundary(e)).step_by(7) {
            assert!(ShardDocument::from_text(&text[..end]).is_err(), "cut at {end} accepted");
        }
        let garbled = [
            ("{}", "not a shard document"),
            ("[1, 2]", "not a shard document"),
            ("\"format\"", "not a shard document"),
            ("{\"format\": ", "cut short"),
            ("{\"format\" 1}", "not JSON"),
            (r#"{"format": "cosched study shard", "format_version": 2}"#, "version 2; this cosched reads version 1"),
        ];
        for (text, says) in garbled {
            let error = ShardDocument::from_text(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    fn refused(edit: impl Fn(&mut ShardDocument)) -> String {
        let mut doc = document(Shard::new(2, 3).unwrap());
        edit(&mut doc);
        ShardDocument::from_text(&doc.to_text()).unwrap_err()
    }

    #[test]
    fn documents_that_contradict_themselves_are_refused() {
        assert!(refused(|d| d.shard.index = 4).contains("numbered 1 to 3"));
        assert!(refused(|d| d.design_runs = 5).contains("says 5 runs, but its settings make 12"));
        assert!(refused(|d| d.settings.replications = 0).contains("settings: --replications must be 1 to 100"));
        assert!(refused(|d| d.results[0].0 = 0).contains("runs not in shard 2/3 of the design's 12 runs"));
        assert!(refused(|d| d.results[0].0 = 80).contains("runs not in shard 2/3"));
        assert!(refused(|d| d.results.pop().map_or((), drop))
            .contains("runs of shard 2/3 of the design's 12 runs (numbered from 0) missing: 10"));
        assert!(refused(|d| d.results.push(d.results[0].clone())).contains("runs given more than once: 1"));
        assert!(refused(|d| d.results[0].1.seed = 9).contains("run 1 should be 'SB WL7 capacity seed 1'"));
        let many = StudySettings { loads: Some(vec![0.5; 1_000_000]), ..settings() };
        assert!(refused(|d| d.settings = many.clone()).contains("a study may hold at most 100000"));
        let mut huge = document(Shard::new(1, 1).unwrap()).to_text();
        huge.push_str(&" ".repeat(MAX_DOCUMENT_BYTES));
        assert!(ShardDocument::from_text(&huge).unwrap_err().contains("larger than the 64 MiB"));
    }

    fn named(docs: impl IntoIterator<Item = ShardDocument>) -> Vec<(String, ShardDocument)> {
        docs.into_iter().map(|d| (format!("shard-{}", d.shard.index), d)).collect()
    }

    #[test]
    fn merging_wants_every_shard_of_one_study_once() {
        let shards = |count| (1..=count).map(move |i| document(Shard::new(i, count).unwrap()));
        let merged = merge(named(shards(3).rev())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(merged.rows.len(), 4 + 4, "the capacity runs, then the first load: every made-up run saturated");
        assert_eq!(merge(named(shards(3).take(2))).unwrap_err(), "shards missing (of 3): 3");
        let twice = named(shards(3).chain(shards(3).take(1)));
        assert_eq!(merge(twice).unwrap_err(), "shard-1 and shard-1 are both shard 1/3");
        let mixed = named(shards(3).take(2).chain(shards(2).skip(1)));
        assert!(merge(mixed).unwrap_err().ends_with("not shards of one study: cut into 3 and 2 shards"));
        let mut other_seed = named(shards(2));
        other_seed[1].1.settings.first_seed = 7;
        assert!(merge(other_seed).unwrap_err().ends_with("settings differ: first_seed 1 and 7"));
        assert_eq!(merge(Vec::new()).unwrap_err(), "no shards to merge");
        let mut older = named(shards(1));
        older[0].1.cosched_version = "0.0.9".into();
        let says = format!("made by cosched 0.0.9, merged by {}; merge", env!("CARGO_PKG_VERSION"));
        assert!(merge(older).unwrap_err().contains(&says));
        let mut rebuilt = named(shards(2));
        rebuilt[1].1.cosched_build = "0123456789abcdef".into();
        assert!(merge(rebuilt.clone()).unwrap_err().contains("run by the builds of commits"));
        rebuilt.swap(0, 1);
        assert!(merge(rebuilt).unwrap_err().contains("run by the build of commit \"0123456789ab\""));
    }
}
