//! Errors: what the peer did wrong, and what the application asked for that cannot be done.

use crate::frame::{FrameError, ProtocolType};
use crate::hello::Capability;
use crate::meta::{MetaError, NegotiationStatus};

/// A coarse name for where a session stands, used in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Negotiating the protocol.
    Negotiating,
    /// Protocol agreed; code generation, test cases or fixes under way.
    Preparing,
    /// Application frames flow.
    Ready,
    /// Over.
    Closed,
}

/// Something the peer sent that breaks the meta-protocol. It closes the session.
///
/// The message says everything, the frame or meta-message error included; there is no
/// separate [`source`](std::error::Error::source) to say it again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// The bytes are not a frame (empty, or over the size limit).
    #[error("bad frame: {0}")]
    Frame(FrameError),
    /// A PT 0 frame larger than our meta-message limit (checked before decoding it).
    #[error("meta message of {size} bytes exceeds the limit of {limit} bytes")]
    MetaMessageTooLarge {
        /// The protocol data's size in bytes.
        size: usize,
        /// `SessionConfig::max_meta_message_size`.
        limit: usize,
    },
    /// A PT 0 frame whose data is not a valid meta message.
    #[error("bad meta message: {0}")]
    Meta(MetaError),
    /// A PT 2 frame whose data is not UTF-8.
    #[error("natural-language frame is not valid UTF-8 (valid up to byte {valid_up_to})")]
    NaturalLanguageNotUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// A `protocolNegotiation` with the wrong sequenceId.
    #[error("protocolNegotiation sequenceId {got} breaks the sequence: expected {}", expected_text(*.expected))]
    SequenceId {
        /// The expected value; `None` for a first message (0 or 1).
        expected: Option<u64>,
        /// The value received.
        got: u64,
    },
    /// A negotiating message after the first without `modificationSummary`.
    #[error(
        "{action}: modificationSummary is required on every negotiating message but the first"
    )]
    MissingModificationSummary {
        /// The message's action.
        action: &'static str,
    },
    /// The peer's `accepted` names a different text from the candidate on the table.
    #[error("{action}: the peer accepted a text different from the candidate on the table")]
    AcceptedDifferentText {
        /// The message's action.
        action: &'static str,
    },
    /// A meta message that has no place where the session stands.
    #[error("unexpected {action} ({}) while {state}", status_text(*.status))]
    UnexpectedMessage {
        /// The message's action.
        action: &'static str,
        /// Its status, for negotiation messages.
        status: Option<NegotiationStatus>,
        /// Where the session stood.
        state: &'static str,
    },
    /// A message that needs a capability the session did not negotiate.
    #[error("{what} needs capability {capability}, which was not negotiated")]
    CapabilityNotNegotiated {
        /// The capability.
        capability: Capability,
        /// What the peer sent.
        what: &'static str,
    },
    /// A data frame before both sides said `generated`.
    #[error("{protocol_type} frame before both sides generated their code")]
    FrameBeforeReady {
        /// The frame's type.
        protocol_type: ProtocolType,
    },
    /// A natural-language RESPONSE that answers no request of ours.
    #[error("naturalLanguageNegotiation RESPONSE with messageId {message_id:?} answers no pending request")]
    UnknownNaturalLanguageResponse {
        /// The id received.
        message_id: String,
    },
    /// A natural-language REQUEST reusing the id of one still pending.
    #[error("naturalLanguageNegotiation REQUEST reuses pending messageId {message_id:?}")]
    DuplicateNaturalLanguageRequest {
        /// The id received.
        message_id: String,
    },
    /// A natural-language REQUEST while as many as we take are still unanswered.
    #[error("naturalLanguageNegotiation REQUEST while {limit} are unanswered (the limit)")]
    TooManyNaturalLanguageRequests {
        /// [`SessionConfig::max_pending_natural_language`](crate::SessionConfig::max_pending_natural_language).
        limit: usize,
    },
}

impl From<FrameError> for ProtocolViolation {
    fn from(error: FrameError) -> Self {
        Self::Frame(error)
    }
}

impl From<MetaError> for ProtocolViolation {
    fn from(error: MetaError) -> Self {
        Self::Meta(error)
    }
}

fn expected_text(expected: Option<u64>) -> String {
    expected.map_or_else(
        || "0 or 1 for a first message".to_owned(),
        |value| value.to_string(),
    )
}

fn status_text(status: Option<NegotiationStatus>) -> &'static str {
    status.map_or("no status", NegotiationStatus::as_str)
}

/// Why the application's request to the session cannot be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session is closed.
    #[error("the session is closed")]
    Closed,
    /// The operation has no place where the session stands.
    #[error("cannot {operation} while {state}")]
    NotNow {
        /// What the application asked for.
        operation: &'static str,
        /// Where the session stands.
        state: &'static str,
    },
    /// Only the other role may do this.
    #[error("a {role} cannot {operation}")]
    WrongRole {
        /// What the application asked for.
        operation: &'static str,
        /// Our role.
        role: &'static str,
    },
    /// The operation needs a capability the session did not negotiate.
    #[error("capability {0} was not negotiated for this session")]
    CapabilityNotNegotiated(Capability),
    /// Data frames need both sides' code.
    #[error("cannot send a {0} frame before both sides generated their code")]
    NotReady(ProtocolType),
    /// The frame would exceed the size limit.
    #[error("a frame of {size} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The frame's size, header included.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A frame built in place ([`Session::send_application_frame`](super::Session::send_application_frame))
    /// without room for its header.
    #[error("a frame built in place needs its first byte as room for the header; it was empty")]
    NoHeaderRoom,
    /// The meta message would exceed the meta-message size limit.
    #[error("{action} of {size} bytes exceeds the meta-message limit of {limit} bytes")]
    MetaMessageTooLarge {
        /// The message's action.
        action: &'static str,
        /// Its size in bytes (protocol data, without the header).
        size: usize,
        /// `SessionConfig::max_meta_message_size`.
        limit: usize,
    },
    /// A text of ours (candidate protocol, test cases) exceeds its size limit.
    #[error("{field} of {size} bytes exceeds the limit of {limit} bytes")]
    TextTooLarge {
        /// The field it would be sent as (`candidateProtocols`, `testCases`).
        field: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit in force (`max_candidate_size`, `max_test_cases_size`).
        limit: usize,
    },
    /// A required text is empty.
    #[error("{0} must not be empty")]
    EmptyText(&'static str),
    /// No pending natural-language request has this id.
    #[error("no pending natural-language request has messageId {0:?}")]
    UnknownRequest(String),
    /// The message could not be encoded.
    #[error(transparent)]
    Message(#[from] MetaError),
}
