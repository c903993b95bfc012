//! Deterministic handler templates for protocols described by JSON Schemas.
//!
//! A template is a fixed prelude of helper functions plus tables and contract functions
//! written from the protocol's schemas, its envelope and our side's schemas. Peer-written
//! text (field names, constants) enters the module only as JSON literals, never as code or
//! comments.

mod js;

use concord_negotiate::ProtocolDocument;
use concord_sandbox::Role;
use serde_json::Value;

use crate::envelope::{segments, Envelope};
use crate::local::{data_schema, is_single_value, Local};
use crate::mapping::{check_fit, Plan};
use crate::schema::{has_properties, is_required, properties};

use js::{literal, plan_literal, Writer, HELPERS};

/// Why no template fits a protocol and our schemas (so an LLM has to write the module).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no handler template fits: {reason}")]
pub struct NoTemplate {
    /// What the templates cannot express, naming the field or section.
    pub reason: String,
}

fn no_template(reason: impl Into<String>) -> NoTemplate {
    NoTemplate {
        reason: reason.into(),
    }
}

/// Writes the handler module for `local`'s role from the protocol's JSON Schemas.
///
/// Same inputs, same bytes. The module follows the runtime contract (see the crate
/// documentation) and maps fields by name, else by the same name in another naming style;
/// it writes the envelope (`messageId` echo, `type` `REQUEST`/`RESPONSE`, the `action`),
/// fills required fields the source lacks from the schema's `const` or `default`, and
/// reports errors by the protocol's error convention (status code and message at their
/// pointers, the data `null`).
///
/// # Errors
/// [`NoTemplate`] when the protocol has no request or response schema, lacks a message id
/// field, does not say what code a success carries, or our schemas do not map onto its
/// fields (a required field with no counterpart in any naming style, or a type change).
///
/// ```
/// use concord_handlers::{template, Local};
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument};
/// use serde_json::json;
/// use std::time::Duration;
///
/// let action = ActionSpec {
///     name: "getPrice".into(),
///     description: "The price of a product.".into(),
///     input: json!({"type": "object", "properties": {"product_id": {"type": "string"}}, "required": ["product_id"]}),
///     output: json!({"type": "number"}),
/// };
/// let mut published = action.clone();
/// published.input = json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]});
/// let document = ProtocolDocument::parse(&canonical_protocol(&published, Duration::from_secs(15)))?;
/// let module = template(&document, &Local::Provider(action))?;
/// assert!(module.contains("function decodeRequest(message)"));
/// assert!(module.contains(r#"{ name: "product_id", required: true }"#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn template(document: &ProtocolDocument, local: &Local) -> Result<String, NoTemplate> {
    let (Some(request), Some(response)) = (&document.request_schema, &document.response_schema)
    else {
        return Err(no_template(
            "the protocol has no request and response JSON Schemas",
        ));
    };
    for (which, schema) in [("request", request), ("response", response)] {
        if !has_properties(schema) {
            return Err(no_template(format!(
                "the {which} schema does not list the message's properties"
            )));
        }
    }
    let envelope = Envelope::of(document);
    for (which, schema, id) in [
        ("request", request, &envelope.request_id),
        ("response", response, &envelope.response_id),
    ] {
        if !properties(schema).iter().any(|(name, _)| name == id) {
            return Err(no_template(format!(
                "the {which} schema has no message id field (`messageId` in any naming style)"
            )));
        }
    }
    if envelope.code_at.is_some() && envelope.success_code.is_none() {
        return Err(no_template(
            "the protocol's status codes are not HTTP status codes and it does not say which \
             code a successful response carries",
        ));
    }
    let layout = Layout::new(&envelope, request, response, local)?;
    let mut out = Writer::new();
    header(&mut out, document, local);
    match local {
        Local::Provider(_) => provider(&mut out, &layout),
        Local::Requester(_) => requester(&mut out, &layout),
    }
    out.raw(HELPERS);
    Ok(out.finish())
}

/// Where data sits in the messages, and how it maps to our side.
struct Layout<'a> {
    envelope: &'a Envelope,
    request: &'a Value,
    response: &'a Value,
    action: Value,
    /// The request's data: mapped as an object, or one field carrying a single value.
    request_data: Data,
    /// The response's data fields, in schema order.
    payload: Vec<String>,
    /// How the request's data becomes our input (provider) / our input becomes the
    /// request's data (requester).
    request_plan: Plan,
    /// How our result becomes the response's data (provider) / the response's data becomes
    /// our output (requester).
    response_plan: Plan,
}

/// How a message carries the action's data.
enum Data {
    /// As fields of the message, mapped to and from an object.
    Fields,
    /// As the value of this one field.
    Single(String),
}

impl<'a> Layout<'a> {
    fn new(
        envelope: &'a Envelope,
        request: &'a Value,
        response: &'a Value,
        local: &Local,
    ) -> Result<Self, NoTemplate> {
        let request_fields = envelope.request_fields.clone().unwrap_or_default();
        let payload = envelope.payload_fields.clone().unwrap_or_default();
        let wire_request = data_schema(request, &|name| envelope.is_request_envelope(name));
        let wire_payload = match payload.as_slice() {
            [single] => response
                .pointer(&format!("/properties/{}", crate::mapping::escape(single)))
                .cloned()
                .unwrap_or(Value::Null),
            _ => data_schema(response, &|name| envelope.is_response_envelope(name)),
        };
        let single_field = |what: &str| match request_fields.as_slice() {
            [single] => Ok(Data::Single(single.clone())),
            _ => Err(no_template(format!(
                "{what} is one value but the request has {} data fields",
                request_fields.len()
            ))),
        };
        let input = local.input_schema();
        let output = local.output_schema();
        let request_data = if is_single_value(input) {
            single_field("our action's input")?
        } else {
            Data::Fields
        };
        if is_single_value(output) && payload.len() != 1 {
            return Err(no_template(format!(
                "the action's output is one value but the response has {} data fields",
                payload.len()
            )));
        }
        let (request_plan, response_plan) = match local {
            Local::Provider(action) => {
                if let Data::Fields = request_data {
                    check_fit(&wire_request, &action.input, "the request").map_err(no_template)?;
                }
                check_fit(&action.output, &wire_payload, "our action's result")
                    .map_err(no_template)?;
                let request_plan = match request_data {
                    Data::Fields => Plan::for_target(Some(&action.input)),
                    Data::Single(_) => Plan::Copy,
                };
                (request_plan, Plan::for_target(Some(&wire_payload)))
            }
            Local::Requester(need) => {
                if let (Some(input), Data::Fields) = (&need.input, &request_data) {
                    check_fit(input, &wire_request, "our input").map_err(no_template)?;
                }
                if let Some(output) = &need.output {
                    check_fit(&wire_payload, output, "the response").map_err(no_template)?;
                }
                let request_plan = match request_data {
                    Data::Fields => Plan::for_target(Some(&wire_request)),
                    Data::Single(_) => Plan::Copy,
                };
                (request_plan, Plan::for_target(need.output.as_ref()))
            }
        };
        let action = envelope
            .action_value
            .clone()
            .unwrap_or_else(|| Value::String(local.action().to_owned()));
        Ok(Self {
            envelope,
            request,
            response,
            action,
            request_data,
            payload,
            request_plan,
            response_plan,
        })
    }

    /// The top-level envelope names of requests, as a JS array literal.
    fn request_envelope(&self) -> String {
        let names: Vec<Value> = properties(self.request)
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| self.envelope.is_request_envelope(name))
            .map(|name| Value::String(name.to_owned()))
            .collect();
        literal(&Value::Array(names))
    }
}

fn header(out: &mut Writer, document: &ProtocolDocument, local: &Local) {
    let role = local.role();
    out.line(&format!(
        "// Concord protocol handler: {role} side. Generated by concord-handlers {} from the",
        env!("CARGO_PKG_VERSION")
    ));
    out.line(&format!(
        "// protocol's JSON Schemas (protocol {}).",
        document.hash()
    ));
    out.line("// The same protocol and local schemas always give the same module.");
    out.line("//");
    match role {
        Role::Requester => {
            out.line("//   encodeRequest({ messageId, input }) -> request message");
            out.line("//   decodeResponse(message) -> { messageId, output } | { messageId, error: { code, message } }");
        }
        Role::Provider => {
            out.line("//   decodeRequest(message) -> { messageId, input }");
            out.line("//   encodeResponse({ messageId, result } | { messageId, error: { code, message } }) -> response message");
        }
    }
    out.line("//");
    out.line("// Fields are matched by name, else by the same name in another naming style");
    out.line("// (productId = product_id = product-id = ProductId). A required field the source");
    out.line("// lacks takes the schema's const or default.");
    out.blank();
}

/// The constants both roles use.
fn constants(out: &mut Writer, layout: &Layout<'_>) {
    let envelope = layout.envelope;
    if envelope.action_field.is_some() {
        out.line(&format!("const ACTION = {};", literal(&layout.action)));
    }
    if let Some(code_at) = &envelope.code_at {
        out.line(&format!("const CODE_AT = {};", pointer_literal(code_at)));
    }
    if let Some(message_at) = &envelope.message_at {
        out.line(&format!(
            "const MESSAGE_AT = {};",
            pointer_literal(message_at)
        ));
    }
}

/// `const NAME = <table>;`, saying so when the table copies values as they are.
fn table(name: &str, plan: &Plan) -> String {
    if plan.is_copy() {
        format!("const {name} = null; // copied as it is")
    } else {
        format!("const {name} = {};", plan_literal(plan, 0))
    }
}

fn pointer_literal(pointer: &str) -> String {
    literal(&Value::Array(
        segments(pointer).into_iter().map(Value::String).collect(),
    ))
}

fn provider(out: &mut Writer, layout: &Layout<'_>) {
    let envelope = layout.envelope;
    constants(out, layout);
    if envelope.code_at.is_some() {
        out.line(&format!(
            "const SUCCESS_CODE = {};",
            envelope.success_code.unwrap_or(200)
        ));
    }
    if envelope.message_at.is_some() {
        out.line("const SUCCESS_MESSAGE = \"OK\";");
    }
    out.blank();
    match &layout.request_data {
        Data::Fields => out.line("// The request's data fields -> the action's input."),
        Data::Single(field) => out.line(&format!(
            "// The request's {} -> the action's input.",
            literal(&Value::String(field.clone()))
        )),
    }
    out.line(&table("INPUT", &layout.request_plan));
    out.line(&format!(
        "// The action's result -> {}.",
        payload_words(layout)
    ));
    out.line(&table("RESULT", &layout.response_plan));
    out.blank();

    // decodeRequest
    out.line("function decodeRequest(message) {");
    out.line("  expectObject(message, \"the request\");");
    if let Some((field, value)) = &envelope.request_type {
        out.line(&format!(
            "  expectConst(own(message, {}), {}, {});",
            name_literal(field),
            literal(value),
            name_literal(&format!("the request's {field}"))
        ));
    }
    if let Some(field) = &envelope.action_field {
        out.line(&format!(
            "  expectConst(own(message, {}), ACTION, {});",
            name_literal(field),
            name_literal(&format!("the request's {field}"))
        ));
    }
    out.line(&format!(
        "  const messageId = expectString(own(message, {}), {});",
        name_literal(&envelope.request_id),
        name_literal(&format!("the request's {}", envelope.request_id))
    ));
    match &layout.request_data {
        Data::Fields => {
            out.line(&format!(
                "  const data = dataFields(message, {});",
                layout.request_envelope()
            ));
            out.line("  return { messageId, input: mapValue(data, INPUT, \"the request\") };");
        }
        Data::Single(field) => out.line(&format!(
            "  return {{ messageId, input: own(message, {}) ?? null }};",
            literal(&Value::String(field.clone()))
        )),
    }
    out.line("}");
    out.blank();

    // encodeResponse
    out.line("function encodeResponse(outcome) {");
    out.line("  expectObject(outcome, \"encodeResponse's argument\");");
    out.line("  const messageId = expectString(own(outcome, \"messageId\"), \"the argument's messageId\");");
    out.line("  const error = own(outcome, \"error\");");
    let names = response_names(layout);
    let fixed = names
        .iter()
        .take_while(|name| is_fixed_field(layout, name))
        .count();
    let (common, varying) = names.split_at(fixed);
    out.line("  const message = {};");
    response_fields(out, layout, common, Branch::Success, "  ");
    out.line("  if (error !== undefined) {");
    out.line("    expectObject(error, \"the argument's error\");");
    if envelope.code_at.is_none() {
        out.line("    throw new TypeError(\"this protocol has no status code to report an error with\");");
    } else {
        response_fields(out, layout, varying, Branch::Error, "    ");
    }
    out.line("  } else {");
    out.line("    const result = own(outcome, \"result\");");
    out.line("    if (result === undefined) {");
    out.line(
        "      throw new TypeError(\"encodeResponse's argument has neither result nor error\");",
    );
    out.line("    }");
    if layout.payload.len() != 1 {
        out.line("    const data = mapValue(result, RESULT, \"the result\");");
    }
    response_fields(out, layout, varying, Branch::Success, "    ");
    out.line("  }");
    out.line("  return message;");
    out.line("}");
    out.blank();
}

#[derive(Clone, Copy, PartialEq)]
enum Branch {
    Success,
    Error,
}

/// A response's top-level fields in schema order, then pointer roots the schema lacks.
fn response_names(layout: &Layout<'_>) -> Vec<String> {
    let envelope = layout.envelope;
    let mut names: Vec<String> = properties(layout.response)
        .into_iter()
        .map(|(name, _)| name.to_owned())
        .collect();
    for pointer in [&envelope.code_at, &envelope.message_at]
        .into_iter()
        .flatten()
    {
        if let Some(root) = segments(pointer).into_iter().next() {
            if !names.contains(&root) {
                names.push(root);
            }
        }
    }
    names
}

/// Whether a response field is written the same way on success and on error.
fn is_fixed_field(layout: &Layout<'_>, name: &str) -> bool {
    let envelope = layout.envelope;
    name == envelope.response_id
        || envelope
            .response_type
            .as_ref()
            .is_some_and(|(field, _)| field == name)
}

/// The statements writing some of a response's top-level fields.
fn response_fields(
    out: &mut Writer,
    layout: &Layout<'_>,
    names: &[String],
    branch: Branch,
    indent: &str,
) {
    let envelope = layout.envelope;
    let root = |pointer: &Option<String>| {
        pointer
            .as_deref()
            .and_then(|pointer| segments(pointer).into_iter().next())
    };
    let code_root = root(&envelope.code_at);
    let message_root = root(&envelope.message_at);
    for name in names {
        let field = name_literal(name);
        if *name == envelope.response_id {
            out.line(&format!("{indent}put(message, {field}, messageId);"));
        } else if let Some((_, value)) = envelope
            .response_type
            .as_ref()
            .filter(|(type_field, _)| type_field == name)
        {
            out.line(&format!(
                "{indent}put(message, {field}, {});",
                literal(value)
            ));
        } else if code_root.as_ref() == Some(name) || message_root.as_ref() == Some(name) {
            let (code, text) = match branch {
                Branch::Error => (
                    "expectInteger(own(error, \"code\"), \"the error's code\")",
                    "expectString(own(error, \"message\"), \"the error's message\")",
                ),
                Branch::Success => ("SUCCESS_CODE", "SUCCESS_MESSAGE"),
            };
            if code_root.as_ref() == Some(name) {
                out.line(&format!("{indent}setAt(message, CODE_AT, {code});"));
            }
            if message_root.as_ref() == Some(name) {
                out.line(&format!("{indent}setAt(message, MESSAGE_AT, {text});"));
            }
        } else if layout.payload.contains(name) {
            match branch {
                Branch::Error => {
                    if is_required(layout.response, name) || layout.payload.len() == 1 {
                        out.line(&format!("{indent}put(message, {field}, null);"));
                    }
                }
                Branch::Success if layout.payload.len() == 1 => out.line(&format!(
                    "{indent}put(message, {field}, mapValue(result, RESULT, \"the result\"));"
                )),
                Branch::Success => out.line(&format!(
                    "{indent}putPresent(message, {field}, own(data, {field}));"
                )),
            }
        }
    }
}

fn payload_words(layout: &Layout<'_>) -> String {
    match layout.payload.as_slice() {
        [single] => format!("the response's {}", literal(&Value::String(single.clone()))),
        [] => "nothing (the response carries no data)".to_owned(),
        _ => "the response's data fields".to_owned(),
    }
}

fn requester(out: &mut Writer, layout: &Layout<'_>) {
    let envelope = layout.envelope;
    constants(out, layout);
    out.blank();
    match &layout.request_data {
        Data::Fields => out.line("// The input -> the request's data fields."),
        Data::Single(field) => out.line(&format!(
            "// The input -> the request's {}.",
            literal(&Value::String(field.clone()))
        )),
    }
    out.line(&table("REQUEST", &layout.request_plan));
    out.line(&format!(
        "// {} -> the output.",
        capitalised(&payload_words(layout))
    ));
    out.line(&table("OUTPUT", &layout.response_plan));
    out.blank();

    // encodeRequest
    out.line("function encodeRequest(call) {");
    out.line("  expectObject(call, \"encodeRequest's argument\");");
    out.line(
        "  const messageId = expectString(own(call, \"messageId\"), \"the argument's messageId\");",
    );
    out.line("  const input = own(call, \"input\");");
    if let Data::Fields = layout.request_data {
        out.line("  const data = mapValue(expectObject(input, \"the argument's input\"), REQUEST, \"the input\");");
    }
    out.line("  const message = {};");
    for (name, _) in properties(layout.request) {
        let field = literal(&Value::String(name.to_owned()));
        if name == envelope.request_id {
            out.line(&format!("  put(message, {field}, messageId);"));
        } else if let Some((_, value)) = envelope
            .request_type
            .as_ref()
            .filter(|(type_field, _)| type_field == name)
        {
            out.line(&format!("  put(message, {field}, {});", literal(value)));
        } else if envelope.action_field.as_deref() == Some(name) {
            out.line(&format!("  put(message, {field}, ACTION);"));
        } else {
            match &layout.request_data {
                Data::Single(single) if single == name => {
                    out.line(&format!("  put(message, {field}, input ?? null);"));
                }
                Data::Single(_) => {}
                Data::Fields => out.line(&format!(
                    "  putPresent(message, {field}, own(data, {field}));"
                )),
            }
        }
    }
    out.line("  return message;");
    out.line("}");
    out.blank();

    // decodeResponse
    out.line("function decodeResponse(message) {");
    out.line("  expectObject(message, \"the response\");");
    if let Some((field, value)) = &envelope.response_type {
        out.line(&format!(
            "  expectConst(own(message, {}), {}, {});",
            name_literal(field),
            literal(value),
            name_literal(&format!("the response's {field}"))
        ));
    }
    out.line(&format!(
        "  const messageId = expectString(own(message, {}), {});",
        name_literal(&envelope.response_id),
        name_literal(&format!("the response's {}", envelope.response_id))
    ));
    if envelope.code_at.is_some() {
        out.line("  const code = getAt(message, CODE_AT);");
        out.line("  if (Number.isInteger(code) && code >= 400) {");
        if envelope.message_at.is_some() {
            out.line("    const text = getAt(message, MESSAGE_AT);");
            out.line("    return { messageId, error: { code, message: typeof text === \"string\" ? text : \"\" } };");
        } else {
            out.line("    return { messageId, error: { code, message: \"\" } };");
        }
        out.line("  }");
    }
    match layout.payload.as_slice() {
        [single] => out.line(&format!(
            "  return {{ messageId, output: mapValue(own(message, {}) ?? null, OUTPUT, {}) }};",
            name_literal(single),
            name_literal(&format!("the response's {single}"))
        )),
        names => out.line(&format!(
            "  return {{ messageId, output: mapValue(pick(message, {}), OUTPUT, \"the response\") }};",
            literal(&Value::Array(
                names.iter().cloned().map(Value::String).collect()
            ))
        )),
    }
    out.line("}");
    out.blank();
}

/// A JavaScript string literal.
fn name_literal(text: &str) -> String {
    literal(&Value::String(text.to_owned()))
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::diff;
    use crate::mapping::Plan;
    use concord_sandbox::{Function, Limits, Sandbox, SandboxError};
    use proptest::prelude::*;
    use serde_json::{json, Map};

    fn name() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "productId",
            "product_id",
            "ProductID",
            "price",
            "tags",
            "__proto__",
            "constructor",
            "toString",
            "a.b",
            "x",
        ])
        .prop_map(str::to_owned)
    }

    fn schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({"type": "string"})),
            Just(json!({"type": "number", "default": 1.5})),
            Just(json!({"type": "string", "const": "fixed"})),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                (prop::collection::vec((name(), inner.clone(), any::<bool>()), 0..4)).prop_map(
                    |fields| {
                        let mut properties = Map::new();
                        let mut required = Vec::new();
                        for (name, schema, is_required) in fields {
                            if is_required && !properties.contains_key(&name) {
                                required.push(Value::String(name.clone()));
                            }
                            properties.insert(name, schema);
                        }
                        json!({"type": "object", "properties": properties, "required": required})
                    }
                ),
                inner.prop_map(|items| json!({"type": "array", "items": items})),
            ]
        })
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1000i64..1000).prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec((name(), inner), 0..5)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The JavaScript helpers and the Rust rule map every value the same way.
        #[test]
        fn javascript_and_rust_map_alike(target in schema(), values in prop::collection::vec(value(), 1..6)) {
            let plan = Plan::for_target(Some(&target));
            let module = format!(
                "const TABLE = {};\nfunction decodeRequest(value) {{ return {{ mapped: mapValue(value, TABLE, \"v\") }}; }}\nfunction encodeResponse(value) {{ return value; }}\n{HELPERS}",
                plan_literal(&plan, 0)
            );
            let mut handler = Sandbox::load(&module, Role::Provider, Limits::default()).unwrap();
            for value in values {
                let rust = plan.apply(&value, "");
                let js = handler.call(Function::DecodeRequest, &value);
                match (rust, js) {
                    (Ok(expected), Ok(actual)) => {
                        let differences = diff(&json!({"mapped": expected}), &actual);
                        prop_assert!(differences.is_empty(), "{value} onto {target}: {differences:?}");
                    }
                    (Err(_), Err(SandboxError::Thrown { message })) => {
                        prop_assert!(message.contains("which is required"), "{message}");
                    }
                    (rust, js) => prop_assert!(false, "{value} onto {target}: rust {rust:?}, js {js:?}"),
                }
            }
        }
    }
}
