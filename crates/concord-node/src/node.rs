//! The node: what it serves, what it knows, and how it is built.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use concord_identity::{Allow, Identity, Keys};
use concord_interact::{EventAffordance, Interface, PropertyAffordance, StreamSpec};
use concord_llm::{LlmClient, LlmConfig};
use concord_negotiate::{ActionSpec, EscalatingNegotiator, LlmNegotiator, Need};
use concord_proto::{Capabilities, Capability, SessionConfig};
use concord_store::{Store, StoreError};

use crate::action::{Action, Actions};
use crate::binding::Binding;
use crate::budget::CallBudget;
use crate::client::{self, Connection, PeerDescription};
use crate::code::CodeCache;
use crate::config::Limits;
use crate::error::{ConnectError, NodeError, PublicUrlError};
use crate::identity::{NodeIdentity, Security};
use crate::interact::{
    Affordances, Backend, Event, ProgressAction, Property, Publisher, StreamAction,
};
use crate::language::Persona;
use crate::server::{self, Server};
use crate::storage::SharedStore;
use crate::transcripts::Transcripts;

/// What a requester wants from a peer: an action, optionally with its own view of the data
/// and its own protocol to propose.
///
/// ```
/// use concord_node::Want;
/// use serde_json::json;
///
/// let want = Want::action("getProductInfo")
///     .input(json!({"type": "object", "properties": {"productId": {"type": "string"}}}))
///     .output(json!({"type": "object", "properties": {"price": {"type": "number"}}}));
/// assert_eq!(want.need().action, "getProductInfo");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Want {
    need: Need,
    candidate: Option<String>,
    test_cases: Option<String>,
    /// For an interface connection: the affordances wanted, by name.
    interface: Option<Vec<String>>,
}

impl Want {
    /// The peer's action `name`, taking and returning what it publishes.
    pub fn action(name: impl Into<String>) -> Self {
        Self {
            need: Need {
                action: name.into(),
                ..Need::default()
            },
            candidate: None,
            test_cases: None,
            interface: None,
        }
    }

    /// Several affordances of the peer over one negotiated session: actions (any mode),
    /// properties and events, by name, as its description publishes them. One negotiation
    /// (no LLM: the interface document is exact), one connection, one protocol hash for
    /// 0-RTT reconnects.
    ///
    /// ```
    /// use concord_node::Want;
    ///
    /// let want = Want::interface(["getWeather", "modelConfiguration", "userFeedbackReceived"]);
    /// assert_eq!(want.need().action, "interface:getWeather,modelConfiguration,userFeedbackReceived");
    /// ```
    pub fn interface<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        Self {
            need: Need {
                action: crate::interface::need_key(&names),
                ..Need::default()
            },
            candidate: None,
            test_cases: None,
            interface: Some(names),
        }
    }

    /// The JSON Schema of the data we can supply.
    pub fn input(mut self, schema: serde_json::Value) -> Self {
        self.need.input = Some(schema);
        self
    }

    /// The JSON Schema of the data we need back.
    pub fn output(mut self, schema: serde_json::Value) -> Self {
        self.need.output = Some(schema);
        self
    }

    /// Opens the negotiation with this protocol document (the full text, in the seeds'
    /// markdown shape) instead of the negotiator's draft.
    pub fn propose(mut self, candidate: impl Into<String>) -> Self {
        self.candidate = Some(candidate.into());
        self
    }

    /// Proposes these test cases (the seeds' layout: request, response, expected result per
    /// case) once the protocol is agreed, instead of the negotiator's draft. The peer's
    /// code must pass them before the first call.
    pub fn test_cases(mut self, cases: impl Into<String>) -> Self {
        self.test_cases = Some(cases.into());
        self
    }

    /// The need, as the negotiator sees it.
    pub fn need(&self) -> &Need {
        &self.need
    }

    pub(crate) fn into_parts(self) -> (Need, Option<String>, Option<String>, Option<Vec<String>>) {
        (self.need, self.candidate, self.test_cases, self.interface)
    }
}

/// A Concord agent node: serves actions to peers ([`Node::serve`]) and calls peers'
/// actions ([`Node::connect`]), negotiating the protocol, generating and verifying its code,
/// and remembering it for 0-RTT reconnects.
///
/// Cheap to clone (an `Arc` inside); clones share the store, the LLM client and the
/// limits.
///
/// ```no_run
/// use concord_node::Node;
/// use serde_json::json;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let node = Node::builder("Requester").data_dir("./data").build()?;
/// let peer = node.connect("http://127.0.0.1:8080", "getProductInfo").await?;
/// let info = peer.call("getProductInfo", json!({"productId": "P12345"})).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Node {
    pub(crate) shared: Arc<Shared>,
}

/// Everything a node's sessions share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The description's `id` (a URI), when one is set.
    pub(crate) id: Option<String>,
    pub(crate) persona: Persona,
    pub(crate) actions: Actions,
    pub(crate) store: SharedStore,
    /// Writes every session's transcript into `store`.
    pub(crate) transcripts: Transcripts,
    /// The node-wide budget of running action calls, shared by every session.
    pub(crate) calls: Arc<CallBudget>,
    /// The rules, escalating to the LLM when the node has one.
    pub(crate) policy: EscalatingNegotiator,
    pub(crate) limits: Limits,
    pub(crate) capabilities: Capabilities,
    pub(crate) handler_limits: concord_sandbox::Limits,
    /// Fetches peers' descriptions (`Node::describe`) and talks to directories.
    pub(crate) http: reqwest::Client,
    /// Fetches peers' descriptions for `connect` (they are cached): keeps no idle
    /// connection.
    pub(crate) description_fetches: reqwest::Client,
    /// The local address we connect to peers from, when one is chosen.
    pub(crate) local_address: Option<IpAddr>,
    /// TLS for `wss://` endpoints (`http` uses the same configuration).
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// TLS for serving `https://` and `wss://` directly, when the node has a certificate.
    pub(crate) tls_server: Option<Arc<rustls::ServerConfig>>,
    /// The base URL the description advertises, when not the listening address.
    pub(crate) public_url: Option<String>,
    /// Every session's configuration but its id seed: the limits on the spec's numbering,
    /// or on the reference implementation's.
    pub(crate) session: SessionConfig,
    /// Protocol code loaded for the sessions running now, shared between them.
    pub(crate) code: CodeCache,
    /// Peers' validated descriptions, by URL, while HTTP's caching rules let us use them
    /// (shared by every connection; bounded).
    pub(crate) descriptions: std::sync::Mutex<crate::peer_descriptions::DescriptionCache>,
    /// Our DID, keys and security policy; who may call what.
    pub(crate) identity: NodeIdentity,
    /// Every affordance the node serves (its actions with their modes, properties,
    /// events), as interface sessions and the description see them.
    pub(crate) interface: concord_interact::Interface,
    /// The node-wide state of those affordances (event fan-out, property values,
    /// long-running actions), shared by every interface session.
    pub(crate) affordances: Arc<Affordances>,
    /// The token backend services post events in with (`POST /events/{name}`), when set.
    pub(crate) event_ingest_token: Option<crate::binding::ingest::IngestToken>,
    /// The bindings added with [`NodeBuilder::binding`], served after the node's own.
    pub(crate) bindings: Vec<Arc<dyn Binding>>,
    /// Who runs the agent, as its discovery documents name it.
    pub(crate) owner: Option<crate::binding::Owner>,
    /// Whether it announces itself with DNS-SD while it serves.
    pub(crate) mdns: bool,
    /// The directories the node registers with while it serves ([`NodeBuilder::register_with`]).
    pub(crate) directories: Vec<crate::Directory>,
    /// How it keeps its entries there.
    pub(crate) registration: crate::RegistrationSettings,
    /// The WoT HTTP binding: whether it is served, the bearer tokens it grants.
    pub(crate) http_binding: crate::binding::http::HttpSettings,
    /// The WoT Discovery directory the node serves, if any ([`NodeBuilder::directory`]).
    pub(crate) directory: Option<crate::binding::directory::DirectoryService>,
}

impl Shared {
    /// What the node introduces itself as (its DNS-SD announcement, its DID document's
    /// service): a directory when it serves one, else a Thing.
    pub(crate) fn kind(&self) -> crate::describe::ThingKind {
        if self.directory.is_some() {
            crate::describe::ThingKind::Directory
        } else {
            crate::describe::ThingKind::Thing
        }
    }

    /// The LLM, when the node has one (the one its negotiator escalates to).
    pub(crate) fn llm(&self) -> Option<&LlmClient> {
        self.policy.llm().map(LlmNegotiator::client)
    }

    /// What we offer as a provider: the encrypted channel only with a DID to prove.
    pub(crate) fn provider_capabilities(&self) -> Capabilities {
        let mut capabilities = self.capabilities;
        if self.identity.identity().is_none() {
            capabilities.remove(Capability::EncryptedChannel);
        }
        capabilities
    }

    /// The configuration of a new session, with an id seed of its own.
    pub(crate) fn session_config(&self) -> SessionConfig {
        let mut config = self.session.clone();
        config.id_seed = fastrand::u64(..);
        config
    }
}

impl Node {
    /// Starts building a node whose description has this title.
    pub fn builder(title: impl Into<String>) -> NodeBuilder {
        NodeBuilder::new(title.into())
    }

    /// Serves the description at `GET /.well-known/wot` and the meta-protocol WebSocket at
    /// `/concord` on `addr` (e.g. `"127.0.0.1:8080"`; port 0 picks a free one), with the
    /// routes of every [`NodeBuilder::binding`].
    ///
    /// # Errors
    /// [`NodeError::Bind`] when the address cannot be bound, [`NodeError::Config`] when a
    /// binding's routes overlap the node's or another binding's.
    pub async fn serve(&self, addr: &str) -> Result<Server, NodeError> {
        server::serve(Arc::clone(&self.shared), addr).await
    }

    /// Connects to the peer at `url` (its base URL, or its description URL) to call its
    /// action `action`: fetches its description, says hello (offering a protocol we hold
    /// for 0-RTT and the consensus protocols we share), and negotiates, generates and
    /// verifies the protocol code unless a stored or consensus protocol settles it.
    ///
    /// # Errors
    /// A [`ConnectError`] naming the step that failed.
    pub async fn connect(&self, url: &str, action: &str) -> Result<Connection, ConnectError> {
        self.connect_with(url, Want::action(action)).await
    }

    /// [`Node::connect`] with more said about what we want: the data we can supply and
    /// what we need back (JSON Schemas the negotiator checks the peer's action against),
    /// or a protocol document of our own to propose instead of the negotiator's draft.
    ///
    /// # Errors
    /// A [`ConnectError`] naming the step that failed.
    pub async fn connect_with(&self, url: &str, want: Want) -> Result<Connection, ConnectError> {
        client::connect(Arc::clone(&self.shared), url, want).await
    }

    /// [`Node::connect_with`] the peer whose description [`Node::describe`] fetched: no
    /// second fetch. Everything else is as `connect_with` does it: the peer's DID checked
    /// against the description's origin and proved over the channel, 0-RTT resume of a
    /// protocol we hold, consensus protocols, negotiation.
    ///
    /// ```no_run
    /// # async fn run(node: concord_node::Node) -> Result<(), Box<dyn std::error::Error>> {
    /// use concord_describe::InteractionMode;
    /// use concord_node::Want;
    ///
    /// let peer = node.describe("http://127.0.0.1:8080").await?;
    /// // A request-reply action over a one-action protocol, any other mode over an
    /// // interface session.
    /// let mode = peer.action("forecastReport").map(|action| action.interaction_mode());
    /// let want = match mode {
    ///     Some(InteractionMode::Reply) | None => Want::action("forecastReport"),
    ///     Some(_) => Want::interface(["forecastReport"]),
    /// };
    /// let connection = node.connect_described(&peer, want).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// A [`ConnectError`] naming the step that failed (the description's steps excepted:
    /// `describe` reported those).
    pub async fn connect_described(
        &self,
        peer: &PeerDescription,
        want: Want,
    ) -> Result<Connection, ConnectError> {
        let started = std::time::Instant::now();
        client::connect_described(Arc::clone(&self.shared), peer, want, started).await
    }

    /// The store this node keeps protocols, the consensus registry and transcripts in.
    pub fn store(&self) -> &Arc<Store> {
        self.shared.store.get()
    }

    /// The optional meta-protocol capabilities this node really has (natural language
    /// only with an LLM).
    pub fn capabilities(&self) -> Capabilities {
        self.shared.capabilities
    }

    /// Whether an LLM is configured.
    pub fn has_llm(&self) -> bool {
        self.shared.llm().is_some()
    }

    /// The node's DID, once it has one (an explicit [`NodeBuilder::identity`], or where it
    /// first served with [`NodeBuilder::keys`]).
    pub fn did(&self) -> Option<String> {
        self.shared
            .identity
            .identity()
            .map(|identity| identity.did().to_string())
    }

    /// The actions this node serves.
    pub fn actions(&self) -> Vec<ActionSpec> {
        self.shared.actions.specs()
    }

    /// The LLM client, when one is configured (its usage ledger counts every call).
    pub fn llm(&self) -> Option<&LlmClient> {
        self.shared.llm()
    }

    /// Fetches and strictly validates a peer's description (`url`: its base URL or its
    /// description URL), with the same client, bounds and trust roots as
    /// [`Node::connect`]: what an affordance is (an action's mode, a property, an event)
    /// before connecting. [`Node::connect_described`] then connects without fetching it
    /// again.
    ///
    /// # Errors
    /// [`ConnectError::BadUrl`], [`ConnectError::Fetch`], [`ConnectError::InvalidDescription`].
    pub async fn describe(&self, url: &str) -> Result<PeerDescription, ConnectError> {
        client::describe(&self.shared, url).await
    }

    /// Publishes the node's events and sets its properties, from anywhere.
    pub fn publisher(&self) -> Publisher {
        Publisher {
            affordances: Arc::clone(&self.shared.affordances),
        }
    }
}

enum StoreChoice {
    Default,
    Dir(PathBuf),
    Open(Arc<Store>),
}

/// Builds a [`Node`].
///
/// ```
/// use concord_node::{ActionError, Limits, Node};
/// use concord_negotiate::ActionSpec;
/// use serde_json::{json, Value};
///
/// let dir = tempfile::tempdir()?;
/// let node = Node::builder("Product agent")
///     .description("Product information by id.")
///     .data_dir(dir.path())
///     .action(
///         ActionSpec {
///             name: "getProductInfo".into(),
///             description: "Get product information by id.".into(),
///             input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
///             output: json!({"title": "ProductInfo", "type": "object", "properties": {"name": {"type": "string"}}}),
///         },
///         |input: Value| async move {
///             match input["productId"].as_str() {
///                 Some("P1") => Ok(json!({"name": "Laptop"})),
///                 _ => Err(ActionError::not_found("no such product")),
///             }
///         },
///     )
///     .limits(Limits::default())
///     .build()?;
/// assert_eq!(node.actions()[0].name, "getProductInfo");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct NodeBuilder {
    title: String,
    id: Option<String>,
    description: Option<String>,
    actions: Actions,
    store: StoreChoice,
    llm: Option<LlmConfig>,
    limits: Limits,
    handler_limits: concord_sandbox::Limits,
    public_url: Option<String>,
    trust_roots_pem: Vec<u8>,
    local_address: Option<IpAddr>,
    reference_compatible: bool,
    certificate_pem: Option<(Vec<u8>, Vec<u8>)>,
    keys: Option<Keys>,
    identity: Option<Identity>,
    security: Security,
    access: HashMap<String, Allow>,
    properties: BTreeMap<String, Property>,
    events: BTreeMap<String, Event>,
    event_ingest_token: Option<String>,
    bindings: Vec<Arc<dyn Binding>>,
    owner: Option<crate::binding::Owner>,
    mdns: bool,
    http_binding: crate::binding::http::HttpSettings,
    directory: Option<crate::binding::directory::DirectoryService>,
    nonce_log: Option<Arc<dyn concord_identity::NonceLog>>,
    nonce_store: Option<Arc<dyn concord_store::NonceStore>>,
    protocols: Option<Arc<dyn concord_store::ProtocolBook>>,
    consensus: Option<Arc<dyn concord_store::ConsensusRegistry>>,
    event_log: Option<Arc<dyn concord_interact::EventLog>>,
    action_records: Option<Arc<dyn concord_interact::ActionRecords>>,
    action_ids: Option<Box<dyn concord_interact::ActionIds>>,
    action_relay: Option<Arc<dyn concord_interact::ActionRelay>>,
    directories: Vec<String>,
    registration: crate::RegistrationSettings,
}

impl std::fmt::Debug for NodeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBuilder")
            .field("title", &self.title)
            .field("id", &self.id)
            .field("actions", &self.actions)
            .finish_non_exhaustive()
    }
}

impl NodeBuilder {
    fn new(title: String) -> Self {
        Self {
            title,
            id: None,
            description: None,
            actions: Actions::default(),
            store: StoreChoice::Default,
            llm: None,
            limits: Limits::default(),
            handler_limits: concord_sandbox::Limits::default(),
            public_url: None,
            trust_roots_pem: Vec::new(),
            local_address: None,
            reference_compatible: false,
            certificate_pem: None,
            keys: None,
            identity: None,
            security: Security::default(),
            access: HashMap::new(),
            properties: BTreeMap::new(),
            events: BTreeMap::new(),
            event_ingest_token: None,
            bindings: Vec::new(),
            owner: None,
            mdns: false,
            http_binding: crate::binding::http::HttpSettings::default(),
            directory: None,
            nonce_log: None,
            nonce_store: None,
            protocols: None,
            consensus: None,
            event_log: None,
            action_records: None,
            action_ids: None,
            action_relay: None,
            directories: Vec::new(),
            registration: crate::RegistrationSettings::default(),
        }
    }

    /// The agent's identifier, its description's `id`: an absolute URI such as
    /// `urn:uuid:…` or `https://agents.example/shop`. Default: none (the description is
    /// known by its URL alone).
    ///
    /// ```
    /// use concord_node::{Node, NodeError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Shop")
    ///     .id("urn:uuid:6f1c2e0a-8b7d-4c39-9a51-2d4e8f0b3c71")
    ///     .data_dir(dir.path())
    ///     .build();
    /// assert!(node.is_ok());
    /// // Not an absolute URI: the builder says so.
    /// let error = Node::builder("Shop").id("shop 1").data_dir(dir.path()).build().unwrap_err();
    /// assert!(matches!(error, NodeError::Config(_)));
    /// assert!(error.to_string().contains("`id`"), "{error}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The base URL peers reach this node at, when it is not the address it listens on:
    /// behind a reverse proxy that terminates TLS, `https://agent.example.com/`. The served
    /// description then names this base and the endpoint `wss://agent.example.com/concord`
    /// (`http` gives `ws`), and [`Server::url`](crate::Server::url) returns it. A base with a
    /// path (`https://example.com/shop/`) gives `…/shop/.well-known/wot` and
    /// `…/shop/concord`: the proxy must strip the prefix. Checked by [`check_public_url`].
    /// Default: the listening address, `http://127.0.0.1:port/`.
    ///
    /// ```
    /// use concord_node::Node;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Shop").public_url("https://shop.example.com/").data_dir(dir.path());
    /// assert!(node.build().is_ok());
    /// let error = Node::builder("Shop").public_url("shop.example.com").data_dir(dir.path()).build();
    /// assert!(error.unwrap_err().to_string().contains("public URL"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    /// Serves `https://` and `wss://` itself with this certificate chain (PEM: the node's
    /// certificate, then any intermediates) and private key (PEM), instead of plain HTTP.
    /// The description then names `https://host:port/` and `wss://host:port/concord`
    /// (or the [public URL](Self::public_url)). Each TLS handshake runs in a task of its own,
    /// within the hello timeout, at most `max_sessions` at a time.
    pub fn tls_certificate_pem(
        mut self,
        chain_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.certificate_pem = Some((chain_pem.into(), key_pem.into()));
        self
    }

    /// Also trusts these root certificates (PEM, one or more `BEGIN CERTIFICATE` blocks) when
    /// it fetches an `https://` description or opens a `wss://` endpoint, on top of the
    /// platform's trust store: for peers whose certificates a private CA signed.
    pub fn trust_root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.trust_roots_pem = pem.into();
        self
    }

    /// Connects to peers from this local address (a host with several): descriptions are
    /// fetched and WebSockets opened from it. By default the system picks one.
    pub fn local_address(mut self, address: IpAddr) -> Self {
        self.local_address = Some(address);
        self
    }

    /// Negotiates the way the reference Python implementation (PyPI `anp` 1.0.7) does: our
    /// first `protocolNegotiation` carries sequenceId 1 rather than the spec's 0, and as a
    /// requester we echo the provider's `accepted`. A provider built on that SDK answers a
    /// first sequenceId of 0 with 2, which the spec's numbering refuses; with this set it
    /// answers in step. What we accept from peers does not change (either first sequenceId,
    /// an echo or none). Default: the spec's numbering.
    pub fn reference_compatible(mut self, on: bool) -> Self {
        self.reference_compatible = on;
        self
    }

    /// What the agent does, in words (its description's `description`).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Serves an action: its name and JSON Schemas (published in the description) and the
    /// backend that runs it (an async closure, an [`ExecAction`](crate::ExecAction), an
    /// [`HttpAction`](crate::HttpAction), or any [`Action`]).
    pub fn action(mut self, spec: ActionSpec, backend: impl Action) -> Self {
        self.actions
            .insert(spec, Backend::Reply(Arc::new(backend)), None);
        self
    }

    /// Serves a fire-and-forget action (mode `notify`): an interface session's caller gets
    /// no answer unless it fails; over a one-action protocol it answers like any action.
    pub fn notify_action(mut self, spec: ActionSpec, backend: impl Action) -> Self {
        self.actions
            .insert(spec, Backend::Notify(Arc::new(backend)), None);
        self
    }

    /// Serves a long-running action (mode `progress`, described `synchronous: false`): an
    /// interface session's caller gets an action id, progress and one result, and may
    /// query or cancel it by id; the action survives its caller's dropped connection for
    /// [`Limits::action_lease`](crate::Limits). Over a one-action protocol it answers with
    /// its result alone.
    ///
    /// ```
    /// use concord_negotiate::ActionSpec;
    /// use concord_node::{Node, ProgressReporter};
    /// use serde_json::{json, Value};
    ///
    /// let spec = ActionSpec {
    ///     name: "render".into(),
    ///     description: "Renders a scene.".into(),
    ///     input: json!({"type": "object"}),
    ///     output: json!({"type": "object"}),
    /// };
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Renderer")
    ///     .progress_action(spec, |_input: Value, progress: ProgressReporter| async move {
    ///         progress.report(0.5, None);
    ///         Ok(json!({"frames": 24}))
    ///     })
    ///     .data_dir(dir.path())
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn progress_action(mut self, spec: ActionSpec, backend: impl ProgressAction) -> Self {
        self.actions
            .insert(spec, Backend::Progress(Arc::new(backend)), None);
        self
    }

    /// Serves a stream action (mode `stream`): bytes both ways under credit-based flow
    /// control, as `stream` describes them (published as the description's `concord:stream`).
    /// Only over an interface protocol.
    pub fn stream_action(
        mut self,
        spec: ActionSpec,
        stream: StreamSpec,
        backend: impl StreamAction,
    ) -> Self {
        self.actions
            .insert(spec, Backend::Stream(Arc::new(backend)), Some(stream));
        self
    }

    /// Serves a property (`readproperty`; `writeproperty` and `observeproperty` as
    /// [`Property`] says). Set it from the node's side with [`Node::publisher`].
    pub fn property(mut self, name: impl Into<String>, property: Property) -> Self {
        self.properties.insert(name.into(), property);
        self
    }

    /// Declares an event (`subscribeevent`): publish it with [`Node::publisher`].
    pub fn event(mut self, name: impl Into<String>, event: Event) -> Self {
        self.events.insert(name.into(), event);
        self
    }

    /// Lets backend services publish the node's events over HTTP: the node serves
    /// `POST /events/{name}` (the event's data as the JSON body) to a request that carries
    /// `Authorization: Bearer <token>`, and answers 202 `{"id": n}`; 401 without the token,
    /// 404 for an event it does not declare, 400 for data the event's schema refuses, 413
    /// past [`Limits::interaction`](crate::Limits)'s `max_message_size`. Default: no token,
    /// no such route. The token must be printable ASCII without spaces.
    ///
    /// ```
    /// use concord_node::{Event, Node};
    /// use serde_json::json;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Weather")
    ///     .event("userFeedbackReceived", Event::new(json!({"type": "object"})))
    ///     .event_ingest_token("0f3c9a7e-a-long-random-secret")
    ///     .data_dir(dir.path())
    ///     .build();
    /// assert!(node.is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn event_ingest_token(mut self, token: impl Into<String>) -> Self {
        self.event_ingest_token = Some(token.into());
        self
    }

    /// Serves another binding beside the node's own (the meta-protocol WebSocket, the
    /// event ingest): its routes behind the node's admission, its forms in the description
    /// after the WebSocket's, in the order bindings are added. [`Node::serve`] fails with
    /// [`NodeError::Config`] when its routes overlap the node's or another binding's.
    ///
    /// ```
    /// use concord_node::axum::{routing::get, Router};
    /// use concord_node::{Affordance, Binding, Node, Site};
    ///
    /// /// A health check, in no affordance's forms.
    /// struct Health;
    ///
    /// impl Binding for Health {
    ///     fn name(&self) -> &str {
    ///         "health"
    ///     }
    ///     fn forms(&self, _: &Site, _: Affordance<'_>) -> Vec<concord_describe::Form> {
    ///         Vec::new()
    ///     }
    ///     fn routes(&self, _: &Site) -> Router {
    ///         Router::new().route("/health", get(|| async { "ok" }))
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Shop").data_dir(dir.path()).binding(Health).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn binding(mut self, binding: impl Binding) -> Self {
        self.bindings.push(Arc::new(binding));
        self
    }

    /// Who runs the agent: the `owner` of its ANP agent description (`/ad.json`) and the
    /// `provider` of its A2A agent card (`/.well-known/agent-card.json`). Default: none
    /// (the documents leave it out).
    pub fn owner(mut self, owner: crate::binding::Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Announces the node on the local network with DNS-SD while it serves (multicast DNS,
    /// W3C WoT Discovery's introduction: `_wot._tcp` with TXT `td=/.well-known/wot`,
    /// `type=Thing|Directory`, `scheme=http|https`), withdrawn when the server drains or is
    /// dropped; [`browse_mdns`](crate::browse_mdns) finds such nodes. A node whose
    /// announcement cannot start (no multicast socket) serves anyway and logs why.
    /// Default: off.
    pub fn mdns(mut self, announce: bool) -> Self {
        self.mdns = announce;
        self
    }

    /// Whether the node serves the WoT HTTP binding (default `true`): HTTP forms for every
    /// affordance following the WoT Profile "HTTP Basic" (`POST /actions/{name}`,
    /// `GET`/`PUT /properties/{name}`, `GET /properties`, action status resources), on the
    /// same listener, checks and limits as the meta-protocol WebSocket. `false` leaves the
    /// meta-protocol forms alone in the description.
    pub fn http_binding(mut self, enabled: bool) -> Self {
        self.http_binding.enabled = enabled;
        self
    }

    /// Serves a W3C WoT Discovery Thing Description Directory on the node's listener,
    /// behind its admission: the Things API (`/things`), its notifications (`/events`,
    /// Server-Sent Events), JSONPath and capability search (`/search/…`), and the
    /// directory's affordances and `ThingDirectory` type in the node's own description
    /// (the routes, their answers and bounds: [`DirectoryService`](crate::DirectoryService)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use concord_directory::{Directory, DirectoryLimits, MemoryDirectoryStore};
    /// use concord_node::{DirectoryService, Node};
    ///
    /// let directory = Directory::new(Arc::new(MemoryDirectoryStore::new()), DirectoryLimits::default())?;
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Directory")
    ///     .directory(DirectoryService::new(directory))
    ///     .data_dir(dir.path())
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn directory(mut self, directory: crate::DirectoryService) -> Self {
        self.directory = Some(directory);
        self
    }

    /// Grants a bearer token to HTTP consumers without a DID: a request of the WoT HTTP
    /// binding with `Authorization: Bearer <token>` calls as the grant's DID, which the
    /// `allow` rules ([`NodeBuilder::allow`]) match like a proved one. The description then
    /// defines a `bearer` scheme, named by the HTTP forms of the affordances anonymous
    /// callers may not use.
    ///
    /// ```
    /// use concord_node::{BearerGrant, Did, Node};
    ///
    /// let dashboard = Did::parse("did:wba:example.com:consumers:dashboard")?;
    /// let dir = tempfile::tempdir()?;
    /// let node = Node::builder("Weather")
    ///     .http_bearer(BearerGrant::new("a-long-random-secret-1234", dashboard)?)
    ///     .data_dir(dir.path())
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn http_bearer(mut self, grant: crate::BearerGrant) -> Self {
        self.http_binding.grants.push(grant);
        self
    }

    /// Keeps the store in `dir` (created if needed). Default: the platform data directory
    /// (`Store::default_dir`).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.store = StoreChoice::Dir(dir.into());
        self
    }

    /// Uses an open store (shared with other nodes or tools in this process).
    pub fn store(mut self, store: Arc<Store>) -> Self {
        self.store = StoreChoice::Open(store);
        self
    }

    /// Keeps the nonces of accepted DID-signed upgrades in `log` rather than in this node's
    /// own in-memory [`ReplayCache`](concord_identity::ReplayCache) (sized by
    /// [`Security`]'s `replay_capacity`, `replay_ttl` and `replay_per_did`, which then do not
    /// apply): nodes sharing one log refuse a request any of them accepted. The log must
    /// keep each nonce at least `replay_ttl` and pass
    /// `concord_identity::conformance::nonce_log`.
    pub fn nonce_log(mut self, log: Arc<dyn concord_identity::NonceLog>) -> Self {
        self.nonce_log = Some(log);
        self
    }

    /// Records the nonces of accepted DID-signed upgrades durably in `store` rather than in
    /// the node's [store](Self::store), and reloads them from it at start: a replay is
    /// refused across restarts and across the processes sharing it. It must pass
    /// `concord_store::conformance::nonce_store`.
    pub fn nonce_store(mut self, store: Arc<dyn concord_store::NonceStore>) -> Self {
        self.nonce_store = Some(store);
        self
    }

    /// Keeps negotiated protocols by hash in `protocols` rather than in the node's
    /// [store](Self::store) (which keeps its transcripts): what it saves after a
    /// negotiation, offers and accepts for 0-RTT, and keeps within
    /// `Limits::protocol_max_count` and `protocol_max_per_peer`. It must pass
    /// `concord_store::conformance::protocol_book`.
    pub fn protocols(mut self, protocols: Arc<dyn concord_store::ProtocolBook>) -> Self {
        self.protocols = Some(protocols);
        self
    }

    /// Reads consensus protocols from `registry` rather than from the node's
    /// [store](Self::store): those it lists with a provider handler are advertised, and a
    /// peer's candidate URIs are looked up there. It must pass
    /// `concord_store::conformance::consensus_registry`.
    pub fn consensus_registry(
        mut self,
        registry: Arc<dyn concord_store::ConsensusRegistry>,
    ) -> Self {
        self.consensus = Some(registry);
        self
    }

    /// Numbers published events with `log` rather than with the node's own
    /// [`LocalEventLog`](concord_interact::LocalEventLog) (which counts from the clock in
    /// microseconds, so that a restart never reuses an id): nodes sharing one log give
    /// their events one sequence of ids per name, while each node's subscribers still hear
    /// only the events it publishes. It must pass `concord_interact::conformance::event_log`.
    ///
    /// A log that fans out itself ([`EventLog::deliver_to`](concord_interact::EventLog::deliver_to),
    /// e.g. `concord_nats::NatsEventLog`, which also passes
    /// `concord_interact::conformance::event_log_delivery`) feeds this node's subscribers
    /// with every node's events in the log's one order, this node's own included: a
    /// subscriber resumes with its last id on any node sharing it.
    pub fn event_log(mut self, log: Arc<dyn concord_interact::EventLog>) -> Self {
        self.event_log = Some(log);
        self
    }

    /// Writes each change of the node's long-running actions (created, running, progress,
    /// terminal, cancelled, lease expired) to `records`, and answers a `queryaction` for an
    /// action it does not run from there: nodes sharing records (replicas of one agent)
    /// answer a query for an action any of them runs. A `cancelaction` for an action
    /// another node runs is relayed to it when the node has an
    /// [action relay](Self::action_relay), else refused (409,
    /// `urn:concord:interact:conflict`): only the node running it can stop it. Records that cannot be read answer 503. They
    /// must pass `concord_interact::conformance::action_records`; without, the node's
    /// actions live in its own table only.
    pub fn action_records(mut self, records: Arc<dyn concord_interact::ActionRecords>) -> Self {
        self.action_records = Some(records);
        self
    }

    /// Draws the ids of long-running actions from `ids` rather than from the node's own
    /// (128 random bits under a key of the node). An id is all it takes to query or cancel
    /// an action: give unguessable ones, unique over every node sharing
    /// [action records](Self::action_records).
    pub fn action_ids(mut self, ids: Box<dyn concord_interact::ActionIds>) -> Self {
        self.action_ids = Some(ids);
        self
    }

    /// Relays a `cancelaction` for an action another node runs (a replica of this agent
    /// sharing [action records](Self::action_records)) to that node, and answers the caller
    /// with what it said; and answers the cancels other nodes relay to the actions this one
    /// runs. When the node running it cannot be reached, or the relay's backend is away,
    /// the caller gets a typed 503 (with `Retry-After` over HTTP). Without, such a cancel is
    /// refused with 409.
    pub fn action_relay(mut self, relay: Arc<dyn concord_interact::ActionRelay>) -> Self {
        self.action_relay = Some(relay);
        self
    }

    /// Uses this LLM to negotiate what the rules cannot settle, write handler code no
    /// template fits, and answer natural-language messages (advertised only then).
    pub fn llm(mut self, config: LlmConfig) -> Self {
        self.llm = Some(config);
        self
    }

    /// Uses the LLM configured in the environment (`CONCORD_LLM_*` or `OPENAI_*`), if any.
    ///
    /// # Errors
    /// [`NodeError::Llm`] when the variables are set but wrong.
    pub fn llm_from_env(mut self) -> Result<Self, NodeError> {
        self.llm = LlmConfig::from_env().map_err(|cause| NodeError::Llm { cause })?;
        Ok(self)
    }

    /// Limits and timeouts ([`Limits::default`] otherwise).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The node's identity keys (`Keys::generate`, or `Keys::load` from where they are
    /// kept). Its DID is fixed where it first serves: `did:wba:<host>[%3A<port>]:agents:e1_…`
    /// with the host of its [public URL](Self::public_url), or `localhost` when it serves on
    /// a loopback address; the document is served at that DID's path. With keys, the node
    /// signs its upgrade requests once it has a DID (ANP DID-WBA), proves its DID in the
    /// Noise channel, and lets [`allow`](Self::allow) name DIDs. Default: no identity
    /// (anonymous calls, plain sessions).
    pub fn keys(mut self, keys: Keys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// The node's identity with an explicit DID: for a node that calls without serving, its
    /// DID names where its document is hosted (`concord identity export` writes it).
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// The security policy ([`Security::default`] otherwise: encrypted when the peer speaks
    /// it, anonymous callers allowed where an action allows them).
    pub fn security(mut self, security: Security) -> Self {
        self.security = security;
        self
    }

    /// Who may call `action`: [`Allow::Anyone`] (the default), [`Allow::Authenticated`]
    /// (any caller that proved a DID), or [`Allow::Dids`] (those DIDs, or DID prefixes
    /// ending in `:*`). The description says what each action requires. A node serving a
    /// directory ([`directory`](Self::directory)) also takes the names of the directory's
    /// operations (`things`, `createThing`, `retrieveThing`, `updateThing`,
    /// `partiallyUpdateThing`, `deleteThing`, `createAnonymousThing`, `searchJSONPath`,
    /// `searchCapability`, `thingCreated`, `thingUpdated`, `thingDeleted`).
    ///
    /// ```
    /// use concord_node::{Allow, DidPattern, Node};
    ///
    /// let partners: DidPattern = "did:wba:partner.example:*".parse()?;
    /// let builder = Node::builder("Shop").allow("placeOrder", Allow::Dids(vec![partners]));
    /// # let _ = builder;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allow(mut self, action: impl Into<String>, allow: Allow) -> Self {
        self.access.insert(action.into(), allow);
        self
    }

    /// Limits every protocol handler runs under in the sandbox.
    pub fn handler_limits(mut self, limits: concord_sandbox::Limits) -> Self {
        self.handler_limits = limits;
        self
    }

    /// Registers the node with the W3C WoT Discovery directory at `url` (its base URL; call
    /// again for several) while it serves: its description is `PUT` at
    /// `/things/{id}` when the server starts (the description's `id`, else the node's DID,
    /// else the directory's id from `POST /things`) with `registration.ttl`, again at half the
    /// TTL, and deleted on [`Server::shutdown`](crate::Server::shutdown). A directory away
    /// is retried with exponential backoff and jitter while the node serves anyway;
    /// [`Server::registrations`](crate::Server::registrations) says where each stands.
    /// Requests are signed with the node's DID when it has one. See
    /// [`NodeBuilder::registration`] for the TTL and backoff, and
    /// `Limits::directory_client` for the bounds on the directory's answers.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let node = concord_node::Node::builder("Shop")
    ///     .id("urn:uuid:6f1c2e0a-8b7d-4c39-9a51-2d4e8f0b3c71")
    ///     .register_with("https://directory.example/")
    ///     .build()?;
    /// let server = node.serve("127.0.0.1:8080").await?;
    /// // … later: the entry is deleted, then the server drains.
    /// server.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn register_with(mut self, url: impl Into<String>) -> Self {
        self.directories.push(url.into());
        self
    }

    /// How the node keeps its directory entries ([`NodeBuilder::register_with`]): the TTL and the
    /// backoff. Default: [`RegistrationSettings::default`](crate::RegistrationSettings).
    pub fn registration(mut self, settings: crate::RegistrationSettings) -> Self {
        self.registration = settings;
        self
    }

    /// Opens the store and builds the node.
    ///
    /// # Errors
    /// [`NodeError::Config`] for a zero limit, an empty title, an `id` that is not an
    /// absolute URI, or a stream action whose initial credit is more than
    /// `limits.streams.max_receive_buffer` holds, [`NodeError::Store`] when the store cannot
    /// be opened,
    /// [`NodeError::Llm`] when the LLM client cannot be built.
    pub fn build(self) -> Result<Node, NodeError> {
        if self.title.trim().is_empty() {
            return Err(NodeError::Config("the node's title is empty".to_owned()));
        }
        if let Some(id) = &self.id {
            crate::describe::check_description_id(&self.title, id).map_err(|reason| {
                NodeError::Config(format!("the description's id {id:?}: {reason}"))
            })?;
        }
        self.limits
            .validate()
            .map_err(|error| NodeError::Config(error.to_string()))?;
        self.handler_limits
            .validate()
            .map_err(|error| NodeError::Config(format!("handler limits: {error}")))?;
        let open = |dir: Result<PathBuf, StoreError>| {
            dir.and_then(Store::open)
                .map(Arc::new)
                .map_err(|cause| NodeError::Store { cause })
        };
        let store = match self.store {
            StoreChoice::Open(store) => store,
            StoreChoice::Dir(dir) => open(Ok(dir))?,
            StoreChoice::Default => open(Store::default_dir())?,
        };
        let llm = self
            .llm
            .map(LlmClient::new)
            .transpose()
            .map_err(|cause| NodeError::Llm { cause })?;
        let has_llm = llm.is_some();
        let policy = match llm {
            Some(client) => EscalatingNegotiator::new(LlmNegotiator::new(client)),
            None => EscalatingNegotiator::without_llm(),
        }
        .with_schema_limits(self.limits.schema);
        let mut capabilities: Capabilities = [
            Capability::TestCasesNegotiation,
            Capability::FixErrorNegotiation,
            Capability::VerificationProtocol,
        ]
        .into_iter()
        .collect();
        if has_llm {
            capabilities.insert(Capability::NaturalLanguageNegotiation);
            capabilities.insert(Capability::NaturalLanguageProtocol);
        }
        if self.security.encryption != crate::identity::Encryption::Off {
            // As a provider only once it has a DID (`Shared::provider_capabilities`).
            capabilities.insert(Capability::EncryptedChannel);
        }
        let public_url = self
            .public_url
            .map(|url| check_public_url(&url))
            .transpose()
            .map_err(|reason| NodeError::Config(format!("the public URL {reason}")))?;
        let tls_config = |error: crate::tls::TlsError| NodeError::Config(error.to_string());
        let tls = crate::tls::parse_roots(&self.trust_roots_pem)
            .and_then(crate::tls::client_config)
            .map_err(tls_config)?;
        let tls_server = self
            .certificate_pem
            .map(|(chain, key)| crate::tls::server_config(&chain, &key).map(Arc::new))
            .transpose()
            .map_err(tls_config)?;
        let http =
            crate::tls::description_client(tls.clone(), self.local_address).map_err(tls_config)?;
        let description_fetches =
            crate::tls::description_fetch_client(tls.clone(), self.local_address)
                .map_err(tls_config)?;
        let directories =
            directories_checked(&self.directories, self.registration, &self.limits, &http)?;
        let directory_names: &[&str] = match self.directory {
            Some(_) => crate::binding::directory::AFFORDANCES,
            None => &[],
        };
        for action in self.access.keys() {
            if !self.actions.contains(action) && !directory_names.contains(&action.as_str()) {
                return Err(NodeError::Config(format!(
                    "`allow` names the action `{action}`, which the node does not serve"
                )));
            }
        }
        let backends = crate::state::Backends {
            protocols: self
                .protocols
                .unwrap_or_else(|| Arc::clone(&store) as Arc<dyn concord_store::ProtocolBook>),
            consensus: self
                .consensus
                .unwrap_or_else(|| Arc::clone(&store) as Arc<dyn concord_store::ConsensusRegistry>),
        };
        let identity = NodeIdentity::new(
            self.keys,
            self.identity,
            self.security,
            self.access,
            Arc::new(tls.clone()),
            self.nonce_store
                .unwrap_or_else(|| Arc::clone(&store) as Arc<dyn concord_store::NonceStore>),
            self.nonce_log,
        )
        .map_err(|error| NodeError::Config(error.to_string()))?;
        let session = self.limits.session_config(if self.reference_compatible {
            SessionConfig::reference_compatible()
        } else {
            SessionConfig::default()
        });
        let interface = Interface {
            actions: self.actions.affordances(),
            properties: self
                .properties
                .iter()
                .map(|(name, property)| {
                    let affordance = PropertyAffordance {
                        description: property.description.clone(),
                        schema: property.schema.clone(),
                        writable: property.writable,
                        observable: property.observable,
                    };
                    (name.clone(), affordance)
                })
                .collect(),
            events: self
                .events
                .iter()
                .map(|(name, event)| {
                    let affordance = EventAffordance {
                        description: event.description.clone(),
                        data: event.data.clone(),
                    };
                    (name.clone(), affordance)
                })
                .collect(),
        };
        // Both peers start each direction of a stream with the credit the description
        // states: we must be able to hold it.
        concord_interact::document::check_credits(&interface, &self.limits.streams)
            .map_err(|error| NodeError::Config(error.to_string()))?;
        let initial = self
            .properties
            .into_iter()
            .map(|(name, property)| (name, property.initial))
            .collect();
        let affordances = Affordances::new(
            interface.clone(),
            initial,
            self.limits.interaction.clone(),
            self.limits.event_overflow,
            &self.limits.schema,
            crate::interact::ThingBackends {
                event_log: self.event_log,
                action_records: self.action_records,
                action_ids: self.action_ids,
                action_relay: self.action_relay,
            },
        )
        .map(Arc::new)
        .map_err(|reason| NodeError::Config(format!("properties and events: {reason}")))?;
        affordances.attach_event_log();
        if let Some(relay) = &affordances.relay {
            crate::interact::relay::serve(relay, &affordances)
                .map_err(|error| NodeError::Config(format!("action relay: {error}")))?;
        }
        let event_ingest_token = self
            .event_ingest_token
            .map(crate::binding::ingest::IngestToken::new)
            .transpose()
            .map_err(|error| NodeError::Config(error.to_string()))?;
        let persona = Persona {
            title: self.title,
            description: self.description,
        };
        // Every backend gets the node's publisher before its first call
        // (`Action::attach`): an `ExecAction` publishes its command's event lines with it.
        self.actions.attach(&Publisher {
            affordances: Arc::clone(&affordances),
        });
        let store = SharedStore::new(store, backends, &self.limits);
        Ok(Node {
            shared: Arc::new(Shared {
                id: self.id,
                persona,
                actions: self.actions,
                transcripts: Transcripts::new(store.clone()),
                store,
                calls: Arc::new(CallBudget::new(&self.limits)),
                policy,
                limits: self.limits,
                capabilities,
                handler_limits: self.handler_limits,
                http,
                local_address: self.local_address,
                tls: Arc::new(tls),
                tls_server,
                public_url,
                session,
                code: CodeCache::default(),
                descriptions: Default::default(),
                description_fetches,
                identity,
                interface,
                affordances,
                event_ingest_token,
                bindings: self.bindings,
                owner: self.owner,
                mdns: self.mdns,
                directories,
                registration: self.registration,
                http_binding: self.http_binding,
                directory: self.directory,
            }),
        })
    }
}

/// The clients of the directories the node registers with, each URL and the settings
/// checked.
fn directories_checked(
    urls: &[String],
    registration: crate::RegistrationSettings,
    limits: &Limits,
    http: &reqwest::Client,
) -> Result<Vec<crate::Directory>, NodeError> {
    if !urls.is_empty() {
        registration
            .validate()
            .map_err(|reason| NodeError::Config(format!("registration: {reason}")))?;
    }
    let mut seen = std::collections::BTreeSet::new();
    urls.iter()
        .map(|url| {
            let directory = crate::Directory::with_client(url, http.clone())
                .map_err(|error| NodeError::Config(error.to_string()))?
                .with_limits(limits.directory_client);
            if !seen.insert(directory.url().to_owned()) {
                return Err(NodeError::Config(format!(
                    "the directory {url:?} is given twice"
                )));
            }
            Ok(directory)
        })
        .collect()
}

/// Checks a public base URL ([`NodeBuilder::public_url`]) and returns it normalised (scheme
/// and host in lower case, a path of at least `/`): an absolute `http` or `https` URL with no
/// credentials, query or fragment. `Err` says what is wrong.
///
/// ```
/// use concord_node::{check_public_url, PublicUrlError};
/// assert_eq!(check_public_url("HTTPS://Shop.example.com").unwrap(), "https://shop.example.com/");
/// let refused = check_public_url("https://user:secret@shop.example.com/").unwrap_err();
/// assert!(matches!(refused, PublicUrlError::Credentials { .. }));
/// assert!(refused.to_string().contains("credentials"));
/// ```
pub fn check_public_url(url: &str) -> Result<String, PublicUrlError> {
    let url_given = || url.to_owned();
    let parsed = url::Url::parse(url).map_err(|error| PublicUrlError::NotAUrl {
        url: url_given(),
        error,
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(PublicUrlError::Scheme { url: url_given() });
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(PublicUrlError::Credentials { url: url_given() });
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(PublicUrlError::QueryOrFragment { url: url_given() });
    }
    Ok(parsed.into())
}
