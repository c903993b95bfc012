//! Publish-subscribe: per-event sequence numbers, a bounded replay buffer for resuming,
//! explicit gaps, a bounded queue per subscriber with a declared overflow policy.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write as _;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::message::{Message, MessageType, Operation};
use crate::problem::{Problem, ProblemType};
use crate::Limits;

/// Who receives events: the driver's id for one subscriber (a connection, a session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(pub u64);

/// What happens when a subscriber's queue is full and another message is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Overflow {
    /// The oldest queued message is dropped; the subscriber later receives a [`Gap`]
    /// naming what it missed.
    #[default]
    DropOldest,
    /// The subscriber is dropped: its queue and subscriptions are gone and
    /// [`HubEvent::SubscriberDropped`] says so.
    Disconnect,
}

/// Events of one name that a subscriber will not receive: ids `from..=to`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gap {
    /// The event name.
    pub event: Arc<str>,
    /// The first missed id.
    pub from: u64,
    /// The last missed id.
    pub to: u64,
}

/// One published event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// The event name.
    pub event: Arc<str>,
    /// Its sequence number among events of this name, from 1.
    pub id: u64,
    /// Its data, shared by every subscriber's queue.
    pub data: Arc<Value>,
    /// When it was published.
    pub published_at: Instant,
    /// `data` serialised once at publish, spliced into every subscriber's notification
    /// ([`Delivery::encode_notification`]).
    encoded: Arc<EncodedData>,
}

/// An event's data as JSON, with its nesting depth, shared by every subscriber.
#[derive(Debug, PartialEq)]
struct EncodedData {
    /// The compact JSON of the data, as `serde_json` writes it inside a message; `None`
    /// if it could not be serialised (the message path reports why).
    json: Option<Box<str>>,
    /// The data's nesting depth (0 for a scalar).
    depth: usize,
}

/// What a gap weighs in a queue besides its event name.
const GAP_WEIGHT: usize = 16;

/// The most entries an empty queue or replay buffer keeps room for: one grown past it by a
/// burst gives its memory back once it drains (below it, keeping the room saves an
/// allocation per event).
pub(crate) const KEPT_CAPACITY: usize = 64;

impl EventRecord {
    /// What the event weighs in a queue or the replay buffer: its data as JSON plus its
    /// name (`Limits::subscriber_queue_bytes`, `Limits::replay_bytes`).
    pub fn weight(&self) -> usize {
        let json = self.encoded.json.as_deref().map_or(0, str::len);
        json.saturating_add(self.event.len())
    }
}

impl EncodedData {
    fn of(data: &Value) -> Self {
        Self {
            json: serde_json::to_string(data).ok().map(String::into_boxed_str),
            depth: crate::message::depth(data),
        }
    }
}

/// What [`EventHub::poll_delivery`] hands out for one subscriber.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// An event to send.
    Event(EventRecord),
    /// Events that will never come: say so.
    Gap(Gap),
}

impl Delivery {
    /// What it weighs in a subscriber's queue: an event's [`EventRecord::weight`], a gap
    /// its name plus 16 bytes.
    pub fn weight(&self) -> usize {
        match self {
            Self::Event(record) => record.weight(),
            Self::Gap(gap) => gap.event.len() + GAP_WEIGHT,
        }
    }

    /// The event name.
    pub fn event(&self) -> &str {
        match self {
            Self::Event(record) => &record.event,
            Self::Gap(gap) => &gap.event,
        }
    }

    /// The notification to send on the subscription opened by the request with this
    /// `correlationID` and operation (`subscribeevent` or `subscribeallevents`): an event
    /// carries `eventID` and `value`; a gap carries a [`ProblemType::Gap`] problem with
    /// `from` and `to`.
    pub fn to_message(&self, operation: Operation, correlation_id: &str) -> Message {
        let message = Message::new(MessageType::Notification, operation, correlation_id)
            .with_name(self.event());
        match self {
            Self::Event(record) => message
                .with_event_id(record.id)
                .with_value(Value::clone(&record.data)),
            Self::Gap(gap) => message.with_error(Problem::gap(&gap.event, gap.from, gap.to)),
        }
    }

    /// The bytes [`Message::encode`] gives for [`Delivery::to_message`], built from the
    /// data serialised once at publish: only the `correlationID` and `operation` are
    /// written per subscriber. `None` for a gap, and for anything `Message::encode` would
    /// refuse (a field over its limit, too deep, too large): take the message path, which
    /// says why.
    pub fn encode_notification(
        &self,
        operation: Operation,
        correlation_id: &str,
        limits: &Limits,
    ) -> Option<Vec<u8>> {
        let Self::Event(record) = self else {
            return None;
        };
        let json = record.encoded.json.as_deref()?;
        let fits = |text: &str, limit: usize| !text.is_empty() && text.len() <= limit;
        if !fits(correlation_id, limits.max_correlation_id)
            || !fits(&record.event, limits.max_name)
            || 1 + record.encoded.depth > limits.max_depth
        {
            return None;
        }
        // The fields in `Message`'s serialisation order.
        let mut out = Vec::with_capacity(
            96 + record.event.len() + correlation_id.len() + json.len() + operation.as_str().len(),
        );
        out.extend_from_slice(b"{\"messageType\":\"notification\",\"operation\":\"");
        out.extend_from_slice(operation.as_str().as_bytes());
        out.extend_from_slice(b"\",\"name\":");
        serde_json::to_writer(&mut out, &*record.event).ok()?;
        out.extend_from_slice(b",\"correlationID\":");
        serde_json::to_writer(&mut out, correlation_id).ok()?;
        out.extend_from_slice(b",\"value\":");
        out.extend_from_slice(json.as_bytes());
        out.extend_from_slice(b",\"eventID\":");
        write!(out, "{}}}", record.id).ok()?;
        (out.len() <= limits.max_message_size).then_some(out)
    }
}

/// The answer to a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribed {
    /// The id of the latest event of this name so far (0: none yet).
    pub latest: u64,
    /// Events queued from the replay buffer.
    pub replayed: usize,
    /// Events older than the replay buffer that the resume asked for, queued as a
    /// [`Delivery::Gap`] before the replay.
    pub gap: Option<Gap>,
}

/// Why a subscriber was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// Its queue was full under [`Overflow::Disconnect`].
    Overflow,
}

/// What the hub tells its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubEvent {
    /// The subscriber is gone, with everything queued for it; tell it (a
    /// [`ProblemType::SubscriberDropped`] notification) and close its subscriptions.
    SubscriberDropped {
        /// Who.
        subscriber: SubscriberId,
        /// Why.
        reason: DropReason,
    },
}

/// A publish or subscription the hub refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// No event of this name is declared.
    #[error("unknown event {name:?}")]
    UnknownEvent {
        /// The name (its first 64 characters).
        name: String,
    },
    /// [`EventHub::declare`] of a name already declared.
    #[error("event {name:?} is already declared")]
    AlreadyDeclared {
        /// The name.
        name: String,
    },
    /// An event name that is empty or longer than `Limits::max_name`.
    #[error("event name of {len} bytes is empty or exceeds the limit of {limit} bytes")]
    NameTooLong {
        /// Its length.
        len: usize,
        /// `Limits::max_name`.
        limit: usize,
    },
    /// `Limits::max_events` events are declared already.
    #[error("{limit} events are declared already")]
    TooManyEvents {
        /// `Limits::max_events`.
        limit: usize,
    },
    /// `Limits::max_subscribers` subscribers are served already.
    #[error("{limit} subscribers are served already")]
    TooManySubscribers {
        /// `Limits::max_subscribers`.
        limit: usize,
    },
    /// The subscriber already has this subscription.
    #[error("subscriber {} is already subscribed to {name:?}", subscriber.0)]
    AlreadySubscribed {
        /// Who.
        subscriber: SubscriberId,
        /// The event name, or `*` for all events.
        name: String,
    },
    /// The subscriber has no such subscription (an event received through
    /// `subscribeallevents` is unsubscribed with [`EventHub::unsubscribe_all`]).
    #[error("subscriber {} is not subscribed to {name:?}", subscriber.0)]
    NotSubscribed {
        /// Who.
        subscriber: SubscriberId,
        /// The event name, or `*` for all events.
        name: String,
    },
    /// A resume from an id this event never reached (the provider restarted?):
    /// subscribe again without `lastEventID`. Under a shared log that fans out
    /// ([`EventHub::forget_before`]), an id at most `Limits::replay_events` above the
    /// highest id the hub holds is taken as one on its way (seen on another node), not
    /// refused.
    #[error("lastEventID {last_seen} of {name:?} is ahead of the latest id {latest}")]
    LastSeenAhead {
        /// The event name.
        name: String,
        /// The id the subscriber claims to have seen.
        last_seen: u64,
        /// The latest id published.
        latest: u64,
    },
    /// A resume (a `lastEventID`) on a hub fed by a shared log that has not reached it yet
    /// ([`EventHub::fed_by_shared_log`]: a replica started while its log was away): which
    /// ids exist is unknown, so the resume can be neither taken nor refused. Worth trying
    /// again (503).
    #[error(
        "lastEventID of {name:?} cannot be resumed yet: the shared event log has not been reached"
    )]
    NotReady {
        /// The event name.
        name: String,
    },
    /// [`EventHub::publish_as`] with an id not above the latest one of its event (an
    /// [`EventLog`](crate::EventLog) that broke its contract): nothing is published.
    #[error("event {name:?} was given id {id}, not above its latest id {latest}")]
    IdNotAfter {
        /// The event name.
        name: String,
        /// The id given.
        id: u64,
        /// The latest id published.
        latest: u64,
    },
    /// The subscription's replay overflowed the queue under [`Overflow::Disconnect`]: the
    /// subscriber is dropped ([`HubEvent::SubscriberDropped`] says so too).
    #[error("subscriber {} was dropped: its replay overflowed its queue", subscriber.0)]
    Dropped {
        /// Who.
        subscriber: SubscriberId,
    },
}

impl EventError {
    /// The problem to answer with.
    pub fn to_problem(&self) -> Problem {
        let kind = match self {
            Self::UnknownEvent { .. } => ProblemType::UnknownEvent,
            Self::TooManyEvents { .. } | Self::TooManySubscribers { .. } => {
                ProblemType::LimitReached
            }
            Self::Dropped { .. } => ProblemType::SubscriberDropped,
            Self::NotReady { .. } => ProblemType::Unavailable,
            Self::NameTooLong { .. } => ProblemType::BadMessage,
            _ => ProblemType::Conflict,
        };
        Problem::of(kind, self.to_string())
    }
}

#[derive(Debug)]
struct Log {
    name: Arc<str>,
    /// The id the next publish gets.
    next_id: u64,
    /// The id of the first event published here (`None`: none yet): with ids from a
    /// shared [`EventLog`](crate::EventLog) it may lie far above the hub's first id, and
    /// the ids between were never this hub's to lose.
    first_published: Option<u64>,
    replay: VecDeque<EventRecord>,
    /// The replay buffer's weight.
    replay_bytes: usize,
    /// The highest id the replay buffer's own bounds dropped (0: none).
    pruned_to: u64,
}

impl Log {
    fn latest(&self) -> u64 {
        self.next_id - 1
    }

    fn keep(&mut self, record: EventRecord) {
        self.replay_bytes += record.weight();
        self.replay.push_back(record);
    }

    fn prune(&mut self, limits: &Limits, now: Instant) {
        while self.replay.len() > limits.replay_events || self.replay_bytes > limits.replay_bytes {
            self.drop_oldest();
        }
        if let Some(age) = limits.replay_max_age {
            while self
                .replay
                .front()
                .is_some_and(|r| now.saturating_duration_since(r.published_at) >= age)
            {
                self.drop_oldest();
            }
        }
        if self.replay.is_empty() && self.replay.capacity() > KEPT_CAPACITY {
            // A buffer grown by a burst gives its memory back.
            self.replay = VecDeque::new();
        }
    }

    fn drop_oldest(&mut self) {
        if let Some(record) = self.replay.pop_front() {
            self.replay_bytes = self.replay_bytes.saturating_sub(record.weight());
            self.pruned_to = self.pruned_to.max(record.id);
        }
    }

    /// Drops the events below `first` (a shared log forgot them), not counted as pruned.
    fn forget_before(&mut self, first: u64) {
        while self.replay.front().is_some_and(|r| r.id < first) {
            if let Some(record) = self.replay.pop_front() {
                self.replay_bytes = self.replay_bytes.saturating_sub(record.weight());
            }
        }
    }
}

#[derive(Debug, Default)]
struct Subscriber {
    all: bool,
    events: BTreeSet<Arc<str>>,
    queue: VecDeque<Delivery>,
    /// The queue's weight ([`Delivery::weight`]).
    bytes: usize,
    /// Missed ranges not yet announced, per event; always older than anything queued
    /// for that event, so they go out first.
    gaps: BTreeMap<Arc<str>, (u64, u64)>,
    /// Per event, the id a resume named that had not reached this hub yet (under a shared
    /// log: seen on another node, still on its way here): events up to it are not queued.
    seen_ahead: BTreeMap<Arc<str>, u64>,
}

impl Subscriber {
    fn wants(&self, event: &str) -> bool {
        self.all || self.events.contains(event)
    }

    fn is_idle(&self) -> bool {
        !self.all && self.events.is_empty()
    }

    fn note_gap(&mut self, event: Arc<str>, from: u64, to: u64) {
        self.gaps
            .entry(event)
            .and_modify(|(f, t)| {
                *f = (*f).min(from);
                *t = (*t).max(to);
            })
            .or_insert((from, to));
    }

    fn note_missed(&mut self, delivery: Delivery) {
        match delivery {
            Delivery::Event(r) => self.note_gap(r.event, r.id, r.id),
            Delivery::Gap(g) => self.note_gap(g.event, g.from, g.to),
        }
    }

    /// Queues a delivery within both bounds, the count and the bytes (a queue takes one
    /// message whatever its weight); `false` when the subscriber must be disconnected.
    fn push(&mut self, delivery: Delivery, limits: &Limits, overflow: Overflow) -> bool {
        let weight = delivery.weight();
        while !self.queue.is_empty()
            && (self.queue.len() >= limits.subscriber_queue
                || self.bytes + weight > limits.subscriber_queue_bytes)
        {
            match overflow {
                Overflow::Disconnect => return false,
                Overflow::DropOldest => {
                    if let Some(oldest) = self.pop() {
                        self.note_missed(oldest);
                    }
                }
            }
        }
        if limits.subscriber_queue == 0 {
            // A zero capacity: the delivery itself is missed.
            if overflow == Overflow::Disconnect {
                return false;
            }
            self.note_missed(delivery);
            return true;
        }
        self.bytes += weight;
        self.queue.push_back(delivery);
        true
    }

    /// Takes the oldest queued message; a queue that drained gives back the memory a
    /// burst grew it to.
    fn pop(&mut self) -> Option<Delivery> {
        let delivery = self.queue.pop_front()?;
        self.bytes = self.bytes.saturating_sub(delivery.weight());
        if self.queue.is_empty() {
            self.bytes = 0;
            if self.queue.capacity() > KEPT_CAPACITY {
                self.queue = VecDeque::new();
            }
        }
        Some(delivery)
    }
}

/// Publish-subscribe for one provider: every declared event has a sequence of ids from 1
/// and a bounded replay buffer; every subscriber has a bounded queue. Sans-IO: the driver
/// publishes, subscribes, and drains each subscriber with [`EventHub::poll_delivery`].
///
/// A slow subscriber never blocks a publish or another subscriber: its queue holds at
/// most `Limits::subscriber_queue` messages and `Limits::subscriber_queue_bytes` bytes of
/// them, then the hub's [`Overflow`] policy applies.
/// Nothing is lost silently: a resume from before the replay buffer and every message
/// dropped under [`Overflow::DropOldest`] become a [`Gap`] the subscriber receives.
#[derive(Debug)]
pub struct EventHub {
    limits: Limits,
    overflow: Overflow,
    logs: BTreeMap<Arc<str>, Log>,
    subscribers: BTreeMap<SubscriberId, Subscriber>,
    events: VecDeque<HubEvent>,
    /// The id of each event name's first event ([`EventHub::number_from`]).
    first_id: u64,
    /// The oldest id a shared log that fans out still holds ([`EventHub::forget_before`];
    /// 0: no such log).
    floor: u64,
    /// The highest id published, of any name.
    highest: u64,
    /// Whether a shared log feeds this hub ([`EventHub::fed_by_shared_log`]).
    shared_log: bool,
}

impl EventHub {
    /// A hub with no events declared yet.
    pub fn new(limits: Limits, overflow: Overflow) -> Self {
        Self {
            limits,
            overflow,
            logs: BTreeMap::new(),
            subscribers: BTreeMap::new(),
            events: VecDeque::new(),
            first_id: 1,
            floor: 0,
            highest: 0,
            shared_log: false,
        }
    }

    /// A shared log that fans out ([`EventLog::deliver_to`](crate::EventLog::deliver_to))
    /// feeds this hub: until it has said which ids it holds ([`EventHub::forget_before`]), a
    /// resume is answered [`EventError::NotReady`], neither taken nor refused as ahead.
    pub fn fed_by_shared_log(&mut self) {
        self.shared_log = true;
    }

    /// The events this hub publishes come from a shared log that fans out
    /// ([`EventLog::deliver_to`](crate::EventLog::deliver_to)), and that log holds none
    /// below `first` any more: the replay buffer drops them, and a resume from before
    /// `first` is told of a gap up to it, while a resume from `first` on gets every later
    /// event the buffer's own bounds kept (each name holds every event of the log from
    /// `first`, so ids between two events of one name are other names' events, not a
    /// loss). A resume from an id that has not reached this hub yet (seen on another
    /// node, on its way here) is taken: the events up to it are skipped for that subscriber
    /// when they come. Never lowers what was said before.
    ///
    /// When the log dropped events this hub never received (it was cut off from the log
    /// longer than the log keeps them: `first` is above the highest id it holds, plus one),
    /// every live subscriber is told of a [`Gap`] over those ids for each event it follows,
    /// as when its own queue overflows: a subscriber never skips events in silence.
    pub fn forget_before(&mut self, first: u64) {
        self.forget_before_noting(first, &mut Vec::new());
    }

    /// [`EventHub::forget_before`], adding to `fresh` every subscriber that had nothing
    /// queued before and has a gap to hear of now.
    pub(crate) fn forget_before_noting(&mut self, first: u64, fresh: &mut Vec<SubscriberId>) {
        let first = first.max(1).max(self.floor);
        self.floor = first;
        for log in self.logs.values_mut() {
            log.forget_before(first);
        }
        if self.highest > 0 && first > self.highest.saturating_add(1) {
            let (from, to) = (self.highest + 1, first - 1);
            for (id, subscriber) in &mut self.subscribers {
                let was_idle = subscriber.queue.is_empty() && subscriber.gaps.is_empty();
                let names: Vec<Arc<str>> = self
                    .logs
                    .values()
                    .filter(|log| subscriber.wants(&log.name))
                    .map(|log| log.name.clone())
                    .collect();
                for name in names {
                    subscriber.note_gap(name, from, to);
                }
                if was_idle && !subscriber.gaps.is_empty() {
                    fresh.push(*id);
                }
            }
            // Told once: the next look at the log's oldest id finds nothing more lost.
            self.highest = to;
        }
    }

    /// Numbers every event from `first` instead of 1 (each event name its own sequence),
    /// for events declared from now on and those not published yet. A provider that
    /// restarts with a `first` above any id it published before (e.g. from the clock) lets
    /// a subscriber resuming with an id from before the restart get an explicit gap, never a
    /// silent skip.
    pub fn number_from(&mut self, first: u64) {
        let first = first.max(1);
        self.first_id = first;
        for log in self.logs.values_mut() {
            if log.replay.is_empty() && log.next_id < first {
                log.next_id = first;
            }
        }
    }

    /// The overflow policy.
    pub fn overflow(&self) -> Overflow {
        self.overflow
    }

    /// Declares an event that can then be published and subscribed to.
    pub fn declare(&mut self, name: &str) -> Result<(), EventError> {
        if name.is_empty() || name.len() > self.limits.max_name {
            return Err(EventError::NameTooLong {
                len: name.len(),
                limit: self.limits.max_name,
            });
        }
        if self.logs.contains_key(name) {
            return Err(EventError::AlreadyDeclared { name: name.into() });
        }
        if self.logs.len() >= self.limits.max_events {
            return Err(EventError::TooManyEvents {
                limit: self.limits.max_events,
            });
        }
        let name: Arc<str> = name.into();
        self.logs.insert(
            name.clone(),
            Log {
                name,
                next_id: self.first_id,
                first_published: None,
                replay: VecDeque::new(),
                replay_bytes: 0,
                pruned_to: 0,
            },
        );
        Ok(())
    }

    /// The declared event names.
    pub fn declared(&self) -> impl Iterator<Item = &str> {
        self.logs.keys().map(|k| &**k)
    }

    /// The id of the latest event of this name (0: none yet).
    pub fn latest(&self, event: &str) -> Result<u64, EventError> {
        Ok(self.log(event)?.latest())
    }

    fn log(&self, event: &str) -> Result<&Log, EventError> {
        self.logs.get(event).ok_or_else(|| unknown(event))
    }

    /// Publishes an event: assigns it the next id of its name, keeps it for replay and
    /// queues it for every subscriber to it. Returns its id.
    pub fn publish(&mut self, event: &str, data: Value, now: Instant) -> Result<u64, EventError> {
        self.publish_noting(event, None, data, now, &mut Vec::new())
    }

    /// Publishes an event under the `id` an [`EventLog`](crate::EventLog) gave it (ids may
    /// skip: events published elsewhere), keeps it for replay and queues it for every
    /// subscriber to it.
    ///
    /// # Errors
    /// [`EventError::UnknownEvent`]; [`EventError::IdNotAfter`] when `id` is not above the
    /// event's latest id.
    pub fn publish_as(
        &mut self,
        event: &str,
        id: u64,
        data: Value,
        now: Instant,
    ) -> Result<(), EventError> {
        self.publish_noting(event, Some(id), data, now, &mut Vec::new())
            .map(|_| ())
    }

    /// [`EventHub::publish`] (`id` `None`: the hub's next id) or
    /// [`EventHub::publish_as`], adding to `fresh` every subscriber that had nothing queued
    /// before and has now (one that had something queued was told so already).
    pub(crate) fn publish_noting(
        &mut self,
        event: &str,
        id: Option<u64>,
        data: Value,
        now: Instant,
        fresh: &mut Vec<SubscriberId>,
    ) -> Result<u64, EventError> {
        let log = self.logs.get_mut(event).ok_or_else(|| unknown(event))?;
        let id = match id {
            None => log.next_id,
            Some(id) if id >= log.next_id => id,
            Some(id) => {
                return Err(EventError::IdNotAfter {
                    name: event.chars().take(64).collect(),
                    id,
                    latest: log.latest(),
                })
            }
        };
        let record = EventRecord {
            event: log.name.clone(),
            id,
            encoded: Arc::new(EncodedData::of(&data)),
            data: Arc::new(data),
            published_at: now,
        };
        log.next_id = id.saturating_add(1);
        log.first_published.get_or_insert(id);
        self.highest = self.highest.max(id);
        log.keep(record.clone());
        log.prune(&self.limits, now);
        let limits = &self.limits;
        let overflow = self.overflow;
        let mut dropped = Vec::new();
        for (id, subscriber) in &mut self.subscribers {
            if !subscriber.wants(event) {
                continue;
            }
            if let Some(&seen) = subscriber.seen_ahead.get(event) {
                if record.id <= seen {
                    // It saw this one on another node before resuming here.
                    continue;
                }
                subscriber.seen_ahead.remove(event);
            }
            let was_idle = subscriber.queue.is_empty() && subscriber.gaps.is_empty();
            if !subscriber.push(Delivery::Event(record.clone()), limits, overflow) {
                dropped.push(*id);
            } else if was_idle {
                fresh.push(*id);
            }
        }
        for id in dropped {
            self.drop_subscriber(id);
        }
        Ok(record.id)
    }

    fn drop_subscriber(&mut self, subscriber: SubscriberId) {
        self.subscribers.remove(&subscriber);
        self.events.push_back(HubEvent::SubscriberDropped {
            subscriber,
            reason: DropReason::Overflow,
        });
    }

    fn subscriber_mut(&mut self, subscriber: SubscriberId) -> Result<&mut Subscriber, EventError> {
        if !self.subscribers.contains_key(&subscriber)
            && self.subscribers.len() >= self.limits.max_subscribers
        {
            return Err(EventError::TooManySubscribers {
                limit: self.limits.max_subscribers,
            });
        }
        Ok(self.subscribers.entry(subscriber).or_default())
    }

    /// Subscribes to one event. Without `last_seen` only events published from now on
    /// are delivered. With `last_seen` (the subscriber's `lastEventID`), every later event
    /// still in the replay buffer is queued first, preceded by a [`Gap`] for those that
    /// left the buffer already.
    pub fn subscribe(
        &mut self,
        subscriber: SubscriberId,
        event: &str,
        last_seen: Option<u64>,
        now: Instant,
    ) -> Result<Subscribed, EventError> {
        let limits = self.limits.clone();
        let log = self.logs.get_mut(event).ok_or_else(|| unknown(event))?;
        log.prune(&limits, now);
        let latest = log.latest();
        let mut seen_ahead = None;
        if last_seen.is_some() && self.shared_log && self.floor == 0 {
            return Err(EventError::NotReady {
                name: event.chars().take(64).collect(),
            });
        }
        if let Some(seen) = last_seen {
            // Under a shared log that fans out, an id a little ahead of what reached this
            // hub was seen on another node and is on its way here (at most the replay
            // buffer's count of events ahead of the highest id of any name): resume after
            // it. Any other id ahead was never published.
            let window = (limits.replay_events as u64).max(1);
            if seen > latest {
                if self.floor > 0 && seen < self.floor {
                    // A past id the log no longer holds (its events aged out while this
                    // name published nothing, or this hub started after): what came after
                    // it and left the log is told as a gap below, not refused.
                } else if self.floor > 0 && seen <= self.highest.max(latest).saturating_add(window)
                {
                    seen_ahead = Some(seen);
                } else {
                    return Err(EventError::LastSeenAhead {
                        name: event.into(),
                        last_seen: seen,
                        latest,
                    });
                }
            }
        }
        let name = log.name.clone();
        // What to queue: the gap, then the replay.
        let mut gap = None;
        let mut replay = Vec::new();
        if let Some(seen) = last_seen {
            // Under a shared log that fans out, the buffer holds every event of this
            // name from the log's oldest one, less what its own bounds dropped.
            let oldest = if self.floor > 0 {
                self.floor.max(log.pruned_to.saturating_add(1))
            } else {
                log.replay.front().map_or(log.next_id, |r| r.id)
            };
            // 0 is "nothing seen yet": everything this hub has, with no gap for the ids
            // below its first one ([`EventHub::number_from`]) or below the first it
            // published (a shared log's ids start where the log was); any other id before
            // them is from an earlier numbering, and what came after it is reported lost.
            let from = if seen == 0 {
                if self.floor > 0 {
                    oldest
                } else {
                    log.first_published.unwrap_or(self.first_id)
                }
            } else {
                seen + 1
            };
            if from < oldest {
                gap = Some(Gap {
                    event: name.clone(),
                    from,
                    to: oldest - 1,
                });
            }
            replay.extend(log.replay.iter().filter(|r| r.id > seen).cloned());
        }
        let overflow = self.overflow;
        let sub = self.subscriber_mut(subscriber)?;
        if sub.wants(event) {
            return Err(EventError::AlreadySubscribed {
                subscriber,
                name: event.into(),
            });
        }
        if let Some(seen) = seen_ahead {
            sub.seen_ahead.insert(name.clone(), seen);
        }
        sub.events.insert(name);
        let replayed = replay.len();
        let deliveries = gap
            .clone()
            .map(Delivery::Gap)
            .into_iter()
            .chain(replay.into_iter().map(Delivery::Event));
        for delivery in deliveries {
            if !sub.push(delivery, &limits, overflow) {
                self.drop_subscriber(subscriber);
                return Err(EventError::Dropped { subscriber });
            }
        }
        Ok(Subscribed {
            latest,
            replayed,
            gap,
        })
    }

    /// Subscribes to every event, declared now or later, from now on (resume a single
    /// event with [`EventHub::subscribe`]).
    pub fn subscribe_all(&mut self, subscriber: SubscriberId) -> Result<(), EventError> {
        let sub = self.subscriber_mut(subscriber)?;
        if sub.all {
            return Err(EventError::AlreadySubscribed {
                subscriber,
                name: "*".into(),
            });
        }
        sub.all = true;
        Ok(())
    }

    /// Ends one subscription; what was queued for it is discarded.
    pub fn unsubscribe(&mut self, subscriber: SubscriberId, event: &str) -> Result<(), EventError> {
        self.log(event)?;
        let not_subscribed = || EventError::NotSubscribed {
            subscriber,
            name: event.into(),
        };
        let sub = self
            .subscribers
            .get_mut(&subscriber)
            .ok_or_else(not_subscribed)?;
        if !sub.events.remove(event) {
            return Err(not_subscribed());
        }
        if !sub.all {
            sub.queue.retain(|d| d.event() != event);
            sub.bytes = sub.queue.iter().map(Delivery::weight).sum();
            sub.gaps.remove(event);
        }
        sub.seen_ahead.remove(event);
        if sub.is_idle() {
            self.subscribers.remove(&subscriber);
        }
        Ok(())
    }

    /// Ends every subscription of this subscriber (`unsubscribeallevents`); what was
    /// queued is discarded.
    pub fn unsubscribe_all(&mut self, subscriber: SubscriberId) -> Result<(), EventError> {
        match self.subscribers.remove(&subscriber) {
            Some(sub) if !sub.is_idle() => Ok(()),
            _ => Err(EventError::NotSubscribed {
                subscriber,
                name: "*".into(),
            }),
        }
    }

    /// Forgets a subscriber whose connection closed; whether it was known.
    pub fn remove_subscriber(&mut self, subscriber: SubscriberId) -> bool {
        self.subscribers.remove(&subscriber).is_some()
    }

    /// The next message to send to this subscriber: pending gaps first, then its queue
    /// in order.
    pub fn poll_delivery(&mut self, subscriber: SubscriberId) -> Option<Delivery> {
        let sub = self.subscribers.get_mut(&subscriber)?;
        if let Some((event, (from, to))) = sub.gaps.pop_first() {
            return Some(Delivery::Gap(Gap { event, from, to }));
        }
        sub.pop()
    }

    /// How many messages wait for this subscriber (gaps included).
    pub fn queued(&self, subscriber: SubscriberId) -> usize {
        self.subscribers
            .get(&subscriber)
            .map_or(0, |s| s.queue.len() + s.gaps.len())
    }

    /// What the messages waiting for this subscriber weigh ([`Delivery::weight`]; gaps
    /// not yet queued are not counted): at most `Limits::subscriber_queue_bytes`, or one
    /// message's weight when a single message is larger.
    pub fn queued_bytes(&self, subscriber: SubscriberId) -> usize {
        self.subscribers.get(&subscriber).map_or(0, |s| s.bytes)
    }

    /// What the messages waiting for every subscriber weigh, together.
    pub fn total_queued_bytes(&self) -> usize {
        self.subscribers.values().map(|s| s.bytes).sum()
    }

    /// Whether this subscriber is known (has a subscription).
    pub fn is_subscribed(&self, subscriber: SubscriberId) -> bool {
        self.subscribers.contains_key(&subscriber)
    }

    /// How many subscribers the hub serves.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.len()
    }

    /// Whether [`EventHub::poll_event`] has something.
    pub(crate) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next thing the driver must act on.
    pub fn poll_event(&mut self) -> Option<HubEvent> {
        self.events.pop_front()
    }
}

fn unknown(event: &str) -> EventError {
    EventError::UnknownEvent {
        name: event.chars().take(64).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(data: Value) -> Delivery {
        let mut hub = EventHub::new(Limits::default(), Overflow::DropOldest);
        hub.declare("fe\u{e9}d\"back").unwrap();
        hub.subscribe(SubscriberId(1), "fe\u{e9}d\"back", None, Instant::now())
            .unwrap();
        hub.publish("fe\u{e9}d\"back", data, Instant::now())
            .unwrap();
        hub.poll_delivery(SubscriberId(1)).unwrap()
    }

    #[test]
    fn events_published_under_a_log_s_ids_reach_subscribers_and_resume_across_skips() {
        let now = Instant::now();
        let mut hub = EventHub::new(Limits::default(), Overflow::DropOldest);
        hub.declare("tick").unwrap();
        hub.subscribe(SubscriberId(1), "tick", None, now).unwrap();
        hub.publish_as("tick", 10, json!(1), now).unwrap();
        // Ids 11 to 19 went to events published elsewhere.
        hub.publish_as("tick", 20, json!(2), now).unwrap();
        assert_eq!(hub.latest("tick").unwrap(), 20);
        let ids: Vec<u64> = std::iter::from_fn(|| hub.poll_delivery(SubscriberId(1)))
            .map(|delivery| match delivery {
                Delivery::Event(record) => record.id,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, [10, 20]);
        assert_eq!(
            hub.publish_as("tick", 20, json!(3), now),
            Err(EventError::IdNotAfter {
                name: "tick".into(),
                id: 20,
                latest: 20
            })
        );
        // A subscriber that saw 10 resumes with 20, no gap: nothing here was lost.
        hub.subscribe(SubscriberId(2), "tick", Some(10), now)
            .unwrap();
        match hub.poll_delivery(SubscriberId(2)) {
            Some(Delivery::Event(record)) => assert_eq!(record.id, 20),
            other => panic!("{other:?}"),
        }
        // The hub's own numbering carries on after the log's ids.
        assert_eq!(hub.publish("tick", json!(4), now).unwrap(), 21);
    }

    #[test]
    fn a_subscriber_that_saw_nothing_gets_no_gap_below_a_shared_logs_first_id() {
        let now = Instant::now();
        let mut hub = EventHub::new(Limits::default(), Overflow::DropOldest);
        hub.declare("tick").unwrap();
        // The shared log was at 5000 when this node first published.
        hub.publish_as("tick", 5000, json!(1), now).unwrap();
        let subscribed = hub
            .subscribe(SubscriberId(1), "tick", Some(0), now)
            .unwrap();
        assert_eq!(subscribed.gap, None);
        match hub.poll_delivery(SubscriberId(1)) {
            Some(Delivery::Event(record)) => assert_eq!(record.id, 5000),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn under_a_shared_log_a_resume_is_told_of_a_gap_only_before_what_the_log_holds() {
        let now = Instant::now();
        let mut hub = EventHub::new(Limits::default(), Overflow::DropOldest);
        hub.declare("a").unwrap();
        hub.declare("b").unwrap();
        // The log holds 5 to 12: `a` at 5, 9 and 12, `b` at the others.
        hub.forget_before(5);
        for (event, id) in [
            ("a", 5),
            ("b", 6),
            ("b", 7),
            ("b", 8),
            ("a", 9),
            ("b", 10),
            ("b", 11),
            ("a", 12),
        ] {
            hub.publish_as(event, id, json!(id), now).unwrap();
        }
        let resume = |hub: &mut EventHub, subscriber: u64, seen: u64| {
            let subscribed = hub
                .subscribe(SubscriberId(subscriber), "a", Some(seen), now)
                .unwrap();
            // The gap is delivered first, then the replay.
            let ids: Vec<u64> = std::iter::from_fn(|| hub.poll_delivery(SubscriberId(subscriber)))
                .filter_map(|delivery| match delivery {
                    Delivery::Event(record) => Some(record.id),
                    Delivery::Gap(_) => None,
                })
                .collect();
            (subscribed.gap.map(|gap| (gap.from, gap.to)), ids)
        };
        // Ids between two of `a` are `b`'s: no gap.
        assert_eq!(resume(&mut hub, 1, 7), (None, vec![9, 12]));
        assert_eq!(resume(&mut hub, 2, 0), (None, vec![5, 9, 12]));
        assert_eq!(resume(&mut hub, 3, 3), (Some((4, 4)), vec![5, 9, 12]));
        // The log forgot 5 to 8: a resume after 5 misses what may have been `a`'s.
        hub.forget_before(9);
        assert_eq!(resume(&mut hub, 4, 5), (Some((6, 8)), vec![9, 12]));
        assert_eq!(resume(&mut hub, 5, 9), (None, vec![12]));
        // Never lowered.
        hub.forget_before(2);
        assert_eq!(resume(&mut hub, 6, 8), (None, vec![9, 12]));
    }

    #[test]
    fn under_a_shared_log_a_resume_from_an_id_still_on_its_way_skips_it_when_it_comes() {
        let now = Instant::now();
        let ids = |hub: &mut EventHub, subscriber: u64| -> Vec<u64> {
            std::iter::from_fn(|| hub.poll_delivery(SubscriberId(subscriber)))
                .map(|delivery| match delivery {
                    Delivery::Event(record) => record.id,
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let mut hub = EventHub::new(Limits::default(), Overflow::DropOldest);
        hub.declare("a").unwrap();
        hub.declare("b").unwrap();
        hub.forget_before(1);
        hub.publish_as("a", 1, json!(1), now).unwrap();
        // The subscriber saw `a` 3 on another node; 2 and 3 have not reached this one.
        let subscribed = hub.subscribe(SubscriberId(1), "a", Some(3), now).unwrap();
        assert_eq!((subscribed.replayed, subscribed.gap), (0, None));
        hub.publish_as("b", 2, json!(2), now).unwrap();
        hub.publish_as("a", 3, json!(3), now).unwrap();
        hub.publish_as("a", 4, json!(4), now).unwrap();
        assert_eq!(ids(&mut hub, 1), [4], "3 was seen: no duplicate");
        // An id further ahead than any event could be on its way was never published.
        let far = 4 + Limits::default().replay_events as u64 + 1;
        assert!(matches!(
            hub.subscribe(SubscriberId(2), "a", Some(far), now),
            Err(EventError::LastSeenAhead { .. })
        ));
        // On its own numbering (no shared log) every id ahead is refused, as before.
        let mut alone = EventHub::new(Limits::default(), Overflow::DropOldest);
        alone.declare("a").unwrap();
        alone.publish("a", json!(1), now).unwrap();
        assert!(matches!(
            alone.subscribe(SubscriberId(1), "a", Some(2), now),
            Err(EventError::LastSeenAhead { .. })
        ));
    }

    #[test]
    fn under_a_shared_log_live_subscribers_hear_of_what_the_log_dropped_before_it_came() {
        let now = Instant::now();
        let mut hub = EventHub::new(Limits::default(), Overflow::DropOldest);
        hub.declare("a").unwrap();
        hub.declare("b").unwrap();
        hub.forget_before(1);
        hub.subscribe(SubscriberId(1), "a", None, now).unwrap();
        hub.subscribe_all(SubscriberId(2)).unwrap();
        hub.subscribe(SubscriberId(3), "b", None, now).unwrap();
        hub.publish_as("a", 1, json!(1), now).unwrap();
        hub.publish_as("b", 2, json!(2), now).unwrap();
        let heard = |hub: &mut EventHub, subscriber: u64| -> Vec<String> {
            std::iter::from_fn(|| hub.poll_delivery(SubscriberId(subscriber)))
                .map(|delivery| match delivery {
                    Delivery::Event(record) => format!("{} {}", record.event, record.id),
                    Delivery::Gap(gap) => format!("gap {} {}..{}", gap.event, gap.from, gap.to),
                })
                .collect()
        };
        assert_eq!(heard(&mut hub, 1), ["a 1"]);
        assert_eq!(heard(&mut hub, 2), ["a 1", "b 2"]);
        assert_eq!(heard(&mut hub, 3), ["b 2"]);
        // What the log still holds of what this hub heard: nothing lost.
        hub.forget_before(3);
        assert_eq!(heard(&mut hub, 1), Vec::<String>::new());
        // Cut off while the log dropped 3 to 9: each live subscriber hears of it, once.
        let mut fresh = Vec::new();
        hub.forget_before_noting(10, &mut fresh);
        assert_eq!(fresh, [SubscriberId(1), SubscriberId(2), SubscriberId(3)]);
        hub.forget_before(10);
        hub.publish_as("a", 10, json!(10), now).unwrap();
        assert_eq!(heard(&mut hub, 1), ["gap a 3..9", "a 10"]);
        assert_eq!(heard(&mut hub, 2), ["gap a 3..9", "gap b 3..9", "a 10"]);
        assert_eq!(heard(&mut hub, 3), ["gap b 3..9"]);
        // Before the shared log said which ids it holds, a resume is neither taken nor
        // refused: try again (503).
        let mut waiting = EventHub::new(Limits::default(), Overflow::DropOldest);
        waiting.declare("a").unwrap();
        waiting.fed_by_shared_log();
        let early = waiting.subscribe(SubscriberId(1), "a", Some(7), now);
        assert!(
            matches!(early, Err(EventError::NotReady { .. })),
            "{early:?}"
        );
        assert_eq!(
            early.unwrap_err().to_problem().status,
            Some(503),
            "a problem worth retrying"
        );
        waiting.subscribe(SubscriberId(2), "a", None, now).unwrap();
        waiting.forget_before(5);
        let later = waiting
            .subscribe(SubscriberId(3), "a", Some(7), now)
            .unwrap();
        assert_eq!(later.gap, None);
        // A resume from a past id the log no longer holds is a gap, not "ahead".
        let mut empty = EventHub::new(Limits::default(), Overflow::DropOldest);
        empty.declare("a").unwrap();
        // Every event aged out of the log, which stands at 10,001.
        empty.forget_before(10_001);
        let subscribed = empty
            .subscribe(SubscriberId(1), "a", Some(9_000), now)
            .unwrap();
        assert_eq!(
            subscribed.gap.map(|gap| (gap.from, gap.to)),
            Some((9_001, 10_000))
        );
        let subscribed = empty
            .subscribe(SubscriberId(2), "a", Some(10_000), now)
            .unwrap();
        assert_eq!(subscribed.gap, None);
    }

    /// An event whose data is a string of `bytes` characters (its JSON has 2 more).
    fn large(bytes: usize) -> Value {
        Value::String("x".repeat(bytes))
    }

    fn byte_bounded(overflow: Overflow) -> EventHub {
        let limits = Limits {
            subscriber_queue_bytes: 10_000,
            replay_bytes: 25_000,
            ..Limits::default()
        };
        let mut hub = EventHub::new(limits, overflow);
        hub.declare("e").unwrap();
        hub
    }

    #[test]
    fn a_slow_subscriber_holds_at_most_its_bytes_and_hears_of_the_rest_as_a_gap() {
        let mut hub = byte_bounded(Overflow::DropOldest);
        let now = Instant::now();
        let slow = SubscriberId(1);
        hub.subscribe(slow, "e", None, now).unwrap();
        // 100 events of about 1 KB each: 100 KB, far under the queue's 1,024 messages.
        for _ in 0..100 {
            hub.publish("e", large(1_000), now).unwrap();
            assert!(
                hub.queued_bytes(slow) <= 10_000,
                "{}",
                hub.queued_bytes(slow)
            );
        }
        // Each weighs 1,002 + 1 bytes: 9 fit.
        assert_eq!(hub.queued_bytes(slow), 9 * 1_003);
        let mut delivered = Vec::new();
        let mut gaps = Vec::new();
        while let Some(delivery) = hub.poll_delivery(slow) {
            match delivery {
                Delivery::Gap(gap) => gaps.push((gap.from, gap.to)),
                Delivery::Event(record) => delivered.push(record.id),
            }
        }
        assert_eq!(gaps, [(1, 91)]);
        assert_eq!(delivered, (92..=100).collect::<Vec<_>>());
        assert_eq!(hub.queued_bytes(slow), 0);
    }

    #[test]
    fn a_message_larger_than_the_byte_bound_is_still_delivered_alone() {
        let mut hub = byte_bounded(Overflow::DropOldest);
        let now = Instant::now();
        hub.subscribe(SubscriberId(1), "e", None, now).unwrap();
        hub.publish("e", large(10), now).unwrap();
        hub.publish("e", large(20_000), now).unwrap();
        assert_eq!(hub.queued_bytes(SubscriberId(1)), 20_003);
        assert!(matches!(
            hub.poll_delivery(SubscriberId(1)),
            Some(Delivery::Gap(Gap { from: 1, to: 1, .. }))
        ));
        assert!(matches!(
            hub.poll_delivery(SubscriberId(1)),
            Some(Delivery::Event(EventRecord { id: 2, .. }))
        ));
    }

    #[test]
    fn the_byte_bound_disconnects_under_that_policy() {
        let mut hub = byte_bounded(Overflow::Disconnect);
        let now = Instant::now();
        hub.subscribe(SubscriberId(1), "e", None, now).unwrap();
        for _ in 0..9 {
            hub.publish("e", large(1_000), now).unwrap();
        }
        assert!(hub.is_subscribed(SubscriberId(1)));
        hub.publish("e", large(1_000), now).unwrap();
        assert!(!hub.is_subscribed(SubscriberId(1)));
        assert_eq!(
            hub.poll_event(),
            Some(HubEvent::SubscriberDropped {
                subscriber: SubscriberId(1),
                reason: DropReason::Overflow,
            })
        );
    }

    #[test]
    fn the_replay_buffer_keeps_at_most_its_bytes_and_a_resume_before_them_gets_a_gap() {
        let mut hub = byte_bounded(Overflow::DropOldest);
        let now = Instant::now();
        for _ in 0..100 {
            hub.publish("e", large(1_000), now).unwrap();
        }
        // 24 events of 1,003 bytes fit in 25,000; the resume's queue takes 9 of them.
        let subscribed = hub.subscribe(SubscriberId(1), "e", Some(0), now).unwrap();
        assert_eq!(subscribed.replayed, 24);
        assert_eq!(subscribed.gap.map(|gap| (gap.from, gap.to)), Some((1, 76)));
        assert!(hub.queued_bytes(SubscriberId(1)) <= 10_000);
    }

    #[test]
    fn spliced_notification_is_what_the_message_encodes() {
        let limits = Limits::default();
        let data = json!({"z": [1, 2.5, null, {"a": "\u{1}\\"}], "b": true, "\u{e9}": "x"});
        let delivery = delivery(data);
        for operation in [Operation::SubscribeEvent, Operation::SubscribeAllEvents] {
            for correlation in ["c-1", "c\"\n\u{7f}\u{2028}"] {
                let spliced = delivery
                    .encode_notification(operation, correlation, &limits)
                    .unwrap();
                let encoded = delivery
                    .to_message(operation, correlation)
                    .encode(&limits)
                    .unwrap();
                assert_eq!(
                    String::from_utf8(spliced).unwrap(),
                    String::from_utf8(encoded).unwrap()
                );
            }
        }
    }

    #[test]
    fn spliced_notification_defers_to_the_message_past_a_limit() {
        let op = Operation::SubscribeEvent;
        let delivery = delivery(json!({"a": {"b": [1]}}));
        let limits = Limits::default();
        assert!(delivery.encode_notification(op, "", &limits).is_none());
        let long = "c".repeat(limits.max_correlation_id + 1);
        assert!(delivery.encode_notification(op, &long, &limits).is_none());
        let shallow = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        assert!(delivery.encode_notification(op, "c", &shallow).is_none());
        assert!(delivery.to_message(op, "c").encode(&shallow).is_err());
        let deep_enough = Limits {
            max_depth: 4,
            ..Limits::default()
        };
        assert!(delivery
            .encode_notification(op, "c", &deep_enough)
            .is_some());
        let exact = delivery.to_message(op, "c").encode(&limits).unwrap().len();
        let small = Limits {
            max_message_size: exact - 1,
            ..Limits::default()
        };
        assert!(delivery.encode_notification(op, "c", &small).is_none());
        let fits = Limits {
            max_message_size: exact,
            ..Limits::default()
        };
        assert!(delivery.encode_notification(op, "c", &fits).is_some());
        let gap = Delivery::Gap(Gap {
            event: "e".into(),
            from: 1,
            to: 2,
        });
        assert!(gap.encode_notification(op, "c", &limits).is_none());
    }
}
