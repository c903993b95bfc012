//! The end of a session: frames still queued go out, a close frame says why, waiters learn
//! the reason, and the transcript gets its outcome.

use concord_proto::CloseReason;
use concord_store::Outcome;

use super::{Cause, Driver, CLOSE_LINGER};
use crate::config::human;
use crate::transport::{self, close_code, Transport};

impl<T: Transport> Driver<T> {
    pub(super) async fn end(mut self, cause: Cause) {
        // A shed session's slot goes to the newcomer now, not after the close handshake
        // below; any other session holds it to its end, so that a draining server knows
        // its sessions are closed and their transcripts written when it gets them back.
        if matches!(cause, Cause::Shed { .. }) {
            drop(self.shed.take());
        }
        let description = self.describe(&cause);
        tracing::info!(cause = %description, "session ended");
        self.close_interact(&description);
        // Frames the state machine queued before closing (a `rejected`, say) go out first.
        if matches!(
            cause,
            Cause::Session(_) | Cause::Local(_) | Cause::Verification(_)
        ) {
            let _ = self.flush().await;
        }
        let close = match &cause {
            Cause::Session(reason) => Some((close_code_for(reason), reason.to_string())),
            Cause::TooLarge { limit } => Some((
                close_code::TOO_BIG,
                format!("a message exceeds the limit of {limit} bytes"),
            )),
            Cause::Binding(reason) => Some((close_code::PROTOCOL_ERROR, reason.clone())),
            Cause::Shutdown => Some((
                close_code::GOING_AWAY,
                "the node is shutting down".to_owned(),
            )),
            Cause::Idle(limit) => Some((close_code::NORMAL, format!("idle for {}", human(*limit)))),
            Cause::Unresponsive(limit) => Some((
                close_code::POLICY,
                format!("no answer to a ping within {}", human(*limit)),
            )),
            Cause::Shed { holder } => {
                Some((close_code::TRY_AGAIN_LATER, shed_reason(*holder).to_owned()))
            }
            Cause::Local(reason) | Cause::Verification(reason) => {
                Some((close_code::NORMAL, reason.clone()))
            }
            Cause::PeerClosed { .. } => {
                // Answer the peer's close (tungstenite queued the reply).
                let _ = self.transport.flush().await;
                None
            }
            Cause::Transport(_) => None,
        };
        if let Some((code, reason)) = close {
            transport::close(&mut self.transport, code, &reason, CLOSE_LINGER).await;
        }
        // A session that was ready and then ended without a failure of its own agreed;
        // one that failed (even after ready: code generation, verification) failed.
        let benign = matches!(
            cause,
            Cause::Session(CloseReason::Local { .. })
                | Cause::PeerClosed { .. }
                | Cause::Idle(_)
                | Cause::Unresponsive(_)
                | Cause::Shed { .. }
                | Cause::Shutdown
                | Cause::Local(_)
                | Cause::Transport(_)
        );
        let outcome = match (&self.settled, &cause) {
            (Some(settled), _) if self.ever_ready && benign => Outcome::Agreed(settled.hash),
            (_, Cause::Session(CloseReason::NegotiationRejected { .. })) => {
                Outcome::Rejected(description.clone())
            }
            _ => Outcome::Failed(description.clone()),
        };
        // The transcript is complete before anyone waiting learns the session ended.
        if let Some(recorder) = self.recorder.take() {
            recorder.finish(outcome).await;
        }
        self.finish_role(&cause, &description);
    }

    /// One line saying why the session ended.
    pub(super) fn describe(&self, cause: &Cause) -> String {
        match cause {
            Cause::Session(CloseReason::CodeGenerationFailed {
                by: concord_proto::Side::Local,
            }) => match self.prep.last_failure() {
                Some(failure) => format!("our code generation failed: {failure}"),
                None => "our code generation failed".to_owned(),
            },
            Cause::Session(reason) => reason.to_string(),
            Cause::PeerClosed { code, reason } => match code {
                Some(code) if !reason.is_empty() => {
                    format!("the peer closed the connection (code {code}): {reason}")
                }
                Some(code) => format!("the peer closed the connection (code {code})"),
                None => "the peer closed the connection without a close frame".to_owned(),
            },
            Cause::TooLarge { limit } => {
                format!("the peer sent a message over the limit of {limit} bytes")
            }
            Cause::Transport(error) => format!("WebSocket error: {error}"),
            Cause::Binding(reason) => format!("the peer broke the WebSocket binding: {reason}"),
            Cause::Shutdown => "the node is shutting down".to_owned(),
            Cause::Idle(limit) => format!("idle for {}", human(*limit)),
            Cause::Unresponsive(limit) => {
                format!("the peer sent nothing within {} of our ping", human(*limit))
            }
            Cause::Shed { holder } => shed_reason(*holder).to_owned(),
            Cause::Local(reason) => reason.clone(),
            Cause::Verification(reason) => {
                format!("the peer's code fails the agreed test cases: {reason}")
            }
        }
    }
}

/// Why a shed session closes (with 1013, try again later).
const SHED_REASON: &str =
    "the node is at its session limit and this session was idle longest; reconnect when you need it";

/// Why a session holding a subscription, an observation or a stream closes when a new
/// holder took its place in the holders' budget (with 1013, try again later).
const SHED_HOLDER_REASON: &str = "the node holds as many subscriptions and streams as it serves and yours was silent longest; resume later";

/// The close reason of a shed session: for a newcomer's slot, or for a new holder.
fn shed_reason(holder: bool) -> &'static str {
    if holder {
        SHED_HOLDER_REASON
    } else {
        SHED_REASON
    }
}

/// The close code for a session that closed for `reason`.
fn close_code_for(reason: &CloseReason) -> u16 {
    match reason {
        CloseReason::Violation(_) => close_code::PROTOCOL_ERROR,
        CloseReason::TimedOut { .. } => close_code::POLICY,
        _ => close_code::NORMAL,
    }
}
