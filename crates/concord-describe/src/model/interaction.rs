//! Concord's terms on actions: how an action answers (`concord:mode`) and, for a stream
//! action, what its streams carry (`concord:stream`).
//!
//! ```json
//! "talk": {
//!   "concord:mode": "stream",
//!   "concord:stream": {
//!     "concord:contentType": "audio/pcm;rate=24000;channels=1",
//!     "concord:frameBytes": 960,
//!     "concord:initialCredit": 96000,
//!     "concord:realtime": true
//!   },
//!   "forms": [{"href": "wss://talk.example.com/concord", "op": "invokeaction"}]
//! }
//! ```

use serde::{Deserialize, Serialize};

/// `concord:mode`: how an action answers an `invokeaction` (absent: [`InteractionMode::Reply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum InteractionMode {
    /// One response with the output (request-reply).
    #[default]
    Reply,
    /// A response with an action id, progress notifications, then one terminal
    /// notification; queried and cancelled by that id (`synchronous: false`).
    Progress,
    /// Fire and forget: no response unless it fails.
    Notify,
    /// A response naming a binary stream both ways, described by `concord:stream`.
    Stream,
}

impl InteractionMode {
    /// Every mode.
    pub const ALL: [InteractionMode; 4] = [Self::Reply, Self::Progress, Self::Notify, Self::Stream];

    /// The name as written in `concord:mode`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Reply => "reply",
            Self::Progress => "progress",
            Self::Notify => "notify",
            Self::Stream => "stream",
        }
    }

    /// Parses a `concord:mode` value (exact, lowercase).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }
}

/// `concord:stream`: what a stream action's streams carry and how their credit-based flow
/// control starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StreamDescription {
    /// Media type of the requester's bytes (`audio/pcm;rate=24000;channels=1`).
    #[serde(rename = "concord:contentType")]
    pub content_type: String,
    /// Media type of the provider's bytes (absent: the same as `content_type`).
    #[serde(
        rename = "concord:outputContentType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_content_type: Option<String>,
    /// Bytes of one frame, 0 when the bytes are not framed (absent: 0).
    #[serde(rename = "concord:frameBytes", default)]
    pub frame_bytes: u32,
    /// Credit each direction starts with, in bytes.
    #[serde(rename = "concord:initialCredit")]
    pub initial_credit: u64,
    /// Whether senders drop rather than buffer when out of credit (absent: false).
    #[serde(rename = "concord:realtime", default)]
    pub realtime: bool,
}

impl StreamDescription {
    /// Unframed, buffered streams of `content_type` both ways, starting with
    /// `initial_credit` bytes of credit.
    pub fn new(content_type: impl Into<String>, initial_credit: u64) -> Self {
        Self {
            content_type: content_type.into(),
            output_content_type: None,
            frame_bytes: 0,
            initial_credit,
            realtime: false,
        }
    }
}
