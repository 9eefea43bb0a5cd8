//! Attacks on the real coscheduler, each with the refusal it must meet.
//!
//! The daemon runs as root and serves every local user (and, with `--tcp`, the network). Every test here plays
//! an adversary — usually uid 65534 ("nobody") or a second unprivileged uid — and checks that the daemon refuses,
//! changes nothing it should not, and keeps every job and record intact. One module per kind of attack:
//!
//! | module | attacks |
//! |---|---|
//! | `identity` | claiming another uid over TCP, stolen or guessed keys, agents that are users |
//! | `relay` | a user on the port an agent or a remote user dials, relaying the handshake, then injecting or reflecting lines |
//! | `lifetime` | processes that outlive their job: daemons a task leaves, remote commands still running when the tasks end, a job killed while frozen, a process that survives SIGKILL |
//! | `ownership` | moving, freezing, suspending or ending other users' processes and jobs; the daemon's own processes; reused job ids |
//! | `paths` | directories root writes in, made first or linked elsewhere by a user: the private Slurm's directory (`scripts/slurm`), a `jobs` link swapped in during `start`, links in `jobs/` that `stop` would write through, the daemon's state and socket directories; a checkout another user could change, from which a script run as root would build and run their code |
//! | `secrets` | reading other users' environments, command lines, logs and the database |
//! | `exhaustion` | connection floods, idle and slow clients, descriptor exhaustion, failed authentications, hoarded pre-authentication and monitor places |
//! | `sizes` | oversized requests, lines, environments and logs |
//! | `forgery` | a node holding the agents' key: hello claims that move job ids, events about other nodes' jobs, answers to requests never sent to it, unlisted node names; a start over another job's cgroup |
//! | `slicing` | escaping one's share: tasks taken out of their job or moved to another, empty registrations holding rows, rows taken from a suspended job |
//! | `volume` | volume: queues without bound, a status document rewritten at every tick, logs that fill the state file system, waiting remote commands that use up their user's connections |
//! | `slurm` | a user sending the Slurm plugin's requests (begin, attach, end) |
//! | `web` | the monitor through a browser: DNS rebinding, tokens in URLs, forged cross-site requests |
//! | `display` | text a user chooses shown to others: terminal controls and forged rows in `status` |

mod display;
mod exhaustion;
mod forgery;
mod identity;
mod lifetime;
mod ownership;
mod paths;
mod relay;
mod secrets;
mod sizes;
mod slicing;
mod slurm;
mod volume;
mod web;

/// The uids the attacks act as: "nobody" and a second unprivileged user without a passwd entry.
#[allow(dead_code)]
pub const ATTACKER: u32 = 65534;
#[allow(dead_code)]
pub const OTHER_USER: u32 = 64000;
