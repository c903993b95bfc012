//! `invokeaction`: `POST /actions/{name}` with the input as a JSON body. A request-reply or
//! notify action answers 200 with its output (204 when it answers nothing); a progress
//! action is started and answers 201 with the `Location` of its status resource
//! (`status.rs`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use concord_interact::ActionMode;
use futures_util::StreamExt;
use serde_json::Value;

use super::body::json_body;
use super::{admit, admit_stream, json, HttpState};
use crate::binding::{Site, ThingError};

/// `POST /actions/{name}`.
pub(super) async fn invoke(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let stream = state
        .site
        .thing()
        .interface()
        .actions
        .get(&name)
        .and_then(|action| (action.mode == ActionMode::Stream).then(|| action.stream.clone()));
    if let Some(spec) = stream {
        return invoke_stream(&state, &name, spec, request).await;
    }
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
                // The status resource's own object (`timeRequested` included), and where it is.
                let mut body = match thing.query_action(caller, &id) {
                    Ok(action) => super::status::status_body(&action),
                    Err(error) => return refused(error),
                };
                if let Value::Object(fields) = &mut body {
                    fields.insert("href".to_owned(), Value::String(location.clone()));
                }
                (
                    StatusCode::CREATED,
                    [(header::LOCATION, location)],
                    json(body),
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

/// A stream action: the request's body (chunked, of any length) is the caller's half, the
/// response's body the action's (`Content-Type` its output content type); the input is
/// the query's `input` parameter, JSON (none: `null`, which the input schema judges).
async fn invoke_stream(
    state: &HttpState,
    name: &str,
    spec: Option<concord_interact::StreamSpec>,
    request: Request,
) -> Response {
    let (admitted, body) = match admit_stream(state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let input = match stream_input(admitted.parts.uri.query()) {
        Ok(input) => input,
        Err(problem) => return problem.with_instance(admitted.path()).into_response(),
    };
    let thing = state.site.thing();
    match thing.invoke_stream(&admitted.caller, admitted.remote.ip(), name, input, body) {
        Ok(out) => {
            let content_type = spec
                .map(|spec| spec.output_content_type.unwrap_or(spec.content_type))
                .unwrap_or_else(|| "application/octet-stream".to_owned());
            let out = until_drained(state.site.clone(), out);
            ([(header::CONTENT_TYPE, content_type)], out).into_response()
        }
        Err(error) => admitted.refusal(state, &error).into_response(),
    }
}

/// `body`, cut short when the node drains ([`Site::draining`]); the action's body
/// dropped then ends the action.
fn until_drained(site: Site, body: Body) -> Body {
    let chunks = body.into_data_stream();
    let stream = futures_util::stream::unfold(Some((site, chunks)), |state| async move {
        let (site, mut chunks) = state?;
        tokio::select! {
            chunk = chunks.next() => chunk.map(|chunk| {
                (chunk.map_err(std::io::Error::other), Some((site, chunks)))
            }),
            () = site.draining() => Some((Err(std::io::Error::other("the node drains")), None)),
        }
    });
    Body::from_stream(stream)
}

/// The JSON of the query's `input` parameter; `null` without one; 400 when it is not JSON.
fn stream_input(query: Option<&str>) -> Result<Value, crate::binding::ProblemResponse> {
    let given = query.and_then(|query| {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == super::STREAM_INPUT)
            .map(|(_, value)| value.into_owned())
    });
    let Some(text) = given else {
        return Ok(Value::Null);
    };
    serde_json::from_str(&text).map_err(|error| {
        crate::binding::ProblemResponse::new(
            400,
            "Invalid input",
            format!("the query's input parameter is not JSON: {error}"),
        )
        .with_type("urn:concord:http:invalid-json")
    })
}
