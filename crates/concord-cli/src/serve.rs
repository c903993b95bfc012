//! `concord serve --config agent.toml`: run an agent node serving the configured actions
//! until Ctrl-C (or SIGTERM), then shut down gracefully: no new connections or calls, the
//! calls running answered within `node.shutdown_grace` (default 10 s), then every session
//! closed with code 1001 "the node is shutting down". A second Ctrl-C (or SIGTERM) stops
//! at once.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use concord_handlers::Generator;
use concord_llm::LlmClient;
use concord_node::{ActionMode, Node, NodeError};
use concord_proto::Role;
use concord_store::NewConsensus;

use crate::agent_config::{AgentConfig, Backend, Problem};
use crate::consensus;
use crate::logging;
use crate::output::outln;
use crate::runtime;

/// `concord serve`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord serve --config crates/concord-cli/examples/product-agent.toml
  concord serve --config agent.toml --listen 0.0.0.0:9000 --data-dir ./data

The configuration (TOML) names the agent, its actions with their JSON Schemas and backends
(`exec`: a command run per call, input JSON on stdin, output JSON on stdout; `http`: a POST
per call) and who may call each, the LLM, consensus protocols, limits and security. See
examples/product-agent.toml.

The agent has a DID (did:wba), printed on start: its keys are <data-dir>/identity/keys.json,
created on the first start (`concord identity` shows and exports it), or the file
`security.keys_file` names (never created: replicas share one). The DID names the host
of `node.public_url`, or `localhost` when it serves on a loopback address.
  [security]
  encryption = \"preferred\"       # \"off\" | \"preferred\" | \"required\" (the Noise channel)
  authentication = \"optional\"    # \"optional\" | \"required\" (every caller proves its DID)
  signature = \"http-signatures\"  # or \"didwba\" (ANP's legacy header): how it signs its calls
  resolve_loopback_over_http = false   # test mode: DIDs on localhost resolve over http://
  [[actions]]
  allow = \"anyone\"               # or \"authenticated\", or [\"did:wba:partner.example:*\", …]
  mode = \"reply\"                 # or \"notify\", \"progress\" (exec: {\"progress\": 0.5} lines on
                                 # stdout), \"stream\" (exec: stdin/stdout, with [actions.stream])

Properties, events, and events posted in by backend services (see examples/weather/agent.toml):
  [node]
  event_ingest_token = \"${WEATHER_INGEST_TOKEN}\"   # serves POST /events/{name}, Bearer token
  [[properties]]
  name = \"modelConfiguration\"
  schema_file = \"model-configuration.schema.json\"
  initial = { modelName = \"gpt-4o\" }
  observable = true
  [[events]]
  name = \"userFeedbackReceived\"
  data_file = \"feedback.schema.json\"
  An exec command publishes an event by printing {\"event\": \"userFeedbackReceived\", \"data\": {…}}.

Log lines go to standard error; RUST_LOG=concord_node=debug shows every step.
Ctrl-C or SIGTERM drains the agent: it takes no new connections or calls, lets the calls
running finish within `node.shutdown_grace` (default 10s), then closes every session with a
reason; a second Ctrl-C or SIGTERM stops at once.")]
pub struct ServeArgs {
    /// The agent configuration (TOML).
    #[arg(long, short, value_name = "FILE")]
    config: PathBuf,
    /// Listen here instead of the configuration's `node.listen` (`host:port`; port 0 picks
    /// a free one).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Keep the store here instead of the configuration's `node.data_dir`.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

/// Runs `concord serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = match AgentConfig::load(&args.config) {
        Ok(config) => config,
        Err(error) => {
            crate::output::note(&error);
            return Ok(ExitCode::from(match error.problem {
                Problem::Unreadable(_) => 2,
                _ => 1,
            }));
        }
    };
    logging::init_log("concord_node=info,warn");
    runtime::block_on(serve(config, args))?
}

async fn serve(config: AgentConfig, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let listen = args.listen.unwrap_or_else(|| config.listen.clone());
    let data_dir = match args.data_dir.or_else(|| config.data_dir.clone()) {
        Some(dir) => dir,
        None => concord_store::Store::default_dir().context("no data directory configured")?,
    };
    // The data directory first (its own error), then the identity in it.
    create_private_dir(&data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    // The agent's identity: created on the first start, then the same DID every time. Keys
    // created by a start that fails are removed again (that was no first start).
    let (keys, created) = crate::identity::serving_keys(
        &data_dir,
        config.keys_file.as_deref(),
        config.cluster.is_some(),
    )
    .context("the agent's identity")?;
    let mut created = CreatedKeys(created);
    let mut builder = Node::builder(config.title.clone())
        .data_dir(&data_dir)
        .limits(config.limits.clone())
        .keys(keys)
        .security(config.security.clone());
    if let Some(id) = &config.id {
        builder = builder.id(id.clone());
    }
    builder = config.discovery.apply(builder);
    if let Some(description) = &config.description {
        builder = builder.description(description.clone());
    }
    if let Some(url) = &config.public_url {
        builder = builder.public_url(url.clone());
    }
    if let Some((chain, key)) = &config.tls {
        builder = builder.tls_certificate_pem(chain.clone(), key.clone());
    }
    if let Some(llm) = &config.llm {
        // The operator asked for this LLM: an agent that cannot reach it does not start.
        crate::llm::probe(llm)?;
        builder = builder.llm(llm.clone());
    }
    let names: Vec<String> = config
        .actions
        .iter()
        .map(|action| action.spec.name.clone())
        .collect();
    if let Some(token) = &config.event_ingest_token {
        builder = builder.event_ingest_token(token.expose());
    }
    builder = builder.http_binding(config.http_binding);
    for grant in &config.http_bearer {
        builder = builder.http_bearer(grant.clone());
    }
    // The node hands its publisher to the exec commands (their event lines) when built.
    for action in config.actions {
        builder = builder.allow(action.spec.name.clone(), action.allow);
        builder = match action.backend {
            Backend::Exec(exec) => match (action.mode, action.stream) {
                (ActionMode::Notify, _) => builder.notify_action(action.spec, exec),
                (ActionMode::Progress, _) => builder.progress_action(action.spec, exec),
                (ActionMode::Stream, Some(stream)) => {
                    builder.stream_action(action.spec, stream, exec)
                }
                _ => builder.action(action.spec, exec),
            },
            Backend::Http(http) => match action.mode {
                ActionMode::Notify => builder.notify_action(action.spec, http),
                _ => builder.action(action.spec, http),
            },
        };
    }
    let properties: Vec<String> = config.properties.iter().map(|p| p.name.clone()).collect();
    let events: Vec<String> = config.events.iter().map(|e| e.name.clone()).collect();
    for property in config.properties {
        builder = builder.property(property.name, property.property);
    }
    for event in config.events {
        builder = builder.event(event.name, event.event);
    }
    for url in &config.directories {
        builder = builder.register_with(url.clone());
    }
    builder = builder.registration(config.registration);
    // Replicas: protocols, nonces and consensus protocols in NATS. Unreachable at start is
    // a one-line error naming the key, exit 2 (the agent cannot run as configured).
    let mut degraded = None;
    let cluster = match &config.cluster {
        Some(cluster) => match open_cluster(cluster, &config.security).await {
            Ok(shared) => Some(shared),
            // `start_degraded`: NATS away is an outage, not a configuration error; the
            // replica serves what needs no shared state and recovers when NATS answers.
            Err(("cluster.nats", error)) if cluster.start_degraded => {
                eprintln!(
                    "concord: {}: `cluster.nats`: {error}: starting degraded (cluster.start_degraded): \
                     what needs shared state answers 503 until NATS answers",
                    args.config.display()
                );
                let mut settings = concord_nats::DegradedSettings::new(
                    cluster.settings.clone(),
                    config.security.replay_ttl,
                );
                settings.buckets = cluster.buckets.clone();
                settings.actions_bucket = cluster.actions_bucket.clone();
                settings.actions_max_age = cluster.actions_max_age;
                settings.events = Some(cluster.events.clone());
                degraded = Some(Arc::new(concord_nats::start_degraded(settings)));
                None
            }
            Err((key, error)) => {
                eprintln!("concord: {}: `{key}`: {error}", args.config.display());
                return Ok(ExitCode::from(2));
            }
        },
        None => None,
    };
    if let Some((_, actions)) = &cluster {
        // Progress actions: queried and cancelled on any replica.
        builder = builder
            .action_records(Arc::clone(actions) as Arc<dyn concord_node::ActionRecords>)
            .action_relay(Arc::clone(actions) as Arc<dyn concord_node::ActionRelay>);
    }
    if let Some(degraded) = &degraded {
        builder = builder
            .protocols(Arc::clone(degraded) as Arc<dyn concord_store::ProtocolBook>)
            .nonce_store(Arc::clone(degraded) as Arc<dyn concord_store::NonceStore>)
            .consensus_registry(Arc::clone(degraded) as Arc<dyn concord_store::ConsensusRegistry>)
            .action_records(Arc::clone(degraded) as Arc<dyn concord_node::ActionRecords>)
            .action_relay(Arc::clone(degraded) as Arc<dyn concord_node::ActionRelay>)
            .event_log(Arc::clone(degraded) as Arc<dyn concord_node::EventLog>);
    }
    let cluster = cluster.map(|(shared, _)| shared);
    if let Some(shared) = &cluster {
        builder = builder
            .protocols(Arc::clone(&shared.protocols) as Arc<dyn concord_store::ProtocolBook>)
            .nonce_store(Arc::clone(&shared.nonces) as Arc<dyn concord_store::NonceStore>)
            .consensus_registry(
                Arc::clone(&shared.consensus) as Arc<dyn concord_store::ConsensusRegistry>
            );
    }
    // Replicas' events: one JetStream stream, every replica's subscribers fed from it
    // (started degraded: opened with the buckets, above).
    let max_message_size = config.limits.interaction.max_message_size;
    if let Some(config) = config.cluster.as_ref().filter(|_| cluster.is_some()) {
        match open_events(config).await {
            Ok(log) => {
                warn_beyond_max_payload(&args.config, max_message_size, log.nats());
                builder = builder.event_log(Arc::new(log));
            }
            Err((key, error)) => {
                eprintln!("concord: {}: `{key}`: {error}", args.config.display());
                return Ok(ExitCode::from(2));
            }
        }
    }
    let registry: Option<Arc<dyn concord_store::ConsensusRegistry>> = cluster
        .as_ref()
        .map(|shared| Arc::clone(&shared.consensus) as Arc<dyn concord_store::ConsensusRegistry>)
        .or_else(|| {
            degraded
                .as_ref()
                .map(|degraded| Arc::clone(degraded) as Arc<dyn concord_store::ConsensusRegistry>)
        });
    let node = match builder.build() {
        Ok(node) => node,
        Err(NodeError::Config(problem)) => {
            crate::output::note(format_args!("{}: {problem}", args.config.display()));
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error).context("cannot build the node"),
    };
    let registry = registry
        .unwrap_or_else(|| Arc::clone(node.store()) as Arc<dyn concord_store::ConsensusRegistry>);
    for protocol in &config.consensus {
        if let Some(degraded) = degraded.as_ref().filter(|degraded| !degraded.is_ready()) {
            // Registered once NATS answers; until then it is not offered.
            match consensus_entry(&node, protocol).await {
                Ok(entry) => hold_later(Arc::clone(degraded), Arc::clone(&registry), entry),
                Err(error) => {
                    eprintln!(
                        "concord: {}: `{}`: {}",
                        args.config.display(),
                        protocol.key,
                        logging::error_line(&error)
                    );
                    return Ok(ExitCode::from(1));
                }
            }
            continue;
        }
        if let Err(error) = hold_consensus(&node, &registry, protocol).await {
            eprintln!(
                "concord: {}: `{}`: {}",
                args.config.display(),
                protocol.key,
                logging::error_line(&error)
            );
            return Ok(ExitCode::from(1));
        }
    }
    let server = node
        .serve(&listen)
        .await
        .with_context(|| format!("cannot serve on {listen}"))?;
    outln!(
        "serving {:?}: {} action(s): {}",
        config.title,
        names.len(),
        names.join(", ")
    )?;
    if !properties.is_empty() {
        outln!("properties:  {}", properties.join(", "))?;
    }
    if !events.is_empty() {
        outln!("events:      {}", events.join(", "))?;
    }
    if config.event_ingest_token.is_some() {
        outln!(
            "event ingest: POST {}events/{{name}} (Authorization: Bearer <node.event_ingest_token>)",
            server.url()
        )?;
    }
    if config.http_binding {
        outln!(
            "WoT HTTP:    POST {url}actions/{{name}}, GET|PUT {url}properties/{{name}}{bearer}",
            url = server.url(),
            bearer = if config.http_bearer.is_empty() {
                ""
            } else {
                " (bearer tokens granted)"
            }
        )?;
    }
    if let Some(id) = &config.id {
        outln!("id:          {id}")?;
    }
    outln!("data dir:    {}", data_dir.display())?;
    outln!("listening:   {}", server.local_addr())?;
    match node.llm() {
        Some(client) => outln!(
            "LLM:         {} at {}",
            client.config().model,
            client.config().base_url
        ),
        None => outln!("LLM:         none (deterministic negotiation and code)"),
    }?;
    for protocol in &config.consensus {
        outln!("consensus:   {} {}", protocol.uri, protocol.document.hash())?;
    }
    if let Some(path) = created.keep() {
        eprintln!(
            "concord: created the agent's identity keys: {} (mode 0600)",
            path.display()
        );
    }
    if let Some(did) = server.did() {
        outln!("did:         {did}")?;
    }
    for status in server.registrations() {
        outln!(
            "directory:   {} (registering, ttl {}; state in the log)",
            status.directory,
            humantime::format_duration(config.registration.ttl)
        )?;
    }
    // The endpoint comes last: a script waiting for it has the whole banner.
    outln!("description: {}", server.description_url())?;
    outln!("endpoint:    {}", server.endpoint())?;
    eprintln!("concord: press Ctrl-C to stop");
    // A replica started degraded whose NATS, once it answered, cannot be used as configured
    // stops, as it would have at start (exit 2 naming the key).
    let unusable = async {
        match &degraded {
            Some(degraded) => degraded.failed().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        result = stopped() => result?,
        error = unusable => {
            eprintln!(
                "concord: {}: `{}`: {error}: NATS answered, and this configuration cannot be used",
                args.config.display(),
                config
                    .cluster
                    .as_ref()
                    .map_or("cluster.nats", |cluster| cluster_key(error, cluster))
            );
            let _ = server.shutdown_within(config.shutdown_grace).await;
            return Ok(ExitCode::from(2));
        }
    }
    let grace = config.shutdown_grace;
    eprintln!(
        "concord: shutting down ({} session(s) open): no new calls; calls running may \
         finish within {}; Ctrl-C again to stop at once",
        server.sessions(),
        humantime::format_duration(grace)
    );
    tokio::select! {
        result = server.shutdown_within(grace) => result.context("shutting down")?,
        // Dropping the server closes every session at once.
        result = stopped() => {
            result?;
            eprintln!("concord: stopped at once");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Creates `dir` and its missing parents, each `0700` on Unix (as the store does).
pub(crate) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The key file a start created: removed when dropped unless [`CreatedKeys::keep`] was
/// called (the node served).
pub(crate) struct CreatedKeys(pub(crate) Option<PathBuf>);

impl CreatedKeys {
    /// Keeps the file; its path, when this start created it.
    pub(crate) fn keep(&mut self) -> Option<PathBuf> {
        self.0.take()
    }
}

impl Drop for CreatedKeys {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(&path);
            if let Some(dir) = path.parent() {
                // Only when empty: nothing else is ever removed.
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// The configuration key a NATS error of the cluster names: the file, the replicas, or
/// the bucket or stream it is about (`cluster.nats` for the rest: the servers).
fn cluster_key(
    error: &concord_nats::NatsError,
    cluster: &crate::agent_config::ClusterConfig,
) -> &'static str {
    use concord_nats::NatsError;
    let name = match error {
        NatsError::File {
            what: "credentials",
            ..
        }
        | NatsError::Permission { .. } => return "cluster.credentials",
        NatsError::File { .. } => return "cluster.ca_cert",
        NatsError::Replicas { .. } => return "cluster.replicas",
        NatsError::Bucket { bucket: name, .. }
        | NatsError::WindowTooShort { bucket: name, .. }
        | NatsError::Refused { name, .. }
        | NatsError::Stream { stream: name, .. } => name,
        _ => return "cluster.nats",
    };
    let buckets = &cluster.buckets;
    [
        (&buckets.protocols, "cluster.protocols_bucket"),
        (&buckets.nonces, "cluster.nonces_bucket"),
        (&buckets.consensus, "cluster.consensus_bucket"),
        (&cluster.actions_bucket, "cluster.actions_bucket"),
        (&cluster.events.name, "cluster.events.stream"),
    ]
    .into_iter()
    .find(|(configured, _)| *configured == name)
    .map_or("cluster.nats", |(_, key)| key)
}

/// Connects to the cluster's NATS servers and opens its buckets; on failure, the
/// configuration key to name with the error.
async fn open_cluster(
    cluster: &crate::agent_config::ClusterConfig,
    security: &concord_node::Security,
) -> Result<
    (
        concord_nats::SharedState,
        Arc<concord_nats::NatsActionRecords>,
    ),
    (&'static str, concord_nats::NatsError),
> {
    let named = |error| (cluster_key(&error, cluster), error);
    let nats = concord_nats::Nats::connect(&cluster.settings)
        .await
        .map_err(named)?;
    let actions = concord_nats::NatsActionRecords::open(
        &nats,
        &cluster.actions_bucket,
        cluster.actions_max_age,
    )
    .await
    .map_err(named)?;
    let shared = concord_nats::SharedState::open(&nats, &cluster.buckets, security.replay_ttl)
        .await
        .map_err(named)?;
    Ok((shared, Arc::new(actions)))
}

/// Says (one line on standard error) when `max_message_size` lets an event's data or an
/// action's output be larger than the NATS server takes: such an event is refused (413 on
/// the ingest) and such a record is shared without its output. A warning, not a refusal:
/// most messages are far smaller (the defaults are equal, 1 MiB: no warning).
fn warn_beyond_max_payload(
    file: &std::path::Path,
    max_message_size: usize,
    nats: &concord_nats::Nats,
) {
    let max_payload = nats.max_payload();
    if max_message_size > max_payload {
        eprintln!(
            "concord: {}: `limits.interaction.max_message_size` ({max_message_size} bytes) is more \
             than the NATS server's max_payload ({max_payload} bytes): an event or an action's \
             output near that size is refused by NATS (an event: 413; an action record: shared \
             without its output); raise max_payload in the NATS servers' configuration or lower \
             the limit",
            file.display()
        );
    }
}

/// Connects to the cluster's NATS servers for the agent's events (their own connection:
/// the stream's consumer and the key-value requests do not queue behind each other) and
/// opens the event stream; on failure, the configuration key to name with the error.
async fn open_events(
    cluster: &crate::agent_config::ClusterConfig,
) -> Result<concord_nats::NatsEventLog, (&'static str, concord_nats::NatsError)> {
    let named = |error| (cluster_key(&error, cluster), error);
    let nats = concord_nats::Nats::connect(&cluster.settings)
        .await
        .map_err(named)?;
    concord_nats::NatsEventLog::open(&nats, &cluster.events)
        .await
        .map_err(named)
}

/// Generates and checks our provider code for a configured consensus protocol and
/// registers it in `registry` (the node's: its store, or the cluster's), so that the
/// description advertises it.
async fn hold_consensus(
    node: &Node,
    registry: &Arc<dyn concord_store::ConsensusRegistry>,
    protocol: &crate::agent_config::ConsensusProtocol,
) -> anyhow::Result<()> {
    let entry = consensus_entry(node, protocol).await?;
    let registry = Arc::clone(registry);
    tokio::task::spawn_blocking(move || registry.add_consensus(&entry))
        .await
        .context("the store task failed")?
        .context("cannot register it")?;
    Ok(())
}

/// The registry entry of a configured consensus protocol: its document with our provider
/// code, generated and checked.
async fn consensus_entry(
    node: &Node,
    protocol: &crate::agent_config::ConsensusProtocol,
) -> anyhow::Result<NewConsensus> {
    let mut generator = Generator::new();
    if let Some(client) = node.llm() {
        generator = generator.with_llm(LlmClient::clone(client));
    }
    let generated =
        consensus::provider_module(&generator, &protocol.document, &node.actions()).await?;
    Ok(
        NewConsensus::new(protocol.uri.clone(), protocol.document.text())
            .with_handler(Role::Provider, generated.source),
    )
}

/// A replica started degraded registers a configured consensus protocol once NATS answers
/// (trying every second until it is registered).
fn hold_later(
    degraded: Arc<concord_nats::Degraded>,
    registry: Arc<dyn concord_store::ConsensusRegistry>,
    entry: NewConsensus,
) {
    tokio::spawn(async move {
        loop {
            if degraded.is_ready() {
                let (registry, held) = (Arc::clone(&registry), entry.clone());
                match tokio::task::spawn_blocking(move || registry.add_consensus(&held)).await {
                    Ok(Ok(_)) => {
                        tracing::info!(uri = %entry.uri, "consensus protocol registered now that NATS answers");
                        return;
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(uri = %entry.uri, %error, "consensus protocol not registered yet")
                    }
                    Err(error) => tracing::warn!(%error, "the store task failed"),
                }
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
}

/// Waits for Ctrl-C, or SIGTERM on Unix.
pub(crate) async fn stopped() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result.context("cannot listen for Ctrl-C"),
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c()
            .await
            .context("cannot listen for Ctrl-C")
    }
}
