//! Meta-protocol messages (PT = 0): the five actions of ANP 05/06 as typed values.
//!
//! Decoding checks every field and names the one that is wrong; encoding
//! refuses messages the 06 draft forbids. Context-dependent rules (the
//! sequenceId progression, `modificationSummary` on every negotiating message
//! but the first) need the negotiation's history and are enforced by
//! [`Session`](crate::Session).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::frame::{Frame, ProtocolType};
use crate::text::TextPosition;

/// One meta-protocol message. Serialises as JSON with an `action` tag and camelCase fields.
///
/// ```
/// use concord_proto::{MetaMessage, NegotiationStatus, ProtocolNegotiation};
///
/// let message = MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
///     sequence_id: 0,
///     candidate_protocols: Some("# Requirement\nGet product info".into()),
///     modification_summary: None,
///     status: NegotiationStatus::Negotiating,
/// });
/// let json = message.encode()?;
/// assert!(json.starts_with(br#"{"action":"protocolNegotiation","sequenceId":0,"#));
/// assert_eq!(MetaMessage::decode(&json)?, message);
/// # Ok::<(), concord_proto::MetaError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum MetaMessage {
    /// Propose, counter-propose, accept or reject a protocol.
    ProtocolNegotiation(ProtocolNegotiation),
    /// "My handler code is ready" (or failed).
    CodeGeneration(CodeGeneration),
    /// Negotiate the test cases both sides will run.
    TestCasesNegotiation(TestCasesNegotiation),
    /// Report an error in the peer's messages, or answer such a report.
    FixErrorNegotiation(FixErrorNegotiation),
    /// Free-form natural-language exchange about the negotiation.
    NaturalLanguageNegotiation(NaturalLanguageNegotiation),
}

/// `protocolNegotiation`: one step of the protocol negotiation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProtocolNegotiation {
    /// Position of this message in the negotiation: the first carries 0 (or 1, as the
    /// reference implementation sends), every later one the previous value plus one.
    pub sequence_id: u64,
    /// The full candidate protocol text (required when negotiating). On `accepted` it
    /// repeats the accepted text; on `rejected` it may be empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_protocols: Option<String>,
    /// What changed since the previous candidate (required on every negotiating message
    /// but the first). Concord also uses it to carry the reason of a `rejected`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modification_summary: Option<String>,
    /// Where the negotiation stands.
    pub status: NegotiationStatus,
}

/// Status of a protocol, test-case or fix-error negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NegotiationStatus {
    /// Still negotiating: the message carries a (counter-)proposal.
    Negotiating,
    /// The last proposal is accepted.
    Accepted,
    /// The negotiation failed.
    Rejected,
    /// The sender gave up waiting (05 only: accepted on receipt, never sent).
    Timeout,
}

impl NegotiationStatus {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "negotiating" => Self::Negotiating,
            "accepted" => Self::Accepted,
            "rejected" => Self::Rejected,
            "timeout" => Self::Timeout,
            _ => return None,
        })
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Negotiating => "negotiating",
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::Timeout => "timeout",
        }
    }
}

/// `codeGeneration`: the sender's handler code is ready, or could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeGeneration {
    /// `generated` or `error`.
    pub status: CodeGenerationStatus,
}

/// Status of a `codeGeneration` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CodeGenerationStatus {
    /// Code is ready; the sender can process application messages.
    Generated,
    /// Code generation failed; the session ends.
    Error,
}

/// `testCasesNegotiation`: agree on test cases (each a request, a response and an expected result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestCasesNegotiation {
    /// The full test-case text (required when negotiating).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_cases: Option<String>,
    /// What changed since the previous test cases (required on every negotiating message
    /// but the first); the reason, on `rejected`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modification_summary: Option<String>,
    /// Where the negotiation stands.
    pub status: NegotiationStatus,
}

/// `fixErrorNegotiation`: report an error in the peer's messages (negotiating), or accept
/// (the receiver will regenerate its code) or reject (with the reason) such a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixErrorNegotiation {
    /// The error found, or the reason for rejecting a report (required when negotiating).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_description: Option<String>,
    /// Where the negotiation stands.
    pub status: NegotiationStatus,
}

/// `naturalLanguageNegotiation`: a natural-language request or the response to one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NaturalLanguageNegotiation {
    /// `REQUEST` or `RESPONSE`.
    #[serde(rename = "type")]
    pub kind: NaturalLanguageKind,
    /// A 16-character random id; a response carries its request's id.
    pub message_id: String,
    /// The natural-language text.
    pub message: String,
}

/// Whether a natural-language negotiation message asks or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum NaturalLanguageKind {
    /// A request; the peer answers with a response carrying the same messageId.
    Request,
    /// The answer to a request.
    Response,
}

/// Longest `messageId` accepted from a peer (the spec asks for 16 characters; we are lenient
/// on receipt but bound the size).
pub const MAX_MESSAGE_ID_LEN: usize = 256;

/// Why bytes are not a valid meta-protocol message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    /// The protocol data is not UTF-8.
    #[error("meta message is not valid UTF-8 (valid up to byte {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// The protocol data is not JSON.
    #[error("meta message is not valid JSON at {position}: {message}")]
    Json {
        /// Where in the text.
        position: TextPosition,
        /// What the JSON parser found.
        message: String,
    },
    /// The message could not be written as JSON (serde_json's message).
    #[error("meta message cannot be written as JSON: {0}")]
    Unencodable(String),
    /// The JSON value is not an object.
    #[error("meta message must be a JSON object, got {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// The `action` field is missing.
    #[error("meta message has no `action` field")]
    MissingAction,
    /// The `action` names no known meta-protocol message.
    #[error("unknown meta-protocol action `{0}`")]
    UnknownAction(String),
    /// A required field is absent.
    #[error("{action}: missing required field `{field}`")]
    MissingField {
        /// The message's action.
        action: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// A field has the wrong JSON type.
    #[error("{action}: field `{field}` must be {expected}, got {found}")]
    WrongType {
        /// The message's action.
        action: &'static str,
        /// The offending field.
        field: &'static str,
        /// What the field must be.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A field has the right type but a value outside its domain.
    #[error("{action}: field `{field}` has invalid value {value}: expected {expected}")]
    InvalidValue {
        /// The message's action.
        action: &'static str,
        /// The offending field.
        field: &'static str,
        /// The value found (JSON text, truncated).
        value: String,
        /// What the field accepts.
        expected: &'static str,
    },
    /// The message breaks a rule of the 06 draft.
    #[error("{action}: {rule}")]
    Rule {
        /// The message's action.
        action: &'static str,
        /// The rule broken.
        rule: &'static str,
    },
}

impl MetaMessage {
    /// The `action` name of this message.
    pub fn action(&self) -> &'static str {
        match self {
            Self::ProtocolNegotiation(_) => "protocolNegotiation",
            Self::CodeGeneration(_) => "codeGeneration",
            Self::TestCasesNegotiation(_) => "testCasesNegotiation",
            Self::FixErrorNegotiation(_) => "fixErrorNegotiation",
            Self::NaturalLanguageNegotiation(_) => "naturalLanguageNegotiation",
        }
    }

    /// Decodes the protocol data of a PT 0 frame (UTF-8 JSON).
    pub fn decode(data: &[u8]) -> Result<Self, MetaError> {
        let text = std::str::from_utf8(data).map_err(|error| MetaError::InvalidUtf8 {
            valid_up_to: error.valid_up_to(),
        })?;
        let value: Value = serde_json::from_str(text).map_err(|error| MetaError::Json {
            position: TextPosition::of_json_error(text, &error).unwrap_or(TextPosition::START),
            message: error.to_string(),
        })?;
        Self::from_json(value)
    }

    /// Builds a message from a parsed JSON value, checking every field.
    pub fn from_json(value: Value) -> Result<Self, MetaError> {
        let Value::Object(object) = value else {
            return Err(MetaError::NotAnObject {
                found: json_type(&value),
            });
        };
        let action = match object.get("action") {
            None => return Err(MetaError::MissingAction),
            Some(Value::String(action)) => action.as_str(),
            Some(other) => {
                return Err(MetaError::WrongType {
                    action: "message",
                    field: "action",
                    expected: "a string",
                    found: json_type(other),
                })
            }
        };
        let message = match action {
            "protocolNegotiation" => {
                let fields = Fields::new("protocolNegotiation", &object);
                Self::ProtocolNegotiation(ProtocolNegotiation {
                    sequence_id: fields.u64("sequenceId")?,
                    candidate_protocols: fields.optional_string("candidateProtocols")?,
                    modification_summary: fields.optional_string("modificationSummary")?,
                    status: fields.status()?,
                })
            }
            "codeGeneration" => {
                let fields = Fields::new("codeGeneration", &object);
                let status = match fields.string("status")? {
                    "generated" => CodeGenerationStatus::Generated,
                    "error" => CodeGenerationStatus::Error,
                    other => return Err(fields.invalid("status", other, "generated or error")),
                };
                Self::CodeGeneration(CodeGeneration { status })
            }
            "testCasesNegotiation" => {
                let fields = Fields::new("testCasesNegotiation", &object);
                Self::TestCasesNegotiation(TestCasesNegotiation {
                    test_cases: fields.optional_string("testCases")?,
                    modification_summary: fields.optional_string("modificationSummary")?,
                    status: fields.status()?,
                })
            }
            "fixErrorNegotiation" => {
                let fields = Fields::new("fixErrorNegotiation", &object);
                Self::FixErrorNegotiation(FixErrorNegotiation {
                    error_description: fields.optional_string("errorDescription")?,
                    status: fields.status()?,
                })
            }
            "naturalLanguageNegotiation" => {
                let fields = Fields::new("naturalLanguageNegotiation", &object);
                let kind = match fields.string("type")? {
                    "REQUEST" => NaturalLanguageKind::Request,
                    "RESPONSE" => NaturalLanguageKind::Response,
                    other => return Err(fields.invalid("type", other, "REQUEST or RESPONSE")),
                };
                Self::NaturalLanguageNegotiation(NaturalLanguageNegotiation {
                    kind,
                    message_id: fields.string("messageId")?.to_owned(),
                    message: fields.string("message")?.to_owned(),
                })
            }
            other => return Err(MetaError::UnknownAction(truncate(other))),
        };
        message.check_on_receipt()?;
        Ok(message)
    }

    /// Encodes this message as the JSON protocol data of a PT 0 frame.
    ///
    /// Fails if the message breaks a rule the 06 draft sets for senders.
    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        self.check_on_send()?;
        // Serialising these plain structs cannot fail: no maps with non-string keys,
        // no floats, no custom serialisers.
        serde_json::to_vec(self).map_err(|error| MetaError::Unencodable(error.to_string()))
    }

    /// Encodes this message as a complete PT 0 frame (header byte included).
    pub fn to_frame(&self) -> Result<Vec<u8>, MetaError> {
        let data = self.encode()?;
        Ok(Frame::encode(ProtocolType::Meta, &data))
    }

    /// Rules that hold for every message we accept.
    fn check_on_receipt(&self) -> Result<(), MetaError> {
        let action = self.action();
        match self {
            Self::ProtocolNegotiation(message) => {
                if message.status == NegotiationStatus::Negotiating
                    && message.candidate_protocols.is_none()
                {
                    return Err(MetaError::Rule {
                        action,
                        rule: "candidateProtocols is required when status is negotiating",
                    });
                }
            }
            Self::TestCasesNegotiation(message) => {
                if message.status == NegotiationStatus::Negotiating && message.test_cases.is_none()
                {
                    return Err(MetaError::Rule {
                        action,
                        rule: "testCases is required when status is negotiating",
                    });
                }
            }
            Self::FixErrorNegotiation(message) => {
                if message.status == NegotiationStatus::Negotiating
                    && message.error_description.is_none()
                {
                    return Err(MetaError::Rule {
                        action,
                        rule: "errorDescription is required when status is negotiating",
                    });
                }
            }
            Self::NaturalLanguageNegotiation(message) => {
                if message.message_id.is_empty() {
                    return Err(MetaError::Rule {
                        action,
                        rule: "messageId must not be empty",
                    });
                }
                if message.message_id.len() > MAX_MESSAGE_ID_LEN {
                    return Err(MetaError::Rule {
                        action,
                        rule: "messageId is longer than 256 bytes",
                    });
                }
            }
            Self::CodeGeneration(_) => {}
        }
        Ok(())
    }

    /// Rules for what we send: those on receipt, plus the 06 draft's stricter ones.
    fn check_on_send(&self) -> Result<(), MetaError> {
        self.check_on_receipt()?;
        let action = self.action();
        let status = match self {
            Self::ProtocolNegotiation(message) => Some(message.status),
            Self::TestCasesNegotiation(message) => Some(message.status),
            Self::FixErrorNegotiation(message) => Some(message.status),
            Self::CodeGeneration(_) | Self::NaturalLanguageNegotiation(_) => None,
        };
        if status == Some(NegotiationStatus::Timeout) {
            return Err(MetaError::Rule {
                action,
                rule: "status `timeout` is accepted on receipt but never sent (the 06 draft dropped it)",
            });
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for MetaMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_json(value).map_err(serde::de::Error::custom)
    }
}

/// Typed access to the fields of one message, with errors that name the field.
struct Fields<'a> {
    action: &'static str,
    object: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn new(action: &'static str, object: &'a Map<String, Value>) -> Self {
        Self { action, object }
    }

    fn required(&self, field: &'static str) -> Result<&'a Value, MetaError> {
        self.object.get(field).ok_or(MetaError::MissingField {
            action: self.action,
            field,
        })
    }

    fn wrong_type(&self, field: &'static str, expected: &'static str, found: &Value) -> MetaError {
        MetaError::WrongType {
            action: self.action,
            field,
            expected,
            found: json_type(found),
        }
    }

    fn invalid(&self, field: &'static str, value: &str, expected: &'static str) -> MetaError {
        MetaError::InvalidValue {
            action: self.action,
            field,
            value: format!("{:?}", truncate(value)),
            expected,
        }
    }

    fn string(&self, field: &'static str) -> Result<&'a str, MetaError> {
        match self.required(field)? {
            Value::String(text) => Ok(text),
            other => Err(self.wrong_type(field, "a string", other)),
        }
    }

    /// An optional string: absent and `null` both mean "not given".
    fn optional_string(&self, field: &'static str) -> Result<Option<String>, MetaError> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.wrong_type(field, "a string", other)),
        }
    }

    fn u64(&self, field: &'static str) -> Result<u64, MetaError> {
        match self.required(field)? {
            Value::Number(number) => number.as_u64().ok_or_else(|| MetaError::InvalidValue {
                action: self.action,
                field,
                value: number.to_string(),
                expected: "a non-negative integer",
            }),
            other => Err(self.wrong_type(field, "a non-negative integer", other)),
        }
    }

    fn status(&self) -> Result<NegotiationStatus, MetaError> {
        let text = self.string("status")?;
        NegotiationStatus::parse(text).ok_or_else(|| {
            self.invalid("status", text, "negotiating, accepted, rejected or timeout")
        })
    }
}

/// The JSON type of `value`, as error messages name it: `null`, `a boolean`, `a number`,
/// `a string`, `an array` or `an object`.
///
/// ```
/// use serde_json::json;
///
/// assert_eq!(concord_proto::json_type(&json!([1])), "an array");
/// assert_eq!(concord_proto::json_type(&json!(null)), "null");
/// ```
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Keeps peer-supplied text in error messages short.
fn truncate(text: &str) -> String {
    const LIMIT: usize = 64;
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Result<MetaMessage, MetaError> {
        MetaMessage::decode(json.as_bytes())
    }

    #[test]
    fn decodes_the_seed_examples() {
        let message = decode(
            r#"{"action": "protocolNegotiation", "sequenceId": 0, "candidateProtocols": "",
                "modificationSummary": "", "status": "negotiating"}"#,
        )
        .unwrap();
        assert_eq!(
            message,
            MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
                sequence_id: 0,
                candidate_protocols: Some(String::new()),
                modification_summary: Some(String::new()),
                status: NegotiationStatus::Negotiating,
            })
        );
        assert_eq!(
            decode(r#"{"action": "codeGeneration", "status": "generated"}"#).unwrap(),
            MetaMessage::CodeGeneration(CodeGeneration {
                status: CodeGenerationStatus::Generated
            })
        );
        assert!(matches!(
            decode(
                r#"{"action":"naturalLanguageNegotiation","type":"REQUEST","messageId":"abcdefgh12345678","message":"hi"}"#
            ),
            Ok(MetaMessage::NaturalLanguageNegotiation(
                NaturalLanguageNegotiation {
                    kind: NaturalLanguageKind::Request,
                    ..
                }
            ))
        ));
    }

    #[test]
    fn timeout_is_accepted_on_receipt_but_never_sent() {
        let message =
            decode(r#"{"action":"protocolNegotiation","sequenceId":3,"status":"timeout"}"#)
                .unwrap();
        assert_eq!(
            message.encode(),
            Err(MetaError::Rule {
                action: "protocolNegotiation",
                rule: "status `timeout` is accepted on receipt but never sent (the 06 draft dropped it)"
            })
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            decode(
                r#"{"action":"protocolNegotiation","status":"negotiating","candidateProtocols":"x"}"#
            ),
            Err(MetaError::MissingField {
                action: "protocolNegotiation",
                field: "sequenceId"
            })
        );
        assert_eq!(
            decode(r#"{"action":"protocolNegotiation","sequenceId":"1","status":"negotiating"}"#),
            Err(MetaError::WrongType {
                action: "protocolNegotiation",
                field: "sequenceId",
                expected: "a non-negative integer",
                found: "a string"
            })
        );
        assert_eq!(
            decode(r#"{"action":"protocolNegotiation","sequenceId":-1,"status":"negotiating"}"#),
            Err(MetaError::InvalidValue {
                action: "protocolNegotiation",
                field: "sequenceId",
                value: "-1".into(),
                expected: "a non-negative integer"
            })
        );
        assert_eq!(
            decode(r#"{"action":"protocolNegotiation","sequenceId":0,"status":"negotiating"}"#),
            Err(MetaError::Rule {
                action: "protocolNegotiation",
                rule: "candidateProtocols is required when status is negotiating"
            })
        );
        assert_eq!(
            decode(r#"{"action":"codeGeneration","status":"done"}"#),
            Err(MetaError::InvalidValue {
                action: "codeGeneration",
                field: "status",
                value: "\"done\"".into(),
                expected: "generated or error"
            })
        );
        assert_eq!(
            decode(r#"{"action":"hello"}"#),
            Err(MetaError::UnknownAction("hello".into()))
        );
        assert_eq!(decode(r#"{"status":"x"}"#), Err(MetaError::MissingAction));
        assert_eq!(
            decode("[1]"),
            Err(MetaError::NotAnObject { found: "an array" })
        );
        assert!(matches!(
            decode("{\"action\":"),
            Err(MetaError::Json {
                position: TextPosition { line: 1, .. },
                ..
            })
        ));
        assert_eq!(
            MetaMessage::decode(b"{\"a\":\"\xff\"}"),
            Err(MetaError::InvalidUtf8 { valid_up_to: 6 })
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let message =
            decode(r#"{"action":"codeGeneration","status":"error","extra":{"nested":[1,2]}}"#)
                .unwrap();
        assert_eq!(message.action(), "codeGeneration");
    }

    #[test]
    fn serde_deserialize_uses_the_checked_decoder() {
        let result: Result<MetaMessage, _> =
            serde_json::from_str(r#"{"action":"fixErrorNegotiation","status":"negotiating"}"#);
        let error = result.unwrap_err().to_string();
        assert!(error.contains("errorDescription is required"), "{error}");
    }
}
