//! The message layer: header, instruction set, error replies, negotiation, streams, signatures.

mod negotiate;
mod schema;
mod stream;

use serde::{Deserialize, Serialize};

use crate::de::{locate_top_level_key, Mode, ParseOptions};
use crate::error::{Error, ErrorCode, ErrorKind, Position, Result};
use crate::value::{Map, Value};

pub use negotiate::select_version;
pub use schema::MsgType;
pub use stream::StreamChunk;

/// The `protocol` every LightAICL v1.0 message carries.
pub const PROTOCOL: &str = "LightAICL";

/// The header fields, in the order a message starts with them.
const HEADER: [&str; 3] = ["protocol", "session_id", "msg_type"];

/// An AICL message: a dictionary whose first entries are the header
/// (`protocol`, `session_id`, `msg_type`), then the instruction's fields.
///
/// A `Message` obtained by parsing or [`Message::from_value`] has a valid header, the fields
/// its `msg_type` requires with the types the whitepaper gives them, and consistent stream
/// fields. The constructors ([`Message::tool_call`], …) take the required fields; [`Message::with`]
/// adds others, and [`Message::validate`] checks a message built by hand.
///
/// ```
/// use concord_aicl::{Map, Message, MsgType, Value};
///
/// let mut params = Map::new();
/// params.insert("target_url".into(), Value::from("https://example.com"));
/// let call = Message::tool_call("auto_web_05", "web_scraper", params).with("timeout", 30);
/// let text = call.to_text();
/// assert!(text.starts_with("[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:auto_web_05],[s:msg_type]:[s:tool_call]"));
///
/// let received = Message::parse(&text)?;
/// assert_eq!(received.msg_type(), MsgType::ToolCall);
/// assert_eq!(received.get("tool").and_then(Value::as_str), Some("web_scraper"));
/// # Ok::<(), concord_aicl::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    fields: Map,
}

/// The fields of an `error` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorInfo<'a> {
    /// `code`.
    pub code: ErrorCode,
    /// `reason`.
    pub reason: &'a str,
    /// `detail`, when present.
    pub detail: Option<&'a str>,
}

impl Message {
    /// A message with just the header; add fields with [`Message::with`].
    pub fn new(session_id: impl Into<String>, msg_type: MsgType) -> Message {
        let mut fields = Map::with_capacity(6);
        fields.insert(HEADER[0].to_owned(), Value::from(PROTOCOL));
        fields.insert(HEADER[1].to_owned(), Value::String(session_id.into()));
        fields.insert(
            HEADER[2].to_owned(),
            Value::from(msg_type.as_str().to_owned()),
        );
        Message { fields }
    }

    /// `task_request` with its required `task` and `constraints`.
    pub fn task_request(
        session_id: impl Into<String>,
        task: impl Into<String>,
        constraints: Map,
    ) -> Message {
        Message::new(session_id, MsgType::TaskRequest)
            .with("task", task.into())
            .with("constraints", constraints)
    }

    /// `data_query` with its required `query`.
    pub fn data_query(session_id: impl Into<String>, query: impl Into<Value>) -> Message {
        Message::new(session_id, MsgType::DataQuery).with("query", query)
    }

    /// `tool_call` with its required `tool` and `params`.
    pub fn tool_call(
        session_id: impl Into<String>,
        tool: impl Into<String>,
        params: Map,
    ) -> Message {
        Message::new(session_id, MsgType::ToolCall)
            .with("tool", tool.into())
            .with("params", params)
    }

    /// `result` carrying `data` (use [`Message::new`] with `content` for the other form).
    pub fn result(session_id: impl Into<String>, data: impl Into<Value>) -> Message {
        Message::new(session_id, MsgType::Result).with("data", data)
    }

    /// `error` with its required `code` and `reason`; add `detail` with [`Message::with`].
    pub fn error(
        session_id: impl Into<String>,
        code: ErrorCode,
        reason: impl Into<String>,
    ) -> Message {
        Message::new(session_id, MsgType::Error)
            .with("code", code.code())
            .with("reason", reason.into())
    }

    /// The `error` message answering `error`: its code, the code's name as the reason, and the
    /// error with its position as the detail.
    ///
    /// ```
    /// use concord_aicl::{Message, ErrorCode};
    ///
    /// let error = Message::parse("[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:tool_call],[s:tool]:[s:x]]").unwrap_err();
    /// let reply = Message::error_reply("s1", &error);
    /// let info = reply.error_info().unwrap();
    /// assert_eq!(info.code, ErrorCode::MissingField);
    /// assert_eq!(info.reason, "MISSING_FIELD");
    /// assert_eq!(info.detail, Some("field `params` is required in tool_call at line 1, column 1 (byte 0)"));
    /// ```
    pub fn error_reply(session_id: impl Into<String>, error: &Error) -> Message {
        let code = error.code();
        Message::error(session_id, code, code.name()).with("detail", error.to_string())
    }

    /// `protocol_negotiate` listing the versions we support.
    pub fn protocol_negotiate(session_id: impl Into<String>, supported: &[&str]) -> Message {
        let versions = supported.iter().map(|&name| Value::from(name)).collect();
        Message::new(session_id, MsgType::ProtocolNegotiate)
            .with("supported", Value::List(versions))
    }

    /// The answer to a `protocol_negotiate` offer: the version chosen by [`select_version`],
    /// as `supported` (one entry) and `selected`; an error (code 1000) when there is none.
    pub fn negotiation_reply(&self, ours: &[&str]) -> Result<Message> {
        let theirs = self.supported_versions();
        let chosen = select_version(ours, &theirs).ok_or_else(|| {
            Error::new(ErrorKind::NoCommonVersion {
                ours: ours.iter().map(|&name| name.to_owned()).collect(),
                theirs: theirs.iter().map(|&name| name.to_owned()).collect(),
            })
        })?;
        Ok(Message::protocol_negotiate(self.session_id(), &[chosen]).with("selected", chosen))
    }

    /// Sets a field (a new one goes last, an existing one keeps its place).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Message {
        self.insert(key, value);
        self
    }

    /// Sets a field, returning the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        self.fields.insert(key.into(), value.into())
    }

    /// Marks the message as chunk of a stream (`stream_id`, `is_final`).
    pub fn with_stream(self, stream_id: impl Into<String>, is_final: bool) -> Message {
        self.with("stream_id", stream_id.into())
            .with("is_final", is_final)
    }

    /// Parses and checks a message from strict AICL text.
    pub fn parse(text: &str) -> Result<Message> {
        Message::parse_with(text, &ParseOptions::strict())
    }

    /// Parses and checks a message with the given options. Errors about fields carry the
    /// position of the field's key (or of the message, for a missing field).
    pub fn parse_with(text: &str, options: &ParseOptions) -> Result<Message> {
        let value: Value = crate::from_str_with(text, options)?;
        Message::from_value_with(value, options.mode).map_err(|error| {
            let field = match error.kind() {
                ErrorKind::BadHeader { field, .. } => Some(*field),
                ErrorKind::BadField { field, .. } => Some(field.as_str()),
                _ => None,
            };
            let located = field.and_then(|field| locate_top_level_key(text, options, field));
            let offset = located.unwrap_or_else(|| text.len() - text.trim_start().len());
            error.with_position(Position::locate(text.as_bytes(), offset))
        })
    }

    /// Checks a parsed value as a strict message (header first, in order).
    pub fn from_value(value: Value) -> Result<Message> {
        Message::from_value_with(value, Mode::Strict)
    }

    /// Checks a parsed value as a message; in lenient mode the header may be anywhere and is
    /// moved to the front.
    pub fn from_value_with(value: Value, mode: Mode) -> Result<Message> {
        let Value::Dict(fields) = value else {
            return Err(Error::new(ErrorKind::NotAMessage {
                found: value.kind(),
            }));
        };
        let fields = check_header(fields, mode)?;
        let message = Message { fields };
        message.validate()?;
        Ok(message)
    }

    /// Checks the header, the fields the `msg_type` requires (error 2001), the types of known
    /// fields (4001) and the stream fields.
    pub fn validate(&self) -> Result<()> {
        check_header_values(&self.fields)?;
        schema::check_fields(&self.msg_type(), &self.fields)?;
        self.stream().map(drop)
    }

    /// `session_id`.
    pub fn session_id(&self) -> &str {
        self.header(1)
    }

    /// `msg_type`.
    pub fn msg_type(&self) -> MsgType {
        MsgType::from_name(self.header(2))
    }

    fn header(&self, index: usize) -> &str {
        self.fields
            .get(HEADER[index])
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// A field, header included.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// All fields in order, header first.
    pub fn fields(&self) -> &Map {
        &self.fields
    }

    /// The message as a [`Value`] dictionary.
    pub fn into_value(self) -> Value {
        Value::Dict(self.fields)
    }

    /// Compact AICL text.
    pub fn to_text(&self) -> String {
        let mut out = String::with_capacity(128);
        crate::ser::write_dict(&mut out, self.fields.iter(), false);
        out
    }

    /// Pretty AICL text.
    pub fn to_text_pretty(&self) -> String {
        let mut out = String::with_capacity(256);
        crate::ser::write_dict(&mut out, self.fields.iter(), true);
        out
    }

    /// The fields of an `error` message.
    pub fn error_info(&self) -> Option<ErrorInfo<'_>> {
        if self.msg_type() != MsgType::Error {
            return None;
        }
        Some(ErrorInfo {
            code: ErrorCode::from_code(self.get("code")?.as_i64()?),
            reason: self.get("reason")?.as_str()?,
            detail: self.get("detail").and_then(Value::as_str),
        })
    }

    /// The versions a `protocol_negotiate` message lists (`supported`).
    pub fn supported_versions(&self) -> Vec<&str> {
        self.get("supported")
            .and_then(Value::as_list)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// The stream fields, checked; `Ok(None)` when the message is not a stream chunk.
    pub fn stream(&self) -> Result<Option<StreamChunk<'_>>> {
        stream::stream_of(&self.fields)
    }

    /// The signature extension (`[s:signature]:[s:…]`), when present.
    pub fn signature(&self) -> Option<&str> {
        self.get("signature").and_then(Value::as_str)
    }

    /// The message with `signature` set, as the last field.
    pub fn with_signature(mut self, signature: impl Into<String>) -> Message {
        self.fields.remove("signature");
        self.with("signature", signature.into())
    }

    /// The bytes a signature covers: the compact AICL text of the message without its
    /// `signature` field, fields in message order.
    ///
    /// The writer is deterministic (one spelling per value: shortest floats, every bracket
    /// escaped, canonical base85), so a receiver re-derives the same bytes from the parsed
    /// message whatever whitespace or layout the sender used.
    ///
    /// ```
    /// use concord_aicl::Message;
    ///
    /// let sent = Message::result("fl_session_12", 0.5).with_signature("4fd2a1f3");
    /// let pretty = sent.to_text_pretty();
    /// let received = Message::parse(&pretty)?;
    /// assert_eq!(received.signature(), Some("4fd2a1f3"));
    /// assert_eq!(received.canonical_bytes(), sent.canonical_bytes());
    /// assert_eq!(
    ///     String::from_utf8(received.canonical_bytes()).unwrap(),
    ///     "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:fl_session_12],[s:msg_type]:[s:result],[s:data]:[f:0.5]]"
    /// );
    /// # Ok::<(), concord_aicl::Error>(())
    /// ```
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let unsigned = self.fields.iter().filter(|(key, _)| *key != "signature");
        let mut out = String::with_capacity(128);
        crate::ser::write_dict(&mut out, unsigned, false);
        out.into_bytes()
    }
}

/// Checks that the header fields exist, in order in strict mode; in lenient mode moves them to
/// the front. Their values are checked by [`Message::validate`].
fn check_header(fields: Map, mode: Mode) -> Result<Map> {
    for (index, field) in HEADER.iter().enumerate() {
        match fields.index_of(field) {
            None => {
                return Err(Error::new(ErrorKind::BadHeader {
                    field,
                    reason: "missing".to_owned(),
                }))
            }
            Some(at) if at != index && mode == Mode::Strict => {
                return Err(Error::new(ErrorKind::BadHeader {
                    field,
                    reason: format!(
                        "must be entry {} of the message (the header is protocol, session_id, msg_type, first and in that order)",
                        index + 1
                    ),
                }))
            }
            Some(_) => {}
        }
    }
    if mode == Mode::Strict {
        return Ok(fields);
    }
    let mut rest = fields;
    let mut ordered = Map::with_capacity(rest.len());
    for field in HEADER {
        if let Some(value) = rest.remove(field) {
            ordered.insert(field.to_owned(), value);
        }
    }
    ordered.extend(rest);
    Ok(ordered)
}

fn check_header_values(fields: &Map) -> Result<()> {
    for field in HEADER {
        let bad = |reason: String| Error::new(ErrorKind::BadHeader { field, reason });
        match fields.get(field) {
            None => return Err(bad("missing".to_owned())),
            Some(Value::String(text)) if text.is_empty() => return Err(bad("is empty".to_owned())),
            Some(Value::String(text)) if field == HEADER[0] && text != PROTOCOL => {
                return Err(bad(format!("is `{text}`, expected `{PROTOCOL}`")))
            }
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(bad(format!(
                    "must be a string `[s:…]`, found a {}",
                    other.kind()
                )))
            }
        }
    }
    Ok(())
}

impl From<Message> for Value {
    fn from(message: Message) -> Value {
        message.into_value()
    }
}

impl TryFrom<Value> for Message {
    type Error = Error;

    fn try_from(value: Value) -> Result<Message> {
        Message::from_value(value)
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.fields.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Message {
    /// Reads a dictionary and checks it as a strict message.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Message, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Message::from_value(value).map_err(serde::de::Error::custom)
    }
}
