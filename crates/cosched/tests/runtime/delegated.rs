//! `--job-cgroups service`: the daemon started in a cgroup of its own, as systemd starts a unit with
//! `Delegate=yes`, keeps every job cgroup inside it and itself in its leaf `daemon`. No systemd runs here, so the
//! test makes the service's cgroup and starts the daemon in it; `scripts/check-package` shows the same under a
//! real systemd.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A cgroup standing for a systemd unit's, removed with everything left in it when dropped.
struct ServiceCgroup {
    dir: PathBuf,
}

impl ServiceCgroup {
    fn create() -> ServiceCgroup {
        let dir = v2_mount().join(format!("{}.service", unique("cosched-test")));
        std::fs::create_dir(&dir).unwrap();
        ServiceCgroup { dir }
    }
}

impl Drop for ServiceCgroup {
    fn drop(&mut self) {
        // At most 10 s: the jobs' processes take a moment to die once killed.
        for _ in 0..200 {
            if !self.dir.exists() {
                break;
            }
            let mut dirs: Vec<PathBuf> = walk(&self.dir);
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for dir in &dirs {
                let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
                let _ = std::fs::remove_dir(dir);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `dir` and every cgroup below it.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let children = std::fs::read_dir(dir).into_iter().flatten().flatten().filter(|e| e.path().is_dir());
    std::iter::once(dir.to_path_buf()).chain(children.flat_map(|e| walk(&e.path()))).collect()
}

/// A shell script that moves itself into `cgroup`, then runs its arguments: `sh -c SCRIPT sh PROGRAM ARGS`.
fn join_then_exec(cgroup: &Path) -> String {
    format!("echo $$ > {}/cgroup.procs && exec \"$@\"", cgroup.display())
}

fn in_service(service: &ServiceCgroup, args: &[&str]) -> Daemon {
    Daemon::up_under(&["sh", "-c", &join_then_exec(&service.dir), "sh"], args, &[])
}

/// `cosched up` started in `cgroup`, with its state and socket in `state_dir`, logging to `log`.
fn up_in(cgroup: &Path, node: &str, state_dir: &Path, extra: &[&str], log: &Path) -> std::process::Child {
    let file = std::fs::File::create(log).unwrap();
    let (state, socket) = (state_dir.to_str().unwrap(), state_dir.join("sock"));
    std::process::Command::new("sh")
        .args(["-c", &join_then_exec(cgroup), "sh", COSCHED, "up", "--monitor", "off", "--node", node])
        .args(["--state-dir", state, "--socket", socket.to_str().unwrap()])
        .args(extra)
        .env("COSCHED_CONFIG", "none")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap()
}

/// Two gangs of every CPU, each job's cgroup inside the service's, taking turns there; the daemon in the leaf
/// `daemon`; after the daemon is killed the watchdog thaws them where they are, and a daemon started in the
/// service's cgroup again finds them.
#[test]
fn job_cgroups_stay_inside_the_service_that_starts_the_daemon() {
    if skip_unless_root("job_cgroups_stay_inside_the_service_that_starts_the_daemon") {
        return;
    }
    let _machine = whole_machine();
    let service = ServiceCgroup::create();
    let flags = ["--job-cgroups", "service", "--slice-ms", "50", "--rows", "2"];
    let mut daemon = in_service(&service, &flags);
    let leaf = service.dir.join("daemon");
    assert_eq!(cgroup_dir_of(daemon.child.id() as i32), Some(leaf.clone()), "the daemon sits in the leaf");

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gangs: Vec<(u64, Vec<i32>)> = (0..2)
        .map(|_| {
            let job = daemon.submit(&[&["-n", &cpus.to_string(), "--"], &crate::SPIN_ARGS[..]].concat());
            (job, daemon.spinners(job, cpus))
        })
        .collect();
    let agent_dir = service.dir.join("cosched").join(&daemon.node);
    for (job, pids) in &gangs {
        for &pid in pids {
            assert_eq!(cgroup_dir_of(pid), Some(agent_dir.join(format!("job-{job}"))), "job {job}'s task {pid}");
        }
    }
    let pids: Vec<Vec<i32>> = gangs.iter().map(|(_, p)| p.clone()).collect();
    let samples = sample_gangs(&pids, Duration::from_secs(2));
    assert!(samples.consistent > 100, "too few samples: {}", samples.consistent);
    assert_eq!(samples.overlap, 0, "two gangs ran at once in {} of {} samples", samples.overlap, samples.consistent);
    assert_every_gang_runs(&pids, "inside the service");

    daemon.kill_hard();
    wait_for("the watchdog to thaw the jobs inside the service", Duration::from_secs(10), || {
        pids.iter().flatten().all(|&pid| frozen(pid) == Some(false))
    });
    daemon.child = up_in(&service.dir, &daemon.node, &daemon.dir, &flags, &daemon.dir.join("up2.log"));
    daemon.wait_ready();
    assert_eq!(cgroup_dir_of(daemon.child.id() as i32), Some(leaf), "the restarted daemon sits in the leaf");
    for (job, _) in &gangs {
        wait_for(&format!("job {job} to be found again"), Duration::from_secs(10), || {
            daemon.job(*job).is_some_and(|j| !j.state.is_over())
        });
    }
    assert_every_gang_runs(&pids, "after the restart");
}

/// Refused with a reason: a daemon in the root cgroup has no service to keep its jobs in.
#[test]
fn job_cgroups_in_the_service_need_a_service() {
    if skip_unless_root("job_cgroups_in_the_service_need_a_service") {
        return;
    }
    let dir = fresh_dir("cosched-root-service");
    let log = dir.join("up.log");
    let stderr =
        refused_start(up_in(&v2_mount(), &unique("t"), &dir, &["--job-cgroups", "service"], &log), "cosched up", &log);
    assert!(stderr.contains("root cgroup") && stderr.contains("Delegate=yes"), "{stderr}");
}

/// Refused with a reason: a cgroup another user may change (a user's own systemd subtree, where `sudo` from a
/// desktop session starts) would let them move or freeze the daemon and everyone's jobs.
#[test]
fn job_cgroups_never_go_below_a_cgroup_a_user_may_change() {
    if skip_unless_root("job_cgroups_never_go_below_a_cgroup_a_user_may_change") {
        return;
    }
    let service = ServiceCgroup::create();
    // As systemd delegates a subtree to a user: the folder and the files that move processes.
    for path in [service.dir.clone(), service.dir.join("cgroup.procs"), service.dir.join("cgroup.threads")] {
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    }
    let dir = fresh_dir("cosched-user-service");
    let log = dir.join("up.log");
    let stderr =
        refused_start(up_in(&service.dir, &unique("t"), &dir, &["--job-cgroups", "service"], &log), "cosched up", &log);
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    assert!(!service.dir.join("daemon").exists(), "nothing was made below it");
}

/// Jobs left at the top by an agent started with `--job-cgroups top` are neither lost nor left frozen by one
/// started with `service`: it thaws them and refuses to start, naming them.
#[test]
fn changing_where_job_cgroups_go_with_jobs_left_is_refused() {
    if skip_unless_root("changing_where_job_cgroups_go_with_jobs_left_is_refused") {
        return;
    }
    let service = ServiceCgroup::create();
    let mut daemon = in_service(&service, &[]);
    let job = daemon.submit(&["--", "sleep", "300"]);
    let pid = daemon.pids(job, 1)[0];
    let top_dir = v2_mount().join("cosched").join(&daemon.node).join(format!("job-{job}"));
    assert_eq!(cgroup_dir_of(pid), Some(top_dir.clone()));
    daemon.kill_hard();
    // Frozen once the old agent's watchdog has thawed everything and gone: as if both had died together.
    wait_for("the old watchdog to thaw the job", Duration::from_secs(10), || frozen(pid) == Some(false));
    wait_for("the old watchdog to end", Duration::from_secs(10), || {
        !std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains("__watchdog") && cmdline.contains(&daemon.node)
        })
    });
    std::fs::write(top_dir.join("cgroup.freeze"), "1").unwrap();
    wait_for("the job to be frozen", Duration::from_secs(10), || frozen(pid) == Some(true));
    let log = daemon.dir.join("again.log");
    let said = refused_start(
        up_in(&service.dir, &daemon.node, &daemon.dir, &["--job-cgroups", "service"], &log),
        "cosched up",
        &log,
    );
    assert!(said.contains(&top_dir.display().to_string()) && said.contains("--job-cgroups top"), "{said}");
    wait_for("the job left at the top to be thawed", Duration::from_secs(10), || frozen(pid) == Some(false));
}
