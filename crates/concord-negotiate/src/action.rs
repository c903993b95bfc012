//! What the negotiators reason about: a provider's published action, a requester's need,
//! and the canonical protocol document built from an action.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::document::{Encoding, ErrorConvention, ProtocolDocument, ProtocolSpec};
use crate::envelope::escape;
use crate::json_schema::is_object_schema;
use crate::naming::{convert, NamingStyle};

/// An action an agent publishes in its description: name and JSON Schemas.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionSpec {
    /// The action's name (its key in the description's `actions`).
    pub name: String,
    /// What it does, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of the action's input.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// JSON Schema of the action's output.
    #[serde(default = "empty_object")]
    pub output: Value,
}

/// The schema of "no data": an empty object.
pub(crate) fn empty_object() -> Value {
    json!({"type": "object"})
}

/// What a requester wants from a peer's action: the data it can send and the fields it
/// needs back, in its own naming.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Need {
    /// The peer action to call.
    pub action: String,
    /// JSON Schema of the data we will supply (absent: we supply what the action asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// JSON Schema of the data we need back (absent: whatever the action returns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// The field of a response that carries an action's output: the output schema's title in
/// camelCase (`ProductInfo` → `productInfo`, as in the seeds), else `result`.
pub fn result_field(output: &Value) -> String {
    output
        .get("title")
        .and_then(Value::as_str)
        .map(|title| convert(title, NamingStyle::CamelCase))
        .filter(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "result".to_owned())
}

/// The request field that carries a non-object action input.
pub(crate) const INPUT_FIELD: &str = "input";

/// The canonical protocol for calling `action`: the seeds' envelope (messageId, type,
/// action; status {code, message}) around the action's own input and output schemas,
/// HTTP status codes for errors, the given timeout, JSON encoding.
///
/// ```
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument};
/// use serde_json::json;
/// use std::time::Duration;
///
/// let action = ActionSpec {
///     name: "getProductInfo".into(),
///     description: "Get product information by id.".into(),
///     input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
///     output: json!({"title": "ProductInfo", "type": "object", "properties": {"price": {"type": "number"}}}),
/// };
/// let document = ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15))).unwrap();
/// let request = document.request_schema.unwrap();
/// assert_eq!(request["properties"]["action"]["const"], "getProductInfo");
/// assert_eq!(request["required"], json!(["messageId", "type", "action", "productId"]));
/// assert!(document.response_schema.unwrap()["properties"]["productInfo"].is_object());
/// ```
pub fn canonical_protocol(action: &ActionSpec, timeout: Duration) -> String {
    ProtocolDocument::write(&canonical_spec(action, timeout))
}

pub(crate) fn canonical_spec(action: &ActionSpec, timeout: Duration) -> ProtocolSpec {
    let title = convert(&action.name, NamingStyle::PascalCase);
    let mut request_properties = Map::new();
    request_properties.insert(
        "messageId".into(),
        json!({"type": "string", "description": "A random string identifier for the message"}),
    );
    request_properties.insert("type".into(), json!({"type": "string", "const": "REQUEST"}));
    request_properties.insert(
        "action".into(),
        json!({"type": "string", "const": action.name}),
    );
    let request_schema = request_schema(&title, request_properties, &action.input);
    let result = result_field(&action.output);
    let output = nested(&action.output, &result);
    let response_schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("{title}Response"),
        "type": "object",
        "properties": {
            "messageId": {"type": "string", "description": "The messageId from the request"},
            "type": {"type": "string", "const": "RESPONSE"},
            "status": {
                "type": "object",
                "properties": {
                    "code": {"type": "integer", "description": "HTTP status code"},
                    "message": {"type": "string", "description": "Status message"}
                },
                "required": ["code", "message"]
            },
            result.clone(): output,
        },
        "required": ["messageId", "type", "status"],
    });
    let description = if action.description.trim().is_empty() {
        format!("Call the `{}` action.", action.name)
    } else {
        action.description.trim().to_owned()
    };
    ProtocolSpec {
        requirement: description,
        flow: format!(
            "The requester sends a `{name}` request; the provider runs the action and answers with \
             one response carrying the same messageId. An error response carries an HTTP status \
             code of 400 or more and no `{result}`.",
            name = action.name,
            result = result_field(&action.output),
        ),
        request_schema,
        response_schema,
        error_convention: ErrorConvention {
            http_status_codes: true,
            code_pointer: Some("/status/code".into()),
            message_pointer: Some("/status/message".into()),
            custom_codes: Vec::new(),
        },
        timeout,
        encoding: Encoding::Json,
    }
}

/// Keywords of an action's input that are about the input as a document, not about the
/// request message: they are not carried into the request schema.
const ANNOTATIONS: [&str; 7] = [
    "$schema",
    "$id",
    "title",
    "description",
    "examples",
    "default",
    "$comment",
];

/// The request schema: the envelope's properties, then the action's input schema as
/// published, every keyword kept (`additionalProperties`, `patternProperties`,
/// `propertyNames`, `minProperties`/`maxProperties`, `dependentRequired`, `if`/`then`,
/// composition, `$defs`...), so a request validates exactly as its input would. An input
/// that is not an object travels in the one field `input`, its references rebased there.
fn request_schema(title: &str, envelope: Map<String, Value>, input: &Value) -> Value {
    let names: Vec<Value> = envelope.keys().map(|name| json!(name)).collect();
    let mut schema = Map::new();
    schema.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    schema.insert("title".into(), json!(format!("{title}Request")));
    schema.insert("type".into(), json!("object"));
    let Some(published) = input.as_object().filter(|_| is_object_schema(input)) else {
        let mut properties = envelope;
        properties.insert(INPUT_FIELD.into(), nested(input, INPUT_FIELD));
        schema.insert("properties".into(), Value::Object(properties));
        let mut required = names;
        required.push(json!(INPUT_FIELD));
        schema.insert("required".into(), Value::Array(required));
        return Value::Object(schema);
    };
    let mut properties = envelope.clone();
    if let Some(own) = published.get("properties").and_then(Value::as_object) {
        for (name, sub) in own {
            properties.insert(name.clone(), sub.clone());
        }
    }
    schema.insert("properties".into(), Value::Object(properties));
    let mut required = names.clone();
    for name in published
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !required.contains(name) {
            required.push(name.clone());
        }
    }
    schema.insert("required".into(), Value::Array(required));
    for (keyword, value) in published {
        if ANNOTATIONS.contains(&keyword.as_str())
            || ["type", "properties", "required"].contains(&keyword.as_str())
        {
            continue;
        }
        let value = match keyword.as_str() {
            // The envelope's members count among the message's members.
            "minProperties" | "maxProperties" => value
                .as_u64()
                .map(|count| json!(count.saturating_add(envelope.len() as u64)))
                .unwrap_or_else(|| value.clone()),
            // The envelope's names are allowed whatever the input's names must look like.
            "propertyNames" => json!({"anyOf": [{"enum": names}, value]}),
            // A member that closes its properties lets the envelope's through.
            "allOf" | "oneOf" | "anyOf" => admit(value, &envelope, 0),
            _ => value.clone(),
        };
        schema.insert(keyword.clone(), value);
    }
    Value::Object(schema)
}

/// How deep [`admit`] follows composed members.
const MAX_ADMIT_DEPTH: usize = 8;

/// `members` (of an `allOf`/`oneOf`/`anyOf`), each that closes its properties
/// (`additionalProperties` or `unevaluatedProperties` other than `true`) given the
/// envelope's properties too, so that a request's envelope does not break it.
fn admit(members: &Value, envelope: &Map<String, Value>, depth: usize) -> Value {
    let Some(list) = members.as_array() else {
        return members.clone();
    };
    let admitted = list.iter().map(|member| {
        let Some(object) = member.as_object() else {
            return member.clone();
        };
        let mut object = object.clone();
        let closes = ["additionalProperties", "unevaluatedProperties"]
            .iter()
            .any(|keyword| {
                object
                    .get(*keyword)
                    .is_some_and(|value| value != &json!(true))
            });
        if closes {
            let properties = object
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(properties) = properties.as_object_mut() {
                for (name, schema) in envelope {
                    properties
                        .entry(name.clone())
                        .or_insert_with(|| schema.clone());
                }
            }
        }
        if depth < MAX_ADMIT_DEPTH {
            for keyword in ["allOf", "oneOf", "anyOf"] {
                if let Some(inner) = object.get(keyword) {
                    let inner = admit(inner, envelope, depth + 1);
                    object.insert(keyword.to_owned(), inner);
                }
            }
        }
        Value::Object(object)
    });
    Value::Array(admitted.collect())
}

/// A schema that will sit in the field `field` of a message's schema: its local
/// references (`#/$defs/Name`, any `#/…` pointer, pointing into itself) rebased onto where
/// it now sits, its definitions kept in it; its title and `$schema` dropped.
fn nested(schema: &Value, field: &str) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.remove("$schema");
        object.remove("$id");
    }
    rebase(&mut schema, &format!("/properties/{}", escape(field)));
    schema
}

/// Rewrites every local `$ref` in `schema` to point `prefix` deeper.
fn rebase(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(object) => {
            for (keyword, value) in object.iter_mut() {
                match value {
                    Value::String(reference) if keyword == "$ref" => {
                        if let Some(pointer) = reference.strip_prefix('#') {
                            *reference = format!("#{prefix}{pointer}");
                        }
                    }
                    other => rebase(other, prefix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rebase(item, prefix)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    //! The drafted protocol carries the published schemas' every rule.

    use super::*;
    use crate::validation::ProtocolSchemas;

    fn action(input: Value, output: Value) -> ActionSpec {
        ActionSpec {
            name: "book".into(),
            description: "Books a table.".into(),
            input,
            output,
        }
    }

    /// The drafted document, parsed back as a peer reads it.
    fn drafted(action: &ActionSpec) -> ProtocolDocument {
        ProtocolDocument::parse(&canonical_protocol(action, Duration::from_secs(15))).unwrap()
    }

    fn request(fields: Value) -> Value {
        let mut message = json!({"messageId": "m1", "type": "REQUEST", "action": "book"});
        if let (Some(message), Some(fields)) = (message.as_object_mut(), fields.as_object()) {
            message.extend(fields.clone());
        }
        message
    }

    /// Whether the drafted protocol's request schema takes `fields` as the input.
    fn takes(schemas: &ProtocolSchemas, fields: Value) -> bool {
        schemas.check_request(&request(fields)).is_empty()
    }

    #[test]
    fn every_keyword_of_the_input_survives_the_draft() {
        let input = json!({
            "title": "Booking",
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 8, "pattern": "^[A-Z]"},
                "seats": {"type": "integer", "minimum": 1, "maximum": 12, "multipleOf": 1},
                "when": {"type": "string", "format": "date"},
                "kind": {"enum": ["indoor", "terrace"]},
                "venue": {"const": "main"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2, "uniqueItems": true},
                "contact": {
                    "type": "object",
                    "properties": {"phone": {"type": "string"}},
                    "required": ["phone"],
                    "additionalProperties": false
                },
                "diet": {"$ref": "#/$defs/Diet"}
            },
            "patternProperties": {"^x-": {"type": "string"}},
            "required": ["name", "seats"],
            "additionalProperties": false,
            "minProperties": 2,
            "maxProperties": 6,
            "dependentRequired": {"when": ["kind"]},
            "$defs": {"Diet": {"type": "string", "enum": ["vegan", "any"]}}
        });
        let document = drafted(&action(input, json!({"type": "object"})));
        let request = document.request_schema.clone().unwrap();
        for keyword in [
            "additionalProperties",
            "patternProperties",
            "dependentRequired",
            "$defs",
        ] {
            assert!(request.get(keyword).is_some(), "{keyword} lost: {request}");
        }
        assert_eq!(request["minProperties"], 5, "the envelope's three count");
        assert_eq!(request["maxProperties"], 9);
        let schemas = ProtocolSchemas::compile(&document).unwrap();
        let good = json!({"name": "Ada", "seats": 2});
        assert!(takes(&schemas, good.clone()));
        let with = |member: &str, value: Value| {
            let mut fields = good.clone();
            fields[member] = value;
            fields
        };
        assert!(takes(&schemas, with("x-note", json!("window"))));
        assert!(takes(&schemas, with("diet", json!("vegan"))));
        // Each rule of the published input refuses here as it does there.
        for (why, fields) in [
            ("a misspelt optional member", with("seets", json!(3))),
            ("patternProperties", with("x-note", json!(1))),
            ("minLength", with("name", json!("A"))),
            ("maxLength", with("name", json!("Abcdefghij"))),
            ("pattern", with("name", json!("ada"))),
            ("minimum", with("seats", json!(0))),
            ("maximum", with("seats", json!(13))),
            ("type", with("seats", json!(2.5))),
            ("enum", with("kind", json!("roof"))),
            ("const", with("venue", json!("annex"))),
            ("items", with("tags", json!([1]))),
            ("minItems", with("tags", json!([]))),
            ("maxItems", with("tags", json!(["a", "b", "c"]))),
            ("uniqueItems", with("tags", json!(["a", "a"]))),
            ("a nested required member", with("contact", json!({}))),
            (
                "nested additionalProperties",
                with("contact", json!({"phone": "1", "fax": "2"})),
            ),
            ("$ref to $defs", with("diet", json!("meat"))),
            ("dependentRequired", with("when", json!("2026-12-03"))),
            ("required", json!({"name": "Ada"})),
        ] {
            assert!(!takes(&schemas, fields.clone()), "{why}: {fields}");
        }
    }

    #[test]
    fn composed_and_named_inputs_keep_their_rules_and_admit_the_envelope() {
        let input = json!({
            "type": "object",
            "allOf": [{"properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}],
            "propertyNames": {"pattern": "^[a-z]+$"}
        });
        let document = drafted(&action(input, json!({"type": "object"})));
        let schemas = ProtocolSchemas::compile(&document).unwrap();
        assert!(takes(&schemas, json!({"city": "Oslo"})));
        assert!(!takes(&schemas, json!({"city": "Oslo", "cty": "x"})));
        assert!(!takes(&schemas, json!({})));
    }

    #[test]
    fn a_non_object_input_and_the_output_keep_their_definitions() {
        let input = json!({"$ref": "#/$defs/Id", "$defs": {"Id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]+$"}}});
        let output = json!({
            "title": "Tree",
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "additionalProperties": false,
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "additionalProperties": false}}
        });
        let document = drafted(&action(input, output));
        let schemas = ProtocolSchemas::compile(&document).unwrap();
        assert!(schemas
            .check_request(&request(json!({"input": "0a-1b"})))
            .is_empty());
        assert!(!schemas
            .check_request(&request(json!({"input": "XYZ"})))
            .is_empty());
        let response = |tree: Value| json!({"messageId": "m1", "type": "RESPONSE", "status": {"code": 200, "message": "OK"}, "tree": tree});
        let tree = |leaf: Value| (0..9).fold(leaf, |inner, _| json!({"children": [inner]}));
        let deep = tree(json!({"children": []}));
        assert!(schemas.check_response(&response(deep)).is_empty());
        let typo = tree(json!({"chidlren": []}));
        assert!(!schemas.check_response(&response(typo)).is_empty());
        assert!(!schemas
            .check_response(&response(json!({"children": [], "extra": 1})))
            .is_empty());
    }
}
