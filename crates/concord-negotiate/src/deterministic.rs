//! The deterministic negotiator: rules over published JSON Schemas, no LLM. The embedded
//! default. Same inputs, same output, always.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use concord_proto::{Decision, FixDecision};
use serde_json::{json, Map, Value};

use crate::action::{
    canonical_protocol, result_field, ActionSpec, Need, ENVELOPE_FIELDS, INPUT_FIELD,
};
use crate::document::ProtocolDocument;
use crate::json_schema::{is_object_schema, properties, required, types};
use crate::naming::key;
use crate::policy::{Decided, JudgeContext, NegotiateError, Negotiator, Previous, Step};
use crate::test_cases::{TestCase, TestCases};
use crate::validation::ProtocolSchemas;

/// Timeout written into drafted protocols when nothing else says.
pub const DEFAULT_PROTOCOL_TIMEOUT: Duration = Duration::from_secs(15);

/// Negotiates protocols built from published schemas, without an LLM.
///
/// - **Draft** (requester): the canonical protocol of the peer's action (the seeds'
///   envelope around the action's own schemas), keeping the optional inputs our need has.
/// - **Judge** (provider): accept a candidate one of our actions can serve as written;
///   counter-propose our canonical protocol when the differences are mechanical (naming
///   style, optional extras, a missing field we can default); otherwise reject, naming the
///   fields.
/// - **Judge** (requester): accept a counter-proposal whose required inputs we can supply
///   and whose response carries what we need; otherwise reject, naming the fields.
/// - **Test cases**: drafted from the schemas (examples, enums, boundaries, a not-found
///   case), judged by validating every message against the schemas.
/// - **Diagnose**: accept an error report when our recent messages break the schemas.
#[derive(Debug, Clone, Default)]
pub struct DeterministicNegotiator {
    _private: (),
}

impl DeterministicNegotiator {
    /// A deterministic negotiator.
    pub fn new() -> Self {
        Self::default()
    }

    /// The draft step, synchronously.
    pub fn draft_now(
        &self,
        need: &Need,
        peer_action: &ActionSpec,
    ) -> Result<String, NegotiateError> {
        let mut action = peer_action.clone();
        if let Some(our_input) = &need.input {
            let ours: Vec<String> = properties(our_input)
                .iter()
                .map(|(name, _)| key(name))
                .collect();
            let theirs_required = required(&peer_action.input);
            let missing: Vec<&str> = properties(&peer_action.input)
                .into_iter()
                .filter(|(name, schema)| {
                    theirs_required.contains(name)
                        && schema.get("default").is_none()
                        && !ours.contains(&key(name))
                })
                .map(|(name, _)| name)
                .collect();
            if !missing.is_empty() {
                return Err(NegotiateError::CannotDraft {
                    action: peer_action.name.clone(),
                    reason: format!(
                        "it requires {} and our need does not supply it",
                        list(&missing)
                    ),
                });
            }
            // Keep the optional inputs we can actually send.
            if let Some(props) = action
                .input
                .get_mut("properties")
                .and_then(Value::as_object_mut)
            {
                props.retain(|name, _| {
                    theirs_required.contains(&name.as_str()) || ours.contains(&key(name))
                });
            }
        }
        if let Some(our_output) = &need.output {
            let missing = missing_outputs(our_output, &peer_action.output);
            if !missing.is_empty() {
                return Err(NegotiateError::CannotDraft {
                    action: peer_action.name.clone(),
                    reason: format!("it does not return {}", list(&missing)),
                });
            }
        }
        Ok(canonical_protocol(&action, DEFAULT_PROTOCOL_TIMEOUT))
    }

    /// The judge step, synchronously.
    pub fn judge_now(&self, context: JudgeContext<'_>, candidate: &str) -> Decision {
        match ProtocolDocument::parse(candidate) {
            Ok(document) => self.judge_document(context, &document),
            Err(error) => reject(format!("the candidate cannot be read: {error}")),
        }
    }

    /// The judge step on a candidate that parsed.
    pub(crate) fn judge_document(
        &self,
        context: JudgeContext<'_>,
        document: &ProtocolDocument,
    ) -> Decision {
        if let Some(base) = &document.base {
            if document.request_schema.is_none() {
                return reject(format!(
                    "the candidate builds on {} with changes in prose; without that protocol's \
                     text, only an LLM negotiator can judge it: send the full protocol",
                    base.uri
                ));
            }
        }
        let (Some(request), Some(response)) = (&document.request_schema, &document.response_schema)
        else {
            return reject("the candidate has no request or response JSON Schema".into());
        };
        match context {
            JudgeContext::Provider { actions } => {
                judge_as_provider(actions, document, request, response)
            }
            JudgeContext::Requester { need, peer_action } => {
                judge_as_requester(need, peer_action, request, response)
            }
        }
    }

    /// The test-case drafting step, synchronously.
    pub fn draft_test_cases_now(
        &self,
        protocol: &ProtocolDocument,
    ) -> Result<String, NegotiateError> {
        self.draft_test_cases_from(protocol, &ProtocolSchemas::compile(protocol)?)
    }

    /// The test-case drafting step, with the protocol's schemas compiled.
    pub(crate) fn draft_test_cases_from(
        &self,
        protocol: &ProtocolDocument,
        schemas: &ProtocolSchemas,
    ) -> Result<String, NegotiateError> {
        let (Some(request_schema), Some(response_schema)) =
            (&protocol.request_schema, &protocol.response_schema)
        else {
            return Err(NegotiateError::Schema {
                which: "request",
                message: "missing".into(),
            });
        };
        let result = payload_field(response_schema);
        let result_schema = result
            .as_deref()
            .and_then(|name| response_schema.pointer(&format!("/properties/{name}")))
            .cloned()
            .unwrap_or(Value::Null);
        let mut cases = Vec::new();
        let mut add = |name: String, request: Value, response: Value, expected: String| {
            let number = cases.len() + 1;
            cases.push(TestCase {
                name: format!("Test case {number}: {name}"),
                request,
                response,
                expected,
            });
        };
        let id = |n: usize| format!("msg{n:03}");
        let mut base_request = example_object(request_schema, &Map::new());
        // Envelope fields the schema leaves open get their conventional values.
        if request_schema.pointer("/properties/type/const").is_none()
            && base_request.get("type").is_some()
        {
            base_request["type"] = json!("REQUEST");
        }
        if request_schema.pointer("/properties/action/const").is_none()
            && base_request.get("action").is_some()
        {
            base_request["action"] = json!(action_name_from_title(request_schema));
        }
        let ok_response = |message_id: &str| {
            let mut response = json!({"messageId": message_id, "type": "RESPONSE", "status": {"code": 200, "message": "OK"}});
            if let Some(result) = &result {
                response[result.as_str()] = example(&result_schema, result);
            }
            response
        };
        add(
            "found".into(),
            base_request.clone(),
            ok_response(""),
            "The action succeeds: status 200 with the result.".into(),
        );
        // One case per enum value and per numeric boundary of the request's own fields.
        for (name, schema) in properties(request_schema) {
            if ENVELOPE_FIELDS.contains(&name) {
                continue;
            }
            let mut variants: Vec<(String, Value)> = Vec::new();
            if let Some(values) = schema.get("enum").and_then(Value::as_array) {
                variants.extend(
                    values
                        .iter()
                        .skip(1)
                        .take(3)
                        .map(|v| (format!("`{name}` = {v}"), v.clone())),
                );
            }
            for bound in ["minimum", "maximum"] {
                if let Some(value) = schema.get(bound).filter(|v| v.is_number()) {
                    variants.push((format!("`{name}` at its {bound} {value}"), value.clone()));
                }
            }
            for (label, value) in variants {
                let mut request = base_request.clone();
                request[name] = value;
                add(
                    label,
                    request,
                    ok_response(""),
                    "The action succeeds: status 200.".into(),
                );
            }
        }
        // A not-found case for the first required string field, when errors are HTTP codes.
        if protocol.error_convention.http_status_codes {
            if let Some((name, _)) =
                properties(request_schema)
                    .into_iter()
                    .find(|(name, schema)| {
                        !ENVELOPE_FIELDS.contains(name)
                            && required(request_schema).contains(name)
                            && schema.get("type").and_then(Value::as_str) == Some("string")
                            && schema.get("enum").is_none()
                            && schema.get("const").is_none()
                    })
            {
                let mut request = base_request.clone();
                request[name] = json!("does-not-exist");
                let mut response =
                    json!({"type": "RESPONSE", "status": {"code": 404, "message": "Not found"}});
                if let Some(result) = &result {
                    response[result.as_str()] = Value::Null;
                }
                add(
                    format!("unknown `{name}`"),
                    request,
                    response,
                    format!("Nothing has this `{name}`: status 404 with a null result."),
                );
            }
        }
        // Number the message ids in case order: msg001, msg002, …
        let cases: Vec<TestCase> = cases
            .into_iter()
            .enumerate()
            .map(|(index, mut case)| {
                let message_id = json!(id(index + 1));
                case.request["messageId"] = message_id.clone();
                if let Some(response) = case.response.as_object_mut() {
                    response.insert("messageId".into(), message_id);
                }
                case
            })
            .collect();
        for case in &cases {
            let problems: Vec<_> = schemas
                .check_request(&case.request)
                .into_iter()
                .chain(schemas.check_response(&case.response))
                .collect();
            if !problems.is_empty() {
                return Err(NegotiateError::Schema {
                    which: "request",
                    message: format!(
                        "cannot build a valid example for {:?}: {}",
                        case.name,
                        problems
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                });
            }
        }
        Ok(TestCases { cases }.write())
    }

    /// The test-case judging step, synchronously.
    pub fn judge_test_cases_now(&self, protocol: &ProtocolDocument, test_cases: &str) -> Decision {
        let schemas = match ProtocolSchemas::compile(protocol) {
            Ok(schemas) => schemas,
            Err(error) => {
                return reject(format!(
                    "the agreed protocol's schemas do not compile: {error}"
                ))
            }
        };
        match TestCases::parse(test_cases) {
            Ok(cases) => self.judge_cases(&schemas, &cases),
            Err(error) => reject(format!("the test cases cannot be read: {error}")),
        }
    }

    /// The test-case judging step, with the schemas compiled and the cases parsed.
    pub(crate) fn judge_cases(&self, schemas: &ProtocolSchemas, cases: &TestCases) -> Decision {
        let mut problems = String::new();
        for case in &cases.cases {
            for problem in schemas.check_case(case) {
                let _ = writeln!(problems, "{problem}");
            }
            if case.request.get("messageId").is_some()
                && case.request.get("messageId") != case.response.get("messageId")
            {
                let _ = writeln!(
                    problems,
                    "- {}: the response does not carry the request's messageId",
                    case.name
                );
            }
        }
        if problems.is_empty() {
            Decision::Accept
        } else {
            reject(format!(
                "these test cases break the agreed schemas:\n{problems}"
            ))
        }
    }

    /// The diagnosis step, synchronously.
    pub fn diagnose_now(&self, protocol: &ProtocolDocument, our_messages: &[Value]) -> FixDecision {
        match ProtocolSchemas::compile(protocol) {
            Ok(schemas) => self.diagnose_with(&schemas, our_messages),
            Err(error) => FixDecision::Reject {
                reason: format!("the agreed protocol's schemas do not compile: {error}"),
            },
        }
    }

    /// The diagnosis step, with the schemas compiled: accept when one of our messages
    /// breaks them.
    pub(crate) fn diagnose_with(
        &self,
        schemas: &ProtocolSchemas,
        our_messages: &[Value],
    ) -> FixDecision {
        let broken = our_messages.iter().any(|message| {
            let violations = if message.get("status").is_some() {
                schemas.check_response(message)
            } else {
                schemas.check_request(message)
            };
            !violations.is_empty()
        });
        if broken {
            FixDecision::Accept
        } else {
            FixDecision::Reject {
                reason: format!(
                    "our last {} message(s) validate against the agreed schemas; please point at the \
                     field (JSON pointer) that is wrong",
                    our_messages.len()
                ),
            }
        }
    }
}

impl Negotiator for DeterministicNegotiator {
    async fn draft(
        &self,
        need: &Need,
        peer_action: &ActionSpec,
    ) -> Result<Decided<String>, NegotiateError> {
        let start = Instant::now();
        let value = self.draft_now(need, peer_action)?;
        Ok(Decided::deterministic(Step::Draft, start, value))
    }

    /// The rules judge the candidate as it stands: `previous` does not change what they say.
    async fn judge(
        &self,
        context: JudgeContext<'_>,
        candidate: &str,
        _previous: Previous<'_>,
    ) -> Result<Decided<Decision>, NegotiateError> {
        let start = Instant::now();
        Ok(Decided::deterministic(
            Step::Judge,
            start,
            self.judge_now(context, candidate),
        ))
    }

    async fn draft_test_cases(
        &self,
        protocol: &ProtocolDocument,
    ) -> Result<Decided<String>, NegotiateError> {
        let start = Instant::now();
        let value = self.draft_test_cases_now(protocol)?;
        Ok(Decided::deterministic(Step::DraftTestCases, start, value))
    }

    async fn judge_test_cases(
        &self,
        protocol: &ProtocolDocument,
        test_cases: &str,
    ) -> Result<Decided<Decision>, NegotiateError> {
        let start = Instant::now();
        Ok(Decided::deterministic(
            Step::JudgeTestCases,
            start,
            self.judge_test_cases_now(protocol, test_cases),
        ))
    }

    async fn diagnose(
        &self,
        protocol: &ProtocolDocument,
        _error_description: &str,
        our_messages: &[Value],
    ) -> Result<Decided<FixDecision>, NegotiateError> {
        let start = Instant::now();
        Ok(Decided::deterministic(
            Step::Diagnose,
            start,
            self.diagnose_now(protocol, our_messages),
        ))
    }
}

fn reject(reason: String) -> Decision {
    Decision::Reject { reason }
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a value of schema `theirs` can stand where `ours` is expected.
fn compatible(ours: &Value, theirs: &Value) -> bool {
    let (ours, theirs) = (types(ours), types(theirs));
    if ours.is_empty() || theirs.is_empty() {
        return true;
    }
    theirs.iter().all(|kind| {
        ours.contains(kind) || (*kind == "integer" && ours.contains(&"number")) || *kind == "null"
    }) && theirs.iter().any(|kind| *kind != "null")
}

fn type_name(schema: &Value) -> String {
    let kinds = types(schema);
    if kinds.is_empty() {
        "untyped".into()
    } else {
        kinds.join(" or ")
    }
}

/// The response's payload field: its one non-envelope property.
fn payload_field(response: &Value) -> Option<String> {
    properties(response)
        .into_iter()
        .find(|(name, _)| !ENVELOPE_FIELDS.contains(name))
        .map(|(name, _)| name.to_owned())
}

/// Fields the candidate's side of a message has compared with ours.
struct Differences {
    mechanical: Vec<String>,
    fatal: Vec<String>,
}

/// Compares the request fields of a candidate with an action's input.
fn compare_inputs(action: &ActionSpec, request: &Value, differences: &mut Differences) {
    let theirs: Vec<(&str, &Value)> = properties(request)
        .into_iter()
        .filter(|(name, _)| !ENVELOPE_FIELDS.contains(name))
        .collect();
    let their_required = required(request);
    let ours: Vec<(&str, &Value)> = if is_object_schema(&action.input) {
        properties(&action.input)
    } else {
        vec![(INPUT_FIELD, &action.input)]
    };
    let our_required = if is_object_schema(&action.input) {
        required(&action.input)
    } else {
        vec![INPUT_FIELD]
    };
    let mut matched = Vec::new();
    for (name, schema) in &ours {
        let found = theirs
            .iter()
            .find(|(their, _)| their == name)
            .or_else(|| theirs.iter().find(|(their, _)| key(their) == key(name)));
        match found {
            Some((their_name, their_schema)) => {
                matched.push(*their_name);
                if !compatible(schema, their_schema) {
                    differences.fatal.push(format!(
                        "`{their_name}` is {} in the candidate but {} in action `{}`",
                        type_name(their_schema),
                        type_name(schema),
                        action.name
                    ));
                } else if their_name != name {
                    differences
                        .mechanical
                        .push(format!("rename request field `{their_name}` to `{name}`"));
                } else if our_required.contains(name)
                    && !their_required.contains(their_name)
                    && schema.get("default").is_none()
                {
                    differences
                        .mechanical
                        .push(format!("make request field `{name}` required"));
                }
            }
            None if our_required.contains(name) => match schema.get("default") {
                Some(default) => differences.mechanical.push(format!(
                    "add request field `{name}` (optional, default {default})"
                )),
                None => differences.fatal.push(format!(
                    "the candidate has no `{name}`, which action `{}` requires",
                    action.name
                )),
            },
            None => {}
        }
    }
    for (their_name, _) in theirs.iter().filter(|(name, _)| !matched.contains(name)) {
        if their_required.contains(their_name) {
            differences.fatal.push(format!(
                "the candidate requires `{their_name}`, which action `{}` does not take",
                action.name
            ));
        } else {
            differences.mechanical.push(format!(
                "drop optional request field `{their_name}`, which action `{}` ignores",
                action.name
            ));
        }
    }
}

/// Compares the response payload of a candidate with an action's output.
fn compare_outputs(action: &ActionSpec, response: &Value, differences: &mut Differences) {
    let Some(their_field) = payload_field(response) else {
        return;
    };
    let our_field = result_field(&action.output);
    if their_field != our_field {
        differences.mechanical.push(format!(
            "carry the result in `{our_field}` instead of `{their_field}`"
        ));
    }
    let their_payload = response
        .pointer(&format!("/properties/{their_field}"))
        .cloned()
        .unwrap_or(Value::Null);
    if !compatible(&action.output, &their_payload) {
        differences.fatal.push(format!(
            "the candidate's `{their_field}` is {} but action `{}` returns {}",
            type_name(&their_payload),
            action.name,
            type_name(&action.output)
        ));
        return;
    }
    let ours = properties(&action.output);
    let their_required = required(&their_payload);
    for (their_name, their_schema) in properties(&their_payload) {
        let found = ours
            .iter()
            .find(|(name, _)| *name == their_name)
            .or_else(|| ours.iter().find(|(name, _)| key(name) == key(their_name)));
        match found {
            Some((name, schema)) => {
                if !compatible(their_schema, schema) {
                    differences.fatal.push(format!(
                        "`{their_field}.{their_name}` is {} in the candidate but action `{}` returns {}",
                        type_name(their_schema),
                        action.name,
                        type_name(schema)
                    ));
                } else if *name != their_name {
                    differences
                        .mechanical
                        .push(format!("rename response field `{their_name}` to `{name}`"));
                }
            }
            None if their_required.contains(&their_name) => differences.fatal.push(format!(
                "the candidate expects `{their_field}.{their_name}`, which action `{}` does not return",
                action.name
            )),
            None => differences
                .mechanical
                .push(format!("drop optional response field `{their_name}`, which action `{}` does not return", action.name)),
        }
    }
}

/// The action a candidate calls: the one its `action` field names, else the best field overlap.
fn find_action<'a>(actions: &'a [ActionSpec], request: &Value) -> Result<&'a ActionSpec, String> {
    let named = request.pointer("/properties/action").and_then(|schema| {
        schema
            .get("const")
            .or_else(|| schema.get("enum").and_then(|values| values.get(0)))
            .or_else(|| schema.get("default"))
            .and_then(Value::as_str)
    });
    if let Some(name) = named {
        return actions
            .iter()
            .find(|action| action.name == name)
            .or_else(|| actions.iter().find(|action| key(&action.name) == key(name)))
            .ok_or_else(|| format!("we have no action `{name}`"));
    }
    let their_keys: Vec<String> = properties(request)
        .iter()
        .map(|(name, _)| key(name))
        .collect();
    actions
        .iter()
        .map(|action| {
            let overlap = properties(&action.input)
                .iter()
                .filter(|(name, _)| their_keys.contains(&key(name)))
                .count();
            (overlap, action)
        })
        .filter(|(overlap, _)| *overlap > 0)
        .max_by_key(|(overlap, _)| *overlap)
        .map(|(_, action)| action)
        .ok_or_else(|| "no action of ours takes any of the candidate's request fields".to_owned())
}

fn judge_as_provider(
    actions: &[ActionSpec],
    document: &ProtocolDocument,
    request: &Value,
    response: &Value,
) -> Decision {
    let action = match find_action(actions, request) {
        Ok(action) => action,
        Err(reason) => return reject(reason),
    };
    let mut differences = Differences {
        mechanical: Vec::new(),
        fatal: Vec::new(),
    };
    compare_inputs(action, request, &mut differences);
    compare_outputs(action, response, &mut differences);
    if !differences.fatal.is_empty() {
        return reject(format!(
            "the candidate does not fit action `{}`:\n- {}",
            action.name,
            differences.fatal.join("\n- ")
        ));
    }
    if differences.mechanical.is_empty() {
        return Decision::Accept;
    }
    let timeout = document.timeout.unwrap_or(DEFAULT_PROTOCOL_TIMEOUT);
    Decision::Counter {
        candidate: canonical_protocol(action, timeout),
        modification_summary: format!(
            "Aligned with action `{}` as we publish it:\n- {}",
            action.name,
            differences.mechanical.join("\n- ")
        ),
    }
}

fn judge_as_requester(
    need: &Need,
    peer_action: &ActionSpec,
    request: &Value,
    response: &Value,
) -> Decision {
    let supplied: Vec<String> = match &need.input {
        Some(input) => properties(input)
            .iter()
            .map(|(name, _)| key(name))
            .collect(),
        None => properties(&peer_action.input)
            .iter()
            .map(|(name, _)| key(name))
            .collect(),
    };
    let mut problems = Vec::new();
    for name in required(request) {
        if ENVELOPE_FIELDS.contains(&name) || supplied.contains(&key(name)) {
            continue;
        }
        let has_default = request
            .pointer(&format!("/properties/{name}/default"))
            .is_some();
        if !has_default {
            problems.push(format!(
                "the candidate requires `{name}`, which we cannot supply"
            ));
        }
    }
    if let Some(wanted) = &need.output {
        let payload = payload_field(response)
            .and_then(|field| response.pointer(&format!("/properties/{field}")).cloned())
            .unwrap_or(Value::Null);
        for name in missing_outputs(wanted, &payload) {
            problems.push(format!("the response carries no `{name}`, which we need"));
        }
    }
    if problems.is_empty() {
        Decision::Accept
    } else {
        reject(format!(
            "the candidate does not meet our need:\n- {}",
            problems.join("\n- ")
        ))
    }
}

/// The required fields of `wanted` that `offered` does not have (by style-independent name).
fn missing_outputs<'a>(wanted: &'a Value, offered: &Value) -> Vec<&'a str> {
    let offered: Vec<String> = properties(offered)
        .iter()
        .map(|(name, _)| key(name))
        .collect();
    let wanted_required = required(wanted);
    properties(wanted)
        .into_iter()
        .filter(|(name, _)| wanted_required.contains(name) && !offered.contains(&key(name)))
        .map(|(name, _)| name)
        .collect()
}

/// The action a schema without an `action` const most likely names: its title without a
/// trailing `Request`, as a verb phrase (`ProductInfoRequest` → `getProductInfo`).
fn action_name_from_title(request_schema: &Value) -> String {
    let title = request_schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("");
    let stem = title.strip_suffix("Request").unwrap_or(title);
    if stem.is_empty() {
        return "request".to_owned();
    }
    crate::naming::convert(
        &format!("get {stem}"),
        crate::naming::NamingStyle::CamelCase,
    )
}

/// An example value for a schema: its examples, default, const or first enum value, else
/// one built from its type.
fn example(schema: &Value, name: &str) -> Value {
    if let Some(value) = schema
        .get("examples")
        .and_then(|examples| examples.get(0))
        .or_else(|| schema.get("example"))
        .or_else(|| schema.get("const"))
        .or_else(|| schema.get("default"))
        .or_else(|| schema.get("enum").and_then(|values| values.get(0)))
    {
        return value.clone();
    }
    match types(schema)
        .into_iter()
        .find(|kind| *kind != "null")
        .unwrap_or("object")
    {
        "string" => json!(format!("example-{}", key(name))),
        "integer" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "number" => schema.get("minimum").cloned().unwrap_or(json!(1.5)),
        "boolean" => json!(true),
        "array" => {
            let items = schema
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            json!([example(&items, name)])
        }
        _ => example_object(schema, &Map::new()),
    }
}

/// An example object: every property of the schema, each with its example value.
fn example_object(schema: &Value, overrides: &Map<String, Value>) -> Value {
    let mut object = Map::new();
    for (name, property) in properties(schema) {
        let value = overrides
            .get(name)
            .cloned()
            .unwrap_or_else(|| example(property, name));
        object.insert(name.to_owned(), value);
    }
    Value::Object(object)
}
