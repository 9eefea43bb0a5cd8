//! The queues between thread groups: a lock-free bounded ring whose length
//! anyone may read, and a wait that spins, then yields, then sleeps.

use std::sync::atomic::{fence, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;

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
    /// and a wake-up cost tens of microseconds: no spinning (it only delayed
    /// a neighbour sharing our CPU), then up to 100 yields (about 20-100 µs),
    /// which let such a neighbour run first. Waiting longer (for a disk, say)
    /// sleeps, so idle stages do not burn CPU time.
    fn default() -> Self {
        WaitPolicy { spins: 0, yields: 100 }
    }
}

pub(crate) enum Popped {
    Got,
    /// No more buffers will come (the upstream sent its last one).
    Closed,
    /// The pipeline is stopping after an error.
    Aborted,
}

const CLOSED: u8 = 1;
const ABORTED: u8 = 2;

/// A bounded lock-free ring (its capacity is the pool size, so a push never
/// finds it full); the lock and condition variable are only for sleepers.
pub(crate) struct Queue<T> {
    items: ArrayQueue<Box<Buffer<T>>>,
    flags: AtomicU8,
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

/// A sleeper re-checks at least this often: a safety net, not the wake-up path.
const SLEEP_RECHECK: Duration = Duration::from_millis(50);

impl<T> Queue<T> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Queue {
            items: ArrayQueue::new(capacity.max(1)),
            flags: AtomicU8::new(0),
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// The number of buffers waiting, read without a lock.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn push(&self, buffer: Box<Buffer<T>>) {
        if self.items.push(buffer).is_err() {
            unreachable!("a queue holds the whole pool, so it is never full");
        }
        // Pairs with the sleeper's increment-then-check: either it sees the
        // buffer or we see it asleep.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake_all();
        }
    }

    fn wake_all(&self) {
        let _guard = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
        self.wake.notify_all();
    }

    /// No more pushes will come; waiters drain what is left, then see `Closed`.
    pub(crate) fn close(&self) {
        self.flags.fetch_or(CLOSED, Ordering::SeqCst);
        self.wake_all();
    }

    /// Wakes every waiter with `Aborted`, whatever is queued.
    pub(crate) fn abort(&self) {
        self.flags.fetch_or(ABORTED, Ordering::SeqCst);
        self.wake_all();
    }

    fn ready(&self, min: usize) -> bool {
        self.flags.load(Ordering::SeqCst) != 0 || self.items.len() >= min
    }

    /// Takes between `min` and `max` buffers into `out` (fewer than `min` only
    /// when the queue is closed, or when another consumer took some first),
    /// waiting as `wait` says.
    pub(crate) fn pop(&self, min: usize, max: usize, out: &mut Vec<Box<Buffer<T>>>, wait: WaitPolicy) -> Popped {
        loop {
            let flags = self.flags.load(Ordering::SeqCst);
            if flags & ABORTED != 0 {
                return Popped::Aborted;
            }
            if self.items.len() >= min || flags & CLOSED != 0 {
                let before = out.len();
                while out.len() - before < max {
                    match self.items.pop() {
                        Some(buffer) => out.push(buffer),
                        None => break,
                    }
                }
                if out.len() > before {
                    return Popped::Got;
                }
                if flags & CLOSED != 0 {
                    return Popped::Closed;
                }
            }
            self.wait_for(min, wait);
        }
    }

    fn wait_for(&self, min: usize, wait: WaitPolicy) {
        for _ in 0..wait.spins {
            if self.ready(min) {
                return;
            }
            std::hint::spin_loop();
        }
        for _ in 0..wait.yields {
            if self.ready(min) {
                return;
            }
            std::thread::yield_now();
        }
        let guard = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if !self.ready(min) {
            let _ = self.wake.wait_timeout(guard, SLEEP_RECHECK);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}
