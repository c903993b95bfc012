//! Sealed records over the transport keys: chunking, flags, rekeying.

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{ChannelError, Stage};
use crate::{ChannelConfig, MAX_CHUNK_DATA, MAX_NOISE_MESSAGE, TAG_LEN};

/// Chunk flag: the record is binary (else text).
const FLAG_BINARY: u8 = 0b001;
/// Chunk flag: another chunk of this record follows in the same message.
const FLAG_MORE: u8 = 0b010;
/// Chunk flag (last chunk only): the sender rekeys its sending key after this record.
const FLAG_REKEY: u8 = 0b100;
const FLAGS_KNOWN: u8 = FLAG_BINARY | FLAG_MORE | FLAG_REKEY;
/// The smallest chunk: the flags byte and the tag.
const MIN_CHUNK: usize = 1 + TAG_LEN;

/// What a record carries: the session's hellos are text (JSON), frames are binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// UTF-8 text (checked on open).
    Text,
    /// Bytes (a `[header][data]` frame).
    Binary,
}

/// One opened record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Text or binary.
    pub kind: RecordKind,
    /// The plaintext (UTF-8 when `kind` is [`RecordKind::Text`]).
    pub data: Vec<u8>,
}

/// The transport half of the session: seals records into WebSocket messages and opens
/// the peer's. Sans-IO: the caller passes `now` and moves the bytes.
///
/// Counter nonces are implicit, so a replayed, reordered, dropped or altered message
/// fails with [`ChannelError::Decrypt`]; after any error the channel is dead (see
/// [`ChannelError`]). See the crate docs for the wire format and rekeying.
pub struct Channel {
    transport: snow::TransportState,
    hash: [u8; 32],
    config: ChannelConfig,
    /// Scratch for one chunk's plaintext (flags + data).
    scratch: Vec<u8>,
    sent: u64,
    received: u64,
    rekeys_sent: u64,
    rekeys_received: u64,
    sent_since_rekey: u64,
    last_send_rekey: Instant,
    failed: Option<ChannelError>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("records_sent", &self.sent)
            .field("records_received", &self.received)
            .field("rekeys", &(self.rekeys_sent, self.rekeys_received))
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Channel {
    pub(crate) fn new(
        transport: snow::TransportState,
        hash: [u8; 32],
        config: ChannelConfig,
        now: Instant,
    ) -> Self {
        Channel {
            transport,
            hash,
            config,
            scratch: vec![0u8; MAX_NOISE_MESSAGE],
            sent: 0,
            received: 0,
            rekeys_sent: 0,
            rekeys_received: 0,
            sent_since_rekey: 0,
            last_send_rekey: now,
            failed: None,
        }
    }

    fn fail(&mut self, error: ChannelError) -> ChannelError {
        self.failed = Some(error.clone());
        error
    }

    fn rekey_due(&self, now: Instant) -> bool {
        let by_count = self.config.rekey_after_records != 0
            && self.sent_since_rekey + 1 >= self.config.rekey_after_records;
        let by_time = self.config.rekey_after != Duration::ZERO
            && now.saturating_duration_since(self.last_send_rekey) >= self.config.rekey_after;
        by_count || by_time
    }

    /// Seals one record as one WebSocket message (`kind` decides text or binary on open;
    /// send the result as a binary WebSocket message either way). Zero-length data is
    /// allowed. Sets the REKEY flag, and rekeys the sending key after it, when
    /// [`ChannelConfig::rekey_after_records`] records or [`ChannelConfig::rekey_after`]
    /// (measured with `now`) have passed since the last rekey.
    ///
    /// # Errors
    /// [`ChannelError::RecordTooLarge`] over [`ChannelConfig::max_record`] (the channel
    /// stays usable); [`ChannelError::Noise`] at [`Stage::Seal`] (nonce exhausted: the
    /// channel is dead); the earlier error of a dead channel.
    pub fn seal(
        &mut self,
        kind: RecordKind,
        data: &[u8],
        now: Instant,
    ) -> Result<Vec<u8>, ChannelError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if data.len() > self.config.max_record {
            return Err(ChannelError::RecordTooLarge {
                size: data.len(),
                limit: self.config.max_record,
            });
        }
        let rekey = self.rekey_due(now);
        let kind_flag = match kind {
            RecordKind::Text => 0,
            RecordKind::Binary => FLAG_BINARY,
        };
        let chunks = data.len().div_ceil(MAX_CHUNK_DATA).max(1);
        let mut out = vec![0u8; data.len() + chunks * (2 + MIN_CHUNK)];
        let mut at = 0;
        let mut pieces = data.chunks(MAX_CHUNK_DATA);
        for index in 0..chunks {
            let piece = pieces.next().unwrap_or(&[]);
            let last = index + 1 == chunks;
            let mut flags = kind_flag;
            if !last {
                flags |= FLAG_MORE;
            } else if rekey {
                flags |= FLAG_REKEY;
            }
            self.scratch[0] = flags;
            self.scratch[1..=piece.len()].copy_from_slice(piece);
            let sealed = 1 + piece.len() + TAG_LEN;
            let written = match self.transport.write_message(
                &self.scratch[..=piece.len()],
                &mut out[at + 2..at + 2 + sealed],
            ) {
                Ok(n) => n,
                Err(e) => return Err(self.fail(ChannelError::noise(Stage::Seal, &e))),
            };
            // `sealed` ≤ MAX_NOISE_MESSAGE, so it fits the u16 length prefix.
            let len = u16::try_from(written).unwrap_or(u16::MAX).to_be_bytes();
            out[at..at + 2].copy_from_slice(&len);
            at += 2 + written;
        }
        out.truncate(at);
        self.sent += 1;
        self.sent_since_rekey += 1;
        if rekey {
            self.transport.rekey_outgoing();
            self.rekeys_sent += 1;
            self.sent_since_rekey = 0;
            self.last_send_rekey = now;
        }
        Ok(out)
    }

    /// Opens one WebSocket message from the peer as one record. `now` is accepted for
    /// symmetry and future use: the receiver rekeys when the sender's REKEY flag says so,
    /// so no clock agreement is needed.
    ///
    /// # Errors
    /// [`ChannelError::Decrypt`] (tampered, replayed, reordered, after a dropped message),
    /// [`ChannelError::Malformed`] (truncated, trailing bytes, unknown flags, kind mismatch
    /// across chunks, text not UTF-8), [`ChannelError::RecordTooLarge`] (checked before
    /// decrypting the chunk that would exceed the limit). The channel is dead after any of them.
    pub fn open(&mut self, message: &[u8], now: Instant) -> Result<Record, ChannelError> {
        let _ = now;
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.open_inner(message);
        result.map_err(|e| self.fail(e))
    }

    fn open_inner(&mut self, message: &[u8]) -> Result<Record, ChannelError> {
        if message.is_empty() {
            return Err(ChannelError::malformed("empty message"));
        }
        let limit = self.config.max_record;
        let mut data = Vec::with_capacity(message.len().min(limit));
        let mut kind = None;
        let mut at = 0;
        loop {
            let Some(header) = message.get(at..at + 2) else {
                return Err(ChannelError::malformed(format!(
                    "truncated chunk length at byte {at} of {}",
                    message.len()
                )));
            };
            let len = usize::from(u16::from_be_bytes([header[0], header[1]]));
            if len < MIN_CHUNK {
                return Err(ChannelError::malformed(format!(
                    "chunk of {len} bytes at byte {at}: the smallest is {MIN_CHUNK}"
                )));
            }
            let Some(chunk) = message.get(at + 2..at + 2 + len) else {
                return Err(ChannelError::malformed(format!(
                    "chunk at byte {at} claims {len} bytes, {} remain",
                    message.len() - at - 2
                )));
            };
            let size = data.len() + len - MIN_CHUNK;
            if size > limit {
                return Err(ChannelError::RecordTooLarge { size, limit });
            }
            let plain = self
                .transport
                .read_message(chunk, &mut self.scratch)
                .map_err(|_| ChannelError::Decrypt)?;
            at += 2 + len;
            let flags = self.scratch[0];
            if flags & !FLAGS_KNOWN != 0 {
                return Err(ChannelError::malformed(format!(
                    "unknown chunk flags {flags:#04x}"
                )));
            }
            let chunk_kind = if flags & FLAG_BINARY != 0 {
                RecordKind::Binary
            } else {
                RecordKind::Text
            };
            if kind.is_some_and(|k| k != chunk_kind) {
                return Err(ChannelError::malformed(
                    "text and binary chunks in one record",
                ));
            }
            kind = Some(chunk_kind);
            data.extend_from_slice(&self.scratch[1..plain]);
            let more = flags & FLAG_MORE != 0;
            if more && flags & FLAG_REKEY != 0 {
                return Err(ChannelError::malformed(
                    "REKEY flag on a chunk that is not the last",
                ));
            }
            if more {
                if at == message.len() {
                    return Err(ChannelError::malformed(
                        "MORE flag on the message's last chunk",
                    ));
                }
                continue;
            }
            if at != message.len() {
                return Err(ChannelError::malformed(format!(
                    "{} trailing bytes after the record's last chunk",
                    message.len() - at
                )));
            }
            let kind = chunk_kind;
            if kind == RecordKind::Text && std::str::from_utf8(&data).is_err() {
                return Err(ChannelError::malformed("text record is not UTF-8"));
            }
            self.received += 1;
            if flags & FLAG_REKEY != 0 {
                self.transport.rekey_incoming();
                self.rekeys_received += 1;
            }
            return Ok(Record { kind, data });
        }
    }

    /// The handshake hash (channel binding: equal on both sides; a transcript id to show or log).
    pub fn handshake_hash(&self) -> [u8; 32] {
        self.hash
    }

    /// Records sealed so far.
    pub fn records_sent(&self) -> u64 {
        self.sent
    }

    /// Records opened so far.
    pub fn records_received(&self) -> u64 {
        self.received
    }

    /// Rekeys done so far: `(sending key, receiving key)`.
    pub fn rekeys(&self) -> (u64, u64) {
        (self.rekeys_sent, self.rekeys_received)
    }

    /// The peer's static public key, as the handshake authenticated it.
    pub fn remote_static(&self) -> Option<[u8; 32]> {
        self.transport
            .get_remote_static()
            .and_then(|key| key.try_into().ok())
    }
}
