//! What a provider serves beyond request-reply, and the node-wide state its sessions
//! share: one `concord_interact::Thing` (event fan-out with replay, property values,
//! long-running actions by id) behind a mutex, the sessions to wake when it has something
//! for them, and the tasks of the long-running actions it runs.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use concord_interact::{
    ActionCaller, ActionEvent, ActionIds, ActionRecords, CancelReason, EventError, EventLog,
    EventSink, Interface, LocalEventLog, Overflow, Problem, PropertyError, SubscriberId, Thing,
    ThingError,
};
use concord_negotiate::complexity::SchemaLimits;
use serde_json::Value;
use tokio::sync::{watch, Notify};
use tokio::task::AbortHandle;

use super::handles::{StreamReceiver, StreamSender};
use crate::action::{Action, ActionError, ActionFuture};
use crate::admission::ClientKey;
use crate::budget::{CallBudget, CallKind};
use crate::interface::{Payload, PayloadError, PayloadSchemas};

/// A property a provider serves: its value's JSON Schema, its first value, and whether
/// peers may write and observe it.
///
/// ```
/// use concord_node::Property;
/// use serde_json::json;
///
/// let model = Property::new(json!({"type": "object"}), json!({"model": "gpt-4o"}))
///     .observable()
///     .description("The model the agent answers with.");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Property {
    pub(crate) schema: Value,
    pub(crate) initial: Value,
    pub(crate) writable: bool,
    pub(crate) observable: bool,
    pub(crate) description: String,
}

impl Property {
    /// A read-only, unobserved property with this schema and first value.
    pub fn new(schema: Value, initial: Value) -> Self {
        Self {
            schema,
            initial,
            writable: false,
            observable: false,
            description: String::new(),
        }
    }

    /// Peers may write it (`writeproperty`).
    pub fn writable(mut self) -> Self {
        self.writable = true;
        self
    }

    /// Peers may observe it (`observeproperty`): a notification per change.
    pub fn observable(mut self) -> Self {
        self.observable = true;
        self
    }

    /// What it is, in words (published in the description).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

/// An event a provider publishes: the JSON Schema of its data.
///
/// ```
/// use concord_node::Event;
/// use serde_json::json;
///
/// let feedback = Event::new(json!({"type": "object", "properties": {"rating": {"type": "integer"}}}))
///     .description("A user rated an answer.");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub(crate) data: Value,
    pub(crate) description: String,
}

impl Event {
    /// An event whose data follows `data` (a JSON Schema).
    pub fn new(data: Value) -> Self {
        Self {
            data,
            description: String::new(),
        }
    }

    /// What it reports, in words (published in the description).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

/// Runs a long-running action: reports progress through the [`ProgressReporter`] and
/// returns the output (or an error) once, at the end.
///
/// Implemented for async closures `Fn(Value, ProgressReporter) -> impl Future<Output =
/// Result<Value, ActionError>>` and by [`ExecAction`](crate::ExecAction) in progress mode.
/// Cancelling the action (by the caller, or when its lease runs out after the caller's
/// session dropped) drops the future.
pub trait ProgressAction: Send + Sync + 'static {
    /// Runs the action on `input`.
    fn call(&self, input: Value, progress: ProgressReporter) -> ActionFuture;

    /// Takes the node's publisher, as [`Action::attach`] does.
    fn attach(&self, publisher: &Publisher) {
        let _ = publisher;
    }
}

impl<F, Fut> ProgressAction for F
where
    F: Fn(Value, ProgressReporter) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ActionError>> + Send + 'static,
{
    fn call(&self, input: Value, progress: ProgressReporter) -> ActionFuture {
        Box::pin(self(input, progress))
    }
}

/// Runs a stream action: reads the requester's bytes from `stream.receiver`, writes its
/// own to `stream.sender`, each under the other side's credit; returns when done (an
/// error resets the stream).
pub trait StreamAction: Send + Sync + 'static {
    /// Runs the action on `input` with the stream's two halves.
    fn call(&self, input: Value, stream: StreamIo) -> ActionFuture;

    /// Takes the node's publisher, as [`Action::attach`] does.
    fn attach(&self, publisher: &Publisher) {
        let _ = publisher;
    }
}

impl<F, Fut> StreamAction for F
where
    F: Fn(Value, StreamIo) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ActionError>> + Send + 'static,
{
    fn call(&self, input: Value, stream: StreamIo) -> ActionFuture {
        Box::pin(self(input, stream))
    }
}

/// A stream action's two halves.
#[derive(Debug)]
pub struct StreamIo {
    /// Bytes to the requester.
    pub sender: StreamSender,
    /// The requester's bytes.
    pub receiver: StreamReceiver,
}

/// Where a long-running action reports its progress.
#[derive(Debug, Clone)]
pub struct ProgressReporter {
    target: Option<(Arc<Affordances>, String)>,
}

impl ProgressReporter {
    /// A reporter that reports to no one: the action was called over a one-action protocol
    /// (a peer that speaks no interaction layer gets only the result).
    pub(crate) fn detached() -> Self {
        Self { target: None }
    }

    /// Reports progress (0 to 1; a report lower than the last one is ignored) and,
    /// optionally, output so far.
    pub fn report(&self, progress: f64, partial: Option<Value>) {
        let Some((affordances, action_id)) = &self.target else {
            return;
        };
        let mut thing = affordances.lock();
        if let Err(error) = thing.progress(action_id, progress, partial, Instant::now()) {
            tracing::debug!(%error, action_id, "progress not reported");
        }
        affordances.wake(&mut thing);
    }

    /// The action's id, as its caller knows it (none over a one-action protocol).
    pub fn action_id(&self) -> Option<&str> {
        self.target.as_ref().map(|(_, id)| id.as_str())
    }
}

/// How a provider runs one of its actions.
#[derive(Clone)]
pub(crate) enum Backend {
    /// Request-reply.
    Reply(Arc<dyn Action>),
    /// Fire and forget.
    Notify(Arc<dyn Action>),
    /// Long-running, with progress.
    Progress(Arc<dyn ProgressAction>),
    /// Streams both ways.
    Stream(Arc<dyn StreamAction>),
}

impl Backend {
    /// Hands the backend the node's publisher (`attach` of its trait).
    pub(crate) fn attach(&self, publisher: &Publisher) {
        match self {
            Self::Reply(action) | Self::Notify(action) => action.attach(publisher),
            Self::Progress(action) => action.attach(publisher),
            Self::Stream(action) => action.attach(publisher),
        }
    }

    /// A call over a one-action protocol: request-reply for every mode but streams.
    pub(crate) fn call_plain(&self, input: Value) -> Option<ActionFuture> {
        match self {
            Self::Reply(action) | Self::Notify(action) => Some(action.call(input)),
            Self::Progress(action) => Some(action.call(input, ProgressReporter::detached())),
            Self::Stream(_) => None,
        }
    }
}

/// Why an event or property change was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The node declares no event or property by that name.
    #[error("the node has no {kind} named `{name}`")]
    Unknown {
        /// `event` or `property`.
        kind: &'static str,
        /// The name given.
        name: String,
    },
    /// The data or value breaks its schema.
    #[error("{0}")]
    Invalid(PayloadError),
    /// The event hub refused the event (its data is larger than a subscriber queue holds).
    #[error("{0}")]
    Event(EventError),
    /// The property table refused the value.
    #[error("{0}")]
    Property(PropertyError),
    /// The event log could not number the event: it was not published (or, when it says
    /// [`Uncertain`](concord_interact::EventLogError::Uncertain), may have been: publish it
    /// again with [`Publisher::publish_again`]).
    #[error(transparent)]
    Log(#[from] concord_interact::EventLogError),
}

/// Publishes events and sets properties of a node, from anywhere (an action, a timer, a
/// webhook). Cheap to clone.
///
/// ```
/// use concord_node::{Event, Node};
/// use serde_json::json;
///
/// let dir = tempfile::tempdir()?;
/// let node = Node::builder("Weather")
///     .event("userFeedbackReceived", Event::new(json!({"type": "object"})))
///     .data_dir(dir.path())
///     .build()?;
/// let first = node.publisher().publish("userFeedbackReceived", json!({"rating": 5}))?;
/// let second = node.publisher().publish("userFeedbackReceived", json!({"rating": 4}))?;
/// assert_eq!(second, first + 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Publisher {
    pub(crate) affordances: Arc<Affordances>,
}

impl Publisher {
    /// Publishes an event to every subscriber; returns its sequence number.
    ///
    /// # Errors
    /// [`PublishError::Unknown`] for an undeclared event, [`PublishError::Invalid`] for data
    /// its schema refuses.
    pub fn publish(&self, event: &str, data: Value) -> Result<u64, PublishError> {
        self.publish_attempt(event, data, None)
    }

    /// Publishes again an event the node's event log could not confirm
    /// ([`PublishError::Log`] with [`EventLogError::Uncertain`](concord_interact::EventLogError::Uncertain):
    /// a shared log that went away after it took the event), under the `attempt` that
    /// answer carried: the event is published at most once, whether or not the first one
    /// arrived (NATS JetStream: within the stream's duplicate window, 2 minutes). Its id;
    /// the first one's when it had arrived.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub fn publish_again(
        &self,
        event: &str,
        data: Value,
        attempt: &str,
    ) -> Result<u64, PublishError> {
        self.publish_attempt(event, data, Some(attempt))
    }

    /// [`publish`](Self::publish), or [`publish_again`](Self::publish_again) under `attempt`.
    fn publish_attempt(
        &self,
        event: &str,
        data: Value,
        attempt: Option<&str>,
    ) -> Result<u64, PublishError> {
        let unknown = || PublishError::Unknown {
            kind: "event",
            name: event.to_owned(),
        };
        self.affordances
            .schemas
            .check(Payload::Event, event, &data)
            .map_err(|problem| {
                if self.affordances.interface.events.contains_key(event) {
                    PublishError::Invalid(problem)
                } else {
                    unknown()
                }
            })?;
        let log = &self.affordances.event_log;
        let append = || match attempt {
            None => log.append(event, &data),
            Some(attempt) => log.append_again(event, &data, attempt),
        };
        if self.affordances.log_delivers() {
            // The log fans out: the event reaches this node's subscribers through it, in
            // its one order with every other node's events. It answers over the network:
            // on a worker of a multi-threaded runtime (an action's event line), the
            // worker's other tasks move to another thread meanwhile.
            let on_worker = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
                runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
            });
            let id = if on_worker {
                tokio::task::block_in_place(append)
            } else {
                append()
            };
            return Ok(id?);
        }
        // The log's ids reach the hub in the order it gave them.
        let _order = lock(&self.affordances.publishing);
        let id = append()?;
        let mut thing = self.affordances.lock();
        match thing.publish_as(event, id, data, Instant::now()) {
            // The log answered an attempt's first id: published then, not again.
            Err(EventError::IdNotAfter { .. }) if attempt.is_some() => return Ok(id),
            published => published.map_err(PublishError::Event)?,
        }
        self.affordances.wake(&mut thing);
        Ok(id)
    }

    /// What the events and property changes waiting in every session's queue weigh now
    /// (their data as JSON): each session holds at most
    /// `limits.interaction.subscriber_queue_bytes` of events and as much of property
    /// changes (one message more when a single one is larger).
    pub fn queued_bytes(&self) -> usize {
        self.affordances.lock().total_queued_bytes()
    }

    /// Sets a property; observers are notified.
    ///
    /// # Errors
    /// [`PublishError::Unknown`] for an undeclared property, [`PublishError::Invalid`] for a
    /// value its schema refuses.
    pub fn set_property(&self, name: &str, value: Value) -> Result<(), PublishError> {
        self.affordances.set_property(name, value)
    }

    /// A property's value now.
    pub fn property(&self, name: &str) -> Option<Value> {
        self.affordances.lock().read_property(name).ok().cloned()
    }
}

/// The node-wide state of a provider's interaction layer.
pub(crate) struct Affordances {
    pub(crate) interface: Interface,
    thing: Mutex<Thing>,
    /// Where events get their ids ([`LocalEventLog`] from [`first_event_id`] unless
    /// `NodeBuilder::event_log` gave another); fan-out stays in `thing`.
    event_log: Arc<dyn EventLog>,
    /// Held from an event's append to its fan-out, so that ids reach the hub in order.
    publishing: Mutex<()>,
    /// Whether `event_log` fans out itself ([`EventLog::deliver_to`]): every event then
    /// reaches `thing` through [`EventSink::deliver`].
    delivered: std::sync::atomic::AtomicBool,
    pub(crate) schemas: PayloadSchemas,
    /// The session behind each subscriber, to wake when the thing queued something for it.
    wakers: Mutex<HashMap<SubscriberId, Arc<Notify>>>,
    /// Long-running actions' tasks, by action id, to stop on cancellation.
    running: Mutex<HashMap<String, AbortHandle>>,
    /// Carries a cancel of an action another replica runs to it (`NodeBuilder::action_relay`).
    pub(crate) relay: Option<Arc<dyn concord_interact::ActionRelay>>,
}

impl std::fmt::Debug for Affordances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Affordances")
            .field("interface", &crate::interface::names(&self.interface))
            .finish_non_exhaustive()
    }
}

/// Unguessable action ids: the first 128 bits of SHA-256(a random key of the node, a
/// counter), in hex. Holding an action's id is what lets a caller query or cancel it, from
/// any session; without the key one id says nothing about the next.
struct RandomIds {
    key: [u8; 32],
    issued: u64,
}

impl std::fmt::Debug for RandomIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomIds")
            .field("issued", &self.issued)
            .finish_non_exhaustive()
    }
}

impl RandomIds {
    fn new() -> Result<Self, AffordancesError> {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key).map_err(AffordancesError::NoRandomness)?;
        Ok(Self { key, issued: 0 })
    }
}

impl ActionIds for RandomIds {
    fn next_id(&mut self) -> String {
        use sha2::Digest;
        self.issued = self.issued.wrapping_add(1);
        let digest = sha2::Sha256::new()
            .chain_update(self.key)
            .chain_update(self.issued.to_be_bytes())
            .finalize();
        hex::encode(&digest[..16])
    }
}

/// The backends a node's [`Thing`] keeps shared state in, each its own unless
/// `NodeBuilder` gave another.
#[derive(Debug)]
pub(crate) struct ThingBackends {
    /// Where events get their ids (`NodeBuilder::event_log`).
    pub(crate) event_log: Option<Arc<dyn EventLog>>,
    /// Where long-running actions are recorded (`NodeBuilder::action_records`).
    pub(crate) action_records: Option<Arc<dyn ActionRecords>>,
    /// Where action ids come from (`NodeBuilder::action_ids`).
    pub(crate) action_ids: Option<Box<dyn ActionIds>>,
    /// Where cancels of other replicas' actions go (`NodeBuilder::action_relay`).
    pub(crate) action_relay: Option<Arc<dyn concord_interact::ActionRelay>>,
}

/// Why the node cannot hold the properties, events and actions it was given (reaches the
/// builder's caller as `NodeError::Config`, after `properties and events: `).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum AffordancesError {
    /// A payload schema does not compile, or a property's first value does not fit its
    /// schema.
    #[error("{0}")]
    Payload(PayloadError),
    /// The interaction layer refuses the interface or the first values.
    #[error("{0}")]
    Thing(ThingError),
    /// The system gave no randomness for the action ids' key.
    #[error("no randomness for action ids: {0}")]
    NoRandomness(getrandom::Error),
}

/// Where this process numbers its events from: the clock in microseconds, so that a
/// restarted node numbers above what it published before (unless it published more than a
/// million events a second), and a subscriber resuming with an id from before the restart
/// gets an explicit gap (or, past that rate, a 409 naming the ids), never a silent skip.
fn first_event_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX / 2)
        })
}

/// The longest the thing's timers wait between runs.
const TIMER_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EventSink for Affordances {
    fn deliver(&self, event: &str, id: u64, data: Value) {
        let mut thing = self.lock();
        match thing.publish_as(event, id, data, Instant::now()) {
            Ok(()) => self.wake(&mut thing),
            // Delivered already (a log's redelivery), or a name this node does not
            // declare (a replica with another configuration): nothing to fan out.
            Err(error) => {
                tracing::debug!(%error, event, id, "an event from the log was not fanned out")
            }
        }
    }

    fn forget_before(&self, first: u64) {
        let mut thing = self.lock();
        thing.forget_events_before(first);
        // Live subscribers told of what the log dropped before it reached this node.
        self.wake(&mut thing);
    }
}

impl Affordances {
    /// The state for `interface`, with the properties' first values.
    pub(crate) fn new(
        interface: Interface,
        initial: BTreeMap<String, Value>,
        limits: concord_interact::Limits,
        overflow: Overflow,
        schema_limits: &SchemaLimits,
        backends: ThingBackends,
    ) -> Result<Self, AffordancesError> {
        let schemas = PayloadSchemas::compile(&interface, schema_limits)
            .map_err(AffordancesError::Payload)?;
        for (name, value) in &initial {
            schemas
                .check(Payload::Property, name, value)
                .map_err(AffordancesError::Payload)?;
        }
        let ids: Box<dyn ActionIds> = match backends.action_ids {
            Some(ids) => ids,
            None => Box::new(RandomIds::new()?),
        };
        let mut thing = Thing::new(interface.clone(), initial, limits, overflow)
            .map_err(AffordancesError::Thing)?
            .with_action_ids(ids)
            // Actions' times by the wall clock, read once: records carry them to the
            // other replicas (`timeRequested`).
            .with_wall_clock(Instant::now(), std::time::SystemTime::now());
        if let Some(records) = backends.action_records {
            thing = thing.with_action_records(records);
        }
        // The hub starts where the log does: the clock for our own; for one given, where
        // it is when this node first publishes (its contract is never to reuse an id).
        let (thing, event_log) = match backends.event_log {
            Some(log) => (thing, log),
            None => {
                let first = first_event_id();
                let log: Arc<dyn EventLog> = Arc::new(LocalEventLog::new(first));
                (thing.with_first_event_id(first), log)
            }
        };
        Ok(Self {
            interface,
            thing: Mutex::new(thing),
            event_log,
            publishing: Mutex::new(()),
            delivered: std::sync::atomic::AtomicBool::new(false),
            schemas,
            wakers: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            relay: backends.action_relay,
        })
    }

    /// Offers the event log to feed this node's hub (called once, when the node is built):
    /// a log that fans out delivers every node's events here from now on.
    pub(crate) fn attach_event_log(self: &Arc<Self>) {
        let sink: Weak<dyn EventSink> = Arc::downgrade(&(Arc::clone(self) as Arc<dyn EventSink>));
        if self.event_log.deliver_to(sink) {
            self.delivered
                .store(true, std::sync::atomic::Ordering::SeqCst);
            self.lock().events_fed_by_shared_log();
        }
    }

    /// Whether the event log fans out itself.
    fn log_delivers(&self) -> bool {
        self.delivered.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The thing, locked. Hold it briefly: every session of the node shares it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Thing> {
        lock(&self.thing)
    }

    /// A new subscriber (one per provider session) for the peer the node knows as `caller`
    /// (its client address, and its DID if it proved one), and the notify that wakes its
    /// session.
    pub(crate) fn register(&self, caller: ActionCaller) -> (SubscriberId, Arc<Notify>) {
        let id = self.lock().new_subscriber_for(caller);
        let notify = Arc::new(Notify::new());
        lock(&self.wakers).insert(id, Arc::clone(&notify));
        (id, notify)
    }

    /// The session of `id` ended: its subscriptions end, its actions run on for their lease.
    /// Returns what its queues weighed (now released).
    pub(crate) fn unregister(&self, id: SubscriberId) -> usize {
        lock(&self.wakers).remove(&id);
        let mut thing = self.lock();
        let released = thing.queued_bytes(id);
        thing.remove_subscriber(id, Instant::now());
        self.wake(&mut thing);
        released
    }

    /// Wakes every session the thing queued something for, and stops the tasks of actions
    /// it cancelled or gave up on.
    pub(crate) fn wake(&self, thing: &mut Thing) {
        let mut woken = Vec::new();
        while let Some(id) = thing.poll_wake() {
            woken.push(id);
        }
        if !woken.is_empty() {
            let wakers = lock(&self.wakers);
            for id in woken {
                if let Some(notify) = wakers.get(&id) {
                    notify.notify_one();
                }
            }
        }
        while let Some(event) = thing.poll_action_event() {
            if let ActionEvent::NotRecorded { id, error } = &event {
                tracing::warn!(action_id = %id, %error, "action change not recorded");
            }
            if let ActionEvent::EndedElsewhere { id } = &event {
                tracing::info!(action_id = %id, "another replica answered this action while this one could not reach the shared records: its answer stands, the work stops here");
                if let Some(task) = lock(&self.running).remove(id) {
                    task.abort();
                }
            }
            if let ActionEvent::Cancelled { id, reason } = event {
                let name = thing
                    .query_action(&id)
                    .map(|action| action.name().to_owned())
                    .unwrap_or_default();
                let why = match reason {
                    CancelReason::Requested => "the caller cancelled it",
                    CancelReason::LeaseExpired => {
                        "its caller's connection dropped and its lease ran out"
                    }
                };
                tracing::info!(action_id = %id, action = %name, reason = why, "action cancelled");
                if let Some(task) = lock(&self.running).remove(&id) {
                    task.abort();
                }
            }
        }
    }

    /// Runs the thing's timers (leases, replay ages) up to now; the next deadline.
    fn tick(&self) -> Option<Instant> {
        let mut thing = self.lock();
        thing.handle_timeout(Instant::now());
        self.wake(&mut thing);
        thing.poll_timeout()
    }

    /// Runs the thing's timers until `stop` turns true (the server stops): at each
    /// deadline, and at least once a second (a deadline set meanwhile is never more than a
    /// second late).
    pub(crate) async fn run_timers(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            let now = Instant::now();
            let next = self.tick().map_or(now + TIMER_PERIOD, |deadline| {
                deadline.min(now + TIMER_PERIOD)
            });
            tokio::select! {
                () = tokio::time::sleep_until(next.into()) => {}
                changed = stop.wait_for(|stopped| *stopped) => {
                    let _ = changed;
                    return;
                }
            }
        }
    }

    /// Starts the task of the long-running action `action_id`; its result completes the
    /// action in the thing. The call takes a slot of the node's budget first, for the
    /// client address `calls.1` (waiting for one; refused, the action fails with 429 or
    /// 503), and holds it until it ends.
    pub(crate) fn run_progress(
        self: &Arc<Self>,
        action: &Arc<dyn ProgressAction>,
        action_id: String,
        input: Value,
        (budget, client): (Arc<CallBudget>, ClientKey),
    ) {
        let reporter = ProgressReporter {
            target: Some((Arc::clone(self), action_id.clone())),
        };
        let action = Arc::clone(action);
        let affordances = Arc::clone(self);
        let id = action_id.clone();
        let name = self.action_of(&action_id);
        // Held while the task starts, so that its end (which forgets it) comes after.
        let mut running = lock(&self.running);
        let task = tokio::spawn(async move {
            let result = match budget.enter(client, CallKind::Long).await {
                Ok(_permit) => {
                    let call =
                        std::panic::AssertUnwindSafe(
                            async move { action.call(input, reporter).await },
                        );
                    futures_util::FutureExt::catch_unwind(call)
                        .await
                        .unwrap_or_else(|_| Err(ActionError::internal("the action panicked")))
                }
                Err(refused) => Err(refused),
            };
            affordances.finish(&id, name.as_deref(), result);
        });
        running.insert(action_id, task.abort_handle());
    }

    fn action_of(&self, action_id: &str) -> Option<String> {
        self.lock()
            .query_action(action_id)
            .ok()
            .map(|action| action.name().to_owned())
    }

    /// Ends the action `action_id` with `result` (the output checked against its schema).
    fn finish(&self, action_id: &str, name: Option<&str>, result: Result<Value, ActionError>) {
        lock(&self.running).remove(action_id);
        let result = result.and_then(|output| match name {
            Some(name) => self
                .schemas
                .check(Payload::Output, name, &output)
                .map(|()| output)
                .map_err(|problem| {
                    ActionError::internal(format!(
                        "the action's output breaks the protocol: {problem}"
                    ))
                }),
            None => Ok(output),
        });
        let now = Instant::now();
        let mut thing = self.lock();
        let done = match result {
            Ok(output) => thing.complete(action_id, output, now),
            Err(error) => thing.fail(action_id, problem_of(&error), now),
        };
        if let Err(error) = done {
            tracing::debug!(%error, action_id, "the action's end was not recorded");
        }
        self.wake(&mut thing);
    }

    /// Checks a property value against its schema.
    /// Sets a property checked against its schema; its observers are woken. What
    /// [`Publisher::set_property`] and a binding's write ([`ThingAccess::write_property`](crate::binding::ThingAccess::write_property)) do.
    pub(crate) fn set_property(&self, name: &str, value: Value) -> Result<(), PublishError> {
        self.check_property(name, &value)?;
        let mut thing = self.lock();
        thing
            .set_property(name, value, Instant::now())
            .map_err(PublishError::Property)?;
        self.wake(&mut thing);
        Ok(())
    }

    pub(crate) fn check_property(&self, name: &str, value: &Value) -> Result<(), PublishError> {
        if !self.interface.properties.contains_key(name) {
            return Err(PublishError::Unknown {
                kind: "property",
                name: name.to_owned(),
            });
        }
        self.schemas
            .check(Payload::Property, name, value)
            .map_err(PublishError::Invalid)
    }
}

/// An action's error as an RFC 9457 problem: `about:blank` (the status code says it all),
/// its message as the detail.
pub(crate) fn problem_of(error: &ActionError) -> Problem {
    Problem::new("about:blank")
        .with_status(error.code)
        .with_detail(error.message.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_random_action_ids_pass_the_action_ids_conformance_suite() {
        let mut ids = RandomIds::new().expect("randomness");
        concord_interact::conformance::action_ids(
            &mut ids,
            concord_interact::Limits::default().max_action_id,
        );
    }
}
