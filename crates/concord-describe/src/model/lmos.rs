//! The LMOS terms of an agent description (`lmos:` prefix).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What an LMOS description describes, from its `@type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LmosKind {
    /// `lmos:Agent`.
    Agent,
    /// `lmos:Tool`.
    Tool,
}

/// `lmos:metadata`: who provides the agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LmosMetadata {
    /// `lmos:vendor`.
    #[serde(
        rename = "lmos:vendor",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub vendor: Option<LmosVendor>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

/// `lmos:vendor`: the organisation behind an agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LmosVendor {
    /// `lmos:name`.
    #[serde(rename = "lmos:name", default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `lmos:url`.
    #[serde(rename = "lmos:url", default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}
