//! A protocol's envelope: the fields every message carries around the action's data
//! (message id, a type discriminator, the action, status code and message, an error
//! object), and where the data is. The one place where Concord tells envelope from data:
//! the judge, the handler templates, the test-case runner and the node all read it here.
//!
//! Inferred from the protocol's JSON Schemas, in any naming style and any of the layouts
//! protocol drafts use:
//!
//! | part | names looked for (style-independent) |
//! |---|---|
//! | message id | `messageId`, `msgId`, `requestId`, `correlationId`, `id` |
//! | discriminator | `type`, `messageType`, `msgType`, `kind`, `messageKind` (its `const`, or one-value `enum`) |
//! | action | `action`, `operation`, `method`, `command`, `actionName` |
//! | status code | `status.code`, `status` (an integer), `code`, `statusCode`, `httpStatus`, `responseCode`, `resultCode`, then `error.code` |
//! | status message | `status.message`, `message`, `statusMessage`, `msg`, `detail`, then the error object's `message`/`msg`/`detail`/`description`/`reason`, or an `error` string |
//! | status word | `status`, `outcome`, `state`, `result` as a string enum with a success word (`success`, `ok`, `done`…) and error words (`error`, `not_found`, `client_error`…): [`StatusText`] |
//! | error object | `error`, `errors`, `err`, `fault`, `problem`: written on errors only (optional, or required and `null` on success) |
//!
//! Everything else in a response is its data (one field such as `data` or `result`, or
//! several flat fields); everything else in a request is the action's input (flat fields,
//! or one object field such as `params` when the action's fields are inside it).
//!
//! Without schemas, the seeds' convention: `messageId`, `type` `REQUEST`/`RESPONSE`,
//! `action`, `status: {code, message}`.
//!
//! ```
//! use concord_negotiate::{Envelope, ProtocolDocument};
//!
//! let text = r#"# Requirements
//! Weather by city.
//! ## Request Message Format
//! ~~~json
//! {"type": "object", "properties": {"messageType": {"const": "getWeather"}, "messageId": {"type": "string"}, "city": {"type": "string"}}}
//! ~~~
//! ## Response Message Format
//! ~~~json
//! {"type": "object", "properties": {"messageType": {"const": "getWeather"}, "messageId": {"type": "string"},
//!  "code": {"type": "integer"}, "data": {"type": "object"}, "error": {"type": "object", "properties": {"message": {"type": "string"}}}}}
//! ~~~
//! "#;
//! let envelope = Envelope::of(&ProtocolDocument::parse(text)?);
//! assert_eq!(envelope.request_id, "messageId");
//! assert_eq!(envelope.code_at.as_deref(), Some("/code"));
//! assert_eq!(envelope.message_at.as_deref(), Some("/error/message"));
//! assert_eq!(envelope.payload_fields, Some(vec!["data".to_owned()]));
//! assert_eq!(envelope.request_fields, Some(vec!["city".to_owned()]));
//! # Ok::<(), concord_negotiate::DocumentError>(())
//! ```

use serde_json::{Map, Value};

use crate::document::ProtocolDocument;
use crate::json_schema::{
    allows_null, fixed_value, is_object_schema, is_required, non_null, properties, types,
};
use crate::naming::key;

/// The envelope of one protocol.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Envelope {
    /// The request field carrying the message id.
    pub request_id: String,
    /// The response field echoing it.
    pub response_id: String,
    /// The request's discriminator field and the value requests carry; `None` for the
    /// value when the schema leaves it open and the field names a message type rather than
    /// `type` (then requests carry the action's name, and nothing is checked).
    pub request_type: Option<(String, Option<Value>)>,
    /// The response's discriminator field and value, as for requests.
    pub response_type: Option<(String, Option<Value>)>,
    /// The request field naming the action.
    pub action_field: Option<String>,
    /// The value the schema fixes for it (`const`), if any.
    pub action_value: Option<Value>,
    /// JSON pointer of the status code in a response.
    pub code_at: Option<String>,
    /// JSON pointer of the status message in a response.
    pub message_at: Option<String>,
    /// The response field holding an error object (or string), written only on errors.
    pub error_field: Option<String>,
    /// The code of a successful response (200 when codes are HTTP status codes).
    pub success_code: Option<i64>,
    /// A response's status as a word (`"status": "success" | "error"`), when the schema
    /// has one: written on every response, read before the data.
    pub status_text: Option<StatusText>,
    /// The response's data fields, in schema order (`None`: no schema, read from messages).
    pub payload_fields: Option<Vec<String>>,
    /// The request's data fields, in schema order (`None`: no schema).
    pub request_fields: Option<Vec<String>>,
    /// The request's one data field, when it is the only one and an object schema that
    /// lists properties (`params`, `arguments`…): an object input may be nested there (see
    /// [`crate::fit::request_data`]).
    pub request_object_field: Option<String>,
}

/// The seeds' names.
const MESSAGE_ID: &str = "messageId";
const TYPE: &str = "type";
const ACTION: &str = "action";
const DEFAULT_CODE_AT: &str = "/status/code";
const DEFAULT_MESSAGE_AT: &str = "/status/message";

const ID_KEYS: [&str; 6] = [
    "messageid",
    "msgid",
    "requestid",
    "correlationid",
    "messageuuid",
    "id",
];
const TYPE_KEYS: [&str; 5] = ["type", "messagetype", "msgtype", "kind", "messagekind"];
const ACTION_KEYS: [&str; 5] = ["action", "operation", "method", "command", "actionname"];
const CODE_KEYS: [&str; 8] = [
    "code",
    "statuscode",
    "httpstatus",
    "httpstatuscode",
    "httpcode",
    "responsecode",
    "resultcode",
    "status",
];
const MESSAGE_KEYS: [&str; 6] = [
    "message",
    "statusmessage",
    "msg",
    "detail",
    "statusdescription",
    "errormessage",
];
const ERROR_KEYS: [&str; 5] = ["error", "errors", "err", "fault", "problem"];
const ERROR_MESSAGE_KEYS: [&str; 6] = [
    "message",
    "msg",
    "detail",
    "details",
    "description",
    "reason",
];

/// The first property of `schema` whose style-independent name is one of `keys`, in the
/// order of `keys`.
fn find_by_key<'s>(schema: &'s Value, keys: &[&str]) -> Option<(&'s str, &'s Value)> {
    let all = properties(schema);
    keys.iter()
        .find_map(|wanted| all.iter().find(|(name, _)| key(name) == *wanted).copied())
}

/// Where the status code, status message and error object of a response schema are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatusLayout {
    pub code_at: Option<String>,
    pub message_at: Option<String>,
    pub error_field: Option<String>,
    pub status_text: Option<StatusText>,
}

/// Reads a response schema's status code, message and error object.
pub(crate) fn status_layout(response: &Value) -> StatusLayout {
    let mut layout = StatusLayout::default();
    let status = properties(response)
        .into_iter()
        .find(|(name, schema)| key(name) == "status" && is_object_schema(schema));
    if let Some((name, status)) = status {
        if let Some((code, _)) = find_by_key(status, &CODE_KEYS) {
            layout.code_at = Some(format!("/{}/{}", escape(name), escape(code)));
        }
        if let Some((message, _)) = find_by_key(status, &MESSAGE_KEYS) {
            layout.message_at = Some(format!("/{}/{}", escape(name), escape(message)));
        }
    }
    if layout.code_at.is_none() {
        let code = properties(response).into_iter().find(|(name, schema)| {
            CODE_KEYS.contains(&key(name).as_str())
                && (types(schema)
                    .iter()
                    .any(|t| *t == "integer" || *t == "number")
                    || (types(schema).is_empty() && key(name) != "status"))
        });
        layout.code_at = code.map(|(name, _)| format!("/{}", escape(name)));
    }
    // A status word is the envelope's status only where no numeric status code is: beside
    // a code, a `status` enum is the action's data (a job's `pending`/`completed`).
    if layout.code_at.is_none() {
        layout.status_text = properties(response)
            .into_iter()
            .find_map(|(name, schema)| StatusText::of(name, schema));
    }
    // The error object is written on errors only: optional, or required and `null` on
    // success.
    let error = properties(response).into_iter().find(|(name, schema)| {
        ERROR_KEYS.contains(&key(name).as_str())
            && (is_object_schema(non_null(schema)) || types(non_null(schema)).contains(&"string"))
            && (!is_required(response, name) || allows_null(schema))
    });
    if layout.message_at.is_none() {
        layout.message_at = properties(response)
            .into_iter()
            .find(|(name, schema)| {
                MESSAGE_KEYS.contains(&key(name).as_str())
                    && (types(schema).is_empty() || types(schema).contains(&"string"))
            })
            .map(|(name, _)| format!("/{}", escape(name)));
    }
    if let Some((name, schema)) = error {
        let schema = non_null(schema);
        layout.error_field = Some(name.to_owned());
        if is_object_schema(schema) {
            if layout.code_at.is_none() {
                if let Some((code, _)) = find_by_key(schema, &CODE_KEYS) {
                    layout.code_at = Some(format!("/{}/{}", escape(name), escape(code)));
                }
            }
            if layout.message_at.is_none() {
                if let Some((message, _)) = find_by_key(schema, &ERROR_MESSAGE_KEYS) {
                    layout.message_at = Some(format!("/{}/{}", escape(name), escape(message)));
                }
            }
        } else if layout.message_at.is_none() {
            layout.message_at = Some(format!("/{}", escape(name)));
        }
    }
    layout
}

impl Envelope {
    /// The envelope of `document`.
    pub fn of(document: &ProtocolDocument) -> Self {
        let request = document.request_schema.as_ref();
        let response = document.response_schema.as_ref();
        let convention = &document.error_convention;
        let id_in = |schema: Option<&Value>| {
            schema
                .and_then(|schema| find_by_key(schema, &ID_KEYS))
                .map(|(name, _)| name.to_owned())
                .unwrap_or_else(|| MESSAGE_ID.to_owned())
        };
        let type_in = |schema: Option<&Value>, conventional: &str| match schema {
            None => Some((
                TYPE.to_owned(),
                Some(Value::String(conventional.to_owned())),
            )),
            Some(schema) => find_by_key(schema, &TYPE_KEYS)
                .filter(|(_, property)| {
                    types(property).is_empty() || types(property).contains(&"string")
                })
                .map(|(name, property)| {
                    let value = fixed_value(property)
                        .cloned()
                        .or_else(|| (name == TYPE).then(|| Value::String(conventional.to_owned())));
                    (name.to_owned(), value)
                }),
        };
        let action = match request {
            None => Some((ACTION.to_owned(), None)),
            Some(schema) => find_by_key(schema, &ACTION_KEYS)
                .map(|(name, property)| (name.to_owned(), fixed_value(property).cloned())),
        };
        let layout = response.map(status_layout).unwrap_or_default();
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
            Some(_) => (layout.code_at.clone(), layout.message_at.clone()),
        };
        let code_schema = code_at
            .as_deref()
            .zip(response)
            .and_then(|(pointer, schema)| schema_at(schema, pointer));
        let success_code = match code_schema {
            None if response.is_none() => Some(200),
            None => None,
            Some(schema) => Some(success_code(schema)),
        };
        let request_type = type_in(request, "REQUEST");
        // A response that echoes the request's action field (`operation`, `action`…) in
        // place of a type carries it as its discriminator: the action's name.
        let mut response_type = type_in(response, "RESPONSE").or_else(|| {
            response
                .and_then(|schema| find_by_key(schema, &ACTION_KEYS))
                .map(|(name, property)| (name.to_owned(), fixed_value(property).cloned()))
        });
        // An open message type in the response matches the request's (as the reference
        // SDK's drafting prompt asks).
        if let (Some((_, Some(Value::String(tag)))), Some((_, response_value @ None))) =
            (&request_type, &mut response_type)
        {
            if !is_generic_tag(tag) {
                *response_value = Some(Value::String(tag.clone()));
            }
        }
        let mut envelope = Envelope {
            request_id: id_in(request),
            response_id: id_in(response),
            request_type,
            response_type,
            action_field: action.as_ref().map(|(name, _)| name.clone()),
            action_value: action.and_then(|(_, value)| value),
            code_at,
            message_at,
            error_field: layout.error_field,
            success_code,
            status_text: layout.status_text,
            payload_fields: None,
            request_fields: None,
            request_object_field: None,
        };
        envelope.request_fields = request.map(|schema| {
            properties(schema)
                .into_iter()
                .map(|(name, _)| name)
                .filter(|name| !envelope.is_request_envelope(name))
                .map(str::to_owned)
                .collect()
        });
        envelope.request_object_field = match (request, envelope.request_fields.as_deref()) {
            (Some(schema), Some([single])) => properties(schema)
                .into_iter()
                .find(|(name, _)| name == single)
                .filter(|(_, sub)| crate::json_schema::has_properties(sub))
                .map(|(name, _)| name.to_owned()),
            _ => None,
        };
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

    /// The seeds' envelope, for tests.
    #[cfg(test)]
    pub(crate) fn seeds() -> Self {
        Envelope {
            request_id: MESSAGE_ID.into(),
            response_id: MESSAGE_ID.into(),
            request_type: Some((TYPE.into(), Some(Value::String("REQUEST".into())))),
            response_type: Some((TYPE.into(), Some(Value::String("RESPONSE".into())))),
            action_field: Some(ACTION.into()),
            action_value: None,
            code_at: Some(DEFAULT_CODE_AT.into()),
            message_at: Some(DEFAULT_MESSAGE_AT.into()),
            error_field: None,
            success_code: Some(200),
            status_text: None,
            payload_fields: None,
            request_fields: None,
            request_object_field: None,
        }
    }

    /// The value a request's discriminator names, when the schema fixes one: the action
    /// it calls, for protocols that tell messages apart by `messageType`.
    /// A generic tag (`REQUEST`) names no action.
    pub fn request_tag(&self) -> Option<&str> {
        self.request_type
            .as_ref()
            .and_then(|(_, value)| value.as_ref())
            .and_then(Value::as_str)
            .filter(|tag| !is_generic_tag(tag))
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
            || self.error_field.as_deref() == Some(name)
            || self
                .status_text
                .as_ref()
                .is_some_and(|status| status.field == name)
    }

    /// Whether a top-level response field is written only on errors (the error object).
    pub fn is_error_only(&self, name: &str) -> bool {
        self.error_field.as_deref() == Some(name)
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

    /// The status code of a response: its integer code, else, for an error status word,
    /// the code that word stands for (see [`StatusText::code_of`]).
    pub fn code(&self, message: &Value) -> Option<i64> {
        self.numeric_code(message)
            .or_else(|| self.error_word_code(message))
    }

    /// The integer at the code pointer.
    fn numeric_code(&self, message: &Value) -> Option<i64> {
        self.code_at
            .as_deref()
            .and_then(|pointer| message.pointer(pointer))
            .and_then(Value::as_i64)
    }

    /// The code of the response's status word, when it is not the success word.
    fn error_word_code(&self, message: &Value) -> Option<i64> {
        let status = self.status_text.as_ref()?;
        let word = message.get(status.field.as_str())?;
        (!status.successes.contains(word)).then(|| status.code_of(word))
    }

    /// Whether a response reports an error: a status code of 400 or more, or (for
    /// protocols whose success code is not HTTP's) any code other than the success code;
    /// without a code, a status word other than the success word.
    pub fn is_error(&self, message: &Value) -> bool {
        match (self.numeric_code(message), self.success_code) {
            (Some(code), Some(success)) if !(200..300).contains(&success) => code != success,
            (Some(code), _) => code >= 400,
            (None, _) => self.error_word_code(message).is_some(),
        }
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

/// Whether a message-type tag names no action (`REQUEST`, `call`).
fn is_generic_tag(tag: &str) -> bool {
    ["request", "req", "call", "invoke"].contains(&key(tag).as_str())
}

/// The code a successful response carries: the code schema's `const` or `default`, 0
/// when its description says 0 means success, else 200 (HTTP).
fn success_code(schema: &Value) -> i64 {
    if let Some(code) = fixed_value(schema)
        .or_else(|| schema.get("default"))
        .and_then(Value::as_i64)
    {
        return code;
    }
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_lowercase();
    let zero_is_success = [
        "0 for success",
        "0 = success",
        "0 means success",
        "0 表示成功",
        "0表示成功",
        "0: success",
    ]
    .iter()
    .any(|phrase| description.contains(phrase));
    if zero_is_success && !description.contains("http") {
        0
    } else {
        200
    }
}

/// Words that say a response succeeded (compared style-independently).
const SUCCESS_WORDS: [&str; 8] = [
    "success",
    "succeeded",
    "successful",
    "ok",
    "done",
    "completed",
    "complete",
    "succeed",
];

/// Error words that stand for one HTTP status code.
const EXACT_ERROR_WORDS: [(&str, i64); 17] = [
    ("badrequest", 400),
    ("invalid", 400),
    ("invalidrequest", 400),
    ("invalidinput", 400),
    ("validationerror", 400),
    ("unauthorized", 401),
    ("unauthenticated", 401),
    ("forbidden", 403),
    ("denied", 403),
    ("permissiondenied", 403),
    ("notfound", 404),
    ("conflict", 409),
    ("ratelimited", 429),
    ("toomanyrequests", 429),
    ("unavailable", 503),
    ("serviceunavailable", 503),
    ("timeout", 504),
];

/// Error words that stand for a class of codes (`4xx`, `5xx`), with the code read for them.
const CLASS_ERROR_WORDS: [(&str, i64); 4] = [
    ("clienterror", 400),
    ("servererror", 500),
    ("internalerror", 500),
    ("internal", 500),
];

/// Error words that stand for any error.
const GENERIC_ERROR_WORDS: [&str; 8] = [
    "error", "failure", "failed", "fail", "err", "ko", "rejected", "errored",
];

/// The code a generic or unknown error word is read as.
pub const UNKNOWN_WORD_CODE: i64 = 500;

/// A response status written as a word, from a schema such as
/// `"status": {"type": "string", "enum": ["success", "error"]}` (no numeric code, as
/// LLM-drafted and Agora-style documents often write it): which word a success carries,
/// and which error word a code is written as, by its HTTP class.
///
/// ```
/// use concord_negotiate::envelope::StatusText;
/// use serde_json::json;
///
/// let schema = json!({"type": "string", "enum": ["ok", "invalid_request", "not_found", "error"]});
/// let status = StatusText::of("status", &schema).unwrap();
/// assert_eq!(status.success, json!("ok"));
/// assert_eq!(status.word_for(404), &json!("not_found"));
/// assert_eq!(status.word_for(422), &json!("error"));
/// assert_eq!(status.code_of(&json!("invalid_request")), 400);
/// assert_eq!(status.code_of(&json!("error")), 500);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusText {
    /// The response's top-level field.
    pub field: String,
    /// The word a success is written with (the first success word).
    pub success: Value,
    /// Every word read as a success (`["success", "ok", "error"]`: `success` and `ok`).
    pub successes: Vec<Value>,
    /// The error words, in the order a code picks them: `(low, high, word)`, the code
    /// range each stands for (one code, then a class).
    pub errors: Vec<(i64, i64, Value)>,
    /// The word of an error no range covers.
    pub fallback: Value,
}

impl StatusText {
    /// The status word of `field`, when `schema` is a string enum of outcome words only:
    /// every word a known success word (`success`, `ok`…) or error word (`error`,
    /// `not_found`…), at least one of each. Any other word (`pending`, `running`) makes
    /// the field the action's data.
    pub fn of(field: &str, schema: &Value) -> Option<Self> {
        if !["status", "outcome", "state", "result", "resultstatus"].contains(&key(field).as_str())
            || !(types(schema).is_empty() || types(schema) == ["string"])
        {
            return None;
        }
        let words = schema.get("enum")?.as_array()?;
        if words.len() < 2 || !words.iter().all(Value::is_string) {
            return None;
        }
        let word_key = |word: &Value| key(word.as_str().unwrap_or_default());
        let is_success = |word: &Value| SUCCESS_WORDS.contains(&word_key(word).as_str());
        let is_error = |word: &Value| {
            let word = word_key(word);
            EXACT_ERROR_WORDS.iter().any(|(known, _)| *known == word)
                || CLASS_ERROR_WORDS.iter().any(|(known, _)| *known == word)
                || GENERIC_ERROR_WORDS.contains(&word.as_str())
        };
        if !words.iter().all(|word| is_success(word) || is_error(word)) {
            return None;
        }
        let successes: Vec<Value> = words
            .iter()
            .filter(|word| is_success(word))
            .cloned()
            .collect();
        let success = successes.first()?.clone();
        let mut errors = Vec::new();
        for word in words {
            if let Some((_, code)) = EXACT_ERROR_WORDS.iter().find(|(k, _)| *k == word_key(word)) {
                errors.push((*code, *code, word.clone()));
            }
        }
        for word in words {
            if let Some((_, code)) = CLASS_ERROR_WORDS.iter().find(|(k, _)| *k == word_key(word)) {
                let low = code / 100 * 100;
                errors.push((low, low + 99, word.clone()));
            }
        }
        let fallback = words
            .iter()
            .find(|word| GENERIC_ERROR_WORDS.contains(&word_key(word).as_str()))
            .or_else(|| errors.first().map(|(_, _, word)| word))?
            .clone();
        Some(Self {
            field: field.to_owned(),
            success,
            successes,
            errors,
            fallback,
        })
    }

    /// The word an error with `code` is written as.
    pub fn word_for(&self, code: i64) -> &Value {
        self.errors
            .iter()
            .find(|(low, high, _)| (*low..=*high).contains(&code))
            .map_or(&self.fallback, |(_, _, word)| word)
    }

    /// The code an error word is read as: the code it stands for, the first of its class,
    /// else 500.
    pub fn code_of(&self, word: &Value) -> i64 {
        self.errors
            .iter()
            .find(|(_, _, known)| known == word)
            .map_or(UNKNOWN_WORD_CODE, |(low, _, _)| *low)
    }
}

/// A JSON-pointer segment with `~` and `/` escaped (RFC 6901).
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The segments of a JSON pointer, unescaped (`/a~1b/c` → `["a/b", "c"]`).
pub fn segments(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Writes `value` at JSON `pointer` (RFC 6901, escapes decoded) of `target`, making the
/// objects on the way (a value in the way that is not an object is replaced).
///
/// ```
/// use concord_negotiate::envelope::set_at;
/// use serde_json::json;
///
/// let mut message = json!({"messageId": "m"});
/// set_at(&mut message, "/status/code", json!(404));
/// set_at(&mut message, "/a~1b", json!(1));
/// assert_eq!(message, json!({"messageId": "m", "status": {"code": 404}, "a/b": 1}));
/// ```
pub fn set_at(target: &mut Value, pointer: &str, value: Value) {
    let path = segments(pointer);
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut current = target;
    for segment in parents {
        if !current.get(segment.as_str()).is_some_and(Value::is_object) {
            current[segment.as_str()] = Value::Object(Map::new());
        }
        current = &mut current[segment.as_str()];
    }
    current[last.as_str()] = value;
}

/// The sub-schema describing the value at `pointer` of a message (through `properties`).
pub fn schema_at<'s>(schema: &'s Value, pointer: &str) -> Option<&'s Value> {
    segments(pointer)
        .iter()
        .try_fold(schema, |schema, segment| {
            properties(schema)
                .into_iter()
                .find(|(name, _)| name == segment)
                .map(|(_, sub)| sub)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SEED: &str = include_str!("../tests/fixtures/seed-product-info.zh.md");

    #[test]
    fn the_seed_envelope() {
        let envelope = Envelope::of(&ProtocolDocument::parse(SEED).unwrap());
        assert_eq!(envelope.request_id, "messageId");
        assert_eq!(
            envelope.request_type,
            Some(("type".into(), Some(json!("REQUEST"))))
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
    fn a_reference_sdk_layout() {
        let response = json!({
            "type": "object",
            "properties": {
                "messageType": {"type": "string"},
                "message_id": {"type": "string"},
                "code": {"type": "integer", "description": "HTTP status code"},
                "data": {"type": "object"},
                "error": {"type": "object", "properties": {"message": {"type": "string"}, "details": {"type": "string"}}}
            },
            "required": ["messageType", "message_id", "code"]
        });
        let layout = status_layout(&response);
        assert_eq!(layout.code_at.as_deref(), Some("/code"));
        assert_eq!(layout.message_at.as_deref(), Some("/error/message"));
        assert_eq!(layout.error_field.as_deref(), Some("error"));
        let status_integer = json!({"properties": {"status": {"type": "integer"}, "msg": {"type": "string"}, "result": {}}});
        let layout = status_layout(&status_integer);
        assert_eq!(layout.code_at.as_deref(), Some("/status"));
        assert_eq!(layout.message_at.as_deref(), Some("/msg"));
        let error_string = json!({"properties": {"error": {"type": "string"}, "data": {}}});
        let layout = status_layout(&error_string);
        assert_eq!(layout.code_at, None);
        assert_eq!(layout.message_at.as_deref(), Some("/error"));
    }

    #[test]
    fn a_status_word_and_a_required_nullable_error_are_the_envelope() {
        let response = json!({
            "type": "object",
            "properties": {
                "messageId": {"type": "string"},
                "status": {"type": "string", "enum": ["success", "error"]},
                "data": {"type": ["object", "null"]},
                "error": {"type": ["object", "null"], "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}}
            },
            "required": ["messageId", "status", "data", "error"]
        });
        let layout = status_layout(&response);
        let status = layout.status_text.clone().unwrap();
        assert_eq!(
            (status.field.as_str(), &status.success),
            ("status", &json!("success"))
        );
        assert_eq!(status.word_for(404), &json!("error"));
        assert_eq!(layout.error_field.as_deref(), Some("error"));
        assert_eq!(layout.code_at.as_deref(), Some("/error/code"));
        assert_eq!(layout.message_at.as_deref(), Some("/error/message"));
        let envelope = Envelope {
            code_at: layout.code_at,
            message_at: layout.message_at,
            error_field: layout.error_field,
            status_text: layout.status_text,
            success_code: None,
            ..Envelope::seeds()
        };
        assert!(envelope.is_response_envelope("status") && envelope.is_response_envelope("error"));
        assert!(!envelope.is_response_envelope("data"));
        let ok = json!({"messageId": "m", "status": "success", "data": {}, "error": null});
        assert!(!envelope.is_error(&ok));
        let failed = json!({"messageId": "m", "status": "error", "data": null, "error": {"code": 404, "message": "no"}});
        assert!(envelope.is_error(&failed));
        assert_eq!(envelope.code(&failed), Some(404));
        // Without a code anywhere, the word's own code.
        let words = json!({"properties": {"status": {"enum": ["ok", "not_found", "failure"]}, "message": {"type": "string"}}});
        let status = status_layout(&words).status_text.unwrap();
        let envelope = Envelope {
            code_at: None,
            status_text: Some(status),
            success_code: None,
            ..Envelope::seeds()
        };
        assert_eq!(envelope.code(&json!({"status": "not_found"})), Some(404));
        assert_eq!(envelope.code(&json!({"status": "failure"})), Some(500));
        assert!(!envelope.is_error(&json!({"status": "ok"})));
        // A status that is a number, or a free string, is no status word.
        assert!(StatusText::of("status", &json!({"type": "string"})).is_none());
        assert!(StatusText::of("status", &json!({"enum": ["red", "green"]})).is_none());
    }

    #[test]
    fn a_job_status_beside_its_data_stays_data() {
        // getJob: a code, and a job's state as a word among others that are no outcome.
        let job = json!({"enum": ["pending", "running", "completed", "failed"]});
        assert!(StatusText::of("status", &job).is_none());
        let response = json!({
            "type": "object",
            "properties": {
                "messageId": {"type": "string"},
                "status": {"type": "string", "enum": ["pending", "running", "completed", "failed"]},
                "jobId": {"type": "string"}
            },
            "required": ["messageId", "status", "jobId"]
        });
        assert_eq!(status_layout(&response).status_text, None);
        // Beside a numeric code, even outcome words are the action's data.
        let coded = json!({"properties": {
            "code": {"type": "integer"},
            "status": {"enum": ["completed", "failed"]},
            "jobId": {"type": "string"}
        }});
        let layout = status_layout(&coded);
        assert_eq!(layout.code_at.as_deref(), Some("/code"));
        assert_eq!(layout.status_text, None);
        let mut document = ProtocolDocument::parse(SEED).unwrap();
        document.response_schema = Some(response);
        let envelope = Envelope::of(&document);
        assert!(!envelope.is_response_envelope("status"));
        assert_eq!(
            envelope.payload_fields,
            Some(vec!["status".to_owned(), "jobId".to_owned()])
        );
        let pending = json!({"messageId": "m", "status": "pending", "jobId": "j1"});
        assert!(!envelope.is_error(&pending));
        assert_eq!(envelope.payload(&pending)["status"], json!("pending"));
    }

    #[test]
    fn every_success_word_reads_as_a_success() {
        let status =
            StatusText::of("status", &json!({"enum": ["success", "ok", "error"]})).unwrap();
        assert_eq!(status.success, json!("success"));
        assert_eq!(status.successes, [json!("success"), json!("ok")]);
        assert_eq!(status.word_for(404), &json!("error"));
        let envelope = Envelope {
            code_at: None,
            status_text: Some(status),
            success_code: None,
            ..Envelope::seeds()
        };
        assert!(!envelope.is_error(&json!({"status": "ok"})));
        assert!(envelope.is_error(&json!({"status": "error"})));
        // Both of the issue's layouts are still the envelope's status.
        let issue = json!({"enum": ["ok", "invalid_request", "not_found", "error"]});
        assert_eq!(
            StatusText::of("status", &issue).unwrap().word_for(404),
            &json!("not_found")
        );
        // A word of neither kind keeps the field data.
        assert!(StatusText::of("status", &json!({"enum": ["ok", "error", "queued"]})).is_none());
    }

    #[test]
    fn a_required_error_nullable_by_any_of_is_the_error_object() {
        let response = json!({
            "properties": {
                "messageId": {"type": "string"},
                "status": {"enum": ["success", "error"]},
                "data": {},
                "error": {"anyOf": [
                    {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}},
                    {"type": "null"}
                ]}
            },
            "required": ["messageId", "status", "data", "error"]
        });
        let layout = status_layout(&response);
        assert_eq!(layout.error_field.as_deref(), Some("error"));
        assert_eq!(layout.code_at.as_deref(), Some("/error/code"));
        assert_eq!(layout.message_at.as_deref(), Some("/error/message"));
        let one_of = json!({"properties": {"error": {"oneOf": [{"type": "null"}, {"type": "string"}]}, "data": {}}, "required": ["error", "data"]});
        let layout = status_layout(&one_of);
        assert_eq!(layout.error_field.as_deref(), Some("error"));
        assert_eq!(layout.message_at.as_deref(), Some("/error"));
    }

    #[test]
    fn success_codes() {
        assert_eq!(success_code(&json!({"type": "integer"})), 200);
        assert_eq!(success_code(&json!({"const": 0})), 0);
        assert_eq!(
            success_code(&json!({"description": "0 表示成功，其他为错误"})),
            0
        );
    }

    #[test]
    fn pointers_unescape() {
        assert_eq!(segments("/a~1b/c~0d"), vec!["a/b", "c~d"]);
        assert!(segments("").is_empty());
        assert_eq!(escape("a/b~"), "a~1b~0");
    }
}
