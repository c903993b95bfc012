//! Protocol negotiation policy for Concord: what to say in a negotiation.
//!
//! - [`ProtocolDocument`]: candidate protocols in the seeds' markdown shape, parsed and written.
//! - [`TestCases`]: negotiated test cases (request, response, expected result), parsed and written.
//! - [`Negotiator`]: the policy interface; [`DeterministicNegotiator`] is the default (no LLM),
//!   [`LlmNegotiator`] asks an OpenAI-compatible model, and [`EscalatingNegotiator`] uses the
//!   rules first and the LLM only for what they cannot settle.
//! - [`ProtocolSchemas`]: a protocol's JSON Schemas compiled once to check wire messages.
//! - [`json_schema`]: the parts of a JSON Schema the rules read (properties, `required`, types).
//! - [`complexity`]: how complex a peer's JSON Schema may be before anything compiles or
//!   reads it ([`SchemaLimits`](complexity::SchemaLimits)).
//!
//! # Cargo features
//!
//! - `llm` (default): [`LlmNegotiator`], [`EscalatingNegotiator`] and
//!   `NegotiateError::Llm`, with concord-llm's HTTP client (reqwest, tokio) and
//!   concord-context. Without it (`default-features = false`) the crate is documents, test
//!   cases, schema validation and the deterministic negotiator, with no I/O dependencies.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]
// Without the `llm` feature the docs still name the LLM negotiators.
#![cfg_attr(not(feature = "llm"), allow(rustdoc::broken_intra_doc_links))]

mod action;
pub mod complexity;
mod described;
mod deterministic;
mod document;
pub mod envelope;
#[cfg(feature = "llm")]
mod escalate;
pub mod fit;
pub mod json_schema;
#[cfg(feature = "llm")]
mod llm;
mod markdown;
pub mod naming;
mod policy;
mod request_input;
mod test_cases;
mod validation;

pub use action::{canonical_protocol, result_field, ActionSpec, Need};
pub use described::published_actions;
pub use deterministic::{DeterministicNegotiator, DEFAULT_PROTOCOL_TIMEOUT};
pub use document::{
    BaseProtocol, DocumentError, Encoding, ErrorConvention, ProtocolDocument, ProtocolSpec,
};
pub use envelope::Envelope;
#[cfg(feature = "llm")]
pub use escalate::EscalatingNegotiator;
#[cfg(feature = "llm")]
pub use llm::{
    LlmFailure, LlmNegotiator, LlmStepError, CAPABILITY_TOOL, DEFAULT_PEER_LABEL,
    MAX_DOCUMENT_CHARS, MAX_NOTE_CHARS, MAX_TOOL_ROUNDS,
};
pub use policy::{
    Accounting, Decided, JudgeContext, NegotiateError, Negotiator, PolicyKind, Previous, Step,
    StepRecord, StructuredOutput,
};
pub use test_cases::{TestCase, TestCases, TestCasesError};
pub use validation::{check_against, ProtocolSchemas, SchemaViolation};

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "llm"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
