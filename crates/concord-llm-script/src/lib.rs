//! A scripted OpenAI-compatible chat-completions server on loopback, for tests of code
//! that talks to an LLM.
//!
//! [`ScriptServer::start`] binds `127.0.0.1:0` and serves `POST /v1/chat/completions`
//! (and `POST /chat/completions`, for base URLs without `/v1`). Each request takes the next
//! [`Step`] of the script: a text answer, a tool call, an HTTP error status, any of them
//! after a delay. When the script is used up the server answers HTTP 500 with a body that
//! says "script exhausted". Every request is recorded ([`RecordedRequest`]: path, headers,
//! parsed JSON body) for assertions. The server stops when the [`ScriptServer`] is dropped.
//!
//! Answers report token usage: by default `prompt_tokens` is the number of
//! whitespace-separated words in the request's message contents and `completion_tokens`
//! the number in the answer (a stand-in for real tokens; [`Step::usage`] sets exact numbers).
//!
//! ```
//! use concord_llm_script::{ScriptServer, Step};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = ScriptServer::start([
//!     Step::status(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "1"),
//!     Step::content(r#"{"status":"accepted"}"#).usage(12, 5),
//!     Step::tool_call("get_product", json!({"sku": "A-1"})),
//! ])
//! .await?;
//! let base_url = server.base_url(); // "http://127.0.0.1:PORT/v1": point the client here
//! # assert!(base_url.ends_with("/v1"));
//! // … run the code under test, then:
//! for request in server.requests() {
//!     let _model = &request.body["model"];
//!     let _auth = request.header("authorization");
//! }
//! # Ok(()) }
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod reply;
mod server;
mod step;

pub use server::{RecordedRequest, ScriptServer};
pub use step::Step;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
