//! The one error type of the crate.

use std::fmt;

/// Where in the Noise machinery a [`ChannelError::Noise`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// Building the handshake state (pattern, static key, prologue, RNG).
    Setup,
    /// Writing or reading handshake message 1 (initiator → responder: `e`).
    Message1,
    /// Writing or reading handshake message 2 (responder → initiator: `e, ee, s, es`).
    Message2,
    /// Writing or reading handshake message 3 (initiator → responder: `s, se`).
    Message3,
    /// Turning the finished handshake into transport keys.
    Split,
    /// Encrypting a transport message (a chunk of a record).
    Seal,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Setup => "setup",
            Stage::Message1 => "handshake message 1",
            Stage::Message2 => "handshake message 2",
            Stage::Message3 => "handshake message 3",
            Stage::Split => "split into transport keys",
            Stage::Seal => "sealing a record",
        })
    }
}

/// Everything that can go wrong in a [`Handshake`](crate::Handshake) or a
/// [`Channel`](crate::Channel).
///
/// After any error a handshake or channel is dead: every later call returns a clone of
/// the same error (so a peer learns nothing from probing). The one exception is
/// [`Channel::seal`](crate::Channel::seal) refusing data over
/// [`ChannelConfig::max_record`](crate::ChannelConfig::max_record): that check comes
/// before any key is used, and the channel stays usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// Noise itself refused: a handshake message did not authenticate (different
    /// prologue, i.e. different DIDs, or an altered message), a bad public key, a
    /// message of the wrong length, or a setup failure.
    #[error("noise failed at {stage}: {detail}")]
    Noise {
        /// Where it failed.
        stage: Stage,
        /// What snow said (no secret material).
        detail: String,
    },
    /// A record chunk did not authenticate at the expected counter: it was tampered with,
    /// replayed, reordered, or a message before it was dropped.
    #[error(
        "record did not authenticate (tampered, replayed, reordered or after a dropped message)"
    )]
    Decrypt,
    /// A record's plaintext is over [`ChannelConfig::max_record`](crate::ChannelConfig::max_record).
    #[error("record of {size} bytes is over the limit of {limit} bytes")]
    RecordTooLarge {
        /// The record's size in plaintext bytes (on open: as far as the chunks read so far tell).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A message does not have the documented shape (truncated chunk, trailing bytes,
    /// bad flags, kind mismatch across chunks, text that is not UTF-8, bad handshake JSON).
    #[error("malformed message: {detail}")]
    Malformed {
        /// What was wrong.
        detail: String,
    },
    /// A handshake payload (ours to send, or the peer's) is over
    /// [`ChannelConfig::max_handshake_payload`](crate::ChannelConfig::max_handshake_payload).
    #[error("handshake payload of {size} bytes is over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The payload's size (for a received one: as far as the message length tells).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A handshake message longer than a Noise message may be (65535 bytes).
    #[error("handshake message of {size} bytes is over the Noise limit of {limit} bytes")]
    MessageTooLarge {
        /// The message's size.
        size: usize,
        /// The limit (65535).
        limit: usize,
    },
    /// A handshake call made when it is not this side's turn (or after the handshake finished).
    #[error("out of turn: {detail}")]
    OutOfTurn {
        /// Which call, and what was expected instead.
        detail: &'static str,
    },
    /// [`Handshake::into_channel`](crate::Handshake::into_channel) before the handshake finished.
    #[error("the handshake is not finished")]
    HandshakeIncomplete,
}

impl ChannelError {
    pub(crate) fn noise(stage: Stage, error: &snow::Error) -> Self {
        ChannelError::Noise {
            stage,
            detail: error.to_string(),
        }
    }

    pub(crate) fn malformed(detail: impl Into<String>) -> Self {
        ChannelError::Malformed {
            detail: detail.into(),
        }
    }
}
