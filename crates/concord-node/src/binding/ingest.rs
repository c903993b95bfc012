//! The event-ingest endpoint: with
//! [`NodeBuilder::event_ingest_token`](crate::NodeBuilder::event_ingest_token) set, a
//! backend service publishes the node's
//! events over HTTP, `POST /events/{name}` with the event's data as its JSON body and
//! `Authorization: Bearer <token>`:
//!
//! | the request… | the answer |
//! |---|---|
//! | is published | 202 `{"id": n}` (the event's sequence number) |
//! | has no token, or a wrong one | 401, `WWW-Authenticate: Bearer` |
//! | names an event the node does not declare | 404 |
//! | has a body larger than `Limits::interaction.max_message_size`, or than the event log takes (NATS: `max_payload`) | 413 |
//! | has a body that is not JSON, or data the event's schema refuses | 400 |
//! | arrives when the event log cannot take it (`PublishError::Log`) | 503, `Retry-After: 1` |
//! | carries an `Idempotency-Key` that is not 1 to 128 printable ASCII characters | 400 |
//!
//! An `Idempotency-Key` header (`"…"`, as the IETF draft writes it, or bare) makes a post
//! safe to repeat: the same key within the event log's duplicate window is one event,
//! answered with its first id ([`Publisher::publish_again`]). A post the log could not
//! confirm (a shared log that went away after it took the event) answers 503 with the
//! key to post it again under, the request's own or one the log chose (`"attempt"` in
//! the problem).
//! Errors are RFC 9457 problem details (`application/problem+json`). Without a token the
//! route does not exist (404 for every request).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use concord_describe::Form;
use serde_json::{json, Value};

use crate::binding::{Affordance, Binding, ProblemResponse, Site};
use crate::interact::{PublishError, Publisher};
use crate::node::Shared;

/// Where events are posted.
pub(crate) const INGEST_PATH: &str = "/events/{name}";

/// The bearer token a backend service presents to publish events. Never shown in `Debug`.
#[derive(Clone)]
pub(crate) struct IngestToken(Arc<str>);

impl std::fmt::Debug for IngestToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IngestToken(…)")
    }
}

/// Why a configured event ingest token cannot be used (it travels in a header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum IngestTokenError {
    /// The token is empty.
    #[error("the event ingest token is empty")]
    Empty,
    /// The token holds whitespace, a control character or a character beyond ASCII.
    #[error("the event ingest token must be printable ASCII without spaces")]
    NotPrintableAscii,
}

impl IngestToken {
    /// The token, checked: not empty, no whitespace or control characters (it travels in a
    /// header).
    pub(crate) fn new(token: String) -> Result<Self, IngestTokenError> {
        if token.is_empty() {
            return Err(IngestTokenError::Empty);
        }
        if token
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || !c.is_ascii())
        {
            return Err(IngestTokenError::NotPrintableAscii);
        }
        Ok(Self(token.into()))
    }

    /// Whether `presented` is the token, compared in constant time (its length aside).
    fn matches(&self, presented: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        if expected.len() != presented.len() {
            return false;
        }
        expected
            .iter()
            .zip(presented)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
    }
}

/// What the ingest route serves with: the token, the node's publisher, the body limit.
struct Ingest {
    token: IngestToken,
    publisher: Publisher,
    max_body: usize,
}

/// The event ingest as a [`Binding`]: its route, and no forms (backend services post
/// here, not peers).
struct IngestBinding(Arc<Ingest>);

/// The ingest binding, when the node has a token.
pub(crate) fn binding(shared: &Shared) -> Option<Arc<dyn Binding>> {
    let token = shared.event_ingest_token.clone()?;
    Some(Arc::new(IngestBinding(Arc::new(Ingest {
        token,
        publisher: Publisher {
            affordances: Arc::clone(&shared.affordances),
        },
        max_body: shared.limits.interaction.max_message_size,
    }))))
}

impl Binding for IngestBinding {
    fn name(&self) -> &str {
        "event ingest"
    }

    fn forms(&self, _site: &Site, _affordance: Affordance<'_>) -> Vec<Form> {
        Vec::new()
    }

    fn routes(&self, _site: &Site) -> Router {
        Router::new()
            .route(INGEST_PATH, post(accept))
            .with_state(Arc::clone(&self.0))
    }
}

/// An RFC 9457 answer with `status` and `detail`, titled by the status.
fn problem(status: StatusCode, detail: impl Into<String>) -> ProblemResponse {
    ProblemResponse::new(
        status.as_u16(),
        status.canonical_reason().unwrap_or_default(),
        detail,
    )
}

/// The longest `Idempotency-Key` taken.
const MAX_IDEMPOTENCY_KEY: usize = 128;

/// The request's `Idempotency-Key`, if any: a structured-field string (`"…"`) or bare, 1
/// to [`MAX_IDEMPOTENCY_KEY`] printable ASCII characters without spaces or quotes; what
/// is wrong with it otherwise.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, String> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    let key = bytes
        .strip_prefix(b"\"")
        .and_then(|rest| rest.strip_suffix(b"\""))
        .unwrap_or(bytes);
    let fits = (1..=MAX_IDEMPOTENCY_KEY).contains(&key.len())
        && key
            .iter()
            .all(|byte| byte.is_ascii_graphic() && !matches!(byte, b'"' | b'\\'));
    if !fits {
        return Err(format!(
            "the Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters, without spaces, quotes or backslashes"
        ));
    }
    Ok(Some(String::from_utf8_lossy(key).into_owned()))
}

/// The bearer token of an `Authorization` header.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let scheme = value.get(..7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| value.get(7..))
        .flatten()
        .map(<[u8]>::trim_ascii)
}

async fn accept(
    State(ingest): State<Arc<Ingest>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !bearer(&headers).is_some_and(|token| ingest.token.matches(token)) {
        return problem(
            StatusCode::UNAUTHORIZED,
            "posting events takes `Authorization: Bearer <token>` with the node's event ingest token",
        )
        .with_header("www-authenticate", "Bearer")
        .into_response();
    }
    if !ingest
        .publisher
        .affordances
        .interface
        .events
        .contains_key(&name)
    {
        return problem(
            StatusCode::NOT_FOUND,
            format!("the node has no event named `{name}`"),
        )
        .into_response();
    }
    let bytes = match axum::body::to_bytes(body, ingest.max_body).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the event's data is larger than the limit of {} bytes (or was cut short)",
                    ingest.max_body
                ),
            )
            .into_response()
        }
    };
    let data: Value = match serde_json::from_slice(&bytes) {
        Ok(data) => data,
        Err(error) => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!(
                    "the body is not JSON: {}",
                    crate::backend::describe_json_error(&error, &bytes)
                ),
            )
            .into_response()
        }
    };
    let key = match idempotency_key(&headers) {
        Ok(key) => key,
        Err(detail) => return problem(StatusCode::BAD_REQUEST, detail).into_response(),
    };
    // A shared event log answers over the network (at most its operation timeout): off
    // the runtime's workers.
    let publisher = ingest.publisher.clone();
    let event = name.clone();
    let published = tokio::task::spawn_blocking(move || match key {
        Some(key) => publisher.publish_again(&event, data, &key),
        None => publisher.publish(&event, data),
    })
    .await
    .unwrap_or_else(|error| {
        Err(PublishError::Log(
            concord_interact::EventLogError::Unavailable {
                backend: "node",
                event: name.clone(),
                reason: format!("the publishing task failed: {error}"),
            },
        ))
    });
    match published {
        Ok(id) => {
            tracing::debug!(event = %name, id, "an event posted in was published");
            (
                StatusCode::ACCEPTED,
                [(header::CONTENT_TYPE, "application/json")],
                json!({ "id": id }).to_string(),
            )
                .into_response()
        }
        Err(error @ PublishError::Unknown { .. }) => {
            problem(StatusCode::NOT_FOUND, error.to_string()).into_response()
        }
        Err(PublishError::Log(concord_interact::EventLogError::Uncertain {
            attempt,
            reason,
            ..
        })) => {
            // Taken, then no word: it may be published. Posted again under the key, once.
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the event log did not confirm the event: it may or may not be published \
                     ({reason}); post it again with `Idempotency-Key: \"{attempt}\"` to publish it once"
                ),
            )
            .with_extension("attempt", json!(attempt))
            .with_retry_after(1)
            .into_response()
        }
        Err(error @ PublishError::Log(concord_interact::EventLogError::TooLarge { .. })) => {
            problem(StatusCode::PAYLOAD_TOO_LARGE, error.to_string()).into_response()
        }
        Err(error @ PublishError::Log(_)) => {
            // The event log is away (a shared one: NATS): post it again shortly.
            problem(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
                .with_retry_after(1)
                .into_response()
        }
        Err(error) => problem(StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_checked_and_compared_whole() {
        assert!(IngestToken::new(String::new()).is_err());
        assert!(IngestToken::new("a b".into()).is_err());
        assert_eq!(
            IngestToken::new("é".into()).err(),
            Some(IngestTokenError::NotPrintableAscii)
        );
        assert_eq!(
            IngestToken::new(String::new()).err(),
            Some(IngestTokenError::Empty)
        );
        let token = IngestToken::new("s3cret".into()).unwrap();
        assert!(token.matches(b"s3cret"));
        assert!(!token.matches(b"s3cre"));
        assert!(!token.matches(b"s3creT"));
        assert_eq!(format!("{token:?}"), "IngestToken(…)");
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer(&headers), Some(&b"abc"[..]));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&headers), None);
    }
}
