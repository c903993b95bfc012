//! Protocol negotiation policy for Concord: what to say in a negotiation.
//!
//! - [`ProtocolDocument`]: candidate protocols in the seeds' markdown shape, parsed and written.
//! - [`TestCases`]: negotiated test cases (request, response, expected result), parsed and written.
//! - [`Negotiator`]: the policy interface; [`DeterministicNegotiator`] is the default (no LLM).
//! - [`ProtocolSchemas`]: a protocol's JSON Schemas compiled once to check wire messages.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod action;
mod deterministic;
mod document;
mod markdown;
pub mod naming;
mod policy;
mod test_cases;
mod validation;

pub use action::{canonical_protocol, result_field, ActionSpec, Need};
pub use deterministic::{DeterministicNegotiator, DEFAULT_PROTOCOL_TIMEOUT};
pub use document::{
    BaseProtocol, DocumentError, Encoding, ErrorConvention, ProtocolDocument, ProtocolSpec,
};
pub use policy::{
    Accounting, Decided, JudgeContext, NegotiateError, Negotiator, PolicyKind, Step, StepRecord,
};
pub use test_cases::{TestCase, TestCases, TestCasesError};
pub use validation::{ProtocolSchemas, SchemaViolation};
