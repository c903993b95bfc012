//! The Noise XX handshake: three messages, then a [`Channel`].

use std::cell::RefCell;
use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver, RingResolver};
use snow::types::{Cipher, Dh, Hash, Random};

use crate::channel::Channel;
use crate::error::{ChannelError, Stage};
use crate::{ChannelConfig, MAX_NOISE_MESSAGE, NOISE_PATTERN};

/// Bytes Noise adds to message 1 of XX (25519): the ephemeral public key.
const MSG1_OVERHEAD: usize = 32;
/// Bytes Noise adds to message 2: ephemeral key, encrypted static key and its tag, payload tag.
const MSG2_OVERHEAD: usize = 32 + 32 + 16 + 16;
/// Bytes Noise adds to message 3: encrypted static key and its tag, payload tag.
const MSG3_OVERHEAD: usize = 32 + 16 + 16;
/// The only payload version this crate writes and reads.
const PAYLOAD_VERSION: u64 = 1;

/// Which side of the handshake this is.
///
/// The requester (the side that opened the WebSocket) is the [`Role::Initiator`]; the
/// provider is the [`Role::Responder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Writes messages 1 and 3.
    Initiator,
    /// Writes message 2.
    Responder,
}

/// What a side says about itself in the handshake (message 2 for the responder, message 3
/// for the initiator), encrypted under the handshake keys.
///
/// On the wire: small JSON, `{"v":1,"did":"did:wba:…"}` (`did` omitted or `null` for an
/// anonymous side). Unknown fields are ignored; a version other than 1, a duplicate field
/// or a payload over [`ChannelConfig::max_handshake_payload`] is refused. The DID here is
/// a *claim*: the node checks it against the prologue and checks that
/// [`Handshake::remote_static`] is that DID document's keyAgreement key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandshakePayload {
    /// This side's DID, or `None` for an anonymous initiator.
    pub did: Option<String>,
}

#[derive(Serialize)]
struct PayloadOut<'a> {
    v: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    did: Option<&'a str>,
}

#[derive(Deserialize)]
struct PayloadIn {
    v: u64,
    #[serde(default)]
    did: Option<String>,
}

impl HandshakePayload {
    fn encode(&self) -> Result<Vec<u8>, ChannelError> {
        serde_json::to_vec(&PayloadOut {
            v: PAYLOAD_VERSION,
            did: self.did.as_deref(),
        })
        .map_err(|e| ChannelError::malformed(format!("handshake payload: {e}")))
    }

    fn decode(bytes: &[u8]) -> Result<Self, ChannelError> {
        let wire: PayloadIn = serde_json::from_slice(bytes)
            .map_err(|e| ChannelError::malformed(format!("handshake payload: {e}")))?;
        if wire.v != PAYLOAD_VERSION {
            return Err(ChannelError::malformed(format!(
                "handshake payload version {} (only {PAYLOAD_VERSION} is known)",
                wire.v
            )));
        }
        Ok(HandshakePayload { did: wire.did })
    }
}

/// The resolver `Builder::new` uses (ring's ciphers and hashes, the default resolver's
/// for the rest), except for the RNG, which is the injected one (used once, for the
/// ephemeral key).
struct InjectedRng {
    rng: RefCell<Option<Box<dyn Random>>>,
}

impl CryptoResolver for InjectedRng {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        self.rng.borrow_mut().take()
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        RingResolver
            .resolve_hash(choice)
            .or_else(|| DefaultResolver.resolve_hash(choice))
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        RingResolver
            .resolve_cipher(choice)
            .or_else(|| DefaultResolver.resolve_cipher(choice))
    }
}

struct FnRng<F>(F);

impl<F: FnMut(&mut [u8]) + Send + Sync> Random for FnRng<F> {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        (self.0)(dest);
        Ok(())
    }
}

/// One side of a Noise XX handshake (`Noise_XX_25519_ChaChaPoly_BLAKE2s`), sans-IO.
///
/// The caller moves the bytes: while [`is_my_turn`](Self::is_my_turn), send
/// [`write_message`](Self::write_message) as one binary WebSocket message; otherwise feed
/// the next received message to [`read_message`](Self::read_message). When
/// [`is_finished`](Self::is_finished), check [`remote_static`](Self::remote_static) and
/// [`remote_payload`](Self::remote_payload), then [`into_channel`](Self::into_channel).
///
/// | message | direction | Noise tokens | payload |
/// |---|---|---|---|
/// | 1 | initiator → responder | `e` | none (it would travel in clear) |
/// | 2 | responder → initiator | `e, ee, s, es` | the responder's [`HandshakePayload`] |
/// | 3 | initiator → responder | `s, se` | the initiator's [`HandshakePayload`] |
///
/// After any error the handshake is dead and every call returns the same error.
pub struct Handshake {
    state: snow::HandshakeState,
    role: Role,
    /// Handshake messages written or read so far (0..=3).
    messages: u8,
    local_payload: Vec<u8>,
    max_payload: usize,
    config: ChannelConfig,
    remote_payload: Option<HandshakePayload>,
    failed: Option<ChannelError>,
}

impl fmt::Debug for Handshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handshake")
            .field("role", &self.role)
            .field("messages", &self.messages)
            .field("remote_payload", &self.remote_payload)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Handshake {
    /// Starts a handshake with the local static X25519 secret (the DID document's
    /// keyAgreement key), the [`prologue`](crate::prologue) binding both DIDs, and what
    /// this side says about itself. The ephemeral key comes from the operating system's
    /// RNG (snow's default resolver).
    ///
    /// # Errors
    /// [`ChannelError::PayloadTooLarge`] if `payload` encodes to more than
    /// `config.max_handshake_payload` bytes; [`ChannelError::Noise`] at
    /// [`Stage::Setup`] if snow cannot build the state.
    pub fn new(
        role: Role,
        local_static_secret: &[u8; 32],
        prologue: &[u8],
        payload: &HandshakePayload,
        config: &ChannelConfig,
    ) -> Result<Self, ChannelError> {
        let params = NOISE_PATTERN
            .parse()
            .map_err(|e| ChannelError::noise(Stage::Setup, &e))?;
        Self::build(
            snow::Builder::new(params),
            role,
            local_static_secret,
            prologue,
            payload,
            config,
        )
    }

    /// Like [`new`](Self::new), but the ephemeral key's randomness comes from `rng`
    /// (called to fill a buffer; used once). For deterministic tests, fuzzing and
    /// benchmarks: a production handshake must use [`new`](Self::new), since a repeated
    /// ephemeral key loses forward secrecy.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_rng(
        role: Role,
        local_static_secret: &[u8; 32],
        prologue: &[u8],
        payload: &HandshakePayload,
        config: &ChannelConfig,
        rng: impl FnMut(&mut [u8]) + Send + Sync + 'static,
    ) -> Result<Self, ChannelError> {
        let params = NOISE_PATTERN
            .parse()
            .map_err(|e| ChannelError::noise(Stage::Setup, &e))?;
        let resolver = InjectedRng {
            rng: RefCell::new(Some(Box::new(FnRng(rng)))),
        };
        let builder = snow::Builder::with_resolver(params, Box::new(resolver));
        Self::build(
            builder,
            role,
            local_static_secret,
            prologue,
            payload,
            config,
        )
    }

    fn build(
        builder: snow::Builder<'_>,
        role: Role,
        local_static_secret: &[u8; 32],
        prologue: &[u8],
        payload: &HandshakePayload,
        config: &ChannelConfig,
    ) -> Result<Self, ChannelError> {
        let local_payload = payload.encode()?;
        // Whatever the configuration says, a payload must fit in one Noise message.
        let max_payload = config
            .max_handshake_payload
            .min(MAX_NOISE_MESSAGE - MSG2_OVERHEAD);
        if local_payload.len() > max_payload {
            return Err(ChannelError::PayloadTooLarge {
                size: local_payload.len(),
                limit: max_payload,
            });
        }
        let setup = |e: snow::Error| ChannelError::noise(Stage::Setup, &e);
        let builder = builder
            .local_private_key(local_static_secret)
            .map_err(setup)?
            .prologue(prologue)
            .map_err(setup)?;
        let state = match role {
            Role::Initiator => builder.build_initiator(),
            Role::Responder => builder.build_responder(),
        }
        .map_err(setup)?;
        Ok(Handshake {
            state,
            role,
            messages: 0,
            local_payload,
            max_payload,
            config: config.clone(),
            remote_payload: None,
            failed: None,
        })
    }

    /// This side's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether the next call is [`write_message`](Self::write_message) (true) or
    /// [`read_message`](Self::read_message) (false). False once finished or failed.
    pub fn is_my_turn(&self) -> bool {
        self.failed.is_none() && !self.state.is_handshake_finished() && self.state.is_my_turn()
    }

    /// Whether all three messages went through (then call [`into_channel`](Self::into_channel)).
    pub fn is_finished(&self) -> bool {
        self.failed.is_none() && self.state.is_handshake_finished()
    }

    fn stage(&self) -> Stage {
        match self.messages {
            0 => Stage::Message1,
            1 => Stage::Message2,
            _ => Stage::Message3,
        }
    }

    fn fail(&mut self, error: ChannelError) -> ChannelError {
        self.failed = Some(error.clone());
        error
    }

    /// Writes the next handshake message: message 1 and 3 for the initiator, message 2 for
    /// the responder. Send it as one binary WebSocket message.
    ///
    /// # Errors
    /// [`ChannelError::OutOfTurn`] when it is the peer's turn or the handshake is finished;
    /// [`ChannelError::Noise`] if snow refuses.
    pub fn write_message(&mut self) -> Result<Vec<u8>, ChannelError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.state.is_handshake_finished() {
            return Err(self.fail(ChannelError::OutOfTurn {
                detail: "write_message after the handshake finished",
            }));
        }
        if !self.state.is_my_turn() {
            return Err(self.fail(ChannelError::OutOfTurn {
                detail: "write_message while waiting for the peer's message",
            }));
        }
        let stage = self.stage();
        // Message 1 travels in clear: it carries no payload.
        let payload: &[u8] = if self.messages == 0 {
            &[]
        } else {
            &self.local_payload
        };
        let mut out = vec![0u8; MAX_NOISE_MESSAGE];
        match self.state.write_message(payload, &mut out) {
            Ok(len) => {
                out.truncate(len);
                self.messages += 1;
                Ok(out)
            }
            Err(e) => Err(self.fail(ChannelError::noise(stage, &e))),
        }
    }

    /// Reads the peer's next handshake message (responder: 1 and 3; initiator: 2).
    ///
    /// Bounded before any work: a message over 65535 bytes, or one whose payload would be
    /// over [`ChannelConfig::max_handshake_payload`], is refused before decrypting.
    ///
    /// # Errors
    /// [`ChannelError::OutOfTurn`], [`ChannelError::MessageTooLarge`],
    /// [`ChannelError::PayloadTooLarge`], [`ChannelError::Noise`] (did not authenticate:
    /// wrong prologue or altered; bad length), [`ChannelError::Malformed`] (message 1
    /// with a payload, payload not the documented JSON).
    pub fn read_message(&mut self, message: &[u8]) -> Result<(), ChannelError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.read_inner(message);
        result.map_err(|e| self.fail(e))
    }

    fn read_inner(&mut self, message: &[u8]) -> Result<(), ChannelError> {
        if self.state.is_handshake_finished() {
            return Err(ChannelError::OutOfTurn {
                detail: "read_message after the handshake finished",
            });
        }
        if self.state.is_my_turn() {
            return Err(ChannelError::OutOfTurn {
                detail: "read_message while it is this side's turn to write",
            });
        }
        if message.len() > MAX_NOISE_MESSAGE {
            return Err(ChannelError::MessageTooLarge {
                size: message.len(),
                limit: MAX_NOISE_MESSAGE,
            });
        }
        let stage = self.stage();
        let overhead = match self.messages {
            0 => MSG1_OVERHEAD,
            1 => MSG2_OVERHEAD,
            _ => MSG3_OVERHEAD,
        };
        let limit = if self.messages == 0 {
            0
        } else {
            self.max_payload
        };
        let claimed = message.len().saturating_sub(overhead);
        if claimed > limit {
            if self.messages == 0 {
                return Err(ChannelError::malformed(format!(
                    "handshake message 1 is {} bytes: it must be exactly {MSG1_OVERHEAD} (no payload)",
                    message.len()
                )));
            }
            return Err(ChannelError::PayloadTooLarge {
                size: claimed,
                limit,
            });
        }
        let mut payload = vec![0u8; MAX_NOISE_MESSAGE];
        let len = self
            .state
            .read_message(message, &mut payload)
            .map_err(|e| ChannelError::noise(stage, &e))?;
        self.messages += 1;
        if stage != Stage::Message1 {
            self.remote_payload = Some(HandshakePayload::decode(&payload[..len])?);
        }
        Ok(())
    }

    /// The peer's static X25519 public key: known after message 2 (initiator) or message 3
    /// (responder). The node checks it is the keyAgreement key of the peer's DID document.
    pub fn remote_static(&self) -> Option<[u8; 32]> {
        self.state
            .get_remote_static()
            .and_then(|key| key.try_into().ok())
    }

    /// What the peer said about itself: known after message 2 (initiator) or message 3
    /// (responder).
    pub fn remote_payload(&self) -> Option<&HandshakePayload> {
        self.remote_payload.as_ref()
    }

    /// The handshake hash (channel binding; equal on both sides), once finished.
    pub fn handshake_hash(&self) -> Option<[u8; 32]> {
        if !self.is_finished() {
            return None;
        }
        self.state.get_handshake_hash().try_into().ok()
    }

    /// Turns the finished handshake into the transport [`Channel`]; `now` starts the
    /// time budget for rekeying ([`ChannelConfig::rekey_after`]).
    ///
    /// # Errors
    /// [`ChannelError::HandshakeIncomplete`] before the third message; the handshake's own
    /// error if it failed; [`ChannelError::Noise`] at [`Stage::Split`] if snow refuses.
    pub fn into_channel(self, now: Instant) -> Result<Channel, ChannelError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        if !self.state.is_handshake_finished() {
            return Err(ChannelError::HandshakeIncomplete);
        }
        let split = |e: snow::Error| ChannelError::noise(Stage::Split, &e);
        let hash: [u8; 32] =
            self.state
                .get_handshake_hash()
                .try_into()
                .map_err(|_| ChannelError::Noise {
                    stage: Stage::Split,
                    detail: "handshake hash is not 32 bytes".into(),
                })?;
        let transport = self.state.into_transport_mode().map_err(split)?;
        Ok(Channel::new(transport, hash, self.config, now))
    }
}
