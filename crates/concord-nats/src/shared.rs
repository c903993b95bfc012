//! The three backends a replica of an agent shares, opened together.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Nats;
use crate::consensus::{NatsConsensusRegistry, DEFAULT_CONSENSUS_BUCKET};
use crate::error::NatsError;
use crate::nonces::{NatsNonceStore, DEFAULT_NONCE_BUCKET};
use crate::protocols::{NatsProtocolBook, DEFAULT_PROTOCOL_BUCKET};

/// The buckets' names: every replica of one agent names the same, and two agents sharing
/// a NATS account name different ones.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Buckets {
    /// Protocols by hash ([`DEFAULT_PROTOCOL_BUCKET`]).
    pub protocols: String,
    /// Replay nonces ([`DEFAULT_NONCE_BUCKET`]).
    pub nonces: String,
    /// Consensus protocols by URI ([`DEFAULT_CONSENSUS_BUCKET`]).
    pub consensus: String,
}

impl Default for Buckets {
    fn default() -> Self {
        Self {
            protocols: DEFAULT_PROTOCOL_BUCKET.to_owned(),
            nonces: DEFAULT_NONCE_BUCKET.to_owned(),
            consensus: DEFAULT_CONSENSUS_BUCKET.to_owned(),
        }
    }
}

/// What replicas of one agent share in this installment, ready for
/// `NodeBuilder::{protocols, nonce_store, consensus_registry}`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SharedState {
    /// Protocols by hash (0-RTT on any replica).
    pub protocols: Arc<NatsProtocolBook>,
    /// Nonces of accepted DID-signed upgrades (a replay refused by every replica).
    pub nonces: Arc<NatsNonceStore>,
    /// Consensus protocols by URI.
    pub consensus: Arc<NatsConsensusRegistry>,
}

impl SharedState {
    /// Opens (creating when missing) the three buckets; `nonce_window` is how long a
    /// nonce must be kept (the node's `Security::replay_ttl`).
    ///
    /// # Errors
    /// The first bucket that cannot be opened, named.
    pub async fn open(
        nats: &Nats,
        buckets: &Buckets,
        nonce_window: Duration,
    ) -> Result<Self, NatsError> {
        Ok(Self {
            protocols: Arc::new(NatsProtocolBook::open(nats, &buckets.protocols).await?),
            nonces: Arc::new(NatsNonceStore::open(nats, &buckets.nonces, nonce_window).await?),
            consensus: Arc::new(NatsConsensusRegistry::open(nats, &buckets.consensus).await?),
        })
    }
}
