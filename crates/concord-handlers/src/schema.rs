//! Reading the parts of a JSON Schema the handler rules use: properties, `required`,
//! types, defaults and consts.

use serde_json::Value;

pub(crate) use concord_negotiate::json_schema::{is_object_schema, properties, required, types};

/// Whether the schema lists object properties (so values are mapped field by field).
pub(crate) fn has_properties(schema: &Value) -> bool {
    schema.get("properties").is_some_and(Value::is_object)
}

/// Whether `name` is required by `schema`.
pub(crate) fn is_required(schema: &Value, name: &str) -> bool {
    required(schema).contains(&name)
}

/// The schema of an array's items, when the schema describes an array with one item schema.
pub(crate) fn items(schema: &Value) -> Option<&Value> {
    let is_array = match schema.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "array"),
        _ => false,
    };
    schema
        .get("items")
        .filter(|items| is_array && items.is_object())
}

/// Whether a value of schema `from` can stand where schema `to` is expected (no conversion).
pub(crate) fn compatible(from: &Value, to: &Value) -> bool {
    let (from, to) = (types(from), types(to));
    if from.is_empty() || to.is_empty() {
        return true;
    }
    from.iter()
        .filter(|kind| **kind != "null")
        .all(|kind| to.contains(kind) || (*kind == "integer" && to.contains(&"number")))
}

/// The value a schema fixes: its `const`, or an `enum` of exactly one value.
pub(crate) fn fixed_value(schema: &Value) -> Option<&Value> {
    schema.get("const").or_else(|| {
        schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|values| values.len() == 1)
            .and_then(|values| values.first())
    })
}

/// The value to write when nothing supplies one: the schema's `const`, else its `default`.
pub(crate) fn fallback(schema: &Value) -> Option<&Value> {
    fixed_value(schema).or_else(|| schema.get("default"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compatibility_allows_widening_only() {
        let integer = json!({"type": "integer"});
        let number = json!({"type": "number"});
        let string = json!({"type": "string"});
        assert!(compatible(&integer, &number));
        assert!(!compatible(&number, &integer));
        assert!(!compatible(&string, &number));
        assert!(compatible(&json!({}), &string));
        assert!(compatible(&json!({"type": ["string", "null"]}), &string));
    }

    #[test]
    fn fixed_values_and_fallbacks() {
        assert_eq!(
            fixed_value(&json!({"const": "REQUEST"})),
            Some(&json!("REQUEST"))
        );
        assert_eq!(fixed_value(&json!({"enum": ["a"]})), Some(&json!("a")));
        assert_eq!(fixed_value(&json!({"enum": ["a", "b"]})), None);
        assert_eq!(fallback(&json!({"default": 10})), Some(&json!(10)));
    }
}
