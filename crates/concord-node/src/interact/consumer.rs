//! The requester's part of an interface session: a connection's interactions go into the
//! `ConsumerEndpoint`, and what the endpoint reports goes to the handles waiting for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use concord_interact::Problem;
use concord_interact::{ConsumerEndpoint, ConsumerEvent, Correlation, StreamUpdate, UseError};
use concord_proto::Frame;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::handles::{ActionUpdate, Notification, ReaderQueue, StreamSender};
use super::pipes::{reset_error, Pipes};
use super::StreamCommand;
use crate::error::CallError;
use crate::interface::{InterfaceCode, Payload};

/// What a connection asks of an interface session.
#[derive(Debug)]
pub(crate) enum Interaction {
    Invoke {
        name: String,
        input: Value,
    },
    Progress {
        name: String,
        input: Value,
    },
    Notify {
        name: String,
        input: Value,
    },
    Query {
        action_id: String,
    },
    Cancel {
        action_id: String,
    },
    Read {
        name: String,
    },
    Write {
        name: String,
        value: Value,
    },
    Observe {
        name: String,
    },
    Subscribe {
        event: String,
        last_seen: Option<u64>,
    },
    SubscribeAll,
    Stream {
        name: String,
        input: Value,
    },
}

/// Where the answers to an interaction go.
#[derive(Debug)]
pub(crate) enum Sink {
    /// One answer.
    Answer(oneshot::Sender<Result<Value, CallError>>),
    /// A long-running action's updates.
    Updates(mpsc::Sender<ActionUpdate>),
    /// A subscription: its confirmation (the latest sequence number), then notifications.
    Subscription {
        confirmed: oneshot::Sender<Result<u64, CallError>>,
        notifications: mpsc::Sender<Notification>,
    },
    /// A stream: its id and where to send our writes once the provider accepted it, then
    /// the provider's bytes.
    Stream {
        opened: oneshot::Sender<Result<StreamSender, CallError>>,
        incoming: ReaderQueue,
    },
}

/// A subscription's handle and what it lost because its reader fell behind.
#[derive(Debug)]
struct Local {
    notifications: mpsc::Sender<Notification>,
    /// Events dropped for want of room, per event name: reported as a gap before the
    /// next notification that fits.
    lost: HashMap<String, (u64, u64)>,
}

impl Local {
    fn new(notifications: mpsc::Sender<Notification>) -> Self {
        Self {
            notifications,
            lost: HashMap::new(),
        }
    }

    /// Notes that `from..=to` of `name` were lost to this reader.
    fn lose(&mut self, name: &str, from: u64, to: u64) {
        let range = self.lost.entry(name.to_owned()).or_insert((from, to));
        range.0 = range.0.min(from);
        range.1 = range.1.max(to);
    }

    /// Sends the gaps that fit now.
    fn report_gaps(&mut self) {
        let notifications = &self.notifications;
        self.lost.retain(|event, (from, to)| {
            let gap = Notification::Gap {
                event: event.clone(),
                from: *from,
                to: *to,
            };
            notifications.try_send(gap).is_err()
        });
    }
}

/// What a pending request is about.
#[derive(Debug)]
enum Affordance {
    /// An invoked action, by name.
    Action(String),
    /// An observed property, by name.
    Observed(String),
    /// Anything else.
    Other,
}

/// The requester's interface state in one session.
pub(crate) struct ConsumerState {
    endpoint: ConsumerEndpoint,
    code: Arc<InterfaceCode>,
    /// Requests awaiting their answers, with the affordance they name: an invoked
    /// action's output is checked against the protocol's schema, an observation is kept
    /// under its property's name.
    pending: HashMap<Correlation, (Sink, Affordance)>,
    /// Live subscriptions, by event or property name (`*`: every event).
    subscriptions: HashMap<String, Local>,
    /// Long-running actions' updates and names, by action id, once accepted.
    actions: HashMap<String, (mpsc::Sender<ActionUpdate>, String)>,
    /// Fire-and-forget requests queued in the endpoint: each is answered once the session
    /// wrote its frame to the connection (`take_unwritten`), or failed when it could not.
    unwritten: Vec<oneshot::Sender<Result<Value, CallError>>>,
    pub(crate) pipes: Pipes,
}

impl std::fmt::Debug for ConsumerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerState")
            .field("pending", &self.pending.len())
            .field("subscriptions", &self.subscriptions.len())
            .finish_non_exhaustive()
    }
}

/// A problem as a call error: its status and what it says.
pub(crate) fn call_error(problem: &Problem) -> CallError {
    let message = match (&problem.title, &problem.detail) {
        (Some(title), Some(detail)) => format!("{title}: {detail}"),
        (None, Some(text)) | (Some(text), None) => text.clone(),
        (None, None) => problem.problem_type.clone(),
    };
    CallError::Remote {
        code: i64::from(problem.status.unwrap_or(500)),
        message,
    }
}

fn use_error(error: &UseError) -> CallError {
    CallError::Unsupported(error.to_string())
}

impl ConsumerState {
    pub(crate) fn new(
        code: Arc<InterfaceCode>,
        limits: concord_interact::Limits,
        streams: concord_interact::stream::StreamLimits,
    ) -> Self {
        let mut endpoint = ConsumerEndpoint::new(code.interface().clone(), limits, streams);
        // Frames leave with room for the session's header (`Session::send_application_frame`).
        endpoint.set_frame_headroom(Frame::HEADER_LEN);
        Self {
            endpoint,
            code,
            pending: HashMap::new(),
            subscriptions: HashMap::new(),
            actions: HashMap::new(),
            unwritten: Vec::new(),
            pipes: Pipes::new(&streams),
        }
    }

    /// Whether nothing is in flight (no answer awaited, no subscription, no stream).
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.subscriptions.is_empty()
            && self.actions.is_empty()
            && self.unwritten.is_empty()
            && self.pipes.is_empty()
    }

    /// Starts an interaction; a use the interface does not allow fails its sink at once.
    pub(crate) fn start(&mut self, request: Interaction, sink: Sink) {
        let code = Arc::clone(&self.code);
        let checked = |payload, name: &str, value: &Value| {
            code.check(payload, name, value)
                .map_err(|error| CallError::InvalidInput(error.to_string()))
        };
        let affordance = match &request {
            Interaction::Invoke { name, .. }
            | Interaction::Progress { name, .. }
            | Interaction::Stream { name, .. } => Affordance::Action(name.clone()),
            Interaction::Observe { name } => Affordance::Observed(name.clone()),
            _ => Affordance::Other,
        };
        let started = match request {
            Interaction::Notify { name, input } => {
                // Fire and forget: done once written to the connection (`take_unwritten`);
                // a failure the provider reports later answers no one and is logged.
                let queued = checked(Payload::Input, &name, &input).and_then(|()| {
                    self.endpoint
                        .invoke(&name, input)
                        .map(drop)
                        .map_err(|e| use_error(&e))
                });
                match (queued, sink) {
                    (Ok(()), Sink::Answer(reply)) => self.unwritten.push(reply),
                    (Err(error), sink) => fail(sink, error),
                    (Ok(()), _) => {}
                }
                return;
            }
            Interaction::Invoke { name, input } | Interaction::Progress { name, input } => {
                checked(Payload::Input, &name, &input).and_then(|()| {
                    self.endpoint
                        .invoke(&name, input)
                        .map_err(|e| use_error(&e))
                })
            }
            Interaction::Query { action_id } => self
                .endpoint
                .query_action(&action_id)
                .map_err(|e| use_error(&e)),
            Interaction::Cancel { action_id } => self
                .endpoint
                .cancel_action(&action_id)
                .map_err(|e| use_error(&e)),
            Interaction::Read { name } => self
                .endpoint
                .read_property(&name)
                .map_err(|e| use_error(&e)),
            Interaction::Write { name, value } => checked(Payload::Property, &name, &value)
                .and_then(|()| {
                    self.endpoint
                        .write_property(&name, value)
                        .map_err(|e| use_error(&e))
                }),
            Interaction::Observe { name } => self
                .endpoint
                .observe_property(&name)
                .map_err(|e| use_error(&e)),
            Interaction::Subscribe { event, last_seen } => self
                .endpoint
                .subscribe(&event, last_seen)
                .map_err(|e| use_error(&e)),
            Interaction::SubscribeAll => self.endpoint.subscribe_all().map_err(|e| use_error(&e)),
            Interaction::Stream { name, input } => {
                checked(Payload::Input, &name, &input).and_then(|()| {
                    self.endpoint
                        .open_stream(&name, input)
                        .map(|(correlation, _)| correlation)
                        .map_err(|e| use_error(&e))
                })
            }
        };
        match started {
            Ok(correlation) => {
                self.pending.insert(correlation, (sink, affordance));
            }
            Err(error) => fail(sink, error),
        }
    }

    /// A PT 1 frame from the provider.
    pub(crate) fn handle_frame(&mut self, now: Instant, bytes: &[u8]) {
        self.report_gaps();
        self.endpoint.handle_frame(now, bytes);
        self.drain();
    }

    /// Sends the gaps that waited for room in their readers' queues.
    pub(crate) fn report_gaps(&mut self) {
        for local in self.subscriptions.values_mut() {
            local.report_gaps();
        }
    }

    /// What to send next.
    pub(crate) fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.endpoint.poll_transmit()
    }

    /// The fire-and-forget requests queued so far, whose frames the endpoint has handed
    /// over (`poll_transmit`): the driver answers them once the session wrote them.
    pub(crate) fn take_unwritten(&mut self) -> Vec<oneshot::Sender<Result<Value, CallError>>> {
        std::mem::take(&mut self.unwritten)
    }

    /// A stream handle's request.
    pub(crate) fn on_stream_command(&mut self, command: StreamCommand) {
        self.pipes.on_command(command, &mut self.endpoint);
        // A stop or a finish may have cancelled a stream: its handles hear it now.
        self.drain();
    }

    /// Hands every event of the endpoint to its handle.
    fn drain(&mut self) {
        while let Some(event) = self.endpoint.poll_event() {
            self.on_event(event);
        }
    }

    fn on_event(&mut self, event: ConsumerEvent) {
        match event {
            ConsumerEvent::Answered {
                correlation,
                result,
            } => {
                let Some((sink, affordance)) = self.pending.remove(&correlation) else {
                    match result {
                        Err(problem) => tracing::warn!(
                            problem = %call_error(&problem),
                            "a fire-and-forget action failed"
                        ),
                        Ok(_) => tracing::debug!(?correlation, "an answer nobody waits for"),
                    }
                    return;
                };
                let result = result
                    .map_err(|problem| call_error(&problem))
                    .and_then(|output| match &affordance {
                        Affordance::Action(name) => self
                            .code
                            .check(Payload::Output, name, &output)
                            .map(|()| output)
                            .map_err(|error| CallError::InvalidResponse(error.to_string())),
                        _ => Ok(output),
                    });
                match sink {
                    Sink::Answer(reply) => {
                        let _ = reply.send(result);
                    }
                    Sink::Updates(updates) => finish_updates(updates, result),
                    Sink::Subscription {
                        confirmed,
                        notifications,
                    } => {
                        if let (Ok(_), Affordance::Observed(name)) = (&result, affordance) {
                            self.subscriptions.insert(name, Local::new(notifications));
                        }
                        let _ = confirmed.send(result.map(|_| 0));
                    }
                    Sink::Stream { opened, .. } => {
                        let _ = opened.send(result.and_then(|_| {
                            Err(CallError::InvalidResponse(
                                "the provider answered a stream request without a stream"
                                    .to_owned(),
                            ))
                        }));
                    }
                }
            }
            ConsumerEvent::Accepted {
                correlation,
                action_id,
            } => {
                if let Some((Sink::Updates(updates), Affordance::Action(name))) =
                    self.pending.remove(&correlation)
                {
                    let _ = updates.try_send(ActionUpdate::Started {
                        action_id: action_id.clone(),
                    });
                    self.actions.insert(action_id, (updates, name));
                }
            }
            ConsumerEvent::Progress {
                action_id,
                progress,
                partial,
                ..
            } => {
                if let Some((updates, _)) = self.actions.get(&action_id) {
                    // A reader that falls behind misses progress, never the end.
                    let _ = updates.try_send(ActionUpdate::Progress { progress, partial });
                }
            }
            ConsumerEvent::Finished {
                action_id, result, ..
            } => {
                if let Some((updates, name)) = self.actions.remove(&action_id) {
                    let result =
                        result
                            .map_err(|problem| call_error(&problem))
                            .and_then(|output| {
                                self.code
                                    .check(Payload::Output, &name, &output)
                                    .map(|()| output)
                                    .map_err(|error| CallError::InvalidResponse(error.to_string()))
                            });
                    finish_updates(updates, result);
                }
            }
            ConsumerEvent::Subscribed {
                correlation,
                event,
                latest,
            } => {
                if let Some((
                    Sink::Subscription {
                        confirmed,
                        notifications,
                    },
                    _,
                )) = self.pending.remove(&correlation)
                {
                    let _ = confirmed.send(Ok(latest));
                    self.subscriptions.insert(event, Local::new(notifications));
                }
            }
            ConsumerEvent::Event { event, id, data } => {
                let notification = Notification::Event {
                    event: event.clone(),
                    id,
                    data,
                };
                self.notify(&event, notification);
            }
            ConsumerEvent::Gap { event, from, to } => {
                let notification = Notification::Gap {
                    event: event.clone(),
                    from,
                    to,
                };
                self.notify(&event, notification);
            }
            ConsumerEvent::PropertyChanged { name, id, value } => {
                let notification = Notification::PropertyChanged {
                    name: name.clone(),
                    id,
                    value,
                };
                self.notify(&name, notification);
            }
            ConsumerEvent::StreamOpened { correlation, id } => {
                if let Some((Sink::Stream { opened, incoming }, affordance)) =
                    self.pending.remove(&correlation)
                {
                    let name = match affordance {
                        Affordance::Action(name) => Some(name),
                        _ => None,
                    };
                    let realtime = name
                        .and_then(|name| self.code.interface().actions.get(&name).cloned())
                        .and_then(|action| action.stream)
                        .is_some_and(|stream| stream.realtime);
                    let sender = self
                        .pipes
                        .open(id.0, realtime, incoming, &mut self.endpoint);
                    let _ = opened.send(Ok(sender));
                    self.pipes.read(id.0, &mut self.endpoint);
                }
            }
            ConsumerEvent::Stream(StreamUpdate::Readable { id }) => {
                self.pipes.read(id.0, &mut self.endpoint)
            }
            ConsumerEvent::Stream(StreamUpdate::Writable { id }) => {
                self.pipes.write(id.0, &mut self.endpoint)
            }
            ConsumerEvent::Stream(StreamUpdate::Stopped { id, code }) => {
                self.pipes.stopped(id.0, code, &mut self.endpoint)
            }
            ConsumerEvent::Stream(StreamUpdate::Cancelled { id, .. }) => {
                self.pipes.cancelled(id.0);
            }
            ConsumerEvent::Stream(StreamUpdate::Finished { id }) => {
                self.pipes.finished(id.0, &mut self.endpoint);
            }
            ConsumerEvent::Stream(StreamUpdate::Reset { id, code }) => {
                self.pipes.fail(id.0, &reset_error("provider", code));
            }
            ConsumerEvent::Problem {
                correlation,
                problem,
            } => {
                let sink = correlation.and_then(|c| self.pending.remove(&c));
                match sink {
                    Some((sink, _)) => fail(sink, call_error(&problem)),
                    None => tracing::warn!(
                        problem = %call_error(&problem),
                        "the provider reports a problem"
                    ),
                }
            }
            ConsumerEvent::Unexpected { reason } => {
                tracing::warn!(%reason, "an interaction message we cannot place");
            }
            other => tracing::debug!(?other, "interaction event ignored"),
        }
    }

    /// Hands a notification to its subscription (or to the one for every event). When the
    /// reader's queue is full the notification is lost to it and reported as a gap before
    /// the next one that fits: never silent loss. A dropped handle ends the subscription
    /// at the provider.
    fn notify(&mut self, name: &str, notification: Notification) {
        let key = if self.subscriptions.contains_key(name) {
            name
        } else if matches!(notification, Notification::PropertyChanged { .. }) {
            return;
        } else {
            "*"
        };
        let Some(local) = self.subscriptions.get_mut(key) else {
            return;
        };
        local.report_gaps();
        let lost_id = match &notification {
            Notification::Event { id, .. } | Notification::PropertyChanged { id, .. } => Some(*id),
            Notification::Gap { .. } => None,
        };
        let pending_gap = local.lost.contains_key(name);
        let sent = if pending_gap {
            // The gap could not go out: this one waits behind it, lost too.
            Err(mpsc::error::TrySendError::Full(notification))
        } else {
            local.notifications.try_send(notification)
        };
        match sent {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Notification::Gap { from, to, .. })) => {
                local.lose(name, from, to);
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                if let Some(id) = lost_id {
                    local.lose(name, id, id);
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.subscriptions.remove(key);
                let ended = if key == "*" {
                    self.endpoint.unsubscribe_all()
                } else if self.code.interface().events.contains_key(key) {
                    self.endpoint.unsubscribe(key)
                } else {
                    self.endpoint.unobserve_property(key)
                };
                if let Err(error) = ended {
                    tracing::debug!(%error, name = key, "cannot end the subscription");
                }
            }
        }
    }

    /// The session ended: every waiting handle hears why.
    pub(crate) fn close(&mut self, reason: &str) {
        let error = CallError::Closed(reason.to_owned());
        for reply in self.unwritten.drain(..) {
            let _ = reply.send(Err(error.clone()));
        }
        for (_, (sink, _)) in self.pending.drain() {
            fail(sink, error.clone());
        }
        for (_, (updates, _)) in self.actions.drain() {
            finish_updates(updates, Err(error.clone()));
        }
        self.subscriptions.clear();
        self.pipes.fail_all(&error);
    }
}

/// The terminal update, even when the reader's queue is full.
fn finish_updates(updates: mpsc::Sender<ActionUpdate>, result: Result<Value, CallError>) {
    tokio::spawn(async move {
        let _ = updates.send(ActionUpdate::Done(result)).await;
    });
}

fn fail(sink: Sink, error: CallError) {
    match sink {
        Sink::Answer(reply) => {
            let _ = reply.send(Err(error));
        }
        Sink::Updates(updates) => finish_updates(updates, Err(error)),
        Sink::Subscription { confirmed, .. } => {
            let _ = confirmed.send(Err(error));
        }
        Sink::Stream { opened, .. } => {
            let _ = opened.send(Err(error));
        }
    }
}
