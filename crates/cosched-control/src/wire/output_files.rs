//! Where a job's tasks write their standard output and error when the user says so (`submit -o`/`-e`), in
//! sbatch's file name patterns.
//!
//! The agent runs as root, so it never opens these paths: it only expands the patterns, and the launch shim opens
//! the files once it has become the job's owner and changed to the job's directory (`crate::agent::launch`). The kernel
//! then checks every step of the path as the owner: a link to a file of root's, a folder the owner may not write
//! or a device the owner may not open fails the start as it would fail the owner's own shell.
//!
//! Files are opened as Slurm opens them: appending always, so that tasks sharing one file never overwrite each
//! other's lines, and emptied first unless the user asked to append (`--open-mode`). Only a job of one task,
//! sbatch's case, has its files emptied: in a job of several tasks, which start independently on several nodes, a
//! task emptying a file could wipe lines another task had written there already (a test saw it in one run of
//! two), and two different patterns can name one file (`-o 'o%t' -e o0`), so no pattern proves a file a task's own.

use serde::{Deserialize, Serialize};

/// The user's `-o`, `-e` and `--open-mode`, as submitted (patterns, not yet expanded).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFiles {
    /// Standard output's pattern; standard error goes there too unless `error` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Standard error's pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Append to existing files instead of emptying them first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
}

/// The longest pattern, and the longest it may expand to, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATTERN_BYTES: usize = 4096;
/// The most an escape can add: a user name (32 bytes on Linux), a node name (64, `validate_node_name`), a u64.
const MAX_USER_BYTES: usize = 32;
const MAX_NODE_BYTES: usize = 64;

/// What a pattern's escapes stand for, for one task.
#[derive(Clone, Debug)]
pub struct TaskNames<'a> {
    pub job: u64,
    pub rank: u32,
    pub node: &'a str,
    pub user: &'a str,
    pub job_name: &'a str,
}

/// One task's files: the paths to open (relative ones from the job's directory), each with whether to empty it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFiles {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<TaskFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<TaskFile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFile {
    pub path: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncate: bool,
}

impl OutputFiles {
    pub fn is_empty(&self) -> bool {
        self.output.is_none() && self.error.is_none()
    }

    /// Every pattern is one the tasks can expand: not empty, no NUL, only known escapes, and at most
    /// `MAX_PATTERN_BYTES` once expanded for a job named `job_name`. Named for the option it came from.
    pub fn check(&self, job_name: &str) -> Result<(), String> {
        for (option, pattern) in [("-o", &self.output), ("-e", &self.error)] {
            if let Some(pattern) = pattern {
                check_pattern(pattern, job_name).map_err(|e| format!("{option} {:?}: {e}", cut(pattern)))?;
            }
        }
        Ok(())
    }

    /// Does a pattern use `%u` (the only escape that needs a look-up)?
    pub fn names_the_user(&self) -> bool {
        [&self.output, &self.error].into_iter().flatten().any(|p| escapes(p).any(|(_, escape)| escape == 'u'))
    }

    /// The files of task `names.rank` of a job of `tasks` tasks; `None` when the user named none.
    pub fn for_task(&self, names: &TaskNames, tasks: u32) -> Option<TaskFiles> {
        if self.is_empty() {
            return None;
        }
        let file = |pattern: &str| TaskFile { path: expand(pattern, names), truncate: !self.append && tasks == 1 };
        Some(TaskFiles {
            stdout: self.output.as_deref().map(file),
            stderr: self.error.as_deref().or(self.output.as_deref()).map(file),
        })
    }
}

/// A pattern with a backslash is taken as it is, backslashes removed, its escapes not expanded (sbatch's `\\`).
fn is_literal(pattern: &str) -> bool {
    pattern.contains('\\')
}

/// The escapes of a pattern `check` accepted, as (width, letter); `%%` is ('0', '%'). None in a literal one.
fn escapes(pattern: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut chars = if is_literal(pattern) { "" } else { pattern }.chars().peekable();
    std::iter::from_fn(move || loop {
        if chars.next()? != '%' {
            continue;
        }
        let width = chars.next_if(char::is_ascii_digit).and_then(|d| d.to_digit(10)).unwrap_or(0) as usize;
        return Some((width, chars.next().unwrap_or('%')));
    })
}

fn cut(pattern: &str) -> String {
    crate::wire::jobs::cut_to_json_bytes(pattern, 80)
}

fn check_pattern(pattern: &str, job_name: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("an empty file name".into());
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!("{} bytes; at most {MAX_PATTERN_BYTES}", pattern.len()));
    }
    if pattern.contains('\0') {
        return Err("a NUL byte in a file name".into());
    }
    if is_literal(pattern) {
        return match pattern.replace('\\', "").is_empty() {
            true => Err("an empty file name once its backslashes are removed".into()),
            false => Ok(()),
        };
    }
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        let rest: String = chars.clone().collect();
        let width_digits = rest.chars().take_while(char::is_ascii_digit).count();
        let escape = rest.chars().nth(width_digits);
        match escape {
            Some('%') if width_digits == 0 => {}
            Some('j' | 't') if width_digits <= 1 => {}
            Some('u' | 'x' | 'N') if width_digits == 0 => {}
            _ => {
                let shown: String = rest.chars().take(width_digits + 1).collect();
                return Err(format!(
                    "unknown escape %{shown} (known: %j job id, %t task rank, %N node, %u user, %x job name, %% a \
                     percent sign; %j and %t take a width of one digit, as %4t)"
                ));
            }
        }
        chars.nth(width_digits);
    }
    let longest: usize = pattern.len()
        + escapes(pattern)
            .map(|(width, escape)| match escape {
                'j' | 't' => width.max(20),
                'u' => MAX_USER_BYTES,
                'N' => MAX_NODE_BYTES,
                'x' => job_name.len(),
                _ => 0,
            })
            .sum::<usize>();
    if longest > MAX_PATTERN_BYTES {
        return Err(format!("it may expand to {longest} bytes; a file name is at most {MAX_PATTERN_BYTES}"));
    }
    Ok(())
}

/// `pattern` with its escapes replaced (a pattern `check` accepted).
pub fn expand(pattern: &str, names: &TaskNames) -> String {
    if is_literal(pattern) {
        return pattern.replace('\\', "");
    }
    let mut text = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        let width = chars.next_if(char::is_ascii_digit).and_then(|d| d.to_digit(10)).unwrap_or(0) as usize;
        match chars.next() {
            Some('%') => text.push('%'),
            Some('j') => text.push_str(&format!("{:0width$}", names.job)),
            Some('t') => text.push_str(&format!("{:0width$}", names.rank)),
            Some('N') => text.push_str(names.node),
            Some('u') => text.push_str(names.user),
            Some('x') => text.push_str(names.job_name),
            Some(other) => {
                text.push('%');
                text.push(other);
            }
            None => text.push('%'),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(rank: u32) -> TaskNames<'static> {
        TaskNames { job: 42, rank, node: "n1", user: "ann", job_name: "nightly" }
    }

    fn files(output: Option<&str>, error: Option<&str>, append: bool) -> OutputFiles {
        OutputFiles { output: output.map(String::from), error: error.map(String::from), append }
    }

    #[test]
    fn escapes_expand_as_sbatch_expands_them() {
        assert_eq!(expand("%x-%j.%t.%N.%u.out", &names(3)), "nightly-42.3.n1.ann.out");
        // A backslash turns every escape off, and goes.
        assert_eq!(expand("run\\%j-%u.%q", &names(3)), "run%j-%u.%q");
        assert!(files(Some("\\%q%9z"), None, false).check("job").is_ok());
        assert!(files(Some("\\\\"), None, false).check("job").is_err());
        assert!(!files(Some("\\%u"), None, false).names_the_user());
        assert_eq!(expand("run%4j_%2t%%", &names(3)), "run0042_03%");
        assert_eq!(expand("plain/file", &names(0)), "plain/file");
    }

    #[test]
    fn unknown_escapes_and_bad_names_are_refused_naming_the_option() {
        for bad in ["%A.out", "%", "x%", "%12j", "%3u", "%%%q"] {
            let error = files(Some(bad), None, false).check("job").unwrap_err();
            assert!(error.starts_with("-o "), "{bad}: {error}");
        }
        assert!(files(None, Some(""), false).check("job").unwrap_err().starts_with("-e "));
        assert!(files(Some("a\0b"), None, false).check("job").is_err());
        assert!(files(Some(&"a".repeat(MAX_PATTERN_BYTES + 1)), None, false).check("job").is_err());
        assert!(files(Some("%%%j%9t%N%u%x"), Some("é%%"), false).check("job").is_ok());
        let name = "n".repeat(256);
        let grows = files(Some(&"%x".repeat(16)), None, false).check(&name).unwrap_err();
        assert!(grows.contains("may expand to"), "{grows}");
        assert!(!files(Some("%x"), None, false).names_the_user());
        assert!(files(Some("a"), Some("%%%u"), false).names_the_user());
        assert!(!files(Some("%%u"), None, false).names_the_user());
    }

    #[test]
    fn standard_error_follows_output_unless_named() {
        let path = |file: Option<TaskFile>| file.map(|f| f.path);
        let both = files(Some("o.%t"), None, false).for_task(&names(1), 2).unwrap();
        assert_eq!((path(both.stdout), path(both.stderr)), (Some("o.1".into()), Some("o.1".into())));
        let apart = files(Some("o"), Some("e"), false).for_task(&names(0), 1).unwrap();
        assert_eq!((path(apart.stdout), path(apart.stderr)), (Some("o".into()), Some("e".into())));
        let error_only = files(None, Some("e"), false).for_task(&names(0), 1).unwrap();
        assert_eq!((path(error_only.stdout), path(error_only.stderr)), (None, Some("e".into())));
        assert_eq!(OutputFiles::default().for_task(&names(0), 1), None);
    }

    #[test]
    fn only_a_job_of_one_task_has_its_files_emptied() {
        let truncated = |f: &OutputFiles, tasks| {
            let files = f.for_task(&names(0), tasks).unwrap();
            (files.stdout.is_some_and(|f| f.truncate), files.stderr.is_some_and(|f| f.truncate))
        };
        assert_eq!(truncated(&files(Some("o"), None, false), 4), (false, false));
        assert_eq!(truncated(&files(Some("o"), None, false), 1), (true, true));
        // 'o%t' of rank 0 and 'o0' are one file: no pattern proves a file a task's own.
        assert_eq!(truncated(&files(Some("o%t"), Some("o0"), false), 4), (false, false));
        assert_eq!(truncated(&files(Some("o.%t"), None, true), 1), (false, false));
    }
}
