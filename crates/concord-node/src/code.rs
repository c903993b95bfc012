//! The protocol's code on our side, through `concord-handlers`: generating it (templates,
//! the LLM when none fits), loading it into the sandbox, and using it to turn calls into
//! messages and back, and to answer and check the agreed test cases.

use std::sync::Arc;
use std::time::Duration;

use concord_context::PeerLabel;
use concord_handlers::wire;
use concord_handlers::{
    diff, CaseRunner, Direction, ErrorStatus, Generator, Local, Origin, Outcome, Provider, Reply,
    Requester, RuntimeError, Verifier,
};
use concord_negotiate::{ActionSpec, Need, ProtocolDocument, TestCase, TestCases};
use concord_sandbox::{Handler, Sandbox};
use serde_json::Value;

use crate::action::ActionError;
use crate::error::CallError;
use crate::node::Shared;

/// What our handler maps the protocol's messages to and from.
#[derive(Debug, Clone)]
pub(crate) enum LocalSide {
    /// Our actions; the code serves the one the protocol calls.
    Provider(Vec<ActionSpec>),
    /// Our need (its absent schemas: as the protocol has them).
    Requester(Need),
}

/// A message we cannot use.
#[derive(Debug, Clone)]
pub(crate) struct BadMessage {
    /// Its messageId, when it could be read.
    pub(crate) message_id: Option<String>,
    /// What is wrong, for our logs and callers.
    pub(crate) reason: String,
    /// The fix-error report for the peer, when the fault is the peer's.
    pub(crate) report: Option<String>,
}

/// A decoded request: the message id to answer and the action input.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) message_id: String,
    pub(crate) input: Value,
}

/// How our code came to be, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodeInfo {
    /// `template`, or `LLM (attempt n)`.
    pub origin: String,
    /// Test cases the module passed before it was used.
    pub cases_run: usize,
    /// LLM calls made to write it.
    pub llm_calls: u64,
    /// Prompt tokens sent.
    pub tokens_in: u64,
    /// Completion tokens received.
    pub tokens_out: u64,
    /// Wall time of the generation.
    pub wall: Duration,
}

/// Our handler's copy with what it needs to run test cases on another thread.
pub(crate) struct CaseCheck {
    handler: Handler,
    verifier: Arc<Verifier>,
    local: Local,
}

impl CaseCheck {
    /// Runs `cases` on our side: the fix-error report when our code fails them.
    pub(crate) fn run(mut self, cases: &TestCases) -> Option<String> {
        CaseRunner::new(&self.verifier)
            .with_side(&mut self.handler, &self.local)
            .run(cases)
            .fix_error_report()
    }
}

enum Path {
    Requester(Requester),
    Provider(Provider),
}

/// Our loaded handler for one protocol and role.
pub(crate) struct ProtocolCode {
    source: String,
    action: String,
    local: Local,
    verifier: Arc<Verifier>,
    /// JSON pointer of a response's status code.
    code_at: String,
    /// JSON pointer of a response's status message (free text in test cases).
    message_at: String,
    /// The response's data fields (outside the envelope), from its schema.
    payload_fields: Option<Vec<String>>,
    input_limit: usize,
    path: Path,
}

impl std::fmt::Debug for ProtocolCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolCode")
            .field("action", &self.action)
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl ProtocolCode {
    fn new(
        document: &ProtocolDocument,
        local: Local,
        source: String,
        limits: &concord_sandbox::Limits,
    ) -> Result<Self, String> {
        let verifier = Arc::new(Verifier::new(document).map_err(|error| error.to_string())?);
        let handler = Sandbox::load(&source, local.role(), limits.clone())
            .map_err(|error| format!("the handler module does not load: {error}"))?;
        let path = match local.role() {
            concord_sandbox::Role::Requester => Path::Requester(
                Requester::new(handler, Arc::clone(&verifier)).map_err(|e| e.to_string())?,
            ),
            concord_sandbox::Role::Provider => Path::Provider(
                Provider::new(handler, Arc::clone(&verifier)).map_err(|e| e.to_string())?,
            ),
        };
        let convention = &document.error_convention;
        let code_at = convention
            .code_pointer
            .clone()
            .unwrap_or_else(|| "/status/code".to_owned());
        let message_at = convention
            .message_pointer
            .clone()
            .unwrap_or_else(|| "/status/message".to_owned());
        let roots = [root(&code_at), root(&message_at)];
        let payload_fields = document.response_schema.as_ref().map(|schema| {
            schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| {
                    properties
                        .keys()
                        .filter(|name| {
                            *name != "type"
                                && !is_message_id_key(name)
                                && !roots.contains(&Some(name.as_str()))
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        });
        Ok(Self {
            action: local.action().to_owned(),
            source,
            local,
            verifier,
            code_at,
            message_at,
            payload_fields,
            input_limit: limits.input_bytes,
            path,
        })
    }

    /// The handler module's source (stored with the protocol).
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The action the protocol calls.
    pub(crate) fn action(&self) -> &str {
        &self.action
    }

    /// Requester: the request for `input`, encoded for the wire.
    pub(crate) fn encode_request(
        &mut self,
        message_id: &str,
        input: &Value,
    ) -> Result<Vec<u8>, String> {
        let Path::Requester(requester) = &mut self.path else {
            return Err("this session is not the requester".to_owned());
        };
        requester
            .encode_request(message_id, input)
            .map_err(|error| error.to_string())
    }

    /// Requester: a response's messageId and what it means for the call.
    pub(crate) fn read_response(
        &mut self,
        bytes: &[u8],
    ) -> Result<(String, Result<Value, CallError>), BadMessage> {
        let Path::Requester(requester) = &mut self.path else {
            return Err(self.bad(bytes, "this session is not the requester".to_owned(), None));
        };
        match requester.decode_response(bytes) {
            Ok(Reply::Output { message_id, output }) => Ok((message_id, Ok(output))),
            Ok(Reply::Error { message_id, error }) => Ok((
                message_id,
                Err(CallError::Remote {
                    code: error.code,
                    message: error.message,
                }),
            )),
            Err(error) => Err(self.runtime_failure(bytes, error)),
        }
    }

    /// Provider: a request's messageId and the action input.
    pub(crate) fn read_request(&mut self, bytes: &[u8]) -> Result<Request, BadMessage> {
        let Path::Provider(provider) = &mut self.path else {
            return Err(self.bad(bytes, "this session is not the provider".to_owned(), None));
        };
        match provider.decode_request(bytes) {
            Ok(incoming) => Ok(Request {
                message_id: incoming.message_id,
                input: incoming.input,
            }),
            Err(error) => Err(self.runtime_failure(bytes, error)),
        }
    }

    /// Provider: the response to `message_id`, encoded for the wire.
    pub(crate) fn write_response(
        &mut self,
        message_id: &str,
        result: Result<Value, ActionError>,
    ) -> Result<Vec<u8>, String> {
        let Path::Provider(provider) = &mut self.path else {
            return Err("this session is not the provider".to_owned());
        };
        let outcome = match result {
            Ok(value) => Outcome::Result(value),
            Err(error) => Outcome::Error(ErrorStatus {
                code: i64::from(error.code),
                message: error.message,
            }),
        };
        provider
            .encode_response(message_id, &outcome)
            .map_err(|error| error.to_string())
    }

    /// Requester: a test case's request as a verification message, with its messageId.
    pub(crate) fn test_case_request(&self, case: &TestCase) -> Result<(String, Vec<u8>), String> {
        let message_id = find_message_id(&case.request)
            .ok_or_else(|| "the case's request has no messageId".to_owned())?;
        let bytes = wire::encode(self.verifier.encoding(), &case.request)
            .map_err(|error| error.to_string())?;
        Ok((message_id, bytes))
    }

    /// Requester: checks the peer's answer to a verification request against the case it
    /// answers: the response schema, then the case's response (a success's status message
    /// is free text). Returns the messageId and the differences, if any.
    pub(crate) fn test_case_response(
        &self,
        cases: &TestCases,
        bytes: &[u8],
    ) -> Result<(String, Result<(), String>), BadMessage> {
        let message =
            wire::decode(self.verifier.encoding(), bytes, self.input_limit).map_err(|error| {
                BadMessage {
                    message_id: None,
                    reason: error.to_string(),
                    report: Some(format!(
                        "A verification response we received cannot be read: {error}"
                    )),
                }
            })?;
        let message_id = find_message_id(&message).ok_or_else(|| BadMessage {
            message_id: None,
            reason: "a verification response has no messageId".to_owned(),
            report: Some("A verification response we received has no messageId.".to_owned()),
        })?;
        let Some(case) = cases
            .cases
            .iter()
            .find(|case| find_message_id(&case.request).as_deref() == Some(&message_id))
        else {
            return Ok((message_id, Err("it answers no agreed test case".to_owned())));
        };
        if let Err(invalid) = self.verifier.check(Direction::Response, &message) {
            return Ok((message_id, Err(invalid.to_string())));
        }
        let is_error = message
            .pointer(&self.code_at)
            .and_then(Value::as_i64)
            .is_some_and(|code| code >= 400);
        let differences: Vec<String> = diff(&case.response, &message)
            .into_iter()
            .filter(|difference| {
                !(!is_error
                    && difference.pointer == self.message_at
                    && difference.expected.as_ref().is_some_and(Value::is_string)
                    && difference.actual.as_ref().is_some_and(Value::is_string))
            })
            .map(|difference| difference.to_string())
            .collect();
        if differences.is_empty() {
            Ok((message_id, Ok(())))
        } else {
            Ok((message_id, Err(differences.join("; "))))
        }
    }

    /// Provider: answers a verification request with our real code, the agreed case's
    /// response standing in for the action (nothing is run).
    pub(crate) fn answer_test_case(
        &mut self,
        cases: &str,
        bytes: &[u8],
    ) -> Result<Vec<u8>, BadMessage> {
        let cases = TestCases::parse(cases).map_err(|error| BadMessage {
            message_id: None,
            reason: format!("the agreed test cases cannot be read: {error}"),
            report: None,
        })?;
        let request = self.read_request(bytes)?;
        let Some(case) = cases
            .cases
            .iter()
            .find(|case| find_message_id(&case.request).as_deref() == Some(&request.message_id))
        else {
            return Err(BadMessage {
                report: Some(format!(
                    "The verification request with messageId {:?} matches no agreed test case.",
                    request.message_id
                )),
                message_id: Some(request.message_id),
                reason: "a verification request that matches no agreed test case".to_owned(),
            });
        };
        let outcome = self.stub_outcome(&case.response);
        let Path::Provider(provider) = &mut self.path else {
            return Err(self.bad(bytes, "this session is not the provider".to_owned(), None));
        };
        provider
            .encode_response(&request.message_id, &outcome)
            .map_err(|error| BadMessage {
                message_id: Some(request.message_id),
                reason: error.to_string(),
                report: None,
            })
    }

    /// What the action must answer for a case's response: its error status (a code of 400
    /// or more), or its data: the one data field's value, or the data fields as an object.
    fn stub_outcome(&self, response: &Value) -> Outcome {
        let code = response.pointer(&self.code_at).and_then(Value::as_i64);
        if let Some(code) = code.filter(|code| *code >= 400) {
            return Outcome::Error(ErrorStatus {
                code,
                message: response
                    .pointer(&self.message_at)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        let names: Vec<String> = match &self.payload_fields {
            Some(names) => names.clone(),
            None => response
                .as_object()
                .map(|object| {
                    object
                        .keys()
                        .filter(|key| {
                            *key != "type"
                                && !is_message_id_key(key)
                                && Some(key.as_str()) != root(&self.code_at)
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        };
        match names.as_slice() {
            [single] => Outcome::Result(response.get(single).cloned().unwrap_or(Value::Null)),
            _ => Outcome::Result(Value::Object(
                names
                    .iter()
                    .filter_map(|name| Some((name.clone(), response.get(name)?.clone())))
                    .collect(),
            )),
        }
    }

    /// Provider: an error response written without our handler, for when our handler
    /// cannot answer a verification request: the requester sees the failure and reports it.
    pub(crate) fn fallback_error(&self, message_id: &str, reason: &str) -> Vec<u8> {
        let mut message = serde_json::json!({"messageId": message_id, "type": "RESPONSE"});
        set_at(&mut message, &self.code_at, Value::from(500));
        set_at(
            &mut message,
            &self.message_at,
            Value::from(format!("our handler failed: {reason}")),
        );
        wire::encode(self.verifier.encoding(), &message)
            .or_else(|_| serde_json::to_vec(&message))
            .unwrap_or_default()
    }

    /// A copy of our handler to run the agreed cases on, away from the session.
    pub(crate) fn case_check(&self) -> Result<CaseCheck, String> {
        Ok(CaseCheck {
            handler: self
                .handler()
                .try_clone()
                .map_err(|error| error.to_string())?,
            verifier: Arc::clone(&self.verifier),
            local: self.local.clone(),
        })
    }

    /// Our recent messages, decoded, for a diagnosis.
    pub(crate) fn decode_sent(&self, sent: &[Vec<u8>]) -> Vec<Value> {
        sent.iter()
            .filter_map(|bytes| wire::decode(self.verifier.encoding(), bytes, usize::MAX).ok())
            .collect()
    }

    fn handler(&self) -> &Handler {
        match &self.path {
            Path::Requester(requester) => requester.handler(),
            Path::Provider(provider) => provider.handler(),
        }
    }

    fn runtime_failure(&self, bytes: &[u8], error: RuntimeError) -> BadMessage {
        let report = match &error {
            RuntimeError::InvalidIncoming(invalid) => {
                let message = wire::decode(self.verifier.encoding(), bytes, self.input_limit)
                    .unwrap_or(Value::Null);
                Some(invalid.error_description(&message))
            }
            RuntimeError::Wire { .. } => Some(format!("A message we received {error}.")),
            _ => None,
        };
        self.bad(bytes, error.to_string(), report)
    }

    fn bad(&self, bytes: &[u8], reason: String, report: Option<String>) -> BadMessage {
        let message_id = wire::decode(self.verifier.encoding(), bytes, self.input_limit)
            .ok()
            .as_ref()
            .and_then(find_message_id);
        BadMessage {
            message_id,
            reason,
            report,
        }
    }
}

/// The message id a message carries: `messageId`, or a field with that name in another
/// naming style.
fn find_message_id(message: &Value) -> Option<String> {
    let object = message.as_object()?;
    object
        .get("messageId")
        .or_else(|| {
            object
                .iter()
                .find_map(|(key, value)| is_message_id_key(key).then_some(value))
        })
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Whether a field name is `messageId` in some naming style.
fn is_message_id_key(key: &str) -> bool {
    concord_negotiate::naming::key(key) == concord_negotiate::naming::key("messageId")
}

/// The first segment of a JSON pointer (`/status/code` → `status`).
fn root(pointer: &str) -> Option<&str> {
    pointer.strip_prefix('/')?.split('/').next()
}

/// Sets the value at a JSON pointer, creating objects on the way.
fn set_at(target: &mut Value, pointer: &str, value: Value) {
    let segments: Vec<&str> = pointer.split('/').skip(1).collect();
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut current = target;
    for segment in parents {
        if !current.get(*segment).is_some_and(Value::is_object) {
            current[*segment] = serde_json::json!({});
        }
        current = &mut current[*segment];
    }
    current[*last] = value;
}

/// Our side for `document`: on the provider, the action it calls (its `action` constant,
/// else our only action, else the one whose input fields it shares most).
fn local_for(document: &ProtocolDocument, side: &LocalSide) -> Result<Local, String> {
    match side {
        LocalSide::Requester(need) => Ok(Local::Requester(need.clone())),
        LocalSide::Provider(actions) => {
            let named = document
                .request_schema
                .as_ref()
                .and_then(|schema| schema.pointer("/properties/action/const"))
                .and_then(Value::as_str);
            let chosen = match named {
                Some(name) => actions.iter().find(|action| action.name == name),
                None if actions.len() == 1 => actions.first(),
                None => actions
                    .iter()
                    .max_by_key(|action| shared_fields(document, action)),
            };
            chosen
                .cloned()
                .map(Local::Provider)
                .ok_or_else(|| match named {
                    Some(name) => {
                        format!("the protocol calls action `{name}`, which we do not serve")
                    }
                    None => "we serve no action".to_owned(),
                })
        }
    }
}

fn shared_fields(document: &ProtocolDocument, action: &ActionSpec) -> usize {
    let names = |schema: Option<&Value>| -> Vec<String> {
        schema
            .and_then(|schema| schema.get("properties"))
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default()
    };
    let theirs = names(document.request_schema.as_ref());
    names(Some(&action.input))
        .iter()
        .filter(|name| theirs.contains(name))
        .count()
}

fn parse(document: &str) -> Result<ProtocolDocument, String> {
    ProtocolDocument::parse(document)
        .map_err(|error| format!("the protocol cannot be read: {error}"))
}

/// Generates our handler for `document` (templates first, the LLM when none fits), verified
/// against `cases` (else cases drafted from the schemas), and loads it.
pub(crate) async fn generate(
    shared: &Shared,
    document: &str,
    side: LocalSide,
    cases: Option<String>,
    peer: &str,
) -> Result<(ProtocolCode, CodeInfo), String> {
    let document = parse(document)?;
    let local = local_for(&document, &side)?;
    let cases = cases
        .as_deref()
        .map(TestCases::parse)
        .transpose()
        .map_err(|error| format!("the agreed test cases cannot be read: {error}"))?;
    let mut generator = Generator::new().with_limits(shared.handler_limits.clone());
    if let Some(client) = &shared.llm {
        generator = generator.with_llm(client.clone());
        if let Ok(label) = PeerLabel::new(peer) {
            generator = generator.with_peer(label);
        }
    }
    let generated = generator
        .generate(&document, &local, cases.as_ref())
        .await
        .map_err(|error| error.to_string())?;
    let info = CodeInfo {
        origin: match generated.origin {
            Origin::Template => "template".to_owned(),
            other => other.to_string(),
        },
        cases_run: generated.cases_run,
        llm_calls: generated.usage.calls,
        tokens_in: generated.usage.prompt_tokens,
        tokens_out: generated.usage.completion_tokens,
        wall: generated.usage.wall_time,
    };
    let code = ProtocolCode::new(&document, local, generated.source, &shared.handler_limits)?;
    Ok((code, info))
}

/// Loads a stored handler for `document`.
pub(crate) fn load(
    document: &str,
    source: &str,
    side: &LocalSide,
    limits: &concord_sandbox::Limits,
) -> Result<ProtocolCode, String> {
    let document = parse(document)?;
    let local = local_for(&document, side)?;
    ProtocolCode::new(&document, local, source.to_owned(), limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_set_and_root() {
        let mut message = json!({"messageId": "m"});
        set_at(&mut message, "/status/code", json!(500));
        set_at(&mut message, "/status/message", json!("broken"));
        assert_eq!(
            message,
            json!({"messageId": "m", "status": {"code": 500, "message": "broken"}})
        );
        assert_eq!(root("/status/code"), Some("status"));
        assert_eq!(root("status"), None);
    }

    #[test]
    fn message_ids_in_any_naming_style() {
        assert_eq!(
            find_message_id(&json!({"messageId": "a"})),
            Some("a".into())
        );
        assert_eq!(
            find_message_id(&json!({"message_id": "b"})),
            Some("b".into())
        );
        assert_eq!(find_message_id(&json!({"id": "c"})), None);
        assert_eq!(find_message_id(&json!([1])), None);
    }
}
