//! What each handler function must produce for a test case, derived in Rust from the case's
//! messages and our side's schemas by the rule in `crate::mapping`, independently of the
//! code under test.

use serde_json::Value;

use crate::contract::{ErrorStatus, Incoming, Outcome, Reply};
use crate::envelope::Envelope;
use crate::local::is_single_value;
use crate::mapping::Plan;
use concord_negotiate::fit::{request_data, RequestData};

/// A test case our side's values cannot be derived from: a field our schema requires has no
/// counterpart in the case's message in any naming style (or the message has no id).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Underivable {
    /// What is missing, naming the field.
    pub reason: String,
}

/// Our side's value of a request's data: the action input (provider) or the requester's
/// input, mapped onto `schema` (`None`: the data fields as they are).
pub(crate) fn input_of(
    envelope: &Envelope,
    schema: Option<&Value>,
    request: &Value,
) -> Result<Value, Underivable> {
    let mut data = envelope.request_data(request);
    if let RequestData::Single(field) = request_data(envelope, schema) {
        if !is_single_value(schema) {
            data = match data.get(&field) {
                Some(Value::Object(nested)) => nested.clone(),
                _ => Default::default(),
            };
        }
    }
    if is_single_value(schema) {
        let names = envelope
            .request_fields
            .clone()
            .unwrap_or_else(|| data.keys().cloned().collect());
        return match names.as_slice() {
            [single] => Ok(data.get(single).cloned().unwrap_or(Value::Null)),
            _ => Err(Underivable {
                reason: format!(
                    "our input is one value, but the request has {} data fields",
                    names.len()
                ),
            }),
        };
    }
    Plan::for_target(schema)
        .apply(&Value::Object(data), "")
        .map_err(|missing| Underivable {
            reason: format!(
                "the case's request has no field for our required input field `{}` \
                 (in any naming style)",
                missing.pointer
            ),
        })
}

/// Our side's value of a response's data, mapped onto `schema`.
fn output_of(
    envelope: &Envelope,
    schema: Option<&Value>,
    response: &Value,
) -> Result<Value, Underivable> {
    Plan::for_target(schema)
        .apply(&envelope.payload(response), "")
        .map_err(|missing| Underivable {
            reason: format!(
                "the case's response has no field for our required output field `{}` \
                 (in any naming style)",
                missing.pointer
            ),
        })
}

/// The message id a case's message carries.
pub(crate) fn message_id(message: &Value, field: &str, which: &str) -> Result<String, Underivable> {
    message
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Underivable {
            reason: format!("the case's {which} has no string `{field}`"),
        })
}

/// What `decodeRequest` must return for a request.
pub(crate) fn incoming(
    envelope: &Envelope,
    action_input: &Value,
    request: &Value,
) -> Result<Incoming, Underivable> {
    Ok(Incoming {
        message_id: message_id(request, &envelope.request_id, "request")?,
        input: input_of(envelope, Some(action_input), request)?,
    })
}

/// What the provider's action answers, so that the case's response follows: its result
/// (the response's data, mapped onto the action's output schema) or the error status.
pub(crate) fn outcome(
    envelope: &Envelope,
    output: Option<&Value>,
    response: &Value,
) -> Result<Outcome, Underivable> {
    if envelope.is_error(response) {
        Ok(Outcome::Error(error_status(envelope, response)))
    } else {
        Ok(Outcome::Result(output_of(envelope, output, response)?))
    }
}

/// What `decodeResponse` must return for a response.
pub(crate) fn reply(
    envelope: &Envelope,
    output: Option<&Value>,
    response: &Value,
) -> Result<Reply, Underivable> {
    let message_id = message_id(response, &envelope.response_id, "response")?;
    if envelope.is_error(response) {
        Ok(Reply::Error {
            message_id,
            error: error_status(envelope, response),
        })
    } else {
        Ok(Reply::Output {
            message_id,
            output: output_of(envelope, output, response)?,
        })
    }
}

fn error_status(envelope: &Envelope, response: &Value) -> ErrorStatus {
    ErrorStatus {
        code: envelope.code(response).unwrap_or_default(),
        message: envelope.status_message(response),
    }
}
