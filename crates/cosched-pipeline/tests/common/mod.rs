//! Helpers shared by the pipeline tests.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// Runs `body` on a thread of its own and waits at most 10 s for it.
pub fn within<R: Send + 'static>(what: &str, body: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(what.to_string())
        .spawn(move || {
            let _ = tx.send(body());
        })
        .expect("spawn the test's pipeline thread");
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => panic!("{what}: the pipeline hung (no result within 10 s)"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: the thread running the pipeline panicked"),
    }
}
