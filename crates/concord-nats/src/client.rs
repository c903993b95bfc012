//! The connection every backend of this crate shares, and how a synchronous trait call
//! runs an asynchronous NATS request.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio::runtime::Handle;

use crate::error::NatsError;

/// The most permissions violations a connection keeps until a failure they explain.
const MAX_VIOLATIONS: usize = 16;

/// Whether the server's `violation` (`Permissions Violation for Publish to
/// "$JS.API.STREAM.CREATE.KV_protocols"`) is about the bucket or stream `name`.
fn names_stream(violation: &str, name: &str) -> bool {
    let Some((_, subject)) = violation.split_once("$JS.API.") else {
        return false;
    };
    let subject = subject.split(['"', ' ']).next().unwrap_or_default();
    subject
        .rsplit('.')
        .next()
        .is_some_and(|last| last == name || last.strip_prefix("KV_") == Some(name))
}

/// The pause before a request no server took is made again ([`Nats::run`]).
const NO_RESPONDERS_PAUSE: Duration = Duration::from_millis(25);

/// The default time one operation may take before it answers [`NatsError::Timeout`].
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a consumer this crate follows a stream with (the event log's, the directory
/// log's) may deliver nothing while the stream holds messages it has not delivered before it
/// is taken as gone and created again. An ordered consumer lives on one server: when that
/// server dies and the client's connection is to another, the client notices only when two
/// idle heartbeats (5 s each) are missed, and the replica would be stale that long.
pub(crate) const STALLED: Duration = Duration::from_secs(1);

/// How to reach NATS.
///
/// ```
/// let settings = concord_nats::NatsSettings::new(["nats://127.0.0.1:4222"]);
/// assert_eq!(settings.operation_timeout, concord_nats::DEFAULT_OPERATION_TIMEOUT);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NatsSettings {
    /// The servers (`nats://host:port`, `tls://host:port`), tried in turn.
    pub servers: Vec<String>,
    /// A `.creds` file (a user JWT and its nkey seed), if the servers require one.
    pub credentials: Option<PathBuf>,
    /// PEM root certificates the servers' TLS certificates chain to (a private CA).
    pub root_certificates: Option<PathBuf>,
    /// Refuse to talk to a server without TLS.
    pub require_tls: bool,
    /// The longest one operation (a read, a write) may take, connecting included.
    pub operation_timeout: Duration,
    /// The client name the servers show (`concord` unless set).
    pub client_name: String,
    /// The JetStream replication factor of every bucket and stream created at start
    /// (1 to [`MAX_REPLICAS`], 1 unless set); one that exists with fewer is used as it is
    /// and reported (a warning naming it).
    pub replicas: usize,
}

/// The most replicas a bucket or stream may have (JetStream's own bound).
pub const MAX_REPLICAS: usize = 5;

impl NatsSettings {
    /// Plain connections to `servers`, no credentials, the default timeout.
    pub fn new<S: Into<String>>(servers: impl IntoIterator<Item = S>) -> Self {
        Self {
            servers: servers.into_iter().map(Into::into).collect(),
            credentials: None,
            root_certificates: None,
            require_tls: false,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            client_name: "concord".to_owned(),
            replicas: 1,
        }
    }
}

/// One NATS connection with JetStream, and the runtime its requests run on.
///
/// The store traits this crate implements are synchronous: a node calls them on tokio's
/// blocking pool (`spawn_blocking`). Each call spawns its request onto the runtime held
/// here and waits on a channel for the answer, at most
/// [`operation_timeout`](NatsSettings::operation_timeout). That is safe on a blocking-pool
/// thread (or any thread that is not one of the runtime's workers): the thread that waits
/// is not one the request needs, the runtime's workers run it. Waiting on a channel rather
/// than `Handle::block_on` also means a call from a worker thread by mistake costs that
/// worker for at most the timeout and answers an error: never a panic, never a hang. When
/// NATS is away the client keeps reconnecting in the background and each call answers
/// [`NatsError::Timeout`] (or the error NATS gave) until it is back.
#[derive(Debug, Clone)]
pub struct Nats {
    handle: Handle,
    client: async_nats::Client,
    jetstream: jetstream::Context,
    timeout: Duration,
    replicas: usize,
    /// The permissions violations the server reported on this connection and no failure
    /// has been explained by yet, newest last, at most [`MAX_VIOLATIONS`].
    violations: Arc<Mutex<VecDeque<String>>>,
}

impl Nats {
    /// Connects to the first server of `settings` that answers, within the operation
    /// timeout; the requests of every backend built on it run on the runtime this is
    /// awaited on (keep it running as long as the backends are used).
    ///
    /// # Errors
    /// [`NatsError::File`] for a credentials file that cannot be read,
    /// [`NatsError::Connect`] when no server could be reached in time or one refused us.
    pub async fn connect(settings: &NatsSettings) -> Result<Self, NatsError> {
        let servers = settings.servers.join(", ");
        let connect_error = |cause: String| NatsError::Connect {
            servers: servers.clone(),
            cause,
        };
        let violations = Arc::new(Mutex::new(VecDeque::new()));
        let heard = Arc::clone(&violations);
        let mut options = async_nats::ConnectOptions::new()
            .event_callback(move |event| {
                // A request the server refused this way goes unanswered: kept to tell a
                // missing permission from an outage.
                if let async_nats::Event::ServerError(async_nats::ServerError::Other(text)) = &event
                {
                    if text.to_lowercase().contains("permissions violation") {
                        tracing::warn!(violation = %text, "NATS refused a request of ours");
                        let mut heard = heard.lock().unwrap_or_else(PoisonError::into_inner);
                        if heard.len() == MAX_VIOLATIONS {
                            heard.pop_front();
                        }
                        heard.push_back(text.clone());
                    }
                }
                async {}
            })
            .name(&settings.client_name)
            .connection_timeout(settings.operation_timeout)
            .request_timeout(Some(settings.operation_timeout))
            .require_tls(settings.require_tls);
        if let Some(path) = &settings.credentials {
            options = options
                .credentials_file(path)
                .await
                .map_err(|cause| NatsError::File {
                    what: "credentials",
                    path: path.clone(),
                    cause,
                })?;
        }
        if let Some(path) = &settings.root_certificates {
            std::fs::metadata(path).map_err(|cause| NatsError::File {
                what: "root certificates",
                path: path.clone(),
                cause,
            })?;
            options = options.add_root_certificates(path.clone());
        }
        let addresses = settings
            .servers
            .iter()
            .map(|server| {
                server
                    .parse::<async_nats::ServerAddr>()
                    .map_err(|error| connect_error(format!("{server:?}: {error}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if addresses.is_empty() {
            return Err(connect_error("no server given".to_owned()));
        }
        let client = tokio::time::timeout(settings.operation_timeout, options.connect(addresses))
            .await
            .map_err(|_| {
                connect_error(format!("no answer within {:?}", settings.operation_timeout))
            })?
            .map_err(|error| connect_error(error.to_string()))?;
        // `connect` is async: it runs on a runtime, whose handle the requests use.
        let mut nats = Self::from_client(client, Handle::current(), settings.operation_timeout);
        nats.replicas = settings.replicas.clamp(1, MAX_REPLICAS);
        nats.violations = violations;
        Ok(nats)
    }

    /// Uses an open client; requests run on `handle`'s runtime.
    fn from_client(
        client: async_nats::Client,
        handle: Handle,
        operation_timeout: Duration,
    ) -> Self {
        let mut jetstream = jetstream::new(client.clone());
        jetstream.set_timeout(operation_timeout);
        Self {
            handle,
            client,
            jetstream,
            timeout: operation_timeout,
            replicas: 1,
            violations: Arc::default(),
        }
    }

    /// The largest message the server takes, in bytes (its `max_payload`, as its last
    /// `INFO` said; 1 MiB by default): an event, a directory entry or an action record
    /// larger than that is refused by the client.
    pub fn max_payload(&self) -> usize {
        self.client.max_payload()
    }

    /// The replication factor of what this connection creates
    /// ([`NatsSettings::replicas`]).
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Reports (a warning naming it) a bucket or stream `name` that exists with fewer
    /// replicas than configured: it is used as it is.
    pub(crate) fn check_replicas(&self, what: &str, name: &str, have: usize) {
        if have < self.replicas {
            tracing::warn!(
                what,
                name,
                have,
                configured = self.replicas,
                "the NATS {what} {name:?} exists with {have} replica(s), fewer than the {} configured (cluster.replicas): it is used as it is; raise it with `nats stream edit` (KV_{name} for a bucket) or remove it",
                self.replicas
            );
        }
    }

    /// The error for a bucket or stream `name` that could not be created: naming the
    /// replication factor, JetStream's refusal or the permission the user lacks when that is
    /// what the server said.
    pub(crate) fn create_error(
        &self,
        name: &str,
        cause: String,
        otherwise: impl FnOnce(String) -> NatsError,
    ) -> NatsError {
        let lower = cause.to_lowercase();
        if self.replicas > 1
            && (lower.contains("replica") || lower.contains("insufficient resources"))
        {
            NatsError::Replicas {
                name: name.to_owned(),
                replicas: self.replicas,
                cause,
            }
        } else if let Some(reason) = refusal(&cause) {
            NatsError::Refused {
                name: name.to_owned(),
                reason,
                cause,
            }
        } else if let Some(violation) = self.violation_about(name) {
            NatsError::Permission {
                name: name.to_owned(),
                violation,
            }
        } else {
            otherwise(cause)
        }
    }

    /// A permissions violation the server reported about the bucket or stream `name` (the
    /// JetStream API subject naming it), taken: it explains one failure, not a later one.
    fn violation_about(&self, name: &str) -> Option<String> {
        let mut violations = self
            .violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let at = violations
            .iter()
            .position(|violation| names_stream(violation, name))?;
        violations.remove(at)
    }

    /// The JetStream context requests go through.
    pub(crate) fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    /// A new inbox subject for a consumer's deliveries.
    pub(crate) fn inbox(&self) -> String {
        self.client.new_inbox()
    }

    /// The latest value of every live key of `store` under `prefix` ([`entries_under`]),
    /// waited for on this (blocking) thread as [`Nats::run`] does.
    ///
    /// # Errors
    /// [`StoreError::Backend`] carrying the [`NatsError`].
    pub(crate) fn entries_blocking(
        &self,
        store: &kv::Store,
        operation: &'static str,
        prefix: &'static str,
    ) -> Result<Vec<(String, bytes::Bytes, u64)>, concord_store::StoreError> {
        let (store, inbox) = (store.clone(), self.inbox());
        self.run(operation, move || {
            let (store, inbox) = (store.clone(), inbox.clone());
            async move { entries_under(&store, inbox, operation, prefix).await }
        })
        .map_err(|error| error.into_store(operation))
    }

    /// The longest one operation may take.
    pub fn operation_timeout(&self) -> Duration {
        self.timeout
    }

    /// The key-value bucket `config.bucket`, created with `config` when missing (by us or
    /// a replica starting at the same time).
    pub(crate) async fn bucket(&self, config: kv::Config) -> Result<kv::Store, NatsError> {
        let name = config.bucket.clone();
        let bucket_error = |cause: String| NatsError::Bucket {
            bucket: name.clone(),
            cause,
        };
        let config = kv::Config {
            num_replicas: self.replicas,
            ..config
        };
        let attempt =
            async {
                match self.jetstream.get_key_value(&name).await {
                    Ok(store) => {
                        let status = store
                            .status()
                            .await
                            .map_err(|error| bucket_error(error.to_string()))?;
                        self.check_replicas("bucket", &name, status.info.config.num_replicas);
                        Ok(store)
                    }
                    Err(_) => match self.jetstream.create_key_value(config).await {
                        Ok(store) => Ok(store),
                        // Another replica created it between our look and our create.
                        Err(create) => self.jetstream.get_key_value(&name).await.map_err(|_| {
                            self.create_error(&name, create.to_string(), bucket_error)
                        }),
                    },
                }
            };
        let within = self.timeout.saturating_mul(3);
        tokio::time::timeout(within, attempt).await.map_err(|_| {
            // Unanswered: a permissions violation the server reported explains it.
            self.create_error(&name, format!("no answer within {within:?}"), bucket_error)
        })?
    }

    /// Runs the request `attempt` makes on the runtime and waits for its answer on this
    /// (blocking) thread, at most the operation timeout; makes it again while NATS answers
    /// that no server took it ([`NatsError::is_no_responders`]: a stream whose leader is
    /// being elected, a server gone with the responders it had), since such a request was
    /// not applied.
    pub(crate) fn run<T, F, A>(
        &self,
        operation: &'static str,
        mut attempt: A,
    ) -> Result<T, NatsError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, NatsError>> + Send + 'static,
        A: FnMut() -> F + Send + 'static,
    {
        self.run_once(operation, async move {
            loop {
                match attempt().await {
                    Err(error) if error.is_no_responders() => {
                        tracing::debug!(%error, operation, "no NATS server took the request: trying again");
                        tokio::time::sleep(NO_RESPONDERS_PAUSE).await;
                    }
                    answered => return answered,
                }
            }
        })
    }

    /// Runs `request` once on the runtime and waits for its answer on this (blocking)
    /// thread, at most the operation timeout: for a request that must not be made twice.
    pub(crate) fn run_once<T, F>(&self, operation: &'static str, request: F) -> Result<T, NatsError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, NatsError>> + Send + 'static,
    {
        let timeout = self.timeout;
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let result =
                tokio::time::timeout(timeout, request)
                    .await
                    .unwrap_or(Err(NatsError::Timeout {
                        operation,
                        after: timeout,
                    }));
            // The caller may have stopped waiting: nothing to tell then.
            let _ = answer.send(result);
        });
        // A little longer than the request's own timeout, so that it answers first.
        match answered.recv_timeout(timeout + Duration::from_millis(250)) {
            Ok(result) => result,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(NatsError::Timeout {
                operation,
                after: timeout,
            }),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(NatsError::RuntimeGone { operation })
            }
        }
    }
}

// What the progress actions and the directory (`actions.rs`, `directory.rs`) need beyond
// the key-value requests: the client for subjects, the runtime for their tasks.
impl Nats {
    /// The client (subjects: relayed cancels).
    pub(crate) fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// The runtime the requests and this crate's tasks run on.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Whether the client is connected now (not reconnecting): what answers at once,
    /// rather than after the operation timeout, while NATS is away.
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }
}

/// A key-value entry as this crate reads it: its value and revision, absent when deleted.
///
/// A direct get may be answered by any replica of the bucket, and a follower may not have
/// applied yet what the leader acknowledged a moment ago (another replica's write): a key
/// it does not hold is asked again of the leader, so that what any replica wrote is found.
pub(crate) async fn live_entry(
    store: &kv::Store,
    operation: &'static str,
    key: &str,
) -> Result<Option<kv::Entry>, NatsError> {
    let entry = store
        .entry(key)
        .await
        .map_err(|error| NatsError::request(operation, key, error))?;
    let config = &store.stream.cached_info().config;
    let entry = match entry {
        None if config.allow_direct && config.num_replicas > 1 => {
            leader_entry(store, operation, key).await?
        }
        entry => entry,
    };
    Ok(entry.filter(|entry| entry.operation == kv::Operation::Put))
}

/// The latest value of `key` as the bucket's leader holds it (a message get, which only
/// the leader answers), if it is live.
async fn leader_entry(
    store: &kv::Store,
    operation: &'static str,
    key: &str,
) -> Result<Option<kv::Entry>, NatsError> {
    use jetstream::stream::LastRawMessageErrorKind;
    let subject = format!("{}{key}", store.prefix);
    let message = match store.stream.get_last_raw_message_by_subject(&subject).await {
        Ok(message) => message,
        Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
        Err(error) => return Err(NatsError::request(operation, key, error)),
    };
    // A deletion, a purge or a removal marker: the key is not live.
    let removed = message.headers.get("KV-Operation").is_some()
        || message.headers.get("Nats-Marker-Reason").is_some();
    Ok((!removed).then(|| kv::Entry {
        bucket: store.name.clone(),
        key: key.to_owned(),
        value: message.payload,
        revision: message.sequence,
        delta: 0,
        created: message.time,
        operation: kv::Operation::Put,
        seen_current: false,
    }))
}

/// The latest value of every live key starting with `prefix` (which ends in `.`), read
/// with one ordered consumer filtered on the server (not one request per key).
pub(crate) async fn entries_under(
    store: &kv::Store,
    inbox: String,
    operation: &'static str,
    prefix: &str,
) -> Result<Vec<(String, bytes::Bytes, u64)>, NatsError> {
    let request = |error: &dyn std::fmt::Display| NatsError::request(operation, prefix, error);
    let consumer = store
        .stream
        .create_consumer(jetstream::consumer::push::OrderedConfig {
            deliver_subject: inbox,
            filter_subject: format!("{}{prefix}>", store.prefix),
            deliver_policy: jetstream::consumer::DeliverPolicy::LastPerSubject,
            replay_policy: jetstream::consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await
        .map_err(|error| request(&error))?;
    // The consumer is deleted once read, and also when this lookup is dropped unfinished
    // (its operation timed out): left to its inactivity threshold (30 s for an ordered
    // consumer), one per lookup would pile up to the stream's consumer limit under load.
    let mut deleted = DeleteConsumer {
        stream: store.stream.clone(),
        name: Some(consumer.cached_info().name.clone()),
    };
    let read = read_all(store, consumer, operation, prefix).await;
    if let Some(name) = deleted.name.take() {
        if let Err(error) = store.stream.delete_consumer(&name).await {
            tracing::debug!(%error, consumer = %name, "a lookup's consumer was not deleted (it expires by itself)");
        }
    }
    read
}

/// Deletes a lookup's consumer when the lookup is dropped before it could (on the
/// runtime it was dropped on).
struct DeleteConsumer {
    stream: jetstream::stream::Stream,
    name: Option<String>,
}

impl Drop for DeleteConsumer {
    fn drop(&mut self) {
        let (Some(name), Ok(runtime)) = (self.name.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let stream = self.stream.clone();
        runtime.spawn(async move {
            if let Err(error) = stream.delete_consumer(&name).await {
                tracing::debug!(%error, consumer = %name, "a dropped lookup's consumer was not deleted (it expires by itself)");
            }
        });
    }
}

/// Reads every message an ordered consumer of the latest values has pending.
async fn read_all(
    store: &kv::Store,
    consumer: jetstream::consumer::Consumer<jetstream::consumer::push::OrderedConfig>,
    operation: &'static str,
    prefix: &str,
) -> Result<Vec<(String, bytes::Bytes, u64)>, NatsError> {
    let request = |error: &dyn std::fmt::Display| NatsError::request(operation, prefix, error);
    let mut found = Vec::new();
    if consumer.cached_info().num_pending == 0 {
        return Ok(found);
    }
    let mut messages = consumer.messages().await.map_err(|error| request(&error))?;
    while let Some(message) = messages.next().await {
        let message = message.map_err(|error| request(&error))?;
        let info = message.info().map_err(|error| request(&error))?;
        let (pending, revision) = (info.pending, info.stream_sequence);
        let deleted = message
            .headers
            .as_ref()
            .and_then(|headers| headers.get("KV-Operation"))
            .is_some();
        if !deleted {
            if let Some(key) = message.subject.strip_prefix(store.prefix.as_str()) {
                found.push((key.to_owned(), message.payload.clone(), revision));
            }
        }
        if pending == 0 {
            break;
        }
    }
    Ok(found)
}

/// JetStream's answers to creating or changing a bucket or stream that trying again cannot
/// cure, by error code, and what each means.
const REFUSALS: [(jetstream::ErrorCode, &str); 7] = [
    (
        jetstream::ErrorCode::STREAM_SUBJECT_OVERLAP,
        "another stream holds its subjects",
    ),
    (
        jetstream::ErrorCode::STREAM_NAME_EXIST,
        "a stream of that name exists with another configuration",
    ),
    (
        jetstream::ErrorCode::STREAM_INVALID_CONFIG,
        "NATS finds its configuration invalid",
    ),
    (
        jetstream::ErrorCode::STREAM_LIMITS,
        "its limits exceed the account's",
    ),
    (
        jetstream::ErrorCode::MAXIMUM_STREAMS_LIMIT,
        "the account holds as many streams as it may",
    ),
    (
        jetstream::ErrorCode::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT,
        "JetStream is not enabled for this account",
    ),
    (
        jetstream::ErrorCode::JETSTREAM_NOT_ENABLED,
        "JetStream is not enabled",
    ),
];

/// What the JetStream error `cause` names (`… (code 400, error code 10065)`) means, when it
/// is a refusal trying again cannot cure.
fn refusal(cause: &str) -> Option<&'static str> {
    let (_, code) = cause.rsplit_once("error code ")?;
    let code: u64 = code
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    REFUSALS
        .iter()
        .find(|(refused, _)| refused.0 == code)
        .map(|(_, reason)| *reason)
}

/// A key for `text` that any NATS key-value bucket accepts: the hex SHA-256 of it (the
/// text itself is kept in the value).
pub(crate) fn key_of(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Checks a server URL as [`Nats::connect`] will read it (`nats://host:port`,
/// `tls://host:port`, or `host:port`): the reason when it will not.
///
/// ```
/// assert!(concord_nats::check_server_url("nats://127.0.0.1:4222").is_ok());
/// assert!(concord_nats::check_server_url("http://127.0.0.1:4222").is_err());
/// ```
///
/// # Errors
/// What is wrong with it, in words.
pub fn check_server_url(url: &str) -> Result<(), String> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    if let Some(scheme) = scheme {
        if !matches!(scheme, "nats" | "tls") {
            return Err(format!(
                "{url:?}: the scheme must be nats:// or tls://, not {scheme}://"
            ));
        }
    }
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    if rest.is_empty() || rest.starts_with(':') || rest.starts_with('/') {
        return Err(format!("{url:?} names no host"));
    }
    url.parse::<async_nats::ServerAddr>()
        .map(|_| ())
        .map_err(|error| format!("{url:?} is not a NATS server address: {error}"))
}

/// Checks a key-value bucket name as JetStream will (1 to 64 characters of letters,
/// digits, `-` and `_`): the reason when it will not.
///
/// ```
/// assert!(concord_nats::check_bucket_name("concord_protocols").is_ok());
/// assert!(concord_nats::check_bucket_name("concord.protocols").is_err());
/// ```
///
/// # Errors
/// What is wrong with it, in words.
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!("{name:?} must have 1 to 64 characters"));
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        Some(bad) => Err(format!(
            "{name:?} has {bad:?}: a bucket name is letters, digits, `-` and `_`"
        )),
        None => Ok(()),
    }
}

/// The configuration of a Concord bucket `bucket`: file storage, one value per key.
pub(crate) fn file_bucket(bucket: &str, description: &str) -> kv::Config {
    kv::Config {
        bucket: bucket.to_owned(),
        description: description.to_owned(),
        history: 1,
        storage: async_nats::jetstream::stream::StorageType::File,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permissions_violation_is_matched_to_the_bucket_or_stream_it_names() {
        let violation =
            r#"Permissions Violation for Publish to "$JS.API.STREAM.CREATE.KV_protocols""#;
        assert!(names_stream(violation, "protocols"));
        assert!(!names_stream(violation, "proto"));
        assert!(!names_stream(violation, "KV_protocols_other"));
        let stream = r#"Permissions Violation for Publish to "$JS.API.STREAM.INFO.events""#;
        assert!(names_stream(stream, "events"));
        assert!(!names_stream(stream, "directory"));
        // A violation about anything else explains no bucket's failure.
        let inbox = r#"Permissions Violation for Subscription to "_INBOX.abc""#;
        assert!(!names_stream(inbox, "abc"));
    }

    #[test]
    fn a_request_no_server_took_is_told_from_other_failures() {
        let no_responders = NatsError::request(
            "record nonce",
            "n.key",
            "other error: failed getting entry: unable to get message: 503 no responders",
        );
        assert!(no_responders.is_no_responders());
        for other in [
            NatsError::request("record nonce", "n.key", "timed out"),
            NatsError::Timeout {
                operation: "record nonce",
                after: Duration::from_secs(1),
            },
        ] {
            assert!(!other.is_no_responders(), "{other:?}");
        }
    }

    #[test]
    fn a_refusal_is_told_from_an_outage_by_jetstream_s_error_code() {
        assert_eq!(
            refusal("jetstream error: subjects overlap with an existing stream (code 400, error code 10065)"),
            Some("another stream holds its subjects")
        );
        for transient in [
            "jetstream error: insufficient resources (code 503, error code 10023)",
            "timed out: didn't receive any response",
            "error code ",
            "error code 99999999999999999999999",
        ] {
            assert_eq!(refusal(transient), None, "{transient}");
        }
    }

    #[test]
    fn server_urls_and_bucket_names_are_checked_as_nats_reads_them() {
        for good in [
            "nats://127.0.0.1:4222",
            "tls://nats.example:4222",
            "127.0.0.1:4222",
        ] {
            assert!(check_server_url(good).is_ok(), "{good}");
        }
        for bad in ["http://127.0.0.1:4222", "nats://", "wss://x:1"] {
            assert!(check_server_url(bad).is_err(), "{bad}");
        }
        assert!(check_bucket_name("concord_nonces-2").is_ok());
        for bad in ["", "a.b", "a b", "a*", &"x".repeat(65)] {
            assert!(check_bucket_name(bad).is_err(), "{bad:?}");
        }
    }
}
