//! Interface sessions in the driver: once the protocol in force is an interface document,
//! application frames go to the interaction layer (`crate::interact`) instead of a
//! handler, and the layer's frames, wake-ups and stream writes join the session's loop.

use std::sync::Arc;
use std::time::Instant;

use concord_interact::RequestId;
use concord_proto::SessionError;
use serde_json::Value;

use super::{Driver, RoleState};
use tokio::sync::oneshot;

use crate::action::ActionError;
use crate::error::CallError;
use crate::interact::{ConsumerState, Interaction, ProviderInteract, Sink, StreamCommand};
use crate::transport::{Transport, TransportError};

/// Each side's interaction state in an interface session.
#[derive(Debug)]
pub(crate) enum Interact {
    Provider(Box<ProviderInteract>),
    Consumer(Box<ConsumerState>),
}

impl Interact {
    /// Whether nothing is in flight either way.
    pub(crate) fn is_idle(&self) -> bool {
        match self {
            Self::Provider(state) => state.is_idle(),
            Self::Consumer(state) => state.is_idle(),
        }
    }
}

impl<T: Transport> Driver<T> {
    /// Starts the interaction layer once the protocol in force is an interface.
    pub(super) fn install_interact(&mut self) {
        if self.interact.is_some() {
            return;
        }
        let Some(code) = self.code.as_ref().and_then(|code| code.interface()) else {
            return;
        };
        let code = Arc::clone(code);
        let limits = &self.shared.limits;
        self.interact = Some(match &self.role {
            RoleState::Provider(state) => Interact::Provider(Box::new(ProviderInteract::new(
                code,
                Arc::clone(&self.shared.affordances),
                // Long-running actions are counted per client address and per proved DID.
                &state.caller,
                (Arc::clone(&self.shared.calls), state.client),
                limits.interaction.clone(),
                limits.streams,
                limits.stream_idle_timeout,
            ))),
            RoleState::Requester(_) => Interact::Consumer(Box::new(ConsumerState::new(
                code,
                limits.interaction.clone(),
                limits.streams,
            ))),
        });
        tracing::debug!("interaction layer in force");
    }

    /// Whether application frames belong to the interaction layer.
    pub(super) fn is_interface_session(&self) -> bool {
        self.interact.is_some()
    }

    /// An application frame of an interface session.
    pub(super) fn on_interact_frame(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        match &mut self.interact {
            Some(Interact::Provider(state)) => {
                let shed = self.shed.as_ref();
                state.handle_frame(now, bytes, &self.shared.actions, &self.work_tx, || {
                    shed.map_or(Ok(()), |registration| registration.try_hold(now))
                });
            }
            Some(Interact::Consumer(state)) => state.handle_frame(now, bytes),
            None => {}
        }
    }

    /// A connection's interaction (requester); one made before the layer is in force
    /// waits like a call.
    pub(super) fn on_interaction(&mut self, request: Interaction, sink: Sink) {
        match &mut self.interact {
            Some(Interact::Consumer(state)) => state.start(request, sink),
            _ => self.wait_for_ready(super::Command::Interact { request, sink }),
        }
    }

    /// A subscription's reader made room: the gaps waiting for it go out.
    pub(super) fn on_room(&mut self) {
        if let Some(Interact::Consumer(state)) = &mut self.interact {
            state.report_gaps();
        }
    }

    /// A stream handle's request.
    pub(super) fn on_stream_command(&mut self, command: StreamCommand) {
        match &mut self.interact {
            Some(Interact::Provider(state)) => state.on_stream_command(command),
            Some(Interact::Consumer(state)) => state.on_stream_command(command),
            None => {}
        }
    }

    /// Provider: a request-reply or notify call finished.
    pub(super) fn on_interacted(
        &mut self,
        request: RequestId,
        name: &str,
        result: Result<Value, ActionError>,
    ) {
        if let Some(Interact::Provider(state)) = &mut self.interact {
            state.on_done(request, name, result);
        }
    }

    /// Provider: a relayed `cancelaction` came back.
    pub(super) fn on_relayed(
        &mut self,
        request: RequestId,
        result: Result<concord_interact::ActionRecord, concord_interact::Problem>,
    ) {
        if let Some(Interact::Provider(state)) = &mut self.interact {
            state.on_relayed(request, result);
        }
    }

    /// Provider: a stream action ended.
    pub(super) fn on_stream_done(&mut self, id: u32, result: Result<Value, ActionError>) {
        if let Some(Interact::Provider(state)) = &mut self.interact {
            state.on_stream_done(id, result);
        }
    }

    /// Moves the layer's frames into the session, to go out with the next flush; `Err`
    /// says why the session took no more (it closed, or a frame was over the size
    /// limit and was dropped), the rest staying in the layer.
    pub(super) fn pump_interact(&mut self) -> Result<(), SessionError> {
        loop {
            let frame = match &mut self.interact {
                Some(Interact::Provider(state)) => state.poll_transmit(),
                Some(Interact::Consumer(state)) => state.poll_transmit(),
                None => None,
            };
            let Some(frame) = frame else { return Ok(()) };
            // The layer left room for the frame's header (`install_interact`).
            if let Err(error) = self.session.send_application_frame(frame) {
                tracing::warn!(%error, "cannot send an interaction frame");
                return Err(error);
            }
        }
    }

    /// Requester: the fire-and-forget requests whose frames [`Self::pump_interact`] moved
    /// into the session (or failed to), to answer once the flush says whether they went.
    pub(super) fn take_unwritten(&mut self) -> Vec<Written> {
        match &mut self.interact {
            Some(Interact::Consumer(state)) => state.take_unwritten(),
            _ => Vec::new(),
        }
    }

    /// Provider: gives the session's place among the holders back once it holds nothing.
    pub(super) fn release_hold(&mut self) {
        if let (Some(Interact::Provider(state)), Some(shed)) = (&mut self.interact, &self.shed) {
            if state.stopped_holding() {
                shed.release_hold();
            }
        }
    }

    /// Request-reply and notify calls of the interaction layer running now.
    pub(super) fn interact_calls(&self) -> usize {
        match &self.interact {
            Some(Interact::Provider(state)) => state.in_flight,
            _ => 0,
        }
    }

    /// The layer's next deadline.
    pub(super) fn interact_deadline(&self) -> Option<Instant> {
        match &self.interact {
            Some(Interact::Provider(state)) => state.poll_timeout(),
            _ => None,
        }
    }

    /// Runs the layer's timers up to `now`.
    pub(super) fn interact_timeout(&mut self, now: Instant) {
        if let Some(Interact::Provider(state)) = &mut self.interact {
            if state.poll_timeout().is_some_and(|deadline| deadline <= now) {
                state.handle_timeout(now);
            }
        }
    }

    /// The session ended: handles hear why, the node forgets our subscriptions.
    pub(super) fn close_interact(&mut self, reason: &str) {
        match &mut self.interact {
            Some(Interact::Provider(state)) => state.close(reason),
            Some(Interact::Consumer(state)) => state.close(reason),
            None => {}
        }
    }
}

/// The answer to a fire-and-forget request, given once its frame was written.
pub(super) type Written = oneshot::Sender<Result<Value, CallError>>;

/// Answers fire-and-forget requests once their frames were pumped into the session and
/// flushed to the connection: sent, or why not (the session closed first, the write
/// failed). A caller told "sent" knows the frame was written before any close.
pub(super) fn settle_written(
    written: Vec<Written>,
    pumped: &Result<(), SessionError>,
    flushed: &Result<(), TransportError>,
) {
    if written.is_empty() {
        return;
    }
    let outcome = match (pumped, flushed) {
        (Ok(()), Ok(())) => Ok(Value::Null),
        (Err(error), _) => Err(unsent(error)),
        (_, Err(error)) => Err(CallError::Closed(format!(
            "the request was not written: {error}"
        ))),
    };
    for reply in written {
        let _ = reply.send(outcome.clone());
    }
}

/// The error of a request the session would not queue: over the frame size limit, a
/// request that cannot be sent as it is ([`CallError::InvalidInput`], naming the limit);
/// anything else, the session could not carry it ([`CallError::Closed`]: it could not run).
pub(super) fn unsent(error: &SessionError) -> CallError {
    match error {
        SessionError::FrameTooLarge { .. } | SessionError::MetaMessageTooLarge { .. } => {
            CallError::InvalidInput(error.to_string())
        }
        _ => CallError::Closed(format!("the request was not sent: {error}")),
    }
}

/// What wakes an interface session's loop besides the transport and its work.
pub(super) enum Wake {
    /// The node-wide thing queued something for this (provider) session.
    Queued,
    /// A stream handle's request.
    Stream(StreamCommand),
}

/// The next reason the layer has to wake the session; pending outside interface sessions.
pub(super) async fn next_wake(interact: &mut Option<Interact>) -> Wake {
    match interact {
        Some(Interact::Provider(state)) => {
            let ProviderInteract { wake, pipes, .. } = &mut **state;
            tokio::select! {
                () = wake.notified() => Wake::Queued,
                command = pipes.next_command() => Wake::Stream(command),
            }
        }
        Some(Interact::Consumer(state)) => Wake::Stream(state.pipes.next_command().await),
        None => std::future::pending().await,
    }
}
