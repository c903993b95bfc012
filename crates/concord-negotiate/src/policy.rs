//! The interface both negotiators implement, and the accounting of who decided what.

use std::future::Future;
use std::time::{Duration, Instant};

use concord_proto::{Decision, FixDecision};
use serde_json::Value;

use crate::action::{ActionSpec, Need};
use crate::document::{DocumentError, ProtocolDocument};
#[cfg(feature = "llm")]
use crate::llm::LlmStepError;
use crate::test_cases::TestCasesError;

/// Which policy took a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// Rules over published schemas; no LLM.
    Deterministic,
    /// An LLM drafted or judged.
    Llm,
}

/// A negotiation step a policy can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// Draft a first candidate protocol.
    Draft,
    /// Judge a candidate protocol.
    Judge,
    /// Draft test cases.
    DraftTestCases,
    /// Judge test cases.
    JudgeTestCases,
    /// Diagnose an error report.
    Diagnose,
}

/// What one step cost.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    /// The step.
    pub step: Step,
    /// Who decided it.
    pub policy: PolicyKind,
    /// LLM calls made (0 for the deterministic policy).
    pub llm_calls: u32,
    /// Prompt tokens sent.
    pub tokens_in: u64,
    /// Completion tokens received.
    pub tokens_out: u64,
    /// Wall time of the step.
    #[serde(with = "millis")]
    pub wall: Duration,
    /// How the step's JSON answer was asked for, when an LLM wrote one: with a JSON Schema
    /// the server enforces, in JSON mode, or in the prompt only (the server refused the
    /// `response_format`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<StructuredOutput>,
    /// Corrective retries: calls made because an answer was not the JSON asked for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub corrective_retries: u32,
}

/// How an LLM step asked for its JSON answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StructuredOutput {
    /// `response_format` with the answer's JSON Schema: the server constrains the answer.
    JsonSchema,
    /// `response_format: json_object`: any JSON object.
    JsonObject,
    /// No `response_format` (the server refused it): the prompt alone asks for the JSON.
    PromptOnly,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl StepRecord {
    /// A record for a deterministic step.
    pub fn deterministic(step: Step, wall: Duration) -> Self {
        Self {
            step,
            policy: PolicyKind::Deterministic,
            llm_calls: 0,
            tokens_in: 0,
            tokens_out: 0,
            wall,
            structured_output: None,
            corrective_retries: 0,
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(duration.as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let millis = f64::deserialize(deserializer)?;
        Ok(Duration::from_secs_f64((millis / 1000.0).max(0.0)))
    }
}

/// A policy's answer with the record of what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided<T> {
    /// The answer.
    pub value: T,
    /// Who decided, LLM calls, tokens, wall time.
    pub record: StepRecord,
}

impl<T> Decided<T> {
    /// `value`, decided by the rules (no LLM) in `step`, which began at `start`.
    pub(crate) fn deterministic(step: Step, start: Instant, value: T) -> Self {
        Self {
            value,
            record: StepRecord::deterministic(step, start.elapsed()),
        }
    }
}

/// The accounting of a whole negotiation: every step, and totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Accounting {
    /// Every step in order.
    pub steps: Vec<StepRecord>,
}

impl Accounting {
    /// Records a step.
    pub fn record(&mut self, record: StepRecord) {
        self.steps.push(record);
    }

    /// LLM calls over all steps.
    pub fn llm_calls(&self) -> u32 {
        self.steps.iter().map(|s| s.llm_calls).sum()
    }

    /// (prompt, completion) tokens over all steps.
    pub fn tokens(&self) -> (u64, u64) {
        self.steps
            .iter()
            .fold((0, 0), |(i, o), s| (i + s.tokens_in, o + s.tokens_out))
    }

    /// Total wall time of all steps.
    pub fn wall(&self) -> Duration {
        self.steps.iter().map(|s| s.wall).sum()
    }

    /// How many steps each policy decided: (deterministic, llm).
    pub fn by_policy(&self) -> (usize, usize) {
        let llm = self
            .steps
            .iter()
            .filter(|s| s.policy == PolicyKind::Llm)
            .count();
        (self.steps.len() - llm, llm)
    }
}

/// What the judged candidate answers: our candidate it replaces and the peer's summary of
/// its changes. Both absent for the first candidate of a negotiation
/// ([`Previous::default`]); a judge that weighs changes (the LLM's) sees what changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Previous<'a> {
    /// The candidate we proposed last.
    pub our_candidate: Option<&'a str>,
    /// The peer's `modificationSummary`: what its candidate changes in ours.
    pub modification_summary: Option<&'a str>,
}

/// What the judging side knows.
#[derive(Debug, Clone, Copy)]
pub enum JudgeContext<'a> {
    /// We provide these actions (from our own description).
    Provider {
        /// Our published actions.
        actions: &'a [ActionSpec],
    },
    /// We want to call `peer_action` for `need`.
    Requester {
        /// What we want.
        need: &'a Need,
        /// The peer's action, from its description.
        peer_action: &'a ActionSpec,
    },
}

/// Why a policy could not take a step. (A rejection is a [`Decision`], not an error.)
///
/// Like every error of this crate, its message says everything, causes included, and it
/// has no [`source`](std::error::Error::source): a chain printed in full says each once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NegotiateError {
    /// Our own need cannot be met by the peer's action.
    #[error("cannot draft a protocol for `{action}`: {reason}")]
    CannotDraft {
        /// The peer action.
        action: String,
        /// Why, naming the fields.
        reason: String,
    },
    /// A protocol document we hold (not a peer's) does not parse.
    #[error("protocol document: {0}")]
    Document(DocumentError),
    /// Test cases we hold do not parse.
    #[error("test cases: {0}")]
    TestCases(TestCasesError),
    /// A protocol's JSON Schema does not compile.
    #[error("the {which} schema is not a valid JSON Schema: {message}")]
    Schema {
        /// `request` or `response`.
        which: &'static str,
        /// What the schema compiler said.
        message: String,
    },
    /// A protocol's JSON Schema is over the document's
    /// [`SchemaLimits`](crate::complexity::SchemaLimits): it was not compiled.
    #[error("the {which} schema is too complex to compile: {error}")]
    TooComplex {
        /// `request` or `response`.
        which: &'static str,
        /// Where, which limit, how many and the limit.
        error: crate::complexity::SchemaTooComplex,
    },
    /// The LLM could not be used (transport, protocol, or unusable answers): which step,
    /// what it cost, and what went wrong. (Feature `llm`.)
    #[cfg(feature = "llm")]
    #[error("LLM: {0}")]
    Llm(Box<LlmStepError>),
}

impl From<DocumentError> for NegotiateError {
    fn from(error: DocumentError) -> Self {
        Self::Document(error)
    }
}

impl From<TestCasesError> for NegotiateError {
    fn from(error: TestCasesError) -> Self {
        Self::TestCases(error)
    }
}

/// A negotiation policy: what to say at each step. The session state machine decides
/// *when* a step is needed; a `Negotiator` decides *what* to answer.
pub trait Negotiator: Send + Sync {
    /// Requester: a first candidate protocol for calling `peer_action` for `need`.
    fn draft(
        &self,
        need: &Need,
        peer_action: &ActionSpec,
    ) -> impl Future<Output = Result<Decided<String>, NegotiateError>> + Send;

    /// Either side: accept, counter-propose (full text + summary) or reject the peer's
    /// candidate, which answers `previous`.
    fn judge(
        &self,
        context: JudgeContext<'_>,
        candidate: &str,
        previous: Previous<'_>,
    ) -> impl Future<Output = Result<Decided<Decision>, NegotiateError>> + Send;

    /// Requester: test cases for an agreed protocol.
    fn draft_test_cases(
        &self,
        protocol: &ProtocolDocument,
    ) -> impl Future<Output = Result<Decided<String>, NegotiateError>> + Send;

    /// Either side: accept or reject the peer's test cases for an agreed protocol.
    fn judge_test_cases(
        &self,
        protocol: &ProtocolDocument,
        test_cases: &str,
    ) -> impl Future<Output = Result<Decided<Decision>, NegotiateError>> + Send;

    /// Either side: the peer says our messages are wrong. Accept (we regenerate our code) or
    /// reject with the reason, given the messages we sent recently.
    fn diagnose(
        &self,
        protocol: &ProtocolDocument,
        error_description: &str,
        our_messages: &[Value],
    ) -> impl Future<Output = Result<Decided<FixDecision>, NegotiateError>> + Send;
}
