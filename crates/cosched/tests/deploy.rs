//! The systemd units in `deploy/systemd` are valid for systemd, start the binary's real subcommands, and keep the
//! settings that the daemon's safety depends on (docs/security.md, "Deployment").

use std::path::{Path, PathBuf};
use std::process::Command;

fn units() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
    let mut units: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "service"))
        .collect();
    units.sort();
    assert_eq!(units.len(), 3, "the agent, controller and single-machine units: {units:?}");
    units
}

fn setting<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|l| l.strip_prefix(key)?.strip_prefix('=')).collect()
}

#[test]
fn every_unit_passes_systemds_own_check() {
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        cosched_runtime::testing::say_skipped(
            "every_unit_passes_systemds_own_check",
            "systemd-analyze is not installed",
        );
        return;
    }
    let scratch = tempfile::Builder::new().prefix("cosched-units-").tempdir().unwrap().keep();
    for unit in units() {
        // systemd checks that the program exists: point the unit at the binary under test.
        let text =
            std::fs::read_to_string(&unit).unwrap().replace("/usr/local/bin/cosched", env!("CARGO_BIN_EXE_cosched"));
        let copy = scratch.join(unit.file_name().unwrap());
        std::fs::write(&copy, text).unwrap();
        let out = Command::new("systemd-analyze").arg("verify").arg(&copy).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && said.trim().is_empty(), "{}: {said}", unit.display());
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn units_start_real_subcommands_and_job_starting_units_spare_the_supervisors() {
    for unit in units() {
        let text = std::fs::read_to_string(&unit).unwrap();
        let exec = setting(&text, "ExecStart");
        assert_eq!(exec.len(), 1, "{}", unit.display());
        let args: Vec<&str> = exec[0].split_whitespace().skip(1).collect();
        let help = Command::new(env!("CARGO_BIN_EXE_cosched")).arg(args[0]).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(help.contains(flag), "{}: `cosched {}` has no {flag}", unit.display(), args[0]);
        }
        let starts_jobs = args[0] != "controller";
        if starts_jobs {
            assert_eq!(
                setting(&text, "KillMode"),
                ["process"],
                "{}: a restart would kill every task's supervisor",
                unit.display()
            );
            let soft_files =
                setting(&text, "LimitNOFILE").first().and_then(|l| l.split(':').next()?.parse::<u64>().ok());
            assert!(
                soft_files.is_some_and(|soft| soft <= 1024),
                "{}: jobs get the unit's soft LimitNOFILE back; above 1024 select() breaks",
                unit.display()
            );
            // Namespaces, seccomp filters, capability bounds and identities pass to every process the daemon starts
            // (or break the daemon: ProtectControlGroups makes the cgroups read-only, RestrictRealtime refuses the
            // switching threads' SCHED_FIFO).
            for inherited in [
                "ProtectSystem",
                "ProtectHome",
                "PrivateTmp",
                "NoNewPrivileges",
                "SystemCallFilter",
                "UMask",
                "CapabilityBoundingSet",
                "AmbientCapabilities",
                "RestrictRealtime",
                "ProtectControlGroups",
                "PrivateDevices",
                "PrivateNetwork",
                "PrivateUsers",
                "RestrictNamespaces",
                "RestrictSUIDSGID",
                "MemoryDenyWriteExecute",
                "LockPersonality",
                "ProtectKernelTunables",
                "ProtectKernelModules",
                "ProtectClock",
                "User",
                "DynamicUser",
            ] {
                assert!(
                    setting(&text, inherited).is_empty(),
                    "{}: {inherited} would bind every job too",
                    unit.display()
                );
            }
        } else {
            assert_eq!(setting(&text, "ProtectSystem"), ["strict"], "{}", unit.display());
        }
    }
}

/// A site building from source needs at least the declared `rust-version`: it must cover every locked
/// dependency's own (clippy's `incompatible_msrv` checks our use of the standard library against it).
#[test]
fn the_declared_rust_version_covers_every_locked_dependency() {
    let metadata = cargo_metadata();
    let version = |text: &str| -> Vec<u32> { text.split('.').map(|p| p.parse().expect("a version number")).collect() };
    let declared = version(env!("CARGO_PKG_RUST_VERSION"));
    for package in metadata["packages"].as_array().expect("packages") {
        if let Some(needed) = package["rust_version"].as_str() {
            assert!(
                version(needed) <= declared,
                "{} {} needs Rust {needed}, above the declared rust-version {}",
                package["name"],
                package["version"],
                env!("CARGO_PKG_RUST_VERSION")
            );
        }
    }
}

/// The workspace's packages and their resolved dependencies, offline, as Cargo.lock has them.
fn cargo_metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("cargo metadata gives JSON")
}

/// The names of every package `root` links (its normal dependencies, transitively).
fn linked_packages(metadata: &serde_json::Value, root: &str) -> std::collections::BTreeSet<String> {
    let nodes = metadata["resolve"]["nodes"].as_array().expect("a resolved graph");
    let packages = metadata["packages"].as_array().expect("packages");
    let name_of = |id: &str| {
        let package = packages.iter().find(|p| p["id"] == id).expect("every id a package");
        package["name"].as_str().expect("a name").to_string()
    };
    let node = |id: &str| nodes.iter().find(|n| n["id"] == id).expect("every id resolved");
    let root_id = nodes.iter().map(|n| n["id"].as_str().unwrap()).find(|id| name_of(id) == root).expect("the root");
    let (mut seen, mut todo) = (std::collections::BTreeSet::new(), vec![root_id.to_string()]);
    while let Some(id) = todo.pop() {
        for dep in node(&id)["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"].as_array().into_iter().flatten().any(|k| k["kind"].is_null());
            let pkg = dep["pkg"].as_str().unwrap().to_string();
            if normal && seen.insert(name_of(&pkg)) {
                todo.push(pkg);
            }
        }
    }
    seen
}

/// The experiment layer and the Python extension simulate: they link neither the daemon nor its database,
/// MUNGE or the pipeline (issue 43: they once linked 61 and 134 packages through the bench and the CLI).
#[test]
fn the_lab_and_the_python_extension_link_nothing_of_the_runtime() {
    let metadata = cargo_metadata();
    for root in ["cosched-lab", "cosched-sim-commands", "cosched-python"] {
        let linked = linked_packages(&metadata, root);
        for unwanted in ["cosched-runtime", "cosched-bench", "cosched-munge", "cosched-pipeline", "rusqlite", "cosched"]
        {
            assert!(!linked.contains(unwanted), "{root} links {unwanted}: {linked:?}");
        }
        assert!(linked.contains("cosched-sim"), "{root} simulates: {linked:?}");
    }
    assert!(linked_packages(&metadata, "cosched-lab").len() <= 30, "the lab's build stays small");
}
