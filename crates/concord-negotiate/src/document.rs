//! Candidate protocol documents in the seeds' markdown shape.
//!
//! A document states a requirement, a flow, a data format with a request and a
//! response JSON Schema, error handling and a timeout — or names an existing protocol
//! by URI and lists changes to it. The parser reads the seeds' examples as written
//! (Chinese headings, schemas inline without code fences), English equivalents and
//! fenced variants; the writer produces one canonical English layout, byte-stable for
//! the same inputs (so the same protocol always has the same hash).

use std::time::Duration;

use concord_proto::{ProtocolHash, TextPosition};
use serde_json::Value;

use crate::complexity::{SchemaLimits, SchemaTooComplex};
use crate::envelope::status_layout;
use crate::json_schema::{inline_refs_within, properties};
use crate::markdown::{front_matter, front_matter_value, json_objects, normalise, sections};
use crate::naming;

/// How application messages of a protocol are encoded on the wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// JSON (RFC 8259): the default.
    #[default]
    Json,
    /// AICL (LightAICL v1.0), when the document says so.
    Aicl,
}

/// How a protocol reports errors in its responses.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorConvention {
    /// Error codes are HTTP status codes.
    pub http_status_codes: bool,
    /// JSON pointer of the numeric status code in a response (e.g. `/status/code`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_pointer: Option<String>,
    /// JSON pointer of the human-readable status message (e.g. `/status/message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_pointer: Option<String>,
    /// Protocol-specific codes and their meaning (e.g. `100001: out of stock`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub custom_codes: Vec<(i64, String)>,
}

/// A protocol this document builds on, by URI, with the changes made to it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BaseProtocol {
    /// The base protocol's URI.
    pub uri: String,
    /// The changes, as written (markdown).
    pub changes: String,
}

/// A parsed candidate protocol. Keeps the exact text it came from: that text, not any
/// re-rendering, is what gets hashed and stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolDocument {
    text: String,
    /// What the protocol is for.
    pub requirement: Option<String>,
    /// The flow description, as written.
    pub flow: Option<String>,
    /// The base protocol, for a "based on URI … with these changes" document.
    pub base: Option<BaseProtocol>,
    /// JSON Schema of a request message.
    pub request_schema: Option<Value>,
    /// JSON Schema of a response message.
    pub response_schema: Option<Value>,
    /// How errors are reported.
    pub error_convention: ErrorConvention,
    /// How long a requester waits for a response.
    pub timeout: Option<Duration>,
    /// Wire encoding of application messages.
    pub encoding: Encoding,
    /// The limits its schemas were read under (and are compiled under).
    limits: SchemaLimits,
}

/// Why a text is not a usable protocol document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// A schema section holds JSON that does not parse.
    #[error("the {section} schema is not valid JSON at {position} of the document: {message}")]
    SchemaJson {
        /// `request` or `response`.
        section: &'static str,
        /// Where in the whole document.
        position: TextPosition,
        /// What the JSON parser found.
        message: String,
    },
    /// Neither a full protocol (request and response schemas) nor a based-on-URI one.
    #[error("the document has {found} but needs both a request and a response JSON Schema, or a base protocol URI with changes")]
    Incomplete {
        /// What was found.
        found: &'static str,
    },
    /// The document is empty.
    #[error("the protocol document is empty")]
    Empty,
    /// A schema is over the [`SchemaLimits`] it was read under: it is not inlined, compiled
    /// or read any further.
    #[error("the {section} schema is too complex to read: {error}")]
    TooComplex {
        /// `request` or `response`.
        section: &'static str,
        /// Where, which limit, how many and the limit.
        error: SchemaTooComplex,
    },
}

/// The parts of a protocol, for writing a document.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolSpec {
    /// What the protocol is for (one or more lines).
    pub requirement: String,
    /// How a request flows to a response (one or more lines).
    pub flow: String,
    /// JSON Schema of a request message.
    pub request_schema: Value,
    /// JSON Schema of a response message.
    pub response_schema: Value,
    /// How errors are reported.
    pub error_convention: ErrorConvention,
    /// How long a requester waits for a response.
    pub timeout: Duration,
    /// Wire encoding.
    pub encoding: Encoding,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heading {
    Requirement,
    Flow,
    DataFormat,
    Request,
    Response,
    Changes,
    Errors,
    Timeout,
    Other,
}

/// Words that make a heading about requests (English and Chinese).
const REQUEST_WORDS: [&str; 7] = ["request", "input", "query", "请求", "输入", "入参", "调用"];
/// Words that make a heading about responses.
const RESPONSE_WORDS: [&str; 11] = [
    "response", "reply", "output", "answer", "result", "响应", "输出", "返回", "应答", "回复",
    "出参",
];
const ERROR_WORDS: [&str; 7] = [
    "error",
    "exception",
    "failure",
    "错误",
    "异常",
    "失败",
    "故障",
];

/// What a heading is about, by the words in it: "Request Message Format", "请求消息格式",
/// "Input schema", "## 2. Response (success)" are all about one side of the exchange.
fn classify(title: &str) -> Heading {
    let title = normalise(title);
    let has = |words: &[&str]| words.iter().any(|word| title.contains(word));
    let (request, response) = (has(&REQUEST_WORDS), has(&RESPONSE_WORDS));
    if has(&ERROR_WORDS) && !response && !has(&["format", "格式", "schema"]) {
        Heading::Errors
    } else if request && !response {
        Heading::Request
    } else if response && !request {
        Heading::Response
    } else if request
        || has(&[
            "format",
            "schema",
            "message",
            "格式",
            "消息",
            "数据",
            "payload",
            "structure",
            "结构",
        ])
    {
        Heading::DataFormat
    } else if has(&["timeout", "timeout", "超时", "timeoutandretry"]) {
        Heading::Timeout
    } else if has(&[
        "requirement",
        "需求",
        "purpose",
        "goal",
        "overview",
        "概述",
        "目的",
        "背景",
        "summary",
        "introduction",
        "简介",
    ]) {
        Heading::Requirement
    } else if has(&[
        "flow",
        "流程",
        "process",
        "interaction",
        "交互",
        "sequence",
        "时序",
    ]) {
        Heading::Flow
    } else if has(&["change", "modification", "修改", "变更"]) {
        Heading::Changes
    } else {
        Heading::Other
    }
}

/// Which side of the exchange a JSON Schema describes, read from its content when the
/// headings around it do not say: its title, `$id` or description, then its fields (a
/// status code, a result or an error object make a response).
fn side_of(schema: &Value) -> Option<Heading> {
    let mut words = String::new();
    for keyword in ["title", "$id", "description"] {
        if let Some(text) = schema.get(keyword).and_then(Value::as_str) {
            words.push_str(&normalise(text));
            words.push(' ');
        }
    }
    let has = |list: &[&str]| list.iter().any(|word| words.contains(word));
    match (has(&REQUEST_WORDS), has(&RESPONSE_WORDS)) {
        (true, false) => return Some(Heading::Request),
        (false, true) => return Some(Heading::Response),
        _ => {}
    }
    let layout = status_layout(schema);
    let answers = layout.code_at.is_some()
        || layout.error_field.is_some()
        || properties(schema)
            .iter()
            .any(|(name, _)| ["result", "data"].contains(&naming::key(name).as_str()));
    answers.then_some(Heading::Response)
}

/// Whether a JSON object is a JSON Schema rather than an example message.
fn is_schema(value: &Value) -> bool {
    [
        "$schema",
        "properties",
        "$ref",
        "$defs",
        "definitions",
        "oneOf",
        "anyOf",
        "allOf",
    ]
    .iter()
    .any(|keyword| value.get(keyword).is_some())
        || value.get("type").and_then(Value::as_str) == Some("object")
}

/// A schema for an example message: each field typed as the example has it. Used only for
/// documents that show messages and no schemas.
fn schema_of_example(example: &Value) -> Value {
    match example {
        Value::Object(fields) => {
            let properties: serde_json::Map<String, Value> = fields
                .iter()
                .map(|(name, value)| (name.clone(), schema_of_example(value)))
                .collect();
            serde_json::json!({"type": "object", "properties": properties})
        }
        Value::Array(items) => match items.first() {
            Some(item) => serde_json::json!({"type": "array", "items": schema_of_example(item)}),
            None => serde_json::json!({"type": "array"}),
        },
        Value::String(_) => serde_json::json!({"type": "string"}),
        Value::Bool(_) => serde_json::json!({"type": "boolean"}),
        Value::Number(number) if number.is_i64() || number.is_u64() => {
            serde_json::json!({"type": "integer"})
        }
        Value::Number(_) => serde_json::json!({"type": "number"}),
        Value::Null => serde_json::json!({}),
    }
}

/// JSON found in a document, and the side its heading (or its ancestors') gives it.
struct Found {
    side: Option<Heading>,
    value: Value,
}

impl ProtocolDocument {
    /// Parses a candidate protocol text.
    ///
    /// Reads any reasonable layout: headings in any wording, English or Chinese ("Request
    /// Message Format", "请求消息", "Input schema"…; a heading that does not say takes the
    /// side of the heading it sits under), JSON Schemas fenced or bare and in any order,
    /// several per section (the first schema counts; example messages are skipped), local
    /// `$ref`s inlined, YAML front matter (its `description` is the requirement when no
    /// section states one). Where headings do not decide, the schemas' own titles and fields
    /// do (a status code, `data`/`result` or an error object make a response); a document
    /// that shows example messages and no schemas gets schemas typed from its examples.
    ///
    /// ```
    /// use concord_negotiate::ProtocolDocument;
    ///
    /// let text = "# Requirement\nEcho\n\n## Request\n{\"type\":\"object\"}\n\n## Response\n```json\n{\"type\":\"object\"}\n```\n";
    /// let document = ProtocolDocument::parse(text)?;
    /// assert!(document.request_schema.is_some() && document.response_schema.is_some());
    /// assert_eq!(document.hash(), concord_proto::ProtocolHash::of_text(text));
    /// # Ok::<(), concord_negotiate::DocumentError>(())
    /// ```
    ///
    /// Its schemas are read within the default [`SchemaLimits`] (see
    /// [`ProtocolDocument::parse_within`]).
    pub fn parse(text: &str) -> Result<Self, DocumentError> {
        Self::parse_within(text, &SchemaLimits::default())
    }

    /// [`ProtocolDocument::parse`], its schemas read within `limits`: each is checked as
    /// written, before its `$ref`s are inlined, and again once they are
    /// ([`inline_refs_within`](crate::json_schema::inline_refs_within)). The document keeps
    /// the limits: [`ProtocolSchemas::compile`](crate::ProtocolSchemas::compile) checks
    /// against them again.
    ///
    /// ```
    /// use concord_negotiate::complexity::{Limit, SchemaLimits};
    /// use concord_negotiate::{DocumentError, ProtocolDocument};
    ///
    /// let text = "## Request\n{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[1,2,3]}}}\n\n## Response\n{\"type\":\"object\"}\n";
    /// let limits = SchemaLimits { max_enum_values: 2, ..SchemaLimits::default() };
    /// match ProtocolDocument::parse_within(text, &limits) {
    ///     Err(DocumentError::TooComplex { section, error }) => {
    ///         assert_eq!(section, "request");
    ///         assert_eq!(error.pointer, "/properties/kind/enum");
    ///         assert_eq!((error.over, error.count, error.limit), (Limit::EnumValues, 3, 2));
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(ProtocolDocument::parse(text).is_ok());
    /// ```
    ///
    /// # Errors
    /// As [`ProtocolDocument::parse`], and [`DocumentError::TooComplex`] for a schema over
    /// `limits`.
    pub fn parse_within(text: &str, limits: &SchemaLimits) -> Result<Self, DocumentError> {
        if text.trim().is_empty() {
            return Err(DocumentError::Empty);
        }
        let mut document = Self {
            text: text.to_owned(),
            requirement: None,
            flow: None,
            base: None,
            request_schema: None,
            response_schema: None,
            error_convention: ErrorConvention::default(),
            timeout: None,
            encoding: Encoding::Json,
            limits: *limits,
        };
        let mut changes = None;
        let mut prose = String::new();
        let mut found: Vec<Found> = Vec::new();
        let mut first_fault = None;
        // The side of the nearest enclosing heading that names one, per level.
        let mut enclosing: Vec<(usize, Heading)> = Vec::new();
        for section in &sections(text) {
            let body = section.body.trim();
            let heading = classify(section.title);
            enclosing.retain(|(level, _)| *level < section.level);
            let side = match heading {
                Heading::Request | Heading::Response => Some(heading),
                Heading::DataFormat | Heading::Other => enclosing
                    .last()
                    .map(|(_, side)| *side)
                    .filter(|side| matches!(side, Heading::Request | Heading::Response)),
                _ => None,
            };
            if section.level > 0 {
                enclosing.push((section.level, side.unwrap_or(heading)));
            }
            match heading {
                Heading::Requirement if document.requirement.is_none() => {
                    document.requirement = non_empty(body)
                }
                Heading::Flow if document.flow.is_none() => document.flow = non_empty(body),
                Heading::Changes => changes = non_empty(body),
                Heading::DataFormat if mentions_aicl(body) => document.encoding = Encoding::Aicl,
                _ => {}
            }
            for item in json_objects(section.body) {
                match item {
                    Ok(json) => found.push(Found {
                        side: side.filter(|_| !matches!(heading, Heading::Errors)),
                        value: json.value,
                    }),
                    Err(fault) if first_fault.is_none() => {
                        let position = fault.position_in(text, section.body_offset);
                        first_fault = Some(DocumentError::SchemaJson {
                            section: match side {
                                Some(Heading::Response) => "response",
                                _ => "request",
                            },
                            position,
                            message: fault.message,
                        });
                    }
                    Err(_) => {}
                }
            }
            if !matches!(side, Some(Heading::Request | Heading::Response)) {
                prose.push_str(section.body);
                prose.push('\n');
            }
        }
        if let Some(matter) = front_matter(text) {
            if document.requirement.is_none() {
                document.requirement = front_matter_value(matter, "description")
                    .or_else(|| front_matter_value(matter, "name"));
            }
        }
        let (request, response) = assign_schemas(&found);
        let within = |section, schema: Option<Value>| {
            schema
                .map(|schema| inline_refs_within(&schema, limits))
                .transpose()
                .map_err(|error| DocumentError::TooComplex { section, error })
        };
        document.request_schema = within("request", request)?;
        document.response_schema = within("response", response)?;
        if let Some(uri) = base_uri(&prose) {
            document.base = Some(BaseProtocol {
                uri,
                changes: changes.clone().unwrap_or_default(),
            });
        }
        document.timeout = timeout_in(&prose);
        document.error_convention = error_convention(&prose, document.response_schema.as_ref());
        match (
            &document.request_schema,
            &document.response_schema,
            &document.base,
            first_fault,
        ) {
            (Some(_), Some(_), _, _) | (_, _, Some(_), _) => Ok(document),
            (_, _, None, Some(fault)) => Err(fault),
            (Some(_), None, None, None) => Err(DocumentError::Incomplete {
                found: "a request schema only",
            }),
            (None, Some(_), None, None) => Err(DocumentError::Incomplete {
                found: "a response schema only",
            }),
            (None, None, None, None) => Err(DocumentError::Incomplete {
                found: "no schema and no base protocol",
            }),
        }
    }

    /// The exact text this document was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The limits this document's schemas were read under.
    pub fn schema_limits(&self) -> &SchemaLimits {
        &self.limits
    }

    /// The protocol hash of the exact text.
    pub fn hash(&self) -> ProtocolHash {
        ProtocolHash::of_text(&self.text)
    }

    /// Writes a document in the canonical English layout (parsable by [`ProtocolDocument::parse`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use concord_negotiate::{Encoding, ErrorConvention, ProtocolDocument, ProtocolSpec};
    /// use serde_json::json;
    ///
    /// let spec = ProtocolSpec {
    ///     requirement: "Get product information.".into(),
    ///     flow: "The requester sends a product id; the provider answers with the product.".into(),
    ///     request_schema: json!({"type": "object", "properties": {"productId": {"type": "string"}}}),
    ///     response_schema: json!({"type": "object"}),
    ///     error_convention: ErrorConvention::default(),
    ///     timeout: Duration::from_secs(15),
    ///     encoding: Encoding::Json,
    /// };
    /// let text = ProtocolDocument::write(&spec);
    /// let parsed = ProtocolDocument::parse(&text)?;
    /// assert_eq!(parsed.request_schema, Some(spec.request_schema));
    /// assert_eq!(parsed.timeout, Some(Duration::from_secs(15)));
    /// # Ok::<(), concord_negotiate::DocumentError>(())
    /// ```
    pub fn write(spec: &ProtocolSpec) -> String {
        let mut out = String::new();
        out.push_str("# Requirement\n");
        push_paragraph(&mut out, &spec.requirement);
        out.push_str("\n# Flow\n");
        push_paragraph(&mut out, &spec.flow);
        out.push_str("Error handling:\n");
        let convention = &spec.error_convention;
        if convention.http_status_codes {
            out.push_str("- Error codes are HTTP status codes");
            if let Some(pointer) = &convention.code_pointer {
                out.push_str(&format!(", in `{pointer}` of the response"));
            }
            out.push_str(".\n");
        }
        if let Some(pointer) = &convention.message_pointer {
            out.push_str(&format!(
                "- Error messages are natural language, in `{pointer}` of the response.\n"
            ));
        }
        for (code, meaning) in &convention.custom_codes {
            out.push_str(&format!("- {code}: {meaning}\n"));
        }
        out.push_str(&format!(
            "- No answer within {} seconds is a timeout.\n",
            spec.timeout.as_secs().max(1)
        ));
        out.push_str("\n# Data format\n");
        out.push_str(match spec.encoding {
            Encoding::Json => "Requests and responses are JSON (RFC 8259).\n",
            Encoding::Aicl => "Requests and responses are AICL (LightAICL v1.0) messages.\n",
        });
        for (title, schema) in [
            ("Request", &spec.request_schema),
            ("Response", &spec.response_schema),
        ] {
            out.push_str(&format!(
                "\n## {title}\nThe {} JSON Schema:\n```json\n",
                title.to_lowercase()
            ));
            out.push_str(&pretty(schema));
            out.push_str("\n```\n");
        }
        out
    }
}

fn push_paragraph(out: &mut String, text: &str) {
    out.push_str(text.trim());
    out.push('\n');
}

/// Pretty JSON with 2-space indentation; key order as given.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// The request and response schemas among the JSON a document holds: per side, the first
/// schema under a heading of that side; the rest by the schemas' content, then in order
/// (the first unplaced schema is the request, the next the response). Without schemas,
/// example messages placed the same way, typed by [`schema_of_example`].
fn assign_schemas(found: &[Found]) -> (Option<Value>, Option<Value>) {
    let schemas: Vec<&Found> = found.iter().filter(|item| is_schema(&item.value)).collect();
    let (request, response) = place(&schemas);
    if request.is_some() || response.is_some() {
        return (request, response);
    }
    let examples: Vec<&Found> = found.iter().collect();
    let (request, response) = place(&examples);
    (
        request.as_ref().map(schema_of_example),
        response.as_ref().map(schema_of_example),
    )
}

/// Places candidates: by heading, then by content, then in order. Several whole response
/// messages under response headings (a success and an error shape) make one response
/// schema, `anyOf` them (a message may fit both).
fn place(candidates: &[&Found]) -> (Option<Value>, Option<Value>) {
    let by_heading = |wanted: Heading| {
        candidates
            .iter()
            .find(|item| item.side == Some(wanted))
            .map(|item| item.value.clone())
    };
    let mut request = by_heading(Heading::Request);
    let shapes: Vec<&Value> = candidates
        .iter()
        .filter(|item| item.side == Some(Heading::Response))
        .map(|item| &item.value)
        .filter(|value| has_message_id(value))
        .collect();
    let mut response = match shapes.as_slice() {
        [_, _, ..] => Some(serde_json::json!({ "anyOf": shapes })),
        _ => by_heading(Heading::Response),
    };
    let mut unplaced = Vec::new();
    for item in candidates.iter().filter(|item| item.side.is_none()) {
        match side_of(&item.value) {
            Some(Heading::Request) if request.is_none() => request = Some(item.value.clone()),
            Some(Heading::Response) if response.is_none() => response = Some(item.value.clone()),
            _ => unplaced.push(&item.value),
        }
    }
    for value in unplaced {
        if request.is_none() {
            request = Some(value.clone());
        } else if response.is_none() {
            response = Some(value.clone());
        }
    }
    (request, response)
}

/// Whether a schema describes a whole message: it lists a message id.
fn has_message_id(schema: &Value) -> bool {
    properties(schema).iter().any(|(name, _)| {
        ["messageid", "msgid", "requestid", "correlationid", "id"]
            .contains(&naming::key(name).as_str())
    })
}

fn mentions_aicl(text: &str) -> bool {
    text.to_lowercase().contains("aicl")
}

/// The base protocol URI of a "based on existing protocol (URI: …)" document.
fn base_uri(prose: &str) -> Option<String> {
    let lower = prose.to_lowercase();
    let anchor = ["基于已有协议", "based on", "builds on", "extends"]
        .iter()
        .filter_map(|marker| lower.find(marker))
        .min()?;
    // Byte offsets in `lower` match `prose` only for ASCII-case changes; search the original.
    let tail = prose.get(anchor..).unwrap_or(prose);
    let start = ["https://", "http://", "urn:"]
        .iter()
        .filter_map(|scheme| tail.find(scheme))
        .min()?;
    let uri: String = tail[start..]
        .chars()
        .take_while(|c| {
            !c.is_whitespace()
                && !matches!(c, ')' | '）' | ',' | '，' | '>' | '`' | '"' | '、' | '。')
        })
        .collect();
    let uri = uri.trim_end_matches(['.', ';', ':']).to_owned();
    (uri.len() > 8).then_some(uri)
}

/// A timeout stated in prose: a number with a unit on a line that talks about timeouts.
fn timeout_in(prose: &str) -> Option<Duration> {
    prose
        .lines()
        .filter(|line| {
            let lower = line.to_lowercase();
            [
                "超时",
                "timeout",
                "time out",
                "timed out",
                "no answer",
                "no response",
                "没有返回",
            ]
            .iter()
            .any(|word| lower.contains(word))
        })
        .find_map(duration_in)
}

fn duration_in(line: &str) -> Option<Duration> {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
            i += 1;
        }
        let number: f64 = chars[start..i].iter().collect::<String>().parse().ok()?;
        let rest: String = chars[i..]
            .iter()
            .collect::<String>()
            .trim_start()
            .to_lowercase();
        let seconds = if rest.starts_with("ms")
            || rest.starts_with("毫秒")
            || rest.starts_with("millisecond")
        {
            number / 1000.0
        } else if rest.starts_with('s') || rest.starts_with("秒") || rest.starts_with("sec") {
            number
        } else if rest.starts_with("min") || rest.starts_with("分钟") || rest.starts_with('m') {
            number * 60.0
        } else {
            continue;
        };
        if seconds.is_finite() && seconds > 0.0 && seconds < 86_400.0 {
            return Some(Duration::from_millis((seconds * 1000.0).round() as u64));
        }
    }
    None
}

fn error_convention(prose: &str, response_schema: Option<&Value>) -> ErrorConvention {
    let lower = prose.to_lowercase();
    let http_status_codes = lower.contains("http")
        && (lower.contains("错误码")
            || lower.contains("status")
            || lower.contains("error code")
            || lower.contains("状态码"));
    let mut convention = ErrorConvention {
        http_status_codes,
        ..ErrorConvention::default()
    };
    if let Some(schema) = response_schema {
        let layout = status_layout(schema);
        convention.code_pointer = layout.code_at;
        convention.message_pointer = layout.message_at;
    }
    convention.custom_codes = prose.lines().filter_map(custom_code).collect();
    convention
}

/// A `- 100001：meaning` or `- 100001: meaning` line (codes of three digits or more that
/// are not plain HTTP codes are protocol-specific).
fn custom_code(line: &str) -> Option<(i64, String)> {
    let item = line.trim().strip_prefix(['-', '*'])?.trim();
    let digits: String = item.chars().take_while(char::is_ascii_digit).collect();
    if digits.len() < 4 {
        return None;
    }
    let rest = item[digits.len()..].trim_start();
    let meaning = rest.strip_prefix([':', '：'])?.trim();
    Some((digits.parse().ok()?, meaning.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_prose() {
        assert_eq!(
            duration_in("- 15秒内没有返回，则认为超时"),
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            duration_in("No answer within 15 seconds is a timeout."),
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            duration_in("timeout: 500 ms"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            duration_in("timeout after 2 minutes"),
            Some(Duration::from_secs(120))
        );
        assert_eq!(duration_in("HTTP 404 is not a timeout"), None);
    }

    #[test]
    fn custom_codes_in_prose() {
        assert_eq!(
            custom_code("  - 100001：商品缺货中"),
            Some((100_001, "商品缺货中".into()))
        );
        assert_eq!(custom_code("- 404: not found"), None);
        assert_eq!(custom_code("plain 100001: text"), None);
    }
}
