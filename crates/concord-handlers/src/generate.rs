//! Producing a verified handler module: the template when one fits and passes, else an LLM
//! with up to three attempts, each told why the previous one failed.

use std::fmt;

#[cfg(feature = "llm")]
use concord_context::PeerLabel;
#[cfg(feature = "llm")]
use concord_llm::{ChatRequest, LlmClient};
use concord_llm::{LlmError, UsageSummary};
use concord_negotiate::{DeterministicNegotiator, ProtocolDocument, TestCases};
use concord_sandbox::{Limits, Role, SandboxError};
#[cfg(feature = "llm")]
use serde::Deserialize;
use serde_json::Value;

use crate::cases::CaseRunner;
use crate::code::Code;
use crate::envelope::Envelope;
use crate::local::Local;
#[cfg(feature = "llm")]
use crate::prompt::{self, PeerReport, PreviousAttempt};
use crate::template::{template, NoTemplate};
use crate::verify::{SchemaError, Verifier};

/// Attempts the LLM gets to write a working module.
pub const MAX_ATTEMPTS: u32 = 3;

/// The most characters of a module the LLM writes: the bound of the answer's JSON Schema
/// (a small model fills an unbounded string until `max_tokens`).
pub const MAX_MODULE_CHARS: u32 = 6000;

/// The label peer text carries in prompts unless [`Generator::with_peer`] sets one.
pub const DEFAULT_PEER_LABEL: &str = "remote-agent";

/// Writes handler modules: templates first, an LLM when no template fits.
///
/// Every module is verified before it is returned, as it will run ([`Code::load`]: the
/// template natively, an LLM's module in the sandbox): it must load for its role and pass
/// the test cases for its side (the negotiated ones; without them, when the protocol has
/// schemas, the cases the deterministic negotiator drafts from them).
///
/// ```
/// use concord_handlers::{Generator, Local, Origin};
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument};
/// use serde_json::json;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let action = ActionSpec {
///     name: "getPrice".into(),
///     description: "The price of a product.".into(),
///     input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
///     output: json!({"type": "number"}),
/// };
/// let document = ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15)))?;
/// let generated = Generator::new()
///     .generate(&document, &Local::Provider(action), None)
///     .await?;
/// assert_eq!(generated.origin, Origin::Template);
/// assert_eq!(generated.usage.calls, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Generator {
    #[cfg(feature = "llm")]
    llm: Option<LlmClient>,
    #[cfg(feature = "llm")]
    peer: Option<PeerLabel>,
    limits: Limits,
}

impl Default for Generator {
    fn default() -> Self {
        Self::new()
    }
}

/// Which path wrote a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The deterministic template.
    Template,
    /// The LLM, on this attempt (1 to [`MAX_ATTEMPTS`]).
    Llm {
        /// The attempt that produced the module.
        attempts: u32,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Template => f.write_str("template"),
            Origin::Llm { attempts } => write!(f, "LLM (attempt {attempts})"),
        }
    }
}

/// A verified handler module.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Generated {
    /// The module source (store it with the protocol hash).
    pub source: String,
    /// The role it serves.
    pub role: Role,
    /// Which path wrote it.
    pub origin: Origin,
    /// What the LLM path cost: calls, tokens, wall time (zero for a template).
    pub usage: UsageSummary,
    /// Why the template was not used, when the LLM wrote the module.
    pub template_rejected: Option<String>,
    /// How many test cases verified it (0: it was only loaded).
    pub cases_run: usize,
}

/// Why one LLM attempt was rejected.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AttemptFailure {
    /// The answer was not the JSON asked for, even after the client's corrective retry.
    Unusable(String),
    /// The module does not load: it does not compile, lacks a function, or its top level
    /// threw or hit a limit.
    Load(SandboxError),
    /// The module fails test cases: the fix-error report.
    Cases(String),
    /// The answer was cut off at `max_tokens` (`finish_reason: "length"`) before the module
    /// was complete.
    Truncated {
        /// Answer tokens the server reported.
        completion_tokens: u64,
        /// The `max_tokens` the request carried, if any.
        max_tokens: Option<u32>,
    },
}

impl fmt::Display for AttemptFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptFailure::Unusable(reason) => {
                write!(f, "the answer was not the JSON asked for: {reason}")
            }
            AttemptFailure::Load(error) => write!(f, "the module does not load: {error}"),
            AttemptFailure::Cases(report) => f.write_str(report.trim_end()),
            AttemptFailure::Truncated {
                completion_tokens, ..
            } => write!(
                f,
                "the answer was cut off after {completion_tokens} tokens (the answer's token \
                 limit): write a shorter module"
            ),
        }
    }
}

/// Why no verified module could be produced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The protocol's schemas do not compile, so nothing can be verified.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The code-writing prompt could not be built (an invalid peer label or data kind).
    #[error("cannot build the code-writing prompt: {0}")]
    Prompt(String),
    /// No template fits and no LLM is configured.
    #[error("{0}, and no LLM is configured to write the module")]
    NoTemplate(NoTemplate),
    /// The template does not pass the test cases and no LLM is configured.
    #[error("the template module fails its test cases, and no LLM is configured:\n{0}")]
    TemplateFails(String),
    /// The LLM could not be asked (HTTP errors, timeouts after retries).
    #[error("the LLM could not be asked: {source}")]
    Llm {
        /// The client's error.
        #[source]
        source: LlmError,
        /// What the calls made so far cost.
        usage: UsageSummary,
    },
    /// Every attempt failed: the node answers `codeGeneration: error`.
    #[error("the LLM wrote no working module in {} attempts; last: {}", .attempts.len(), .attempts.last().map(ToString::to_string).unwrap_or_default())]
    Exhausted {
        /// Each attempt's failure, in order.
        attempts: Vec<AttemptFailure>,
        /// What the attempts cost.
        usage: UsageSummary,
        /// Why the template was not used.
        template_rejected: String,
    },
}

impl GenerateError {
    /// What the LLM calls cost before the failure (zero when none were made).
    pub fn usage(&self) -> UsageSummary {
        match self {
            GenerateError::Llm { usage, .. } | GenerateError::Exhausted { usage, .. } => *usage,
            _ => UsageSummary::default(),
        }
    }
}

#[cfg(feature = "llm")]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModuleAnswer {
    module: String,
}

/// The JSON Schema of [`ModuleAnswer`]: `{"module": string}`, bounded.
#[cfg(feature = "llm")]
fn module_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {"module": {"type": "string", "minLength": 1, "maxLength": MAX_MODULE_CHARS}},
        "required": ["module"],
        "additionalProperties": false,
    })
}

impl Generator {
    /// Templates only, default sandbox limits.
    pub fn new() -> Self {
        Self {
            #[cfg(feature = "llm")]
            llm: None,
            #[cfg(feature = "llm")]
            peer: None,
            limits: Limits::default(),
        }
    }

    /// Lets `client`'s model write modules no template fits. Each generation records into
    /// a child of the client's usage ledger, reported in [`Generated::usage`].
    #[cfg(feature = "llm")]
    pub fn with_llm(mut self, client: LlmClient) -> Self {
        self.llm = Some(client);
        self
    }

    /// Labels peer text in prompts with `peer` (a DID or agent name) instead of
    /// [`DEFAULT_PEER_LABEL`].
    #[cfg(feature = "llm")]
    pub fn with_peer(mut self, peer: PeerLabel) -> Self {
        self.peer = Some(peer);
        self
    }

    /// Verifies modules under `limits` (use the limits they will run under).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// A verified module for `local`'s side of `document`.
    ///
    /// `cases` are the negotiated test cases, if any were agreed.
    ///
    /// # Errors
    /// See [`GenerateError`]; [`GenerateError::Exhausted`] after [`MAX_ATTEMPTS`] failed
    /// attempts.
    pub async fn generate(
        &self,
        document: &ProtocolDocument,
        local: &Local,
        cases: Option<&TestCases>,
    ) -> Result<Generated, GenerateError> {
        let job = Job::new(document, local, cases)?;
        let (reason, error) = match template(document, local) {
            Ok(source) => match self.check(&job, &source) {
                Ok(()) => return Ok(job.template_generated(source)),
                Err(failure) => (
                    format!("the template module fails its test cases: {failure}"),
                    GenerateError::TemplateFails(failure.to_string()),
                ),
            },
            Err(no_template) => (
                no_template.to_string(),
                GenerateError::NoTemplate(no_template),
            ),
        };
        self.llm_or(&job, reason, None, error).await
    }

    /// A new module after the peer reported ours wrong (an accepted
    /// `fixErrorNegotiation`): `previous` is the module we used, `peer_report` the peer's
    /// `errorDescription`.
    ///
    /// A template that differs from `previous` and passes the cases is used; otherwise the
    /// LLM writes the module, every attempt shown `previous` and the report (as peer text).
    ///
    /// # Errors
    /// As [`Generator::generate`]; without an LLM, [`GenerateError::TemplateFails`] when the
    /// template is the module the peer reported.
    pub async fn regenerate(
        &self,
        document: &ProtocolDocument,
        local: &Local,
        cases: Option<&TestCases>,
        previous: &str,
        peer_report: &str,
    ) -> Result<Generated, GenerateError> {
        let job = Job::new(document, local, cases)?;
        let rejected = match template(document, local) {
            Ok(source) if source == previous => {
                "the template module is the one the peer reports wrong".to_owned()
            }
            Ok(source) => match self.check(&job, &source) {
                Ok(()) => return Ok(job.template_generated(source)),
                Err(failure) => format!("the template module fails its test cases: {failure}"),
            },
            Err(no_template) => no_template.to_string(),
        };
        let error =
            GenerateError::TemplateFails(format!("{rejected}; the peer reports:\n{peer_report}"));
        #[cfg(feature = "llm")]
        let report = PeerReport {
            module: previous,
            report: peer_report,
        };
        #[cfg(feature = "llm")]
        let report = Some(&report);
        #[cfg(not(feature = "llm"))]
        let report = None;
        self.llm_or(&job, rejected, report, error).await
    }

    /// The LLM's module when an LLM is configured, else `error`.
    #[cfg(feature = "llm")]
    async fn llm_or(
        &self,
        job: &Job<'_>,
        template_rejected: String,
        peer_report: Option<&PeerReport<'_>>,
        error: GenerateError,
    ) -> Result<Generated, GenerateError> {
        if self.llm.is_none() {
            return Err(error);
        }
        self.write_with_llm(job, template_rejected, peer_report)
            .await
    }

    /// Without the `llm` feature: `error`.
    #[cfg(not(feature = "llm"))]
    async fn llm_or(
        &self,
        _job: &Job<'_>,
        _template_rejected: String,
        _peer_report: Option<()>,
        error: GenerateError,
    ) -> Result<Generated, GenerateError> {
        Err(error)
    }

    #[cfg(feature = "llm")]
    async fn write_with_llm(
        &self,
        job: &Job<'_>,
        template_rejected: String,
        peer_report: Option<&PeerReport<'_>>,
    ) -> Result<Generated, GenerateError> {
        let Some(client) = &self.llm else {
            return Err(GenerateError::Prompt("no LLM configured".into()));
        };
        let client = client.with_usage(client.usage().child());
        let peer = match &self.peer {
            Some(peer) => peer.clone(),
            None => PeerLabel::new(DEFAULT_PEER_LABEL)
                .map_err(|error| GenerateError::Prompt(error.to_string()))?,
        };
        let cases_text = job.cases.as_ref().map(TestCases::write);
        let mut failures: Vec<AttemptFailure> = Vec::new();
        let mut last_module: Option<String> = None;
        for number in 1..=MAX_ATTEMPTS {
            let feedback = failures.last().map(ToString::to_string);
            let previous = feedback.as_deref().map(|failures| PreviousAttempt {
                number: number - 1,
                module: last_module.as_deref(),
                failures,
            });
            let messages = prompt::messages(
                job.local,
                &peer,
                job.document.text(),
                cases_text.as_deref(),
                peer_report,
                previous.as_ref(),
            )
            .map_err(GenerateError::Prompt)?;
            let request = ChatRequest::new(messages)
                .with_temperature(0.0)
                .with_json_schema("handler_module", module_schema());
            let answer = match client.complete_json::<ModuleAnswer>(request).await {
                Ok(completion) => completion.value.module,
                Err(LlmError::Truncated {
                    completion_tokens,
                    max_tokens,
                    ..
                }) => {
                    last_module = None;
                    failures.push(AttemptFailure::Truncated {
                        completion_tokens,
                        max_tokens,
                    });
                    continue;
                }
                Err(LlmError::InvalidJson { first, second }) => {
                    last_module = None;
                    failures.push(AttemptFailure::Unusable(format!(
                        "{first}; after correction: {second}"
                    )));
                    continue;
                }
                Err(source) => {
                    return Err(GenerateError::Llm {
                        source,
                        usage: client.usage().summary(),
                    })
                }
            };
            match self.check(job, &answer) {
                Ok(()) => {
                    return Ok(job.generated(
                        answer,
                        Origin::Llm { attempts: number },
                        Some(template_rejected),
                        client.usage().summary(),
                    ))
                }
                Err(failure) => {
                    failures.push(failure);
                    last_module = Some(answer);
                }
            }
        }
        Err(GenerateError::Exhausted {
            attempts: failures,
            usage: client.usage().summary(),
            template_rejected,
        })
    }

    /// Loads a module for the job's side as it will run ([`Code::load`]: our template
    /// natively, anything else in the sandbox) and runs the cases for its side.
    fn check(&self, job: &Job<'_>, source: &str) -> Result<(), AttemptFailure> {
        let mut code = Code::load(source, job.document, job.local, self.limits.clone())
            .map_err(AttemptFailure::Load)?;
        let Some(cases) = &job.cases else {
            return Ok(());
        };
        let report = CaseRunner::new(&job.verifier)
            .with_side(&mut code, job.local)
            .run(cases);
        match report.fix_error_report() {
            None => Ok(()),
            Some(report) => Err(AttemptFailure::Cases(report)),
        }
    }
}

/// One generation: the protocol, our side, its verifier and the cases to pass.
struct Job<'a> {
    document: &'a ProtocolDocument,
    local: &'a Local,
    verifier: Verifier,
    cases: Option<TestCases>,
}

impl<'a> Job<'a> {
    fn new(
        document: &'a ProtocolDocument,
        local: &'a Local,
        cases: Option<&TestCases>,
    ) -> Result<Self, SchemaError> {
        Ok(Self {
            document,
            local,
            verifier: Verifier::new(document)?,
            cases: cases.cloned().or_else(|| drafted_cases(document, local)),
        })
    }

    /// Our template's module, verified.
    fn template_generated(&self, source: String) -> Generated {
        self.generated(source, Origin::Template, None, UsageSummary::default())
    }

    fn generated(
        &self,
        source: String,
        origin: Origin,
        template_rejected: Option<String>,
        usage: UsageSummary,
    ) -> Generated {
        Generated {
            source,
            role: self.local.role(),
            origin,
            usage,
            template_rejected,
            cases_run: self.cases.as_ref().map_or(0, |cases| cases.cases.len()),
        }
    }
}

/// Cases drafted from the protocol's schemas, to check a module when none were negotiated.
///
/// The deterministic negotiator writes example values for envelope fields the schema does
/// not fix (`"type": "example-type"` in the seeds' protocol); the envelope is set as the
/// protocol's conventions say: `REQUEST`/`RESPONSE` and the action's name.
fn drafted_cases(document: &ProtocolDocument, local: &Local) -> Option<TestCases> {
    let text = DeterministicNegotiator::new()
        .draft_test_cases_now(document)
        .ok()?;
    let mut cases = TestCases::parse(&text).ok()?;
    let envelope = Envelope::of(document);
    let action = envelope
        .action_value
        .clone()
        .unwrap_or_else(|| Value::String(local.action().to_owned()));
    for case in &mut cases.cases {
        if let Some(request) = case.request.as_object_mut() {
            if let Some((field, value)) = &envelope.request_type {
                request.insert(
                    field.clone(),
                    value.clone().unwrap_or_else(|| action.clone()),
                );
            }
            if let Some(field) = &envelope.action_field {
                request.insert(field.clone(), action.clone());
            }
        }
        if let (Some(response), Some((field, value))) =
            (case.response.as_object_mut(), &envelope.response_type)
        {
            response.insert(
                field.clone(),
                value.clone().unwrap_or_else(|| action.clone()),
            );
        }
    }
    Some(cases)
}
