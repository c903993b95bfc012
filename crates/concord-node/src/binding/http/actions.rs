//! `invokeaction`: `POST /actions/{name}` with the input as a JSON body. A request-reply or
//! notify action answers 200 with its output (204 when it answers nothing); a progress
//! action is started and answers 201 with the `Location` of its status resource
//! (`status.rs`).

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use concord_interact::ActionMode;
use serde_json::{json, Value};

use super::body::json_body;
use super::{admit, json, HttpState};
use crate::binding::ThingError;

/// `POST /actions/{name}`.
pub(super) async fn invoke(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let instance = admitted.path().to_owned();
    let refused = |error: ThingError| admitted.refusal(&state, &error).into_response();
    let thing = state.site.thing();
    let Some(mode) = thing
        .interface()
        .actions
        .get(&name)
        .map(|action| action.mode)
    else {
        return refused(ThingError::Unknown {
            kind: "action",
            name,
        });
    };
    let input = match json_body(&admitted.parts.headers, &admitted.body) {
        Ok(input) => input.unwrap_or(Value::Null),
        Err(problem) => return problem.with_instance(instance.as_str()).into_response(),
    };
    let (caller, from) = (&admitted.caller, admitted.remote.ip());
    match mode {
        ActionMode::Progress => match thing.start_action(caller, from, &name, input).await {
            Ok(id) => {
                let location = state.site.http_url(&format!("actions/{name}/{id}"));
                (
                    StatusCode::CREATED,
                    [(header::LOCATION, location.clone())],
                    json(json!({"status": "pending", "href": location})),
                )
                    .into_response()
            }
            Err(error) => refused(error),
        },
        _ => match thing.invoke(caller, from, &name, input).await {
            Ok(Value::Null) => StatusCode::NO_CONTENT.into_response(),
            Ok(output) => json(output).into_response(),
            Err(error) => refused(error),
        },
    }
}
