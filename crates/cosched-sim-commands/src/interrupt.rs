//! Ctrl-C for the long commands: stop cleanly on the first, at once on the second.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The number of the last SIGINT or SIGTERM caught by [`stop_on_interrupt`], 0 before any.
fn caught_signal() -> &'static Arc<AtomicUsize> {
    static CAUGHT: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    CAUGHT.get_or_init(Arc::default)
}

/// A flag that the first Ctrl-C (or SIGTERM) sets, for the long commands to stop at their next step and clean up
/// (write what finished, stop what they started). A second one ends the process at once, with the shell's
/// status for the signal (130 for SIGINT, 143 for SIGTERM).
pub fn stop_on_interrupt() -> Result<Arc<AtomicBool>, String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // Registered first: with the flag already set, the signal exits instead.
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, flag.clone())
            .and_then(|_| signal_hook::flag::register(signal, flag.clone()))
            .and_then(|_| signal_hook::flag::register_usize(signal, caught_signal().clone(), signal as usize))
            .map_err(|e| format!("cannot catch signal {signal}: {e}"))?;
    }
    Ok(flag)
}

/// The exit status of a command that stopped because of a caught signal: 128 + its number, as a shell reports
/// a process the signal ended (a script then sees the interruption, not a failure). `None` if none was caught.
pub fn interrupted_status() -> Option<u8> {
    match caught_signal().load(Ordering::Relaxed) {
        0 => None,
        signal => u8::try_from(128 + signal).ok(),
    }
}

/// End the process by the caught signal itself, with the signal's default action, once the command has cleaned up:
/// a shell then sees a program the signal ended, and a script stops too instead of going on to its next line.
/// Returns only if no signal was caught or that fails (the caller then exits with [`interrupted_status`]).
pub fn end_by_caught_signal() {
    let signal = caught_signal().load(Ordering::Relaxed);
    if let Ok(signal) = i32::try_from(signal) {
        if signal != 0 {
            let _ = signal_hook::low_level::emulate_default_handler(signal);
        }
    }
}
