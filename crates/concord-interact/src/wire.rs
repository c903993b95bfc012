//! The application frames (PT 1) of an interface session: one Web Thing Protocol message
//! (data starting with `{`) or one stream chunk (data starting with [`CHUNK_PREFIX`]).
//!
//! ```text
//!  { … }                         one message, JSON (Message)
//!  0x00 | 9-byte chunk header | payload    one stream chunk (stream::header), a CREDIT
//!                                          chunk for a grant
//! ```
//!
//! Anything else is a bad frame: the receiver answers a problem and the session goes on.

use crate::message::{Message, MessageError};
use crate::problem::{Problem, ProblemType};
use crate::Limits;

/// The first byte of a frame carrying a stream chunk.
pub const CHUNK_PREFIX: u8 = 0x00;

/// The first byte of a frame carrying a message (the JSON object's `{`).
pub const MESSAGE_PREFIX: u8 = b'{';

/// One decoded application frame. (Not boxed: a frame is decoded and taken apart at
/// once, and most frames are messages.)
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Frame<'a> {
    /// A message, decoded and checked ([`Message::decode`]).
    Message(Message),
    /// A stream chunk: the bytes after the [`CHUNK_PREFIX`] (header and payload), for
    /// [`Streams::handle_chunk`](crate::stream::Streams::handle_chunk).
    Chunk(&'a [u8]),
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InteractionFrameError {
    /// An empty frame.
    #[error("empty frame")]
    Empty,
    /// A frame that starts with neither `{` nor 0x00.
    #[error("frame starts with {byte:#04x}, neither '{{' (a message) nor 0x00 (a chunk)")]
    UnknownPrefix {
        /// The first byte.
        byte: u8,
    },
    /// A frame starting with `{` that is not a valid message.
    #[error("bad message: {0}")]
    Message(#[from] MessageError),
}

impl InteractionFrameError {
    /// The problem to answer with ([`ProblemType::BadMessage`], 400).
    pub fn to_problem(&self) -> Problem {
        Problem::of(ProblemType::BadMessage, self.to_string())
    }
}

/// Decodes one frame. A message is bounded by [`Limits`] like [`Message::decode`]; a
/// chunk is only split off here (the stream layer checks it).
pub fn decode_frame<'a>(
    bytes: &'a [u8],
    limits: &Limits,
) -> Result<Frame<'a>, InteractionFrameError> {
    match bytes.split_first() {
        None => Err(InteractionFrameError::Empty),
        Some((&CHUNK_PREFIX, rest)) => Ok(Frame::Chunk(rest)),
        Some((&MESSAGE_PREFIX, _)) => Ok(Frame::Message(Message::decode(bytes, limits)?)),
        Some((&byte, _)) => Err(InteractionFrameError::UnknownPrefix { byte }),
    }
}

/// Encodes a message as a frame's data (its JSON, which starts with `{`).
pub fn encode_message(message: &Message, limits: &Limits) -> Result<Vec<u8>, MessageError> {
    message.encode(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Operation;

    #[test]
    fn message_round_trip() {
        let limits = Limits::default();
        let message = Message::request(Operation::ReadProperty, "c-1").with_name("level");
        let bytes = encode_message(&message, &limits).unwrap();
        assert_eq!(bytes.first(), Some(&MESSAGE_PREFIX));
        assert_eq!(
            decode_frame(&bytes, &limits).unwrap(),
            Frame::Message(message)
        );
    }

    #[test]
    fn chunk_is_split_off() {
        let bytes = [CHUNK_PREFIX, 1, 2, 3];
        assert_eq!(
            decode_frame(&bytes, &Limits::default()).unwrap(),
            Frame::Chunk(&[1, 2, 3])
        );
    }

    #[test]
    fn typed_errors() {
        let limits = Limits::default();
        assert_eq!(
            decode_frame(&[], &limits),
            Err(InteractionFrameError::Empty)
        );
        assert_eq!(
            decode_frame(b" {}", &limits),
            Err(InteractionFrameError::UnknownPrefix { byte: b' ' })
        );
        assert!(matches!(
            decode_frame(b"{nope", &limits),
            Err(InteractionFrameError::Message(MessageError::Json { .. }))
        ));
        assert_eq!(
            decode_frame(b"x", &limits).unwrap_err().to_problem().status,
            Some(400)
        );
    }
}
