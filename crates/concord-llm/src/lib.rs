//! An async client for OpenAI-compatible chat-completions servers (OpenAI, Ollama, vLLM,
//! llama.cpp), for the parts of Concord that need an LLM: drafting and judging protocols,
//! writing handler code, diagnosing errors.
//!
//! - [`LlmConfig`]: base URL, API key, model, timeout, retries and backoff, also from the
//!   environment ([`LlmConfig::from_env`]; no LLM configured is `Ok(None)`, not an error).
//! - [`LlmClient::chat`]: one request with retries (429, 5xx, connection failures and
//!   timeouts, with exponential backoff and jitter, honouring `Retry-After`).
//! - [`LlmClient::complete_json`]: JSON mode, strict parsing into your type, one corrective
//!   retry naming the parse error, then [`LlmError::InvalidJson`] with both errors.
//! - [`Usage`]: every call recorded as a [`CallRecord`] (attempts, tokens, latency, outcome).
//!
//! Everything a model writes is untrusted: parse it strictly (as `complete_json` and
//! [`ToolCall::parse_arguments`] do) and treat a failure as the model's, not a bug. The API
//! key is never logged, printed or quoted in an error.
//!
//! # Cargo features
//!
//! - `client` (default): [`LlmClient`], [`JsonCompletion`], [`MAX_RESPONSE_BYTES`],
//!   [`Backoff::delay`] and [`LlmError::Transport`] — everything that talks HTTP, with its
//!   dependencies (reqwest with rustls, tokio, httpdate, fastrand, tracing).
//!
//! With `default-features = false` the crate is the data only, without reqwest or tokio:
//! the request, message and response types ([`ChatRequest`], [`Message`], [`ChatResponse`],
//! [`ToolCall`], …), [`LlmConfig`] (including [`LlmConfig::from_env`] and its URL checks),
//! [`Backoff`], the [`Usage`] ledger types and [`LlmError`]. That is enough to build
//! requests or decode a server's answers, as the fuzz targets do:
//!
//! ```toml
//! concord-llm = { path = "../crates/concord-llm", default-features = false }
//! ```
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "client")]
//! # mod example {
//! use concord_llm::{ChatRequest, LlmClient, LlmConfig, Message};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Colour { name: String, hex: String }
//!
//! # async fn demo() -> Result<(), concord_llm::LlmError> {
//! let Some(config) = LlmConfig::from_env()? else {
//!     println!("no LLM configured; using the deterministic path");
//!     return Ok(());
//! };
//! let client = LlmClient::new(config)?;
//! let colour: Colour = client
//!     .complete_json(ChatRequest::new(vec![
//!         Message::system(r##"Answer with JSON: {"name": string, "hex": "#rrggbb"}."##),
//!         Message::user("The colour of the sky at noon."),
//!     ]))
//!     .await?
//!     .value;
//! let usage = client.usage().summary();
//! println!("{} ({}): {} calls, {} tokens in, {} out, {:?}",
//!     colour.name, colour.hex, usage.calls, usage.prompt_tokens, usage.completion_tokens,
//!     usage.wall_time);
//! # Ok(()) }
//! # }
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The docs link to the `client` items, which documentation built without it lacks.
#![cfg_attr(not(feature = "client"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "client")]
mod client;
mod config;
mod error;
mod message;
mod request;
mod response;
mod retry;
mod usage;

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub use client::{JsonCompletion, LlmClient, MAX_RESPONSE_BYTES};
pub use config::{
    parse_root_certificates, LlmConfig, PemError, DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES,
    DEFAULT_MODEL, DEFAULT_REQUEST_TIMEOUT, ENV_API_KEY, ENV_BASE_URL, ENV_CA_CERT, ENV_MAX_TOKENS,
    ENV_MODEL, ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL, ENV_SEED, ENV_TEMPERATURE,
};
pub use error::{with_causes, ContentError, LlmError, TextPosition};
pub use message::{FunctionCall, Message, ToolCall, ToolKind};
pub use request::{
    AnswerFormat, ChatRequest, FunctionTool, JsonSchemaFormat, ResponseFormat, Tool, ToolChoice,
};
pub use response::{AssistantMessage, ChatResponse, Choice, FinishReason, TokenUsage};
pub use retry::Backoff;
pub use secrecy::{ExposeSecret, SecretString};
pub use usage::{CallOutcome, CallRecord, Usage, UsageSummary, RECORD_LIMIT};

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "client"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
