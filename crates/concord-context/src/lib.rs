//! Data messages: structured, persistent context for LLM prompts.
//!
//! A [`Context`] is an ordered list of [`Message`]s: text passed through as
//! is, [`DataMessage`]s that carry JSON data (with an optional schema and
//! description) and persist across an agent's loop, and [`PeerText`], text
//! from another agent that is only ever shown as fenced data.
//!
//! - **Identity and merging.** Data messages with the same kind and
//!   `_instance` ([`Identity`]) merge, oldest to newest: objects deep-merge,
//!   arrays and scalars replace, `null` is a value. Messages without
//!   `_instance` are global; in an instance's [`View`] they come first and the
//!   instance's own messages override them. Outputs written at an
//!   `_outputPath` combine by their [`OutputMethod`] (`set`, `merge`,
//!   `assign`, `push`, `concat`).
//! - **Rendering.** [`Context::render`] produces the OpenAI-style
//!   [`ChatMessage`]s the LLM sees, byte for byte the same every time: one
//!   block per identity (`## Data: ¶user`, the data, the description, the
//!   schema), the input layout for kind `input`, hidden keys removed.
//! - **Variables.** [`Expression`]s such as `†input.topic || †state.topic`
//!   resolve against the merged data ([`Context::resolve`]), also inside any
//!   JSON value ([`Context::substitute`]). What cannot be resolved is
//!   [`Resolution::Pending`], naming each missing reference, never `null`.
//! - **Outputs.** [`Context::append_output`] appends a call's result under its
//!   `_outputPath`; reading the path back finds the newest write.
//! - **Validation.** [`Context::validate`] checks merged data against its
//!   schema and reports [`Violation`]s with JSON pointers.
//!
//! ```
//! use concord_context::{Context, Role, View};
//!
//! let context = Context::from_json(r#"[
//!   {"type": "text", "text": "Update the user's city to Austin"},
//!   {"type": "data", "kind": "user", "description": "Represents the current user.",
//!    "data": {"name": "John Doe"}},
//!   {"type": "data", "kind": "user", "data": {"age": 30}}
//! ]"#.as_bytes())?;
//! let chat = context.render(&View::Global)?;
//! assert_eq!(chat.len(), 2);
//! assert_eq!(chat[1].role, Role::User);
//! assert_eq!(chat[1].content, "## Data: ¶user\n{\n  \"name\": \"John Doe\",\n  \"age\": 30\n}\nRepresents the current user.");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod context;
mod expression;
mod identity;
mod json_layout;
mod merge;
mod message;
mod output;
mod peer;
mod render;
mod resolve;
mod validate;

pub use concord_text::TextPosition;
pub use context::{Context, ContextError, MergeError};
pub use expression::{Expression, ExpressionError, ExpressionErrorKind, Reference, DAGGER};
pub use identity::{Identity, InstanceId, Kind, NameError, View, MAX_NAME_CHARS};
pub use json_layout::{prompt_json, PROMPT_JSON_WIDTH};
pub use merge::{deep_merge, Conflict, OutputMethod, UnknownOutputMethod};
pub use message::{ContextMessageError, DataMessage, Message, Role, TextMessage, HIDDEN_KEYS};
pub use output::{OutputError, OutputWrite};
pub use peer::{PeerLabel, PeerText, MAX_PEER_LABEL_CHARS};
pub use render::{ChatMessage, INPUT_INSTRUCTION};
pub use resolve::{Missing, MissingReason, Pending, Resolution, SubstituteError, Unresolved};
pub use validate::{ValidateError, Violation};

/// The README's Rust example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
