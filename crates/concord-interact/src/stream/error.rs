//! Errors: what the application asked for that cannot be done ([`StreamError`]), and what
//! the peer sent that breaks the stream rules ([`PeerError`]).

use super::header::{HeaderError, ResetCode, StreamId};
#[cfg(doc)]
use super::{SendStream, StreamEvent, StreamLimits, Streams};

/// What the application asked for that cannot be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// No such live stream (never opened, ended, or reset).
    #[error("{id} is not open")]
    UnknownStream {
        /// The stream.
        id: StreamId,
    },
    /// The concurrent stream limit is reached.
    #[error("{limit} streams are open already (the limit)")]
    TooManyStreams {
        /// [`StreamLimits::max_streams`].
        limit: usize,
    },
    /// Every stream id of our parity has been used.
    #[error("stream ids exhausted")]
    IdsExhausted,
    /// [`Streams::accept`] named an id the peer cannot open (our parity).
    #[error("{id} is ours to open, not the peer's")]
    NotPeerStream {
        /// The stream.
        id: StreamId,
    },
    /// [`Streams::accept`] named a peer stream that is already over.
    #[error("{id} is closed")]
    StreamClosed {
        /// The stream.
        id: StreamId,
    },
    /// Not enough credit (or send-queue room) for the chunk; [`StreamEvent::Writable`]
    /// follows when some arrives.
    #[error("{id} is blocked: {len} bytes need credit, {available} available")]
    Blocked {
        /// The stream.
        id: StreamId,
        /// The chunk's length.
        len: u64,
        /// What may be sent now.
        available: u64,
    },
    /// A chunk over [`StreamLimits::max_chunk_size`].
    #[error("chunk of {len} bytes exceeds the limit of {limit} bytes")]
    ChunkTooLarge {
        /// The chunk's length.
        len: usize,
        /// [`StreamLimits::max_chunk_size`].
        limit: usize,
    },
    /// Sending after the peer's STOP ([`StreamEvent::Stopped`]): it reads nothing more of
    /// this direction. [`SendStream::finish`] still ends it in order.
    #[error("{id}: the peer stopped reading (code {code})")]
    Stopped {
        /// The stream.
        id: StreamId,
        /// The peer's code.
        code: ResetCode,
    },
    /// Sending after [`SendStream::finish`].
    #[error("{id}: our direction is finished")]
    SendFinished {
        /// The stream.
        id: StreamId,
    },
    /// The 32-bit sequence space of our direction is used up; finish or reset the stream.
    #[error("{id}: sequence numbers exhausted")]
    SequenceExhausted {
        /// The stream.
        id: StreamId,
    },
    /// [`Streams::open`] or [`Streams::accept`] with an initial credit larger than
    /// [`StreamLimits::max_receive_buffer`]: the peer, which starts with the same credit,
    /// could send more than we hold, so the stream is not opened (an accepted one is
    /// refused with a RESET, [`ResetCode::REFUSED`]). The interface document's
    /// `stream.initialCredit` must fit both peers' receive buffers.
    #[error(
        "an initial credit of {credit} bytes exceeds the receive buffer of {limit} bytes per stream"
    )]
    CreditExceedsBuffer {
        /// The initial credit asked for.
        credit: u64,
        /// [`StreamLimits::max_receive_buffer`].
        limit: u64,
    },
    /// An initial credit ([`Streams::open`], [`Streams::accept`]: an accepted stream is
    /// refused with a RESET, [`ResetCode::REFUSED`]) or a grant that does not fit in the
    /// room left in the session credit ([`StreamLimits::max_session_buffer`]).
    #[error(
        "{credit} bytes of credit exceed the room of {room} bytes left in the session's \
         receive buffer"
    )]
    SessionFull {
        /// The credit asked for.
        credit: u64,
        /// What the session may still grant.
        room: u64,
    },
    /// A grant that would let more than [`StreamLimits::max_receive_buffer`] bytes wait
    /// unread.
    #[error("{id}: granting {requested} bytes exceeds the receive buffer ({room} bytes of room)")]
    GrantExceedsBuffer {
        /// The stream.
        id: StreamId,
        /// The grant asked for.
        requested: u64,
        /// What may still be granted.
        room: u64,
    },
}

/// Something the peer sent that breaks the stream rules. The session survives: the chunk
/// is dropped, and when [`PeerError::reset_code`] says so the stream was reset (a RESET
/// went out and [`StreamEvent::Reset`] was raised).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// The bytes are not a chunk.
    #[error("bad chunk: {0}")]
    Header(#[from] HeaderError),
    /// A chunk past the credit we granted (the 429-style violation); the stream is reset
    /// with [`ResetCode::CREDIT_EXCEEDED`].
    #[error("{id}: chunk of {len} bytes past the granted credit ({available} bytes left)")]
    ChunkPastCredit {
        /// The stream.
        id: StreamId,
        /// The chunk's length.
        len: u64,
        /// What the peer still had.
        available: u64,
    },
    /// A chunk over [`StreamLimits::max_chunk_size`]; the stream is reset with
    /// [`ResetCode::TOO_LARGE`].
    #[error("{id}: chunk of {len} bytes exceeds the limit of {limit} bytes")]
    ChunkTooLarge {
        /// The stream.
        id: StreamId,
        /// The payload length.
        len: usize,
        /// [`StreamLimits::max_chunk_size`].
        limit: usize,
    },
    /// A chunk skipped sequence numbers (data was lost); the stream is reset with
    /// [`ResetCode::PROTOCOL`].
    #[error("{id}: sequence gap, expected {expected}, got {got}")]
    SequenceGap {
        /// The stream.
        id: StreamId,
        /// The sequence due.
        expected: u64,
        /// The sequence received.
        got: u32,
    },
    /// A chunk repeated an earlier sequence number; dropped.
    #[error("{id}: duplicate chunk, expected sequence {expected}, got {got}")]
    Duplicate {
        /// The stream.
        id: StreamId,
        /// The sequence due.
        expected: u64,
        /// The sequence received.
        got: u32,
    },
    /// A chunk after the peer's END; dropped.
    #[error("{id}: chunk {sequence} after END")]
    DataAfterEnd {
        /// The stream.
        id: StreamId,
        /// The chunk's sequence.
        sequence: u32,
    },
    /// A chunk or grant for a stream that is over (closed or reset); dropped. After a
    /// reset this is a normal race (chunks already in flight), not misbehaviour.
    #[error("{id} is closed")]
    StreamClosed {
        /// The stream.
        id: StreamId,
    },
    /// A chunk or grant for a stream of our parity that we never opened; dropped.
    #[error("{id} was never opened")]
    UnknownStream {
        /// The stream.
        id: StreamId,
    },
    /// A new peer stream (opened by its first chunk) whose initial credit does not fit in
    /// the room left in the session credit ([`StreamLimits::max_session_buffer`]); refused
    /// with a RESET ([`ResetCode::REFUSED`]).
    #[error(
        "{id} refused: its credit of {credit} bytes exceeds the session's room of {room} bytes"
    )]
    SessionFull {
        /// The stream.
        id: StreamId,
        /// [`StreamLimits::initial_credit`].
        credit: u64,
        /// What the session may still grant.
        room: u64,
    },
    /// A new peer stream past [`StreamLimits::max_streams`]; refused with a RESET
    /// ([`ResetCode::REFUSED`]).
    #[error("{id} refused: {limit} streams are open already")]
    TooManyStreams {
        /// The stream.
        id: StreamId,
        /// [`StreamLimits::max_streams`].
        limit: usize,
    },
}

impl PeerError {
    /// The code the stream was reset with because of this error, if it was.
    pub fn reset_code(&self) -> Option<ResetCode> {
        match self {
            Self::ChunkPastCredit { .. } => Some(ResetCode::CREDIT_EXCEEDED),
            Self::ChunkTooLarge { .. } => Some(ResetCode::TOO_LARGE),
            Self::SequenceGap { .. } => Some(ResetCode::PROTOCOL),
            Self::TooManyStreams { .. } | Self::SessionFull { .. } => Some(ResetCode::REFUSED),
            Self::Header(_)
            | Self::Duplicate { .. }
            | Self::DataAfterEnd { .. }
            | Self::StreamClosed { .. }
            | Self::UnknownStream { .. } => None,
        }
    }
}
