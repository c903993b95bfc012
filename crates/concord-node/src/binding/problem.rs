//! RFC 9457 problem details as HTTP answers (`application/problem+json`), the one error
//! answer of every HTTP route a binding serves: built from a [`ThingError`], an
//! [`ActionTableError`], an [`ActionError`] or any status with a detail; 429 and 503 carry
//! `Retry-After`, a 405 its `Allow`, a 401 ANP's challenge.

use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use concord_interact::{ActionTableError, Problem};
use serde_json::{json, Value};

use super::ThingError;
use crate::action::ActionError;
use crate::interface::PayloadError;

/// The media type of a problem's body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Seconds a 429 or 503 answer asks the client to wait when nobody said otherwise.
const DEFAULT_RETRY_AFTER: u64 = 1;

/// One RFC 9457 problem answer: the problem (`type`, `title`, `status`, `detail`,
/// `instance`, extension members) and the headers that go with it.
///
/// ```
/// use concord_node::ProblemResponse;
///
/// let answer = ProblemResponse::new(413, "Body too large", "the body is over 65536 bytes")
///     .with_extension("limit", 65536.into());
/// assert_eq!(answer.status(), 413);
/// assert_eq!(answer.problem().detail.as_deref(), Some("the body is over 65536 bytes"));
/// ```
#[derive(Debug, Clone)]
pub struct ProblemResponse(Box<Answer>);

/// What a [`ProblemResponse`] holds (boxed: an error travels in `Result`s).
#[derive(Debug, Clone)]
struct Answer {
    problem: Problem,
    status: StatusCode,
    retry_after: Option<u64>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl ProblemResponse {
    /// A problem with `status` (400–599; another is answered as 500), a short `title` and
    /// the `detail` of this occurrence; its `type` is `about:blank` until
    /// [`with_type`](Self::with_type) names one.
    pub fn new(status: u16, title: impl Into<String>, detail: impl Into<String>) -> Self {
        let status = error_status(status);
        let problem = Problem::new("about:blank")
            .with_status(status.as_u16())
            .with_title(title)
            .with_detail(detail);
        Self(Box::new(Answer {
            problem,
            status,
            retry_after: None,
            headers: Vec::new(),
        }))
    }

    /// The answer for `problem` as it stands (its `status`, else 500).
    pub fn from_problem(problem: Problem) -> Self {
        let status = error_status(problem.status.unwrap_or(500));
        Self(Box::new(Answer {
            problem: problem.with_status(status.as_u16()),
            status,
            retry_after: None,
            headers: Vec::new(),
        }))
    }

    /// The problem's `type` URI.
    #[must_use]
    pub fn with_type(mut self, uri: impl Into<String>) -> Self {
        self.0.problem.problem_type = uri.into();
        self
    }

    /// The problem's `instance`: the URI of this occurrence (the request's path).
    #[must_use]
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.0.problem.instance = Some(instance.into());
        self
    }

    /// An extension member beside the standard ones.
    #[must_use]
    pub fn with_extension(mut self, key: impl Into<String>, value: Value) -> Self {
        self.0.problem.extensions.insert(key.into(), value);
        self
    }

    /// `Retry-After` in seconds (a 429 or 503 says 1 unless told).
    #[must_use]
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.0.retry_after = Some(seconds);
        self
    }

    /// A header of the answer (`Allow` of a 405, the challenge of a 401); a name or value
    /// HTTP refuses is left out.
    #[must_use]
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            self.0.headers.push((name, value));
        }
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.0.status.as_u16()
    }

    /// The problem as it is answered.
    pub fn problem(&self) -> &Problem {
        &self.0.problem
    }

    /// 405: `method` is not served at this path; `allow` lists the methods that are.
    pub fn method_not_allowed(method: &str, allow: &[&str]) -> Self {
        let allowed = allow.join(", ");
        Self::new(
            405,
            "Method not allowed",
            format!("{method} is not served here; this resource answers {allowed}"),
        )
        .with_type("urn:concord:http:method-not-allowed")
        .with_header("allow", &allowed)
    }
}

/// `status` when it is an error status, else 500.
fn error_status(status: u16) -> StatusCode {
    match StatusCode::from_u16(status) {
        Ok(status) if status.is_client_error() || status.is_server_error() => status,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ProblemResponse {
    fn into_response(self) -> Response {
        let answer = *self.0;
        let body = serde_json::to_vec(&answer.problem).unwrap_or_else(|_| {
            // A problem is strings and JSON values: this cannot fail, but an answer is due.
            json!({"type": "about:blank", "status": answer.status.as_u16()})
                .to_string()
                .into_bytes()
        });
        let mut response = (
            answer.status,
            [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
            body,
        )
            .into_response();
        let headers = response.headers_mut();
        for (name, value) in answer.headers {
            headers.append(name, value);
        }
        let busy = matches!(
            answer.status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        );
        if let Some(seconds) = answer.retry_after.or(busy.then_some(DEFAULT_RETRY_AFTER)) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<&ThingError> for ProblemResponse {
    fn from(error: &ThingError) -> Self {
        let detail = error.to_string();
        match error {
            ThingError::Unknown { kind, name } => Self::new(404, "Unknown affordance", detail)
                .with_type("urn:concord:http:unknown-affordance")
                .with_extension("kind", json!(kind))
                .with_extension("name", json!(name)),
            ThingError::Forbidden { .. } => {
                Self::new(403, "Forbidden", detail).with_type("urn:concord:http:forbidden")
            }
            ThingError::Input(payload) => {
                invalid(400, "Invalid input", payload).with_type("urn:concord:http:invalid-input")
            }
            ThingError::ReadOnly { .. } => {
                Self::method_not_allowed("PUT", &["GET"]).with_type("urn:concord:http:read-only")
            }
            ThingError::Mode { .. } => Self::new(error.status(), "Not served this way", detail)
                .with_type("urn:concord:http:action-mode"),
            ThingError::Busy(refused) => {
                Self::new(refused.code, "Busy", &refused.message).with_type("urn:concord:http:busy")
            }
            ThingError::Failed(failed) => Self::from(failed),
            ThingError::Output(payload) => {
                invalid(500, "Invalid output", payload).with_type("urn:concord:http:invalid-output")
            }
            ThingError::Action(table) => Self::from(table),
            ThingError::Relayed(relay) => {
                let answer = Self::from_problem(relay.to_problem());
                if relay.is_transient() {
                    answer.with_retry_after(concord_interact::RELAY_RETRY_AFTER_SECS)
                } else {
                    answer
                }
            }
            ThingError::Subscription { name, status, .. } => {
                Self::new(*status, "Cannot subscribe", detail)
                    .with_type("urn:concord:http:subscription")
                    .with_extension("name", json!(name))
            }
        }
    }
}

impl From<ThingError> for ProblemResponse {
    fn from(error: ThingError) -> Self {
        Self::from(&error)
    }
}

impl From<&ActionError> for ProblemResponse {
    fn from(error: &ActionError) -> Self {
        Self::new(error.code, "Action failed", &error.message)
            .with_type("urn:concord:http:action-failed")
    }
}

impl From<&ActionTableError> for ProblemResponse {
    fn from(error: &ActionTableError) -> Self {
        Self::from_problem(error.to_problem())
    }
}

/// A payload's problem with `status`: a schema violation names its JSON pointer
/// (`pointer`, and `validationErrors` as node-wot's and the WoT Profile's examples list
/// them).
fn invalid(status: u16, title: &str, payload: &PayloadError) -> ProblemResponse {
    let answer = ProblemResponse::new(status, title, payload.to_string());
    match payload {
        PayloadError::Invalid {
            pointer, reason, ..
        } => answer
            .with_extension("pointer", json!(pointer))
            .with_extension(
                "validationErrors",
                json!([{"pointer": pointer, "detail": reason}]),
            ),
        _ => answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_answer_says_when_to_retry_and_is_problem_json() {
        let response = ProblemResponse::new(429, "Busy", "too many").into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
    }

    #[test]
    fn a_status_that_is_no_error_answers_500() {
        assert_eq!(ProblemResponse::new(200, "t", "d").status(), 500);
    }

    #[test]
    fn a_405_lists_what_is_allowed() {
        let response =
            ProblemResponse::method_not_allowed("PATCH", &["GET", "PUT"]).into_response();
        assert_eq!(response.headers()[header::ALLOW], "GET, PUT");
    }
}
