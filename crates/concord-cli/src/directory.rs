//! `concord directory serve`: a W3C WoT Discovery Thing Description Directory on a node
//! (the same admission, limits, identity and TLS as `concord serve`), its TDs and events
//! in the node's SQLite store on disk, until Ctrl-C (or SIGTERM), then a graceful
//! shutdown.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use concord_directory::{Directory, DirectoryStore};
use concord_node::{DirectoryService, Node, NodeError};
use concord_store::Store;

use crate::agent_config::Problem;
use crate::directory_config::{self, DirectoryConfig};
use crate::logging;
use crate::output::outln;
use crate::runtime;
use crate::serve::{create_private_dir, stopped, CreatedKeys};

/// `concord directory`.
#[derive(Debug, Subcommand)]
pub enum DirectoryCommand {
    /// Serve a W3C WoT Discovery directory (TDs registered, listed, searched; SSE events).
    Serve(DirectoryServeArgs),
}

/// `concord directory serve`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord directory serve
  concord directory serve --listen 0.0.0.0:8081 --data-dir ./directory-data
  concord directory serve --config directory.toml --require-signatures
  concord directory serve --tls-cert cert.pem --tls-key key.pem

Then, from anywhere:
  curl -X PUT -H 'Content-Type: application/td+json' --data @lamp.td.json \\
       http://127.0.0.1:8081/things/urn:example:lamp
  curl 'http://127.0.0.1:8081/things?limit=10'
  curl -G http://127.0.0.1:8081/search/jsonpath --data-urlencode 'query=$[?@.title==\"Lamp\"]'
  curl 'http://127.0.0.1:8081/search/capability?action=getWeather&field=city'
  curl -N http://127.0.0.1:8081/events?diff=true

Routes (W3C WoT Discovery, the Things API): GET/HEAD /things (limit, offset,
format=array|collection; Link rel=next and rel=canonical), POST /things, PUT/GET/PATCH
(application/merge-patch+json)/DELETE /things/{id}, GET /events and
/events/{thing_created|thing_updated|thing_deleted} (Server-Sent Events, Last-Event-ID,
diff=true), GET /search/jsonpath?query=, GET /search/capability?action=&property=&event=
&input=&output=&field=&lmos=&consensus=&consensus-hash=&did=&type=, and the directory's own
TD at /.well-known/wot. Errors are RFC 9457 problem details.

The configuration (TOML, every key optional):
  [directory]
  title = \"Concord directory\"
  require_signatures = false       # true: writes must be signed (did:wba, RFC 9421)
  purge_interval = \"30s\"           # expired TDs removed this often
  max_td_bytes = 65536             # also: max_entries, max_entries_per_registrant, min_ttl,
                                   # max_ttl, default_ttl (or \"none\"), event_retention,
                                   # max_query_bytes, max_query_results, max_query_answer_bytes,
                                   # max_query_scan_bytes, max_query_time,
                                   # max_query_descendants, max_query_pattern_bytes,
                                   # max_page_size, max_capability_results, max_capability_terms
  [node]                           # listen, data_dir, public_url, tls, shutdown_grace
  [limits]                         # the node's limits, as in an agent's configuration
  [security]                       # how writers' DIDs are checked: resolve_loopback_over_http
                                   # (test mode: localhost DIDs over http://), legacy_didwba,
                                   # resolver_connect_timeout, resolver_first_byte_timeout,
                                   # resolver_max_concurrent_per_address

With --require-signatures, a TD that names a DID (its id, or concord:metaProtocol's
concord:did) is written only by that DID (403). A TD registered by a DID can be changed
only by that DID; each registrant (its DID, else its
address) holds at most max_entries_per_registrant TDs (429 beyond).")]
pub struct DirectoryServeArgs {
    /// Listen here (`host:port`; port 0 picks a free one). Default: the configuration's
    /// `node.listen`, else 127.0.0.1:8081.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The directory configuration (TOML).
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Keep the store (TDs, events, the directory's identity) here. Default: the
    /// configuration's `node.data_dir`, else `directory/` in the platform data directory.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Serve https:// with this certificate chain (PEM); with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Every write (POST, PUT, PATCH, DELETE) must be signed with the writer's did:wba DID
    /// (RFC 9421 on the request): anonymous writes get 401 with ANP's challenge.
    #[arg(long)]
    require_signatures: bool,
}

/// Runs `concord directory …`.
pub fn run(command: DirectoryCommand) -> anyhow::Result<ExitCode> {
    match command {
        DirectoryCommand::Serve(args) => serve(args),
    }
}

fn serve(args: DirectoryServeArgs) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(path) => match DirectoryConfig::load(path) {
            Ok(config) => config,
            Err(error) => {
                crate::output::note(&error);
                return Ok(ExitCode::from(match error.problem {
                    Problem::Unreadable(_) => 2,
                    _ => 1,
                }));
            }
        },
        None => DirectoryConfig::default(),
    };
    logging::init_log("concord_node=info,warn");
    runtime::block_on(run_directory(config, args))?
}

/// Says (one line on standard error) when a registration within `max_td_bytes` may make a
/// log message larger than the NATS server takes: the message holds the TD, for an update
/// its change too, and its capability keys (each at most the TD's size), so up to three
/// times `max_td_bytes`. Such a registration is answered 500 (the log names `max_payload`). A
/// warning, not a refusal: most TDs are far smaller (the defaults, 64 KiB against 1 MiB,
/// say nothing).
fn warn_beyond_max_payload(file: &str, max_td_bytes: usize, max_payload: usize) {
    if max_td_bytes.saturating_mul(3) > max_payload {
        eprintln!(
            "concord: {file}: `directory.max_td_bytes` ({max_td_bytes} bytes) lets a registration's \
             log message (the TD, an update's change and its keys: up to 3 times that) be more \
             than the NATS server's max_payload ({max_payload} bytes): such a registration is \
             answered 500; raise max_payload in the NATS servers' configuration or lower the limit"
        );
    }
}

async fn run_directory(
    mut config: DirectoryConfig,
    args: DirectoryServeArgs,
) -> anyhow::Result<ExitCode> {
    // How its lines name the configuration.
    let file = args
        .config
        .as_ref()
        .map_or_else(|| "directory".to_owned(), |path| path.display().to_string());
    let listen = args.listen.unwrap_or_else(|| config.node.listen.clone());
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |path: &PathBuf| {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
        };
        config.node.tls = Some((read(cert)?, read(key)?));
    }
    let require_signatures = args.require_signatures || config.require_signatures;
    let data_dir = directory_config::data_dir(args.data_dir, &config)?;
    create_private_dir(&data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    let (keys, created) = crate::identity::serving_keys(
        &data_dir,
        config.keys_file.as_deref(),
        config.cluster.is_some(),
    )
    .context("the directory's identity")?;
    let mut created = CreatedKeys(created);
    let store = Arc::new(
        Store::open(&data_dir)
            .with_context(|| format!("cannot open the store in {}", data_dir.display()))?,
    );
    // Replicas: the registrations and their events in NATS, followed by every replica.
    let mut degraded = None;
    let directory_store: Arc<dyn DirectoryStore> = match &config.cluster {
        Some(cluster) => {
            let opened = async {
                let nats = concord_nats::Nats::connect(&cluster.settings).await?;
                let store = concord_nats::NatsDirectoryStore::open(&nats, &cluster.stream).await?;
                Ok::<_, concord_nats::NatsError>((store, nats.max_payload()))
            };
            match opened.await {
                Ok((shared, max_payload)) => {
                    warn_beyond_max_payload(&file, config.directory.max_td_bytes, max_payload);
                    Arc::new(shared)
                }
                // `start_degraded`: NATS away is an outage, not a configuration error; the
                // registrations answer 503 until NATS answers, with no restart.
                Err(
                    error @ (concord_nats::NatsError::Connect { .. }
                    | concord_nats::NatsError::Timeout { .. }),
                ) if cluster.start_degraded => {
                    eprintln!(
                        "concord: {file}: `cluster.nats`: {error}: starting degraded (cluster.start_degraded): \
                         the registrations answer 503 until NATS answers"
                    );
                    let started = Arc::new(concord_nats::start_degraded_directory(
                        cluster.settings.clone(),
                        cluster.stream.clone(),
                    ));
                    degraded = Some(Arc::clone(&started));
                    started
                }
                Err(error) => {
                    let key = cluster_key(&error);
                    eprintln!("concord: {file}: `{key}`: {error}");
                    return Ok(ExitCode::from(2));
                }
            }
        }
        None => store.clone(),
    };
    let directory = Directory::new(directory_store, config.directory.clone())
        .map_err(|invalid| anyhow::anyhow!("{invalid}"))?;
    let service = DirectoryService::new(directory)
        .require_signatures(require_signatures)
        .purge_interval(config.purge_interval);
    let mut builder = Node::builder(config.title.clone())
        .store(store)
        .limits(config.limits.clone())
        .keys(keys)
        .security(config.security.clone())
        .directory(service);
    builder = config.discovery.apply(builder);
    if let Some(id) = &config.id {
        builder = builder.id(id.clone());
    }
    if let Some(description) = &config.description {
        builder = builder.description(description.clone());
    }
    if let Some(url) = &config.node.public_url {
        builder = builder.public_url(url.clone());
    }
    if let Some((chain, key)) = &config.node.tls {
        builder = builder.tls_certificate_pem(chain.clone(), key.clone());
    }
    let node = match builder.build() {
        Ok(node) => node,
        Err(NodeError::Config(problem)) => {
            crate::output::note(format_args!("directory: {problem}"));
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error).context("cannot build the node"),
    };
    let server = node
        .serve(&listen)
        .await
        .with_context(|| format!("cannot serve on {listen}"))?;
    outln!("serving the directory {:?}", config.title)?;
    outln!("data dir:    {}", data_dir.display())?;
    outln!("listening:   {}", server.local_addr())?;
    outln!(
        "writes:      {}",
        if require_signatures {
            "signed only (did:wba)"
        } else {
            "open (a DID-signed entry is changed by its DID only)"
        }
    )?;
    if let Some(path) = created.keep() {
        eprintln!(
            "concord: created the directory's identity keys: {} (mode 0600)",
            path.display()
        );
    }
    if let Some(did) = server.did() {
        outln!("did:         {did}")?;
    }
    outln!("description: {}", server.description_url())?;
    // The things URL comes last: a script waiting for it has the whole banner.
    outln!("things:      {}things", server.url())?;
    eprintln!("concord: press Ctrl-C to stop");
    // A directory started degraded whose NATS, once it answered, cannot be used as
    // configured stops, as it would have at start (exit 2 naming the key).
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
                "concord: {file}: `{}`: {error}: NATS answered, and this configuration cannot be used",
                cluster_key(error)
            );
            let _ = server.shutdown_within(config.node.shutdown_grace).await;
            return Ok(ExitCode::from(2));
        }
    }
    let grace = config.node.shutdown_grace;
    eprintln!(
        "concord: shutting down: no new requests; answers in progress may finish within {}; \
         Ctrl-C again to stop at once",
        humantime::format_duration(grace)
    );
    tokio::select! {
        result = server.shutdown_within(grace) => result.context("shutting down")?,
        result = stopped() => {
            result?;
            eprintln!("concord: stopped at once");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The configuration key a NATS error of the directory's cluster names.
fn cluster_key(error: &concord_nats::NatsError) -> &'static str {
    use concord_nats::NatsError;
    match error {
        NatsError::Replicas { .. } => "cluster.replicas",
        NatsError::Bucket { .. } | NatsError::Refused { .. } => "cluster.stream",
        NatsError::File {
            what: "credentials",
            ..
        }
        | NatsError::Permission { .. } => "cluster.credentials",
        NatsError::File { .. } => "cluster.ca_cert",
        _ => "cluster.nats",
    }
}
