//! Context messages and the JSON shapes users write them in.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::expression::{ExpressionError, Reference};
use crate::identity::{Identity, InstanceId, Kind, NameError};
use crate::merge::{json_type, OutputMethod, UnknownOutputMethod};
use crate::peer::{PeerLabel, PeerText};

/// Keys of a data message that are engine metadata: never rendered for the
/// LLM, neither on the message nor anywhere inside rendered data.
pub const HIDDEN_KEYS: [&str; 5] = [
    "_instance",
    "_outputPath",
    "_outputMethod",
    "_call",
    "_date",
];

/// Who speaks a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// The user turn; data blocks and peer text are rendered in this role.
    User,
    /// The model's own earlier turns.
    Assistant,
}

impl Role {
    /// The OpenAI role name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = ContextMessageError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "system" => Ok(Self::System),
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            other => Err(ContextMessageError::UnknownRole(other.to_owned())),
        }
    }
}

/// A message passed to the LLM unchanged: `{type: "text", text, role?}`.
///
/// `role` defaults to `user`, as in the seed. Text messages are written by the
/// application and trusted; text from a peer goes in a [`PeerText`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextMessage {
    /// Who speaks it.
    pub role: Role,
    /// The text.
    pub text: String,
}

impl TextMessage {
    /// A `user` text message.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            text: text.into(),
        }
    }
}

/// A persistent, structured context message: `{type: "data", data, kind?,
/// schema?, description?, _instance?, _outputPath?, _outputMethod?, _call?, _date?}`.
///
/// Messages with the same [`Identity`] (kind and instance) merge, oldest to
/// newest; see [`OutputMethod`] for how each one combines.
///
/// ```
/// use concord_context::{DataMessage, Kind, OutputMethod, Reference};
/// use serde_json::json;
///
/// let patch = DataMessage::new(Kind::state(), json!({"step": 2}));
/// assert_eq!(patch.method(), OutputMethod::Merge);
///
/// let output = DataMessage::new(Kind::state(), json!("done"))
///     .with_output_path("†state.summary".parse()?)?;
/// assert_eq!(output.method(), OutputMethod::Set);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DataMessage {
    kind: Kind,
    data: Value,
    schema: Option<Value>,
    description: Option<String>,
    instance: Option<InstanceId>,
    output_path: Option<Reference>,
    output_method: Option<OutputMethod>,
    call: Option<Value>,
    date: Option<String>,
}

impl DataMessage {
    /// A global data message of `kind` carrying `data`.
    pub fn new(kind: Kind, data: Value) -> Self {
        Self {
            kind,
            data,
            schema: None,
            description: None,
            instance: None,
            output_path: None,
            output_method: None,
            call: None,
            date: None,
        }
    }

    /// Adds the JSON Schema describing this kind's data (the newest one of an identity applies).
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Adds the description shown under the data (the newest one of an identity applies).
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Scopes the message to one instance (`_instance`).
    pub fn with_instance(mut self, instance: InstanceId) -> Self {
        self.instance = Some(instance);
        self
    }

    /// Writes `data` at `path` (`_outputPath`) instead of at the root.
    ///
    /// Fails if the path reads another kind than this message's.
    pub fn with_output_path(mut self, path: Reference) -> Result<Self, ContextMessageError> {
        if path.kind() != &self.kind {
            return Err(ContextMessageError::KindMismatch {
                kind: self.kind,
                path_kind: path.kind().clone(),
            });
        }
        self.output_path = Some(path);
        Ok(self)
    }

    /// Sets `_outputMethod`. Fails for `concat` unless `data` is an array.
    pub fn with_method(mut self, method: OutputMethod) -> Result<Self, ContextMessageError> {
        if method == OutputMethod::Concat && !self.data.is_array() {
            return Err(ContextMessageError::ConcatNeedsArray {
                found: json_type(&self.data),
            });
        }
        self.output_method = Some(method);
        Ok(self)
    }

    /// Records the tool call that produced this output (`_call`).
    pub fn with_call(mut self, call: Value) -> Self {
        self.call = Some(call);
        self
    }

    /// Records when this output was written (`_date`, an ISO 8601 timestamp the caller supplies).
    pub fn with_date(mut self, date: impl Into<String>) -> Self {
        self.date = Some(date.into());
        self
    }

    /// The kind.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The payload.
    pub fn data(&self) -> &Value {
        &self.data
    }

    /// The JSON Schema, if any.
    pub fn schema(&self) -> Option<&Value> {
        self.schema.as_ref()
    }

    /// The description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The instance, or `None` for a global message.
    pub fn instance(&self) -> Option<&InstanceId> {
        self.instance.as_ref()
    }

    /// Kind and instance: what this message merges with.
    pub fn identity(&self) -> Identity {
        Identity {
            kind: self.kind.clone(),
            instance: self.instance.clone(),
        }
    }

    /// Where `data` is written (`_outputPath`), if not at the root.
    pub fn output_path(&self) -> Option<&Reference> {
        self.output_path.as_ref()
    }

    /// The segments `data` is written at; empty for the root.
    pub(crate) fn write_path(&self) -> &[String] {
        self.output_path.as_ref().map_or(&[], Reference::path)
    }

    /// How `data` combines with older messages: `_outputMethod`, or its default
    /// (`merge` without `_outputPath`, `set` with one).
    pub fn method(&self) -> OutputMethod {
        self.output_method.unwrap_or(if self.output_path.is_some() {
            OutputMethod::Set
        } else {
            OutputMethod::Merge
        })
    }

    /// The tool call that produced this output, if recorded.
    pub fn call(&self) -> Option<&Value> {
        self.call.as_ref()
    }

    /// When this output was written, if recorded.
    pub fn date(&self) -> Option<&str> {
        self.date.as_deref()
    }
}

/// One entry of a context.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Passed to the LLM as is.
    Text(TextMessage),
    /// Merged with its identity and rendered as a data block (boxed: it is
    /// much larger than the other variants).
    Data(Box<DataMessage>),
    /// Untrusted text, rendered fenced and labelled.
    Peer(PeerText),
}

impl From<TextMessage> for Message {
    fn from(message: TextMessage) -> Self {
        Self::Text(message)
    }
}

impl From<DataMessage> for Message {
    fn from(message: DataMessage) -> Self {
        Self::Data(Box::new(message))
    }
}

impl From<PeerText> for Message {
    fn from(message: PeerText) -> Self {
        Self::Peer(message)
    }
}

/// Why a JSON value is not a message. Field names are the JSON keys.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ContextMessageError {
    /// The message is not a JSON object.
    #[error("a message must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// No `type` key.
    #[error("message has no `type` (expected text, data, input, state or peer)")]
    MissingType,
    /// A `type` this crate does not know.
    #[error("unknown message type `{0}` (expected text, data, input, state or peer)")]
    UnknownType(String),
    /// A required key is absent.
    #[error("{message_type} message has no `{field}`")]
    MissingField {
        /// The message type.
        message_type: &'static str,
        /// The missing key.
        field: &'static str,
    },
    /// A key holds the wrong JSON type.
    #[error("`{field}` must be {expected}, found {found}")]
    WrongType {
        /// The key.
        field: &'static str,
        /// What it must hold.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A key this message type does not have (often a misspelling, such as `_instnace`).
    #[error("{message_type} message has unknown field `{field}`")]
    UnknownField {
        /// The message type.
        message_type: &'static str,
        /// The key.
        field: String,
    },
    /// `kind`, `_instance` or `peer` is not a valid name.
    #[error("`{field}`: {cause}")]
    BadName {
        /// The key.
        field: &'static str,
        /// Why the name is invalid.
        cause: NameError,
    },
    /// `role` is not `system`, `user` or `assistant`.
    #[error("unknown role `{0}` (expected system, user or assistant)")]
    UnknownRole(String),
    /// `_outputPath` is not a single variable reference.
    #[error("`_outputPath`: {0}")]
    BadOutputPath(ExpressionError),
    /// `kind` and the kind in `_outputPath` differ.
    #[error("`kind` is `{kind}` but `_outputPath` writes to kind `{path_kind}`")]
    KindMismatch {
        /// The message's kind.
        kind: Kind,
        /// The kind the path writes to.
        path_kind: Kind,
    },
    /// `_outputMethod` is not a method name.
    #[error("`_outputMethod`: {0}")]
    BadMethod(UnknownOutputMethod),
    /// `_outputMethod: "concat"` with data that is not an array.
    #[error("`concat` appends an array, but `data` is {found}")]
    ConcatNeedsArray {
        /// The JSON type of `data`.
        found: &'static str,
    },
    /// An `input`/`state` message with both the nested payload key and flattened fields.
    #[error("{message_type} message mixes the nested `{message_type}` payload with the flattened field `{field}`")]
    MixedForms {
        /// `input` or `state`.
        message_type: &'static str,
        /// The flattened key.
        field: String,
    },
    /// An `input`/`state` message whose `kind` names another kind.
    #[error("`{message_type}` messages have kind `{message_type}`, not `{kind}`")]
    ShorthandKind {
        /// `input` or `state`.
        message_type: &'static str,
        /// The kind written.
        kind: String,
    },
}

/// Message types whose payload can be nested under their own name or flattened.
const SHORTHAND_TYPES: [&str; 2] = [Kind::INPUT, Kind::STATE];

impl Message {
    /// Reads a message from the JSON shapes users write:
    ///
    /// - `{type: "text", text, role?}`;
    /// - `{type: "data", data, kind?, schema?, description?, _instance?,
    ///   _outputPath?, _outputMethod?, _call?, _date?}`;
    /// - `{type: "input", input: {…}, schema?, description?, _instance?}`, or
    ///   flattened: `{type: "input", userName: "Jane", _instance: "①"}`, where
    ///   every key other than `type`, `kind`, `schema`, `description` and the
    ///   `_`-keys is a field of the data. Both read as a data message of kind
    ///   `input`. `type: "state"` works the same way for kind `state`;
    /// - `{type: "peer", peer, text}`: untrusted text from a peer.
    ///
    /// Unknown keys are errors (so that a misspelt `_instance` cannot silently
    /// make a message global), except as data fields of a flattened message.
    pub fn from_value(value: Value) -> Result<Self, ContextMessageError> {
        let mut map = match value {
            Value::Object(map) => map,
            other => {
                return Err(ContextMessageError::NotAnObject {
                    found: json_type(&other),
                })
            }
        };
        let message_type = match map.remove("type") {
            None => return Err(ContextMessageError::MissingType),
            Some(Value::String(name)) => name,
            Some(other) => return Err(wrong_type("type", "a string", &other)),
        };
        match message_type.as_str() {
            "text" => text_from_map(map).map(Self::Text),
            "data" => data_from_map(map).map(Self::from),
            "peer" => peer_from_map(map).map(Self::Peer),
            name => match SHORTHAND_TYPES.iter().find(|&&t| t == name) {
                Some(shorthand) => shorthand_from_map(shorthand, map).map(Self::from),
                None => Err(ContextMessageError::UnknownType(message_type)),
            },
        }
    }

    /// The canonical JSON of this message; [`Message::from_value`] reads it back
    /// to an equal message. Data messages are written as `type: "data"` with
    /// an explicit `kind`, whatever spelling they were read from.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        match self {
            Self::Text(message) => {
                map.insert("type".into(), "text".into());
                if message.role != Role::User {
                    map.insert("role".into(), message.role.as_str().into());
                }
                map.insert("text".into(), message.text.clone().into());
            }
            Self::Data(message) => {
                map.insert("type".into(), "data".into());
                map.insert("kind".into(), message.kind.as_str().into());
                if let Some(description) = &message.description {
                    map.insert("description".into(), description.clone().into());
                }
                map.insert("data".into(), message.data.clone());
                if let Some(schema) = &message.schema {
                    map.insert("schema".into(), schema.clone());
                }
                if let Some(instance) = &message.instance {
                    map.insert("_instance".into(), instance.as_str().into());
                }
                if let Some(path) = &message.output_path {
                    map.insert("_outputPath".into(), path.to_string().into());
                }
                if let Some(method) = message.output_method {
                    map.insert("_outputMethod".into(), method.as_str().into());
                }
                if let Some(call) = &message.call {
                    map.insert("_call".into(), call.clone());
                }
                if let Some(date) = &message.date {
                    map.insert("_date".into(), date.clone().into());
                }
            }
            Self::Peer(message) => {
                map.insert("type".into(), "peer".into());
                map.insert("peer".into(), message.peer().as_str().into());
                map.insert("text".into(), message.text().into());
            }
        }
        Value::Object(map)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

fn wrong_type(field: &'static str, expected: &'static str, found: &Value) -> ContextMessageError {
    ContextMessageError::WrongType {
        field,
        expected,
        found: json_type(found),
    }
}

fn take_string(
    map: &mut Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, ContextMessageError> {
    match map.remove(field) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(wrong_type(field, "a string", &other)),
    }
}

fn reject_leftovers(
    message_type: &'static str,
    map: Map<String, Value>,
) -> Result<(), ContextMessageError> {
    match map.into_iter().next() {
        None => Ok(()),
        Some((field, _)) => Err(ContextMessageError::UnknownField {
            message_type,
            field,
        }),
    }
}

fn text_from_map(mut map: Map<String, Value>) -> Result<TextMessage, ContextMessageError> {
    let text = take_string(&mut map, "text")?.ok_or(ContextMessageError::MissingField {
        message_type: "text",
        field: "text",
    })?;
    let role = match take_string(&mut map, "role")? {
        None => Role::User,
        Some(name) => name.parse()?,
    };
    reject_leftovers("text", map)?;
    Ok(TextMessage { role, text })
}

fn peer_from_map(mut map: Map<String, Value>) -> Result<PeerText, ContextMessageError> {
    let peer = take_string(&mut map, "peer")?.ok_or(ContextMessageError::MissingField {
        message_type: "peer",
        field: "peer",
    })?;
    let peer = PeerLabel::new(&peer).map_err(|cause| ContextMessageError::BadName {
        field: "peer",
        cause,
    })?;
    let text = take_string(&mut map, "text")?.ok_or(ContextMessageError::MissingField {
        message_type: "peer",
        field: "text",
    })?;
    reject_leftovers("peer", map)?;
    Ok(PeerText::new(peer, text))
}

/// The keys every data message may carry besides its payload.
struct Meta {
    kind: Option<String>,
    schema: Option<Value>,
    description: Option<String>,
    instance: Option<InstanceId>,
    output_path: Option<Reference>,
    output_method: Option<OutputMethod>,
    call: Option<Value>,
    date: Option<String>,
}

fn take_meta(map: &mut Map<String, Value>) -> Result<Meta, ContextMessageError> {
    let kind = take_string(map, "kind")?;
    let schema = match map.remove("schema") {
        None => None,
        Some(schema @ (Value::Object(_) | Value::Bool(_))) => Some(schema),
        Some(other) => {
            return Err(wrong_type(
                "schema",
                "a JSON Schema (an object or a boolean)",
                &other,
            ))
        }
    };
    let description = take_string(map, "description")?;
    let instance = take_string(map, "_instance")?
        .map(|id| {
            InstanceId::new(&id).map_err(|cause| ContextMessageError::BadName {
                field: "_instance",
                cause,
            })
        })
        .transpose()?;
    let output_path = take_string(map, "_outputPath")?
        .map(|text| Reference::parse(&text).map_err(ContextMessageError::BadOutputPath))
        .transpose()?;
    let output_method = take_string(map, "_outputMethod")?
        .map(|name| name.parse().map_err(ContextMessageError::BadMethod))
        .transpose()?;
    let call = map.remove("_call");
    let date = take_string(map, "_date")?;
    Ok(Meta {
        kind,
        schema,
        description,
        instance,
        output_path,
        output_method,
        call,
        date,
    })
}

fn build(kind: Kind, data: Value, meta: Meta) -> Result<DataMessage, ContextMessageError> {
    let mut message = DataMessage::new(kind, data);
    message.schema = meta.schema;
    message.description = meta.description;
    message.instance = meta.instance;
    message.call = meta.call;
    message.date = meta.date;
    if let Some(path) = meta.output_path {
        message = message.with_output_path(path)?;
    }
    if let Some(method) = meta.output_method {
        message = message.with_method(method)?;
    }
    Ok(message)
}

fn data_from_map(mut map: Map<String, Value>) -> Result<DataMessage, ContextMessageError> {
    let meta = take_meta(&mut map)?;
    let data = map
        .remove("data")
        .ok_or(ContextMessageError::MissingField {
            message_type: "data",
            field: "data",
        })?;
    reject_leftovers("data", map)?;
    let kind = match (&meta.kind, &meta.output_path) {
        (Some(name), _) => Kind::new(name).map_err(|cause| ContextMessageError::BadName {
            field: "kind",
            cause,
        })?,
        (None, Some(path)) => path.kind().clone(),
        (None, None) => Kind::data(),
    };
    build(kind, data, meta)
}

fn shorthand_from_map(
    message_type: &'static str,
    mut map: Map<String, Value>,
) -> Result<DataMessage, ContextMessageError> {
    let meta = take_meta(&mut map)?;
    if let Some(kind) = &meta.kind {
        if kind != message_type {
            return Err(ContextMessageError::ShorthandKind {
                message_type,
                kind: kind.clone(),
            });
        }
    }
    let data = match map.remove(message_type) {
        Some(nested) => {
            if let Some((field, _)) = map.into_iter().next() {
                return Err(ContextMessageError::MixedForms {
                    message_type,
                    field,
                });
            }
            nested
        }
        None => {
            if let Some(field) = map.keys().find(|key| key.starts_with('_')) {
                return Err(ContextMessageError::UnknownField {
                    message_type,
                    field: field.clone(),
                });
            }
            Value::Object(map)
        }
    };
    let kind = Kind::new(message_type).map_err(|cause| ContextMessageError::BadName {
        field: "type",
        cause,
    })?;
    build(kind, data, meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<Message, ContextMessageError> {
        Message::from_value(value)
    }

    #[test]
    fn input_spellings_normalise_to_one_model() {
        let nested =
            parse(json!({"type": "input", "input": {"userName": "Jane"}, "_instance": "①"}))
                .unwrap();
        let flat = parse(json!({"type": "input", "userName": "Jane", "_instance": "①"})).unwrap();
        let generic = parse(json!({"type": "data", "kind": "input", "data": {"userName": "Jane"}, "_instance": "①"})).unwrap();
        assert_eq!(nested, flat);
        assert_eq!(nested, generic);
        let Message::Data(data) = nested else {
            panic!("not data")
        };
        assert!(data.kind().is_input());
        assert_eq!(data.instance().unwrap().as_str(), "①");
        let state =
            parse(json!({"type": "state", "_instance": "employee_A", "task": "Draft"})).unwrap();
        assert_eq!(
            state,
            Message::from(
                DataMessage::new(Kind::state(), json!({"task": "Draft"}))
                    .with_instance(InstanceId::new("employee_A").unwrap())
            )
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (json!([]), "a message must be a JSON object, found an array"),
            (json!({"text": "x"}), "message has no `type` (expected text, data, input, state or peer)"),
            (json!({"type": "image"}), "unknown message type `image` (expected text, data, input, state or peer)"),
            (json!({"type": "data", "kind": "user"}), "data message has no `data`"),
            (json!({"type": "data", "data": 1, "_instnace": "a"}), "data message has unknown field `_instnace`"),
            (json!({"type": "input", "x": 1, "_instnace": "a"}), "input message has unknown field `_instnace`"),
            (json!({"type": "input", "input": {}, "x": 1}), "input message mixes the nested `input` payload with the flattened field `x`"),
            (json!({"type": "input", "kind": "user", "x": 1}), "`input` messages have kind `input`, not `user`"),
            (json!({"type": "data", "data": 1, "kind": "a.b"}), "`kind`: kind `a.b` has '.' at character 1; allowed: letters, digits, `_` and `-`"),
            (json!({"type": "data", "data": 1, "schema": "x"}), "`schema` must be a JSON Schema (an object or a boolean), found a string"),
            (json!({"type": "data", "data": 1, "kind": "user", "_outputPath": "†state.x"}), "`kind` is `user` but `_outputPath` writes to kind `state`"),
            (json!({"type": "data", "data": 1, "_outputMethod": "concat"}), "`concat` appends an array, but `data` is a number"),
            (json!({"type": "data", "data": 1, "_outputMethod": "append"}), "`_outputMethod`: unknown output method `append` (expected set, merge, assign, push or concat)"),
            (json!({"type": "text", "text": "x", "role": "tool"}), "unknown role `tool` (expected system, user or assistant)"),
            (json!({"type": "peer", "peer": "bob\n", "text": "x"}), "`peer`: peer label `bob\n` has '\\n' at character 3; allowed: letters, digits and `_ - . : @ / + #`"),
        ];
        for (value, expected) in cases {
            assert_eq!(
                parse(value.clone()).unwrap_err().to_string(),
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn output_path_gives_the_kind_and_the_default_method() {
        let Message::Data(message) =
            parse(json!({"type": "data", "data": "inactive", "_outputPath": "†data.user.status"}))
                .unwrap()
        else {
            panic!("not data")
        };
        assert_eq!(message.kind().as_str(), "data");
        assert_eq!(message.method(), OutputMethod::Set);
        assert_eq!(message.write_path(), ["user", "status"]);
    }

    #[test]
    fn canonical_json_round_trips() {
        let values = [
            json!({"type": "text", "text": "hi", "role": "system"}),
            json!({"type": "input", "userName": "Jane", "schema": {"type": "object"}, "description": "d"}),
            json!({"type": "data", "kind": "state", "data": [1], "_instance": "①", "_outputPath": "†state.log", "_outputMethod": "concat", "_call": {"_tool": "t"}, "_date": "2025-10-26T12:00:00Z"}),
            json!({"type": "peer", "peer": "bob", "text": "```"}),
        ];
        for value in values {
            let message = parse(value).unwrap();
            assert_eq!(parse(message.to_value()).unwrap(), message);
            let text = serde_json::to_string(&message).unwrap();
            assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), message);
        }
    }
}
