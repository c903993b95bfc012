//! Why the LLM negotiator could not take a step.

use concord_llm::LlmError;

use crate::document::DocumentError;
use crate::policy::{Step, StepRecord};
use crate::test_cases::TestCasesError;

/// An LLM step that failed, with what it cost before failing.
///
/// Carried by [`NegotiateError::Llm`](crate::NegotiateError::Llm). The `record` counts
/// every call the step made (failed calls included), so the node's accounting can add
/// it like a successful step's.
#[derive(Debug, thiserror::Error)]
#[error("{} step: {failure}", step_label(*step))]
#[non_exhaustive]
pub struct LlmStepError {
    /// The step that failed.
    pub step: Step,
    /// Its calls, tokens and wall time.
    pub record: StepRecord,
    /// What went wrong.
    pub failure: LlmFailure,
}

/// What went wrong in an LLM step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmFailure {
    /// The chat-completions call failed: HTTP error or timeout after the retries, a
    /// connection failure, a body that is not a chat completion, or (from
    /// [`LlmClient::complete_json`](concord_llm::LlmClient::complete_json)) an answer that
    /// was not the JSON asked for even after the corrective retry.
    #[error(transparent)]
    Call(#[from] LlmError),
    /// In the provider's tool loop, the model's final answer was not the JSON asked for,
    /// twice: once at first and again after being told what was wrong.
    #[error("the model's answer is not the JSON asked for: {first}; after correction: {second}")]
    UnusableAnswer {
        /// Why the first answer was rejected.
        first: String,
        /// Why the corrected answer was rejected.
        second: String,
    },
    /// The model kept calling tools instead of answering.
    #[error("the model was still calling tools after {rounds} rounds of tool calls")]
    ToolRounds {
        /// Tool rounds answered before giving up.
        rounds: u32,
    },
    /// The answer's status needs a field the model left out or left empty.
    #[error("the model answered status `{status}` without a non-empty `{field}`")]
    MissingField {
        /// The status the model chose.
        status: &'static str,
        /// The JSON key that must be there.
        field: &'static str,
    },
    /// The protocol the model wrote does not parse.
    #[error("the model's protocol is not a protocol document: {0}")]
    InvalidProtocol(DocumentError),
    /// The protocol the model wrote parses but is not a full protocol (it lacks a request
    /// or a response JSON Schema, e.g. it only names a base protocol by URI).
    #[error("the model's protocol is not a full protocol: it needs both a request and a response JSON Schema")]
    PartialProtocol,
    /// A JSON Schema of the protocol the model wrote does not compile.
    #[error(
        "the model's protocol has a {which} schema that is not a valid JSON Schema: {message}"
    )]
    ProtocolSchema {
        /// `request` or `response`.
        which: &'static str,
        /// What the schema compiler said.
        message: String,
    },
    /// The test cases the model wrote do not parse.
    #[error("the model's test cases cannot be read: {0}")]
    InvalidTestCases(TestCasesError),
    /// The test cases the model wrote break the agreed protocol's schemas.
    #[error("the model's test cases break the agreed schemas:\n{problems}")]
    TestCasesBreakSchemas {
        /// One line per violation: case, message, JSON pointer and what is wrong.
        problems: String,
    },
    /// The prompt could not be built (a name rejected by concord-context).
    #[error("the prompt cannot be built: {reason}")]
    Prompt {
        /// What concord-context said.
        reason: String,
    },
}

/// The step in words, for messages.
fn step_label(step: Step) -> &'static str {
    match step {
        Step::Draft => "draft",
        Step::Judge => "judge",
        Step::DraftTestCases => "draft-test-cases",
        Step::JudgeTestCases => "judge-test-cases",
        Step::Diagnose => "diagnose",
    }
}
