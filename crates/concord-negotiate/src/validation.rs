//! A protocol's JSON Schemas compiled once, to check wire messages.

use serde_json::Value;

use crate::action::ENVELOPE_FIELDS;
use crate::document::ProtocolDocument;
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
/// Error responses (status code ≥ 400 at the protocol's code pointer) are checked against
/// the envelope only (messageId, type, status): their payload may be null, as in the seeds'
/// not-found test case.
pub struct ProtocolSchemas {
    request: jsonschema::Validator,
    response: jsonschema::Validator,
    error_response: jsonschema::Validator,
    code_pointer: String,
}

impl std::fmt::Debug for ProtocolSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolSchemas")
            .field("code_pointer", &self.code_pointer)
            .finish_non_exhaustive()
    }
}

impl ProtocolSchemas {
    /// Compiles the schemas of a full protocol document.
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
            jsonschema::validator_for(schema).map_err(|error| NegotiateError::Schema {
                which,
                message: error.to_string(),
            })
        };
        Ok(Self {
            request: compile("request", request)?,
            response: compile("response", response)?,
            error_response: compile("response", &envelope_only(response))?,
            code_pointer: document
                .error_convention
                .code_pointer
                .clone()
                .unwrap_or_else(|| "/status/code".into()),
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

    /// Whether a response reports an error (status code ≥ 400).
    pub fn is_error_response(&self, message: &Value) -> bool {
        message
            .pointer(&self.code_pointer)
            .and_then(Value::as_i64)
            .is_some_and(|code| code >= 400)
    }
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
fn envelope_only(response: &Value) -> Value {
    let mut schema = response.clone();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.retain(|name, _| ENVELOPE_FIELDS.contains(&name.as_str()));
    }
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|name| name.as_str().is_some_and(|n| ENVELOPE_FIELDS.contains(&n)));
    }
    schema
}
