//! Identity for Concord agents: `did:wba` DIDs, their keys and `e1` DID documents, and the
//! request authentication of ANP's reference SDK (PyPI `anp` 1.0.7): RFC 9421 HTTP Message
//! Signatures and the legacy `Authorization: DIDWba` header.
//!
//! Everything here is pure (no network, no clock, no RNG inside verification): callers pass
//! `now` and the resolved document bytes. The only I/O is the key file ([`Keys::load`],
//! [`Keys::save`]).
//!
//! Modules, one job each:
//! - [`did`]: parsing and printing `did:wba` DIDs, and where their documents live;
//! - [`keys`]: the Ed25519 signing and X25519 agreement keys, and their file;
//! - [`identity`]: a local identity and its `e1` DID document (with its Data Integrity proof);
//! - [`document`]: reading a peer's (untrusted) DID document;
//! - [`http_signature`] and [`legacy`]: writing the two request-authentication forms;
//! - [`credentials`]: reading and verifying them on the provider side, and the challenge;
//! - [`replay`]: the bounded (DID, nonce) replay cache;
//! - [`authorization`]: who may call what.
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod authorization;
mod challenge;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod credentials;
pub mod did;
pub mod document;
mod encoding;
pub mod http_signature;
pub mod identity;
pub mod keys;
pub mod legacy;
pub mod nonce_log;
mod proof;
pub mod replay;
mod time;

pub use authorization::{Allow, Caller, DidPattern, PatternError};
pub use concord_text::TextPosition;
pub use credentials::{
    challenge, challenge_with, AuthError, AuthScheme, Authenticated, Credentials, TimeWindow,
};
pub use did::{Did, DidError};
pub use document::{read_document, DidDocumentError, DidDocumentLimits, VerifiedDocument};
pub use http_signature::{sign_request, RequestTarget, SignatureHeaders};
pub use identity::{Identity, Service};
pub use keys::{KeyFileError, Keys};
pub use legacy::legacy_authorization;
pub use nonce_log::NonceLog;
pub use replay::{Replay, ReplayCache};
pub use time::format_iso8601;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
