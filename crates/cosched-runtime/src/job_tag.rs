//! Who a job cgroup belongs to, written on the cgroup itself.
//!
//! An agent that restarts finds job cgroups by their directory names (`job-<id>`), but a number proves nothing:
//! after the controller's database is lost, a new job could get the same id and inherit the old job's running
//! processes. So every job cgroup carries a tag — the owner's uid and a random per-job token — as an extended
//! attribute in the `trusted.` namespace (only root may read or write it; cgroupfs supports it on v1 and v2). The
//! controller adopts a cgroup only when its record has the same id, owner and token.

use std::io;
use std::path::Path;

const ATTRIBUTE: &str = "trusted.cosched.job";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobTag {
    pub uid: u32,
    pub token: String,
}

impl JobTag {
    fn encode(&self) -> String {
        format!("{}:{}", self.uid, self.token)
    }

    fn decode(text: &str) -> Option<JobTag> {
        let (uid, token) = text.split_once(':')?;
        let token_ok = !token.is_empty() && token.len() <= 64 && token.bytes().all(|b| b.is_ascii_hexdigit());
        token_ok.then(|| Some(JobTag { uid: uid.parse().ok()?, token: token.to_string() }))?
    }

    pub fn write(&self, cgroup_dir: &Path) -> io::Result<()> {
        xattr::set(cgroup_dir, ATTRIBUTE, self.encode().as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("tagging {}: {e}", cgroup_dir.display())))
    }

    /// The tag of a cgroup; `None` when it has none (or an unreadable one).
    pub fn read(cgroup_dir: &Path) -> Option<JobTag> {
        let bytes = xattr::get(cgroup_dir, ATTRIBUTE).ok()??;
        JobTag::decode(std::str::from_utf8(&bytes).ok()?)
    }
}

const SUSPENDED_ATTRIBUTE: &str = "trusted.cosched.suspended";

/// Mark a job's cgroup as suspended (or not): the watchdog of a dead agent leaves suspended jobs stopped, so a
/// suspension (an administrator's above all) outlives a crash of the daemon.
pub fn mark_suspended(cgroup_dir: &Path, suspended: bool) -> io::Result<()> {
    let result = if suspended {
        xattr::set(cgroup_dir, SUSPENDED_ATTRIBUTE, b"1")
    } else {
        match xattr::remove(cgroup_dir, SUSPENDED_ATTRIBUTE) {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENODATA as i32) => Ok(()),
            other => other,
        }
    };
    result.map_err(|e| io::Error::new(e.kind(), format!("marking {} suspended: {e}", cgroup_dir.display())))
}

pub fn is_suspended(cgroup_dir: &Path) -> bool {
    xattr::get(cgroup_dir, SUSPENDED_ATTRIBUTE).is_ok_and(|v| v.is_some())
}

/// A fresh random token (`bytes` bytes from the kernel's generator, in hex).
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut buffer)?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_garbage_is_no_tag() {
        let tag = JobTag { uid: 65534, token: random_hex(16).unwrap() };
        assert_eq!(tag.token.len(), 32);
        assert_eq!(JobTag::decode(&tag.encode()), Some(tag));
        for bad in ["", "65534", "x:ab", "1:", "1:zz", "1:ab:cd"] {
            assert_eq!(JobTag::decode(bad), None, "{bad:?}");
        }
        assert_ne!(random_hex(16).unwrap(), random_hex(16).unwrap());
    }
}
