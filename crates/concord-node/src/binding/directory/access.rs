//! Who may use which operation of the directory: each route is one or more of the
//! directory's Thing Model affordances (`things`, `createAnonymousThing`, `createThing`,
//! `retrieveThing`, `updateThing`, `partiallyUpdateThing`, `deleteThing`,
//! `searchJSONPath`, `searchCapability`, `thingCreated`, `thingUpdated`, `thingDeleted`),
//! and the node's `allow` rules decide on each name as they do for an agent's own
//! affordances: an anonymous caller refused is answered 401 with ANP's challenge, any
//! other 403.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use concord_identity::Caller;

use super::DirectoryState;
use crate::binding::http::{admit_stream, Admitted};
use crate::binding::ThingError;

/// The names of the directory's affordances the `allow` rules may name (beside the
/// agent's own actions) when the node serves a directory.
pub(crate) const AFFORDANCES: &[&str] = &[
    "things",
    "createAnonymousThing",
    "createThing",
    "retrieveThing",
    "updateThing",
    "partiallyUpdateThing",
    "deleteThing",
    "searchJSONPath",
    "searchCapability",
    "thingCreated",
    "thingUpdated",
    "thingDeleted",
];

/// The affordances a request names (all must be permitted).
pub(super) type Affordances = fn(&Parts) -> &'static [&'static str];

/// The refusal (401 to an anonymous caller, 403 else) unless the `allow` rules let the
/// caller of `admitted` use every one of `affordances`; `None` when they do.
pub(super) fn refusal(
    state: &DirectoryState,
    admitted: &Admitted,
    affordances: &[&str],
) -> Option<Response> {
    let identity = &state.http.shared.identity;
    let name = affordances
        .iter()
        .find(|name| !identity.permits(&admitted.caller, name))?;
    let forbidden = ThingError::Forbidden {
        name: (*name).to_owned(),
    };
    Some(admitted.refusal(&state.http, &forbidden).into_response())
}

/// `router` (a read: no body), served only to callers the `allow` rules let use the
/// affordances `affordances` names; the caller is found as the HTTP binding finds it.
pub(super) fn reading(
    router: MethodRouter<Arc<DirectoryState>>,
    state: &Arc<DirectoryState>,
    affordances: Affordances,
) -> MethodRouter<Arc<DirectoryState>> {
    router.route_layer(axum::middleware::from_fn_with_state(
        Arc::clone(state),
        move |State(state): State<Arc<DirectoryState>>, request: Request, next: Next| async move {
            // A read every caller may make is served as it comes: credentials it carries
            // (an ANP crawler signs every request) are not checked for nothing.
            let (parts, body) = request.into_parts();
            let identity = &state.http.shared.identity;
            if affordances(&parts)
                .iter()
                .all(|name| identity.permits(&Caller::Anonymous, name))
            {
                return next.run(Request::from_parts(parts, body)).await;
            }
            let request = Request::from_parts(parts, body);
            let (admitted, body) = match admit_stream(&state.http, request).await {
                Ok(admitted) => admitted,
                Err(answer) => return answer,
            };
            if let Some(answer) = refusal(&state, &admitted, affordances(&admitted.parts)) {
                return answer;
            }
            next.run(Request::from_parts(admitted.parts, body)).await
        },
    ))
}

/// The events `GET /events/{kind}` delivers: the one its last path segment names (none
/// for a kind that is not one: the route answers it 404).
pub(super) fn events_of_kind(parts: &Parts) -> &'static [&'static str] {
    match parts.uri.path().rsplit('/').next() {
        Some("thing_created") => &["thingCreated"],
        Some("thing_updated") => &["thingUpdated"],
        Some("thing_deleted") => &["thingDeleted"],
        _ => &[],
    }
}
