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
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Largest frame accepted or sent, header included (default 10 MB).
    pub max_frame_size: usize,
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
    /// How long we wait, after agreement or the peer's last meta message, for the peer's
    /// `codeGeneration`. Default 15 s (06 draft).
    pub code_generation_timeout: Duration,
    /// How long we wait for the response to a natural-language negotiation request. Default 60 s.
    pub natural_language_timeout: Duration,
    /// Seed for the 16-character message ids this session generates (give each session a
    /// random seed; the state machine itself never reads a clock or an RNG).
    pub id_seed: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_negotiation_rounds: 10,
            first_sequence_id: 0,
            echo_accept: false,
            negotiation_timeout: Duration::from_secs(60),
            code_generation_timeout: Duration::from_secs(15),
            natural_language_timeout: Duration::from_secs(60),
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
