//! The seams behind which a node keeps shared state that another backend may hold instead
//! of this SQLite [`Store`] (a NATS JetStream bucket, …): one trait per concern, synchronous
//! (a node calls them from `spawn_blocking`), shared as `Arc<dyn …>`. [`Store`] implements
//! each; a new backend implements them in its own crate and must pass the suites of
//! `conformance` (feature `conformance`).

use concord_proto::{ProtocolHash, Role};

use crate::error::StoreError;
use crate::nonces::UsedNonce;
use crate::protocols::{NewProtocol, ResumeOffer, ResumeQuery, StoredProtocol};
use crate::registry::{ConsensusProtocol, ConsensusSummary, NewConsensus};
use crate::store::Store;

/// Negotiated protocols by hash: what a node saves after a negotiation, offers and
/// accepts for 0-RTT, and keeps within its bounds. [`Store`]'s methods of the same names
/// document each rule in full.
///
/// # Contract
///
/// - The 0-RTT rule: [`can_resume`](Self::can_resume) answers `true` only when
///   [`protocol`](Self::protocol) would return a document that reproduces `hash` with
///   `role`'s handler module. A false positive makes a session resume a protocol it cannot
///   load (the session fails; never a wrong protocol, since the hash names the document);
///   a false negative costs a negotiation. A backend never returns a document that does
///   not reproduce its hash: it answers an error ([`StoreError::CorruptProtocol`] or
///   [`StoreError::Backend`]) instead.
/// - Saving, touching and adding a peer are each atomic (across processes sharing the
///   backend); a protocol's peers are a set, bounded by
///   [`MAX_PEERS_PER_PROTOCOL`](crate::MAX_PEERS_PER_PROTOCOL).
/// - The bounds ([`prune_protocols`](Self::prune_protocols), the per-peer and per-address
///   caps) evict the least recently used negotiated protocols first and never a consensus
///   entry; they answer how many protocols went.
pub trait ProtocolBook: Send + Sync + std::fmt::Debug {
    /// Saves a protocol (or merges it into the stored one of the same hash); its hash.
    ///
    /// # Errors
    /// When it could not be written.
    fn save_protocol(&self, protocol: &NewProtocol) -> Result<ProtocolHash, StoreError>;

    /// The protocol `hash`, if held, its document verified against the hash.
    ///
    /// # Errors
    /// When it could not be read, or its document does not reproduce its hash.
    fn protocol(&self, hash: &ProtocolHash) -> Result<Option<StoredProtocol>, StoreError>;

    /// Records a use with `peer` now (adding `peer` to its peers); the new use count.
    ///
    /// # Errors
    /// When it could not be written, or no protocol has this hash.
    fn touch_protocol(&self, hash: &ProtocolHash, peer: &str) -> Result<u64, StoreError>;

    /// Adds `peer` to the protocol's peers without counting a use.
    ///
    /// # Errors
    /// When it could not be written.
    fn add_protocol_peer(&self, hash: &ProtocolHash, peer: &str) -> Result<(), StoreError>;

    /// The 0-RTT rule: whether a session in `role` can resume the protocol `hash`.
    ///
    /// # Errors
    /// When it could not be read, or the document does not reproduce its hash.
    fn can_resume(&self, hash: &ProtocolHash, role: Role) -> Result<bool, StoreError>;

    /// The protocol to offer for 0-RTT to the peer and action of `query`, if any.
    ///
    /// # Errors
    /// When the protocols could not be read.
    fn latest_resumable(&self, query: &ResumeQuery<'_>) -> Result<Option<ResumeOffer>, StoreError>;

    /// Keeps at most `max` negotiated protocols, the least recently used evicted first;
    /// how many went.
    ///
    /// # Errors
    /// When they could not be deleted.
    fn prune_protocols(&self, max: u64) -> Result<u64, StoreError>;

    /// Keeps at most `max` negotiated protocols held by `peer` alone; how many went.
    ///
    /// # Errors
    /// When they could not be deleted.
    fn cap_peer_protocols(&self, peer: &str, max: u64) -> Result<u64, StoreError>;

    /// Keeps at most `max` negotiated protocols held by the client `address` whatever DIDs
    /// it proved; how many went.
    ///
    /// # Errors
    /// When they could not be deleted.
    fn cap_address_protocols(&self, address: &str, max: u64) -> Result<u64, StoreError>;
}

impl ProtocolBook for Store {
    fn save_protocol(&self, protocol: &NewProtocol) -> Result<ProtocolHash, StoreError> {
        Store::save_protocol(self, protocol)
    }

    fn protocol(&self, hash: &ProtocolHash) -> Result<Option<StoredProtocol>, StoreError> {
        Store::protocol(self, hash)
    }

    fn touch_protocol(&self, hash: &ProtocolHash, peer: &str) -> Result<u64, StoreError> {
        Store::touch_protocol(self, hash, peer)
    }

    fn add_protocol_peer(&self, hash: &ProtocolHash, peer: &str) -> Result<(), StoreError> {
        Store::add_protocol_peer(self, hash, peer)
    }

    fn can_resume(&self, hash: &ProtocolHash, role: Role) -> Result<bool, StoreError> {
        Store::can_resume(self, hash, role)
    }

    fn latest_resumable(&self, query: &ResumeQuery<'_>) -> Result<Option<ResumeOffer>, StoreError> {
        Store::latest_resumable(self, query)
    }

    fn prune_protocols(&self, max: u64) -> Result<u64, StoreError> {
        Store::prune_protocols(self, max)
    }

    fn cap_peer_protocols(&self, peer: &str, max: u64) -> Result<u64, StoreError> {
        Store::cap_peer_protocols(self, peer, max)
    }

    fn cap_address_protocols(&self, address: &str, max: u64) -> Result<u64, StoreError> {
        Store::cap_address_protocols(self, address, max)
    }
}

/// The durable log of the nonces of accepted DID-signed requests: what a node reloads into
/// its in-memory replay cache when it starts, and what tells it a nonce was already
/// accepted by another process sharing the log.
///
/// # Contract
///
/// - [`record_nonce`](Self::record_nonce) answers `Ok(true)` only once it is durable (a
///   crash after it does not forget the nonce) and only for a (DID, nonce) pair not held
///   unexpired: two records of one pair racing each other (two processes) answer `true`
///   to at most one. Answering `false` to a fresh pair (a false positive) refuses one
///   request; answering `true` to a held pair (a false negative) lets a replay through:
///   never allowed. A backend that cannot tell answers an error (the node then refuses
///   the request with 503).
/// - [`unexpired_nonces`](Self::unexpired_nonces) returns at least every pair recorded and
///   not expired at `now` (it may return expired ones, which the replay cache drops).
pub trait NonceStore: Send + Sync + std::fmt::Debug {
    /// Records that `did` used `nonce` at `recorded` (Unix seconds), kept until `expires`:
    /// `Ok(false)`, recording nothing, when the pair is held and not expired (a replay).
    ///
    /// # Errors
    /// When it could not be recorded durably (the request must then be refused).
    fn record_nonce(
        &self,
        did: &str,
        nonce: &str,
        recorded: i64,
        expires: i64,
    ) -> Result<bool, StoreError>;

    /// Every pair not expired at `now` (Unix seconds), oldest first.
    ///
    /// # Errors
    /// When the log could not be read.
    fn unexpired_nonces(&self, now: i64) -> Result<Vec<UsedNonce>, StoreError>;
}

impl NonceStore for Store {
    fn record_nonce(
        &self,
        did: &str,
        nonce: &str,
        recorded: i64,
        expires: i64,
    ) -> Result<bool, StoreError> {
        Store::record_nonce(self, did, nonce, recorded, expires)
    }

    fn unexpired_nonces(&self, now: i64) -> Result<Vec<UsedNonce>, StoreError> {
        Store::unexpired_nonces(self, now)
    }
}

/// The consensus registry: protocols known by URI, usable without negotiation.
///
/// # Contract
///
/// - A document is returned or used only when it reproduces its hash: a backend that
///   reads back something else answers an error
///   ([`StoreError::CorruptConsensus`] or [`StoreError::Backend`]), never the document.
/// - [`can_use_consensus`](Self::can_use_consensus) answers `true` only when
///   [`consensus`](Self::consensus) would return the entry with `role`'s handler module:
///   a false positive makes a session agree on a protocol it cannot run (the session then
///   fails); a false negative costs a negotiation. An error is answered `false` by the
///   node (and reported).
/// - Adding an entry under a URI with the same document replaces the handler modules
///   given and keeps the others; with another document it replaces everything.
pub trait ConsensusRegistry: Send + Sync + std::fmt::Debug {
    /// Registers the consensus protocol at `entry.uri`, or updates it; its hash.
    ///
    /// # Errors
    /// When it could not be written.
    fn add_consensus(&self, entry: &NewConsensus) -> Result<ProtocolHash, StoreError>;

    /// The protocol registered at `uri`, if any.
    ///
    /// # Errors
    /// When it could not be read, or its document does not reproduce its hash.
    fn consensus(&self, uri: &str) -> Result<Option<ConsensusProtocol>, StoreError>;

    /// Every registered protocol, by URI.
    ///
    /// # Errors
    /// When the registry could not be read.
    fn list_consensus(&self) -> Result<Vec<ConsensusSummary>, StoreError>;

    /// Removes the protocol at `uri`; whether it was registered.
    ///
    /// # Errors
    /// When it could not be removed.
    fn remove_consensus(&self, uri: &str) -> Result<bool, StoreError>;

    /// Whether a session in `role` can use the protocol at `uri` (its document reproduces
    /// its hash and `role`'s handler module is registered).
    ///
    /// # Errors
    /// When it could not be read, or its document does not reproduce its hash.
    fn can_use_consensus(&self, uri: &str, role: Role) -> Result<bool, StoreError>;
}

impl ConsensusRegistry for Store {
    fn add_consensus(&self, entry: &NewConsensus) -> Result<ProtocolHash, StoreError> {
        Store::add_consensus(self, entry)
    }

    fn consensus(&self, uri: &str) -> Result<Option<ConsensusProtocol>, StoreError> {
        Store::consensus(self, uri)
    }

    fn list_consensus(&self) -> Result<Vec<ConsensusSummary>, StoreError> {
        Store::list_consensus(self)
    }

    fn remove_consensus(&self, uri: &str) -> Result<bool, StoreError> {
        Store::remove_consensus(self, uri)
    }

    fn can_use_consensus(&self, uri: &str, role: Role) -> Result<bool, StoreError> {
        Store::can_use_consensus(self, uri, role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sqlite_store_passes_the_nonce_store_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        crate::conformance::nonce_store(&Store::open(dir.path()).unwrap());
    }

    #[test]
    fn the_sqlite_store_passes_the_protocol_book_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        crate::conformance::protocol_book(&Store::open(dir.path()).unwrap());
    }

    #[test]
    fn the_sqlite_store_passes_the_consensus_registry_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        crate::conformance::consensus_registry(&Store::open(dir.path()).unwrap());
    }
}
