//! Scenario files (`cosched bench node --scenario-file FILE`): scenarios other than the seven standard ones, in
//! the same terms ([`Scenario`] with a [`ProcessSet`]), so that the bench runs them on the kernel and the node
//! model predicts them alike. The format, `cosched-node-scenario/1`, is JSON (as every file cosched reads); it
//! is documented with examples in docs/bench.md ("Node scenario files") and docs/node-bench/scenarios/.
//!
//! `cosched bench node` may run as root (`calibrate` calls it), and a file may come from anyone: it is data
//! only. Every value is bounded here, before anything runs (the file's size by the reader, [`MAX_FILE_BYTES`]);
//! an error names the scenario and the field, the caller adds the file. Names are of a few safe characters,
//! since they reach tables, the terminal and the processes' command lines (as JSON, never as a command).

use super::{BarrierMember, ProcessSet, ProcessSpec, ReceiveWait, Scenario, ScenarioKind, SCENARIO_NAMES};
use serde_json::{Map, Value};

/// The format name every scenario file starts with; a file of another format is refused.
pub const FORMAT: &str = "cosched-node-scenario/1";
/// The largest scenario file read, bytes.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Scenarios in one file, and in all the files of one run.
pub const MAX_SCENARIOS: usize = 16;
pub const MAX_SCENARIOS_IN_ALL: usize = 24;
/// Processes of one scenario, copies counted.
pub const MAX_PROCESSES: usize = 64;
/// Copies of one process entry.
pub const MAX_COPIES: u64 = 64;
/// Barrier groups of one scenario.
pub const MAX_GROUPS: usize = 16;
pub const MAX_WARM_UP_NS: u64 = 60_000_000_000;
pub const MIN_WINDOW_NS: u64 = 10_000_000;
pub const MAX_WINDOW_NS: u64 = 60_000_000_000;
/// Work of one iteration or phase: at least 10 µs (the worker reads its CPU clock every few µs), at most 10 s.
pub const MIN_WORK_NS: u64 = 10_000;
pub const MAX_WORK_NS: u64 = 10_000_000_000;
/// A sleep: at least 1 µs, at most 10 s.
pub const MIN_SLEEP_NS: u64 = 1_000;
pub const MAX_SLEEP_NS: u64 = 10_000_000_000;
/// `iterations` of a run/sleep process, `phases` of a barrier group.
pub const MAX_ITERATIONS: u64 = 10_000_000;
const MAX_NAME_BYTES: usize = 64;
const MAX_ABOUT_CHARS: usize = 300;
/// The work of a CPU-bound process's iteration (as the standard scenarios' `ProcessSpec::cpu_bound`).
const CPU_BOUND_PIECE_NS: u64 = 10_000_000;

const UNITS: [(&str, u64); 4] = [("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)];

/// The scenarios of a file's text. `allowed_cpus`: the CPUs this process may use, which a scenario's CPUs must
/// be among (a count takes the first ones).
pub fn parse(text: &str, allowed_cpus: &[usize]) -> Result<Vec<Scenario>, String> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let top = Obj::new(&value, String::new())?;
    top.only(&["format", "about", "scenarios"], &[])?;
    match top.text("format", MAX_NAME_BYTES)? {
        Some(FORMAT) => {}
        Some(other) => return Err(top.err("format", &format!("\"{}\" is not \"{FORMAT}\"", printable(other)))),
        None => {
            return Err(top.err("format", &format!("missing: a scenario file starts with \"format\": \"{FORMAT}\"")))
        }
    }
    top.text("about", MAX_ABOUT_CHARS)?;
    let list = top.array("scenarios")?.ok_or_else(|| top.err("scenarios", "missing"))?;
    if list.is_empty() || list.len() > MAX_SCENARIOS {
        return Err(top.err("scenarios", &format!("{} scenarios; 1 to {MAX_SCENARIOS} in a file", list.len())));
    }
    let mut scenarios: Vec<Scenario> = Vec::new();
    for (index, value) in list.iter().enumerate() {
        let scenario = parse_scenario(index, value, allowed_cpus)?;
        if scenarios.iter().any(|s| s.name == scenario.name) {
            return Err(format!(
                "scenario \"{}\" (scenarios[{index}]), field name: a second scenario of that name",
                scenario.name
            ));
        }
        scenarios.push(scenario);
    }
    Ok(scenarios)
}

/// One scenario's group: how its members wait, their work per phase and how many phases.
struct Group {
    name: String,
    wait: ReceiveWait,
    work_ns: u64,
    phases: Option<u64>,
}

fn parse_scenario(index: usize, value: &Value, allowed_cpus: &[usize]) -> Result<Scenario, String> {
    let unnamed = Obj::new(value, format!("scenarios[{index}]"))?;
    let name = unnamed.name("name")?.ok_or_else(|| unnamed.err("name", "missing"))?;
    let obj = unnamed.context(format!("scenario \"{name}\" (scenarios[{index}])"));
    if SCENARIO_NAMES.contains(&name.as_str()) {
        return Err(obj.err("name", "a standard scenario's name (run it with --scenario)"));
    }
    obj.only(&["name", "about", "cpus", "barrier_groups", "processes"], &["warm_up", "window"])?;
    let about = obj.text("about", MAX_ABOUT_CHARS)?.unwrap_or("").to_string();
    let cpus = scenario_cpus(&obj, allowed_cpus)?;
    let warm_up_ns = match obj.duration("warm_up")? {
        Some((ns, key)) if ns > MAX_WARM_UP_NS => {
            return Err(obj.err(&key, &format!("more than {}", show(MAX_WARM_UP_NS))))
        }
        Some((ns, _)) => ns,
        None => 0,
    };
    let (window_ns, window_key) = obj.duration("window")?.ok_or_else(|| obj.err("window_ms", "missing"))?;
    if !(MIN_WINDOW_NS..=MAX_WINDOW_NS).contains(&window_ns) {
        return Err(obj.err(
            &window_key,
            &format!("{} is not in {} to {}", show(window_ns), show(MIN_WINDOW_NS), show(MAX_WINDOW_NS)),
        ));
    }
    let groups = match obj.array("barrier_groups")? {
        None => Vec::new(),
        Some(list) if list.len() > MAX_GROUPS => {
            return Err(obj.err("barrier_groups", &format!("{} groups, at most {MAX_GROUPS}", list.len())))
        }
        Some(list) => {
            let mut groups: Vec<Group> = Vec::new();
            for (g, value) in list.iter().enumerate() {
                let group = parse_group(&obj, g, value)?;
                if groups.iter().any(|other| other.name == group.name) {
                    return Err(obj.err(&format!("barrier_groups[{g}].name"), "a second group of that name"));
                }
                groups.push(group);
            }
            groups
        }
    };
    let entries = obj.array("processes")?.ok_or_else(|| obj.err("processes", "missing"))?;
    if entries.is_empty() || entries.len() > MAX_PROCESSES {
        return Err(obj.err("processes", &format!("{} entries; 1 to {MAX_PROCESSES}", entries.len())));
    }
    let span_ns = warm_up_ns + window_ns;
    let mut processes: Vec<ProcessSpec> = Vec::new();
    for (p, value) in entries.iter().enumerate() {
        for process in parse_process(&obj, p, value, &cpus, span_ns, &groups)? {
            if processes.len() == MAX_PROCESSES {
                return Err(obj
                    .err(&format!("processes[{p}]"), &format!("more than {MAX_PROCESSES} processes, copies counted")));
            }
            if processes.iter().any(|q| q.name == process.name) {
                return Err(
                    obj.err(&format!("processes[{p}].name"), &format!("a second process named {}", process.name))
                );
            }
            processes.push(process);
        }
    }
    for (g, group) in groups.iter().enumerate() {
        let members = processes.iter().filter(|p| p.barrier.as_ref().is_some_and(|m| m.group == group.name)).count();
        if members < 2 {
            return Err(obj.err(
                &format!("barrier_groups[{g}]"),
                &format!("group {} has {members} members; a barrier needs two or more", group.name),
            ));
        }
    }
    let set = ProcessSet { processes, warm_up_ns, window_ns };
    set.check().map_err(|e| format!("scenario \"{name}\": {e}"))?;
    Ok(Scenario { name, about, kind: ScenarioKind::Processes(set) })
}

/// The scenario's CPUs: a count (the first of the allowed ones) or a list, each allowed.
fn scenario_cpus(obj: &Obj, allowed: &[usize]) -> Result<Vec<usize>, String> {
    let shown = allowed.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    match obj.get("cpus") {
        None => Err(obj.err("cpus", "missing: a count (the first CPUs this process may use) or a list of CPUs")),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(count) if count >= 1 && count as usize <= allowed.len() => Ok(allowed[..count as usize].to_vec()),
            _ => Err(obj.err("cpus", &format!("{n} CPUs; 1 to the {} this process may use ({shown})", allowed.len()))),
        },
        Some(Value::Array(list)) => {
            let cpus = cpu_list(obj, "cpus", list, allowed, "this process may use")?;
            Ok(cpus)
        }
        Some(_) => Err(obj.err("cpus", "a count or a list of CPUs")),
    }
}

/// A list of distinct CPU numbers, each in `within`.
fn cpu_list(obj: &Obj, key: &str, list: &[Value], within: &[usize], what: &str) -> Result<Vec<usize>, String> {
    let shown = within.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    if list.is_empty() || list.len() > within.len() {
        return Err(obj.err(key, &format!("{} CPUs; 1 to {} of those {what} ({shown})", list.len(), within.len())));
    }
    let mut cpus = Vec::new();
    for value in list {
        let cpu = value.as_u64().filter(|c| within.contains(&(*c as usize))).map(|c| c as usize);
        let cpu = cpu.ok_or_else(|| obj.err(key, &format!("{value} is not one of the CPUs {what} ({shown})")))?;
        if cpus.contains(&cpu) {
            return Err(obj.err(key, &format!("CPU {cpu} twice")));
        }
        cpus.push(cpu);
    }
    cpus.sort_unstable();
    Ok(cpus)
}

fn parse_group(scenario: &Obj, index: usize, value: &Value) -> Result<Group, String> {
    let obj = Obj::new(value, format!("{}, barrier_groups[{index}]", scenario.ctx))?;
    obj.only(&["name", "wait", "phases"], &["work_per_phase"])?;
    let name = obj.name("name")?.ok_or_else(|| obj.err("name", "missing"))?;
    let wait = match obj.text("wait", MAX_NAME_BYTES)? {
        Some("spin") => ReceiveWait::Spin,
        Some("block") => ReceiveWait::SpinThenBlock { spin_ns: 0 },
        Some(other) => {
            return Err(obj.err("wait", &format!("\"{}\" is neither \"spin\" nor \"block\"", printable(other))))
        }
        None => return Err(obj.err("wait", "missing: \"spin\" or \"block\"")),
    };
    let (work_ns, key) = obj.duration("work_per_phase")?.ok_or_else(|| obj.err("work_per_phase_us", "missing"))?;
    if !(MIN_WORK_NS..=MAX_WORK_NS).contains(&work_ns) {
        return Err(
            obj.err(&key, &format!("{} is not in {} to {}", show(work_ns), show(MIN_WORK_NS), show(MAX_WORK_NS)))
        );
    }
    let phases = obj.count("phases", MAX_ITERATIONS)?;
    Ok(Group { name, wait, work_ns, phases })
}

fn parse_process(
    scenario: &Obj,
    index: usize,
    value: &Value,
    cpus: &[usize],
    span_ns: u64,
    groups: &[Group],
) -> Result<Vec<ProcessSpec>, String> {
    let unnamed = Obj::new(value, format!("{}, processes[{index}]", scenario.ctx))?;
    let name = unnamed.name("name")?.ok_or_else(|| unnamed.err("name", "missing"))?;
    let obj = unnamed.context(format!("{}, process \"{name}\" (processes[{index}])", scenario.ctx));
    obj.only(&["name", "nice", "affinity", "copies", "behaviour"], &["start"])?;
    let nice = match obj.get("nice") {
        None => 0,
        Some(v) => {
            v.as_i64()
                .filter(|n| (-20..=19).contains(n))
                .ok_or_else(|| obj.err("nice", &format!("{v} is not a whole number in -20..=19")))? as i32
        }
    };
    let affinity = match obj.get("affinity") {
        None => cpus.to_vec(),
        Some(Value::String(s)) if s == "all" => cpus.to_vec(),
        Some(Value::Array(list)) => cpu_list(&obj, "affinity", list, cpus, "of the scenario")?,
        Some(_) => return Err(obj.err("affinity", "\"all\" or a list of the scenario's CPUs")),
    };
    let start_ns = match obj.duration("start")? {
        Some((ns, key)) if ns >= span_ns => {
            return Err(obj.err(
                &key,
                &format!("{} is not before the window's end ({} after the start)", show(ns), show(span_ns)),
            ))
        }
        Some((ns, _)) => ns,
        None => 0,
    };
    let copies = obj.count("copies", MAX_COPIES)?.unwrap_or(1);
    let behaviour =
        obj.get("behaviour").ok_or_else(|| obj.err("behaviour", "missing: \"cpu-bound\", or an object with a kind"))?;
    let (compute_ns, sleep_ns, iterations, barrier) = parse_behaviour(&obj, behaviour, groups)?;
    Ok((0..copies)
        .map(|copy| ProcessSpec {
            name: if copies == 1 { name.clone() } else { format!("{name}-{copy}") },
            nice,
            cpus: affinity.clone(),
            compute_ns,
            sleep_ns,
            exchange: None,
            iterations,
            start_ns,
            barrier: barrier.clone(),
            realtime: false,
        })
        .collect())
}

type Behaviour = (u64, u64, Option<u64>, Option<BarrierMember>);

fn parse_behaviour(process: &Obj, value: &Value, groups: &[Group]) -> Result<Behaviour, String> {
    if value.as_str() == Some("cpu-bound") {
        return Ok((CPU_BOUND_PIECE_NS, 0, None, None));
    }
    let obj = Obj::new(value, process.ctx.clone())
        .map_err(|_| process.err("behaviour", "\"cpu-bound\", or an object with a kind"))?;
    let obj = obj.prefixed("behaviour.");
    match obj.text("kind", MAX_NAME_BYTES)? {
        Some("cpu-bound") => {
            obj.only(&["kind"], &[])?;
            Ok((CPU_BOUND_PIECE_NS, 0, None, None))
        }
        Some("run-sleep") => {
            obj.only(&["kind", "iterations"], &["compute", "sleep"])?;
            let (compute_ns, key) = obj.duration("compute")?.ok_or_else(|| obj.err("compute_us", "missing"))?;
            if !(MIN_WORK_NS..=MAX_WORK_NS).contains(&compute_ns) {
                return Err(obj.err(
                    &key,
                    &format!("{} is not in {} to {}", show(compute_ns), show(MIN_WORK_NS), show(MAX_WORK_NS)),
                ));
            }
            let (sleep_ns, key) = obj.duration("sleep")?.ok_or_else(|| obj.err("sleep_us", "missing"))?;
            if !(MIN_SLEEP_NS..=MAX_SLEEP_NS).contains(&sleep_ns) {
                return Err(obj.err(
                    &key,
                    &format!("{} is not in {} to {}", show(sleep_ns), show(MIN_SLEEP_NS), show(MAX_SLEEP_NS)),
                ));
            }
            Ok((compute_ns, sleep_ns, obj.count("iterations", MAX_ITERATIONS)?, None))
        }
        Some("barrier") => {
            obj.only(&["kind", "group"], &[])?;
            let name = obj
                .name("group")?
                .ok_or_else(|| obj.err("group", "missing: the name of one of the scenario's barrier_groups"))?;
            let group = groups.iter().find(|g| g.name == name).ok_or_else(|| {
                obj.err("group", &format!("no barrier group {name} in the scenario's barrier_groups"))
            })?;
            let member = BarrierMember { group: group.name.clone(), wait: group.wait };
            Ok((group.work_ns, 0, group.phases, Some(member)))
        }
        Some(other) => {
            Err(obj.err("kind", &format!("\"{}\" is none of cpu-bound, run-sleep, barrier", printable(other))))
        }
        None => Err(obj.err("kind", "missing: cpu-bound, run-sleep or barrier")),
    }
}

/// A JSON object being read, and where it is (for errors).
struct Obj<'a> {
    map: &'a Map<String, Value>,
    /// `scenario "x" (scenarios[0]), process "y" (processes[2])`; empty at the top.
    ctx: String,
    /// Put before a key in errors (`behaviour.`).
    prefix: &'static str,
}

impl<'a> Obj<'a> {
    fn new(value: &'a Value, ctx: String) -> Result<Obj<'a>, String> {
        match value {
            Value::Object(map) => Ok(Obj { map, ctx, prefix: "" }),
            _ => Err(format!("{}: an object {{...}} is expected", if ctx.is_empty() { "the file" } else { &ctx })),
        }
    }

    fn context(self, ctx: String) -> Obj<'a> {
        Obj { ctx, ..self }
    }

    fn prefixed(self, prefix: &'static str) -> Obj<'a> {
        Obj { prefix, ..self }
    }

    fn err(&self, key: &str, message: &str) -> String {
        let field = format!("field {}{}", self.prefix, printable(key));
        if self.ctx.is_empty() {
            format!("{field}: {message}")
        } else {
            format!("{}, {field}: {message}", self.ctx)
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// Every key is one of `keys`, or a duration `BASE_ns|us|ms|s` of one of `durations`.
    fn only(&self, keys: &[&str], durations: &[&str]) -> Result<(), String> {
        for key in self.map.keys() {
            let duration = durations.iter().any(|base| UNITS.iter().any(|(unit, _)| *key == format!("{base}_{unit}")));
            if !keys.contains(&key.as_str()) && !duration {
                let mut known: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
                known.extend(durations.iter().map(|base| format!("{base}_ns|us|ms|s")));
                return Err(self.err(key, &format!("unknown (known: {})", known.join(", "))));
            }
        }
        Ok(())
    }

    fn text(&self, key: &str, max_chars: usize) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.chars().count() <= max_chars && !s.chars().any(char::is_control) => Ok(Some(s)),
            Some(_) => {
                Err(self.err(key, &format!("a text of at most {max_chars} characters, none a control character")))
            }
        }
    }

    /// A name: 1 to 64 of A-Z a-z 0-9 . _ + -.
    fn name(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if is_name(s) => Ok(Some(s.clone())),
            Some(v) => Err(self.err(
                key,
                &format!("{} is not a name: 1 to {MAX_NAME_BYTES} of A-Z a-z 0-9 . _ + -", printable(&v.to_string())),
            )),
        }
    }

    fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(list)) => Ok(Some(list)),
            Some(_) => Err(self.err(key, "a list [...] is expected")),
        }
    }

    /// A whole number in 1..=max.
    fn count(&self, key: &str, max: u64) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
                _ => Err(self.err(key, &format!("{v} is not a whole number in 1..={max}"))),
            },
        }
    }

    /// A duration given as `BASE_ns`, `BASE_us`, `BASE_ms` or `BASE_s` (one of them), a number of that unit:
    /// its nanoseconds and the key it was given as.
    fn duration(&self, base: &str) -> Result<Option<(u64, String)>, String> {
        let given: Vec<(String, u64, &Value)> = UNITS
            .iter()
            .filter_map(|(unit, ns)| {
                let key = format!("{base}_{unit}");
                self.get(&key).map(|v| (key, *ns, v))
            })
            .collect();
        let (key, unit_ns, value) = match given.as_slice() {
            [] => return Ok(None),
            [one] => one.clone(),
            [first, second, ..] => return Err(self.err(&second.0, &format!("given beside {}: one unit only", first.0))),
        };
        // At most 10^12 s: far above every bound, far below where the nanoseconds overflow.
        let ns = match value.as_u64() {
            Some(n) if n <= 1_000_000_000_000_000_000 / unit_ns => Some(n * unit_ns),
            Some(_) => None,
            None if unit_ns > 1 => value
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0 && *x * unit_ns as f64 <= 1e18)
                .map(|x| (x * unit_ns as f64).round() as u64),
            None => None,
        };
        let ns = ns.ok_or_else(|| {
            self.err(
                &key,
                &format!("{value} is not a non-negative number of {} (whole for ns)", &key[base.len() + 1..]),
            )
        })?;
        Ok(Some((ns, key)))
    }
}

fn is_name(s: &str) -> bool {
    (1..=MAX_NAME_BYTES).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

/// Text from the file, echoed in an error: control characters replaced, at most 80 characters.
fn printable(text: &str) -> String {
    let mut shown: String = text.chars().take(80).map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    if text.chars().count() > 80 {
        shown.push('…');
    }
    shown
}

/// A duration for an error message, in the largest unit that shows it whole.
fn show(ns: u64) -> String {
    match ns {
        0 => "0 ms".into(),
        _ if ns.is_multiple_of(1_000_000_000) => format!("{} s", ns / 1_000_000_000),
        _ if ns.is_multiple_of(1_000_000) => format!("{} ms", ns / 1_000_000),
        _ if ns.is_multiple_of(1_000) => format!("{} µs", ns / 1_000),
        _ => format!("{ns} ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOWED: [usize; 2] = [0, 1];

    /// The three example files of docs/node-bench/scenarios/, as the docs show them.
    fn example(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/node-bench/scenarios").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn set(scenario: &Scenario) -> &ProcessSet {
        match &scenario.kind {
            ScenarioKind::Processes(set) => set,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_example_files_parse_into_checked_process_sets() {
        let late = parse(&example("late-sleeper.json"), &ALLOWED).unwrap();
        assert_eq!(late.len(), 1);
        let s = set(&late[0]);
        assert_eq!((s.warm_up_ns, s.window_ns), (200_000_000, 1_000_000_000));
        let names: Vec<&str> = s.processes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["hog-a", "hog-b", "sleeper"]);
        let sleeper = &s.processes[2];
        assert_eq!((sleeper.start_ns, sleeper.compute_ns, sleeper.sleep_ns), (100_000_000, 200_000, 4_000_000));
        assert!(s.processes.iter().all(|p| p.cpus == [0]));
        assert_eq!(s.processes[0].compute_ns, CPU_BOUND_PIECE_NS);

        let nice = parse(&example("nice-sleeper-spinner.json"), &ALLOWED).unwrap();
        let s = set(&nice[0]);
        assert_eq!(s.processes.iter().map(|p| p.nice).collect::<Vec<_>>(), [5, -5]);

        let barriers = parse(&example("barriers.json"), &ALLOWED).unwrap();
        let names: Vec<&str> = barriers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["spin4-on-2cpus", "two-spin-pairs", "block-pair-and-hog"]);
        let four = set(&barriers[0]);
        assert_eq!(four.processes.len(), 4);
        assert_eq!(four.barrier_groups(), vec![("g", vec![0, 1, 2, 3])]);
        assert!(four
            .processes
            .iter()
            .all(|p| p.cpus == [0, 1] && p.barrier.as_ref().unwrap().wait == ReceiveWait::Spin));
        assert_eq!(set(&barriers[1]).barrier_groups().len(), 2);
        let block = set(&barriers[2]);
        assert_eq!(block.processes[0].barrier.as_ref().unwrap().wait, ReceiveWait::SpinThenBlock { spin_ns: 0 });
    }

    /// A small valid file, changed by `edit` at a JSON pointer; the error must name the scenario and the field.
    fn refused(edit: impl FnOnce(&mut Value)) -> String {
        let mut file = serde_json::json!({
            "format": FORMAT,
            "scenarios": [{
                "name": "s1", "cpus": 1, "warm_up_ms": 100, "window_ms": 500,
                "barrier_groups": [{"name": "g", "wait": "spin", "work_per_phase_us": 500}],
                "processes": [
                    {"name": "hog", "behaviour": "cpu-bound"},
                    {"name": "sl", "nice": 5, "start_ms": 100, "behaviour": {"kind": "run-sleep", "compute_us": 200, "sleep_ms": 4}},
                    {"name": "m", "copies": 2, "behaviour": {"kind": "barrier", "group": "g"}}
                ]
            }]
        });
        parse(&file.to_string(), &ALLOWED).expect("the unedited file is valid");
        edit(&mut file);
        parse(&file.to_string(), &ALLOWED).unwrap_err()
    }

    /// The value at a path like `/scenarios/0/cpus`, made if missing (the last key of an object).
    fn at<'v>(file: &'v mut Value, pointer: &str) -> &'v mut Value {
        pointer.split('/').skip(1).fold(file, |v, key| match key.parse::<usize>() {
            Ok(i) if v.is_array() => &mut v[i],
            _ => &mut v[key],
        })
    }

    #[test]
    fn each_bad_field_is_named_with_its_scenario() {
        use serde_json::json;
        type Edit = Box<dyn FnOnce(&mut Value)>;
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "format",
                Box::new(|f| f["format"] = json!("cosched-node-scenario/2")),
                "field format: \"cosched-node-scenario/2\"",
            ),
            ("no scenarios", Box::new(|f| f["scenarios"] = json!([])), "field scenarios: 0 scenarios"),
            ("unknown top", Box::new(|f| f["run"] = json!("rm -rf /")), "field run: unknown"),
            (
                "built-in name",
                Box::new(|f| *at(f, "/scenarios/0/name") = json!("sleeper")),
                "scenario \"sleeper\" (scenarios[0]), field name: a standard",
            ),
            ("bad name", Box::new(|f| *at(f, "/scenarios/0/name") = json!("a b;c")), "scenarios[0], field name:"),
            (
                "unknown key",
                Box::new(|f| *at(f, "/scenarios/0/command") = json!("ls")),
                "scenario \"s1\" (scenarios[0]), field command: unknown",
            ),
            (
                "cpus",
                Box::new(|f| *at(f, "/scenarios/0/cpus") = json!(3)),
                "scenario \"s1\" (scenarios[0]), field cpus: 3 CPUs",
            ),
            (
                "cpu list",
                Box::new(|f| *at(f, "/scenarios/0/cpus") = json!([0, 7])),
                "field cpus: 7 is not one of the CPUs",
            ),
            (
                "window",
                Box::new(|f| *at(f, "/scenarios/0/window_ms") = json!(0)),
                "scenario \"s1\" (scenarios[0]), field window_ms: 0 ms is not in",
            ),
            (
                "long window",
                Box::new(|f| *at(f, "/scenarios/0/window_ms") = json!(1e300)),
                "field window_ms: 1e+300 is not a non-negative",
            ),
            (
                "two units",
                Box::new(|f| *at(f, "/scenarios/0/window_s") = json!(1)),
                "field window_s: given beside window_ms",
            ),
            (
                "warm-up",
                Box::new(|f| *at(f, "/scenarios/0/warm_up_ms") = json!(61000)),
                "field warm_up_ms: more than 60 s",
            ),
            (
                "nice",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/nice") = json!(20)),
                "scenario \"s1\" (scenarios[0]), process \"sl\" (processes[1]), field nice: 20 is not",
            ),
            (
                "nice low",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/nice") = json!(-21)),
                "process \"sl\" (processes[1]), field nice: -21",
            ),
            (
                "affinity",
                Box::new(|f| *at(f, "/scenarios/0/processes/0/affinity") = json!([1])),
                "process \"hog\" (processes[0]), field affinity: 1 is not one of the CPUs of the scenario",
            ),
            (
                "start",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/start_ms") = json!(600)),
                "process \"sl\" (processes[1]), field start_ms: 600 ms is not before the window's end",
            ),
            (
                "negative start",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/start_ms") = json!(-1)),
                "field start_ms: -1 is not a non-negative",
            ),
            (
                "compute",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/behaviour/compute_us") = json!(1)),
                "process \"sl\" (processes[1]), field behaviour.compute_us: 1 µs is not in 10 µs to 10 s",
            ),
            (
                "sleep",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/behaviour/sleep_ms") = json!(20000)),
                "field behaviour.sleep_ms: 20 s is not in",
            ),
            (
                "kind",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/behaviour/kind") = json!("exec")),
                "process \"sl\" (processes[1]), field behaviour.kind: \"exec\" is none of",
            ),
            (
                "behaviour key",
                Box::new(|f| *at(f, "/scenarios/0/processes/1/behaviour/argv") = json!(["sh"])),
                "field behaviour.argv: unknown",
            ),
            (
                "group",
                Box::new(|f| *at(f, "/scenarios/0/processes/2/behaviour/group") = json!("h")),
                "process \"m\" (processes[2]), field behaviour.group: no barrier group h",
            ),
            (
                "copies",
                Box::new(|f| *at(f, "/scenarios/0/processes/2/copies") = json!(65)),
                "process \"m\" (processes[2]), field copies: 65 is not a whole number in 1..=64",
            ),
            (
                "one member",
                Box::new(|f| *at(f, "/scenarios/0/processes/2/copies") = json!(1)),
                "scenario \"s1\" (scenarios[0]), field barrier_groups[0]: group g has 1 members",
            ),
            (
                "wait",
                Box::new(|f| *at(f, "/scenarios/0/barrier_groups/0/wait") = json!("yield")),
                "scenario \"s1\" (scenarios[0]), barrier_groups[0], field wait: \"yield\"",
            ),
            (
                "work",
                Box::new(|f| *at(f, "/scenarios/0/barrier_groups/0/work_per_phase_us") = json!(0)),
                "barrier_groups[0], field work_per_phase_us: 0 ms is not in",
            ),
            (
                "same name",
                Box::new(|f| *at(f, "/scenarios/0/processes/0/name") = json!("sl")),
                "field processes[1].name: a second process named sl",
            ),
            ("too many", Box::new(|f| *at(f, "/scenarios/0/processes/0/copies") = json!(63)), "more than 64 processes"),
            (
                "the real-time class, which only a standard scenario may ask for",
                Box::new(|f| *at(f, "/scenarios/0/processes/0/realtime") = json!(true)),
                "field realtime: unknown",
            ),
        ];
        for (what, edit, expected) in cases {
            let error = refused(edit);
            assert!(error.contains(expected), "{what}: {error}");
        }
    }

    #[test]
    fn oversized_and_odd_files_are_refused_before_parsing() {
        let huge = " ".repeat(MAX_FILE_BYTES as usize + 1);
        assert!(parse(&huge, &ALLOWED).unwrap_err().contains("larger than"));
        assert!(parse("[1, 2]", &ALLOWED).unwrap_err().contains("the file: an object"));
        assert!(parse("{\"format\": 1", &ALLOWED).unwrap_err().contains("not JSON"));
        assert!(parse("{}", &ALLOWED).unwrap_err().contains("field format: missing"));
    }

    #[test]
    fn durations_take_any_one_unit() {
        let file = |window: &str| {
            format!(
                r#"{{"format": "{FORMAT}", "scenarios": [{{"name": "w", "cpus": [1], {window},
                   "processes": [{{"name": "p", "affinity": "all", "behaviour": {{"kind": "cpu-bound"}}}}]}}]}}"#
            )
        };
        for window in
            [r#""window_s": 0.5"#, r#""window_ms": 500"#, r#""window_us": 500000"#, r#""window_ns": 500000000"#]
        {
            let scenarios = parse(&file(window), &ALLOWED).unwrap();
            assert_eq!(set(&scenarios[0]).window_ns, 500_000_000, "{window}");
            assert_eq!(set(&scenarios[0]).processes[0].cpus, [1]);
        }
        assert!(parse(&file(r#""window_ns": 0.5e9"#), &ALLOWED).unwrap_err().contains("whole for ns"));
    }

    /// A process of a file scenario, as the runner hands it to `__node-proc`, round-trips; one of a standard
    /// scenario is written exactly as before (no start, no barrier fields).
    #[test]
    fn new_fields_are_written_only_when_used() {
        let scenarios = parse(&example("barriers.json"), &ALLOWED).unwrap();
        let member = &set(&scenarios[0]).processes[0];
        let json = serde_json::to_string(member).unwrap();
        assert!(json.contains("\"barrier\":{\"group\":\"g\",\"wait\":\"spin\"}"), "{json}");
        assert_eq!(&serde_json::from_str::<ProcessSpec>(&json).unwrap(), member);
        let plain = serde_json::to_string(&ProcessSpec::cpu_bound("p", 0, &[0])).unwrap();
        assert_eq!(
            plain,
            r#"{"name":"p","nice":0,"cpus":[0],"compute_ns":10000000,"sleep_ns":0,"exchange":null,"iterations":null}"#
        );
    }
}
