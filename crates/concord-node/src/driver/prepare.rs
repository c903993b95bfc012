//! Slow work and what comes back of it: negotiator steps (judging candidates and test
//! cases, diagnosing error reports), saving the protocol, and LLM answers, each run as a
//! task whose result comes back as [`Work`] and is fed to the session or the policy.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_negotiate::{
    Decided, JudgeContext, Negotiator, Previous, ProtocolDocument, Step, StepRecord, TestCases,
};
use concord_proto::{AfterSave, Capability, Decision, FixDecision};
use concord_store::NewProtocol;

use super::requester::Target;
use super::work::StepError;
use super::work::Work;
use super::{Driver, RoleState, Settlement, RECENT_MESSAGES};
use crate::code::ProtocolCode;
use crate::language::AnswerError;
use crate::transport::Transport;

/// The peer's candidate as the session reported it (`Event::CandidateReceived`).
pub(super) struct ReceivedCandidate {
    /// The full candidate text.
    pub(super) candidate: String,
    /// The peer's `modificationSummary`.
    pub(super) summary: Option<String>,
    /// Our candidate it answers.
    pub(super) replaces: Option<String>,
}

impl ReceivedCandidate {
    /// What the candidate answers, for the judge.
    fn previous(&self) -> Previous<'_> {
        Previous {
            our_candidate: self.replaces.as_deref(),
            modification_summary: self.summary.as_deref(),
        }
    }
}

impl<T: Transport> Driver<T> {
    pub(super) fn on_work(&mut self, work: Work) {
        if let Some(record) = work.record() {
            self.accounting.record(record.clone());
        }
        let now = Instant::now();
        match work {
            Work::Drafted(result) => self.on_drafted(result),
            Work::Judged(result) => {
                let decision = result
                    .map(|d| d.value)
                    .unwrap_or_else(|error| Decision::Reject {
                        reason: format!("we could not judge the candidate: {error}"),
                    });
                if let Err(error) = self.session.decide(now, decision) {
                    tracing::debug!(%error, "cannot answer the candidate");
                }
            }
            Work::TestCasesDrafted(result) => match result {
                Ok(decided) => self.send_test_cases(now, decided.value),
                Err(error) => {
                    tracing::warn!(%error, "cannot draft test cases; going on without them");
                    self.prep.test_cases_dropped(now);
                    self.execute_preparation();
                }
            },
            Work::TestCasesJudged(result) => {
                let decision = result
                    .map(|d| d.value)
                    .unwrap_or_else(|error| Decision::Reject {
                        reason: format!("we could not judge the test cases: {error}"),
                    });
                if let Err(error) = self.session.decide_test_cases(now, decision) {
                    tracing::debug!(%error, "cannot answer the test cases");
                }
            }
            Work::Diagnosed(result) => {
                let decision =
                    result
                        .map(|d| d.value)
                        .unwrap_or_else(|error| FixDecision::Reject {
                            reason: format!("we could not diagnose the report: {error}"),
                        });
                let accept = decision == FixDecision::Accept;
                match self.session.decide_error_report(now, decision) {
                    Ok(()) if accept => {
                        tracing::info!("accepted the peer's error report");
                        self.prep.error_report_accepted(now);
                        self.execute_preparation();
                    }
                    Ok(()) => {}
                    Err(error) => tracing::debug!(%error, "cannot answer the error report"),
                }
            }
            Work::CodeGenerated { generation, result } => {
                if self
                    .generating
                    .as_ref()
                    .is_some_and(|(running, _)| *running == generation)
                {
                    self.generating = None;
                }
                match result {
                    Ok(generated) => {
                        let (code, info) = *generated;
                        // A generation the policy gave up on (timed out) is dropped.
                        if self.prep.code_generated(now, generation) {
                            tracing::info!(origin = %info.origin, cases = info.cases_run, llm_calls = info.llm_calls, "our code is generated");
                            self.code_info.push(info);
                            self.fresh = Some(code);
                        }
                    }
                    Err(error) => self.prep.code_failed(now, generation, error.to_string()),
                }
                self.execute_preparation();
            }
            Work::Saved { then } => match then {
                AfterSave::Announce => {
                    self.prep.saved();
                    self.execute_preparation();
                }
                AfterSave::ReportReady => self.report_ready(),
                AfterSave::Nothing => {}
            },
            Work::ActionDone { message_id, result } => self.on_action_done(message_id, result),
            Work::Interacted {
                request,
                name,
                result,
            } => self.on_interacted(request, &name, result),
            Work::StreamDone { id, result } => self.on_stream_done(id, result),
            Work::Relayed { request, result } => self.on_relayed(request, *result),
            Work::Answered { message_id, answer } => {
                if let RoleState::Provider(state) = &mut self.role {
                    state.in_flight = state.in_flight.saturating_sub(1);
                }
                let text = answer.unwrap_or_else(|error| {
                    tracing::warn!(%error, "the LLM could not answer");
                    format!("(no answer: this agent's LLM failed: {error})")
                });
                let result = match message_id {
                    Some(id) => self.session.respond_natural_language(&id, text),
                    None => self.session.send_natural_language(&text),
                };
                if let Err(error) = result {
                    tracing::debug!(%error, "cannot send the natural-language answer");
                }
            }
        }
    }

    /// Saves the protocol with our handler, then continues with `then`.
    pub(super) fn save(&mut self, then: AfterSave) {
        let (Some(settled), Some(text), Some(code)) = (
            self.settled.as_ref(),
            self.protocol_text(),
            self.fresh.as_ref().or(self.code.as_ref()),
        ) else {
            return self.continue_after_save(then);
        };
        let text = text.to_owned();
        let role = self.session.role();
        let peer = self.peer.clone();
        let address = self.peer_address();
        let per_peer = self.shared.limits.protocol_max_per_peer;
        let mut protocol = match &settled.how {
            Settlement::Resumed => {
                // Already stored: note the use, and that this peer (and its address) holds
                // it, within their shares of the store.
                let hash = settled.hash;
                self.background_store(move |protocols| {
                    protocols.touch_protocol(&hash, &peer)?;
                    hold_within_shares(protocols, &hash, &peer, address.as_deref(), per_peer)
                });
                return self.continue_after_save(then);
            }
            Settlement::Consensus { uri } => NewProtocol::consensus(uri.clone(), text, peer),
            Settlement::Negotiated => NewProtocol::negotiated(text, peer),
        }
        .with_handler(role, code.source().to_owned());
        // The requester records the action it calls: a new peer serving that action is
        // offered this protocol for 0-RTT (`Store::latest_resumable`).
        if let RoleState::Requester(state) = &self.role {
            protocol = protocol.with_action(state.need.action.clone());
        }
        if let Some(cases) = self.prep.test_cases() {
            protocol = protocol.with_test_cases(cases.to_owned());
        }
        let store = self.shared.store.clone();
        let work = self.work_tx.clone();
        tokio::spawn(async move {
            // Saved within the peer's share of the store, before it is told our code is
            // ready: one peer filling the store evicts its own protocols, not others'.
            let save = move |state: &crate::state::Backends| {
                let protocols = &*state.protocols;
                let hash = protocols.save_protocol(&protocol)?;
                hold_within_shares(
                    protocols,
                    &hash,
                    &protocol.peer,
                    address.as_deref(),
                    per_peer,
                )
            };
            if let Err(error) = store.run_state(save).await {
                tracing::warn!(%error, "cannot save the protocol; it will be negotiated again next time");
            }
            let _ = work.send(Box::new(Work::Saved { then }));
        });
    }

    /// Provider: the client address of a caller who proved a DID (`ClientKey::label`),
    /// under which its protocols are kept too: DIDs cost nothing to mint, so an address
    /// holds at most its share whatever DIDs it signs with. `None` for an anonymous caller
    /// (its peer is that address already) and for a requester.
    fn peer_address(&self) -> Option<String> {
        match &self.role {
            RoleState::Provider(state) => {
                Some(state.client.label()).filter(|address| *address != self.peer)
            }
            RoleState::Requester(_) => None,
        }
    }

    pub(super) fn continue_after_save(&mut self, then: AfterSave) {
        let _ = self.work_tx.send(Box::new(Work::Saved { then }));
    }

    /// Runs an operation on the protocols backend in the background, logging a failure.
    pub(super) fn background_store<R: Send + 'static>(
        &self,
        operation: impl FnOnce(&dyn concord_store::ProtocolBook) -> Result<R, concord_store::StoreError>
            + Send
            + 'static,
    ) {
        let store = self.shared.store.clone();
        tokio::spawn(async move {
            if let Err(error) = store.run_state(|state| operation(&*state.protocols)).await {
                tracing::warn!(%error, "store operation failed");
            }
        });
    }

    /// Spawns `step` bounded by `limit`, sending its result back as `wrap(result)`.
    pub(super) fn spawn_step<R, F>(
        &self,
        limit: Duration,
        what: &'static str,
        step: F,
        wrap: fn(Result<R, StepError>) -> Work,
    ) where
        R: Send + 'static,
        F: Future<Output = Result<R, StepError>> + Send + 'static,
    {
        let work = self.work_tx.clone();
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            // Waiting for a turn counts against the step's deadline.
            let step = async move {
                let _turn = shared.enter_work().await;
                step.await
            };
            // A session that ended takes its step (and the step's turn) with it.
            let result = tokio::select! {
                result = tokio::time::timeout(limit, step) => match result {
                    Ok(result) => result,
                    Err(_) => Err(StepError::TimedOut { what, limit }),
                },
                () = work.closed() => return,
            };
            let _ = work.send(Box::new(wrap(result)));
        });
    }

    /// Judges the peer's candidate.
    pub(super) fn spawn_judge(&mut self, received: ReceivedCandidate) {
        if crate::interface::is_interface(&received.candidate) {
            return self.judge_interface(&received.candidate);
        }
        let shared = Arc::clone(&self.shared);
        let limit = shared.limits.negotiation_timeout;
        match &self.role {
            RoleState::Provider(state) => {
                // The judge sees only the actions this caller may call: a candidate for
                // any other is one no action of ours serves.
                let permitted: Vec<_> = shared
                    .actions
                    .specs()
                    .iter()
                    .filter(|spec| shared.identity.permits(&state.caller, &spec.name))
                    .cloned()
                    .collect();
                self.spawn_step(
                    limit,
                    "judging the candidate",
                    async move {
                        let context = JudgeContext::Provider {
                            actions: &permitted,
                        };
                        shared
                            .policy
                            .judge(context, &received.candidate, received.previous())
                            .await
                            .map_err(StepError::Negotiator)
                    },
                    Work::Judged,
                );
            }
            RoleState::Requester(state) => {
                let Target::Action(peer_action) = &state.target else {
                    let reason =
                        "the provider answered our interface document with a one-action protocol"
                            .to_owned();
                    let _ = self
                        .session
                        .decide(Instant::now(), Decision::Reject { reason });
                    return;
                };
                let (need, peer_action) = (state.need.clone(), peer_action.clone());
                self.spawn_step(
                    limit,
                    "judging the counter-proposal",
                    async move {
                        let context = JudgeContext::Requester {
                            need: &need,
                            peer_action: &peer_action,
                        };
                        shared
                            .policy
                            .judge(context, &received.candidate, received.previous())
                            .await
                            .map_err(StepError::Negotiator)
                    },
                    Work::Judged,
                );
            }
        }
    }

    /// Judges an interface document (no LLM: the rules are exact). The provider offers
    /// what this caller may use: every property and event, and the actions it may call.
    fn judge_interface(&mut self, candidate: &str) {
        let decision = match &self.role {
            RoleState::Provider(state) => {
                let mut ours = self.shared.interface.clone();
                ours.actions
                    .retain(|name, _| self.shared.identity.permits(&state.caller, name));
                let streams = &self.shared.limits.streams;
                crate::interface::judge(candidate, &ours, &self.shared.persona.title, streams)
            }
            RoleState::Requester(state) => match &state.target {
                Target::Interface(wanted) => {
                    crate::interface::judge_counter(candidate, wanted, &self.shared.limits.streams)
                }
                Target::Action(_) => Decision::Reject {
                    reason: "we asked for one action, not an interface".to_owned(),
                },
            },
        };
        self.accounting
            .record(StepRecord::deterministic(Step::Judge, Duration::ZERO));
        if let Err(error) = self.session.decide(Instant::now(), decision) {
            tracing::debug!(%error, "cannot answer the candidate");
        }
    }

    pub(super) fn document(&self) -> Result<ProtocolDocument, StepError> {
        let text = self.protocol_text().ok_or(StepError::NoProtocol)?;
        ProtocolDocument::parse_within(text, &self.shared.limits.schema)
            .map_err(StepError::Protocol)
    }

    pub(super) fn spawn_judge_test_cases(&mut self, test_cases: String) {
        let shared = Arc::clone(&self.shared);
        let document = self.document();
        self.spawn_step(
            shared.limits.negotiation_timeout,
            "judging test cases",
            async move {
                shared
                    .policy
                    .judge_test_cases(&document?, &test_cases)
                    .await
                    .map_err(StepError::Negotiator)
            },
            Work::TestCasesJudged,
        );
    }

    /// Diagnoses the peer's error report: when test cases are agreed, we run them on our
    /// code and accept if it fails them; otherwise the negotiator judges our recent
    /// messages.
    pub(super) fn spawn_diagnose(&mut self, error_description: String) {
        tracing::info!(report = %error_description, "the peer reports an error in our messages");
        let shared = Arc::clone(&self.shared);
        let document = self.document();
        let cases = self
            .prep
            .test_cases()
            .and_then(|cases| TestCases::parse(cases).ok());
        let handler = self.code.as_ref().and_then(ProtocolCode::handler);
        let check = handler.and_then(|code| code.case_check().ok());
        let sent: Vec<Vec<u8>> = self.sent.iter().cloned().collect();
        let ours = handler
            .map(|code| code.decode_sent(&sent))
            .unwrap_or_default();
        self.spawn_step(shared.limits.negotiation_timeout, "diagnosing the error report", async move {
            if let (Some(cases), Some(check)) = (cases, check) {
                let failing = tokio::task::spawn_blocking(move || check.run(&cases))
                    .await
                    .map_err(StepError::CaseRun)?;
                if let Some(report) = failing {
                    tracing::info!(%report, "our code fails the agreed test cases: the report is right");
                    return Ok(Decided {
                        value: FixDecision::Accept,
                        record: StepRecord::deterministic(Step::Diagnose, Duration::ZERO),
                    });
                }
            }
            shared
                .policy
                .diagnose(&document?, &error_description, &ours)
                .await
                .map_err(StepError::Negotiator)
        }, Work::Diagnosed);
    }

    pub(super) fn spawn_answer(&mut self, message_id: Option<String>, text: String) {
        let Some(client) = self.shared.llm().cloned() else {
            return;
        };
        // LLM answers count as calls in flight: a peer cannot queue up unbounded LLM work.
        if let RoleState::Provider(state) = &mut self.role {
            state.in_flight += 1;
        }
        let shared = Arc::clone(&self.shared);
        let peer = self.peer.clone();
        let work = self.work_tx.clone();
        let limit = shared.limits.negotiation_timeout;
        tokio::spawn(async move {
            // An answer is LLM work like a negotiation step: it waits for a turn, within
            // its deadline, and ends with its session.
            let answer = async {
                let _turn = shared.enter_work().await;
                crate::language::answer(
                    &client,
                    &shared.persona,
                    &shared.actions.specs(),
                    &peer,
                    &text,
                )
                .await
            };
            let answer = tokio::select! {
                answer = tokio::time::timeout(limit, answer) => match answer {
                    Ok(answer) => answer,
                    Err(_) => Err(AnswerError::TimedOut(limit)),
                },
                () = work.closed() => return,
            };
            let _ = work.send(Box::new(Work::Answered { message_id, answer }));
        });
    }

    /// Remembers a message we sent, for diagnosing the peer's error reports.
    pub(super) fn remember_sent(&mut self, message: Vec<u8>) {
        if self.sent.len() == RECENT_MESSAGES {
            self.sent.pop_front();
        }
        self.sent.push_back(message);
    }

    /// Tells the peer its message is wrong (once at a time, when fix-error was negotiated).
    pub(super) fn report_to_peer(&mut self, description: String) {
        if self.reported
            || !self
                .session
                .capabilities()
                .contains(Capability::FixErrorNegotiation)
        {
            return;
        }
        match self.session.report_error(Instant::now(), description) {
            Ok(()) => self.reported = true,
            Err(error) => tracing::debug!(%error, "cannot report the error"),
        }
    }
}

/// Records that `address` (when the peer proved a DID, see `Driver::peer_address`) holds
/// the protocol `hash` too, then keeps `peer` and `address` within their shares of the
/// store (`Limits::protocol_max_per_peer`): the address last, so that the protocols beyond
/// its share go even when the DIDs it minted still name them.
fn hold_within_shares(
    store: &dyn concord_store::ProtocolBook,
    hash: &concord_proto::ProtocolHash,
    peer: &str,
    address: Option<&str>,
    per_peer: u64,
) -> Result<(), concord_store::StoreError> {
    if let Some(address) = address {
        store.add_protocol_peer(hash, address)?;
    }
    store.cap_peer_protocols(peer, per_peer)?;
    if let Some(address) = address {
        store.cap_address_protocols(address, per_peer)?;
    }
    Ok(())
}
