//! The Thing: an agent description as a whole.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    ActionAffordance, DataSchema, EventAffordance, Form, LmosKind, LmosMetadata, MetaProtocol,
    MultiLanguage, OneOrMany, PropertyAffordance, SecurityScheme,
};
use crate::vocab;

/// A W3C WoT Thing Description 1.1 with the LMOS terms and Concord's extension: an agent
/// description.
///
/// Fields are the TD terms; [`Thing::extensions`] keeps every other term (JSON-LD
/// annotations, protocol bindings, other vocabularies), so reading and writing a document
/// loses nothing. Read one with [`crate::parse`], build one with [`crate::ThingBuilder`].
///
/// ```
/// let text = br#"{
///   "@context": ["https://www.w3.org/2022/wot/td/v1.1", {"lmos": "https://eclipse.dev/lmos/protocol/v1"}],
///   "@type": "lmos:Agent",
///   "title": "Echo",
///   "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
///   "security": "nosec_sc",
///   "actions": {"echo": {
///     "input": {"type": "string"}, "output": {"type": "string"},
///     "forms": [{"href": "https://echo.example.com/echo"}]
///   }}
/// }"#;
/// let thing = concord_describe::parse(text)?.thing;
/// assert_eq!(thing.lmos_kind(), Some(concord_describe::LmosKind::Agent));
/// let echo = &thing.actions.as_ref().unwrap()["echo"];
/// assert_eq!(echo.input.as_ref().unwrap().to_json(), serde_json::json!({"type": "string"}));
/// # Ok::<(), concord_describe::InvalidDescription>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Thing {
    /// JSON-LD context: the TD 1.1 URI, then prefixes (`lmos`, `concord`, ...).
    #[serde(rename = "@context")]
    pub context: OneOrMany<ContextEntry>,
    /// Semantic types (`lmos:Agent`, `lmos:Tool`, `Thing`, ...).
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub types: Option<OneOrMany<String>>,
    /// Identifier (a URI, often `urn:uuid:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The LMOS spelling of the identifier. Read from `thingId` or `thingID`, written as
    /// `thingId`; when `id` is present too, both must be equal.
    #[serde(
        rename = "thingId",
        alias = "thingID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub thing_id: Option<String>,
    /// Human-readable title.
    pub title: String,
    /// Titles by language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub titles: Option<MultiLanguage>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Descriptions by language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptions: Option<MultiLanguage>,
    /// Version information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionInfo>,
    /// When the description was created (RFC 3339 date-time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// When the description was last modified (RFC 3339 date-time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    /// URI of support information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support: Option<String>,
    /// Base URI that relative `href`s resolve against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Properties by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<IndexMap<String, PropertyAffordance>>,
    /// Actions by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<IndexMap<String, ActionAffordance>>,
    /// Events by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<IndexMap<String, EventAffordance>>,
    /// Links to related resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<Link>>,
    /// Thing-level forms (read all properties, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forms: Option<Vec<Form>>,
    /// Names of the security definitions that apply by default.
    pub security: OneOrMany<String>,
    /// Security schemes by name (at least one).
    pub security_definitions: IndexMap<String, SecurityScheme>,
    /// Profiles the description follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<OneOrMany<String>>,
    /// Named data schemas (referenced from additional responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_definitions: Option<IndexMap<String, DataSchema>>,
    /// Variables of URI templates in Thing-level forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_variables: Option<IndexMap<String, DataSchema>>,
    /// `lmos:metadata`: the vendor.
    #[serde(
        rename = "lmos:metadata",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub lmos_metadata: Option<LmosMetadata>,
    /// `concord:metaProtocol`: the meta-protocol endpoint, versions, capabilities and
    /// consensus protocols.
    #[serde(
        rename = "concord:metaProtocol",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub meta_protocol: Option<MetaProtocol>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl Thing {
    /// Whether the description is an LMOS agent or tool, from `@type`.
    pub fn lmos_kind(&self) -> Option<LmosKind> {
        let types = self.types.as_ref()?;
        types.iter().find_map(|t| match t.as_str() {
            vocab::LMOS_AGENT => Some(LmosKind::Agent),
            vocab::LMOS_TOOL => Some(LmosKind::Tool),
            _ => None,
        })
    }

    /// The identifier, from `id` or else the LMOS `thingId`.
    pub fn identifier(&self) -> Option<&str> {
        self.id.as_deref().or(self.thing_id.as_deref())
    }

    /// The IRI a prefix is bound to in `@context`.
    pub fn prefix_iri(&self, prefix: &str) -> Option<&str> {
        self.context.iter().find_map(|entry| match entry {
            ContextEntry::Definitions(definitions) => definitions.get(prefix)?.as_str(),
            ContextEntry::Uri(_) => None,
        })
    }
}

/// One entry of `@context`: a context URI, or an object of prefix bindings and JSON-LD
/// keywords (`@language`, ...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ContextEntry {
    /// A context URI.
    Uri(String),
    /// Prefix bindings and keywords.
    Definitions(Map<String, Value>),
}

/// `version`: the description's version, and its Thing Model's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VersionInfo {
    /// Version of this instance (required).
    pub instance: String,
    /// Version of the Thing Model it was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

/// A link to a related resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Link {
    /// Target URI.
    pub href: String,
    /// Media type hint of the target.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Relation (`service-doc`, `icon`, `type`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel: Option<String>,
    /// Context of the link, when not the Thing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// Icon sizes (`"64x64"`), for `rel: "icon"` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<String>,
    /// Language(s) of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hreflang: Option<OneOrMany<String>>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}
