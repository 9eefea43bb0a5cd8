//! `cosched bench switch` end to end, as root on real cgroups: short windows, checked for what a loaded machine
//! cannot change (what ran, what was counted, that no two gangs ran user code at once), never for speed.

fn bench_switch(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["bench", "switch", "--duration-s", "0.5", "--slices-ms", "2", "--agents", "0", "--json"];
    args.extend(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cosched")).args(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let json_start = stdout.find("\n{\n").unwrap_or_else(|| panic!("no JSON report in:\n{stdout}"));
    serde_json::from_str(&stdout[json_start..]).unwrap()
}

fn check_report(report: &serde_json::Value) {
    let overlap = &report["overlap"];
    assert_eq!(overlap["overlaps"], 0, "user code of both gangs ran at once: {overlap}");
    assert!(overlap["ran_ns"].as_array().unwrap().iter().all(|ns| ns.as_u64().unwrap() > 0), "{overlap}");
    let slice = &report["slices"][0];
    let switches = slice["switches"].as_u64().unwrap();
    assert!(switches > 0, "{slice}");
    assert!(slice["late"].as_u64().unwrap() <= switches, "{slice}");
    let phases = &slice["phases"];
    for phase in ["woke", "requested", "confirmed"] {
        assert!(phases[phase]["count"].as_u64().unwrap() > 0, "{phase}: {phases}");
    }
    // The phases of every switch come in order: woke, asked the outgoing gang to stop, confirmed (or gave up).
    assert!(phases["woke"]["p50_ns"].as_u64() <= phases["requested"]["p50_ns"].as_u64(), "{phases}");
    assert!(phases["requested"]["p50_ns"].as_u64() <= phases["confirmed"]["p50_ns"].as_u64(), "{phases}");
    // Work per CPU-second can only be compared when both windows had CPU time.
    let per_cpu = slice["ratio_per_cpu"].as_f64().unwrap();
    assert!(per_cpu.is_finite() && per_cpu > 0.0, "{slice}");
    let steal = slice["window"]["steal"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&steal), "{steal}");
}

#[test]
fn no_two_gangs_run_user_code_at_once_whether_the_switch_waits_for_the_kernel_or_not() {
    let _machine = cosched_runtime::testing::whole_machine();
    if !nix::unistd::geteuid().is_root() {
        cosched_runtime::testing::say_skipped("bench switch", "needs root for cgroups");
        return;
    }
    let bounded = bench_switch(&[]);
    assert_eq!(bounded["confirm_wait"], "bounded");
    check_report(&bounded);
    let strict = bench_switch(&["--strict"]);
    assert_eq!(strict["confirm_wait"], "strict");
    check_report(&strict);
    assert_eq!(strict["slices"][0]["late"], 0, "a strict switch waits until every task is confirmed stopped");
}
