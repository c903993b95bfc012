//! Validating every wire message against the protocol's JSON Schemas, compiled once.

use std::fmt;

use concord_negotiate::{
    Encoding, NegotiateError, ProtocolDocument, ProtocolSchemas, SchemaViolation, TestCase,
    TestCases,
};
use serde_json::Value;

use crate::contract::{Incoming, Outcome, Reply};
use crate::envelope::Envelope;
use crate::expect::{self, Underivable};
use crate::local::Local;

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Requester → provider.
    Request,
    /// Provider → requester.
    Response,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Request => "request",
            Direction::Response => "response",
        })
    }
}

/// A protocol's verification rules: its JSON Schemas compiled once, its envelope and its
/// wire encoding. Share one per protocol (it is `Send + Sync`).
///
/// - A request must be valid against the request schema.
/// - A response must be valid against the response schema; an error response (an integer
///   status code of 400 or more at the error convention's code pointer) only against the
///   envelope (`messageId`, `type`, `status`), as its data may be `null`.
/// - A protocol without schemas (one "based on" another by URI, or prose) checks only that
///   a message is a JSON object; its test cases carry the rest.
///
/// ```
/// use concord_handlers::{Direction, Verifier};
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument};
/// use serde_json::json;
/// use std::time::Duration;
///
/// let action = ActionSpec {
///     name: "getPrice".into(),
///     description: "The price of a product.".into(),
///     input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
///     output: json!({"type": "number"}),
/// };
/// let document = ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15)))?;
/// let verifier = Verifier::new(&document)?;
/// let request = json!({"messageId": "m1", "type": "REQUEST", "action": "getPrice", "productId": 7});
/// let violations = verifier.check(Direction::Request, &request).unwrap_err();
/// assert_eq!(violations.violations[0].pointer, "/productId");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Verifier {
    schemas: Option<ProtocolSchemas>,
    envelope: Envelope,
    encoding: Encoding,
}

/// A message that breaks the protocol's schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidMessage {
    /// Which message.
    pub direction: Direction,
    /// Every violation, with the JSON pointer of the offending value.
    pub violations: Vec<SchemaViolation>,
}

impl fmt::Display for InvalidMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} message breaks the protocol's schema: ",
            self.direction
        )?;
        for (index, violation) in self.violations.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{violation}")?;
        }
        Ok(())
    }
}

/// The protocol's schemas cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the protocol's {which} schema is not a usable JSON Schema: {message}")]
pub struct SchemaError {
    /// `request` or `response`.
    pub which: &'static str,
    /// What the schema compiler said.
    pub message: String,
}

impl Verifier {
    /// Compiles the protocol's schemas (if it has both) once, each checked against the
    /// document's schema limits first.
    ///
    /// # Errors
    /// [`SchemaError`] when a schema is over the limits (naming the JSON pointer, the limit
    /// and the count; it is not compiled) or does not compile.
    pub fn new(document: &ProtocolDocument) -> Result<Self, SchemaError> {
        let schemas =
            match (&document.request_schema, &document.response_schema) {
                (Some(_), Some(_)) => Some(ProtocolSchemas::compile(document).map_err(
                    |error| match error {
                        NegotiateError::Schema { which, message } => SchemaError { which, message },
                        NegotiateError::TooComplex { which, error } => SchemaError {
                            which,
                            message: error.to_string(),
                        },
                        other => SchemaError {
                            which: "request",
                            message: other.to_string(),
                        },
                    },
                )?),
                _ => None,
            };
        Ok(Self {
            schemas,
            envelope: Envelope::of(document),
            encoding: document.encoding,
        })
    }

    /// Checks one wire message.
    ///
    /// # Errors
    /// [`InvalidMessage`] listing every violation.
    pub fn check(&self, direction: Direction, message: &Value) -> Result<(), InvalidMessage> {
        let violations = if !message.is_object() {
            vec![SchemaViolation {
                pointer: String::new(),
                message: format!("{message} is not an object"),
            }]
        } else {
            match (&self.schemas, direction) {
                (None, _) => Vec::new(),
                (Some(schemas), Direction::Request) => schemas.check_request(message),
                (Some(schemas), Direction::Response) => schemas.check_response(message),
            }
        };
        if violations.is_empty() {
            Ok(())
        } else {
            Err(InvalidMessage {
                direction,
                violations,
            })
        }
    }

    /// Whether the protocol has JSON Schemas (else only test cases verify its messages).
    pub fn has_schemas(&self) -> bool {
        self.schemas.is_some()
    }

    /// The protocol's wire encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    pub(crate) fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// Our side's message id and input for a case's request, by the mapping rule: what the
    /// requester's `encodeRequest` gets to produce the case's request, and what the
    /// provider's `decodeRequest` must return for it.
    ///
    /// # Errors
    /// [`Underivable`], naming the field the request lacks.
    pub fn case_input(&self, local: &Local, case: &TestCase) -> Result<Incoming, Underivable> {
        Ok(Incoming {
            message_id: expect::message_id(&case.request, &self.envelope.request_id, "request")?,
            input: expect::input_of(&self.envelope, local.input_schema(), &case.request)?,
        })
    }

    /// What the requester's `decodeResponse` must return for a case's response.
    ///
    /// # Errors
    /// [`Underivable`], naming the field the response lacks.
    pub fn case_reply(&self, local: &Local, case: &TestCase) -> Result<Reply, Underivable> {
        expect::reply(&self.envelope, local.output_schema(), &case.response)
    }

    /// What the provider's action answers for a case (the test-case stub): the case
    /// response's data mapped onto our output schema, or its error status.
    ///
    /// # Errors
    /// [`Underivable`], naming the field the response lacks.
    pub fn case_outcome(&self, local: &Local, case: &TestCase) -> Result<Outcome, Underivable> {
        expect::outcome(&self.envelope, local.output_schema(), &case.response)
    }

    /// The case whose request `request` is (the first whose request equals it), for a
    /// provider answering test-case requests with the case's response.
    pub fn case_for_request<'c>(
        &self,
        cases: &'c TestCases,
        request: &Value,
    ) -> Option<&'c TestCase> {
        cases
            .cases
            .iter()
            .find(|case| crate::diff::diff(&case.request, request).is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_are_listed_without_a_trailing_separator() {
        let violation = |pointer: &str, message: &str| SchemaViolation {
            pointer: pointer.into(),
            message: message.into(),
        };
        let invalid = InvalidMessage {
            direction: Direction::Request,
            violations: vec![
                violation("/productId", "7 is not of type \"string\""),
                violation("", "\"type\" is a required property"),
            ],
        };
        assert_eq!(
            invalid.to_string(),
            "the request message breaks the protocol's schema: /productId: 7 is not of type \
             \"string\"; /: \"type\" is a required property"
        );
    }
}
