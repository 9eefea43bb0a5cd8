//! `cosched history`: jobs as sacct lists them, ended ones included until the controller's retention
//! (`--keep-history-days`), chosen by id, user, state and a time window.

use crate::runtime_cmd::{ask, ClientArgs};
use crate::status_view::{job_table, states_of, uids_of, Format};
use clap::Args;
use cosched_runtime::wire::protocol::{HistoryReply, HistoryRequest, Request, DEFAULT_HISTORY_JOBS, MAX_HISTORY_JOBS};

#[derive(Args, Clone, Debug)]
pub struct HistoryArgs {
    /// Only these jobs (ids, comma-separated).
    #[arg(short = 'j', long = "jobs", value_delimiter = ',', value_name = "JOBID")]
    pub jobs: Vec<u64>,
    /// Only jobs of these users (names or uids, comma-separated); everyone's by default.
    #[arg(short = 'u', long = "user", value_delimiter = ',')]
    pub users: Vec<String>,
    /// Only jobs in these states: queued, running, suspended, finished, killed, failed, active (the first three),
    /// ended (the last three).
    #[arg(short = 's', long = "state", short_alias = 't', value_delimiter = ',')]
    pub states: Vec<String>,
    /// Jobs that ended at or after this time, or are not over: now-7days, now-2h, 2026-11-01, 2026-11-01T08:30
    /// (UTC). Default: now-1day, or every time when jobs are named with -j (as sacct).
    #[arg(short = 'S', long = "starttime")]
    pub since: Option<String>,
    /// Jobs submitted before this time (same forms as --starttime). Default: no bound (the controller's now).
    #[arg(short = 'E', long = "endtime")]
    pub until: Option<String>,
    /// The newest this many matching jobs, listed oldest first.
    #[arg(long, default_value_t = DEFAULT_HISTORY_JOBS, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_HISTORY_JOBS)))]
    pub limit: u32,
    #[arg(short = 'o', long, default_value = Format::HISTORY, long_help = Format::help())]
    pub format: Format,
    /// The jobs' lines alone, without the header (to read fields in a script, use --json).
    #[arg(long)]
    pub noheader: bool,
}

impl HistoryArgs {
    /// The request these flags make, at `now_unix_ms`; an unknown user or state, or a bad time, is named.
    pub fn request(&self, now_unix_ms: u64) -> Result<HistoryRequest, String> {
        let default_since = self.jobs.is_empty().then_some(DEFAULT_SINCE);
        let since = self.since.as_deref().or(default_since);
        let since = since.map(|text| crate::calendar::parse_when(text, now_unix_ms)).transpose();
        let until = self.until.as_deref().map(|text| crate::calendar::parse_when(text, now_unix_ms)).transpose();
        Ok(HistoryRequest {
            jobs: self.jobs.clone(),
            users: uids_of(&self.users)?,
            states: states_of(&self.states)?,
            since_unix_ms: since.map_err(|e| format!("--starttime {e}"))?,
            // The end of the window counts whole: `-E now` includes a job submitted this very millisecond.
            until_unix_ms: until.map_err(|e| format!("--endtime {e}"))?.map(|t| t.saturating_add(1)),
            limit: Some(self.limit),
        })
    }
}

/// The start of the window when neither -S nor -j is given, as sacct's (which starts at midnight).
const DEFAULT_SINCE: &str = "now-1day";

pub fn history(client: &ClientArgs, args: &HistoryArgs) -> Result<(), String> {
    let now_unix_ms = cosched_runtime::wire::jobs::unix_ms_now();
    let reply: HistoryReply = ask(client, &Request::History(args.request(now_unix_ms)?))?;
    if client.json {
        println!("{}", serde_json::to_string_pretty(&reply).unwrap_or_default());
        return Ok(());
    }
    print!("{}", job_table(&reply.jobs, &args.format, now_unix_ms, !args.noheader));
    if reply.more && !args.noheader {
        eprintln!("(older jobs matched too: raise --limit or narrow --starttime to see them)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: HistoryArgs,
    }

    fn request(words: &[&str]) -> Result<HistoryRequest, String> {
        let cli = Cli::try_parse_from(std::iter::once("history").chain(words.iter().copied())).unwrap();
        cli.args.request(100 * 86_400_000)
    }

    #[test]
    fn the_window_is_the_last_day_unless_jobs_are_named_and_ends_at_the_controllers_now() {
        let default = request(&[]).unwrap();
        assert_eq!((default.since_unix_ms, default.until_unix_ms), (Some(99 * 86_400_000), None));
        let named = request(&["-j", "4,5"]).unwrap();
        assert_eq!((named.jobs, named.since_unix_ms), (vec![4, 5], None));
        let both = request(&["-j", "4", "-S", "now-2days", "-E", "now"]).unwrap();
        assert_eq!((both.since_unix_ms, both.until_unix_ms), (Some(98 * 86_400_000), Some(100 * 86_400_000 + 1)));
        assert!(request(&["-E", "soon"]).unwrap_err().starts_with("--endtime 'soon'"));
    }
}
