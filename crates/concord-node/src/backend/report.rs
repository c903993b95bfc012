//! Application errors a backend reports in its answer, read into an [`ActionError`]: our
//! error object (`{"code": 404, "message": "…"}`, the value of an `error` member) and
//! RFC 9457 problem details (`{"type", "title", "status", "detail", "instance"}`).
//!
//! Which answers are read this way is each backend's rule (see
//! [`ExecAction`](crate::ExecAction) and [`HttpAction`](crate::HttpAction)); this module
//! only reads them. A code must be an integer from 400 to 599, else the report is refused
//! (the backend answered badly: a 502 for the caller, the reason in our log). The message
//! reaching the caller is trimmed and cut to [`MAX_ERROR_MESSAGE_CHARS`] characters; an
//! empty or missing one is the status's reason phrase (`Not Found`).

use serde_json::{Map, Value};

use crate::action::ActionError;

/// At most this many characters of an application error's message, as a backend reported
/// it, reach the caller; a longer message is cut there and ends with `…`.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 500;

/// Why a reported application error cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReportError {
    /// The error object is not an object.
    #[error("`error` is {found}, not an object")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// The code is missing and the backend's answer gives none either.
    #[error("`{field}` is missing")]
    MissingCode {
        /// The member that should hold it.
        field: &'static str,
    },
    /// The code is not an integer from 400 to 599.
    #[error("`{field}` is {found}, not an integer from 400 to 599")]
    BadCode {
        /// The member that holds it.
        field: &'static str,
        /// The number, or the JSON type when it is not a number.
        found: String,
    },
    /// Our error object's `message` is not a string.
    #[error("`error.message` is {found}, not a string")]
    BadMessage {
        /// The JSON type found.
        found: &'static str,
    },
}

/// Reads our error object, the value of an `error` member: `code` (else `default_code`, the
/// HTTP status of the answer that carried it) and `message` (optional).
pub(crate) fn read_error_object(
    error: &Value,
    default_code: Option<u16>,
) -> Result<ActionError, ReportError> {
    let Value::Object(error) = error else {
        return Err(ReportError::NotAnObject {
            found: concord_proto::json_type(error),
        });
    };
    let code = read_code(error.get("code"), "error.code", default_code)?;
    let message = match error.get("message") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.as_str()),
        Some(other) => {
            return Err(ReportError::BadMessage {
                found: concord_proto::json_type(other),
            })
        }
    };
    Ok(ActionError::new(code, bounded_message(message, code)))
}

/// Reads RFC 9457 problem details: `status` (else `default_code`, the HTTP status of the
/// answer that carried them), and `detail`, else `title`, as the message. A `title` or
/// `detail` that is not a string is ignored, as the RFC says of members of the wrong type.
pub(crate) fn read_problem(
    problem: &Map<String, Value>,
    default_code: Option<u16>,
) -> Result<ActionError, ReportError> {
    let code = read_code(problem.get("status"), "status", default_code)?;
    let text = |key: &str| problem.get(key).and_then(Value::as_str);
    let message = text("detail")
        .filter(|detail| !detail.trim().is_empty())
        .or_else(|| text("title"));
    Ok(ActionError::new(code, bounded_message(message, code)))
}

/// The code in `value` (the member `field`), or `default` when there is none.
fn read_code(
    value: Option<&Value>,
    field: &'static str,
    default: Option<u16>,
) -> Result<u16, ReportError> {
    let value = match value {
        None | Some(Value::Null) => return default.ok_or(ReportError::MissingCode { field }),
        Some(value) => value,
    };
    value
        .as_u64()
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..=599).contains(code))
        .ok_or_else(|| ReportError::BadCode {
            field,
            found: match value {
                Value::Number(number) => number.to_string(),
                other => concord_proto::json_type(other).to_owned(),
            },
        })
}

/// `message` trimmed and cut to [`MAX_ERROR_MESSAGE_CHARS`]; the reason phrase of `code`
/// when it is missing or blank.
fn bounded_message(message: Option<&str>, code: u16) -> String {
    let message = message.map(str::trim).unwrap_or_default();
    if message.is_empty() {
        return reason_phrase(code).to_owned();
    }
    match message.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}…", message[..end].trim_end()),
        None => message.to_owned(),
    }
}

/// The reason phrase of an HTTP status (`Not Found`), or a generic one for a code with none.
pub(crate) fn reason_phrase(code: u16) -> &'static str {
    reqwest::StatusCode::from_u16(code)
        .ok()
        .and_then(|status| status.canonical_reason())
        .unwrap_or(super::FAILED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn an_error_object_gives_its_code_and_message() {
        assert_eq!(
            read_error_object(&json!({"code": 404, "message": " no product P9 "}), None),
            Ok(ActionError::new(404, "no product P9"))
        );
        // Other members are ignored; no message is the reason phrase.
        assert_eq!(
            read_error_object(&json!({"code": 503, "retry": true}), None),
            Ok(ActionError::new(503, "Service Unavailable"))
        );
        assert_eq!(
            read_error_object(&json!({"code": 422, "message": "   "}), None),
            Ok(ActionError::new(422, "Unprocessable Entity"))
        );
        // The code of the answer stands in for a missing one (http).
        assert_eq!(
            read_error_object(&json!({"message": "conflict"}), Some(409)),
            Ok(ActionError::new(409, "conflict"))
        );
    }

    #[test]
    fn a_code_outside_400_to_599_or_not_an_integer_is_refused() {
        for (code, found) in [
            (json!(200), "200"),
            (json!(399), "399"),
            (json!(600), "600"),
            (json!(70000), "70000"),
            (json!(-404), "-404"),
            (json!(404.5), "404.5"),
            (json!("404"), "a string"),
            (json!(true), "a boolean"),
        ] {
            assert_eq!(
                read_error_object(&json!({"code": code, "message": "x"}), Some(500)),
                Err(ReportError::BadCode {
                    field: "error.code",
                    found: found.to_owned()
                }),
                "{code}"
            );
        }
        assert_eq!(
            read_error_object(&json!({"message": "x"}), None),
            Err(ReportError::MissingCode {
                field: "error.code"
            })
        );
        assert_eq!(
            read_error_object(&json!("no product"), None),
            Err(ReportError::NotAnObject { found: "a string" })
        );
        assert_eq!(
            read_error_object(&json!({"code": 404, "message": ["x"]}), None),
            Err(ReportError::BadMessage { found: "an array" })
        );
        assert_eq!(
            ReportError::BadCode {
                field: "status",
                found: "200".into()
            }
            .to_string(),
            "`status` is 200, not an integer from 400 to 599"
        );
    }

    #[test]
    fn problem_details_give_their_status_and_detail_or_title() {
        let full = problem(json!({
            "type": "https://example.com/probs/no-product",
            "title": "No such product",
            "status": 404,
            "detail": "no product P9",
            "instance": "/products/P9"
        }));
        assert_eq!(
            read_problem(&full, None),
            Ok(ActionError::new(404, "no product P9"))
        );
        let title_only = problem(json!({"title": "No such product", "status": 404}));
        assert_eq!(
            read_problem(&title_only, None),
            Ok(ActionError::new(404, "No such product"))
        );
        // Members of the wrong type are ignored (RFC 9457, 3.1).
        let odd = problem(json!({"title": 7, "status": 410, "detail": {"x": 1}}));
        assert_eq!(read_problem(&odd, None), Ok(ActionError::new(410, "Gone")));
        // No status: the answer's, else refused.
        let no_status = problem(json!({"title": "Teapot"}));
        assert_eq!(
            read_problem(&no_status, Some(418)),
            Ok(ActionError::new(418, "Teapot"))
        );
        assert_eq!(
            read_problem(&no_status, None),
            Err(ReportError::MissingCode { field: "status" })
        );
        let bad = problem(json!({"status": "404", "detail": "x"}));
        assert_eq!(
            read_problem(&bad, Some(404)),
            Err(ReportError::BadCode {
                field: "status",
                found: "a string".into()
            })
        );
    }

    #[test]
    fn a_long_message_is_cut_to_the_limit() {
        let long = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 10);
        let error = read_error_object(&json!({"code": 400, "message": long}), None).unwrap();
        assert_eq!(error.message.chars().count(), MAX_ERROR_MESSAGE_CHARS + 1);
        assert!(error.message.ends_with("é…"), "{}", error.message);
        let exact = "a".repeat(MAX_ERROR_MESSAGE_CHARS);
        let error = read_error_object(&json!({"code": 400, "message": exact}), None).unwrap();
        assert_eq!(error.message, exact);
    }

    #[test]
    fn a_code_with_no_reason_phrase_gets_the_generic_message() {
        assert_eq!(reason_phrase(404), "Not Found");
        assert_eq!(reason_phrase(599), super::super::FAILED);
    }
}
