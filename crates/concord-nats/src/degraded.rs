//! Starting degraded: a replica that starts while NATS cannot be reached gets backends that
//! answer a typed error at once (the node answers 503 with `Retry-After`) until a task of
//! their own has connected and opened the buckets (and the event stream), and from then on
//! are the real ones, with no restart.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use concord_directory::{
    CapabilityKey, DirectoryStore, Entry, EventsAfter, Holder, Outcome, Page, Removal,
    StoreFailure, UnixMillis, Write,
};
use concord_interact::{
    ActionRecord, ActionRecords, ActionRecordsError, ActionRelay, EventLog, EventLogError,
    EventSink, LocalActions, RelayError, RelayFuture,
};
use concord_proto::{ProtocolHash, Role};
use concord_store::{
    ConsensusProtocol, ConsensusRegistry, ConsensusSummary, NewConsensus, NewProtocol, NonceStore,
    ProtocolBook, ResumeOffer, ResumeQuery, StoreError, StoredProtocol, UsedNonce,
};
use serde_json::Value;

use crate::actions::NatsActionRecords;
use crate::client::{Nats, NatsSettings};
use crate::directory::NatsDirectoryStore;
use crate::error::{NatsError, BACKEND};
use crate::events::{EventStream, NatsEventLog};
use crate::shared::{Buckets, SharedState};

/// How long the task waits between two attempts to reach NATS.
const ATTEMPT_EVERY: Duration = Duration::from_secs(1);

/// How often a failed attempt is logged (each one is, at debug level).
const WARN_EVERY: Duration = Duration::from_secs(30);

/// What a replica started degraded shares, once NATS is reached.
#[derive(Debug)]
struct Opened {
    shared: SharedState,
    actions: Arc<NatsActionRecords>,
    /// The agent's event stream, when [`DegradedSettings::events`] names one.
    events: Option<NatsEventLog>,
}

/// What stopped a task that reaches NATS trying: NATS answered, and the configuration
/// cannot be used ([`NatsError::is_configuration`]).
#[derive(Debug, Default)]
struct Fatal {
    error: OnceLock<NatsError>,
    /// Told when `error` is set.
    set: tokio::sync::Notify,
}

impl Fatal {
    fn set(&self, error: NatsError) {
        let _ = self.error.set(error);
        self.set.notify_one();
    }

    /// The error, once set.
    async fn failed(&self) -> &NatsError {
        loop {
            if let Some(error) = self.error.get() {
                return error;
            }
            self.set.notified().await;
        }
    }
}

/// The slot the task fills, and what every backend reads.
struct Slot {
    opened: OnceLock<Opened>,
    servers: String,
    /// The node's side of relayed cancels, given before NATS was reached.
    local: Mutex<Option<Arc<dyn LocalActions>>>,
    /// Whether an event stream is opened with the buckets.
    events: bool,
    /// The node's event hub, given before NATS was reached: fed from the stream once open.
    sink: Mutex<Option<Weak<dyn EventSink>>>,
    /// What stopped the task trying.
    fatal: Fatal,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("ready", &self.opened.get().is_some())
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

impl Slot {
    fn get(&self, operation: &'static str) -> Result<&Opened, StoreError> {
        self.opened
            .get()
            .ok_or_else(|| self.away().into_store(operation))
    }

    fn away(&self) -> NatsError {
        NatsError::Connect {
            servers: self.servers.clone(),
            cause: "not reached yet (the replica started degraded and keeps trying)".to_owned(),
        }
    }
}

/// The backends of a replica started degraded ([`start_degraded`]): each answers a typed
/// error at once while NATS has not been reached ([`StoreError::Backend`] carrying
/// [`NatsError::Connect`], [`ActionRecordsError::Unavailable`], [`RelayError::Unavailable`]:
/// the node's 503 with `Retry-After`), then is the NATS backend it stands for.
#[derive(Debug, Clone)]
pub struct Degraded {
    slot: Arc<Slot>,
}

/// The connection and buckets a replica started degraded opens once NATS answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DegradedSettings {
    /// How to reach NATS.
    pub settings: NatsSettings,
    /// The shared state's buckets.
    pub buckets: Buckets,
    /// How long a nonce is kept (the node's `Security::replay_ttl`).
    pub nonce_window: Duration,
    /// The progress actions' bucket.
    pub actions_bucket: String,
    /// How long an action's record is kept after its last change.
    pub actions_max_age: Duration,
    /// The agent's event stream, opened on a connection of its own; `None`: no events
    /// (the backends are then no [`EventLog`]: [`EventLog::append`] answers unavailable).
    pub events: Option<EventStream>,
}

impl DegradedSettings {
    /// The default buckets for `settings`, nonces kept `nonce_window`.
    pub fn new(settings: NatsSettings, nonce_window: Duration) -> Self {
        Self {
            settings,
            buckets: Buckets::default(),
            nonce_window,
            actions_bucket: crate::actions::DEFAULT_ACTION_BUCKET.to_owned(),
            actions_max_age: crate::actions::DEFAULT_ACTION_MAX_AGE,
            events: None,
        }
    }
}

/// Backends that work from the moment NATS is reached: a task on the current runtime
/// connects (trying every second, a warning every 30 s with the reason) and opens the
/// buckets, then hands them to every backend. Call from within a tokio runtime that runs
/// as long as the node.
pub fn start_degraded(settings: DegradedSettings) -> Degraded {
    let slot = Arc::new(Slot {
        opened: OnceLock::new(),
        servers: settings.settings.servers.join(", "),
        local: Mutex::new(None),
        events: settings.events.is_some(),
        sink: Mutex::new(None),
        fatal: Fatal::default(),
    });
    let degraded = Degraded {
        slot: Arc::clone(&slot),
    };
    tokio::spawn(reach(Arc::downgrade(&slot), settings));
    degraded
}

async fn open(settings: &DegradedSettings) -> Result<Opened, NatsError> {
    let nats = Nats::connect(&settings.settings).await?;
    let shared = SharedState::open(&nats, &settings.buckets, settings.nonce_window).await?;
    let actions =
        NatsActionRecords::open(&nats, &settings.actions_bucket, settings.actions_max_age).await?;
    let events = match &settings.events {
        // Its own connection, as a replica started with NATS up has: the stream's consumer
        // and the key-value requests do not queue behind each other.
        Some(stream) => {
            let nats = Nats::connect(&settings.settings).await?;
            Some(NatsEventLog::open(&nats, stream).await?)
        }
        None => None,
    };
    Ok(Opened {
        shared,
        actions: Arc::new(actions),
        events,
    })
}

/// Tries until NATS is reached and the buckets open, or the backends are dropped.
async fn reach(slot: std::sync::Weak<Slot>, settings: DegradedSettings) {
    let started = Instant::now();
    let mut warned: Option<Instant> = None;
    loop {
        match open(&settings).await {
            Ok(opened) => {
                let Some(slot) = slot.upgrade() else {
                    return;
                };
                let actions = Arc::clone(&opened.actions);
                // Set before the node's side is taken: `serve` looks under the same lock.
                let _ = slot.opened.set(opened);
                let local = slot
                    .local
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(local) = local {
                    if let Err(error) = actions.serve(local) {
                        tracing::warn!(%error, "relayed cancels are not answered");
                    }
                }
                let sink = slot
                    .sink
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let (Some(sink), Some(events)) = (
                    sink,
                    slot.opened.get().and_then(|opened| opened.events.as_ref()),
                ) {
                    events.deliver_to(sink);
                }
                tracing::info!(
                    servers = %slot.servers,
                    after = ?started.elapsed(),
                    "NATS reached: the shared state is back (started degraded)"
                );
                return;
            }
            Err(error) => {
                let Some(strong) = slot.upgrade() else {
                    return;
                };
                if error.is_configuration() {
                    // Not an outage: trying again cannot cure it. The replica goes on
                    // answering 503 for shared state; its owner hears it (`failed`).
                    tracing::error!(%error, "NATS answered, and the configuration cannot be used: stopped trying");
                    strong.fatal.set(error);
                    return;
                }
                drop(strong);
                if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    tracing::warn!(%error, "NATS not reached yet: serving degraded (what needs shared state answers 503)");
                    warned = Some(Instant::now());
                } else {
                    tracing::debug!(%error, "NATS not reached yet");
                }
                tokio::time::sleep(ATTEMPT_EVERY).await;
            }
        }
    }
}

impl Degraded {
    /// Whether NATS was reached and the buckets opened.
    pub fn is_ready(&self) -> bool {
        self.slot.opened.get().is_some()
    }

    /// Waits until NATS answered and the configuration turned out unusable (the buckets or
    /// streams cannot be used as configured, [`NatsError::is_configuration`]): what a
    /// replica that started with NATS up would have refused at start. Never returns while
    /// NATS is only away, or once the backends work.
    pub async fn failed(&self) -> &NatsError {
        self.slot.fatal.failed().await
    }
}

impl ProtocolBook for Degraded {
    fn save_protocol(&self, protocol: &NewProtocol) -> Result<ProtocolHash, StoreError> {
        self.slot
            .get("save protocol")?
            .shared
            .protocols
            .save_protocol(protocol)
    }

    fn protocol(&self, hash: &ProtocolHash) -> Result<Option<StoredProtocol>, StoreError> {
        self.slot
            .get("read protocol")?
            .shared
            .protocols
            .protocol(hash)
    }

    fn touch_protocol(&self, hash: &ProtocolHash, peer: &str) -> Result<u64, StoreError> {
        self.slot
            .get("record a protocol's use")?
            .shared
            .protocols
            .touch_protocol(hash, peer)
    }

    fn add_protocol_peer(&self, hash: &ProtocolHash, peer: &str) -> Result<(), StoreError> {
        self.slot
            .get("add a protocol's peer")?
            .shared
            .protocols
            .add_protocol_peer(hash, peer)
    }

    fn can_resume(&self, hash: &ProtocolHash, role: Role) -> Result<bool, StoreError> {
        self.slot
            .get("check a protocol")?
            .shared
            .protocols
            .can_resume(hash, role)
    }

    fn latest_resumable(&self, query: &ResumeQuery<'_>) -> Result<Option<ResumeOffer>, StoreError> {
        self.slot
            .get("find a protocol to resume")?
            .shared
            .protocols
            .latest_resumable(query)
    }

    fn prune_protocols(&self, max: u64) -> Result<u64, StoreError> {
        self.slot
            .get("prune protocols")?
            .shared
            .protocols
            .prune_protocols(max)
    }

    fn cap_peer_protocols(&self, peer: &str, max: u64) -> Result<u64, StoreError> {
        self.slot
            .get("cap a peer's protocols")?
            .shared
            .protocols
            .cap_peer_protocols(peer, max)
    }

    fn cap_address_protocols(&self, address: &str, max: u64) -> Result<u64, StoreError> {
        self.slot
            .get("cap an address's protocols")?
            .shared
            .protocols
            .cap_address_protocols(address, max)
    }
}

impl NonceStore for Degraded {
    fn record_nonce(
        &self,
        did: &str,
        nonce: &str,
        recorded: i64,
        expires: i64,
    ) -> Result<bool, StoreError> {
        self.slot
            .get("record nonce")?
            .shared
            .nonces
            .record_nonce(did, nonce, recorded, expires)
    }

    /// None while NATS has not been reached: what a node preloads into its replay cache
    /// at start. That is safe: no nonce is accepted without [`record_nonce`](Self::record_nonce),
    /// which refuses every nonce until NATS answers and then checks it against the bucket
    /// (create-only), so a nonce used before is refused whatever the cache holds.
    fn unexpired_nonces(&self, now: i64) -> Result<Vec<UsedNonce>, StoreError> {
        match self.slot.opened.get() {
            Some(opened) => opened.shared.nonces.unexpired_nonces(now),
            None => Ok(Vec::new()),
        }
    }
}

impl ConsensusRegistry for Degraded {
    fn add_consensus(&self, entry: &NewConsensus) -> Result<ProtocolHash, StoreError> {
        self.slot
            .get("add consensus protocol")?
            .shared
            .consensus
            .add_consensus(entry)
    }

    fn consensus(&self, uri: &str) -> Result<Option<ConsensusProtocol>, StoreError> {
        self.slot
            .get("read consensus protocol")?
            .shared
            .consensus
            .consensus(uri)
    }

    fn list_consensus(&self) -> Result<Vec<ConsensusSummary>, StoreError> {
        self.slot
            .get("list consensus protocols")?
            .shared
            .consensus
            .list_consensus()
    }

    fn remove_consensus(&self, uri: &str) -> Result<bool, StoreError> {
        self.slot
            .get("remove consensus protocol")?
            .shared
            .consensus
            .remove_consensus(uri)
    }

    fn can_use_consensus(&self, uri: &str, role: Role) -> Result<bool, StoreError> {
        self.slot
            .get("check consensus protocol")?
            .shared
            .consensus
            .can_use_consensus(uri, role)
    }
}

impl Degraded {
    fn actions(
        &self,
        operation: &'static str,
        id: &str,
    ) -> Result<&NatsActionRecords, ActionRecordsError> {
        self.slot
            .opened
            .get()
            .map(|opened| opened.actions.as_ref())
            .ok_or_else(|| ActionRecordsError::Unavailable {
                backend: "nats-kv",
                operation,
                id: id.chars().take(64).collect(),
                reason: self.slot.away().to_string(),
            })
    }
}

impl ActionRecords for Degraded {
    fn write(&self, record: &ActionRecord) -> Result<(), ActionRecordsError> {
        self.actions("write", &record.id)?.write(record)
    }

    fn read(&self, id: &str) -> Result<Option<ActionRecord>, ActionRecordsError> {
        self.actions("read", id)?.read(id)
    }

    fn forget(&self, id: &str) -> Result<(), ActionRecordsError> {
        self.actions("forget", id)?.forget(id)
    }
}

impl ActionRelay for Degraded {
    fn serve(&self, local: Arc<dyn LocalActions>) -> Result<(), RelayError> {
        // Held until NATS is reached (the task hands it over), unless it already was.
        let mut held = self
            .slot
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match self.slot.opened.get() {
            Some(opened) => opened.actions.serve(local),
            None => {
                *held = Some(local);
                Ok(())
            }
        }
    }

    fn renew(&self, id: &str) {
        if let Some(opened) = self.slot.opened.get() {
            opened.actions.renew(id);
        }
    }

    fn cancel(&self, id: &str) -> RelayFuture {
        match self.slot.opened.get() {
            Some(opened) => opened.actions.cancel(id),
            None => {
                let error = RelayError::Unavailable {
                    backend: "nats",
                    id: id.chars().take(64).collect(),
                    reason: self.slot.away().to_string(),
                };
                Box::pin(async move { Err(error) })
            }
        }
    }
}

impl Degraded {
    /// The event stream, once open.
    fn events(&self, event: &str) -> Result<&NatsEventLog, EventLogError> {
        match self.slot.opened.get() {
            Some(Opened {
                events: Some(events),
                ..
            }) => Ok(events),
            opened => Err(EventLogError::Unavailable {
                backend: BACKEND,
                event: event.to_owned(),
                reason: match opened {
                    None => self.slot.away().to_string(),
                    Some(_) => "no event stream was configured".to_owned(),
                },
            }),
        }
    }
}

impl EventLog for Degraded {
    fn append(&self, event: &str, data: &Value) -> Result<u64, EventLogError> {
        self.events(event)?.append(event, data)
    }

    fn append_again(&self, event: &str, data: &Value, attempt: &str) -> Result<u64, EventLogError> {
        self.events(event)?.append_again(event, data, attempt)
    }

    /// Fans out as [`NatsEventLog`] does, from the moment the stream is open (nothing is
    /// published before: every append until then is refused).
    fn deliver_to(&self, sink: Weak<dyn EventSink>) -> bool {
        if !self.slot.events {
            return false;
        }
        // Under the lock the task takes the sink under once it has set `opened`.
        let mut held = self
            .slot
            .sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match self
            .slot
            .opened
            .get()
            .and_then(|opened| opened.events.as_ref())
        {
            Some(events) => {
                events.deliver_to(sink);
            }
            None => *held = Some(sink),
        }
        true
    }
}

/// A directory's registrations from the moment NATS is reached
/// ([`start_degraded_directory`]): until then every operation answers
/// [`StoreFailure::Unavailable`] at once (the directory answers 503 with `Retry-After`),
/// then each is the [`NatsDirectoryStore`]'s, with no restart.
#[derive(Debug, Clone)]
pub struct DegradedDirectory {
    slot: Arc<DirectorySlot>,
}

#[derive(Debug)]
struct DirectorySlot {
    opened: OnceLock<NatsDirectoryStore>,
    servers: String,
    /// What stopped the task trying.
    fatal: Fatal,
}

impl DirectorySlot {
    fn get(&self, operation: &'static str) -> Result<&NatsDirectoryStore, StoreFailure> {
        self.opened.get().ok_or_else(|| StoreFailure::Unavailable {
            operation,
            reason: format!(
                "NATS at {} not reached yet (the directory started degraded)",
                self.servers
            ),
        })
    }
}

/// A [`DegradedDirectory`] for the stream `stream` on the servers of `settings`: a task on
/// the current runtime connects (trying every second, a warning every 30 s with the
/// reason) and opens the stream, then hands it over. Call from within a tokio runtime that
/// runs as long as the directory.
pub fn start_degraded_directory(settings: NatsSettings, stream: String) -> DegradedDirectory {
    let slot = Arc::new(DirectorySlot {
        opened: OnceLock::new(),
        servers: settings.servers.join(", "),
        fatal: Fatal::default(),
    });
    let weak = Arc::downgrade(&slot);
    tokio::spawn(async move {
        let started = Instant::now();
        let mut warned: Option<Instant> = None;
        loop {
            let opened = async {
                let nats = Nats::connect(&settings).await?;
                NatsDirectoryStore::open(&nats, &stream).await
            }
            .await;
            let Some(slot) = weak.upgrade() else {
                return;
            };
            match opened {
                Ok(store) => {
                    let _ = slot.opened.set(store);
                    tracing::info!(
                        servers = %slot.servers,
                        after = ?started.elapsed(),
                        "NATS reached: the directory's registrations are back (started degraded)"
                    );
                    return;
                }
                Err(error) if error.is_configuration() => {
                    // Not an outage: the registrations go on answering 503; the owner
                    // hears it (`failed`).
                    tracing::error!(%error, "NATS answered, and the configuration cannot be used: stopped trying");
                    slot.fatal.set(error);
                    return;
                }
                Err(error) => {
                    if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                        tracing::warn!(%error, "NATS not reached yet: the directory serves degraded (its registrations answer 503)");
                        warned = Some(Instant::now());
                    } else {
                        tracing::debug!(%error, "NATS not reached yet");
                    }
                }
            }
            drop(slot);
            tokio::time::sleep(ATTEMPT_EVERY).await;
        }
    });
    DegradedDirectory { slot }
}

impl DegradedDirectory {
    /// Whether NATS was reached and the stream opened.
    pub fn is_ready(&self) -> bool {
        self.slot.opened.get().is_some()
    }

    /// Once NATS answered and the stream cannot be used as configured
    /// ([`NatsError::is_configuration`]: more replicas than the cluster has, a stream NATS
    /// refuses): what a directory that started with NATS up would have refused at start.
    /// Never returns while NATS is only away, or once the stream is open.
    pub async fn failed(&self) -> &NatsError {
        self.slot.fatal.failed().await
    }
}

impl DirectoryStore for DegradedDirectory {
    fn entry(&self, id: &str) -> Result<Option<Entry>, StoreFailure> {
        self.slot.get("read an entry")?.entry(id)
    }

    fn entries(&self, ids: &[String]) -> Result<Vec<Entry>, StoreFailure> {
        self.slot.get("read entries")?.entries(ids)
    }

    fn write(&self, write: &Write<'_>) -> Result<Outcome, StoreFailure> {
        self.slot.get("write an entry")?.write(write)
    }

    fn remove(&self, removal: &Removal<'_>) -> Result<Outcome, StoreFailure> {
        self.slot.get("remove an entry")?.remove(removal)
    }

    fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Result<Page, StoreFailure> {
        self.slot.get("list entries")?.page(offset, limit, now)
    }

    fn scan(
        &self,
        after: Option<&str>,
        limit: u64,
        now: UnixMillis,
    ) -> Result<Vec<Entry>, StoreFailure> {
        self.slot.get("scan entries")?.scan(after, limit, now)
    }

    fn count(&self, holder: Option<Holder<'_>>) -> Result<(u64, u64), StoreFailure> {
        self.slot.get("count entries")?.count(holder)
    }

    fn expired(&self, now: UnixMillis, max: usize) -> Result<Vec<(String, u64)>, StoreFailure> {
        self.slot.get("read expired entries")?.expired(now, max)
    }

    fn events_after(&self, after: u64, max: usize) -> Result<EventsAfter, StoreFailure> {
        self.slot.get("read events")?.events_after(after, max)
    }

    fn find(
        &self,
        keys: &[CapabilityKey],
        now: UnixMillis,
        limit: u64,
    ) -> Result<Vec<String>, StoreFailure> {
        self.slot.get("find entries")?.find(keys, now, limit)
    }
}
