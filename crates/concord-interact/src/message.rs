//! The W3C Web Thing Protocol message, as JSON.

use concord_text::TextPosition;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::problem::{Problem, ProblemType};
use crate::Limits;

/// `messageType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    /// Asks for an operation; carries a fresh `correlationID`.
    Request,
    /// Answers a request once, echoing its `correlationID`.
    Response,
    /// Anything further about a request (event, progress, property change), echoing its
    /// `correlationID`.
    Notification,
}

impl MessageType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Response => "response",
            Self::Notification => "notification",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Self::Request, Self::Response, Self::Notification]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// `operation`: the Thing Description operation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// `readproperty`.
    ReadProperty,
    /// `writeproperty`.
    WriteProperty,
    /// `observeproperty`: a response, then a notification per change.
    ObserveProperty,
    /// `unobserveproperty`.
    UnobserveProperty,
    /// `invokeaction`: a response, then for a long-running action notifications until a
    /// terminal status.
    InvokeAction,
    /// `queryaction`, by `actionID`.
    QueryAction,
    /// `cancelaction`, by `actionID`.
    CancelAction,
    /// `subscribeevent`: a response, then a notification per event.
    SubscribeEvent,
    /// `unsubscribeevent`.
    UnsubscribeEvent,
    /// `subscribeallevents`.
    SubscribeAllEvents,
    /// `unsubscribeallevents`.
    UnsubscribeAllEvents,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Self; 11] = [
        Self::ReadProperty,
        Self::WriteProperty,
        Self::ObserveProperty,
        Self::UnobserveProperty,
        Self::InvokeAction,
        Self::QueryAction,
        Self::CancelAction,
        Self::SubscribeEvent,
        Self::UnsubscribeEvent,
        Self::SubscribeAllEvents,
        Self::UnsubscribeAllEvents,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadProperty => "readproperty",
            Self::WriteProperty => "writeproperty",
            Self::ObserveProperty => "observeproperty",
            Self::UnobserveProperty => "unobserveproperty",
            Self::InvokeAction => "invokeaction",
            Self::QueryAction => "queryaction",
            Self::CancelAction => "cancelaction",
            Self::SubscribeEvent => "subscribeevent",
            Self::UnsubscribeEvent => "unsubscribeevent",
            Self::SubscribeAllEvents => "subscribeallevents",
            Self::UnsubscribeAllEvents => "unsubscribeallevents",
        }
    }

    /// The operation with this wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.as_str() == s)
    }

    /// Whether a request must name an affordance: all but the `*allevents` forms and
    /// `queryaction` / `cancelaction`, whose `actionID` names the action (a session that
    /// did not invoke it may not know its name).
    pub fn needs_name(self) -> bool {
        !matches!(
            self,
            Self::SubscribeAllEvents
                | Self::UnsubscribeAllEvents
                | Self::QueryAction
                | Self::CancelAction
        )
    }

    /// Whether a request must carry an `actionID` (`queryaction`, `cancelaction`).
    pub fn needs_action_id(self) -> bool {
        matches!(self, Self::QueryAction | Self::CancelAction)
    }
}

/// `status` of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionStatus {
    /// Accepted, not started.
    Pending,
    /// Under way; progress may follow.
    Running,
    /// Terminal: done, `output` holds the result.
    Completed,
    /// Terminal: `error` says why.
    Failed,
    /// Terminal: cancelled by the caller or because its lease ran out.
    Cancelled,
}

impl ActionStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Running,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }

    /// Whether nothing may follow it.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// One Web Thing Protocol message.
///
/// ```json
/// {"messageType": "notification", "operation": "invokeaction", "name": "getWeather",
///  "correlationID": "c-7", "actionID": "action-1", "status": "running", "progress": 0.5}
/// ```
///
/// Decoding ([`Message::decode`]) checks the size before parsing, the nesting depth, and
/// every field, naming the field in the error; members it does not know (`thingID`,
/// `messageID`, `timestamp`, …) are ignored. Encoding ([`Message::encode`]) checks the same
/// rules on our own messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Message {
    /// `messageType`.
    pub message_type: MessageType,
    /// `operation`.
    pub operation: Operation,
    /// `name`: the property, action or event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `correlationID`: chosen by the requester, echoed by every answer.
    #[serde(rename = "correlationID")]
    pub correlation_id: String,
    /// `actionID`: issued by the provider for a long-running action.
    #[serde(rename = "actionID", skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// `value`: a property value or an event's data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// `input`: an action's input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// `output`: an action's output, partial while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// `status`: an action's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ActionStatus>,
    /// `progress`: an action's progress, 0 to 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// `eventID`: the per-event sequence number of an event notification.
    #[serde(rename = "eventID", skip_serializing_if = "Option::is_none")]
    pub event_id: Option<u64>,
    /// `lastEventID`: the last event id a resuming subscriber saw.
    #[serde(rename = "lastEventID", skip_serializing_if = "Option::is_none")]
    pub last_event_id: Option<u64>,
    /// `error`: RFC 9457 problem details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
    /// `streamID`: the stream a stream action's request opens and its response names
    /// (our extension).
    #[serde(rename = "streamID", skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u32>,
}

/// A message that could not be decoded or breaks a field rule. Each variant names the
/// field (`error.status` for a member of the problem).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Larger than `Limits::max_message_size` (checked before parsing).
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The message's size in bytes.
        size: usize,
        /// `Limits::max_message_size`.
        limit: usize,
    },
    /// Not JSON (or nested past serde_json's recursion limit).
    #[error("invalid JSON: {message}")]
    Json {
        /// serde_json's message, with line and column.
        message: String,
        /// Where in the message (the column counted in characters), or `None` for an error
        /// that does not come from reading text.
        position: Option<TextPosition>,
    },
    /// Nested deeper than `Limits::max_depth`.
    #[error("message nests deeper than {limit} levels")]
    TooDeep {
        /// `Limits::max_depth`.
        limit: usize,
    },
    /// The JSON is not an object.
    #[error("message is not a JSON object")]
    NotAnObject,
    /// A required field is absent.
    #[error("{field}: required")]
    Missing {
        /// The field.
        field: &'static str,
    },
    /// A field has the wrong JSON type.
    #[error("{field}: expected {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// A string field with a value outside its enumeration.
    #[error("{field}: unknown value {value:?}")]
    UnknownValue {
        /// The field.
        field: &'static str,
        /// The value (its first 64 characters).
        value: String,
    },
    /// A string longer than its limit.
    #[error("{field}: {len} bytes exceeds the limit of {limit} bytes")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// An empty string where one is required.
    #[error("{field}: must not be empty")]
    Empty {
        /// The field.
        field: &'static str,
    },
    /// A number outside its range.
    #[error("{field}: {value} is outside {range}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value as text.
        value: String,
        /// The allowed range.
        range: &'static str,
    },
    /// A field that breaks another rule.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
}

impl MessageError {
    /// The problem to answer with ([`ProblemType::BadMessage`]).
    pub fn to_problem(&self) -> Problem {
        Problem::of(ProblemType::BadMessage, self.to_string())
    }
}

/// Checks a required text field: non-empty and at most `limit` bytes.
pub(crate) fn check_text(
    field: &'static str,
    text: &str,
    limit: usize,
) -> Result<(), MessageError> {
    if text.is_empty() {
        return Err(MessageError::Empty { field });
    }
    if text.len() > limit {
        return Err(MessageError::TooLong {
            field,
            len: text.len(),
            limit,
        });
    }
    Ok(())
}

/// The first 64 characters of a peer's string, for an error message.
pub(crate) fn shorten(s: &str) -> String {
    s.chars().take(64).collect()
}

pub(crate) fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn get_str<'a>(
    map: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a str>, MessageError> {
    match map.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(MessageError::WrongType {
            field,
            expected: "a string",
        }),
    }
}

fn get_u64(map: &Map<String, Value>, field: &'static str) -> Result<Option<u64>, MessageError> {
    match map.get(field) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(MessageError::WrongType {
            field,
            expected: "a non-negative integer",
        }),
    }
}

fn get_enum<T>(
    map: &Map<String, Value>,
    field: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, MessageError> {
    match get_str(map, field)? {
        None => Ok(None),
        Some(s) => parse(s)
            .map(Some)
            .ok_or_else(|| MessageError::UnknownValue {
                field,
                value: shorten(s),
            }),
    }
}

impl Message {
    /// A message with only its three required fields.
    pub fn new(
        message_type: MessageType,
        operation: Operation,
        correlation_id: impl Into<String>,
    ) -> Self {
        Self {
            message_type,
            operation,
            name: None,
            correlation_id: correlation_id.into(),
            action_id: None,
            value: None,
            input: None,
            output: None,
            status: None,
            progress: None,
            event_id: None,
            last_event_id: None,
            error: None,
            stream_id: None,
        }
    }

    /// A request.
    pub fn request(operation: Operation, correlation_id: impl Into<String>) -> Self {
        Self::new(MessageType::Request, operation, correlation_id)
    }

    /// A response to this request: same operation, `name`, `correlationID` and `actionID`.
    pub fn response(&self) -> Self {
        self.answer(MessageType::Response)
    }

    /// A notification about this request: same operation, `name`, `correlationID` and
    /// `actionID`.
    pub fn notification(&self) -> Self {
        self.answer(MessageType::Notification)
    }

    fn answer(&self, message_type: MessageType) -> Self {
        Self {
            name: self.name.clone(),
            action_id: self.action_id.clone(),
            ..Self::new(message_type, self.operation, self.correlation_id.clone())
        }
    }

    /// Sets `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets `actionID`.
    pub fn with_action_id(mut self, action_id: impl Into<String>) -> Self {
        self.action_id = Some(action_id.into());
        self
    }

    /// Sets `value`.
    pub fn with_value(mut self, value: Value) -> Self {
        self.value = Some(value);
        self
    }

    /// Sets `input`.
    pub fn with_input(mut self, input: Value) -> Self {
        self.input = Some(input);
        self
    }

    /// Sets `output`.
    pub fn with_output(mut self, output: Value) -> Self {
        self.output = Some(output);
        self
    }

    /// Sets `status`.
    pub fn with_status(mut self, status: ActionStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets `progress`.
    pub fn with_progress(mut self, progress: f64) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Sets `eventID`.
    pub fn with_event_id(mut self, event_id: u64) -> Self {
        self.event_id = Some(event_id);
        self
    }

    /// Sets `lastEventID`.
    pub fn with_last_event_id(mut self, last_event_id: u64) -> Self {
        self.last_event_id = Some(last_event_id);
        self
    }

    /// Sets `error`.
    pub fn with_error(mut self, error: Problem) -> Self {
        self.error = Some(error);
        self
    }

    /// Sets `streamID`.
    pub fn with_stream_id(mut self, stream_id: u32) -> Self {
        self.stream_id = Some(stream_id);
        self
    }

    /// Decodes a message: size, then JSON, then depth, then field by field.
    ///
    /// A valid message is decoded in one pass (`fast::decode`): only its members are
    /// parsed, no map of them is built, and unknown members are skipped with only their
    /// depth counted. Anything that pass does not accept is decoded again the long way,
    /// which accepts exactly the same messages and names what is wrong with the others.
    pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Self, MessageError> {
        if bytes.len() > limits.max_message_size {
            return Err(MessageError::TooLarge {
                size: bytes.len(),
                limit: limits.max_message_size,
            });
        }
        if let Some(message) = fast::decode(bytes, limits) {
            return Ok(message);
        }
        Self::decode_checked(bytes, limits)
    }

    /// Both decoders on the same bytes, for the differential fuzz target
    /// (`fuzz/fuzz_targets/interact_message_diff.rs`): what the one-pass decoder gives, and
    /// what the step-by-step one gives. The size check of [`Message::decode`] is not made.
    #[cfg(feature = "fuzzing")]
    #[doc(hidden)]
    pub fn decode_paths(
        bytes: &[u8],
        limits: &Limits,
    ) -> (Option<Self>, Result<Self, MessageError>) {
        (
            fast::decode(bytes, limits),
            Self::decode_checked(bytes, limits),
        )
    }

    /// Limits small enough for short messages to reach every limit check (depth, ids,
    /// names, problem texts): the differential fuzz target and its unit test decode under
    /// these as well as the default ones.
    #[cfg(any(test, feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn tight_limits() -> Limits {
        Limits {
            max_depth: 3,
            max_correlation_id: 8,
            max_action_id: 8,
            max_name: 8,
            max_problem_text: 16,
            ..Limits::default()
        }
    }

    /// [`Message::decode`] after the size check, step by step: JSON into a `Value`, the
    /// depth, then each field, naming the first that is wrong.
    fn decode_checked(bytes: &[u8], limits: &Limits) -> Result<Self, MessageError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| MessageError::Json {
            message: e.to_string(),
            position: TextPosition::of_json_error(bytes, &e),
        })?;
        if depth(&value) > limits.max_depth {
            return Err(MessageError::TooDeep {
                limit: limits.max_depth,
            });
        }
        let Value::Object(mut map) = value else {
            return Err(MessageError::NotAnObject);
        };
        let message_type =
            get_enum(&map, "messageType", MessageType::parse)?.ok_or(MessageError::Missing {
                field: "messageType",
            })?;
        let operation = get_enum(&map, "operation", Operation::parse)?
            .ok_or(MessageError::Missing { field: "operation" })?;
        let correlation_id = get_str(&map, "correlationID")?
            .ok_or(MessageError::Missing {
                field: "correlationID",
            })?
            .to_owned();
        let name = get_str(&map, "name")?.map(str::to_owned);
        let action_id = get_str(&map, "actionID")?.map(str::to_owned);
        let status = get_enum(&map, "status", ActionStatus::parse)?;
        let progress = match map.get("progress") {
            None => None,
            Some(v) => Some(v.as_f64().ok_or(MessageError::WrongType {
                field: "progress",
                expected: "a number",
            })?),
        };
        let event_id = get_u64(&map, "eventID")?;
        let last_event_id = get_u64(&map, "lastEventID")?;
        let stream_id = match get_u64(&map, "streamID")? {
            None => None,
            Some(id) => Some(u32::try_from(id).map_err(|_| MessageError::OutOfRange {
                field: "streamID",
                value: id.to_string(),
                range: "0..=4294967295",
            })?),
        };
        let error = match map.get("error") {
            None => None,
            Some(v) => Some(Problem::from_value(v, limits)?),
        };
        let message = Self {
            message_type,
            operation,
            name,
            correlation_id,
            action_id,
            value: map.remove("value"),
            input: map.remove("input"),
            output: map.remove("output"),
            status,
            progress,
            event_id,
            last_event_id,
            error,
            stream_id,
        };
        message.validate(limits)?;
        Ok(message)
    }

    /// Checks the field rules: `correlationID` non-empty and within its limit, `name`
    /// present where the operation needs one, `actionID` on `queryaction`/`cancelaction`
    /// requests, `progress` in 0..=1, the problem's fields.
    pub fn validate(&self, limits: &Limits) -> Result<(), MessageError> {
        check_text(
            "correlationID",
            &self.correlation_id,
            limits.max_correlation_id,
        )?;
        match &self.name {
            Some(name) => check_text("name", name, limits.max_name)?,
            None if self.message_type == MessageType::Request && self.operation.needs_name() => {
                return Err(MessageError::Missing { field: "name" })
            }
            None => {}
        }
        match &self.action_id {
            Some(id) => check_text("actionID", id, limits.max_action_id)?,
            None if self.message_type == MessageType::Request
                && self.operation.needs_action_id() =>
            {
                return Err(MessageError::Missing { field: "actionID" })
            }
            None => {}
        }
        if let Some(p) = self.progress {
            if !(0.0..=1.0).contains(&p) {
                return Err(MessageError::OutOfRange {
                    field: "progress",
                    value: p.to_string(),
                    range: "0..=1",
                });
            }
        }
        if let Some(problem) = &self.error {
            problem.validate(limits)?;
        }
        Ok(())
    }

    /// Encodes the message after [`Message::validate`]; refuses one larger than
    /// `Limits::max_message_size` or nested deeper than `Limits::max_depth`.
    pub fn encode(&self, limits: &Limits) -> Result<Vec<u8>, MessageError> {
        self.validate(limits)?;
        let too_deep = [&self.value, &self.input, &self.output]
            .into_iter()
            .flatten()
            .any(|v| 1 + depth(v) > limits.max_depth)
            || self.error.as_ref().is_some_and(|p| {
                p.extensions
                    .values()
                    .any(|v| 2 + depth(v) > limits.max_depth)
            });
        if too_deep {
            return Err(MessageError::TooDeep {
                limit: limits.max_depth,
            });
        }
        let bytes = serde_json::to_vec(self).map_err(|e| MessageError::Json {
            message: e.to_string(),
            position: None,
        })?;
        if bytes.len() > limits.max_message_size {
            return Err(MessageError::TooLarge {
                size: bytes.len(),
                limit: limits.max_message_size,
            });
        }
        Ok(bytes)
    }
}

/// The one-pass decoder behind [`Message::decode`]. It accepts a message only if the
/// step-by-step decoder would accept it and give the same `Message`; for anything else it
/// gives `None` and that decoder says what is wrong.
mod fast {
    use std::fmt;

    use serde::de::{
        self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
    };
    use serde::Deserialize;
    use serde_json::Value;

    use super::{depth, ActionStatus, Message, MessageType, Operation};
    use crate::problem::Problem;
    use crate::Limits;

    /// The members the message knows; `Other` is skipped (its depth still counts).
    enum Key {
        MessageType,
        Operation,
        Name,
        CorrelationId,
        ActionId,
        Value,
        Input,
        Output,
        Status,
        Progress,
        EventId,
        LastEventId,
        Error,
        StreamId,
        Other,
    }

    impl Key {
        fn of(name: &str) -> Self {
            match name {
                "messageType" => Self::MessageType,
                "operation" => Self::Operation,
                "name" => Self::Name,
                "correlationID" => Self::CorrelationId,
                "actionID" => Self::ActionId,
                "value" => Self::Value,
                "input" => Self::Input,
                "output" => Self::Output,
                "status" => Self::Status,
                "progress" => Self::Progress,
                "eventID" => Self::EventId,
                "lastEventID" => Self::LastEventId,
                "error" => Self::Error,
                "streamID" => Self::StreamId,
                _ => Self::Other,
            }
        }
    }

    impl<'de> Deserialize<'de> for Key {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct KeyVisitor;
            impl Visitor<'_> for KeyVisitor {
                type Value = Key;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a member name")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                    Ok(Key::of(v))
                }
            }
            deserializer.deserialize_str(KeyVisitor)
        }
    }

    /// The nesting depth of a member skipped without keeping it (as `message::depth`
    /// counts it: 0 for a scalar).
    struct Depth(usize);

    impl<'de> Deserialize<'de> for Depth {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct DepthVisitor;
            impl<'de> Visitor<'de> for DepthVisitor {
                type Value = Depth;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_bool<E: de::Error>(self, _: bool) -> Result<Depth, E> {
                    Ok(Depth(0))
                }
                fn visit_i64<E: de::Error>(self, _: i64) -> Result<Depth, E> {
                    Ok(Depth(0))
                }
                fn visit_u64<E: de::Error>(self, _: u64) -> Result<Depth, E> {
                    Ok(Depth(0))
                }
                fn visit_f64<E: de::Error>(self, _: f64) -> Result<Depth, E> {
                    Ok(Depth(0))
                }
                fn visit_str<E: de::Error>(self, _: &str) -> Result<Depth, E> {
                    Ok(Depth(0))
                }
                fn visit_unit<E: de::Error>(self) -> Result<Depth, E> {
                    Ok(Depth(0))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Depth, A::Error> {
                    let mut inner = 0;
                    while let Some(Depth(d)) = seq.next_element()? {
                        inner = inner.max(d);
                    }
                    Ok(Depth(1 + inner))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Depth, A::Error> {
                    let mut inner = 0;
                    while let Some((IgnoredAny, Depth(d))) = map.next_entry()? {
                        inner = inner.max(d);
                    }
                    Ok(Depth(1 + inner))
                }
            }
            deserializer.deserialize_any(DepthVisitor)
        }
    }

    /// The members as parsed (the last of a repeated name wins, as in a `Value` map),
    /// and the deepest member.
    #[derive(Default)]
    struct Members {
        message_type: Option<MessageType>,
        operation: Option<Operation>,
        name: Option<String>,
        correlation_id: Option<String>,
        action_id: Option<String>,
        value: Option<Value>,
        input: Option<Value>,
        output: Option<Value>,
        status: Option<ActionStatus>,
        progress: Option<Value>,
        event_id: Option<Value>,
        last_event_id: Option<Value>,
        error: Option<Value>,
        stream_id: Option<Value>,
        /// The deepest member's depth.
        depth: usize,
    }

    struct MembersSeed;

    impl<'de> DeserializeSeed<'de> for MembersSeed {
        type Value = Members;
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Members, D::Error> {
            deserializer.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for MembersSeed {
        type Value = Members;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
            let mut m = Members::default();
            while let Some(key) = map.next_key::<Key>()? {
                // A string member of the wrong type or value fails the pass.
                let slot = match key {
                    Key::MessageType => {
                        let Token(t) = map.next_value_seed(Token(MessageType::parse))?;
                        m.message_type = Some(t);
                        continue;
                    }
                    Key::Operation => {
                        let Token(t) = map.next_value_seed(Token(Operation::parse))?;
                        m.operation = Some(t);
                        continue;
                    }
                    Key::Status => {
                        let Token(t) = map.next_value_seed(Token(ActionStatus::parse))?;
                        m.status = Some(t);
                        continue;
                    }
                    Key::Name => {
                        m.name = Some(map.next_value()?);
                        continue;
                    }
                    Key::CorrelationId => {
                        m.correlation_id = Some(map.next_value()?);
                        continue;
                    }
                    Key::ActionId => {
                        m.action_id = Some(map.next_value()?);
                        continue;
                    }
                    Key::Value => &mut m.value,
                    Key::Input => &mut m.input,
                    Key::Output => &mut m.output,
                    Key::Progress => &mut m.progress,
                    Key::EventId => &mut m.event_id,
                    Key::LastEventId => &mut m.last_event_id,
                    Key::Error => &mut m.error,
                    Key::StreamId => &mut m.stream_id,
                    Key::Other => {
                        let Depth(d) = map.next_value()?;
                        m.depth = m.depth.max(d);
                        continue;
                    }
                };
                let value: Value = map.next_value()?;
                m.depth = m.depth.max(depth(&value));
                *slot = Some(value);
            }
            Ok(m)
        }
    }

    /// A string member parsed as one of its values (a seed giving `Token(value)`).
    struct Token<T>(T);

    impl<'de, T, F: Fn(&str) -> Option<T>> DeserializeSeed<'de> for Token<F> {
        type Value = Token<T>;
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Token<T>, D::Error> {
            deserializer.deserialize_str(self)
        }
    }

    impl<T, F: Fn(&str) -> Option<T>> Visitor<'_> for Token<F> {
        type Value = Token<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a known value")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Token<T>, E> {
            (self.0)(v)
                .map(Token)
                .ok_or_else(|| E::custom("unknown value"))
        }
    }

    fn number<T>(value: Option<Value>, get: impl Fn(&Value) -> Option<T>) -> Option<Option<T>> {
        match value {
            None => Some(None),
            Some(v) => get(&v).map(Some),
        }
    }

    /// The message, if it is valid; `None` otherwise (see the module).
    pub(super) fn decode(bytes: &[u8], limits: &Limits) -> Option<Message> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let m = MembersSeed.deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        if 1 + m.depth > limits.max_depth {
            return None;
        }
        let stream_id = match number(m.stream_id, Value::as_u64)? {
            None => None,
            Some(id) => Some(u32::try_from(id).ok()?),
        };
        let error = match &m.error {
            None => None,
            Some(v) => Some(Problem::from_value(v, limits).ok()?),
        };
        let message = Message {
            message_type: m.message_type?,
            operation: m.operation?,
            name: m.name,
            correlation_id: m.correlation_id?,
            action_id: m.action_id,
            value: m.value,
            input: m.input,
            output: m.output,
            status: m.status,
            progress: number(m.progress, Value::as_f64)?,
            event_id: number(m.event_id, Value::as_u64)?,
            last_event_id: number(m.last_event_id, Value::as_u64)?,
            error,
            stream_id,
        };
        message.validate(limits).is_ok().then_some(message)
    }
}

#[cfg(test)]
mod tests {
    //! The one-pass decoder against the step-by-step one: whenever it gives a message, the
    //! other accepts the same bytes and gives the same message (the promise of `fast`;
    //! `fuzz/fuzz_targets/interact_message_diff.rs` checks it on arbitrary bytes).

    use proptest::prelude::*;

    use super::{fast, Message};
    use crate::Limits;

    /// Both decoders on `bytes` under both limits; `Err` says how they disagree. Returns
    /// whether the one-pass decoder accepted it under the default limits.
    fn agree(bytes: &[u8]) -> Result<bool, String> {
        let mut accepted = false;
        for (i, limits) in [Limits::default(), Message::tight_limits()]
            .iter()
            .enumerate()
        {
            let Some(fast) = fast::decode(bytes, limits) else {
                continue;
            };
            accepted |= i == 0;
            match Message::decode_checked(bytes, limits) {
                Ok(checked) if checked == fast => {}
                Ok(checked) => return Err(format!("fast {fast:?}, checked {checked:?}")),
                Err(error) => return Err(format!("fast {fast:?}, checked refuses: {error}")),
            }
        }
        Ok(accepted)
    }

    /// The seed corpus of the fuzz target (`fuzz/corpus/interact_message_diff/seed_*`),
    /// and a few more.
    const SEEDS: &[&[u8]] = &[
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_01_request_invoke"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_02_response_unknown_members"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_03_notification_progress"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_04_progress_float_one"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_05_progress_int_one"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_06_error_problem"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_07_deep_unknown_bigint"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_08_duplicate_keys"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_09_escapes"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_10_stream_id_max"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_11_stream_id_over"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_12_big_numbers"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_13_negative_stream_lone_surrogate"),
        include_bytes!("../../../fuzz/corpus/interact_message_diff/seed_14_stream_id_float"),
        br#"{"messageType":"request","operation":"subscribeallevents","correlationID":"z","x":{"k":1,"k":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}"#,
        br#"{"messageType":"request","messageType":"nonsense","operation":"readproperty","name":"a","correlationID":"c"}"#,
        br#"{"messageType":"nonsense","messageType":"request","operation":"readproperty","name":"a","correlationID":"c"}"#,
        br#"{"messageType":"response","operation":"readproperty","name":"a","correlationID":"c","error":{"status":99},"error":{"title":"ok"}}"#,
        br#"{"messageType":"response","operation":"readproperty","correlationID":"c","progress":1.0000000000000002}"#,
        br#"[{"messageType":"request"}]"#,
    ];

    #[test]
    fn the_decoders_agree_on_the_seeds() {
        let mut accepted = 0;
        for seed in SEEDS {
            accepted += usize::from(
                agree(seed).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(seed))),
            );
        }
        // The seeds reach the one-pass decoder's acceptance, not only its refusals.
        assert!(accepted >= 8, "{accepted} seeds accepted");
    }

    /// Every seed with one byte removed, and with the bytes of a few JSON tokens put in at
    /// each position.
    #[test]
    fn the_decoders_agree_on_seed_mutations() {
        for bytes in SEEDS {
            let seed = String::from_utf8_lossy(bytes);
            for at in 0..bytes.len() {
                let mut cut = bytes.to_vec();
                cut.remove(at);
                agree(&cut).unwrap_or_else(|e| panic!("{seed} without byte {at}: {e}"));
                for token in [&b"\""[..], b",", b"}", b"1", b"\\"] {
                    let mut put = bytes.to_vec();
                    put.splice(at..at, token.iter().copied());
                    agree(&put).unwrap_or_else(|e| panic!("{seed} with {token:?} at {at}: {e}"));
                }
            }
        }
    }

    /// A member name: mostly the ones the message knows.
    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "messageType",
            "operation",
            "name",
            "correlationID",
            "actionID",
            "value",
            "input",
            "output",
            "status",
            "progress",
            "eventID",
            "lastEventID",
            "error",
            "streamID",
            "thingID",
            "messag\\u0065Type",
            "stream\\u0049D",
        ])
        .prop_map(str::to_owned)
    }

    /// A member value, as JSON text: the values the fields take, their edges, wrong types,
    /// problems, nesting.
    fn value() -> impl Strategy<Value = String> {
        let scalar = prop::sample::select(vec![
            "\"request\"",
            "\"response\"",
            "\"notification\"",
            "\"readproperty\"",
            "\"invokeaction\"",
            "\"queryaction\"",
            "\"subscribeallevents\"",
            "\"running\"",
            "\"completed\"",
            "\"Request\"",
            "\"\"",
            "\"a\"",
            "\"abcdefghi\"",
            "\"\\u0061\"",
            "\"\\ud83d\\ude00\"",
            "0",
            "1",
            "1.0",
            "0.5",
            "-0.0",
            "-1",
            "1e-400",
            "1.0000000000000002",
            "4294967295",
            "4294967296",
            "18446744073709551615",
            "18446744073709551616",
            "1e308",
            "null",
            "true",
            "{}",
            "[]",
            "{\"status\":404,\"title\":\"x\"}",
            "{\"status\":99}",
            "{\"type\":\"\",\"detail\":\"abcdefghijklmnopq\"}",
            "{\"title\":\"x\",\"ext\":[[1]]}",
        ])
        .prop_map(str::to_owned);
        prop_oneof![
            4 => scalar,
            1 => (0usize..6, prop::bool::ANY).prop_map(|(depth, object)| {
                let (open, close) = if object { ("{\"k\":", "}") } else { ("[", "]") };
                format!("{}1{}", open.repeat(depth), close.repeat(depth))
            }),
        ]
    }

    /// A message: usually its required members first, then random members (repeated
    /// names included).
    fn message() -> impl Strategy<Value = String> {
        let base = prop::sample::select(vec![
            "",
            r#""messageType":"request","operation":"readproperty","name":"t","correlationID":"c""#,
            r#""messageType":"response","operation":"invokeaction","name":"a","correlationID":"c""#,
            r#""messageType":"notification","operation":"invokeaction","correlationID":"c","actionID":"x""#,
        ]);
        (base, prop::collection::vec((key(), value()), 0..6)).prop_map(|(base, members)| {
            let mut parts: Vec<String> = Vec::new();
            if !base.is_empty() {
                parts.push(base.to_owned());
            }
            parts.extend(members.iter().map(|(k, v)| format!("\"{k}\":{v}")));
            format!("{{{}}}", parts.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn the_decoders_agree_on_generated_messages(text in message()) {
            prop_assert!(agree(text.as_bytes()).is_ok(), "{text}: {:?}", agree(text.as_bytes()));
        }
    }
}
