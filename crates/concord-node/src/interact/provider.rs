//! The provider's part of an interface session: frames go into the session's
//! `ProviderEndpoint` next to the node-wide `Thing`, and what the endpoint asks for (run an
//! action, accept a property write, feed a stream) is done here.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_identity::Caller;
use concord_interact::stream::{ResetCode, StreamId};
use concord_interact::{ActionCaller, ActionMode, Problem, ProblemType, SubscriberId};
use concord_interact::{ProviderEndpoint, ProviderEvent, RequestId, StreamUpdate};
use concord_proto::Frame;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::{mpsc, Notify};

use super::affordances::{problem_of, Affordances, Backend, StreamIo};
use super::pipes::{reset_error, Pipes};
use super::StreamCommand;
use crate::action::{ActionError, Actions};
use crate::admission::ClientKey;
use crate::budget::{CallBudget, CallKind};
use crate::driver::Work;
use crate::error::CallError;
use crate::interface::{InterfaceCode, Payload};

/// The provider's interface state in one session.
pub(crate) struct ProviderInteract {
    endpoint: ProviderEndpoint,
    code: Arc<InterfaceCode>,
    affordances: Arc<Affordances>,
    subscriber: SubscriberId,
    /// Woken when the thing queued something for this session.
    pub(crate) wake: Arc<Notify>,
    pub(crate) pipes: Pipes,
    /// Request-reply and notify calls running now.
    pub(crate) in_flight: usize,
    /// The node-wide budget of running action calls, and the client address this
    /// session's calls count against.
    calls: Arc<CallBudget>,
    client: ClientKey,
    /// Whether the session subscribes to or observes anything, as of the last message
    /// that took the node-wide lock (only messages change it): the idle check on every
    /// turn of the session's loop then does not take that lock.
    subscribed: bool,
    /// Whether the session counts among those holding a subscription, an observation or
    /// a stream (`Registration::try_hold`).
    holding: bool,
    /// A stream with no byte either way for this long is reset (`stream_idle_timeout`).
    stream_idle: Duration,
    /// What the session's queues held when it closed: a large backlog is handed back to
    /// the operating system once the session is gone.
    released: usize,
}

impl Drop for ProviderInteract {
    fn drop(&mut self) {
        if self.released >= crate::memory::GIVE_BACK_AFTER {
            crate::memory::give_back();
        }
    }
}

impl std::fmt::Debug for ProviderInteract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderInteract")
            .field("subscriber", &self.subscriber)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl ProviderInteract {
    /// The provider's side of an interface session with `caller` (the DID the upgrade
    /// proved, or anonymous) from the client address `client`: its long-running actions
    /// count against both (`concord_interact::ActionCaller`), its action calls against
    /// `client` in `calls`.
    pub(crate) fn new(
        code: Arc<InterfaceCode>,
        affordances: Arc<Affordances>,
        caller: &Caller,
        (calls, client): (Arc<CallBudget>, ClientKey),
        limits: concord_interact::Limits,
        streams: concord_interact::stream::StreamLimits,
        stream_idle: Duration,
    ) -> Self {
        let mut counted = ActionCaller::address(client.to_string());
        if let Some(did) = caller.did() {
            counted = counted.with_identity(did.as_str());
        }
        let (subscriber, wake) = affordances.register(counted);
        let mut endpoint =
            ProviderEndpoint::new(subscriber, code.interface().clone(), limits, streams);
        // Frames leave with room for the session's header (`Session::send_application_frame`).
        endpoint.set_frame_headroom(Frame::HEADER_LEN);
        Self {
            endpoint,
            code,
            affordances,
            subscriber,
            wake,
            pipes: Pipes::new(&streams),
            in_flight: 0,
            calls,
            client,
            subscribed: false,
            holding: false,
            stream_idle,
            released: 0,
        }
    }

    /// Whether nothing runs for this session, no stream is open and it subscribes to
    /// nothing (a subscriber waiting for events is neither closed as idle nor shed).
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.pipes.is_empty() && !self.subscribed
    }

    /// A PT 1 frame from the requester; `hold` is asked before a request makes the
    /// session hold something while it holds nothing (a subscription, an observation, a
    /// stream), and its problem answers the request instead.
    pub(crate) fn handle_frame(
        &mut self,
        now: Instant,
        bytes: &[u8],
        actions: &Actions,
        work: &mpsc::UnboundedSender<Box<Work>>,
        hold: impl FnOnce() -> Result<(), Box<Problem>>,
    ) {
        // Decoded outside the node-wide lock; only a message that needs the Thing takes it.
        let affordances = &self.affordances;
        let mut took = false;
        let gate = || {
            let answer = hold();
            took = answer.is_ok();
            answer
        };
        let used = self
            .endpoint
            .handle_frame_gated(now, bytes, || affordances.lock(), gate);
        self.holding |= took;
        if used {
            let mut thing = affordances.lock();
            self.subscribed = thing.has_subscriptions(self.subscriber);
            affordances.wake(&mut thing);
        }
        self.drain(actions, work);
    }

    /// What to send next (our answers, and what the thing queued for us).
    ///
    /// What the thing queued is taken under one lock and encoded outside it, so the
    /// sessions do not encode one after another on the node-wide mutex.
    pub(crate) fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        if let Some(bytes) = self.endpoint.poll_transmit_ready() {
            return Some(bytes);
        }
        if !self.endpoint.take_queued(&mut self.affordances.lock()) {
            return None;
        }
        self.endpoint.poll_transmit_ready()
    }

    /// Whether the session counted among the holders and now holds nothing: it leaves
    /// their budget (said once).
    pub(crate) fn stopped_holding(&mut self) -> bool {
        if self.holding && !self.endpoint.holds() && self.pipes.is_empty() {
            self.holding = false;
            return true;
        }
        false
    }

    /// The next deadline: the endpoint's, or a stream's idle limit.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let idle = self.pipes.idle_deadline(self.stream_idle);
        [self.endpoint.poll_timeout(), idle]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs the endpoint's timers up to `now`, and resets the streams idle for
    /// `stream_idle_timeout` (code 408: both sides hear it).
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        for id in self.pipes.idle(now, self.stream_idle) {
            tracing::info!(
                stream = id,
                "no byte either way on the stream: resetting it"
            );
            if let Err(error) = self.endpoint.stream_reset(StreamId(id), ResetCode::IDLE) {
                tracing::debug!(%error, "cannot reset the stream");
            }
            let reason = format!(
                "the stream was reset: no byte either way for {}",
                crate::config::human(self.stream_idle)
            );
            self.pipes.fail(id, &CallError::Closed(reason));
        }
    }

    /// A request-reply or notify call finished: its answer goes out.
    pub(crate) fn on_done(
        &mut self,
        request: RequestId,
        name: &str,
        result: Result<Value, ActionError>,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let result = result
            .and_then(|output| {
                self.code
                    .check(Payload::Output, name, &output)
                    .map(|()| output)
                    .map_err(|problem| {
                        ActionError::internal(format!(
                            "the action's output breaks the protocol: {problem}"
                        ))
                    })
            })
            .map_err(|error| problem_of(&error));
        let mut thing = self.affordances.lock();
        self.endpoint
            .reply(request, result, &mut thing, Instant::now());
    }

    /// A `cancelaction` relayed to the replica running the action came back: the
    /// caller hears what that replica answered.
    pub(crate) fn on_relayed(
        &mut self,
        request: RequestId,
        result: Result<concord_interact::ActionRecord, Problem>,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.endpoint.reply_cancel(request, result, Instant::now());
    }

    /// A stream action ended: `Ok` ends our half once the action let go of its sender
    /// too; an error (or a panic) resets the stream, whatever the action sent before.
    pub(crate) fn on_stream_done(&mut self, id: u32, result: Result<Value, ActionError>) {
        let Err(error) = result else {
            self.pipes.action_returned(id, &mut self.endpoint);
            return;
        };
        tracing::info!(%error, stream = id, "the stream action failed: resetting the stream");
        // The requester hears the action's status as the reset code (500, 502, 504, …).
        let code = ResetCode(u32::from(error.code));
        if let Err(error) = self.endpoint.stream_reset(StreamId(id), code) {
            tracing::debug!(%error, "cannot reset the stream");
        }
        self.pipes.fail(
            id,
            &CallError::Closed(format!("the action failed: {error}")),
        );
    }

    /// A stream handle's request.
    pub(crate) fn on_stream_command(&mut self, command: StreamCommand) {
        self.pipes.on_command(command, &mut self.endpoint);
    }

    /// The session ended: subscriptions end, long-running actions run on for their lease.
    pub(crate) fn close(&mut self, reason: &str) {
        let released = self.affordances.unregister(self.subscriber);
        self.released = released.saturating_add(self.endpoint.taken_bytes());
        self.pipes.fail_all(&CallError::Closed(reason.to_owned()));
    }

    fn drain(&mut self, actions: &Actions, work: &mpsc::UnboundedSender<Box<Work>>) {
        while let Some(event) = self.endpoint.poll_event() {
            self.on_event(event, actions, work);
        }
    }

    fn refuse(&mut self, request: RequestId, problem: Problem) {
        let mut thing = self.affordances.lock();
        self.endpoint
            .reply(request, Err(problem), &mut thing, Instant::now());
    }

    fn on_event(
        &mut self,
        event: ProviderEvent,
        actions: &Actions,
        work: &mpsc::UnboundedSender<Box<Work>>,
    ) {
        match event {
            ProviderEvent::Invoke {
                request,
                name,
                input,
                mode,
                action_id,
                stream,
            } => {
                if let Err(problem) = self.code.check(Payload::Input, &name, &input) {
                    return self.refuse(
                        request,
                        Problem::of(ProblemType::BadMessage, problem.to_string()),
                    );
                }
                let Some(backend) = actions.mode_backend(&name) else {
                    let problem = Problem::new("about:blank")
                        .with_status(404)
                        .with_detail(format!("action `{name}` is not served here any more"));
                    return self.refuse(request, problem);
                };
                match (mode, backend, action_id, stream) {
                    (ActionMode::Progress, Backend::Progress(action), Some(action_id), _) => {
                        let calls = (Arc::clone(&self.calls), self.client);
                        self.affordances
                            .run_progress(&action, action_id, input, calls);
                    }
                    (ActionMode::Stream, Backend::Stream(action), _, Some(id)) => {
                        self.start_stream(id, &name, &action, input, work);
                    }
                    (_, Backend::Reply(action) | Backend::Notify(action), _, _) => {
                        self.in_flight += 1;
                        let (calls, client) = (Arc::clone(&self.calls), self.client);
                        let work = work.clone();
                        tokio::spawn(async move {
                            // A slot of the node's budget first (waiting for one, or
                            // refused with 429 / 503), held until the call ends.
                            let result = match calls.enter(client, CallKind::Brief).await {
                                Ok(_permit) => {
                                    AssertUnwindSafe(async move { action.call(input).await })
                                        .catch_unwind()
                                        .await
                                        .unwrap_or_else(|_| {
                                            Err(ActionError::internal("the action panicked"))
                                        })
                                }
                                Err(refused) => Err(refused),
                            };
                            let _ = work.send(Box::new(Work::Interacted {
                                request,
                                name,
                                result,
                            }));
                        });
                    }
                    _ => {
                        let problem =
                            Problem::new("about:blank")
                                .with_status(500)
                                .with_detail(format!(
                                    "action `{name}` is not served in the mode the protocol states"
                                ));
                        self.refuse(request, problem);
                    }
                }
            }
            ProviderEvent::WriteProperty {
                request,
                name,
                value,
            } => {
                let result = self
                    .affordances
                    .check_property(&name, &value)
                    .map(|()| value)
                    .map_err(|error| Problem::of(ProblemType::BadMessage, error.to_string()));
                let mut thing = self.affordances.lock();
                self.endpoint
                    .reply(request, result, &mut thing, Instant::now());
                self.affordances.wake(&mut thing);
            }
            ProviderEvent::Stream(StreamUpdate::Readable { id }) => {
                self.pipes.touch(id.0);
                self.pipes.read(id.0, &mut self.endpoint)
            }
            ProviderEvent::Stream(StreamUpdate::Writable { id }) => {
                self.pipes.touch(id.0);
                self.pipes.write(id.0, &mut self.endpoint)
            }
            ProviderEvent::Stream(StreamUpdate::Stopped { id, code }) => {
                self.pipes.touch(id.0);
                self.pipes.stopped(id.0, code, &mut self.endpoint)
            }
            ProviderEvent::Stream(StreamUpdate::Finished { id }) => {
                self.pipes.touch(id.0);
                self.pipes.finished(id.0, &mut self.endpoint);
            }
            ProviderEvent::Stream(StreamUpdate::Reset { id, code }) => {
                self.pipes.fail(id.0, &reset_error("requester", code));
            }
            ProviderEvent::CancelElsewhere {
                request,
                action_id,
                refused,
            } => {
                let Some(relay) = self.affordances.relay.clone() else {
                    return self.refuse(request, refused);
                };
                // Awaited on a task of its own: a round trip to another replica, or the
                // relay's timeout, never holds this session's loop.
                self.in_flight += 1;
                let work = work.clone();
                tokio::spawn(async move {
                    let result = super::relay::cancel_elsewhere(&relay, &action_id).await;
                    let _ = work.send(Box::new(Work::Relayed {
                        request,
                        result: Box::new(result),
                    }));
                });
            }
            other => tracing::debug!(?other, "interaction event ignored"),
        }
    }

    /// Runs a stream action with the stream's two halves.
    fn start_stream(
        &mut self,
        id: StreamId,
        name: &str,
        action: &Arc<dyn super::StreamAction>,
        input: Value,
        work: &mpsc::UnboundedSender<Box<Work>>,
    ) {
        let realtime = self
            .code
            .interface()
            .actions
            .get(name)
            .and_then(|action| action.stream.as_ref())
            .is_some_and(|stream| stream.realtime);
        let (sender, receiver) = self
            .pipes
            .open_for_action(id.0, realtime, &mut self.endpoint);
        let action = Arc::clone(action);
        let (calls, client) = (Arc::clone(&self.calls), self.client);
        let work = work.clone();
        tokio::spawn(async move {
            // A refused call (429 / 503) resets the stream with that code.
            let result = match calls.enter(client, CallKind::Long).await {
                Ok(_permit) => AssertUnwindSafe(async move {
                    action.call(input, StreamIo { sender, receiver }).await
                })
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(ActionError::internal("the action panicked"))),
                Err(refused) => Err(refused),
            };
            let _ = work.send(Box::new(Work::StreamDone { id: id.0, result }));
        });
        self.pipes.read(id.0, &mut self.endpoint);
    }
}
