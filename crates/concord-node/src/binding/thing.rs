//! What a binding reaches the node's affordances through: [`ThingAccess`], implemented once
//! over the node ([`NodeThing`]) with the checks of the meta-protocol WebSocket, so that no
//! binding serves an affordance around the node's authorization, schemas or call budget.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use concord_identity::Caller;
use concord_interact::{
    ActionCaller, ActionMode, ActionStatus, ActionTableError, Interface, Problem,
};
use serde_json::Value;

use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::budget::CallKind;
use crate::driver::provider::run_plain;
use crate::interact::{Backend, PublishError};
use crate::interface::{Payload, PayloadError};
use crate::node::Shared;
use crate::shed::IdleSessions;

use super::feed::{self, Feed};

/// The answer of [`ThingAccess::invoke`]: borrowed from the handle it came from.
pub type InvokeFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ThingError>> + Send + 'a>>;

/// The answer of [`ThingAccess::relay_cancel`].
pub type RelayCancelFuture = Pin<Box<dyn Future<Output = Result<(), ThingError>> + Send>>;

/// A binding's handle to the node's affordances ([`Site::thing`](crate::Site::thing)):
/// every call and property access goes through the checks the meta-protocol WebSocket
/// makes. `caller` is who the binding says calls: [`Caller::Anonymous`] unless the binding
/// verified the caller's DID itself (with `concord_identity::Credentials`, as the
/// WebSocket's upgrade does); `from` is the client's address, which the node's call
/// budget counts.
pub trait ThingAccess: Send + Sync + 'static {
    /// Every affordance the node serves (its actions with their modes and schemas, its
    /// properties, its events), whoever may use them.
    fn interface(&self) -> &Interface;

    /// Calls the request-reply or notify action `name` with `input` for `caller` from
    /// `from`, and answers its output once it ends (another mode: [`ThingError::Mode`]): refused
    /// unless `caller` may call it ([`ThingError::Forbidden`]) and its input schema takes
    /// `input` ([`ThingError::Input`]); then it takes a slot of the node's backend call
    /// budget for `from`'s address, waiting at most `Limits::backend_call_wait`
    /// ([`ThingError::Busy`], 429 or 503), and its output is checked against its output
    /// schema ([`ThingError::Output`]).
    fn invoke<'a>(
        &'a self,
        caller: &'a Caller,
        from: IpAddr,
        name: &'a str,
        input: Value,
    ) -> InvokeFuture<'a>;

    /// The property `name`'s value now, for `caller`.
    ///
    /// # Errors
    /// [`ThingError::Unknown`] or [`ThingError::Forbidden`].
    fn read_property(&self, caller: &Caller, name: &str) -> Result<Value, ThingError>;

    /// Writes the property `name` for `caller`: checked against its schema, its observers
    /// notified.
    ///
    /// # Errors
    /// [`ThingError::Unknown`], [`ThingError::Forbidden`], [`ThingError::ReadOnly`], or
    /// [`ThingError::Input`] naming where the value breaks the schema.
    fn write_property(&self, caller: &Caller, name: &str, value: Value) -> Result<(), ThingError>;

    // Long-running actions, for bindings that answer a call before it ends (the HTTP
    // binding's 201 and its action status resources).

    /// Starts the progress action `name` with `input` for `caller` from `from` and answers
    /// its action id at once: refused as [`invoke`](Self::invoke) refuses (who may call,
    /// the input schema), and by the node's action table ([`ThingError::Action`]: the
    /// caller's address or identity holds `Limits::max_actions_per_caller` unfinished
    /// actions (429), the table is full or only its reserve is left (503)). The call runs
    /// in a slot of the backend budget for `from`'s address, as a WebSocket session's long
    /// call does. The caller holds no connection: the action's lease runs from the start
    /// and each [`query_action`](Self::query_action) renews it.
    fn start_action<'a>(
        &'a self,
        caller: &'a Caller,
        from: IpAddr,
        name: &'a str,
        input: Value,
    ) -> StartFuture<'a>;

    /// The action `id` as it stands (`queryaction`), for `caller`, who must be allowed to
    /// use the action it runs; renews its lease when unfinished.
    ///
    /// # Errors
    /// [`ThingError::Action`] (an unknown id: 404) or [`ThingError::Forbidden`].
    fn query_action(&self, caller: &Caller, id: &str) -> Result<ActionState, ThingError>;

    /// Cancels the action `id` (`cancelaction`) for `caller`, who must be allowed to use
    /// the action it runs: its task stops.
    ///
    /// # Errors
    /// [`ThingError::Action`] (an unknown id: 404; a finished action: 409) or
    /// [`ThingError::Forbidden`].
    fn cancel_action(&self, caller: &Caller, id: &str) -> Result<(), ThingError>;

    /// Relays the cancel of the action `id`, which another replica of the agent runs
    /// ([`cancel_action`](Self::cancel_action) answered [`ActionTableError::HeldElsewhere`]),
    /// to that replica (`NodeBuilder::action_relay`): `None` when the node relays nothing.
    /// Its error is [`ThingError::Relayed`] (503 with `Retry-After` when the replica or the
    /// relay's backend cannot be reached, the replica's own refusal otherwise).
    fn relay_cancel(&self, id: &str) -> Option<RelayCancelFuture> {
        let _ = id;
        None
    }

    // Subscriptions and observations, for bindings that push what happens (the HTTP
    // binding's Server-Sent Events and long polls).

    /// Subscribes `caller` from `from` to the event `name`: refused unless `caller` may
    /// use it ([`ThingError::Forbidden`]); then the subscription takes a place in the
    /// budget of sessions holding a subscription, an observation or a stream
    /// (`Limits::max_holding_sessions`, `Limits::max_holding_sessions_per_address`) as an
    /// interface session's does ([`ThingError::Busy`]: 429 when `from`'s address holds its
    /// share; when the node-wide budget is full, the holder silent longest of the address
    /// holding the most is shed, else 503). Without `last_seen`, the events published from
    /// now on come; with it (the id of the last event the subscriber saw), every later
    /// event still in the replay buffer comes first, preceded by a gap for those that
    /// left it ([`FeedNews::Gap`](crate::FeedNews::Gap)), as an interface session resumes. Its queue is the
    /// node's subscriber queue with the node's `event_overflow` policy.
    ///
    /// # Errors
    /// [`ThingError::Unknown`], [`ThingError::Forbidden`], [`ThingError::Busy`], or
    /// [`ThingError::Subscription`] (a `last_seen` ahead of the latest event).
    fn subscribe_event(
        &self,
        caller: &Caller,
        from: IpAddr,
        name: &str,
        last_seen: Option<u64>,
    ) -> Result<Feed, ThingError>;

    /// Observes the property `name` for `caller` from `from`: its changes from now on,
    /// checked and counted as [`subscribe_event`](Self::subscribe_event) checks and counts
    /// a subscription.
    ///
    /// # Errors
    /// [`ThingError::Unknown`], [`ThingError::Forbidden`], [`ThingError::Busy`], or
    /// [`ThingError::Subscription`] (the property is not observable).
    fn observe_property(
        &self,
        caller: &Caller,
        from: IpAddr,
        name: &str,
    ) -> Result<Feed, ThingError>;

    // Stream actions over one exchange (the HTTP binding's chunked bodies).

    /// Runs the stream action `name` with `input` for `caller` from `from`, the caller's
    /// bytes read from `incoming` and the action's bytes answered as the returned body:
    /// refused as [`invoke`](Self::invoke) refuses (who may call, the input schema); the
    /// stream takes a place in the holders' budget (refused: [`ThingError::Busy`], 429 or
    /// 503), the call a long slot of the backend budget for `from`'s address (refused: the
    /// body ends cut short), and the stream's reader queue and send room are the
    /// WebSocket streams' (`Limits::streams`). The body ends when the action returns `Ok`
    /// and is cut short when it fails, when no byte moves either way for
    /// `Limits::stream_idle_timeout` once it runs, or when the holders' budget sheds it;
    /// dropping the body ends the action.
    fn invoke_stream(
        &self,
        caller: &Caller,
        from: IpAddr,
        name: &str,
        input: Value,
        incoming: axum::body::Body,
    ) -> Result<axum::body::Body, ThingError>;
}

/// The answer of [`ThingAccess::start_action`]: the new action's id.
pub type StartFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ThingError>> + Send + 'a>>;

/// A long-running action as [`ThingAccess::query_action`] finds it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ActionState {
    /// The action's name.
    pub name: String,
    /// Where it stands.
    pub status: ActionStatus,
    /// Its last reported progress (0 to 1), when it reported one.
    pub progress: Option<f64>,
    /// Its output, once completed.
    pub output: Option<Value>,
    /// Why it failed or was cancelled.
    pub error: Option<Problem>,
    /// When it was requested.
    pub requested: SystemTime,
    /// When it ended, once it did.
    pub ended: Option<SystemTime>,
}

impl std::fmt::Debug for dyn ThingAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThingAccess").finish_non_exhaustive()
    }
}

/// Why a binding's call or property access was refused or failed; [`ThingError::status`]
/// is the HTTP status it answers with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ThingError {
    /// The node has no such affordance (404).
    #[error("the node has no {kind} named `{name}`")]
    Unknown {
        /// `action` or `property`.
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The caller may not use the affordance (403).
    #[error("the caller may not use `{name}`")]
    Forbidden {
        /// The affordance.
        name: String,
    },
    /// The input or value breaks its schema (400): the error names the affordance, the
    /// JSON pointer and the problem.
    #[error("{0}")]
    Input(PayloadError),
    /// The property cannot be written (405).
    #[error("property `{name}` is read-only")]
    ReadOnly {
        /// The property.
        name: String,
    },
    /// The action runs in a mode the operation does not serve (501): a progress action is
    /// started ([`ThingAccess::start_action`]), not invoked, and a stream action is served
    /// by no operation of this handle.
    #[error("action `{name}` runs in {mode} mode, which this operation does not serve")]
    Mode {
        /// The action.
        name: String,
        /// Its mode (`progress`, `notify`, `stream`).
        mode: &'static str,
    },
    /// The node's backend call budget refused the call: 429 when the client's address
    /// holds its share, 503 when the node is full.
    #[error("{0}")]
    Busy(ActionError),
    /// The action answered with an error (its own status).
    #[error("the action failed: {0}")]
    Failed(ActionError),
    /// The action's output breaks its output schema (500).
    #[error("the action's output breaks its schema: {0}")]
    Output(PayloadError),
    /// The node's table of long-running actions refused: an unknown action id (404), a
    /// finished action (409), the caller's bound (429), the table full or only its reserve
    /// left (503).
    #[error("{0}")]
    Action(ActionTableError),
    /// A cancel relayed to the replica running the action
    /// ([`ThingAccess::relay_cancel`]) did not reach it (503) or that replica refused.
    #[error("{0}")]
    Relayed(concord_interact::RelayError),
    /// The subscription or observation cannot be made: the property is not observable, or
    /// the resume point is ahead of the event's latest id (400); or the resume cannot be
    /// judged yet, the shared event log not reached (503).
    #[error("cannot subscribe to `{name}`: {reason}")]
    Subscription {
        /// The event or property.
        name: String,
        /// Why not.
        reason: String,
        /// 400, or 503 for what may pass.
        status: u16,
    },
}

impl ThingError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            Self::Unknown { .. } => 404,
            Self::Forbidden { .. } => 403,
            Self::Input(_) => 400,
            Self::ReadOnly { .. } => 405,
            Self::Mode { .. } => 501,
            Self::Busy(refused) => refused.code,
            Self::Failed(error) => error.code,
            Self::Output(_) => 500,
            Self::Action(error) => error.to_problem().status.unwrap_or(500),
            Self::Subscription { status, .. } => *status,
            Self::Relayed(error) => error.to_problem().status.unwrap_or(503),
        }
    }
}

/// The one [`ThingAccess`] over a node.
pub(crate) struct NodeThing {
    shared: Arc<Shared>,
    /// The budget of sessions holding a subscription, which feeds count in.
    idle: Arc<IdleSessions>,
}

impl NodeThing {
    pub(crate) fn new(shared: Arc<Shared>, idle: Arc<IdleSessions>) -> Self {
        Self { shared, idle }
    }

    /// `Ok` when `caller` may use `name`.
    fn permit(&self, caller: &Caller, name: &str) -> Result<(), ThingError> {
        if self.shared.identity.permits(caller, name) {
            return Ok(());
        }
        Err(ThingError::Forbidden {
            name: name.to_owned(),
        })
    }

    /// The property `name`, when the node has it.
    fn property(&self, name: &str) -> Result<&concord_interact::PropertyAffordance, ThingError> {
        self.shared
            .interface
            .properties
            .get(name)
            .ok_or_else(|| ThingError::Unknown {
                kind: "property",
                name: name.to_owned(),
            })
    }

    /// The action `name` in one of `modes`, checked for `caller` with `input`: its backend.
    fn checked_action(
        &self,
        caller: &Caller,
        name: &str,
        input: &Value,
        modes: &[ActionMode],
    ) -> Result<Backend, ThingError> {
        let unknown = || ThingError::Unknown {
            kind: "action",
            name: name.to_owned(),
        };
        let action = self
            .shared
            .interface
            .actions
            .get(name)
            .ok_or_else(unknown)?;
        self.permit(caller, name)?;
        if !modes.contains(&action.mode) {
            return Err(ThingError::Mode {
                name: name.to_owned(),
                mode: action.mode.as_str(),
            });
        }
        let schemas = &self.shared.affordances.schemas;
        schemas
            .check(Payload::Input, name, input)
            .map_err(ThingError::Input)?;
        self.shared.actions.mode_backend(name).ok_or_else(unknown)
    }

    /// The name of the action `id` runs, once `caller` may use it.
    fn permitted_action(&self, caller: &Caller, id: &str) -> Result<String, ThingError> {
        let name = self
            .shared
            .affordances
            .lock()
            .lookup_action(id, Instant::now())
            .map(|action| action.name().to_owned())
            .map_err(ThingError::Action)?;
        self.permit(caller, &name)?;
        Ok(name)
    }
}

/// `at` on the wall clock: `now_wall` less the time from `at` to `now`.
fn wall_time(at: Instant, now: Instant, now_wall: SystemTime) -> SystemTime {
    now_wall
        .checked_sub(now.saturating_duration_since(at))
        .unwrap_or(now_wall)
}

impl ThingAccess for NodeThing {
    fn interface(&self) -> &Interface {
        &self.shared.interface
    }

    fn invoke<'a>(
        &'a self,
        caller: &'a Caller,
        from: IpAddr,
        name: &'a str,
        input: Value,
    ) -> InvokeFuture<'a> {
        Box::pin(async move {
            let modes = [ActionMode::Reply, ActionMode::Notify];
            let backend = self.checked_action(caller, name, &input, &modes)?;
            // A slot of the node's budget first, as a WebSocket session's call takes one.
            let _permit = self
                .shared
                .calls
                .enter(ClientKey::of(from), CallKind::Brief)
                .await
                .map_err(ThingError::Busy)?;
            let output = run_plain(&backend, name, input)
                .await
                .map_err(ThingError::Failed)?;
            // A notify action answers nothing on the WebSocket; when it answers nothing
            // here either, there is no output to check.
            if matches!(backend, Backend::Notify(_)) && output.is_null() {
                return Ok(output);
            }
            self.shared
                .affordances
                .schemas
                .check(Payload::Output, name, &output)
                .map_err(ThingError::Output)?;
            Ok(output)
        })
    }

    fn read_property(&self, caller: &Caller, name: &str) -> Result<Value, ThingError> {
        self.property(name)?;
        self.permit(caller, name)?;
        self.shared
            .affordances
            .lock()
            .read_property(name)
            .cloned()
            .map_err(|_| ThingError::Unknown {
                kind: "property",
                name: name.to_owned(),
            })
    }

    fn write_property(&self, caller: &Caller, name: &str, value: Value) -> Result<(), ThingError> {
        let property = self.property(name)?;
        self.permit(caller, name)?;
        if !property.writable {
            return Err(ThingError::ReadOnly {
                name: name.to_owned(),
            });
        }
        self.shared
            .affordances
            .set_property(name, value)
            .map_err(|error| match error {
                PublishError::Invalid(problem) => ThingError::Input(problem),
                _ => ThingError::Unknown {
                    kind: "property",
                    name: name.to_owned(),
                },
            })
    }

    fn start_action<'a>(
        &'a self,
        caller: &'a Caller,
        from: IpAddr,
        name: &'a str,
        input: Value,
    ) -> StartFuture<'a> {
        Box::pin(async move {
            let backend = self.checked_action(caller, name, &input, &[ActionMode::Progress])?;
            let Backend::Progress(action) = backend else {
                return Err(ThingError::Unknown {
                    kind: "action",
                    name: name.to_owned(),
                });
            };
            let client = ClientKey::of(from);
            let mut counted = ActionCaller::address(client.to_string());
            if let Some(did) = caller.did() {
                counted = counted.with_identity(did.as_str());
            }
            let affordances = &self.shared.affordances;
            let id = {
                let mut thing = affordances.lock();
                let started = thing.start_detached_action(name, counted, Instant::now());
                affordances.wake(&mut thing);
                started.map_err(ThingError::Action)?
            };
            let calls = (Arc::clone(&self.shared.calls), client);
            affordances.run_progress(&action, id.clone(), input, calls);
            Ok(id)
        })
    }

    fn query_action(&self, caller: &Caller, id: &str) -> Result<ActionState, ThingError> {
        self.permitted_action(caller, id)?;
        let (now, now_wall) = (Instant::now(), SystemTime::now());
        let mut thing = self.shared.affordances.lock();
        // A caller that comes back keeps its action alive; a finished one has no lease. One
        // that comes back to this replica keeps alive the action another replica runs.
        if let Err(ActionTableError::HeldElsewhere { .. }) = thing.renew_action(id, now) {
            if let Some(relay) = &self.shared.affordances.relay {
                relay.renew(id);
            }
        }
        let action = thing.lookup_action(id, now).map_err(ThingError::Action)?;
        let status = action.status();
        Ok(ActionState {
            name: action.name().to_owned(),
            status,
            progress: action.progress(),
            output: action.output().cloned(),
            error: action.error().cloned(),
            // The times the action carries (its record's, for one another replica runs).
            requested: action
                .requested_at()
                .unwrap_or_else(|| wall_time(action.started_at(), now, now_wall)),
            ended: status.is_terminal().then(|| {
                action
                    .ended_at()
                    .unwrap_or_else(|| wall_time(action.updated_at(), now, now_wall))
            }),
        })
    }

    fn cancel_action(&self, caller: &Caller, id: &str) -> Result<(), ThingError> {
        self.permitted_action(caller, id)?;
        let affordances = &self.shared.affordances;
        let mut thing = affordances.lock();
        let cancelled = thing
            .cancel_action(id, Instant::now())
            .map(drop)
            .map_err(ThingError::Action);
        affordances.wake(&mut thing);
        cancelled
    }

    fn relay_cancel(&self, id: &str) -> Option<RelayCancelFuture> {
        let relay = self.shared.affordances.relay.clone()?;
        let id = id.to_owned();
        Some(Box::pin(async move {
            relay
                .cancel(&id)
                .await
                .map(drop)
                .map_err(ThingError::Relayed)
        }))
    }

    fn subscribe_event(
        &self,
        caller: &Caller,
        from: IpAddr,
        name: &str,
        last_seen: Option<u64>,
    ) -> Result<Feed, ThingError> {
        if !self.shared.interface.events.contains_key(name) {
            return Err(ThingError::Unknown {
                kind: "event",
                name: name.to_owned(),
            });
        }
        self.permit(caller, name)?;
        let client = ClientKey::of(from);
        feed::open(
            &self.shared.affordances,
            &self.idle,
            caller,
            client,
            |thing, id, now| {
                thing
                    .subscribe_event(id, name, last_seen, now)
                    .map(|_| ())
                    .map_err(|error| ThingError::Subscription {
                        name: name.to_owned(),
                        reason: error.to_string(),
                        status: match error {
                            concord_interact::EventError::NotReady { .. } => 503,
                            _ => 400,
                        },
                    })
            },
        )
    }

    fn observe_property(
        &self,
        caller: &Caller,
        from: IpAddr,
        name: &str,
    ) -> Result<Feed, ThingError> {
        self.property(name)?;
        self.permit(caller, name)?;
        let client = ClientKey::of(from);
        feed::open(
            &self.shared.affordances,
            &self.idle,
            caller,
            client,
            |thing, id, now| {
                thing
                    .observe_property(id, name, now)
                    .map(|_| ())
                    .map_err(|error| ThingError::Subscription {
                        name: name.to_owned(),
                        reason: error.to_string(),
                        status: 400,
                    })
            },
        )
    }

    fn invoke_stream(
        &self,
        caller: &Caller,
        from: IpAddr,
        name: &str,
        input: Value,
        incoming: axum::body::Body,
    ) -> Result<axum::body::Body, ThingError> {
        let backend = self.checked_action(caller, name, &input, &[ActionMode::Stream])?;
        let Backend::Stream(action) = backend else {
            return Err(ThingError::Unknown {
                kind: "action",
                name: name.to_owned(),
            });
        };
        let client = ClientKey::of(from);
        let (registration, stop) = feed::hold(&self.idle, client)?;
        let bounds = crate::interact::body_stream::ExchangeBounds {
            idle: self.shared.limits.stream_idle_timeout,
            registration,
            stop,
        };
        let calls = (Arc::clone(&self.shared.calls), client);
        Ok(crate::interact::body_stream::run(
            action,
            input,
            incoming,
            &self.shared.limits.streams,
            calls,
            bounds,
        ))
    }
}
