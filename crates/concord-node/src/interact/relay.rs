//! Cancels between the replicas of one agent (`NodeBuilder::action_relay`): this node
//! answers the cancels other replicas relay to the actions it runs, and relays a
//! `cancelaction` for an action another replica runs to that replica.

use std::sync::{Arc, Weak};
use std::time::Instant;

use concord_interact::{
    ActionRecord, ActionRelay, ActionTableError, LocalActions, Problem, RelayError,
};

use super::affordances::Affordances;

/// This node's actions as the relay sees them: a relayed cancel cancels here, as a
/// caller's own `cancelaction` would (the task stops, the caller hears it); an action
/// another replica answered while this one was cut off stops here too.
struct NodeActions {
    affordances: Weak<Affordances>,
}

impl LocalActions for NodeActions {
    fn cancel(&self, id: &str) -> Result<ActionRecord, ActionTableError> {
        let Some(affordances) = self.affordances.upgrade() else {
            return Err(ActionTableError::Unknown {
                id: id.chars().take(64).collect(),
            });
        };
        let mut thing = affordances.lock();
        let cancelled = thing
            .cancel_action(id, Instant::now())
            .map(concord_interact::Action::to_record);
        affordances.wake(&mut thing);
        if cancelled.is_ok() {
            tracing::info!(action_id = %id, "action cancelled by a cancel relayed from another replica");
        }
        cancelled
    }

    fn ended_elsewhere(&self, record: &ActionRecord) -> Result<(), ActionTableError> {
        let Some(affordances) = self.affordances.upgrade() else {
            return Err(ActionTableError::Unknown {
                id: record.id.chars().take(64).collect(),
            });
        };
        let mut thing = affordances.lock();
        let ended = thing.action_ended_elsewhere(record, Instant::now());
        affordances.wake(&mut thing);
        ended
    }

    fn renew(&self, id: &str) -> Result<(), ActionTableError> {
        let Some(affordances) = self.affordances.upgrade() else {
            return Err(ActionTableError::Unknown {
                id: id.chars().take(64).collect(),
            });
        };
        let mut thing = affordances.lock();
        let renewed = thing.renew_action(id, Instant::now());
        affordances.wake(&mut thing);
        renewed
    }
}

/// Makes `relay` deliver the cancels other replicas relay to `affordances`' actions.
///
/// # Errors
/// What the relay says when it cannot start listening.
pub(crate) fn serve(
    relay: &Arc<dyn ActionRelay>,
    affordances: &Arc<Affordances>,
) -> Result<(), RelayError> {
    relay.serve(Arc::new(NodeActions {
        affordances: Arc::downgrade(affordances),
    }))
}

/// Relays a cancel of the action `id` another replica runs: the runner's record after the
/// cancel, or the problem to answer (503 with a retry hint when the runner or the backend
/// cannot be reached).
pub(crate) async fn cancel_elsewhere(
    relay: &Arc<dyn ActionRelay>,
    id: &str,
) -> Result<ActionRecord, Problem> {
    match relay.cancel(id).await {
        Ok(record) => {
            tracing::info!(action_id = %id, "cancel relayed to the replica running the action");
            Ok(record)
        }
        Err(error) => {
            tracing::info!(action_id = %id, %error, "a relayed cancel was not done");
            Err(error.to_problem())
        }
    }
}
