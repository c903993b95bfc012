//! The sans-IO session state machine: both roles, the whole meta-protocol flow (see
//! [`Session`] for the driving loop).

mod config;
mod error;
mod event;
mod ids;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use bytes::Bytes;

pub use config::{Role, SessionConfig};
pub use error::{Phase, ProtocolViolation, SessionError};
pub use event::{CloseReason, Decision, EstablishedProtocol, Event, FixDecision, Side, Wait};

use crate::frame::{Frame, ProtocolType};
use crate::handshake::{Agreement, ProtocolChoice};
use crate::hash::ProtocolHash;
use crate::hello::{Capabilities, Capability, MetaVersion};
use crate::meta::{
    CodeGeneration, CodeGenerationStatus, FixErrorNegotiation, MetaMessage, NaturalLanguageKind,
    NaturalLanguageNegotiation, NegotiationStatus, ProtocolNegotiation, TestCasesNegotiation,
};
use ids::MessageIds;

/// One meta-protocol session between two agents, after the hello exchange: both roles,
/// the whole meta-protocol flow.
///
/// A session never reads a clock, a socket or an RNG. The driver feeds it
/// received frames ([`Session::handle_frame`]) and expired deadlines
/// ([`Session::handle_timeout`]), passes the application's decisions in
/// ([`Session::decide`], [`Session::code_ready`], …), and drains what it produced:
/// frames to send ([`Session::poll_transmit`]), events ([`Session::poll_event`]) and
/// the next deadline ([`Session::poll_timeout`]). Work that needs an LLM or other slow
/// computation leaves as an event and comes back as a call; the machine never blocks.
///
/// ```text
///  Negotiating ──accepted──▶ Preparing ──both `generated`, no test-case talk in flight──▶ Ready
///       │                     ▲     │                                                    │
///       │ rejected, cap,      │     └─ testCasesNegotiation, fixErrorNegotiation ◀───────┘
///       ▼ timeout, violation  └──── fix accepted: regenerate, `generated` again
///    Closed ◀───────────── codeGeneration error, timeouts, violations, close()
/// ```
///
/// The crate's `negotiate` example drives two sessions against each other.
#[derive(Debug)]
pub struct Session {
    role: Role,
    config: SessionConfig,
    version: MetaVersion,
    capabilities: Capabilities,
    state: State,
    transmits: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
    /// Our natural-language requests awaiting a response, with their deadlines.
    natural_language_out: BTreeMap<String, Instant>,
    /// The peer's natural-language requests awaiting our response.
    natural_language_in: BTreeSet<String>,
    /// When the whole negotiation must have reached its first ready period (cleared then).
    negotiation_deadline: Option<Instant>,
    ids: MessageIds,
}

#[derive(Debug)]
enum State {
    Negotiating(Negotiation),
    Established(Box<Established>),
    Closed,
}

/// The protocol negotiation in progress.
#[derive(Debug)]
struct Negotiation {
    /// The sequenceId the next message (from either side) must carry; `None` before the first.
    next_sequence_id: Option<u64>,
    /// `negotiating` messages so far, both sides.
    proposals: u32,
    turn: Turn,
    /// The latest full candidate on the table, whoever proposed it.
    candidate: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// The requester has not proposed yet.
    Opening,
    /// The peer's candidate awaits our decision.
    Local,
    /// We await the peer's message until the deadline.
    Peer(Instant),
}

/// Protocol agreed (or resumed): code generation, test cases, fixes and data.
#[derive(Debug)]
struct Established {
    protocol: EstablishedProtocol,
    local_code: bool,
    peer_code: bool,
    /// When we give up on the peer's `generated` (while `!peer_code`).
    peer_code_deadline: Option<Instant>,
    test_cases: TestCaseTalk,
    /// Our error report awaiting the peer's answer, until this deadline.
    our_report_deadline: Option<Instant>,
    /// The peer's error report awaits our decision.
    peer_report_pending: bool,
    /// Whether the current ready period was announced.
    ready: bool,
    /// Whether the session has been ready at least once.
    ever_ready: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TestCaseTalk {
    Idle,
    AwaitingPeer {
        sent: String,
        proposals: u32,
        deadline: Instant,
    },
    AwaitingLocal {
        received: String,
        proposals: u32,
    },
    Agreed,
}

impl TestCaseTalk {
    fn in_flight(&self) -> bool {
        matches!(self, Self::AwaitingPeer { .. } | Self::AwaitingLocal { .. })
    }
}

impl Established {
    fn new(
        protocol: EstablishedProtocol,
        code_ready: bool,
        peer_code_deadline: Option<Instant>,
    ) -> Self {
        Self {
            protocol,
            local_code: code_ready,
            peer_code: code_ready,
            peer_code_deadline,
            test_cases: TestCaseTalk::Idle,
            our_report_deadline: None,
            peer_report_pending: false,
            ready: false,
            ever_ready: false,
        }
    }

    fn is_ready(&self) -> bool {
        self.local_code && self.peer_code && !self.test_cases.in_flight()
    }
}

impl Session {
    /// Starts a session from the outcome of the hello exchange.
    ///
    /// After a 0-RTT or consensus agreement the session is ready at once (an
    /// [`Event::Ready`] is queued). Otherwise the requester proposes with
    /// [`Session::propose`] and the provider waits for the first candidate (up to
    /// [`SessionConfig::first_proposal_timeout`]), and the whole negotiation must reach
    /// its first ready period within [`SessionConfig::negotiation_deadline`].
    pub fn new(role: Role, agreement: &Agreement, config: SessionConfig, now: Instant) -> Self {
        let state = match &agreement.protocol {
            ProtocolChoice::Negotiate => State::Negotiating(Negotiation {
                next_sequence_id: None,
                proposals: 0,
                turn: match role {
                    Role::Requester => Turn::Opening,
                    Role::Provider => Turn::Peer(now + config.first_proposal_timeout),
                },
                candidate: None,
            }),
            ProtocolChoice::Resume(hash) => State::Established(Box::new(Established::new(
                EstablishedProtocol::Resumed { hash: *hash },
                true,
                None,
            ))),
            ProtocolChoice::Consensus(uri) => State::Established(Box::new(Established::new(
                EstablishedProtocol::Consensus { uri: uri.clone() },
                true,
                None,
            ))),
        };
        let negotiation_deadline = match agreement.protocol {
            ProtocolChoice::Negotiate => Some(now + config.negotiation_deadline),
            ProtocolChoice::Resume(_) | ProtocolChoice::Consensus(_) => None,
        };
        let mut session = Self {
            role,
            negotiation_deadline,
            ids: MessageIds::new(config.id_seed),
            config,
            version: agreement.version,
            capabilities: agreement.capabilities,
            state,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            natural_language_out: BTreeMap::new(),
            natural_language_in: BTreeSet::new(),
        };
        session.update_ready();
        session
    }

    // ----- what the driver reads ---------------------------------------------------------

    /// Our role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The meta-protocol version in use.
    pub fn version(&self) -> MetaVersion {
        self.version
    }

    /// The optional capabilities both sides support.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// Where the session stands.
    pub fn phase(&self) -> Phase {
        match &self.state {
            State::Negotiating(_) => Phase::Negotiating,
            State::Established(established) if established.ready => Phase::Ready,
            State::Established(_) => Phase::Preparing,
            State::Closed => Phase::Closed,
        }
    }

    /// Whether application frames may be sent now.
    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Ready
    }

    /// The protocol in force, once agreed.
    pub fn protocol(&self) -> Option<&EstablishedProtocol> {
        match &self.state {
            State::Established(established) => Some(&established.protocol),
            _ => None,
        }
    }

    /// The next frame to send, header included.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest deadline: call [`Session::handle_timeout`] once it has passed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let state_deadline = match &self.state {
            State::Negotiating(Negotiation {
                turn: Turn::Peer(deadline),
                ..
            }) => Some(*deadline),
            State::Negotiating(_) | State::Closed => None,
            State::Established(established) => {
                let test_deadline = match &established.test_cases {
                    TestCaseTalk::AwaitingPeer { deadline, .. } => Some(*deadline),
                    _ => None,
                };
                [
                    established.peer_code_deadline,
                    test_deadline,
                    established.our_report_deadline,
                ]
                .into_iter()
                .flatten()
                .min()
            }
        };
        let natural_language = self.natural_language_out.values().min().copied();
        [state_deadline, natural_language, self.negotiation_deadline]
            .into_iter()
            .flatten()
            .min()
    }

    // ----- what the driver feeds in ------------------------------------------------------

    /// Processes one received frame (header included). Errors in it close the session
    /// with [`CloseReason::Violation`]; nothing the peer sends can panic. The data of an
    /// application or verification frame reaches its [`Event`] as a slice of `frame`, not
    /// a copy: pass the transport's `Bytes` (or a `Vec<u8>`) as it came.
    pub fn handle_frame(&mut self, now: Instant, frame: impl Into<Bytes>) {
        if matches!(self.state, State::Closed) {
            return;
        }
        let bytes: Bytes = frame.into();
        let frame = match Frame::decode(&bytes, self.config.max_frame_size) {
            Ok(frame) => frame,
            Err(error) => return self.violate(error.into()),
        };
        match frame.protocol_type {
            ProtocolType::Meta => {
                let (size, limit) = (frame.data.len(), self.config.max_meta_message_size);
                if size > limit {
                    let violation = ProtocolViolation::MetaMessageTooLarge { size, limit };
                    self.reject_in_progress(violation.to_string());
                    return self.close_with(CloseReason::Violation(violation));
                }
                match MetaMessage::decode(frame.data) {
                    Ok(message) => self.handle_meta(now, message),
                    Err(error) => self.violate(error.into()),
                }
            }
            ProtocolType::Application => {
                if self.accepts_data_from_peer(ProtocolType::Application, None) {
                    self.events
                        .push_back(Event::Application(bytes.slice(Frame::HEADER_LEN..)));
                }
            }
            ProtocolType::NaturalLanguage => {
                if self.accepts_data_from_peer(
                    ProtocolType::NaturalLanguage,
                    Some(Capability::NaturalLanguageProtocol),
                ) {
                    match std::str::from_utf8(frame.data) {
                        Ok(text) => self
                            .events
                            .push_back(Event::NaturalLanguage(text.to_owned())),
                        Err(error) => self.violate(ProtocolViolation::NaturalLanguageNotUtf8 {
                            valid_up_to: error.valid_up_to(),
                        }),
                    }
                }
            }
            ProtocolType::Verification => {
                if self.accepts_data_from_peer(
                    ProtocolType::Verification,
                    Some(Capability::VerificationProtocol),
                ) {
                    self.events
                        .push_back(Event::Verification(bytes.slice(Frame::HEADER_LEN..)));
                }
            }
        }
    }

    /// Fires every deadline that has passed at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .natural_language_out
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for message_id in expired {
            self.natural_language_out.remove(&message_id);
            self.events
                .push_back(Event::NaturalLanguageTimedOut { message_id });
        }
        if matches!(self.state, State::Closed) {
            return;
        }
        if self
            .negotiation_deadline
            .is_some_and(|deadline| deadline <= now)
        {
            let seconds = self.config.negotiation_deadline.as_secs();
            self.reject_in_progress(format!(
                "timed out: the negotiation deadline of {seconds} s passed"
            ));
            return self.close_with(CloseReason::TimedOut {
                waiting_for: Wait::Ready,
            });
        }
        let waiting_for = match &self.state {
            State::Negotiating(Negotiation {
                turn: Turn::Peer(deadline),
                proposals,
                ..
            }) if *deadline <= now => Some(if *proposals == 0 {
                Wait::FirstProposal
            } else {
                Wait::ProtocolNegotiation
            }),
            State::Established(established) => {
                let passed = |deadline: Option<Instant>| deadline.is_some_and(|d| d <= now);
                if passed(established.peer_code_deadline) {
                    Some(Wait::CodeGeneration)
                } else if matches!(&established.test_cases,
                    TestCaseTalk::AwaitingPeer { deadline, .. } if *deadline <= now)
                {
                    Some(Wait::TestCases)
                } else if passed(established.our_report_deadline) {
                    Some(Wait::FixError)
                } else {
                    None
                }
            }
            _ => None,
        };
        if let Some(waiting_for) = waiting_for {
            match waiting_for {
                Wait::FirstProposal => {
                    let seconds = self.config.first_proposal_timeout.as_secs();
                    self.send_protocol_rejection(format!(
                        "timed out: no protocolNegotiation within {seconds} s of the hellos"
                    ));
                }
                Wait::ProtocolNegotiation => {
                    let seconds = self.config.negotiation_timeout.as_secs();
                    self.send_protocol_rejection(format!(
                        "timed out: no answer within {seconds} s"
                    ));
                }
                _ => {}
            }
            self.close_with(CloseReason::TimedOut { waiting_for });
        }
    }

    // ----- the application's side of the protocol negotiation -----------------------------

    /// Requester: opens the negotiation with a full candidate protocol text.
    pub fn propose(&mut self, now: Instant, candidate: String) -> Result<(), SessionError> {
        if self.role != Role::Requester {
            return Err(self.wrong_role("open a protocol negotiation"));
        }
        if candidate.is_empty() {
            return Err(SessionError::EmptyText("candidateProtocols"));
        }
        check_size(
            "candidateProtocols",
            &candidate,
            self.config.max_candidate_size,
        )?;
        let first = self.config.first_sequence_id;
        let deadline = now + self.config.negotiation_timeout;
        if !matches!(&self.state, State::Negotiating(n) if n.turn == Turn::Opening) {
            return Err(self.not_now("open a protocol negotiation"));
        }
        self.queue_meta(&MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
            sequence_id: first,
            candidate_protocols: Some(candidate.clone()),
            modification_summary: None,
            status: NegotiationStatus::Negotiating,
        }))?;
        if let State::Negotiating(negotiation) = &mut self.state {
            negotiation.next_sequence_id = Some(first + 1);
            negotiation.proposals = 1;
            negotiation.turn = Turn::Peer(deadline);
            negotiation.candidate = Some(candidate);
        }
        Ok(())
    }

    /// Answers the peer's candidate (after [`Event::CandidateReceived`]).
    ///
    /// A counter-proposal past the round cap is sent as a rejection instead, and the
    /// session closes with [`CloseReason::RoundCapReached`].
    pub fn decide(&mut self, now: Instant, decision: Decision) -> Result<(), SessionError> {
        let cap = self.config.max_negotiation_rounds;
        let deadline = now + self.config.negotiation_timeout;
        let (sequence_id, proposals, on_the_table) = match &self.state {
            State::Negotiating(n) if n.turn == Turn::Local => (
                n.next_sequence_id.unwrap_or(0),
                n.proposals,
                n.candidate.clone().unwrap_or_default(),
            ),
            _ => return Err(self.not_now("answer a candidate protocol")),
        };
        match decision {
            Decision::Accept => {
                self.queue_meta(&MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
                    sequence_id,
                    candidate_protocols: Some(on_the_table.clone()),
                    modification_summary: None,
                    status: NegotiationStatus::Accepted,
                }))?;
                self.establish(now, on_the_table);
                Ok(())
            }
            Decision::Counter {
                candidate,
                modification_summary,
            } => {
                check_counter(
                    "candidateProtocols",
                    &candidate,
                    &modification_summary,
                    self.config.max_candidate_size,
                )?;
                if proposals >= cap {
                    self.stop_at_round_cap(cap);
                    return Ok(());
                }
                self.queue_meta(&MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
                    sequence_id,
                    candidate_protocols: Some(candidate.clone()),
                    modification_summary: Some(modification_summary),
                    status: NegotiationStatus::Negotiating,
                }))?;
                if let State::Negotiating(negotiation) = &mut self.state {
                    negotiation.proposals += 1;
                    negotiation.next_sequence_id = Some(sequence_id.saturating_add(1));
                    negotiation.turn = Turn::Peer(deadline);
                    negotiation.candidate = Some(candidate);
                }
                Ok(())
            }
            Decision::Reject { reason } => {
                self.send_protocol_rejection(reason.clone());
                self.close_with(CloseReason::NegotiationRejected {
                    by: Side::Local,
                    reason: Some(reason),
                });
                Ok(())
            }
        }
    }

    // ----- code generation ---------------------------------------------------------------

    /// Our handler code is ready (and passed the agreed test cases): sends `generated`.
    pub fn code_ready(&mut self, _now: Instant) -> Result<(), SessionError> {
        if !matches!(&self.state, State::Established(e) if !e.local_code) {
            return Err(self.not_now("announce generated code"));
        }
        self.queue_meta(&MetaMessage::CodeGeneration(CodeGeneration {
            status: CodeGenerationStatus::Generated,
        }))?;
        if let State::Established(established) = &mut self.state {
            established.local_code = true;
        }
        self.update_ready();
        Ok(())
    }

    /// Our handler code could not be made: sends `codeGeneration: error` and closes.
    pub fn code_failed(&mut self, _now: Instant) -> Result<(), SessionError> {
        if !matches!(self.state, State::Established(_)) {
            return Err(self.not_now("report failed code generation"));
        }
        self.queue_meta(&MetaMessage::CodeGeneration(CodeGeneration {
            status: CodeGenerationStatus::Error,
        }))?;
        self.close_with(CloseReason::CodeGenerationFailed { by: Side::Local });
        Ok(())
    }

    // ----- test cases --------------------------------------------------------------------

    /// Requester: proposes test cases (full text) once the protocol is agreed.
    pub fn propose_test_cases(
        &mut self,
        now: Instant,
        test_cases: String,
    ) -> Result<(), SessionError> {
        self.require(Capability::TestCasesNegotiation)?;
        if self.role != Role::Requester {
            return Err(self.wrong_role("open a test-case negotiation"));
        }
        if test_cases.is_empty() {
            return Err(SessionError::EmptyText("testCases"));
        }
        check_size("testCases", &test_cases, self.config.max_test_cases_size)?;
        let deadline = now + self.config.negotiation_timeout;
        if !matches!(&self.state, State::Established(e) if !e.test_cases.in_flight()) {
            return Err(self.not_now("propose test cases"));
        }
        self.queue_meta(&MetaMessage::TestCasesNegotiation(TestCasesNegotiation {
            test_cases: Some(test_cases.clone()),
            modification_summary: None,
            status: NegotiationStatus::Negotiating,
        }))?;
        if let State::Established(established) = &mut self.state {
            established.test_cases = TestCaseTalk::AwaitingPeer {
                sent: test_cases,
                proposals: 1,
                deadline,
            };
        }
        self.update_ready();
        Ok(())
    }

    /// Answers the peer's test cases (after [`Event::TestCasesReceived`]).
    pub fn decide_test_cases(
        &mut self,
        now: Instant,
        decision: Decision,
    ) -> Result<(), SessionError> {
        let cap = self.config.max_negotiation_rounds;
        let deadline = now + self.config.negotiation_timeout;
        let (received, proposals) = match &self.state {
            State::Established(established) => match &established.test_cases {
                TestCaseTalk::AwaitingLocal {
                    received,
                    proposals,
                } => (received.clone(), *proposals),
                _ => return Err(self.not_now("answer test cases")),
            },
            _ => return Err(self.not_now("answer test cases")),
        };
        let (next, message, event) = match decision {
            Decision::Accept => (
                TestCaseTalk::Agreed,
                TestCasesNegotiation {
                    test_cases: Some(received.clone()),
                    modification_summary: None,
                    status: NegotiationStatus::Accepted,
                },
                Some(Event::TestCasesAgreed {
                    test_cases: received,
                }),
            ),
            Decision::Counter {
                candidate,
                modification_summary,
            } => {
                check_counter(
                    "testCases",
                    &candidate,
                    &modification_summary,
                    self.config.max_test_cases_size,
                )?;
                if proposals >= cap {
                    we_reject_test_cases(round_cap_reason(cap))
                } else {
                    (
                        TestCaseTalk::AwaitingPeer {
                            sent: candidate.clone(),
                            proposals: proposals + 1,
                            deadline,
                        },
                        TestCasesNegotiation {
                            test_cases: Some(candidate),
                            modification_summary: Some(modification_summary),
                            status: NegotiationStatus::Negotiating,
                        },
                        None,
                    )
                }
            }
            Decision::Reject { reason } => we_reject_test_cases(reason),
        };
        self.queue_meta(&MetaMessage::TestCasesNegotiation(message))?;
        if let State::Established(established) = &mut self.state {
            established.test_cases = next;
        }
        self.events.extend(event);
        self.update_ready();
        Ok(())
    }

    // ----- fix-error negotiation ---------------------------------------------------------

    /// Reports an error in the peer's messages; the peer accepts (and regenerates) or rejects.
    pub fn report_error(
        &mut self,
        now: Instant,
        error_description: String,
    ) -> Result<(), SessionError> {
        self.require(Capability::FixErrorNegotiation)?;
        if error_description.is_empty() {
            return Err(SessionError::EmptyText("errorDescription"));
        }
        let deadline = now + self.config.negotiation_timeout;
        if !matches!(&self.state, State::Established(e) if e.our_report_deadline.is_none()) {
            return Err(self.not_now("report an error"));
        }
        self.queue_meta(&MetaMessage::FixErrorNegotiation(FixErrorNegotiation {
            error_description: Some(error_description),
            status: NegotiationStatus::Negotiating,
        }))?;
        if let State::Established(established) = &mut self.state {
            established.our_report_deadline = Some(deadline);
        }
        Ok(())
    }

    /// Answers the peer's error report (after [`Event::ErrorReported`]). Accepting means
    /// regenerating our code and calling [`Session::code_ready`] again.
    pub fn decide_error_report(
        &mut self,
        _now: Instant,
        decision: FixDecision,
    ) -> Result<(), SessionError> {
        if !matches!(&self.state, State::Established(e) if e.peer_report_pending) {
            return Err(self.not_now("answer an error report"));
        }
        let accept = decision == FixDecision::Accept;
        let message = match decision {
            FixDecision::Accept => FixErrorNegotiation {
                error_description: None,
                status: NegotiationStatus::Accepted,
            },
            FixDecision::Reject { reason } => FixErrorNegotiation {
                error_description: Some(reason),
                status: NegotiationStatus::Rejected,
            },
        };
        self.queue_meta(&MetaMessage::FixErrorNegotiation(message))?;
        if let State::Established(established) = &mut self.state {
            established.peer_report_pending = false;
            if accept {
                established.local_code = false;
            }
        }
        self.update_ready();
        Ok(())
    }

    // ----- natural-language negotiation --------------------------------------------------

    /// Sends a natural-language negotiation REQUEST; returns its messageId.
    pub fn request_natural_language(
        &mut self,
        now: Instant,
        message: String,
    ) -> Result<String, SessionError> {
        self.require(Capability::NaturalLanguageNegotiation)?;
        if matches!(self.state, State::Closed) {
            return Err(SessionError::Closed);
        }
        let mut message_id = self.ids.next_id();
        while self.natural_language_out.contains_key(&message_id) {
            message_id = self.ids.next_id();
        }
        self.queue_meta(&MetaMessage::NaturalLanguageNegotiation(
            NaturalLanguageNegotiation {
                kind: NaturalLanguageKind::Request,
                message_id: message_id.clone(),
                message,
            },
        ))?;
        self.natural_language_out.insert(
            message_id.clone(),
            now + self.config.natural_language_timeout,
        );
        Ok(message_id)
    }

    /// Answers the peer's natural-language REQUEST `message_id`.
    pub fn respond_natural_language(
        &mut self,
        message_id: &str,
        message: String,
    ) -> Result<(), SessionError> {
        if matches!(self.state, State::Closed) {
            return Err(SessionError::Closed);
        }
        if !self.natural_language_in.contains(message_id) {
            return Err(SessionError::UnknownRequest(message_id.to_owned()));
        }
        self.queue_meta(&MetaMessage::NaturalLanguageNegotiation(
            NaturalLanguageNegotiation {
                kind: NaturalLanguageKind::Response,
                message_id: message_id.to_owned(),
                message,
            },
        ))?;
        self.natural_language_in.remove(message_id);
        Ok(())
    }

    // ----- data frames -------------------------------------------------------------------

    /// Queues a PT 1 application message (protocol data in the negotiated format).
    pub fn send_application(&mut self, payload: &[u8]) -> Result<(), SessionError> {
        self.send_data(ProtocolType::Application, None, payload)
    }

    /// Queues a PT 1 application message built in place: the first [`Frame::HEADER_LEN`]
    /// bytes of `frame` are room for the header (their value does not matter), the
    /// protocol data follows. The session writes the header into that room instead of
    /// copying the data behind a new one as [`Session::send_application`] does: for bulk
    /// data (stream chunks) that is one copy fewer per frame.
    ///
    /// ```
    /// # use concord_proto::{Frame, SessionError};
    /// # fn queue(session: &mut concord_proto::Session) -> Result<(), SessionError> {
    /// let mut frame = vec![0; Frame::HEADER_LEN];
    /// frame.extend_from_slice(br#"{"id":1}"#);
    /// session.send_application_frame(frame)
    /// # }
    /// ```
    pub fn send_application_frame(&mut self, mut frame: Vec<u8>) -> Result<(), SessionError> {
        self.check_may_send(ProtocolType::Application, None)?;
        let Some(header) = frame.first_mut() else {
            return Err(SessionError::NoHeaderRoom);
        };
        *header = ProtocolType::Application.header();
        self.check_frame_size(frame.len())?;
        self.transmits.push_back(frame);
        Ok(())
    }

    /// Queues a PT 2 natural-language message.
    pub fn send_natural_language(&mut self, text: &str) -> Result<(), SessionError> {
        self.send_data(
            ProtocolType::NaturalLanguage,
            Some(Capability::NaturalLanguageProtocol),
            text.as_bytes(),
        )
    }

    /// Queues a PT 3 verification message.
    pub fn send_verification(&mut self, payload: &[u8]) -> Result<(), SessionError> {
        self.send_data(
            ProtocolType::Verification,
            Some(Capability::VerificationProtocol),
            payload,
        )
    }

    /// Ends the session from our side. During the protocol negotiation the peer is told
    /// with a `rejected` carrying `reason`.
    pub fn close(&mut self, reason: String) {
        if matches!(self.state, State::Closed) {
            return;
        }
        if matches!(self.state, State::Negotiating(_)) {
            self.send_protocol_rejection(reason.clone());
        }
        self.close_with(CloseReason::Local { reason });
    }

    // ----- internals ---------------------------------------------------------------------

    fn handle_meta(&mut self, now: Instant, message: MetaMessage) {
        if let State::Established(established) = &mut self.state {
            // Any sign of life from a peer that is still generating refreshes its deadline.
            if !established.peer_code {
                established.peer_code_deadline = Some(now + self.config.code_generation_timeout);
            }
        }
        match message {
            MetaMessage::ProtocolNegotiation(message) => {
                self.handle_protocol_negotiation(now, message)
            }
            MetaMessage::CodeGeneration(message) => self.handle_code_generation(message),
            MetaMessage::TestCasesNegotiation(message) => {
                if self.peer_may_use(Capability::TestCasesNegotiation, "testCasesNegotiation") {
                    self.handle_test_cases(message);
                }
            }
            MetaMessage::FixErrorNegotiation(message) => {
                if self.peer_may_use(Capability::FixErrorNegotiation, "fixErrorNegotiation") {
                    self.handle_fix_error(now, message);
                }
            }
            MetaMessage::NaturalLanguageNegotiation(message) => {
                if self.peer_may_use(
                    Capability::NaturalLanguageNegotiation,
                    "naturalLanguageNegotiation",
                ) {
                    self.handle_natural_language(message);
                }
            }
        }
    }

    fn handle_protocol_negotiation(&mut self, now: Instant, message: ProtocolNegotiation) {
        const ACTION: &str = "protocolNegotiation";
        let cap = self.config.max_negotiation_rounds;
        let candidate_limit = self.config.max_candidate_size;
        let echo_accept = self.config.echo_accept && self.role == Role::Requester;
        let negotiation = match &mut self.state {
            State::Negotiating(negotiation) => negotiation,
            State::Established(established) => {
                // The reference implementation echoes `accepted` (with a stale sequenceId):
                // accept the echo, never require it.
                let echo_of_agreed = message.status == NegotiationStatus::Accepted
                    && match (
                        &established.protocol,
                        message.candidate_protocols.as_deref(),
                    ) {
                        (_, None | Some("")) => true,
                        (EstablishedProtocol::Negotiated { document, .. }, Some(text)) => {
                            text == document
                        }
                        _ => false,
                    };
                if !echo_of_agreed {
                    self.violate(ProtocolViolation::UnexpectedMessage {
                        action: ACTION,
                        status: Some(message.status),
                        state: "the protocol is already agreed",
                    });
                }
                return;
            }
            State::Closed => return,
        };
        // The peer may end the negotiation at any point, in turn or not.
        match message.status {
            NegotiationStatus::Rejected => {
                let reason = message
                    .modification_summary
                    .filter(|summary| !summary.is_empty());
                return self.close_with(CloseReason::NegotiationRejected {
                    by: Side::Peer,
                    reason,
                });
            }
            NegotiationStatus::Timeout => return self.close_with(CloseReason::PeerTimedOut),
            NegotiationStatus::Negotiating | NegotiationStatus::Accepted => {}
        }
        if !matches!(negotiation.turn, Turn::Peer(_)) {
            let state = if negotiation.turn == Turn::Opening {
                "the requester has not proposed yet"
            } else {
                "the peer's previous candidate awaits our answer"
            };
            return self.violate(ProtocolViolation::UnexpectedMessage {
                action: ACTION,
                status: Some(message.status),
                state,
            });
        }
        let expected = negotiation.next_sequence_id;
        let in_sequence = match expected {
            None => message.sequence_id <= 1,
            Some(expected) => message.sequence_id == expected,
        };
        negotiation.next_sequence_id = Some(message.sequence_id.saturating_add(1));
        if !in_sequence {
            return self.violate(ProtocolViolation::SequenceId {
                expected,
                got: message.sequence_id,
            });
        }
        match message.status {
            NegotiationStatus::Negotiating => {
                if negotiation.proposals > 0 && message.modification_summary.is_none() {
                    return self
                        .violate(ProtocolViolation::MissingModificationSummary { action: ACTION });
                }
                let size = message.candidate_protocols.as_deref().map_or(0, str::len);
                if size > candidate_limit {
                    let reason = CloseReason::CandidateTooLarge {
                        size,
                        limit: candidate_limit,
                    };
                    self.send_protocol_rejection(format!(
                        "candidate protocol of {size} bytes exceeds the limit of {candidate_limit} bytes"
                    ));
                    return self.close_with(reason);
                }
                negotiation.proposals += 1;
                if negotiation.proposals > cap {
                    return self.stop_at_round_cap(cap);
                }
                let candidate = message.candidate_protocols.unwrap_or_default();
                let replaces = negotiation.candidate.replace(candidate.clone());
                negotiation.turn = Turn::Local;
                self.events.push_back(Event::CandidateReceived {
                    sequence_id: message.sequence_id,
                    candidate,
                    modification_summary: message.modification_summary,
                    replaces,
                });
            }
            NegotiationStatus::Accepted => {
                let Some(document) = negotiation.candidate.clone() else {
                    return self.violate(ProtocolViolation::UnexpectedMessage {
                        action: ACTION,
                        status: Some(message.status),
                        state: "no candidate is on the table",
                    });
                };
                if let Some(text) = message.candidate_protocols.as_deref() {
                    if !text.is_empty() && text != document {
                        return self
                            .violate(ProtocolViolation::AcceptedDifferentText { action: ACTION });
                    }
                }
                if echo_accept {
                    let sequence_id = message.sequence_id.saturating_add(1);
                    // An `accepted` with its text has no required field missing: cannot fail.
                    let _ =
                        self.queue_meta(&MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
                            sequence_id,
                            candidate_protocols: Some(document.clone()),
                            modification_summary: None,
                            status: NegotiationStatus::Accepted,
                        }));
                }
                self.establish(now, document);
            }
            NegotiationStatus::Rejected | NegotiationStatus::Timeout => {}
        }
    }

    /// The agreed protocol's state, which `action` (with `status`) needs; before agreement
    /// the message is a violation and there is none.
    fn established_for(
        &mut self,
        action: &'static str,
        status: Option<NegotiationStatus>,
    ) -> Option<&mut Established> {
        if !matches!(self.state, State::Established(_)) {
            self.violate(ProtocolViolation::UnexpectedMessage {
                action,
                status,
                state: "the protocol is not agreed yet",
            });
        }
        match &mut self.state {
            State::Established(established) => Some(established),
            _ => None,
        }
    }

    fn handle_code_generation(&mut self, message: CodeGeneration) {
        let Some(established) = self.established_for("codeGeneration", None) else {
            return;
        };
        match message.status {
            CodeGenerationStatus::Generated => {
                // A repeated `generated` is harmless: ignore it.
                if !established.peer_code {
                    established.peer_code = true;
                    established.peer_code_deadline = None;
                    self.events.push_back(Event::PeerCodeReady);
                    self.update_ready();
                }
            }
            CodeGenerationStatus::Error => {
                self.close_with(CloseReason::CodeGenerationFailed { by: Side::Peer });
            }
        }
    }

    fn handle_test_cases(&mut self, message: TestCasesNegotiation) {
        const ACTION: &str = "testCasesNegotiation";
        let cap = self.config.max_negotiation_rounds;
        let limit = self.config.max_test_cases_size;
        let role = self.role;
        let Some(established) = self.established_for(ACTION, Some(message.status)) else {
            return;
        };
        let unexpected = |state| ProtocolViolation::UnexpectedMessage {
            action: ACTION,
            status: Some(message.status),
            state,
        };
        let current = std::mem::replace(&mut established.test_cases, TestCaseTalk::Idle);
        let (next, event) = match (current, message.status) {
            (TestCaseTalk::Idle | TestCaseTalk::Agreed, NegotiationStatus::Negotiating) => {
                if role == Role::Requester {
                    return self.violate(unexpected(
                        "only the requester opens a test-case negotiation",
                    ));
                }
                if let Some(reason) = test_cases_too_large(&message, limit) {
                    return self.reject_peer_test_cases(reason);
                }
                received_test_cases(message, 1)
            }
            (TestCaseTalk::AwaitingPeer { proposals, .. }, NegotiationStatus::Negotiating) => {
                if message.modification_summary.is_none() {
                    return self
                        .violate(ProtocolViolation::MissingModificationSummary { action: ACTION });
                }
                if let Some(reason) = test_cases_too_large(&message, limit) {
                    return self.reject_peer_test_cases(reason);
                }
                if proposals >= cap {
                    return self.reject_peer_test_cases(round_cap_reason(cap));
                }
                received_test_cases(message, proposals + 1)
            }
            (TestCaseTalk::AwaitingPeer { sent, .. }, NegotiationStatus::Accepted) => {
                if message
                    .test_cases
                    .as_deref()
                    .is_some_and(|text| !text.is_empty() && text != sent)
                {
                    return self
                        .violate(ProtocolViolation::AcceptedDifferentText { action: ACTION });
                }
                (
                    TestCaseTalk::Agreed,
                    Event::TestCasesAgreed { test_cases: sent },
                )
            }
            (TestCaseTalk::AwaitingPeer { .. }, NegotiationStatus::Rejected) => (
                TestCaseTalk::Idle,
                Event::TestCasesRejected {
                    by: Side::Peer,
                    reason: message
                        .modification_summary
                        .filter(|reason| !reason.is_empty()),
                },
            ),
            (TestCaseTalk::AwaitingPeer { .. }, NegotiationStatus::Timeout) => {
                return self.close_with(CloseReason::PeerTimedOut);
            }
            (TestCaseTalk::AwaitingLocal { .. }, _) => {
                return self.violate(unexpected("the peer's test cases await our answer"));
            }
            (TestCaseTalk::Idle | TestCaseTalk::Agreed, _) => {
                return self.violate(unexpected("no test-case proposal of ours is pending"));
            }
        };
        established.test_cases = next;
        self.events.push_back(event);
        self.update_ready();
    }

    fn handle_fix_error(&mut self, now: Instant, message: FixErrorNegotiation) {
        const ACTION: &str = "fixErrorNegotiation";
        let code_generation_timeout = self.config.code_generation_timeout;
        let Some(established) = self.established_for(ACTION, Some(message.status)) else {
            return;
        };
        let unexpected = |state| ProtocolViolation::UnexpectedMessage {
            action: ACTION,
            status: Some(message.status),
            state,
        };
        match message.status {
            NegotiationStatus::Negotiating => {
                if established.peer_report_pending {
                    return self.violate(unexpected(
                        "the peer's previous error report awaits our answer",
                    ));
                }
                established.peer_report_pending = true;
                self.events.push_back(Event::ErrorReported {
                    error_description: message.error_description.unwrap_or_default(),
                });
            }
            NegotiationStatus::Accepted
            | NegotiationStatus::Rejected
            | NegotiationStatus::Timeout => {
                if established.our_report_deadline.take().is_none() {
                    return self.violate(unexpected("no error report of ours is pending"));
                }
                match message.status {
                    NegotiationStatus::Accepted => {
                        established.peer_code = false;
                        established.peer_code_deadline = Some(now + code_generation_timeout);
                        self.events.push_back(Event::FixAccepted);
                        self.update_ready();
                    }
                    NegotiationStatus::Rejected => self.events.push_back(Event::FixRejected {
                        reason: message
                            .error_description
                            .filter(|reason| !reason.is_empty()),
                    }),
                    _ => self.close_with(CloseReason::PeerTimedOut),
                }
            }
        }
    }

    fn handle_natural_language(&mut self, message: NaturalLanguageNegotiation) {
        match message.kind {
            NaturalLanguageKind::Request => {
                let limit = self.config.max_pending_natural_language;
                if self.natural_language_in.len() >= limit {
                    return self
                        .violate(ProtocolViolation::TooManyNaturalLanguageRequests { limit });
                }
                if !self.natural_language_in.insert(message.message_id.clone()) {
                    return self.violate(ProtocolViolation::DuplicateNaturalLanguageRequest {
                        message_id: message.message_id,
                    });
                }
                self.events.push_back(Event::NaturalLanguageRequest {
                    message_id: message.message_id,
                    message: message.message,
                });
            }
            NaturalLanguageKind::Response => {
                if self
                    .natural_language_out
                    .remove(&message.message_id)
                    .is_none()
                {
                    return self.violate(ProtocolViolation::UnknownNaturalLanguageResponse {
                        message_id: message.message_id,
                    });
                }
                self.events.push_back(Event::NaturalLanguageResponse {
                    message_id: message.message_id,
                    message: message.message,
                });
            }
        }
    }

    /// Whether a data frame of the peer's may be delivered; closes the session if not.
    fn accepts_data_from_peer(
        &mut self,
        protocol_type: ProtocolType,
        capability: Option<Capability>,
    ) -> bool {
        if let Some(capability) = capability {
            if !self.capabilities.contains(capability) {
                self.violate(ProtocolViolation::CapabilityNotNegotiated {
                    capability,
                    what: match protocol_type {
                        ProtocolType::NaturalLanguage => "a natural-language frame",
                        _ => "a verification frame",
                    },
                });
                return false;
            }
        }
        // After the first ready period, frames racing a regeneration are still delivered.
        if matches!(&self.state, State::Established(established) if established.ever_ready) {
            return true;
        }
        self.violate(ProtocolViolation::FrameBeforeReady { protocol_type });
        false
    }

    fn send_data(
        &mut self,
        protocol_type: ProtocolType,
        capability: Option<Capability>,
        payload: &[u8],
    ) -> Result<(), SessionError> {
        self.check_may_send(protocol_type, capability)?;
        self.check_frame_size(payload.len() + Frame::HEADER_LEN)?;
        self.transmits
            .push_back(Frame::encode(protocol_type, payload));
        Ok(())
    }

    /// Whether a data frame of `protocol_type` may go now: the capability it needs was
    /// agreed and the protocol is ready.
    fn check_may_send(
        &self,
        protocol_type: ProtocolType,
        capability: Option<Capability>,
    ) -> Result<(), SessionError> {
        if let Some(capability) = capability {
            self.require(capability)?;
        }
        match &self.state {
            State::Closed => Err(SessionError::Closed),
            State::Established(established) if established.ready => Ok(()),
            _ => Err(SessionError::NotReady(protocol_type)),
        }
    }

    fn establish(&mut self, now: Instant, document: String) {
        let hash = ProtocolHash::of_text(&document);
        self.state = State::Established(Box::new(Established::new(
            EstablishedProtocol::Negotiated {
                hash,
                document: document.clone(),
            },
            false,
            Some(now + self.config.code_generation_timeout),
        )));
        self.events
            .push_back(Event::ProtocolAgreed { hash, document });
    }

    /// Announces a ready period when one starts, and notes when it ends.
    fn update_ready(&mut self) {
        let State::Established(established) = &mut self.state else {
            return;
        };
        let ready = established.is_ready();
        if ready && !established.ready {
            established.ever_ready = true;
            self.negotiation_deadline = None;
            self.events.push_back(Event::Ready {
                protocol: established.protocol.clone(),
            });
        }
        established.ready = ready;
    }

    fn send_protocol_rejection(&mut self, reason: String) {
        let State::Negotiating(negotiation) = &mut self.state else {
            return;
        };
        let sequence_id = negotiation
            .next_sequence_id
            .unwrap_or(self.config.first_sequence_id);
        negotiation.next_sequence_id = Some(sequence_id.saturating_add(1));
        // A `rejected` has no required field missing and its reason is cut to
        // `MAX_REASON_LEN`: it fits any sane limit.
        let _ = self.queue_meta(&MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
            sequence_id,
            candidate_protocols: None,
            modification_summary: Some(cut_reason(reason)),
            status: NegotiationStatus::Rejected,
        }));
    }

    /// Tells the peer that the negotiation in progress, protocol or test cases, is over
    /// (before the session closes for `reason`).
    fn reject_in_progress(&mut self, reason: String) {
        match &self.state {
            State::Negotiating(_) => self.send_protocol_rejection(reason),
            State::Established(established) if established.test_cases.in_flight() => {
                // As above: a `rejected` with a cut reason cannot fail.
                let _ = self.queue_meta(&MetaMessage::TestCasesNegotiation(rejected_test_cases(
                    reason,
                )));
            }
            State::Established(_) | State::Closed => {}
        }
    }

    /// We reject the peer's test-case proposal for `reason`; the session goes on.
    fn reject_peer_test_cases(&mut self, reason: String) {
        let reason = cut_reason(reason);
        // A `rejected` has no required field missing and a cut reason: cannot fail.
        let _ = self.queue_meta(&MetaMessage::TestCasesNegotiation(rejected_test_cases(
            reason.clone(),
        )));
        if let State::Established(established) = &mut self.state {
            established.test_cases = TestCaseTalk::Idle;
        }
        self.events.push_back(Event::TestCasesRejected {
            by: Side::Local,
            reason: Some(reason),
        });
        self.update_ready();
    }

    /// Ends the protocol negotiation at the round cap: tells the peer why, then closes.
    fn stop_at_round_cap(&mut self, cap: u32) {
        self.send_protocol_rejection(round_cap_reason(cap));
        self.close_with(CloseReason::RoundCapReached { rounds: cap });
    }

    /// The peer broke the protocol: tell it (during the protocol negotiation) and close.
    fn violate(&mut self, violation: ProtocolViolation) {
        if matches!(self.state, State::Negotiating(_)) {
            self.send_protocol_rejection(violation.to_string());
        }
        self.close_with(CloseReason::Violation(violation));
    }

    fn close_with(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        self.natural_language_out.clear();
        self.natural_language_in.clear();
        self.events.push_back(Event::Closed(reason));
    }

    /// Queues `message`. Every sender checks first that it may send, then queues, and
    /// only then moves its state: a message too large to send changes nothing.
    fn queue_meta(&mut self, message: &MetaMessage) -> Result<(), SessionError> {
        let frame = message.to_frame()?;
        self.check_frame_size(frame.len())?;
        let (size, limit) = (frame.len() - 1, self.config.max_meta_message_size);
        if size > limit {
            return Err(SessionError::MetaMessageTooLarge {
                action: message.action(),
                size,
                limit,
            });
        }
        self.transmits.push_back(frame);
        Ok(())
    }

    fn check_frame_size(&self, size: usize) -> Result<(), SessionError> {
        let limit = self.config.max_frame_size;
        if size > limit {
            return Err(SessionError::FrameTooLarge { size, limit });
        }
        Ok(())
    }

    fn peer_may_use(&mut self, capability: Capability, what: &'static str) -> bool {
        if self.capabilities.contains(capability) {
            return true;
        }
        self.violate(ProtocolViolation::CapabilityNotNegotiated { capability, what });
        false
    }

    fn require(&self, capability: Capability) -> Result<(), SessionError> {
        if self.capabilities.contains(capability) {
            Ok(())
        } else {
            Err(SessionError::CapabilityNotNegotiated(capability))
        }
    }

    fn wrong_role(&self, operation: &'static str) -> SessionError {
        SessionError::WrongRole {
            operation,
            role: self.role.name(),
        }
    }

    fn not_now(&self, operation: &'static str) -> SessionError {
        let state = match &self.state {
            State::Closed => return SessionError::Closed,
            State::Negotiating(negotiation) => match negotiation.turn {
                Turn::Opening => "the negotiation has not started",
                Turn::Local => "the peer's candidate awaits our answer",
                Turn::Peer(_) => "waiting for the peer's negotiation message",
            },
            State::Established(established) => {
                if established.ready {
                    "ready"
                } else {
                    "preparing code and test cases"
                }
            }
        };
        SessionError::NotNow { operation, state }
    }
}

/// Why a negotiation ends at the round cap of `cap` negotiating messages, as the peer is told.
fn round_cap_reason(cap: u32) -> String {
    format!("round cap of {cap} negotiating messages reached without agreement")
}

/// Longest reason we send in a `rejected` (longer ones are cut at a character boundary).
const MAX_REASON_LEN: usize = 2048;

/// `reason`, cut to at most [`MAX_REASON_LEN`] bytes (an ellipsis marks a cut).
fn cut_reason(mut reason: String) -> String {
    if reason.len() > MAX_REASON_LEN {
        let mut end = MAX_REASON_LEN - '…'.len_utf8();
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

/// A text of ours sent as `field` fits in `limit` bytes.
fn check_size(field: &'static str, text: &str, limit: usize) -> Result<(), SessionError> {
    if text.len() > limit {
        return Err(SessionError::TextTooLarge {
            field,
            size: text.len(),
            limit,
        });
    }
    Ok(())
}

/// A counter-proposal of ours needs its text (sent as `field`, at most `limit` bytes) and
/// what it changes.
fn check_counter(
    field: &'static str,
    candidate: &str,
    modification_summary: &str,
    limit: usize,
) -> Result<(), SessionError> {
    if candidate.is_empty() {
        return Err(SessionError::EmptyText(field));
    }
    if modification_summary.is_empty() {
        return Err(SessionError::EmptyText("modificationSummary"));
    }
    check_size(field, candidate, limit)
}

/// Why the peer's test-case proposal is refused for its size, if it is over `limit`.
fn test_cases_too_large(message: &TestCasesNegotiation, limit: usize) -> Option<String> {
    let size = message.test_cases.as_deref().map_or(0, str::len);
    (size > limit).then(|| format!("test cases of {size} bytes exceed the limit of {limit} bytes"))
}

/// We reject the peer's test cases for `reason`: the talk is over, the peer is told, and
/// so is the application.
fn we_reject_test_cases(reason: String) -> (TestCaseTalk, TestCasesNegotiation, Option<Event>) {
    (
        TestCaseTalk::Idle,
        rejected_test_cases(reason.clone()),
        Some(Event::TestCasesRejected {
            by: Side::Local,
            reason: Some(reason),
        }),
    )
}

/// The peer's proposal of test cases (its `proposals`-th): it awaits our answer.
fn received_test_cases(message: TestCasesNegotiation, proposals: u32) -> (TestCaseTalk, Event) {
    let test_cases = message.test_cases.unwrap_or_default();
    (
        TestCaseTalk::AwaitingLocal {
            received: test_cases.clone(),
            proposals,
        },
        Event::TestCasesReceived {
            test_cases,
            modification_summary: message.modification_summary,
        },
    )
}

fn rejected_test_cases(reason: String) -> TestCasesNegotiation {
    TestCasesNegotiation {
        test_cases: None,
        modification_summary: Some(cut_reason(reason)),
        status: NegotiationStatus::Rejected,
    }
}
