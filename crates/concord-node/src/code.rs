//! The protocol's code on our side, through `concord-handlers`: generating it (templates,
//! the LLM when none fits), loading it into the sandbox, and using it to turn calls into
//! messages and back, and to answer and check the agreed test cases.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use concord_context::PeerLabel;
use concord_handlers::wire;
use concord_handlers::{
    diff, CaseRunner, Code, Direction, ErrorStatus, Generator, Local, Origin, Outcome, Provider,
    Reply, Requester, RuntimeError, Verifier,
};
use concord_negotiate::complexity::SchemaLimits;
use concord_negotiate::envelope::set_at;
use concord_negotiate::fit::find_action;
use concord_negotiate::{
    ActionSpec, Encoding, Envelope, Need, ProtocolDocument, TestCase, TestCases,
};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

mod error;

pub(crate) use error::{CaseMismatch, CodeError};

use crate::action::ActionError;
use crate::driver::WorkGate;
use crate::error::CallError;
use crate::interface::{InterfaceCode, Payload, PayloadSchema};
use crate::node::Shared;

/// What our handler maps the protocol's messages to and from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LocalSide {
    /// The node's actions; the code serves the one the protocol calls.
    Provider,
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
    /// Whether the code runs natively (it is our template) rather than in the sandbox.
    pub native: bool,
}

/// Our handler's copy with what it needs to run test cases on another thread.
pub(crate) struct CaseCheck {
    code: Code,
    verifier: Arc<Verifier>,
    local: Local,
}

impl CaseCheck {
    /// Runs `cases` on our side: the fix-error report when our code fails them.
    pub(crate) fn run(mut self, cases: &TestCases) -> Option<String> {
        CaseRunner::new(&self.verifier)
            .with_side(&mut self.code, &self.local)
            .run(cases)
            .fix_error_report()
    }
}

enum Path {
    Requester(Requester),
    Provider(Provider),
}

/// Our code for the protocol in force: a handler module for a one-action protocol, or the
/// native interaction layer for an interface protocol (several affordances).
#[derive(Debug, Clone)]
pub(crate) enum ProtocolCode {
    /// A handler module (our template, LLM- or peer-written code).
    Handler(HandlerCode),
    /// The interaction layer with the interface's payload schemas.
    Interface(Arc<InterfaceCode>),
}

impl ProtocolCode {
    /// The protocol's text this code was loaded for.
    pub(crate) fn document(&self) -> &str {
        match self {
            Self::Handler(code) => code.document(),
            Self::Interface(code) => code.document(),
        }
    }

    /// What the store keeps as our handler.
    pub(crate) fn source(&self) -> &str {
        match self {
            Self::Handler(code) => code.source(),
            Self::Interface(_) => crate::interface::NATIVE_LAYER,
        }
    }

    /// The actions the protocol calls.
    pub(crate) fn actions(&self) -> Vec<&str> {
        match self {
            Self::Handler(code) => vec![code.action()],
            Self::Interface(code) => code
                .interface()
                .actions
                .keys()
                .map(String::as_str)
                .collect(),
        }
    }

    /// The handler module, for a one-action protocol.
    pub(crate) fn handler(&self) -> Option<&HandlerCode> {
        match self {
            Self::Handler(code) => Some(code),
            Self::Interface(_) => None,
        }
    }

    /// The interface, for an interface protocol.
    pub(crate) fn interface(&self) -> Option<&Arc<InterfaceCode>> {
        match self {
            Self::Handler(_) => None,
            Self::Interface(code) => Some(code),
        }
    }
}

/// Our code for one protocol and role, as a session holds it. Every session of a node that
/// runs the same handler for the same protocol shares one [`Loaded`] through the node's
/// [`CodeCache`]: the compiled schemas and the engines, so a node with many sessions keeps
/// one or two warm engines per protocol instead of one per session, and a session whose
/// protocol is already in use starts without loading it. Sharing is safe because the
/// sandbox isolates every call from every other one, and a template run natively keeps no
/// state at all. (Our template runs natively, with no engine: see [`Code::load`].)
#[derive(Clone)]
pub(crate) struct HandlerCode {
    loaded: Arc<Loaded>,
}

/// What our code for a protocol is, loaded once.
struct Loaded {
    /// What makes two loads the same: the protocol's text, the handler, our side, limits.
    /// (A provider's side is the node's actions, the same for every session of the node.)
    document: String,
    source: String,
    side: LocalSide,
    limits: concord_sandbox::Limits,
    /// The action or need the code maps to, as the protocol picks it for our side.
    local: Local,
    action: String,
    verifier: Arc<Verifier>,
    /// The protocol's envelope: message ids, status code and message (free text in test
    /// cases), the response's data fields.
    envelope: Envelope,
    input_limit: usize,
    /// The action's input schema on our side (the provider's action, the requester's
    /// need), compiled: a requester checks its input against it before its handler runs,
    /// a provider the input its handler decoded before the action runs, in the words of
    /// every other mode.
    input_check: Option<PayloadSchema>,
    /// Our code as first loaded: more engines are copies of it (an `Arc` for our template,
    /// the compiled bytecode for other code), never loaded again from the source.
    prototype: Mutex<Code>,
    /// Whether the code runs natively (our template).
    native: bool,
    /// Engines not running a call now; as many as ever ran calls at once.
    idle: Mutex<Vec<Path>>,
}

impl Loaded {
    /// A copy of our code for another engine or a case run.
    fn copy_of_code(&self) -> Result<Code, CodeError> {
        lock(&self.prototype).try_clone().map_err(CodeError::Load)
    }

    /// An engine for one call: an idle one, else a new one.
    fn engine(&self) -> Result<Engine<'_>, CodeError> {
        let idle = lock(&self.idle).pop();
        let path = match idle {
            Some(path) => path,
            None => engine_path(self.copy_of_code()?, &self.verifier)?,
        };
        Ok(Engine {
            loaded: self,
            path: Some(path),
        })
    }
}

/// An engine taken for one call; it goes back to the idle ones when dropped.
struct Engine<'a> {
    loaded: &'a Loaded,
    /// Always `Some` until dropped.
    path: Option<Path>,
}

impl Drop for Engine<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            lock(&self.loaded.idle).push(path);
        }
    }
}

/// `code` on the message path of its role, checked by `verifier`.
fn engine_path(code: Code, verifier: &Arc<Verifier>) -> Result<Path, CodeError> {
    Ok(match code.role() {
        concord_sandbox::Role::Requester => {
            Path::Requester(Requester::new(code, Arc::clone(verifier)).map_err(CodeError::Runtime)?)
        }
        concord_sandbox::Role::Provider => {
            Path::Provider(Provider::new(code, Arc::clone(verifier)).map_err(CodeError::Runtime)?)
        }
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The code a node has loaded, for as long as a session holds it, and the turns its
/// sessions take to make code (negotiation work, generation, test runs).
#[derive(Default)]
pub(crate) struct CodeCache {
    live: Mutex<Vec<Weak<Loaded>>>,
    /// Interface protocols' compiled schemas, shared like handlers.
    interfaces: Mutex<Vec<Weak<InterfaceCode>>>,
    /// The node-wide bound on negotiation work.
    pub(crate) gate: WorkGate,
}

impl std::fmt::Debug for CodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let live = lock(&self.live)
            .iter()
            .filter(|loaded| loaded.strong_count() > 0)
            .count();
        f.debug_struct("CodeCache").field("live", &live).finish()
    }
}

impl CodeCache {
    /// The interface code for the document `text`: the one a session holds, else loaded
    /// now (its schemas checked against `limits` and compiled).
    fn interface(
        &self,
        text: &str,
        limits: &SchemaLimits,
    ) -> Result<Arc<InterfaceCode>, CodeError> {
        let held = lock(&self.interfaces)
            .iter()
            .filter_map(Weak::upgrade)
            .find(|code| code.document() == text);
        if let Some(code) = held {
            return Ok(code);
        }
        let code = Arc::new(InterfaceCode::load(text, limits).map_err(CodeError::Payload)?);
        let mut live = lock(&self.interfaces);
        live.retain(|code| code.strong_count() > 0);
        live.push(Arc::downgrade(&code));
        Ok(code)
    }

    /// Our code for the protocol `text` with the handler `source` on `side`, if a session
    /// holds it.
    fn held(
        &self,
        text: &str,
        source: &str,
        side: &LocalSide,
        limits: &concord_sandbox::Limits,
    ) -> Option<HandlerCode> {
        lock(&self.live)
            .iter()
            .filter_map(Weak::upgrade)
            .find(|loaded| {
                loaded.document == text
                    && loaded.source == source
                    && loaded.side == *side
                    && loaded.limits == *limits
            })
            .map(|loaded| HandlerCode { loaded })
    }

    /// Our code for `document` (parsed from `text`) with the handler `source`: the one a
    /// session already holds, else loaded now (compiling the schemas and starting an
    /// engine) for `local`, what the protocol maps to on our `side`.
    fn load(
        &self,
        text: &str,
        document: &ProtocolDocument,
        side: LocalSide,
        local: Local,
        source: String,
        limits: &concord_sandbox::Limits,
    ) -> Result<HandlerCode, CodeError> {
        if let Some(code) = self.held(text, &source, &side, limits) {
            return Ok(code);
        }
        let loaded = Arc::new(Loaded::new(text, document, side, local, source, limits)?);
        let mut live = lock(&self.live);
        live.retain(|loaded| loaded.strong_count() > 0);
        live.push(Arc::downgrade(&loaded));
        Ok(HandlerCode { loaded })
    }
}

impl std::fmt::Debug for HandlerCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerCode")
            .field("action", &self.loaded.action)
            .field("local", &self.loaded.local)
            .finish_non_exhaustive()
    }
}

impl Loaded {
    fn new(
        text: &str,
        document: &ProtocolDocument,
        side: LocalSide,
        local: Local,
        source: String,
        limits: &concord_sandbox::Limits,
    ) -> Result<Self, CodeError> {
        let verifier = Arc::new(Verifier::new(document).map_err(CodeError::Schemas)?);
        // Loaded natively when it is our template (its plan, no engine), else in a sandbox.
        let prototype =
            Code::load(&source, document, &local, limits.clone()).map_err(CodeError::Load)?;
        let native = prototype.is_native();
        let path = engine_path(prototype.try_clone().map_err(CodeError::Load)?, &verifier)?;
        if native {
            tracing::debug!("our handler is the template: it runs natively");
        }
        let envelope = Envelope::of(document);
        let input_schema = match &local {
            Local::Provider(action) => Some(&action.input),
            Local::Requester(need) => need.input.as_ref(),
        };
        let input_check = input_schema
            .map(|schema| {
                PayloadSchema::compile(
                    Payload::Input,
                    local.action(),
                    schema,
                    document.schema_limits(),
                )
            })
            .transpose()
            .map_err(CodeError::Payload)?;
        Ok(Self {
            input_check,
            document: text.to_owned(),
            action: local.action().to_owned(),
            source,
            side,
            local,
            limits: limits.clone(),
            verifier,
            envelope,
            input_limit: limits.input_bytes,
            prototype: Mutex::new(prototype),
            native,
            idle: Mutex::new(vec![path]),
        })
    }
}

impl HandlerCode {
    /// The protocol's text this code was loaded for.
    pub(crate) fn document(&self) -> &str {
        &self.loaded.document
    }

    /// The handler module's source (stored with the protocol).
    pub(crate) fn source(&self) -> &str {
        &self.loaded.source
    }

    /// The action the protocol calls.
    pub(crate) fn action(&self) -> &str {
        &self.loaded.action
    }

    /// Whether our code runs natively (it is our template) rather than in the sandbox.
    pub(crate) fn is_native(&self) -> bool {
        self.loaded.native
    }

    /// Requester: the request for `input`, encoded for the wire.
    pub(crate) fn encode_request(
        &self,
        message_id: &str,
        input: &Value,
    ) -> Result<Vec<u8>, CodeError> {
        self.check_input(input)?;
        let mut engine = self.loaded.engine()?;
        let Some(Path::Requester(requester)) = &mut engine.path else {
            return Err(CodeError::WrongRole { role: "requester" });
        };
        requester
            .encode_request(message_id, input)
            .map_err(CodeError::Runtime)
    }

    /// Requester: a response's messageId and what it means for the call.
    pub(crate) fn read_response(
        &self,
        bytes: &[u8],
    ) -> Result<(String, Result<Value, CallError>), BadMessage> {
        let mut engine = self.engine_for(bytes)?;
        let Some(Path::Requester(requester)) = &mut engine.path else {
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
    pub(crate) fn read_request(&self, bytes: &[u8]) -> Result<Request, BadMessage> {
        let mut engine = self.engine_for(bytes)?;
        let Some(Path::Provider(provider)) = &mut engine.path else {
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

    /// Checks an action input against our side's schema for it (see `Loaded::input_check`):
    /// a requester's before its handler runs, a provider's decoded from a live request
    /// before the action runs (a verification request runs no action: the agreed case's
    /// response stands in for it).
    pub(crate) fn check_input(&self, input: &Value) -> Result<(), CodeError> {
        match &self.loaded.input_check {
            Some(check) => check.check(input).map_err(CodeError::Payload),
            None => Ok(()),
        }
    }

    /// Provider: the response to `message_id`, encoded for the wire.
    pub(crate) fn write_response(
        &self,
        message_id: &str,
        result: Result<Value, ActionError>,
    ) -> Result<Vec<u8>, CodeError> {
        let mut engine = self.loaded.engine()?;
        let Some(Path::Provider(provider)) = &mut engine.path else {
            return Err(CodeError::WrongRole { role: "provider" });
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
            .map_err(CodeError::Runtime)
    }

    /// Requester: a test case's request as a verification message, with its messageId.
    pub(crate) fn test_case_request(
        &self,
        case: &TestCase,
    ) -> Result<(String, Vec<u8>), CodeError> {
        let message_id = find_message_id(&case.request, &self.loaded.envelope.request_id)
            .ok_or(CodeError::CaseWithoutMessageId)?;
        let bytes = wire::encode(self.loaded.verifier.encoding(), &case.request)
            .map_err(CodeError::Wire)?;
        Ok((message_id, bytes))
    }

    /// Requester: checks the peer's answer to a verification request against the case it
    /// answers: the response schema, then the case's response (a success's status message
    /// is free text). Returns the messageId and the differences, if any.
    pub(crate) fn test_case_response(
        &self,
        cases: &TestCases,
        bytes: &[u8],
    ) -> Result<(String, Result<(), CaseMismatch>), BadMessage> {
        let message = wire::decode(
            self.loaded.verifier.encoding(),
            bytes,
            self.loaded.input_limit,
        )
        .map_err(|error| BadMessage {
            message_id: None,
            reason: error.to_string(),
            report: Some(format!(
                "A verification response we received cannot be read: {error}"
            )),
        })?;
        let envelope = &self.loaded.envelope;
        let message_id =
            find_message_id(&message, &envelope.response_id).ok_or_else(|| BadMessage {
                message_id: None,
                reason: "a verification response has no messageId".to_owned(),
                report: Some("A verification response we received has no messageId.".to_owned()),
            })?;
        let Some(case) = cases.cases.iter().find(|case| {
            find_message_id(&case.request, &envelope.request_id).as_deref() == Some(&message_id)
        }) else {
            return Ok((message_id, Err(CaseMismatch::NoCase)));
        };
        if let Err(invalid) = self.loaded.verifier.check(Direction::Response, &message) {
            return Ok((message_id, Err(CaseMismatch::Schema(invalid))));
        }
        let is_error = envelope.is_error(&message);
        let differences: Vec<_> = diff(&case.response, &message)
            .into_iter()
            .filter(|difference| {
                !(!is_error
                    && envelope.message_at.as_deref() == Some(difference.pointer.as_str())
                    && difference.expected.as_ref().is_some_and(Value::is_string)
                    && difference.actual.as_ref().is_some_and(Value::is_string))
            })
            .collect();
        if differences.is_empty() {
            Ok((message_id, Ok(())))
        } else {
            Ok((message_id, Err(CaseMismatch::Differs(differences))))
        }
    }

    /// Provider: answers a verification request with our real code, the agreed case's
    /// response standing in for the action (nothing is run).
    pub(crate) fn answer_test_case(
        &self,
        cases: &str,
        bytes: &[u8],
    ) -> Result<Vec<u8>, BadMessage> {
        let cases = TestCases::parse(cases).map_err(|error| BadMessage {
            message_id: None,
            reason: format!("the agreed test cases cannot be read: {error}"),
            report: None,
        })?;
        let request = self.read_request(bytes)?;
        let Some(case) = cases.cases.iter().find(|case| {
            find_message_id(&case.request, &self.loaded.envelope.request_id).as_deref()
                == Some(&request.message_id)
        }) else {
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
        let mut engine = self.engine_for(bytes)?;
        let Some(Path::Provider(provider)) = &mut engine.path else {
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
        let envelope = &self.loaded.envelope;
        if envelope.is_error(response) {
            return Outcome::Error(ErrorStatus {
                code: envelope.code(response).unwrap_or(500),
                message: envelope.status_message(response),
            });
        }
        Outcome::Result(envelope.payload(response))
    }

    /// Provider: an error response (`status`, `reason`) written in the protocol's envelope
    /// without our handler, for when our handler cannot answer: the requester sees the
    /// failure (and, for a verification request, reports it).
    pub(crate) fn fallback_error(&self, message_id: &str, status: u16, reason: &str) -> Vec<u8> {
        let envelope = &self.loaded.envelope;
        let mut message = serde_json::json!({});
        message[envelope.response_id.as_str()] = Value::from(message_id);
        if let Some((field, value)) = &envelope.response_type {
            message[field.as_str()] = value
                .clone()
                .unwrap_or_else(|| Value::from(self.loaded.action.as_str()));
        }
        let code_at = envelope.code_at.as_deref().unwrap_or("/status/code");
        let message_at = envelope.message_at.as_deref().unwrap_or("/status/message");
        set_at(&mut message, code_at, Value::from(status));
        set_at(&mut message, message_at, Value::from(reason));
        wire::encode(self.loaded.verifier.encoding(), &message)
            .or_else(|_| serde_json::to_vec(&message))
            .unwrap_or_default()
    }

    /// A copy of our handler to run the agreed cases on, away from the session.
    pub(crate) fn case_check(&self) -> Result<CaseCheck, CodeError> {
        Ok(CaseCheck {
            code: self.loaded.copy_of_code()?,
            verifier: Arc::clone(&self.loaded.verifier),
            local: self.loaded.local.clone(),
        })
    }

    /// Our recent messages, decoded, for a diagnosis.
    pub(crate) fn decode_sent(&self, sent: &[Vec<u8>]) -> Vec<Value> {
        sent.iter()
            .filter_map(|bytes| {
                wire::decode(self.loaded.verifier.encoding(), bytes, usize::MAX).ok()
            })
            .collect()
    }

    /// An engine for one call on `bytes`; a message naming them when none can start.
    fn engine_for(&self, bytes: &[u8]) -> Result<Engine<'_>, BadMessage> {
        self.loaded
            .engine()
            .map_err(|reason| self.bad(bytes, reason.to_string(), None))
    }

    fn runtime_failure(&self, bytes: &[u8], error: RuntimeError) -> BadMessage {
        let report = match &error {
            RuntimeError::InvalidIncoming(invalid) => {
                let message = wire::decode(
                    self.loaded.verifier.encoding(),
                    bytes,
                    self.loaded.input_limit,
                )
                .unwrap_or(Value::Null);
                Some(invalid.error_description(&message))
            }
            RuntimeError::Wire { .. } => Some(format!("A message we received {error}.")),
            _ => None,
        };
        self.bad(bytes, error.to_string(), report)
    }

    fn bad(&self, bytes: &[u8], reason: String, report: Option<String>) -> BadMessage {
        let encoding = self.loaded.verifier.encoding();
        let field = &self.loaded.envelope.request_id;
        let message_id = match wire::decode(encoding, bytes, self.loaded.input_limit) {
            Ok(message) => find_message_id(&message, field),
            // Over the input cap (or not a whole message): only the id is looked for.
            Err(_) => scan_message_id(encoding, bytes, field),
        };
        BadMessage {
            message_id,
            reason,
            report,
        }
    }
}

/// The message id a message carries: in `field` (the protocol's id field), else
/// `messageId` in any naming style.
fn find_message_id(message: &Value, field: &str) -> Option<String> {
    let object = message.as_object()?;
    object
        .get(field)
        .or_else(|| object.get("messageId"))
        .or_else(|| {
            object
                .iter()
                .find_map(|(key, value)| is_message_id_key(key).then_some(value))
        })
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The message id of a message too large to decode (or one that fails to decode as a
/// whole), read without building it: one pass over the bytes that keeps nothing but the
/// top-level string under `field` or a `messageId` key in any naming style. `None` when the
/// bytes are not a message of `encoding` at all.
fn scan_message_id(encoding: Encoding, bytes: &[u8], field: &str) -> Option<String> {
    let seed = IdSeed { field };
    match encoding {
        Encoding::Json => {
            let mut deserializer = serde_json::Deserializer::from_slice(bytes);
            seed.deserialize(&mut deserializer).ok().flatten()
        }
        Encoding::Aicl => {
            let text = std::str::from_utf8(bytes).ok()?;
            let options = concord_aicl::ParseOptions::strict().with_max_size(bytes.len());
            let mut deserializer = concord_aicl::Deserializer::new(text, options);
            seed.deserialize(&mut deserializer).ok().flatten()
        }
    }
}

/// Reads a message's top-level id field and skips everything else unallocated.
struct IdSeed<'f> {
    field: &'f str,
}

impl<'de> DeserializeSeed<'de> for IdSeed<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for IdSeed<'_> {
    type Value = Option<String>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // As `find_message_id`: the protocol's id field wins, else the first `messageId`.
        let mut exact: Option<IdValue> = None;
        let mut styled: Option<IdValue> = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if exact.is_none() && key == self.field {
                exact = Some(map.next_value()?);
            } else if styled.is_none() && is_message_id_key(&key) {
                styled = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(match exact.or(styled) {
            Some(IdValue::Text(id)) => Some(id),
            _ => None,
        })
    }
}

/// An id field's value: the id when it is a string.
enum IdValue {
    Text(String),
    Other,
}

impl<'de> Deserialize<'de> for IdValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl<'de> Visitor<'de> for IdVisitor {
            type Value = IdValue;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a message id")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<IdValue, E> {
                Ok(IdValue::Text(text.to_owned()))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<IdValue, E> {
                Ok(IdValue::Other)
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<IdValue, E> {
                Ok(IdValue::Other)
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<IdValue, E> {
                Ok(IdValue::Other)
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<IdValue, E> {
                Ok(IdValue::Other)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<IdValue, E> {
                Ok(IdValue::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<IdValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IdValue::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IdValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IdValue::Other)
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// Whether a field name is `messageId` in some naming style.
fn is_message_id_key(key: &str) -> bool {
    concord_negotiate::naming::key(key) == concord_negotiate::naming::key("messageId")
}

/// Our side for `document`: on the provider, the action of ours it calls (its `action`
/// constant, else our only action, else the one whose input fields it shares most).
fn local_for(
    document: &ProtocolDocument,
    side: &LocalSide,
    actions: &[ActionSpec],
) -> Result<Local, CodeError> {
    match side {
        LocalSide::Requester(need) => Ok(Local::Requester(need.clone())),
        LocalSide::Provider => find_action(actions, &Envelope::of(document))
            .map(|action| Local::Provider(action.clone()))
            .map_err(CodeError::NoAction),
    }
}

fn parse(document: &str, limits: &SchemaLimits) -> Result<ProtocolDocument, CodeError> {
    ProtocolDocument::parse_within(document, limits).map_err(CodeError::Protocol)
}

/// Generates our handler for `document` (templates first, the LLM when none fits), verified
/// against `cases` (else cases drafted from the schemas), and loads it.
pub(crate) async fn generate(
    shared: &Shared,
    document: &str,
    side: LocalSide,
    cases: Option<String>,
    peer: &str,
) -> Result<(ProtocolCode, CodeInfo), CodeError> {
    let text = document;
    if crate::interface::is_interface(text) {
        let started = std::time::Instant::now();
        let code = shared.code.interface(text, &shared.limits.schema)?;
        let info = CodeInfo {
            origin: "interaction layer (native)".to_owned(),
            cases_run: 0,
            llm_calls: 0,
            tokens_in: 0,
            tokens_out: 0,
            wall: started.elapsed(),
            native: true,
        };
        return Ok((ProtocolCode::Interface(code), info));
    }
    let document = parse(text, &shared.limits.schema)?;
    let local = local_for(&document, &side, &shared.actions.specs())?;
    let cases = cases
        .as_deref()
        .map(TestCases::parse)
        .transpose()
        .map_err(CodeError::TestCases)?;
    let mut generator = Generator::new().with_limits(shared.handler_limits.clone());
    if let Some(client) = shared.llm() {
        generator = generator.with_llm(client.clone());
        if let Ok(label) = PeerLabel::new(peer) {
            generator = generator.with_peer(label);
        }
    }
    let generated = generator
        .generate(&document, &local, cases.as_ref())
        .await
        .map_err(|error| CodeError::Generate(Box::new(error)))?;
    let code = shared.code.load(
        text,
        &document,
        side,
        local,
        generated.source,
        &shared.handler_limits,
    )?;
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
        native: code.is_native(),
    };
    Ok((ProtocolCode::Handler(code), info))
}

/// Our code for `document` with a stored handler: the node's loaded copy if a session
/// holds one (the protocol is not even parsed then), else loaded now.
pub(crate) fn load(
    shared: &Shared,
    text: &str,
    source: &str,
    side: &LocalSide,
) -> Result<ProtocolCode, CodeError> {
    if crate::interface::is_interface(text) {
        if source != crate::interface::NATIVE_LAYER {
            return Err(CodeError::NotNativeLayer);
        }
        return shared
            .code
            .interface(text, &shared.limits.schema)
            .map(ProtocolCode::Interface);
    }
    let limits = &shared.handler_limits;
    if let Some(code) = shared.code.held(text, source, side, limits) {
        return Ok(ProtocolCode::Handler(code));
    }
    let document = parse(text, &shared.limits.schema)?;
    let local = local_for(&document, side, &shared.actions.specs())?;
    shared
        .code
        .load(
            text,
            &document,
            side.clone(),
            local,
            source.to_owned(),
            limits,
        )
        .map(ProtocolCode::Handler)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn price_action() -> ActionSpec {
        ActionSpec {
            name: "getPrice".into(),
            description: "The price of a product.".into(),
            input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
            output: json!({"type": "number"}),
        }
    }

    #[test]
    fn sessions_running_the_same_code_share_it() {
        let action = price_action();
        let text = concord_negotiate::canonical_protocol(&action, Duration::from_secs(15));
        let document = ProtocolDocument::parse(&text).unwrap();
        let local = Local::Provider(action);
        let source = concord_handlers::template(&document, &local).unwrap();
        let limits = concord_sandbox::Limits::default();
        let cache = CodeCache::default();
        let load = |source: &str| {
            cache
                .load(
                    &text,
                    &document,
                    LocalSide::Provider,
                    local.clone(),
                    source.to_owned(),
                    &limits,
                )
                .unwrap()
        };

        let first = load(&source);
        let second = load(&source);
        assert!(Arc::ptr_eq(&first.loaded, &second.loaded));
        let other = load(&format!("{source}\n"));
        assert!(!Arc::ptr_eq(&first.loaded, &other.loaded));
        // Our template runs natively; a module that is not byte for byte our template (as
        // here, one newline more) runs in the sandbox, with the same answers.
        assert!(first.is_native());
        assert!(!other.is_native());
        assert_eq!(
            other.write_response("m1", Ok(json!(12.5))).unwrap(),
            first.write_response("m1", Ok(json!(12.5))).unwrap()
        );

        // Two calls at once take two engines; both stay for the next calls.
        {
            let _one = first.loaded.engine().unwrap();
            let _two = second.loaded.engine().unwrap();
        }
        assert_eq!(lock(&first.loaded.idle).len(), 2);
        let response = first.write_response("m1", Ok(json!(12.5))).unwrap();
        let again = second.write_response("m1", Ok(json!(12.5))).unwrap();
        assert_eq!(response, again);

        // Once no session holds it, it is gone.
        drop((first, second, other));
        let fresh = load(&source);
        assert_eq!(lock(&cache.live).len(), 1);
        assert_eq!(lock(&fresh.loaded.idle).len(), 1);
    }

    #[test]
    fn the_message_id_of_a_message_too_large_to_decode_is_scanned() {
        let big = "x".repeat(100_000);
        let message =
            json!({"params": {"blob": [big, {"messageId": "inner"}]}, "message_id": "m7"});
        for encoding in [Encoding::Json, Encoding::Aicl] {
            let bytes = wire::encode(encoding, &message).unwrap();
            assert_eq!(
                scan_message_id(encoding, &bytes, "messageId").as_deref(),
                Some("m7"),
                "{encoding:?}"
            );
        }
        let bytes = br#"{"id": 7, "messageId": "n1"}"#;
        assert_eq!(scan_message_id(Encoding::Json, bytes, "id"), None);
        assert_eq!(scan_message_id(Encoding::Json, b"not json", "id"), None);
        assert_eq!(scan_message_id(Encoding::Json, b"[1, 2]", "id"), None);
        assert_eq!(
            scan_message_id(Encoding::Json, br#"{"id": "a", "x": "#, "id"),
            None,
            "a cut-off message is not a message"
        );
    }

    #[test]
    fn message_ids_in_any_naming_style() {
        assert_eq!(
            find_message_id(&json!({"messageId": "a"}), "messageId"),
            Some("a".into())
        );
        assert_eq!(
            find_message_id(&json!({"message_id": "b"}), "messageId"),
            Some("b".into())
        );
        assert_eq!(find_message_id(&json!({"id": "c"}), "messageId"), None);
        assert_eq!(find_message_id(&json!({"id": "c"}), "id"), Some("c".into()));
        assert_eq!(find_message_id(&json!([1]), "id"), None);
    }
}
