//! A node's network interface: a serial resource for outgoing messages and,
//! separately, for depositing incoming ones into endpoints.
//!
//! Timeline of one message sent at `t` (no contention): it starts leaving at
//! `t`, occupies the sending interface for `o_nic`, and is in the receiver's
//! endpoint at `t + L(n)`, having occupied the receiving interface for the last
//! `o_nic` of that. Queueing at either interface delays it.

use cosched_core::SimTime;

#[derive(Clone, Debug, Default)]
pub struct Nic {
    /// When the sending side is next free.
    out_free: SimTime,
    /// When the receiving side finished its last deposit.
    in_last_deposit: SimTime,
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
}
