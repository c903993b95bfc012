//! The `http` backend: a POST per call, input JSON as the body, output JSON as the answer.
//!
//! A service answers an application error with a 4xx or 5xx status and, in the body, RFC
//! 9457 problem details or our `{"error": {"code", "message"}}` object (the rule is on
//! [`HttpAction`]). Everything else that goes wrong (unreachable, a 2xx that is not JSON,
//! too large, too slow) is a backend failure: the caller gets 502 "the action failed" (504
//! "the action did not finish in time") and nothing else, our log a `warn` line with the
//! action's name (the node's `action` span), the URL and the problem.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use reqwest::StatusCode;
use rustls::pki_types::CertificateDer;

use crate::tls::TlsError;

use serde_json::Value;

use crate::action::{Action, ActionError, ActionFuture};
use crate::backend::report::{read_error_object, read_problem, reason_phrase, ReportError};
use crate::backend::{describe_json_error, preview, FAILED, TIMED_OUT};
use crate::config::human;
use concord_llm::with_causes;

/// POSTs the action's input JSON to a URL per call; the response body is the output JSON.
///
/// # Application errors
///
/// A service reports an application error by answering a 4xx or 5xx status. Its body is
/// read as:
///
/// - **RFC 9457 problem details** when its `Content-Type` is `application/problem+json`,
///   or when it is a JSON object with a `status`, `title` or `detail` member (and no
///   `error` object): the code is `status` (default: the HTTP status), the message
///   `detail`, else `title`;
/// - **our error object** when it is a JSON object with an `error` member that is an
///   object: `{"error": {"code": 404, "message": "no product P9"}}`, `code` defaulting to
///   the HTTP status;
/// - anything else (not JSON, or JSON in neither shape): the HTTP status with its reason
///   phrase (`Internal Server Error`) as the message; nothing of the body reaches the
///   caller.
///
/// A code given in the body must be an integer from 400 to 599, else the answer is a
/// backend failure (502). The message is trimmed and cut to
/// [`MAX_ERROR_MESSAGE_CHARS`](crate::MAX_ERROR_MESSAGE_CHARS) characters; none is the
/// status's reason phrase. A 2xx body is always the output, whatever members it has.
///
/// # Failures
///
/// | the service… | the caller gets | our log (`warn`) says |
/// |---|---|---|
/// | answers 2xx with one JSON value | that value | |
/// | answers 4xx or 5xx | the application error read from the body (above) | |
/// | answers 4xx or 5xx with a code in the body that is not an integer from 400 to 599 | 502 "the action failed" | the status and what is wrong with the code |
/// | cannot be reached (connection, TLS) | 502 "the action failed" | the URL and the error |
/// | answers 2xx with a body that is not JSON | 502 "the action failed" | the parse error and the start of the body |
/// | answers any other status (1xx, a 3xx not followed) | 502 "the action failed" | the status and the start of the body |
/// | answers with more than `max_response_bytes` | 502 "the action failed" | the limit |
/// | takes longer than `timeout` | 504 "the action did not finish in time" | the timeout |
///
/// Every `warn` line names the action (the node's `action` span) and the URL.
///
/// # Events from the service
///
/// An HTTP service answers one call at a time; to publish one of the node's events (at any
/// moment, not only in a call), it posts the event in: with
/// [`NodeBuilder::event_ingest_token`](crate::NodeBuilder::event_ingest_token) set (the
/// configuration's `node.event_ingest_token`), the node serves `POST /events/{name}`, the
/// event's data as the JSON body and `Authorization: Bearer <token>`:
///
/// ```text
/// curl -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
///      -d '{"rating": 4}' http://127.0.0.1:8080/events/userFeedbackReceived
/// ```
///
/// It answers 202 `{"id": n}` (the event's sequence number: every subscriber gets it), 401
/// without the token, 404 for an event the node does not declare, 400 for data the event's
/// schema refuses, 413 past [`Limits::interaction`](crate::Limits)'s `max_message_size`.
///
/// ```
/// use std::time::Duration;
/// use concord_node::HttpAction;
///
/// let action = HttpAction::new("http://127.0.0.1:9000/product-info")?
///     .timeout(Duration::from_secs(5));
/// # Ok::<(), concord_node::NodeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HttpAction {
    inner: Arc<HttpSpec>,
}

#[derive(Debug, Clone)]
struct HttpSpec {
    url: url::Url,
    /// Roots trusted on top of the system's.
    extra_roots: Vec<CertificateDer<'static>>,
    /// Built on the first call, once the roots are known (it reads the system's trust
    /// store, so it is built once).
    client: OnceLock<Result<reqwest::Client, Arc<TlsError>>>,
    timeout: Duration,
    max_response_bytes: usize,
}

/// Default time one POST may take.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);

impl HttpAction {
    /// POSTs to `url` (`http` or `https`).
    ///
    /// # Errors
    /// [`NodeError::Config`](crate::NodeError::Config) when `url` is not an absolute
    /// `http(s)` URL.
    pub fn new(url: &str) -> Result<Self, crate::NodeError> {
        let parsed = url::Url::parse(url).map_err(|error| {
            crate::NodeError::Config(format!("http backend URL {url:?}: {error}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(crate::NodeError::Config(format!(
                "http backend URL {url:?} must start with http:// or https://"
            )));
        }
        Ok(Self {
            inner: Arc::new(HttpSpec {
                url: parsed,
                extra_roots: Vec::new(),
                client: OnceLock::new(),
                timeout: DEFAULT_HTTP_TIMEOUT,
                max_response_bytes: super::exec::DEFAULT_MAX_OUTPUT_BYTES,
            }),
        })
    }

    /// How long one call may take (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        Arc::make_mut(&mut self.inner).timeout = timeout;
        self
    }

    /// Cap on the response body per call (default 10 MiB).
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.inner).max_response_bytes = bytes;
        self
    }

    /// Also trusts these root certificates (PEM) for an `https://` backend, on top of the
    /// system's trust store: a service whose certificate a private CA signed. The same
    /// verification the node uses for its peers.
    ///
    /// # Errors
    /// [`NodeError::Config`](crate::NodeError::Config) when the PEM holds no certificate.
    pub fn trust_root_certificates_pem(
        mut self,
        pem: impl AsRef<[u8]>,
    ) -> Result<Self, crate::NodeError> {
        let roots = crate::tls::parse_roots(pem.as_ref())
            .map_err(|error| crate::NodeError::Config(error.to_string()))?;
        Arc::make_mut(&mut self.inner).extra_roots = roots;
        Ok(self)
    }
}

impl Action for HttpAction {
    fn call(&self, input: Value) -> ActionFuture {
        let spec = Arc::clone(&self.inner);
        Box::pin(async move {
            let result = match tokio::time::timeout(spec.timeout, spec.post(&input)).await {
                Ok(result) => result,
                Err(_) => Err(HttpError::Timeout {
                    url: spec.url.clone(),
                    timeout: spec.timeout,
                }),
            };
            match result {
                Ok(answer) => answer,
                Err(error) => {
                    tracing::warn!(
                        %error,
                        "the action's HTTP service failed; the caller is told only that it failed"
                    );
                    Err(error.to_caller())
                }
            }
        })
    }
}

/// Why a POST to the service failed, for our log (the caller gets a generic message).
#[derive(Debug, thiserror::Error)]
enum HttpError {
    /// No answer: the client, the connection or TLS failed.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The service.
        url: url::Url,
        /// The error and its causes.
        reason: String,
    },
    /// The body could not be read.
    #[error("reading the answer of {url} failed: {reason}")]
    Read {
        /// The service.
        url: url::Url,
        /// The error and its causes.
        reason: String,
    },
    /// The body is over the limit.
    #[error("{url} answered more than the limit of {limit} bytes")]
    TooLarge {
        /// The service.
        url: url::Url,
        /// `max_response_bytes`.
        limit: usize,
    },
    /// A 2xx whose body is not JSON.
    #[error("{url} answered {status} with a body that is not JSON ({reason}); it starts: {start}")]
    NotJson {
        /// The service.
        url: url::Url,
        /// The status.
        status: StatusCode,
        /// The parse error and its position.
        reason: String,
        /// The start of the body.
        start: String,
    },
    /// A status that is neither a success nor an error.
    #[error("{url} answered {status}, neither a success nor an error; it starts: {start}")]
    Unexpected {
        /// The service.
        url: url::Url,
        /// The status.
        status: StatusCode,
        /// The start of the body.
        start: String,
    },
    /// An error answer whose report cannot be used.
    #[error("{url} answered {status} with an error report that cannot be used: {problem}")]
    BadReport {
        /// The service.
        url: url::Url,
        /// The status.
        status: StatusCode,
        /// What is wrong with the report.
        problem: ReportError,
    },
    /// No answer in time.
    #[error("{url} did not answer within {}", human(*.timeout))]
    Timeout {
        /// The service.
        url: url::Url,
        /// The timeout.
        timeout: Duration,
    },
}

impl HttpError {
    /// What the caller gets: the status code, and a message that says nothing of the
    /// failure.
    fn to_caller(&self) -> ActionError {
        match self {
            Self::Timeout { .. } => ActionError::timeout(TIMED_OUT),
            _ => ActionError::bad_gateway(FAILED),
        }
    }
}

impl HttpSpec {
    /// POSTs `input`: `Ok(Ok(output))`, `Ok(Err(application error))`, or why it failed.
    async fn post(&self, input: &Value) -> Result<Result<Value, ActionError>, HttpError> {
        let url = &self.url;
        // JSON of a `Value` cannot fail to serialise.
        let body = serde_json::to_vec(input).unwrap_or_default();
        let client = self
            .client
            .get_or_init(|| {
                crate::tls::client_config(self.extra_roots.clone())
                    .and_then(crate::tls::http_client)
                    .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|error| HttpError::Unreachable {
                url: url.clone(),
                reason: error.to_string(),
            })?;
        let mut response = client
            .post(url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|error| HttpError::Unreachable {
                url: url.clone(),
                reason: with_causes(&error.without_url()),
            })?;
        let status = response.status();
        let problem_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(is_problem_json);
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| HttpError::Read {
            url: url.clone(),
            reason: with_causes(&error.without_url()),
        })? {
            if bytes.len() + chunk.len() > self.max_response_bytes {
                return Err(HttpError::TooLarge {
                    url: url.clone(),
                    limit: self.max_response_bytes,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map(Ok)
                .map_err(|error| HttpError::NotJson {
                    url: url.clone(),
                    status,
                    reason: describe_json_error(&error, &bytes),
                    start: preview(&bytes),
                });
        }
        if status.is_client_error() || status.is_server_error() {
            return read_error_body(status.as_u16(), problem_json, &bytes)
                .map(Err)
                .map_err(|problem| HttpError::BadReport {
                    url: url.clone(),
                    status,
                    problem,
                });
        }
        Err(HttpError::Unexpected {
            url: url.clone(),
            status,
            start: preview(&bytes),
        })
    }
}

/// Whether a `Content-Type` is `application/problem+json` (parameters and case aside).
fn is_problem_json(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|media| {
        media
            .trim()
            .eq_ignore_ascii_case("application/problem+json")
    })
}

/// The application error in the body of a 4xx or 5xx answer (`status`), by the rule on
/// [`HttpAction`]: problem details, our error object, or else the status and its reason
/// phrase.
fn read_error_body(
    status: u16,
    problem_json: bool,
    body: &[u8],
) -> Result<ActionError, ReportError> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else {
        return Ok(ActionError::new(status, reason_phrase(status)));
    };
    let error_object = object.get("error").filter(|error| error.is_object());
    match error_object {
        Some(error) if !problem_json => read_error_object(error, Some(status)),
        _ if problem_json
            || ["status", "title", "detail"]
                .iter()
                .any(|key| object.contains_key(*key)) =>
        {
            read_problem(&object, Some(status))
        }
        _ => Ok(ActionError::new(status, reason_phrase(status))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_details_are_read_from_problem_json_or_their_members() {
        let body = br#"{"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no such text"}"#;
        for problem_json in [true, false] {
            assert_eq!(
                read_error_body(404, problem_json, body),
                Ok(ActionError::new(404, "no such text"))
            );
        }
        // No status in the body: the answer's.
        assert_eq!(
            read_error_body(410, false, br#"{"title": "Gone for good"}"#),
            Ok(ActionError::new(410, "Gone for good"))
        );
        // Declared problem details with none of the members: the status's reason phrase.
        assert_eq!(
            read_error_body(429, true, br#"{"retryAfter": 3}"#),
            Ok(ActionError::new(429, "Too Many Requests"))
        );
        assert_eq!(
            read_error_body(404, true, br#"{"status": 200}"#),
            Err(ReportError::BadCode {
                field: "status",
                found: "200".into()
            })
        );
    }

    #[test]
    fn our_error_object_is_read_with_the_status_as_its_default_code() {
        assert_eq!(
            read_error_body(
                409,
                false,
                br#"{"error": {"message": "taken"}, "requestId": "r1"}"#
            ),
            Ok(ActionError::new(409, "taken"))
        );
        assert_eq!(
            read_error_body(
                400,
                false,
                br#"{"error": {"code": 422, "message": "too short"}}"#
            ),
            Ok(ActionError::new(422, "too short"))
        );
        assert_eq!(
            read_error_body(400, false, br#"{"error": {"code": "x"}}"#),
            Err(ReportError::BadCode {
                field: "error.code",
                found: "a string".into()
            })
        );
    }

    #[test]
    fn any_other_body_gives_the_status_and_its_reason_phrase_only() {
        for body in [
            &b"internal meltdown at /srv/app/db.rs:12"[..],
            b"",
            br#"{"message": "stack trace here"}"#,
            br#"{"error": "stack trace here"}"#,
            br#"["not", "an", "object"]"#,
        ] {
            assert_eq!(
                read_error_body(500, false, body),
                Ok(ActionError::new(500, "Internal Server Error"))
            );
        }
    }

    #[test]
    fn problem_json_is_told_by_its_media_type() {
        assert!(is_problem_json("application/problem+json"));
        assert!(is_problem_json("Application/Problem+JSON; charset=utf-8"));
        assert!(!is_problem_json("application/json"));
        assert!(!is_problem_json("text/plain"));
    }

    #[test]
    fn a_failure_tells_the_caller_nothing_of_itself() {
        let url = url::Url::parse("http://10.0.0.7:9000/internal").unwrap();
        let error = HttpError::Unreachable {
            url: url.clone(),
            reason: "connection refused".into(),
        };
        assert_eq!(
            error.to_string(),
            "cannot reach http://10.0.0.7:9000/internal: connection refused"
        );
        assert_eq!(error.to_caller(), ActionError::new(502, FAILED));
        let timeout = HttpError::Timeout {
            url,
            timeout: Duration::from_millis(300),
        };
        assert_eq!(timeout.to_caller(), ActionError::new(504, TIMED_OUT));
    }
}
