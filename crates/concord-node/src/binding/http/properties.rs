//! Properties: `readproperty` (`GET /properties/{name}`), `writeproperty` (`PUT
//! /properties/{name}` with the value as a JSON body, 204) and `readallproperties` (`GET
//! /properties`: every property the caller may read, by name).

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::body::json_body;
use super::{admit, json, HttpState};
use crate::binding::{ProblemResponse, ThingError};

/// `GET /properties/{name}`.
pub(super) async fn read(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    match state.site.thing().read_property(&admitted.caller, &name) {
        Ok(value) => json(value).into_response(),
        Err(error) => admitted.refusal(&state, &error).into_response(),
    }
}

/// `PUT /properties/{name}`: 204 once written; a body that is empty answers 400.
pub(super) async fn write(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let instance = admitted.path().to_owned();
    let value = match json_body(&admitted.parts.headers, &admitted.body) {
        Ok(Some(value)) => value,
        Ok(None) => {
            return ProblemResponse::new(
                400,
                "No value",
                "writeproperty takes the new value as a JSON body",
            )
            .with_type("urn:concord:http:no-value")
            .with_instance(instance)
            .into_response()
        }
        Err(problem) => return problem.with_instance(instance).into_response(),
    };
    match state
        .site
        .thing()
        .write_property(&admitted.caller, &name, value)
    {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => admitted.refusal(&state, &error).into_response(),
    }
}

/// `GET /properties`: every property the caller may read (those it may not are left out).
pub(super) async fn read_all(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let thing = state.site.thing();
    let mut values = Map::new();
    for name in thing.interface().properties.keys() {
        match thing.read_property(&admitted.caller, name) {
            Ok(value) => {
                values.insert(name.clone(), value);
            }
            Err(ThingError::Forbidden { .. }) => {}
            Err(error) => return admitted.refusal(&state, &error).into_response(),
        }
    }
    json(Value::Object(values)).into_response()
}
