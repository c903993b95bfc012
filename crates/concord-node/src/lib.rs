//! The Concord agent node: a thin tokio driver around the sans-IO meta-protocol session.
//!
//! A [`Node`] serves actions to peers and calls peers' actions:
//!
//! - **Provider** ([`Node::serve`]): `GET /.well-known/wot` serves the agent description
//!   (`application/td+json`) with the meta-protocol endpoint, the versions, the capabilities
//!   the node really has and the consensus protocols it holds; `/concord` is the WebSocket
//!   endpoint. Each session negotiates (or resumes) a protocol, generates and checks the
//!   handler code, then dispatches decoded requests to the registered [`Action`]s: async
//!   closures, [`ExecAction`] (a command per call) or [`HttpAction`] (a POST per call).
//! - **Requester** ([`Node::connect`]): fetches the peer's description, connects, says hello
//!   (capabilities, a stored protocol's hash for 0-RTT, shared consensus protocols), drives
//!   the session with the negotiator and the handler code until both sides generated their
//!   code and the peer's code passed the agreed test cases, then [`Connection::call`]s the
//!   action, concurrently, with no LLM in the loop.
//! - **Store**: agreed protocols (document, handlers, test cases, peer) are saved for 0-RTT
//!   reconnects; every session's frames are kept as a transcript.
//!
//! # The WebSocket binding
//!
//! The first message each way is the hello as a JSON text frame
//! (`{"version":"1.0","type":"sourceHello"|"destinationHello","messageId":…,"metaProtocol":{…}}`);
//! every later message is a binary frame `[header byte][protocol data]`. Anything else
//! closes the connection with a close frame whose reason says what was wrong (1002 for a
//! broken binding or protocol, 1008 for a timeout, 1009 for an oversized message).
//!
//! # Example
//!
//! ```no_run
//! use concord_node::{ActionError, Node};
//! use concord_negotiate::ActionSpec;
//! use serde_json::{json, Value};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Node::builder("Product agent")
//!     .action(
//!         ActionSpec {
//!             name: "getProductInfo".into(),
//!             description: "Product information by id.".into(),
//!             input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
//!             output: json!({"title": "ProductInfo", "type": "object", "properties": {"name": {"type": "string"}}}),
//!         },
//!         |input: Value| async move {
//!             match input["productId"].as_str() {
//!                 Some("P1") => Ok(json!({"name": "Laptop"})),
//!                 _ => Err(ActionError::not_found("no such product")),
//!             }
//!         },
//!     )
//!     .build()?;
//! let server = provider.serve("127.0.0.1:0").await?;
//!
//! let requester = Node::builder("Requester").build()?;
//! let peer = requester.connect(server.url(), "getProductInfo").await?;
//! let info = peer.call("getProductInfo", json!({"productId": "P1"})).await?;
//! assert_eq!(info["name"], "Laptop");
//! # Ok(()) }
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod action;
mod admission;
mod backend;
mod binding;
mod budget;
mod client;
mod code;
mod config;
mod describe;
mod directory_client;
mod driver;
mod error;
mod hello;
mod identity;
mod interact;
mod interface;
mod language;
mod listener;
mod mdns;
mod memory;
mod node;
mod peer_descriptions;
mod resume_cache;
mod server;
mod shed;
mod state;
mod storage;
mod tls;
mod transcripts;
mod transport;

pub use action::{Action, ActionError, ActionFuture};
/// The HTTP framework a [`Binding`]'s routes are written with (its `Router`, extractors
/// and responses), re-exported so that a binding uses the node's own version.
pub use axum;
pub use backend::exec::{
    ExecAction, DEFAULT_EXEC_TIMEOUT, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_OUTPUT_BYTES,
    STREAM_INPUT_ENV,
};
pub use backend::http::{HttpAction, DEFAULT_HTTP_TIMEOUT};
pub use backend::report::MAX_ERROR_MESSAGE_CHARS;
pub use binding::sse;
/// How often a [`DirectoryService`] purges expired TDs unless told otherwise.
pub use binding::DEFAULT_PURGE_INTERVAL;
pub use binding::{
    ActionState, Affordance, BearerGrant, BearerTokenError, Binding, Described, DirectoryService,
    InvokeFuture, Owner, ProblemResponse, RelayCancelFuture, Site, StartFuture, ThingAccess,
    ThingError, MIN_BEARER_TOKEN_LEN, PROBLEM_JSON,
};
pub use binding::{Feed, FeedEnd, FeedNews};
pub use client::{Connection, ConnectionInfo, PeerDescription};
pub use code::CodeInfo;
pub use concord_identity::{Allow, Caller, Did, DidPattern, Identity, Keys, TimeWindow};
/// The bounds of interface sessions (`Limits::interaction`).
pub use concord_interact::Limits as InteractionLimits;
pub use concord_interact::{
    ActionAffordance, ActionMode, EventAffordance, EventError, Interface, Overflow,
    PropertyAffordance, PropertyError, StreamSpec,
};
// The shared-state seams a `NodeBuilder` takes other backends for.
pub use concord_identity::{NonceLog, ReplayCache};
pub use concord_interact::{
    ActionIds, ActionRecord, ActionRecords, ActionRecordsError, LocalActionRecords,
};
pub use concord_interact::{ActionRelay, LocalActions, RelayError, RelayFuture};
pub use concord_interact::{EventLog, EventLogError, EventSink, LocalEventLog};
pub use concord_store::{ConsensusRegistry, NonceStore, ProtocolBook};
pub use config::{InvalidLimit, Limits};
pub use describe::check_description_id;
pub use directory_client::{
    CapabilityQuery, Directory, DirectoryClientLimits, DirectoryError, Problem, Registered,
    RegistrationSettings, RegistrationSigning, RegistrationState, RegistrationStatus,
    ValidationError, DISCOVERY_CONTEXT,
};
pub use driver::Settlement;
pub use error::{
    CallError, ConnectError, DescriptionError, DescriptionIdError, NodeError, PublicUrlError,
};
pub use identity::{
    did_location, Authentication, DidLocationError, Encryption, ResolverSettings, Security,
    SignatureForm,
};
pub use interact::{
    ActionUpdate, Event, Notification, ProgressAction, ProgressReporter, Progressing, Property,
    PublishError, Publisher, StreamAction, StreamIo, StreamReceiver, StreamSender, Subscription,
};
pub use interface::{Payload, PayloadError};
pub use mdns::{browse_mdns, FoundThing, MdnsError, DIRECTORY_SERVICE, MAX_ANNOUNCED, WOT_SERVICE};
pub use node::{check_public_url, Node, NodeBuilder, Want};
pub use server::{Server, DEFAULT_SHUTDOWN_GRACE};

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
