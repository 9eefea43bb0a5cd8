//! The C client library (`clients/c`), built with the project's Makefile and run against a real `cosched up`.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Build libcosched and its test programs once per test run; the directory holding them.
fn c_build() -> &'static Path {
    static BUILD: OnceLock<PathBuf> = OnceLock::new();
    BUILD.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/c");
        let build = fresh_dir("libcosched-build");
        let out = Command::new("make")
            .arg("-C")
            .arg(&source)
            .arg(format!("BUILD={}", build.display()))
            .args(["all", "examples", "checks"])
            .output()
            .expect("make must be installed (scripts/setup installs build-essential)");
        assert!(out.status.success(), "building libcosched failed:\n{}", String::from_utf8_lossy(&out.stderr));
        build
    })
}

#[test]
fn the_reply_scanner_reads_what_it_must_and_refuses_malformed_json() {
    let out = Command::new(c_build().join("json_scan_check")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn in_job_cgroup(pid: i32, job: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(&format!("/job-{job}")))
}

#[test]
fn the_c_library_registers_processes_and_its_callers_get_the_same_permission_checks() {
    if skip_unless_root("the_c_library_registers_processes") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "20"]);
    let mut process = Command::new("sleep").arg("120").spawn().unwrap();
    let pid = process.id() as i32;
    let socket = daemon.socket.to_str().unwrap();
    let out = Command::new(c_build().join("api_check")).args([socket, "own", &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "api_check own:\n{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let job: u64 = stdout.trim().strip_prefix("job ").and_then(|id| id.parse().ok()).expect("api_check prints the job");
    // What the library changed is what the controller now holds.
    let record = daemon.job(job);
    assert_eq!(record.as_ref().map(|r| r.class), Some(JobClass::Standby), "{record:?}");
    assert_eq!(record.as_ref().map(|r| r.mem_bytes), Some(2 << 20), "{record:?}");
    assert!(in_job_cgroup(pid, job), "the process left the job");

    // A stranger may not touch the job.
    let mut foreign = Command::new(c_build().join("api_check"));
    std::os::unix::process::CommandExt::uid(&mut foreign, 65534);
    let out = foreign.args([socket, "foreign", &job.to_string(), &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "api_check foreign:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(in_job_cgroup(pid, job), "a refused request moved the process");
    let _ = process.kill();
    let _ = process.wait();
}

#[test]
fn the_example_launcher_holds_its_processes_until_they_are_in_the_job() {
    if skip_unless_root("the_example_launcher") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "20"]);
    let socket = daemon.socket.to_str().unwrap();
    // Each copy prints its own cgroup as its first act: it must already be the job's.
    let out = Command::new(c_build().join("launch_and_register"))
        .args(["-n", "2", "-s", socket, "--", "cat", "/proc/self/cgroup"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let job = stdout.lines().find_map(|l| l.strip_prefix("job ")).expect("the launcher prints the job").to_string();
    let in_job = stdout.lines().filter(|l| l.contains(&format!("/job-{job}"))).count();
    assert!(in_job >= 2, "the copies did not start inside job {job}:\n{stdout}");
}
