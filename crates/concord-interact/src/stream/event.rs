//! What leaves the stream layer: events for the application and transmits for the driver.

use super::header::{Chunk, ResetCode, StreamId};
#[cfg(doc)]
use super::{PeerError, RecvStream, SendStream, StreamError, Streams};

/// Something that happened to a stream, for the application ([`Streams::poll_event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// The peer opened a stream (its first chunk or grant arrived).
    Opened {
        /// The stream.
        id: StreamId,
    },
    /// Data is waiting to be read (announced when the buffer stops being empty).
    Readable {
        /// The stream.
        id: StreamId,
    },
    /// Credit or queue room came back after a send was blocked or dropped.
    Writable {
        /// The stream.
        id: StreamId,
    },
    /// The peer's END arrived: after what is buffered, nothing more comes.
    Finished {
        /// The stream.
        id: StreamId,
    },
    /// The peer truncated: what we had buffered and not read is gone.
    Truncated {
        /// The stream.
        id: StreamId,
        /// Bytes discarded from our buffer (grant them again to keep the credit level).
        discarded: u64,
    },
    /// The peer stopped reading our direction ([`RecvStream::stop`] on its side): what was
    /// queued is gone, further writes are refused ([`StreamError::Stopped`]); END still
    /// ends the direction.
    Stopped {
        /// The stream.
        id: StreamId,
        /// The peer's code.
        code: ResetCode,
    },
    /// The stream was reset, both ways; its state is gone.
    Reset {
        /// The stream.
        id: StreamId,
        /// Why.
        code: ResetCode,
        /// Who reset it.
        by: ResetBy,
    },
    /// Both directions ended cleanly and everything was read; the state is gone.
    Closed {
        /// The stream.
        id: StreamId,
    },
}

/// Who reset a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetBy {
    /// The peer sent a RESET.
    Peer,
    /// We reset it because the peer broke a rule ([`PeerError::reset_code`]); a RESET
    /// went out. (A reset the application asks for raises no event.)
    Violation,
    /// We cancelled it (a RESET went out with the stop's code): on the requester's side
    /// our reader stopped and our direction ended before the peer's, so nothing of the
    /// stream was wanted any more ([`RecvStream::stop`], [`SendStream::finish`]).
    Unwanted,
}

/// What the driver sends next ([`Streams::poll_transmit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// The data of one PT 1 frame: a chunk header and its payload.
    Chunk(Vec<u8>),
    /// A credit grant for the peer's sending direction of a stream: the cumulative total in
    /// bytes, the initial credit included. It travels as a CREDIT chunk
    /// ([`Transmit::into_frame`]).
    Grant {
        /// The stream.
        id: StreamId,
        /// The cumulative credit granted.
        total: u64,
    },
}

impl Transmit {
    /// The frame to send when the streams put `prefix` in front of their chunks
    /// ([`Streams::set_frame_prefix`](super::Streams::set_frame_prefix)): a data or RESET
    /// chunk as it is (it already starts with the prefix), a grant as `prefix` and a
    /// CREDIT chunk.
    pub fn into_frame(self, prefix: &[u8]) -> Vec<u8> {
        match self {
            Self::Chunk(bytes) => bytes,
            Self::Grant { id, total } => {
                let credit = Chunk::encode_credit(id, total);
                let mut frame = Vec::with_capacity(prefix.len() + credit.len());
                frame.extend_from_slice(prefix);
                frame.extend_from_slice(&credit);
                frame
            }
        }
    }
}

/// What became of a chunk given to [`SendStream::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sent {
    /// Queued for transmission.
    Queued,
    /// Dropped for want of credit (realtime mode), and counted.
    Dropped,
}
