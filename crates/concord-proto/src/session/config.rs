//! Session roles and tunables.

use std::time::Duration;

use crate::frame::DEFAULT_MAX_FRAME_SIZE;

/// Which side of the negotiation this session plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Has a need; opens the negotiation with a candidate protocol; may propose test cases.
    Requester,
    /// Has capabilities; judges candidates.
    Provider,
}

impl Role {
    /// A lowercase name for transcripts and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Requester => "requester",
            Self::Provider => "provider",
        }
    }
}

/// Limits and timeouts of one session. [`SessionConfig::default`] follows the 06 draft.
///
/// | field | default | when it is hit |
/// |---|---|---|
/// | `max_frame_size` | 10 MB | the peer's frame closes the session ([`ProtocolViolation::Frame`]); ours is refused ([`SessionError::FrameTooLarge`]) |
/// | `max_meta_message_size` | 256 KiB | checked on the frame's length before JSON decoding: the peer is told `rejected` when a negotiation is in progress and the session closes ([`ProtocolViolation::MetaMessageTooLarge`]); ours is refused ([`SessionError::MetaMessageTooLarge`]) |
/// | `max_candidate_size` | 64 KiB | the peer's candidate is answered `rejected` naming size and limit and the session closes ([`CloseReason::CandidateTooLarge`]); ours is refused ([`SessionError::TextTooLarge`]) |
/// | `max_test_cases_size` | 64 KiB | the peer's test cases are answered `rejected` naming size and limit ([`Event::TestCasesRejected`]); ours are refused ([`SessionError::TextTooLarge`]) |
/// | `max_negotiation_rounds` | 10 | the negotiation ends `rejected` |
/// | `first_proposal_timeout` | 10 s | provider: no first `protocolNegotiation`: `rejected`, then [`CloseReason::TimedOut`] ([`Wait::FirstProposal`]) |
/// | `negotiation_timeout` | 60 s | the peer's silence in a negotiation step: `rejected`, then [`CloseReason::TimedOut`] |
/// | `negotiation_deadline` | 180 s | not ready that long after [`Session::new`]: `rejected` (if negotiating), then [`CloseReason::TimedOut`] ([`Wait::Ready`]) |
/// | `code_generation_timeout` | 15 s | no `codeGeneration` from the peer: [`CloseReason::TimedOut`] |
/// | `natural_language_timeout` | 60 s | [`Event::NaturalLanguageTimedOut`] |
///
/// [`ProtocolViolation::Frame`]: crate::ProtocolViolation::Frame
/// [`ProtocolViolation::MetaMessageTooLarge`]: crate::ProtocolViolation::MetaMessageTooLarge
/// [`SessionError::FrameTooLarge`]: crate::SessionError::FrameTooLarge
/// [`SessionError::MetaMessageTooLarge`]: crate::SessionError::MetaMessageTooLarge
/// [`SessionError::TextTooLarge`]: crate::SessionError::TextTooLarge
/// [`CloseReason::CandidateTooLarge`]: crate::CloseReason::CandidateTooLarge
/// [`CloseReason::TimedOut`]: crate::CloseReason::TimedOut
/// [`Event::TestCasesRejected`]: crate::Event::TestCasesRejected
/// [`Event::NaturalLanguageTimedOut`]: crate::Event::NaturalLanguageTimedOut
/// [`Wait::FirstProposal`]: crate::Wait::FirstProposal
/// [`Wait::Ready`]: crate::Wait::Ready
/// [`Session::new`]: crate::Session::new
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Largest frame accepted or sent, header included (default 10 MB).
    pub max_frame_size: usize,
    /// Largest meta message (the protocol data of a PT 0 frame) accepted or sent, checked
    /// on the frame's length before JSON decoding (default 256 KiB).
    pub max_meta_message_size: usize,
    /// Largest candidate protocol text (`candidateProtocols` of a negotiating
    /// `protocolNegotiation`) accepted or sent, in bytes (default 64 KiB).
    pub max_candidate_size: usize,
    /// Largest test-case text (`testCases` of a negotiating `testCasesNegotiation`)
    /// accepted or sent, in bytes (default 64 KiB).
    pub max_test_cases_size: usize,
    /// Most `negotiating` messages one protocol or test-case negotiation may carry
    /// (default 10). Past it the negotiation ends `rejected`.
    pub max_negotiation_rounds: u32,
    /// The sequenceId our first `protocolNegotiation` carries: 0 per the spec; 1 matches
    /// the reference Python implementation. Either is accepted from a peer.
    pub first_sequence_id: u64,
    /// Whether the requester answers the provider's `accepted` with an `accepted` echo, as
    /// the reference implementation does. An echo is always accepted, never required.
    pub echo_accept: bool,
    /// How long we wait for the peer's next protocol, test-case or fix-error negotiation
    /// message (the peer may be consulting an LLM). Default 60 s.
    pub negotiation_timeout: Duration,
    /// Provider: how long we wait, from [`Session::new`](crate::Session::new), for the
    /// requester's first `protocolNegotiation` (default 10 s). Not applied when the hello
    /// settled the protocol (0-RTT or consensus).
    pub first_proposal_timeout: Duration,
    /// The whole way from [`Session::new`](crate::Session::new) to the first ready period:
    /// negotiation rounds, code generation and test cases together (default 180 s). Not
    /// applied when the hello settled the protocol (0-RTT or consensus).
    pub negotiation_deadline: Duration,
    /// How long we wait, after agreement or the peer's last meta message, for the peer's
    /// `codeGeneration`. Default 15 s (06 draft).
    pub code_generation_timeout: Duration,
    /// How long we wait for the response to a natural-language negotiation request. Default 60 s.
    pub natural_language_timeout: Duration,
    /// Most natural-language requests of the peer's we hold unanswered at once (each may
    /// cost an LLM call). One more is a protocol violation. Default 16.
    pub max_pending_natural_language: usize,
    /// Seed for the 16-character message ids this session generates (give each session a
    /// random seed; the state machine itself never reads a clock or an RNG).
    pub id_seed: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_meta_message_size: 256 * 1024,
            max_candidate_size: 64 * 1024,
            max_test_cases_size: 64 * 1024,
            max_negotiation_rounds: 10,
            first_sequence_id: 0,
            echo_accept: false,
            negotiation_timeout: Duration::from_secs(60),
            first_proposal_timeout: Duration::from_secs(10),
            negotiation_deadline: Duration::from_secs(180),
            code_generation_timeout: Duration::from_secs(15),
            natural_language_timeout: Duration::from_secs(60),
            max_pending_natural_language: 16,
            id_seed: 0,
        }
    }
}

impl SessionConfig {
    /// Settings that behave like the reference Python implementation (PyPI `anp`):
    /// first sequenceId 1 and an `accepted` echo from the requester.
    pub fn reference_compatible() -> Self {
        Self {
            first_sequence_id: 1,
            echo_accept: true,
            ..Self::default()
        }
    }
}
