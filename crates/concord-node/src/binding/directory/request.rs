//! What every route of the directory does around its rule: admit the request (its body
//! within `max_td_bytes`, its caller), check the media type, name the registrant, and
//! answer a refusal as a problem.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use concord_directory::{DirectoryError, PROBLEM_BASE};
use concord_identity::Caller;
use serde_json::json;

use super::{access, DirectoryState};
use crate::admission::ClientKey;
use crate::binding::http::admit_within;
use crate::binding::ProblemResponse;

/// A rule's task on the blocking pool panicked or was cancelled (500).
#[derive(Debug, Clone, Copy)]
pub(super) struct Failed;

impl Failed {
    /// The answer: 500, naming nothing of the store.
    pub(super) fn answer(self, instance: &str) -> Response {
        ProblemResponse::new(
            500,
            "Directory failure",
            "the directory could not complete the operation",
        )
        .with_instance(instance)
        .into_response()
    }
}

/// `methods` served by `router`; any other method answers 405 with `Allow`.
pub(super) fn only(
    router: MethodRouter<Arc<DirectoryState>>,
    methods: &'static [&'static str],
) -> MethodRouter<Arc<DirectoryState>> {
    router.fallback(move |request: Request| async move {
        ProblemResponse::method_not_allowed(request.method().as_str(), methods)
            .with_instance(request.uri().path())
            .into_response()
    })
}

/// A write admitted: its body (within `max_td_bytes`), its path, and who sends it.
pub(super) struct Write {
    pub(super) body: bytes::Bytes,
    pub(super) headers: HeaderMap,
    pub(super) path: String,
    /// The DID the caller proved, if any.
    pub(super) did: Option<String>,
    /// The client address (an IPv4 address or an IPv6 /64): the quota of callers
    /// without a DID.
    pub(super) client: String,
}

/// Reads a write's body (at most `max_td_bytes`: a larger `Content-Length` is refused
/// before anything is read, a chunked body as soon as it passes it) and finds its caller;
/// an anonymous caller is refused when the directory requires signatures, and a caller the
/// `allow` rules do not let use every one of `affordances` (401 to an anonymous one, 403
/// else). `Err` is the answer (413, 408, 401, 403, 429, 503).
pub(super) async fn admit_write(
    state: &DirectoryState,
    request: Request,
    affordances: &[&str],
) -> Result<Write, Response> {
    let limit = state.directory.limits().max_td_bytes;
    let instance = request.uri().path().to_owned();
    let admitted = admit_within(&state.http, request, limit)
        .await
        .map_err(|answer| {
            if answer.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(limit, &instance)
            } else {
                answer
            }
        })?;
    let path = admitted.path().to_owned();
    let did = match &admitted.caller {
        Caller::Authenticated(did) => Some(did.to_string()),
        Caller::Anonymous if state.require_signatures => {
            return Err(signature_required(state, &path));
        }
        _ => None,
    };
    if let Some(answer) = access::refusal(state, &admitted, affordances) {
        return Err(answer);
    }
    Ok(Write {
        client: client_of(admitted.remote),
        body: admitted.body,
        headers: admitted.parts.headers,
        path,
        did,
    })
}

/// 413: a body over `max_td_bytes`, refused before it was read whole.
fn too_large(limit: usize, instance: &str) -> Response {
    ProblemResponse::new(
        413,
        "Thing Description too large",
        format!("the request body is over {limit} bytes (the directory's max_td_bytes)"),
    )
    .with_type(format!("{PROBLEM_BASE}td-too-large"))
    .with_extension("limit", json!(limit))
    .with_header("connection", "close")
    .with_instance(instance)
    .into_response()
}

/// The client key of `remote`: its IPv4 address, or its IPv6 /64.
pub(super) fn client_of(remote: SocketAddr) -> String {
    ClientKey::of(remote.ip()).to_string()
}

/// 401 with ANP's challenge: this directory takes signed writes only.
fn signature_required(state: &DirectoryState, instance: &str) -> Response {
    let realm = url::Url::parse(state.http.site.base_url())
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_default();
    let reason = "this directory takes signed writes only: sign the request with your DID \
                  (ANP DID-WBA, RFC 9421 Signature-Input and Signature)";
    let mut problem = ProblemResponse::new(401, "Unauthorized", reason)
        .with_type("urn:concord:http:signature-required")
        .with_instance(instance);
    for (name, value) in concord_identity::challenge_with(&realm, "invalid_request", reason) {
        problem = problem.with_header(name, &value);
    }
    problem.into_response()
}

/// `Ok` when the body's `Content-Type` is one of `accepted` (parameters aside); 415
/// naming them else. A body with no `Content-Type` is taken as the first.
pub(super) fn media_type(
    headers: &HeaderMap,
    accepted: &[&str],
    instance: &str,
) -> Result<(), ProblemResponse> {
    let Some(given) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = given
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if accepted.contains(&media.as_str()) {
        return Ok(());
    }
    Err(ProblemResponse::new(
        415,
        "Unsupported media type",
        format!(
            "the body is {media:?}; this operation takes {}",
            accepted.join(" or ")
        ),
    )
    .with_type("urn:concord:http:unsupported-media-type")
    .with_header("accept", &accepted.join(", "))
    .with_instance(instance))
}

/// A directory refusal as a problem: its status, type, title and detail,
/// `validationErrors` (`[{field, description}]`) for an invalid TD, and `Retry-After` for a
/// refusal that passes with time (429 `quota-exceeded`, 503 `directory-full` and
/// `search-too-broad`).
pub(super) fn refused(error: &DirectoryError, instance: &str) -> Response {
    if let DirectoryError::Store(failure) = error {
        tracing::error!(%failure, "directory store");
    }
    let mut problem = ProblemResponse::new(error.status(), error.title(), error.detail())
        .with_type(error.problem_type())
        .with_instance(instance);
    if let Some(errors) = error.validation_errors() {
        problem = problem.with_extension("validationErrors", json!(errors));
    }
    if let Some(wait) = error.retry_after() {
        problem = problem.with_header("retry-after", &wait.as_secs().max(1).to_string());
    }
    problem.into_response()
}

/// A rule's result as an answer: `answer` of its value, or its refusal.
pub(super) fn answer<T>(
    result: Result<Result<T, DirectoryError>, Failed>,
    instance: &str,
    answer: impl FnOnce(T) -> Response,
) -> Response {
    match result {
        Ok(Ok(value)) => answer(value),
        Ok(Err(error)) => refused(&error, instance),
        Err(failed) => failed.answer(instance),
    }
}

/// A 200 answer with `value` as its JSON body, as `media` (`application/json`,
/// `application/ld+json`, `application/td+json`).
pub(super) fn json_answer(media: &'static str, value: &serde_json::Value) -> Response {
    ([(header::CONTENT_TYPE, media)], value.to_string()).into_response()
}

/// The decoded `name=value` pairs of a query string, in order.
pub(super) fn parameters(raw: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}
