//! Action status resources (`queryaction`, `cancelaction`): `GET` and `DELETE
//! /actions/{name}/{id}`, the `Location` a progress action's 201 names. They are the
//! node's action table's entries (its bounds, its lease: each query renews an unfinished
//! action's lease), not a table of the binding's own.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use concord_interact::{ActionStatus, ActionTableError};
use serde_json::{json, Map, Value};

use super::{admit, json, Admitted, HttpState};
use crate::binding::{ActionState, ProblemResponse, ThingError};

/// `GET /actions/{name}/{id}`: the action's status as the WoT Profile writes it.
pub(super) async fn query(
    State(state): State<Arc<HttpState>>,
    Path((name, id)): Path<(String, String)>,
    request: Request,
) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    match found(&state, &admitted, &name, &id) {
        Ok(action) => json(status_body(&action)).into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// `DELETE /actions/{name}/{id}`: cancels the action (204); a finished one answers 409.
pub(super) async fn cancel(
    State(state): State<Arc<HttpState>>,
    Path((name, id)): Path<(String, String)>,
    request: Request,
) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    if let Err(refused) = found(&state, &admitted, &name, &id) {
        return refused.into_response();
    }
    let thing = state.site.thing();
    let cancelled = match thing.cancel_action(&admitted.caller, &id) {
        // Another replica runs it: relayed there when the node has a relay.
        Err(held @ ThingError::Action(ActionTableError::HeldElsewhere { .. })) => {
            match thing.relay_cancel(&id) {
                Some(relayed) => relayed.await,
                None => Err(held),
            }
        }
        other => other,
    };
    match cancelled {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => admitted.refusal(&state, &error).into_response(),
    }
}

/// The action `id`, when it runs the action `name` and the caller may see it.
fn found(
    state: &HttpState,
    admitted: &Admitted,
    name: &str,
    id: &str,
) -> Result<ActionState, ProblemResponse> {
    let refused = |error: ThingError| admitted.refusal(state, &error);
    let action = state
        .site
        .thing()
        .query_action(&admitted.caller, id)
        .map_err(refused)?;
    if action.name != name {
        // Another action's id under this name: no such status resource.
        return Err(refused(ThingError::Action(
            concord_interact::ActionTableError::Unknown { id: id.to_owned() },
        )));
    }
    Ok(action)
}

/// The WoT Profile's action status object: `status` (a cancelled action is `failed`, its
/// `error` says it was cancelled), `output` once completed, `error` as a problem,
/// `timeRequested`, `timeEnded` once ended, and `progress` when it reported one.
pub(super) fn status_body(action: &ActionState) -> Value {
    let status = match action.status {
        ActionStatus::Pending => "pending",
        ActionStatus::Running => "running",
        ActionStatus::Completed => "completed",
        _ => "failed",
    };
    let mut body = Map::new();
    body.insert("status".into(), json!(status));
    if let Some(output) = &action.output {
        body.insert("output".into(), output.clone());
    }
    if let Some(error) = &action.error {
        body.insert("error".into(), json!(error));
    }
    if let Some(progress) = action.progress {
        body.insert("progress".into(), json!(progress));
    }
    body.insert("timeRequested".into(), json!(rfc3339(action.requested)));
    if let Some(ended) = action.ended {
        body.insert("timeEnded".into(), json!(rfc3339(ended)));
    }
    Value::Object(body)
}

/// `at` as an RFC 3339 date-time in UTC, to the second.
fn rfc3339(at: SystemTime) -> String {
    let seconds = at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
    });
    concord_identity::format_iso8601(seconds)
}
