//! The checks of a request that need no state: the names of classes, signals and nodes. The server runs them on
//! every request before the controller is touched; the controller's handlers use the same parsers where they use
//! the names, and check what needs its state.

use super::Request;
use cosched_policy::JobClass;

/// The checks of a request that need no state (names of classes, signals and nodes), run by the server before the
/// controller is touched; the handlers repeat them where they use the names.
pub fn check_request(request: &Request) -> Result<(), String> {
    let node_ok = |node: &Option<String>| node.as_deref().map_or(Ok(()), validate_node_name);
    match request {
        Request::Submit(r) => parse_class(&r.class).and_then(|_| check_submit_fields(r)),
        Request::Register(r) => parse_class(&r.class).and_then(|_| node_ok(&r.node)),
        Request::SetClass { class, .. } => parse_class(class).map(drop),
        Request::Signal { signal, .. } => parse_signal(signal).map(drop),
        Request::AddPid { node, .. } | Request::RemovePid { node, .. } | Request::NodeLoad { node } => node_ok(node),
        Request::Exec(r) => validate_node_name(&r.node),
        Request::History(r) => check_history(r),
        _ => Ok(()),
    }
}

fn check_submit_fields(r: &super::SubmitRequest) -> Result<(), String> {
    if r.name.len() > super::MAX_JOB_NAME_BYTES || r.name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "a job name is at most {} bytes, without white space or control characters (tables show it as one \
             column)",
            super::MAX_JOB_NAME_BYTES
        ));
    }
    match r.time_limit_s {
        Some(0) => return Err("a time limit of 0 s".into()),
        Some(s) if s > super::MAX_TIME_LIMIT_S => {
            return Err(format!("a time limit of {s} s is more than a year ({} s)", super::MAX_TIME_LIMIT_S));
        }
        _ => {}
    }
    if r.umask.is_some_and(|mask| mask > 0o777) {
        return Err(format!("a file mode creation mask of {:#o}; at most 0o777", r.umask.unwrap_or(0)));
    }
    r.output_files.check(&r.name)
}

/// The most users, and the most jobs, one `History` request names: the controller compares each job with each.
pub const MAX_HISTORY_NAMED: usize = 256;

fn check_history(r: &super::HistoryRequest) -> Result<(), String> {
    for (what, count) in [("users", r.users.len()), ("jobs", r.jobs.len())] {
        if count > MAX_HISTORY_NAMED {
            return Err(format!("history: {count} {what} named; at most {MAX_HISTORY_NAMED}"));
        }
    }
    if r.states.len() > crate::wire::jobs::JobState::ALL.len() {
        return Err(format!(
            "history: {} states named; there are {}",
            r.states.len(),
            crate::wire::jobs::JobState::ALL.len()
        ));
    }
    match r.limit {
        Some(0) => Err("history: a limit of 0 jobs".into()),
        Some(limit) if limit > super::MAX_HISTORY_JOBS => {
            Err(format!("history: a limit of {limit} jobs; at most {}", super::MAX_HISTORY_JOBS))
        }
        _ => Ok(()),
    }
}

/// A signal a user may send to their job: any but those the coscheduler itself uses to stop and start jobs.
pub fn parse_signal(name: &str) -> Result<nix::sys::signal::Signal, String> {
    use nix::sys::signal::Signal;
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
    let signal: Signal = full.parse().map_err(|_| format!("unknown signal {name:?} (e.g. TERM, INT, HUP, USR1)"))?;
    if matches!(signal, Signal::SIGSTOP | Signal::SIGCONT | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU) {
        return Err(format!("{signal} stops or starts processes: use suspend and resume"));
    }
    Ok(signal)
}

pub fn parse_class(text: &str) -> Result<JobClass, String> {
    JobClass::parse(text).ok_or_else(|| format!("unknown class {text:?} (express, interactive, batch or standby)"))
}

pub fn validate_node_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(format!("invalid node name {name:?} (letters, digits, '-', '_', '.'; at most 64)"))
    }
}
