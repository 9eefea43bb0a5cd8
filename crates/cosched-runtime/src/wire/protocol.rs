//! The requests, replies and agent messages: `cosched_control::wire::protocol`'s, shared with the controller's core
//! and the simulator; here, what reads them off a connection's bytes as the server does.

pub use cosched_control::wire::protocol::*;

/// Each request of a client's bytes, read and parsed as the server does (with the server's line reader).
pub fn parse_requests(mut bytes: &[u8]) -> Vec<Result<Request, String>> {
    let bounds = crate::wire::conn::LineBounds {
        max_bytes: MAX_LINE_BYTES,
        idle: None,
        complete_within: std::time::Duration::from_secs(3600),
    };
    let mut requests = Vec::new();
    loop {
        match crate::wire::conn::read_line_timed(&mut bytes, bounds, |_| Ok(())) {
            Ok(None) => return requests,
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => requests.push(parse_request(&line)),
            Err(e) => {
                requests.push(Err(format!("bad request: {e}")));
                return requests;
            }
        }
    }
}

/// Parse a client's bytes as the server does, and panic if a request accepted does not read back the same once
/// written (as the CLI and the C client write them): the body of the fuzz target `fuzz/fuzz_targets/request.rs`
/// and of the replay of its corpus (`tests/fuzz_corpus.rs`).
#[doc(hidden)]
pub fn check_client_bytes(bytes: &[u8]) {
    for request in parse_requests(bytes).into_iter().flatten() {
        let line = serde_json::to_string(&request).expect("a request can be written");
        assert_eq!(parse_request(&line), Ok(request), "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_read_line_by_line_and_a_bad_line_refuses_only_itself() {
        let stream = b"{\"op\":\"status\"}\n\n{\"op\":\"nope\"}\n{\"op\":\"kill\",\"job\":2}";
        let parsed: Vec<bool> = parse_requests(stream).iter().map(Result::is_ok).collect();
        assert_eq!(parsed, [true, false, true]);
    }
}
