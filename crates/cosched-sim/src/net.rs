//! A node's network interface: a serial resource for outgoing messages and,
//! separately, for depositing incoming ones into endpoints.
//!
//! Timeline of one message sent at `t` (no contention): it starts leaving at
//! `t`, occupies the sending interface for `o_nic`, and is in the receiver's
//! endpoint at `t + L(n)`, having occupied the receiving interface for the last
//! `o_nic` of that. Queueing at either interface delays it.

use cosched_core::SimTime;

#[derive(Clone, Debug)]
pub struct Nic {
    /// When the sending side is next free.
    out_free: SimTime,
    /// When the receiving side finished its last deposit.
    in_last_deposit: SimTime,
    /// Messages on their way whose deposit is decided only once every
    /// message arriving before them is known (see [`Nic::can_decide_at_send`]),
    /// in the order the receiving side serves them, reversed (the next to be
    /// decided is the last).
    undecided: Vec<Undecided>,
    /// The earliest arrival in `undecided` (`SimTime::MAX` when empty): the
    /// receiving node asks at every visit whether one can be decided.
    earliest_undecided: SimTime,
}

impl Default for Nic {
    fn default() -> Self {
        Nic {
            out_free: SimTime::ZERO,
            in_last_deposit: SimTime::ZERO,
            undecided: Vec::new(),
            earliest_undecided: SimTime::MAX,
        }
    }
}

impl Nic {
    /// A message handed to the interface at `now` starts leaving at the
    /// returned time.
    pub fn start_send(&mut self, now: SimTime, occupancy_ns: u64) -> SimTime {
        let starts = now.max(self.out_free);
        self.out_free = starts + occupancy_ns;
        starts
    }

    /// A message that would be deposited at `uncontended` (if the receiving
    /// side were free) is deposited at the returned time. Must be called in
    /// order of `uncontended`.
    pub fn deposit_time(&mut self, uncontended: SimTime, occupancy_ns: u64) -> SimTime {
        let deposited = uncontended.max(self.in_last_deposit + occupancy_ns);
        self.in_last_deposit = deposited;
        deposited
    }
}

/// A message whose deposit time is not decided yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Undecided {
    pub arrival: SimTime,
    pub dest: u32,
    pub side: u8,
}

impl Nic {
    /// The receiving side serves messages in order of arrival, and messages
    /// arriving at the same instant in the order they were sent (handed to
    /// this interface's `can_decide_at_send` or `add_undecided`). A message
    /// sent at `t` arrives no earlier than `t + L`; so one that left its
    /// sender at once arrives no later than any message sent after it, and
    /// its deposit can be decided when it is sent, unless a message still
    /// undecided arrives before it or with it.
    ///
    /// That order does not depend on when the engine decides: a message
    /// sent later that arrives with an undecided one goes after it, as it
    /// would had the undecided one been decided first.
    pub fn can_decide_at_send(&self, arrival: SimTime) -> bool {
        self.earliest_undecided > arrival
    }

    /// A message sent now whose deposit cannot be decided yet: served after
    /// every message already known that arrives no later.
    pub fn add_undecided(&mut self, message: Undecided) {
        let place = self.undecided.partition_point(|u| u.arrival > message.arrival);
        self.undecided.insert(place, message);
        self.earliest_undecided = self.earliest_undecided.min(message.arrival);
    }

    /// Whether [`Nic::take_decidable`] may find a message at `now`.
    pub fn may_decide_by(&self, now: SimTime, latency_ns: u64) -> bool {
        self.earliest_undecided.ns() <= now.ns() + latency_ns
    }

    /// The undecided message arriving first, if it left its sender by `now`:
    /// every message arriving before it left earlier still, so all are known.
    pub fn take_decidable(&mut self, now: SimTime, latency_ns: u64) -> Option<Undecided> {
        if !self.may_decide_by(now, latency_ns) {
            return None;
        }
        let first = self.undecided.pop().expect("an earliest arrival is one undecided");
        self.earliest_undecided = self.undecided.last().map_or(SimTime::MAX, |u| u.arrival);
        Some(first)
    }

    /// When the first undecided message for `dest`'s endpoint `side` arrives.
    pub fn undecided_arrival_for(&self, dest: u32, side: u8) -> Option<SimTime> {
        self.undecided.iter().filter(|u| u.dest == dest && u.side == side).map(|u| u.arrival).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_both_directions() {
        let mut nic = Nic::default();
        assert_eq!(nic.start_send(SimTime(100), 10), SimTime(100));
        assert_eq!(nic.start_send(SimTime(100), 10), SimTime(110));
        assert_eq!(nic.start_send(SimTime(200), 10), SimTime(200));
        assert_eq!(nic.deposit_time(SimTime(500), 10), SimTime(500));
        assert_eq!(nic.deposit_time(SimTime(503), 10), SimTime(510));
        assert_eq!(nic.deposit_time(SimTime(600), 10), SimTime(600));
    }

    #[test]
    fn undecided_messages_are_decided_by_arrival_then_in_the_order_sent() {
        let mut nic = Nic::default();
        let m = |arrival, dest, side| Undecided { arrival: SimTime(arrival), dest, side };
        for message in [m(50, 3, 0), m(20, 9, 1), m(50, 1, 1), m(20, 9, 0), m(70, 0, 0)] {
            nic.add_undecided(message);
        }
        assert!(nic.can_decide_at_send(SimTime(19)) && !nic.can_decide_at_send(SimTime(20)));
        assert_eq!(nic.undecided_arrival_for(9, 1), Some(SimTime(20)));
        assert_eq!(nic.undecided_arrival_for(3, 1), None);
        assert_eq!(nic.take_decidable(SimTime(0), 19), None);
        let decided: Vec<_> = std::iter::from_fn(|| nic.take_decidable(SimTime(10), 50)).collect();
        assert_eq!(decided, [m(20, 9, 1), m(20, 9, 0), m(50, 3, 0), m(50, 1, 1)]);
        assert!(!nic.may_decide_by(SimTime(10), 50) && nic.may_decide_by(SimTime(20), 50));
    }
}
