//! Request bodies of the WoT HTTP binding: read whole only within their bounds (a size
//! counted as chunks arrive, a deadline for the whole body), then read as JSON where the
//! operation takes JSON.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::{Bytes, BytesMut};
use concord_proto::text::TextPosition;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::binding::ProblemResponse;

/// The body of a request, at most `limit` bytes (a `Content-Length` over it is refused
/// before anything is read, a chunked body as soon as its chunks pass it: 413), arriving
/// within `timeout` (408, the connection closed).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ProblemResponse> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit));
    }
    let reading = async {
        let mut stream = body.into_data_stream();
        let mut read = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| {
                ProblemResponse::new(
                    400,
                    "Unreadable body",
                    format!("the body could not be read: {error}"),
                )
                .with_type("urn:concord:http:unreadable-body")
            })?;
            if read.len().saturating_add(chunk.len()) > limit {
                return Err(too_large(limit));
            }
            read.extend_from_slice(&chunk);
        }
        Ok(read.freeze())
    };
    match tokio::time::timeout(timeout, reading).await {
        Ok(read) => read,
        Err(_) => Err(ProblemResponse::new(
            408,
            "Body too slow",
            format!(
                "the request body did not arrive within {} ms (Limits::http_body_timeout)",
                timeout.as_millis()
            ),
        )
        .with_type("urn:concord:http:body-timeout")
        .with_extension("limit", json!(format!("{} ms", timeout.as_millis())))
        .with_header("connection", "close")),
    }
}

/// 413 for a body over `limit` bytes.
fn too_large(limit: usize) -> ProblemResponse {
    ProblemResponse::new(
        413,
        "Body too large",
        format!("the request body is over {limit} bytes (Limits::http_max_body)"),
    )
    .with_type("urn:concord:http:body-too-large")
    .with_extension("limit", json!(limit))
    .with_header("connection", "close")
}

/// The JSON value of a body: `None` when it is empty; 415 when its `Content-Type` is not
/// JSON (`application/json` or a `+json` type; none at all is read as JSON), 400 naming
/// the line and column where it stops being JSON.
pub(crate) fn json_body(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Option<Value>, ProblemResponse> {
    if body.is_empty() {
        return Ok(None);
    }
    if let Some(given) = headers.get(header::CONTENT_TYPE) {
        let media = given
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if media != "application/json" && !media.ends_with("+json") {
            return Err(ProblemResponse::new(
                415,
                "Unsupported media type",
                format!("the body is {media:?}; this operation takes application/json"),
            )
            .with_type("urn:concord:http:unsupported-media-type")
            .with_header("accept", "application/json"));
        }
    }
    serde_json::from_slice(body).map(Some).map_err(|error| {
        let mut problem = ProblemResponse::new(
            400,
            "Invalid JSON",
            match TextPosition::of_json_error(body, &error) {
                Some(position) => format!("the body is not JSON: {error} (at {position})"),
                None => format!("the body is not JSON: {error}"),
            },
        )
        .with_type("urn:concord:http:invalid-json");
        if let Some(position) = TextPosition::of_json_error(body, &error) {
            problem = problem
                .with_extension("line", json!(position.line))
                .with_extension("column", json!(position.column));
        }
        problem
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_json_names_its_line_and_column() {
        let refused = json_body(&HeaderMap::new(), b"{\n  \"a\": @\n}").expect_err("refused");
        let problem = refused.problem();
        assert_eq!(refused.status(), 400);
        assert_eq!(problem.extensions["line"], 2);
        assert!(problem
            .detail
            .as_deref()
            .unwrap_or_default()
            .contains("line 2"));
    }

    #[test]
    fn a_json_suffix_type_is_json_and_text_is_not() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            "application/td+json; charset=utf-8"
                .parse()
                .expect("a value"),
        );
        assert_eq!(json_body(&headers, b"1").expect("JSON"), Some(json!(1)));
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().expect("a value"));
        assert_eq!(
            json_body(&headers, b"1").expect_err("refused").status(),
            415
        );
    }
}
