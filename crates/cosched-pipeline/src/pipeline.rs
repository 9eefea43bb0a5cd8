//! Building a pipeline of thread groups and running it to the end.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::priority::{self, Adjust, AdjustEvent, Adjuster, ControlOutcome, Priority};
use crate::queue::{Popped, Queue, WaitPolicy};
use crate::stage::{Buffer, Context, FnStage, Stage, StageError};

type BoxedStage<'a, T> = Box<dyn Stage<T> + 'a>;

/// One thread's stages (several make a multistage thread), in order.
pub struct Thread<'a, T> {
    name: String,
    stages: Vec<(String, BoxedStage<'a, T>)>,
    repeat: usize,
}

impl<'a, T: 'a> Thread<'a, T> {
    pub fn new(name: impl Into<String>) -> Self {
        Thread { name: name.into(), stages: Vec::new(), repeat: 1 }
    }
    pub fn stage(mut self, name: impl Into<String>, stage: impl Stage<T> + 'a) -> Self {
        self.stages.push((name.into(), Box::new(stage)));
        self
    }
    pub fn stage_fn(
        self,
        name: impl Into<String>,
        process: impl FnMut(&mut Buffer<T>, &Context<'_, T>) -> Result<(), StageError> + Send + 'a,
    ) -> Self {
        self.stage(name, FnStage::new(process))
    }
    /// Multistage repeat: take `times` buffers, run the first stage on each,
    /// then the next stage on each, and so on (e.g. two reads, then two writes).
    pub fn repeat(mut self, times: usize) -> Self {
        self.repeat = times;
        self
    }
}

/// A thread and its copies (fork/join), with their scheduling.
struct Group<'a, T> {
    name: String,
    copies: Vec<Vec<(String, BoxedStage<'a, T>)>>,
    repeat: usize,
    priority: Priority,
    adjust: Adjust,
}

/// A pipeline: a fixed pool of buffers and the thread groups they go through.
pub struct Pipeline<'a, T> {
    buffers: Vec<T>,
    groups: Vec<Group<'a, T>>,
    rounds: Option<u64>,
    wait: WaitPolicy,
}

/// Where in a stage's life an error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Build,
    Init,
    Process,
    Cleanup,
}

/// The first error of a run: which stage, on which buffer, and why.
#[derive(Debug)]
pub struct PipelineError {
    pub thread: String,
    pub stage: String,
    pub phase: Phase,
    pub seq: Option<u64>,
    pub message: String,
    pub source: Option<StageError>,
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.phase == Phase::Build {
            return write!(f, "pipeline: {}", self.message);
        }
        write!(f, "stage '{}' (thread {}) failed", self.stage, self.thread)?;
        match (self.phase, self.seq) {
            (Phase::Process, Some(seq)) => write!(f, " on buffer {seq}")?,
            (Phase::Init, _) => f.write_str(" in init")?,
            (Phase::Cleanup, _) => f.write_str(" in cleanup")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PipelineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

fn build_error(message: String) -> PipelineError {
    PipelineError { thread: String::new(), stage: String::new(), phase: Phase::Build, seq: None, message, source: None }
}

/// What one thread did.
#[derive(Debug, Clone)]
pub struct ThreadReport {
    /// `name` or `name#copy` for replicated groups.
    pub thread: String,
    pub tid: i32,
    pub buffers: u64,
}

/// A finished run.
#[derive(Debug)]
pub struct Report<T> {
    /// The pool, handed back for reuse.
    pub buffers: Vec<T>,
    pub rounds: u64,
    pub threads: Vec<ThreadReport>,
    /// Every fixed control, applied or refused.
    pub controls: Vec<ControlOutcome>,
    /// Every change an adjusting stage made.
    pub adjustments: Vec<AdjustEvent>,
}

impl<T> Report<T> {
    /// The controls the kernel refused, for the caller to show.
    pub fn refused(&self) -> impl Iterator<Item = &ControlOutcome> {
        self.controls.iter().filter(|c| c.result.is_err())
    }
}

impl<'a, T: Send + 'a> Pipeline<'a, T> {
    /// A pipeline over `pool` buffers, made once by `make(index)` and recycled.
    pub fn new(pool: usize, make: impl FnMut(usize) -> T) -> Self {
        Pipeline {
            buffers: (0..pool).map(make).collect(),
            groups: Vec::new(),
            rounds: None,
            wait: WaitPolicy::default(),
        }
    }

    /// A pipeline over buffers made beforehand (e.g. the pool of an earlier run).
    pub fn with_buffers(buffers: Vec<T>) -> Self {
        Pipeline { buffers, groups: Vec::new(), rounds: None, wait: WaitPolicy::default() }
    }

    /// Run exactly `rounds` buffers (the framework marks the last one);
    /// without it, the first stage calls [`Buffer::mark_last`].
    pub fn rounds(mut self, rounds: u64) -> Self {
        self.rounds = Some(rounds);
        self
    }

    pub fn wait_policy(mut self, wait: WaitPolicy) -> Self {
        self.wait = wait;
        self
    }

    /// A stage on a thread of its own.
    pub fn stage(self, name: impl Into<String>, stage: impl Stage<T> + 'a) -> Self {
        let name = name.into();
        self.thread(Thread::new(name.clone()).stage(name, stage))
    }

    /// A closure stage on a thread of its own.
    pub fn stage_fn(
        self,
        name: impl Into<String>,
        process: impl FnMut(&mut Buffer<T>, &Context<'_, T>) -> Result<(), StageError> + Send + 'a,
    ) -> Self {
        self.stage(name, FnStage::new(process))
    }

    /// A multistage thread.
    pub fn thread(mut self, thread: Thread<'a, T>) -> Self {
        self.groups.push(Group {
            name: thread.name,
            copies: vec![thread.stages],
            repeat: thread.repeat,
            priority: Priority::default(),
            adjust: Adjust::Off,
        });
        self
    }

    /// Fork/join: `copies` threads, each with its own stage from `make(copy)`,
    /// take buffers as they come; their output rejoins in order.
    pub fn replicated<S: Stage<T> + 'a>(
        mut self,
        name: impl Into<String>,
        copies: usize,
        mut make: impl FnMut(usize) -> S,
    ) -> Self {
        let name = name.into();
        let copies = (0..copies).map(|copy| vec![(name.clone(), Box::new(make(copy)) as BoxedStage<'a, T>)]).collect();
        self.groups.push(Group { name, copies, repeat: 1, priority: Priority::default(), adjust: Adjust::Off });
        self
    }

    /// Fixed scheduling for the thread group added last.
    pub fn priority(mut self, priority: Priority) -> Self {
        if let Some(group) = self.groups.last_mut() {
            group.priority = priority;
        }
        self
    }

    /// Adjusting scheduling for the thread group added last.
    pub fn adjust(mut self, adjust: Adjust) -> Self {
        if let Some(group) = self.groups.last_mut() {
            group.adjust = adjust;
        }
        self
    }

    /// Adjusting scheduling for every thread group.
    pub fn adjust_all(mut self, adjust: Adjust) -> Self {
        self.groups.iter_mut().for_each(|g| g.adjust = adjust);
        self
    }

    fn validate(&self) -> Result<(), PipelineError> {
        let pool = self.buffers.len();
        let first = self.groups.first().ok_or_else(|| build_error("no stages".into()))?;
        if pool == 0 {
            return Err(build_error("the buffer pool is empty".into()));
        }
        if first.copies.len() != 1 {
            return Err(build_error(format!(
                "the first thread '{}' makes the buffers in order; it cannot be replicated",
                first.name
            )));
        }
        for group in &self.groups {
            if group.copies.is_empty() || group.copies.iter().any(|c| c.is_empty()) {
                return Err(build_error(format!("thread '{}' has no stages", group.name)));
            }
            if group.repeat == 0 {
                return Err(build_error(format!("thread '{}': repeat must be at least 1", group.name)));
            }
        }
        // Each group may hold repeat-1 buffers while it waits for more; one
        // more must exist for the pipeline to move.
        let held: usize = self.groups.iter().map(|g| g.repeat - 1).sum();
        if pool <= held {
            return Err(build_error(format!(
                "a pool of {pool} buffers cannot feed these repeats: it needs at least {}",
                held + 1
            )));
        }
        Ok(())
    }

    /// Runs the pipeline to its last buffer, or to the first error.
    pub fn run(self) -> Result<Report<T>, PipelineError> {
        self.validate()?;
        let Pipeline { buffers, groups, rounds, wait } = self;
        let pool_size = buffers.len();
        let queues: Vec<Queue<T>> = (0..groups.len()).map(|_| Queue::with_capacity(pool_size)).collect();
        for data in buffers {
            queues[0].push(Box::new(Buffer::new(data)));
        }
        let shared =
            Shared { queues: &queues, stopping: AtomicBool::new(false), error: Mutex::new(None), wait, pool_size };
        if rounds == Some(0) {
            // No buffer will flow: every thread after the first finds its input closed.
            queues.iter().skip(1).for_each(Queue::close);
        }
        let joiners: Vec<Option<Joiner<T>>> = (0..groups.len())
            .map(|g| (groups[g].copies.len() > 1 && g + 1 < groups.len()).then(|| Joiner::new(pool_size)))
            .collect();
        let mut results = Vec::new();
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for (index, group) in groups.into_iter().enumerate() {
                let replicated = group.copies.len() > 1;
                for (copy, stages) in group.copies.into_iter().enumerate() {
                    let worker = Worker {
                        name: if replicated { format!("{}#{copy}", group.name) } else { group.name.clone() },
                        index,
                        copy,
                        stages,
                        repeat: group.repeat,
                        priority: group.priority.clone(),
                        adjust: group.adjust,
                        rounds,
                        joiner: joiners[index].as_ref(),
                        shared: &shared,
                    };
                    handles.push(scope.spawn(move || worker.run()));
                }
            }
            results = handles.into_iter().map(|h| h.join().expect("worker threads catch stage panics")).collect();
        });
        if let Some(error) = shared.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(error);
        }
        let mut report = Report {
            buffers: Vec::new(),
            rounds: 0,
            threads: Vec::new(),
            controls: Vec::new(),
            adjustments: Vec::new(),
        };
        for outcome in results {
            report.rounds = report.rounds.max(outcome.last_seq.map_or(0, |s| s + 1));
            report.threads.push(outcome.thread);
            report.controls.extend(outcome.controls);
            report.adjustments.extend(outcome.adjustments);
        }
        let mut pool = Vec::with_capacity(pool_size);
        let mut all = Vec::with_capacity(pool_size);
        for queue in &queues {
            while queue.len() > 0 {
                queue.pop(1, pool_size, &mut pool, WaitPolicy { spins: 0, yields: 0 });
                all.append(&mut pool);
            }
        }
        for joiner in joiners.into_iter().flatten() {
            all.extend(joiner.into_buffers());
        }
        report.buffers = all.into_iter().map(|b| b.data).collect();
        Ok(report)
    }
}

/// What all the threads of a run share.
struct Shared<'q, T> {
    queues: &'q [Queue<T>],
    stopping: AtomicBool,
    error: Mutex<Option<PipelineError>>,
    wait: WaitPolicy,
    pool_size: usize,
}

impl<T> Shared<'_, T> {
    /// Records the first error and wakes every thread so that all stop.
    fn fail(&self, error: PipelineError) {
        let mut first = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(error);
        }
        drop(first);
        self.stopping.store(true, Ordering::Release);
        self.queues.iter().for_each(Queue::abort);
    }
}

/// Puts the output of a replicated group back in order. Slots are indexed by
/// `seq % pool`, which is unique among the buffers in flight.
struct Joiner<T> {
    /// The next seq to release, and the slots.
    state: Mutex<(u64, Vec<Slot<T>>)>,
}

type Slot<T> = Option<Box<Buffer<T>>>;

impl<T> Joiner<T> {
    fn new(pool: usize) -> Self {
        Joiner { state: Mutex::new((0, (0..pool).map(|_| None).collect())) }
    }

    fn deliver(&self, buffer: Box<Buffer<T>>, out: &Queue<T>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (next, slots) = &mut *state;
        let pool = slots.len() as u64;
        let slot = (buffer.seq() % pool) as usize;
        slots[slot] = Some(buffer);
        while let Some(ready) = slots[(*next % pool) as usize].take() {
            let last = ready.is_last();
            out.push(ready);
            *next += 1;
            if last {
                out.close();
                break;
            }
        }
    }

    fn into_buffers(self) -> impl Iterator<Item = Box<Buffer<T>>> {
        self.state.into_inner().unwrap_or_else(|p| p.into_inner()).1.into_iter().flatten()
    }
}

struct WorkerOutcome {
    thread: ThreadReport,
    last_seq: Option<u64>,
    controls: Vec<ControlOutcome>,
    adjustments: Vec<AdjustEvent>,
}

/// One thread of one group.
struct Worker<'s, 'q, 'a, T> {
    name: String,
    index: usize,
    copy: usize,
    stages: Vec<(String, BoxedStage<'a, T>)>,
    repeat: usize,
    priority: Priority,
    adjust: Adjust,
    rounds: Option<u64>,
    joiner: Option<&'s Joiner<T>>,
    shared: &'s Shared<'q, T>,
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".to_string())
}

impl<T> Worker<'_, '_, '_, T> {
    fn input(&self) -> &Queue<T> {
        &self.shared.queues[self.index]
    }

    fn output(&self) -> &Queue<T> {
        &self.shared.queues[(self.index + 1) % self.shared.queues.len()]
    }

    fn is_last_group(&self) -> bool {
        self.index + 1 == self.shared.queues.len()
    }

    /// Calls `f` on stage `i`, turning an error or a panic into a pipeline failure.
    fn call(
        &mut self,
        i: usize,
        phase: Phase,
        seq: Option<u64>,
        f: impl FnOnce(&mut BoxedStage<'_, T>, &Context<'_, T>) -> Result<(), StageError>,
    ) -> bool {
        let shared = self.shared;
        let (name, stage) = &mut self.stages[i];
        let ctx = Context {
            thread: &self.name,
            stage: name,
            copy: self.copy,
            input: &shared.queues[self.index],
            output: &shared.queues[(self.index + 1) % shared.queues.len()],
            stopping: &shared.stopping,
        };
        let failure = match catch_unwind(AssertUnwindSafe(|| f(stage, &ctx))) {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => (e.to_string(), Some(e)),
            Err(panic) => (format!("panicked: {}", panic_message(panic)), None),
        };
        let (message, source) = failure;
        shared.fail(PipelineError { thread: self.name.clone(), stage: name.clone(), phase, seq, message, source });
        false
    }

    fn run(mut self) -> WorkerOutcome {
        let tid = priority::current_tid();
        let controls = priority::apply(&self.priority)
            .into_iter()
            .map(|(control, result)| ControlOutcome { thread: self.name.clone(), tid, control, result })
            .collect();
        let mut outcome = WorkerOutcome {
            thread: ThreadReport { thread: self.name.clone(), tid, buffers: 0 },
            last_seq: None,
            controls,
            adjustments: Vec::new(),
        };
        let mut initialised = 0;
        while initialised < self.stages.len() && self.call(initialised, Phase::Init, None, |s, ctx| s.init(ctx)) {
            initialised += 1;
        }
        if initialised == self.stages.len() {
            self.flow(&mut outcome);
        }
        for i in 0..initialised {
            self.call(i, Phase::Cleanup, None, |s, ctx| s.cleanup(ctx));
        }
        outcome
    }

    /// Moves buffers until the last one, a closed input, or an abort.
    fn flow(&mut self, outcome: &mut WorkerOutcome) {
        let mut adjuster = (self.adjust != Adjust::Off && !self.is_last_group()).then(|| Adjuster::new(self.adjust));
        let mut batch: Vec<Box<Buffer<T>>> = Vec::with_capacity(self.shared.pool_size);
        let mut next_seq = 0u64;
        if self.index == 0 && self.rounds == Some(0) {
            return;
        }
        loop {
            // Exactly `repeat` buffers (fewer at the end): taking all that wait
            // would let one thread hold the whole pool and the stages stop overlapping.
            match self.input().pop(self.repeat, self.repeat, &mut batch, self.shared.wait) {
                Popped::Got => {}
                Popped::Closed | Popped::Aborted => return,
            }
            if self.index == 0 && !self.produce(&mut batch, &mut next_seq) {
                return;
            }
            let Some(saw_last) = self.process_batch(&mut batch, outcome) else {
                return;
            };
            for buffer in batch.drain(..) {
                let seq = buffer.seq();
                self.convey(buffer);
                if let Some(event) = adjuster.as_mut().and_then(|a| a.observe(&self.name, seq, self.output().len())) {
                    outcome.adjustments.push(event);
                }
            }
            if saw_last {
                if self.joiner.is_none() && !self.is_last_group() {
                    self.output().close();
                }
                return;
            }
        }
    }

    /// The first thread: numbers fresh buffers and runs the source stage on
    /// them; buffers after the last one go straight back to the pool.
    fn produce(&mut self, batch: &mut Vec<Box<Buffer<T>>>, next_seq: &mut u64) -> bool {
        let mut keep = batch.len();
        for (i, buffer) in batch.iter_mut().enumerate() {
            let seq = *next_seq;
            *next_seq += 1;
            buffer.start_round(seq, self.rounds.is_some_and(|n| seq + 1 == n));
            let buf: &mut Buffer<T> = buffer;
            if !self.call(0, Phase::Process, Some(seq), |s, ctx| s.process(buf, ctx)) {
                return false;
            }
            if buffer.is_last() {
                keep = i + 1;
                break;
            }
        }
        for spare in batch.drain(keep..) {
            self.input().push(spare);
        }
        true
    }

    /// Runs the thread's stages over the batch, stage after stage (the first
    /// thread's source stage has already run). Returns whether the batch held
    /// the last buffer, or `None` after a failure.
    fn process_batch(&mut self, batch: &mut [Box<Buffer<T>>], outcome: &mut WorkerOutcome) -> Option<bool> {
        let first_stage = usize::from(self.index == 0);
        for i in first_stage..self.stages.len() {
            for buffer in batch.iter_mut() {
                let (seq, was_last) = (buffer.seq(), buffer.is_last());
                let buf: &mut Buffer<T> = buffer;
                if !self.call(i, Phase::Process, Some(seq), |s, ctx| s.process(buf, ctx)) {
                    return None;
                }
                if buffer.is_last() != was_last {
                    let stage = self.stages[i].0.clone();
                    self.shared.fail(PipelineError {
                        thread: self.name.clone(),
                        stage,
                        phase: Phase::Process,
                        seq: Some(seq),
                        message: "only the first stage may mark the last buffer".into(),
                        source: None,
                    });
                    return None;
                }
            }
        }
        outcome.thread.buffers += batch.len() as u64;
        let last = batch.iter().find(|b| b.is_last()).map(|b| b.seq());
        outcome.last_seq = outcome.last_seq.max(batch.last().map(|b| b.seq()));
        Some(last.is_some())
    }

    fn convey(&self, buffer: Box<Buffer<T>>) {
        match self.joiner {
            Some(joiner) => joiner.deliver(buffer, self.output()),
            None => self.output().push(buffer),
        }
    }
}
