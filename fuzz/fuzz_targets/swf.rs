//! A trace file (plain or gzip), read and shaped as the simulator's CLI does before simulating it.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| cosched_workload::fuzz_check::check_trace_bytes(bytes));
