//! The commands on an interface session (one negotiated protocol for several affordances
//! of a peer): `concord subscribe`, `concord stream`, `concord read` and `concord write`,
//! and `concord call`'s path for long-running, fire-and-forget and stream actions
//! ([`progress`]).
//!
//! Each command reads the peer's description first (what the affordance is: an action's
//! `concord:mode` and `concord:stream`, a property, an event), then connects with
//! `Want::interface` and that description (`Node::connect_described`: it is fetched
//! once): the first connection negotiates (by rules, no LLM), later ones resume the stored
//! protocol with 0-RTT.

pub mod progress;
pub mod property;
pub mod stream;
pub mod subscribe;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use concord_describe::{InteractionMode, StreamDescription};
use concord_node::{CallError, ConnectError, Connection, Limits, Node, PeerDescription, Want};
use serde_json::{json, Value};

use crate::caller::CallerArgs;
use crate::data_dir::DataDir;
use crate::input::read_bytes;
use crate::logging::Spinner;

/// The peer and how to reach it, shared by the interface commands.
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// The peer: its base URL (`http://host:port`) or its description URL.
    pub url: String,
    #[command(flatten)]
    pub data_dir: DataDir,
    /// How long to wait for each answer (e.g. `5s`; default 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Also trust the root certificates in this PEM file for an `https://` peer.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    #[command(flatten)]
    pub caller: CallerArgs,
}

/// What the peer's description says an affordance is.
#[derive(Debug, Clone, PartialEq)]
pub enum Affordance {
    /// An action, with its mode and, for a stream action, its stream description.
    Action {
        /// `concord:mode` (request-reply when absent).
        mode: InteractionMode,
        /// `concord:stream`.
        stream: Option<StreamDescription>,
    },
    /// A property.
    Property,
    /// An event.
    Event,
}

/// The peer's description, as fetched.
#[derive(Debug)]
pub struct Described {
    peer: PeerDescription,
}

impl Described {
    /// The description `Node::describe` fetched.
    pub fn new(peer: PeerDescription) -> Self {
        Self { peer }
    }

    /// That description, to connect with (`Node::connect_described`).
    pub fn peer(&self) -> &PeerDescription {
        &self.peer
    }

    /// What `name` is, if the description has it (an action first, then a property,
    /// then an event: names are unique in a description, but a hand-written one may not be).
    pub fn affordance(&self, name: &str) -> Option<Affordance> {
        if let Some(action) = self.peer.action(name) {
            return Some(Affordance::Action {
                mode: action.interaction_mode(),
                stream: action.stream.clone(),
            });
        }
        let thing = self.peer.thing();
        if let Some(properties) = &thing.properties {
            if properties.contains_key(name) {
                return Some(Affordance::Property);
            }
        }
        if let Some(events) = &thing.events {
            if events.contains_key(name) {
                return Some(Affordance::Event);
            }
        }
        None
    }

    /// Whether the description has an event `name`.
    pub fn has_event(&self, name: &str) -> bool {
        self.peer
            .thing()
            .events
            .as_ref()
            .is_some_and(|events| events.contains_key(name))
    }

    /// Whether the description has a property `name`.
    pub fn has_property(&self, name: &str) -> bool {
        self.peer
            .thing()
            .properties
            .as_ref()
            .is_some_and(|properties| properties.contains_key(name))
    }
}

/// Fetches and reads the peer's description, through `node` (its client, bounds and
/// trust roots; the description strictly validated).
///
/// # Errors
/// Could not run (exit 2) when the peer cannot be reached; wrong (exit 1) when the URL is
/// not one or what it serves is not a valid description.
pub async fn describe(node: &Node, url: &str) -> anyhow::Result<Described> {
    match node.describe(url).await {
        Ok(peer) => Ok(Described::new(peer)),
        Err(error @ (ConnectError::BadUrl { .. } | ConnectError::InvalidDescription { .. })) => {
            Err(crate::output::Wrong::error(error.to_string()))
        }
        Err(error) => Err(anyhow::Error::new(error)),
    }
}

/// A requester node for the interface commands: its store in the data directory, signed
/// (or anonymous) and resolving a peer's DID as `concord call` does.
pub fn requester(peer: &PeerArgs) -> anyhow::Result<Node> {
    let mut limits = Limits::default();
    if let Some(timeout) = peer.timeout {
        if timeout.is_zero() {
            bail!("--timeout must be longer than zero");
        }
        limits.call_timeout = timeout;
    }
    let data_dir = peer.data_dir.path()?;
    let builder = Node::builder("concord").data_dir(&data_dir).limits(limits);
    let mut builder = peer.caller.apply(builder, &peer.url, &data_dir, false)?;
    if let Some(path) = &peer.ca_cert {
        builder = builder.trust_root_certificates_pem(read_bytes(Some(path))?);
    }
    builder.build().context("cannot set up the requester")
}

/// Connects for `names` with a spinner; on failure says why and gives the exit code.
pub async fn connect(node: &Node, url: &str, names: &[&str]) -> Result<Connection, ExitCode> {
    connect_with(node, url, Want::interface(names.to_vec())).await
}

/// [`connect`] for `want`.
pub async fn connect_with(node: &Node, url: &str, want: Want) -> Result<Connection, ExitCode> {
    let spinner = Spinner::start(&format!("connecting to {url}"));
    let connected = connecting(&spinner, node.connect_with(url, want)).await;
    spinner.finish();
    connected
}

/// [`connect`] to the peer at `url` whose description [`describe`] fetched: it is not
/// fetched again.
pub async fn connect_described(
    node: &Node,
    url: &str,
    described: &Described,
    names: &[&str],
) -> Result<Connection, ExitCode> {
    let want = Want::interface(names.to_vec());
    let spinner = Spinner::start(&format!("connecting to {url}"));
    let connected = connecting(&spinner, node.connect_described(described.peer(), want)).await;
    spinner.finish();
    connected
}

/// Waits for a step of connecting (the description's fetch, the connection) while
/// `spinner` turns; on failure finishes it, says why and gives the exit code.
pub async fn connecting<T>(
    spinner: &Spinner,
    step: impl std::future::Future<Output = Result<T, ConnectError>>,
) -> Result<T, ExitCode> {
    step.await.map_err(|error| {
        spinner.finish();
        crate::output::note(&error);
        ExitCode::from(crate::call::connect_exit_code(&error))
    })
}

/// A failed interaction as a JSON object: `{"code", "message"}`.
pub fn error_json(error: &CallError) -> Value {
    json!({
        "code": crate::call::error_code(error),
        "message": crate::call::error_message(error),
    })
}

/// Says why an interaction failed and gives the exit code (1 the peer said no, 2 no
/// answer came).
pub fn failed(what: &str, error: &CallError) -> ExitCode {
    crate::output::note(format_args!("{what}: {}", crate::call::error_text(error)));
    ExitCode::from(crate::call::call_exit_code(error))
}

/// Parses a JSON argument (`-`: one JSON document on standard input).
pub fn json_argument(text: &str, what: &str) -> anyhow::Result<Value> {
    let bytes = if text == "-" {
        read_bytes(None)?
    } else {
        text.as_bytes().to_vec()
    };
    serde_json::from_slice(&bytes)
        .map_err(|error| crate::output::Wrong::error(format!("{what} is not valid JSON: {error}")))
}
