//! The requester's end of one interface session.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value};

use super::{
    chunk_prefix, encode, initial_credit, poll_stream_event, send_mode, with_headroom, Correlation,
    StreamNews, StreamUpdate, NO_CORRELATION,
};
use crate::actions::ActionTracker;
use crate::correlation::{CorrelationError, CorrelationState, Correlations};
use crate::interface::{ActionMode, Interface};
use crate::message::{ActionStatus, Message, MessageError, MessageType, Operation};
use crate::problem::{Problem, ProblemType};
use crate::stream::{
    PeerError, ResetCode, Sent, Side, StreamError, StreamId, StreamLimits, Streams,
};
use crate::wire::{decode_frame, Frame};
use crate::Limits;

/// What the requester's application learns ([`ConsumerEndpoint::poll_event`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// The one answer to a reply-mode action, a property read or write, a query, a
    /// cancel, an unsubscribe or unobserve, or a refused request of any kind (the
    /// result of an observation's acknowledgement is the current value).
    Answered {
        /// The request.
        correlation: Correlation,
        /// The output, value or action status; or the problem.
        result: Result<Value, Problem>,
    },
    /// A progress-mode action was accepted (status pending or running).
    Accepted {
        /// The `invokeaction`.
        correlation: Correlation,
        /// The id to query or cancel it by.
        action_id: String,
    },
    /// A progress-mode action's progress (never lower than before).
    Progress {
        /// The `invokeaction`.
        correlation: Correlation,
        /// The action.
        action_id: String,
        /// 0 to 1.
        progress: f64,
        /// A partial output, when the provider sent one.
        partial: Option<Value>,
    },
    /// A progress-mode action's terminal status, exactly once: completed with its output,
    /// or failed or cancelled with a problem (type `urn:concord:interact:cancelled` for a
    /// cancellation).
    Finished {
        /// The `invokeaction`.
        correlation: Correlation,
        /// The action.
        action_id: String,
        /// The output, or why not.
        result: Result<Value, Problem>,
    },
    /// A subscription (`event` is `*` for `subscribeallevents`) is in place.
    Subscribed {
        /// The request.
        correlation: Correlation,
        /// The event.
        event: String,
        /// The id of the event's latest publication (0: none, or `*`).
        latest: u64,
    },
    /// An event.
    Event {
        /// Its name.
        event: String,
        /// Its sequence number among events of this name.
        id: u64,
        /// Its data.
        data: Value,
    },
    /// Events `from..=to` of `event` will never come (a resume from before the replay
    /// buffer, or a queue that overflowed).
    Gap {
        /// The event.
        event: String,
        /// The first missed id.
        from: u64,
        /// The last missed id.
        to: u64,
    },
    /// An observed property changed.
    PropertyChanged {
        /// The property.
        name: String,
        /// The change's sequence number among changes of this property.
        id: u64,
        /// The new value.
        value: Value,
    },
    /// The provider accepted a stream action's stream; it runs until the final
    /// [`ConsumerEvent::Answered`].
    StreamOpened {
        /// The `invokeaction`.
        correlation: Correlation,
        /// The stream.
        id: StreamId,
    },
    /// Something happened on a stream: data to read, the provider's END, a truncation, a
    /// reset, credit back.
    Stream(StreamUpdate),
    /// A problem that is not an answer: a notify-mode action that failed, a stream
    /// violation on a running stream action, a subscription dropped for falling behind,
    /// or a problem the provider could not attribute (`correlation` `None`).
    Problem {
        /// The request it concerns, when known.
        correlation: Option<Correlation>,
        /// What went wrong.
        problem: Problem,
    },
    /// The provider sent something this endpoint cannot place (an unknown correlation id,
    /// a request, a bad frame, a stream violation); dropped. Count and log it.
    Unexpected {
        /// What and why.
        reason: String,
    },
}

/// A request this endpoint refuses to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UseError {
    /// The session covers no action of this name.
    #[error("the session covers no action {name:?}")]
    UnknownAction {
        /// The name.
        name: String,
    },
    /// The session covers no property of this name.
    #[error("the session covers no property {name:?}")]
    UnknownProperty {
        /// The name.
        name: String,
    },
    /// The session covers no event of this name.
    #[error("the session covers no event {name:?}")]
    UnknownEvent {
        /// The name.
        name: String,
    },
    /// A write to a read-only property.
    #[error("property {name:?} is read-only")]
    ReadOnly {
        /// The name.
        name: String,
    },
    /// Observing a property that is not observable.
    #[error("property {name:?} is not observable")]
    NotObservable {
        /// The name.
        name: String,
    },
    /// [`ConsumerEndpoint::open_stream`] on an action whose mode is not `stream`.
    #[error("action {name:?} is not a stream action")]
    NotAStreamAction {
        /// The name.
        name: String,
    },
    /// Unsubscribing or unobserving what has no subscription or observation.
    #[error("no subscription or observation of {name:?}")]
    NotSubscribed {
        /// The event or property, `*` for all events.
        name: String,
    },
    /// The correlation table refuses (`Limits::max_open_correlations`).
    #[error(transparent)]
    Correlation(#[from] CorrelationError),
    /// The message breaks a rule or a limit (a name too long, an input too large).
    #[error(transparent)]
    Message(#[from] MessageError),
    /// The stream layer refuses.
    #[error(transparent)]
    Stream(#[from] StreamError),
}

/// What an open correlation was for.
#[derive(Debug, Clone)]
enum Request {
    /// Read, write, query, cancel: one answer.
    Plain,
    Invoke {
        mode: ActionMode,
        stream: Option<StreamId>,
    },
    Observe {
        name: String,
    },
    Unobserve {
        name: String,
    },
    Subscribe {
        event: String,
    },
    Unsubscribe {
        event: String,
    },
    SubscribeAll,
    UnsubscribeAll,
}

/// The requester's end of one interface session: builds requests from the interface's
/// names (refusing names and modes it does not cover), matches every answer to its
/// request, and turns the provider's messages and chunks into [`ConsumerEvent`]s.
#[derive(Debug)]
pub struct ConsumerEndpoint {
    /// Shared by every session on the same protocol.
    interface: Arc<Interface>,
    limits: Limits,
    correlations: Correlations,
    requests: BTreeMap<String, Request>,
    tracker: ActionTracker,
    next_correlation: u64,
    /// Recent notify-mode invocations (no correlation stays open for them), to attribute
    /// a failure; at most `Limits::max_open_correlations`.
    notifies: VecDeque<String>,
    /// Event (or `*`) → the correlation of its subscription.
    subscriptions: BTreeMap<String, String>,
    /// Property → the correlation of its observation.
    observations: BTreeMap<String, String>,
    streams: Streams,
    outgoing: VecDeque<Vec<u8>>,
    events: VecDeque<ConsumerEvent>,
    /// Room left in front of every frame for the carrier's header.
    headroom: usize,
}

impl ConsumerEndpoint {
    /// The endpoint of one session over `interface` (the negotiated subset; an `Arc`
    /// shares it between the sessions on one protocol). Each stream starts with the
    /// initial credit its action declares.
    pub fn new(
        interface: impl Into<Arc<Interface>>,
        limits: Limits,
        streams: StreamLimits,
    ) -> Self {
        let mut streams = Streams::new(Side::Requester, streams);
        // Chunks are built in the frame that is sent, the wire's prefix in front.
        streams.set_frame_prefix(&chunk_prefix(0));
        Self {
            correlations: Correlations::new(&limits),
            tracker: ActionTracker::new(limits.clone()),
            interface: interface.into(),
            limits,
            requests: BTreeMap::new(),
            next_correlation: 1,
            notifies: VecDeque::new(),
            subscriptions: BTreeMap::new(),
            observations: BTreeMap::new(),
            streams,
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
            headroom: 0,
        }
    }

    /// Starts every frame [`ConsumerEndpoint::poll_transmit`] gives from now on with
    /// `headroom` bytes of room (zeros) for the carrier's own header, like
    /// [`ProviderEndpoint::set_frame_headroom`](crate::ProviderEndpoint::set_frame_headroom).
    pub fn set_frame_headroom(&mut self, headroom: usize) {
        self.headroom = headroom;
        self.streams.set_frame_prefix(&chunk_prefix(headroom));
    }

    /// The affordances this session covers.
    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    /// How many requests await an answer (subscriptions and observations included).
    pub fn open_requests(&self) -> usize {
        self.correlations.len()
    }

    /// Invokes an action in the mode the interface gives it. A stream action opens its
    /// stream too ([`ConsumerEvent::StreamOpened`] names it; [`ConsumerEndpoint::open_stream`]
    /// returns it at once). A notify-mode action keeps no correlation open: only a
    /// failure comes back ([`ConsumerEvent::Problem`]).
    pub fn invoke(&mut self, name: &str, input: Value) -> Result<Correlation, UseError> {
        let mode = self.action_mode(name)?;
        match mode {
            ActionMode::Stream => Ok(self.open_stream(name, input)?.0),
            ActionMode::Notify => {
                let correlation = self.fresh_correlation();
                let message = Message::request(Operation::InvokeAction, correlation.clone())
                    .with_name(name)
                    .with_input(input);
                self.outgoing.push_back(encode(&message, &self.limits)?);
                if self.notifies.len() >= self.limits.max_open_correlations {
                    self.notifies.pop_front();
                }
                self.notifies.push_back(correlation.clone());
                Ok(Correlation(correlation))
            }
            ActionMode::Reply | ActionMode::Progress => {
                let message = Message::request(Operation::InvokeAction, self.fresh_correlation())
                    .with_name(name)
                    .with_input(input);
                self.send(message, Request::Invoke { mode, stream: None })
            }
        }
    }

    /// Invokes a stream action: opens a stream of ours and names it in the request;
    /// chunks may follow at once, within the initial credit.
    pub fn open_stream(
        &mut self,
        name: &str,
        input: Value,
    ) -> Result<(Correlation, StreamId), UseError> {
        if self.action_mode(name)? != ActionMode::Stream {
            return Err(UseError::NotAStreamAction { name: name.into() });
        }
        if self.correlations.len() >= self.limits.max_open_correlations {
            return Err(CorrelationError::TooMany {
                limit: self.limits.max_open_correlations,
            }
            .into());
        }
        let credit = initial_credit(&self.interface, name, self.streams.limits());
        let id = self
            .streams
            .open(send_mode(&self.interface, name), credit)?;
        let message = Message::request(Operation::InvokeAction, self.fresh_correlation())
            .with_name(name)
            .with_input(input)
            .with_stream_id(id.0);
        let request = Request::Invoke {
            mode: ActionMode::Stream,
            stream: Some(id),
        };
        match self.send(message, request) {
            Ok(correlation) => Ok((correlation, id)),
            Err(error) => {
                if let Ok(send) = self.streams.send_stream(id) {
                    send.reset(ResetCode::CANCELLED);
                }
                Err(error)
            }
        }
    }

    /// Asks for a long-running action's status.
    pub fn query_action(&mut self, action_id: &str) -> Result<Correlation, UseError> {
        let message = Message::request(Operation::QueryAction, self.fresh_correlation())
            .with_action_id(action_id);
        let message = self.with_action_name(message, action_id);
        self.send(message, Request::Plain)
    }

    /// Cancels a long-running action; its terminal [`ConsumerEvent::Finished`] (cancelled)
    /// follows on the invocation.
    pub fn cancel_action(&mut self, action_id: &str) -> Result<Correlation, UseError> {
        let message = Message::request(Operation::CancelAction, self.fresh_correlation())
            .with_action_id(action_id);
        let message = self.with_action_name(message, action_id);
        self.send(message, Request::Plain)
    }

    /// Reads a property.
    pub fn read_property(&mut self, name: &str) -> Result<Correlation, UseError> {
        self.property(name)?;
        let message =
            Message::request(Operation::ReadProperty, self.fresh_correlation()).with_name(name);
        self.send(message, Request::Plain)
    }

    /// Writes a writable property.
    pub fn write_property(&mut self, name: &str, value: Value) -> Result<Correlation, UseError> {
        if !self.property(name)?.0 {
            return Err(UseError::ReadOnly { name: name.into() });
        }
        let message = Message::request(Operation::WriteProperty, self.fresh_correlation())
            .with_name(name)
            .with_value(value);
        self.send(message, Request::Plain)
    }

    /// Observes an observable property: its current value comes as the answer, then
    /// every change as [`ConsumerEvent::PropertyChanged`].
    pub fn observe_property(&mut self, name: &str) -> Result<Correlation, UseError> {
        if !self.property(name)?.1 {
            return Err(UseError::NotObservable { name: name.into() });
        }
        let message =
            Message::request(Operation::ObserveProperty, self.fresh_correlation()).with_name(name);
        self.send(message, Request::Observe { name: name.into() })
    }

    /// Stops observing a property.
    pub fn unobserve_property(&mut self, name: &str) -> Result<Correlation, UseError> {
        self.property(name)?;
        if !self.observations.contains_key(name) {
            return Err(UseError::NotSubscribed { name: name.into() });
        }
        let message = Message::request(Operation::UnobserveProperty, self.fresh_correlation())
            .with_name(name);
        self.send(message, Request::Unobserve { name: name.into() })
    }

    /// Subscribes to an event; with `last_seen` (the last id this requester saw) the
    /// provider replays what it still has, after a [`ConsumerEvent::Gap`] for what it
    /// has not.
    pub fn subscribe(
        &mut self,
        event: &str,
        last_seen: Option<u64>,
    ) -> Result<Correlation, UseError> {
        if !self.interface.events.contains_key(event) {
            return Err(UseError::UnknownEvent { name: event.into() });
        }
        let mut message =
            Message::request(Operation::SubscribeEvent, self.fresh_correlation()).with_name(event);
        message.last_event_id = last_seen;
        self.send(
            message,
            Request::Subscribe {
                event: event.into(),
            },
        )
    }

    /// Subscribes to every event of the session (`subscribeallevents`), from now on.
    pub fn subscribe_all(&mut self) -> Result<Correlation, UseError> {
        let message = Message::request(Operation::SubscribeAllEvents, self.fresh_correlation());
        self.send(message, Request::SubscribeAll)
    }

    /// Ends a subscription.
    pub fn unsubscribe(&mut self, event: &str) -> Result<Correlation, UseError> {
        if !self.subscriptions.contains_key(event) || event == "*" {
            return Err(UseError::NotSubscribed { name: event.into() });
        }
        let message = Message::request(Operation::UnsubscribeEvent, self.fresh_correlation())
            .with_name(event);
        self.send(
            message,
            Request::Unsubscribe {
                event: event.into(),
            },
        )
    }

    /// Ends the `subscribeallevents` subscription.
    pub fn unsubscribe_all(&mut self) -> Result<Correlation, UseError> {
        if !self.subscriptions.contains_key("*") {
            return Err(UseError::NotSubscribed { name: "*".into() });
        }
        let message = Message::request(Operation::UnsubscribeAllEvents, self.fresh_correlation());
        self.send(message, Request::UnsubscribeAll)
    }

    /// Sends one chunk on a stream, whole or not at all.
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

    /// Cuts what the provider has not played; returns the bytes discarded here.
    pub fn stream_truncate(&mut self, id: StreamId) -> Result<u64, StreamError> {
        self.streams.send_stream(id)?.truncate()
    }

    /// Aborts a stream both ways (cancels a stream action's stream).
    pub fn stream_reset(&mut self, id: StreamId, code: ResetCode) -> Result<(), StreamError> {
        self.streams.send_stream(id)?.reset(code);
        Ok(())
    }

    /// The next bytes received on a stream, in order: a byte piece, not a frame (small
    /// chunks arrive together in one read); its length is granted back to the provider, so
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

    /// Takes the data of one PT 1 frame from the provider.
    pub fn handle_frame(&mut self, now: Instant, bytes: &[u8]) {
        match decode_frame(bytes, &self.limits) {
            Ok(Frame::Message(message)) => self.handle_message(now, message),
            Ok(Frame::Chunk(chunk)) => match self.streams.handle_chunk(chunk) {
                Ok(()) | Err(PeerError::StreamClosed { .. }) => {}
                Err(error) => self.unexpected(format!("stream: {error}")),
            },
            Err(error) => self.unexpected(error.to_string()),
        }
        self.drain_stream_events();
    }

    /// The next thing that happened.
    pub fn poll_event(&mut self) -> Option<ConsumerEvent> {
        // Including what the application did through `streams()` (a stop, a finish).
        self.drain_stream_events();
        self.events.pop_front()
    }

    /// The next PT 1 frame data to send: requests in order, then stream chunks and grants.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        if let Some(bytes) = self.outgoing.pop_front() {
            return Some(with_headroom(bytes, self.headroom));
        }
        let transmit = self.streams.poll_transmit()?;
        let bytes = transmit.into_frame(self.streams.frame_prefix());
        self.drain_stream_events();
        Some(bytes)
    }

    /// Names the action of a query or cancel when this session invoked it.
    fn with_action_name(&self, mut message: Message, action_id: &str) -> Message {
        message.name = self
            .tracker
            .get(action_id)
            .map(|a| a.name().to_owned())
            .filter(|n| !n.is_empty());
        message
    }

    fn fresh_correlation(&mut self) -> String {
        let id = format!("c-{}", self.next_correlation);
        self.next_correlation = self.next_correlation.saturating_add(1);
        id
    }

    fn action_mode(&self, name: &str) -> Result<ActionMode, UseError> {
        self.interface
            .actions
            .get(name)
            .map(|a| a.mode)
            .ok_or_else(|| UseError::UnknownAction { name: name.into() })
    }

    /// (writable, observable) of a property the session covers.
    fn property(&self, name: &str) -> Result<(bool, bool), UseError> {
        self.interface
            .properties
            .get(name)
            .map(|p| (p.writable, p.observable))
            .ok_or_else(|| UseError::UnknownProperty { name: name.into() })
    }

    /// Opens the request's correlation, encodes and queues it.
    fn send(&mut self, message: Message, request: Request) -> Result<Correlation, UseError> {
        let bytes = encode(&message, &self.limits)?;
        self.correlations.open(&message)?;
        self.requests
            .insert(message.correlation_id.clone(), request);
        self.outgoing.push_back(bytes);
        Ok(Correlation(message.correlation_id))
    }

    fn unexpected(&mut self, reason: String) {
        self.events.push_back(ConsumerEvent::Unexpected { reason });
    }

    fn emit(&mut self, event: ConsumerEvent) {
        self.events.push_back(event);
    }

    /// Forgets an open correlation for good.
    fn close(&mut self, correlation: &str) {
        self.correlations.close(correlation);
        self.requests.remove(correlation);
    }

    fn handle_message(&mut self, now: Instant, message: Message) {
        if message.message_type == MessageType::Request {
            return self.unexpected(format!(
                "a {} request from the provider",
                message.operation.as_str()
            ));
        }
        let id = message.correlation_id.clone();
        if id == NO_CORRELATION {
            return match message.error {
                Some(problem) => self.emit(ConsumerEvent::Problem {
                    correlation: None,
                    problem,
                }),
                None => self.unexpected("an unattributed answer without a problem".into()),
            };
        }
        if let Some(at) = self.notifies.iter().position(|n| *n == id) {
            if let Some(problem) = message.error {
                self.notifies.remove(at);
                return self.emit(ConsumerEvent::Problem {
                    correlation: Some(Correlation(id)),
                    problem,
                });
            }
        }
        let state = match self.correlations.accept(&message) {
            Ok(state) => state,
            Err(error) => return self.unexpected(error.to_string()),
        };
        let Some(request) = self.requests.get(&id).cloned() else {
            return self.unexpected(format!("correlationID {id:?} has no request"));
        };
        if state == CorrelationState::Closed {
            self.requests.remove(&id);
        }
        let correlation = Correlation(id.clone());
        let is_response = message.message_type == MessageType::Response;
        match request {
            Request::Plain => self.emit(answered(correlation, message)),
            Request::Invoke { mode, stream } => {
                self.on_invoke(now, correlation, mode, stream, message);
            }
            Request::Observe { name } if is_response => {
                if message.error.is_none() {
                    self.observations.insert(name, id);
                }
                self.emit(answered(correlation, message));
            }
            Request::Observe { name } => match message.error {
                Some(problem) => {
                    self.close(&id);
                    self.observations.remove(&name);
                    self.emit(ConsumerEvent::Problem {
                        correlation: Some(correlation),
                        problem,
                    });
                }
                None => self.emit(ConsumerEvent::PropertyChanged {
                    name: message.name.unwrap_or(name),
                    id: message.event_id.unwrap_or_default(),
                    value: message.value.unwrap_or(Value::Null),
                }),
            },
            Request::Subscribe { event } => self.on_subscription(correlation, event, message),
            Request::SubscribeAll => self.on_subscription(correlation, "*".into(), message),
            Request::Unobserve { name } => {
                if message.error.is_none() {
                    if let Some(observation) = self.observations.remove(&name) {
                        self.close(&observation);
                    }
                }
                self.emit(answered(correlation, message));
            }
            Request::Unsubscribe { event } => self.on_unsubscribed(correlation, &event, message),
            Request::UnsubscribeAll => self.on_unsubscribed(correlation, "*", message),
        }
    }

    fn on_subscription(&mut self, correlation: Correlation, event: String, message: Message) {
        if message.message_type == MessageType::Response {
            return match message.error {
                Some(problem) => self.emit(ConsumerEvent::Answered {
                    correlation,
                    result: Err(problem),
                }),
                None => {
                    self.subscriptions
                        .insert(event.clone(), correlation.0.clone());
                    self.emit(ConsumerEvent::Subscribed {
                        correlation,
                        event,
                        latest: message.last_event_id.unwrap_or_default(),
                    });
                }
            };
        }
        let name = message.name.clone().unwrap_or_else(|| event.clone());
        match message.error {
            Some(problem) => match problem.gap_range() {
                Some((from, to)) => self.emit(ConsumerEvent::Gap {
                    event: name,
                    from,
                    to,
                }),
                None => {
                    self.close(&correlation.0);
                    self.subscriptions.remove(&event);
                    self.emit(ConsumerEvent::Problem {
                        correlation: Some(correlation),
                        problem,
                    });
                }
            },
            None => match message.event_id {
                Some(id) => self.emit(ConsumerEvent::Event {
                    event: name,
                    id,
                    data: message.value.unwrap_or(Value::Null),
                }),
                None => self.unexpected(format!("event {name:?} without an eventID")),
            },
        }
    }

    fn on_unsubscribed(&mut self, correlation: Correlation, event: &str, message: Message) {
        if message.error.is_none() {
            if let Some(subscription) = self.subscriptions.remove(event) {
                self.close(&subscription);
            }
        }
        self.emit(answered(correlation, message));
    }

    fn on_invoke(
        &mut self,
        now: Instant,
        correlation: Correlation,
        mode: ActionMode,
        stream: Option<StreamId>,
        message: Message,
    ) {
        let is_response = message.message_type == MessageType::Response;
        match mode {
            ActionMode::Reply | ActionMode::Notify => self.emit(answered(correlation, message)),
            ActionMode::Progress if is_response && message.error.is_some() => {
                self.emit(answered(correlation, message));
            }
            ActionMode::Progress => {
                let action = match self.tracker.observe(&message, now) {
                    Ok(action) => action,
                    Err(error) => {
                        self.close(&correlation.0);
                        return self.unexpected(format!("action status: {error}"));
                    }
                };
                let action_id = action.id().to_owned();
                let event = if is_response {
                    ConsumerEvent::Accepted {
                        correlation,
                        action_id,
                    }
                } else if action.is_finished() {
                    let result = match action.status() {
                        ActionStatus::Completed => {
                            Ok(action.output().cloned().unwrap_or(Value::Null))
                        }
                        _ => Err(action.error().cloned().unwrap_or_else(|| {
                            Problem::of(ProblemType::Conflict, "the action failed")
                        })),
                    };
                    ConsumerEvent::Finished {
                        correlation,
                        action_id,
                        result,
                    }
                } else {
                    ConsumerEvent::Progress {
                        correlation,
                        action_id,
                        progress: action.progress().unwrap_or_default(),
                        partial: message.output,
                    }
                };
                self.emit(event);
            }
            ActionMode::Stream => {
                let terminal = message.status.is_some_and(ActionStatus::is_terminal);
                match (&message.error, is_response, terminal) {
                    (None, true, false) => match stream {
                        Some(id) => self.emit(ConsumerEvent::StreamOpened { correlation, id }),
                        None => self.unexpected("a stream response without a stream".into()),
                    },
                    (Some(_), false, false) => {
                        if let Some(problem) = message.error {
                            self.emit(ConsumerEvent::Problem {
                                correlation: Some(correlation),
                                problem,
                            });
                        }
                    }
                    _ => {
                        if is_response {
                            // Refused: the provider never took the stream.
                            if let Some(send) =
                                stream.and_then(|id| self.streams.send_stream(id).ok())
                            {
                                send.reset(ResetCode::CANCELLED);
                            }
                        }
                        self.emit(answered(correlation, message));
                    }
                }
            }
        }
    }

    fn drain_stream_events(&mut self) {
        while let Some(news) = poll_stream_event(&mut self.streams) {
            match news {
                StreamNews::Update(update) => self.emit(ConsumerEvent::Stream(update)),
                StreamNews::Opened(id) => {
                    // The provider opens no streams of its own in an interface session.
                    if let Ok(recv) = self.streams.recv_stream(id) {
                        recv.reset(ResetCode::REFUSED);
                    }
                    self.unexpected(format!("the provider opened {id}"));
                }
                StreamNews::Closed(_) => {}
            }
        }
    }
}

/// The result an answer carries: its problem, or its action status, value or output.
/// The [`ConsumerEvent::Answered`] a message makes: its problem, or its action status,
/// value or output. An action status (`queryaction`, `cancelaction`) is `Ok` whatever the
/// status, as `{"actionID", "status", "progress"?, "output"?, "error"?}`.
fn answered(correlation: Correlation, message: Message) -> ConsumerEvent {
    let result = if let Some(status) = action_status(&message) {
        Ok(status)
    } else if let Some(problem) = message.error {
        Err(problem)
    } else {
        Ok(message.value.or(message.output).unwrap_or(Value::Null))
    };
    ConsumerEvent::Answered {
        correlation,
        result,
    }
}

fn action_status(message: &Message) -> Option<Value> {
    let (Some(action_id), Some(status)) = (&message.action_id, message.status) else {
        return None;
    };
    let mut status = json!({"actionID": action_id, "status": status.as_str()});
    if let Some(progress) = message.progress {
        status["progress"] = json!(progress);
    }
    if let Some(output) = &message.output {
        status["output"] = output.clone();
    }
    if let Some(problem) = &message.error {
        status["error"] = serde_json::to_value(problem).unwrap_or(Value::Null);
    }
    Some(status)
}
