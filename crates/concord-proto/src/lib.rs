//! Sans-IO core of the ANP meta-protocol.
//!
//! Everything here is pure and deterministic: no sockets, no tasks, no clock reads
//! (`now` is an input), no randomness (seeds are inputs). The async node is a thin
//! driver around it.
//!
//! - [`Frame`]: the 1-byte header (protocol type) and the protocol data.
//! - [`MetaMessage`]: the five meta-protocol actions, checked field by field.
//! - [`Hello`] and [`handshake`]: `sourceHello`/`destinationHello`, version and
//!   capability negotiation, 0-RTT reuse by [`ProtocolHash`], consensus protocols.
//! - [`Session`]: the state machine of one session, both roles, from the first
//!   candidate protocol to application messages.
//! - [`Preparation`]: what follows agreement (test cases, code generations, verifying
//!   the peer's code, fix rounds) and when to give up, beside the session.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod frame;
pub mod handshake;
mod hash;
mod hello;
mod meta;
pub mod preparation;
mod session;
/// Places in text: the [`concord_text`] crate, re-exported.
pub use concord_text as text;

pub use concord_text::{json_error_offset, TextLocator, TextPosition};
pub use frame::{Frame, FrameError, ProtocolType, DEFAULT_MAX_FRAME_SIZE};
pub use hash::{ProtocolHash, ProtocolHashError};
pub use hello::{
    Capabilities, Capability, Hello, HelloError, HelloKind, HelloLimits, MetaProtocolHello,
    MetaVersion, META_PROTOCOL_VERSION,
};
pub use meta::{
    json_type, CodeGeneration, CodeGenerationStatus, FixErrorNegotiation, MetaError, MetaMessage,
    NaturalLanguageKind, NaturalLanguageNegotiation, NegotiationStatus, ProtocolNegotiation,
    TestCasesNegotiation, MAX_MESSAGE_ID_LEN,
};
pub use preparation::{
    AfterSave, CodeFailure, PeerCodeFailure, Preparation, PreparationCommand, PreparationLimits,
};
pub use session::{
    CloseReason, Decision, EstablishedProtocol, Event, FixDecision, Phase, ProtocolViolation, Role,
    Session, SessionConfig, SessionError, Side, Wait,
};
