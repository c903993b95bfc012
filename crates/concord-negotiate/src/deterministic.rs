//! The deterministic negotiator: rules over published JSON Schemas, no LLM. The embedded
//! default. Same inputs, same output, always.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use concord_proto::{Decision, FixDecision};
use serde_json::{json, Map, Value};

use crate::action::{canonical_protocol, ActionSpec, Need};
use crate::complexity::SchemaLimits;
use crate::document::{DocumentError, ProtocolDocument};
use crate::envelope::{segments, set_at, Envelope};
use crate::fit::{
    check_fit, find_action, is_single_value, payload_schema, request_data, request_data_schema,
    type_list, RequestData,
};
use crate::json_schema::{fallback, has_properties, properties, required, types};
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
/// - **Judge** (provider): accept a candidate one of our actions can serve as written, in
///   any envelope layout and naming style the rules map; counter-propose our canonical
///   protocol, naming every change, when we could serve it changed (a missing or optional
///   required input, a type change, an input we do not take, no message id or status code,
///   no readable schema); reject only an unknown action or a response field the action
///   never returns, naming it.
/// - **Judge** (requester): accept a counter-proposal whose required inputs we can supply
///   and whose response carries what we need; otherwise reject, naming the fields.
/// - **Test cases**: drafted from the schemas (examples, enums, boundaries, a not-found
///   case), judged by validating every message against the schemas.
/// - **Diagnose**: accept an error report when our recent messages break the schemas.
///
/// A candidate whose schemas are over its [`SchemaLimits`] (the defaults, or
/// [`DeterministicNegotiator::with_schema_limits`]) is rejected in either role, naming the
/// JSON pointer, the limit, the count and the limit's value: it is not read, so there is
/// nothing to counter.
#[derive(Debug, Clone, Default)]
pub struct DeterministicNegotiator {
    limits: SchemaLimits,
}

/// What the judge decided, and whether anyone (an LLM) may reconsider it.
pub(crate) enum Judged {
    /// A decision over a candidate the rules read (or could not map).
    Open(Decision),
    /// A rejection of a candidate over the schema limits: it must not be read further.
    Final(Decision),
}

impl DeterministicNegotiator {
    /// A deterministic negotiator, with the default [`SchemaLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The same negotiator, reading candidates' schemas within `limits`.
    pub fn with_schema_limits(mut self, limits: SchemaLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits candidates' schemas are read within.
    pub fn schema_limits(&self) -> &SchemaLimits {
        &self.limits
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
        match self.judge_checked(context, candidate) {
            Judged::Open(decision) | Judged::Final(decision) => decision,
        }
    }

    /// The judge step, saying whether its decision is final (a candidate over the limits).
    pub(crate) fn judge_checked(&self, context: JudgeContext<'_>, candidate: &str) -> Judged {
        Judged::Open(
            match ProtocolDocument::parse_within(candidate, &self.limits) {
                Ok(document) => self.judge_document(context, &document),
                Err(error @ DocumentError::TooComplex { .. }) => {
                    return Judged::Final(too_complex(&error))
                }
                Err(error) => match context {
                    JudgeContext::Provider { actions } => {
                        counter_unreadable_text(actions, candidate, &error.to_string())
                    }
                    JudgeContext::Requester { .. } => {
                        reject(format!("the candidate cannot be read: {error}"))
                    }
                },
            },
        )
    }

    /// The judge step on a candidate that parsed.
    fn judge_document(&self, context: JudgeContext<'_>, document: &ProtocolDocument) -> Decision {
        let schemas = (&document.request_schema, &document.response_schema);
        let (Some(request), Some(response)) = schemas else {
            let missing = match schemas {
                (None, None) => "a request or a response JSON Schema",
                (None, Some(_)) => "a request JSON Schema",
                _ => "a response JSON Schema",
            };
            let why = match &document.base {
                Some(base) => format!(
                    "the candidate builds on {} with changes in prose, and we do not hold that \
                     protocol's text: we could not find {missing}",
                    base.uri
                ),
                None => format!("we could not find {missing} in the candidate"),
            };
            return match context {
                JudgeContext::Provider { actions } => counter_unreadable(actions, document, &why),
                JudgeContext::Requester { .. } => reject(format!("{why}: send the full protocol")),
            };
        };
        let envelope = Envelope::of(document);
        match context {
            JudgeContext::Provider { actions } => {
                judge_as_provider(actions, document, &envelope, request, response)
            }
            JudgeContext::Requester { need, peer_action } => {
                judge_as_requester(need, peer_action, &envelope, request, response)
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
        let envelope = Envelope::of(protocol);
        let action = action_name_from_title(request_schema);
        let action = envelope
            .action_value
            .clone()
            .or_else(|| envelope.request_tag().map(|tag| json!(tag)))
            .unwrap_or_else(|| json!(action));
        let placement = request_data(&envelope, None);
        let wire_input = request_data_schema(&envelope, request_schema, &placement);
        let mut cases = Vec::new();
        let mut add = |name: String, request: Value, response: Value, expected: String| {
            cases.push(TestCase {
                name,
                request,
                response,
                expected,
            });
        };
        let id = |n: usize| format!("msg{n:03}");
        // The first example the request schema takes: every property filled, else (for
        // `oneOf`, `not`, `maxProperties`…) fewer.
        let with_envelope = |mut request: Value| {
            // Envelope fields the schema leaves open get their conventional values.
            if let Some((field, value)) = &envelope.request_type {
                request[field.as_str()] = value.clone().unwrap_or_else(|| action.clone());
            }
            if let Some(field) = &envelope.action_field {
                request[field.as_str()] = action.clone();
            }
            request[envelope.request_id.as_str()] = json!(id(1));
            request
        };
        let examples: Vec<Value> = example_candidates(request_schema)
            .into_iter()
            .map(with_envelope)
            .collect();
        let base_request = examples
            .iter()
            .find(|request| schemas.check_request(request).is_empty())
            .or_else(|| examples.first())
            .cloned()
            .unwrap_or_else(|| json!({}));
        let response = |message_id: &str, code: Option<(i64, &str)>| {
            let mut response = json!({});
            response[envelope.response_id.as_str()] = json!(message_id);
            if let Some((field, value)) = &envelope.response_type {
                response[field.as_str()] = value.clone().unwrap_or_else(|| action.clone());
            }
            let (code, message) = code.unwrap_or((envelope.success_code.unwrap_or(200), "OK"));
            let is_error = code != envelope.success_code.unwrap_or(200);
            let in_error_object = |pointer: &str| {
                segments(pointer)
                    .first()
                    .is_some_and(|root| envelope.is_error_only(root))
            };
            if let Some(pointer) = &envelope.code_at {
                if is_error || !in_error_object(pointer) {
                    set_at(&mut response, pointer, json!(code));
                }
            }
            if let Some(pointer) = &envelope.message_at {
                if is_error || !in_error_object(pointer) {
                    set_at(&mut response, pointer, json!(message));
                }
            }
            if let Some(status) = &envelope.status_text {
                let word = if is_error {
                    status.word_for(code)
                } else {
                    &status.success
                };
                response[status.field.as_str()] = word.clone();
            }
            // A required error object is `null` on success.
            if let Some(field) = envelope
                .error_field
                .as_deref()
                .filter(|field| !is_error && required(response_schema).contains(field))
            {
                response[field] = Value::Null;
            }
            let payload = envelope.payload_fields.clone().unwrap_or_default();
            // Each data field's examples, the fullest first (see `example_candidates`).
            let mut examples: Vec<(&str, Vec<Value>)> = Vec::new();
            for field in &payload {
                let schema = properties(response_schema)
                    .into_iter()
                    .find(|(name, _)| name == field)
                    .map(|(_, schema)| schema.clone())
                    .unwrap_or(Value::Null);
                if !is_error {
                    let full = example(&schema, field);
                    let mut each = vec![full.clone()];
                    if full.is_object() {
                        each.extend(example_candidates(&schema).into_iter().skip(1));
                    }
                    examples.push((field, each));
                } else if required(response_schema).contains(&field.as_str()) {
                    response[field.as_str()] = Value::Null;
                }
            }
            // The first filling the response schema takes, else the fullest.
            let rounds = examples
                .iter()
                .map(|(_, each)| each.len())
                .max()
                .unwrap_or(1);
            let filled = |round: usize| {
                let mut filled = response.clone();
                for (field, each) in &examples {
                    if let Some(value) = each.get(round).or_else(|| each.last()) {
                        filled[*field] = value.clone();
                    }
                }
                filled
            };
            (0..rounds)
                .map(filled)
                .find(|candidate| schemas.check_response(candidate).is_empty())
                .unwrap_or_else(|| filled(0))
        };
        add(
            "found".into(),
            base_request.clone(),
            response("", None),
            "The action succeeds, with the result.".into(),
        );
        // The request's data fields, wherever they sit.
        let data_at = |request: &mut Value, name: &str, value: Value| {
            let target = match &placement {
                RequestData::Fields => Some(request),
                RequestData::Single(field) => request.get_mut(field.as_str()),
            };
            // A peer's example for the field may be anything: only an object takes it.
            if let Some(object) = target.and_then(Value::as_object_mut) {
                object.insert(name.to_owned(), value);
            }
        };
        // One case per enum value and per numeric boundary of the request's own fields.
        for (name, schema) in properties(&wire_input) {
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
                data_at(&mut request, name, value);
                add(
                    label,
                    request,
                    response("", None),
                    "The action succeeds.".into(),
                );
            }
        }
        // A not-found case for the first required string field, when errors are HTTP codes.
        let http = (envelope.success_code == Some(200) && envelope.code_at.is_some())
            || (envelope.code_at.is_none() && envelope.status_text.is_some());
        if http {
            if let Some((name, _)) = properties(&wire_input).into_iter().find(|(name, schema)| {
                required(&wire_input).contains(name)
                    && schema.get("type").and_then(Value::as_str) == Some("string")
                    && schema.get("enum").is_none()
                    && schema.get("const").is_none()
            }) {
                let mut request = base_request.clone();
                data_at(&mut request, name, json!("does-not-exist"));
                add(
                    format!("unknown `{name}`"),
                    request,
                    response("", Some((404, "Not found"))),
                    format!("Nothing has this `{name}`: status 404, no result."),
                );
            }
        }
        // A case the schemas refuse (a variant a rule of the input forbids) is dropped;
        // no valid case at all is an error.
        let mut first_problem = None;
        let cases: Vec<TestCase> = cases
            .into_iter()
            .filter(|case| {
                let mut probe = case.clone();
                probe.request[envelope.request_id.as_str()] = json!(id(1));
                probe.response[envelope.response_id.as_str()] = json!(id(1));
                let problems: Vec<_> = schemas
                    .check_request(&probe.request)
                    .into_iter()
                    .chain(schemas.check_response(&probe.response))
                    .collect();
                if !problems.is_empty() && first_problem.is_none() {
                    first_problem = Some(format!(
                        "cannot build a valid example for {:?}: {}",
                        case.name,
                        problems
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                }
                problems.is_empty()
            })
            .collect();
        if cases.is_empty() {
            return Err(NegotiateError::Schema {
                which: "request",
                message: first_problem.unwrap_or_else(|| "no test case can be drafted".into()),
            });
        }
        // Number the cases and their message ids in order: msg001, msg002, …
        let cases: Vec<TestCase> = cases
            .into_iter()
            .enumerate()
            .map(|(index, mut case)| {
                case.name = format!("Test case {}: {}", index + 1, case.name);
                let message_id = json!(id(index + 1));
                case.request[envelope.request_id.as_str()] = message_id.clone();
                case.response[envelope.response_id.as_str()] = message_id;
                case
            })
            .collect();
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
            let envelope = schemas.envelope();
            let request_id = case.request.get(envelope.request_id.as_str());
            if request_id.is_some()
                && request_id != case.response.get(envelope.response_id.as_str())
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
            let violations = if schemas.is_response(message) {
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

/// The rejection of a candidate over the schema limits, naming pointer, limit and count.
pub(crate) fn too_complex(error: &DocumentError) -> Decision {
    reject(format!("{error}; we read no candidate past these limits"))
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

/// Fields the candidate's side of a message has compared with ours.
#[derive(Default)]
struct Differences {
    /// What a counter-proposal changes (we cannot serve the candidate as written).
    mechanical: Vec<String>,
    /// What no protocol with this action can give (the candidate cannot be satisfied).
    fatal: Vec<String>,
}

/// Compares the request data of a candidate with an action's input: a field the action
/// requires that the request lacks, or may omit, a type change, or a field the action
/// does not take are each a change a counter-proposal makes; naming styles are mapped.
fn compare_inputs(
    action: &ActionSpec,
    placement: &RequestData,
    wire: &Value,
    differences: &mut Differences,
) {
    if is_single_value(Some(&action.input)) || !has_properties(wire) {
        if !crate::json_schema::compatible(wire, &action.input) {
            differences.mechanical.push(format!(
                "carry the input as {} (action `{}` takes {})",
                type_list(&action.input),
                action.name,
                type_list(wire)
            ));
        }
        return;
    }
    let theirs = properties(wire);
    let their_required = required(wire);
    let inside = match placement {
        RequestData::Single(field) => format!(" (in `{field}`)"),
        RequestData::Fields => String::new(),
    };
    let mut matched = Vec::new();
    let our_required = required(&action.input);
    for (name, schema) in properties(&action.input) {
        let ours_required = our_required.contains(&name) && fallback(schema).is_none();
        let found = theirs
            .iter()
            .find(|(their, _)| *their == name)
            .or_else(|| theirs.iter().find(|(their, _)| key(their) == key(name)));
        match found {
            Some((their_name, their_schema)) => {
                matched.push(*their_name);
                if let Err(problem) = check_fit(
                    &serde_json::json!({"properties": {*their_name: their_schema}}),
                    &serde_json::json!({"properties": {name: schema}}),
                    "the request",
                ) {
                    differences.mechanical.push(format!(
                        "request field `{their_name}`{inside}: {problem}; use action `{}`'s type",
                        action.name
                    ));
                } else if ours_required && !their_required.contains(their_name) {
                    differences.mechanical.push(format!(
                        "make request field `{their_name}`{inside} required"
                    ));
                }
            }
            None if ours_required => differences.mechanical.push(format!(
                "add request field `{name}`{inside}, which action `{}` requires",
                action.name
            )),
            None => {}
        }
    }
    for (their_name, _) in theirs.iter().filter(|(name, _)| !matched.contains(name)) {
        differences.mechanical.push(format!(
            "drop request field `{their_name}`{inside}, which action `{}` does not take",
            action.name
        ));
    }
}

/// Compares the response data of a candidate with an action's output: a field the
/// candidate requires that the action never returns cannot be satisfied; a type change is
/// a change a counter-proposal makes.
fn compare_outputs(
    action: &ActionSpec,
    envelope: &Envelope,
    wire: &Value,
    differences: &mut Differences,
) {
    let carrier = match envelope.payload_fields.as_deref() {
        Some([single]) => format!("`{single}`"),
        _ => "the response".to_owned(),
    };
    if is_single_value(Some(&action.output)) || !has_properties(wire) {
        if !crate::json_schema::compatible(&action.output, wire) {
            differences.mechanical.push(format!(
                "carry the result in {carrier} as {} (action `{}` returns {})",
                type_list(&action.output),
                action.name,
                type_list(&action.output)
            ));
        }
        return;
    }
    let ours = properties(&action.output);
    let their_required = required(wire);
    for (their_name, their_schema) in properties(wire) {
        let found = ours
            .iter()
            .find(|(name, _)| *name == their_name)
            .or_else(|| ours.iter().find(|(name, _)| key(name) == key(their_name)));
        match found {
            Some((name, schema)) => {
                if let Err(problem) = check_fit(
                    &serde_json::json!({"properties": {*name: schema}}),
                    &serde_json::json!({"properties": {their_name: their_schema}}),
                    &format!("action `{}`'s output", action.name),
                ) {
                    differences.mechanical.push(format!(
                        "response field `{their_name}` in {carrier}: {problem}; use our type"
                    ));
                }
            }
            None if their_required.contains(&their_name) && fallback(their_schema).is_none() => {
                differences.fatal.push(format!(
                    "the candidate requires `{their_name}` in {carrier}, which action `{}` does not return",
                    action.name
                ))
            }
            None => {}
        }
    }
}

/// What the envelope lacks for us to serve it: a message id in both messages, a status
/// code to report errors with.
fn compare_envelope(
    envelope: &Envelope,
    request: &Value,
    response: &Value,
    differences: &mut Differences,
) {
    let has =
        |schema: &Value, field: &str| properties(schema).iter().any(|(name, _)| *name == field);
    if !has(request, &envelope.request_id) {
        differences
            .mechanical
            .push("add a `messageId` to requests (we answer each request by its id)".into());
    }
    if !has(response, &envelope.response_id) {
        differences
            .mechanical
            .push("add a `messageId` to responses, echoing the request's".into());
    }
    if envelope.code_at.is_none() && envelope.status_text.is_none() {
        differences
            .mechanical
            .push("add a status code to responses (`status.code`, HTTP codes) so that errors can be reported".into());
    }
}

fn judge_as_provider(
    actions: &[ActionSpec],
    document: &ProtocolDocument,
    envelope: &Envelope,
    request: &Value,
    response: &Value,
) -> Decision {
    let action = match find_action(actions, envelope) {
        Ok(action) => action,
        Err(reason) => return reject(reason),
    };
    let mut differences = Differences::default();
    compare_envelope(envelope, request, response, &mut differences);
    let placement = request_data(envelope, Some(&action.input));
    let wire_input = request_data_schema(envelope, request, &placement);
    compare_inputs(action, &placement, &wire_input, &mut differences);
    compare_outputs(
        action,
        envelope,
        &payload_schema(envelope, response),
        &mut differences,
    );
    if !differences.fatal.is_empty() {
        return reject(format!(
            "the candidate cannot be satisfied by action `{}`: {}",
            action.name,
            differences.fatal.join("; ")
        ));
    }
    if differences.mechanical.is_empty() {
        return Decision::Accept;
    }
    counter(action, document, &differences.mechanical)
}

/// Our canonical protocol for `action`, with a summary naming every change.
fn counter(action: &ActionSpec, document: &ProtocolDocument, changes: &[String]) -> Decision {
    let timeout = document.timeout.unwrap_or(DEFAULT_PROTOCOL_TIMEOUT);
    Decision::Counter {
        candidate: canonical_protocol(action, timeout),
        modification_summary: format!(
            "We cannot serve the candidate as written; this is action `{}` as we publish it. \
             Changes:\n- {}",
            action.name,
            changes.join("\n- ")
        ),
    }
}

/// The action a document we cannot read is most likely about: the one its text names
/// (in any naming style), else our only action.
fn action_named_in<'a>(actions: &'a [ActionSpec], text: &str) -> Option<&'a ActionSpec> {
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|word| !word.is_empty())
        .map(key)
        .collect();
    actions
        .iter()
        .find(|action| words.contains(&key(&action.name)))
        .or(match actions {
            [only] => Some(only),
            _ => None,
        })
}

/// A counter-proposal to a candidate whose schemas we could not find: our protocol for
/// the action it names, saying what we could not read; a rejection when we cannot tell
/// which action it is about.
fn counter_unreadable(actions: &[ActionSpec], document: &ProtocolDocument, why: &str) -> Decision {
    match action_named_in(actions, document.text()) {
        Some(action) => counter(
            action,
            document,
            &[format!("{why}; here are both, as JSON Schemas")],
        ),
        None => reject(unknown_action(actions, why)),
    }
}

fn counter_unreadable_text(actions: &[ActionSpec], candidate: &str, why: &str) -> Decision {
    match action_named_in(actions, candidate) {
        Some(action) => Decision::Counter {
            candidate: canonical_protocol(action, DEFAULT_PROTOCOL_TIMEOUT),
            modification_summary: format!(
                "We could not read the candidate ({why}); this is action `{}` as we publish it, \
                 with request and response JSON Schemas.",
                action.name
            ),
        },
        None => reject(unknown_action(actions, why)),
    }
}

fn unknown_action(actions: &[ActionSpec], why: &str) -> String {
    let names: Vec<&str> = actions.iter().map(|action| action.name.as_str()).collect();
    format!(
        "{why}, and it names none of our actions ({}): propose one of them",
        list(&names)
    )
}

fn judge_as_requester(
    need: &Need,
    peer_action: &ActionSpec,
    envelope: &Envelope,
    request: &Value,
    response: &Value,
) -> Decision {
    let mut problems = Vec::new();
    let mut envelope_gaps = Differences::default();
    compare_envelope(envelope, request, response, &mut envelope_gaps);
    problems.extend(envelope_gaps.mechanical);
    let input = need.input.as_ref().unwrap_or(&peer_action.input);
    let placement = request_data(envelope, Some(input));
    let wire_input = request_data_schema(envelope, request, &placement);
    if let Err(problem) = check_fit(input, &wire_input, "our input") {
        problems.push(format!("we cannot fill the request: {problem}"));
    }
    if let Some(output) = &need.output {
        if let Err(problem) = check_fit(&payload_schema(envelope, response), output, "the response")
        {
            problems.push(format!(
                "the response does not carry what we need: {problem}"
            ));
        }
    }
    if problems.is_empty() {
        Decision::Accept
    } else {
        reject(format!(
            "the candidate does not meet our need: {}",
            problems.join("; ")
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

/// Example objects for `schema`, the fullest first: every property; the required ones
/// only; then, for each `oneOf`/`anyOf` branch, the schema with that branch alone, filled
/// fully and with its required properties only.
fn example_candidates(schema: &Value) -> Vec<Value> {
    let mut candidates = vec![
        example_object(schema, &Map::new()),
        example_required(schema),
    ];
    for keyword in ["oneOf", "anyOf"] {
        let branches = schema
            .get(keyword)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for branch in branches {
            let mut one = schema.clone();
            one[keyword] = json!([branch]);
            candidates.push(example_object(&one, &Map::new()));
            candidates.push(example_required(&one));
        }
    }
    candidates
}

/// An example object of the schema's required properties only.
fn example_required(schema: &Value) -> Value {
    let required = required(schema);
    Value::Object(
        properties(schema)
            .into_iter()
            .filter(|(name, _)| required.contains(name))
            .map(|(name, property)| (name.to_owned(), example(property, name)))
            .collect(),
    )
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
