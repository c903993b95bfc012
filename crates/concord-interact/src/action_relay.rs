//! Cancelling an action another replica runs: an [`ActionRelay`] carries a `cancelaction`
//! received by one replica of an agent to the replica whose [`ActionTable`](crate::ActionTable)
//! runs the action (the only one that can stop its work), and brings back its answer.
//!
//! The table stays sans-IO: a cancel for an action it does not hold answers
//! [`ActionTableError::HeldElsewhere`]; the node then asks its relay (a round trip on the
//! network, awaited outside any lock) and answers the caller with what the runner said.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::action_records::ActionRecord;
use crate::actions::ActionTableError;
use crate::problem::{Problem, ProblemType};

/// The seconds a caller should wait before trying again after a [`RelayError`] that may
/// pass (the shared backend away, the runner unreachable): what a 503's `Retry-After` says.
pub const RELAY_RETRY_AFTER_SECS: u64 = 2;

/// What a relayed cancel comes back with: the action as its runner has it after the
/// cancel, or why not.
pub type RelayFuture = Pin<Box<dyn Future<Output = Result<ActionRecord, RelayError>> + Send>>;

/// Why a relayed cancel did not reach the action's runner, or what the runner refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The shared backend (a message broker) could not be reached or did not answer in time:
    /// nothing was delivered. Worth trying again (503 with `Retry-After`).
    #[error("the {backend} relay could not deliver the cancel of action {id:?}: {reason}")]
    Unavailable {
        /// The backend (`"nats"`, …).
        backend: &'static str,
        /// The action id (its first 64 characters).
        id: String,
        /// What it said.
        reason: String,
    },
    /// The replica that runs the action did not answer: it stopped, or lost the backend
    /// (its lease on the action's work expired with it, or will). The action's record may
    /// still say it runs. Worth trying again (503 with `Retry-After`): a runner that only
    /// lost its connection answers once it is back.
    #[error("the replica running action {id:?} did not answer ({reason}): it stopped or cannot be reached")]
    RunnerGone {
        /// The action id (its first 64 characters).
        id: String,
        /// What the backend said (no responders, no answer in time).
        reason: String,
    },
    /// The runner answered with a problem (the action had just finished: 409; it forgot
    /// it: 404).
    #[error("the replica running the action refused the cancel: {}", .0.detail.as_deref().unwrap_or("no detail"))]
    Refused(Box<Problem>),
    /// The runner's answer is not what a relay sends: it is never used.
    #[error("the answer of the replica running action {id:?} is malformed: {detail}")]
    Malformed {
        /// The action id (its first 64 characters).
        id: String,
        /// What is wrong.
        detail: String,
    },
}

impl RelayError {
    /// The problem the caller is answered with: 503 for what may pass (with
    /// [`RELAY_RETRY_AFTER_SECS`] as the `retryAfter` extension member, which an HTTP
    /// binding sends as `Retry-After`), the runner's own problem when it refused, 502 when
    /// its answer was malformed.
    pub fn to_problem(&self) -> Problem {
        match self {
            Self::Unavailable { .. } | Self::RunnerGone { .. } => {
                Problem::of(ProblemType::Unavailable, self.to_string()).with_extension(
                    "retryAfter",
                    serde_json::Value::from(RELAY_RETRY_AFTER_SECS),
                )
            }
            Self::Refused(problem) => (**problem).clone(),
            Self::Malformed { .. } => Problem::new("about:blank")
                .with_status(502)
                .with_detail(self.to_string()),
        }
    }

    /// Whether trying again later may succeed (the answer is a 503).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::RunnerGone { .. })
    }
}

/// The side of a replica that runs actions: cancels what another replica relays to it.
pub trait LocalActions: Send + Sync {
    /// Cancels the action `id` this replica runs; the action as it then stands.
    ///
    /// # Errors
    /// What the table says ([`ActionTableError::Unknown`], [`ActionTableError::Finished`], …).
    fn cancel(&self, id: &str) -> Result<ActionRecord, ActionTableError>;

    /// The detached caller of the action `id` this replica runs came back on another
    /// replica (it queried the action there): its lease starts again, as a query here does.
    ///
    /// # Errors
    /// What the table says ([`ActionTableError::Unknown`], [`ActionTableError::Finished`]).
    fn renew(&self, id: &str) -> Result<(), ActionTableError>;

    /// Another replica answered the action `record.id`, which this replica runs or ran,
    /// while this one was cut off from the shared records past the action's lease:
    /// `record` (its terminal answer) stands, and this replica stops the work if it still
    /// runs and answers the action as every other replica does
    /// ([`Thing::action_ended_elsewhere`](crate::Thing::action_ended_elsewhere)).
    ///
    /// # Errors
    /// What the table says ([`ActionTableError::Unknown`]).
    fn ended_elsewhere(&self, record: &ActionRecord) -> Result<(), ActionTableError>;
}

/// Carries cancels between the replicas of one agent.
///
/// # Contract
/// - [`serve`](Self::serve) makes this replica answer the cancels relayed to the actions
///   its table runs (recorded in the shared [`ActionRecords`](crate::ActionRecords) as run
///   here), with what `local` answers, until the relay is dropped;
/// - [`cancel`](Self::cancel) delivers a cancel to the replica that runs `id` and answers
///   what it said, within a bounded time: never a hang, never a panic;
/// - a cancel is never delivered to a replica that does not run the action (it would
///   answer "unknown"), and never answered as done unless the runner said so;
/// - [`renew`](Self::renew) tells the runner, at most once per call and without waiting,
///   that the action's caller came back here: behind a load balancer a caller polls
///   whichever replica it reaches, and the runner must not let the action's lease run out
///   while it does. Best effort: a renewal lost (the backend away) costs what a query that
///   never came costs.
pub trait ActionRelay: Send + Sync + std::fmt::Debug {
    /// Starts answering the cancels relayed to this replica's actions with `local`.
    ///
    /// # Errors
    /// [`RelayError::Unavailable`] when it cannot start listening.
    fn serve(&self, local: Arc<dyn LocalActions>) -> Result<(), RelayError>;

    /// Delivers a cancel of the action `id` (run by another replica) and answers the
    /// runner's record of it after the cancel.
    fn cancel(&self, id: &str) -> RelayFuture;

    /// Tells the replica that runs the action `id` that its caller came back here; returns
    /// at once (never waits on the network).
    fn renew(&self, id: &str);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_relay_errors_are_503_with_a_retry_after_and_a_refusal_is_the_runners_problem() {
        let gone = RelayError::RunnerGone {
            id: "a1".into(),
            reason: "no responders".into(),
        };
        assert!(gone.is_transient());
        let problem = gone.to_problem();
        assert_eq!(problem.status, Some(503));
        assert_eq!(
            problem.extensions.get("retryAfter"),
            Some(&serde_json::Value::from(RELAY_RETRY_AFTER_SECS))
        );
        let finished = Problem::of(ProblemType::ActionFinished, "already completed");
        let refused = RelayError::Refused(Box::new(finished.clone()));
        assert!(!refused.is_transient());
        assert_eq!(refused.to_problem(), finished);
        let malformed = RelayError::Malformed {
            id: "a1".into(),
            detail: "not JSON".into(),
        };
        assert_eq!(malformed.to_problem().status, Some(502));
    }
}
