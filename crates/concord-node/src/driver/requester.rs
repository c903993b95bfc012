//! The requester's side of a session: the first draft, calls matched to responses by
//! messageId, natural-language questions, and the live verification of the provider's
//! code against the agreed test cases.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use concord_interact::Interface;
use concord_negotiate::{ActionSpec, Decided, Need, Negotiator, TestCases};
use concord_proto::{CloseReason, Side};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use super::work::StepError;
use super::{Cause, Driver, RoleState};
use crate::client::{ConnectionInfo, Known};
use crate::code::ProtocolCode;
use crate::driver::work::Work;
use crate::error::{CallError, ConnectError};
use crate::interact::{Interaction, Sink};
use crate::transport::Transport;

/// A request from a [`Connection`](crate::Connection) to its session.
#[derive(Debug)]
pub(crate) enum Command {
    Call {
        message_id: String,
        input: Value,
        reply: oneshot::Sender<Result<Value, CallError>>,
    },
    Cancel {
        message_id: String,
    },
    Ask {
        text: String,
        reply: oneshot::Sender<Result<String, CallError>>,
    },
    Close {
        reason: String,
    },
    /// An interaction of an interface connection.
    Interact {
        request: Interaction,
        sink: Sink,
    },
    /// A subscription's reader made room.
    Room,
}

/// What a requester calls on the provider.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One action, over a protocol of its own.
    Action(ActionSpec),
    /// Several affordances over one interface protocol: those the requester wants, as the
    /// provider's description states them.
    Interface(Interface),
}

/// What the client hands the requester's driver.
#[derive(Debug)]
pub(crate) struct RequesterParts {
    pub(crate) need: Need,
    /// Our own first candidate, instead of the negotiator's draft.
    pub(crate) candidate: Option<String>,
    /// Our own test cases, instead of the negotiator's draft.
    pub(crate) test_cases: Option<String>,
    pub(crate) target: Target,
    pub(crate) commands: mpsc::Receiver<Command>,
    pub(crate) ready: oneshot::Sender<Result<ConnectionInfo, ConnectError>>,
    pub(crate) closed: watch::Sender<Option<String>>,
    /// The connection facts the client knows; the driver adds the rest.
    pub(crate) known: Known,
}

/// A run of the agreed test cases against the peer's code: which answer is whose (the
/// policy counts them, judges the outcome and holds the deadline).
#[derive(Debug)]
struct VerificationRun {
    cases: TestCases,
    /// messageId → case index, for the requests not answered yet.
    outstanding: HashMap<String, usize>,
}

#[derive(Debug)]
pub(crate) struct RequesterState {
    pub(crate) need: Need,
    candidate: Option<String>,
    test_cases: Option<String>,
    pub(crate) target: Target,
    pub(crate) commands: mpsc::Receiver<Command>,
    ready: Option<oneshot::Sender<Result<ConnectionInfo, ConnectError>>>,
    closed: watch::Sender<Option<String>>,
    known: Known,
    /// Calls sent and not yet answered, by message id.
    pending: HashMap<String, oneshot::Sender<Result<Value, CallError>>>,
    asks: HashMap<String, oneshot::Sender<Result<String, CallError>>>,
    /// Calls made while the session is between ready periods (the peer regenerating).
    waiting: VecDeque<Command>,
    verification: Option<VerificationRun>,
}

impl RequesterState {
    pub(crate) fn new(parts: RequesterParts) -> Self {
        Self {
            need: parts.need,
            candidate: parts.candidate,
            test_cases: parts.test_cases,
            target: parts.target,
            commands: parts.commands,
            ready: Some(parts.ready),
            closed: parts.closed,
            known: parts.known,
            pending: HashMap::new(),
            asks: HashMap::new(),
            waiting: VecDeque::new(),
            verification: None,
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.asks.is_empty() && self.waiting.is_empty()
    }

    /// Takes the pending call `message_id` answers. The empty id
    /// ([`UNATTRIBUTED`](super::provider::UNATTRIBUTED)) answers a request the provider
    /// could not read an id from: it goes to our only pending call; with several pending
    /// it could belong to any (an older one may still be running), so it goes to none and
    /// they keep their own answers or timeouts.
    fn take_pending(
        &mut self,
        message_id: &str,
    ) -> Option<oneshot::Sender<Result<Value, CallError>>> {
        if let Some(reply) = self.pending.remove(message_id) {
            return Some(reply);
        }
        if message_id != super::provider::UNATTRIBUTED {
            return None;
        }
        self.take_only()
    }

    /// Takes our pending call when it is the only one.
    fn take_only(&mut self) -> Option<oneshot::Sender<Result<Value, CallError>>> {
        if self.pending.len() != 1 {
            return None;
        }
        let only = self.pending.keys().next()?.clone();
        self.pending.remove(&only)
    }
}

impl<T: Transport> Driver<T> {
    fn requester(&mut self) -> Option<&mut RequesterState> {
        match &mut self.role {
            RoleState::Requester(state) => Some(state),
            RoleState::Provider(_) => None,
        }
    }

    /// Opens the negotiation with a draft, unless the hello settled the protocol.
    pub(super) fn start_requester(&mut self) {
        if self.settled.is_some() {
            return;
        }
        let RoleState::Requester(state) = &mut self.role else {
            return;
        };
        if let Some(candidate) = state.candidate.take() {
            tracing::info!("proposing our own protocol document");
            if let Err(error) = self.session.propose(Instant::now(), candidate) {
                self.stop = Some(Cause::Local(format!(
                    "cannot propose our document: {error}"
                )));
            }
            return;
        }
        let peer_action = match &state.target {
            Target::Action(action) => action.clone(),
            Target::Interface(interface) => {
                let title = self.peer.clone();
                let candidate =
                    concord_interact::document::write(interface, &title, crate::interface::TIMEOUT);
                tracing::info!("proposing an interface protocol");
                if let Err(error) = self.session.propose(Instant::now(), candidate) {
                    self.stop = Some(Cause::Local(format!(
                        "cannot propose the interface document: {error}"
                    )));
                }
                return;
            }
        };
        let need = state.need.clone();
        let shared = std::sync::Arc::clone(&self.shared);
        self.spawn_step(
            shared.limits.negotiation_timeout,
            "drafting a candidate protocol",
            async move {
                shared
                    .policy
                    .draft(&need, &peer_action)
                    .await
                    .map_err(StepError::Negotiator)
            },
            Work::Drafted,
        );
    }

    /// Our own test cases to propose, if we brought any.
    pub(super) fn own_test_cases(&mut self) -> Option<String> {
        self.requester().and_then(|state| state.test_cases.take())
    }

    pub(super) fn on_drafted(&mut self, result: Result<Decided<String>, StepError>) {
        match result {
            Ok(decided) => {
                if let Err(error) = self.session.propose(Instant::now(), decided.value) {
                    self.stop = Some(Cause::Local(format!("cannot propose the draft: {error}")));
                }
            }
            Err(error) => {
                let reason = format!("we cannot draft a protocol for this action: {error}");
                self.session.close(reason);
            }
        }
    }

    /// Requester: the calls made while the peer regenerated its code go out now.
    pub(super) fn send_waiting(&mut self) {
        let waiting: Vec<Command> = self
            .requester()
            .map(|state| state.waiting.drain(..).collect())
            .unwrap_or_default();
        for command in waiting {
            self.on_command(Some(command));
        }
    }

    /// Tells the caller of `connect` that the connection is ready.
    pub(super) fn report_ready(&mut self) {
        let capabilities = self.session.capabilities();
        let (hash, settlement) = match &self.settled {
            Some(settled) => (settled.hash, settled.how.clone()),
            None => return,
        };
        let verified_cases = self.prep.verified_cases();
        let accounting = self.accounting.clone();
        let code = self.code_info.clone();
        let transcript = self.recorder.as_ref().and_then(|recorder| recorder.id());
        let Some(state) = self.requester() else {
            return;
        };
        let Some(ready) = state.ready.take() else {
            return;
        };
        let known = state.known.clone();
        let info = ConnectionInfo {
            setup_time: known.started.elapsed(),
            peer: known.peer,
            endpoint: known.endpoint,
            action: known.action,
            hash,
            settlement,
            offered_hash: known.offered_hash,
            capabilities,
            verified_cases,
            accounting,
            code,
            transcript,
            peer_did: known.protection.peer_did,
            encrypted: known.protection.encrypted,
            signed_as: known.protection.signed_as,
        };
        tracing::info!(
            %hash,
            settlement = ?info.settlement,
            verified_cases = info.verified_cases,
            llm_calls = info.accounting.llm_calls(),
            "connection ready"
        );
        let _ = ready.send(Ok(info));
    }

    /// Sends the agreed test cases to the peer's code over the verification protocol.
    pub(super) fn start_verification(&mut self) {
        let Some(text) = self.prep.test_cases() else {
            return;
        };
        let cases = match TestCases::parse(text) {
            Ok(cases) => cases,
            Err(error) => {
                self.stop = Some(Cause::Verification(format!(
                    "the agreed test cases cannot be read: {error}"
                )));
                return;
            }
        };
        let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
            return;
        };
        let mut outstanding = HashMap::new();
        let mut frames = Vec::new();
        for (index, case) in cases.cases.iter().enumerate() {
            match code.test_case_request(case) {
                Ok((message_id, bytes)) => {
                    outstanding.insert(message_id, index);
                    frames.push(bytes);
                }
                Err(error) => {
                    self.stop = Some(Cause::Verification(format!("{}: {error}", case.name)));
                    return;
                }
            }
        }
        tracing::info!(
            cases = frames.len(),
            "verifying the peer's code with the agreed test cases"
        );
        let count = frames.len();
        for bytes in frames {
            if let Err(error) = self.session.send_verification(&bytes) {
                self.stop = Some(Cause::Verification(format!(
                    "cannot send a verification request: {error}"
                )));
                return;
            }
        }
        if let Some(state) = self.requester() {
            state.verification = Some(VerificationRun { cases, outstanding });
        }
        self.prep.verification_started(Instant::now(), count);
        self.execute_preparation();
    }

    /// A verification response: which case it answers and how it differs go to the
    /// policy, which settles the run once every case is answered.
    pub(super) fn on_verification_response(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
            return;
        };
        let RoleState::Requester(state) = &mut self.role else {
            return;
        };
        let Some(run) = &mut state.verification else {
            tracing::debug!("a verification response outside a verification run");
            return;
        };
        let (message_id, result) = match code.test_case_response(&run.cases, bytes) {
            Ok(checked) => checked,
            Err(bad) => {
                self.prep
                    .verification_problem(format!("a verification response: {}", bad.reason));
                match bad.message_id {
                    Some(id) => (id, Ok(())),
                    None => return,
                }
            }
        };
        let Some(index) = run.outstanding.remove(&message_id) else {
            self.prep.verification_problem(format!(
                "a verification response answers messageId {message_id:?}, which no pending test case has"
            ));
            return;
        };
        let result = result.map_err(|diff| {
            let name = run
                .cases
                .cases
                .get(index)
                .map_or("a test case", |case| case.name.as_str());
            format!("{name}: {diff}")
        });
        if run.outstanding.is_empty() {
            state.verification = None;
            tracing::info!("the peer answered every agreed test case");
        }
        self.prep.case_answered(now, result);
        self.execute_preparation();
    }

    pub(super) fn on_fix_rejected(&mut self, reason: Option<String>) {
        tracing::info!(
            reason = reason.as_deref().unwrap_or("no reason given"),
            "the peer rejected our error report"
        );
        self.prep.fix_rejected(Instant::now(), reason);
        self.execute_preparation();
    }

    pub(super) fn on_command(&mut self, command: Option<Command>) {
        let Some(command) = command else {
            self.stop = Some(Cause::Local(
                "every handle on the connection was dropped".to_owned(),
            ));
            return;
        };
        match command {
            Command::Call {
                message_id,
                input,
                reply,
            } => {
                if !self.session.is_ready() || self.code.is_none() {
                    if let Some(state) = self.requester() {
                        state.waiting.push_back(Command::Call {
                            message_id,
                            input,
                            reply,
                        });
                    }
                    return;
                }
                let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
                    return;
                };
                let bytes = match code.encode_request(&message_id, &input) {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        let _ = reply.send(Err(CallError::InvalidInput(error.to_string())));
                        return;
                    }
                };
                if let Err(error) = self.session.send_application(&bytes) {
                    let _ = reply.send(Err(super::interact::unsent(&error)));
                    return;
                }
                self.remember_sent(bytes);
                if let Some(state) = self.requester() {
                    state.pending.insert(message_id, reply);
                }
            }
            Command::Cancel { message_id } => {
                if let Some(state) = self.requester() {
                    state.pending.remove(&message_id);
                    state.waiting.retain(|command| {
                        !matches!(command, Command::Call { message_id: id, .. } if *id == message_id)
                    });
                }
            }
            Command::Ask { text, reply } => {
                match self.session.request_natural_language(Instant::now(), text) {
                    Ok(message_id) => {
                        if let Some(state) = self.requester() {
                            state.asks.insert(message_id, reply);
                        }
                    }
                    Err(error) => {
                        let _ = reply.send(Err(CallError::Unsupported(error.to_string())));
                    }
                }
            }
            Command::Close { reason } => {
                // What the layer queued before the close goes out before it (the end
                // flushes the session's frames, then closes).
                let _ = self.pump_interact();
                self.session.close(reason);
            }
            Command::Interact { request, sink } => self.on_interaction(request, sink),
            Command::Room => self.on_room(),
        }
    }

    /// Keeps a command until the session is ready again (the peer regenerating its code).
    pub(super) fn wait_for_ready(&mut self, command: Command) {
        if let Some(state) = self.requester() {
            state.waiting.push_back(command);
        }
    }

    /// A response from the peer: match it to its call by messageId and decode it.
    pub(super) fn on_response(&mut self, bytes: &[u8]) {
        let Some(code) = self.code.as_ref().and_then(ProtocolCode::handler) else {
            return;
        };
        let (message_id, result) = match code.read_response(bytes) {
            Ok(reply) => reply,
            Err(bad) => {
                tracing::warn!(reason = %bad.reason, "a response we cannot read");
                // A response with no readable id answers our only pending call, as a
                // request with no readable id is answered (`take_pending`).
                let reply = self.requester().and_then(|state| match &bad.message_id {
                    Some(message_id) => state.take_pending(message_id),
                    None => state.take_only(),
                });
                if let Some(reply) = reply {
                    let _ = reply.send(Err(CallError::InvalidResponse(bad.reason)));
                }
                if let Some(report) = bad.report {
                    self.report_to_peer(report);
                }
                return;
            }
        };
        match self
            .requester()
            .and_then(|state| state.take_pending(&message_id))
        {
            Some(reply) => {
                let _ = reply.send(result);
            }
            None => tracing::debug!(%message_id, "a response to no pending call (timed out?)"),
        }
    }

    pub(super) fn on_natural_language_response(
        &mut self,
        message_id: &str,
        message: Result<String, ()>,
    ) {
        let timeout = self.shared.limits.negotiation_timeout;
        let Some(reply) = self
            .requester()
            .and_then(|state| state.asks.remove(message_id))
        else {
            return;
        };
        let _ = reply.send(message.map_err(|()| CallError::Timeout(timeout)));
    }

    /// Fails everything still waiting on the session.
    pub(super) fn finish_role(&mut self, cause: &Cause, description: &str) {
        let RoleState::Requester(state) = &mut self.role else {
            return;
        };
        if let Some(ready) = state.ready.take() {
            let _ = ready.send(Err(connect_error(cause, description)));
        }
        for (_, reply) in state.pending.drain() {
            let _ = reply.send(Err(CallError::Closed(description.to_owned())));
        }
        for (_, reply) in state.asks.drain() {
            let _ = reply.send(Err(CallError::Closed(description.to_owned())));
        }
        for command in state.waiting.drain(..) {
            if let Command::Call { reply, .. } = command {
                let _ = reply.send(Err(CallError::Closed(description.to_owned())));
            }
        }
        state.closed.send_replace(Some(description.to_owned()));
    }
}

/// The error `connect` reports for a session that ended before it was ready.
fn connect_error(cause: &Cause, description: &str) -> ConnectError {
    match cause {
        Cause::Session(CloseReason::CodeGenerationFailed { by: Side::Local }) => {
            ConnectError::Local(description.to_owned())
        }
        Cause::Session(reason) => ConnectError::Closed(reason.clone()),
        Cause::PeerClosed { code, reason } => ConnectError::PeerClosed {
            code: *code,
            reason: reason.clone(),
        },
        Cause::TooLarge { .. } | Cause::Transport(_) => {
            ConnectError::Transport(description.to_owned())
        }
        Cause::Binding(reason) => ConnectError::Binding(reason.clone()),
        Cause::Idle(_) | Cause::Unresponsive(_) => ConnectError::Timeout(description.to_owned()),
        Cause::Verification(reason) => ConnectError::Verification(reason.clone()),
        Cause::Shutdown | Cause::Shed { .. } | Cause::Local(_) => {
            ConnectError::Local(description.to_owned())
        }
    }
}
