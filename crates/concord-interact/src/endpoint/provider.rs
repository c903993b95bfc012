//! The provider's end of one interface session.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

use super::{
    answer_undecodable, chunk_prefix, encode, initial_credit, poll_stream_event, problem,
    send_mode, unattributed, with_headroom, RequestId, StreamNews, StreamUpdate, STREAM_VIOLATION,
    UNKNOWN_ACTION_NAME,
};
use crate::action_records::ActionRecord;
use crate::actions::{Action, ActionTableError};
use crate::events::{EventError, SubscriberId, KEPT_CAPACITY};
use crate::interface::{ActionMode, Interface};
use crate::message::{ActionStatus, Message, MessageType, Operation};
use crate::problem::{Problem, ProblemType};
use crate::property::PropertyError;
use crate::stream::{
    PeerError, ResetCode, Sent, Side, StreamError, StreamId, StreamLimits, Streams,
};
use crate::thing::{Outgoing, Thing};
use crate::wire::{decode_frame, Frame, InteractionFrameError};
use crate::Limits;

/// What the provider's node must act on ([`ProviderEndpoint::poll_event`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ProviderEvent {
    /// An action to run. Reply, notify and stream modes: answer with
    /// [`ProviderEndpoint::reply`]. Progress mode: the action is accepted already
    /// (`action_id`); drive it with [`Thing::progress`], [`Thing::complete`],
    /// [`Thing::fail`] (a reply to it is ignored).
    Invoke {
        /// Answer with this.
        request: RequestId,
        /// The action.
        name: String,
        /// Its input (`null` when the request had none); check it against the schema.
        input: Value,
        /// How it answers.
        mode: ActionMode,
        /// Progress mode: the action id issued.
        action_id: Option<String>,
        /// Stream mode: the stream the requester opened (accepted, chunks may follow).
        stream: Option<StreamId>,
    },
    /// A `writeproperty`: check the value and [`ProviderEndpoint::reply`]; on `Ok` the
    /// endpoint sets it in the Thing (observers are notified).
    WriteProperty {
        /// Answer with this.
        request: RequestId,
        /// The property.
        name: String,
        /// The value asked for.
        value: Value,
    },
    /// The requester cancelled an action (its terminal notification is on its way; stop
    /// the work — [`Thing::poll_action_event`] says so too).
    Cancel {
        /// The action id.
        action_id: String,
    },
    /// Something happened on a stream: data to read, the requester's END, a truncation,
    /// a reset, credit back.
    Stream(StreamUpdate),
    /// A `cancelaction` for an action another replica runs (its record is shared,
    /// [`ActionTableError::HeldElsewhere`](crate::ActionTableError)): deliver it to that
    /// replica ([`ActionRelay`](crate::ActionRelay)) and answer with
    /// [`ProviderEndpoint::reply_cancel`]; a node that relays nothing answers `Err(refused)`.
    CancelElsewhere {
        /// Answer with this.
        request: RequestId,
        /// The action id.
        action_id: String,
        /// The answer when the cancel cannot be relayed (409: only the runner can cancel).
        refused: Problem,
    },
}

/// What the node still owes an answer for.
#[derive(Debug)]
enum Pending {
    Invoke {
        mode: ActionMode,
        name: String,
        stream: Option<StreamId>,
    },
    Write {
        name: String,
        value: Value,
    },
    /// A cancel relayed to the replica running the action.
    CancelElsewhere,
}

/// A refused request: the problem to answer with (boxed: a problem is large).
#[derive(Debug)]
struct Refused(Box<Problem>);

impl From<Problem> for Refused {
    fn from(problem: Problem) -> Self {
        Self(Box::new(problem))
    }
}

/// `subscribeallevents`: its `correlationID` and the events it subscribed.
#[derive(Debug)]
struct AllEvents {
    correlation_id: String,
    events: BTreeSet<String>,
}

/// The provider's end of one interface session: decodes the requester's frames, answers
/// what it can from the [`Thing`], hands the rest to the node as [`ProviderEvent`]s, and
/// drains what the Thing queued for this session.
#[derive(Debug)]
pub struct ProviderEndpoint {
    subscriber: SubscriberId,
    /// Shared by every session on the same protocol.
    interface: Arc<Interface>,
    limits: Limits,
    streams: Streams,
    pending: BTreeMap<RequestId, Pending>,
    subscriptions: BTreeMap<String, String>,
    all_events: Option<AllEvents>,
    observations: BTreeMap<String, String>,
    stream_requests: BTreeMap<StreamId, String>,
    outgoing: VecDeque<Vec<u8>>,
    /// What [`ProviderEndpoint::take_queued`] took from the Thing, encoded by
    /// [`ProviderEndpoint::poll_transmit_ready`] one frame at a time.
    taken: VecDeque<Outgoing>,
    events: VecDeque<ProviderEvent>,
    /// Room left in front of every frame for the carrier's header.
    headroom: usize,
}

impl ProviderEndpoint {
    /// The endpoint of one session: `subscriber` from [`Thing::new_subscriber`],
    /// `interface` the negotiated subset (an `Arc` shares it between the sessions on one
    /// protocol). Each stream starts with the initial credit its action declares.
    pub fn new(
        subscriber: SubscriberId,
        interface: impl Into<Arc<Interface>>,
        limits: Limits,
        streams: StreamLimits,
    ) -> Self {
        let mut streams = Streams::new(Side::Provider, streams);
        // Chunks are built in the frame that is sent, the wire's prefix in front.
        streams.set_frame_prefix(&chunk_prefix(0));
        Self {
            subscriber,
            interface: interface.into(),
            limits,
            streams,
            pending: BTreeMap::new(),
            subscriptions: BTreeMap::new(),
            all_events: None,
            observations: BTreeMap::new(),
            stream_requests: BTreeMap::new(),
            outgoing: VecDeque::new(),
            taken: VecDeque::new(),
            events: VecDeque::new(),
            headroom: 0,
        }
    }

    /// Starts every frame [`ProviderEndpoint::poll_transmit`] gives from now on with
    /// `headroom` bytes of room (zeros) for the carrier's own header, so that the carrier
    /// writes its header in place instead of copying each frame behind it: a stream chunk
    /// is then copied once on its way out, into the frame that is sent. For a
    /// `concord_proto::Session`, `Frame::HEADER_LEN` and `Session::send_application_frame`.
    /// Set it before the first frame.
    pub fn set_frame_headroom(&mut self, headroom: usize) {
        self.headroom = headroom;
        self.streams.set_frame_prefix(&chunk_prefix(headroom));
    }

    /// This session's id in the Thing.
    pub fn subscriber(&self) -> SubscriberId {
        self.subscriber
    }

    /// The affordances this session covers.
    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    /// How many requests wait for [`ProviderEndpoint::reply`].
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Takes the data of one PT 1 frame from the requester. Never fails: what is wrong
    /// is answered with a typed problem and the session goes on.
    pub fn handle_frame(&mut self, now: Instant, bytes: &[u8], thing: &mut Thing) {
        self.handle_frame_with(now, bytes, || thing);
    }

    /// [`ProviderEndpoint::handle_frame`] for a Thing shared behind a lock: the frame is
    /// decoded first, and `thing` (taking the lock) is called only for a message that
    /// needs it, never for a stream chunk. A peer's large or malformed frame then costs its
    /// own session's time, not the time of every session waiting on the lock. Returns
    /// whether the Thing was used.
    pub fn handle_frame_with<T, F>(&mut self, now: Instant, bytes: &[u8], thing: F) -> bool
    where
        T: std::ops::DerefMut<Target = Thing>,
        F: FnOnce() -> T,
    {
        self.handle_frame_gated(now, bytes, thing, || Ok(()))
    }

    /// [`ProviderEndpoint::handle_frame_with`] with a gate on holding: `hold` is called
    /// (at most once) when a request would make this session hold something while it
    /// holds nothing ([`ProviderEndpoint::holds`]: a `subscribeevent`,
    /// `subscribeallevents`, `observeproperty`, or an `invokeaction` of a stream action).
    /// A problem it returns answers the request, which is not taken; the session goes on.
    /// The node uses it to bound the sessions that hold something (they are never idle).
    /// A request the gate let through may still fail on its own: the caller then sees
    /// `holds()` false again.
    pub fn handle_frame_gated<T, F, G>(
        &mut self,
        now: Instant,
        bytes: &[u8],
        thing: F,
        hold: G,
    ) -> bool
    where
        T: std::ops::DerefMut<Target = Thing>,
        F: FnOnce() -> T,
        G: FnOnce() -> Result<(), Box<Problem>>,
    {
        let mut used = false;
        match decode_frame(bytes, &self.limits) {
            Ok(Frame::Message(message)) => {
                if !self.holds() && self.would_hold(&message) {
                    if let Err(problem) = hold() {
                        self.send(message.response().with_error(*problem));
                        self.drain_stream_events();
                        return false;
                    }
                }
                used = true;
                self.handle_message(now, message, &mut thing());
            }
            Ok(Frame::Chunk(chunk)) => self.handle_chunk(chunk),
            Err(error @ InteractionFrameError::Message(_)) => {
                let answer = answer_undecodable(bytes, error.to_problem(), &self.limits);
                self.send(answer);
            }
            Err(error) => self.send(unattributed(None, error.to_problem())),
        }
        self.drain_stream_events();
        used
    }

    /// Whether this session holds something that keeps it from being idle: a
    /// subscription, an observation or an open stream.
    pub fn holds(&self) -> bool {
        !self.subscriptions.is_empty()
            || self.all_events.is_some()
            || !self.observations.is_empty()
            || !self.streams.is_empty()
    }

    /// Whether `message` is a request that would make the session hold something.
    fn would_hold(&self, message: &Message) -> bool {
        if message.message_type != MessageType::Request {
            return false;
        }
        match message.operation {
            Operation::ObserveProperty
            | Operation::SubscribeEvent
            | Operation::SubscribeAllEvents => true,
            Operation::InvokeAction => message
                .name
                .as_deref()
                .and_then(|name| self.interface.actions.get(name))
                .is_some_and(|action| action.mode == ActionMode::Stream),
            _ => false,
        }
    }

    /// The next thing the node must act on.
    pub fn poll_event(&mut self) -> Option<ProviderEvent> {
        // Including what the node did through `streams()` (a stop, a finish).
        self.drain_stream_events();
        self.events.pop_front()
    }

    /// The next PT 1 frame data to send: answers first, then stream chunks and grants,
    /// then what the Thing queued for this session (action notifications, property
    /// changes, events).
    pub fn poll_transmit(&mut self, thing: &mut Thing) -> Option<Vec<u8>> {
        if let Some(bytes) = self.poll_transmit_ready() {
            return Some(bytes);
        }
        self.take_queued(thing);
        self.poll_transmit_ready()
    }

    /// [`ProviderEndpoint::poll_transmit`] without the Thing: answers, stream chunks and
    /// grants, then what [`ProviderEndpoint::take_queued`] took. A driver that shares the
    /// Thing between sessions takes under its lock and encodes here, outside it.
    pub fn poll_transmit_ready(&mut self) -> Option<Vec<u8>> {
        if let Some(bytes) = self.outgoing.pop_front() {
            return Some(with_headroom(bytes, self.headroom));
        }
        if let Some(transmit) = self.streams.poll_transmit() {
            let bytes = transmit.into_frame(self.streams.frame_prefix());
            self.drain_stream_events();
            return Some(bytes);
        }
        while let Some(outgoing) = self.taken.pop_front() {
            self.queue_outgoing(outgoing);
            if let Some(bytes) = self.outgoing.pop_front() {
                return Some(with_headroom(bytes, self.headroom));
            }
        }
        // Queues a burst grew give their memory back once drained.
        if self.taken.capacity() > KEPT_CAPACITY {
            self.taken = VecDeque::new();
        }
        if self.outgoing.capacity() > KEPT_CAPACITY {
            self.outgoing = VecDeque::new();
        }
        None
    }

    /// What this session took from the Thing and has not sent yet weighs: events by
    /// [`Delivery::weight`](crate::Delivery::weight), encoded messages by their length
    /// (at most a Thing's queue for it, `Limits::subscriber_queue_bytes` per hub).
    pub fn taken_bytes(&self) -> usize {
        let taken: usize = self
            .taken
            .iter()
            .map(|outgoing| match outgoing {
                Outgoing::Event(delivery) => delivery.weight(),
                _ => 0,
            })
            .sum();
        taken.saturating_add(self.outgoing.iter().map(Vec::len).sum())
    }

    /// Takes everything the Thing queued for this session (events share their data, so
    /// this copies little), once what was taken before is sent; whether it took anything.
    /// What is taken is bounded by the Thing's own queues.
    pub fn take_queued(&mut self, thing: &mut Thing) -> bool {
        if !self.taken.is_empty() {
            return false;
        }
        while let Some(outgoing) = thing.poll_outgoing(self.subscriber) {
            self.taken.push_back(outgoing);
        }
        !self.taken.is_empty()
    }

    /// Forgets what was taken for a subscription or observation that just ended (the
    /// Thing forgets its own queue for it), so a later one never gets it.
    fn forget_taken(&mut self, ended: impl Fn(&Outgoing) -> bool) {
        self.taken.retain(|outgoing| !ended(outgoing));
    }

    /// Answers a request the node got as [`ProviderEvent::Invoke`] or
    /// [`ProviderEvent::WriteProperty`]. Reply mode: the response. Notify mode: nothing
    /// on `Ok`, the problem on `Err`. Stream mode: the terminal notification (completed
    /// or failed). A write: on `Ok` the
    /// value is set in the Thing and echoed. A request already answered, or a progress
    /// action (answered through the [`Thing`]), is ignored.
    pub fn reply(
        &mut self,
        request: RequestId,
        result: Result<Value, Problem>,
        thing: &mut Thing,
        now: Instant,
    ) {
        let Some(pending) = self.pending.remove(&request) else {
            return;
        };
        let base = Message::new(
            MessageType::Response,
            request.operation,
            request.correlation_id,
        );
        match pending {
            // A relayed cancel is answered with `reply_cancel`: an error here still answers it.
            Pending::CancelElsewhere => {
                if let Err(problem) = result {
                    self.send(base.with_error(problem));
                } else {
                    self.pending.insert(
                        RequestId {
                            correlation_id: base.correlation_id,
                            operation: base.operation,
                        },
                        Pending::CancelElsewhere,
                    );
                }
            }
            Pending::Write { name, value } => {
                let base = base.with_name(name.clone());
                let answer = match result {
                    Ok(_) => match thing.write_property(&name, value.clone(), now) {
                        Ok(()) => base.with_value(value),
                        Err(error) => base.with_error(error.to_problem()),
                    },
                    Err(problem) => base.with_error(problem),
                };
                self.send(answer);
            }
            Pending::Invoke { mode, name, stream } => {
                let base = base.with_name(name);
                match (mode, result) {
                    // Progress requests are answered through the Thing, never pending.
                    (ActionMode::Progress, _) | (ActionMode::Notify, Ok(_)) => {}
                    (ActionMode::Reply, Ok(output)) => {
                        self.send(base.with_output(output));
                    }
                    (ActionMode::Reply | ActionMode::Notify, Err(problem)) => {
                        self.send(base.with_error(problem));
                    }
                    (ActionMode::Stream, result) => {
                        let mut message = Message {
                            message_type: MessageType::Notification,
                            ..base
                        };
                        message.stream_id = stream.map(|s| s.0);
                        let message = match result {
                            Ok(output) => message
                                .with_status(ActionStatus::Completed)
                                .with_output(output),
                            Err(problem) => message
                                .with_status(ActionStatus::Failed)
                                .with_error(problem),
                        };
                        self.send(message);
                    }
                }
            }
        }
    }

    /// Answers a `cancelaction` the node got as [`ProviderEvent::CancelElsewhere`]: the
    /// action as the replica running it answered after the cancel, or the problem (the
    /// relay's, or the runner's refusal). A request already answered is ignored.
    pub fn reply_cancel(
        &mut self,
        request: RequestId,
        result: Result<ActionRecord, Problem>,
        now: Instant,
    ) {
        if !matches!(self.pending.get(&request), Some(Pending::CancelElsewhere)) {
            return;
        }
        self.pending.remove(&request);
        let answer = match result {
            Ok(record) => Action::from_record(record, now).to_message(
                MessageType::Response,
                Operation::CancelAction,
                &request.correlation_id,
            ),
            Err(problem) => Message::new(
                MessageType::Response,
                request.operation,
                request.correlation_id,
            )
            .with_error(problem),
        };
        self.send(answer);
    }

    /// Sends one chunk on a stream, whole or not at all ([`SendStream::send`]).
    ///
    /// [`SendStream::send`]: crate::stream::SendStream::send
    pub fn stream_send(&mut self, id: StreamId, bytes: &[u8]) -> Result<Sent, StreamError> {
        let sent = self.streams.send_stream(id)?.send(bytes);
        self.drain_stream_events();
        sent
    }

    /// Ends our direction of a stream ([`SendStream::finish`]).
    ///
    /// [`SendStream::finish`]: crate::stream::SendStream::finish
    pub fn stream_finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        let finished = self.streams.send_stream(id)?.finish();
        self.drain_stream_events();
        finished
    }

    /// Stops reading a stream: the peer is asked to stop sending on it
    /// ([`RecvStream::stop`]).
    ///
    /// [`RecvStream::stop`]: crate::stream::RecvStream::stop
    pub fn stream_stop(&mut self, id: StreamId, code: ResetCode) -> Result<(), StreamError> {
        let stopped = self.streams.recv_stream(id)?.stop(code);
        self.drain_stream_events();
        stopped
    }

    /// Cuts what the requester has not played; returns the bytes discarded here.
    pub fn stream_truncate(&mut self, id: StreamId) -> Result<u64, StreamError> {
        self.streams.send_stream(id)?.truncate()
    }

    /// Aborts a stream both ways.
    pub fn stream_reset(&mut self, id: StreamId, code: ResetCode) -> Result<(), StreamError> {
        self.streams.send_stream(id)?.reset(code);
        self.stream_requests.remove(&id);
        Ok(())
    }

    /// The next bytes received on a stream, in order: a byte piece, not a frame (small
    /// chunks arrive together in one read); its length is granted back to the requester, so
    /// the credit level stays where it started.
    pub fn stream_read(&mut self, id: StreamId) -> Option<Bytes> {
        let bytes = self.streams.recv_stream(id).ok()?.read_and_grant();
        self.drain_stream_events();
        bytes
    }

    /// Every stream of the session, for what the methods above do not cover.
    pub fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }

    /// The session keeps no timers of its own (action leases live in the [`Thing`]):
    /// always `None`, for drivers that treat every sans-IO object alike.
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Nothing to do (see [`ProviderEndpoint::poll_timeout`]).
    pub fn handle_timeout(&mut self, _now: Instant) {}

    fn handle_message(&mut self, now: Instant, message: Message, thing: &mut Thing) {
        if message.message_type != MessageType::Request {
            let problem = Problem::of(
                ProblemType::UnknownCorrelationId,
                format!(
                    "a provider answers requests; this {} matches none",
                    message.message_type.as_str()
                ),
            );
            self.send(message.response().with_error(problem));
            return;
        }
        let duplicate = self
            .pending
            .keys()
            .any(|r| r.correlation_id == message.correlation_id);
        if duplicate {
            let problem = Problem::of(
                ProblemType::Conflict,
                "a request with this correlationID awaits its answer",
            );
            self.send(message.response().with_error(problem));
            return;
        }
        let result = match message.operation {
            Operation::ReadProperty => self.read_property(&message, thing),
            Operation::WriteProperty => self.write_property(&message, thing),
            Operation::ObserveProperty => self.observe(&message, thing, now),
            Operation::UnobserveProperty => self.unobserve(&message, thing),
            Operation::InvokeAction => self.invoke(&message, thing, now),
            Operation::QueryAction => query_action(&message, thing, now),
            Operation::CancelAction => self.cancel_action(&message, thing, now),
            Operation::SubscribeEvent => self.subscribe(&message, thing, now),
            Operation::UnsubscribeEvent => self.unsubscribe(&message, thing),
            Operation::SubscribeAllEvents => self.subscribe_all(&message, thing, now),
            Operation::UnsubscribeAllEvents => self.unsubscribe_all(&message, thing),
        };
        match result {
            Ok(Some(answer)) => self.send(answer),
            Ok(None) => {}
            Err(Refused(problem)) => self.send(message.response().with_error(*problem)),
        }
    }

    fn name(message: &Message) -> Result<&str, Refused> {
        message
            .name
            .as_deref()
            .ok_or_else(|| Problem::of(ProblemType::BadMessage, "name: required").into())
    }

    fn property<'m>(&self, message: &'m Message) -> Result<&'m str, Refused> {
        let name = Self::name(message)?;
        if !self.interface.properties.contains_key(name) {
            return Err(Refused::from(
                PropertyError::Unknown {
                    name: name.chars().take(64).collect(),
                }
                .to_problem(),
            ));
        }
        Ok(name)
    }

    fn read_property(&self, message: &Message, thing: &Thing) -> Result<Option<Message>, Refused> {
        let name = self.property(message)?;
        let value = thing.read_property(name).map_err(|e| e.to_problem())?;
        Ok(Some(message.response().with_value(value.clone())))
    }

    fn write_property(
        &mut self,
        message: &Message,
        thing: &Thing,
    ) -> Result<Option<Message>, Refused> {
        let name = self.property(message)?;
        let writable = self
            .interface
            .properties
            .get(name)
            .is_some_and(|p| p.writable);
        if !writable {
            return Err(Refused::from(
                PropertyError::ReadOnly { name: name.into() }.to_problem(),
            ));
        }
        thing.check_writable(name).map_err(|e| e.to_problem())?;
        let value = message
            .value
            .clone()
            .ok_or_else(|| Problem::of(ProblemType::BadMessage, "value: required"))?;
        let request = self.admit(message)?;
        self.pending.insert(
            request.clone(),
            Pending::Write {
                name: name.to_owned(),
                value: value.clone(),
            },
        );
        self.events.push_back(ProviderEvent::WriteProperty {
            request,
            name: name.to_owned(),
            value,
        });
        Ok(None)
    }

    fn observe(
        &mut self,
        message: &Message,
        thing: &mut Thing,
        now: Instant,
    ) -> Result<Option<Message>, Refused> {
        let name = self.property(message)?;
        let observable = self
            .interface
            .properties
            .get(name)
            .is_some_and(|p| p.observable);
        if !observable {
            return Err(Refused::from(
                PropertyError::NotObservable { name: name.into() }.to_problem(),
            ));
        }
        let latest = thing
            .observe(self.subscriber, name, now)
            .map_err(|e| e.to_problem())?;
        let value = thing.read_property(name).map_err(|e| e.to_problem())?;
        self.observations
            .insert(name.to_owned(), message.correlation_id.clone());
        let mut answer = message.response().with_value(value.clone());
        answer.event_id = (latest > 0).then_some(latest);
        Ok(Some(answer))
    }

    fn unobserve(
        &mut self,
        message: &Message,
        thing: &mut Thing,
    ) -> Result<Option<Message>, Refused> {
        let name = self.property(message)?;
        thing
            .unobserve(self.subscriber, name)
            .map_err(|e| e.to_problem())?;
        self.observations.remove(name);
        self.forget_taken(|o| matches!(o, Outgoing::Property(c) if c.name == name));
        Ok(Some(message.response()))
    }

    /// Records a request the node must answer, within `Limits::max_pending_requests`.
    fn admit(&self, message: &Message) -> Result<RequestId, Refused> {
        if self.pending.len() >= self.limits.max_pending_requests {
            return Err(Refused::from(Problem::of(
                ProblemType::LimitReached,
                format!(
                    "{} requests await their answers already",
                    self.limits.max_pending_requests
                ),
            )));
        }
        Ok(RequestId {
            correlation_id: message.correlation_id.clone(),
            operation: message.operation,
        })
    }

    fn invoke(
        &mut self,
        message: &Message,
        thing: &mut Thing,
        now: Instant,
    ) -> Result<Option<Message>, Refused> {
        let name = Self::name(message)?;
        let Some(affordance) = self.interface.actions.get(name) else {
            return Err(Refused::from(problem(
                UNKNOWN_ACTION_NAME,
                404,
                "Unknown action",
                format!("this session covers no action {:?}", shorten(name)),
            )));
        };
        let mode = affordance.mode;
        match (mode, message.stream_id) {
            (ActionMode::Stream, None) => {
                return Err(Refused::from(Problem::of(
                    ProblemType::BadMessage,
                    "streamID: required by a stream action",
                )))
            }
            (ActionMode::Reply | ActionMode::Progress | ActionMode::Notify, Some(_)) => {
                return Err(Refused::from(Problem::of(
                    ProblemType::BadMessage,
                    "streamID: only a stream action opens a stream",
                )))
            }
            _ => {}
        }
        let input = message.input.clone().unwrap_or(Value::Null);
        let request = self.admit(message)?;
        let mut action_id = None;
        let mut stream = None;
        let answer = match mode {
            ActionMode::Reply | ActionMode::Notify => None,
            ActionMode::Progress => {
                let id = thing
                    .start_action(name, self.subscriber, &message.correlation_id, now)
                    .map_err(|e| e.to_problem())?;
                action_id = Some(id.clone());
                Some(
                    message
                        .response()
                        .with_action_id(id)
                        .with_status(ActionStatus::Pending),
                )
            }
            ActionMode::Stream => {
                let id = StreamId(message.stream_id.unwrap_or_default());
                if self.stream_requests.contains_key(&id) {
                    return Err(Refused::from(Problem::of(
                        ProblemType::Conflict,
                        format!("{id} belongs to another request"),
                    )));
                }
                let mode = send_mode(&self.interface, name);
                let credit = initial_credit(&self.interface, name, self.streams.limits());
                self.streams.accept(id, mode, credit).map_err(|e| match e {
                    StreamError::TooManyStreams { .. }
                    | StreamError::CreditExceedsBuffer { .. }
                    | StreamError::SessionFull { .. } => {
                        Problem::of(ProblemType::LimitReached, e.to_string())
                    }
                    _ => Problem::of(ProblemType::BadMessage, format!("streamID: {e}")),
                })?;
                self.stream_requests
                    .insert(id, message.correlation_id.clone());
                stream = Some(id);
                Some(
                    message
                        .response()
                        .with_status(ActionStatus::Running)
                        .with_stream_id(id.0),
                )
            }
        };
        if mode != ActionMode::Progress {
            self.pending.insert(
                request.clone(),
                Pending::Invoke {
                    mode,
                    name: name.to_owned(),
                    stream,
                },
            );
        }
        self.events.push_back(ProviderEvent::Invoke {
            request,
            name: name.to_owned(),
            input,
            mode,
            action_id,
            stream,
        });
        Ok(answer)
    }

    fn cancel_action(
        &mut self,
        message: &Message,
        thing: &mut Thing,
        now: Instant,
    ) -> Result<Option<Message>, Refused> {
        let id = message.action_id.as_deref().unwrap_or_default();
        let action = match thing.cancel_action(id, now) {
            Ok(action) => action,
            Err(held @ ActionTableError::HeldElsewhere { .. }) => {
                // Only the replica running it can stop its work: the node relays the cancel.
                let request = self.admit(message)?;
                self.pending
                    .insert(request.clone(), Pending::CancelElsewhere);
                self.events.push_back(ProviderEvent::CancelElsewhere {
                    request,
                    action_id: id.to_owned(),
                    refused: held.to_problem(),
                });
                return Ok(None);
            }
            Err(error) => return Err(error.to_problem().into()),
        };
        let answer = action.to_message(
            MessageType::Response,
            Operation::CancelAction,
            &message.correlation_id,
        );
        self.events.push_back(ProviderEvent::Cancel {
            action_id: id.to_owned(),
        });
        Ok(Some(answer))
    }

    fn event<'m>(&self, message: &'m Message) -> Result<&'m str, Refused> {
        let name = Self::name(message)?;
        if !self.interface.events.contains_key(name) {
            return Err(Refused::from(
                EventError::UnknownEvent {
                    name: shorten(name),
                }
                .to_problem(),
            ));
        }
        Ok(name)
    }

    fn subscribe(
        &mut self,
        message: &Message,
        thing: &mut Thing,
        now: Instant,
    ) -> Result<Option<Message>, Refused> {
        let name = self.event(message)?;
        let subscribed = thing
            .subscribe(self.subscriber, name, message.last_event_id, now)
            .map_err(|e| e.to_problem())?;
        self.subscriptions
            .insert(name.to_owned(), message.correlation_id.clone());
        Ok(Some(
            message.response().with_last_event_id(subscribed.latest),
        ))
    }

    fn unsubscribe(
        &mut self,
        message: &Message,
        thing: &mut Thing,
    ) -> Result<Option<Message>, Refused> {
        let name = self.event(message)?;
        if !self.subscriptions.contains_key(name) {
            return Err(Refused::from(
                EventError::NotSubscribed {
                    subscriber: self.subscriber,
                    name: name.to_owned(),
                }
                .to_problem(),
            ));
        }
        thing
            .unsubscribe(self.subscriber, name)
            .map_err(|e| e.to_problem())?;
        self.subscriptions.remove(name);
        self.forget_taken(|o| matches!(o, Outgoing::Event(d) if d.event() == name));
        Ok(Some(message.response()))
    }

    fn subscribe_all(
        &mut self,
        message: &Message,
        thing: &mut Thing,
        now: Instant,
    ) -> Result<Option<Message>, Refused> {
        if self.all_events.is_some() {
            return Err(Refused::from(
                EventError::AlreadySubscribed {
                    subscriber: self.subscriber,
                    name: "*".into(),
                }
                .to_problem(),
            ));
        }
        let mut events: BTreeSet<String> = BTreeSet::new();
        let names: Vec<String> = self
            .interface
            .events
            .keys()
            .filter(|e| !self.subscriptions.contains_key(*e))
            .cloned()
            .collect();
        for name in names {
            if let Err(error) = thing.subscribe(self.subscriber, &name, None, now) {
                for done in &events {
                    // Subscribed just now, so this cannot fail.
                    let _ = thing.unsubscribe(self.subscriber, done);
                }
                return Err(Refused::from(error.to_problem()));
            }
            events.insert(name);
        }
        self.all_events = Some(AllEvents {
            correlation_id: message.correlation_id.clone(),
            events,
        });
        Ok(Some(message.response()))
    }

    fn unsubscribe_all(
        &mut self,
        message: &Message,
        thing: &mut Thing,
    ) -> Result<Option<Message>, Refused> {
        let Some(all) = self.all_events.take() else {
            return Err(Refused::from(
                EventError::NotSubscribed {
                    subscriber: self.subscriber,
                    name: "*".into(),
                }
                .to_problem(),
            ));
        };
        for name in &all.events {
            // Unsubscribed only here, so this cannot fail.
            let _ = thing.unsubscribe(self.subscriber, name);
        }
        self.forget_taken(|o| matches!(o, Outgoing::Event(d) if all.events.contains(d.event())));
        Ok(Some(message.response()))
    }

    fn handle_chunk(&mut self, chunk: &[u8]) {
        let Err(error) = self.streams.handle_chunk(chunk) else {
            return;
        };
        let (status, id) = match &error {
            PeerError::StreamClosed { .. } => return,
            PeerError::ChunkPastCredit { id, .. } => (429, Some(*id)),
            PeerError::ChunkTooLarge { id, .. } => (413, Some(*id)),
            PeerError::SequenceGap { id, .. }
            | PeerError::Duplicate { id, .. }
            | PeerError::DataAfterEnd { id, .. }
            | PeerError::UnknownStream { id } => (400, Some(*id)),
            PeerError::TooManyStreams { id, .. } | PeerError::SessionFull { id, .. } => {
                (429, Some(*id))
            }
            _ => (400, None),
        };
        let problem = problem(
            STREAM_VIOLATION,
            status,
            "Stream violation",
            error.to_string(),
        );
        self.send_stream_problem(id, problem);
    }

    /// A problem about a stream: a notification on the request that opened it (the
    /// request goes on: status running), unattributed when no request did.
    fn send_stream_problem(&mut self, id: Option<StreamId>, problem: Problem) {
        let correlation = id.and_then(|id| self.stream_requests.get(&id));
        let message = match (id, correlation) {
            (Some(id), Some(correlation)) => Message::new(
                MessageType::Notification,
                Operation::InvokeAction,
                correlation.clone(),
            )
            .with_status(ActionStatus::Running)
            .with_stream_id(id.0)
            .with_error(problem),
            _ => {
                let mut message = unattributed(Some(Operation::InvokeAction), problem);
                message.stream_id = id.map(|id| id.0);
                message
            }
        };
        self.send(message);
    }

    fn drain_stream_events(&mut self) {
        while let Some(news) = poll_stream_event(&mut self.streams) {
            match news {
                StreamNews::Update(update) => {
                    if let StreamUpdate::Reset { id, .. } | StreamUpdate::Cancelled { id, .. } =
                        update
                    {
                        self.stream_requests.remove(&id);
                    }
                    self.events.push_back(ProviderEvent::Stream(update));
                }
                StreamNews::Opened(id) => {
                    // Only a chunk for a stream no request named opens one implicitly.
                    if let Ok(recv) = self.streams.recv_stream(id) {
                        recv.reset(ResetCode::PROTOCOL);
                    }
                    let problem = problem(
                        STREAM_VIOLATION,
                        400,
                        "Stream violation",
                        format!("{id} was not opened by an invokeaction"),
                    );
                    self.send_stream_problem(Some(id), problem);
                }
                StreamNews::Closed(id) => {
                    self.stream_requests.remove(&id);
                }
            }
        }
    }

    fn queue_outgoing(&mut self, outgoing: Outgoing) {
        match outgoing {
            Outgoing::Action(message) => self.send(*message),
            Outgoing::Event(delivery) => {
                let event = delivery.event();
                let (operation, correlation) = match self.subscriptions.get(event) {
                    Some(c) => (Operation::SubscribeEvent, c),
                    None => match &self.all_events {
                        Some(all) if all.events.contains(event) => {
                            (Operation::SubscribeAllEvents, &all.correlation_id)
                        }
                        _ => return,
                    },
                };
                if let Some(bytes) =
                    delivery.encode_notification(operation, correlation, &self.limits)
                {
                    self.outgoing.push_back(bytes);
                    return;
                }
                let message = delivery.to_message(operation, correlation);
                self.send(message);
            }
            Outgoing::Property(change) => {
                let Some(correlation) = self.observations.get(&change.name) else {
                    return;
                };
                let message = Message::new(
                    MessageType::Notification,
                    Operation::ObserveProperty,
                    correlation.clone(),
                )
                .with_name(change.name)
                .with_event_id(change.id)
                .with_value(change.value);
                self.send(message);
            }
            Outgoing::Dropped => {
                let problem = Problem::of(
                    ProblemType::SubscriberDropped,
                    "this session fell too far behind: its subscriptions and observations ended",
                );
                let subscriptions = std::mem::take(&mut self.subscriptions)
                    .into_iter()
                    .map(|(name, c)| (Operation::SubscribeEvent, Some(name), c));
                let all = self
                    .all_events
                    .take()
                    .map(|all| (Operation::SubscribeAllEvents, None, all.correlation_id));
                let observations = std::mem::take(&mut self.observations)
                    .into_iter()
                    .map(|(name, c)| (Operation::ObserveProperty, Some(name), c));
                let notices: Vec<Message> = subscriptions
                    .chain(all)
                    .chain(observations)
                    .map(|(operation, name, correlation)| {
                        let mut message =
                            Message::new(MessageType::Notification, operation, correlation)
                                .with_error(problem.clone());
                        message.name = name;
                        message
                    })
                    .collect();
                for message in notices {
                    self.send(message);
                }
            }
        }
    }

    /// Encodes and queues a message; one too large to encode is replaced by a problem
    /// on the same correlation (and a terminal action status stays terminal).
    fn send(&mut self, message: Message) {
        match encode(&message, &self.limits) {
            Ok(bytes) => self.outgoing.push_back(bytes),
            Err(error) => {
                let mut fallback = Message::new(
                    message.message_type,
                    message.operation,
                    message.correlation_id,
                )
                .with_error(Problem::of(
                    ProblemType::LimitReached,
                    format!("the answer could not be sent: {error}"),
                ));
                fallback.name = message.name;
                fallback.action_id = message.action_id;
                fallback.stream_id = message.stream_id;
                fallback.status = message.status.map(|s| {
                    if s == ActionStatus::Completed {
                        ActionStatus::Failed
                    } else {
                        s
                    }
                });
                if let Ok(bytes) = encode(&fallback, &self.limits) {
                    self.outgoing.push_back(bytes);
                }
            }
        }
    }
}

fn query_action(
    message: &Message,
    thing: &Thing,
    now: Instant,
) -> Result<Option<Message>, Refused> {
    let id = message.action_id.as_deref().unwrap_or_default();
    let action = thing.lookup_action(id, now).map_err(|e| e.to_problem())?;
    Ok(Some(action.to_message(
        MessageType::Response,
        Operation::QueryAction,
        &message.correlation_id,
    )))
}

fn shorten(s: &str) -> String {
    s.chars().take(64).collect()
}
