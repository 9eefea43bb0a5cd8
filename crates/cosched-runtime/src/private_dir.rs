//! The directories the daemon writes in as root — its state directory, the agent's logs, the socket's directory —
//! checked at start so that no other user can have made them or change them under it. A user who owns one of
//! them, or may write it or a directory above it, could swap an entry for a link between root's write and its
//! `chmod` (the socket is made 0666 by path) and so aim root's writes anywhere. The rule is the one of
//! `scripts/lib/root-only-dir.sh` (docs/security.md, "Scripts and files root touches"), with links allowed:
//!
//! - every directory on the way, and the directory itself, belongs to root or to the daemon's own user;
//! - none is writable by group or others, but for the sticky bit on a directory above (as /tmp), where others may
//!   add names of their own but never rename or remove ours;
//! - a symbolic link on the way belongs to root or the daemon's user too, and its target is checked the same way.
//!
//! Missing directories are made (0755), one level at a time, and checked like the others.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// Links followed on the way at most (the kernel's own bound).
const MAX_LINKS: usize = 40;

/// Make `dir` if missing and check that nobody but root or this process's user can change it or anything above
/// it; the error names the first directory that fails and why. `what` names the directory in messages.
pub fn ensure(dir: &Path, what: &str) -> io::Result<()> {
    resolve_private(dir, Missing::Make)
        .map(|_| ())
        .map_err(|why| io::Error::other(format!("{what} {}: {why}", dir.display())))
}

/// The real path of the existing directory `dir`, once checked as [`ensure`] checks it; nothing is made.
pub fn check_existing(dir: &Path, what: &str) -> io::Result<PathBuf> {
    resolve_private(dir, Missing::Refuse).map_err(|why| io::Error::other(format!("{what} {}: {why}", dir.display())))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    Make,
    Refuse,
}

/// Walk `dir` from `/`, one name at a time, links resolved by hand so that each is checked where it lies.
/// Returns the real path.
fn resolve_private(dir: &Path, missing: Missing) -> Result<PathBuf, String> {
    let absolute = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?.join(dir)
    };
    let mut pending: VecDeque<OsString> = names(&absolute);
    let mut at = PathBuf::from("/");
    check_directory(&at, false)?;
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = match std::fs::symlink_metadata(&next) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && missing == Missing::Make => make_directory(&next)?,
            other => other.map_err(|e| format!("{}: {e}", next.display()))?,
        };
        if meta.file_type().is_symlink() {
            check_owner(&next, &meta)?;
            links += 1;
            if links > MAX_LINKS {
                return Err(format!("more than {MAX_LINKS} symbolic links on the way"));
            }
            let target = std::fs::read_link(&next).map_err(|e| format!("{}: {e}", next.display()))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            for name in names(&target).into_iter().rev() {
                pending.push_front(name);
            }
            continue;
        }
        check_directory(&next, pending.is_empty())?;
        at = next;
    }
    Ok(at)
}

/// The names of `path`, without `/` and `.`; `..` kept (it is resolved against the real path walked so far).
fn names(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Make the missing directory `path` (0755 with the umask): its parent passed the checks, so only a name made by
/// someone else in a sticky parent can be there first, and the checks that follow refuse it.
fn make_directory(path: &Path) -> Result<std::fs::Metadata, String> {
    match std::fs::DirBuilder::new().mode(0o755).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", path.display())),
    }
    std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `path` is a directory of root or ours, and nobody else may write it; above the last one, the sticky bit lets
/// others add names beside ours.
fn check_directory(path: &Path, last: bool) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", path.display()));
    }
    check_owner(path, &meta)?;
    let writable_by_others = meta.mode() & 0o022 != 0;
    let sticky = meta.mode() & 0o1000 != 0;
    if writable_by_others && (last || !sticky) {
        return Err(format!(
            "{} is writable by group or others (mode {:o}): they could put links where root writes; give a \
             directory only root can write",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

fn check_owner(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let ours = nix::unistd::geteuid().as_raw();
    if meta.uid() == 0 || meta.uid() == ours {
        return Ok(());
    }
    let name = nix::unistd::User::from_uid(meta.uid().into()).ok().flatten().map(|u| u.name);
    Err(format!(
        "{} belongs to {} (uid {}), not root: that user could change what root writes there; give a directory \
         only root can write",
        path.display(),
        name.as_deref().unwrap_or("a user without a name"),
        meta.uid()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOBODY: u32 = 65534;

    fn fresh() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("cosched-private-").tempdir().unwrap()
    }

    fn as_root(test: &str) -> bool {
        if nix::unistd::geteuid().is_root() {
            return true;
        }
        crate::testing::say_skipped(test, "needs root to give directories to another user");
        false
    }

    #[test]
    fn missing_levels_are_made_and_a_shared_directory_itself_is_refused() {
        let top = fresh();
        let dir = top.path().join("a/b/../c");
        ensure(&dir, "state directory").unwrap();
        assert!(top.path().join("a/c").is_dir() && top.path().join("a/b").is_dir());
        assert_eq!(std::fs::metadata(top.path().join("a/c")).unwrap().mode() & 0o022, 0);
        let world = top.path().join("world");
        std::fs::create_dir(&world).unwrap();
        std::fs::set_permissions(&world, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let refused = ensure(&world, "socket directory").unwrap_err().to_string();
        assert!(refused.contains("writable by group or others (mode 1777)"), "{refused}");
        // Above another directory, the sticky bit is enough: others cannot replace what is ours in it.
        ensure(&world.join("ours"), "state directory").unwrap();
        std::fs::set_permissions(&world, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = ensure(&world.join("ours"), "state directory").unwrap_err().to_string();
        assert!(refused.contains("mode 777"), "{refused}");
    }

    #[test]
    fn a_directory_or_link_of_another_user_is_refused_and_ours_are_followed() {
        if !as_root("a_directory_or_link_of_another_user_is_refused_and_ours_are_followed") {
            return;
        }
        let top = fresh();
        let theirs = top.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
        for dir in [theirs.clone(), theirs.join("below")] {
            let refused = ensure(&dir, "state directory").unwrap_err().to_string();
            assert!(refused.contains(&format!("{} belongs to", theirs.display())), "{refused}");
            assert!(refused.contains("uid 65534"), "{refused}");
        }
        assert!(!theirs.join("below").exists(), "made a directory inside another user's");
        let ours = top.path().join("ours");
        std::fs::create_dir(&ours).unwrap();
        let link = top.path().join("link");
        std::os::unix::fs::symlink(&ours, &link).unwrap();
        ensure(&link.join("state"), "state directory").unwrap();
        assert!(ours.join("state").is_dir());
        std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
        let refused = ensure(&link.join("state"), "state directory").unwrap_err().to_string();
        assert!(refused.contains(&format!("{} belongs to", link.display())), "{refused}");
        // A link of ours to a directory of theirs leads there, and is refused there.
        let to_theirs = top.path().join("to-theirs");
        std::os::unix::fs::symlink(&theirs, &to_theirs).unwrap();
        let refused = ensure(&to_theirs, "state directory").unwrap_err().to_string();
        assert!(refused.contains(&format!("{} belongs to", theirs.display())), "{refused}");
    }
}
