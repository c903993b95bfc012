//! The directory's registrations in NATS: [`DirectoryStore`] on a JetStream stream that is
//! the log of every write, each replica holding the state the log makes.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use concord_directory::{
    CapabilityKey, CapabilityKind, DirectoryState, DirectoryStore, Entry, EventKind, EventsAfter,
    Holder, Outcome, Page, Removal, StoreFailure, ThingEvent, UnixMillis, Write,
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{key_of, Nats, STALLED};
use crate::error::NatsError;

/// The stream's name unless configured otherwise.
pub const DEFAULT_DIRECTORY_STREAM: &str = "concord_directory";

/// How long a message the log holds may take to be applied before the follower creates its
/// consumer again (at once, rather than at its next check, [`STALLED`]): a write waits for
/// it within the operation timeout.
const FOLLOW_AGAIN: Duration = Duration::from_millis(250);

/// How many times a write is tried again when another replica wrote first.
const ATTEMPTS: u32 = 32;

/// The longest pause before a write is tried again after another replica wrote first:
/// the pause is random, up to 1 ms doubled at each lost attempt, at most this.
const MOST_PAUSE: Duration = Duration::from_millis(64);

/// The pause before attempt `lost + 1` of a write that lost `lost` times to another
/// writer: random up to `min(1 ms × 2^lost, MOST_PAUSE)` ("full jitter"), so that writers
/// that keep meeting spread out instead of meeting again.
fn pause_after(lost: u32) -> Duration {
    let cap = Duration::from_millis(1u64 << lost.min(16)).min(MOST_PAUSE);
    let mut random = [0u8; 4];
    // Without randomness, the whole cap: still a pause.
    let fraction = match getrandom::getrandom(&mut random) {
        Ok(()) => f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX),
        Err(_) => 1.0,
    };
    cap.mul_f64(fraction)
}

/// One write or removal as the log holds it: the entry with its keys and its event, in one
/// message (so they are stored together or not at all).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Logged {
    Write {
        entry: Box<StoredEntry>,
        keys: Vec<(String, String)>,
        kind: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<Value>,
        retention: usize,
    },
    Remove {
        id: String,
        at: UnixMillis,
        retention: usize,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredEntry {
    id: String,
    td: Value,
    anonymous: bool,
    created: UnixMillis,
    modified: UnixMillis,
    expires: Option<UnixMillis>,
    ttl_ms: Option<u64>,
    owner: Option<String>,
    client: Option<String>,
    size: u64,
}

impl StoredEntry {
    fn of(entry: &Entry) -> Self {
        Self {
            id: entry.id.clone(),
            td: entry.td.clone(),
            anonymous: entry.anonymous,
            created: entry.created,
            modified: entry.modified,
            expires: entry.expires,
            ttl_ms: entry.ttl_ms,
            owner: entry.owner.clone(),
            client: entry.client.clone(),
            size: entry.size,
        }
    }

    fn into_entry(self, revision: u64) -> Entry {
        let mut entry = Entry::sized(self.id, self.td, self.size);
        entry.anonymous = self.anonymous;
        entry.created = self.created;
        entry.modified = self.modified;
        entry.expires = self.expires;
        entry.ttl_ms = self.ttl_ms;
        entry.owner = self.owner;
        entry.client = self.client;
        entry.revision = revision;
        entry
    }
}

/// The state the log makes ([`DirectoryState`], as the in-memory store holds it), its latest
/// position the last sequence applied (the latest event id).
#[derive(Debug, Default)]
struct State {
    held: DirectoryState,
}

impl State {
    /// The last sequence applied.
    fn applied(&self) -> u64 {
        self.held.latest()
    }

    /// Applies the log's message `sequence`. A sequence after a hole (messages the stream
    /// no longer holds: an entry's earlier writes, kept only as its latest) starts the
    /// events held afresh, so that a reader asking from before it is told of the gap.
    fn apply(&mut self, sequence: u64, logged: Logged) {
        if sequence <= self.applied() {
            return;
        }
        if sequence != self.applied() + 1 {
            self.held.forget_events();
        }
        self.held.advance_to(sequence);
        match logged {
            Logged::Write {
                entry,
                keys,
                kind,
                diff,
                retention,
            } => {
                let entry = entry.into_entry(sequence);
                let (id, at) = (entry.id.clone(), entry.modified);
                let keys: Vec<CapabilityKey> = keys
                    .into_iter()
                    .filter_map(|(kind, value)| {
                        CapabilityKind::from_name(&kind).map(|kind| CapabilityKey::new(kind, value))
                    })
                    .collect();
                let kind = EventKind::from_name(&kind).unwrap_or(EventKind::Updated);
                self.held.put(
                    entry,
                    keys,
                    ThingEvent::new(sequence, kind, id, diff, at),
                    retention,
                );
            }
            Logged::Remove { id, at, retention } => {
                let event = ThingEvent::new(sequence, EventKind::Deleted, id.clone(), None, at);
                self.held.delete(&id, event, retention);
            }
        }
    }
}

#[derive(Debug)]
struct Inner {
    nats: Nats,
    stream: String,
    /// The stream, for its info.
    log: stream::Stream,
    state: Mutex<State>,
    /// Signalled at each message applied.
    applied: Condvar,
    /// Tells the follower to create its consumer again now: a message the log holds was
    /// not applied within [`FOLLOW_AGAIN`] (the consumer may have gone with its server).
    follow_again: Arc<tokio::sync::Notify>,
    /// The log's last sequence when this replica opened it: until its copy applied that
    /// far, a read would answer from a half-built state (a TD missing, a short listing).
    opened_at: u64,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state to read from, once this replica's copy applied what the log held when it
    /// opened (waiting at most the operation timeout): a replica still catching up after a
    /// start answers [`StoreFailure::Unavailable`] (503), never from a half-built state.
    fn read_state(&self, operation: &'static str) -> Result<MutexGuard<'_, State>, StoreFailure> {
        let state = self.state();
        if state.applied() >= self.opened_at {
            return Ok(state);
        }
        drop(state);
        self.wait_applied(self.opened_at, operation)
            .map_err(|_| StoreFailure::Unavailable {
                operation,
                reason: format!(
                    "this replica is still reading the directory log (to event {})",
                    self.opened_at
                ),
            })?;
        Ok(self.state())
    }

    /// Waits until the message `sequence` is applied, at most the operation timeout
    /// ([`StoreFailure::Unavailable`] then: this replica is behind the log, for now).
    /// The log holds `sequence`: once it is not applied within [`FOLLOW_AGAIN`], the
    /// follower is told to create its consumer again.
    fn wait_applied(&self, sequence: u64, operation: &'static str) -> Result<(), StoreFailure> {
        let started = Instant::now();
        let deadline = started + self.nats.operation_timeout();
        let mut kick = Some(started + FOLLOW_AGAIN);
        let mut state = self.state();
        while state.applied() < sequence {
            let now = Instant::now();
            if kick.is_some_and(|at| at <= now) {
                self.follow_again.notify_one();
                kick = None;
            }
            if deadline <= now {
                return Err(StoreFailure::Unavailable {
                    operation,
                    reason: format!(
                        "this replica's copy of the directory log did not reach event {sequence} within {:?}",
                        self.nats.operation_timeout()
                    ),
                });
            }
            let until = deadline.min(kick.unwrap_or(deadline));
            state = self
                .applied
                .wait_timeout(state, until.saturating_duration_since(now))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(())
    }
}

/// A [`DirectoryStore`] shared by every replica of a directory: a JetStream stream is the
/// log of every write and removal, one message each carrying the entry, its capability keys
/// and its event (stored together or not at all), its sequence number the event id (so ids
/// strictly increase and are never reused) and the entry's revision.
///
/// Each replica applies the log, in order, to a state of its own (a consumer of the stream,
/// from its first message) and reads from it: its event feed and search snapshot follow
/// the writes made on any replica. A write decides on that state once it caught up with
/// the log's last message (the expected revision, the admission bounds), and is published
/// only if no other message was appended since (`Nats-Expected-Last-Sequence`); otherwise
/// it catches up and decides again. So two replicas racing on one entry or on the last
/// place of a bound never both pass. It returns once this replica applied it, or once the
/// operation timeout passed with the write stored (its copy shows it a little later).
/// NATS away or too slow is [`StoreFailure::Unavailable`] (the directory answers 503 with
/// `Retry-After`), for a write as for a read by a replica behind the log.
///
/// The stream keeps each entry's latest message (one per subject), so a replica starting
/// later rebuilds every entry; the events it holds start after the holes that leaves (a
/// reader resuming from before is told of the gap), and each replica keeps at most the
/// `event_retention` of the writes it applied.
#[derive(Debug, Clone)]
pub struct NatsDirectoryStore {
    inner: Arc<Inner>,
}

fn backend(operation: &'static str, error: impl std::fmt::Display) -> StoreFailure {
    StoreFailure::Backend {
        operation,
        message: error.to_string(),
    }
}

/// What a failed NATS request means to the directory: NATS away, too slow or refusing for
/// now is [`StoreFailure::Unavailable`] (503 with `Retry-After`: the same request may pass
/// once NATS is back); anything else is the backend's failure (500).
fn failure(operation: &'static str, error: NatsError) -> StoreFailure {
    match error {
        NatsError::Timeout { .. } | NatsError::Request { .. } | NatsError::Connect { .. } => {
            StoreFailure::Unavailable {
                operation,
                reason: error.to_string(),
            }
        }
        other => backend(operation, other),
    }
}

impl NatsDirectoryStore {
    /// The stream `name` (subjects `<name>.e.*`, file storage, the latest message of each
    /// entry kept), created when missing; applies it from its first message before
    /// answering (at most three operation timeouts), then follows it.
    ///
    /// # Errors
    /// When the stream cannot be created or read.
    pub async fn open(nats: &Nats, name: &str) -> Result<Self, NatsError> {
        let failed = |cause: String| NatsError::Bucket {
            bucket: name.to_owned(),
            cause,
        };
        let context = nats.jetstream();
        let wanted = stream::Config {
            name: name.to_owned(),
            description: Some("Concord: the directory's registrations and their events".to_owned()),
            subjects: vec![format!("{name}.e.*")],
            max_messages_per_subject: 1,
            storage: stream::StorageType::File,
            num_replicas: nats.replicas(),
            ..Default::default()
        };
        let mut stream = match context.get_stream(name).await {
            Ok(mut stream) => {
                let info = stream
                    .info()
                    .await
                    .map_err(|error| failed(error.to_string()))?;
                nats.check_replicas("stream", name, info.config.num_replicas);
                stream
            }
            Err(_) => match context.create_stream(wanted).await {
                Ok(stream) => stream,
                // Another replica created it between our look and our create.
                Err(create) => context
                    .get_stream(name)
                    .await
                    .map_err(|_| nats.create_error(name, create.to_string(), failed))?,
            },
        };
        let last = stream
            .info()
            .await
            .map_err(|error| failed(error.to_string()))?
            .state
            .last_sequence;
        let inner = Arc::new(Inner {
            nats: nats.clone(),
            stream: name.to_owned(),
            log: stream.clone(),
            state: Mutex::new(State::default()),
            applied: Condvar::new(),
            follow_again: Arc::default(),
            opened_at: last,
        });
        nats.handle().spawn(follow(
            Arc::downgrade(&inner),
            Arc::clone(&inner.follow_again),
            stream,
            nats.inbox(),
        ));
        let deadline = tokio::time::Instant::now() + nats.operation_timeout().saturating_mul(3);
        while inner.state().applied() < last && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(Self { inner })
    }

    fn subject(&self, id: &str) -> String {
        format!("{}.e.{}", self.inner.stream, key_of(id))
    }

    /// The log's last sequence, as the server says now (one request).
    fn last_sequence(&self, operation: &'static str) -> Result<u64, StoreFailure> {
        let (log, name) = (self.inner.log.clone(), self.inner.stream.clone());
        self.inner
            .nats
            .run(operation, move || {
                let (log, name) = (log.clone(), name.clone());
                async move {
                    let info = log
                        .get_info()
                        .await
                        .map_err(|error| NatsError::request(operation, &name, error))?;
                    Ok(info.state.last_sequence)
                }
            })
            .map_err(|error| failure(operation, error))
    }

    /// Appends `payload` (a [`Logged`]) on `subject` if the log's last message is still `expected`:
    /// its sequence, or `None` when another was appended first.
    fn append(
        &self,
        operation: &'static str,
        subject: &str,
        payload: &bytes::Bytes,
        expected: u64,
    ) -> Result<Option<u64>, StoreFailure> {
        let (subject, payload) = (subject.to_owned(), payload.clone());
        let context = self.inner.nats.jetstream().clone();
        self.inner
            .nats
            .run(operation, move || {
                let (context, subject, payload) = (context.clone(), subject.clone(), payload.clone());
                async move {
                let publish = jetstream::message::PublishMessage::build()
                    .payload(payload)
                    .expected_last_sequence(expected);
                let ack = match context.send_publish(subject.clone(), publish).await {
                    Ok(ack) => ack.await,
                    Err(error) => Err(error),
                };
                match ack {
                    Ok(ack) => Ok(Ok(Some(ack.sequence))),
                    Err(error)
                        if error.kind()
                            == jetstream::context::PublishErrorKind::WrongLastSequence =>
                    {
                        Ok(Ok(None))
                    }
                    // Not an outage: trying again cannot pass.
                    Err(error)
                        if error.kind()
                            == jetstream::context::PublishErrorKind::MaxPayloadExceeded =>
                    {
                        Ok(Err(error.to_string()))
                    }
                    Err(error) => Err(NatsError::request(operation, subject, error)),
                }
                }
            })
            .map_err(|error| failure(operation, error))?
            .map_err(|sizes| {
                backend(
                    operation,
                    format!("{sizes}: the NATS server's max_payload is smaller than the directory's max_td_bytes allow"),
                )
            })
    }

    /// Decides on the state caught up with the log (`decide` answers the refusal, if
    /// any), appends, and waits until applied; tries again when another replica wrote first.
    fn commit(
        &self,
        operation: &'static str,
        id: &str,
        logged: &Logged,
        decide: impl Fn(&DirectoryState) -> Option<Outcome>,
    ) -> Result<Outcome, StoreFailure> {
        let subject = self.subject(id);
        let payload = bytes::Bytes::from(
            serde_json::to_vec(logged).map_err(|error| backend(operation, error))?,
        );
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(pause_after(attempt - 1));
            }
            let last = self.last_sequence(operation)?;
            self.inner.wait_applied(last, operation)?;
            let expected = {
                let state = self.inner.state();
                if let Some(refusal) = decide(&state.held) {
                    return Ok(refusal);
                }
                state.applied()
            };
            if let Some(sequence) = self.append(operation, &subject, &payload, expected)? {
                // Stored: the stream acknowledged it right after the message decided on
                // (its expected last sequence), so it holds whatever this replica's copy
                // shows. Waiting lets this replica's next read see it; a copy slower
                // than the timeout does not make the write a failure (a client retrying
                // a POST it was told failed would register the TD twice).
                if let Err(behind) = self.inner.wait_applied(sequence, operation) {
                    tracing::warn!(%behind, sequence, "a directory write was stored; this replica shows it once its copy of the log catches up");
                }
                return Ok(Outcome::Done(sequence));
            }
        }
        Err(backend(
            operation,
            format!("other replicas kept writing first ({ATTEMPTS} attempts)"),
        ))
    }
}

/// Applies the stream to `inner`'s state from its first message, following it, and
/// following it again whenever the consumer ends, delivers nothing while the log holds
/// more ([`STALLED`]) or `follow_again` is notified, until the store is dropped.
async fn follow(
    inner: Weak<Inner>,
    follow_again: Arc<tokio::sync::Notify>,
    stream: stream::Stream,
    inbox: String,
) {
    loop {
        let from = match inner.upgrade() {
            Some(strong) => strong.state().applied() + 1,
            None => return,
        };
        let created = stream
            .create_consumer(consumer::push::OrderedConfig {
                deliver_subject: inbox.clone(),
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: from,
                },
                ..Default::default()
            })
            .await;
        let messages = match created {
            Ok(consumer) => consumer.messages().await,
            Err(error) => {
                tracing::debug!(%error, "cannot follow the directory log: trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let Ok(mut messages) = messages else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let now = loop {
            let next = tokio::select! {
                next = tokio::time::timeout(STALLED, messages.next()) => next,
                () = follow_again.notified() => {
                    tracing::debug!("a message the directory log holds was not applied in time: following again");
                    break true;
                }
            };
            let Some(strong) = inner.upgrade() else {
                return;
            };
            let message = match next {
                Err(_) => {
                    let applied = strong.state().applied();
                    drop(strong);
                    if behind(&stream, applied).await {
                        tracing::debug!(applied, "the directory log's consumer delivers nothing while the log holds more (its server is gone): following again");
                        break true;
                    }
                    continue;
                }
                Ok(Some(Ok(message))) => message,
                Ok(Some(Err(error))) => {
                    tracing::debug!(%error, "the directory log's consumer failed: following again");
                    break false;
                }
                Ok(None) => break false,
            };
            let Ok(info) = message.info() else {
                continue;
            };
            let sequence = info.stream_sequence;
            match serde_json::from_slice::<Logged>(&message.payload) {
                Ok(logged) => strong.state().apply(sequence, logged),
                Err(error) => {
                    tracing::warn!(%error, sequence, "a directory log message is not one Concord writes: skipped");
                    strong.state().held.advance_to(sequence);
                }
            }
            strong.applied.notify_all();
        };
        if !now {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Whether the log holds a message after `applied`, as the server says now (`false` when
/// it does not answer: the consumer is then NATS's to bring back).
async fn behind(stream: &stream::Stream, applied: u64) -> bool {
    stream
        .get_info()
        .await
        .is_ok_and(|info| info.state.last_sequence > applied)
}

impl DirectoryStore for NatsDirectoryStore {
    fn entry(&self, id: &str) -> Result<Option<Entry>, StoreFailure> {
        Ok(self.inner.read_state("read an entry")?.held.entry(id))
    }

    fn write(&self, write: &Write<'_>) -> Result<Outcome, StoreFailure> {
        let logged = Logged::Write {
            entry: Box::new(StoredEntry::of(write.entry)),
            keys: write
                .keys
                .iter()
                .map(|key| (key.kind.name().to_owned(), key.value.clone()))
                .collect(),
            kind: write.kind.name().to_owned(),
            diff: write.diff.cloned(),
            retention: write.event_retention,
        };
        let id = write.entry.id.as_str();
        self.commit("write entry", id, &logged, |state| state.refusal(write))
    }

    fn remove(&self, removal: &Removal<'_>) -> Result<Outcome, StoreFailure> {
        let logged = Logged::Remove {
            id: removal.id.to_owned(),
            at: removal.at,
            retention: removal.event_retention,
        };
        self.commit("remove entry", removal.id, &logged, |state| {
            state.removal_refusal(removal)
        })
    }

    fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Result<Page, StoreFailure> {
        Ok(self
            .inner
            .read_state("list the entries")?
            .held
            .page(offset, limit, now))
    }

    fn scan(
        &self,
        after: Option<&str>,
        limit: u64,
        now: UnixMillis,
    ) -> Result<Vec<Entry>, StoreFailure> {
        Ok(self
            .inner
            .read_state("scan the entries")?
            .held
            .scan(after, limit, now))
    }

    fn count(&self, holder: Option<Holder<'_>>) -> Result<(u64, u64), StoreFailure> {
        Ok(self
            .inner
            .read_state("count the entries")?
            .held
            .count(holder))
    }

    fn expired(&self, now: UnixMillis, max: usize) -> Result<Vec<(String, u64)>, StoreFailure> {
        Ok(self
            .inner
            .read_state("find expired entries")?
            .held
            .expired(now, max))
    }

    fn events_after(&self, after: u64, max: usize) -> Result<EventsAfter, StoreFailure> {
        Ok(self
            .inner
            .read_state("read the events")?
            .held
            .events_after(after, max))
    }

    fn find(
        &self,
        keys: &[CapabilityKey],
        now: UnixMillis,
        limit: u64,
    ) -> Result<Vec<String>, StoreFailure> {
        Ok(self
            .inner
            .read_state("search by capability")?
            .held
            .find(keys, now, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_keeps_losing_pauses_longer_within_the_bound() {
        for lost in 0..ATTEMPTS {
            let cap = Duration::from_millis(1u64 << lost.min(16)).min(MOST_PAUSE);
            for _ in 0..50 {
                assert!(pause_after(lost) <= cap, "lost {lost}: over {cap:?}");
            }
        }
        // Random: a hundred pauses at the bound are not all the same.
        let pauses: std::collections::BTreeSet<_> = (0..100).map(|_| pause_after(10)).collect();
        assert!(pauses.len() > 50, "{pauses:?}");
    }
}
