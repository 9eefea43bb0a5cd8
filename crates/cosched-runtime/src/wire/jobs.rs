//! Job records and identities: `cosched_control::wire::jobs`'s, shared with the controller's core and the
//! simulator; here, what reads this host's clock and password database.

pub use cosched_control::wire::jobs::*;

/// The name of a uid in this host's password database (`None`: it has none).
pub fn user_name(uid: u32) -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten().map(|u| u.name)
}

pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The user name of each uid of the snapshot's jobs, looked up once per uid (the password database may be a
/// network service); a uid without a name is left out and shown as its number.
pub fn user_names(
    snapshot: &cosched_control::controller::metrics::MetricsSnapshot,
) -> std::collections::BTreeMap<u32, String> {
    let uids: std::collections::BTreeSet<u32> = snapshot.jobs.iter().map(|j| j.uid).collect();
    uids.into_iter().filter_map(|uid| Some((uid, user_name(uid)?))).collect()
}
