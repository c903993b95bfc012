//! Refusals in the log: one line per second per reason at most, with the count since the
//! last line, so that a flood of refused clients does not flood the log.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The shortest time between two log lines for refusals of one reason.
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Logs refusals at most once per second per reason, with how many there were since the
/// last line, so that a flood does not flood the log.
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    /// Per reason: when its last line was logged, and refusals since.
    reasons: Mutex<HashMap<&'static str, (Option<Instant>, u64)>>,
}

impl RefusalLog {
    /// Counts one refusal of `reason` for `remote`; logs when the last line for this
    /// reason is a second old (or there was none).
    pub(crate) fn refused(&self, reason: &'static str, remote: SocketAddr, message: &str) {
        let now = Instant::now();
        let mut reasons = self.reasons.lock().unwrap_or_else(PoisonError::into_inner);
        let (last, count) = reasons.entry(reason).or_insert((None, 0));
        *count += 1;
        if last.is_none_or(|last| now.saturating_duration_since(last) >= LOG_INTERVAL) {
            tracing::warn!(limit = reason, %remote, refused = *count, "refused: {message}");
            *last = Some(now);
            *count = 0;
        }
    }
}
