//! Data schemas: the JSON Schema subset a TD uses for property values, action input and
//! output, and event data.

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Number, Value};

use super::{Annotations, OneOrMany};

/// The JSON type a data schema declares (`"type"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataType {
    /// `true` or `false`.
    Boolean,
    /// A number with no fractional part.
    Integer,
    /// Any number.
    Number,
    /// A string.
    String,
    /// An object.
    Object,
    /// An array.
    Array,
    /// `null`.
    Null,
}

impl DataType {
    /// The name as written in `"type"`.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Boolean => "boolean",
            DataType::Integer => "integer",
            DataType::Number => "number",
            DataType::String => "string",
            DataType::Object => "object",
            DataType::Array => "array",
            DataType::Null => "null",
        }
    }

    /// Parses a `"type"` value.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "boolean" => DataType::Boolean,
            "integer" => DataType::Integer,
            "number" => DataType::Number,
            "string" => DataType::String,
            "object" => DataType::Object,
            "array" => DataType::Array,
            "null" => DataType::Null,
            _ => return None,
        })
    }

    /// Whether `value` is of this type (JSON Schema rules: `2.0` is an integer).
    pub fn admits(self, value: &Value) -> bool {
        match (self, value) {
            (DataType::Boolean, Value::Bool(_)) => true,
            (DataType::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            (DataType::Number, Value::Number(_)) => true,
            (DataType::String, Value::String(_)) => true,
            (DataType::Object, Value::Object(_)) => true,
            (DataType::Array, Value::Array(_)) => true,
            (DataType::Null, Value::Null) => true,
            _ => false,
        }
    }
}

/// A TD data schema: the JSON Schema terms TD 1.1 defines, plus every other term
/// (`pattern`, `additionalProperties`, prefixed annotations...) kept in `extensions`.
///
/// Numbers stay [`serde_json::Number`] so a document reads and writes back unchanged.
/// Turn a schema into plain JSON Schema with [`DataSchema::to_json`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DataSchema {
    /// `@type`, title(s) and description(s) of the schema.
    #[serde(flatten)]
    pub annotations: Annotations,
    /// The declared JSON type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub data_type: Option<DataType>,
    /// The only allowed value.
    #[serde(
        rename = "const",
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub constant: Option<Value>,
    /// Value to assume when none is given.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Value>,
    /// Unit of a number (for example `"celsius"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub enumeration: Option<Vec<Value>>,
    /// The value must match exactly one of these schemas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<DataSchema>>,
    /// Format hint (`"date-time"`, `"uri"`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Content encoding of a string (`"base64"`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    /// Media type of a string's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_media_type: Option<String>,
    /// Whether the value is only read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Whether the value is only written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_only: Option<bool>,
    /// Schema of array items: one schema, or one per position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<OneOrMany<DataSchema>>>,
    /// Minimum array length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<Number>,
    /// Maximum array length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<Number>,
    /// Inclusive lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<Number>,
    /// Inclusive upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<Number>,
    /// Exclusive lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_minimum: Option<Number>,
    /// Exclusive upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_maximum: Option<Number>,
    /// The value must be a multiple of this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiple_of: Option<Number>,
    /// Minimum string length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<Number>,
    /// Maximum string length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<Number>,
    /// Schemas of object members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<IndexMap<String, DataSchema>>,
    /// Members that must be present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl DataSchema {
    /// Reads a data schema from JSON (for example an action's input written with `json!`).
    pub fn from_json(schema: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(schema)
    }

    /// The schema as plain JSON (a JSON Schema document with TD annotations).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Deserializes a present term as `Some`, even when it is `null` (`"const": null`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_null_const_and_unknown_terms() {
        let json = json!({"type": "null", "const": null, "pattern": "^a", "x:y": 1, "minimum": 0});
        let schema = DataSchema::from_json(json.clone()).unwrap();
        assert_eq!(schema.constant, Some(Value::Null));
        assert_eq!(schema.extensions["pattern"], "^a");
        assert_eq!(schema.to_json(), json);
    }

    #[test]
    fn integer_admits_whole_floats_only() {
        assert!(DataType::Integer.admits(&json!(2.0)));
        assert!(!DataType::Integer.admits(&json!(2.5)));
        assert!(DataType::Number.admits(&json!(-3)));
        assert!(!DataType::String.admits(&json!(null)));
    }
}
