//! The core's rules, tested as decisions: inputs at chosen times in, state and effects out, in milliseconds.

use super::*;
use crate::controller::core::NodeRow;
use crate::wire::protocol::AdoptedJob;

pub(crate) const OWNER: Identity = Identity { uid: 1000, gid: 1000, admin: false };
const OTHER: Identity = Identity { uid: 1001, gid: 1001, admin: false };
const ADMIN: Identity = Identity { uid: 0, gid: 0, admin: true };
const S: u64 = 1_000_000_000;

pub(crate) fn at(seconds: u64) -> Now {
    Now { mono_ns: seconds * S, unix_ms: 1_700_000_000_000 + seconds * 1000 }
}

pub(crate) fn hello(node: &str, cpus: u32, adopted: Vec<AdoptedJob>) -> AgentHello {
    AgentHello { adopted, ..AgentHello::new(node, cpus, 1 << 30, "test") }
}

fn core_with(settings: ControllerSettings, nodes: &[(&str, u32)]) -> ControllerCore {
    let settings = ControllerSettings { nodes: nodes.iter().map(|(n, _)| n.to_string()).collect(), ..settings };
    let mut core = ControllerCore::open(settings, Box::<MemoryRecords>::default(), Loaded::default(), at(0));
    for (node, cpus) in nodes {
        core.agent_connected(at(0), &hello(node, *cpus, vec![])).unwrap();
    }
    core
}

/// A core with one node `n0` of `cpus` CPUs whose agent is connected.
pub(crate) fn one_node_core(cpus: u32) -> ControllerCore {
    core_with(ControllerSettings::default(), &[("n0", cpus)])
}

pub(crate) fn submit_as(core: &mut ControllerCore, who: &Identity, time_limit_s: Option<u64>) -> u64 {
    let request = SubmitRequest { time_limit_s, ..SubmitRequest::new(vec!["prog".into()], "/".into()) };
    let now = core.state.now;
    match core.handle(now, who, Request::Submit(request), format!("token-{}", core.state.next_job)) {
        Ok(ReplyData::Submit(reply)) => reply.job,
        other => panic!("{other:?}"),
    }
}

/// The messages queued for agents since the last call.
pub(crate) fn agent_messages(core: &mut ControllerCore) -> Vec<(String, ToAgent)> {
    core.take_effects().to_agents
}

fn report(job: u64, cpu_ns: u64) -> FromAgent {
    FromAgent::usage_report(vec![JobUsage { job, cpu_ns, pids: vec![4242], frozen: false }])
}

/// The core's files name no clock, socket, file, thread, process or random source: everything it knows comes in
/// through its inputs, so a simulation can drive it and a seed replays it.
#[test]
fn the_core_does_no_io() {
    const PATHS: [&str; 9] =
        ["std::fs", "std::net", "std::os", "std::thread", "std::process", "std::io", "rand::", "eprintln!", "println!"];
    const NAMES: [&str; 14] = [
        "Instant",
        "SystemTime",
        "unix_ms_now",
        "Mutex",
        "mpsc",
        "random_hex",
        "getrandom",
        "Storage",
        "File",
        "TcpStream",
        "UnixStream",
        "Command",
        "spawn",
        "sleep",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controller/core");
    let mut files = vec![dir.with_extension("rs")];
    files.extend(std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| !p.ends_with("tests.rs")));
    assert!(files.len() >= 5, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
        for (line_number, line) in code.lines().enumerate() {
            let code_part = line.split("//").next().unwrap();
            let mut names = code_part.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            let named =
                PATHS.iter().find(|p| code_part.contains(*p)).or(NAMES.iter().find(|n| names.any(|w| w == **n)));
            if let Some(what) = named {
                panic!("{}:{}: the core names {what}: {line}", file.display(), line_number + 1);
            }
        }
    }
}

#[test]
fn a_request_whose_record_cannot_be_written_changes_nothing_and_says_so() {
    let mut core = one_node_core(2);
    let first = submit_as(&mut core, &OWNER, None);
    let mut failing = MemoryRecords::default();
    failing.failing = Some("disk full".into());
    core.state.records = Box::new(failing);
    let request = Request::Submit(SubmitRequest::new(vec!["prog".into()], "/".into()));
    let refused = core.handle(at(1), &OWNER, request, "t".into()).unwrap_err();
    assert!(refused.contains("disk full") && refused.contains("nothing was changed"), "{refused}");
    assert_eq!(core.jobs().keys().copied().collect::<Vec<_>>(), [first]);
    let kill = core.handle(at(1), &OWNER, Request::Kill { job: first }, String::new()).unwrap_err();
    assert!(kill.contains("disk full"), "{kill}");
    assert_eq!(core.jobs()[&first].error, None, "a kill not written is not made");
}

#[test]
fn a_user_acts_only_on_their_own_jobs_and_sees_no_other_commands_or_pids() {
    let mut core = one_node_core(2);
    let theirs = submit_as(&mut core, &OTHER, None);
    let mine = submit_as(&mut core, &OWNER, None);
    for request in [Request::Kill { job: theirs }, Request::Suspend { job: theirs }, Request::Usage { job: theirs }] {
        let refused = core.handle(at(1), &OWNER, request, String::new()).unwrap_err();
        assert!(refused.contains("permission denied"), "{refused}");
    }
    let usage = |job| JobUsage { job, cpu_ns: 1, pids: vec![4000 + job as i32], frozen: false };
    core.agent_event(at(1), "n0", FromAgent::usage_report(vec![usage(theirs), usage(mine)]));
    let Ok(ReplyData::Status(status)) = core.handle(at(1), &OWNER, Request::Status {}, String::new()) else {
        panic!("no status")
    };
    let shown = |id: u64| status.jobs.iter().find(|j| j.id == id).unwrap().clone();
    assert_eq!((shown(mine).command.as_str(), shown(theirs).command.as_str()), ("prog", HIDDEN));
    // A reviewer found other users' pids listed: they would undo `hidepid` on /proc.
    assert_eq!((shown(mine).pids.len(), shown(theirs).pids.len()), (1, 0));
    // Nor the pids a kill could not end, under the node or in the job's note (a node reports all its stuck jobs).
    let mut report = FromAgent::usage_report(vec![]);
    for (job, pid) in [(theirs, 77), (mine, 78)] {
        core.handle(at(2), &ADMIN, Request::Kill { job }, String::new()).unwrap();
        if let FromAgent::Report { stuck_jobs, .. } = &mut report {
            stuck_jobs.push(StuckJob { job, processes: 1, pids: vec![pid], since_unix_ms: 0 });
        }
    }
    core.agent_event(at(3), "n0", report);
    let Ok(ReplyData::Status(status)) = core.handle(at(3), &OWNER, Request::Status {}, String::new()) else {
        panic!("no status")
    };
    let stuck_pids: Vec<(u64, Vec<i32>)> = status.nodes[0].stuck_jobs.iter().map(|s| (s.job, s.pids.clone())).collect();
    assert!(stuck_pids.contains(&(theirs, vec![])) && stuck_pids.contains(&(mine, vec![78])), "{stuck_pids:?}");
    let note = |id: u64| status.jobs.iter().find(|j| j.id == id).and_then(|j| j.left_behind.clone());
    assert_eq!(note(theirs).as_deref(), Some(HIDDEN), "{:?}", note(theirs));
    assert!(note(mine).is_some_and(|n| n.contains("78")), "{:?}", note(mine));
}

/// The LLNL rule: a gang job that uses no CPU for `idle_revert` leaves the matrix, and comes back when it uses
/// CPU again; after `idle_forget` it is local for good.
#[test]
fn an_idle_gang_leaves_the_matrix_and_comes_back_when_it_computes() {
    let settings = ControllerSettings {
        idle_revert: Duration::from_secs(600),
        idle_forget: Duration::from_secs(7200),
        ..ControllerSettings::default()
    };
    let mut core = core_with(settings, &[("n0", 1)]);
    let job = submit_as(&mut core, &OWNER, None);
    core.agent_event(at(1), "n0", report(job, 0));
    core.agent_event(at(599), "n0", report(job, 1_000));
    assert!(!core.jobs()[&job].idle, "599 s quiet");
    core.agent_event(at(602), "n0", report(job, 2_000));
    assert!(core.jobs()[&job].idle, "over 600 s with under 1 % of a CPU");
    core.agent_event(at(700), "n0", report(job, 2_000 + 50 * S));
    assert!(!core.jobs()[&job].idle, "it computed again");
    core.agent_event(at(8_000), "n0", report(job, 2_000 + 50 * S));
    let record = &core.jobs()[&job];
    assert_eq!((record.mode, record.idle), (Mode::Local, false), "forgotten after two hours");
}

#[test]
fn ended_jobs_leave_status_then_history_at_their_retention() {
    let settings = ControllerSettings {
        keep_finished: Duration::from_secs(300),
        keep_history: Duration::from_secs(3600),
        ..ControllerSettings::default()
    };
    let mut core = core_with(settings, &[("n0", 1)]);
    let job = submit_as(&mut core, &OWNER, None);
    core.agent_event(at(10), "n0", FromAgent::Ended { job, exit_code: Some(0), error: None, cpu_ns: Some(S) });
    assert_eq!(core.jobs()[&job].state, JobState::Finished);
    let listed = |core: &mut ControllerCore, s| core.status(at(s)).jobs.iter().any(|j| j.id == job);
    assert!(listed(&mut core, 309) && !listed(&mut core, 311));
    core.tick(at(3_609));
    assert!(core.jobs().contains_key(&job));
    core.tick(at(3_611));
    assert!(!core.jobs().contains_key(&job), "past the history's retention");
    let next = submit_as(&mut core, &OWNER, None);
    assert!(next > job, "ids are never reused");
}

#[test]
fn an_answer_counts_only_from_the_agent_asked_and_the_agent_leaving_fails_it() {
    let mut core = core_with(ControllerSettings::default(), &[("n0", 1), ("n1", 1)]);
    let job = submit_as(&mut core, &OWNER, None);
    let ack = core.ask(at(1), "n0", AnswerKind::PidMoved, 0, |ack| ToAgent::AddPid { job, pid: 7, ack, owner: None });
    let ack = ack.unwrap();
    let _ = core.take_effects();
    core.agent_event(at(1), "n1", FromAgent::PidMoved { ack, error: None });
    assert!(core.take_effects().answers.is_empty(), "n1 was not asked");
    core.agent_disconnected(at(2), "n0");
    let answers = core.take_effects().answers;
    assert!(matches!(answers.as_slice(), [(a, Err(e))] if *a == ack && e.contains("went away")), "{answers:?}");
}

#[test]
fn the_clock_stepping_back_does_not_move_monotonic_time() {
    let mut core = one_node_core(1);
    core.tick(at(100));
    core.tick(Now { mono_ns: 5, unix_ms: 0 });
    assert_eq!(core.state.now.mono_ns, 100 * S);
    assert_eq!(core.state.now.unix_ms, 0, "the wall clock is taken as it is");
}

/// Slurm's MaxSubmitJobs and MaxJobCount: a user queues at most the per-user bound, all users together at most the
/// total, registrations count too, and a job that is over no longer counts.
#[test]
fn a_user_holds_at_most_the_per_user_bound_of_jobs_and_all_users_the_total() {
    let limits = super::super::JobLimits { per_user: 3, total: 5, ..super::super::JobLimits::default() };
    let mut core = core_with(ControllerSettings { job_limits: limits, ..ControllerSettings::default() }, &[("n0", 1)]);
    let mine: Vec<u64> = (0..3).map(|_| submit_as(&mut core, &OWNER, None)).collect();
    let submit = |core: &mut ControllerCore, who: &Identity| {
        let request = Request::Submit(SubmitRequest::new(vec!["prog".into()], "/".into()));
        core.handle(at(1), who, request, "t".into())
    };
    let refused = submit(&mut core, &OWNER).unwrap_err();
    assert!(refused.contains("--max-jobs-per-user 3"), "{refused}");
    let register: RegisterRequest = serde_json::from_str(r#"{"cpus_per_node": 1}"#).unwrap();
    let refused = core.handle(at(1), &OWNER, Request::Register(register), "t".into()).unwrap_err();
    assert!(refused.contains("--max-jobs-per-user 3"), "{refused}");
    for _ in 0..2 {
        submit(&mut core, &OTHER).unwrap();
    }
    let refused = submit(&mut core, &OTHER).unwrap_err();
    assert!(refused.contains("--max-jobs 5"), "{refused}");
    core.handle(at(2), &OWNER, Request::Kill { job: mine[0] }, String::new()).unwrap();
    assert!(submit(&mut core, &OWNER).is_err(), "a job being killed still counts");
    core.agent_event(at(3), "n0", FromAgent::Ended { job: mine[0], exit_code: Some(143), error: None, cpu_ns: None });
    assert_eq!(core.jobs()[&mine[0]].state, JobState::Killed);
    assert!(submit(&mut core, &OWNER).is_ok(), "a job that is over no longer counts");
}

/// A job over leaves `status` after `keep_finished`, and its record stays (for the history).
#[test]
fn a_finished_job_leaves_status_after_the_keep_time_and_its_record_stays() {
    let settings = ControllerSettings { keep_finished: Duration::from_secs(1), ..ControllerSettings::default() };
    let mut core = core_with(settings, &[("n0", 1)]);
    let job = submit_as(&mut core, &OWNER, None);
    core.agent_event(at(1), "n0", FromAgent::Ended { job, exit_code: Some(0), error: None, cpu_ns: None });
    assert!(core.status(at(1)).jobs.iter().any(|j| j.id == job && j.state == JobState::Finished));
    assert!(core.status(at(3)).jobs.iter().all(|j| j.id != job));
    let Ok(ReplyData::History(history)) =
        core.handle(at(3), &OWNER, Request::History(HistoryRequest::default()), String::new())
    else {
        panic!("no history")
    };
    assert!(history.jobs.iter().any(|j| j.id == job && j.state == JobState::Finished));
}

/// A core restarted from records in which job 1 (owner's, token "tok", one task) is queued, on nodes n0 and n1.
fn restarted_with_a_queued_job() -> ControllerCore {
    let mut job = JobRecord::new(1, &OWNER, cosched_policy::cluster::JobClass::Batch, false, 1);
    job.token = "tok".into();
    job.argv = vec!["prog".into()];
    let nodes = ["n0", "n1"].map(|n| NodeRow { name: n.into(), cpus: 1, mem_bytes: 1 << 30 }).to_vec();
    let loaded = Loaded { jobs: vec![job], nodes, next_job_id: 2 };
    let settings = ControllerSettings { nodes: vec!["n0".into(), "n1".into()], ..ControllerSettings::default() };
    ControllerCore::open(settings, Box::<MemoryRecords>::default(), loaded, at(0))
}

fn adopted(job: u64, token: Option<&str>) -> AdoptedJob {
    AdoptedJob { job, pids: vec![7], owner: Some(OWNER.uid), token: token.map(str::to_string) }
}

/// A job whose start the records lost runs on a node: it fails there before anything of the hello is planned, its
/// cgroup there ends, and it is not started again on that node over its old processes.
#[test]
fn a_job_the_records_have_queued_but_a_node_runs_fails_with_the_reason() {
    let mut core = restarted_with_a_queued_job();
    core.agent_connected(at(1), &hello("n0", 1, vec![adopted(1, Some("tok"))])).unwrap();
    let record = &core.jobs()[&1];
    assert_eq!(record.state, JobState::Failed);
    assert!(record.error.as_deref().is_some_and(|e| e.contains("its record has it queued")), "{record:?}");
    let sent = agent_messages(&mut core);
    assert!(sent.iter().any(|(n, m)| n == "n0" && matches!(m, ToAgent::Forget { job: 1, .. })), "{sent:?}");
    assert!(!sent.iter().any(|(_, m)| matches!(m, ToAgent::Start(_))), "{sent:?}");
}

/// The job was started again on another node since: it runs on there, and only the old cgroup ends.
#[test]
fn a_job_started_again_elsewhere_keeps_running_and_only_its_old_cgroup_ends() {
    let mut core = restarted_with_a_queued_job();
    core.agent_connected(at(1), &hello("n1", 1, vec![])).unwrap();
    assert_eq!(core.jobs()[&1].placement[0].node, "n1", "started again on n1");
    let _ = agent_messages(&mut core);
    core.agent_connected(at(2), &hello("n0", 1, vec![adopted(1, Some("tok"))])).unwrap();
    assert_eq!(core.jobs()[&1].state, JobState::Running, "it runs on n1");
    let sent = agent_messages(&mut core);
    assert!(sent.iter().any(|(n, m)| n == "n0" && matches!(m, ToAgent::Forget { job: 1, .. })), "{sent:?}");
    assert!(!sent.iter().any(|(n, m)| n == "n1" && matches!(m, ToAgent::Forget { .. } | ToAgent::Terminate { .. })));
}

/// A claim without the record's token (an untagged cgroup) ends nothing, and a hello naming a job twice is refused.
#[test]
fn an_untagged_or_repeated_claim_ends_nothing() {
    let mut core = restarted_with_a_queued_job();
    let twice = hello("n0", 1, vec![adopted(1, Some("tok")), adopted(1, Some("tok"))]);
    let refused = core.agent_connected(at(1), &twice).unwrap_err();
    assert!(refused.contains("names job 1 twice"), "{refused}");
    assert_eq!(core.jobs()[&1].state, JobState::Queued, "a refused hello changes nothing");
    let untagged = core.agent_connected(at(1), &hello("n0", 1, vec![adopted(1, None)])).unwrap_err();
    assert!(untagged.contains("does not know"), "{untagged}");
    assert_eq!(core.jobs()[&1].state, JobState::Queued);
}

/// A job whose node is away is not judged idle, however long: nothing says what it does there.
#[test]
fn a_job_whose_node_is_away_is_not_judged_idle() {
    let mut core = one_node_core(1);
    let job = submit_as(&mut core, &OWNER, None);
    core.agent_event(at(1), "n0", report(job, 0));
    core.agent_disconnected(at(2), "n0");
    core.tick(at(10_000));
    let record = &core.jobs()[&job];
    assert_eq!((record.mode, record.idle), (Mode::Gang, false), "{record:?}");
}

/// An empty registration holds its row (admission counts it) but runs in no slot, so it takes no time from the
/// job beside it; its first process brings it into the cycle at once, without waiting for a report.
#[test]
fn an_empty_registration_holds_its_row_and_takes_no_time_until_a_process_joins() {
    let mut settings = ControllerSettings::default();
    settings.plan.rows = 2;
    let mut core = core_with(settings, &[("n0", 1)]);
    let running = submit_as(&mut core, &OWNER, None);
    let register: RegisterRequest = serde_json::from_str(r#"{"cpus_per_node": 1}"#).unwrap();
    let Ok(ReplyData::Submit(reply)) = core.handle(at(1), &OTHER, Request::Register(register.clone()), "r".into())
    else {
        panic!("the registration was refused")
    };
    let empty = reply.job;
    let share = |core: &mut ControllerCore, id: u64, s| {
        core.status(at(s)).jobs.iter().find(|j| j.id == id).unwrap().slice_share
    };
    let usage = |job: u64, pids: Vec<i32>| JobUsage { job, cpu_ns: 0, pids, frozen: false };
    let reported = FromAgent::usage_report(vec![usage(running, vec![4242]), usage(empty, vec![])]);
    core.agent_event(at(2), "n0", reported);
    assert_eq!((share(&mut core, running, 2), share(&mut core, empty, 2)), (1.0, 0.0));
    let refused = core.handle(at(2), &OTHER, Request::Register(register), "r2".into()).unwrap_err();
    assert!(refused.contains("no room"), "the empty registration's row was given away: {refused}");
    let ack =
        core.ask(at(3), "n0", AnswerKind::PidMoved, 0, |ack| ToAgent::AddPid { job: empty, pid: 7, ack, owner: None });
    core.agent_event(at(3), "n0", FromAgent::PidMoved { ack: ack.unwrap(), error: None });
    assert_eq!((share(&mut core, running, 3), share(&mut core, empty, 3)), (0.5, 0.5));
}

/// Found by a reviewer: a running job's memory raised past admission (70 GB admitted on a 25 GB node) kept other
/// users' jobs queued. A started job gets more memory only where its nodes have it free beside the other jobs; a
/// queued job keeps at least a CPU per node.
#[test]
fn a_started_jobs_memory_is_admitted_again_and_a_queued_job_keeps_a_cpu_per_node() {
    let mut core = one_node_core(2);
    let (running, beside) = (submit_as(&mut core, &OWNER, None), submit_as(&mut core, &OTHER, None));
    let set = |job, cpus_per_node, mem_bytes| Request::SetResources { job, cpus_per_node, mem_bytes };
    assert!(core.handle(at(1), &OTHER, set(beside, None, Some(1 << 29)), String::new()).is_ok());
    let refused = core.handle(at(1), &OWNER, set(running, None, Some((1 << 29) + 1)), String::new()).unwrap_err();
    assert!(refused.contains("do not fit"), "{refused}");
    assert!(core.handle(at(1), &OWNER, set(running, None, Some(1 << 29)), String::new()).is_ok(), "what is free");
    assert_eq!(core.jobs()[&running].mem_bytes, 1 << 29);
    // The first job takes both nodes' memory, so the second waits in the queue.
    let mut two_nodes = core_with(ControllerSettings::default(), &[("n0", 2), ("n1", 2)]);
    let mut submitted = Vec::new();
    for _ in 0..2 {
        let request = SubmitRequest {
            tasks: 2,
            nodes: Some(2),
            mem_bytes: 1 << 30,
            ..SubmitRequest::new(vec!["prog".into()], "/".into())
        };
        let Ok(ReplyData::Submit(reply)) = two_nodes.handle(at(1), &OWNER, Request::Submit(request), "t".into()) else {
            panic!("refused")
        };
        submitted.push(reply);
    }
    assert_eq!(submitted[1].state, JobState::Queued);
    let refused = two_nodes.handle(at(2), &OWNER, set(submitted[1].job, Some(1), None), String::new()).unwrap_err();
    assert!(refused.contains("at least 2 CPUs"), "{refused}");
}
