//! Why the node's identity cannot start ([`IdentitySetupError`]), an accepted nonce was not
//! recorded ([`NonceError`]), or an encrypted peer is not who it said ([`PeerCheckError`]).

use std::time::Duration;

use concord_identity::Did;
use concord_store::StoreError;

use super::resolve::ResolveError;

/// A security or resolver setting the node cannot work with, or a part of the identity that
/// cannot start. Reaches the builder's caller as `NodeError::Config`, with this text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum IdentitySetupError {
    /// A resolver setting (`name`) is zero.
    #[error("resolver {name} must be greater than zero")]
    ResolverZero {
        /// The setting.
        name: &'static str,
    },
    /// A resolver concurrency setting (`name`) is larger than a semaphore holds.
    #[error("resolver {name} must be at most {max}")]
    ResolverTooLarge {
        /// The setting.
        name: &'static str,
        /// The largest value allowed.
        max: usize,
    },
    /// The resolver's HTTP client could not be built.
    #[error("DID resolver HTTP client: {0}")]
    ResolverClient(reqwest::Error),
    /// `replay_capacity` or `replay_per_did` is zero: no room for a nonce.
    #[error("security: replay_capacity and replay_per_did must be at least 1")]
    NoReplayRoom,
    /// `max_authentications_per_address` is zero.
    #[error("security: max_authentications_per_address must be at least 1")]
    NoAuthentications,
    /// `replay_ttl` is shorter than a signature is good for.
    #[error(
        "security: replay_ttl ({} s) must cover the time a signature is good for (max_age + max_skew = {} s), or a replay would pass once its nonce is forgotten",
        replay_ttl.as_secs(),
        window.as_secs()
    )]
    ReplayTtlTooShort {
        /// The setting.
        replay_ttl: Duration,
        /// `time_window.max_age + time_window.max_skew`.
        window: Duration,
    },
    /// `time_window.max_age` is zero.
    #[error("security: time_window.max_age must be more than zero")]
    NoMaxAge,
    /// The nonces accepted before a restart cannot be read from the store.
    #[error("reading the accepted nonces: {0}")]
    Nonces(StoreError),
}

/// Why an accepted nonce was not recorded in the store (the upgrade is then refused with 503).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum NonceError {
    /// The blocking task writing it failed.
    #[error("the nonce writer stopped: {0}")]
    Writer(tokio::task::JoinError),
    /// The store refused the write.
    #[error("{0}")]
    Store(StoreError),
}

/// Why the peer of a Noise handshake is not who it must be. Its text is the close reason
/// the peer reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum PeerCheckError {
    /// The handshake names a DID the upgrade did not authenticate.
    #[error("the handshake names {named}, which the upgrade did not authenticate")]
    Unauthenticated {
        /// The DID the handshake named.
        named: String,
    },
    /// The handshake names another DID than the one expected, or none.
    #[error("the handshake names {}, not {expected}", named.as_deref().unwrap_or("no DID"))]
    OtherDid {
        /// The DID the handshake named, if any.
        named: Option<String>,
        /// The DID the peer must be.
        expected: Did,
    },
    /// The expected DID's document could not be resolved (the reason a peer may read).
    #[error("{}", .0.public_reason())]
    Resolve(ResolveError),
    /// The peer's Noise static key is not listed in the DID's `keyAgreement`.
    #[error("the Noise static key is not a keyAgreement key of {did}")]
    NotKeyAgreement {
        /// The DID.
        did: Did,
    },
}
