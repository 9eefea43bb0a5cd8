//! The pipeline framework end to end: buffer recycling, order through
//! fork/join, multistage threads and repeats, the last-buffer flag, init and
//! cleanup, errors and panics, queue lengths, and stages that are trait
//! objects or borrow from the caller's stack.
//!
//! Every run that could hang goes through [`within`], so that a deadlock fails
//! the test after a few seconds instead of blocking the test binary.

mod common;
use common::within;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

use cosched_pipeline::{Buffer, Context, FnStage, Phase, Pipeline, PipelineError, Stage, StageError, Thread};

/// A deterministic pseudo-random number from `seed` (a multiply-xorshift hash).
fn scramble(seed: u64) -> u64 {
    let mut x = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn fail(message: String) -> Result<(), StageError> {
    Err(message.into())
}

// ---------------------------------------------------------------------------
// Buffers

#[derive(Debug)]
struct Block {
    id: usize,
    value: u64,
}

#[test]
fn buffers_are_made_once_and_recycled() {
    const POOL: usize = 4;
    const ROUNDS: u64 = 1000;
    let (made, seen, max_held, sunk, report) = within("recycle", || {
        let mut made = Vec::new();
        let held = AtomicUsize::new(0);
        let max_held = AtomicUsize::new(0);
        let seen = Mutex::new(BTreeSet::new());
        let mut sunk = Vec::new();
        let report = Pipeline::new(POOL, |index| {
            made.push(index);
            Block { id: 1000 + index, value: u64::MAX }
        })
        .rounds(ROUNDS)
        .stage_fn("source", |buf, _| {
            let now = held.fetch_add(1, SeqCst) + 1;
            max_held.fetch_max(now, SeqCst);
            seen.lock().unwrap().insert(buf.data.id);
            buf.data.value = buf.seq();
            Ok(())
        })
        .stage_fn("middle", |buf, _| {
            seen.lock().unwrap().insert(buf.data.id);
            buf.data.value *= 3;
            Ok(())
        })
        .stage_fn("sink", |buf, _| {
            seen.lock().unwrap().insert(buf.data.id);
            if buf.data.value != buf.seq() * 3 {
                return fail(format!("buffer {} carries {} (a stage was skipped?)", buf.seq(), buf.data.value));
            }
            sunk.push(buf.seq());
            held.fetch_sub(1, SeqCst);
            Ok(())
        })
        .run()
        .expect("the pipeline runs");
        (made, seen.into_inner().unwrap(), max_held.into_inner(), sunk, report)
    });

    assert_eq!(made, (0..POOL).collect::<Vec<_>>(), "make is called once per pool buffer, with its index");
    assert!(!seen.is_empty() && seen.len() <= POOL, "{} distinct buffers seen, pool is {POOL}: {seen:?}", seen.len());
    assert!(seen.iter().all(|id| (1000..1000 + POOL).contains(id)), "only pool buffers reach the stages: {seen:?}");
    assert!(max_held <= POOL, "{max_held} buffers between source and sink at once, pool is {POOL}");
    assert!(max_held >= 2, "the stages never overlapped (at most {max_held} buffer in flight)");
    assert_eq!(sunk, (0..ROUNDS).collect::<Vec<_>>());
    assert_eq!(report.rounds, ROUNDS);

    let mut ids: Vec<usize> = report.buffers.iter().map(|b| b.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1000..1000 + POOL).collect::<Vec<_>>(), "the report hands back the whole pool");
    assert!(report.buffers.iter().all(|b| b.value % 3 == 0 && b.value < ROUNDS * 3), "the pool comes back processed");
}

#[test]
fn report_names_every_thread_and_counts_its_buffers() {
    let report = within("threads", || {
        Pipeline::new(3, |_| 0u8)
            .rounds(50)
            .stage_fn("source", |_, _| Ok(()))
            .thread(Thread::new("pair").stage_fn("a", |_, _| Ok(())).stage_fn("b", |_, _| Ok(())))
            .replicated("work", 2, |_| FnStage::new(|_, _| Ok(())))
            .stage_fn("sink", |_, _| Ok(()))
            .run()
            .unwrap()
    });
    let names: BTreeSet<&str> = report.threads.iter().map(|t| t.thread.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["source", "pair", "work#0", "work#1", "sink"]));
    let tids: BTreeSet<i32> = report.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids.len(), 5, "one kernel thread each: {:?}", report.threads);
    assert!(tids.iter().all(|&tid| tid > 0));
    for thread in &report.threads {
        if !thread.thread.starts_with("work") {
            assert_eq!(thread.buffers, 50, "{thread:?}");
        }
    }
    let work: u64 = report.threads.iter().filter(|t| t.thread.starts_with("work#")).map(|t| t.buffers).sum();
    assert_eq!(work, 50, "the copies share the buffers between them");
    assert!(report.controls.is_empty() && report.adjustments.is_empty());
}

#[test]
fn stages_overlap() {
    // Three stages over a pool of 4: in a pipeline, the read of the next buffer starts while the compute of this
    // one is still running. Each compute waits (up to 10 s, so a loaded machine only makes it slower) for a later
    // read to start; in lockstep (one thread holding every buffer) none ever would.
    const ROUNDS: u64 = 20;
    let overlapped = within("overlap", || {
        let reads_started = AtomicU64::new(0);
        let computes = AtomicU64::new(0);
        let overlapped = AtomicUsize::new(0);
        let read = |_: &mut Buffer<u64>, _: &Context<'_, u64>| -> Result<(), StageError> {
            reads_started.fetch_add(1, SeqCst);
            Ok(())
        };
        let compute = |_: &mut Buffer<u64>, _: &Context<'_, u64>| -> Result<(), StageError> {
            let this = computes.fetch_add(1, SeqCst) + 1;
            if this < ROUNDS && wait_until(Duration::from_secs(10), || reads_started.load(SeqCst) > this) {
                overlapped.fetch_add(1, SeqCst);
            }
            Ok(())
        };
        let write = |_: &mut Buffer<u64>, _: &Context<'_, u64>| -> Result<(), StageError> { Ok(()) };
        Pipeline::new(4, |_| 0u64)
            .rounds(ROUNDS)
            .stage_fn("read", read)
            .stage_fn("compute", compute)
            .stage_fn("write", write)
            .run()
            .expect("the pipeline runs");
        overlapped.into_inner()
    });
    assert_eq!(overlapped, ROUNDS as usize - 1, "computes that saw the next read start while they ran");
}

/// Whether `done` held within `limit` (at least: checked every 100 µs of sleep, no clock read).
fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let checks = limit.as_micros() / 100;
    (0..checks).any(|_| {
        std::thread::sleep(Duration::from_micros(100));
        done()
    })
}

// ---------------------------------------------------------------------------
// Fork/join

#[test]
fn fork_join_rejoins_in_order() {
    const ROUNDS: u64 = 200;
    const COPIES: usize = 3;
    let (order, by_copy, finished, report) = within("fork/join", || {
        let mut order = Vec::new();
        let mut by_copy = [0u64; COPIES];
        let finished = Mutex::new(Vec::new());
        let finished_ref = &finished;
        let report = Pipeline::new(6, |_| (0u64, usize::MAX))
            .rounds(ROUNDS)
            .stage_fn("source", |buf, _| {
                buf.data = (buf.seq() * 7 + 1, usize::MAX);
                Ok(())
            })
            .replicated("work", COPIES, |copy| {
                FnStage::new(move |buf: &mut Buffer<(u64, usize)>, ctx: &Context<'_, (u64, usize)>| {
                    if ctx.copy() != copy || ctx.thread() != format!("work#{copy}") || ctx.stage() != "work" {
                        return fail(format!("copy {copy} sees itself as {} #{}", ctx.thread(), ctx.copy()));
                    }
                    std::thread::sleep(Duration::from_micros(5 + scramble(buf.seq()) % 60));
                    buf.data.1 = copy;
                    finished_ref.lock().unwrap().push(buf.seq());
                    Ok(())
                })
            })
            .stage_fn("sink", |buf, _| {
                if buf.data.0 != buf.seq() * 7 + 1 {
                    return fail(format!("buffer {} carries {}", buf.seq(), buf.data.0));
                }
                let copy = buf.data.1;
                *by_copy.get_mut(copy).ok_or_else(|| format!("buffer {} skipped the copies", buf.seq()))? += 1;
                order.push(buf.seq());
                Ok(())
            })
            .run()
            .expect("the pipeline runs");
        (order, by_copy, finished.into_inner().unwrap(), report)
    });

    assert_eq!(order, (0..ROUNDS).collect::<Vec<_>>(), "the sink sees the buffers in order");
    let working = by_copy.iter().filter(|&&n| n > 0).count();
    assert!(working >= 2, "only {working} of {COPIES} copies did any work: {by_copy:?}");
    assert_eq!(by_copy.iter().sum::<u64>(), ROUNDS);
    for (copy, &count) in by_copy.iter().enumerate() {
        let thread = report.threads.iter().find(|t| t.thread == format!("work#{copy}")).expect("copy in report");
        assert_eq!(thread.buffers, count, "work#{copy}");
    }
    // The copies really did finish out of order, so the rejoin had work to do.
    let mut sorted = finished.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, order);
    assert_ne!(finished, order, "the copies finished in order: the test did not exercise the rejoin");
}

// ---------------------------------------------------------------------------
// Multistage threads and repeats

/// The (stage, seq) calls of a two-stage thread with `repeat`, as the first
/// thread (the read stage is the source) or as a middle one.
fn repeat_calls(pool: usize, rounds: u64, repeat: usize, as_source: bool) -> (Vec<(&'static str, u64)>, Vec<u64>) {
    within("repeat", move || {
        let log = Mutex::new(Vec::new());
        let calls = &log;
        let mut sunk = Vec::new();
        let io = Thread::new("io")
            .stage_fn("read", move |buf: &mut Buffer<u64>, _: &Context<'_, u64>| {
                calls.lock().unwrap().push(("read", buf.seq()));
                buf.data = buf.seq() + 100;
                Ok(())
            })
            .stage_fn("write", move |buf: &mut Buffer<u64>, _: &Context<'_, u64>| {
                calls.lock().unwrap().push(("write", buf.seq()));
                if buf.data != buf.seq() + 100 {
                    return fail(format!("write saw buffer {} unread", buf.seq()));
                }
                Ok(())
            })
            .repeat(repeat);
        let mut pipeline = Pipeline::new(pool, |_| 0u64).rounds(rounds);
        if !as_source {
            pipeline = pipeline.stage_fn("source", |_, _| Ok(()));
        }
        pipeline
            .thread(io)
            .stage_fn("sink", |buf, _| {
                sunk.push(buf.seq());
                Ok(())
            })
            .run()
            .expect("the pipeline runs");
        (log.into_inner().unwrap(), sunk)
    })
}

fn expected_repeat_calls(rounds: u64, repeat: usize) -> Vec<(&'static str, u64)> {
    let seqs: Vec<u64> = (0..rounds).collect();
    let mut calls = Vec::new();
    for batch in seqs.chunks(repeat) {
        calls.extend(batch.iter().map(|&s| ("read", s)));
        calls.extend(batch.iter().map(|&s| ("write", s)));
    }
    calls
}

#[test]
fn multistage_repeat_runs_each_stage_over_the_batch() {
    for as_source in [true, false] {
        for (pool, rounds, repeat) in [(4, 8, 2), (4, 7, 2), (3, 7, 3), (5, 1, 2), (4, 9, 1)] {
            let (calls, sunk) = repeat_calls(pool, rounds, repeat, as_source);
            let expected = expected_repeat_calls(rounds, repeat);
            assert_eq!(calls, expected, "pool {pool}, {rounds} rounds, repeat {repeat}, source thread: {as_source}");
            assert_eq!(sunk, (0..rounds).collect::<Vec<_>>());
        }
    }
    // Spelled out once: two reads, two writes, ..., and a lone last buffer.
    let (calls, _) = repeat_calls(4, 5, 2, true);
    assert_eq!(
        calls,
        [("read", 0), ("read", 1), ("write", 0), ("write", 1), ("read", 2), ("read", 3), ("write", 2), ("write", 3)]
            .into_iter()
            .chain([("read", 4), ("write", 4)])
            .collect::<Vec<_>>()
    );
}

#[test]
fn two_repeating_threads_share_a_just_large_enough_pool() {
    // Each thread may hold one buffer while waiting for a second: 3 is the least pool that moves.
    let sunk = within("two repeats", || {
        let mut sunk = Vec::new();
        Pipeline::new(3, |_| 0u64)
            .rounds(21)
            .thread(Thread::new("src").stage_fn("read", |_, _| Ok(())).repeat(2))
            .thread(Thread::new("mid").stage_fn("work", |_, _| Ok(())).repeat(2))
            .stage_fn("sink", |buf, _| {
                sunk.push(buf.seq());
                Ok(())
            })
            .run()
            .expect("a pool of 3 feeds two repeats of 2");
        sunk
    });
    assert_eq!(sunk, (0..21).collect::<Vec<_>>());
}

fn build_error(pipeline: Pipeline<'static, u64>) -> PipelineError {
    let error = within("validate", move || pipeline.run().map(|_| ())).expect_err("the pipeline must be refused");
    assert_eq!(error.phase, Phase::Build, "{error}");
    assert!(error.to_string().starts_with("pipeline: "), "{error}");
    error
}

#[test]
fn impossible_pipelines_are_refused_before_running() {
    let never = |_: &mut Buffer<u64>, _: &Context<'_, u64>| -> Result<(), StageError> { panic!("no stage may run") };
    // A repeat of 2 cannot be fed by a pool of 1.
    let error = build_error(
        Pipeline::new(1, |_| 0u64)
            .thread(Thread::new("io").stage_fn("read", never).stage_fn("write", never).repeat(2))
            .stage_fn("sink", never),
    );
    assert!(error.message.contains("needs at least 2"), "{error}");
    // Two repeats of 2 need 3 buffers.
    let error = build_error(
        Pipeline::new(2, |_| 0u64)
            .thread(Thread::new("a").stage_fn("a", never).repeat(2))
            .thread(Thread::new("b").stage_fn("b", never).repeat(2)),
    );
    assert!(error.message.contains("needs at least 3"), "{error}");
    build_error(Pipeline::new(4, |_| 0u64).thread(Thread::new("io").stage_fn("read", never).repeat(0)));
    build_error(Pipeline::new(4, |_| 0u64));
    build_error(Pipeline::new(0, |_| 0u64).stage_fn("source", never));
    build_error(Pipeline::new(4, |_| 0u64).stage_fn("source", never).thread(Thread::new("empty")));
    build_error(Pipeline::new(4, |_| 0u64).replicated("source", 2, |_| FnStage::new(never)).stage_fn("sink", never));
}

// ---------------------------------------------------------------------------
// The last buffer

type Seen = Vec<(String, u64, bool)>;

/// source -> pair(first, second) -> work x3 -> sink, recording every call as
/// (thread/stage, seq, is_last). The source marks the last buffer itself at
/// `mark_at`, if given.
fn last_flags(rounds: Option<u64>, mark_at: Option<u64>) -> Seen {
    within("last flag", move || {
        let log = Mutex::new(Vec::new());
        let seen = &log;
        let record = move |buf: &mut Buffer<u64>, ctx: &Context<'_, u64>| -> Result<(), StageError> {
            let name = if ctx.stage() == ctx.thread() || ctx.thread().starts_with("work#") {
                ctx.stage().to_string()
            } else {
                format!("{}/{}", ctx.thread(), ctx.stage())
            };
            seen.lock().unwrap().push((name, buf.seq(), buf.is_last()));
            Ok(())
        };
        let mut pipeline = Pipeline::new(4, |_| 0u64);
        if let Some(rounds) = rounds {
            pipeline = pipeline.rounds(rounds);
        }
        let report = pipeline
            .stage_fn("source", move |buf, ctx| {
                if Some(buf.seq()) == mark_at {
                    buf.mark_last();
                }
                record(buf, ctx)
            })
            .thread(Thread::new("pair").stage_fn("first", record).stage_fn("second", record))
            .replicated("work", 3, |_| {
                FnStage::new(move |buf: &mut Buffer<u64>, ctx: &Context<'_, u64>| {
                    std::thread::sleep(Duration::from_micros(scramble(buf.seq()) % 30));
                    record(buf, ctx)
                })
            })
            .stage_fn("sink", record)
            .run()
            .expect("the pipeline runs");
        let seen = log.into_inner().unwrap();
        let sunk = seen.iter().filter(|(name, ..)| name == "sink").count() as u64;
        assert_eq!(report.rounds, sunk, "Report::rounds counts the buffers that went through");
        seen
    })
}

fn check_last_seen_once(seen: &Seen, rounds: u64, how: &str) {
    for stage in ["source", "pair/first", "pair/second", "work", "sink"] {
        let calls: Vec<&(String, u64, bool)> = seen.iter().filter(|(name, ..)| name == stage).collect();
        let mut seqs: Vec<u64> = calls.iter().map(|c| c.1).collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            (0..rounds).collect::<Vec<_>>(),
            "{how}: {stage} processes every buffer once, none after the last"
        );
        let lasts: Vec<u64> = calls.iter().filter(|c| c.2).map(|c| c.1).collect();
        assert_eq!(lasts, [rounds - 1], "{how}: {stage} sees the last flag exactly once, on the last buffer");
    }
}

#[test]
fn every_stage_sees_the_last_buffer_once_with_rounds() {
    for rounds in [1, 2, 10, 37] {
        check_last_seen_once(&last_flags(Some(rounds), None), rounds, &format!("rounds({rounds})"));
    }
}

#[test]
fn every_stage_sees_the_last_buffer_once_when_the_source_marks_it() {
    for mark_at in [0, 3, 9, 40] {
        check_last_seen_once(&last_flags(None, Some(mark_at)), mark_at + 1, &format!("mark_last at {mark_at}"));
    }
    // Marking before the rounds run out ends the run there.
    check_last_seen_once(&last_flags(Some(20), Some(6)), 7, "rounds(20), mark_last at 6");
}

/// Per (thread, stage): inits, processes, cleanups, in a shared log.
#[derive(Default)]
struct Lives {
    log: Mutex<BTreeMap<(String, String), Vec<&'static str>>>,
}

impl Lives {
    fn note(&self, ctx: &Context<'_, u64>, what: &'static str) {
        let key = (ctx.thread().to_string(), ctx.stage().to_string());
        self.log.lock().unwrap().entry(key).or_default().push(what);
    }

    fn stage<'a>(&'a self, extra: impl Fn(&mut Buffer<u64>) -> Result<(), StageError> + Send + 'a) -> FnStage<'a, u64> {
        FnStage::new(move |buf, ctx| {
            self.note(ctx, "process");
            extra(buf)
        })
        .on_init(move |ctx| {
            self.note(ctx, "init");
            Ok(())
        })
        .on_cleanup(move |ctx| {
            self.note(ctx, "cleanup");
            Ok(())
        })
    }

    fn pipeline<'a>(
        &'a self,
        pool: usize,
        middle: impl Fn(&mut Buffer<u64>) -> Result<(), StageError> + Send + 'a,
    ) -> Pipeline<'a, u64> {
        Pipeline::new(pool, |_| 0u64)
            .stage("source", self.stage(|_| Ok(())))
            .thread(Thread::new("pair").stage("a", self.stage(|_| Ok(()))).stage("b", self.stage(middle)))
            .replicated("work", 3, |_| self.stage(|_| Ok(())))
            .stage("sink", self.stage(|_| Ok(())))
    }

    fn take(self) -> BTreeMap<(String, String), Vec<&'static str>> {
        self.log.into_inner().unwrap()
    }
}

const INSTANCES: [(&str, &str); 7] = [
    ("source", "source"),
    ("pair", "a"),
    ("pair", "b"),
    ("work#0", "work"),
    ("work#1", "work"),
    ("work#2", "work"),
    ("sink", "sink"),
];

fn count(calls: &[&str], what: &str) -> usize {
    calls.iter().filter(|&&c| c == what).count()
}

#[test]
fn rounds_zero_runs_init_and_cleanup_but_no_buffer() {
    let (result, log) = within("rounds(0)", || {
        let lives = Lives::default();
        let result = lives.pipeline(4, |_| Ok(())).rounds(0).run().map(|r| (r.rounds, r.buffers.len()));
        (result, lives.take())
    });
    assert_eq!(result.expect("rounds(0) runs"), (0, 4), "no rounds, and the whole pool back");
    let keys: BTreeSet<(&str, &str)> = log.keys().map(|(t, s)| (t.as_str(), s.as_str())).collect();
    assert_eq!(keys, INSTANCES.into_iter().collect(), "every stage instance ran");
    for (key, calls) in &log {
        assert_eq!(calls, &["init", "cleanup"], "{key:?}");
    }
}

#[test]
fn only_the_source_may_mark_the_last_buffer() {
    // A middle stage on a thread of its own, and the second stage of the source's thread.
    let error = within("mark_last in the middle", || {
        Pipeline::new(4, |_| 0u64)
            .rounds(100)
            .stage_fn("source", |_, _| Ok(()))
            .stage_fn("middle", |buf, _| {
                if buf.seq() == 3 {
                    buf.mark_last();
                }
                Ok(())
            })
            .stage_fn("sink", |_, _| Ok(()))
            .run()
            .map(|_| ())
            .expect_err("a middle stage may not end the run")
    });
    assert_eq!(
        (error.thread.as_str(), error.stage.as_str(), error.phase, error.seq),
        ("middle", "middle", Phase::Process, Some(3))
    );
    assert!(error.message.contains("only the first stage"), "{error}");

    let error = within("mark_last in the source's thread", || {
        Pipeline::new(4, |_| 0u64)
            .rounds(100)
            .thread(Thread::new("io").stage_fn("read", |_, _| Ok(())).stage_fn("check", |buf, _| {
                if buf.seq() == 5 {
                    buf.mark_last();
                }
                Ok(())
            }))
            .stage_fn("sink", |_, _| Ok(()))
            .run()
            .map(|_| ())
            .expect_err("only the first stage of the first thread is the source")
    });
    assert_eq!(
        (error.thread.as_str(), error.stage.as_str(), error.phase, error.seq),
        ("io", "check", Phase::Process, Some(5))
    );
}

// ---------------------------------------------------------------------------
// Init and cleanup

#[test]
fn init_and_cleanup_run_once_per_stage_instance() {
    let log = within("lives", || {
        let lives = Lives::default();
        let report = lives.pipeline(4, |_| Ok(())).rounds(25).run().expect("the pipeline runs");
        assert_eq!(report.rounds, 25);
        lives.take()
    });
    let keys: BTreeSet<(&str, &str)> = log.keys().map(|(t, s)| (t.as_str(), s.as_str())).collect();
    assert_eq!(keys, INSTANCES.into_iter().collect());
    let mut work = 0;
    for (key, calls) in &log {
        assert_eq!(calls.first(), Some(&"init"), "{key:?}: init comes first");
        assert_eq!(calls.last(), Some(&"cleanup"), "{key:?}: cleanup comes last");
        assert_eq!((count(calls, "init"), count(calls, "cleanup")), (1, 1), "{key:?}");
        if key.0.starts_with("work#") {
            work += count(calls, "process");
        } else {
            assert_eq!(count(calls, "process"), 25, "{key:?}");
        }
    }
    assert_eq!(work, 25);
}

#[test]
fn cleanup_runs_after_an_error() {
    let (error, log) = within("cleanup after error", || {
        let lives = Lives::default();
        let middle = |buf: &mut Buffer<u64>| if buf.seq() == 20 { fail("twenty".into()) } else { Ok(()) };
        let error = lives.pipeline(4, middle).rounds(1000).run().map(|_| ()).expect_err("stage b fails");
        (error, lives.take())
    });
    assert_eq!((error.thread.as_str(), error.stage.as_str(), error.seq), ("pair", "b", Some(20)));
    let b = &log[&("pair".to_string(), "b".to_string())];
    assert_eq!(b.last(), Some(&"cleanup"), "the failing stage is cleaned up too: {b:?}");
    for (key, calls) in &log {
        assert_eq!(count(calls, "init"), 1, "{key:?}");
        assert_eq!(count(calls, "cleanup"), 1, "{key:?}: every stage that ran init is cleaned up once");
        assert_eq!(calls.last(), Some(&"cleanup"), "{key:?}");
    }
}

#[test]
fn a_failed_cleanup_is_reported() {
    let error = within("cleanup error", || {
        Pipeline::new(2, |_| 0u64)
            .rounds(5)
            .stage_fn("source", |_, _| Ok(()))
            .stage("sink", FnStage::new(|_, _| Ok(())).on_cleanup(|_| fail("flush failed".into())))
            .run()
            .map(|_| ())
            .expect_err("a failed cleanup fails the run")
    });
    assert_eq!((error.stage.as_str(), error.phase, error.seq), ("sink", Phase::Cleanup, None));
    assert_eq!(error.to_string(), "stage 'sink' (thread sink) failed in cleanup: flush failed");
}

// ---------------------------------------------------------------------------
// Errors and panics

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// The stage returns an error on this buffer.
    Fail(&'static str, u64),
    /// The stage panics on this buffer.
    Panic(&'static str, u64),
    /// The stage's init fails (for "work": copy 1's only).
    Init(&'static str),
}

struct Injected {
    error: PipelineError,
    /// Process calls of the source, including a failing one.
    produced: u64,
    /// Which copy of "work" processed the failing buffer.
    failing_copy: Option<usize>,
    lives: BTreeMap<(String, String), Vec<&'static str>>,
}

const FAULT_POOL: usize = 4;
const LONG_RUN: u64 = 1_000_000;

/// source -> middle -> work x3 -> sink over many rounds, with one fault.
fn inject(fault: Fault) -> Injected {
    within(&format!("{fault:?}"), move || {
        let lives = Lives::default();
        let produced = AtomicU64::new(0);
        let failing_copy = Mutex::new(None);
        let (lives_ref, produced_ref, failing_copy_ref) = (&lives, &produced, &failing_copy);
        let stage = move |name: &'static str, copy: usize| {
            let process = move |buf: &mut Buffer<u64>, ctx: &Context<'_, u64>| -> Result<(), StageError> {
                lives_ref.note(ctx, "process");
                if name == "source" {
                    produced_ref.fetch_add(1, SeqCst);
                    buf.data = buf.seq();
                } else if buf.data != buf.seq() {
                    return fail(format!("{name} got buffer {} holding {}", buf.seq(), buf.data));
                }
                match fault {
                    Fault::Fail(at, seq) if at == name && seq == buf.seq() => {
                        *failing_copy_ref.lock().unwrap() = Some(copy);
                        fail(format!("injected at {seq}"))
                    }
                    Fault::Panic(at, seq) if at == name && seq == buf.seq() => {
                        *failing_copy_ref.lock().unwrap() = Some(copy);
                        panic!("boom at {seq}")
                    }
                    _ => Ok(()),
                }
            };
            FnStage::new(process)
                .on_init(move |ctx| {
                    lives_ref.note(ctx, "init");
                    match fault {
                        Fault::Init(at) if at == name && (name != "work" || copy == 1) => fail("no device".into()),
                        _ => Ok(()),
                    }
                })
                .on_cleanup(move |ctx| {
                    lives_ref.note(ctx, "cleanup");
                    Ok(())
                })
        };
        let error = Pipeline::new(FAULT_POOL, |_| 0u64)
            .rounds(LONG_RUN)
            .stage("source", stage("source", 0))
            .stage("middle", stage("middle", 0))
            .replicated("work", 3, |copy| stage("work", copy))
            .stage("sink", stage("sink", 0))
            .run()
            .map(|r| r.rounds)
            .expect_err("the injected fault fails the run");
        Injected {
            error,
            produced: produced.into_inner(),
            failing_copy: failing_copy.into_inner().unwrap(),
            lives: lives.take(),
        }
    })
}

/// The error names `thread`/`stage`/`phase`/`seq`, the source stopped soon
/// after, and every stage that ran init was cleaned up once.
fn check_fault(fault: Fault, run: &Injected, thread: &str, stage: &str, phase: Phase, seq: Option<u64>) {
    let error = &run.error;
    assert_eq!(
        (error.thread.as_str(), error.stage.as_str(), error.phase, error.seq),
        (thread, stage, phase, seq),
        "{fault:?}: {error}"
    );
    // Buffers after seq + pool cannot exist before the failing one comes back.
    // When one copy of "work" fails its init, the others may carry buffers
    // until that thread starts: then the run need only end early.
    let bound = match fault {
        Fault::Init("work") => LONG_RUN - 1,
        _ => seq.map_or(0, |s| s + 1) + FAULT_POOL as u64,
    };
    assert!(
        run.produced <= bound,
        "{fault:?}: the source went on to {} buffers of {LONG_RUN} (at most {bound} expected)",
        run.produced
    );
    for (key, calls) in &run.lives {
        let inits = count(calls, "init");
        assert_eq!(inits, 1, "{fault:?}: {key:?} ran init {inits} times");
        let cleanups = count(calls, "cleanup");
        let failed_init = matches!(fault, Fault::Init(_)) && key.0 == thread;
        assert_eq!(cleanups, usize::from(!failed_init), "{fault:?}: {key:?} cleaned up {cleanups} times");
    }
}

#[test]
fn an_error_in_the_source_stops_the_run() {
    let fault = Fault::Fail("source", 5);
    let run = inject(fault);
    check_fault(fault, &run, "source", "source", Phase::Process, Some(5));
    assert_eq!(run.produced, 6, "the source stops at its own error");
    assert_eq!(run.error.message, "injected at 5");
    assert_eq!(run.error.source.as_ref().map(|e| e.to_string()).as_deref(), Some("injected at 5"));
    assert!(std::error::Error::source(&run.error).is_some(), "the stage's error is the source");
    assert_eq!(run.error.to_string(), "stage 'source' (thread source) failed on buffer 5: injected at 5");
}

#[test]
fn an_error_in_a_middle_stage_stops_the_run() {
    let fault = Fault::Fail("middle", 7);
    let run = inject(fault);
    check_fault(fault, &run, "middle", "middle", Phase::Process, Some(7));
    assert_eq!(run.error.to_string(), "stage 'middle' (thread middle) failed on buffer 7: injected at 7");
}

#[test]
fn an_error_in_a_replicated_copy_stops_the_run() {
    let fault = Fault::Fail("work", 9);
    let run = inject(fault);
    let copy = run.failing_copy.expect("a copy failed");
    check_fault(fault, &run, &format!("work#{copy}"), "work", Phase::Process, Some(9));
}

#[test]
fn an_error_in_the_sink_stops_the_run() {
    let fault = Fault::Fail("sink", 11);
    let run = inject(fault);
    check_fault(fault, &run, "sink", "sink", Phase::Process, Some(11));
}

#[test]
fn an_error_in_init_stops_the_run() {
    let fault = Fault::Init("middle");
    let run = inject(fault);
    check_fault(fault, &run, "middle", "middle", Phase::Init, None);
    assert_eq!(run.error.to_string(), "stage 'middle' (thread middle) failed in init: no device");
    let middle = &run.lives[&("middle".to_string(), "middle".to_string())];
    assert_eq!(middle, &["init"], "a stage whose init failed neither processes nor cleans up");

    let fault = Fault::Init("work");
    let run = inject(fault);
    check_fault(fault, &run, "work#1", "work", Phase::Init, None);
}

#[test]
fn a_panic_in_a_stage_stops_the_run() {
    for (at, seq) in [("middle", 4), ("work", 2), ("sink", 0), ("source", 3)] {
        let fault = Fault::Panic(at, seq);
        let run = inject(fault);
        let copy = run.failing_copy.expect("the stage panicked");
        let thread = if at == "work" { format!("work#{copy}") } else { at.to_string() };
        check_fault(fault, &run, &thread, at, Phase::Process, Some(seq));
        assert!(
            run.error.message.contains("panicked") && run.error.message.contains(&format!("boom at {seq}")),
            "{}",
            run.error
        );
        assert!(run.error.source.is_none());
    }
}

// ---------------------------------------------------------------------------
// Queue lengths

#[test]
fn queue_lengths_are_readable_and_bounded_by_the_pool() {
    const POOL: usize = 5;
    let (source_in, middle_in, middle_out, sink_out) = within("queue lengths", || {
        let source_in = AtomicUsize::new(0);
        let middle_in = AtomicUsize::new(0);
        let middle_out = AtomicUsize::new(0);
        let sink_out = AtomicUsize::new(0);
        Pipeline::new(POOL, |_| 0u64)
            .rounds(60)
            .stage_fn("source", |_, ctx| {
                source_in.fetch_max(ctx.input_len(), SeqCst);
                Ok(())
            })
            .stage_fn("middle", |_, ctx| {
                middle_in.fetch_max(ctx.input_len(), SeqCst);
                middle_out.fetch_max(ctx.output_len(), SeqCst);
                Ok(())
            })
            .stage_fn("sink", |_, ctx| {
                sink_out.fetch_max(ctx.output_len(), SeqCst);
                std::thread::sleep(Duration::from_micros(200));
                Ok(())
            })
            .run()
            .expect("the pipeline runs");
        (source_in.into_inner(), middle_in.into_inner(), middle_out.into_inner(), sink_out.into_inner())
    });
    for (what, len) in [
        ("source input", source_in),
        ("middle input", middle_in),
        ("middle output", middle_out),
        ("sink output", sink_out),
    ] {
        assert!(len <= POOL, "{what} held {len} buffers, pool is {POOL}");
    }
    // The sink is slow, so the middle stage must have seen its output back up.
    assert!(middle_out >= 2, "the middle stage never saw its output queue back up ({middle_out})");
}

// ---------------------------------------------------------------------------
// Trait objects and borrowed data

#[derive(Debug, Default, PartialEq)]
struct ScaleStats {
    inits: u32,
    processed: u64,
    cleanups: u32,
}

/// A stage as a struct: scales by a factor and adds an offset from a table,
/// both borrowed from the caller.
struct Scale<'a> {
    factor: u64,
    offsets: &'a [u64],
    stats: &'a mut ScaleStats,
}

impl Stage<u64> for Scale<'_> {
    fn init(&mut self, ctx: &Context<'_, u64>) -> Result<(), StageError> {
        if ctx.stage() != "scale" {
            return fail(format!("init of {}", ctx.stage()));
        }
        self.stats.inits += 1;
        Ok(())
    }

    fn process(&mut self, buffer: &mut Buffer<u64>, _ctx: &Context<'_, u64>) -> Result<(), StageError> {
        if self.stats.inits != 1 {
            return fail("process before init".into());
        }
        buffer.data = buffer.data * self.factor + self.offsets[buffer.seq() as usize % self.offsets.len()];
        self.stats.processed += 1;
        Ok(())
    }

    fn cleanup(&mut self, _ctx: &Context<'_, u64>) -> Result<(), StageError> {
        self.stats.cleanups += 1;
        Ok(())
    }
}

#[test]
fn trait_object_stages_borrow_from_the_callers_stack() {
    let offsets = vec![5u64, 0, 2];
    let mut stats = ScaleStats::default();
    let mut second = ScaleStats::default();
    let mut total = 0u64;
    let mut sunk = Vec::new();
    let report = Pipeline::new(3, |_| 0u64)
        .rounds(30)
        .stage_fn("source", |buf, _| {
            buf.data = buf.seq();
            Ok(())
        })
        .stage("scale", Scale { factor: 10, offsets: &offsets, stats: &mut stats })
        .thread(Thread::new("more").stage("scale", Scale { factor: 2, offsets: &[1], stats: &mut second }))
        .stage_fn("sink", |buf, _| {
            total += buf.data;
            sunk.push(buf.data);
            Ok(())
        })
        .run()
        .expect("the pipeline runs");
    assert_eq!(report.rounds, 30);
    assert_eq!(stats, ScaleStats { inits: 1, processed: 30, cleanups: 1 });
    assert_eq!(second, ScaleStats { inits: 1, processed: 30, cleanups: 1 });
    let expected: Vec<u64> = (0..30u64).map(|s| (s * 10 + offsets[s as usize % 3]) * 2 + 1).collect();
    assert_eq!(sunk, expected);
    assert_eq!(total, expected.iter().sum::<u64>());
}
