//! Per-thread scheduling controls, read back from `/proc` by the stages
//! themselves: nice, policy, EEVDF slice, CPU affinity, refusals for an
//! unprivileged process, and the adjusting policies.
//!
//! Most checks need root (or CAP_SYS_NICE) for negative nice values; the
//! refusal test drops to uid/gid 65534 in a child process (itself, re-run).

mod common;
use common::within;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use cosched_pipeline::priority::{current_tid, read_thread_sched, ThreadSched, ADJUST_NICE_STEP};
use cosched_pipeline::{
    Adjust, AdjustEvent, Buffer, Context, Control, FnStage, Lever, Pipeline, Priority, Report, SchedPolicy, StageError,
};

const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;

fn here() -> ThreadSched {
    read_thread_sched(current_tid()).expect("read this thread back from /proc")
}

/// The effective uid, from /proc (no unsafe `getuid` needed).
fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:")).expect("a Uid line");
    uids.split_whitespace().nth(1).and_then(|u| u.parse().ok()).expect("an effective uid")
}

fn is_root() -> bool {
    euid() == 0
}

/// What each thread saw of itself, on every buffer: (tid, /proc state).
type Views = BTreeMap<String, Vec<(i32, ThreadSched)>>;
type Seen = Mutex<Views>;

/// A stage that reads its own thread back from /proc on every buffer.
fn reader(seen: &Seen) -> impl Fn(&mut Buffer<u8>, &Context<'_, u8>) -> Result<(), StageError> + Copy + Send + '_ {
    move |_, ctx| {
        let tid = current_tid();
        let sched = read_thread_sched(tid)?;
        seen.lock().unwrap().entry(ctx.thread().to_string()).or_default().push((tid, sched));
        Ok(())
    }
}

/// The one state a thread showed on all its buffers, and its tid.
fn steady(seen: &Views, thread: &str) -> (i32, ThreadSched) {
    let states = seen.get(thread).unwrap_or_else(|| panic!("thread {thread} processed no buffer"));
    assert!(states.windows(2).all(|w| w[0] == w[1]), "{thread} changed while running: {states:?}");
    states[0].clone()
}

/// Every control of the run applied, each on the tid its stage reported.
fn assert_all_applied(report: &Report<u8>, seen: &Views) {
    for outcome in &report.controls {
        assert_eq!(outcome.result, Ok(()), "{} refused for {}", outcome.control, outcome.thread);
        // (A copy of a replicated stage may have had no buffer to look at itself with.)
        if seen.contains_key(&outcome.thread) {
            assert_eq!(outcome.tid, steady(seen, &outcome.thread).0, "{outcome:?} names the stage's own thread");
        }
        let listed = report.threads.iter().find(|t| t.thread == outcome.thread).expect("thread in the report");
        assert_eq!(listed.tid, outcome.tid);
    }
    assert_eq!(report.refused().count(), 0);
}

/// Runs `source -> middle -> sink` (each a [`reader`]) with `source`/`middle`
/// priorities, and returns what every thread saw of itself.
fn run_with(what: &str, source: Option<Priority>, middle: Option<Priority>) -> (Report<u8>, Views) {
    within(what, move || {
        let seen = Seen::default();
        let read = reader(&seen);
        let mut pipeline = Pipeline::new(3, |_| 0u8).rounds(6).stage_fn("source", read);
        if let Some(priority) = source {
            pipeline = pipeline.priority(priority);
        }
        pipeline = pipeline.stage_fn("middle", read);
        if let Some(priority) = middle {
            pipeline = pipeline.priority(priority);
        }
        let report = pipeline.stage_fn("sink", read).run().expect("the pipeline runs");
        (report, seen.into_inner().unwrap())
    })
}

#[test]
fn nice_applies_to_its_own_stage_only() {
    let base = here();
    assert_ne!(base.nice, 7, "the test process already runs at nice 7: the check would prove nothing");
    let (report, seen) = run_with("nice", None, Some(Priority::default().nice(7)));
    assert_eq!(steady(&seen, "middle").1.nice, 7);
    assert_eq!(steady(&seen, "source").1.nice, base.nice, "the other stages keep the process's nice");
    assert_eq!(steady(&seen, "sink").1.nice, base.nice);
    assert_eq!(report.controls.len(), 1, "{:?}", report.controls);
    assert_eq!((report.controls[0].thread.as_str(), &report.controls[0].control), ("middle", &Control::Nice(7)));
    assert_all_applied(&report, &seen);
}

#[test]
fn batch_and_idle_policies_apply() {
    let base = here();
    assert_eq!(base.policy, SCHED_OTHER, "the test process should run SCHED_OTHER");
    let (report, seen) = run_with(
        "policy",
        Some(Priority::default().policy(SchedPolicy::Batch)),
        Some(Priority::default().policy(SchedPolicy::Idle)),
    );
    assert_eq!(steady(&seen, "source").1.policy, SCHED_BATCH);
    assert_eq!(steady(&seen, "middle").1.policy, SCHED_IDLE);
    assert_eq!(steady(&seen, "sink").1.policy, SCHED_OTHER);
    assert_eq!(steady(&seen, "source").1.nice, base.nice, "a policy change keeps the nice");
    assert_eq!(SchedPolicy::from_linux(SCHED_BATCH), Some(SchedPolicy::Batch));
    assert_eq!(SchedPolicy::from_linux(SCHED_IDLE), Some(SchedPolicy::Idle));
    assert_eq!(report.controls.len(), 2);
    assert_all_applied(&report, &seen);
}

/// The slice the kernel shows for `thread`; fails loudly when it shows none.
fn slice_ns(seen: &Views, thread: &str) -> u64 {
    let (tid, sched) = steady(seen, thread);
    sched.slice_ns.unwrap_or_else(|| {
        panic!(
            "/proc/self/task/{tid}/sched shows no se.slice for {thread} (kernel {}): slice requests need Linux 6.12+",
            std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim()
        )
    })
}

#[test]
fn slice_requests_apply_and_are_clamped() {
    let cases = [
        (Duration::from_millis(3), 3_000_000),
        (Duration::from_millis(500), 100_000_000),
        (Duration::from_micros(10), 100_000),
    ];
    for (asked, expected_ns) in cases {
        let (report, seen) = run_with("slice", None, Some(Priority::default().slice(asked)));
        assert_eq!(slice_ns(&seen, "middle"), expected_ns, "{asked:?} asked");
        assert_ne!(slice_ns(&seen, "source"), expected_ns, "the source kept the default slice");
        assert_eq!(report.controls.len(), 1);
        assert_eq!(report.controls[0].control, Control::Slice(asked));
        assert_all_applied(&report, &seen);
    }
}

#[test]
fn cpus_apply_and_all_controls_combine() {
    let base = here();
    assert!(base.cpus.contains(&0), "the test process may not run on CPU 0: {:?}", base.cpus);
    let other = *base.cpus.last().unwrap();
    let all = Priority::default().nice(3).policy(SchedPolicy::Batch).slice(Duration::from_millis(2)).cpus(vec![other]);
    let (report, seen) = run_with("cpus", Some(Priority::default().cpus(vec![0])), Some(all));
    assert_eq!(steady(&seen, "source").1.cpus, [0]);
    let middle = steady(&seen, "middle").1;
    assert_eq!(
        (middle.nice, middle.policy, middle.cpus.as_slice()),
        (3, SCHED_BATCH, [other].as_slice()),
        "nice, policy and cpus of the middle stage"
    );
    assert_eq!(slice_ns(&seen, "middle"), 2_000_000);
    assert_eq!(steady(&seen, "sink").1.cpus, base.cpus, "the sink keeps the process's CPUs");
    let controls: Vec<(&str, &Control)> = report.controls.iter().map(|c| (c.thread.as_str(), &c.control)).collect();
    assert_eq!(controls.len(), 5, "{controls:?}");
    assert!(controls.contains(&("source", &Control::Cpus(vec![0]))));
    for control in [
        Control::Nice(3),
        Control::Policy(SchedPolicy::Batch),
        Control::Slice(Duration::from_millis(2)),
        Control::Cpus(vec![other]),
    ] {
        assert!(controls.contains(&("middle", &control)), "{control} missing from {controls:?}");
    }
    assert_all_applied(&report, &seen);
}

#[test]
fn priority_applies_to_every_copy_of_a_replicated_group() {
    let (report, seen) = within("replicated", || {
        let seen = Seen::default();
        let read = reader(&seen);
        let report = Pipeline::new(4, |_| 0u8)
            .rounds(30)
            .stage_fn("source", read)
            .replicated("work", 3, |_| {
                FnStage::new(move |buf: &mut Buffer<u8>, ctx: &Context<'_, u8>| {
                    // Slow enough that every copy gets buffers to look at itself with.
                    std::thread::sleep(Duration::from_micros(200));
                    read(buf, ctx)
                })
            })
            .priority(Priority::default().nice(4))
            .stage_fn("sink", read)
            .run()
            .expect("the pipeline runs");
        (report, seen.into_inner().unwrap())
    });
    let mut threads: Vec<&str> = report.controls.iter().map(|c| c.thread.as_str()).collect();
    threads.sort_unstable();
    assert_eq!(threads, ["work#0", "work#1", "work#2"]);
    assert!(report.controls.iter().all(|c| c.control == Control::Nice(4)));
    let copies: Vec<&String> = seen.keys().filter(|t| t.starts_with("work#")).collect();
    assert!(copies.len() >= 2, "only {copies:?} processed buffers");
    for copy in copies {
        assert_eq!(steady(&seen, copy).1.nice, 4, "{copy}");
    }
    assert_eq!(steady(&seen, "sink").1.nice, here().nice);
    assert_all_applied(&report, &seen);
}

#[test]
fn negative_nice_needs_privilege() {
    let base = here();
    let (report, seen) = run_with("negative nice", None, Some(Priority::default().nice(-3)));
    let middle = steady(&seen, "middle").1;
    if is_root() {
        assert_eq!(middle.nice, -3);
        assert_all_applied(&report, &seen);
    } else {
        // Without privilege the refusal must be reported, and nothing changed.
        assert_eq!(middle.nice, base.nice);
        let refused: Vec<_> = report.refused().collect();
        assert_eq!(refused.len(), 1, "{:?}", report.controls);
        assert!(refused[0].result.as_ref().unwrap_err().contains("not permitted"), "{refused:?}");
    }
}

// ---------------------------------------------------------------------------
// Refusals, in an unprivileged child process

const PROBE_ENV: &str = "COSCHED_PRIORITY_PROBE";
const PROBE_TEST: &str = "unprivileged_refusals_are_reported";
const NOBODY: u32 = 65534;

/// The child's side: RLIMIT_NICE 0, a stage asking for nice -5, and an
/// adjusting producer ahead of a slow consumer. One line per outcome.
fn probe() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NICE).expect("getrlimit");
    setrlimit(Resource::RLIMIT_NICE, 0, hard).expect("lowering RLIMIT_NICE is always allowed");
    println!("PROBE uid {}", euid());
    let report = Pipeline::new(4, |_| 0u8)
        .rounds(48)
        .stage_fn("producer", |_, _| Ok(()))
        .adjust(Adjust::Reversible)
        .stage_fn("consumer", |buf, _| {
            // Slow and fast phases of 8 buffers: the producer's queue backs up, then drains.
            if (buf.seq() / 8) % 2 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
        .priority(Priority::default().nice(-5))
        .run()
        .expect("a refused control does not stop the pipeline");
    for c in &report.controls {
        let result = c.result.as_ref().err().map_or("ok".to_string(), |e| format!("refused: {e}"));
        println!("PROBE control {} {} {result}", c.thread, c.control);
    }
    for a in &report.adjustments {
        let result = a.result.as_ref().err().map_or("ok".to_string(), |e| format!("failed: {e}"));
        println!("PROBE adjust {} {} {} {result}", a.thread, if a.lowered { "lower" } else { "raise" }, a.lever);
    }
}

/// Whether user `nobody` may reach and run `path` (every directory on the
/// way searchable by others, the file readable and executable by others).
fn runnable_by_others(path: &Path) -> bool {
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    mode(path) & 0o005 == 0o005 && path.ancestors().skip(1).all(|dir| mode(dir) & 0o001 != 0)
}

fn wait_with_timeout(mut child: std::process::Child, limit: Duration) -> (std::process::ExitStatus, String, String) {
    let step = Duration::from_millis(10);
    let mut waited = Duration::ZERO;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the probe") {
            break status;
        }
        if waited >= limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the unprivileged probe hung (no exit within {limit:?})");
        }
        std::thread::sleep(step);
        waited += step;
    };
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status, out, err)
}

#[test]
fn unprivileged_refusals_are_reported() {
    if std::env::var_os(PROBE_ENV).is_some() {
        probe();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // Keep the copy (if any) alive until the child is done.
    let mut _copy_dir = None;
    let mut program: PathBuf = exe.clone();
    let root = is_root();
    if root && !runnable_by_others(&exe) {
        let dir = tempfile::Builder::new().prefix("priority-probe").tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        program = dir.path().join("priority-probe");
        std::fs::copy(&exe, &program).expect("copy the test binary");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(runnable_by_others(&program), "{} is not reachable by others", program.display());
        _copy_dir = Some(dir);
    }
    let mut command = Command::new(&program);
    command
        .args(["--exact", PROBE_TEST, "--nocapture", "--test-threads=1"])
        .env(PROBE_ENV, "1")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if root {
        command.uid(NOBODY).gid(NOBODY);
    }
    let child = command.spawn().unwrap_or_else(|e| panic!("run {} as the probe: {e}", program.display()));
    let (status, out, err) = wait_with_timeout(child, Duration::from_secs(15));
    assert!(status.success(), "the probe failed ({status}):\n{out}\n{err}");
    // The harness's own "test ... " may share a line with the first probe line.
    let lines: Vec<&str> = out.lines().filter_map(|l| l.split_once("PROBE ").map(|(_, rest)| rest)).collect();
    let context = format!("probe output:\n{out}\nstderr:\n{err}");

    if root {
        assert!(lines.contains(&format!("uid {NOBODY}").as_str()), "the probe did not run as nobody; {context}");
    }
    // The nice -5 request is refused, and reported so.
    let controls: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("control ")).collect();
    assert_eq!(controls.len(), 1, "one control asked for; {context}");
    assert!(controls[0].starts_with("consumer nice -5 refused: "), "{context}");
    assert!(controls[0].contains("not permitted"), "{context}");

    // With RLIMIT_NICE 0 the adjusting stage could not take a raised nice
    // back, so it lengthens its slice instead.
    let adjustments: Vec<Vec<&str>> =
        lines.iter().filter_map(|l| l.strip_prefix("adjust ")).map(|l| l.split_whitespace().collect()).collect();
    assert!(!adjustments.is_empty(), "the producer never adjusted; {context}");
    for (i, adjustment) in adjustments.iter().enumerate() {
        let change = if i % 2 == 0 { "lower" } else { "raise" };
        assert_eq!(adjustment.as_slice(), ["producer", change, "slice", "ok"], "{context}");
    }
}

// ---------------------------------------------------------------------------
// Adjusting

/// A producer that records its nice on every buffer, adjusting as `adjust`
/// says, ahead of a consumer that sleeps 1 ms on the buffers `slow` picks.
fn adjusting_run(adjust: Adjust, rounds: u64, slow: fn(u64) -> bool) -> (Vec<(u64, i32)>, Vec<AdjustEvent>) {
    within("adjust", move || {
        let nices = Mutex::new(Vec::new());
        let report = Pipeline::new(4, |_| 0u8)
            .rounds(rounds)
            .stage_fn("producer", |buf, _| {
                nices.lock().unwrap().push((buf.seq(), read_thread_sched(current_tid())?.nice));
                Ok(())
            })
            .adjust(adjust)
            .stage_fn("consumer", |buf, _| {
                if slow(buf.seq()) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            })
            .run()
            .expect("the pipeline runs");
        assert!(report.controls.is_empty());
        (nices.into_inner().unwrap(), report.adjustments)
    })
}

/// Each buffer's nice follows the events: raised by the step after a lower,
/// back to the base after a raise. An event at seq s takes effect from s + 1.
fn check_nice_follows(base: i32, nices: &[(u64, i32)], events: &[AdjustEvent]) {
    for &(seq, nice) in nices {
        let lowered = events.iter().rev().find(|e| e.seq < seq).is_some_and(|e| e.lowered);
        let expected = if lowered { base + ADJUST_NICE_STEP } else { base };
        assert_eq!(nice, expected, "buffer {seq}: nice {nice}, expected {expected} after {events:?}");
    }
}

#[test]
fn lower_once_raises_the_producers_nice_once() {
    const ROUNDS: u64 = 30;
    let base = here().nice;
    let (nices, events) = adjusting_run(Adjust::LowerOnce, ROUNDS, |_| true);
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(
        (event.thread.as_str(), event.lowered, event.lever, &event.result),
        ("producer", true, Lever::Nice, &Ok(()))
    );
    assert!(event.seq + 4 < ROUNDS - 1, "the queue backed up only at buffer {}", event.seq);
    assert_eq!(nices.first(), Some(&(0, base)), "the producer starts at the process's nice");
    assert_eq!(nices.last(), Some(&(ROUNDS - 1, base + ADJUST_NICE_STEP)), "and ends {ADJUST_NICE_STEP} higher");
    check_nice_follows(base, &nices, &events);
}

#[test]
fn reversible_lowers_and_raises_with_the_backlog() {
    let base = here().nice;
    // The consumer alternates slow and fast phases of 8 buffers.
    let (nices, events) = adjusting_run(Adjust::Reversible, 48, |seq| (seq / 8) % 2 == 0);
    assert!(events.iter().any(|e| e.lowered), "never lowered: {events:?}");
    assert!(events.iter().any(|e| !e.lowered), "never raised back: {events:?}");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.lowered, i % 2 == 0, "lowers and raises alternate, starting with a lower: {events:?}");
        assert_eq!(event.result, Ok(()), "{event:?}");
        assert_eq!(event.thread, "producer");
        if is_root() {
            assert_eq!(event.lever, Lever::Nice, "with CAP_SYS_NICE the nice can go back down");
        }
    }
    if events.iter().all(|e| e.lever == Lever::Nice) {
        check_nice_follows(base, &nices, &events);
    }
}
