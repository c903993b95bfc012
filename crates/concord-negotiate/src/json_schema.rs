//! Reading the parts of a JSON Schema the negotiators (and the handler rules built on
//! them) look at: object properties, `required` names and types.
//!
//! ```
//! use concord_negotiate::json_schema::{is_object_schema, properties, required, types};
//! use serde_json::json;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"productId": {"type": "string"}, "price": {"type": ["number", "null"]}},
//!     "required": ["productId"]
//! });
//! assert!(is_object_schema(&schema));
//! let names: Vec<&str> = properties(&schema).into_iter().map(|(name, _)| name).collect();
//! assert_eq!(names, ["productId", "price"]);
//! assert_eq!(required(&schema), ["productId"]);
//! assert_eq!(types(&schema["properties"]["price"]), ["number", "null"]);
//! ```

use serde_json::Value;

/// The object properties of a schema, in document order (none when `properties` is
/// absent or not an object).
pub fn properties(schema: &Value) -> Vec<(&str, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|map| map.iter().map(|(name, sub)| (name.as_str(), sub)).collect())
        .unwrap_or_default()
}

/// The `required` names of a schema (strings only).
pub fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether the schema describes an object: by `type` (`"object"`, or a list naming it),
/// or, without a `type`, by having a `properties` object.
pub fn is_object_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "object",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "object"),
        _ => schema.get("properties").is_some_and(Value::is_object),
    }
}

/// The JSON type names a schema allows, as written in `type` (empty: any).
pub fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}
