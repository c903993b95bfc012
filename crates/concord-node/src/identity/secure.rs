//! The Noise channel under the frames: the XX handshake as binary WebSocket messages right
//! after the upgrade, then every hello and `[header][data]` frame a sealed record
//! (`concord_secure`). A replayed, reordered, dropped or altered message fails
//! authentication and ends the session with 1002.

use std::time::{Duration, Instant};

use concord_secure::{ChannelConfig, Handshake, HandshakePayload, RecordKind, Role};

use super::PeerCheckError;
use crate::config::human;
use crate::transport::{close_code, Incoming, Transport, TransportError};

/// The largest WebSocket message that carries a sealed record of `max_record` bytes: the
/// record's chunks each add a length, a flags byte and a tag.
pub(crate) fn sealed_size(max_record: usize) -> usize {
    let chunks = max_record.div_ceil(concord_secure::MAX_CHUNK_DATA).max(1);
    max_record + chunks * (2 + 1 + concord_secure::TAG_LEN)
}

/// Why a session both sides could have encrypted is refused in the clear.
pub(crate) fn stripped_channel() -> String {
    format!(
        "both hellos list encryptedChannel, yet the session is plain: the WebSocket subprotocol `{}` was dropped on the way (a proxy or an attacker); refusing to go on in the clear",
        concord_secure::SUBPROTOCOL
    )
}

/// What the handshake established about the peer.
#[derive(Debug, Clone)]
pub(crate) struct PeerStatic {
    /// The peer's static X25519 key.
    pub(crate) key: [u8; 32],
    /// The DID the peer named in its handshake payload.
    pub(crate) did: Option<String>,
    /// The handshake hash, the same on both sides: the channel's id.
    pub(crate) handshake_hash: [u8; 32],
}

/// Why the handshake failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HandshakeFailure {
    #[error("no Noise handshake message within {}", human(*.0))]
    Timeout(Duration),
    #[error("the peer closed the connection during the Noise handshake")]
    PeerClosed,
    #[error("expected a Noise handshake message (binary), got a text message")]
    Text,
    #[error("Noise handshake: {0}")]
    Noise(String),
    #[error("{0}")]
    Transport(String),
}

impl HandshakeFailure {
    /// The close code and reason to send, when the connection is still up.
    pub(crate) fn close_frame(&self) -> Option<(u16, String)> {
        match self {
            Self::PeerClosed | Self::Transport(_) => None,
            Self::Timeout(_) => Some((close_code::POLICY, self.to_string())),
            Self::Text | Self::Noise(_) => Some((close_code::PROTOCOL_ERROR, self.to_string())),
        }
    }
}

/// Runs the XX handshake on `transport` as `role` within `limit`: our static key, the
/// prologue binding both DIDs, our DID in the payload. Returns the channel to seal with
/// ([`SecureSocket::new`]) and what the peer proved.
pub(crate) async fn handshake<T: Transport>(
    transport: &mut T,
    role: Role,
    local_static: &[u8; 32],
    prologue: &[u8],
    our_did: Option<&str>,
    config: &ChannelConfig,
    limit: Duration,
) -> Result<(concord_secure::Channel, PeerStatic), HandshakeFailure> {
    let payload = HandshakePayload {
        did: our_did.map(str::to_owned),
    };
    let mut state = match Handshake::new(role, local_static, prologue, &payload, config) {
        Ok(state) => state,
        Err(error) => return Err(HandshakeFailure::Noise(error.to_string())),
    };
    let steps = tokio::time::timeout(limit, async {
        while !state.is_finished() {
            if state.is_my_turn() {
                let message = state
                    .write_message()
                    .map_err(|error| HandshakeFailure::Noise(error.to_string()))?;
                transport
                    .feed_binary(message)
                    .await
                    .map_err(|error| HandshakeFailure::Transport(error.to_string()))?;
                transport
                    .flush()
                    .await
                    .map_err(|error| HandshakeFailure::Transport(error.to_string()))?;
            } else {
                let message = match transport.recv().await {
                    None | Some(Ok(Incoming::Close(_))) => {
                        return Err(HandshakeFailure::PeerClosed)
                    }
                    Some(Err(error)) => return Err(HandshakeFailure::Transport(error.to_string())),
                    Some(Ok(Incoming::Text(_))) => return Err(HandshakeFailure::Text),
                    Some(Ok(Incoming::Binary(message))) => message,
                    // A heartbeat of the peer's, not a handshake message.
                    Some(Ok(Incoming::Pong)) => continue,
                };
                state
                    .read_message(&message)
                    .map_err(|error| HandshakeFailure::Noise(error.to_string()))?;
            }
        }
        Ok(())
    })
    .await;
    match steps {
        Err(_) => return Err(HandshakeFailure::Timeout(limit)),
        Ok(Err(failure)) => return Err(failure),
        Ok(Ok(())) => {}
    }
    let peer = match (state.remote_static(), state.handshake_hash()) {
        (Some(key), Some(handshake_hash)) => PeerStatic {
            key,
            did: state
                .remote_payload()
                .and_then(|payload| payload.did.clone()),
            handshake_hash,
        },
        _ => {
            return Err(HandshakeFailure::Noise(
                "the handshake ended without the peer's static key".into(),
            ))
        }
    };
    let channel = state
        .into_channel(Instant::now())
        .map_err(|error| HandshakeFailure::Noise(error.to_string()))?;
    Ok((channel, peer))
}

/// A WebSocket whose messages are Noise records: what the session reads and writes is
/// plaintext, what crosses the network is sealed.
pub(crate) struct SecureSocket<T> {
    inner: T,
    channel: concord_secure::Channel,
}

impl<T: Transport> SecureSocket<T> {
    /// `inner`, sealed with the channel a [`handshake`] on it established.
    pub(crate) fn new(inner: T, channel: concord_secure::Channel) -> Self {
        Self { inner, channel }
    }

    fn seal(&mut self, kind: RecordKind, data: &[u8]) -> Result<Vec<u8>, TransportError> {
        self.channel
            .seal(kind, data, Instant::now())
            .map_err(|error| match error {
                concord_secure::ChannelError::RecordTooLarge { limit, .. } => {
                    TransportError::TooLarge { limit }
                }
                other => TransportError::Other(format!("sealing a record: {other}")),
            })
    }
}

impl<T: Transport> Transport for SecureSocket<T> {
    async fn recv(&mut self) -> Option<Result<Incoming, TransportError>> {
        let message = match self.inner.recv().await? {
            Ok(Incoming::Binary(message)) => message,
            Ok(Incoming::Text(_)) => {
                let reason = "a plaintext message on the encrypted channel";
                let _ = self
                    .inner
                    .send_close(close_code::PROTOCOL_ERROR, reason.to_owned())
                    .await;
                return Some(Err(TransportError::Other(reason.to_owned())));
            }
            other => return Some(other),
        };
        match self.channel.open(&message, Instant::now()) {
            Ok(record) => Some(Ok(match record.kind {
                RecordKind::Text => match String::from_utf8(record.data) {
                    Ok(text) => Incoming::Text(text),
                    Err(_) => {
                        return Some(Err(TransportError::Other(
                            "a text record that is not UTF-8".into(),
                        )))
                    }
                },
                _ => Incoming::Binary(record.data.into()),
            })),
            Err(error) => {
                let reason = format!("encrypted channel: {error}");
                let _ = self
                    .inner
                    .send_close(
                        close_code::PROTOCOL_ERROR,
                        crate::transport::close_reason(&reason),
                    )
                    .await;
                Some(Err(TransportError::Other(reason)))
            }
        }
    }

    async fn feed_binary(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        let sealed = self.seal(RecordKind::Binary, &bytes)?;
        self.inner.feed_binary(sealed).await
    }

    async fn send_text(&mut self, text: String) -> Result<(), TransportError> {
        let sealed = self.seal(RecordKind::Text, text.as_bytes())?;
        self.inner.feed_binary(sealed).await?;
        self.inner.flush().await
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        self.inner.flush().await
    }

    async fn send_close(&mut self, code: u16, reason: String) -> Result<(), TransportError> {
        self.inner.send_close(code, reason).await
    }

    async fn send_ping(&mut self) -> Result<(), TransportError> {
        self.inner.send_ping().await
    }
}

/// A session's WebSocket: plain, or in the Noise channel.
pub(crate) enum Channel<T> {
    /// Frames as they are (a peer that does not speak Noise, where the policy allows it).
    Plain(T),
    /// Every message sealed.
    Secure(Box<SecureSocket<T>>),
}

impl<T: Transport> Channel<T> {
    /// Whether the channel is encrypted.
    pub(crate) fn is_secure(&self) -> bool {
        matches!(self, Self::Secure(_))
    }
}

impl<T: Transport> Transport for Channel<T> {
    async fn recv(&mut self) -> Option<Result<Incoming, TransportError>> {
        match self {
            Self::Plain(socket) => socket.recv().await,
            Self::Secure(socket) => socket.recv().await,
        }
    }

    async fn feed_binary(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        match self {
            Self::Plain(socket) => socket.feed_binary(bytes).await,
            Self::Secure(socket) => socket.feed_binary(bytes).await,
        }
    }

    async fn send_text(&mut self, text: String) -> Result<(), TransportError> {
        match self {
            Self::Plain(socket) => socket.send_text(text).await,
            Self::Secure(socket) => socket.send_text(text).await,
        }
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        match self {
            Self::Plain(socket) => socket.flush().await,
            Self::Secure(socket) => socket.flush().await,
        }
    }

    async fn send_close(&mut self, code: u16, reason: String) -> Result<(), TransportError> {
        match self {
            Self::Plain(socket) => socket.send_close(code, reason).await,
            Self::Secure(socket) => socket.send_close(code, reason).await,
        }
    }

    async fn send_ping(&mut self) -> Result<(), TransportError> {
        match self {
            Self::Plain(socket) => socket.send_ping().await,
            Self::Secure(socket) => socket.send_ping().await,
        }
    }
}

/// Checks what the handshake proved against who the peer must be: with `expected`, the DID
/// it named and a static key listed in that DID's `keyAgreement`; without, no DID at all
/// (a DID is only believed when authenticated, on the upgrade or by its document).
pub(crate) async fn verify_peer(
    identity: &super::NodeIdentity,
    expected: Option<&concord_identity::Did>,
    peer: &PeerStatic,
) -> Result<(), PeerCheckError> {
    let Some(did) = expected else {
        return match &peer.did {
            None => Ok(()),
            Some(named) => Err(PeerCheckError::Unauthenticated {
                named: named.clone(),
            }),
        };
    };
    if peer.did.as_deref() != Some(did.as_str()) {
        return Err(PeerCheckError::OtherDid {
            named: peer.did.clone(),
            expected: did.clone(),
        });
    }
    let document = identity
        .resolver
        .resolve(did, None)
        .await
        .map_err(PeerCheckError::Resolve)?;
    if document.key_agreement().contains(&peer.key) {
        Ok(())
    } else {
        Err(PeerCheckError::NotKeyAgreement { did: did.clone() })
    }
}
