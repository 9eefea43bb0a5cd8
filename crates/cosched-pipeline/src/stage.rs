//! What a stage is: a function over one buffer at a time, with optional
//! `init` and `cleanup`, and the context it may read while it runs.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::queue::Queue;

/// What a stage returns when it fails; the pipeline stops and hands it back.
pub type StageError = Box<dyn std::error::Error + Send + Sync>;

/// One block of data on its way through the pipeline. The framework owns it:
/// it comes from a fixed pool and goes back there after the last stage.
#[derive(Debug)]
pub struct Buffer<T> {
    pub data: T,
    seq: u64,
    last: bool,
}

impl<T> Buffer<T> {
    pub(crate) fn new(data: T) -> Self {
        Buffer { data, seq: 0, last: false }
    }

    pub(crate) fn start_round(&mut self, seq: u64, last: bool) {
        self.seq = seq;
        self.last = last;
    }

    /// The round this buffer carries, counted from 0 in the order the first
    /// stage produced them.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// True for the last buffer of the run: every stage sees it exactly once.
    pub fn is_last(&self) -> bool {
        self.last
    }

    /// Called by the first stage to end the run with this buffer. Any other
    /// stage that calls it stops the pipeline with an error.
    pub fn mark_last(&mut self) {
        self.last = true;
    }
}

/// What a running stage may know about its place in the pipeline.
pub struct Context<'a, T> {
    pub(crate) thread: &'a str,
    pub(crate) stage: &'a str,
    pub(crate) copy: usize,
    pub(crate) input: &'a Queue<T>,
    pub(crate) output: &'a Queue<T>,
    pub(crate) stopping: &'a AtomicBool,
}

impl<T> Context<'_, T> {
    /// The thread group's name.
    pub fn thread(&self) -> &str {
        self.thread
    }
    pub fn stage(&self) -> &str {
        self.stage
    }
    /// Which copy of a replicated group this is (0 when not replicated).
    pub fn copy(&self) -> usize {
        self.copy
    }
    /// Buffers waiting in this thread's input queue (for the first thread:
    /// free buffers in the pool). One atomic load, no lock.
    pub fn input_len(&self) -> usize {
        self.input.len()
    }
    /// Buffers waiting in this thread's output queue. One atomic load, no lock.
    pub fn output_len(&self) -> usize {
        self.output.len()
    }
    /// True once another stage has failed: a long stage may return early.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}

/// A stage as a trait object; closures can use [`crate::Pipeline::stage_fn`].
pub trait Stage<T>: Send {
    /// Runs on the stage's thread, after its priority controls, before any buffer.
    fn init(&mut self, _ctx: &Context<'_, T>) -> Result<(), StageError> {
        Ok(())
    }
    fn process(&mut self, buffer: &mut Buffer<T>, ctx: &Context<'_, T>) -> Result<(), StageError>;
    /// Runs after the last buffer, or when the pipeline stops early.
    fn cleanup(&mut self, _ctx: &Context<'_, T>) -> Result<(), StageError> {
        Ok(())
    }
}

type ProcessFn<'a, T> = Box<dyn FnMut(&mut Buffer<T>, &Context<'_, T>) -> Result<(), StageError> + Send + 'a>;
type HookFn<'a, T> = Box<dyn FnMut(&Context<'_, T>) -> Result<(), StageError> + Send + 'a>;

/// A stage made of closures.
pub struct FnStage<'a, T> {
    process: ProcessFn<'a, T>,
    init: Option<HookFn<'a, T>>,
    cleanup: Option<HookFn<'a, T>>,
}

impl<'a, T> FnStage<'a, T> {
    pub fn new(process: impl FnMut(&mut Buffer<T>, &Context<'_, T>) -> Result<(), StageError> + Send + 'a) -> Self {
        FnStage { process: Box::new(process), init: None, cleanup: None }
    }
    pub fn on_init(mut self, init: impl FnMut(&Context<'_, T>) -> Result<(), StageError> + Send + 'a) -> Self {
        self.init = Some(Box::new(init));
        self
    }
    pub fn on_cleanup(mut self, cleanup: impl FnMut(&Context<'_, T>) -> Result<(), StageError> + Send + 'a) -> Self {
        self.cleanup = Some(Box::new(cleanup));
        self
    }
}

impl<T> Stage<T> for FnStage<'_, T> {
    fn init(&mut self, ctx: &Context<'_, T>) -> Result<(), StageError> {
        self.init.as_mut().map_or(Ok(()), |f| f(ctx))
    }
    fn process(&mut self, buffer: &mut Buffer<T>, ctx: &Context<'_, T>) -> Result<(), StageError> {
        (self.process)(buffer, ctx)
    }
    fn cleanup(&mut self, ctx: &Context<'_, T>) -> Result<(), StageError> {
        self.cleanup.as_mut().map_or(Ok(()), |f| f(ctx))
    }
}
