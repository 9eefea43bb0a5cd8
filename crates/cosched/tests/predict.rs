//! The simulator on a measured machine: `sim --machine` and `predict`
//! against the checked-in slowdown measurements of docs/reproduction-real.
//! (`calibrate` itself needs root and a quiet machine; scripts/validate-prediction runs it.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched")).args(args).output().expect("cosched runs")
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A machine file as `cosched calibrate` writes it, with this machine's kind of values.
fn machine_file(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut machine = serde_json::json!({
        "format": "cosched-machine/1", "host": "vm", "kernel": "6.18", "measured_at": "2026-11-26T10:00:00Z",
        "cpus_per_node": 2, "hz": 250, "context_switch_ns": 600, "wake_ns": 46000,
        "shm": {"latency_base_ns": 190.0, "latency_ns_per_byte": 0.14, "cpu_base_ns": 380.0, "cpu_ns_per_byte": 0.28},
        "tcp": {"latency_base_ns": 30000.0, "latency_ns_per_byte": 0.16, "cpu_base_ns": 22000.0, "cpu_ns_per_byte": 0.22},
        "gang_switch_ns": 30000, "gang_slice_skew_ns": 95000, "sources": []
    });
    edit(&mut machine);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("machine.json");
    std::fs::write(&path, serde_json::to_string_pretty(&machine).unwrap()).unwrap();
    path
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every measured policy of a reference program gets a simulated and a model column; a gang of busy copies
/// takes about j times as long in the simulator, and the summary line counts every point with j > 1.
#[test]
fn predict_puts_the_simulator_beside_measured_slowdowns() {
    let dir = tempfile::tempdir().unwrap();
    let machine = machine_file(dir.path(), |_| {});
    let measured = repository().join("docs/reproduction-real/mm-p2-spin");
    let out = dir.path().join("prediction.md");
    let o = cosched(&[
        "predict",
        "--machine",
        machine.to_str().unwrap(),
        "--measured",
        measured.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let table = std::fs::read_to_string(&out).unwrap();
    for policy in ["local", "gang:10ms", "gang:100ms"] {
        for j in [1, 2, 4] {
            assert!(table.contains(&format!("| {policy} | {j} |")), "{policy} j={j}:\n{table}");
        }
    }
    assert!(table.contains("32 exchanges of 4194304 bytes"), "{table}");
    assert!(table.contains("over 6 points with j > 1"), "{table}");
    for chart in ["prediction-mm-p2-spin.svg", "prediction-mm-p2-spin.png"] {
        assert!(std::fs::metadata(dir.path().join(chart)).is_ok_and(|m| m.len() > 1000), "{chart} drawn");
    }
    let json = cosched(&[
        "predict",
        "--machine",
        machine.to_str().unwrap(),
        "--measured",
        measured.to_str().unwrap(),
        "--json",
    ]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let gang = &value["predictions"][0]["prediction"]["policies"][2];
    assert_eq!(gang["policy"], "gang:100ms");
    let s4 = gang["points"][2]["simulated"].as_f64().unwrap();
    assert!((3.6..=4.4).contains(&s4), "gang:100ms s_4 = {s4}");
}

/// What the simulator cannot carry is said, with the reason, and the others are still predicted.
#[test]
fn predict_says_why_a_result_is_not_predicted() {
    let dir = tempfile::tempdir().unwrap();
    let machine = machine_file(dir.path(), |_| {});
    let docs = repository().join("docs/reproduction-real");
    let o = cosched(&[
        "predict",
        "--machine",
        machine.to_str().unwrap(),
        "--measured",
        docs.join("mm-p4-spin").to_str().unwrap(),
        docs.join("lu-p2-block").to_str().unwrap(),
        docs.join("spinbarrier-spin").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("Not predicted: mm-p4-spin: a 2x2 grid"), "{out}");
    assert!(out.contains("Not predicted: lu-p2-block") && out.contains("not modelled"), "{out}");
    assert!(out.contains("### spinbarrier-spin"), "{out}");
}

/// A machine file that is not one is refused, naming the field, and a run with it changes nothing.
#[test]
fn a_bad_machine_file_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let measured = repository().join("docs/reproduction-real/mm-p2-spin");
    for (edit, field) in [
        (Box::new(|m: &mut serde_json::Value| m["hz"] = 0.into()) as Box<dyn Fn(&mut serde_json::Value)>, "hz"),
        (Box::new(|m: &mut serde_json::Value| m["shm"]["latency_base_ns"] = (-1.0).into()), "shm.latency_base_ns"),
        (Box::new(|m: &mut serde_json::Value| m["format"] = "other".into()), "format"),
    ] {
        let machine = machine_file(dir.path(), edit);
        let o = cosched(&["predict", "--machine", machine.to_str().unwrap(), "--measured", measured.to_str().unwrap()]);
        assert!(!o.status.success() && text(&o).contains(field), "{field}: {}", text(&o));
        let out = dir.path().join("sim-out");
        let o = cosched(&[
            "sim",
            "-q",
            "--jobs",
            "5",
            "--machine",
            machine.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(!o.status.success() && text(&o).contains(field), "{field}: {}", text(&o));
        assert!(!out.exists(), "a refused run writes nothing");
    }
}

/// `sim --machine` runs every node on EEVDF at the measured costs; the flags it sets cannot be given with it.
#[test]
fn sim_on_a_measured_machine() {
    let dir = tempfile::tempdir().unwrap();
    let machine = machine_file(dir.path(), |_| {});
    let out = dir.path().join("out");
    let args =
        ["sim", "-q", "--jobs", "20", "--nodes", "4", "--runtime-scale", "0.0002", "--schemes", "Local,GS-cosched"];
    let mut with_machine = args.to_vec();
    with_machine.extend(["--machine", machine.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let o = cosched(&with_machine);
    assert!(o.status.success(), "{}", text(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let config = summary.to_string();
    assert!(config.contains("\"node_scheduler\":\"eevdf\""), "{config}");
    assert!(config.contains("\"cpus_per_node\":2") && config.contains("\"context_switch_ns\":600"), "{config}");
    assert!(text(&o).contains("sized to 8 CPUs"), "the workload is sized to the machine file's CPUs: {}", text(&o));
    let mut both = with_machine.clone();
    both.extend(["--cpus-per-node", "4"]);
    let o = cosched(&both);
    assert!(!o.status.success() && text(&o).contains("--cpus-per-node"), "{}", text(&o));
}

/// A FIFO (or anything but a regular file) in a machine file's or a report's place is refused at once, not
/// waited on, also where the machine file is named by its folder.
#[test]
fn a_fifo_in_place_of_a_file_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("machine.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let measured = repository().join("docs/reproduction-real/mm-p2-spin");
    // The file itself, then its folder, as every command that reads machine files takes it (`bench node` as root).
    for given in [fifo.as_path(), dir.path()] {
        let o = cosched(&["predict", "--machine", given.to_str().unwrap(), "--measured", measured.to_str().unwrap()]);
        assert!(!o.status.success() && text(&o).contains("not a regular file"), "{}", text(&o));
    }
    let machine = machine_file(&dir.path().join("m"), |_| {});
    let o = cosched(&["predict", "--machine", machine.to_str().unwrap(), "--measured", fifo.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains("not a regular file"), "{}", text(&o));
    // `model` reads the same result files, and microbenchmark results, through the same reader.
    nix::unistd::mkfifo(&dir.path().join("report.json"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let costs = ["--alpha-c-us", "1", "--alpha-us", "1", "--beta-ns", "1", "--alpha-cpu-us", "1", "--beta-cpu-ns", "1"];
    let o = cosched(&[&["model"][..], &costs, &["--measured", dir.path().to_str().unwrap()]].concat());
    assert!(!o.status.success() && text(&o).contains("report.json is not a regular file"), "{}", text(&o));
    let o = cosched(&["model", "--micro", fifo.to_str().unwrap(), "--measured", measured.to_str().unwrap()]);
    assert!(
        !o.status.success() && text(&o).contains("--micro") && text(&o).contains("not a regular file"),
        "{}",
        text(&o)
    );
}

/// `scripts/validate-prediction ARGS` (bash), bounded in time: these calls measure nothing.
fn validate_prediction(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("60")
        .arg(repository().join("scripts/validate-prediction"))
        .args(args)
        .output()
        .expect("scripts/validate-prediction runs")
}

/// A seed draws one list, the same every time, printed after the seed; another seed another list; a
/// configuration the model was developed on is never drawn.
#[test]
fn a_seed_draws_the_same_configurations_every_time() {
    let draw = |seed: &str| {
        let o = validate_prediction(&["--draw", "60", "--seed", seed, "--dry-run"]);
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let first = draw("25525046");
    assert_eq!(first, draw("25525046"), "the same seed drew two lists");
    assert!(first.starts_with("seed 25525046; rerun with --seed 25525046 --draw-version 2\n"), "{first}");
    assert_eq!(first.lines().count(), 62, "the seed, a header and 60 configurations:\n{first}");
    assert_ne!(first, draw("25525047").replace("25525047", "25525046"), "two seeds drew one list");
    for developed in [
        "--phases 30000 ",
        "--phases 40000 ",
        "--n 3072 ",
        "--n 4096 ",
        "--n 5120 ",
        "--n 4500 ",
        "--n 6000 ",
        "--n 7000 ",
    ] {
        assert!(!first.contains(developed), "drew a size the model was developed on ({developed}):\n{first}");
    }
}

/// Version 1 still draws the published list of its seed; version 2 draws the same list except that a spin
/// barrier (one process of threads) is on one node, where version 1 put some across two nodes and did not run them.
#[test]
fn draw_version_1_draws_the_published_list_and_version_2_keeps_spin_barriers_on_one_node() {
    let published = "docs/reproduction-real/draw-208141013/draw.tsv";
    let published = std::fs::read_to_string(repository().join(published)).unwrap();
    let list = |version: &str| {
        let o = validate_prediction(&["--draw", "24", "--seed", "208141013", "--draw-version", version, "--dry-run"]);
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8(o.stdout).unwrap();
        out.split_once('\n').unwrap().1.to_string()
    };
    let (v1, v2) = (list("1"), list("2"));
    assert_eq!(v1, published, "version 1 no longer draws the published list");
    let mut moved = 0;
    for (old, new) in v1.lines().zip(v2.lines()) {
        if old.contains("\tspinbarrier\t") && old.contains("2 nodes of 1 CPU") {
            moved += 1;
            assert!(old.contains("not run:") && new.contains("1 node of 2 CPUs") && new.ends_with("\t-"), "{new}");
            assert_eq!(old.split('\t').take(5).collect::<Vec<_>>(), new.split('\t').take(5).collect::<Vec<_>>());
        } else {
            assert_eq!(old, new, "version 2 changed a configuration that is not a spin barrier across nodes");
        }
    }
    assert_eq!(moved, 2, "seed 208141013 drew two spin barriers across nodes in version 1:\n{v1}");
}

#[test]
fn a_bad_draw_option_is_refused_naming_it() {
    for (args, named) in [
        (&["--draw", "0", "--dry-run"][..], "--draw"),
        (&["--draw", "201", "--dry-run"], "--draw"),
        (&["--draw", "2", "--seed", "x1", "--dry-run"], "--seed"),
        (&["--draw", "2", "--repeat", "0", "--dry-run"], "--repeat"),
        (&["--seed", "3"], "--seed"),
        (&["--draw", "2", "--draw-version", "3", "--dry-run"], "--draw-version"),
        (&["--draw-version", "1"], "--draw-version"),
        (&["--draw"], "--draw"),
    ] {
        let o = validate_prediction(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(named), "{args:?}: {}", text(&o));
    }
}

/// Root writes the draw's results by name: a folder another user made is refused before anything is written.
#[test]
fn a_draw_never_writes_into_a_folder_another_user_made() {
    if !nix::unistd::geteuid().is_root() {
        let why = "needs root: the check is what root does with another user's folder";
        cosched_runtime::testing::say_skipped("a_draw_never_writes_into_a_folder_another_user_made", why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("theirs");
    std::fs::create_dir(&out).unwrap();
    nix::unistd::chown(&out, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let out_arg = out.to_str().unwrap();
    let o = validate_prediction(&["--draw", "2", "--seed", "1", "--predict-only", "--no-build", "--out", out_arg]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "root wrote into another user's folder");
    // The same folder reached from the checkout by '..' is no way around the check.
    let checkout = repository().canonicalize().unwrap();
    let climb = "../".repeat(checkout.components().count());
    let around = format!("{}/{climb}{}", checkout.display(), out_arg.trim_start_matches('/'));
    let o = validate_prediction(&["--draw", "2", "--seed", "1", "--predict-only", "--no-build", "--out", &around]);
    assert!(!o.status.success() && text(&o).contains("'..'"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "root wrote into another user's folder through '..'");
}

/// Fast mode's bounds were measured on the default machine model, FCFS (backfilling for GS only), skew 0.2 and MPL 2
/// or 5: a fast run on a measured machine or with other such settings reports none, says why, and points to the
/// `bench fast` that measures it there where one can.
#[test]
fn fast_mode_on_a_measured_machine_has_no_bound_until_bench_fast_measures_it() {
    let dir = tempfile::tempdir().unwrap();
    let machine = machine_file(dir.path(), |m| m["cpus_per_node"] = 1.into());
    let small = ["-q", "--jobs", "20", "--nodes", "8", "--runtime-scale", "0.02", "--schemes", "SB", "--fast"];
    let sim = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let o = cosched(&[&["sim"][..], &small, extra, &["--out", out.to_str().unwrap()]].concat());
        assert!(o.status.success(), "{}", text(&o));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        (text(&o), json["results"][0]["fast_mode"]["not_validated"]["reason"].clone())
    };
    let (said, reason) = sim("measured", &["--machine", machine.to_str().unwrap()]);
    assert_eq!(reason, "machine", "{said}");
    assert!(said.contains("not validated on this machine model"), "{said}");
    let check = format!("check with `cosched bench fast --schemes SB --machine={}`", machine.display());
    assert!(said.contains(&check), "{said}");
    let (said, reason) = sim("cheaper-switch", &["--node-scheduler", "eevdf", "--cs-us", "100"]);
    assert_eq!(reason, "machine", "{said}");
    let cheaper_switch = "cosched bench fast --schemes SB --cs-us 100 --node-scheduler eevdf";
    assert!(said.contains(&format!("check with `{cheaper_switch}`")), "{said}");
    let (said, reason) = sim("file-and-flag", &["--machine", machine.to_str().unwrap(), "--spin-factor", "2"]);
    assert_eq!(reason, "machine", "{said}");
    let over_the_file =
        format!("check with `cosched bench fast --schemes SB --machine={} --spin-factor 2`", machine.display());
    assert!(said.contains(&over_the_file), "the machine file and the flag over it: {said}");
    // Settings of the run the validation sets held to a few values.
    let (said, reason) = sim("mpl-3", &["--mpl", "3"]);
    assert_eq!(reason, "unmeasured", "{said}");
    assert!(said.contains("not validated at this MPL, only at 2 and 5"), "{said}");
    // SB takes 1 s windows on these nodes when given none; the command spells the window out.
    assert!(said.contains("check with `cosched bench fast --schemes SB --mpl 3 --fast-window-ms 1000`"), "{said}");
    let (said, reason) = sim("easy", &["--backfill", "easy"]);
    assert_eq!(reason, "unmeasured", "{said}");
    let easy = "check with `cosched bench fast --schemes SB --backfill easy --fast-window-ms 1000`";
    assert!(
        said.contains("with backfilling for this scheme on these nodes, only for GS") && said.contains(easy),
        "{said}"
    );
    let (said, _) = sim("easy-skew", &["--backfill", "easy", "--skew", "0.5"]);
    let easy = "check with `cosched bench fast --schemes SB --skew 0.5 --backfill easy --fast-window-ms 1000`";
    assert!(said.contains("not validated with this skew") && said.contains(easy), "{said}");
    for horizon in [&["--horizon-s", "5"][..], &["--horizon-s", "5", "--mpl", "3"]] {
        let (said, reason) = sim("horizon", horizon);
        assert_eq!(reason, "unmeasured", "{said}");
        let stops = "no `cosched bench fast` runs this model (`bench fast` runs every job to its end; this run stops";
        assert!(said.contains(stops), "{said}");
    }
    let (said, reason) = sim("default", &["--node-scheduler", "eevdf"]);
    assert_eq!(reason, serde_json::Value::Null, "the default machine model has a bound: {said}");
    let unread = ["--node-scheduler", "eevdf", "--gang-quantum-ms", "100", "--quanta-ms", "100,80,60,40,20,10"];
    let (said, reason) = sim("unread", &unread);
    assert_eq!(reason, serde_json::Value::Null, "SB on EEVDF reads neither the gang quantum nor the MLFQ's: {said}");

    let out = dir.path().join("bench");
    let bench = ["bench", "fast", "--schemes", "SB", "--seeds", "1", "--nodes", "8", "--jobs", "20"];
    let on_the_machine = ["--runtime-scale", "0.02", "--machine", machine.to_str().unwrap()];
    let o = cosched(&[&bench[..], &on_the_machine, &["--out", out.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let pairs = std::fs::read_to_string(out.join("pairs.csv")).unwrap();
    assert_eq!(pairs.lines().count(), 2, "one pair: {pairs}");
    let checks: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("checks.json")).unwrap()).unwrap();
    assert_eq!(checks["validated_bounds"][0]["bound"], serde_json::Value::Null, "{}", checks["validated_bounds"]);
    assert_eq!(checks["model"]["network"]["nic_ns_per_message"], 0, "the file's model: {}", checks["model"]);
    let o = cosched(&[&bench[..], &["--machine", machine.to_str().unwrap(), "--cpus-per-node", "2"]].concat());
    assert!(!o.status.success() && text(&o).contains("--cpus-per-node"), "{}", text(&o));

    // The command the warning gave for the cheaper switch runs, on that model.
    let out = dir.path().join("bench-cheaper-switch");
    let words: Vec<&str> = cheaper_switch.split(' ').skip(1).collect();
    let small_set = ["--seeds", "1", "--nodes", "8", "--jobs", "20", "--runtime-scale", "0.02"];
    let o = cosched(&[&words[..], &small_set, &["--out", out.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let checks: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("checks.json")).unwrap()).unwrap();
    assert_eq!(checks["model"]["costs"]["context_switch_ns"], 100_000, "{}", checks["model"]);
    assert_eq!(checks["model"]["nodes"], 8, "{}", checks["model"]);
    assert_eq!(checks["validated_bounds"][0]["bound"], serde_json::Value::Null, "{}", checks["validated_bounds"]);
}

/// On this VM's calibrated machine, PB-SY's rates flip between a coscheduled and a broken state from one 200 ms
/// window to the next (docs/fast-mode.md, "Rates that flip"): fast mode sees it in its windows' halves and warns
/// (the run has no bound); spin-block's rates are steady there and get no such warning, and a gang scheme's windows
/// are never judged.
#[test]
fn fast_mode_warns_where_its_windows_saw_rates_flip() {
    let dir = tempfile::tempdir().unwrap();
    let machine = repository().join("test-data/machines/vm-2026-11-30/machine.json");
    let out = dir.path().join("flip");
    let run = [
        "sim",
        "--machine",
        machine.to_str().unwrap(),
        "--nodes",
        "8",
        "--jobs",
        "60",
        "--runtime-scale",
        "0.05",
        "--seed",
        "2196729870",
        "--schemes",
        "PB-SY,SB,GS-cosched",
        "--fast",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = cosched(&run);
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    let warned = |scheme: &str| said.contains(&format!("warning: {scheme}'s rates moved by more than 1.5 times"));
    assert!(warned("PB-SY") && !warned("SB"), "{said}");
    assert!(said.contains("so this answer may be far off the exact engine's"), "{said}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let counts = |i: usize| {
        let fast = &json["results"][i]["fast_mode"];
        (fast["halved_windows"].as_u64().unwrap(), fast["unsteady_windows"].as_u64().unwrap())
    };
    let ((pb_sy_halved, pb_sy_apart), (sb_halved, sb_apart)) = (counts(0), counts(1));
    assert!(pb_sy_halved > 100 && pb_sy_apart * 20 >= pb_sy_halved, "{pb_sy_apart} of {pb_sy_halved}");
    assert!(sb_halved > 100 && sb_apart == 0, "{sb_apart} of {sb_halved}");
    // A gang scheme's window is whole cycles of the rows, whose middle cuts a job's quanta anywhere: not judged.
    assert_eq!(counts(2), (0, 0));
    assert!(!warned("GS-cosched"), "{said}");
}

/// A run with a bound is warned of unsteady rates too, the warning naming its bound: a bound holds over a set of
/// drawn runs, and on the 400-job sets the largest errors were unsteady runs' (docs/fast-mode.md, "Sets of 400
/// jobs"). DCS-SB on one-CPU MLFQ nodes has a bound; this seed's windows had 18 % of their halves apart.
#[test]
fn an_unsteady_run_is_warned_of_beside_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("unsteady");
    let flags = "sim --nodes 16 --jobs 60 --runtime-scale 0.05 --load 0.9 --mpl 5 --seed 11 --schemes DCS-SB --fast -q";
    let run: Vec<&str> = flags.split_whitespace().chain(["--out", out.to_str().unwrap()]).collect();
    let o = cosched(&run);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let fast = &json["results"][0]["fast_mode"];
    let (halved, apart) = (fast["halved_windows"].as_u64().unwrap(), fast["unsteady_windows"].as_u64().unwrap());
    // The premise first: an unsteady run (5 % of its judged windows or more), else the test says nothing.
    assert!(halved > 100 && apart * 20 >= halved, "not unsteady: {apart} of {halved}");
    let bound = fast["validated_error"].as_f64().expect("DCS-SB has a bound on MLFQ nodes");
    let said = text(&o);
    assert!(said.contains("warning: DCS-SB's rates moved by more than 1.5 times"), "{said}");
    let beside = format!("may be farther off the exact engine's than its bound of {:.1} %", 100.0 * bound);
    assert!(said.contains(&beside), "{said}");
}
