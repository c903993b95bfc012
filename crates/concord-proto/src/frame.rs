//! The ANP frame: a one-byte header naming the protocol type, then the protocol data.
//!
//! ```text
//!  0 1 2 3 4 5 6 7
//! +-+-+-+-+-+-+-+-+---------------- - -
//! |PT |  Reserved |  Protocol data ...
//! +-+-+-+-+-+-+-+-+---------------- - -
//! ```
//!
//! Senders write the reserved bits as zero; receivers ignore them.

use std::fmt;

/// Default largest frame accepted or sent: 10 MB, header included.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 10 * 1024 * 1024;

/// The protocol type carried in the two high bits of the header byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolType {
    /// `00`: meta-protocol messages (UTF-8 JSON) that negotiate the application protocol.
    Meta = 0,
    /// `01`: application protocol messages, in the negotiated format.
    Application = 1,
    /// `10`: natural-language messages (UTF-8 text, markdown recommended).
    NaturalLanguage = 2,
    /// `11`: verification-protocol messages (test traffic, not user data).
    Verification = 3,
}

impl ProtocolType {
    /// The type whose two-bit code is the top of `header`; reserved bits are ignored.
    pub fn from_header(header: u8) -> Self {
        match header >> 6 {
            0 => Self::Meta,
            1 => Self::Application,
            2 => Self::NaturalLanguage,
            _ => Self::Verification,
        }
    }

    /// The header byte a sender writes for this type (reserved bits zero).
    pub fn header(self) -> u8 {
        (self as u8) << 6
    }

    /// A short lowercase name, as used in transcripts and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Meta => "meta",
            Self::Application => "application",
            Self::NaturalLanguage => "natural-language",
            Self::Verification => "verification",
        }
    }
}

impl fmt::Display for ProtocolType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A decoded frame borrowing its protocol data from the received bytes.
///
/// ```
/// use concord_proto::{Frame, ProtocolType, DEFAULT_MAX_FRAME_SIZE};
///
/// let bytes = Frame::encode(ProtocolType::Application, b"{\"id\":1}");
/// assert_eq!(bytes[0], 0b0100_0000);
/// let frame = Frame::decode(&bytes, DEFAULT_MAX_FRAME_SIZE)?;
/// assert_eq!(frame.protocol_type, ProtocolType::Application);
/// assert_eq!(frame.data, b"{\"id\":1}");
/// # Ok::<(), concord_proto::FrameError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// What the protocol data is.
    pub protocol_type: ProtocolType,
    /// The protocol data after the header byte.
    pub data: &'a [u8],
}

/// Why received bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Zero bytes: not even a header.
    #[error("empty frame: a frame needs at least its 1-byte header")]
    Empty,
    /// Larger than the configured limit.
    #[error("frame of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size of the frame, header included.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
}

impl<'a> Frame<'a> {
    /// Bytes of the header in front of the protocol data.
    pub const HEADER_LEN: usize = 1;

    /// Splits `bytes` into header and protocol data, enforcing `max_size` (header included).
    pub fn decode(bytes: &'a [u8], max_size: usize) -> Result<Self, FrameError> {
        if bytes.len() > max_size {
            return Err(FrameError::TooLarge {
                size: bytes.len(),
                limit: max_size,
            });
        }
        let (&header, data) = bytes.split_first().ok_or(FrameError::Empty)?;
        Ok(Self {
            protocol_type: ProtocolType::from_header(header),
            data,
        })
    }

    /// Writes a frame: header byte (reserved bits zero) followed by `data`.
    pub fn encode(protocol_type: ProtocolType, data: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(Self::HEADER_LEN + data.len());
        bytes.push(protocol_type.header());
        bytes.extend_from_slice(data);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bits_match_the_reference_implementation() {
        // Python: bytes([pt << 6]) and data[0] >> 6
        for (pt, header) in [
            (ProtocolType::Meta, 0x00),
            (ProtocolType::Application, 0x40),
            (ProtocolType::NaturalLanguage, 0x80),
            (ProtocolType::Verification, 0xC0),
        ] {
            assert_eq!(pt.header(), header);
            assert_eq!(ProtocolType::from_header(header), pt);
        }
    }

    #[test]
    fn reserved_bits_are_ignored_on_receipt() {
        let frame = Frame::decode(&[0b1011_1111, b'x'], 16).unwrap();
        assert_eq!(frame.protocol_type, ProtocolType::NaturalLanguage);
        assert_eq!(frame.data, b"x");
    }

    #[test]
    fn empty_and_oversized_frames_are_errors() {
        assert_eq!(Frame::decode(&[], 16), Err(FrameError::Empty));
        assert_eq!(
            Frame::decode(&[0; 17], 16),
            Err(FrameError::TooLarge {
                size: 17,
                limit: 16
            })
        );
        // A header alone is a frame with empty protocol data.
        assert_eq!(Frame::decode(&[0x40], 16).unwrap().data, b"");
    }
}
