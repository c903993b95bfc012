//! The directory's notifications: `GET /events` and `GET /events/{thing_created |
//! thing_updated | thing_deleted}` as Server-Sent Events (tdd-notification-sse), each
//! event named by its type (`event: thing_created`, `thing_updated` or `thing_deleted`:
//! tdd-notification-event-types) with its store-assigned id (tdd-notification-event-id)
//! and `data`
//! `{"id": …}`, or with `?diff=true` the TD created or the merge patch applied
//! (tdd-notification-data-diff).
//!
//! One [`Hub`] per directory fans the events out: every write wakes it (and it looks every
//! 250 ms for the events other processes sharing the store wrote), it reads the
//! events after the slowest subscriber's position from the store (the store's retention,
//! `event_retention`, is the replay buffer) and queues each subscriber's share into its
//! bounded SSE queue (`Limits::http_sse_queue` messages, `http_sse_queue_bytes` bytes,
//! as every SSE answer of the node). It never waits for a subscriber: one whose queue is
//! full is closed (its answer ends; it reconnects with `Last-Event-ID` and resumes from
//! the store), so a reader that never reads holds neither the directory nor the others.
//! Subscribers are counted as the sessions holding a subscription are:
//! `Limits::max_holding_sessions_per_address` per client address (429 beyond) and
//! `Limits::max_holding_sessions` in all, a budget of the directory's own. When every
//! place is taken, a newcomer sheds as a holding session does: the subscriber held
//! longest of the address holding the most is let go when that address holds more than
//! the newcomer's would; else the newcomer is refused (503).
//!
//! A client resuming with `Last-Event-ID: n` gets every event after `n` still kept; when
//! some of them are no longer kept, the answer is 410 (`event-gap`: reload the listing,
//! then subscribe anew without the header), and an id later than any event is 400
//! (`unknown-event`).

use std::sync::{Arc, Mutex, PoisonError};

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use concord_directory::{Directory, DirectoryError, EventKind, ThingEvent};
use tokio::sync::Notify;

use super::request::{parameters, refused, Failed};
use super::DirectoryState;
use crate::admission::ClientKey;
use crate::binding::sse::{self, SseLimits, SseMessage, SseSender};
use crate::binding::{ProblemResponse, Site};
use crate::Limits;

/// How many events the hub reads from the store at once.
const BATCH: usize = 256;

/// How often the hub looks for events another process wrote to the store it shares (a
/// directory replica on NATS, `concord_nats::NatsDirectoryStore`): its own writes wake it
/// at once, theirs are delivered within this.
const FOLLOW: std::time::Duration = std::time::Duration::from_millis(250);

/// Whether the query string asks `diff=true`.
fn diff(raw: Option<&str>) -> bool {
    parameters(raw)
        .iter()
        .any(|(name, value)| name == "diff" && value == "true")
}

/// One subscriber: what it wants and how far it has been sent.
struct Subscriber {
    sender: SseSender,
    /// Its client address (an IPv4 address or an IPv6 /64).
    client: ClientKey,
    /// Only events of this kind (`None`: every kind).
    kind: Option<EventKind>,
    diff: bool,
    /// The id of the last event it was sent (or skipped).
    cursor: u64,
}

/// The fan-out of a directory's events to its SSE subscribers.
pub(super) struct Hub {
    directory: Directory,
    wake: Notify,
    subscribers: Mutex<Vec<Subscriber>>,
    limits: SseLimits,
    /// Subscribers at once, in all and per client address.
    max_subscribers: usize,
    max_per_address: usize,
}

impl Hub {
    /// A hub over `directory`, its subscribers' queues bounded as every SSE answer of the
    /// node's HTTP bindings (`Limits::http_sse_queue`, `http_sse_queue_bytes`,
    /// `http_sse_keep_alive`), their count as the sessions holding a subscription are
    /// (`Limits::max_holding_sessions` in all, `max_holding_sessions_per_address` per
    /// client address; a budget of the directory's own, apart from the sessions').
    pub(super) fn new(directory: Directory, limits: &Limits) -> Arc<Self> {
        Arc::new(Self {
            directory,
            wake: Notify::new(),
            subscribers: Mutex::new(Vec::new()),
            limits: SseLimits {
                queue_messages: limits.http_sse_queue,
                queue_bytes: limits.http_sse_queue_bytes,
                keep_alive: limits.http_sse_keep_alive,
            },
            max_subscribers: limits.max_holding_sessions,
            max_per_address: limits.max_holding_sessions_per_address,
        })
    }

    /// Something was written: the hub reads the new events.
    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    fn subscribers(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Delivers events until the server drains.
    pub(super) async fn run(self: Arc<Self>, site: Site) {
        loop {
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(FOLLOW) => {}
                () = site.draining() => return,
            }
            while self.deliver().await {}
        }
    }

    /// Sends the subscribers the events after the slowest one's cursor (a batch); whether
    /// another batch may be waiting.
    async fn deliver(&self) -> bool {
        let from = {
            let mut subscribers = self.subscribers();
            subscribers.retain(|subscriber| !subscriber.sender.is_closed());
            match subscribers.iter().map(|subscriber| subscriber.cursor).min() {
                Some(from) => from,
                None => return false,
            }
        };
        let directory = self.directory.clone();
        let read = tokio::task::spawn_blocking(move || directory.events_since(from, BATCH)).await;
        let events = match read {
            Ok(Ok(events)) => events,
            Ok(Err(DirectoryError::EventGap { .. } | DirectoryError::UnknownEvent { .. })) => {
                // The slowest subscribers are behind what the store keeps: their answers
                // end (they resume and learn the gap).
                self.subscribers()
                    .retain(|subscriber| subscriber.cursor != from);
                return true;
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot read the directory's events");
                return false;
            }
            Err(_) => return false,
        };
        let full = events.len() == BATCH;
        let mut subscribers = self.subscribers();
        subscribers.retain_mut(|subscriber| send(subscriber, &events));
        full
    }

    /// Adds a subscriber whose cursor is `after`, or says why not: 429 when its address
    /// holds its share, 503 when the directory serves its most.
    fn join(&self, subscriber: Subscriber) -> Result<(), ProblemResponse> {
        let mut subscribers = self.subscribers();
        subscribers.retain(|subscriber| !subscriber.sender.is_closed());
        let ours = subscribers
            .iter()
            .filter(|held| held.client == subscriber.client)
            .count();
        if ours >= self.max_per_address {
            return Err(ProblemResponse::new(
                429,
                "Too many subscriptions",
                format!(
                    "{} holds {ours} event subscriptions, the most one address may \
                     (Limits::max_holding_sessions_per_address)",
                    subscriber.client
                ),
            ));
        }
        if subscribers.len() >= self.max_subscribers
            && !shed_for(&mut subscribers, subscriber.client)
        {
            return Err(ProblemResponse::new(
                503,
                "Too many subscribers",
                format!(
                    "the directory serves {} event subscribers at once \
                     (Limits::max_holding_sessions); retry later",
                    self.max_subscribers
                ),
            ));
        }
        subscribers.push(subscriber);
        drop(subscribers);
        self.wake();
        Ok(())
    }
}

/// Makes room for a newcomer from `newcomer`'s address when every place is taken, by the
/// node's holders' rule: the subscriber held longest (the first in `subscribers`) of the
/// address holding the most is let go (its answer ends after what is queued; it may
/// resume with `Last-Event-ID`), when that address holds at least one more than the
/// newcomer's would with it; else nobody is, and the newcomer is refused. So addresses
/// holding every place cannot keep a new address out, and a newcomer never sheds an
/// address holding fewer than its own. Whether one was let go.
fn shed_for(subscribers: &mut Vec<Subscriber>, newcomer: ClientKey) -> bool {
    let mut held: std::collections::HashMap<ClientKey, usize> =
        std::collections::HashMap::from([(newcomer, 1)]);
    for subscriber in subscribers.iter() {
        *held.entry(subscriber.client).or_insert(0) += 1;
    }
    let ours = held.get(&newcomer).copied().unwrap_or(1);
    let Some((client, count)) = held
        .iter()
        .filter(|(client, _)| **client != newcomer)
        .max_by_key(|(_, count)| **count)
        .map(|(client, count)| (*client, *count))
    else {
        return false;
    };
    if count <= ours {
        return false;
    }
    match subscribers.iter().position(|held| held.client == client) {
        Some(oldest) => {
            subscribers.remove(oldest);
            true
        }
        None => false,
    }
}

/// Queues `subscriber`'s share of `events`; `false` when its answer ended (closed, or its
/// queue overflowed).
fn send(subscriber: &mut Subscriber, events: &[ThingEvent]) -> bool {
    let after = subscriber.cursor;
    for event in events.iter().filter(|event| event.id > after) {
        subscriber.cursor = event.id;
        if subscriber.kind.is_some_and(|kind| kind != event.kind) {
            continue;
        }
        let data = event.data(subscriber.diff);
        let named = SseMessage::json(event.id.to_string(), &data)
            .and_then(|message| message.named(event.kind.name()));
        let Ok(message) = named else {
            continue;
        };
        if subscriber.sender.send(message).is_err() {
            return false;
        }
    }
    true
}

/// `GET /events`: every kind.
pub(super) async fn all(
    State(state): State<Arc<DirectoryState>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let wants = Wants {
        kind: None,
        diff: diff(raw.as_deref()),
        client: ClientKey::of(remote.ip()),
    };
    subscribe(&state, wants, &headers, uri.path()).await
}

/// `GET /events/{kind}`: one kind.
pub(super) async fn of_kind(
    State(state): State<Arc<DirectoryState>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    Path(kind): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let Some(kind) = EventKind::from_name(&kind) else {
        return ProblemResponse::new(
            404,
            "No such event type",
            format!("`{kind}` is not an event type: thing_created, thing_updated or thing_deleted"),
        )
        .with_instance(uri.path())
        .into_response();
    };
    // A deletion carries no more than its id (tdd-notification-data-delete-diff).
    let wants = Wants {
        kind: Some(kind),
        diff: diff(raw.as_deref()) && kind != EventKind::Deleted,
        client: ClientKey::of(remote.ip()),
    };
    subscribe(&state, wants, &headers, uri.path()).await
}

/// What a new subscriber asks for, and where from.
struct Wants {
    kind: Option<EventKind>,
    diff: bool,
    client: ClientKey,
}

/// The SSE answer of a new subscriber, resumed after `Last-Event-ID` when it sent one.
async fn subscribe(
    state: &DirectoryState,
    wants: Wants,
    headers: &HeaderMap,
    instance: &str,
) -> Response {
    let after = match sse::last_event_id(headers) {
        Ok(None) => None,
        Ok(Some(id)) => match id.parse::<u64>() {
            Ok(id) => Some(id),
            Err(_) => return bad_event_id(id, instance),
        },
        Err(error) => return bad_event_id(&error.to_string(), instance),
    };
    // Where the subscriber starts: after its last event (checked: still kept, not from
    // the future), else after the latest.
    let start = state
        .run(move |directory, _| match after {
            Some(after) => directory.events_since(after, 0).map(|_| after),
            None => directory.latest_event(),
        })
        .await;
    let after = match start {
        Ok(Ok(after)) => after,
        Ok(Err(error)) => return refused(&error, instance),
        Err(Failed) => return Failed.answer(instance),
    };
    let (sender, queue) = sse::sse_channel(state.hub.limits);
    let subscriber = Subscriber {
        sender,
        client: wants.client,
        kind: wants.kind,
        diff: wants.diff,
        cursor: after,
    };
    if let Err(refused) = state.hub.join(subscriber) {
        return refused.with_instance(instance).into_response();
    }
    sse::sse_response(&state.http.site, queue)
}

/// 400: a `Last-Event-ID` that is not one of ours.
fn bad_event_id(said: &str, instance: &str) -> Response {
    ProblemResponse::new(
        400,
        "Invalid Last-Event-ID",
        format!("Last-Event-ID must be an event id of this directory (a number): {said}"),
    )
    .with_instance(instance)
    .into_response()
}
