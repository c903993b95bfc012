//! The end-to-end encrypted channel under Concord's frames, sans-IO: a Noise XX handshake
//! (`Noise_XX_25519_ChaChaPoly_BLAKE2s`, via [`snow`](https://docs.rs/snow)) between two
//! DID-identified agents, then sealed records with counter nonces, chunking and rekeying.
//!
//! Like `concord-proto`, this crate does no I/O and reads no clock (the caller passes
//! `now`); the only randomness is the handshake's ephemeral key, from the operating
//! system through snow's default resolver ([`Handshake::new`]) or injected for tests
//! ([`Handshake::with_rng`]). No cryptography is written here: snow does it all.
//!
//! # How the node drives it
//! After the WebSocket upgrade (subprotocol [`SUBPROTOCOL`]) the requester is the
//! [`Role::Initiator`] and the provider the [`Role::Responder`]. Each uses its DID
//! document's keyAgreement X25519 key as its static key, and both use the same
//! [`prologue`] naming both DIDs, so a peer that expected other DIDs fails the handshake.
//! Each handshake message is one binary WebSocket message; afterwards every WebSocket
//! message is one sealed record. The node checks that [`Handshake::remote_static`] is the
//! keyAgreement key of the DID the peer claims in [`Handshake::remote_payload`].
//!
//! ```
//! use std::time::Instant;
//! use concord_secure::{prologue, ChannelConfig, Handshake, HandshakePayload, RecordKind, Role};
//!
//! # fn main() -> Result<(), concord_secure::ChannelError> {
//! let (alice_key, bob_key) = ([1u8; 32], [2u8; 32]); // X25519 secrets (keyAgreement keys)
//! let p = prologue(Some("did:wba:a.example"), "did:wba:b.example");
//! let config = ChannelConfig::default();
//! let me = |did: &str| HandshakePayload { did: Some(did.into()) };
//! let mut alice = Handshake::new(Role::Initiator, &alice_key, &p, &me("did:wba:a.example"), &config)?;
//! let mut bob = Handshake::new(Role::Responder, &bob_key, &p, &me("did:wba:b.example"), &config)?;
//! bob.read_message(&alice.write_message()?)?; // -> e
//! alice.read_message(&bob.write_message()?)?; // <- e, ee, s, es + bob's payload
//! bob.read_message(&alice.write_message()?)?; // -> s, se + alice's payload
//! assert!(alice.is_finished() && bob.is_finished());
//! assert_eq!(bob.remote_payload().and_then(|p| p.did.as_deref()), Some("did:wba:a.example"));
//!
//! let now = Instant::now();
//! let (mut alice, mut bob) = (alice.into_channel(now)?, bob.into_channel(now)?);
//! let message = alice.seal(RecordKind::Binary, b"\x01frame", now)?; // one WebSocket message
//! let record = bob.open(&message, now)?;
//! assert_eq!((record.kind, record.data.as_slice()), (RecordKind::Binary, &b"\x01frame"[..]));
//! assert_eq!(alice.handshake_hash(), bob.handshake_hash());
//! # Ok(()) }
//! ```
//!
//! # Prologue
//! [`prologue`]: `concord-noise-xx/1\n`, then the initiator's DID as a presence byte
//! (`0` anonymous, `1` present) and, when present, its length (u64 big-endian) and UTF-8
//! bytes, then the responder's DID as length (u64 big-endian) and bytes.
//!
//! # Handshake payloads
//! Message 1 carries no payload (it is not encrypted); message 2 carries the responder's
//! and message 3 the initiator's [`HandshakePayload`], JSON `{"v":1,"did":"…"}`, at most
//! [`ChannelConfig::max_handshake_payload`] bytes (checked from the message length before
//! decrypting). Unknown fields are ignored.
//!
//! # Wire format of one sealed record
//! One WebSocket message = one record = one or more chunks, back to back:
//!
//! ```text
//! chunk     = length:u16 BE | noise transport message (length bytes, ≤ 65535)
//! plaintext = flags:u8 | bytes (≤ 65518 per chunk)
//! flags     = bit 0 KIND  (0 text, 1 binary; the same on every chunk of a record)
//!             bit 1 MORE  (another chunk of this record follows in this message)
//!             bit 2 REKEY (last chunk only: the sender rekeys its sending key after this
//!                          record, the receiver its receiving key after opening it)
//!             bits 3-7    zero
//! ```
//!
//! A zero-length record is one chunk holding only the flags. The nonce is each chunk's
//! implicit counter (snow's transport state), so a replayed, reordered, dropped or altered
//! chunk fails to authenticate ([`ChannelError::Decrypt`]). A message that ends inside a
//! chunk, ends with MORE set, has bytes after the last chunk, mixes kinds, sets unknown
//! flags, or carries text that is not UTF-8 is [`ChannelError::Malformed`]; a record whose
//! chunks add up to more than [`ChannelConfig::max_record`] is
//! [`ChannelError::RecordTooLarge`] before the chunk over the limit is decrypted. After any
//! error the channel is dead and returns that error again (no oracle).
//!
//! # Rekeying
//! The sender sets REKEY on a record when [`ChannelConfig::rekey_after_records`] records
//! (this one included) or [`ChannelConfig::rekey_after`] (measured with the `now` passed
//! to [`Channel::seal`]) have passed since its last rekey, then rekeys its sending key
//! (Noise `REKEY`: the next key is the encryption of zeros under the old one at nonce
//! 2^64-1). The receiver follows the flag, so the two sides need no clock agreement; each
//! direction rekeys on its own.
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::time::Duration;

mod channel;
mod error;
mod handshake;

pub use channel::{Channel, Record, RecordKind};
pub use error::{ChannelError, Stage};
pub use handshake::{Handshake, HandshakePayload, Role};

/// The Noise protocol name both sides use.
pub const NOISE_PATTERN: &str = "Noise_XX_25519_ChaChaPoly_BLAKE2s";

/// The WebSocket subprotocol token that announces this channel.
pub const SUBPROTOCOL: &str = "concord-noise-xx.1";

/// The largest Noise message (the spec's limit), so the largest handshake message and chunk.
pub const MAX_NOISE_MESSAGE: usize = 65535;

/// The AEAD tag every encrypted Noise payload carries (ChaChaPoly).
pub const TAG_LEN: usize = 16;

/// Record bytes one chunk carries: a Noise message less the tag and the flags byte.
pub const MAX_CHUNK_DATA: usize = MAX_NOISE_MESSAGE - TAG_LEN - 1;

const PROLOGUE_LABEL: &[u8] = b"concord-noise-xx/1\n";

/// The handshake prologue binding both DIDs (see the crate docs for its layout). Both
/// sides must compute it from the same DIDs, or the handshake fails at message 2. An
/// anonymous initiator (`None`) is bound as such, distinct from any DID, even an empty one.
pub fn prologue(initiator_did: Option<&str>, responder_did: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        PROLOGUE_LABEL.len() + 17 + initiator_did.map_or(0, str::len) + responder_did.len(),
    );
    out.extend_from_slice(PROLOGUE_LABEL);
    match initiator_did {
        None => out.push(0),
        Some(did) => {
            out.push(1);
            out.extend_from_slice(&(did.len() as u64).to_be_bytes());
            out.extend_from_slice(did.as_bytes());
        }
    }
    out.extend_from_slice(&(responder_did.len() as u64).to_be_bytes());
    out.extend_from_slice(responder_did.as_bytes());
    out
}

/// Limits and rekeying budgets of a handshake and its channel.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_record` | 2 MiB + 16 (2,097,168) | plaintext bytes per record, either way |
/// | `max_handshake_payload` | 4 KiB | bytes of a [`HandshakePayload`]'s JSON, either way |
/// | `rekey_after_records` | 65,536 | records sent between rekeys (0: never by count) |
/// | `rekey_after` | 10 min | time between rekeys of the sending key (zero: never by time) |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Plaintext bytes per record (default 2 MiB + 16: a 2 MiB frame and its header).
    pub max_record: usize,
    /// Bytes of a handshake payload (default 4 KiB; never more than fits a Noise message).
    pub max_handshake_payload: usize,
    /// Records sent between two rekeys of the sending key (default 1 << 16; 0 disables).
    pub rekey_after_records: u64,
    /// Time between two rekeys of the sending key (default 10 minutes; zero disables).
    pub rekey_after: Duration,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            max_record: 2 * 1024 * 1024 + 16,
            max_handshake_payload: 4 * 1024,
            rekey_after_records: 1 << 16,
            rekey_after: Duration::from_secs(600),
        }
    }
}
