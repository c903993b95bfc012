//! Events across replicas: one JetStream stream per agent, the stream sequence as the
//! event id, and every replica's event hub fed from one ordered consumer of it.
//!
//! A replica publishing appends to the stream (subject `concord.events.<agent>.<event>`)
//! and waits for the stream's acknowledgement: its sequence is the event's id. Nothing is
//! fanned out locally: each replica reads the whole stream with an ordered push consumer
//! and hands every event, its own included, to its hub in the stream's order
//! ([`EventLog::deliver_to`]). So every subscriber on every replica receives every
//! replica's events in one order, each once, and a replica's own event can never overtake
//! an earlier event of another replica still in flight. A replica starting reads the
//! stream from its oldest event, so its replay buffer holds what every other one holds: a
//! subscriber resumes with its last id on any replica. When NATS is away an append answers
//! [`EventLogError::Unavailable`] at once (not connected), or
//! [`EventLogError::Uncertain`] when the client took the event and no acknowledgement
//! came within the operation timeout (the client may still deliver it on reconnecting;
//! each message carries a random `Nats-Msg-Id`, so appended again under it, JetStream
//! keeps it once);
//! the consumer is created again from the event after the last one delivered when NATS is
//! back, so established subscriptions go on with no restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use concord_interact::{EventLog, EventLogError, EventSink};
use futures_util::StreamExt;
use serde_json::Value;

use crate::client::Nats;
use crate::error::{NatsError, BACKEND};

/// The stream's default name (and the agent's default token in its subjects).
pub const DEFAULT_EVENT_STREAM: &str = "concord_events";

/// The subjects' first two tokens: `concord.events.<agent>.<event>`.
const SUBJECT_ROOT: &str = "concord.events";

/// How often a replica asks the stream for its oldest event (to forget what it no longer
/// holds) and its latest (a consumer that delivered nothing since the last check while the
/// stream holds later events is gone, with the server it was on: it is created again,
/// rather than after the client's missed heartbeats, 10 s) while it delivers.
const RETENTION_CHECK: Duration = Duration::from_secs(1);

/// The longest a replica waits before it creates its consumer again after NATS failed it.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// The stream one agent's events are kept in, and how long: every replica of the agent
/// names the same; two agents sharing a NATS account name different ones (their subjects
/// must not overlap).
///
/// ```
/// let stream = concord_nats::EventStream::new("shop_events");
/// assert_eq!(stream.subjects(), "concord.events.shop_events.>");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventStream {
    /// The stream's name ([`DEFAULT_EVENT_STREAM`]).
    pub name: String,
    /// The agent's token in the subjects, `concord.events.<agent>.<event>` (the stream's
    /// name unless set).
    pub agent: String,
    /// Events older than this leave the stream (`None`: no age limit).
    pub max_age: Option<Duration>,
    /// At most this many events are kept, the oldest leave first (`None`: no limit).
    pub max_messages: Option<u64>,
    /// At most this many bytes of events are kept, the oldest leave first (`None`: no
    /// limit).
    pub max_bytes: Option<u64>,
}

impl EventStream {
    /// The stream `name` for the agent of the same token, with no retention limit.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            agent: name.clone(),
            name,
            max_age: None,
            max_messages: None,
            max_bytes: None,
        }
    }

    /// The subjects the stream holds: `concord.events.<agent>.>`.
    pub fn subjects(&self) -> String {
        format!("{SUBJECT_ROOT}.{}.>", self.agent)
    }

    /// Checks the names and limits as JetStream will take them: the key (`name`, `agent`,
    /// `max_messages`, `max_bytes`, `max_age`) and the reason when one will not do.
    ///
    /// # Errors
    /// The first field that will not do, and why, in words.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        check_token(&self.name, "a stream name").map_err(|reason| ("name", reason))?;
        check_token(&self.agent, "an agent token").map_err(|reason| ("agent", reason))?;
        for (key, limit) in [
            ("max_messages", self.max_messages),
            ("max_bytes", self.max_bytes),
        ] {
            match limit {
                Some(0) => return Err((key, "must be more than zero".to_owned())),
                Some(limit) if i64::try_from(limit).is_err() => {
                    return Err((key, format!("{limit} is more than JetStream counts")))
                }
                _ => {}
            }
        }
        if self.max_age.is_some_and(|age| age < Duration::from_secs(1)) {
            return Err((
                "max_age",
                "must be at least one second (JetStream ages events by the second)".to_owned(),
            ));
        }
        Ok(())
    }

    /// The stream's configuration: file storage, the oldest events leave first.
    fn config(&self) -> stream::Config {
        let limit = |limit: Option<u64>| limit.and_then(|n| i64::try_from(n).ok()).unwrap_or(-1);
        stream::Config {
            name: self.name.clone(),
            description: Some(format!(
                "Concord: the events of agent {}, one order for every replica",
                self.agent
            )),
            subjects: vec![self.subjects()],
            max_age: self.max_age.unwrap_or_default(),
            max_messages: limit(self.max_messages),
            max_bytes: limit(self.max_bytes),
            discard: stream::DiscardPolicy::Old,
            storage: stream::StorageType::File,
            ..Default::default()
        }
    }
}

/// Checks a stream name or subject token: 1 to 64 letters, digits, `-` and `_`.
fn check_token(text: &str, what: &str) -> Result<(), String> {
    if text.is_empty() || text.len() > 64 {
        return Err(format!("{text:?} must have 1 to 64 characters"));
    }
    match text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        Some(bad) => Err(format!(
            "{text:?} has {bad:?}: {what} is letters, digits, `-` and `_`"
        )),
        None => Ok(()),
    }
}

/// The subject token for an event name: the name itself when it is letters, digits, `-`
/// and `_`; otherwise `~` and the hex of its bytes (a `~` never starts a plain one).
fn event_token(event: &str) -> String {
    if !event.is_empty()
        && event
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        event.to_owned()
    } else {
        format!("~{}", hex::encode(event.as_bytes()))
    }
}

/// The event name a subject token stands for ([`event_token`]).
fn event_of(token: &str) -> Option<String> {
    match token.strip_prefix('~') {
        Some(encoded) => String::from_utf8(hex::decode(encoded).ok()?).ok(),
        None => Some(token.to_owned()),
    }
}

/// An agent's events on a JetStream stream: an [`EventLog`] that fans out itself
/// ([`EventLog::deliver_to`]) and passes `concord_interact::conformance::{event_log,
/// event_log_delivery}`.
#[derive(Debug, Clone)]
pub struct NatsEventLog {
    nats: Nats,
    stream: jetstream::stream::Stream,
    /// `concord.events.<agent>.`
    prefix: String,
}

impl NatsEventLog {
    /// Opens the stream `config` names, creating it when missing (by us or a replica
    /// starting at the same time), or bringing its subjects and retention to `config` when
    /// it was created with others (the operator changed them).
    ///
    /// # Errors
    /// [`NatsError::Stream`] when the stream cannot be found, created or changed (another
    /// stream holds its subjects, the account's limits), or its name or limits will not do.
    pub async fn open(nats: &Nats, config: &EventStream) -> Result<Self, NatsError> {
        let stream_error = |cause: String| NatsError::Stream {
            stream: config.name.clone(),
            cause,
        };
        config
            .check()
            .map_err(|(key, reason)| stream_error(format!("{key}: {reason}")))?;
        let wanted = stream::Config {
            num_replicas: nats.replicas(),
            ..config.config()
        };
        let jetstream = nats.jetstream();
        let attempt = async {
            match jetstream.get_stream(&config.name).await {
                Ok(mut stream) => {
                    let info = stream
                        .info()
                        .await
                        .map_err(|error| stream_error(error.to_string()))?;
                    let have = &info.config;
                    nats.check_replicas("stream", &config.name, have.num_replicas);
                    if have.subjects != wanted.subjects
                        || have.max_age != wanted.max_age
                        || have.max_messages != wanted.max_messages
                        || have.max_bytes != wanted.max_bytes
                    {
                        let mut changed = have.clone();
                        changed.subjects = wanted.subjects.clone();
                        changed.max_age = wanted.max_age;
                        changed.max_messages = wanted.max_messages;
                        changed.max_bytes = wanted.max_bytes;
                        jetstream.update_stream(changed).await.map_err(|error| {
                            nats.create_error(&config.name, error.to_string(), stream_error)
                        })?;
                    }
                    Ok(stream)
                }
                Err(_) => match jetstream.create_stream(wanted.clone()).await {
                    Ok(stream) => Ok(stream),
                    // Another replica created it between our look and our create.
                    Err(create) => jetstream.get_stream(&config.name).await.map_err(|_| {
                        nats.create_error(&config.name, create.to_string(), stream_error)
                    }),
                },
            }
        };
        let within = nats.operation_timeout().saturating_mul(3);
        let stream = tokio::time::timeout(within, attempt).await.map_err(|_| {
            // Unanswered: a permissions violation the server reported explains it.
            nats.create_error(
                &config.name,
                format!("no answer within {within:?}"),
                stream_error,
            )
        })??;
        Ok(Self {
            nats: nats.clone(),
            stream,
            prefix: format!("{SUBJECT_ROOT}.{}.", config.agent),
        })
    }

    /// The connection it publishes on.
    pub fn nats(&self) -> &Nats {
        &self.nats
    }

    /// The oldest event id the stream holds now, and the latest (both 0 when it never held
    /// one).
    ///
    /// # Errors
    /// [`NatsError`] when NATS did not answer within the operation timeout.
    pub async fn bounds(&self) -> Result<(u64, u64), NatsError> {
        let info = self.stream.get_info().await.map_err(|error| {
            NatsError::request(
                "read the event stream",
                self.stream.cached_info().config.name.clone(),
                error,
            )
        })?;
        Ok((info.state.first_sequence, info.state.last_sequence))
    }

    /// Reads the stream into `sink` until the sink is gone: `Ok` then, an error when NATS
    /// failed the consumer (`next` is the id to go on from).
    async fn feed_once(
        &self,
        sink: &Weak<dyn EventSink>,
        next: &mut Option<u64>,
    ) -> Result<(), NatsError> {
        let failed = |error: &dyn std::fmt::Display| {
            NatsError::request("read the event stream", self.prefix.clone(), error)
        };
        let (first, _) = self.bounds().await?;
        match sink.upgrade() {
            Some(sink) => sink.forget_before(first),
            None => return Ok(()),
        }
        let deliver_policy = match *next {
            None => consumer::DeliverPolicy::All,
            Some(start_sequence) => consumer::DeliverPolicy::ByStartSequence { start_sequence },
        };
        let consumer = self
            .stream
            .create_consumer(consumer::push::OrderedConfig {
                deliver_subject: self.nats.inbox(),
                filter_subject: format!("{}>", self.prefix),
                deliver_policy,
                replay_policy: consumer::ReplayPolicy::Instant,
                ..Default::default()
            })
            .await
            .map_err(|error| failed(&error))?;
        let mut messages = consumer.messages().await.map_err(|error| failed(&error))?;
        let mut check = tokio::time::interval_at(
            tokio::time::Instant::now() + RETENTION_CHECK,
            RETENTION_CHECK,
        );
        // Whether an event arrived since the last check.
        let mut delivering = false;
        loop {
            tokio::select! {
                message = messages.next() => {
                    let message = match message {
                        Some(Ok(message)) => message,
                        Some(Err(error)) => return Err(failed(&error)),
                        None => return Err(failed(&"the consumer ended")),
                    };
                    let Some(sink) = sink.upgrade() else {
                        return Ok(());
                    };
                    delivering = true;
                    let id = message.info().map_err(|error| failed(&error))?.stream_sequence;
                    if next.is_some_and(|next| id < next) {
                        // Delivered already (a consumer created again overlaps).
                        continue;
                    }
                    if next.is_some_and(|next| id > next) {
                        // The ids between left the stream before they reached this replica
                        // (cut off past its retention; the ordered consumer, created again,
                        // starts at the oldest it holds): its subscribers are told of a gap.
                        sink.forget_before(id);
                    }
                    *next = Some(id.saturating_add(1));
                    let event = message
                        .subject
                        .strip_prefix(self.prefix.as_str())
                        .and_then(event_of);
                    let data = serde_json::from_slice::<Value>(&message.payload);
                    match (event, data) {
                        (Some(event), Ok(data)) => sink.deliver(&event, id, data),
                        (event, data) => tracing::warn!(
                            id,
                            subject = %message.subject,
                            named = event.is_some(),
                            json = data.is_ok(),
                            "an event on the stream is not one Concord wrote: skipped"
                        ),
                    }
                }
                _ = check.tick() => {
                    if sink.strong_count() == 0 {
                        return Ok(());
                    }
                    // What the stream no longer holds leaves the replay buffers too; NATS
                    // away here is the consumer's business.
                    if let Ok((first, last)) = self.bounds().await {
                        if let Some(sink) = sink.upgrade() {
                            sink.forget_before(first);
                        }
                        // Nothing for a whole check while the stream holds events not
                        // delivered: the consumer is gone (with its server).
                        let expected = next.unwrap_or(first);
                        if !delivering && last > 0 && last >= expected {
                            return Err(failed(&format!(
                                "no event for {RETENTION_CHECK:?} while the stream holds up to {last} (its consumer is gone)"
                            )));
                        }
                    }
                    delivering = false;
                }
            }
        }
    }

    /// Delivers the stream to `sink` until the sink is gone, creating the consumer again
    /// (from the event after the last one delivered) whenever NATS fails it.
    async fn feed(self, sink: Weak<dyn EventSink>) {
        let mut next = None;
        let mut wait = Duration::from_millis(50);
        while sink.strong_count() > 0 {
            let before = next;
            match self.feed_once(&sink, &mut next).await {
                Ok(()) => return,
                Err(error) => {
                    if next != before {
                        wait = Duration::from_millis(50);
                    }
                    tracing::info!(%error, retry_in = ?wait, "the event stream's consumer failed: created again");
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(2).min(MAX_RETRY);
                }
            }
        }
    }
}

impl NatsEventLog {
    /// Publishes `event` under the message id `<event token>:<attempt>` (JetStream drops
    /// a message whose id it stored within the stream's duplicate window, answering the
    /// first one's sequence): see [`EventLog::append`].
    fn publish(&self, event: &str, data: &Value, attempt: String) -> Result<u64, EventLogError> {
        const OPERATION: &str = "append an event";
        let unavailable = |reason: String| EventLogError::Unavailable {
            backend: BACKEND,
            event: event.to_owned(),
            reason,
        };
        // A publish while disconnected would wait in the client's buffer and could reach
        // the stream after we answered that it failed: refuse it at once.
        if !self.nats.is_connected() {
            return Err(unavailable(
                "NATS is not connected (the client reconnects by itself)".to_owned(),
            ));
        }
        let payload = serde_json::to_vec(data).map_err(|error| unavailable(error.to_string()))?;
        let token = event_token(event);
        let subject = format!("{}{token}", self.prefix);
        let jetstream = self.nats.jetstream().clone();
        // Once the client has the message, it may reach the stream whatever we answer
        // (the client flushes what it holds when it reconnects).
        let handed = Arc::new(AtomicBool::new(false));
        let handed_over = Arc::clone(&handed);
        // The stream deduplicates over all its subjects: an attempt is one per event name.
        let id = format!("{token}:{attempt}");
        // Once: a publish that may have reached the stream is the caller's to repeat, with
        // its attempt (`EventLogError::Uncertain`).
        self.nats
            .run_once(OPERATION, async move {
                let failed = |error: &dyn std::fmt::Display| {
                    NatsError::request(OPERATION, subject.clone(), error)
                };
                let message = jetstream::message::PublishMessage::build()
                    .payload(payload.into())
                    .message_id(id);
                let acknowledged = match jetstream.send_publish(subject.clone(), message).await {
                    Ok(acknowledged) => acknowledged,
                    Err(error)
                        if error.kind()
                            == jetstream::context::PublishErrorKind::MaxPayloadExceeded =>
                    {
                        return Ok(Err(error.to_string()));
                    }
                    Err(error) => return Err(failed(&error)),
                };
                handed_over.store(true, Ordering::SeqCst);
                let ack = acknowledged.await.map_err(|error| failed(&error))?;
                Ok(Ok(ack.sequence))
            })
            .map_err(|error| {
                if handed.load(Ordering::SeqCst) || matches!(error, NatsError::Timeout { .. }) {
                    EventLogError::Uncertain {
                        backend: BACKEND,
                        event: event.to_owned(),
                        reason: error.to_string(),
                        attempt,
                    }
                } else {
                    unavailable(error.to_string())
                }
            })?
            .map_err(|sizes| EventLogError::TooLarge {
                backend: BACKEND,
                event: event.to_owned(),
                reason: format!("{sizes} (the NATS server's max_payload)"),
            })
    }
}

/// A new message id: 128 random bits in hex.
fn new_attempt() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)?;
    Ok(hex::encode(bytes))
}

impl EventLog for NatsEventLog {
    fn append(&self, event: &str, data: &Value) -> Result<u64, EventLogError> {
        let attempt = new_attempt().map_err(|error| EventLogError::Unavailable {
            backend: BACKEND,
            event: event.to_owned(),
            reason: format!("no random message id: {error}"),
        })?;
        self.publish(event, data, attempt)
    }

    /// Publishes under the same message id: kept once if the first one arrived within the
    /// stream's duplicate window (JetStream's default, 2 minutes).
    fn append_again(&self, event: &str, data: &Value, attempt: &str) -> Result<u64, EventLogError> {
        self.publish(event, data, attempt.to_owned())
    }

    fn deliver_to(&self, sink: Weak<dyn EventSink>) -> bool {
        self.nats.handle().spawn(self.clone().feed(sink));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_become_one_subject_token_and_back() {
        for name in [
            "userFeedbackReceived",
            "a-b_c",
            "with.dot",
            "with space",
            "*",
            ">",
            "~x",
            "été",
            "",
        ] {
            let token = event_token(name);
            assert!(
                !token.is_empty()
                    && token
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '~'),
                "{name:?} gave {token:?}"
            );
            assert_eq!(event_of(&token).as_deref(), Some(name), "{token:?}");
        }
        assert_eq!(event_token("tick"), "tick");
        assert_ne!(event_token("~74"), "~74");
    }

    #[test]
    fn a_stream_is_checked_as_jetstream_takes_it() {
        assert!(EventStream::new(DEFAULT_EVENT_STREAM).check().is_ok());
        assert_eq!(EventStream::new("a.b").check().unwrap_err().0, "name");
        let mut stream = EventStream::new("events");
        stream.agent = "shop*".to_owned();
        assert_eq!(stream.check().unwrap_err().0, "agent");
        let mut stream = EventStream::new("events");
        stream.max_messages = Some(0);
        assert_eq!(stream.check().unwrap_err().0, "max_messages");
        let mut stream = EventStream::new("events");
        stream.max_bytes = Some(u64::MAX);
        assert_eq!(stream.check().unwrap_err().0, "max_bytes");
        let mut stream = EventStream::new("events");
        stream.max_age = Some(Duration::from_millis(10));
        assert_eq!(stream.check().unwrap_err().0, "max_age");
        let config = EventStream::new("events").config();
        assert_eq!(
            (config.max_messages, config.max_bytes, config.max_age),
            (-1, -1, Duration::ZERO)
        );
    }
}
