//! The node's limits and timeouts.

use std::time::Duration;

use concord_proto::{SessionConfig, DEFAULT_MAX_FRAME_SIZE};

/// Limits and timeouts of a node. Every field has a safe default ([`Limits::default`]).
///
/// | limit | default | what happens when it is hit |
/// |---|---|---|
/// | `max_frame_size` | 10 MB | the WebSocket is closed with code 1009 and a reason naming the limit |
/// | `max_sessions` | 256 | further WebSocket upgrades are answered HTTP 503 until a session ends |
/// | `max_calls_in_flight` | 256 per session | the provider stops reading the peer's frames until one finishes (back-pressure) |
/// | `hello_timeout` | 10 s | no hello within it: the WebSocket is closed with a reason |
/// | `idle_timeout` | 5 min | a ready session with no frame either way and no call in flight is closed |
/// | `negotiation_timeout` | 60 s | the peer's silence during a negotiation step closes the session (`rejected: timed out`); also bounds each of our own negotiator steps |
/// | `code_generation_timeout` | 60 s | bounds our code generation and test run; the peer's `generated` is awaited as long |
/// | `call_timeout` | 30 s | [`Connection::call`](crate::Connection::call) gives up with [`CallError::Timeout`](crate::CallError::Timeout) |
/// | `max_negotiation_rounds` | 10 | the negotiation ends `rejected` (round cap) |
/// | `transcript_max_age` | 7 days | finished transcripts started earlier are deleted by the next prune |
/// | `transcript_max_count` | 10,000 | the next prune deletes the oldest finished transcripts beyond it |
/// | `transcript_prune_interval` | 1 min | prunes (after a session ends, in a blocking task) run at most this often |
///
/// ```
/// use std::time::Duration;
/// use concord_node::Limits;
///
/// let limits = Limits {
///     call_timeout: Duration::from_secs(5),
///     ..Limits::default()
/// };
/// assert_eq!(limits.max_frame_size, 10 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest WebSocket message (hello or frame, header included) read or sent.
    pub max_frame_size: usize,
    /// Most sessions the provider serves at once.
    pub max_sessions: usize,
    /// Most application calls one provider session runs at once.
    pub max_calls_in_flight: usize,
    /// How long each side waits for the other's hello.
    pub hello_timeout: Duration,
    /// How long a ready session may sit with no frame either way and no call in flight.
    pub idle_timeout: Duration,
    /// How long we wait for the peer's next negotiation message, and how long one of our own
    /// negotiator steps (judging, drafting test cases, diagnosing) may take.
    pub negotiation_timeout: Duration,
    /// How long our code generation (with its test run) may take, and how long we wait for
    /// the peer's `codeGeneration`.
    pub code_generation_timeout: Duration,
    /// How long [`Connection::call`](crate::Connection::call) waits for a response.
    pub call_timeout: Duration,
    /// Most `negotiating` messages a protocol or test-case negotiation may carry.
    pub max_negotiation_rounds: u32,
    /// How long a finished transcript is kept (counted from the session's start).
    pub transcript_max_age: Duration,
    /// Most finished transcripts kept: the newest ones. Sessions in progress are not
    /// counted and never pruned.
    pub transcript_max_count: u64,
    /// Shortest time between two prunes of the transcripts. A prune runs once a session
    /// has ended (its transcript written): at once when the last one ran longer ago,
    /// else when this interval has passed; each deletes what `transcript_max_age` and
    /// `transcript_max_count` do not keep, then checkpoints the write-ahead log
    /// (passively: it never waits for other connections).
    pub transcript_prune_interval: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_sessions: 256,
            max_calls_in_flight: 256,
            hello_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            negotiation_timeout: Duration::from_secs(60),
            code_generation_timeout: Duration::from_secs(60),
            call_timeout: Duration::from_secs(30),
            max_negotiation_rounds: 10,
            transcript_max_age: Duration::from_secs(7 * 24 * 3600),
            transcript_max_count: 10_000,
            transcript_prune_interval: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// `base` (the spec's numbering, or the reference implementation's) with these limits.
    pub(crate) fn session_config(&self, base: SessionConfig) -> SessionConfig {
        let mut config = base;
        config.max_frame_size = self.max_frame_size;
        config.max_negotiation_rounds = self.max_negotiation_rounds;
        config.negotiation_timeout = self.negotiation_timeout;
        config.code_generation_timeout = self.code_generation_timeout;
        config
    }

    /// Checks that no limit is zero; the error names the first one that is.
    ///
    /// ```
    /// let mut limits = concord_node::Limits::default();
    /// assert_eq!(limits.validate(), Ok(()));
    /// limits.max_sessions = 0;
    /// assert_eq!(limits.validate().unwrap_err().name, "max_sessions");
    /// ```
    pub fn validate(&self) -> Result<(), InvalidLimit> {
        let zero = [
            ("max_frame_size", self.max_frame_size == 0),
            ("max_sessions", self.max_sessions == 0),
            ("max_calls_in_flight", self.max_calls_in_flight == 0),
            ("hello_timeout", self.hello_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            ("negotiation_timeout", self.negotiation_timeout.is_zero()),
            (
                "code_generation_timeout",
                self.code_generation_timeout.is_zero(),
            ),
            ("call_timeout", self.call_timeout.is_zero()),
            ("max_negotiation_rounds", self.max_negotiation_rounds == 0),
            ("transcript_max_age", self.transcript_max_age.is_zero()),
            ("transcript_max_count", self.transcript_max_count == 0),
            (
                "transcript_prune_interval",
                self.transcript_prune_interval.is_zero(),
            ),
        ];
        match zero.iter().find(|(_, zero)| *zero) {
            Some(&(name, _)) => Err(InvalidLimit { name }),
            None => Ok(()),
        }
    }
}

/// A [`Limits`] field that is zero, where every limit must be greater than zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be greater than zero")]
#[non_exhaustive]
pub struct InvalidLimit {
    /// The field's name, as in [`Limits`] (`max_sessions`, `call_timeout`, …).
    pub name: &'static str,
}

/// A duration for people: `300 ms`, `15 s`, `2.5 s`.
pub(crate) fn human(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis} ms")
    } else if millis.is_multiple_of(1000) {
        format!("{} s", millis / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_millis(300)), "300 ms");
        assert_eq!(human(Duration::from_secs(15)), "15 s");
        assert_eq!(human(Duration::from_millis(2500)), "2.5 s");
    }

    #[test]
    fn zero_limits_are_refused_by_name() {
        assert_eq!(Limits::default().validate(), Ok(()));
        let limits = Limits {
            max_sessions: 0,
            ..Limits::default()
        };
        let error = limits.validate().unwrap_err();
        assert_eq!(error.name, "max_sessions");
        assert_eq!(error.to_string(), "max_sessions must be greater than zero");
        let limits = Limits {
            call_timeout: Duration::ZERO,
            ..Limits::default()
        };
        assert_eq!(limits.validate().unwrap_err().name, "call_timeout");
        let config = Limits::default().session_config(SessionConfig::default());
        assert_eq!(config.max_frame_size, DEFAULT_MAX_FRAME_SIZE);
    }
}
