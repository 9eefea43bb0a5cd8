//! Ping-pong through shared memory between two threads of this process.
//!
//! Each direction has a mailbox: a buffer of atomic 64-bit words (the
//! doubles' bits) and a sequence word. The sender stores the message words
//! (relaxed), then the message's sequence number (release); the receiver
//! polls the sequence word (acquire) until the number it expects appears and
//! then copies the words out. That is what an MPI shared-memory transport does
//! (copy in, flag, poll, copy out) without `unsafe`: the workspace forbids the
//! raw mappings a cross-process segment would need. A mailbox is not written
//! again before its message was read, because the next ping waits for the pong.

use super::{add_echo_cpu, echo_cpu_per_chunk, time_chunks, Chunk, Link, Plan, Wait};
use crate::os;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

/// Keeps a sequence word on a cache line (pair) of its own, so that polling it
/// does not contend with the stores of the message words.
#[repr(align(128))]
struct Padded(AtomicU64);

struct Mailbox {
    seq: Padded,
    words: Vec<AtomicU64>,
}

impl Mailbox {
    fn new(capacity_words: usize) -> Mailbox {
        Mailbox { seq: Padded(AtomicU64::new(0)), words: (0..capacity_words).map(|_| AtomicU64::new(0)).collect() }
    }

    fn send(&self, seq: u64, message: &[u64]) {
        for (word, &value) in self.words.iter().zip(message) {
            word.store(value, Ordering::Relaxed);
        }
        self.seq.0.store(seq, Ordering::Release);
    }

    fn receive(&self, seq: u64, message: &mut [u64], wait: Wait) {
        while self.seq.0.load(Ordering::Acquire) != seq {
            match wait {
                Wait::Spin => std::hint::spin_loop(),
                Wait::Yield => std::thread::yield_now(),
            }
        }
        for (value, word) in message.iter_mut().zip(&self.words) {
            *value = word.load(Ordering::Relaxed);
        }
    }
}

pub(super) struct ShmLink {
    ping: Mailbox,
    pong: Mailbox,
    echo_cpu: usize,
    wait: Wait,
}

impl ShmLink {
    pub(super) fn new(capacity_doubles: usize, echo_cpu: usize, wait: Wait) -> ShmLink {
        ShmLink { ping: Mailbox::new(capacity_doubles), pong: Mailbox::new(capacity_doubles), echo_cpu, wait }
    }

    /// The echoing thread: its CPU time per chunk.
    fn echo(&self, plan: Plan, start: &Barrier) -> Vec<u64> {
        // A failure here must not leave the pinger waiting for a thread that gave up: go on unpinned.
        if let Err(e) = os::pin_current_thread(self.echo_cpu) {
            eprintln!("warning: {e}; the echo thread is not pinned");
        }
        let mut message = vec![0u64; plan.doubles];
        let mut seq = 0;
        start.wait();
        let echo_one = || {
            seq += 1;
            self.ping.receive(seq, &mut message, self.wait);
            self.pong.send(seq, &message);
            Ok(())
        };
        echo_cpu_per_chunk(plan, echo_one).expect("echoing through memory cannot fail")
    }
}

impl Link for ShmLink {
    fn batch(&mut self, plan: Plan) -> Result<Vec<Chunk>, String> {
        if plan.doubles > self.ping.words.len() {
            return Err(format!("{} doubles exceed the mailbox of {}", plan.doubles, self.ping.words.len()));
        }
        // No thread uses the mailboxes between batches: each batch counts from 1.
        self.ping.seq.0.store(0, Ordering::Relaxed);
        self.pong.seq.0.store(0, Ordering::Relaxed);
        let start = Barrier::new(2);
        let this = &*self;
        std::thread::scope(|s| {
            let echo = s.spawn(|| this.echo(plan, &start));
            let mut message: Vec<u64> = (0..plan.doubles as u64).map(|i| (i as f64).to_bits()).collect();
            let mut seq = 0;
            start.wait();
            let mut chunks = time_chunks(plan, || {
                seq += 1;
                this.ping.send(seq, &message);
                this.pong.receive(seq, &mut message, this.wait);
                Ok(())
            })?;
            let echo_cpu_ns = echo.join().map_err(|_| "the echo thread panicked".to_string())?;
            add_echo_cpu(&mut chunks, &echo_cpu_ns);
            Ok(chunks)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_back_intact() {
        let link = ShmLink::new(64, 0, Wait::Yield);
        let start = Barrier::new(2);
        let plan = Plan { doubles: 64, chunks: 1, round_trips_per_chunk: 3 };
        std::thread::scope(|s| {
            let echo = s.spawn(|| link.echo(plan, &start));
            start.wait();
            for seq in 1..=3u64 {
                let sent: Vec<u64> = (0..64).map(|i| i * seq).collect();
                let mut back = vec![0; 64];
                link.ping.send(seq, &sent);
                link.pong.receive(seq, &mut back, Wait::Yield);
                assert_eq!(back, sent);
            }
            assert_eq!(echo.join().unwrap().len(), 1);
        });
    }

    #[test]
    fn a_batch_has_its_chunks() {
        let mut link = ShmLink::new(16, 0, Wait::Yield);
        let chunks = link.batch(Plan { doubles: 16, chunks: 4, round_trips_per_chunk: 5 }).unwrap();
        assert_eq!(chunks.len(), 4);
        assert!(chunks.iter().all(|c| c.wall_ns > 0));
    }
}
