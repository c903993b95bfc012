//! The agent configuration `concord serve --config agent.toml` reads: the description's
//! basics, where to listen and keep the store, the actions with their schemas and backends,
//! the LLM, consensus protocols and limits. Every problem is reported with the file and the
//! key it is about; relative paths are relative to the file's directory.
//!
//! ```toml
//! [agent]
//! title = "Product agent"
//! id = "urn:uuid:6f1c2e0a-8b7d-4c39-9a51-2d4e8f0b3c71"   # optional: the description's `id`
//! description = "Product information for a small shop."
//!
//! [node]
//! listen = "127.0.0.1:8080"
//! data_dir = "data"                  # default: the platform data directory
//! public_url = "https://shop.example.com/"   # optional: behind a TLS proxy (then wss://)
//! tls = { certificate = "cert.pem", key = "key.pem" }   # optional: serve https:// and wss://
//! shutdown_grace = "10s"             # on Ctrl-C/SIGTERM, how long calls running may finish
//! event_ingest_token = "${SHOP_INGEST_TOKEN}"   # optional: serve POST /events/{name}
//! #   (`Authorization: Bearer <token>`) for backend services to publish events; `${NAME}`
//! #   is the environment variable NAME (unset: a configuration error)
//!
//! [http]                             # the WoT HTTP binding (POST /actions/{name}, …)
//! enabled = true                     # default true; false: the meta-protocol forms alone
//! [[http.bearer]]                    # optional: a token for consumers without a DID
//! token_env = "DASHBOARD_TOKEN"      # the environment variable holding it (16+ chars)
//! caller = "did:wba:example.com:consumers:dashboard"   # the DID it calls as (`allow`)
//!
//! [[actions]]
//! name = "getProductInfo"
//! description = "Get product information by product id."
//! input = "product-id.schema.json"   # a file, or the schema inline as a table
//! output = "product-info.schema.json"
//! exec = { command = "sh", args = ["product-info.sh"], timeout = "5s" }
//! #   (also: env, cwd, max_output_bytes, max_line_bytes: the longest progress/event line)
//! #   an application error: stdout a JSON object whose only member is `error`,
//! #   {"error": {"code": 404, "message": "no product P9"}}, exit status 0 or not (or, with
//! #   a non-zero exit, RFC 9457 problem details {"status": 404, "detail": "…"}); any other
//! #   failure is 502 "the action failed" to the caller, details and stderr in our log
//! # or: http = { url = "http://127.0.0.1:9000/product-info", timeout = "10s" }
//! #     (an https:// service a private CA signed: add ca_cert = "private-ca.pem")
//! #   an application error: a 4xx/5xx answer with problem details or the same `error` object
//! allow = "anyone"                   # who may call it: "anyone" (default), "authenticated"
//! #   (any caller that proved its DID), or a list of DIDs and DID prefixes ending in ":*":
//! #   allow = ["did:wba:partner.example:*", "did:wba:localhost%3A9000:agents:e1_…"]
//! mode = "reply"                     # "reply" (default) | "notify" (fire and forget) |
//! #   "progress" (long-running: exec only; the command prints {"progress": 0.4} lines before
//! #   its answer) | "stream" (exec only: bytes both ways on its stdin and stdout)
//! # Any exec command may print {"event": "name", "data": {…}} lines: the node publishes them.
//! # [actions.stream]                 # with mode = "stream" (and only then)
//! # content_type = "audio/pcm;rate=24000;channels=1"
//! # output_content_type = "audio/pcm;rate=24000;channels=1"   # default: content_type
//! # frame_bytes = 960                # default 0: not framed
//! # initial_credit = 48000           # bytes each direction starts with
//! # realtime = true                  # drop rather than buffer when out of credit
//!
//! [[properties]]                     # readproperty (writeproperty, observeproperty)
//! name = "stock"
//! description = "Units in stock."
//! schema = { type = "integer", minimum = 0 }   # or schema_file = "stock.schema.json"
//! initial = 12                       # the first value; its schema must accept it
//! writable = false                   # default false
//! observable = true                  # default false
//!
//! [[events]]                         # subscribeevent
//! name = "priceChanged"
//! description = "A product's price changed."
//! data = { type = "object" }         # or data_file = "price-changed.schema.json"
//!
//! [security]                         # the agent's DID identity: <data_dir>/identity/keys.json
//! keys_file = "/run/secrets/agent-keys.json" # or this key file (mode 0600), never created:
//! #                                    one secret mounted into every replica of the agent
//! encryption = "preferred"           # "off" | "preferred" (encrypted when the peer speaks it)
//! #                                    | "required" (plain sessions refused)
//! authentication = "optional"        # "optional" | "required" (every caller proves its DID)
//! signature = "http-signatures"      # how this agent signs when it calls: "http-signatures"
//! #                                    (RFC 9421) or "didwba" (ANP's legacy header)
//! resolve_loopback_over_http = false # test mode: DIDs on localhost resolve over http://
//! legacy_didwba = false              # accept ANP's legacy `Authorization: DIDWba` header
//! #                                    from old clients; it signs the host name only, so a
//! #                                    header sent to another service on this host name
//! #                                    verifies here too (once): off unless needed
//! resolver_connect_timeout = "2s"    # a caller's DID host connects (TCP, TLS) within this
//! resolver_first_byte_timeout = "3s" # …and answers (status, headers) within this
//! resolver_max_concurrent_per_address = 2 # DID document fetches one client address's
//! #                                    upgrades hold at once
//!
//! [directory]                        # optional: register with W3C WoT Discovery directories
//! urls = ["https://directory.example/"]   # one or more (or `url = "…"` for one); the
//! #   description is PUT at /things/{id} (agent.id, else the DID, else POST /things)
//! ttl = "5m"                         # registration.ttl; registered again at half of it
//! first_retry = "1s"                 # a directory away: retried after this, doubled per
//! max_retry = "1m"                   #   failure up to this (with jitter); the agent serves anyway
//! sign = "auto"                      # sign with the agent's DID, unsigned when the directory
//! #   answers 401 (it cannot resolve it: a localhost DID, `concord directory serve` on this
//! #   machine), said in the log; true: always signed (a 401 gives up); false: never
//! #   a graceful shutdown (Ctrl-C, SIGTERM) deletes the entries
//!
//! [cluster]                          # optional: replicas of this agent behind one address
//! nats = ["nats://10.0.0.5:4222"]    # NATS servers with JetStream (nats:// or tls://); replicas
//! #   share protocols by hash (0-RTT on any), replay nonces and consensus protocols there.
//! #   Needs node.public_url (the load balancer's) and the same identity keys on every replica:
//! #   security.keys_file, or <data_dir>/identity/keys.json copied; a replica creates none
//! credentials = "agent.creds"        # optional: a NATS user's credentials file
//! ca_cert = "nats-ca.pem"            # optional: the private CA of the servers' certificates
//! require_tls = false                # refuse a server without TLS
//! timeout = "2s"                     # one NATS operation; then a typed error (503 to a caller)
//! replicas = 1                       # 1 to 5: the JetStream replicas of every bucket and stream
//! #   created at start (3 on a 3-node NATS cluster); an existing one with fewer is used, with a warning
//! protocols_bucket = "concord_protocols" # key-value buckets, one per agent (defaults shown)
//! nonces_bucket = "concord_nonces"   # its max_age is security's replay window
//! consensus_bucket = "concord_consensus"
//! actions_bucket = "concord_actions" # progress actions by id: queryaction/cancelaction on any
//! actions_max_age = "7d"             #   replica; a record is forgotten this long after its last change
//! start_degraded = false             # true: NATS unreachable at start is not an error; the replica
//! #   serves calls and its description, answers what needs shared state with 503 +
//! #   Retry-After, and recovers when NATS answers (false: one line naming cluster.nats, exit 2)
//! [cluster.events]                   # optional: the JetStream stream of the agent's events
//! stream = "concord_events"          # one per agent; subjects concord.events.<agent>.<event>
//! agent = "concord_events"           # the <agent> token (the stream's name unless set)
//! max_messages = 256                 # retention, each at most (and by default) the replay
//! max_bytes = 4194304                #   buffer's ([limits.interaction] replay_events,
//! max_age = "10m"                    #   replay_bytes, replay_max_age); older: a gap
//!
//! [llm]                              # default: CONCORD_LLM_* / OPENAI_* from the environment
//! base_url = "http://127.0.0.1:11434/v1"
//! model = "llama3.1"
//! api_key_env = "OLLAMA_API_KEY"
//! # ca_cert = "private-ca.pem"        # for an https:// server a private CA signed
//!
//! [[consensus]]
//! uri = "https://protocols.example/product-info/1.0"
//! document = "product-info.protocol.md"
//!
//! [limits]                           # every field of `concord_node::Limits`; defaults there
//! call_timeout = "10s"
//! max_sessions = 64
//! max_holding_sessions = 32          # at most max_sessions: subscribing, observing, streaming
//! max_sessions_per_address = 16      # a client address: an IPv4 address or an IPv6 /64
//! max_candidate_size = 65536         # bytes of a peer's candidate protocol
//! transcript_max_age = "7d"          # the node prunes its transcripts by age and count
//! transcript_max_count = 10000
//! event_overflow = "drop_oldest"     # a full subscriber queue: "drop_oldest" (a gap) or "disconnect"
//! [limits.hello]                     # bounds on a peer's hello (`HelloLimits`)
//! max_text_size = 65536
//! [limits.schema]                    # bounds on a protocol's JSON Schemas (`SchemaLimits`)
//! max_enum_values = 1024
//! [limits.interaction]               # interface sessions (`concord_interact::Limits`)
//! action_lease = "30s"               # a progress action outlives its dropped caller this
//! #                                    long (whole seconds: `concord:actionLease`)
//! subscriber_queue = 1024            # notifications waiting per subscriber
//! subscriber_queue_bytes = 4194304  # and their bytes (event data as JSON), whichever is hit first
//! replay_max_age = "10m"             # optional: older events leave the replay buffer
//! [limits.directory_client]          # what a directory may make the agent read or wait for
//! max_response_bytes = 8388608       # an answer's body
//! max_pages = 100                    # pages of one listing (`Link: rel="next"`)
//! max_listing_bytes = 33554432       # bytes of one listing, over all its pages
//! max_listing_items = 10000          # entries of one listing, over all its pages
//! timeout = "10s"                    # one request, to the last byte of its answer
//! [limits.streams]                   # streams of a session (`StreamLimits`)
//! max_receive_buffer = 1048576       # per stream: holds every stream action's initial_credit
//! max_session_buffer = 16777216      # over every stream of a session (at least the above)
//! max_reader_queue = 1048576         # per stream: bytes waiting for its reader (within the credit)
//! max_send_room = 1048576            # per stream: bytes a writer queues beyond the send queue
//!
//! [discovery]                        # how the agent is found: `discovery_config.rs`
//! mdns = true                        # announce on the local network with DNS-SD (default false)
//! owner = { name = "Small Shop", url = "https://shop.example" }   # ad.json owner, A2A provider
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use concord_llm::{LlmConfig, LlmError};
use concord_negotiate::{ActionSpec, ProtocolDocument};
use concord_node::{
    ActionMode, Allow, Authentication, BearerGrant, Did, DidPattern, Encryption, Event, ExecAction,
    HttpAction, InteractionLimits, Limits, Overflow, Property, RegistrationSettings,
    RegistrationSigning, Security, SignatureForm, StreamSpec,
};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_json::Value;

/// Where `concord serve` listens when the configuration does not say.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// How long calls running at shutdown may take to finish when the configuration does not
/// say (`node.shutdown_grace`): the node's own default.
pub use concord_node::DEFAULT_SHUTDOWN_GRACE;

/// A configuration problem: the file, the key, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", .file.display(), .problem)]
pub struct ConfigError {
    /// The configuration file.
    pub file: PathBuf,
    /// What is wrong (naming the key).
    pub problem: Problem,
}

/// What is wrong with a configuration.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The file cannot be read: the command cannot run.
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    /// The TOML does not parse or does not fit the configuration's shape: where (line and
    /// column), and the parser's message (naming the key).
    #[error("{0}")]
    Syntax(String),
    /// A key's value is wrong.
    #[error("`{key}`: {message}")]
    Key {
        /// The key, as a dotted path (`actions[0].exec.timeout`).
        key: String,
        /// What is wrong with its value.
        message: String,
    },
}

/// A configuration read and checked: everything `concord serve` needs.
#[derive(Debug)]
pub struct AgentConfig {
    /// The description's title.
    pub title: String,
    /// The description's `id` (an absolute URI), when the configuration gives one.
    pub id: Option<String>,
    /// The description's description.
    pub description: Option<String>,
    /// Where to listen (`host:port`).
    pub listen: String,
    /// The store's directory, when the configuration names one.
    pub data_dir: Option<PathBuf>,
    /// The base URL peers reach the agent at, when not the listening address (behind a
    /// reverse proxy that terminates TLS).
    pub public_url: Option<String>,
    /// The certificate chain and private key (PEM) to serve TLS with, when configured.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    /// On shutdown, how long calls already running may take to finish before the sessions
    /// are closed (`node.shutdown_grace`, default [`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
    /// The actions served.
    pub actions: Vec<ConfiguredAction>,
    /// The LLM, when one is configured (here or in the environment).
    pub llm: Option<LlmConfig>,
    /// Consensus protocols to hold provider code for.
    pub consensus: Vec<ConsensusProtocol>,
    /// Limits and timeouts.
    pub limits: Limits,
    /// The security policy (`[security]`; [`Security::default`] otherwise).
    pub security: Security,
    /// The identity's key file (`security.keys_file`, joined to the configuration's
    /// directory), read at start; `None`: `<data_dir>/identity/keys.json`.
    pub keys_file: Option<PathBuf>,
    /// The properties served (`[[properties]]`).
    pub properties: Vec<ConfiguredProperty>,
    /// The events declared (`[[events]]`).
    pub events: Vec<ConfiguredEvent>,
    /// The token backend services post events in with (`node.event_ingest_token`).
    pub event_ingest_token: Option<Secret>,
    /// How the agent makes itself found (`[discovery]`: DNS-SD, the owner its discovery
    /// documents name).
    pub discovery: crate::discovery_config::Discovery,
    /// The directories the agent registers with (`[directory] urls`), each a base URL.
    pub directories: Vec<String>,
    /// How it keeps its entries there (`[directory] ttl`, `first_retry`, `max_retry`).
    pub registration: RegistrationSettings,
    /// Whether the WoT HTTP binding is served (`http.enabled`, default `true`).
    pub http_binding: bool,
    /// The bearer tokens granted to HTTP consumers (`[[http.bearer]]`).
    pub http_bearer: Vec<BearerGrant>,
    /// Replicas of this agent sharing protocols, nonces and consensus protocols through
    /// NATS JetStream (`[cluster]`), when configured.
    pub cluster: Option<ClusterConfig>,
}

/// A secret from the configuration: `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A property from the configuration.
#[derive(Debug)]
pub struct ConfiguredProperty {
    /// Its name.
    pub name: String,
    /// Its schema, first value and what peers may do with it.
    pub property: Property,
}

/// An event from the configuration.
#[derive(Debug)]
pub struct ConfiguredEvent {
    /// Its name.
    pub name: String,
    /// Its data's schema.
    pub event: Event,
}

/// An action with its published spec and its backend.
#[derive(Debug)]
pub struct ConfiguredAction {
    /// Name, description and schemas.
    pub spec: ActionSpec,
    /// What runs it.
    pub backend: Backend,
    /// Who may call it (`allow`, default anyone).
    pub allow: Allow,
    /// How it answers (`mode`, default reply).
    pub mode: ActionMode,
    /// What its streams carry (`[actions.stream]`), for a stream action.
    pub stream: Option<StreamSpec>,
}

/// What runs an action.
#[derive(Debug)]
pub enum Backend {
    /// A command per call.
    Exec(ExecAction),
    /// A POST per call.
    Http(HttpAction),
}

/// A consensus protocol from the configuration.
#[derive(Debug)]
pub struct ConsensusProtocol {
    /// Its URI.
    pub uri: String,
    /// The document, parsed (its exact text is what is hashed).
    pub document: ProtocolDocument,
    /// The key it came from, for messages.
    pub key: String,
}

impl AgentConfig {
    /// Reads and checks the configuration file at `path`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file and the key at fault.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with_env(path, |name| std::env::var(name).ok())
    }

    /// [`AgentConfig::load`] with the environment given by `env` (a variable name to its
    /// value): the LLM falls back to it, and `api_key_env` is read from it.
    pub fn load_with_env(
        path: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let fail = |problem| ConfigError {
            file: path.to_owned(),
            problem,
        };
        let text =
            std::fs::read_to_string(path).map_err(|error| fail(Problem::Unreadable(error)))?;
        let file: File = toml::from_str(&text)
            .map_err(|error| fail(Problem::Syntax(syntax_error(&text, &error))))?;
        // Absolute, so that a command's path means the same once it runs in its `cwd`.
        let dir = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = std::path::absolute(dir).map_err(|error| fail(Problem::Unreadable(error)))?;
        file.check(&base, &env).map_err(fail)
    }
}

/// A TOML error on one line: `line 9, column 1: unknown field `titel`, expected …` (the
/// parser's own rendering quotes the line over several).
pub(crate) fn syntax_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', "; ");
    let Some(span) = error.span() else {
        return message;
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, last)| last)
        .chars()
        .count()
        + 1;
    format!("line {line}, column {column}: {message}")
}

impl Problem {
    pub(crate) fn key(key: impl Into<String>, message: impl fmt::Display) -> Self {
        Problem::Key {
            key: key.into(),
            message: message.to_string(),
        }
    }
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    agent: AgentSection,
    #[serde(default)]
    node: NodeSection,
    #[serde(default)]
    actions: Vec<ActionSection>,
    llm: Option<LlmSection>,
    #[serde(default)]
    consensus: Vec<ConsensusSection>,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    security: SecuritySection,
    #[serde(default)]
    properties: Vec<PropertySection>,
    #[serde(default)]
    events: Vec<EventSection>,
    #[serde(default)]
    discovery: crate::discovery_config::DiscoverySection,
    directory: Option<DirectorySection>,
    #[serde(default)]
    http: HttpBindingSection,
    cluster: Option<ClusterSection>,
}

/// `[cluster]`: replicas of this agent sharing state through NATS JetStream.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterSection {
    #[serde(default)]
    nats: Vec<String>,
    credentials: Option<PathBuf>,
    ca_cert: Option<PathBuf>,
    #[serde(default)]
    require_tls: bool,
    timeout: Option<Humane>,
    replicas: Option<i64>,
    protocols_bucket: Option<String>,
    nonces_bucket: Option<String>,
    consensus_bucket: Option<String>,
    actions_bucket: Option<String>,
    actions_max_age: Option<Humane>,
    #[serde(default)]
    start_degraded: bool,
    /// `[cluster.events]`.
    events: Option<ClusterEventsSection>,
}

/// `[cluster.events]`: the JetStream stream the replicas' events are kept in.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterEventsSection {
    stream: Option<String>,
    agent: Option<String>,
    max_age: Option<Humane>,
    max_messages: Option<u64>,
    max_bytes: Option<u64>,
}

impl ClusterEventsSection {
    /// The stream as written: names checked, limits not yet fitted to the replay buffer
    /// ([`ClusterConfig::fit_event_retention`]).
    fn check(self) -> Result<concord_nats::EventStream, Problem> {
        let mut stream = concord_nats::EventStream::new(
            self.stream
                .unwrap_or_else(|| concord_nats::DEFAULT_EVENT_STREAM.to_owned()),
        );
        if let Some(agent) = self.agent {
            stream.agent = agent;
        }
        stream.max_age = self.max_age.map(Duration::from);
        stream.max_messages = self.max_messages;
        stream.max_bytes = self.max_bytes;
        stream.check().map_err(|(field, reason)| {
            let key = match field {
                "name" => "stream",
                other => other,
            };
            Problem::key(format!("cluster.events.{key}"), reason)
        })?;
        Ok(stream)
    }
}

impl ClusterConfig {
    /// Fits the event stream's retention to what a replica's replay buffer holds
    /// (`limits.replay_events`, `replay_bytes`, `replay_max_age`): unset, each is the
    /// replay buffer's; set above it, refused naming the key. Within them, every replica
    /// holds every event the stream holds, and a resume is told of a gap exactly when its
    /// id is older than the stream's oldest.
    fn fit_event_retention(
        mut self,
        limits: &concord_node::InteractionLimits,
    ) -> Result<Self, Problem> {
        let stream = &mut self.events;
        let replay_events = limits.replay_events as u64;
        let replay_bytes = limits.replay_bytes as u64;
        if replay_events == 0 || replay_bytes == 0 {
            return Err(Problem::key(
                "limits.interaction.replay_events",
                "replicas sharing events resume subscribers from the replay buffer: it cannot be 0 with [cluster]",
            ));
        }
        let over = |key: &str, given: u64, bound: u64, limit: &str| {
            Problem::key(
                format!("cluster.events.{key}"),
                format!("{given} is more than limits.interaction.{limit} ({bound}): a replica could not replay every event the stream keeps"),
            )
        };
        match stream.max_messages {
            Some(given) if given > replay_events => {
                return Err(over("max_messages", given, replay_events, "replay_events"))
            }
            Some(_) => {}
            None => stream.max_messages = Some(replay_events),
        }
        match stream.max_bytes {
            Some(given) if given > replay_bytes => {
                return Err(over("max_bytes", given, replay_bytes, "replay_bytes"))
            }
            Some(_) => {}
            None => stream.max_bytes = Some(replay_bytes),
        }
        if let Some(replay_age) = limits.replay_max_age {
            match stream.max_age {
                Some(given) if given > replay_age => {
                    return Err(Problem::key(
                        "cluster.events.max_age",
                        format!(
                            "{} is longer than limits.interaction.replay_max_age ({}): a replica could not replay every event the stream keeps",
                            humantime::format_duration(given),
                            humantime::format_duration(replay_age)
                        ),
                    ))
                }
                Some(_) => {}
                None => stream.max_age = Some(replay_age),
            }
        }
        Ok(self)
    }
}

/// What `[cluster]` configured: how to reach NATS and the buckets the replicas share.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The servers, credentials, TLS and operation timeout.
    pub settings: concord_nats::NatsSettings,
    /// The buckets' names.
    pub buckets: concord_nats::Buckets,
    /// The stream the replicas' events are kept in, its retention within the replay
    /// buffer's bounds.
    pub events: concord_nats::EventStream,
    /// The bucket of progress actions (`cluster.actions_bucket`).
    pub actions_bucket: String,
    /// How long a progress action's record is kept after its last change
    /// (`cluster.actions_max_age`).
    pub actions_max_age: Duration,
    /// Start while NATS cannot be reached (`cluster.start_degraded`): what needs shared
    /// state answers 503 until it answers. Without, NATS away at start is exit 2.
    pub start_degraded: bool,
}

/// `cluster.replicas` (agent and directory): 1 to [`concord_nats::MAX_REPLICAS`], 1 unless
/// given.
fn check_replicas(given: Option<i64>) -> Result<usize, Problem> {
    match given {
        None => Ok(1),
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=concord_nats::MAX_REPLICAS).contains(n))
            .ok_or_else(|| {
                Problem::key(
                    "cluster.replicas",
                    format!(
                        "{n} is not a JetStream replication factor: 1 to {} (3 on a 3-node NATS cluster)",
                        concord_nats::MAX_REPLICAS
                    ),
                )
            }),
    }
}

/// How `[cluster]` reaches NATS, as written (an agent's and a directory's): the servers,
/// credentials, TLS, the operation timeout and the replication factor.
pub(crate) struct NatsConnection<'a> {
    pub(crate) nats: Vec<String>,
    pub(crate) credentials: Option<PathBuf>,
    pub(crate) ca_cert: Option<PathBuf>,
    pub(crate) require_tls: bool,
    pub(crate) timeout: Option<Humane>,
    pub(crate) replicas: Option<i64>,
    /// The configuration's directory, files are named from.
    pub(crate) base: &'a Path,
}

impl NatsConnection<'_> {
    /// The settings, each key checked by name, files read once to know they can be.
    pub(crate) fn check(self) -> Result<concord_nats::NatsSettings, Problem> {
        if self.nats.is_empty() {
            return Err(Problem::key(
                "cluster.nats",
                "no server given: add `nats = [\"nats://host:4222\"]`",
            ));
        }
        for (index, url) in self.nats.iter().enumerate() {
            concord_nats::check_server_url(url)
                .map_err(|message| Problem::key(format!("cluster.nats[{index}]"), message))?;
        }
        let mut settings = concord_nats::NatsSettings::new(self.nats);
        if let Some(path) = self.credentials {
            let path = self.base.join(path);
            read_file(&path, "cluster.credentials")?;
            settings.credentials = Some(path);
        }
        if let Some(path) = self.ca_cert {
            let path = self.base.join(path);
            read_file(&path, "cluster.ca_cert")?;
            settings.root_certificates = Some(path);
        }
        settings.require_tls = self.require_tls;
        if let Some(timeout) = self.timeout {
            let timeout = Duration::from(timeout);
            if timeout.is_zero() {
                return Err(Problem::key("cluster.timeout", "must be more than zero"));
            }
            settings.operation_timeout = timeout;
        }
        settings.replicas = check_replicas(self.replicas)?;
        Ok(settings)
    }
}

impl ClusterSection {
    /// Every key checked, files read once to know they can be.
    fn check(self, base: &Path) -> Result<ClusterConfig, Problem> {
        let settings = NatsConnection {
            nats: self.nats,
            credentials: self.credentials,
            ca_cert: self.ca_cert,
            require_tls: self.require_tls,
            timeout: self.timeout,
            replicas: self.replicas,
            base,
        }
        .check()?;
        let mut buckets = concord_nats::Buckets::default();
        let mut actions_bucket = concord_nats::DEFAULT_ACTION_BUCKET.to_owned();
        let mut seen = BTreeSet::new();
        for (key, given, name) in [
            (
                "cluster.protocols_bucket",
                self.protocols_bucket,
                &mut buckets.protocols,
            ),
            (
                "cluster.nonces_bucket",
                self.nonces_bucket,
                &mut buckets.nonces,
            ),
            (
                "cluster.consensus_bucket",
                self.consensus_bucket,
                &mut buckets.consensus,
            ),
            (
                "cluster.actions_bucket",
                self.actions_bucket,
                &mut actions_bucket,
            ),
        ] {
            if let Some(given) = given {
                concord_nats::check_bucket_name(&given)
                    .map_err(|message| Problem::key(key, message))?;
                *name = given;
            }
            if !seen.insert(name.clone()) {
                return Err(Problem::key(
                    key,
                    format!("{name:?} is another bucket's name: each kind of state has its own"),
                ));
            }
        }
        let actions_max_age = match self.actions_max_age.map(Duration::from) {
            None => concord_nats::DEFAULT_ACTION_MAX_AGE,
            Some(age) if age < Duration::from_secs(60) => {
                return Err(Problem::key(
                    "cluster.actions_max_age",
                    format!("{age:?} is too short: a record must outlive the action (at least 1m)"),
                ))
            }
            Some(age) => age,
        };
        let events = self.events.unwrap_or_default().check()?;
        Ok(ClusterConfig {
            settings,
            buckets,
            events,
            actions_bucket,
            actions_max_age,
            start_degraded: self.start_degraded,
        })
    }
}

/// `[directory]`: the W3C WoT Discovery directories the agent registers with.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectorySection {
    url: Option<String>,
    #[serde(default)]
    urls: Vec<String>,
    ttl: Option<Humane>,
    first_retry: Option<Humane>,
    max_retry: Option<Humane>,
    sign: Option<SignSetting>,
}

/// `directory.sign`: `true`, `false` or `"auto"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SignSetting {
    /// `true` (always) or `false` (never).
    Flag(bool),
    /// `"auto"`.
    Word(String),
}

impl DirectorySection {
    /// The directories' URLs (each checked) and the registration settings.
    fn check(self) -> Result<(Vec<String>, RegistrationSettings), Problem> {
        let (urls, key) = match (self.url, self.urls.is_empty()) {
            (Some(_), false) => {
                return Err(Problem::key(
                    "directory.url",
                    "give `url` (one directory) or `urls` (several), not both",
                ))
            }
            (Some(url), true) => (vec![url], "directory.url"),
            (None, false) => (self.urls, "directory.urls"),
            (None, true) => {
                return Err(Problem::key(
                    "directory.urls",
                    "no directory given: add `urls = [\"https://…\"]`",
                ))
            }
        };
        let mut seen = BTreeSet::new();
        for (index, url) in urls.iter().enumerate() {
            let key = if key == "directory.url" {
                key.to_owned()
            } else {
                format!("{key}[{index}]")
            };
            let directory = concord_node::Directory::new(url)
                .map_err(|error| Problem::key(&key, error.to_string()))?;
            if !seen.insert(directory.url().to_owned()) {
                return Err(Problem::key(key, format!("{url:?} is given twice")));
            }
        }
        let mut settings = RegistrationSettings::default();
        if let Some(ttl) = self.ttl {
            settings.ttl = ttl.into();
        }
        if let Some(first) = self.first_retry {
            settings.first_retry = first.into();
        }
        if let Some(max) = self.max_retry {
            settings.max_retry = max.into();
        }
        if let Some(sign) = self.sign {
            settings.sign = match sign {
                SignSetting::Flag(true) => RegistrationSigning::Always,
                SignSetting::Flag(false) => RegistrationSigning::Never,
                SignSetting::Word(word) if word == "auto" => RegistrationSigning::Auto,
                SignSetting::Word(word) => {
                    return Err(Problem::key(
                        "directory.sign",
                        format!("{word:?} is not true, false or \"auto\""),
                    ))
                }
            };
        }
        settings.validate().map_err(|message| {
            let key = match message.split_whitespace().next() {
                Some("first_retry") => "directory.first_retry",
                Some("max_retry") => "directory.max_retry",
                _ => "directory.ttl",
            };
            Problem::key(key, message)
        })?;
        Ok((urls, settings))
    }
}

/// `[http]`: the WoT HTTP binding.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpBindingSection {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    bearer: Vec<BearerSection>,
}

impl Default for HttpBindingSection {
    fn default() -> Self {
        Self {
            enabled: true,
            bearer: Vec::new(),
        }
    }
}

/// `[[http.bearer]]`: a bearer token granted to HTTP consumers without a DID, read from
/// the environment variable `token_env` (never written in the file), calling as `caller`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BearerSection {
    token_env: String,
    caller: String,
}

/// `[[properties]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PropertySection {
    name: String,
    #[serde(default)]
    description: String,
    schema: Option<Value>,
    schema_file: Option<PathBuf>,
    initial: Option<Value>,
    #[serde(default)]
    writable: bool,
    #[serde(default)]
    observable: bool,
}

/// `[[events]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventSection {
    name: String,
    #[serde(default)]
    description: String,
    data: Option<Value>,
    data_file: Option<PathBuf>,
}

/// `[actions.stream]`: a `concord_node::StreamSpec`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamSection {
    content_type: String,
    output_content_type: Option<String>,
    #[serde(default)]
    frame_bytes: u32,
    initial_credit: u64,
    #[serde(default)]
    realtime: bool,
}

/// `[security]`: the node's security policy, each value a name checked in
/// [`SecuritySection::check`] (so that a wrong one is named with its key). An agent's, or
/// `concord directory serve`'s (which refuses the keys of [`SecuritySection::agent_only`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecuritySection {
    encryption: Option<String>,
    authentication: Option<String>,
    signature: Option<String>,
    resolve_loopback_over_http: Option<Value>,
    legacy_didwba: Option<Value>,
    resolver_connect_timeout: Option<Humane>,
    resolver_first_byte_timeout: Option<Humane>,
    resolver_max_concurrent_per_address: Option<usize>,
    keys_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSection {
    title: String,
    id: Option<String>,
    description: Option<String>,
}

/// `[node]`: where and how the node serves (an agent's, or `concord directory serve`'s).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NodeSection {
    listen: Option<String>,
    data_dir: Option<PathBuf>,
    public_url: Option<String>,
    tls: Option<TlsSection>,
    shutdown_grace: Option<Humane>,
    /// Read by the agent's configuration alone (a directory refuses it).
    pub(crate) event_ingest_token: Option<String>,
}

/// `[node]` checked: where and how the node serves.
#[derive(Debug)]
pub(crate) struct NodeSettings {
    /// Where to listen (`host:port`).
    pub(crate) listen: String,
    /// The store's directory, when the configuration names one (joined to its directory).
    pub(crate) data_dir: Option<PathBuf>,
    /// The base URL peers reach the node at, when not the listening address.
    pub(crate) public_url: Option<String>,
    /// The certificate chain and private key (PEM) to serve TLS with.
    pub(crate) tls: Option<(Vec<u8>, Vec<u8>)>,
    /// How long calls running at shutdown may take to finish.
    pub(crate) shutdown_grace: Duration,
}

impl NodeSection {
    /// Whether the file names `listen` (a directory's default is not an agent's).
    pub(crate) fn listens(&self) -> bool {
        self.listen.is_some()
    }

    /// Checks every key but `event_ingest_token`; `base` is the configuration's directory.
    pub(crate) fn check(self, base: &Path) -> Result<NodeSettings, Problem> {
        let listen = self.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        check_listen(&listen).map_err(|message| Problem::key("node.listen", message))?;
        let data_dir = self.data_dir.map(|dir| base.join(dir));
        let public_url = self
            .public_url
            .map(|url| concord_node::check_public_url(&url))
            .transpose()
            .map_err(|message| Problem::key("node.public_url", message))?;
        let tls = self
            .tls
            .map(|tls| {
                Ok((
                    read_file(&base.join(tls.certificate), "node.tls.certificate")?,
                    read_file(&base.join(tls.key), "node.tls.key")?,
                ))
            })
            .transpose()?;
        Ok(NodeSettings {
            listen,
            data_dir,
            public_url,
            tls,
            shutdown_grace: self
                .shutdown_grace
                .map_or(DEFAULT_SHUTDOWN_GRACE, Duration::from),
        })
    }
}

/// `node.tls`: serve `https://` and `wss://` with this certificate chain and key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsSection {
    certificate: PathBuf,
    key: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionSection {
    name: String,
    #[serde(default)]
    description: String,
    input: Value,
    output: Value,
    exec: Option<ExecSection>,
    http: Option<HttpSection>,
    /// `"anyone"`, `"authenticated"`, or a list of DIDs and DID prefixes (`…:*`).
    allow: Option<Value>,
    /// `"reply"` (default), `"notify"`, `"progress"` or `"stream"`.
    mode: Option<String>,
    /// What a stream action's streams carry.
    stream: Option<StreamSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecSection {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Working directory; default: the configuration file's directory.
    cwd: Option<PathBuf>,
    timeout: Option<Humane>,
    max_output_bytes: Option<usize>,
    /// Longest progress or event line read as one.
    max_line_bytes: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    url: String,
    timeout: Option<Humane>,
    max_response_bytes: Option<usize>,
    /// A PEM file of root certificates to trust for an `https://` backend (private CA).
    ca_cert: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmSection {
    /// `false` turns the LLM off even when the environment configures one.
    #[serde(default = "yes")]
    enabled: bool,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    request_timeout: Option<Humane>,
    max_retries: Option<u32>,
    /// A PEM file of root certificates to trust for an `https://` server (private CA).
    ca_cert: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsensusSection {
    uri: String,
    document: PathBuf,
}

/// `[limits]`: the node's limits (an agent's, or `concord directory serve`'s).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsSection {
    max_frame_size: Option<usize>,
    max_meta_message_size: Option<usize>,
    max_candidate_size: Option<usize>,
    max_test_cases_size: Option<usize>,
    max_sessions: Option<usize>,
    max_calls_in_flight: Option<usize>,
    max_backend_calls: Option<usize>,
    max_backend_calls_per_address: Option<usize>,
    backend_call_wait: Option<Humane>,
    max_backend_waiting: Option<usize>,
    max_backend_waiting_per_address: Option<usize>,
    max_long_backend_calls: Option<usize>,
    max_long_backend_calls_per_address: Option<usize>,
    idle_shed_after: Option<Humane>,
    max_pending_hellos: Option<usize>,
    max_sessions_per_address: Option<usize>,
    max_pending_hellos_per_address: Option<usize>,
    pending_hello_shed_after: Option<Humane>,
    max_holding_sessions: Option<usize>,
    max_holding_sessions_per_address: Option<usize>,
    ping_interval: Option<Humane>,
    pong_timeout: Option<Humane>,
    stream_idle_timeout: Option<Humane>,
    max_connections: Option<usize>,
    max_connections_per_address: Option<usize>,
    connection_rate_per_address: Option<u32>,
    connection_burst_per_address: Option<u32>,
    request_rate_per_address: Option<u32>,
    request_burst_per_address: Option<u32>,
    http_header_timeout: Option<Humane>,
    // The WoT HTTP binding's event streams and long polls.
    http_sse_queue: Option<usize>,
    http_sse_queue_bytes: Option<usize>,
    http_sse_keep_alive: Option<Humane>,
    http_long_poll_timeout: Option<Humane>,
    hello_timeout: Option<Humane>,
    description_max_age: Option<Humane>,
    resume_cache_ttl: Option<Humane>,
    idle_timeout: Option<Humane>,
    first_proposal_timeout: Option<Humane>,
    negotiation_deadline: Option<Humane>,
    negotiation_timeout: Option<Humane>,
    code_generation_timeout: Option<Humane>,
    call_timeout: Option<Humane>,
    max_negotiation_rounds: Option<u32>,
    max_code_generations: Option<u32>,
    max_fix_rounds: Option<u32>,
    verification_timeout: Option<Humane>,
    max_concurrent_negotiation_work: Option<usize>,
    // A served directory's JSONPath searches.
    directory_searches: Option<usize>,
    directory_searches_per_address: Option<usize>,
    transcript_max_age: Option<Humane>,
    transcript_max_count: Option<u64>,
    transcript_prune_interval: Option<Humane>,
    transcript_text_max_bytes: Option<usize>,
    transcript_max_frames: Option<u64>,
    protocol_max_count: Option<u64>,
    protocol_max_per_peer: Option<u64>,
    event_overflow: Option<String>,
    // The WoT HTTP binding's request bodies.
    http_max_body: Option<usize>,
    http_body_timeout: Option<Humane>,
    #[serde(default)]
    hello: HelloLimitsSection,
    #[serde(default)]
    schema: SchemaLimitsSection,
    #[serde(default)]
    interaction: InteractionLimitsSection,
    #[serde(default)]
    streams: StreamLimitsSection,
    #[serde(default)]
    directory_client: DirectoryClientLimitsSection,
}

/// `[limits.directory_client]`: what a directory may make the agent read or wait for
/// (`concord_node::DirectoryClientLimits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectoryClientLimitsSection {
    max_response_bytes: Option<usize>,
    max_pages: Option<usize>,
    max_listing_bytes: Option<usize>,
    max_listing_items: Option<usize>,
    timeout: Option<Humane>,
}

/// `[limits.interaction]`: bounds of interface sessions (`concord_interact::Limits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InteractionLimitsSection {
    max_message_size: Option<usize>,
    max_depth: Option<usize>,
    max_correlation_id: Option<usize>,
    max_action_id: Option<usize>,
    max_name: Option<usize>,
    max_problem_text: Option<usize>,
    max_open_correlations: Option<usize>,
    max_events: Option<usize>,
    /// 0: no replay buffer.
    replay_events: Option<usize>,
    /// Absent: events leave the replay buffer by count alone.
    replay_max_age: Option<Humane>,
    subscriber_queue: Option<usize>,
    subscriber_queue_bytes: Option<usize>,
    /// 0: no replay buffer.
    replay_bytes: Option<usize>,
    max_subscribers: Option<usize>,
    max_actions: Option<usize>,
    max_actions_per_caller: Option<usize>,
    /// 0: no reserve for callers holding no action.
    reserved_actions: Option<usize>,
    /// 0: a finished action is forgotten at once.
    finished_actions: Option<usize>,
    /// Whole seconds (the description publishes it as `concord:actionLease`).
    action_lease: Option<Humane>,
    max_pending_requests: Option<usize>,
}

/// `[limits.streams]`: bounds of the streams of one session
/// (`concord_interact::stream::StreamLimits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamLimitsSection {
    max_streams: Option<usize>,
    initial_credit: Option<u64>,
    max_receive_buffer: Option<u64>,
    max_send_queue: Option<u64>,
    max_session_buffer: Option<u64>,
    max_reader_queue: Option<u64>,
    max_send_room: Option<u64>,
}

/// `[limits.hello]`: bounds on a peer's hello (`concord_proto::HelloLimits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HelloLimitsSection {
    max_text_size: Option<usize>,
    max_message_id_len: Option<usize>,
    max_versions: Option<usize>,
    max_capabilities: Option<usize>,
    max_candidate_protocols: Option<usize>,
    max_string_len: Option<usize>,
    max_extra_fields: Option<usize>,
    max_extra_size: Option<usize>,
}

/// `[limits.schema]`: bounds on a protocol's JSON Schemas
/// (`concord_negotiate::complexity::SchemaLimits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaLimitsSection {
    max_depth: Option<usize>,
    max_nodes: Option<usize>,
    max_values: Option<usize>,
    max_enum_values: Option<usize>,
    max_members: Option<usize>,
    max_branches: Option<usize>,
    max_pattern_len: Option<usize>,
    max_pattern_total: Option<usize>,
}

/// A duration written for people: `"5s"`, `"500ms"`, `"2m 30s"`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Humane(Duration);

impl From<Humane> for Duration {
    fn from(duration: Humane) -> Duration {
        duration.0
    }
}

impl<'de> Deserialize<'de> for Humane {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer).map_err(|_| {
            de::Error::custom("expected a duration as a string, like \"5s\" or \"500ms\"")
        })?;
        humantime::parse_duration(&text)
            .map(Humane)
            .map_err(|error| {
                de::Error::custom(format!(
                    "{text:?} is not a duration ({error}); write it like \"5s\" or \"500ms\""
                ))
            })
    }
}

impl File {
    fn check(
        self,
        base: &Path,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<AgentConfig, Problem> {
        let title = self.agent.title.trim().to_owned();
        if title.is_empty() {
            return Err(Problem::key("agent.title", "is empty"));
        }
        if let Some(id) = &self.agent.id {
            concord_node::check_description_id(&title, id)
                .map_err(|message| Problem::key("agent.id", message))?;
        }
        let event_ingest_token = self.node.event_ingest_token.clone();
        let NodeSettings {
            listen,
            data_dir,
            public_url,
            tls,
            shutdown_grace,
        } = self.node.check(base)?;
        if self.actions.is_empty() {
            return Err(Problem::key(
                "actions",
                "no action is configured: add at least one [[actions]] table",
            ));
        }
        let mut names = BTreeSet::new();
        let mut actions = Vec::new();
        for (index, action) in self.actions.into_iter().enumerate() {
            let key = format!("actions[{index}]");
            if !names.insert(action.name.clone()) {
                return Err(Problem::key(
                    format!("{key}.name"),
                    format!("the action `{}` is configured twice", action.name),
                ));
            }
            actions.push(action.check(&key, base)?);
        }
        let mut affordances: BTreeMap<String, &str> =
            names.into_iter().map(|name| (name, "an action")).collect();
        // One name space for actions, properties and events: a requester asks for them by
        // name alone.
        let mut unique = |name: &str, key: &str, kind: &'static str| match affordances.get(name) {
            Some(taken) => Err(Problem::key(
                format!("{key}.name"),
                format!(
                    "`{name}` is already {taken}: every action, property and event needs a \
                     name of its own"
                ),
            )),
            None => {
                affordances.insert(name.to_owned(), kind);
                Ok(())
            }
        };
        let mut properties = Vec::new();
        for (index, property) in self.properties.into_iter().enumerate() {
            let key = format!("properties[{index}]");
            unique(property.name.trim(), &key, "a property")?;
            properties.push(property.check(&key, base)?);
        }
        let mut events = Vec::new();
        for (index, event) in self.events.into_iter().enumerate() {
            let key = format!("events[{index}]");
            unique(event.name.trim(), &key, "an event")?;
            events.push(event.check(&key, base)?);
        }
        let event_ingest_token = event_ingest_token
            .map(|token| check_token(&token, env))
            .transpose()
            .map_err(|message| Problem::key("node.event_ingest_token", message))?;
        let http_bearer = self.http.grants(env)?;
        let llm = match self.llm {
            Some(section) => section.check(env, base)?,
            None => LlmConfig::from_lookup(env)
                .map_err(|error| Problem::key("llm", format!("from the environment: {error}")))?,
        };
        let mut uris = BTreeSet::new();
        let mut consensus = Vec::new();
        for (index, entry) in self.consensus.into_iter().enumerate() {
            let key = format!("consensus[{index}]");
            if entry.uri.trim().is_empty() {
                return Err(Problem::key(format!("{key}.uri"), "is empty"));
            }
            if !uris.insert(entry.uri.clone()) {
                return Err(Problem::key(
                    format!("{key}.uri"),
                    format!("{:?} is configured twice", entry.uri),
                ));
            }
            let path = base.join(&entry.document);
            let document_key = format!("{key}.document");
            let bytes = read_file(&path, &document_key)?;
            let text = String::from_utf8(bytes).map_err(|error| {
                Problem::key(&document_key, format!("{}: {error}", path.display()))
            })?;
            let document = ProtocolDocument::parse(&text).map_err(|error| {
                Problem::key(&document_key, format!("{}: {error}", path.display()))
            })?;
            consensus.push(ConsensusProtocol {
                uri: entry.uri,
                document,
                key,
            });
        }
        let limits = self.limits.check()?;
        check_credits(&actions, &limits)?;
        let (directories, registration) = match self.directory {
            Some(section) => section.check()?,
            None => (Vec::new(), RegistrationSettings::default()),
        };
        let cluster = self
            .cluster
            .map(|section| section.check(base))
            .transpose()?;
        if cluster.is_some() && public_url.is_none() {
            return Err(Problem::key(
                "node.public_url",
                "replicas (`[cluster]`) are one agent at one address: set the URL the load balancer answers at",
            ));
        }
        let cluster = cluster
            .map(|cluster| cluster.fit_event_retention(&limits.interaction))
            .transpose()?;
        Ok(AgentConfig {
            title,
            id: self.agent.id,
            description: self.agent.description,
            listen,
            data_dir,
            public_url,
            tls,
            shutdown_grace,
            actions,
            llm,
            consensus,
            limits,
            keys_file: self.security.keys_file(base)?,
            security: self.security.check()?,
            properties,
            events,
            event_ingest_token,
            discovery: self.discovery.check()?,
            directories,
            registration,
            http_binding: self.http.enabled,
            http_bearer,
            cluster,
        })
    }
}

impl HttpBindingSection {
    /// The grants of `[[http.bearer]]`, each token read from its environment variable.
    fn grants(&self, env: &impl Fn(&str) -> Option<String>) -> Result<Vec<BearerGrant>, Problem> {
        let mut grants = Vec::new();
        for (index, bearer) in self.bearer.iter().enumerate() {
            let key = format!("http.bearer[{index}]");
            let token = env(&bearer.token_env).ok_or_else(|| {
                Problem::key(
                    format!("{key}.token_env"),
                    format!("the environment variable {} is not set", bearer.token_env),
                )
            })?;
            let caller = Did::parse(&bearer.caller).map_err(|error| {
                Problem::key(format!("{key}.caller"), format!("not a DID: {error}"))
            })?;
            let grant = BearerGrant::new(&token, caller)
                .map_err(|error| Problem::key(format!("{key}.token_env"), error.to_string()))?;
            grants.push(grant);
        }
        Ok(grants)
    }
}

/// `value` as one of `choices` (name, meaning); else an error naming `key` and the choices.
fn choose<T: Copy>(key: &str, value: &str, choices: &[(&str, T)]) -> Result<T, Problem> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, choice)| *choice)
        .ok_or_else(|| {
            let names: Vec<String> = choices
                .iter()
                .map(|(name, _)| format!("{name:?}"))
                .collect();
            Problem::key(key, format!("{value:?} is not one of {}", names.join(", ")))
        })
}

impl SecuritySection {
    /// `security.keys_file` joined to `base`, read to know it is a key file this node may
    /// use (mode 0600, the key file's format): the identity's keys when they live outside
    /// the data directory (one secret mounted into every replica).
    pub(crate) fn keys_file(&self, base: &Path) -> Result<Option<PathBuf>, Problem> {
        let Some(path) = &self.keys_file else {
            return Ok(None);
        };
        let path = base.join(path);
        concord_identity::Keys::load(&path)
            .map_err(|error| Problem::key("security.keys_file", error.to_string()))?;
        Ok(Some(path))
    }

    /// The first key given that only an agent's sessions and calls use (`encryption`,
    /// `authentication`, `signature`), as `security.KEY`: a directory holds no interface
    /// sessions and calls no one, so it refuses them.
    pub(crate) fn agent_only(&self) -> Option<&'static str> {
        [
            ("security.encryption", self.encryption.is_some()),
            ("security.authentication", self.authentication.is_some()),
            ("security.signature", self.signature.is_some()),
        ]
        .into_iter()
        .find_map(|(key, given)| given.then_some(key))
    }

    /// The policy, each wrong value refused by its key.
    pub(crate) fn check(self) -> Result<Security, Problem> {
        let mut security = Security::default();
        if let Some(value) = &self.encryption {
            security.encryption = choose(
                "security.encryption",
                value,
                &[
                    ("off", Encryption::Off),
                    ("preferred", Encryption::Preferred),
                    ("required", Encryption::Required),
                ],
            )?;
        }
        if let Some(value) = &self.authentication {
            security.authentication = choose(
                "security.authentication",
                value,
                &[
                    ("optional", Authentication::Optional),
                    ("required", Authentication::Required),
                ],
            )?;
        }
        if let Some(value) = &self.signature {
            security.signature_form = choose(
                "security.signature",
                value,
                &[
                    ("http-signatures", SignatureForm::HttpSignatures),
                    ("didwba", SignatureForm::LegacyDidWba),
                ],
            )?;
        }
        match self.resolve_loopback_over_http {
            None => {}
            Some(Value::Bool(loopback)) => security.resolver.allow_loopback_http = loopback,
            Some(other) => {
                return Err(Problem::key(
                    "security.resolve_loopback_over_http",
                    format!("{other} is not true or false"),
                ))
            }
        }
        match self.legacy_didwba {
            None => {}
            Some(Value::Bool(legacy)) => security.legacy_didwba = legacy,
            Some(other) => {
                return Err(Problem::key(
                    "security.legacy_didwba",
                    format!("{other} is not true or false"),
                ))
            }
        }
        let resolver = &mut security.resolver;
        for (key, given, target) in [
            (
                "security.resolver_connect_timeout",
                self.resolver_connect_timeout,
                &mut resolver.connect_timeout,
            ),
            (
                "security.resolver_first_byte_timeout",
                self.resolver_first_byte_timeout,
                &mut resolver.first_byte_timeout,
            ),
        ] {
            if let Some(Humane(duration)) = given {
                if duration.is_zero() {
                    return Err(Problem::key(key, "must be more than zero"));
                }
                *target = duration;
            }
        }
        if let Some(count) = self.resolver_max_concurrent_per_address {
            if count == 0 {
                return Err(Problem::key(
                    "security.resolver_max_concurrent_per_address",
                    "must be at least 1",
                ));
            }
            resolver.max_concurrent_per_address = count;
        }
        Ok(security)
    }
}

/// An action's `allow`: `"anyone"`, `"authenticated"`, or a non-empty list of DIDs and DID
/// prefixes ending in `:*` (a single DID or prefix may be written without the list).
fn check_allow(value: Option<Value>, key: &str) -> Result<Allow, Problem> {
    const EXPECTED: &str = "expected \"anyone\", \"authenticated\", or a list of DIDs and DID \
                            prefixes ending in \":*\" (like [\"did:wba:partner.example:*\"])";
    let pattern = |text: &str, key: &str| {
        DidPattern::parse(text).map_err(|error| Problem::key(key, format!("{text:?}: {error}")))
    };
    match value {
        None => Ok(Allow::Anyone),
        Some(Value::String(text)) => match text.as_str() {
            "anyone" => Ok(Allow::Anyone),
            "authenticated" => Ok(Allow::Authenticated),
            did if did.starts_with("did:") => Ok(Allow::Dids(vec![pattern(did, key)?])),
            other => Err(Problem::key(key, format!("{other:?}: {EXPECTED}"))),
        },
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(Problem::key(
                    key,
                    "is an empty list: no one could call the action (list DIDs, or remove the \
                     action)",
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    let item_key = format!("{key}[{index}]");
                    match item {
                        Value::String(text) => pattern(text, &item_key),
                        _ => Err(Problem::key(
                            item_key,
                            "expected a DID or a DID prefix ending in \":*\", as a string",
                        )),
                    }
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Allow::Dids)
        }
        Some(_) => Err(Problem::key(key, EXPECTED)),
    }
}

/// `host:port`, with a port number (0 picks a free one).
fn check_listen(listen: &str) -> Result<(), String> {
    let Some((host, port)) = listen.rsplit_once(':') else {
        return Err(format!(
            "{listen:?} is not host:port (e.g. \"127.0.0.1:8080\")"
        ));
    };
    if host.is_empty() {
        return Err(format!("{listen:?} has no host (e.g. \"127.0.0.1:8080\")"));
    }
    port.parse::<u16>()
        .map(|_| ())
        .map_err(|_| format!("{port:?} in {listen:?} is not a port number"))
}

impl ActionSection {
    fn check(self, key: &str, base: &Path) -> Result<ConfiguredAction, Problem> {
        let name = self.name.trim().to_owned();
        if name.is_empty() {
            return Err(Problem::key(format!("{key}.name"), "is empty"));
        }
        let input = schema(self.input, &format!("{key}.input"), base)?;
        let output = schema(self.output, &format!("{key}.output"), base)?;
        let allow = check_allow(self.allow, &format!("{key}.allow"))?;
        let mode = match &self.mode {
            None => ActionMode::Reply,
            Some(mode) => choose(
                &format!("{key}.mode"),
                mode,
                &[
                    ("reply", ActionMode::Reply),
                    ("notify", ActionMode::Notify),
                    ("progress", ActionMode::Progress),
                    ("stream", ActionMode::Stream),
                ],
            )?,
        };
        let stream =
            match (mode, self.stream) {
                (ActionMode::Stream, Some(stream)) => Some(stream.check(&format!("{key}.stream"))?),
                (ActionMode::Stream, None) => return Err(Problem::key(
                    format!("{key}.stream"),
                    "is missing: a stream action says what its streams carry ([actions.stream] \
                     with content_type and initial_credit)",
                )),
                (_, Some(_)) => {
                    return Err(Problem::key(
                        format!("{key}.stream"),
                        format!(
                            "only a stream action has one (this one's mode is {:?})",
                            mode.as_str()
                        ),
                    ))
                }
                (_, None) => None,
            };
        if self.http.is_some() && matches!(mode, ActionMode::Progress | ActionMode::Stream) {
            return Err(Problem::key(
                format!("{key}.mode"),
                format!(
                    "an http backend serves the modes \"reply\" and \"notify\", not {:?}: use an exec backend",
                    mode.as_str()
                ),
            ));
        }
        let backend = match (self.exec, self.http) {
            (Some(exec), None) => {
                let mut exec = exec.check(&format!("{key}.exec"), base)?;
                if let Some(stream) = &stream {
                    exec =
                        exec.frame_bytes(usize::try_from(stream.frame_bytes).unwrap_or(usize::MAX));
                }
                Backend::Exec(exec)
            }
            (None, Some(http)) => Backend::Http(http.check(&format!("{key}.http"), base)?),
            (None, None) => {
                return Err(Problem::key(
                    key,
                    format!("the action `{name}` has no backend: give `exec` or `http`"),
                ))
            }
            (Some(_), Some(_)) => {
                return Err(Problem::key(
                    key,
                    format!(
                        "the action `{name}` has two backends: give `exec` or `http`, not both"
                    ),
                ))
            }
        };
        Ok(ConfiguredAction {
            spec: ActionSpec {
                name,
                description: self.description,
                input,
                output,
            },
            backend,
            allow,
            mode,
            stream,
        })
    }
}

impl StreamSection {
    fn check(self, key: &str) -> Result<StreamSpec, Problem> {
        if self.content_type.trim().is_empty() {
            return Err(Problem::key(format!("{key}.content_type"), "is empty"));
        }
        if self
            .output_content_type
            .as_ref()
            .is_some_and(|media| media.trim().is_empty())
        {
            return Err(Problem::key(
                format!("{key}.output_content_type"),
                "is empty",
            ));
        }
        let initial_credit = nonzero(self.initial_credit, &format!("{key}.initial_credit"))?;
        if self.frame_bytes > 0 && initial_credit < u64::from(self.frame_bytes) {
            return Err(Problem::key(
                format!("{key}.initial_credit"),
                format!(
                    "{initial_credit} is less than one frame ({} bytes): nothing could be sent",
                    self.frame_bytes
                ),
            ));
        }
        Ok(StreamSpec {
            content_type: self.content_type,
            output_content_type: self.output_content_type,
            frame_bytes: self.frame_bytes,
            initial_credit,
            realtime: self.realtime,
        })
    }
}

/// A schema given inline (`inline_key`: a table, `true`/`false`, or a file path as for
/// actions) or as a file (`file_key`), exactly one of them.
fn inline_or_file(
    inline: Option<Value>,
    file: Option<PathBuf>,
    key: &str,
    (inline_key, file_key): (&str, &str),
    base: &Path,
) -> Result<Value, Problem> {
    match (inline, file) {
        (Some(value), None) => schema(value, &format!("{key}.{inline_key}"), base),
        (None, Some(file)) => schema(
            Value::String(file.to_string_lossy().into_owned()),
            &format!("{key}.{file_key}"),
            base,
        ),
        (None, None) => Err(Problem::key(
            key,
            format!("give `{inline_key}` (a JSON Schema) or `{file_key}` (its file)"),
        )),
        (Some(_), Some(_)) => Err(Problem::key(
            key,
            format!("give `{inline_key}` or `{file_key}`, not both"),
        )),
    }
}

/// An affordance's name: not empty.
fn affordance_name(name: &str, key: &str) -> Result<String, Problem> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Problem::key(format!("{key}.name"), "is empty"));
    }
    Ok(name.to_owned())
}

impl PropertySection {
    fn check(self, key: &str, base: &Path) -> Result<ConfiguredProperty, Problem> {
        let name = affordance_name(&self.name, key)?;
        let schema = inline_or_file(
            self.schema,
            self.schema_file,
            key,
            ("schema", "schema_file"),
            base,
        )?;
        let initial_key = format!("{key}.initial");
        let Some(initial) = self.initial else {
            return Err(Problem::key(
                initial_key,
                "is missing: a property starts with a value its schema accepts",
            ));
        };
        // The schema compiled in `schema`.
        if let Ok(validator) = jsonschema::validator_for(&schema) {
            if let Some(error) = validator.iter_errors(&initial).next() {
                return Err(Problem::key(
                    initial_key,
                    format!(
                        "its schema refuses it: {error} (at {})",
                        error.instance_path()
                    ),
                ));
            }
        }
        let mut property = Property::new(schema, initial).description(self.description);
        if self.writable {
            property = property.writable();
        }
        if self.observable {
            property = property.observable();
        }
        Ok(ConfiguredProperty { name, property })
    }
}

impl EventSection {
    fn check(self, key: &str, base: &Path) -> Result<ConfiguredEvent, Problem> {
        let name = affordance_name(&self.name, key)?;
        let data = inline_or_file(self.data, self.data_file, key, ("data", "data_file"), base)?;
        Ok(ConfiguredEvent {
            name,
            event: Event::new(data).description(self.description),
        })
    }
}

/// The event ingest token, `${NAME}` replaced by the environment variable NAME: not empty,
/// printable ASCII without spaces (it travels in a header).
fn check_token(token: &str, env: &impl Fn(&str) -> Option<String>) -> Result<Secret, String> {
    let mut expanded = String::new();
    let mut rest = token;
    while let Some(start) = rest.find("${") {
        expanded.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(
                "`${` without its `}`: write `${NAME}` for the environment variable NAME"
                    .to_owned(),
            );
        };
        let name = &after[..end];
        if name.is_empty() {
            return Err("`${}` names no environment variable".to_owned());
        }
        match env(name) {
            Some(value) => expanded.push_str(&value),
            None => return Err(format!("the environment variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    expanded.push_str(rest);
    if expanded.is_empty() {
        return Err("is empty".to_owned());
    }
    if !expanded.chars().all(|c| c.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces (it travels in a header)".to_owned());
    }
    Ok(Secret(expanded))
}

/// The file at `path` (a configured path joined to the configuration's directory); an
/// error names `key` and the path.
fn read_file(path: &Path, key: &str) -> Result<Vec<u8>, Problem> {
    std::fs::read(path)
        .map_err(|error| Problem::key(key, format!("cannot read {}: {error}", path.display())))
}

/// A JSON Schema given inline (a table, or `true`/`false`) or as the path of a JSON file;
/// it must compile.
fn schema(value: Value, key: &str, base: &Path) -> Result<Value, Problem> {
    let schema = match value {
        Value::String(file) => {
            let path = base.join(&file);
            let bytes = read_file(&path, key)?;
            serde_json::from_slice(&bytes).map_err(|error| {
                Problem::key(key, format!("{} is not JSON: {error}", path.display()))
            })?
        }
        inline @ (Value::Object(_) | Value::Bool(_)) => inline,
        _ => {
            return Err(Problem::key(
                key,
                "expected a JSON Schema (a table) or the path of a JSON Schema file",
            ))
        }
    };
    jsonschema::validator_for(&schema)
        .map_err(|error| Problem::key(key, format!("not a valid JSON Schema: {error}")))?;
    Ok(schema)
}

impl ExecSection {
    fn check(self, key: &str, base: &Path) -> Result<ExecAction, Problem> {
        if self.command.trim().is_empty() {
            return Err(Problem::key(format!("{key}.command"), "is empty"));
        }
        // A program named by a path is found from the configuration's directory; a bare
        // name is looked up in PATH.
        let program = if self.command.contains('/') {
            base.join(&self.command).to_string_lossy().into_owned()
        } else {
            self.command
        };
        let cwd = base.join(self.cwd.unwrap_or_default());
        find_program(&program, self.env.get("PATH"), &cwd)
            .map_err(|message| Problem::key(format!("{key}.command"), message))?;
        let mut action = ExecAction::new(program).args(self.args).current_dir(cwd);
        for (name, value) in self.env {
            action = action.env(name, value);
        }
        if let Some(timeout) = self.timeout {
            action = action.timeout(positive(timeout, &format!("{key}.timeout"))?);
        }
        if let Some(bytes) = self.max_output_bytes {
            action = action.max_output_bytes(nonzero(bytes, &format!("{key}.max_output_bytes"))?);
        }
        if let Some(bytes) = self.max_line_bytes {
            action = action.max_line_bytes(nonzero(bytes, &format!("{key}.max_line_bytes"))?);
        }
        Ok(action)
    }
}

/// Checks that `program` can be run: a path names an executable file, a bare name is
/// found in `PATH` (the one the configuration's `env` gives the command, else ours).
fn find_program(program: &str, path: Option<&String>, cwd: &Path) -> Result<(), String> {
    let search = path.cloned().or_else(|| std::env::var("PATH").ok());
    which::which_in(program, search, cwd)
        .map(drop)
        .map_err(|_| {
            if program.contains('/') {
                format!("{program} is not an executable file")
            } else {
                format!("`{program}` is not a command found in PATH")
            }
        })
}

/// What a node setting refused says, without the `configuration:` its error starts with.
fn config_problem(error: concord_node::NodeError) -> String {
    match error {
        concord_node::NodeError::Config(message) => message,
        other => other.to_string(),
    }
}

impl HttpSection {
    fn check(self, key: &str, base: &Path) -> Result<HttpAction, Problem> {
        let mut action = HttpAction::new(&self.url)
            .map_err(|error| Problem::key(format!("{key}.url"), config_problem(error)))?;
        if let Some(timeout) = self.timeout {
            action = action.timeout(positive(timeout, &format!("{key}.timeout"))?);
        }
        if let Some(bytes) = self.max_response_bytes {
            action =
                action.max_response_bytes(nonzero(bytes, &format!("{key}.max_response_bytes"))?);
        }
        if let Some(file) = self.ca_cert {
            let ca_key = format!("{key}.ca_cert");
            let pem = read_file(&base.join(file), &ca_key)?;
            action = action
                .trust_root_certificates_pem(pem)
                .map_err(|error| Problem::key(&ca_key, config_problem(error)))?;
        }
        Ok(action)
    }
}

impl LlmSection {
    fn check(
        self,
        env: &impl Fn(&str) -> Option<String>,
        base: &Path,
    ) -> Result<Option<LlmConfig>, Problem> {
        if !self.enabled {
            return Ok(None);
        }
        // A `ca_cert` here replaces the environment's: its file is not read.
        let from_env = match &self.ca_cert {
            Some(_) => LlmConfig::from_lookup(|name| {
                (name != concord_llm::ENV_CA_CERT)
                    .then(|| env(name))
                    .flatten()
            }),
            None => LlmConfig::from_lookup(env),
        }
        .map_err(|error| Problem::key("llm", format!("from the environment: {error}")))?;
        let base_url = match (self.base_url, &from_env) {
            (Some(url), _) => url,
            (None, Some(config)) => config.base_url.clone(),
            (None, None) => {
                return Err(Problem::key(
                    "llm.base_url",
                    "is missing, and the environment configures no LLM \
                     (CONCORD_LLM_BASE_URL or OPENAI_BASE_URL)",
                ))
            }
        };
        let model = match (self.model, &from_env) {
            (Some(model), _) => model,
            (None, Some(config)) => config.model.clone(),
            (None, None) => concord_llm::DEFAULT_MODEL.to_owned(),
        };
        let mut config = LlmConfig::new(base_url, model);
        match self.api_key_env {
            Some(name) => match env(&name).filter(|key| !key.trim().is_empty()) {
                Some(key) => config = config.with_api_key(key.trim()),
                None => {
                    return Err(Problem::key(
                        "llm.api_key_env",
                        format!("the environment variable {name} is not set"),
                    ))
                }
            },
            None => config.api_key = from_env.as_ref().and_then(|config| config.api_key.clone()),
        }
        config.root_certificates_pem = match self.ca_cert {
            Some(file) => Some(read_file(&base.join(file), "llm.ca_cert")?),
            None => from_env.and_then(|config| config.root_certificates_pem),
        };
        if let Some(timeout) = self.request_timeout {
            config = config.with_request_timeout(timeout.into());
        }
        if let Some(retries) = self.max_retries {
            config = config.with_max_retries(retries);
        }
        config.validate().map_err(|error| match error {
            LlmError::InvalidConfig { setting, reason } => {
                Problem::key(format!("llm.{setting}"), reason)
            }
            other => Problem::key("llm", other),
        })?;
        Ok(Some(config))
    }
}

impl LimitsSection {
    /// The node's limits: each key given replaces the default; a wrong one is refused by key.
    pub(crate) fn check(self) -> Result<Limits, Problem> {
        let mut limits = Limits::default();
        // Each limit given replaces the default.
        macro_rules! given {
            ($section:expr => $target:expr; $($field:ident),+) => {$(
                if let Some(value) = $section.$field {
                    $target.$field = value.into();
                }
            )+};
        }
        given!(self => limits;
            max_frame_size,
            max_meta_message_size,
            max_candidate_size,
            max_test_cases_size,
            max_sessions,
            max_calls_in_flight,
            max_backend_calls,
            max_backend_calls_per_address,
            backend_call_wait,
            max_backend_waiting,
            max_backend_waiting_per_address,
            max_long_backend_calls,
            max_long_backend_calls_per_address,
            idle_shed_after,
            max_pending_hellos,
            max_sessions_per_address,
            max_pending_hellos_per_address,
            pending_hello_shed_after,
            max_holding_sessions,
            max_holding_sessions_per_address,
            ping_interval,
            pong_timeout,
            stream_idle_timeout,
            max_connections,
            max_connections_per_address,
            connection_rate_per_address,
            connection_burst_per_address,
            request_rate_per_address,
            request_burst_per_address,
            http_header_timeout,
            // The WoT HTTP binding's event streams and long polls.
            http_sse_queue,
            http_sse_queue_bytes,
            http_sse_keep_alive,
            http_long_poll_timeout,
            max_negotiation_rounds,
            max_code_generations,
            max_fix_rounds,
            verification_timeout,
            max_concurrent_negotiation_work,
            // A served directory's JSONPath searches.
            directory_searches,
            directory_searches_per_address,
            hello_timeout,
            description_max_age,
            resume_cache_ttl,
            idle_timeout,
            first_proposal_timeout,
            negotiation_deadline,
            negotiation_timeout,
            code_generation_timeout,
            call_timeout,
            transcript_max_count,
            transcript_max_age,
            transcript_prune_interval,
            transcript_text_max_bytes,
            transcript_max_frames,
            protocol_max_count,
            protocol_max_per_peer
        );
        // The WoT HTTP binding's request bodies.
        given!(self => limits; http_max_body, http_body_timeout);
        // A total given alone keeps its default share per address.
        if self.max_backend_calls.is_some() && self.max_backend_calls_per_address.is_none() {
            limits.max_backend_calls_per_address =
                Limits::backend_share_of(limits.max_backend_calls);
        }
        // Likewise its cap of long-lived calls, which is at most the total.
        if self.max_backend_calls.is_some() && self.max_long_backend_calls.is_none() {
            limits.max_long_backend_calls = Limits::long_backend_share_of(limits.max_backend_calls);
        }
        if limits.max_long_backend_calls > limits.max_backend_calls {
            return Err(Problem::key(
                "limits.max_long_backend_calls",
                format!(
                    "must be at most max_backend_calls ({}), not {}",
                    limits.max_backend_calls, limits.max_long_backend_calls
                ),
            ));
        }
        given!(self.hello => limits.hello;
            max_text_size,
            max_message_id_len,
            max_versions,
            max_capabilities,
            max_candidate_protocols,
            max_string_len,
            max_extra_fields,
            max_extra_size
        );
        given!(self.schema => limits.schema;
            max_depth,
            max_nodes,
            max_values,
            max_enum_values,
            max_members,
            max_branches,
            max_pattern_len,
            max_pattern_total
        );
        given!(self.interaction => limits.interaction;
            max_message_size,
            max_depth,
            max_correlation_id,
            max_action_id,
            max_name,
            max_problem_text,
            max_open_correlations,
            max_events,
            replay_events,
            subscriber_queue,
            subscriber_queue_bytes,
            replay_bytes,
            max_subscribers,
            max_actions,
            max_actions_per_caller,
            reserved_actions,
            finished_actions,
            action_lease,
            max_pending_requests
        );
        // The places lowered alone: the reserve follows them (a quarter).
        if self.interaction.max_actions.is_some() && self.interaction.reserved_actions.is_none() {
            limits.interaction.reserved_actions =
                InteractionLimits::reserve_share_of(limits.interaction.max_actions);
        }
        if let Some(age) = self.interaction.replay_max_age {
            limits.interaction.replay_max_age = Some(age.into());
        }
        given!(self.streams => limits.streams;
            max_streams,
            initial_credit,
            max_receive_buffer,
            max_send_queue,
            max_session_buffer,
            max_reader_queue,
            max_send_room
        );
        given!(self.directory_client => limits.directory_client;
            max_response_bytes,
            max_pages,
            max_listing_bytes,
            max_listing_items,
            timeout
        );
        if let Some(policy) = &self.event_overflow {
            limits.event_overflow = choose(
                "limits.event_overflow",
                policy,
                &[
                    ("drop_oldest", Overflow::DropOldest),
                    ("disconnect", Overflow::Disconnect),
                ],
            )?;
        }
        limits
            .validate()
            .map_err(|invalid| Problem::key(format!("limits.{}", invalid.name), invalid.reason))?;
        Ok(limits)
    }
}

/// Every stream action's initial credit fits in the receive buffer the limits give a
/// stream: a peer may send that much before we read any of it.
fn check_credits(actions: &[ConfiguredAction], limits: &Limits) -> Result<(), Problem> {
    let buffer = limits.streams.max_receive_buffer;
    for (index, action) in actions.iter().enumerate() {
        if let Some(stream) = action.stream.as_ref().filter(|s| s.initial_credit > buffer) {
            return Err(Problem::key(
                format!("actions[{index}].stream.initial_credit"),
                format!(
                    "{} is more than limits.streams.max_receive_buffer ({buffer}) holds: a peer \
                     may send that much before the agent reads any of it; raise the buffer \
                     under [limits.streams] or lower the credit",
                    stream.initial_credit
                ),
            ));
        }
    }
    Ok(())
}

fn positive(duration: Humane, key: &str) -> Result<Duration, Problem> {
    if duration.0.is_zero() {
        return Err(Problem::key(key, "must be longer than zero"));
    }
    Ok(duration.0)
}

fn nonzero<T: Copy + PartialEq + From<u8>>(value: T, key: &str) -> Result<T, Problem> {
    if value == T::from(0) {
        return Err(Problem::key(key, "must be greater than zero"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<AgentConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::write(
            dir.path().join("out.json"),
            r#"{"type": "object", "properties": {"name": {"type": "string"}}}"#,
        )
        .unwrap();
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        AgentConfig::load_with_env(&path, |name| env.get(name).cloned()).map_err(
            |error| match error.problem {
                Problem::Key { key, message } => format!("{key}: {message}"),
                other => other.to_string(),
            },
        )
    }

    const MINIMAL: &str = r#"
[agent]
title = "Shop"

[[actions]]
name = "getName"
input = { type = "object" }
output = "out.json"
exec = { command = "sh", args = ["name.sh"], timeout = "2s" }
"#;

    #[test]
    fn a_cluster_is_read_and_refused_by_key_when_wrong() {
        let node = "[node]\npublic_url = \"https://shop.example/\"\n";
        let config = load(
            &format!(
                "{node}{MINIMAL}\n[cluster]\nnats = [\"nats://10.0.0.5:4222\", \"tls://nats.example:4222\"]\n\
                 timeout = \"500ms\"\nrequire_tls = true\nprotocols_bucket = \"shop_protocols\"\n"
            ),
            &[],
        )
        .unwrap();
        let cluster = config.cluster.unwrap();
        assert_eq!(
            cluster.settings.servers,
            ["nats://10.0.0.5:4222", "tls://nats.example:4222"]
        );
        assert_eq!(
            cluster.settings.operation_timeout,
            Duration::from_millis(500)
        );
        assert!(cluster.settings.require_tls);
        assert_eq!(cluster.buckets.protocols, "shop_protocols");
        assert_eq!(cluster.buckets.nonces, concord_nats::DEFAULT_NONCE_BUCKET);
        // The event stream's retention is the replay buffer's unless set within it.
        assert_eq!(cluster.events.name, concord_nats::DEFAULT_EVENT_STREAM);
        assert_eq!(
            (
                cluster.events.max_messages,
                cluster.events.max_bytes,
                cluster.events.max_age
            ),
            (Some(256), Some(4 * 1024 * 1024), None)
        );
        let events = load(
            &format!(
                "{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\n\
                 stream = \"shop_events\"\nagent = \"shop\"\nmax_messages = 100\nmax_age = \"1h\"\n"
            ),
            &[],
        )
        .unwrap()
        .cluster
        .unwrap()
        .events;
        assert_eq!(
            (events.name.as_str(), events.agent.as_str()),
            ("shop_events", "shop")
        );
        assert_eq!(
            (events.max_messages, events.max_age),
            (Some(100), Some(Duration::from_secs(3600)))
        );
        assert_eq!(cluster.actions_bucket, concord_nats::DEFAULT_ACTION_BUCKET);
        assert_eq!(
            cluster.actions_max_age,
            concord_nats::DEFAULT_ACTION_MAX_AGE
        );
        assert!(!cluster.start_degraded);
        assert_eq!(cluster.settings.replicas, 1);
        let three = load(
            &format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nreplicas = 3\n"),
            &[],
        )
        .unwrap()
        .cluster
        .unwrap();
        assert_eq!(three.settings.replicas, 3);
        assert!(load(MINIMAL, &[]).unwrap().cluster.is_none());
        for (text, expected) in [
            (format!("{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n"), "node.public_url: replicas"),
            (format!("{node}{MINIMAL}\n[cluster]\n"), "cluster.nats: no server given"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\", \"http://b:4222\"]\n"), "cluster.nats[1]: \"http://b:4222\": the scheme must be nats:// or tls://"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\ncredentials = \"none.creds\"\n"), "cluster.credentials: cannot read"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nca_cert = \"none.pem\"\n"), "cluster.ca_cert: cannot read"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\ntimeout = \"0s\"\n"), "cluster.timeout: must be more than zero"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nnonces_bucket = \"a.b\"\n"), "cluster.nonces_bucket: \"a.b\" has '.'"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nconsensus_bucket = \"concord_nonces\"\n"), "cluster.consensus_bucket: \"concord_nonces\" is another bucket's name"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nstream = \"x\"\n"), "unknown field `stream`"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nstream = \"a.b\"\n"), "cluster.events.stream: \"a.b\" has '.'"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nagent = \"shop>\"\n"), "cluster.events.agent: \"shop>\" has '>'"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nmax_messages = 0\n"), "cluster.events.max_messages: must be more than zero"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nmax_messages = 257\n"), "cluster.events.max_messages: 257 is more than limits.interaction.replay_events (256)"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nmax_bytes = 99999999\n"), "cluster.events.max_bytes: 99999999 is more than limits.interaction.replay_bytes"),
            (format!("{node}{MINIMAL}\n[limits.interaction]\nreplay_max_age = \"1m\"\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nmax_age = \"2m\"\n"), "cluster.events.max_age: 2m is longer than limits.interaction.replay_max_age (1m)"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nmax_age = \"10ms\"\n"), "cluster.events.max_age: must be at least one second"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\n[cluster.events]\nretention = 3\n"), "unknown field `retention`"),
            (format!("{node}{MINIMAL}\n[limits.interaction]\nreplay_events = 0\n[cluster]\nnats = [\"nats://a:4222\"]\n"), "limits.interaction.replay_events: replicas sharing events"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nactions_bucket = \"concord_protocols\"\n"), "cluster.actions_bucket: \"concord_protocols\" is another bucket's name"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nactions_bucket = \"a b\"\n"), "cluster.actions_bucket: \"a b\" has ' '"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nactions_max_age = \"10s\"\n"), "cluster.actions_max_age: 10s is too short"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nreplicas = 0\n"), "cluster.replicas: 0 is not a JetStream replication factor: 1 to 5"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nreplicas = 6\n"), "cluster.replicas: 6 is not"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nreplicas = -1\n"), "cluster.replicas: -1 is not"),
            (format!("{node}{MINIMAL}\n[cluster]\nnats = [\"nats://a:4222\"]\nreplicas = \"3\"\n"), "invalid type: string \"3\", expected i64"),
        ] {
            let error = load(&text, &[]).unwrap_err();
            assert!(error.contains(expected), "{error:?} does not say {expected:?}");
        }
    }

    #[test]
    #[cfg(unix)]
    fn a_keys_file_is_read_at_start_and_refused_by_key_when_wrong() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keys = concord_identity::Keys::generate();
        keys.save(&dir.path().join("secrets/agent-keys.json"))
            .unwrap();
        std::fs::write(dir.path().join("out.json"), r#"{"type": "object"}"#).unwrap();
        let config_at = |text: &str| {
            let path = dir.path().join("agent.toml");
            std::fs::write(&path, text).unwrap();
            AgentConfig::load(&path)
        };
        let config = config_at(&format!(
            "{MINIMAL}\n[security]\nkeys_file = \"secrets/agent-keys.json\"\n"
        ))
        .unwrap();
        let path = config.keys_file.unwrap();
        assert_eq!(path, dir.path().join("secrets/agent-keys.json"));
        assert_eq!(
            concord_identity::Keys::load(&path).unwrap().fingerprint(),
            keys.fingerprint()
        );
        assert!(load(MINIMAL, &[]).unwrap().keys_file.is_none());

        let missing = config_at(&format!(
            "{MINIMAL}\n[security]\nkeys_file = \"secrets/none.json\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(missing.contains("security.keys_file"), "{missing}");
        assert!(missing.contains("none.json"), "{missing}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let readable = config_at(&format!(
            "{MINIMAL}\n[security]\nkeys_file = \"secrets/agent-keys.json\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(readable.contains("security.keys_file"), "{readable}");
        assert!(readable.contains("644"), "{readable}");
    }

    #[test]
    fn directories_are_read_and_refused_by_key_when_wrong() {
        let config = load(
            &format!(
                "{MINIMAL}\n[directory]\nurls = [\"http://127.0.0.1:8081\", \"https://d.example/tdd/\"]\n\
                 ttl = \"30s\"\nfirst_retry = \"200ms\"\nmax_retry = \"5s\"\nsign = false\n"
            ),
            &[],
        )
        .unwrap();
        assert_eq!(
            config.directories,
            ["http://127.0.0.1:8081", "https://d.example/tdd/"]
        );
        assert_eq!(config.registration.ttl, Duration::from_secs(30));
        assert_eq!(config.registration.first_retry, Duration::from_millis(200));
        assert_eq!(config.registration.max_retry, Duration::from_secs(5));
        assert_eq!(config.registration.sign, RegistrationSigning::Never);
        for (given, sign) in [
            ("", RegistrationSigning::Auto),
            ("sign = \"auto\"\n", RegistrationSigning::Auto),
            ("sign = true\n", RegistrationSigning::Always),
        ] {
            let text = format!("{MINIMAL}\n[directory]\nurl = \"http://127.0.0.1:8081/\"\n{given}");
            assert_eq!(load(&text, &[]).unwrap().registration.sign, sign, "{given}");
        }
        let one = load(
            &format!("{MINIMAL}\n[directory]\nurl = \"http://127.0.0.1:8081/\"\n"),
            &[],
        )
        .unwrap();
        assert_eq!(one.directories.len(), 1);
        assert_eq!(one.registration, RegistrationSettings::default());
        assert!(load(MINIMAL, &[]).unwrap().directories.is_empty());
        let refused =
            |lines: &str| load(&format!("{MINIMAL}\n[directory]\n{lines}\n"), &[]).unwrap_err();
        for (lines, key) in [
            ("url = \"ftp://x/\"", "directory.url:"),
            ("urls = [\"http://a/\", \"nope\"]", "directory.urls[1]:"),
            ("urls = [\"http://a/\", \"http://a\"]", "directory.urls[1]:"),
            (
                "url = \"http://a/\"\nurls = [\"http://b/\"]",
                "directory.url:",
            ),
            ("ttl = \"5m\"", "directory.urls:"),
            ("url = \"http://a/\"\nttl = \"1s\"", "directory.ttl:"),
            (
                "url = \"http://a/\"\nfirst_retry = \"0s\"",
                "directory.first_retry:",
            ),
            (
                "url = \"http://a/\"\nfirst_retry = \"10s\"\nmax_retry = \"1s\"",
                "directory.max_retry:",
            ),
        ] {
            let error = refused(lines);
            assert!(error.starts_with(key), "{lines}: {error}");
        }
        assert!(refused("url = \"http://a/\"\ncolour = 1").contains("colour"));
        assert!(refused("url = \"http://a/\"\nsign = \"no\"").contains("true, false or \"auto\""));
        let limits = load(
            &format!(
                "{MINIMAL}\n[limits.directory_client]\nmax_response_bytes = 1024\nmax_pages = 3\n\
                 max_listing_bytes = 4096\nmax_listing_items = 7\ntimeout = \"2s\"\n"
            ),
            &[],
        )
        .unwrap()
        .limits
        .directory_client;
        assert_eq!(limits.max_response_bytes, 1024);
        assert_eq!(limits.max_pages, 3);
        assert_eq!(limits.max_listing_bytes, 4096);
        assert_eq!(limits.max_listing_items, 7);
        assert_eq!(limits.timeout, Duration::from_secs(2));
        let error = load(
            &format!("{MINIMAL}\n[limits.directory_client]\nmax_pages = 0\n"),
            &[],
        )
        .unwrap_err();
        assert!(
            error.starts_with("limits.directory_client.max_pages:"),
            "{error}"
        );
        let error = load(
            &format!("{MINIMAL}\n[limits.directory_client]\nmax_listing_items = 0\n"),
            &[],
        )
        .unwrap_err();
        assert!(
            error.starts_with("limits.directory_client.max_listing_items:"),
            "{error}"
        );
    }

    #[test]
    fn a_minimal_configuration_takes_the_defaults() {
        let config = load(MINIMAL, &[]).unwrap();
        assert_eq!(config.title, "Shop");
        assert_eq!(config.listen, DEFAULT_LISTEN);
        assert!(config.llm.is_none());
        assert_eq!(config.limits, Limits::default());
        assert_eq!(
            config.actions[0].spec.output["properties"]["name"]["type"],
            "string"
        );
        assert!(matches!(config.actions[0].backend, Backend::Exec(_)));
    }

    #[test]
    fn the_preparation_bounds_can_be_set() {
        let text = format!(
            "{MINIMAL}\n[limits]\nmax_code_generations = 2\nmax_fix_rounds = 0\n\
             verification_timeout = \"5s\"\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(limits.max_code_generations, 2);
        assert_eq!(limits.max_fix_rounds, 0);
        assert_eq!(limits.verification_timeout, Duration::from_secs(5));
        let text = format!("{MINIMAL}\n[limits]\nmax_generations = 2\n");
        let error = load(&text, &[]).unwrap_err();
        assert!(error.contains("unknown field `max_generations`"), "{error}");
    }

    #[test]
    fn the_http_bindings_event_stream_limits_are_set_and_a_zero_is_refused_by_key() {
        let text = format!(
            "{MINIMAL}\n[limits]\nhttp_sse_queue = 8\nhttp_sse_queue_bytes = 4096\n\
             http_sse_keep_alive = \"2s\"\nhttp_long_poll_timeout = \"5s\"\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(limits.http_sse_queue, 8);
        assert_eq!(limits.http_sse_queue_bytes, 4096);
        assert_eq!(limits.http_sse_keep_alive, Duration::from_secs(2));
        assert_eq!(limits.http_long_poll_timeout, Duration::from_secs(5));
        let text = format!("{MINIMAL}\n[limits]\nhttp_sse_queue = 0\n");
        let error = load(&text, &[]).unwrap_err();
        assert!(error.contains("http_sse_queue"), "{error}");
    }

    #[test]
    fn the_descriptions_max_age_is_set_and_may_be_zero() {
        let limits = load(
            &format!("{MINIMAL}\n[limits]\ndescription_max_age = \"90s\"\n"),
            &[],
        )
        .unwrap()
        .limits;
        assert_eq!(limits.description_max_age, Duration::from_secs(90));
        // Zero: requesters revalidate the description on every connect.
        let limits = load(
            &format!("{MINIMAL}\n[limits]\ndescription_max_age = \"0s\"\n"),
            &[],
        )
        .unwrap()
        .limits;
        assert_eq!(limits.description_max_age, Duration::ZERO);
    }

    #[test]
    fn the_resume_cache_ttl_is_set_and_may_be_zero() {
        let read = |value: &str| {
            load(
                &format!("{MINIMAL}\n[limits]\nresume_cache_ttl = \"{value}\"\n"),
                &[],
            )
            .unwrap()
            .limits
            .resume_cache_ttl
        };
        assert_eq!(read("2s"), Duration::from_secs(2));
        // Zero: every 0-RTT hello asks the store.
        assert_eq!(read("0s"), Duration::ZERO);
    }

    #[test]
    fn every_limit_of_the_node_can_be_set_including_hello_and_schema_bounds() {
        let text = format!(
            "{MINIMAL}\n[limits]\nmax_sessions_per_address = 3\nhttp_header_timeout = \"2s\"\n\
             max_candidate_size = 1000\nfirst_proposal_timeout = \"750ms\"\nprotocol_max_count = 9\n\
             [limits.hello]\nmax_text_size = 4096\n[limits.schema]\nmax_enum_values = 10\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(limits.max_sessions_per_address, 3);
        assert_eq!(limits.http_header_timeout, Duration::from_secs(2));
        assert_eq!(limits.max_candidate_size, 1000);
        assert_eq!(limits.first_proposal_timeout, Duration::from_millis(750));
        assert_eq!(limits.protocol_max_count, 9);
        assert_eq!(limits.hello.max_text_size, 4096);
        assert_eq!(limits.schema.max_enum_values, 10);
        // What was not given keeps its default.
        assert_eq!(
            limits.hello.max_message_id_len,
            Limits::default().hello.max_message_id_len
        );
        assert_eq!(limits.max_sessions, Limits::default().max_sessions);
        let text = format!("{MINIMAL}\n[limits.hello]\nmax_size = 1\n");
        let error = load(&text, &[]).unwrap_err();
        assert!(error.contains("unknown field `max_size`"), "{error}");
    }

    #[test]
    fn the_backend_call_budget_can_be_set_and_is_refused_by_key_when_wrong() {
        let text = format!(
            "{MINIMAL}\n[limits]\nmax_backend_calls = 6\nmax_backend_calls_per_address = 3\n\
             backend_call_wait = \"2s\"\nmax_backend_waiting = 9\n\
             max_backend_waiting_per_address = 4\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(
            (
                limits.max_backend_calls,
                limits.max_backend_calls_per_address,
                limits.backend_call_wait
            ),
            (6, 3, Duration::from_secs(2))
        );
        assert_eq!(
            (
                limits.max_backend_waiting,
                limits.max_backend_waiting_per_address
            ),
            (9, 4)
        );
        // The total alone: the share follows it.
        let alone = format!("{MINIMAL}\n[limits]\nmax_backend_calls = 3\n");
        assert_eq!(
            load(&alone, &[])
                .unwrap()
                .limits
                .max_backend_calls_per_address,
            2
        );
        let error =
            |lines: &str| load(&format!("{MINIMAL}\n[limits]\n{lines}\n"), &[]).unwrap_err();
        for key in [
            "max_backend_calls",
            "max_backend_calls_per_address",
            "max_backend_waiting",
            "max_backend_waiting_per_address",
        ] {
            assert_eq!(
                error(&format!("{key} = 0")),
                format!("limits.{key}: must be greater than zero")
            );
        }
        assert_eq!(
            error("backend_call_wait = \"0s\""),
            "limits.backend_call_wait: must be greater than zero"
        );
        assert_eq!(
            error("max_backend_calls = 2\nmax_backend_calls_per_address = 3"),
            "limits.max_backend_calls_per_address: must be at most max_backend_calls (2), not 3"
        );
    }

    #[test]
    fn the_long_lived_calls_cap_can_be_set_follows_a_lone_total_and_is_refused_by_key() {
        let text = format!(
            "{MINIMAL}\n[limits]\nmax_backend_calls = 6\nmax_long_backend_calls = 2\n\
             max_long_backend_calls_per_address = 2\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(
            (
                limits.max_long_backend_calls,
                limits.max_long_backend_calls_per_address
            ),
            (2, 2)
        );
        // The total alone: the cap is half of it.
        let alone = format!("{MINIMAL}\n[limits]\nmax_backend_calls = 12\n");
        let limits = load(&alone, &[]).unwrap().limits;
        assert_eq!(
            (
                limits.max_long_backend_calls,
                limits.max_long_backend_calls_per_address
            ),
            (6, 1)
        );
        let error =
            |lines: &str| load(&format!("{MINIMAL}\n[limits]\n{lines}\n"), &[]).unwrap_err();
        for key in [
            "max_long_backend_calls",
            "max_long_backend_calls_per_address",
        ] {
            assert_eq!(
                error(&format!("{key} = 0")),
                format!("limits.{key}: must be greater than zero")
            );
        }
        assert_eq!(
            error("max_backend_calls = 4\nmax_long_backend_calls = 5"),
            "limits.max_long_backend_calls: must be at most max_backend_calls (4), not 5"
        );
        assert_eq!(
            error("max_long_backend_calls = 2\nmax_long_backend_calls_per_address = 3"),
            "limits.max_long_backend_calls_per_address: must be at most \
             max_long_backend_calls (2), not 3"
        );
    }

    #[test]
    fn pinned_slot_limits_can_be_set_and_are_refused_by_key_at_zero() {
        let text = format!(
            "{MINIMAL}\n[limits]\nmax_pending_hellos_per_address = 4\n\
             pending_hello_shed_after = \"500ms\"\nmax_holding_sessions = 32\n\
             max_holding_sessions_per_address = 2\nping_interval = \"15s\"\n\
             pong_timeout = \"5s\"\nstream_idle_timeout = \"2m\"\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(limits.max_pending_hellos_per_address, 4);
        assert_eq!(limits.pending_hello_shed_after, Duration::from_millis(500));
        assert_eq!(limits.max_holding_sessions, 32);
        assert_eq!(limits.max_holding_sessions_per_address, 2);
        assert_eq!(limits.ping_interval, Duration::from_secs(15));
        assert_eq!(limits.pong_timeout, Duration::from_secs(5));
        assert_eq!(limits.stream_idle_timeout, Duration::from_secs(120));
        for key in [
            "max_holding_sessions_per_address = 0",
            "pong_timeout = \"0s\"",
        ] {
            let text = format!("{MINIMAL}\n[limits]\n{key}\n");
            let error = load(&text, &[]).unwrap_err();
            let name = key.split(' ').next().unwrap_or_default();
            assert!(
                error.contains(&format!("limits.{name}: must be greater than zero")),
                "{error}"
            );
        }
    }

    #[test]
    fn slot_limits_follow_a_lowered_whole() {
        // Lowering a whole alone loads: the shares above it count as it.
        let text = format!(
            "{MINIMAL}
[limits]
max_sessions = 64
max_pending_hellos = 8
hello_timeout = \"1s\"
"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(limits.holding_sessions_in_force(), 64);
        assert_eq!(limits.pending_hellos_per_address_in_force(), 8);
        assert_eq!(
            limits.pending_hello_shed_after_in_force(),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn request_budget_protocol_share_and_queue_bytes_can_be_set_and_zero_is_refused() {
        let text = format!(
            "{MINIMAL}\n[limits]\nrequest_rate_per_address = 5\nrequest_burst_per_address = 6\n\
             protocol_max_per_peer = 7\n[limits.interaction]\nsubscriber_queue_bytes = 8\n\
             replay_bytes = 0\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        assert_eq!(limits.request_rate_per_address, 5);
        assert_eq!(limits.request_burst_per_address, 6);
        assert_eq!(limits.protocol_max_per_peer, 7);
        assert_eq!(limits.interaction.subscriber_queue_bytes, 8);
        assert_eq!(limits.interaction.replay_bytes, 0);
        for key in [
            "request_rate_per_address",
            "request_burst_per_address",
            "protocol_max_per_peer",
        ] {
            let error = load(&format!("{MINIMAL}\n[limits]\n{key} = 0\n"), &[]).unwrap_err();
            assert!(
                error.contains(&format!("limits.{key}: must be greater than zero")),
                "{error}"
            );
        }
        let text = format!("{MINIMAL}\n[limits.interaction]\nsubscriber_queue_bytes = 0\n");
        let error = load(&text, &[]).unwrap_err();
        assert!(
            error.contains("limits.interaction.subscriber_queue_bytes: must be greater than zero"),
            "{error}"
        );
    }

    #[test]
    fn max_actions_lowered_alone_keeps_a_quarter_of_it_in_reserve() {
        let text = format!("{MINIMAL}\n[limits.interaction]\nmax_actions = 32\n");
        let interaction = load(&text, &[]).unwrap().limits.interaction;
        assert_eq!(
            (interaction.max_actions, interaction.reserved_actions),
            (32, 8)
        );
        // Both given: as given, and a reserve not below the places is refused by key.
        let text =
            format!("{MINIMAL}\n[limits.interaction]\nmax_actions = 32\nreserved_actions = 31\n");
        let interaction = load(&text, &[]).unwrap().limits.interaction;
        assert_eq!(interaction.reserved_actions, 31);
        let text =
            format!("{MINIMAL}\n[limits.interaction]\nmax_actions = 32\nreserved_actions = 32\n");
        let error = load(&text, &[]).unwrap_err();
        assert!(
            error.contains("limits.interaction.reserved_actions: must be less than"),
            "{error}"
        );
    }

    #[test]
    fn interaction_and_stream_limits_can_be_set() {
        let text = format!(
            "{MINIMAL}\n[limits.interaction]\nmax_message_size = 2048\nmax_depth = 8\n\
             max_correlation_id = 1\nmax_action_id = 2\nmax_name = 3\nmax_problem_text = 4\n\
             max_open_correlations = 5\nmax_events = 6\nreplay_events = 0\n\
             replay_max_age = \"10m\"\nsubscriber_queue = 7\nmax_subscribers = 8\n\
             max_actions = 9\nmax_actions_per_caller = 10\nreserved_actions = 3\n\
             finished_actions = 0\n\
             action_lease = \"2m\"\nmax_pending_requests = 11\n\
             [limits.streams]\nmax_streams = 12\ninitial_credit = 14\n\
             max_receive_buffer = 15\nmax_send_queue = 16\n"
        );
        let limits = load(&text, &[]).unwrap().limits;
        let interaction = &limits.interaction;
        assert_eq!(
            [
                interaction.max_message_size,
                interaction.max_depth,
                interaction.max_correlation_id,
                interaction.max_action_id,
                interaction.max_name,
                interaction.max_problem_text,
                interaction.max_open_correlations,
                interaction.max_events,
                interaction.replay_events,
                interaction.subscriber_queue,
                interaction.max_subscribers,
                interaction.max_actions,
                interaction.max_actions_per_caller,
                interaction.finished_actions,
                interaction.max_pending_requests,
            ],
            [2048, 8, 1, 2, 3, 4, 5, 6, 0, 7, 8, 9, 10, 0, 11]
        );
        assert_eq!(interaction.reserved_actions, 3);
        assert_eq!(interaction.replay_max_age, Some(Duration::from_secs(600)));
        assert_eq!(interaction.action_lease, Duration::from_secs(120));
        let streams = &limits.streams;
        assert_eq!(streams.max_streams, 12);
        assert_eq!(
            (
                streams.initial_credit,
                streams.max_receive_buffer,
                streams.max_send_queue
            ),
            (14, 15, 16)
        );
        // The rest keeps the node's defaults; no replay age unless given.
        let defaults = Limits::default();
        assert_eq!(limits.max_sessions, defaults.max_sessions);
        assert_eq!(
            load(MINIMAL, &[])
                .unwrap()
                .limits
                .interaction
                .replay_max_age,
            None
        );

        let error = |section: &str, line: &str| {
            load(&format!("{MINIMAL}\n[limits.{section}]\n{line}\n"), &[]).unwrap_err()
        };
        for (section, key, zero) in [
            ("interaction", "max_message_size", "0"),
            ("interaction", "max_depth", "0"),
            ("interaction", "subscriber_queue", "0"),
            ("interaction", "max_actions_per_caller", "0"),
            ("interaction", "replay_max_age", "\"0s\""),
            ("interaction", "action_lease", "\"0s\""),
            ("streams", "max_streams", "0"),
            ("streams", "initial_credit", "0"),
            ("streams", "max_receive_buffer", "0"),
            ("streams", "max_send_queue", "0"),
        ] {
            assert_eq!(
                error(section, &format!("{key} = {zero}")),
                format!("limits.{section}.{key}: must be greater than zero")
            );
        }
        assert_eq!(
            error("interaction", "action_lease = \"1500ms\""),
            "limits.interaction.action_lease: must be a whole number of seconds up to a day, \
             not 1.5 s: the description publishes it (`concord:actionLease`)"
        );
        assert!(error("interaction", "action_lease = \"2d\"").contains("up to a day, not 172800 s"));
        assert_eq!(
            error("interaction", "reserved_actions = 256"),
            "limits.interaction.reserved_actions: must be less than interaction.max_actions \
             (256), not 256"
        );
        assert!(load(
            &format!("{MINIMAL}\n[limits.interaction]\naction_lease = \"1d\"\n"),
            &[]
        )
        .is_ok());
        assert_eq!(
            error("streams", "initial_credit = 2000000"),
            "limits.streams.initial_credit: must be at most streams.max_receive_buffer \
             (1048576), not 2000000"
        );
        let overflow = |policy: &str| {
            load(
                &format!("{MINIMAL}\n[limits]\nevent_overflow = {policy:?}\n"),
                &[],
            )
            .map(|config| config.limits.event_overflow)
        };
        assert_eq!(overflow("disconnect"), Ok(Overflow::Disconnect));
        assert_eq!(overflow("drop_oldest"), Ok(Overflow::DropOldest));
        assert_eq!(
            overflow("block"),
            Err(
                "limits.event_overflow: \"block\" is not one of \"drop_oldest\", \"disconnect\""
                    .to_owned()
            )
        );
        assert!(error("interaction", "lease = \"1s\"").contains("unknown field `lease`"));
        assert!(error("streams", "max_buffer = 1").contains("unknown field `max_buffer`"));
    }

    #[test]
    fn the_session_stream_buffer_can_be_set_and_is_refused_by_key_when_wrong() {
        let streams = |lines: &str| load(&format!("{MINIMAL}\n[limits.streams]\n{lines}\n"), &[]);
        let limits = streams("max_session_buffer = 2097152").unwrap().limits;
        assert_eq!(limits.streams.max_session_buffer, 2_097_152);
        assert_eq!(
            load(MINIMAL, &[])
                .unwrap()
                .limits
                .streams
                .max_session_buffer,
            16 * 1024 * 1024
        );
        assert_eq!(
            streams("max_session_buffer = 0").unwrap_err(),
            "limits.streams.max_session_buffer: must be greater than zero"
        );
        assert_eq!(
            streams("max_session_buffer = 1000").unwrap_err(),
            "limits.streams.max_receive_buffer: must be at most streams.max_session_buffer \
             (1000), not 1048576"
        );
    }

    #[test]
    fn the_stream_queues_can_be_set_and_are_refused_by_key_when_zero() {
        let streams = |lines: &str| load(&format!("{MINIMAL}\n[limits.streams]\n{lines}\n"), &[]);
        let limits = streams("max_reader_queue = 65536\nmax_send_room = 131072")
            .unwrap()
            .limits;
        assert_eq!(limits.streams.max_reader_queue, 65_536);
        assert_eq!(limits.streams.max_send_room, 131_072);
        let default = load(MINIMAL, &[]).unwrap().limits.streams;
        assert_eq!(default.max_reader_queue, 1024 * 1024);
        assert_eq!(default.max_send_room, 1024 * 1024);
        assert_eq!(
            streams("max_reader_queue = 0").unwrap_err(),
            "limits.streams.max_reader_queue: must be greater than zero"
        );
        assert_eq!(
            streams("max_send_room = 0").unwrap_err(),
            "limits.streams.max_send_room: must be greater than zero"
        );
    }

    #[test]
    fn a_stream_actions_credit_must_fit_the_receive_buffer() {
        let stream = |credit: u64, limits: &str| {
            format!(
                "{MINIMAL}\n[[actions]]\nname = \"talk\"\nmode = \"stream\"\ninput = {{}}\n\
                 output = {{}}\nexec = {{ command = \"cat\" }}\n[actions.stream]\n\
                 content_type = \"audio/pcm\"\ninitial_credit = {credit}\n{limits}"
            )
        };
        assert_eq!(
            load(&stream(2_000_000, ""), &[]).unwrap_err(),
            "actions[1].stream.initial_credit: 2000000 is more than \
             limits.streams.max_receive_buffer (1048576) holds: a peer may send that much \
             before the agent reads any of it; raise the buffer under [limits.streams] or \
             lower the credit"
        );
        let larger = "[limits.streams]\nmax_receive_buffer = 4194304\n";
        let config = load(&stream(2_000_000, larger), &[]).unwrap();
        assert_eq!(config.limits.streams.max_receive_buffer, 4_194_304);
        assert_eq!(
            config.actions[1].stream.as_ref().unwrap().initial_credit,
            2_000_000
        );
        // Exactly the buffer is fine.
        assert!(load(&stream(1_048_576, ""), &[]).is_ok());
    }

    #[test]
    fn the_shutdown_grace_defaults_to_ten_seconds_and_can_be_set() {
        assert_eq!(
            load(MINIMAL, &[]).unwrap().shutdown_grace,
            DEFAULT_SHUTDOWN_GRACE
        );
        let text = format!("[node]\nshutdown_grace = \"1500ms\"\n{MINIMAL}");
        assert_eq!(
            load(&text, &[]).unwrap().shutdown_grace,
            Duration::from_millis(1500)
        );
        let text = format!("[node]\nshutdown_grace = \"soon\"\n{MINIMAL}");
        let error = load(&text, &[]).unwrap_err().to_string();
        assert!(error.contains("is not a duration"), "{error}");
    }

    #[test]
    fn inline_schemas_keep_the_order_they_are_written_in() {
        let text = MINIMAL.replace(
            "input = { type = \"object\" }",
            "input = { type = \"object\", properties = { zeta = { type = \"string\" }, alpha = { type = \"string\" }, mid = { type = \"integer\" } } }",
        );
        let config = load(&text, &[]).unwrap();
        let input = &config.actions[0].spec.input;
        let keys: Vec<&str> = input
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["type", "properties"]);
        let properties: Vec<&str> = input["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(properties, ["zeta", "alpha", "mid"]);
    }

    #[test]
    fn the_llm_comes_from_the_file_or_the_environment() {
        let env = [
            ("CONCORD_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("KEY", "sk-1"),
        ];
        let config = load(MINIMAL, &env).unwrap();
        assert_eq!(config.llm.unwrap().base_url, "http://127.0.0.1:9/v1");
        let text = format!("{MINIMAL}\n[llm]\nmodel = \"m\"\napi_key_env = \"KEY\"\n");
        let llm = load(&text, &env).unwrap().llm.unwrap();
        assert_eq!(
            (llm.base_url.as_str(), llm.model.as_str()),
            ("http://127.0.0.1:9/v1", "m")
        );
        assert!(llm.api_key.is_some());
        let off = format!("{MINIMAL}\n[llm]\nenabled = false\n");
        assert!(load(&off, &env).unwrap().llm.is_none());
        assert_eq!(
            load(&text, &[]).unwrap_err(),
            "llm.base_url: is missing, and the environment configures no LLM \
             (CONCORD_LLM_BASE_URL or OPENAI_BASE_URL)"
        );
        let missing_key =
            format!("{MINIMAL}\n[llm]\nbase_url = \"http://x/v1\"\napi_key_env = \"NOPE\"\n");
        assert_eq!(
            load(&missing_key, &[]).unwrap_err(),
            "llm.api_key_env: the environment variable NOPE is not set"
        );
        // `llm.ca_cert` replaces CONCORD_LLM_CA_CERT, whose file is then not even read.
        let own_ca =
            format!("{MINIMAL}\n[llm]\nbase_url = \"https://x/v1\"\nca_cert = \"out.json\"\n");
        let unreadable = [("CONCORD_LLM_CA_CERT", "/nonexistent/ca.pem")];
        assert!(load(&own_ca, &unreadable)
            .unwrap_err()
            .starts_with("llm.ca_cert: no `-----BEGIN CERTIFICATE-----`"));
    }

    #[test]
    fn the_did_resolver_limits_can_be_set_and_zero_is_refused_by_key() {
        let defaults = Security::default().resolver;
        let config = load(MINIMAL, &[]).unwrap();
        assert_eq!(config.security.resolver, defaults);
        let text = format!(
            "{MINIMAL}\n[security]\nresolver_connect_timeout = \"500ms\"\n\
             resolver_first_byte_timeout = \"1s\"\nresolver_max_concurrent_per_address = 3\n"
        );
        let resolver = load(&text, &[]).unwrap().security.resolver;
        assert_eq!(resolver.connect_timeout, Duration::from_millis(500));
        assert_eq!(resolver.first_byte_timeout, Duration::from_secs(1));
        assert_eq!(resolver.max_concurrent_per_address, 3);
        for (key, value, problem) in [
            (
                "resolver_connect_timeout",
                "\"0s\"",
                "must be more than zero",
            ),
            (
                "resolver_first_byte_timeout",
                "\"0s\"",
                "must be more than zero",
            ),
            (
                "resolver_max_concurrent_per_address",
                "0",
                "must be at least 1",
            ),
        ] {
            let text = format!("{MINIMAL}\n[security]\n{key} = {value}\n");
            assert_eq!(
                load(&text, &[]).unwrap_err(),
                format!("security.{key}: {problem}")
            );
        }
    }

    #[test]
    fn security_defaults_to_the_nodes_and_each_key_can_be_set() {
        let config = load(MINIMAL, &[]).unwrap();
        let defaults = Security::default();
        assert_eq!(config.security.encryption, defaults.encryption);
        assert_eq!(config.security.authentication, defaults.authentication);
        assert_eq!(config.security.signature_form, defaults.signature_form);
        assert!(!config.security.resolver.allow_loopback_http);
        assert!(
            !config.security.legacy_didwba,
            "the legacy header is off by default"
        );
        assert!(matches!(config.actions[0].allow, Allow::Anyone));

        let text = format!(
            "{MINIMAL}\n[security]\nencryption = \"required\"\nauthentication = \"required\"\n\
             signature = \"didwba\"\nresolve_loopback_over_http = true\nlegacy_didwba = true\n"
        );
        let security = load(&text, &[]).unwrap().security;
        assert!(security.legacy_didwba);
        assert_eq!(security.encryption, Encryption::Required);
        assert_eq!(security.authentication, Authentication::Required);
        assert_eq!(security.signature_form, SignatureForm::LegacyDidWba);
        assert!(security.resolver.allow_loopback_http);
        for (key, value, expected) in [
            ("encryption", "off", Encryption::Off),
            ("encryption", "preferred", Encryption::Preferred),
        ] {
            let text = format!("{MINIMAL}\n[security]\n{key} = {value:?}\n");
            assert_eq!(load(&text, &[]).unwrap().security.encryption, expected);
        }
        let text = format!("{MINIMAL}\n[security]\nsignature = \"http-signatures\"\n");
        assert_eq!(
            load(&text, &[]).unwrap().security.signature_form,
            SignatureForm::HttpSignatures
        );
        let text = format!("{MINIMAL}\n[security]\nauthentication = \"optional\"\n");
        assert_eq!(
            load(&text, &[]).unwrap().security.authentication,
            Authentication::Optional
        );
    }

    #[test]
    fn an_action_says_who_may_call_it() {
        let with_allow = |allow: &str| {
            let text = MINIMAL.replace(
                "output = \"out.json\"",
                &format!("output = \"out.json\"\nallow = {allow}"),
            );
            load(&text, &[]).map(|config| config.actions.into_iter().next().unwrap().allow)
        };
        assert!(matches!(with_allow("\"anyone\""), Ok(Allow::Anyone)));
        assert!(matches!(
            with_allow("\"authenticated\""),
            Ok(Allow::Authenticated)
        ));
        let partner = "did:wba:partner.example:*";
        let exact = "did:wba:localhost%3A9000:agents:alice";
        match with_allow(&format!("[{partner:?}, {exact:?}]")) {
            Ok(Allow::Dids(patterns)) => {
                let shown: Vec<String> = patterns.iter().map(ToString::to_string).collect();
                assert_eq!(shown, [partner, exact]);
            }
            other => panic!("{other:?}"),
        }
        // One DID may be written without the list.
        match with_allow(&format!("{exact:?}")) {
            Ok(Allow::Dids(patterns)) => assert_eq!(patterns.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn properties_events_modes_streams_and_the_ingest_token_are_read() {
        let text = format!(
            "[node]\nevent_ingest_token = \"tok-${{INGEST}}\"\n{MINIMAL}mode = \"progress\"\n\
             [[actions]]\nname = \"talk\"\nmode = \"stream\"\ninput = {{}}\noutput = {{}}\n\
             exec = {{ command = \"cat\" }}\n\
             [actions.stream]\ncontent_type = \"audio/pcm\"\nframe_bytes = 4\ninitial_credit = 40\n\
             realtime = true\n\
             [[properties]]\nname = \"units\"\ndescription = \"Units.\"\nschema = {{ type = \"integer\" }}\n\
             initial = 3\nwritable = true\n\
             [[properties]]\nname = \"model\"\nschema_file = \"out.json\"\ninitial = {{ name = \"m\" }}\n\
             observable = true\n\
             [[events]]\nname = \"fed\"\ndata_file = \"out.json\"\n"
        );
        let config = load(&text, &[("INGEST", "abc")]).unwrap();
        assert_eq!(
            config.event_ingest_token.as_ref().unwrap().expose(),
            "tok-abc"
        );
        assert_eq!(
            format!("{:?}", config.event_ingest_token),
            "Some(Secret(…))"
        );
        assert_eq!(config.actions[0].mode, ActionMode::Progress);
        assert!(config.actions[0].stream.is_none());
        let talk = &config.actions[1];
        assert_eq!(talk.mode, ActionMode::Stream);
        assert_eq!(
            talk.stream,
            Some(StreamSpec {
                content_type: "audio/pcm".into(),
                output_content_type: None,
                frame_bytes: 4,
                initial_credit: 40,
                realtime: true,
            })
        );
        let names: Vec<&str> = config.properties.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["units", "model"]);
        assert_eq!(
            config.properties[0].property,
            Property::new(serde_json::json!({"type": "integer"}), serde_json::json!(3))
                .writable()
                .description("Units.")
        );
        assert_eq!(config.properties[1].property.clone(), {
            let schema = config.actions[0].spec.output.clone();
            Property::new(schema, serde_json::json!({"name": "m"})).observable()
        });
        assert_eq!(config.events[0].name, "fed");
        // No token, the default mode.
        let config = load(MINIMAL, &[]).unwrap();
        assert!(config.event_ingest_token.is_none());
        assert_eq!(config.actions[0].mode, ActionMode::Reply);
    }

    #[test]
    fn the_http_binding_can_be_turned_off_and_grant_bearer_tokens_from_the_environment() {
        let config = load(MINIMAL, &[]).unwrap();
        assert!(config.http_binding);
        assert!(config.http_bearer.is_empty());
        let text = format!(
            "{MINIMAL}\n[http]\nenabled = false\n[[http.bearer]]\ntoken_env = \"DASH\"\n\
             caller = \"did:wba:example.com:consumers:dashboard\"\n\
             [limits]\nhttp_max_body = 2048\nhttp_body_timeout = \"3s\"\n"
        );
        let config = load(&text, &[("DASH", "0123456789abcdef-token")]).unwrap();
        assert!(!config.http_binding);
        assert_eq!(
            config.http_bearer[0].caller().as_str(),
            "did:wba:example.com:consumers:dashboard"
        );
        assert_eq!(config.limits.http_max_body, 2048);
        assert_eq!(config.limits.http_body_timeout, Duration::from_secs(3));
        // Each fault names its key.
        let error = load(&text, &[]).unwrap_err();
        assert!(
            error.contains("http.bearer[0].token_env: the environment variable DASH is not set"),
            "{error}"
        );
        let error = load(&text, &[("DASH", "short")]).unwrap_err();
        assert!(
            error.contains("http.bearer[0].token_env") && error.contains("at least 16"),
            "{error}"
        );
        let error = load(
            &text.replace("did:wba:example.com", "nodid"),
            &[("DASH", "0123456789abcdef-token")],
        )
        .unwrap_err();
        assert!(
            error.contains("http.bearer[0].caller: not a DID"),
            "{error}"
        );
        let error = load(&format!("{MINIMAL}\n[http]\ntoken = \"x\"\n"), &[]).unwrap_err();
        assert!(error.contains("unknown field `token`"), "{error}");
        let error = load(&format!("{MINIMAL}\n[limits]\nhttp_max_body = 0\n"), &[]).unwrap_err();
        assert!(error.contains("http_max_body"), "{error}");
    }

    #[test]
    fn each_problem_names_its_key() {
        let cases = [
            (MINIMAL.replace("title = \"Shop\"", "title = \" \""), "agent.title: is empty"),
            (
                MINIMAL.replace("timeout = \"2s\"", "timeout = \"soon\""),
                "is not a duration",
            ),
            (
                MINIMAL.replace("timeout = \"2s\"", "timeout = \"0s\""),
                "actions[0].exec.timeout: must be longer than zero",
            ),
            (
                MINIMAL.replace("output = \"out.json\"", "output = \"missing.json\""),
                "actions[0].output: cannot read",
            ),
            (
                MINIMAL.replace("input = { type = \"object\" }", "input = { type = 12 }"),
                "actions[0].input: not a valid JSON Schema",
            ),
            (
                MINIMAL.replace("exec = {", "http = { url = \"http://x/\" }\nexec = {"),
                "actions[0]: the action `getName` has two backends",
            ),
            (
                MINIMAL.replace("exec = { command = \"sh\", args = [\"name.sh\"], timeout = \"2s\" }", "http = { url = \"ftp://x/\" }"),
                "actions[0].http.url: http backend URL \"ftp://x/\" must start with http:// or https://",
            ),
            (format!("{MINIMAL}\n[limits]\nmax_sessions = 0\n"), "limits.max_sessions: must be greater than zero"),
            (format!("{MINIMAL}\n[limits]\ntranscript_max_count = 0\n"), "limits.transcript_max_count: must be greater than zero"),
            (format!("[node]\npublic_url = \"shop.example.com\"\n{MINIMAL}"), "node.public_url: \"shop.example.com\" is not a URL"),
            (format!("[node]\ntls = {{ certificate = \"none.pem\", key = \"none.key\" }}\n{MINIMAL}"), "node.tls.certificate: cannot read"),
            (format!("{MINIMAL}\n[llm]\nbase_url = \"https://x/v1\"\nca_cert = \"out.json\"\n"), "llm.ca_cert: no `-----BEGIN CERTIFICATE-----` block found"),
            (
                MINIMAL.replace("exec = { command = \"sh\", args = [\"name.sh\"], timeout = \"2s\" }", "http = { url = \"https://x/\", ca_cert = \"out.json\" }"),
                "actions[0].http.ca_cert: trusted root certificates: no `-----BEGIN CERTIFICATE-----` block found",
            ),
            (format!("{MINIMAL}\n[limits]\ncall_timeout = \"0s\"\n"), "limits.call_timeout: must be greater than zero"),
            (format!("{MINIMAL}\n[limits]\nmax_code_generations = 0\n"), "limits.max_code_generations: must be greater than zero"),
            (format!("{MINIMAL}\n[limits]\nverification_timeout = \"0s\"\n"), "limits.verification_timeout: must be greater than zero"),
            (format!("{MINIMAL}\n[llm]\nbase_url = \"ftp://x/\"\n"), "llm.base_url: \"ftp://x/\" must be an http or https URL"),
            (format!("{MINIMAL}\n[llm]\nbase_url = \"http://x/v1\"\nmodel = \" \"\n"), "llm.model: the model name is empty"),
            (format!("{MINIMAL}\n[llm]\nbase_url = \"http://x/v1\"\nrequest_timeout = \"0s\"\n"), "llm.request_timeout: the request timeout is zero"),
            (format!("{MINIMAL}\n[limits]\nmax_session = 3\n"), "unknown field `max_session`"),
            (format!("[node]\nlisten = \"8080\"\n{MINIMAL}"), "node.listen: \"8080\" is not host:port"),
            (format!("{MINIMAL}\n[[consensus]]\nuri = \"u\"\ndocument = \"none.md\"\n"), "consensus[0].document: cannot read"),
            ("[agent]\ntitle = \"Shop\"\n".to_owned(), "actions: no action is configured"),
            (format!("{MINIMAL}{}", MINIMAL.replace("[agent]\ntitle = \"Shop\"\n", "")), "actions[1].name: the action `getName` is configured twice"),
            (format!("{MINIMAL}\n[security]\nencryption = \"sometimes\"\n"), "security.encryption: \"sometimes\" is not one of \"off\", \"preferred\", \"required\""),
            (format!("{MINIMAL}\n[security]\nauthentication = \"yes\"\n"), "security.authentication: \"yes\" is not one of \"optional\", \"required\""),
            (format!("{MINIMAL}\n[security]\nsignature = \"rsa\"\n"), "security.signature: \"rsa\" is not one of \"http-signatures\", \"didwba\""),
            (format!("{MINIMAL}\n[security]\nresolve_loopback_over_http = \"yes\"\n"), "security.resolve_loopback_over_http: \"yes\" is not true or false"),
            (format!("{MINIMAL}\n[security]\nlegacy_didwba = \"on\"\n"), "security.legacy_didwba: \"on\" is not true or false"),
            (format!("{MINIMAL}\n[security]\nencrypt = \"off\"\n"), "unknown field `encrypt`"),
            (format!("{MINIMAL}\n[security.limits]\nreplay_capacity = 1\n"), "unknown field `limits`"),
            (MINIMAL.replace("output = \"out.json\"", "output = \"out.json\"\nallow = \"everyone\""), "actions[0].allow: \"everyone\": expected \"anyone\", \"authenticated\", or a list"),
            (MINIMAL.replace("output = \"out.json\"", "output = \"out.json\"\nallow = []"), "actions[0].allow: is an empty list"),
            (MINIMAL.replace("output = \"out.json\"", "output = \"out.json\"\nallow = [\"did:wba:ok.example\", \"did:web:x\"]"), "actions[0].allow[1]: \"did:web:x\""),
            (MINIMAL.replace("output = \"out.json\"", "output = \"out.json\"\nallow = [\"did:wba:ok.example:*\", 3]"), "actions[0].allow[1]: expected a DID"),
            (MINIMAL.replace("output = \"out.json\"", "output = \"out.json\"\nallow = true"), "actions[0].allow: expected \"anyone\""),
            (MINIMAL.replace("output = \"out.json\"", "output = \"out.json\"\nallow = \"did:wba:partner.example*\""), "actions[0].allow: \"did:wba:partner.example*\""),
        ];
        for (text, expected) in cases {
            let error = load(&text, &[]).unwrap_err();
            assert!(
                error.contains(expected),
                "{error:?} does not say {expected:?}"
            );
        }
    }

    #[test]
    fn the_discovery_section_sets_mdns_and_the_owner_and_names_a_wrong_key() {
        let config = load(MINIMAL, &[]).unwrap();
        assert_eq!(
            config.discovery,
            crate::discovery_config::Discovery::default()
        );
        let config = load(
            &format!(
                "{MINIMAL}\n[discovery]\nmdns = true\nowner = {{ name = \"Small Shop\", url = \"https://shop.example\", type = \"Person\" }}\n"
            ),
            &[],
        )
        .unwrap();
        assert!(config.discovery.mdns);
        assert_eq!(
            config.discovery.owner,
            Some(concord_node::Owner::person("Small Shop").with_url("https://shop.example"))
        );
        let cases = [
            (
                "mdns = \"yes\"",
                "discovery.mdns: \"yes\" is not true or false",
            ),
            ("owner = { name = \" \" }", "discovery.owner.name: is empty"),
            (
                "owner = { name = \"S\", type = \"Robot\" }",
                "discovery.owner.type: \"Robot\" is not one of",
            ),
            (
                "owner = { name = \"S\", url = \"not a url\" }",
                "discovery.owner.url: \"not a url\"",
            ),
            (
                "owner = { name = \"S\", email = \"nobody\" }",
                "discovery.owner.email: \"nobody\" is no e-mail address",
            ),
            ("announce = true", "unknown field `announce`"),
        ];
        for (line, expected) in cases {
            let error = load(&format!("{MINIMAL}\n[discovery]\n{line}\n"), &[]).unwrap_err();
            assert!(
                error.contains(expected),
                "{error:?} does not say {expected:?}"
            );
        }
    }
}
