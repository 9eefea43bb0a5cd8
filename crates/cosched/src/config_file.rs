//! The daemons' configuration file, `/etc/cosched/cosched.toml` (`COSCHED_CONFIG` names another), read by
//! `cosched up`, `cosched controller` and `cosched agent` before their flags. A key is a flag's long name and its
//! value the flag's: `slice-ms = 10`, `nodes = ["node[01-16]"]`, `public-data = true`. Precedence: flags given on
//! the command line, then the file, then the defaults `--help` shows. A key no daemon knows is an error naming the
//! file and the key; a key only another daemon knows is left to it (one file serves the controller's host and the
//! nodes). Root reads it to configure itself, so it must be root's alone, like the folders above it.

use clap::{ArgAction, Command};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub const DEFAULT_PATH: &str = "/etc/cosched/cosched.toml";
/// The largest file read (a configuration is a few hundred bytes).
const MAX_BYTES: u64 = 64 * 1024;
const DAEMONS: [&str; 3] = ["up", "controller", "agent"];

/// `argv` with the file's settings put after the daemon's name (not for other commands, nor when there is no
/// file). Every key is checked before anything starts.
pub fn with_file_settings(argv: Vec<OsString>, command: &Command) -> Result<Vec<OsString>, String> {
    let Some(daemon) = argv.get(1).and_then(|a| a.to_str()).filter(|a| DAEMONS.contains(a)).map(str::to_string) else {
        return Ok(argv);
    };
    let named = std::env::var_os("COSCHED_CONFIG");
    if named.as_deref() == Some(std::ffi::OsStr::new("none")) {
        return Ok(argv); // a daemon with its own settings only (the benches' and the tests')
    }
    let path = named.as_ref().map_or_else(|| PathBuf::from(DEFAULT_PATH), PathBuf::from);
    let Some(text) = read_root_only(&path)? else {
        return match named {
            Some(_) => Err(format!("{}: COSCHED_CONFIG names no file", path.display())),
            None => Ok(argv),
        };
    };
    let settings = file_flags(&text, command, &daemon, &argv[2..]).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut with = argv[..2].to_vec();
    with.extend(settings.into_iter().map(OsString::from));
    with.extend_from_slice(&argv[2..]);
    Ok(with)
}

/// The file's text, `None` when there is no file; refused unless root (or this process's user) alone can change
/// it and the folders above it.
fn read_root_only(path: &Path) -> Result<Option<String>, String> {
    use std::os::unix::fs::MetadataExt;
    if !path.is_absolute() {
        return Err(format!("{}: the configuration is named by an absolute path", path.display()));
    }
    // Not through a link (its target's folder would go unchecked); checked before it is opened for reading.
    let said = |e: std::io::Error| cosched_files::said(path, &e, cosched_files::LastLink::Refuse);
    let (file, meta) = match cosched_files::open_regular(path, cosched_files::LastLink::Refuse) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        other => other.map_err(said)?,
    };
    if cosched_files::owner_is_the_servers_word(&file).map_err(said)? {
        return Err(format!("{}: on FUSE, whose owners and modes are its server's word", path.display()));
    }
    let owner_ok = meta.uid() == 0 || meta.uid() == nix::unistd::geteuid().as_raw();
    if !owner_ok || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{}: a configuration root reads must be a regular file of root's that nobody else may write (mode {:o}, \
             owner uid {})",
            path.display(),
            meta.mode() & 0o7777,
            meta.uid()
        ));
    }
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        cosched_runtime::private_dir::ensure(folder, "the configuration's folder").map_err(|e| e.to_string())?;
    }
    Ok(Some(cosched_files::read_text_bounded(file, MAX_BYTES).map_err(said)?))
}

/// The flags `text` stands for in `daemon`'s command line, leaving out those `given` sets.
fn file_flags(text: &str, command: &Command, daemon: &str, given: &[OsString]) -> Result<Vec<String>, String> {
    let document: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let mut flags = Vec::new();
    for (key, item) in document.iter() {
        if item.is_table() || item.is_array_of_tables() {
            return Err(format!("[{key}]: the file has no tables, only keys (a flag's name = its value)"));
        }
        let Some(arg) = daemon_arg(command, daemon, key)? else { continue };
        if is_given(arg, given) {
            continue;
        }
        let value = item.as_value().ok_or_else(|| format!("{key}: a value, not a table"))?;
        let values: Vec<&toml_edit::Value> = match value.as_array() {
            Some(array) => array.iter().collect(),
            None => vec![value],
        };
        for value in values {
            flags.extend(flag(arg, key, value)?);
        }
    }
    Ok(flags)
}

/// The argument of `daemon` that `key` names; `None` when only another daemon has it; an error when none has.
fn daemon_arg<'c>(command: &'c Command, daemon: &str, key: &str) -> Result<Option<&'c clap::Arg>, String> {
    let long_named = |name: &str| {
        let sub = command.find_subcommand(name)?;
        sub.get_arguments().find(|a| a.get_long() == Some(key) && !a.is_hide_set())
    };
    if let Some(arg) = long_named(daemon) {
        return Ok(Some(arg));
    }
    if DAEMONS.iter().any(|d| long_named(d).is_some()) {
        return Ok(None);
    }
    let mut known: Vec<&str> = DAEMONS
        .iter()
        .filter_map(|d| command.find_subcommand(d))
        .flat_map(|c| c.get_arguments().filter(|a| !a.is_hide_set()).filter_map(|a| a.get_long()))
        .filter(|name| *name != "help")
        .collect();
    known.sort_unstable();
    known.dedup();
    Err(format!("unknown setting '{key}' (the daemons' flags, without their dashes: {})", known.join(", ")))
}

/// Whether the command line sets `arg` already (`--name`, `--name=...`, or its short form).
fn is_given(arg: &clap::Arg, given: &[OsString]) -> bool {
    let long = arg.get_long().map(|l| format!("--{l}"));
    let short = arg.get_short().map(|s| format!("-{s}"));
    given.iter().filter_map(|g| g.to_str()).any(|g| {
        long.as_deref().is_some_and(|l| g == l || g.starts_with(&format!("{l}=")))
            || short.as_deref().is_some_and(|s| g.starts_with(s))
    })
}

/// One value as the flag's words: a switch is `--name` when true and nothing when false.
fn flag(arg: &clap::Arg, key: &str, value: &toml_edit::Value) -> Result<Vec<String>, String> {
    let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let text = match value {
        toml_edit::Value::Boolean(b) if switch => {
            return Ok(if *b.value() { vec![format!("--{key}")] } else { vec![] })
        }
        toml_edit::Value::String(s) if !switch => s.value().clone(),
        toml_edit::Value::Integer(i) if !switch => i.value().to_string(),
        toml_edit::Value::Float(f) if !switch => f.value().to_string(),
        _ if switch => return Err(format!("{key}: true or false")),
        _ => return Err(format!("{key}: a string or a number")),
    };
    Ok(vec![format!("--{key}={text}")])
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cli() -> Command {
        let controller = Command::new("controller")
            .arg(Arg::new("slice_ms").long("slice-ms"))
            .arg(Arg::new("nodes").long("nodes").action(ArgAction::Append))
            .arg(Arg::new("public_data").long("public-data").action(ArgAction::SetTrue))
            .arg(Arg::new("rows").long("rows").short('r'));
        let agent = Command::new("agent").arg(Arg::new("controller").long("controller"));
        Command::new("cosched").subcommand(controller).subcommand(agent)
    }

    fn flags(text: &str, daemon: &str, given: &[&str]) -> Result<Vec<String>, String> {
        let given: Vec<OsString> = given.iter().map(OsString::from).collect();
        file_flags(text, &cli(), daemon, &given)
    }

    #[test]
    fn keys_become_the_daemons_flags_and_the_command_line_wins() {
        let text = "slice-ms = 10\nnodes = [\"a[1-2]\", \"b\"]\npublic-data = true\nrows = 2\ncontroller = \"h:780\"\n";
        let all = flags(text, "controller", &[]).unwrap();
        assert_eq!(all, ["--slice-ms=10", "--nodes=a[1-2]", "--nodes=b", "--public-data", "--rows=2"]);
        let given = flags(text, "controller", &["--slice-ms", "50", "--nodes=c", "-r3"]).unwrap();
        assert_eq!(given, ["--public-data"], "flags given replace the file's, lists whole");
        assert_eq!(flags(text, "agent", &[]).unwrap(), ["--controller=h:780"]);
        assert_eq!(flags("public-data = false", "controller", &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_bad_file_is_refused_with_what_and_where() {
        let unknown = flags("slice-ms = 10\nslice_ms = 5\n", "controller", &[]).unwrap_err();
        assert!(unknown.contains("unknown setting 'slice_ms'") && unknown.contains("slice-ms"), "{unknown}");
        let syntax = flags("slice-ms = = 3", "controller", &[]).unwrap_err();
        assert!(syntax.contains("line 1"), "{syntax}");
        assert!(flags("public-data = 1", "controller", &[]).unwrap_err().contains("true or false"));
        assert!(flags("rows = true", "controller", &[]).unwrap_err().contains("a string or a number"));
        assert!(flags("[controller]\nrows = 2", "controller", &[]).unwrap_err().contains("no tables"));
    }
}
