//! A protocol's envelope: the fields every message carries around the action's data
//! (message id, `type`, `action`, status code and message), and where the data is.
//!
//! Read from the protocol's JSON Schemas and error convention when it has them, else the
//! seeds' convention (`messageId`, `type`, `action`, `status: {code, message}`).

use concord_negotiate::naming::key;
use concord_negotiate::ProtocolDocument;
use serde_json::{Map, Value};

use crate::schema::{fixed_value, properties};

/// The envelope of one protocol.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Envelope {
    /// The request field carrying the message id.
    pub request_id: String,
    /// The response field echoing it.
    pub response_id: String,
    /// The request's `type` field and the value it carries (`"REQUEST"`).
    pub request_type: Option<(String, Value)>,
    /// The response's `type` field and the value it carries (`"RESPONSE"`).
    pub response_type: Option<(String, Value)>,
    /// The request field naming the action.
    pub action_field: Option<String>,
    /// The value the schema fixes for it (`const`), if any.
    pub action_value: Option<Value>,
    /// JSON pointer of the status code in a response.
    pub code_at: Option<String>,
    /// JSON pointer of the status message in a response.
    pub message_at: Option<String>,
    /// The code of a successful response (200 when codes are HTTP status codes).
    pub success_code: Option<i64>,
    /// The response's data fields, in schema order (`None`: no schema, read from messages).
    pub payload_fields: Option<Vec<String>>,
    /// The request's data fields, in schema order (`None`: no schema).
    pub request_fields: Option<Vec<String>>,
}

/// The seeds' names.
const MESSAGE_ID: &str = "messageId";
const TYPE: &str = "type";
const ACTION: &str = "action";
const DEFAULT_CODE_AT: &str = "/status/code";
const DEFAULT_MESSAGE_AT: &str = "/status/message";

impl Envelope {
    /// The envelope of `document`.
    pub fn of(document: &ProtocolDocument) -> Self {
        let request = document.request_schema.as_ref();
        let response = document.response_schema.as_ref();
        let convention = &document.error_convention;
        let id_in = |schema: Option<&Value>| {
            schema
                .and_then(|schema| {
                    properties(schema)
                        .into_iter()
                        .find(|(name, _)| key(name) == key(MESSAGE_ID))
                        .map(|(name, _)| name.to_owned())
                })
                .unwrap_or_else(|| MESSAGE_ID.to_owned())
        };
        let type_in = |schema: Option<&Value>, conventional: &str| match schema {
            None => Some((TYPE.to_owned(), Value::String(conventional.to_owned()))),
            Some(schema) => properties(schema)
                .into_iter()
                .find(|(name, _)| *name == TYPE)
                .map(|(name, property)| {
                    let value = fixed_value(property)
                        .cloned()
                        .unwrap_or_else(|| Value::String(conventional.to_owned()));
                    (name.to_owned(), value)
                }),
        };
        let action = match request {
            None => Some((ACTION.to_owned(), None)),
            Some(schema) => properties(schema)
                .into_iter()
                .find(|(name, _)| *name == ACTION)
                .map(|(name, property)| (name.to_owned(), fixed_value(property).cloned())),
        };
        let (code_at, message_at) = match response {
            None => (
                Some(
                    convention
                        .code_pointer
                        .clone()
                        .unwrap_or_else(|| DEFAULT_CODE_AT.into()),
                ),
                Some(
                    convention
                        .message_pointer
                        .clone()
                        .unwrap_or_else(|| DEFAULT_MESSAGE_AT.into()),
                ),
            ),
            Some(_) => (
                convention.code_pointer.clone(),
                convention.message_pointer.clone(),
            ),
        };
        let code_schema = code_at
            .as_deref()
            .zip(response)
            .and_then(|(pointer, schema)| schema_at(schema, pointer));
        let says_http = code_schema
            .and_then(|schema| schema.get("description"))
            .and_then(Value::as_str)
            .is_some_and(|text| text.to_lowercase().contains("http"));
        let success_code = if convention.http_status_codes || says_http || response.is_none() {
            Some(200)
        } else {
            code_schema
                .and_then(|schema| fixed_value(schema).or_else(|| schema.get("default")))
                .and_then(Value::as_i64)
        };
        let mut envelope = Envelope {
            request_id: id_in(request),
            response_id: id_in(response),
            request_type: type_in(request, "REQUEST"),
            response_type: type_in(response, "RESPONSE"),
            action_field: action.as_ref().map(|(name, _)| name.clone()),
            action_value: action.and_then(|(_, value)| value),
            code_at,
            message_at,
            success_code,
            payload_fields: None,
            request_fields: None,
        };
        envelope.request_fields = request.map(|schema| {
            properties(schema)
                .into_iter()
                .map(|(name, _)| name)
                .filter(|name| !envelope.is_request_envelope(name))
                .map(str::to_owned)
                .collect()
        });
        envelope.payload_fields = response.map(|schema| {
            properties(schema)
                .into_iter()
                .map(|(name, _)| name)
                .filter(|name| !envelope.is_response_envelope(name))
                .map(str::to_owned)
                .collect()
        });
        envelope
    }

    /// Whether a top-level request field belongs to the envelope.
    pub fn is_request_envelope(&self, name: &str) -> bool {
        name == self.request_id
            || self
                .request_type
                .as_ref()
                .is_some_and(|(field, _)| field == name)
            || self.action_field.as_deref() == Some(name)
    }

    /// Whether a top-level response field belongs to the envelope.
    pub fn is_response_envelope(&self, name: &str) -> bool {
        let root = |pointer: &Option<String>| {
            pointer
                .as_deref()
                .and_then(|pointer| segments(pointer).into_iter().next())
                .is_some_and(|first| first == name)
        };
        name == self.response_id
            || self
                .response_type
                .as_ref()
                .is_some_and(|(field, _)| field == name)
            || root(&self.code_at)
            || root(&self.message_at)
    }

    /// A request's data fields (everything outside the envelope), in message order.
    pub fn request_data(&self, message: &Value) -> Map<String, Value> {
        message
            .as_object()
            .map(|object| {
                object
                    .iter()
                    .filter(|(name, _)| !self.is_request_envelope(name))
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The response's data fields: from the schema, or else those the message has.
    pub fn payload_names(&self, message: &Value) -> Vec<String> {
        match &self.payload_fields {
            Some(fields) => fields.clone(),
            None => message
                .as_object()
                .map(|object| {
                    object
                        .keys()
                        .filter(|name| !self.is_response_envelope(name))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The data a response carries: the value of its one data field, or an object of its
    /// data fields when it has several (absent fields are left out; a missing single field
    /// is `null`).
    pub fn payload(&self, message: &Value) -> Value {
        let names = self.payload_names(message);
        match names.as_slice() {
            [single] => message.get(single).cloned().unwrap_or(Value::Null),
            _ => Value::Object(
                names
                    .iter()
                    .filter_map(|name| Some((name.clone(), message.get(name)?.clone())))
                    .collect(),
            ),
        }
    }

    /// The status code of a response, when it has an integer one.
    pub fn code(&self, message: &Value) -> Option<i64> {
        self.code_at
            .as_deref()
            .and_then(|pointer| message.pointer(pointer))
            .and_then(Value::as_i64)
    }

    /// Whether a response reports an error: an integer status code of 400 or more.
    pub fn is_error(&self, message: &Value) -> bool {
        self.code(message).is_some_and(|code| code >= 400)
    }

    /// The status message of a response: the string at the message pointer, else `""`.
    pub fn status_message(&self, message: &Value) -> String {
        self.message_at
            .as_deref()
            .and_then(|pointer| message.pointer(pointer))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }
}

/// The segments of a JSON pointer, unescaped (`/a~1b/c` → `["a/b", "c"]`).
pub(crate) fn segments(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// The sub-schema describing the value at `pointer` of a message (through `properties`).
pub(crate) fn schema_at<'s>(schema: &'s Value, pointer: &str) -> Option<&'s Value> {
    segments(pointer)
        .iter()
        .try_fold(schema, |schema, segment| {
            schema
                .get("properties")
                .and_then(|props| props.get(segment))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SEED: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../concord-negotiate/tests/fixtures/seed-product-info.zh.md"
    ));

    #[test]
    fn the_seed_envelope() {
        let envelope = Envelope::of(&ProtocolDocument::parse(SEED).unwrap());
        assert_eq!(envelope.request_id, "messageId");
        assert_eq!(
            envelope.request_type,
            Some(("type".into(), json!("REQUEST")))
        );
        assert_eq!(envelope.action_field.as_deref(), Some("action"));
        assert_eq!(envelope.action_value, None);
        assert_eq!(envelope.code_at.as_deref(), Some("/status/code"));
        assert_eq!(envelope.success_code, Some(200));
        assert_eq!(
            envelope.request_fields,
            Some(vec!["productId".into(), "productName".into()])
        );
        assert_eq!(envelope.payload_fields, Some(vec!["productInfo".into()]));
        let not_found = json!({"messageId": "m", "type": "RESPONSE",
            "status": {"code": 404, "message": "产品未找到"}, "productInfo": null});
        assert!(envelope.is_error(&not_found));
        assert_eq!(envelope.status_message(&not_found), "产品未找到");
        assert_eq!(envelope.payload(&not_found), Value::Null);
    }

    #[test]
    fn pointers_unescape() {
        assert_eq!(segments("/a~1b/c~0d"), vec!["a/b", "c~d"]);
        assert!(segments("").is_empty());
    }
}
