//! A task's endpoint for one neighbour: the deposit times of the messages
//! from that neighbour, oldest first. A message whose deposit time is still
//! in the future is in flight; it is there once the clock reaches it.
//!
//! Knowing deposit times ahead lets the engine skip an event per message: a
//! receiver looks at its endpoint when it runs, and a spinning receiver's CPU
//! books a visit for the instant its last awaited message lands.

use cosched_core::SimTime;

/// A neighbour is never more than one iteration ahead (it cannot send
/// iteration k+2 before receiving our message of iteration k+1), so two
/// messages per neighbour is the most an endpoint holds (asserted).
const CAPACITY: usize = 2;

#[derive(Clone, Copy, Debug, Default)]
pub struct Inbox {
    deposit_ns: [u64; CAPACITY],
    head: u8,
    len: u8,
}

impl Inbox {
    pub fn push(&mut self, deposit: SimTime) {
        assert!((self.len as usize) < CAPACITY, "endpoint overflow: the ring protocol bounds it to {CAPACITY}");
        debug_assert!(self.back().is_none_or(|last| last <= deposit), "messages from one neighbour stay in order");
        let tail = (self.head as usize + self.len as usize) % CAPACITY;
        self.deposit_ns[tail] = deposit.ns();
        self.len += 1;
    }

    pub fn front(&self) -> Option<SimTime> {
        (self.len > 0).then(|| SimTime(self.deposit_ns[self.head as usize]))
    }

    fn back(&self) -> Option<SimTime> {
        (self.len > 0).then(|| SimTime(self.deposit_ns[(self.head as usize + self.len as usize - 1) % CAPACITY]))
    }

    /// Is a message there at `now`?
    pub fn has_message(&self, now: SimTime) -> bool {
        self.front().is_some_and(|t| t <= now)
    }

    pub fn consume(&mut self) {
        assert!(self.len > 0, "consuming from an empty endpoint");
        self.head = ((self.head as usize + 1) % CAPACITY) as u8;
        self.len -= 1;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_future_deposits() {
        let mut inbox = Inbox::default();
        assert!(!inbox.has_message(SimTime(100)));
        inbox.push(SimTime(50));
        inbox.push(SimTime(80));
        assert!(!inbox.has_message(SimTime(49)));
        assert!(inbox.has_message(SimTime(50)));
        inbox.consume();
        assert_eq!(inbox.front(), Some(SimTime(80)));
        inbox.push(SimTime(90));
        inbox.consume();
        assert_eq!(inbox.front(), Some(SimTime(90)));
        inbox.push(SimTime(100));
        assert_eq!(inbox.front(), Some(SimTime(90)));
    }
}
