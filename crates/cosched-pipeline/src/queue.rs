//! The queues between thread groups: a mutex-guarded ring that never grows
//! (its capacity is the pool size), an atomic copy of its length that anyone
//! may read without the lock, and a wait that spins, then yields, then sleeps.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::Buffer;

/// How a thread waits for its next buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Busy polls of the length before yielding.
    pub spins: u32,
    /// `sched_yield` calls before sleeping on the condition variable.
    pub yields: u32,
}

impl Default for WaitPolicy {
    /// Our choice, from the overhead benchmark on a 2-core VM, where a sleep
    /// and a wake-up cost tens of microseconds: a short spin catches a
    /// neighbour running on another CPU; up to 100 yields (about 20-100 µs)
    /// let a neighbour that shares our CPU run first. Waiting longer (for a
    /// disk, say) sleeps, so idle stages do not burn CPU time.
    fn default() -> Self {
        WaitPolicy { spins: 16, yields: 100 }
    }
}

pub(crate) enum Popped {
    Got,
    /// No more buffers will come (the upstream sent its last one).
    Closed,
    /// The pipeline is stopping after an error.
    Aborted,
}

struct Inner<T> {
    items: VecDeque<Box<Buffer<T>>>,
    sleepers: usize,
    closed: bool,
    aborted: bool,
}

pub(crate) struct Queue<T> {
    inner: Mutex<Inner<T>>,
    len: AtomicUsize,
    /// Set (with the lock held) when closed or aborted, so spinners notice.
    finished: AtomicUsize,
    wake: Condvar,
}

impl<T> Queue<T> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Queue {
            inner: Mutex::new(Inner {
                items: VecDeque::with_capacity(capacity),
                sleepers: 0,
                closed: false,
                aborted: false,
            }),
            len: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        // A panic while holding this lock cannot leave the ring inconsistent:
        // every critical section is a single push, pop or flag store.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The number of buffers waiting, read without the lock.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub(crate) fn push(&self, buffer: Box<Buffer<T>>) {
        let mut inner = self.lock();
        inner.items.push_back(buffer);
        self.len.store(inner.items.len(), Ordering::Release);
        let wake = inner.sleepers > 0;
        drop(inner);
        if wake {
            self.wake.notify_one();
        }
    }

    /// No more pushes will come; waiters drain what is left, then see `Closed`.
    pub(crate) fn close(&self) {
        self.set_flag(|inner| inner.closed = true);
    }

    /// Wakes every waiter with `Aborted`, whatever is queued.
    pub(crate) fn abort(&self) {
        self.set_flag(|inner| inner.aborted = true);
    }

    fn set_flag(&self, set: impl FnOnce(&mut Inner<T>)) {
        let mut inner = self.lock();
        set(&mut inner);
        self.finished.store(1, Ordering::Release);
        drop(inner);
        self.wake.notify_all();
    }

    /// Takes between `min` and `max` buffers into `out` (fewer than `min` only
    /// when the queue is closed), waiting as `wait` says.
    pub(crate) fn pop(&self, min: usize, max: usize, out: &mut Vec<Box<Buffer<T>>>, wait: WaitPolicy) -> Popped {
        self.wait_briefly(min, wait);
        let mut inner = self.lock();
        loop {
            if inner.aborted {
                return Popped::Aborted;
            }
            if inner.items.len() >= min || (inner.closed && !inner.items.is_empty()) {
                let take = inner.items.len().min(max);
                out.extend(inner.items.drain(..take));
                self.len.store(inner.items.len(), Ordering::Release);
                return Popped::Got;
            }
            if inner.closed {
                return Popped::Closed;
            }
            inner.sleepers += 1;
            inner = self.wake.wait(inner).unwrap_or_else(|poisoned| poisoned.into_inner());
            inner.sleepers -= 1;
        }
    }

    fn wait_briefly(&self, min: usize, wait: WaitPolicy) {
        let ready = || self.len() >= min || self.finished.load(Ordering::Acquire) != 0;
        for _ in 0..wait.spins {
            if ready() {
                return;
            }
            std::hint::spin_loop();
        }
        for _ in 0..wait.yields {
            if ready() {
                return;
            }
            std::thread::yield_now();
        }
    }
}
