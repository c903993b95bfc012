//! What can go wrong: building and serving a node, connecting to a peer, calling an action.
//!
//! An error's message says everything, its cause included, and it has no
//! [`source`](std::error::Error::source): printing an error with its chain shows each cause
//! once. Where the cause is a typed error it stays available in the `cause` field.

use std::time::Duration;

use concord_proto::handshake::HandshakeError;
use concord_proto::{CloseReason, HelloError};
use concord_store::StoreError;

/// Building or serving a node failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A setting is wrong (named in the message).
    #[error("configuration: {0}")]
    Config(String),
    /// The store could not be opened or used (the message is the store's own).
    #[error("{cause}")]
    Store {
        /// The store's error.
        cause: StoreError,
    },
    /// The LLM client could not be set up (the message is the client's own).
    #[error("{cause}")]
    Llm {
        /// The LLM client's error.
        cause: concord_llm::LlmError,
    },
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// A background task of the node failed.
    #[error("internal: {0}")]
    Internal(String),
}

/// Connecting to a peer (discovery, hello, negotiation, code, test cases) failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a usable `http(s)` description URL.
    #[error("{url:?} is not a peer URL: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The peer's description could not be fetched.
    #[error("cannot fetch the description at {url}: {reason}")]
    Fetch {
        /// The description URL.
        url: String,
        /// What failed (HTTP status, transport error, size).
        reason: String,
    },
    /// The peer's description does not validate, or offers what this agent cannot use.
    #[error("the description at {url} is invalid: {problems}")]
    InvalidDescription {
        /// The description URL.
        url: String,
        /// What is wrong: the validator's report, or the affordance that cannot be used.
        problems: DescriptionError,
    },
    /// The description has no `concord:metaProtocol` endpoint.
    #[error("the description at {url} advertises no Concord meta-protocol endpoint")]
    NoEndpoint {
        /// The description URL.
        url: String,
    },
    /// The peer does not publish the action.
    #[error("the peer at {url} publishes no action `{action}` (it has: {})", available.join(", "))]
    UnknownAction {
        /// The description URL.
        url: String,
        /// The action asked for.
        action: String,
        /// The actions it publishes.
        available: Vec<String>,
    },
    /// The WebSocket to the peer's endpoint could not be opened.
    #[error("cannot open the WebSocket {endpoint}: {reason}")]
    Connect {
        /// The endpoint URL.
        endpoint: String,
        /// What failed (an HTTP 503 means the peer is at its session limit).
        reason: String,
    },
    /// The peer is not who its description says, or the session cannot be as secure as
    /// our policy (or the peer's description) requires: a DID whose host is not the URL's,
    /// an encrypted channel refused or stripped, a Noise key not in the DID's document.
    #[error("cannot trust the peer at {endpoint}: {reason}")]
    Security {
        /// The endpoint URL.
        endpoint: String,
        /// What failed.
        reason: String,
    },
    /// The peer's `destinationHello` is not valid.
    #[error("the peer's destinationHello is invalid: {cause}")]
    Hello {
        /// What is wrong with it.
        cause: HelloError,
    },
    /// The hello exchange cannot conclude (no common version, an answer we did not ask for).
    #[error("handshake: {cause}")]
    Handshake {
        /// Why it cannot conclude.
        cause: HandshakeError,
    },
    /// The peer broke the binding before the session started.
    #[error("the peer broke the WebSocket binding: {0}")]
    Binding(String),
    /// The peer closed the WebSocket.
    #[error("the peer closed the connection{}", close_text(*.code, .reason))]
    PeerClosed {
        /// The close code, if the peer sent one.
        code: Option<u16>,
        /// The close reason (may be empty).
        reason: String,
    },
    /// A deadline passed.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The session closed before it was ready: rejected, round cap, a violation, a
    /// code-generation failure or a timeout, as the session says.
    #[error("the session closed before it was ready: {0}")]
    Closed(CloseReason),
    /// The peer's code fails the agreed test cases and it would not (or could not) fix it.
    #[error("the peer's code fails the agreed test cases: {0}")]
    Verification(String),
    /// The WebSocket failed.
    #[error("transport: {0}")]
    Transport(String),
    /// Our store failed.
    #[error("store: {0}")]
    Store(String),
    /// We could not take a step of our own (draft a protocol for the need, …).
    #[error("{0}")]
    Local(String),
}

fn close_text(code: Option<u16>, reason: &str) -> String {
    match (code, reason.is_empty()) {
        (None, _) => " without a close frame".to_owned(),
        (Some(code), true) => format!(" (code {code})"),
        (Some(code), false) => format!(" (code {code}): {reason}"),
    }
}

/// A call over an established connection failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The connection's protocol is for another action.
    #[error("this connection's protocol is for `{protocol_action}`, not `{action}`")]
    WrongAction {
        /// The action asked for.
        action: String,
        /// The action the protocol was negotiated for.
        protocol_action: String,
    },
    /// The input breaks the action's input schema on our side (checked before our handler
    /// runs, in every mode, in the same words: "the input of the action \`NAME\` is invalid
    /// at /pointer: …"), or our handler could not turn it into a request, or the request
    /// breaks the protocol's request schema. Nothing was sent.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The peer answered with an error response.
    #[error("the peer answered {code}: {message}")]
    Remote {
        /// The status code in the response (HTTP status codes in Concord's protocols).
        code: i64,
        /// The status message in the response.
        message: String,
    },
    /// The peer's response breaks the protocol, or our handler could not read it.
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// No response within the call timeout.
    #[error("no response within {}", crate::config::human(*.0))]
    Timeout(Duration),
    /// The connection is closed (the reason says why).
    #[error("the connection is closed: {0}")]
    Closed(String),
    /// The session did not negotiate what this needs (e.g. natural-language negotiation,
    /// which needs an LLM on both sides).
    #[error("not available on this connection: {0}")]
    Unsupported(String),
    /// The peer stopped reading the stream (its STOP, quinn's `WriteError::Stopped`): what
    /// is sent on it would go nowhere.
    #[error("the peer stopped reading the stream (code {code})")]
    Stopped {
        /// The code of the peer's STOP.
        code: u32,
    },
}

/// Why a peer's description cannot be used ([`ConnectError::InvalidDescription`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptionError {
    /// It does not validate: the validator's report. Shown as its errors, one per line.
    #[error("{}", errors_text(.0))]
    Invalid(concord_describe::Report),
    /// An action answers in a mode this agent does not speak (`concord:mode`).
    #[error("action `{action}` answers in mode {mode}, which this agent does not speak")]
    UnknownMode {
        /// The action's name.
        action: String,
        /// The mode as written in `concord:mode`.
        mode: &'static str,
    },
    /// An action's `concord:stream` is present although it is not a stream action, or
    /// absent although it is one.
    #[error(
        "action `{action}`: `concord:stream` is given exactly for stream actions (its mode is {mode})"
    )]
    StreamMismatch {
        /// The action's name.
        action: String,
        /// The action's mode.
        mode: &'static str,
    },
    /// A property's schema is not a JSON object.
    #[error("property `{property}`: its schema is not a JSON object")]
    PropertySchema {
        /// The property's name.
        property: String,
    },
}

/// The report's errors, one per line (warnings are not why a description is refused).
fn errors_text(report: &concord_describe::Report) -> String {
    report
        .errors()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a description `id` is refused ([`check_description_id`](crate::check_description_id)):
/// the validator's report on a description with that id. Shown as its first error's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", first_error(.report))]
#[non_exhaustive]
pub struct DescriptionIdError {
    /// The id given.
    pub id: String,
    /// What the validator found (its first error is about `/id`).
    pub report: concord_describe::Report,
}

/// The message of the report's first error (the whole report when it has none).
fn first_error(report: &concord_describe::Report) -> String {
    report
        .errors()
        .next()
        .map_or_else(|| report.to_string(), |problem| problem.message.clone())
}

/// Why a public base URL is refused ([`check_public_url`](crate::check_public_url)). Each
/// message starts with the URL, quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublicUrlError {
    /// It is not an absolute URL.
    #[error("{url:?} is not a URL: {error}")]
    NotAUrl {
        /// The URL given.
        url: String,
        /// What the URL parser found.
        error: url::ParseError,
    },
    /// Its scheme is neither `http` nor `https`.
    #[error("{url:?} must start with http:// or https://")]
    Scheme {
        /// The URL given.
        url: String,
    },
    /// It carries a user name or password, which the published description would show.
    #[error("{url:?} must not carry credentials: the description publishes it")]
    Credentials {
        /// The URL given.
        url: String,
    },
    /// It has a query or a fragment.
    #[error("{url:?} must not have a query or fragment")]
    QueryOrFragment {
        /// The URL given.
        url: String,
    },
}
