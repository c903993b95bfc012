//! The runtime contract: what the runtime passes to each handler function and what it
//! accepts back. See the crate documentation for the table.
//!
//! # Why `result` in, `output` out
//!
//! The provider's `encodeResponse` takes `{messageId, result}` and the requester's
//! `decodeResponse` returns `{messageId, output}`. The two names are deliberate: they are
//! different values on different sides of the wire.
//!
//! - `result` ([`Outcome::Result`]) is what the provider's own action returned, in that
//!   action's `output` schema, before any protocol message exists. `encodeResponse` turns it
//!   into the response message (the protocol's field names and envelope).
//! - `output` ([`Reply::Output`]) is what the requester's caller gets back after
//!   `decodeResponse` read that message, in the requester's own need's `output` schema, which
//!   may name, nest and select fields differently from the provider's action.
//!
//! A module that uses one name for the other mixes up the two shapes, so neither is taken as
//! an alias: a `decodeResponse` that returns `result` breaks the contract with a message
//! saying to return `output`, and the templates' `encodeResponse` reads `result` only.
//! (`input` is the same word on both sides because each side passes or returns its own input
//! schema's shape: the requester's need, the provider's action.)

use concord_sandbox::Function;
use serde_json::{json, Map, Value};

/// An error a response reports, or the local action failed with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorStatus {
    /// The protocol's status code (an HTTP status code when the protocol says so).
    pub code: i64,
    /// The status message, in words (`""` when the protocol carries none).
    pub message: String,
}

impl ErrorStatus {
    /// `{code, message}`, as the contract passes and returns an error.
    pub(crate) fn to_value(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// What the requester's `decodeResponse` made of a response message.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The action succeeded: its output, in our need's `output` shape (not the provider
    /// action's `result`; see [`Outcome`] for why the names differ).
    Output {
        /// The message id the response carries.
        message_id: String,
        /// The output.
        output: Value,
    },
    /// The provider answered with an error status.
    Error {
        /// The message id the response carries.
        message_id: String,
        /// Code and message.
        error: ErrorStatus,
    },
}

impl Reply {
    /// The message id the response carries (the request's, when the provider echoed it).
    pub fn message_id(&self) -> &str {
        match self {
            Reply::Output { message_id, .. } | Reply::Error { message_id, .. } => message_id,
        }
    }

    /// The reply as `decodeResponse` returns it.
    pub fn to_value(&self) -> Value {
        match self {
            Reply::Output { message_id, output } => {
                json!({"messageId": message_id, "output": output})
            }
            Reply::Error { message_id, error } => {
                json!({"messageId": message_id, "error": error.to_value()})
            }
        }
    }

    /// Reads `decodeResponse`'s return value strictly.
    pub fn from_value(value: &Value) -> Result<Reply, ContractViolation> {
        if value.get("result").is_some() && value.get("output").is_none() {
            return Err(ContractViolation {
                function: Function::DecodeResponse,
                reason: "returned `result`: `decodeResponse` returns the caller's `output` \
                         (`result` is the provider action's value, in `encodeResponse`'s \
                         argument)"
                    .into(),
            });
        }
        let object = fields(
            value,
            Function::DecodeResponse,
            &["messageId", "output", "error"],
        )?;
        let message_id = message_id(object, Function::DecodeResponse)?;
        match (object.get("output"), object.get("error")) {
            (Some(output), None) => Ok(Reply::Output {
                message_id,
                output: output.clone(),
            }),
            (None, Some(error)) => Ok(Reply::Error {
                message_id,
                error: error_status(error, Function::DecodeResponse, "error")?,
            }),
            _ => Err(ContractViolation {
                function: Function::DecodeResponse,
                reason: "must return exactly one of `output` and `error`".into(),
            }),
        }
    }
}

/// What the provider's `decodeRequest` made of a request message.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// The request's message id, to echo in the response.
    pub message_id: String,
    /// The input for our action, in its input schema's shape.
    pub input: Value,
}

impl Incoming {
    /// The value as `decodeRequest` returns it.
    pub fn to_value(&self) -> Value {
        json!({"messageId": self.message_id, "input": self.input})
    }

    /// Reads `decodeRequest`'s return value strictly.
    pub fn from_value(value: &Value) -> Result<Incoming, ContractViolation> {
        let object = fields(value, Function::DecodeRequest, &["messageId", "input"])?;
        let message_id = message_id(object, Function::DecodeRequest)?;
        let input = object.get("input").cloned().ok_or(ContractViolation {
            function: Function::DecodeRequest,
            reason: "must return `input`".into(),
        })?;
        Ok(Incoming { message_id, input })
    }
}

/// What our action produced for a request: its result, or an error to report.
///
/// `encodeResponse` takes it as `{messageId, result}`, while the requester's
/// `decodeResponse` returns `{messageId, output}` ([`Reply::Output`]). The names differ on
/// purpose: `result` is the provider action's own value (its `output` schema), before any
/// message exists; `output` is what the requester's caller gets after the response was read
/// (the requester need's `output` schema, which may name and shape fields differently). So
/// neither name is an alias of the other: a `decodeResponse` returning `result` breaks the
/// contract, and the templates' `encodeResponse` reads `result` only.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The action's result, in its output schema's shape: `encodeResponse`'s `result` (not
    /// the requester's `output`).
    Result(Value),
    /// The action failed: the status to answer with.
    Error(ErrorStatus),
}

/// The argument of `encodeRequest`: `{messageId, input}`.
pub(crate) fn request_argument(message_id: &str, input: &Value) -> Value {
    json!({"messageId": message_id, "input": input})
}

/// The argument of `encodeResponse`: `{messageId, result}` or `{messageId, error}`. Always
/// `result`, never `output` (see [`Outcome`]).
pub(crate) fn response_argument(message_id: &str, outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Result(result) => json!({"messageId": message_id, "result": result}),
        Outcome::Error(error) => json!({"messageId": message_id, "error": error.to_value()}),
    }
}

/// Checks that an encode function returned a message (a JSON object).
pub(crate) fn message(value: Value, function: Function) -> Result<Value, ContractViolation> {
    if value.is_object() {
        Ok(value)
    } else {
        Err(ContractViolation {
            function,
            reason: format!("must return a message object, not {}", kind(&value)),
        })
    }
}

/// A handler function returned something the contract does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{function}` broke the handler contract: it {reason}")]
pub struct ContractViolation {
    /// The function.
    pub function: Function,
    /// What was wrong, e.g. "must return exactly one of `output` and `error`".
    pub reason: String,
}

fn fields<'v>(
    value: &'v Value,
    function: Function,
    allowed: &[&str],
) -> Result<&'v Map<String, Value>, ContractViolation> {
    let object = value.as_object().ok_or_else(|| ContractViolation {
        function,
        reason: format!("must return an object, not {}", kind(value)),
    })?;
    if let Some(unknown) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(ContractViolation {
            function,
            reason: format!(
                "returned an unknown field {unknown:?} (allowed: {})",
                allowed.join(", ")
            ),
        });
    }
    Ok(object)
}

fn message_id(
    object: &Map<String, Value>,
    function: Function,
) -> Result<String, ContractViolation> {
    object
        .get("messageId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ContractViolation {
            function,
            reason: "must return `messageId` as a string".into(),
        })
}

fn error_status(
    value: &Value,
    function: Function,
    at: &str,
) -> Result<ErrorStatus, ContractViolation> {
    let violation = |reason: String| ContractViolation { function, reason };
    let object = value
        .as_object()
        .ok_or_else(|| violation(format!("must return `{at}` as an object {{code, message}}")))?;
    if let Some(unknown) = object
        .keys()
        .find(|key| *key != "code" && *key != "message")
    {
        return Err(violation(format!(
            "returned an unknown field {unknown:?} in `{at}` (allowed: code, message)"
        )));
    }
    let code = object
        .get("code")
        .and_then(Value::as_i64)
        .ok_or_else(|| violation(format!("must return `{at}.code` as an integer")))?;
    let message = object
        .get("message")
        .and_then(Value::as_str)
        .ok_or_else(|| violation(format!("must return `{at}.message` as a string")))?;
    Ok(ErrorStatus {
        code,
        message: message.to_owned(),
    })
}

/// A value's JSON type, in words.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_strictly() {
        let output = json!({"messageId": "m1", "output": {"price": 1}});
        assert_eq!(
            Reply::from_value(&output).unwrap(),
            Reply::Output {
                message_id: "m1".into(),
                output: json!({"price": 1})
            }
        );
        let error = json!({"messageId": "m1", "error": {"code": 404, "message": "gone"}});
        assert_eq!(Reply::from_value(&error).unwrap().to_value(), error);
        for (bad, says) in [
            (json!({"messageId": "m1"}), "exactly one of"),
            (
                json!({"messageId": "m1", "output": 1, "error": {}}),
                "exactly one of",
            ),
            (json!({"output": 1}), "`messageId` as a string"),
            (
                json!({"messageId": "m", "outputs": 1}),
                "unknown field \"outputs\"",
            ),
            (
                json!({"messageId": "m", "error": {"code": "404", "message": ""}}),
                "`error.code` as an integer",
            ),
            (json!([1]), "not an array"),
            (
                json!({"messageId": "m", "result": {"price": 1}}),
                "returns the caller's `output`",
            ),
        ] {
            let error = Reply::from_value(&bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
            assert!(
                error.starts_with("`decodeResponse` broke the handler contract"),
                "{error}"
            );
        }
    }

    #[test]
    fn incoming_requests_are_read_strictly() {
        let value = json!({"messageId": "m1", "input": {"productId": "P1"}});
        assert_eq!(Incoming::from_value(&value).unwrap().to_value(), value);
        assert!(Incoming::from_value(&json!({"messageId": "m1"})).is_err());
        assert!(message(json!("text"), Function::EncodeRequest).is_err());
    }
}
