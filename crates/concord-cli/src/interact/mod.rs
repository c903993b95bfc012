//! The commands on an interface session (one negotiated protocol for several affordances
//! of a peer): `concord subscribe`, `concord stream`, `concord read` and `concord write`,
//! and `concord call`'s path for long-running, fire-and-forget and stream actions
//! ([`progress`]).
//!
//! Each command reads the peer's description first (what the affordance is: an action's
//! `concord:mode` and `concord:stream`, a property, an event), then connects with the
//! peer's WHOLE interface ([`whole_interface`]: every affordance it offers that we can
//! hold) and that description (`Node::connect_described`: it is fetched once): the first
//! command against an agent negotiates (by rules, no LLM), and every later one, of any
//! kind, resumes that one protocol with 0-RTT (the same affordances make the same need key
//! and the same document, so the caller's store keeps one protocol per agent).

pub mod action;
pub mod interrupt;
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
    /// The peer: its base URL (`http://host:port`), its description URL, or its id in the
    /// --directory (`urn:…`, `did:…`); left out with --find.
    #[arg(value_name = "TARGET")]
    pub url: String,
    #[command(flatten)]
    pub target: crate::target::TargetArgs,
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
    /// The DID the peer must prove: the agent id the target was looked up by, when a DID
    /// ([`PeerArgs::settle`]).
    #[arg(skip)]
    pub peer_did: Option<String>,
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

/// A kind of affordance, as a command expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An action (`concord call`, `concord stream`).
    Action,
    /// A property (`concord read`, `concord write`).
    Property,
    /// An event (`concord subscribe`).
    Event,
}

impl Kind {
    /// The kind's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Action => "action",
            Self::Property => "property",
            Self::Event => "event",
        }
    }

    /// Its plural, for the list of names.
    fn plural(self) -> &'static str {
        match self {
            Self::Action => "actions",
            Self::Property => "properties",
            Self::Event => "events",
        }
    }

    /// The command that uses an affordance of this kind.
    fn command(self) -> &'static str {
        match self {
            Self::Action => "concord call",
            Self::Property => "concord read",
            Self::Event => "concord subscribe",
        }
    }
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

    /// Every affordance of the description a command may use, by name (sorted, once
    /// each): its actions, properties and events, less the stream actions whose initial
    /// credit we could not hold (`receive_buffer`: our receive buffer per stream; such a
    /// stream would make the whole interface refused before anything is agreed), unless
    /// it is `needed`. `needed` is always in.
    pub fn interface_names(&self, needed: &[&str], receive_buffer: u64) -> Vec<String> {
        let thing = self.peer.thing();
        let holdable = |action: &concord_describe::ActionAffordance| {
            action.stream.as_ref().is_none_or(|stream| {
                stream.initial_credit > 0 && stream.initial_credit <= receive_buffer
            })
        };
        let mut names: Vec<String> = thing
            .actions
            .iter()
            .flatten()
            .filter(|(_, action)| holdable(action))
            .map(|(name, _)| name)
            .chain(
                thing
                    .properties
                    .iter()
                    .flat_map(|properties| properties.keys()),
            )
            .chain(thing.events.iter().flat_map(|events| events.keys()))
            .cloned()
            .chain(needed.iter().map(|&name| name.to_owned()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Whether the peer serves more than request-reply actions (a property, an event, or
    /// an action of another mode): an agent the interface commands speak to, whose
    /// request-reply actions `concord call` also reaches over its whole interface.
    pub fn has_interface(&self) -> bool {
        let thing = self.peer.thing();
        thing.properties.as_ref().is_some_and(|p| !p.is_empty())
            || thing.events.as_ref().is_some_and(|e| !e.is_empty())
            || thing
                .actions
                .iter()
                .flatten()
                .any(|(_, action)| action.interaction_mode() != InteractionMode::Reply)
    }

    /// The names of the description's affordances of `kind`, in its order.
    pub fn names_of(&self, kind: Kind) -> Vec<&str> {
        let thing = self.peer.thing();
        match kind {
            Kind::Action => thing
                .actions
                .iter()
                .flatten()
                .map(|(n, _)| n.as_str())
                .collect(),
            Kind::Property => thing
                .properties
                .iter()
                .flatten()
                .map(|(n, _)| n.as_str())
                .collect(),
            Kind::Event => thing
                .events
                .iter()
                .flatten()
                .map(|(n, _)| n.as_str())
                .collect(),
        }
    }

    /// Whether the description has an affordance `name` of `kind`.
    pub fn has(&self, name: &str, kind: Kind) -> bool {
        self.names_of(kind).contains(&name)
    }

    /// `Ok` when the description has `name` as a `kind`; else wrong (exit 1), naming the
    /// kind asked for and listing only the names of that kind, and, when `name` is
    /// another kind of affordance, saying which and the command for it.
    pub fn require(&self, name: &str, kind: Kind) -> anyhow::Result<()> {
        if self.has(name, kind) {
            return Ok(());
        }
        let other = [Kind::Action, Kind::Property, Kind::Event]
            .into_iter()
            .find(|&other| other != kind && self.has(name, other));
        if let Some(other) = other {
            return Err(crate::output::Wrong::error(format!(
                "`{name}` is {} {}, not {} {} (`{} URL {name}`)",
                article(other.name()),
                other.name(),
                article(kind.name()),
                kind.name(),
                other.command()
            )));
        }
        let names = self.names_of(kind);
        let list = if names.is_empty() {
            format!("it has no {}", kind.plural())
        } else {
            format!("its {}: {}", kind.plural(), names.join(", "))
        };
        Err(crate::output::Wrong::error(format!(
            "the peer's description has no {} `{name}` ({list})",
            kind.name()
        )))
    }

    /// Whether the description's property `name` can be written: not `readOnly`, and a
    /// form offers `writeproperty` (a form without `op` offers it, as TD 1.1 says).
    pub fn is_writable(&self, name: &str) -> bool {
        let Some(property) = self
            .peer
            .thing()
            .properties
            .as_ref()
            .and_then(|properties| properties.get(name))
        else {
            return false;
        };
        property.schema.read_only != Some(true)
            && property.forms.iter().any(|form| match &form.op {
                Some(operations) => operations
                    .as_slice()
                    .contains(&concord_describe::Operation::WriteProperty),
                None => true,
            })
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

/// "a" or "an" before `word`.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
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

impl PeerArgs {
    /// Resolves the target to the URL to connect to (an id or --find through the
    /// directory), in place.
    ///
    /// # Errors
    /// As [`TargetArgs::settle`](crate::target::TargetArgs::settle).
    pub fn settle(&mut self) -> anyhow::Result<()> {
        let settled = self.target.settle(&self.url, self.ca_cert.as_deref())?;
        self.url = settled.url;
        self.peer_did = settled.did;
        Ok(())
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
    let mut builder = peer.caller.apply(
        builder,
        &peer.url,
        peer.peer_did.as_deref(),
        &data_dir,
        false,
    )?;
    if let Some(path) = &peer.ca_cert {
        builder = builder.trust_root_certificates_pem(read_bytes(Some(path))?);
    }
    builder.build().context("cannot set up the requester")
}

/// [`whole_interface`] of the peer at `url` whose description [`describe`] fetched (it is
/// not fetched again), with a spinner; on failure says why and gives the exit code.
pub async fn connect_described(
    node: &Node,
    url: &str,
    described: &Described,
    needed: &[&str],
) -> Result<Connection, ExitCode> {
    let spinner = Spinner::start(&format!("connecting to {url}"));
    let connected = connecting(&spinner, whole_interface(node, described, needed)).await;
    spinner.finish();
    connected
}

/// Our receive buffer per stream: a stream action whose initial credit exceeds it is
/// left out of the interface we want (the CLI's requester keeps the default limits).
fn receive_buffer() -> u64 {
    Limits::default().streams.max_receive_buffer
}

/// Connects to the peer wanting its whole interface ([`Described::interface_names`]),
/// so that every command against one agent settles on one protocol, resumed by 0-RTT
/// after the first. When agreeing on the whole fails ([`failed_on_the_whole`]: the
/// provider refuses it, a limit of either side, a countered document), the provider is
/// asked again for `needed` alone; a peer that cannot be reached is not asked twice.
pub async fn whole_interface(
    node: &Node,
    described: &Described,
    needed: &[&str],
) -> Result<Connection, ConnectError> {
    let names = described.interface_names(needed, receive_buffer());
    let whole = names.len() > needed.len();
    match node
        .connect_described(described.peer(), Want::interface(names))
        .await
    {
        Err(error) if whole && failed_on_the_whole(&error) => {
            tracing::info!(
                %error,
                "no agreement on the peer's whole interface; asking for what this command uses"
            );
            node.connect_described(described.peer(), Want::interface(needed.to_vec()))
                .await
        }
        connected => connected,
    }
}

/// Whether connecting failed in agreeing on the protocol (the session closed before it
/// was ready, the peer's code failed the test cases, we could not draft it, the peer
/// closed on a message too large for it), where a narrower want may succeed; not when the
/// peer could not be reached, or is not who it says.
fn failed_on_the_whole(error: &ConnectError) -> bool {
    /// The WebSocket close code for a message too large for the peer.
    const MESSAGE_TOO_BIG: u16 = 1009;
    matches!(
        error,
        ConnectError::Closed(_) | ConnectError::Verification(_) | ConnectError::Local(_)
    ) || matches!(
        error,
        ConnectError::PeerClosed {
            code: Some(MESSAGE_TOO_BIG),
            ..
        }
    )
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
