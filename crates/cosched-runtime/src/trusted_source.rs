//! What a command builds or runs from the file system (a Makefile, the
//! sources it builds, a program) must come from places no other user could
//! change. Run as root in another user's checkout, or from a shared folder,
//! a command would otherwise run that user's code as root.
//!
//! The one rule for every command cosched starts as root on a user's behalf
//! (the copies of `bench slowdown`, on one node or across namespace nodes,
//! their launcher, the Slurm script and plugin it loads) is
//! [`CheckedCommand`]: the only way to build one runs the checks, and the
//! benchmarks start nothing else (docs/security.md, "Programs root runs").

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Entries of a folder checked at most (a benchmark's sources hold a dozen).
const MAX_CHECKED_ENTRIES: usize = 10_000;

/// `path` and every folder above it root's or this user's and writable by
/// nobody else (links checked where they lie), and, for a folder,
/// everything in it the same and no link. `flag` names where the path came
/// from, in the error.
pub fn check_nobody_else_could_change(path: &Path, flag: &str) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let folder = if meta.is_dir() {
        path
    } else {
        path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    };
    crate::private_dir::ensure(folder, flag).map_err(|e| e.to_string())?;
    let mut pending = vec![path.to_path_buf()];
    let mut checked = 0;
    while let Some(next) = pending.pop() {
        checked += 1;
        if checked > MAX_CHECKED_ENTRIES {
            return Err(format!("{flag} {}: more than {MAX_CHECKED_ENTRIES} entries", path.display()));
        }
        let meta = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
        let ours = meta.uid() == 0 || meta.uid() == nix::unistd::geteuid().as_raw();
        if meta.file_type().is_symlink() || !ours || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{flag}: {} is a link, or another user's (uid {}), or writable by others (mode {:o}): root would run \
                 what they put there",
                next.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&next).map_err(|e| format!("{}: {e}", next.display()))? {
                pending.push(entry.map_err(|e| format!("{}: {e}", next.display()))?.path());
            }
        }
    }
    Ok(())
}

/// Links followed at most on the way to a program (the kernel's own bound).
const MAX_LINKS: usize = 40;

/// Arguments of a command looked at, at most: more is no command a benchmark runs.
const MAX_CHECKED_ARGUMENTS: usize = 4096;

/// Where programs are searched when the caller has no `PATH`.
const DEFAULT_SEARCH_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The real path of the existing file or folder `path`, followed through links that are each root's or this
/// user's, once it and every folder above it pass [`check_nobody_else_could_change`]. Devices, sockets and pipes
/// are no code and pass as they are.
pub fn check_file_nobody_else_could_change(path: &Path, flag: &str) -> Result<PathBuf, String> {
    let mut at = std::path::absolute(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    for _ in 0..=MAX_LINKS {
        let (Some(folder), Some(name)) = (at.parent(), at.file_name()) else {
            let real = crate::private_dir::check_existing(&at, flag).map_err(|e| e.to_string())?;
            check_nobody_else_could_change(&real, flag)?;
            return Ok(real);
        };
        let folder = crate::private_dir::check_existing(folder, flag).map_err(|e| e.to_string())?;
        let next = folder.join(name);
        let meta = std::fs::symlink_metadata(&next).map_err(|e| format!("{flag} {}: {e}", next.display()))?;
        if meta.file_type().is_symlink() {
            check_owner(&next, &meta, flag)?;
            let target = std::fs::read_link(&next).map_err(|e| format!("{flag} {}: {e}", next.display()))?;
            at = folder.join(target);
            continue;
        }
        if meta.is_file() || meta.is_dir() {
            check_nobody_else_could_change(&next, flag)?;
        }
        return Ok(next);
    }
    Err(format!("{flag} {}: more than {MAX_LINKS} links on the way", path.display()))
}

fn check_owner(path: &Path, meta: &std::fs::Metadata, flag: &str) -> Result<(), String> {
    if meta.uid() == 0 || meta.uid() == nix::unistd::geteuid().as_raw() {
        return Ok(());
    }
    Err(format!(
        "{flag}: {} is another user's (uid {}): root would run what they put there",
        path.display(),
        meta.uid()
    ))
}

/// A command checked for root to start (see the module's notes), with the environment everything started for it
/// gets. Run by any other user, a command is theirs and runs as given, as their shell would run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedCommand {
    argv: Vec<String>,
    /// Set on (or, when `None`, taken from) the environment of every process started for the command.
    environment: Vec<(String, Option<String>)>,
}

impl CheckedCommand {
    /// `argv` as this process's user would run it in folder `cwd`. As root, refused unless `cwd` with everything
    /// in it, the program (found through the folders of `PATH` nobody else could change, the only ones kept) and
    /// every existing file or folder an argument is (`--opt=value` included) are beyond other users' reach;
    /// `LD_LIBRARY_PATH` keeps such folders only, and files `LD_PRELOAD` or `LD_AUDIT` name must pass too. What
    /// root wrote inside an argument (`sh -c "..."`), a file that does not exist yet, and the rest of root's
    /// environment are root's own choice: the arguments are read as paths, not understood.
    pub fn check(argv: &[String], cwd: &Path, flag: &str) -> Result<CheckedCommand, String> {
        if argv.is_empty() {
            return Err(format!("{flag}: no command"));
        }
        if !nix::unistd::geteuid().is_root() {
            return Ok(CheckedCommand { argv: argv.to_vec(), environment: vec![] });
        }
        if argv.len() > MAX_CHECKED_ARGUMENTS {
            return Err(format!("{flag}: more than {MAX_CHECKED_ARGUMENTS} arguments"));
        }
        let cwd = crate::private_dir::check_existing(cwd, "the folder the command runs in (as root)")
            .map_err(|e| format!("{flag}: {e}"))?;
        // Everything in it too: a program reads what it finds there unasked (make's Makefile, a script's
        // modules), and a file of another user's there would run as root.
        check_nobody_else_could_change(&cwd, "the folder the command runs in (as root), with everything in it")?;
        let search = trusted_folders(std::env::var("PATH").as_deref().unwrap_or(DEFAULT_SEARCH_PATH));
        let libraries = trusted_folders(std::env::var("LD_LIBRARY_PATH").as_deref().unwrap_or(""));
        let program = find_program(&argv[0], &cwd, &search).ok_or_else(|| {
            format!("{flag}: {} is not found in the folders of PATH nobody else could change: {search}", argv[0])
        })?;
        check_file_nobody_else_could_change(&program, flag)?;
        for named in argv[1..].iter().flat_map(|a| named_paths(a)) {
            let path = cwd.join(named);
            if std::fs::symlink_metadata(&path).is_ok() {
                check_file_nobody_else_could_change(&path, flag)?;
            }
        }
        let mut environment = vec![("PATH".to_string(), Some(search))];
        environment.push(("LD_LIBRARY_PATH".into(), (!libraries.is_empty()).then_some(libraries)));
        for loader_variable in ["LD_PRELOAD", "LD_AUDIT"] {
            let Ok(files) = std::env::var(loader_variable) else { continue };
            for file in files.split([':', ' ']).filter(|f| !f.is_empty()) {
                check_file_nobody_else_could_change(Path::new(file), loader_variable)?;
            }
        }
        Ok(CheckedCommand { argv: argv.to_vec(), environment })
    }

    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// What every process started for the command gets in its environment (`None`: removed).
    pub fn environment(&self) -> &[(String, Option<String>)] {
        &self.environment
    }

    /// `command` with [`Self::environment`] applied.
    pub fn apply_environment<'c>(&self, command: &'c mut std::process::Command) -> &'c mut std::process::Command {
        for (name, value) in &self.environment {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        command
    }
}

/// The folders of a `:`-separated list that are absolute and beyond other users' reach, in order.
fn trusted_folders(list: &str) -> String {
    let kept: Vec<&str> = list
        .split(':')
        .filter(|f| f.starts_with('/') && crate::private_dir::check_existing(Path::new(f), "").is_ok())
        .collect();
    kept.join(":")
}

/// Where `name` would be executed from: a name with a `/` from `cwd`, any other from the first folder of `search`
/// that holds an executable file of that name.
fn find_program(name: &str, cwd: &Path, search: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(cwd.join(name));
    }
    search
        .split(':')
        .map(|folder| Path::new(folder).join(name))
        .find(|candidate| std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// What an argument may name on the file system: itself, and for `--opt=value`, the value.
fn named_paths(argument: &str) -> impl Iterator<Item = &str> {
    let value = argument.strip_prefix('-').and_then(|_| argument.split_once('=')).map(|(_, value)| value);
    std::iter::once(argument).chain(value).filter(|a| !a.is_empty())
}
