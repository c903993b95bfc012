//! The meta-protocol WebSocket binding: `/concord`, where each session says its hello,
//! negotiates (or resumes) a protocol and calls; and forms on it for every affordance of
//! the description. The upgrade is admitted here (sessions in all and per address, the
//! budget of WebSockets waiting for their hello, the caller's credentials), the session
//! itself runs in `session.rs`.

mod session;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use concord_describe::{Form, OneOrMany, Operation};
use concord_identity::Identity;
use concord_interact::ActionMode;
use tokio::sync::{watch, Semaphore};
use tracing::Instrument;

use crate::admission::accept::{self, Ticket};
use crate::admission::{Admission, ClientKey, RefusalLog};
use crate::binding::{self, Affordance, Binding, Site};
use crate::identity::secure;
use crate::identity::{upgrade, Encryption};
use crate::node::Shared;
use crate::resume_cache::ResumeCache;
use crate::shed::IdleSessions;
use crate::transport;

use session::{open_connection, run_session, Admitted, Opening};

/// Path of the meta-protocol WebSocket.
pub(crate) const ENDPOINT_PATH: &str = "/concord";

/// `http://host:port/` → `ws://host:port/concord` (`https` → `wss`).
pub(crate) fn websocket_url(base_url: &str) -> String {
    binding::websocket_url(base_url, ENDPOINT_PATH)
}

/// The meta-protocol WebSocket as a [`Binding`].
pub(crate) struct MetaProtocol {
    state: Arc<ServerState>,
}

impl MetaProtocol {
    pub(crate) fn new(state: ServerState) -> Self {
        Self {
            state: Arc::new(state),
        }
    }
}

impl Binding for MetaProtocol {
    fn name(&self) -> &str {
        "meta-protocol WebSocket"
    }

    fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form> {
        forms(&site.websocket_url(ENDPOINT_PATH), affordance)
    }

    fn routes(&self, _site: &Site) -> Router {
        Router::new()
            .route(ENDPOINT_PATH, get(accept_session))
            .with_state(Arc::clone(&self.state))
    }
}

/// The forms on the WebSocket `endpoint` for the operations `affordance` allows:
///
/// - a property: `readproperty`, `writeproperty` when writable, `observeproperty` and
///   `unobserveproperty` when observable;
/// - an action: `invokeaction`; a progress action also `queryaction`/`cancelaction`;
/// - an event: `subscribeevent`, then `unsubscribeevent`.
pub(crate) fn forms(endpoint: &str, affordance: Affordance<'_>) -> Vec<Form> {
    let mut forms = Vec::new();
    match affordance {
        Affordance::Property { property, .. } => {
            forms.push(form(endpoint, &[Operation::ReadProperty]));
            if property.writable {
                forms.push(form(endpoint, &[Operation::WriteProperty]));
            }
            if property.observable {
                forms.push(form(
                    endpoint,
                    &[Operation::ObserveProperty, Operation::UnobserveProperty],
                ));
            }
        }
        Affordance::Action { action, .. } => {
            forms.push(form(endpoint, &[Operation::InvokeAction]));
            if action.mode == ActionMode::Progress {
                forms.push(form(
                    endpoint,
                    &[Operation::QueryAction, Operation::CancelAction],
                ));
            }
        }
        Affordance::Event { .. } => {
            forms.push(form(endpoint, &[Operation::SubscribeEvent]));
            forms.push(form(endpoint, &[Operation::UnsubscribeEvent]));
        }
    }
    forms
}

/// A form on `endpoint` for `operations`.
fn form(endpoint: &str, operations: &[Operation]) -> Form {
    let mut form = Form::new(endpoint);
    form.op = Some(match operations {
        [one] => OneOrMany::One(*one),
        many => OneOrMany::Many(many.to_vec()),
    });
    form
}

/// What the WebSocket's sessions share with the server: the node, the session slots and
/// admission (the server counts and drains them), the server's stop and close signals.
pub(crate) struct ServerState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) sessions: Arc<Semaphore>,
    pub(crate) admission: Arc<Admission>,
    pub(crate) log: Arc<RefusalLog>,
    /// Established sessions that may give their slot to a newcomer when the node is full.
    pub(crate) idle: Arc<IdleSessions>,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) close: watch::Receiver<bool>,
    /// Our endpoint as the description names it: what callers sign.
    pub(crate) endpoint: upgrade::Endpoint,
    /// Our DID, when the node has an identity.
    pub(crate) did: Option<Arc<Identity>>,
    /// The protocols resumed lately (`Limits::resume_cache_ttl`): a repeat 0-RTT hello is
    /// answered without a trip to the store.
    pub(crate) resumes: std::sync::Mutex<ResumeCache<session::Stored>>,
}

impl ServerState {
    /// The protocols resumed lately.
    pub(crate) fn resumes(&self) -> std::sync::MutexGuard<'_, ResumeCache<session::Stored>> {
        self.resumes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The established sessions are all taken: 503, try again in a second.
fn sessions_full(limit: usize) -> String {
    format!("this node serves at most {limit} sessions at once; try again later")
}

async fn accept_session(
    State(state): State<Arc<ServerState>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    Extension(ticket): Extension<Ticket>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if *state.stop.borrow() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the node is shutting down").into_response();
    }
    let limits = &state.shared.limits;
    if state.sessions.available_permits() == 0
        && !state.idle.can_shed_for(
            ClientKey::of(remote.ip()),
            limits.idle_shed_after,
            Instant::now(),
        )
    {
        let reason = sessions_full(state.shared.limits.max_sessions);
        state.log.refused("max_sessions", remote, &reason);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            format!("{reason}\n"),
        )
            .into_response();
    }
    let slot = match state.admission.session(ticket.key()) {
        Ok(slot) => slot,
        Err(refusal) => {
            state
                .log
                .refused(refusal.name(), remote, &refusal.to_string());
            return accept::refusal_response(&refusal);
        }
    };
    // Who is calling, before any WebSocket exists: nothing runs for a caller whose
    // credentials fail or who may call nothing here.
    let identity = &state.shared.identity;
    let limit = identity.security.max_authentications_per_address;
    let Some(authenticating) = identity.authenticating.enter(ticket.key(), limit) else {
        let refusal = upgrade::Refusal::too_many_authentications(limit);
        state.log.refused("authentication", remote, &refusal.log);
        return refusal.into_response();
    };
    let caller =
        match upgrade::authenticate(identity, &state.endpoint, ticket.key(), &headers).await {
            Ok(caller) => caller,
            Err(refusal) => {
                state.log.refused("authentication", remote, &refusal.log);
                return refusal.into_response();
            }
        };
    drop(authenticating);
    let actions = state.shared.actions.names();
    if !identity.permits_any(&caller, actions) {
        let refusal = upgrade::Refusal::forbidden(state.endpoint.realm(), &caller);
        state.log.refused("authorization", remote, &refusal.log);
        return refusal.into_response();
    }
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim() == concord_secure::SUBPROTOCOL);
    let noise = offered && state.did.is_some() && identity.speaks_noise();
    if !noise && identity.security.encryption == Encryption::Required {
        let refusal = upgrade::Refusal::encryption_required();
        state.log.refused("encryption", remote, &refusal.log);
        return refusal.into_response();
    }
    let pending = match state.admission.pending_hello(ticket.key()) {
        Ok(pending) => pending,
        Err(refusal) => {
            state
                .log
                .refused(refusal.name(), remote, &refusal.to_string());
            return accept::refusal_response(&refusal);
        }
    };
    let limit = state.shared.limits.max_frame_size;
    let (upgrade, limit) = if noise {
        (
            upgrade.protocols([concord_secure::SUBPROTOCOL]),
            secure::sealed_size(limit),
        )
    } else {
        (upgrade, limit)
    };
    upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .read_buffer_size(transport::READ_BUFFER_SIZE)
        .on_upgrade(move |socket| {
            let admitted = Admitted {
                _ticket: ticket,
                _slot: slot,
            };
            let opening = Opening {
                caller,
                noise,
                pending,
            };
            let span = tracing::info_span!("connection", %remote);
            let opening = open_connection(socket, state, remote, opening).instrument(span.clone());
            run_session(Box::pin(opening), admitted).instrument(span)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_follows_the_base_url() {
        assert_eq!(
            websocket_url("http://127.0.0.1:8080/"),
            "ws://127.0.0.1:8080/concord"
        );
        assert_eq!(
            websocket_url("https://agent.example.com"),
            "wss://agent.example.com/concord"
        );
    }
}
