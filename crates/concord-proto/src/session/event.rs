//! What a session tells the application, and what the application answers.

use std::fmt;

use bytes::Bytes;

use crate::frame::ProtocolType;
use crate::hash::ProtocolHash;
use crate::session::error::ProtocolViolation;

/// Which side did something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// This session.
    Local,
    /// The peer.
    Peer,
}

/// What a timed-out session was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Wait {
    /// Provider: the requester's first `protocolNegotiation` (`first_proposal_timeout`).
    FirstProposal,
    /// The peer's next `protocolNegotiation`.
    ProtocolNegotiation,
    /// The peer's `codeGeneration`.
    CodeGeneration,
    /// The peer's answer in a test-case negotiation.
    TestCases,
    /// The peer's answer to our error report.
    FixError,
    /// The first ready period, which did not come within the whole negotiation's
    /// deadline (`negotiation_deadline`).
    Ready,
}

/// The application protocol a session speaks once established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EstablishedProtocol {
    /// Agreed in this session: the accepted text and its hash.
    Negotiated {
        /// SHA-256 of `document`: the 0-RTT key for the next connection.
        hash: ProtocolHash,
        /// The exact accepted candidate text.
        document: String,
    },
    /// Reused by 0-RTT from an earlier session.
    Resumed {
        /// The hash both sides confirmed in the hello.
        hash: ProtocolHash,
    },
    /// A consensus protocol selected in the hello.
    Consensus {
        /// The protocol's URI.
        uri: String,
    },
}

/// The application's answer to a candidate protocol or candidate test cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Accept the peer's latest candidate as it stands.
    Accept,
    /// Propose a modified candidate (the full text) and say what changed.
    Counter {
        /// The full new candidate text.
        candidate: String,
        /// What changed relative to the peer's candidate.
        modification_summary: String,
    },
    /// End the negotiation.
    Reject {
        /// Why, for the peer (sent as `modificationSummary`, cut to 2 KiB).
        reason: String,
    },
}

/// The application's answer to an error report from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixDecision {
    /// We were wrong: we will regenerate our code and send `codeGeneration` again.
    Accept,
    /// We were right: here is why (sent as `errorDescription`).
    Reject {
        /// The explanation for the peer.
        reason: String,
    },
}

/// Why a session closed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// One side rejected the protocol negotiation.
    NegotiationRejected {
        /// Who rejected.
        by: Side,
        /// The reason given, if any.
        reason: Option<String>,
    },
    /// The negotiation used its round cap without agreement (escalate to an operator).
    RoundCapReached {
        /// The cap in force.
        rounds: u32,
    },
    /// A side reported `codeGeneration: error`.
    CodeGenerationFailed {
        /// Who failed.
        by: Side,
    },
    /// The peer's candidate protocol exceeds our limit (`max_candidate_size`); the peer
    /// was answered `rejected` with the size and the limit.
    CandidateTooLarge {
        /// The candidate's size in bytes.
        size: usize,
        /// The limit in force.
        limit: usize,
    },
    /// The peer stayed silent past a deadline, or the negotiation as a whole took too long.
    TimedOut {
        /// What we were waiting for.
        waiting_for: Wait,
    },
    /// The peer ended the negotiation with status `timeout`.
    PeerTimedOut,
    /// The peer broke the protocol.
    Violation(ProtocolViolation),
    /// The application closed the session.
    Local {
        /// The application's reason.
        reason: String,
    },
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NegotiationRejected { by, reason } => {
                let who = match by {
                    Side::Local => "we",
                    Side::Peer => "the peer",
                };
                write!(f, "{who} rejected the protocol")?;
                if let Some(reason) = reason {
                    write!(f, ": {reason}")?;
                }
                Ok(())
            }
            Self::RoundCapReached { rounds } => {
                write!(f, "no agreement within the round cap of {rounds} messages")
            }
            Self::CodeGenerationFailed { by: Side::Local } => {
                f.write_str("our code generation failed")
            }
            Self::CodeGenerationFailed { by: Side::Peer } => {
                f.write_str("the peer's code generation failed")
            }
            Self::CandidateTooLarge { size, limit } => write!(
                f,
                "the peer's candidate protocol of {size} bytes exceeds our limit of {limit} bytes"
            ),
            Self::TimedOut {
                waiting_for: Wait::FirstProposal,
            } => f.write_str(
                "timed out waiting for the first protocolNegotiation (first_proposal_timeout)",
            ),
            Self::TimedOut {
                waiting_for: Wait::Ready,
            } => f.write_str("not ready within the negotiation deadline (negotiation_deadline)"),
            Self::TimedOut { waiting_for } => write!(f, "timed out waiting for {waiting_for:?}"),
            Self::PeerTimedOut => f.write_str("the peer timed out the negotiation"),
            Self::Violation(violation) => write!(f, "protocol violation: {violation}"),
            Self::Local { reason } => write!(f, "closed locally: {reason}"),
        }
    }
}

/// Something the application must know or act on. Drain with [`Session::poll_event`].
///
/// [`Session::poll_event`]: crate::Session::poll_event
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The peer proposed a candidate protocol (first proposal or counter-proposal):
    /// evaluate it and answer with [`Session::decide`](crate::Session::decide).
    CandidateReceived {
        /// The message's sequenceId.
        sequence_id: u64,
        /// The full candidate text.
        candidate: String,
        /// What changed since the previous candidate, as the peer sent it (required on
        /// every candidate but the first, where a peer may still send one).
        modification_summary: Option<String>,
        /// Our candidate this one answers: the one we proposed last (absent on the first).
        /// With the summary, what a judge needs to see what the peer changed.
        replaces: Option<String>,
    },
    /// The protocol is agreed: generate handler code, then call
    /// [`Session::code_ready`](crate::Session::code_ready) or
    /// [`Session::code_failed`](crate::Session::code_failed).
    ProtocolAgreed {
        /// SHA-256 of the accepted text.
        hash: ProtocolHash,
        /// The accepted text.
        document: String,
    },
    /// The peer said `codeGeneration: generated`.
    PeerCodeReady,
    /// The peer proposed test cases: answer with
    /// [`Session::decide_test_cases`](crate::Session::decide_test_cases).
    TestCasesReceived {
        /// The full test-case text.
        test_cases: String,
        /// What changed since the previous proposal (absent on the first).
        modification_summary: Option<String>,
    },
    /// Test cases are agreed: run them against the local code before saying `generated`.
    TestCasesAgreed {
        /// The agreed text.
        test_cases: String,
    },
    /// The test-case negotiation ended without agreement; the session goes on.
    TestCasesRejected {
        /// Who rejected.
        by: Side,
        /// The reason given, if any.
        reason: Option<String>,
    },
    /// The peer reports an error in our messages: answer with
    /// [`Session::decide_error_report`](crate::Session::decide_error_report).
    ErrorReported {
        /// The peer's description of the error.
        error_description: String,
    },
    /// The peer accepted our error report and is regenerating its code.
    FixAccepted,
    /// The peer rejected our error report.
    FixRejected {
        /// The peer's explanation, if any.
        reason: Option<String>,
    },
    /// Both sides have code (and no test-case negotiation is in flight): application
    /// frames may flow.
    Ready {
        /// The protocol in force.
        protocol: EstablishedProtocol,
    },
    /// A natural-language negotiation request: answer with
    /// [`Session::respond_natural_language`](crate::Session::respond_natural_language).
    NaturalLanguageRequest {
        /// The request's id, to quote in the response.
        message_id: String,
        /// The text.
        message: String,
    },
    /// The response to one of our natural-language negotiation requests.
    NaturalLanguageResponse {
        /// The id of our request.
        message_id: String,
        /// The text.
        message: String,
    },
    /// One of our natural-language negotiation requests went unanswered.
    NaturalLanguageTimedOut {
        /// The id of our request.
        message_id: String,
    },
    /// A PT 1 application message (protocol data only): a slice of the received frame,
    /// not a copy.
    Application(Bytes),
    /// A PT 2 natural-language message.
    NaturalLanguage(String),
    /// A PT 3 verification message (protocol data only), a slice of the received frame.
    Verification(Bytes),
    /// The session is over; send any queued frames, then close the transport.
    Closed(CloseReason),
}

impl Event {
    /// The frame type an incoming data event came in, if it is one.
    pub fn protocol_type(&self) -> Option<ProtocolType> {
        match self {
            Self::Application(_) => Some(ProtocolType::Application),
            Self::NaturalLanguage(_) => Some(ProtocolType::NaturalLanguage),
            Self::Verification(_) => Some(ProtocolType::Verification),
            _ => None,
        }
    }
}
