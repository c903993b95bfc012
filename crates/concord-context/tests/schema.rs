//! Merged data checked against its schema, violations located by JSON pointers.

use concord_context::{Context, Identity, InstanceId, Kind, ValidateError, View, Violation};
use serde_json::json;

fn context(messages: serde_json::Value) -> Context {
    Context::from_json(messages.to_string().as_bytes()).unwrap()
}

const USER_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "number", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["name"],
  "additionalProperties": false
}"#;

fn user_schema() -> serde_json::Value {
    serde_json::from_str(USER_SCHEMA).unwrap()
}

#[test]
fn the_merged_value_is_checked_not_each_message() {
    // Neither message alone has `name` and a valid age; merged they are valid.
    let valid = context(json!([
        {"type": "data", "kind": "user", "data": {"age": -1}, "schema": user_schema()},
        {"type": "data", "kind": "user", "data": {"name": "John Doe", "age": 30}}
    ]));
    assert_eq!(valid.validate(&View::Global).unwrap(), []);
}

#[test]
fn violations_carry_json_pointers() {
    let invalid = context(json!([
        {"type": "data", "kind": "user", "data": {"name": "John Doe"}, "schema": user_schema()},
        {"type": "data", "kind": "user", "data": {"age": -3, "tags": ["ok", 7], "nickname": "JD"}}
    ]));
    let violations = invalid.validate(&View::Global).unwrap();
    let located: Vec<(&str, &str)> = violations
        .iter()
        .map(|v| (v.instance_pointer.as_str(), v.schema_pointer.as_str()))
        .collect();
    assert_eq!(
        located,
        [
            ("/age", "/properties/age/minimum"),
            ("/tags/1", "/properties/tags/items/type"),
            ("", "/additionalProperties"),
        ]
    );
    assert_eq!(
        violations[0].identity,
        Identity {
            kind: Kind::new("user").unwrap(),
            instance: None
        }
    );
    assert_eq!(
        violations[1].to_string(),
        "¶user at /tags/1: 7 is not of type \"string\" (schema /properties/tags/items/type)"
    );
}

#[test]
fn instances_are_checked_with_what_they_see() {
    let context = context(json!([
        {"type": "state", "schema": {"required": ["task", "status"], "properties": {"status": {"enum": ["open", "done"]}}},
         "task": "Draft", "status": "open"},
        {"type": "state", "_instance": "A", "status": "done"},
        {"type": "state", "_instance": "B", "status": "lost"}
    ]));
    // Instance A only overrides `status`; with the global `task` it is valid.
    let violations: Vec<Violation> = context.validate(&View::Global).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(
        violations[0].identity.instance,
        Some(InstanceId::new("B").unwrap())
    );
    assert_eq!(violations[0].instance_pointer, "/status");
    assert_eq!(
        context
            .validate(&View::Instance(InstanceId::new("A").unwrap()))
            .unwrap(),
        []
    );
    assert_eq!(
        context
            .validate(&View::Instance(InstanceId::new("B").unwrap()))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn an_invalid_schema_is_an_error_naming_its_message() {
    let context = context(json!([
        {"type": "text", "text": "x"},
        {"type": "data", "kind": "user", "data": {}, "schema": {"type": "strnig"}}
    ]));
    let error = context.validate(&View::Global).unwrap_err();
    assert!(
        matches!(error, ValidateError::InvalidSchema { message: 1, .. }),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .starts_with("message at /1 (¶user): invalid schema: "),
        "{error}"
    );
}

#[test]
fn remote_references_are_not_fetched() {
    let context = context(json!([
        {"type": "data", "data": {}, "schema": {"$ref": "https://example.invalid/schema.json"}}
    ]));
    assert!(matches!(
        context.validate(&View::Global),
        Err(ValidateError::InvalidSchema { .. })
    ));
}

#[test]
fn data_without_a_schema_is_not_checked() {
    let context = context(json!([{"type": "data", "data": {"anything": [1, "two"]}}]));
    assert_eq!(context.validate(&View::Global).unwrap(), []);
}
