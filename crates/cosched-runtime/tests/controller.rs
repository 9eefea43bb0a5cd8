//! The controller in this process, on a fresh state directory, its one agent a connection that nothing reads: the
//! job history as it keeps it (what an ended job's record holds, which jobs a `History` request lists, that restarts
//! keep it, that the retention removes records without ever giving their ids again), and what `/metrics` counts of
//! the agents' switches.

use cosched_runtime::controller::{Controller, ControllerSettings};
use cosched_runtime::wire::jobs::{Identity, JobState};
use cosched_runtime::wire::protocol::{
    AgentHello, FromAgent, HistoryReply, HistoryRequest, JobUsage, ReplyData, Request, StatusJob, SubmitRequest,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ALICE: Identity = Identity { uid: 1000, gid: 1000, admin: false };
const BOB: Identity = Identity { uid: 1001, gid: 1001, admin: false };

fn state_dir() -> PathBuf {
    tempfile::Builder::new().prefix("cosched-history-").tempdir().unwrap().keep()
}

fn open(dir: &Path, keep_history: Duration) -> Controller {
    let settings = ControllerSettings {
        state_dir: dir.to_path_buf(),
        keep_finished: Duration::ZERO,
        keep_history,
        nodes: vec!["n0".into()],
        ..ControllerSettings::default()
    };
    let controller = Controller::open(settings).expect("a controller");
    let hello = older_agents_hello();
    controller.agent_connected(&hello, Arc::new(Mutex::new(Box::new(std::io::sink())))).expect("the agent");
    controller
}

fn submit(controller: &Controller, who: &Identity, command: &str) -> u64 {
    let request = Request::Submit(SubmitRequest { ..SubmitRequest::new(vec![command.into()], "/".into()) });
    match controller.handle(who, request).data {
        Some(ReplyData::Submit(reply)) => reply.job,
        other => panic!("submit refused: {other:?}"),
    }
}

/// The job ran `cpu_ns` on its node and exited with `exit_code`.
fn end(controller: &Controller, job: u64, cpu_ns: u64, exit_code: i32) {
    let usage = JobUsage { job, cpu_ns: cpu_ns / 2, pids: vec![], frozen: false };
    let report = FromAgent::usage_report(vec![usage]);
    hear(controller, report);
    let ended = FromAgent::Ended { job, exit_code: Some(exit_code), error: None, cpu_ns: Some(cpu_ns) };
    hear(controller, ended);
}

fn history(controller: &Controller, who: &Identity, request: HistoryRequest) -> HistoryReply {
    let reply = controller.handle(who, Request::History(request));
    match reply.data {
        Some(ReplyData::History(history)) => history,
        _ => panic!("history refused: {:?}", reply.error),
    }
}

fn ids(jobs: &[StatusJob]) -> Vec<u64> {
    jobs.iter().map(|j| j.id).collect()
}

#[test]
fn an_ended_job_keeps_its_exit_status_cpu_time_and_share_across_a_restart() {
    let dir = state_dir();
    let controller = open(&dir, Duration::from_secs(86_400));
    let (ok, failing) = (submit(&controller, &ALICE, "ok"), submit(&controller, &ALICE, "failing"));
    end(&controller, ok, 700_000_000, 0);
    end(&controller, failing, 2_000, 3);
    let before = history(&controller, &ALICE, HistoryRequest::default());
    assert_eq!(ids(&before.jobs), [ok, failing]);
    let (first, second) = (&before.jobs[0], &before.jobs[1]);
    assert_eq!((first.state, first.exit_code, first.cpu_ns), (JobState::Finished, Some(0), 700_000_000));
    assert!(first.slice_share > 0.0, "{first:?}");
    assert_eq!((second.state, second.exit_code), (JobState::Failed, Some(3)));
    assert_eq!(second.error.as_deref(), Some("exited with status 3"));
    assert_eq!(before.keep_history_s, 86_400);
    drop(controller);
    let restarted = open(&dir, Duration::from_secs(86_400));
    assert_eq!(history(&restarted, &ALICE, HistoryRequest::default()).jobs, before.jobs);
}

#[test]
fn history_lists_the_newest_matching_jobs_oldest_first() {
    let controller = open(&state_dir(), Duration::from_secs(86_400));
    let a1 = submit(&controller, &ALICE, "a1");
    let b1 = submit(&controller, &BOB, "b1");
    let a2 = submit(&controller, &ALICE, "a2");
    end(&controller, a1, 1, 0);
    end(&controller, b1, 1, 1);
    let all = |request: HistoryRequest| ids(&history(&controller, &ALICE, request).jobs);
    assert_eq!(all(HistoryRequest::default()), [a1, b1, a2], "running jobs too");
    assert_eq!(all(HistoryRequest { users: vec![ALICE.uid], ..Default::default() }), [a1, a2]);
    assert_eq!(all(HistoryRequest { states: vec![JobState::Failed], ..Default::default() }), [b1]);
    assert_eq!(all(HistoryRequest { jobs: vec![a2, a1], ..Default::default() }), [a1, a2]);
    let limited = history(&controller, &ALICE, HistoryRequest { limit: Some(2), ..Default::default() });
    assert_eq!((ids(&limited.jobs), limited.more), (vec![b1, a2], true));
    let future = cosched_runtime::wire::jobs::unix_ms_now() + 60_000;
    assert_eq!(all(HistoryRequest { since_unix_ms: Some(future), ..Default::default() }), [a2], "not over");
    assert_eq!(all(HistoryRequest { until_unix_ms: Some(1), ..Default::default() }), Vec::<u64>::new());
}

/// A command of control characters takes six times its bytes in JSON: the history sends each command cut to 4 KiB
/// as JSON writes it, and a reply stops short of 8 MiB (the older jobs left out, `more` said).
#[test]
fn history_replies_are_bounded_in_bytes_as_json_writes_them() {
    // In memory: each job is written to the database before its reply.
    // Removed when the test ends (memory, not disk): declared first, so dropped after the controller.
    let shm = tempfile::Builder::new().prefix("cosched-history-").tempdir_in("/dev/shm").unwrap();
    let controller = open(shm.path(), Duration::from_secs(86_400));
    let control = "\u{1}".repeat(1_000);
    let mut newest = 0;
    for owner in [&ALICE, &BOB] {
        for _ in 0..1_000 {
            newest = submit(&controller, owner, &control);
        }
    }
    let root = Identity { uid: 0, gid: 0, admin: true };
    let reply = history(&controller, &root, HistoryRequest { limit: Some(10_000), ..Default::default() });
    let json = serde_json::to_vec(&reply).unwrap().len();
    // The jobs take at most 8 MiB; the reply adds its brackets, commas and two fields.
    assert!(
        reply.more && json <= (8 << 20) + 4096 && reply.jobs.len() > 1_000,
        "{json} bytes, {} jobs",
        reply.jobs.len()
    );
    assert_eq!(reply.jobs.last().map(|j| j.id), Some(newest), "the newest are kept");
    let command = serde_json::to_string(&reply.jobs[0].command).unwrap();
    assert!((4_000..=4_096 + 2).contains(&command.len()), "{} bytes of JSON, quotes included", command.len());
}

#[test]
fn other_users_commands_are_hidden_in_history_as_in_status() {
    let controller = open(&state_dir(), Duration::from_secs(86_400));
    submit(&controller, &ALICE, "alices-secret-flag");
    let seen_by_bob = history(&controller, &BOB, HistoryRequest::default());
    assert!(!seen_by_bob.jobs[0].command.contains("secret"), "{:?}", seen_by_bob.jobs[0]);
    let seen_by_alice = history(&controller, &ALICE, HistoryRequest::default());
    assert_eq!(seen_by_alice.jobs[0].command, "alices-secret-flag");
}

#[test]
fn a_request_beyond_its_bounds_is_refused_by_the_checks() {
    let check = |r: HistoryRequest| cosched_runtime::wire::protocol::checks::check_request(&Request::History(r));
    assert!(check(HistoryRequest { limit: Some(10_000), ..Default::default() }).is_ok());
    let error = check(HistoryRequest { limit: Some(10_001), ..Default::default() }).unwrap_err();
    assert!(error.contains("at most 10000"), "{error}");
    assert!(check(HistoryRequest { limit: Some(0), ..Default::default() }).is_err());
    let error = check(HistoryRequest { users: (0..257).collect(), ..Default::default() }).unwrap_err();
    assert!(error.contains("257 users"), "{error}");
}

#[test]
fn jobs_past_the_retention_leave_memory_and_the_database_and_their_ids_are_never_given_again() {
    let dir = state_dir();
    let controller = open(&dir, Duration::ZERO);
    let (first, second) = (submit(&controller, &ALICE, "one"), submit(&controller, &ALICE, "two"));
    end(&controller, first, 1, 0);
    end(&controller, second, 1, 0);
    std::thread::sleep(Duration::from_millis(5)); // past the retention of 0
    controller.tick();
    assert!(history(&controller, &ALICE, HistoryRequest::default()).jobs.is_empty());
    drop(controller);
    let restarted = open(&dir, Duration::ZERO);
    assert!(history(&restarted, &ALICE, HistoryRequest::default()).jobs.is_empty(), "gone from the database");
    let third = submit(&restarted, &ALICE, "three");
    assert_eq!(third, second + 1, "the removed ids are not given again");
    // Its node's agent away, an ended job may still have its cgroup there: it stays until the agent is back.
    end(&restarted, third, 1, 0);
    restarted.agent_disconnected("n0", &restarted.link_of("n0").expect("a link"));
    std::thread::sleep(Duration::from_millis(1_100)); // the next look for old jobs
    restarted.tick();
    assert_eq!(ids(&history(&restarted, &ALICE, HistoryRequest::default()).jobs), [third]);
}

#[test]
fn the_switch_times_an_agent_reports_are_counted_for_its_node() {
    let controller = open(&state_dir(), Duration::from_secs(86_400));
    let report = FromAgent::Report {
        jobs: vec![],
        load_avg: 0.0,
        switches: 2,
        switch_errors: 0,
        slice_starts: vec![(10, 40_000), (11, 3_000_000)],
        switch_latencies_ns: vec![90_000, 3_100_000],
        stuck_jobs: vec![],
    };
    hear(&controller, report);
    let metrics = controller.metrics();
    let node = &metrics.nodes[0];
    assert_eq!((node.switch_lateness.count(), node.switch_latency.count()), (2, 2));
    let text = cosched_runtime::controller::metrics::render(
        &metrics,
        &Default::default(),
        cosched_runtime::controller::metrics::Syntax::OpenMetrics,
    );
    let line = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).unwrap_or_default().to_string();
    assert_eq!(
        line("cosched_switch_lateness_seconds_bucket{node=\"n0\",le=\"0.00005\"}"),
        "cosched_switch_lateness_seconds_bucket{node=\"n0\",le=\"0.00005\"} 1"
    );
    assert_eq!(
        line("cosched_switch_latency_seconds_bucket{node=\"n0\",le=\"0.0001\"}"),
        "cosched_switch_latency_seconds_bucket{node=\"n0\",le=\"0.0001\"} 1"
    );
    assert_eq!(
        line("cosched_switch_latency_seconds_sum{node=\"n0\"}"),
        "cosched_switch_latency_seconds_sum{node=\"n0\"} 0.00319"
    );
}

/// A report names each slice once and holds at most the 4,096 switches an agent keeps between reports: a longer or
/// repeating one (only a forging agent sends it) is cut, so that it can neither hold the controller's lock for long
/// nor count as several nodes.
#[test]
fn a_report_counts_each_slice_once_and_at_most_what_an_agent_keeps() {
    let controller = open(&state_dir(), Duration::from_secs(86_400));
    let report = |slice_starts: Vec<(u64, u64)>| FromAgent::Report {
        jobs: vec![],
        load_avg: 0.0,
        switches: 0,
        switch_errors: 0,
        switch_latencies_ns: vec![1_000; slice_starts.len()],
        slice_starts,
        stuck_jobs: vec![],
    };
    hear(&controller, report(vec![(10, 40_000), (10, 40_000), (11, 50_000)]));
    assert_eq!(controller.metrics().nodes[0].switch_lateness.count(), 2);
    hear(&controller, report((100..100_100).map(|slice| (slice, 1_000)).collect()));
    let node = &controller.metrics().nodes[0];
    assert_eq!((node.switch_lateness.count(), node.switch_latency.count()), (2 + 4_096, 3 + 4_096));
}

/// An agent older than `submit -o`/`-e` would start the job and ignore its files: the controller fails such a job
/// with the reason instead, and starts jobs without files there as before.
#[test]
fn a_job_with_output_files_never_starts_on_an_agent_that_would_ignore_them() {
    let controller = open(&state_dir(), Duration::from_secs(3600));
    let files = cosched_runtime::wire::output_files::OutputFiles { output: Some("o-%j".into()), ..Default::default() };
    let request = SubmitRequest { output_files: files, ..SubmitRequest::new(vec!["true".into()], "/".into()) };
    let Some(ReplyData::Submit(reply)) = controller.handle(&ALICE, Request::Submit(request)).data else {
        panic!("submit refused")
    };
    let plain = submit(&controller, &ALICE, "true");
    let ended = history(&controller, &ALICE, HistoryRequest { jobs: vec![reply.job], ..Default::default() });
    let job = &ended.jobs[0];
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    assert!(job.error.as_deref().unwrap_or("").contains("the agent of n0 is older than submit -o/-e"), "{job:?}");
    let status = match controller.handle(&ALICE, Request::Status {}).data {
        Some(ReplyData::Status(status)) => status,
        other => panic!("{other:?}"),
    };
    assert_eq!(status.jobs.iter().find(|j| j.id == plain).map(|j| j.state), Some(JobState::Running));
}

/// What node n0's agent says, on its link.
fn hear(controller: &Controller, event: cosched_runtime::wire::protocol::FromAgent) {
    let link = controller.link_of("n0").expect("n0's link");
    assert!(controller.agent_event("n0", &link, event), "n0's link is current");
}

/// A writer whose every write fails, as a connection whose peer is gone.
struct Broken;

impl std::io::Write for Broken {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A link that takes no more writes is closed at once: the node is away (its waiting requests fail rather than
/// wait), what its old reader hears is refused so that it closes the connection, and the agent may connect again.
#[test]
fn a_link_that_takes_no_writes_is_closed_and_the_agent_may_connect_again() {
    let dir = state_dir();
    let controller = open(&dir, Duration::from_secs(3600));
    let old = controller.link_of("n0").expect("n0's link");
    controller.agent_disconnected("n0", &old);
    let hello = older_agents_hello();
    let broken: cosched_runtime::controller::AgentWriter = Arc::new(Mutex::new(Box::new(Broken)));
    controller.agent_connected(&hello, broken.clone()).expect("accepted");
    assert!(controller.link_of("n0").is_none(), "the welcome could not be written: the link is closed");
    assert!(controller.status().nodes.iter().all(|n| !n.connected));
    let report = FromAgent::usage_report(vec![]);
    assert!(!controller.agent_event("n0", &broken, report), "the old link is not heard");
    controller.agent_disconnected("n0", &broken); // its reader's end changes nothing
    controller.agent_connected(&hello, Arc::new(Mutex::new(Box::new(std::io::sink())))).expect("connected again");
    assert!(controller.status().nodes.iter().all(|n| n.connected));
}

/// The hello of node n0's agent of a version before agents had features (it would ignore output files).
fn older_agents_hello() -> AgentHello {
    AgentHello { features: vec![], ..AgentHello::new("n0", 8, 1 << 30, "test") }
}
