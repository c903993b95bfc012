//! The terms that say what something is: its semantic types, titles and descriptions.

use serde::{Deserialize, Serialize};

use super::{MultiLanguage, OneOrMany};

/// `@type`, `title(s)` and `description(s)`: what an action, an event or a data schema is,
/// for machines and for people. Flattened into its owner, so the terms sit beside the
/// owner's own terms, as TD 1.1 writes them.
///
/// ```
/// use concord_describe::DataSchema;
/// use serde_json::json;
///
/// let schema = DataSchema::from_json(json!({"title": "City", "type": "string", "x:y": 1}))?;
/// assert_eq!(schema.annotations.title.as_deref(), Some("City"));
/// // Written back in the same order, first the annotations, last the unknown terms.
/// assert_eq!(schema.to_json().to_string(), r#"{"title":"City","type":"string","x:y":1}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Annotations {
    /// Semantic annotations (`@type`).
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub types: Option<OneOrMany<String>>,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Titles by language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub titles: Option<MultiLanguage>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Descriptions by language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptions: Option<MultiLanguage>,
}
