//! How many connections the daemon holds, and from whom.
//!
//! Every connection costs a thread and a file descriptor, and the daemon's switching path needs descriptors too
//! (it opens cgroup files at every switch): so connections are counted per user, per address before
//! authentication, for the monitor and in total, each under a bound, and the total stays well inside the
//! process's descriptor limit. A connection that would pass a bound is refused at once with a reason.
//! A failed authentication costs its connection a pause and then the connection; it never bars the address,
//! which the node's own agent and every user of that host share.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bounds; `cosched controller --help` names the settings.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Every client connection at once (users, unauthenticated TCP peers, the monitor).
    pub connections: usize,
    /// Connections of one uid at once.
    pub per_user: usize,
    /// TCP connections not yet authenticated, in all and from one address.
    pub unauthenticated: usize,
    pub unauthenticated_per_address: usize,
    /// Web monitor connections at once.
    pub monitor: usize,
    /// Once a request has begun, the rest of it must arrive within this (and a TCP peer must authenticate
    /// within it): slow clients cannot hold a thread.
    pub request_timeout: Duration,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 4096,
            per_user: 128,
            unauthenticated: 64,
            unauthenticated_per_address: 16,
            monitor: 64,
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
        }
    }
}

/// Descriptors kept for the daemon's own work (cgroup files at every switch, job logs, the database, launches)
/// whatever the clients do.
pub const RESERVED_DESCRIPTORS: u64 = 256;
/// Connections administrators may hold beyond the total, so that a full controller can still be looked at and
/// mended.
pub const ADMINISTRATOR_RESERVE: usize = 16;
/// A failed authentication is answered only after this pause, then the connection is closed.
pub const FAILURE_PAUSE: Duration = Duration::from_secs(1);

/// What a connection is counted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    User(u32),
    /// An administrator's connection: may use the reserve beyond the total.
    Administrator(u32),
    Unauthenticated(IpAddr),
    Monitor,
    /// An authenticated agent: one per node, outside every user bound.
    Agent,
}

#[derive(Default, Debug)]
struct Counts {
    total: usize,
    users: BTreeMap<u32, usize>,
    unauthenticated: usize,
    addresses: BTreeMap<IpAddr, usize>,
    monitor: usize,
}

#[derive(Debug)]
pub struct Gate {
    limits: Limits,
    counts: Mutex<Counts>,
}

/// A connection's place under the bounds, given back when dropped.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<Gate>,
    holder: Holder,
}

impl Gate {
    /// `descriptor_limit`: the process's limit on open files; the total is kept below it.
    pub fn new(mut limits: Limits, descriptor_limit: u64) -> Arc<Gate> {
        let budget = descriptor_limit.saturating_sub(RESERVED_DESCRIPTORS).max(16) as usize;
        if limits.connections > budget {
            eprintln!(
                "cosched controller: at most {budget} connections at once (open-file limit {descriptor_limit} less \
                 {RESERVED_DESCRIPTORS} kept for switching), not {}",
                limits.connections
            );
            limits.connections = budget;
        }
        Arc::new(Gate { limits, counts: Mutex::new(Counts::default()) })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A local connection of `uid` (from the socket's peer credentials).
    pub fn admit_user(self: &Arc<Self>, uid: u32, admin: bool) -> Result<Pass, String> {
        self.admit(if admin { Holder::Administrator(uid) } else { Holder::User(uid) })
    }

    /// A TCP peer that has not authenticated yet.
    pub fn admit_unauthenticated(self: &Arc<Self>, address: IpAddr) -> Result<Pass, String> {
        self.admit(Holder::Unauthenticated(address))
    }

    pub fn admit_monitor(self: &Arc<Self>) -> Result<Pass, String> {
        self.admit(Holder::Monitor)
    }

    fn admit(self: &Arc<Self>, holder: Holder) -> Result<Pass, String> {
        let mut counts = self.counts.lock().unwrap();
        let reserve = if matches!(holder, Holder::Administrator(_)) { ADMINISTRATOR_RESERVE } else { 0 };
        if counts.total >= self.limits.connections + reserve {
            return Err(format!("the controller holds its limit of {} connections: try again later", counts.total));
        }
        self.check_room(&counts, holder)?;
        counts.add(holder, 1);
        Ok(Pass { gate: self.clone(), holder })
    }

    fn check_room(&self, counts: &Counts, holder: Holder) -> Result<(), String> {
        let full = |held: usize, bound: usize, what: String| {
            if held >= bound {
                Err(format!("{what} already hold {held} connections, the limit: close some first"))
            } else {
                Ok(())
            }
        };
        match holder {
            Holder::User(uid) | Holder::Administrator(uid) => {
                full(counts.users.get(&uid).copied().unwrap_or(0), self.limits.per_user, format!("you (uid {uid})"))
            }
            Holder::Unauthenticated(address) => {
                full(counts.unauthenticated, self.limits.unauthenticated, "unauthenticated peers".into())?;
                let from_address = counts.addresses.get(&address).copied().unwrap_or(0);
                full(
                    from_address,
                    self.limits.unauthenticated_per_address,
                    format!("unauthenticated peers at {address}"),
                )
            }
            Holder::Monitor => full(counts.monitor, self.limits.monitor, "monitor clients".into()),
            Holder::Agent => Ok(()),
        }
    }
}

impl Counts {
    fn add(&mut self, holder: Holder, one: isize) {
        let step = |n: &mut usize| *n = n.saturating_add_signed(one);
        step(&mut self.total);
        match holder {
            Holder::User(uid) | Holder::Administrator(uid) => step(self.users.entry(uid).or_default()),
            Holder::Unauthenticated(address) => {
                step(&mut self.unauthenticated);
                step(self.addresses.entry(address).or_default());
            }
            Holder::Monitor => step(&mut self.monitor),
            Holder::Agent => {}
        }
        self.users.retain(|_, n| *n > 0);
        self.addresses.retain(|_, n| *n > 0);
    }
}

impl Pass {
    /// The peer proved it is `uid`: it now counts against that user's bound, which may be full.
    pub fn authenticated(&mut self, uid: u32, admin: bool) -> Result<(), String> {
        self.become_holder(if admin { Holder::Administrator(uid) } else { Holder::User(uid) })
    }

    /// The peer proved it is an agent.
    pub fn agent(&mut self) {
        let _ = self.become_holder(Holder::Agent);
    }

    fn become_holder(&mut self, holder: Holder) -> Result<(), String> {
        let mut counts = self.gate.counts.lock().unwrap();
        self.gate.check_room(&counts, holder)?;
        counts.add(self.holder, -1);
        counts.add(holder, 1);
        self.holder = holder;
        Ok(())
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.gate.counts.lock().unwrap().add(self.holder, -1);
    }
}

/// The soft limit on open files this process started with, before `raise_descriptor_limit`: what jobs get back
/// (a raised limit would pass to every task the daemon starts).
static STARTING_DESCRIPTOR_LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Raise this process's soft limit on open files to its hard limit; return the limit in force.
pub fn raise_descriptor_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return 1024 };
    STARTING_DESCRIPTOR_LIMIT.get_or_init(|| soft);
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

/// The soft limit on open files before the daemon raised it (`None` if it never did).
pub fn starting_descriptor_limit() -> Option<u64> {
    STARTING_DESCRIPTOR_LIMIT.get().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(connections: usize) -> Arc<Gate> {
        let limits = Limits {
            connections,
            per_user: 3,
            unauthenticated: 4,
            unauthenticated_per_address: 2,
            monitor: 1,
            ..Limits::default()
        };
        Gate::new(limits, 1_000_000)
    }

    #[test]
    fn each_user_and_address_has_its_own_bound_and_passes_are_given_back() {
        let gate = gate(100);
        let mine: Vec<Pass> = (0..3).map(|_| gate.admit_user(1000, false).unwrap()).collect();
        assert!(gate.admit_user(1000, false).unwrap_err().contains("uid 1000"));
        assert!(gate.admit_user(1001, false).is_ok(), "another user is not affected");
        drop(mine);
        assert!(gate.admit_user(1000, false).is_ok(), "passes come back when connections close");
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let _from_a: Vec<Pass> = (0..2).map(|_| gate.admit_unauthenticated(a).unwrap()).collect();
        assert!(gate.admit_unauthenticated(a).unwrap_err().contains("10.0.0.1"));
        let mut from_b = gate.admit_unauthenticated(b).unwrap();
        let _b2 = gate.admit_unauthenticated(b).unwrap();
        assert!(gate.admit_unauthenticated("10.0.0.3".parse().unwrap()).is_err(), "all unauthenticated peers");
        from_b.authenticated(1001, false).unwrap();
        assert!(gate.admit_unauthenticated("10.0.0.3".parse().unwrap()).is_ok(), "authenticating frees a place");
        let _monitor = gate.admit_monitor().unwrap();
        assert!(gate.admit_monitor().is_err());
    }

    #[test]
    fn the_total_stays_inside_the_descriptor_limit() {
        let gate = Gate::new(Limits { per_user: 1000, ..Limits::default() }, RESERVED_DESCRIPTORS + 20);
        assert_eq!(gate.limits().connections, 20);
        let held: Vec<Pass> = (1..=20).map(|i| gate.admit_user(i, false).unwrap()).collect();
        assert!(gate.admit_user(99, false).unwrap_err().contains("limit of 20"));
        let reserve: Vec<Pass> = (0..ADMINISTRATOR_RESERVE).map(|_| gate.admit_user(0, true).unwrap()).collect();
        assert!(gate.admit_user(0, true).is_err(), "the reserve is bounded too");
        drop((held, reserve));
        assert!(gate.admit_user(99, false).is_ok());
    }

    #[test]
    fn failures_bar_no_address() {
        // There is no failure count at all: an address is never refused for what one of its peers did.
        let gate = gate(100);
        let address: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..1000 {
            drop(gate.admit_unauthenticated(address).unwrap());
        }
        assert!(gate.admit_unauthenticated(address).is_ok());
    }
}
