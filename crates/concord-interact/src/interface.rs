//! What one negotiated session covers: the provider's affordances a requester wants
//! (actions with their interaction mode, properties, events), with their payload schemas.
//!
//! An [`Interface`] is plain data. The interface protocol document (`document` module)
//! states it together with the interaction layer ([`LAYER_URI`]), so a peer's handler only
//! deals with payloads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The URI and version of this interaction layer, as an interface document states it.
pub const LAYER_URI: &str = "urn:concord:interaction:1";

/// The affordances one session covers, by name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Interface {
    /// Actions, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub actions: BTreeMap<String, ActionAffordance>,
    /// Properties, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, PropertyAffordance>,
    /// Events, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, EventAffordance>,
}

impl Interface {
    /// Whether it covers nothing.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.properties.is_empty() && self.events.is_empty()
    }

    /// How many affordances it covers.
    pub fn len(&self) -> usize {
        self.actions.len() + self.properties.len() + self.events.len()
    }
}

/// An action: its payload schemas and how it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionAffordance {
    /// What it does, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of `input`.
    #[serde(default = "any_object")]
    pub input: Value,
    /// JSON Schema of `output` (of the one response, or of the terminal status).
    #[serde(default = "any_object")]
    pub output: Value,
    /// How it answers.
    #[serde(default)]
    pub mode: ActionMode,
    /// For a stream action: what its streams carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamSpec>,
}

/// How an action answers an `invokeaction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionMode {
    /// One response with the output (request-reply).
    #[default]
    Reply,
    /// A response with an `actionID`, progress notifications, then exactly one terminal
    /// notification (completed, failed or cancelled); `queryaction` and `cancelaction`
    /// by that id. Described with `synchronous: false`.
    Progress,
    /// Fire and forget: no response unless it fails.
    Notify,
    /// A response naming a stream both ways (request-stream / response-stream).
    Stream,
}

impl ActionMode {
    /// The configuration and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reply => "reply",
            Self::Progress => "progress",
            Self::Notify => "notify",
            Self::Stream => "stream",
        }
    }
}

/// What a stream action's streams carry, and how their flow control starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamSpec {
    /// Media type of the requester's bytes (e.g. `audio/pcm;rate=24000;channels=1`).
    pub content_type: String,
    /// Media type of the provider's bytes (absent: the same as `content_type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_content_type: Option<String>,
    /// Bytes of one frame (a 20 ms PCM16 mono frame at 24 kHz is 960), 0 when the bytes
    /// are not framed. A realtime sender sends each frame whole or drops it; a reader
    /// gets byte pieces and recovers frames by this size.
    #[serde(default)]
    pub frame_bytes: u32,
    /// Credit each direction starts with, in bytes.
    pub initial_credit: u64,
    /// Whether senders drop rather than buffer when out of credit (live audio).
    #[serde(default)]
    pub realtime: bool,
}

/// A property: its value's schema and what a requester may do with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropertyAffordance {
    /// What it is, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of the value.
    pub schema: Value,
    /// Whether `writeproperty` is allowed.
    #[serde(default)]
    pub writable: bool,
    /// Whether `observeproperty` is allowed.
    #[serde(default)]
    pub observable: bool,
}

/// An event: the schema of its data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventAffordance {
    /// What it reports, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of each event's `data`.
    #[serde(default = "any_object")]
    pub data: Value,
}

fn any_object() -> Value {
    json!({"type": "object"})
}
