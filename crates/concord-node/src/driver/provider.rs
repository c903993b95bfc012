//! The provider's side of a session: requests go to the registered action, verification
//! requests to the agreed test cases.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use concord_identity::Caller;
use futures_util::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use super::{Driver, RoleState};
use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::budget::CallKind;
use crate::code::LocalSide;
use crate::code::ProtocolCode;
use crate::driver::work::Work;
use crate::interact::Backend;
use crate::transport::Transport;

/// The message id of the error response to a request whose own id cannot be read (not a
/// message of the protocol's encoding, or one whose id field is missing): the empty id.
/// Our requester gives such a response to its pending call when it has only one.
pub(crate) const UNATTRIBUTED: &str = "";

/// The error a caller gets when the action panicked.
fn panicked(_: Box<dyn Any + Send>) -> Result<Value, ActionError> {
    Err(ActionError::internal("the action panicked"))
}

/// The answer to a call of a stream action over a one-action protocol.
fn not_plain(action: &str) -> ActionError {
    ActionError::new(
        405,
        format!("action `{action}` is a stream: call it over an interface protocol"),
    )
}

/// Calls `backend` plainly, its answer awaited (a panic while starting it or running it is
/// a 500; a stream action is refused): what a one-action protocol's waiting call and a
/// binding's invocation ([`ThingAccess::invoke`](crate::binding::ThingAccess::invoke)) run.
pub(crate) async fn run_plain(
    backend: &Backend,
    action: &str,
    input: Value,
) -> Result<Value, ActionError> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| backend.call_plain(input))) {
        Ok(Some(future)) => AssertUnwindSafe(future)
            .catch_unwind()
            .await
            .unwrap_or_else(panicked),
        Ok(None) => Err(not_plain(action)),
        Err(panic) => panicked(panic),
    }
}

/// What only a provider session tracks.
#[derive(Debug)]
pub(crate) struct ProviderState {
    /// Action calls and LLM answers running now.
    pub(crate) in_flight: usize,
    /// Who is calling: what it may call is checked on every request.
    pub(crate) caller: Caller,
    /// The client address its action calls count against (`Limits::max_backend_calls_per_address`).
    pub(crate) client: ClientKey,
}

impl ProviderState {
    pub(crate) fn new(caller: Caller, client: ClientKey) -> Self {
        Self {
            in_flight: 0,
            caller,
            client,
        }
    }
}

impl<T: Transport> Driver<T> {
    /// What our handler maps the protocol to: our actions (the code picks the one the
    /// protocol calls), or, on the requester, our need.
    pub(super) fn local_side(&self) -> LocalSide {
        match &self.role {
            RoleState::Provider(_) => LocalSide::Provider,
            RoleState::Requester(state) => LocalSide::Requester(state.need.clone()),
        }
    }

    /// A request from the peer: decode it with our handler and run the action.
    pub(super) fn on_request(&mut self, bytes: &[u8]) {
        let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
            tracing::warn!("a request arrived before our code was in force");
            return;
        };
        let request = match code.read_request(bytes) {
            Ok(request) => request,
            Err(bad) => {
                tracing::info!(reason = %bad.reason, "a request we cannot serve");
                // Every request is answered: one whose id cannot be read gets its error
                // under the empty id, which a requester with one call pending gives it
                // (see `UNATTRIBUTED`).
                let message_id = bad.message_id.as_deref().unwrap_or(UNATTRIBUTED);
                self.respond(
                    message_id,
                    Err(ActionError::bad_request(bad.reason.clone())),
                );
                if let Some(report) = bad.report {
                    self.report_to_peer(report);
                }
                return;
            }
        };
        if let RoleState::Provider(state) = &self.role {
            if !self.shared.identity.permits(&state.caller, code.action()) {
                tracing::info!(
                    action = code.action(),
                    "a caller not allowed to call this action"
                );
                let error = ActionError::new(
                    403,
                    format!("you are not allowed to call `{}`", code.action()),
                );
                self.respond(&request.message_id, Err(error));
                return;
            }
        }
        // The action's own schema, whatever the agreed protocol let through: refused as
        // every other mode refuses it.
        if let Err(reason) = code.check_input(&request.input) {
            tracing::info!(%reason, "a request whose input the action's schema refuses");
            self.respond(
                &request.message_id,
                Err(ActionError::bad_request(reason.to_string())),
            );
            return;
        }
        let Some(backend) = self.shared.actions.mode_backend(code.action()) else {
            let error = ActionError::not_found(format!(
                "action `{}` is not served here any more",
                code.action()
            ));
            self.respond(&request.message_id, Err(error));
            return;
        };
        let RoleState::Provider(state) = &self.role else {
            return;
        };
        let client = state.client;
        if matches!(backend, Backend::Stream(_)) {
            return self.respond(&request.message_id, Err(not_plain(code.action())));
        }
        // What the backend logs is in an `action` span naming the action.
        let span = tracing::info_span!("action", name = code.action());
        let action = code.action().to_owned();
        let message_id = request.message_id;
        // A progress action runs as long as it likes, even called plainly.
        let kind = if matches!(backend, Backend::Progress(_)) {
            CallKind::Long
        } else {
            CallKind::Brief
        };
        let Some(permit) = self.shared.calls.try_enter(client, kind) else {
            // No slot free now: the call waits for one in a task of its own
            // (`Limits::backend_call_wait`), then runs or is refused (429 / 503).
            let budget = Arc::clone(&self.shared.calls);
            let call = async move {
                let _permit = budget.enter(client, kind).await?;
                run_plain(&backend, &action, request.input).await
            };
            return self.spawn_call(message_id, call.instrument(span));
        };
        // An action that answers at once (from memory) is answered here; anything else
        // runs as a task and its result comes back as work. A panic is a 500, either way.
        let started = span.in_scope(|| {
            std::panic::catch_unwind(AssertUnwindSafe(|| backend.call_plain(request.input)))
        });
        let mut call = match started {
            Ok(Some(future)) => AssertUnwindSafe(future).catch_unwind().instrument(span),
            Ok(None) => return self.respond(&message_id, Err(not_plain(&action))),
            Err(panic) => return self.respond(&message_id, panicked(panic)),
        };
        if let Some(result) = (&mut call).now_or_never() {
            drop(permit);
            self.respond(&message_id, result.unwrap_or_else(panicked));
            return;
        }
        self.spawn_call(message_id, async move {
            let result = call.await.unwrap_or_else(panicked);
            drop(permit);
            result
        });
    }

    /// Runs `call` as a task (counted in flight); its result comes back as work.
    fn spawn_call(
        &mut self,
        message_id: String,
        call: impl Future<Output = Result<Value, ActionError>> + Send + 'static,
    ) {
        if let RoleState::Provider(state) = &mut self.role {
            state.in_flight += 1;
        }
        let work = self.work_tx.clone();
        tokio::spawn(async move {
            let result = AssertUnwindSafe(call)
                .catch_unwind()
                .await
                .unwrap_or_else(panicked);
            let _ = work.send(Box::new(Work::ActionDone { message_id, result }));
        });
    }

    pub(super) fn on_action_done(
        &mut self,
        message_id: String,
        result: Result<Value, ActionError>,
    ) {
        if let RoleState::Provider(state) = &mut self.role {
            state.in_flight = state.in_flight.saturating_sub(1);
        }
        if let Err(error) = &result {
            tracing::info!(%message_id, %error, "the action failed");
        }
        self.respond(&message_id, result);
    }

    /// Encodes and sends the response to `message_id`. An action output that breaks the
    /// protocol becomes an error response naming the problem; an error our handler cannot
    /// encode (a schema that refuses the empty id, say) is written in the protocol's
    /// envelope without it, so the requester is answered whatever happens.
    fn respond(&mut self, message_id: &str, result: Result<Value, ActionError>) {
        let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
            return;
        };
        let fallback = match &result {
            Err(error) => Some(error.clone()),
            Ok(_) => None,
        };
        let encoded = code.write_response(message_id, result).or_else(|problem| {
            tracing::warn!(%problem, "the action's output breaks the protocol");
            code.write_response(
                message_id,
                Err(ActionError::internal(format!(
                    "the action's output breaks the protocol: {problem}"
                ))),
            )
            .map_err(|again| Box::new((problem, again)))
        });
        let bytes = match encoded {
            Ok(bytes) => bytes,
            Err(failures) => {
                let (problem, again) = *failures;
                tracing::warn!(%again, "our handler cannot encode even an error response");
                let error = fallback.unwrap_or_else(|| {
                    ActionError::internal(format!(
                        "the action's output breaks the protocol: {problem}"
                    ))
                });
                code.fallback_error(message_id, error.code, &error.message)
            }
        };
        if let Err(error) = self.session.send_application(&bytes) {
            tracing::warn!(%error, "cannot send the response");
        }
        self.remember_sent(bytes);
    }

    /// A verification request: answer it with our real handler code and the agreed test
    /// case's response standing in for the action.
    pub(super) fn on_verification_request(&mut self, bytes: &[u8]) {
        let Some(cases) = self.prep.test_cases() else {
            self.report_to_peer(
                "a verification message arrived but no test cases are agreed".to_owned(),
            );
            return;
        };
        let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
            return;
        };
        match code.answer_test_case(cases, bytes) {
            Ok(bytes) => {
                if let Err(error) = self.session.send_verification(&bytes) {
                    tracing::warn!(%error, "cannot send the verification response");
                }
                self.remember_sent(bytes);
            }
            Err(bad) => {
                tracing::info!(reason = %bad.reason, "a verification request we cannot answer");
                // Answer anyway, so the requester sees the failure and can report it.
                if let Some(message_id) = &bad.message_id {
                    let reason = format!("our handler failed: {}", bad.reason);
                    let bytes = code.fallback_error(message_id, 500, &reason);
                    if let Err(error) = self.session.send_verification(&bytes) {
                        tracing::warn!(%error, "cannot send the verification response");
                    }
                }
                if let Some(report) = bad.report {
                    self.report_to_peer(report);
                }
            }
        }
    }
}
