//! Protocol handler code for Concord: the runtime contract around sandboxed handler
//! modules, their generation (deterministic templates, an LLM when no template fits), and
//! their verification by the protocol's JSON Schemas and the negotiated test cases.
//!
//! # The runtime contract
//!
//! A handler module (see [`concord_sandbox`] for the module format and its limits) turns one
//! side's data into protocol messages and back. The runtime does everything else: I/O,
//! framing, the wire encoding ([`wire`]: JSON, or AICL through `concord-aicl`'s JSON
//! bridge when the protocol document says AICL), message ids, schema validation
//! ([`Verifier`]), and matching responses to requests.
//!
//! | role | function | the runtime passes | the function returns |
//! |---|---|---|---|
//! | requester | `encodeRequest` | `{messageId, input}` | the request message |
//! | requester | `decodeResponse` | the response message | `{messageId, output}` or `{messageId, error: {code, message}}` |
//! | provider | `decodeRequest` | the request message | `{messageId, input}` |
//! | provider | `encodeResponse` | `{messageId, result}` or `{messageId, error: {code, message}}` | the response message |
//!
//! - `messageId` is a string. The runtime makes it for a request (handlers cannot make
//!   random values); `decodeRequest` returns the request's and the runtime passes it back
//!   to `encodeResponse`, which echoes it; `decodeResponse` returns the one the response
//!   carries so the runtime can match it with its request.
//! - `input` is the action's input as our side shapes it: the provider's action `input`
//!   schema, the requester's need `input` schema ([`Local`]). `result` is the provider
//!   action's result (its `output` schema); `output` is what the requester's need asks back.
//! - `error` is `{code: integer, message: string}`: the provider's action failed
//!   (`encodeResponse` writes it by the protocol's error convention), or the response
//!   reports an error, i.e. an integer status code of 400 or more (`decodeResponse`
//!   returns it instead of `output`; `message` is `""` when the response has none).
//! - Messages are JSON objects. Outgoing ones must pass the protocol's schema before they
//!   are encoded; incoming ones are size-checked, decoded and must pass the schema before
//!   the handler sees them. A function that throws or hits a sandbox limit fails that
//!   message only.
//!
//! [`Requester`] and [`Provider`] are that message path, typed: [`Reply`], [`Incoming`],
//! [`Outcome`], and a [`RuntimeError`] that says whose fault a bad message is.
//!
//! # Generation
//!
//! [`template`] writes a module deterministically from the protocol's JSON Schemas and our
//! side's schemas ([`Local`]): field mapping by name or naming style, the envelope
//! (`messageId` echo, `type` `REQUEST`/`RESPONSE`, the `action` constant), defaults, and the
//! error convention. [`Generator`] uses it when it fits and passes the test cases, and
//! otherwise asks an LLM (up to [`MAX_ATTEMPTS`], each told the previous attempt's
//! failures), reporting which path wrote the module ([`Origin`]) and what the LLM cost.
//!
//! # Running modules: natively when they are our template
//!
//! A template is decided once, as data (a plan of its constants, mapping tables and
//! functions, statement by statement), and that one plan has two back ends: the module's
//! JavaScript ([`template`], [`Template::source`]: what is stored, shown and verified) and a
//! native executor ([`Template::call`]) with the same results and the same errors.
//! [`Code::load`] runs a module natively exactly when its text is byte for byte our
//! template for the protocol and our side, and in the sandbox otherwise (LLM-written,
//! peer-supplied, edited or older modules). [`Requester`], [`Provider`], [`CaseRunner`] and
//! [`Generator`] take a [`Code`], so a template is verified by the test cases as it runs.
//!
//! # Cargo features
//!
//! - `llm` (default): the LLM path of [`Generator`], with `concord-llm`'s HTTP client and
//!   `concord-context`. Without it (`default-features = false`) generation is templates
//!   only, and the crate has no HTTP or async runtime dependency.
//!
//! # Verification
//!
//! [`Verifier`] holds the compiled schemas; [`CaseRunner`] runs negotiated cases through
//! one or both sides and reports each case with a [`diff`] by JSON pointer;
//! [`CasesReport::fix_error_report`] is the text for `fixErrorNegotiation.errorDescription`.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]
// Without the `llm` feature the docs still name the LLM methods.
#![cfg_attr(not(feature = "llm"), allow(rustdoc::broken_intra_doc_links))]

mod cases;
mod code;
mod contract;
mod diff;
mod envelope;
mod expect;
mod generate;
mod local;
mod mapping;
#[cfg(feature = "llm")]
mod prompt;
mod report;
mod runtime;
mod schema;
mod template;
mod verify;
pub mod wire;

pub use cases::{CaseReport, CaseRunner, CaseStep, CasesReport, Failure, Problem};
pub use code::Code;
pub use contract::{ContractViolation, ErrorStatus, Incoming, Outcome, Reply};
pub use diff::{diff, Difference};
pub use expect::Underivable;
pub use generate::{
    AttemptFailure, GenerateError, Generated, Generator, Origin, DEFAULT_PEER_LABEL, MAX_ATTEMPTS,
    MAX_MODULE_CHARS,
};
pub use local::Local;
pub use runtime::{Provider, Requester, RuntimeError};
pub use template::{template, NoTemplate, Template};
pub use verify::{Direction, InvalidMessage, SchemaError, Verifier};
pub use wire::WireError;

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "llm"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
