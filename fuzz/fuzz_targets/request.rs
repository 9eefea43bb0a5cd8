//! The bytes a client sends to the controller, read and parsed as the server does.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| cosched_runtime::protocol::check_client_bytes(bytes));
