//! Ctrl-C for the long commands: stop cleanly on the first, at once on the second.

/// A flag that the first Ctrl-C (or SIGTERM) sets, for the long commands to stop at their next step and clean up
/// (write what finished, stop what they started). A second one ends the process at once.
pub fn stop_on_interrupt() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>, String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // Registered first: with the flag already set, the signal exits (status 1) instead.
        signal_hook::flag::register_conditional_shutdown(signal, 1, flag.clone())
            .and_then(|_| signal_hook::flag::register(signal, flag.clone()))
            .map_err(|e| format!("cannot catch signal {signal}: {e}"))?;
    }
    Ok(flag)
}
