//! What the negotiators reason about: a provider's published action, a requester's need,
//! and the canonical protocol document built from an action.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::document::{Encoding, ErrorConvention, ProtocolDocument, ProtocolSpec};
use crate::envelope::escape;
use crate::json_schema::is_object_schema;
use crate::naming::{convert, NamingStyle};
use crate::request_input::{rebase, request_keywords};

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

/// The request schema: the envelope's properties, then the action's input schema as
/// published, every keyword kept (`additionalProperties`, `patternProperties`,
/// `propertyNames`, `minProperties`/`maxProperties`, `dependentRequired`, `if`/`then`,
/// composition, `$defs`...) and made to admit the envelope's members (see
/// [`crate::request_input`]), so a request validates exactly as its input would. An input
/// that is not an object, or one whose keywords cannot admit the envelope (a
/// `$dynamicRef`, a remote `$ref` applying to the whole input…), travels in the one field
/// `input`, its references rebased there; the schema's description says why.
fn request_schema(title: &str, envelope: Map<String, Value>, input: &Value) -> Value {
    let mut schema = Map::new();
    schema.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    schema.insert("title".into(), json!(format!("{title}Request")));
    schema.insert("type".into(), json!("object"));
    let drafted = input
        .as_object()
        .filter(|_| is_object_schema(input))
        .map(|published| request_keywords(published, &envelope));
    match drafted {
        Some(Ok(keywords)) => {
            schema.extend(keywords);
            return Value::Object(schema);
        }
        Some(Err(why)) => {
            schema.insert(
                "description".into(),
                json!(format!(
                    "The action's input travels in `{INPUT_FIELD}`: {why}."
                )),
            );
        }
        None => {}
    }
    let mut required: Vec<Value> = envelope.keys().map(|name| json!(name)).collect();
    required.push(json!(INPUT_FIELD));
    let mut properties = envelope;
    properties.insert(INPUT_FIELD.into(), nested(input, INPUT_FIELD));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    Value::Object(schema)
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

    #[test]
    fn root_pattern_properties_leave_the_envelope_alone() {
        let input = json!({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"}}, "additionalProperties": false});
        let schemas =
            ProtocolSchemas::compile(&drafted(&action(input, json!({"type": "object"})))).unwrap();
        assert!(takes(&schemas, json!({"seats": 2})));
        assert!(takes(&schemas, json!({})));
        assert!(!takes(&schemas, json!({"seats": "two"})));
        assert!(!takes(&schemas, json!({"Seats": 2})));
        // An unanchored pattern still matches anywhere in a name.
        let input = json!({"type": "object", "patternProperties": {"a": {"type": "integer"}}});
        let schemas =
            ProtocolSchemas::compile(&drafted(&action(input, json!({"type": "object"})))).unwrap();
        assert!(takes(&schemas, json!({"seats": 2, "xa": 1})));
        assert!(!takes(&schemas, json!({"seats": "two"})));
        assert!(!takes(&schemas, json!({"xa": "one"})));
    }

    #[test]
    fn a_reference_to_the_input_root_means_the_input_not_the_request() {
        let tree = |anchor: bool| {
            let mut input = json!({
                "type": "object",
                "properties": {"name": {"type": "string"}, "$anchor": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
                "required": ["name"],
                "additionalProperties": false
            });
            if anchor {
                input["$anchor"] = json!("node");
                input["properties"]["children"]["items"] = json!({"$ref": "#node"});
            }
            input
        };
        for anchor in [false, true] {
            let document = drafted(&action(tree(anchor), json!({"type": "object"})));
            let schemas = ProtocolSchemas::compile(&document).unwrap();
            let child = json!({"name": "b", "children": [{"name": "c"}]});
            assert!(
                takes(&schemas, json!({"name": "a", "children": [child]})),
                "anchor {anchor}"
            );
            assert!(!takes(
                &schemas,
                json!({"name": "a", "children": [{"children": []}]})
            ));
            assert!(!takes(
                &schemas,
                json!({"name": "a", "children": [{"name": "b", "nmae": 1}]})
            ));
            assert!(!takes(&schemas, json!({"name": "a", "chidlren": []})));
            // A member named like a keyword is a member.
            assert!(takes(&schemas, json!({"name": "a", "$anchor": "x"})));
            assert!(!takes(
                &schemas,
                json!({"name": "a", "children": [{"name": "c", "$anchor": 1}]})
            ));
        }
    }

    #[test]
    fn every_subschema_applying_to_the_input_admits_the_envelope() {
        let base = json!({"Base": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}});
        let pydantic =
            json!({"type": "object", "allOf": [{"$ref": "#/$defs/Base"}], "$defs": base});
        let beside = json!({"type": "object", "$ref": "#/$defs/Base", "$defs": base});
        for input in [pydantic, beside] {
            let schemas = ProtocolSchemas::compile(&drafted(&action(
                input.clone(),
                json!({"type": "object"}),
            )))
            .unwrap();
            assert!(takes(&schemas, json!({"city": "Oslo"})), "{input}");
            assert!(
                !takes(&schemas, json!({"city": "Oslo", "cty": "x"})),
                "{input}"
            );
            assert!(!takes(&schemas, json!({})), "{input}");
        }
        let conditional = json!({
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"properties": {"kind": {}, "a": {}}, "additionalProperties": false},
            "else": {"maxProperties": 1}
        });
        let schemas =
            ProtocolSchemas::compile(&drafted(&action(conditional, json!({"type": "object"}))))
                .unwrap();
        assert!(takes(&schemas, json!({"kind": "a", "a": 1})));
        assert!(!takes(&schemas, json!({"kind": "a", "b": 1})));
        assert!(takes(&schemas, json!({"kind": "b"})));
        assert!(!takes(&schemas, json!({"kind": "b", "x": 1})));
        let dependent = json!({"type": "object", "dependentSchemas": {"card": {"properties": {"card": {}, "cvv": {}}, "additionalProperties": false}}});
        let schemas =
            ProtocolSchemas::compile(&drafted(&action(dependent, json!({"type": "object"}))))
                .unwrap();
        assert!(takes(&schemas, json!({"card": 1, "cvv": 2})));
        assert!(!takes(&schemas, json!({"card": 1, "pin": 2})));
        assert!(takes(&schemas, json!({"pin": 2})));
        let member = json!({"type": "object", "allOf": [{
            "propertyNames": {"pattern": "^[a-z]+$"},
            "maxProperties": 2,
            "patternProperties": {"^[a-z]+$": {"type": "integer"}}
        }]});
        let schemas =
            ProtocolSchemas::compile(&drafted(&action(member, json!({"type": "object"})))).unwrap();
        assert!(takes(&schemas, json!({"ab": 1, "cd": 2})));
        assert!(!takes(&schemas, json!({"ab": "x"})));
        assert!(!takes(&schemas, json!({"Ab": 1})));
        assert!(!takes(&schemas, json!({"a": 1, "b": 2, "c": 3})));
    }

    #[test]
    fn an_input_that_cannot_admit_the_envelope_travels_in_one_field() {
        let dynamic = json!({"type": "object", "$dynamicAnchor": "node", "allOf": [{"$dynamicRef": "#node"}], "properties": {"city": {"type": "string"}}, "additionalProperties": false});
        let recursive = json!({"type": "object", "properties": {"city": {"type": "string"}}, "allOf": [{"$ref": "#"}], "additionalProperties": false});
        let remote =
            json!({"type": "object", "allOf": [{"$ref": "https://example.com/base.json"}]});
        for input in [dynamic, recursive, remote] {
            let document = drafted(&action(input.clone(), json!({"type": "object"})));
            let request = document.request_schema.clone().unwrap();
            assert!(
                request["properties"]["input"].is_object(),
                "{input}: {request}"
            );
            let why = request["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                why.contains("`$dynamicRef`") || why.contains("`$ref`"),
                "{why}"
            );
            if input["allOf"][0]["$ref"]
                .as_str()
                .is_some_and(|r| r.starts_with("https"))
            {
                continue;
            }
            let schemas = ProtocolSchemas::compile(&document).unwrap();
            assert!(
                takes(&schemas, json!({"input": {"city": "Oslo"}})),
                "{input}"
            );
            assert!(
                !takes(&schemas, json!({"input": {"cty": "Oslo"}})),
                "{input}"
            );
        }
    }

    #[test]
    fn rebasing_keeps_anchors_and_data() {
        let input = json!({"anyOf": [{"$ref": "#num"}, {"type": "string"}], "$defs": {"N": {"$anchor": "num", "type": "integer"}}});
        let output = json!({
            "title": "Tree",
            "type": "object",
            "properties": {"link": {"const": {"$ref": "#/x"}}, "kind": {"enum": [{"$ref": "#"}]}}
        });
        let document = drafted(&action(input, output));
        let request = document.request_schema.clone().unwrap();
        assert_eq!(request["properties"]["input"]["anyOf"][0]["$ref"], "#num");
        let response = document.response_schema.clone().unwrap();
        let tree = &response["properties"]["tree"]["properties"];
        assert_eq!(tree["link"]["const"], json!({"$ref": "#/x"}));
        assert_eq!(tree["kind"]["enum"], json!([{"$ref": "#"}]));
        let schemas = ProtocolSchemas::compile(&document).unwrap();
        assert!(takes(&schemas, json!({"input": 3})));
        assert!(takes(&schemas, json!({"input": "three"})));
        assert!(!takes(&schemas, json!({"input": true})));
    }
}
