//! A protocol's JSON Schemas compiled once, to check wire messages.

use serde_json::Value;

use crate::complexity::check_complexity;
use crate::document::ProtocolDocument;
use crate::envelope::Envelope;
use crate::policy::NegotiateError;
use crate::test_cases::TestCase;

/// One way a message breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SchemaViolation {
    /// JSON pointer of the offending value in the message (empty for the root).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{pointer}: {}", self.message)
    }
}

/// The request and response schemas of a protocol, compiled.
///
/// Error responses (by the protocol's status code, see [`Envelope::is_error`]) are checked
/// against the envelope only (message id, type, status, error): their payload may be null,
/// as in the seeds' not-found test case.
pub struct ProtocolSchemas {
    request: jsonschema::Validator,
    response: jsonschema::Validator,
    error_response: jsonschema::Validator,
    envelope: Envelope,
}

impl std::fmt::Debug for ProtocolSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolSchemas")
            .field("envelope", &self.envelope)
            .finish_non_exhaustive()
    }
}

impl ProtocolSchemas {
    /// Compiles the schemas of a full protocol document, each checked against the
    /// document's [`SchemaLimits`](crate::complexity::SchemaLimits) first
    /// ([`ProtocolDocument::schema_limits`]): a schema over them is never compiled.
    ///
    /// # Errors
    /// [`NegotiateError::TooComplex`] for a schema over the limits,
    /// [`NegotiateError::Schema`] for a missing schema or one that does not compile.
    pub fn compile(document: &ProtocolDocument) -> Result<Self, NegotiateError> {
        let missing = |which| NegotiateError::Schema {
            which,
            message: "the document has no such schema".into(),
        };
        let request = document
            .request_schema
            .as_ref()
            .ok_or_else(|| missing("request"))?;
        let response = document
            .response_schema
            .as_ref()
            .ok_or_else(|| missing("response"))?;
        let compile = |which, schema: &Value| {
            check_complexity(schema, document.schema_limits())
                .map_err(|error| NegotiateError::TooComplex { which, error })?;
            jsonschema::validator_for(schema).map_err(|error| NegotiateError::Schema {
                which,
                message: error.to_string(),
            })
        };
        let envelope = Envelope::of(document);
        Ok(Self {
            request: compile("request", request)?,
            response: compile("response", response)?,
            error_response: compile("response", &envelope_only(response, &envelope))?,
            envelope,
        })
    }

    /// Violations of the request schema (empty when valid).
    pub fn check_request(&self, message: &Value) -> Vec<SchemaViolation> {
        violations(&self.request, message)
    }

    /// Violations of the response schema (error responses: of the envelope only).
    pub fn check_response(&self, message: &Value) -> Vec<SchemaViolation> {
        if self.is_error_response(message) {
            violations(&self.error_response, message)
        } else {
            violations(&self.response, message)
        }
    }

    /// One line per way a test case's messages break the schemas:
    /// `- <case>: request <violation>`, then `- <case>: response <violation>`.
    pub(crate) fn check_case(&self, case: &TestCase) -> Vec<String> {
        let request = self
            .check_request(&case.request)
            .into_iter()
            .map(|violation| format!("- {}: request {violation}", case.name));
        let response = self
            .check_response(&case.response)
            .into_iter()
            .map(|violation| format!("- {}: response {violation}", case.name));
        request.chain(response).collect()
    }

    /// Whether a response reports an error (see [`Envelope::is_error`]).
    pub fn is_error_response(&self, message: &Value) -> bool {
        self.envelope.is_error(message)
    }

    /// Whether a message is a response: it carries a status code or response data.
    pub fn is_response(&self, message: &Value) -> bool {
        self.envelope.code(message).is_some()
            || self
                .envelope
                .payload_names(message)
                .iter()
                .any(|name| message.get(name).is_some())
                && self
                    .envelope
                    .request_fields
                    .as_ref()
                    .is_some_and(|fields| !fields.iter().any(|field| message.get(field).is_some()))
    }

    /// The protocol's envelope, as the schemas were compiled with it.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }
}

/// The ways `value` breaks `schema` (empty when it is valid), for a schema of our own side
/// such as an action's input.
///
/// ```
/// use concord_negotiate::check_against;
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "required": ["productId"]});
/// assert!(check_against(&schema, &json!({"productId": "P1"})).unwrap().is_empty());
/// assert_eq!(check_against(&schema, &json!({})).unwrap().len(), 1);
/// ```
///
/// # Errors
/// [`NegotiateError::Schema`] when `schema` does not compile.
pub fn check_against(
    schema: &Value,
    value: &Value,
) -> Result<Vec<SchemaViolation>, NegotiateError> {
    let validator = jsonschema::validator_for(schema).map_err(|error| NegotiateError::Schema {
        which: "local",
        message: error.to_string(),
    })?;
    Ok(violations(&validator, value))
}

fn violations(validator: &jsonschema::Validator, message: &Value) -> Vec<SchemaViolation> {
    // Valid messages (nearly all of them) are told apart without collecting errors, which
    // costs several times more.
    if validator.is_valid(message) {
        return Vec::new();
    }
    validator
        .iter_errors(message)
        .map(|error| SchemaViolation {
            pointer: error.instance_path().to_string(),
            message: error.to_string(),
        })
        .collect()
}

/// The response schema without its payload: only the envelope fields stay.
fn envelope_only(response: &Value, envelope: &Envelope) -> Value {
    let mut schema = response.clone();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.retain(|name, _| envelope.is_response_envelope(name));
    }
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|name| {
            name.as_str()
                .is_some_and(|n| envelope.is_response_envelope(n))
        });
    }
    schema
}
