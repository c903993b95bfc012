//! The binary chunk header of PT 1 frames: which stream, where in it, and what happens to it.
//!
//! ```text
//!  0               4               8   9
//! +---------------+---------------+---+------------ … ---+
//! | stream id u32 | sequence u32  | F |  payload          |
//! | big endian    | big endian    |   |  (the rest)       |
//! +---------------+---------------+---+------------ … ---+
//!  F = flags: END = 1, RESET = 2, TRUNCATE = 4, CREDIT = 8, STOP = 32; the other bits must
//!  be zero (16 is left undefined).
//! ```
//!
//! - A data chunk (no flag) carries the next `payload` bytes of the stream; its sequence is
//!   the previous sequence + 1, starting at 0 for each direction of each stream.
//! - END marks the last chunk of one direction (half close); it may carry a payload.
//! - TRUNCATE tells the receiver to discard everything of this direction it has buffered but
//!   not yet played (realtime voice interruption); its payload, if any, is the first data
//!   after the cut. It may be combined with END (cut, then close).
//! - CREDIT carries a credit grant for the receiver's sending direction: its payload is
//!   exactly 8 bytes, the cumulative total granted (u64 big endian, the initial credit
//!   included). It has no sequence (the field is 0 and ignored) and no other flag.
//! - STOP asks the receiver of this chunk to stop sending on its direction of the stream (a
//!   reader that wants nothing more: quinn's STOP_SENDING). Like RESET it has no sequence
//!   (the field carries a [`ResetCode`], why) and no payload or other flag. The stopped
//!   sender discards what it has queued and sends no more data; it still ends its direction
//!   with END, which closes the stopper's receive half in order.
//! - RESET aborts the stream in both directions. It has no sequence: the sequence field
//!   carries the [`ResetCode`] instead, and it carries no payload and no other flag.
//!
//! Decoding never panics and never allocates: a [`Chunk`] borrows its payload.

use std::fmt;

/// Length of the chunk header in bytes.
pub const HEADER_LEN: usize = 9;

/// A stream's id, unique within a session. The low bit names who opened it: even ids
/// belong to the requester, odd ids to the provider (as QUIC does), so both may open
/// streams at once without clashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The side that opened the stream, from the id's low bit.
    pub fn initiator(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Requester
        } else {
            Side::Provider
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {}", self.0)
    }
}

/// The two ends of a session, for stream ids: who opened the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The side that asked for the session; opens even stream ids.
    Requester,
    /// The side that serves; opens odd stream ids.
    Provider,
}

impl Side {
    /// The first stream id this side opens (0 or 1).
    pub fn first_stream_id(self) -> StreamId {
        match self {
            Self::Requester => StreamId(0),
            Self::Provider => StreamId(1),
        }
    }

    /// The other side.
    pub fn peer(self) -> Self {
        match self {
            Self::Requester => Self::Provider,
            Self::Provider => Self::Requester,
        }
    }
}

/// The flag byte of a chunk header. Only the four named bits are defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u8);

impl Flags {
    /// No flag: a data chunk.
    pub const NONE: Flags = Flags(0);
    /// The last chunk of this direction (half close).
    pub const END: Flags = Flags(1);
    /// The stream is aborted both ways; the sequence field holds the [`ResetCode`].
    pub const RESET: Flags = Flags(2);
    /// Discard what was received and not yet played.
    pub const TRUNCATE: Flags = Flags(4);
    /// A credit grant: the payload is the cumulative total (u64 big endian).
    pub const CREDIT: Flags = Flags(8);
    /// Stop sending on this direction (the receiver wants nothing more); the sequence
    /// field holds the [`ResetCode`].
    pub const STOP: Flags = Flags(32);
    /// Every defined bit.
    pub const ALL: Flags = Flags(1 | 2 | 4 | 8 | 32);

    /// The raw byte.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The flags of a byte, or `None` when it has an undefined bit set.
    pub fn from_bits(bits: u8) -> Option<Self> {
        (bits & !Self::ALL.0 == 0).then_some(Self(bits))
    }

    /// Whether every bit of `other` is set here.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets of bits.
    #[must_use]
    pub fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

/// Why a stream was reset: a 32-bit code carried in a RESET chunk's sequence field.
/// The named codes borrow HTTP's numbers; any other value is the application's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResetCode(pub u32);

impl ResetCode {
    /// The application cancelled the stream (no error).
    pub const CANCELLED: ResetCode = ResetCode(0);
    /// The peer broke the stream rules: a sequence gap or an undecodable chunk.
    pub const PROTOCOL: ResetCode = ResetCode(400);
    /// A chunk over the receiver's maximum chunk size.
    pub const TOO_LARGE: ResetCode = ResetCode(413);
    /// A chunk past the credit the receiver granted (the 429-style violation).
    pub const CREDIT_EXCEEDED: ResetCode = ResetCode(429);
    /// Something failed on the resetting side.
    pub const INTERNAL: ResetCode = ResetCode(500);
    /// A new stream refused: the receiver is at its concurrent stream limit.
    pub const REFUSED: ResetCode = ResetCode(503);
    /// No byte moved either way for longer than the resetting side allows.
    pub const IDLE: ResetCode = ResetCode(408);
}

impl fmt::Display for ResetCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            Self::CANCELLED => "cancelled",
            Self::PROTOCOL => "protocol violation",
            Self::TOO_LARGE => "chunk too large",
            Self::CREDIT_EXCEEDED => "credit exceeded",
            Self::INTERNAL => "internal error",
            Self::REFUSED => "refused",
            Self::IDLE => "idle",
            _ => "application code",
        };
        write!(f, "{} ({name})", self.0)
    }
}

/// The fixed 9-byte header of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkHeader {
    /// The stream the chunk belongs to.
    pub stream_id: StreamId,
    /// The chunk's place in its direction of the stream; on a RESET, the reset code.
    pub sequence: u32,
    /// What the chunk does besides carrying data.
    pub flags: Flags,
}

impl ChunkHeader {
    /// The header's 9 bytes: stream id, sequence (both big-endian), flags.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0; HEADER_LEN];
        bytes[..4].copy_from_slice(&self.stream_id.0.to_be_bytes());
        bytes[4..8].copy_from_slice(&self.sequence.to_be_bytes());
        bytes[8] = self.flags.bits();
        bytes
    }
}

/// A decoded chunk: its header and the payload it borrows from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// The header.
    pub header: ChunkHeader,
    /// The bytes after the header (empty on a RESET).
    pub payload: &'a [u8],
}

/// Why bytes are not a chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer bytes than a header.
    #[error("chunk of {len} bytes is shorter than its {HEADER_LEN}-byte header")]
    Short {
        /// The number of bytes received.
        len: usize,
    },
    /// The flag byte has a bit that is not END, RESET, TRUNCATE, CREDIT or STOP.
    #[error("chunk flags {flags:#04x} have undefined bits {:#04x}", flags & !Flags::ALL.bits())]
    UnknownFlags {
        /// The flag byte as received.
        flags: u8,
    },
    /// A RESET chunk with a payload.
    #[error("RESET chunk carries {len} payload bytes; it must carry none")]
    ResetWithPayload {
        /// The payload length.
        len: usize,
    },
    /// END and RESET in one chunk.
    #[error("END and RESET together: a stream either ends or is reset")]
    EndWithReset,
    /// TRUNCATE and RESET in one chunk.
    #[error("TRUNCATE and RESET together: a reset already discards everything")]
    TruncateWithReset,
    /// CREDIT with another flag.
    #[error("CREDIT with flags {flags:#04x}: a grant carries no other flag")]
    CreditWithFlags {
        /// The flag byte as received.
        flags: u8,
    },
    /// STOP with another flag.
    #[error("STOP with flags {flags:#04x}: a stop carries no other flag")]
    StopWithFlags {
        /// The flag byte as received.
        flags: u8,
    },
    /// A STOP chunk with a payload.
    #[error("STOP chunk carries {len} payload bytes; it must carry none")]
    StopWithPayload {
        /// The payload length.
        len: usize,
    },
    /// A CREDIT chunk whose payload is not 8 bytes.
    #[error("CREDIT chunk carries {len} payload bytes; it must carry 8")]
    CreditLength {
        /// The payload length.
        len: usize,
    },
}

impl<'a> Chunk<'a> {
    /// A data chunk (END set when `end`).
    pub fn data(stream_id: StreamId, sequence: u32, payload: &'a [u8], end: bool) -> Self {
        let flags = if end { Flags::END } else { Flags::NONE };
        Self {
            header: ChunkHeader {
                stream_id,
                sequence,
                flags,
            },
            payload,
        }
    }

    /// A RESET chunk carrying `code`.
    pub fn reset(stream_id: StreamId, code: ResetCode) -> Chunk<'static> {
        Chunk {
            header: ChunkHeader {
                stream_id,
                sequence: code.0,
                flags: Flags::RESET,
            },
            payload: &[],
        }
    }

    /// The bytes of a CREDIT chunk granting the peer `total` bytes on `stream_id`
    /// (cumulative, the initial credit included).
    pub fn encode_credit(stream_id: StreamId, total: u64) -> Vec<u8> {
        let payload = total.to_be_bytes();
        Chunk {
            header: ChunkHeader {
                stream_id,
                sequence: 0,
                flags: Flags::CREDIT,
            },
            payload: &payload,
        }
        .encode()
    }

    /// The cumulative total granted, when this is a CREDIT chunk.
    pub fn credit_total(&self) -> Option<u64> {
        if !self.header.flags.contains(Flags::CREDIT) {
            return None;
        }
        let bytes: [u8; 8] = self.payload.try_into().ok()?;
        Some(u64::from_be_bytes(bytes))
    }

    /// A STOP chunk carrying `code`: the sender of it wants nothing more on `stream_id`.
    pub fn stop(stream_id: StreamId, code: ResetCode) -> Chunk<'static> {
        Chunk {
            header: ChunkHeader {
                stream_id,
                sequence: code.0,
                flags: Flags::STOP,
            },
            payload: &[],
        }
    }

    /// The code, when this is a STOP chunk.
    pub fn stop_code(&self) -> Option<ResetCode> {
        self.header
            .flags
            .contains(Flags::STOP)
            .then_some(ResetCode(self.header.sequence))
    }

    /// The reset code, when this is a RESET chunk.
    pub fn reset_code(&self) -> Option<ResetCode> {
        self.header
            .flags
            .contains(Flags::RESET)
            .then_some(ResetCode(self.header.sequence))
    }

    /// Decodes a PT 1 frame's data. The payload is everything after the header; its size
    /// limit is the stream layer's business ([`StreamLimits::max_chunk_size`]).
    ///
    /// [`StreamLimits::max_chunk_size`]: super::StreamLimits::max_chunk_size
    pub fn decode(bytes: &'a [u8]) -> Result<Self, HeaderError> {
        let (Some(id), Some(seq), Some(&flag_byte)) =
            (bytes.get(0..4), bytes.get(4..8), bytes.get(8))
        else {
            return Err(HeaderError::Short { len: bytes.len() });
        };
        let payload = bytes.get(HEADER_LEN..).unwrap_or_default();
        let flags =
            Flags::from_bits(flag_byte).ok_or(HeaderError::UnknownFlags { flags: flag_byte })?;
        if flags.contains(Flags::CREDIT) {
            if flags != Flags::CREDIT {
                return Err(HeaderError::CreditWithFlags { flags: flag_byte });
            }
            if payload.len() != 8 {
                return Err(HeaderError::CreditLength { len: payload.len() });
            }
        }
        if flags.contains(Flags::STOP) {
            if flags != Flags::STOP {
                return Err(HeaderError::StopWithFlags { flags: flag_byte });
            }
            if !payload.is_empty() {
                return Err(HeaderError::StopWithPayload { len: payload.len() });
            }
        }
        if flags.contains(Flags::RESET) {
            if flags.contains(Flags::END) {
                return Err(HeaderError::EndWithReset);
            }
            if flags.contains(Flags::TRUNCATE) {
                return Err(HeaderError::TruncateWithReset);
            }
            if !payload.is_empty() {
                return Err(HeaderError::ResetWithPayload { len: payload.len() });
            }
        }
        Ok(Self {
            header: ChunkHeader {
                stream_id: StreamId(be_u32(id)),
                sequence: be_u32(seq),
                flags,
            },
            payload,
        })
    }

    /// The chunk's bytes: header, then payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        self.encode_into(&mut out);
        out
    }

    /// Appends the chunk's bytes to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.header.to_bytes());
        out.extend_from_slice(self.payload);
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0, |acc, &b| (acc << 8) | u32::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let chunk = Chunk {
            header: ChunkHeader {
                stream_id: StreamId(0x0102_0304),
                sequence: 0xA0B0_C0D0,
                flags: Flags::END.union(Flags::TRUNCATE),
            },
            payload: b"pcm",
        };
        let bytes = chunk.encode();
        assert_eq!(
            bytes,
            [1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0, 5, b'p', b'c', b'm']
        );
        assert_eq!(Chunk::decode(&bytes), Ok(chunk));
    }

    #[test]
    fn reset_carries_its_code() {
        let bytes = Chunk::reset(StreamId(7), ResetCode::CREDIT_EXCEEDED).encode();
        let chunk = Chunk::decode(&bytes).unwrap();
        assert_eq!(chunk.reset_code(), Some(ResetCode::CREDIT_EXCEEDED));
        assert_eq!(chunk.header.stream_id.initiator(), Side::Provider);
    }

    #[test]
    fn credit_carries_its_total() {
        let bytes = Chunk::encode_credit(StreamId(2), 0x0102_0304_0506_0708);
        assert_eq!(bytes.len(), HEADER_LEN + 8);
        let chunk = Chunk::decode(&bytes).unwrap();
        assert_eq!(chunk.credit_total(), Some(0x0102_0304_0506_0708));
        assert_eq!(chunk.reset_code(), None);
    }

    #[test]
    fn typed_errors() {
        assert_eq!(Chunk::decode(&[0; 8]), Err(HeaderError::Short { len: 8 }));
        assert_eq!(
            Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 16]),
            Err(HeaderError::UnknownFlags { flags: 16 })
        );
        assert_eq!(
            Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 8]),
            Err(HeaderError::CreditLength { len: 0 })
        );
        assert_eq!(
            Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1]),
            Err(HeaderError::CreditWithFlags { flags: 9 })
        );
        assert_eq!(
            Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 2, 1]),
            Err(HeaderError::ResetWithPayload { len: 1 })
        );
        assert_eq!(
            Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 3]),
            Err(HeaderError::EndWithReset)
        );
        assert_eq!(
            Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 6]),
            Err(HeaderError::TruncateWithReset)
        );
        let empty_data = Chunk::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert!(empty_data.payload.is_empty());
    }

    #[test]
    fn stop_carries_its_code_and_nothing_else() {
        let bytes = Chunk::stop(StreamId(3), ResetCode(7)).encode();
        let chunk = Chunk::decode(&bytes).unwrap();
        assert_eq!(chunk.stop_code(), Some(ResetCode(7)));
        assert_eq!(chunk.reset_code(), None);
        let mut with_payload = bytes.clone();
        with_payload.push(1);
        assert_eq!(
            Chunk::decode(&with_payload),
            Err(HeaderError::StopWithPayload { len: 1 })
        );
        let mut with_end = bytes;
        with_end[8] |= Flags::END.bits();
        assert_eq!(
            Chunk::decode(&with_end),
            Err(HeaderError::StopWithFlags { flags: 0x21 })
        );
    }
}
