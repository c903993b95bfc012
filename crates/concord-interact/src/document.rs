//! The interface protocol document: the markdown a requester drafts to negotiate one session
//! covering several affordances. It names the interaction layer by URI ([`LAYER_URI`]) and
//! states the affordances as one JSON block (an [`Interface`] in its serde form); the layer
//! itself is fixed and implemented here, so a handler only deals with payloads.
//!
//! [`write`](fn@write) gives the canonical text (byte-stable: the same inputs give the same bytes);
//! [`parse`] reads ours and hand-written variants (other heading wording or levels, a bare
//! JSON object instead of a fenced block), within [`InterfaceDocumentLimits`]. A provider answers a
//! candidate with [`judge`]; a requester picks what it wants from a provider's interface
//! with [`select`].
//!
//! ```
//! use std::time::Duration;
//! use concord_interact::{document, ActionAffordance, ActionMode, Interface};
//! use serde_json::json;
//!
//! let mut ours = Interface::default();
//! ours.actions.insert("getWeather".into(), ActionAffordance {
//!     description: "The weather in a city.".into(),
//!     input: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
//!     output: json!({"type": "string"}),
//!     mode: ActionMode::Reply,
//!     stream: None,
//! });
//! let wanted = document::select(&ours, &["getWeather"]).unwrap();
//! let text = document::write(&wanted, "WeatherAgent", Duration::from_secs(15));
//! assert!(document::is_interface_document(&text));
//! let candidate = document::parse(&text, &document::InterfaceDocumentLimits::default()).unwrap();
//! assert_eq!(document::judge(&candidate, &ours), document::Judgement::Accept);
//! assert_eq!(document::timeout(&text), Some(Duration::from_secs(15)));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use concord_text::{json_error_offset, TextPosition};
use serde_json::Value;

use crate::interface::{
    ActionAffordance, ActionMode, EventAffordance, Interface, PropertyAffordance, LAYER_URI,
};
use crate::stream::StreamLimits;

/// The start every interaction layer URI shares; a document naming another version of the
/// layer is refused ([`InterfaceDocumentError::UnsupportedLayer`]).
const LAYER_FAMILY: &str = "urn:concord:interaction:";

/// Bounds on a peer's interface document. [`InterfaceDocumentLimits::default`] gives the values below.
///
/// | field | default | when it is hit |
/// |---|---|---|
/// | `max_text` | 256 KiB | a longer document is refused before reading ([`InterfaceDocumentError::TooLarge`]) |
/// | `max_affordances` | 256 | more actions, properties and events together ([`InterfaceDocumentError::TooManyAffordances`]) |
/// | `max_name` | 256 bytes | a longer affordance name ([`InterfaceDocumentError::BadName`]) |
/// | `max_depth` | 32 | the JSON block nests deeper, the block itself counting as 1 ([`InterfaceDocumentError::TooDeep`]) |
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InterfaceDocumentLimits {
    /// Longest document read, in bytes (default 256 KiB).
    pub max_text: usize,
    /// Most affordances (actions, properties and events together) (default 256).
    pub max_affordances: usize,
    /// Longest affordance name, in bytes (default 256).
    pub max_name: usize,
    /// Deepest nesting of arrays and objects in the JSON block (default 32).
    pub max_depth: usize,
}

impl Default for InterfaceDocumentLimits {
    fn default() -> Self {
        Self {
            max_text: 256 * 1024,
            max_affordances: 256,
            max_name: 256,
            max_depth: 32,
        }
    }
}

/// Why a text is not a usable interface document. Lines count from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterfaceDocumentError {
    /// Longer than [`InterfaceDocumentLimits::max_text`] (checked before reading).
    #[error("the document is {size} bytes; the limit is {limit}")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// It does not name this interaction layer ([`LAYER_URI`]).
    #[error("the document does not name the interaction layer {LAYER_URI}")]
    MissingLayer,
    /// It names another version of the interaction layer, and not this one.
    #[error("the document names the interaction layer {0}; this agent speaks {LAYER_URI}")]
    UnsupportedLayer(String),
    /// No JSON object stating the affordances was found.
    #[error("the document has no JSON block stating the affordances (a fenced ```json block under an \"Affordances\" heading)")]
    MissingAffordances,
    /// The affordances block is not JSON, or not an interface.
    #[error("the affordances block at {position}: {message}")]
    BadJson {
        /// Where in the document (the column counted in characters).
        position: TextPosition,
        /// What is wrong.
        message: String,
    },
    /// The affordances block nests deeper than [`InterfaceDocumentLimits::max_depth`].
    #[error("the affordances block starting at line {line} nests deeper than {limit} levels")]
    TooDeep {
        /// Line where the block starts.
        line: usize,
        /// The limit.
        limit: usize,
    },
    /// More affordances than [`InterfaceDocumentLimits::max_affordances`].
    #[error("the document states {count} affordances; the limit is {limit}")]
    TooManyAffordances {
        /// How many it states.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// An affordance name is empty, longer than [`InterfaceDocumentLimits::max_name`], or holds
    /// control characters.
    #[error(
        "{kind} name `{name}` is empty, too long (limit {limit} bytes) or has control characters"
    )]
    BadName {
        /// `action`, `property` or `event`.
        kind: &'static str,
        /// The name (its first 64 characters).
        name: String,
        /// The limit.
        limit: usize,
    },
    /// A stream action's `stream.initialCredit` is more than this side's receive buffer
    /// per stream ([`StreamLimits::max_receive_buffer`]) holds: both peers start each
    /// direction with that credit, so the peer could send more than we buffer
    /// ([`check_credits`]).
    #[error("action `{name}`: `stream.initialCredit` of {credit} bytes exceeds this agent's receive buffer of {limit} bytes per stream (`limits.streams.max_receive_buffer`)")]
    CreditExceedsBuffer {
        /// The action.
        name: String,
        /// Its initial credit.
        credit: u64,
        /// [`StreamLimits::max_receive_buffer`].
        limit: u64,
    },
    /// A stream action's `stream.initialCredit` is 0: no byte could ever move on its
    /// streams (credit is granted back only for bytes read) ([`check_credits`]).
    #[error(
        "action `{name}`: `stream.initialCredit` is 0: nothing could ever be sent on its streams"
    )]
    NoCredit {
        /// The action.
        name: String,
    },
    /// An affordance is inconsistent (a schema that is not a JSON Schema, a stream action
    /// without a stream specification, …).
    #[error("{kind} `{name}`: {reason}")]
    BadAffordance {
        /// `action`, `property` or `event`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The canonical interface protocol document for `interface`, offered by the agent titled
/// `agent_title`, with `timeout` per request. The same inputs give the same bytes:
/// affordances come sorted by name and schemas as given.
pub fn write(interface: &Interface, agent_title: &str, timeout: Duration) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# Requirement\n");
    let _ = writeln!(
        text,
        "Interact with the agent {} through the affordances {}.\n",
        one_line(agent_title),
        affordance_list(interface)
    );
    let _ = writeln!(text, "# Interaction layer\n");
    let _ = writeln!(
        text,
        "This protocol uses the interaction layer {LAYER_URI}: W3C Web Thing Protocol messages (messageType, operation, name, correlationID) as JSON on application frames, RFC 9457 problem details for errors, and binary stream chunks with credit-based flow control. A handler deals only with the payloads of the affordances below, as their schemas state them.\n"
    );
    let _ = writeln!(text, "# Affordances\n");
    let json = serde_json::to_string_pretty(interface).unwrap_or_else(|_| "{}".to_owned());
    let _ = writeln!(text, "```json\n{json}\n```\n");
    let _ = writeln!(text, "# Timeout\n");
    let _ = writeln!(text, "{}", timeout_text(timeout));
    text
}

/// Whether `text` looks like an interface document: a section whose heading mentions the
/// interaction layer names [`LAYER_URI`]. Cheap; [`parse`] does the real reading.
pub fn is_interface_document(text: &str) -> bool {
    sections(text).iter().any(|section| {
        section
            .heading
            .to_ascii_lowercase()
            .contains("interaction layer")
            && (section.heading.contains(LAYER_URI) || section.body(text).contains(LAYER_URI))
    })
}

/// Reads an interface document: checks that it names [`LAYER_URI`], finds the affordances
/// block (a fenced block under a heading mentioning affordances or the interface, or the
/// first such block or bare JSON object anywhere) and reads it within `limits`.
pub fn parse(
    text: &str,
    limits: &InterfaceDocumentLimits,
) -> Result<Interface, InterfaceDocumentError> {
    if text.len() > limits.max_text {
        return Err(InterfaceDocumentError::TooLarge {
            size: text.len(),
            limit: limits.max_text,
        });
    }
    check_layer(text)?;
    let (start, json) =
        affordances_block(text).ok_or(InterfaceDocumentError::MissingAffordances)?;
    let block_start = TextPosition::locate(text, start);
    let first_line = block_start.line;
    let bad_json = |error: serde_json::Error| InterfaceDocumentError::BadJson {
        position: json_error_offset(json, &error).map_or(block_start, |offset| {
            TextPosition::locate(text, start + offset)
        }),
        message: error.to_string(),
    };
    let value: Value = serde_json::from_str(json).map_err(bad_json)?;
    if depth_exceeds(&value, limits.max_depth) {
        return Err(InterfaceDocumentError::TooDeep {
            line: first_line,
            limit: limits.max_depth,
        });
    }
    let interface: Interface = match serde_json::from_value(value.clone()) {
        Ok(interface) => interface,
        Err(error) => {
            return Err(
                bad_affordance(&value).unwrap_or(InterfaceDocumentError::BadJson {
                    position: block_start,
                    message: error.to_string(),
                }),
            )
        }
    };
    check_interface(&interface, limits)?;
    Ok(interface)
}

/// The timeout a document states (under a heading mentioning the timeout: `15 seconds`,
/// `1500 ms`, `2 minutes`), if any.
pub fn timeout(text: &str) -> Option<Duration> {
    let section = sections(text)
        .into_iter()
        .find(|section| section.heading.to_ascii_lowercase().contains("timeout"))?;
    let line = section
        .body(text)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    parse_duration(line)
}

/// A provider's answer to a candidate interface.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// Every affordance matches ours: the candidate is accepted as written.
    Accept,
    /// Some affordances differ: our versions of exactly those (the rest matched).
    Counter(Interface),
    /// The candidate names something we do not have, or nothing at all: why.
    Reject(String),
}

/// Judges a requester's candidate against our interface: every affordance it names must
/// exist in ours with the same kind (else [`Judgement::Reject`] naming it); affordances
/// whose schemas, mode, stream specification, or writable/observable flags differ from ours
/// come back as [`Judgement::Counter`] with our versions; descriptions do not count.
pub fn judge(candidate: &Interface, ours: &Interface) -> Judgement {
    if candidate.is_empty() {
        return Judgement::Reject("the candidate names no affordance".to_owned());
    }
    let mut counter = Interface::default();
    let missing = compare(
        &candidate.actions,
        &ours.actions,
        same_action,
        &mut counter.actions,
    )
    .map(|name| ("action", name))
    .or_else(|| {
        compare(
            &candidate.properties,
            &ours.properties,
            same_property,
            &mut counter.properties,
        )
        .map(|name| ("property", name))
    })
    .or_else(|| {
        compare(
            &candidate.events,
            &ours.events,
            same_event,
            &mut counter.events,
        )
        .map(|name| ("event", name))
    });
    match missing {
        Some((kind, name)) => Judgement::Reject(format!("this agent has no {kind} `{name}`")),
        None if counter.is_empty() => Judgement::Accept,
        None => Judgement::Counter(counter),
    }
}

/// Whether this side can hold every stream action's initial credit: `Err` names the first
/// action (by name) whose `stream.initialCredit` exceeds
/// [`StreamLimits::max_receive_buffer`] ([`InterfaceDocumentError::CreditExceedsBuffer`]) or is 0
/// ([`InterfaceDocumentError::NoCredit`]). A provider checks its own interface with it before
/// serving it, a requester a provider's before agreeing to it.
pub fn check_credits(
    interface: &Interface,
    streams: &StreamLimits,
) -> Result<(), InterfaceDocumentError> {
    let limit = streams.max_receive_buffer;
    for (name, action) in &interface.actions {
        let Some(stream) = &action.stream else {
            continue;
        };
        if stream.initial_credit == 0 {
            return Err(InterfaceDocumentError::NoCredit { name: name.clone() });
        }
        if stream.initial_credit > limit {
            return Err(InterfaceDocumentError::CreditExceedsBuffer {
                name: name.clone(),
                credit: stream.initial_credit,
                limit,
            });
        }
    }
    Ok(())
}

/// The part of our interface a requester wants: each name may be an action, a property or
/// an event (every kind bearing it is taken). `Err` names the first unknown name.
pub fn select(ours: &Interface, names: &[&str]) -> Result<Interface, String> {
    if names.is_empty() {
        return Err("no affordance was asked for".to_owned());
    }
    let mut selected = Interface::default();
    for &name in names {
        let mut found = false;
        if let Some(action) = ours.actions.get(name) {
            selected.actions.insert(name.to_owned(), action.clone());
            found = true;
        }
        if let Some(property) = ours.properties.get(name) {
            selected
                .properties
                .insert(name.to_owned(), property.clone());
            found = true;
        }
        if let Some(event) = ours.events.get(name) {
            selected.events.insert(name.to_owned(), event.clone());
            found = true;
        }
        if !found {
            return Err(format!("this agent has no affordance `{name}`"));
        }
    }
    Ok(selected)
}

// ----- judging ------------------------------------------------------------------------------

/// Puts our version of every candidate affordance that differs into `counter`; returns the
/// first name we do not have.
fn compare<'c, T: Clone>(
    candidate: &'c BTreeMap<String, T>,
    ours: &BTreeMap<String, T>,
    same: fn(&T, &T) -> bool,
    counter: &mut BTreeMap<String, T>,
) -> Option<&'c str> {
    for (name, theirs) in candidate {
        let Some(mine) = ours.get(name) else {
            return Some(name);
        };
        if !same(theirs, mine) {
            counter.insert(name.clone(), mine.clone());
        }
    }
    None
}

fn same_action(a: &ActionAffordance, b: &ActionAffordance) -> bool {
    a.input == b.input && a.output == b.output && a.mode == b.mode && a.stream == b.stream
}

fn same_property(a: &PropertyAffordance, b: &PropertyAffordance) -> bool {
    a.schema == b.schema && a.writable == b.writable && a.observable == b.observable
}

fn same_event(a: &EventAffordance, b: &EventAffordance) -> bool {
    a.data == b.data
}

// ----- writing ------------------------------------------------------------------------------

/// `action `a`, property `p` and event `e``.
fn affordance_list(interface: &Interface) -> String {
    let names: Vec<String> = interface
        .actions
        .keys()
        .map(|name| format!("action `{name}`"))
        .chain(
            interface
                .properties
                .keys()
                .map(|name| format!("property `{name}`")),
        )
        .chain(
            interface
                .events
                .keys()
                .map(|name| format!("event `{name}`")),
        )
        .collect();
    match names.as_slice() {
        [] => "(none)".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The title on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn timeout_text(timeout: Duration) -> String {
    if timeout.subsec_nanos() == 0 {
        match timeout.as_secs() {
            1 => "1 second".to_owned(),
            secs => format!("{secs} seconds"),
        }
    } else {
        format!("{} milliseconds", timeout.as_millis())
    }
}

// ----- reading ------------------------------------------------------------------------------

/// A markdown section: its heading's text and where its body lies.
struct Section<'t> {
    heading: &'t str,
    body_start: usize,
    body_end: usize,
}

impl Section<'_> {
    fn body<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.body_start..self.body_end).unwrap_or("")
    }
}

/// The lines of `text` with their byte offsets.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let start = offset;
        offset += line.len();
        (start, line.trim_end_matches(['\n', '\r']))
    })
}

/// Whether a line opens or closes a code fence.
fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
}

/// The sections of `text` (ATX headings of any level, outside code fences).
fn sections(text: &str) -> Vec<Section<'_>> {
    let mut sections: Vec<Section<'_>> = Vec::new();
    let mut in_fence = false;
    for (start, line) in lines(text) {
        if is_fence(line) {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let trimmed = line.trim_start();
        let hashes = trimmed.bytes().take_while(|&b| b == b'#').count();
        let after = &trimmed[hashes..];
        let heading =
            (1..=6).contains(&hashes) && (after.is_empty() || after.starts_with([' ', '\t']));
        if heading {
            if let Some(last) = sections.last_mut() {
                last.body_end = start;
            }
            sections.push(Section {
                heading: after.trim().trim_end_matches('#').trim(),
                body_start: start + line.len(),
                body_end: text.len(),
            });
        }
    }
    sections
}

/// Refuses a document that does not name [`LAYER_URI`].
fn check_layer(text: &str) -> Result<(), InterfaceDocumentError> {
    if text.contains(LAYER_URI) {
        return Ok(());
    }
    match text.find(LAYER_FAMILY) {
        Some(at) => {
            let other: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '`' | ')' | ',' | ';' | '"'))
                .take(80)
                .collect();
            Err(InterfaceDocumentError::UnsupportedLayer(
                other.trim_end_matches(['.', ':']).to_owned(),
            ))
        }
        None => Err(InterfaceDocumentError::MissingLayer),
    }
}

/// The affordances JSON: (its offset in `text`, the JSON text). In order of preference: a
/// block under a heading mentioning affordances or the interface, then any fenced block or
/// bare object that holds an interface's members.
fn affordances_block(text: &str) -> Option<(usize, &str)> {
    let sections = sections(text);
    let named = sections.iter().find(|section| {
        let heading = section.heading.to_ascii_lowercase();
        heading.contains("affordance")
            || (heading.contains("interface") && !heading.contains("layer"))
    });
    if let Some(section) = named {
        if let Some(block) = first_json(text, section.body_start, section.body_end, |_| true) {
            return Some(block);
        }
    }
    first_json(text, 0, text.len(), looks_like_interface)
}

/// Whether a JSON text starts like an interface (an object naming actions, properties or
/// events).
fn looks_like_interface(json: &str) -> bool {
    ["\"actions\"", "\"properties\"", "\"events\""]
        .iter()
        .any(|member| json.contains(member))
}

/// The first fenced block starting with `{`, or bare JSON object (a line starting with `{`
/// outside fences), in `text[from..to]` that `accept` takes.
fn first_json(
    text: &str,
    from: usize,
    to: usize,
    accept: fn(&str) -> bool,
) -> Option<(usize, &str)> {
    let region = text.get(from..to)?;
    let mut fence: Option<usize> = None;
    for (start, line) in lines(region) {
        let at = from + start;
        if is_fence(line) {
            match fence.take() {
                Some(open) => {
                    let block = text.get(open..at)?;
                    if block.trim_start().starts_with('{') && accept(block) {
                        return Some((open, block));
                    }
                }
                None => fence = Some(text[at..].find('\n').map_or(text.len(), |end| at + end + 1)),
            }
            continue;
        }
        if fence.is_none() && line.trim_start().starts_with('{') {
            let rest = text.get(at..to)?;
            let end = bare_object_end(rest);
            let block = &rest[..end];
            if accept(block) {
                return Some((at, block));
            }
        }
    }
    None
}

/// Where a bare JSON object starting `rest` ends: just past its closing brace, or the whole
/// of `rest` when the object is not closed (the JSON reader then says what is wrong).
fn bare_object_end(rest: &str) -> usize {
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde::de::IgnoredAny>();
    match stream.next() {
        Some(Ok(_)) => stream.byte_offset(),
        _ => rest.len(),
    }
}

/// Whether `value` nests arrays and objects deeper than `limit` (itself counting as 1).
fn depth_exceeds(value: &Value, limit: usize) -> bool {
    let mut pending: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(members) => Box::new(members.values()),
            _ => continue,
        };
        if depth > limit {
            return true;
        }
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

/// The first affordance of `value` that cannot be read, as an error naming it.
fn bad_affordance(value: &Value) -> Option<InterfaceDocumentError> {
    fn first_bad<T: serde::de::DeserializeOwned>(
        value: &Value,
        member: &str,
        kind: &'static str,
    ) -> Option<InterfaceDocumentError> {
        let affordances = value.get(member)?.as_object()?;
        affordances.iter().find_map(|(name, affordance)| {
            serde_json::from_value::<T>(affordance.clone())
                .err()
                .map(|error| InterfaceDocumentError::BadAffordance {
                    kind,
                    name: name.chars().take(64).collect(),
                    reason: error.to_string(),
                })
        })
    }
    first_bad::<ActionAffordance>(value, "actions", "action")
        .or_else(|| first_bad::<PropertyAffordance>(value, "properties", "property"))
        .or_else(|| first_bad::<EventAffordance>(value, "events", "event"))
}

/// Counts, names and per-affordance consistency.
fn check_interface(
    interface: &Interface,
    limits: &InterfaceDocumentLimits,
) -> Result<(), InterfaceDocumentError> {
    if interface.len() > limits.max_affordances {
        return Err(InterfaceDocumentError::TooManyAffordances {
            count: interface.len(),
            limit: limits.max_affordances,
        });
    }
    let names = interface
        .actions
        .keys()
        .map(|name| ("action", name))
        .chain(interface.properties.keys().map(|name| ("property", name)))
        .chain(interface.events.keys().map(|name| ("event", name)));
    for (kind, name) in names {
        if name.is_empty() || name.len() > limits.max_name || name.chars().any(char::is_control) {
            return Err(InterfaceDocumentError::BadName {
                kind,
                name: name.chars().take(64).collect(),
                limit: limits.max_name,
            });
        }
    }
    let bad =
        |kind: &'static str, name: &str, reason: String| InterfaceDocumentError::BadAffordance {
            kind,
            name: name.to_owned(),
            reason,
        };
    for (name, action) in &interface.actions {
        for (term, schema) in [("input", &action.input), ("output", &action.output)] {
            if !is_schema(schema) {
                return Err(bad(
                    "action",
                    name,
                    format!("`{term}` is not a JSON Schema (an object or a boolean)"),
                ));
            }
        }
        match (action.mode, &action.stream) {
            (ActionMode::Stream, None) => {
                return Err(bad(
                    "action",
                    name,
                    "a stream action needs `stream`".to_owned(),
                ))
            }
            (mode, Some(_)) if mode != ActionMode::Stream => {
                return Err(bad(
                    "action",
                    name,
                    format!(
                        "`stream` is only for stream actions; this one's mode is {}",
                        mode.as_str()
                    ),
                ))
            }
            _ => {}
        }
    }
    for (name, property) in &interface.properties {
        if !is_schema(&property.schema) {
            return Err(bad(
                "property",
                name,
                "`schema` is not a JSON Schema (an object or a boolean)".to_owned(),
            ));
        }
    }
    for (name, event) in &interface.events {
        if !is_schema(&event.data) {
            return Err(bad(
                "event",
                name,
                "`data` is not a JSON Schema (an object or a boolean)".to_owned(),
            ));
        }
    }
    Ok(())
}

fn is_schema(schema: &Value) -> bool {
    matches!(schema, Value::Object(_) | Value::Bool(_))
}

/// `15 seconds`, `15 s`, `1500 ms`, `2 minutes` (a trailing `.` or more words ignored).
fn parse_duration(line: &str) -> Option<Duration> {
    let line = line.trim_matches(|c: char| c == '*' || c == '`' || c.is_whitespace());
    let digits_end = line
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(line.len());
    let amount: u64 = line.get(..digits_end)?.parse().ok()?;
    let unit: String = line[digits_end..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase();
    match unit.as_str() {
        "ms" | "millisecond" | "milliseconds" => Some(Duration::from_millis(amount)),
        "" | "s" | "sec" | "secs" | "second" | "seconds" => Some(Duration::from_secs(amount)),
        "min" | "mins" | "minute" | "minutes" => amount.checked_mul(60).map(Duration::from_secs),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
