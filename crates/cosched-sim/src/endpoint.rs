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
///
/// The two slots hold the oldest message first; an empty slot holds
/// `EMPTY`, a time no deposit reaches. So the endpoint is 16 bytes with no
/// head or length, and "are the messages there" is the latest first deposit
/// compared with the clock, with no branch per endpoint (the engine asks it
/// of every resident at every periodic-boost walk).
#[derive(Clone, Copy, Debug)]
pub struct Inbox {
    deposit_ns: [u64; 2],
}

const EMPTY: u64 = Inbox::EMPTY_NS;

impl Default for Inbox {
    fn default() -> Self {
        Inbox { deposit_ns: [EMPTY; 2] }
    }
}

impl Inbox {
    /// What [`Inbox::front_ns`] gives for an empty endpoint: later than any deposit.
    pub const EMPTY_NS: u64 = u64::MAX;

    /// The first deposit's time in ns, `EMPTY_NS` when there is none.
    pub fn front_ns(&self) -> u64 {
        self.deposit_ns[0]
    }

    pub fn push(&mut self, deposit: SimTime) {
        assert!(deposit.ns() != EMPTY, "a deposit at the end of time");
        debug_assert!(self.back().is_none_or(|last| last <= deposit), "messages from one neighbour stay in order");
        if self.deposit_ns[0] == EMPTY {
            self.deposit_ns[0] = deposit.ns();
        } else {
            assert!(self.deposit_ns[1] == EMPTY, "endpoint overflow: the ring protocol bounds it to 2");
            self.deposit_ns[1] = deposit.ns();
        }
    }

    pub fn front(&self) -> Option<SimTime> {
        (self.deposit_ns[0] != EMPTY).then_some(SimTime(self.deposit_ns[0]))
    }

    fn back(&self) -> Option<SimTime> {
        let last = if self.deposit_ns[1] != EMPTY { self.deposit_ns[1] } else { self.deposit_ns[0] };
        (last != EMPTY).then_some(SimTime(last))
    }

    pub fn consume(&mut self) {
        assert!(self.deposit_ns[0] != EMPTY, "consuming from an empty endpoint");
        self.deposit_ns = [self.deposit_ns[1], EMPTY];
    }

    pub fn is_empty(&self) -> bool {
        self.deposit_ns[0] == EMPTY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_future_deposits() {
        let mut inbox = Inbox::default();
        assert_eq!(inbox.front_ns(), Inbox::EMPTY_NS);
        inbox.push(SimTime(50));
        inbox.push(SimTime(80));
        assert_eq!(inbox.front_ns(), 50);
        inbox.consume();
        assert_eq!(inbox.front(), Some(SimTime(80)));
        inbox.push(SimTime(90));
        inbox.consume();
        assert_eq!(inbox.front(), Some(SimTime(90)));
        inbox.push(SimTime(100));
        assert_eq!(inbox.front(), Some(SimTime(90)));
    }
}
