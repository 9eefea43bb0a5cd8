//! How many connections the daemon holds, and from whom.
//!
//! Every connection costs a thread and a file descriptor, and the daemon's switching path needs descriptors too
//! (it opens cgroup files at every switch): so connections are counted per user, for the monitor, before
//! authentication and in total, each under a bound, and the total stays well inside the process's descriptor
//! limit. A connection that would pass a bound is refused at once with a reason.
//!
//! Connections that have not yet proved who they are wait in pools, each with its own bound: TCP peers from a
//! privileged source port (below 1024, which only root can bind: agents, administrators' commands), TCP peers from
//! any other port (a quarter of that pool per address), and the web monitor's clients. No user can fill the first
//! pool, so agents always find room. When a pool is full, a newcomer displaces the connection that has waited
//! longest without a word — the oldest silent one of the address that holds the most (the newcomer's own address
//! when that one holds its share) — so a hoard of silent connections keeps nobody out, and a peer that speaks at
//! once is never the one displaced. A failed authentication costs its connection a pause and then the connection;
//! it never bars the address, which the node's own agent and every user of that host share.

use crate::wire::conn::Stream;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bounds; `cosched controller --help` names the settings.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Every client connection at once (users, unauthenticated TCP peers, the monitor).
    pub connections: usize,
    /// Connections of one uid at once.
    pub per_user: usize,
    /// TCP connections not yet authenticated, in each of the two pools (privileged and other source ports).
    pub unauthenticated: usize,
    /// Unauthenticated connections of one address from unprivileged ports.
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
/// A TCP peer must send its first line, and a monitor client its whole request head, within this: every
/// client of ours sends at once, so a peer that waits longer holds a place for nothing.
pub const FIRST_WORDS_WITHIN: Duration = Duration::from_secs(2);
const DISPLACED: &str = "this connection gave its place to a newer one";
/// Source ports below this only root can bind (`net.ipv4.ip_unprivileged_port_start` at its default).
pub const FIRST_UNPRIVILEGED_PORT: u16 = 1024;

/// Where a connection holds its place before it has proved who it is, and the monitor's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// TCP from a source port only root can bind.
    Privileged,
    /// TCP from any other port.
    Unprivileged,
    /// Monitor clients that have not sent their whole request head.
    Monitor,
    /// Monitor clients being answered; when all places are taken, the oldest (a client that does not read its
    /// answer) gives its place to the newcomer.
    MonitorAnswering,
}

impl Pool {
    /// The pool of a TCP peer, by its source port.
    pub fn of_tcp_peer(peer: SocketAddr) -> Pool {
        if peer.port() < FIRST_UNPRIVILEGED_PORT {
            Pool::Privileged
        } else {
            Pool::Unprivileged
        }
    }

    fn name(self) -> &'static str {
        match self {
            Pool::Privileged => "unauthenticated peers from privileged ports",
            Pool::Unprivileged => "unauthenticated peers",
            Pool::Monitor => "monitor clients",
            Pool::MonitorAnswering => "monitor answers",
        }
    }
}

/// What a connection is counted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    User(u32),
    /// An administrator's connection: may use the reserve beyond the total.
    Administrator(u32),
    /// In a pool, under this number (`Counts::placed`).
    Placed(u64),
    /// An authenticated agent: one per node, outside every user bound.
    Agent,
}

/// A connection's place in a pool.
struct Place {
    pool: Pool,
    address: IpAddr,
    since: Instant,
    /// Its peer has spoken (a first line, or a whole request head): displaced only after every silent one.
    spoke: bool,
    stream: Arc<Stream>,
}

impl Place {
    /// Has the peer said anything, even bytes not read yet?
    fn has_spoken(&self) -> bool {
        self.spoke || self.stream.has_pending_bytes()
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    users: BTreeMap<u32, usize>,
    placed: BTreeMap<u64, Place>,
    next_place: u64,
}

impl Counts {
    fn in_pool(&self, pool: Pool) -> impl Iterator<Item = (&u64, &Place)> {
        self.placed.iter().filter(move |(_, w)| w.pool == pool)
    }

    fn held_at(&self, pool: Pool, address: IpAddr) -> usize {
        self.in_pool(pool).filter(|(_, w)| w.address == address).count()
    }

    /// The connection of `pool` (and of `address`, if given) to displace: a silent one before any that spoke,
    /// of the address holding the most places, the oldest.
    fn to_displace(&self, pool: Pool, address: Option<IpAddr>) -> Option<u64> {
        let mut held: BTreeMap<IpAddr, usize> = BTreeMap::new();
        for (_, place) in self.in_pool(pool) {
            *held.entry(place.address).or_default() += 1;
        }
        let candidates = self.in_pool(pool).filter(|(_, place)| address.is_none_or(|a| place.address == a));
        let order = |place: &Place| (place.has_spoken(), std::cmp::Reverse(held[&place.address]), place.since);
        candidates.min_by_key(|(_, place)| order(place)).map(|(&id, _)| id)
    }
}

pub struct Gate {
    limits: Limits,
    counts: Mutex<Counts>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("limits", &self.limits).finish_non_exhaustive()
    }
}

/// A connection's place under the bounds, given back when dropped.
pub struct Pass {
    gate: Arc<Gate>,
    holder: Holder,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass").field("holder", &self.holder).finish()
    }
}

impl Gate {
    /// `descriptor_limit`: the process's limit on open files; the total is kept below it.
    pub fn new(mut limits: Limits, descriptor_limit: u64) -> Arc<Gate> {
        let budget = descriptor_limit.saturating_sub(RESERVED_DESCRIPTORS).max(16) as usize;
        if limits.connections > budget {
            crate::log_line!(
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
        let holder = if admin { Holder::Administrator(uid) } else { Holder::User(uid) };
        let mut counts = self.counts.lock().unwrap();
        self.check_total(&counts, holder)?;
        self.check_room(&counts, holder)?;
        self.add(&mut counts, holder);
        Ok(Pass { gate: self.clone(), holder })
    }

    /// A TCP peer that has not authenticated yet, at `peer`, in the pool its source port gives it.
    pub fn admit_unauthenticated(self: &Arc<Self>, peer: SocketAddr, stream: Arc<Stream>) -> Result<Pass, String> {
        self.admit_to_pool(Pool::of_tcp_peer(peer), peer.ip(), stream)
    }

    /// A monitor client, until it has sent its request head.
    pub fn admit_monitor(self: &Arc<Self>, peer: SocketAddr, stream: Arc<Stream>) -> Result<Pass, String> {
        self.admit_to_pool(Pool::Monitor, peer.ip(), stream)
    }

    fn admit_to_pool(self: &Arc<Self>, pool: Pool, address: IpAddr, stream: Arc<Stream>) -> Result<Pass, String> {
        let mut counts = self.counts.lock().unwrap();
        self.check_total(&counts, Holder::Placed(0))?;
        self.make_room(&mut counts, pool, address)?;
        let id = counts.next_place;
        counts.next_place += 1;
        counts.placed.insert(id, Place { pool, address, since: Instant::now(), spoke: false, stream });
        counts.total += 1;
        Ok(Pass { gate: self.clone(), holder: Holder::Placed(id) })
    }

    /// Room in `pool` for one more from `address`, displacing a connection if needed (see the module's comment).
    fn make_room(&self, counts: &mut Counts, pool: Pool, address: IpAddr) -> Result<(), String> {
        let Some(full) = self.full_share(counts, pool, address) else { return Ok(()) };
        let displaced = counts.to_displace(pool, full).ok_or_else(|| {
            format!("{} already hold {} connections, the limit: try again later", pool.name(), self.bound(pool))
        })?;
        if let Some(gone) = counts.placed.remove(&displaced) {
            counts.total = counts.total.saturating_sub(1);
            gone.stream.shutdown();
        }
        Ok(())
    }

    fn bound(&self, pool: Pool) -> usize {
        match pool {
            Pool::Privileged | Pool::Unprivileged => self.limits.unauthenticated,
            Pool::Monitor | Pool::MonitorAnswering => self.limits.monitor,
        }
    }

    /// `None` when `pool` has room for one more from `address`; else where to displace one from: that address
    /// when it holds its share, anywhere in the pool when the pool is full (`Some(None)`).
    fn full_share(&self, counts: &Counts, pool: Pool, address: IpAddr) -> Option<Option<IpAddr>> {
        let per_address = match pool {
            Pool::Unprivileged => self.limits.unauthenticated_per_address,
            // Root's peers are few and trusted to be bursty (a Slurm prolog per task); all local users share
            // the monitor's address.
            Pool::Privileged | Pool::Monitor | Pool::MonitorAnswering => usize::MAX,
        };
        if counts.held_at(pool, address) >= per_address {
            return Some(Some(address));
        }
        (counts.in_pool(pool).count() >= self.bound(pool)).then_some(None)
    }

    fn check_total(&self, counts: &Counts, holder: Holder) -> Result<(), String> {
        let reserve = if matches!(holder, Holder::Administrator(_)) { ADMINISTRATOR_RESERVE } else { 0 };
        if counts.total >= self.limits.connections + reserve {
            return Err(format!("the controller holds its limit of {} connections: try again later", counts.total));
        }
        Ok(())
    }

    fn check_room(&self, counts: &Counts, holder: Holder) -> Result<(), String> {
        match holder {
            Holder::User(uid) | Holder::Administrator(uid) => {
                let held = counts.users.get(&uid).copied().unwrap_or(0);
                if held >= self.limits.per_user {
                    return Err(format!(
                        "you (uid {uid}) already hold {held} connections, the limit: close some first"
                    ));
                }
                Ok(())
            }
            Holder::Placed(_) | Holder::Agent => Ok(()),
        }
    }

    fn add(&self, counts: &mut Counts, holder: Holder) {
        counts.total += 1;
        if let Holder::User(uid) | Holder::Administrator(uid) = holder {
            *counts.users.entry(uid).or_default() += 1;
        }
    }

    /// Give back `holder`'s place (a connection that was displaced has given its place back already).
    fn remove(&self, counts: &mut Counts, holder: Holder) {
        match holder {
            Holder::Placed(id) => {
                if counts.placed.remove(&id).is_none() {
                    return;
                }
            }
            Holder::User(uid) | Holder::Administrator(uid) => {
                if let Some(n) = counts.users.get_mut(&uid) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        counts.users.remove(&uid);
                    }
                }
            }
            Holder::Agent => {}
        }
        counts.total = counts.total.saturating_sub(1);
    }
}

impl Pass {
    /// The peer said its first line (TCP): from now on it is displaced only after every silent connection.
    pub fn spoke(&self) {
        if let Holder::Placed(id) = self.holder {
            if let Some(place) = self.gate.counts.lock().unwrap().placed.get_mut(&id) {
                place.spoke = true;
            }
        }
    }

    /// The peer proved it is `uid`: it now counts against that user's bound, which may be full.
    pub fn authenticated(&mut self, uid: u32, admin: bool) -> Result<(), String> {
        self.become_holder(if admin { Holder::Administrator(uid) } else { Holder::User(uid) })
    }

    /// The peer proved it is an agent.
    pub fn agent(&mut self) -> Result<(), String> {
        self.become_holder(Holder::Agent)
    }

    /// The monitor client sent its whole request head: it moves to the places of answers (displacing the
    /// oldest answer when they are all taken). An error when it was displaced meanwhile.
    pub fn head_received(&mut self) -> Result<(), String> {
        let Holder::Placed(id) = self.holder else { return Ok(()) };
        let gate = self.gate.clone();
        let mut counts = gate.counts.lock().unwrap();
        let address = counts.placed.get(&id).ok_or(DISPLACED)?.address;
        gate.make_room(&mut counts, Pool::MonitorAnswering, address)?;
        if let Some(place) = counts.placed.get_mut(&id) {
            (place.pool, place.since, place.spoke) = (Pool::MonitorAnswering, Instant::now(), true);
        }
        Ok(())
    }

    fn become_holder(&mut self, holder: Holder) -> Result<(), String> {
        let gate = self.gate.clone();
        let mut counts = gate.counts.lock().unwrap();
        if let Holder::Placed(id) = self.holder {
            if !counts.placed.contains_key(&id) {
                return Err(DISPLACED.into());
            }
        }
        gate.check_room(&counts, holder)?;
        gate.remove(&mut counts, self.holder);
        gate.add(&mut counts, holder);
        self.holder = holder;
        Ok(())
    }
}

#[cfg(test)]
impl Pass {
    fn is_displaced(&self) -> bool {
        let Holder::Placed(id) = self.holder else { return false };
        !self.gate.counts.lock().unwrap().placed.contains_key(&id)
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let gate = self.gate.clone();
        let mut counts = gate.counts.lock().unwrap();
        gate.remove(&mut counts, self.holder);
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
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn gate(connections: usize) -> Arc<Gate> {
        let limits = Limits {
            connections,
            per_user: 3,
            unauthenticated: 4,
            unauthenticated_per_address: 2,
            monitor: 2,
            ..Limits::default()
        };
        Gate::new(limits, 1_000_000)
    }

    /// A connection as the gate sees it, and the peer's end of it.
    fn connection() -> (Arc<Stream>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        (Arc::new(Stream::Unix(ours)), theirs)
    }

    /// Has the gate closed this connection (the peer reads end of stream)?
    fn closed(peer: &UnixStream) -> bool {
        peer.set_nonblocking(true).unwrap();
        matches!(std::io::Read::read(&mut &*peer, &mut [0u8; 1]), Ok(0))
    }

    fn from(address: &str, port: u16) -> SocketAddr {
        SocketAddr::new(address.parse().unwrap(), port)
    }

    #[test]
    fn each_user_has_its_own_bound_and_passes_are_given_back() {
        let gate = gate(100);
        let mine: Vec<Pass> = (0..3).map(|_| gate.admit_user(1000, false).unwrap()).collect();
        assert!(gate.admit_user(1000, false).unwrap_err().contains("uid 1000"));
        assert!(gate.admit_user(1001, false).is_ok(), "another user is not affected");
        drop(mine);
        assert!(gate.admit_user(1000, false).is_ok(), "passes come back when connections close");
    }

    #[test]
    fn a_newcomer_displaces_a_silent_connection_of_the_busiest_address_never_one_that_spoke_first() {
        let gate = gate(100);
        // Address a holds its share (2) of the unprivileged pool: a third from a displaces a's oldest.
        let (a1, a1_peer) = connection();
        let mut a1 = gate.admit_unauthenticated(from("10.0.0.1", 40000), a1).unwrap();
        let a2 = gate.admit_unauthenticated(from("10.0.0.1", 40001), connection().0).unwrap();
        let a3 = gate.admit_unauthenticated(from("10.0.0.1", 40002), connection().0).unwrap();
        assert!(closed(&a1_peer) && a1.is_displaced(), "the oldest silent connection of the address gave its place");
        assert!(a1.authenticated(1000, false).unwrap_err().contains("newer"), "and cannot authenticate");
        // b takes the rest of the pool (4) and speaks; a newcomer from c displaces a silent one, never b's.
        let (b1, b1_peer) = connection();
        let mut b1 = gate.admit_unauthenticated(from("10.0.0.2", 40000), b1).unwrap();
        b1.spoke();
        let (b2, mut b2_peer) = connection();
        let b2 = gate.admit_unauthenticated(from("10.0.0.2", 40001), b2).unwrap();
        b2_peer.write_all(b"{").unwrap(); // said something, not read yet
        let _c = gate.admit_unauthenticated(from("10.0.0.3", 40000), connection().0).unwrap();
        assert!(!b1.is_displaced() && !b2.is_displaced() && !closed(&b1_peer), "a connection that spoke gave way");
        assert!(a2.is_displaced() && !a3.is_displaced(), "the oldest silent one gives its place");
        // Authenticating frees the place.
        b1.authenticated(1001, false).unwrap();
        let _d = gate.admit_unauthenticated(from("10.0.0.4", 40000), connection().0).unwrap();
        assert!(!a3.is_displaced() && !b2.is_displaced(), "a place was free");
    }

    #[test]
    fn privileged_source_ports_have_a_pool_no_user_can_fill() {
        let gate = gate(100);
        let hoard: Vec<Pass> = (0..8u16)
            .map(|i| gate.admit_unauthenticated(from(&format!("10.0.1.{}", i % 4), 40000 + i), connection().0).unwrap())
            .collect();
        let (agent, agent_peer) = connection();
        let mut agent = gate.admit_unauthenticated(from("10.0.1.1", 1023), agent).unwrap();
        assert!(!closed(&agent_peer) && !agent.is_displaced());
        agent.agent().unwrap();
        // Root's commands from one host (a Slurm prolog per task) may take the whole privileged pool.
        let burst: Vec<Pass> =
            (0..4u16).map(|i| gate.admit_unauthenticated(from("10.0.2.1", 600 + i), connection().0).unwrap()).collect();
        assert!(burst.iter().all(|pass| !pass.is_displaced()));
        assert_eq!(hoard.iter().filter(|pass| !pass.is_displaced()).count(), 4, "the other pool is unchanged");
    }

    #[test]
    fn failures_bar_no_address() {
        // There is no failure count at all: an address is never refused for what one of its peers did.
        let gate = gate(100);
        for i in 0..1000u16 {
            drop(gate.admit_unauthenticated(from("127.0.0.1", 40000 + i), connection().0).unwrap());
        }
        assert!(gate.admit_unauthenticated(from("127.0.0.1", 1000), connection().0).is_ok());
    }

    #[test]
    fn monitor_clients_without_a_head_and_answers_not_read_give_their_places_to_newcomers() {
        let gate = gate(100);
        let (idle, idle_peer) = connection();
        let _idle = gate.admit_monitor(from("127.0.0.1", 50000), idle).unwrap();
        let (busy, _busy_peer) = connection();
        let mut busy = gate.admit_monitor(from("127.0.0.1", 50001), busy).unwrap();
        busy.head_received().unwrap();
        let (scrape, scrape_peer) = connection();
        let mut scrape = gate.admit_monitor(from("127.0.0.1", 50002), scrape).unwrap();
        assert!(!closed(&idle_peer), "room for two waiting for their heads");
        let _late = gate.admit_monitor(from("127.0.0.1", 50003), connection().0).unwrap();
        assert!(closed(&idle_peer), "the client that never sent its head gives its place");
        scrape.head_received().unwrap();
        let (third, _) = connection();
        let mut third = gate.admit_monitor(from("127.0.0.1", 50004), third).unwrap();
        third.head_received().unwrap();
        assert!(!closed(&scrape_peer), "the oldest answer (busy's) gave its place, not the newer one");
        assert!(busy.is_displaced());
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
}
