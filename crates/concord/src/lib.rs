//! Concord in one dependency: an agent that serves actions to other agents and calls
//! theirs.
//!
//! Two agents discover each other (the provider's description at `/.well-known/wot`),
//! **negotiate the protocol they will speak** (the ANP meta-protocol), generate the code
//! that speaks it and check it on agreed test cases, store it for 0-RTT reconnects, then
//! exchange messages with no LLM in the loop. Without an LLM ([`NodeBuilder::llm`]) every
//! step is deterministic and needs no key.
//!
//! This crate has no code of its own. It re-exports what an agent needs at its root, the
//! crates those items come from as modules ([`node`], [`negotiate`], [`llm`], [`proto`],
//! [`store`], [`sandbox`]) for everything else, and [`tokio`], the runtime the node runs
//! on, so that one dependency is enough.
//!
//! # Example
//!
//! A provider serving `getProductInfo` on a free loopback port and a requester calling it
//! once. The first run negotiates; later runs resume the stored protocol (0-RTT).
//!
//! ```no_run
//! use concord::{json, ActionError, ActionSpec, Node, Value};
//!
//! #[concord::tokio::main(crate = "concord::tokio")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Provider: the action's JSON Schemas (published in its description) and a backend.
//!     let action = ActionSpec {
//!         name: "getProductInfo".into(),
//!         description: "Product information by product id.".into(),
//!         input: json!({"type": "object", "properties": {"productId": {"type": "string"}},
//!                       "required": ["productId"]}),
//!         output: json!({"title": "ProductInfo", "type": "object",
//!                        "properties": {"name": {"type": "string"}}}),
//!     };
//!     let provider = Node::builder("Product agent")
//!         .action(action, |input: Value| async move {
//!             match input["productId"].as_str() {
//!                 Some("P1") => Ok(json!({"name": "Laptop"})),
//!                 _ => Err(ActionError::not_found("no such product")),
//!             }
//!         })
//!         .build()?;
//!     let server = provider.serve("127.0.0.1:0").await?;
//!
//!     // Requester: discovery, hello, negotiation and code generation, then calls.
//!     let requester = Node::builder("Shopper").build()?;
//!     let peer = requester.connect(server.url(), "getProductInfo").await?;
//!     let product = peer.call("getProductInfo", json!({"productId": "P1"})).await?;
//!     println!("{:?}: {product}", peer.info().settlement);
//!     peer.close().await;
//!     server.shutdown().await?;
//!     Ok(())
//! }
//! ```
//!
//! An action can also run a command per call ([`ExecAction`]) or POST to a service
//! ([`HttpAction`]); [`Node::connect_with`] and [`Want`] state what the requester needs
//! (its own schemas, its own candidate protocol or test cases); [`Limits`] bounds sizes,
//! counts and timeouts; [`NodeBuilder::data_dir`] says where the store lives (the platform
//! data directory by default).
//!
//! An agent is more than one action: [`NodeBuilder::property`], [`NodeBuilder::event`],
//! [`NodeBuilder::progress_action`], [`NodeBuilder::notify_action`] and
//! [`NodeBuilder::stream_action`] serve the other LMOS patterns, and a requester that
//! connects with [`Want::interface`] gets all of the affordances it names over one
//! negotiated session ([`Connection::subscribe`], [`Connection::call_with_progress`],
//! [`Connection::open_stream`], [`Connection::read_property`]…); [`Node::publisher`]
//! publishes events and sets properties (and the node hands it to its actions when built,
//! [`Action::attach`]: an [`ExecAction`]'s command publishes events by printing them).
//! [`Node::describe`] reads a peer's description before connecting (what each affordance
//! is) and [`Node::connect_described`] connects with it without fetching it again.
//!
//! # Serving a directory
//!
//! A node can also be a W3C WoT Discovery Thing Description Directory
//! ([`NodeBuilder::directory`] with a [`DirectoryService`]): agents register there
//! ([`NodeBuilder::register_with`]) and requesters find them ([`Directory`], the client).
//! The directory's rules and limits are [`directory`]'s ([`directory::Directory`] over a
//! [`directory::DirectoryStore`]: the node's SQLite [`store::Store`], or
//! [`directory::MemoryDirectoryStore`]; [`directory::DirectoryLimits`]).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use concord::directory::{self, DirectoryLimits, DirectoryStore};
//! use concord::{DirectoryService, Node};
//!
//! #[concord::tokio::main(crate = "concord::tokio")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = Arc::new(concord::store::Store::open("directory-data")?);
//!     let tds: Arc<dyn DirectoryStore> = store.clone();
//!     let rules = directory::Directory::new(tds, DirectoryLimits::default())?;
//!     let node = Node::builder("Shop-floor directory")
//!         .store(store)
//!         // Writes signed with the writer's did:wba DID; each agent writes its own entry.
//!         .directory(DirectoryService::new(rules).require_signatures(true))
//!         .build()?;
//!     let server = node.serve("127.0.0.1:8081").await?;
//!     println!("things: {}things", server.url());
//!     concord::tokio::signal::ctrl_c().await?;
//!     server.shutdown().await?;
//!     Ok(())
//! }
//! ```
#![warn(missing_docs)]

pub use concord_llm::LlmConfig;
pub use concord_negotiate::{ActionSpec, Need};
/// Being found beyond a directory: the owner an agent's ANP and A2A documents name
/// ([`NodeBuilder::owner`]), and the Things announced on the local network with DNS-SD
/// ([`NodeBuilder::mdns`], [`browse_mdns`]).
pub use concord_node::{browse_mdns, FoundThing, MdnsError, Owner};
pub use concord_node::{
    Action, ActionError, ActionMode, ActionUpdate, CallError, ConnectError, Connection,
    ConnectionInfo, Event, ExecAction, HttpAction, Limits, Node, NodeBuilder, NodeError,
    Notification, PeerDescription, ProgressAction, ProgressReporter, Progressing, Property,
    PublishError, Publisher, Server, Settlement, StreamAction, StreamIo, StreamReceiver,
    StreamSender, StreamSpec, Subscription, Want,
};
/// Finding agents and being found: a W3C WoT Discovery directory's client
/// ([`Directory`]: register, list, JSONPath and capability search) and the state of a
/// node's own registrations ([`NodeBuilder::register_with`], [`Server::registrations`]).
pub use concord_node::{
    CapabilityQuery, Directory, DirectoryClientLimits, DirectoryError, RegistrationSettings,
    RegistrationSigning, RegistrationState, RegistrationStatus,
};
/// Serving a directory: the node's HTTP service of one ([`NodeBuilder::directory`]) and how
/// often it purges expired TDs unless told otherwise.
pub use concord_node::{DirectoryService, DEFAULT_PURGE_INTERVAL};
pub use serde_json::{json, Value};

/// The bytes a stream's reader gets ([`StreamReceiver::next`]): pieces of the peer's
/// stream, cheap to clone and to slice.
pub use bytes::Bytes;

/// The agent node, [`concord_node`]: everything above and the rest of its API (handler
/// code reports, backend defaults, address checks).
pub use concord_node as node;

/// Protocol documents, test cases and the negotiators, [`concord_negotiate`].
pub use concord_negotiate as negotiate;

/// The OpenAI-compatible LLM client and its configuration, [`concord_llm`].
pub use concord_llm as llm;

/// The sans-IO meta-protocol core, [`concord_proto`]: frames, hellos, capabilities,
/// [`ProtocolHash`](concord_proto::ProtocolHash).
pub use concord_proto as proto;

/// The SQLite store of negotiated protocols, consensus protocols and transcripts,
/// [`concord_store`] (shared between nodes with [`NodeBuilder::store`]).
pub use concord_store as store;

/// The directory's rules and limits (`concord-directory`): [`directory::Directory`],
/// [`directory::DirectoryLimits`], the stores it runs over. Served by a [`DirectoryService`].
pub use concord_directory as directory;

/// The QuickJS sandbox that runs handler code we did not write, [`concord_sandbox`]: its
/// [`Limits`](concord_sandbox::Limits) go to [`NodeBuilder::handler_limits`].
pub use concord_sandbox as sandbox;

/// JSON values for action inputs and outputs, [`serde_json`].
pub use serde_json;

/// The async runtime the node runs on, [`tokio`]: `#[concord::tokio::main(crate =
/// "concord::tokio")]` starts it.
pub use tokio;
