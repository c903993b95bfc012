//! Deterministic handler templates for protocols described by JSON Schemas.
//!
//! A template is decided once, as data: a [`plan::ModulePlan`] of the module's constants,
//! mapping tables and contract functions, statement by statement, made from the protocol's
//! schemas, its envelope and our side's schemas. Two back ends read that one plan:
//!
//! - `js` writes the module's JavaScript (what is stored, shown to users and sent to the
//!   sandbox), byte for byte the same for the same inputs;
//! - `native` runs the plan in Rust, with the module's exact results and errors, so a node
//!   running a template needs no JavaScript engine.
//!
//! Peer-written text (field names, constants) enters the plan only as data: in the module
//! only as JSON literals, never as code or comments.

mod js;
mod native;

pub(crate) use native::Decoded;
pub(crate) use text::quoted_len;
mod plan;
mod text;

use std::fmt;

use concord_negotiate::complexity::check_complexity;
use concord_negotiate::ProtocolDocument;
use concord_sandbox::{Function, Role, SandboxError};
use serde_json::Value;

use crate::contract::Outcome;
use crate::envelope::{segments, Envelope};
use crate::local::{is_single_value, Local};
use crate::mapping::{check_fit, Plan};
use crate::schema::{has_properties, is_required, properties};
use concord_negotiate::fit::{self, payload_schema, request_data_schema, RequestData};

use plan::{
    Body, Branch, Check, Data, DecodeRequest, DecodeResponse, EncodeResponse, Expected, ModulePlan,
    ProviderPlan, ReadId, RequestInput, RequesterPlan, ResponseOutput, Source, StatusRead,
    StatusWords, Write,
};

/// The status message of a successful response.
const SUCCESS_MESSAGE: &str = "OK";

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

/// A template handler for one side of a protocol: its plan, the module source written from
/// it, and the plan run natively.
///
/// [`Template::source`] is the module (see [`template`]); [`Template::call`] runs a contract
/// function of the same module without a JavaScript engine, with the same results and the
/// same errors (a `TypeError` the module throws is [`SandboxError::Thrown`] with its name and
/// message, without the engine's stack frames): identical values, member order and
/// JavaScript's number semantics included (checked by property tests on generated protocols
/// and arguments). `Template::call` is the plan alone; [`Code`](crate::Code), which is how
/// the runtime runs a template, also applies the sandbox's input and output caps and its
/// nesting limit, so that it refuses exactly what the sandbox refuses.
///
/// ```
/// use concord_handlers::{Local, Template};
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument};
/// use concord_sandbox::{Function, Limits, Sandbox};
/// use serde_json::json;
/// use std::time::Duration;
///
/// let action = ActionSpec {
///     name: "getPrice".into(),
///     description: "The price of a product.".into(),
///     input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
///     output: json!({"type": "number"}),
/// };
/// let document = ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15)))?;
/// let local = Local::Provider(action);
/// let template = Template::new(&document, &local)?;
/// let mut sandboxed = Sandbox::load(template.source(), local.role(), Limits::default())?;
///
/// let request = json!({"messageId": "m1", "type": "REQUEST", "action": "getPrice", "productId": "P1"});
/// let native = template.call(Function::DecodeRequest, &request)?;
/// assert_eq!(native, json!({"messageId": "m1", "input": {"productId": "P1"}}));
/// assert_eq!(native, sandboxed.call(Function::DecodeRequest, &request)?);
///
/// let thrown = template.call(Function::DecodeRequest, &json!({"messageId": 7})).unwrap_err();
/// assert_eq!(
///     thrown.to_string(),
///     r#"handler threw: TypeError: the request's type must be "REQUEST", not absent"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct Template {
    /// The plan with its constants as the engine holds them (for the native run).
    plan: ModulePlan,
    source: String,
}

impl Template {
    /// The template for `local`'s side of `document`.
    ///
    /// # Errors
    /// [`NoTemplate`]: see [`template`].
    pub fn new(document: &ProtocolDocument, local: &Local) -> Result<Template, NoTemplate> {
        let plan = module_plan(document, local)?;
        let source = js::module(&plan);
        Ok(Template {
            plan: plan.in_engine_form(),
            source,
        })
    }

    /// The module's JavaScript source (what [`template`] returns).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The role the module plays.
    pub fn role(&self) -> Role {
        self.plan.role
    }

    /// Calls `function` natively, as the module in the sandbox would answer it.
    ///
    /// # Errors
    /// [`SandboxError::WrongRole`] for the other role's functions, [`SandboxError::Thrown`]
    /// (`TypeError: …`) where the module throws.
    pub fn call(&self, function: Function, argument: &Value) -> Result<Value, SandboxError> {
        native::call(&self.plan, function, argument)
    }

    /// `encodeRequest({ messageId, input })` natively, without building the argument.
    pub(crate) fn encode_request(
        &self,
        message_id: &str,
        input: &Value,
    ) -> Result<Value, SandboxError> {
        native::encode_request(&self.plan, message_id, input)
    }

    /// `decodeRequest(message)` natively: the message id and the input.
    pub(crate) fn decode_request(&self, message: &Value) -> Result<(String, Value), SandboxError> {
        native::decode_request(&self.plan, message)
    }

    /// `encodeResponse` of `outcome` natively, without building the argument.
    pub(crate) fn encode_response(
        &self,
        message_id: &str,
        outcome: &Outcome,
    ) -> Result<Value, SandboxError> {
        native::encode_response(&self.plan, message_id, outcome)
    }

    /// `decodeResponse(message)` natively; the output is moved out of `message` where it
    /// maps to itself.
    pub(crate) fn decode_response(&self, message: Value) -> Result<Decoded, SandboxError> {
        native::decode_response(&self.plan, message)
    }
}

impl fmt::Debug for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Template")
            .field("role", &self.plan.role)
            .field("protocol", &self.plan.protocol)
            .finish_non_exhaustive()
    }
}

/// Writes the handler module for `local`'s side from the protocol's JSON Schemas: the
/// source of [`Template::new`].
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
    module_plan(document, local).map(|plan| js::module(&plan))
}

/// The plan of the module for `local`'s side of `document`.
fn module_plan(document: &ProtocolDocument, local: &Local) -> Result<ModulePlan, NoTemplate> {
    let (Some(request), Some(response)) = (&document.request_schema, &document.response_schema)
    else {
        return Err(no_template(
            "the protocol has no request and response JSON Schemas",
        ));
    };
    for (which, schema) in [("request", request), ("response", response)] {
        // Schemas changed since the document was read are not planned from unchecked.
        if let Err(error) = check_complexity(schema, document.schema_limits()) {
            return Err(no_template(format!(
                "the {which} schema is too complex: {error}"
            )));
        }
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
    let body = match local {
        Local::Provider(_) => Body::Provider(provider_plan(&layout)),
        Local::Requester(_) => Body::Requester(requester_plan(&layout)),
    };
    Ok(ModulePlan {
        role: local.role(),
        protocol: document.hash().to_string(),
        action: envelope
            .action_field
            .is_some()
            .then(|| layout.action.clone()),
        code_at: envelope.code_at.as_deref().map(segments),
        message_at: envelope.message_at.as_deref().map(segments),
        status: envelope.status_text.as_ref().map(|status| StatusWords {
            field: status.field.clone(),
            success: status.success.clone(),
            successes: status.successes.clone(),
            errors: status.errors.clone(),
            fallback: status.fallback.clone(),
        }),
        body,
    })
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

impl<'a> Layout<'a> {
    fn new(
        envelope: &'a Envelope,
        request: &'a Value,
        response: &'a Value,
        local: &Local,
    ) -> Result<Self, NoTemplate> {
        let payload = envelope.payload_fields.clone().unwrap_or_default();
        let wire_payload = payload_schema(envelope, response);
        let input = local.input_schema();
        let output = local.output_schema();
        let placement = fit::request_data(envelope, input);
        let wire_request = request_data_schema(envelope, request, &placement);
        if is_single_value(input) && !matches!(placement, RequestData::Single(_)) {
            return Err(no_template(format!(
                "our action's input is one value but the request has {} data fields",
                envelope.request_fields.as_ref().map_or(0, Vec::len)
            )));
        }
        let request_data = match placement {
            RequestData::Fields => Data::Fields,
            RequestData::Single(field) => Data::Single(field),
        };
        if is_single_value(output) && payload.len() != 1 {
            return Err(no_template(format!(
                "the action's output is one value but the response has {} data fields",
                payload.len()
            )));
        }
        let (request_plan, response_plan) = match local {
            Local::Provider(action) => {
                check_fit(&wire_request, &action.input, "the request").map_err(no_template)?;
                check_fit(&action.output, &wire_payload, "our action's result")
                    .map_err(no_template)?;
                (
                    Plan::for_target(Some(&action.input)),
                    Plan::for_target(Some(&wire_payload)),
                )
            }
            Local::Requester(need) => {
                if let Some(input) = &need.input {
                    check_fit(input, &wire_request, "our input").map_err(no_template)?;
                }
                if let Some(output) = &need.output {
                    check_fit(&wire_payload, output, "the response").map_err(no_template)?;
                }
                (
                    Plan::for_target(Some(&wire_request)),
                    Plan::for_target(need.output.as_ref()),
                )
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

    /// The top-level envelope names of requests, in schema order.
    fn request_envelope(&self) -> Vec<String> {
        properties(self.request)
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| self.envelope.is_request_envelope(name))
            .map(str::to_owned)
            .collect()
    }
}

fn provider_plan(layout: &Layout<'_>) -> ProviderPlan {
    let envelope = layout.envelope;
    let mut checks = Vec::new();
    if let Some((field, Some(value))) = &envelope.request_type {
        checks.push(Check {
            field: field.clone(),
            expected: Expected::Literal(value.clone()),
            what: format!("the request's {field}"),
        });
    }
    if let Some(field) = &envelope.action_field {
        checks.push(Check {
            field: field.clone(),
            expected: Expected::Action(layout.action.clone()),
            what: format!("the request's {field}"),
        });
    }
    let input = match &layout.request_data {
        Data::Fields => RequestInput::Fields {
            envelope: layout.request_envelope(),
        },
        Data::Single(field) => RequestInput::Single(field.clone()),
    };
    let names = response_names(layout);
    let fixed = names
        .iter()
        .take_while(|name| is_fixed_field(layout, name))
        .count();
    let (common, varying) = names.split_at(fixed);
    ProviderPlan {
        success_code: envelope
            .code_at
            .as_ref()
            .map(|_| envelope.success_code.unwrap_or(200)),
        success_message: envelope.message_at.is_some(),
        payload: layout.payload.clone(),
        input: layout.request_plan.clone(),
        result: layout.response_plan.clone(),
        decode_request: DecodeRequest {
            checks,
            id: ReadId {
                field: envelope.request_id.clone(),
                what: format!("the request's {}", envelope.request_id),
            },
            input,
        },
        encode_response: EncodeResponse {
            common: response_writes(layout, common, Branch::Success),
            // An error is reported by a code or a status word; without either it throws.
            error: (envelope.code_at.is_some() || envelope.status_text.is_some())
                .then(|| response_writes(layout, varying, Branch::Error)),
            maps_result: layout.payload.len() != 1,
            success: response_writes(layout, varying, Branch::Success),
        },
    }
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
fn response_writes(layout: &Layout<'_>, names: &[String], branch: Branch) -> Vec<Write> {
    let envelope = layout.envelope;
    let root = |pointer: &Option<String>| {
        pointer
            .as_deref()
            .and_then(|pointer| segments(pointer).into_iter().next())
    };
    let code_root = root(&envelope.code_at);
    let message_root = root(&envelope.message_at);
    let mut writes = Vec::new();
    for name in names {
        if *name == envelope.response_id {
            writes.push(Write::Put(name.clone(), Source::MessageId));
        } else if let Some((_, value)) = envelope
            .response_type
            .as_ref()
            .filter(|(type_field, _)| type_field == name)
        {
            writes.push(Write::Put(name.clone(), tag(value, layout)));
        } else if envelope
            .status_text
            .as_ref()
            .is_some_and(|status| status.field == *name)
        {
            writes.push(Write::SetStatus(branch));
        } else if branch == Branch::Success && envelope.is_error_only(name) {
            // The error object is written on errors only: `null` on success when required.
            if is_required(layout.response, name) {
                writes.push(Write::Put(name.clone(), Source::Null));
            }
        } else if code_root.as_ref() == Some(name) || message_root.as_ref() == Some(name) {
            if code_root.as_ref() == Some(name) {
                writes.push(Write::SetCode(branch));
            }
            if message_root.as_ref() == Some(name) {
                writes.push(Write::SetMessage(branch));
            }
        } else if layout.payload.contains(name) {
            match branch {
                Branch::Error => {
                    if is_required(layout.response, name) {
                        writes.push(Write::Put(name.clone(), Source::Null));
                    }
                }
                Branch::Success if layout.payload.len() == 1 => {
                    writes.push(Write::Put(name.clone(), Source::MappedResult));
                }
                Branch::Success => writes.push(Write::PutData(name.clone())),
            }
        }
    }
    writes
}

/// What a discriminator carries: its fixed value, else the action's name.
fn tag(value: &Option<Value>, layout: &Layout<'_>) -> Source {
    match value {
        Some(value) => Source::Literal(value.clone()),
        None => Source::Action(layout.action.clone()),
    }
}

fn requester_plan(layout: &Layout<'_>) -> RequesterPlan {
    let envelope = layout.envelope;
    let mut encode_request = Vec::new();
    for (name, _) in properties(layout.request) {
        let field = name.to_owned();
        if name == envelope.request_id {
            encode_request.push(Write::Put(field, Source::MessageId));
        } else if let Some((_, value)) = envelope
            .request_type
            .as_ref()
            .filter(|(type_field, _)| type_field == name)
        {
            encode_request.push(Write::Put(field, tag(value, layout)));
        } else if envelope.action_field.as_deref() == Some(name) {
            encode_request.push(Write::Put(field, Source::Action(layout.action.clone())));
        } else {
            match &layout.request_data {
                Data::Single(single) if single == name => {
                    encode_request.push(Write::Put(field, Source::MappedInput));
                }
                Data::Single(_) => {}
                Data::Fields => encode_request.push(Write::PutData(field)),
            }
        }
    }
    let check = match &envelope.response_type {
        Some((field, Some(value))) => Some(Check {
            field: field.clone(),
            expected: Expected::Literal(value.clone()),
            what: format!("the response's {field}"),
        }),
        _ => None,
    };
    let output = match layout.payload.as_slice() {
        [single] => ResponseOutput::Single {
            field: single.clone(),
            what: format!("the response's {single}"),
        },
        names => ResponseOutput::Pick(names.to_vec()),
    };
    RequesterPlan {
        request_data: layout.request_data.clone(),
        payload: layout.payload.clone(),
        request: layout.request_plan.clone(),
        output: layout.response_plan.clone(),
        encode_request,
        decode_response: DecodeResponse {
            check,
            id: ReadId {
                field: envelope.response_id.clone(),
                what: format!("the response's {}", envelope.response_id),
            },
            status: envelope.code_at.as_ref().map(|_| StatusRead {
                message: envelope.message_at.is_some(),
            }),
            output,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::js::{plan_literal, HELPERS};
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
