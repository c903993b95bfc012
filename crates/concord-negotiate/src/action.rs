//! What the negotiators reason about: a provider's published action, a requester's need,
//! and the canonical protocol document built from an action.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::document::{Encoding, ErrorConvention, ProtocolDocument, ProtocolSpec};
use crate::json_schema::{is_object_schema, properties, required};
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
    let mut request_required = vec![json!("messageId"), json!("type"), json!("action")];
    if is_object_schema(&action.input) {
        for (name, schema) in properties(&action.input) {
            request_properties.insert(name.to_owned(), schema.clone());
        }
        request_required.extend(required(&action.input).into_iter().map(|name| json!(name)));
    } else {
        request_properties.insert(INPUT_FIELD.into(), action.input.clone());
        request_required.push(json!(INPUT_FIELD));
    }
    let result = result_field(&action.output);
    let mut output = action.output.clone();
    if let Some(object) = output.as_object_mut() {
        object.remove("title");
        object.remove("$schema");
    }
    let request_schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("{title}Request"),
        "type": "object",
        "properties": request_properties,
        "required": request_required,
    });
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
