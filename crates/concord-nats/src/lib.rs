//! Shared state for replicas of one Concord agent on NATS JetStream.
//!
//! Several `concord serve` processes serving one agent (one DID, one description, one
//! public URL behind a load balancer) keep what a caller may meet on any of them in NATS
//! key-value buckets rather than each in its own SQLite file:
//!
//! - [`NatsProtocolBook`] ([`ProtocolBook`](concord_store::ProtocolBook)): protocols by
//!   hash, so that a protocol negotiated on one replica is resumed with 0-RTT on another;
//! - [`NatsNonceStore`] ([`NonceStore`](concord_store::NonceStore)): the nonces of
//!   accepted DID-signed upgrades, so that one accepted by a replica is refused by every
//!   other and after a restart;
//! - [`NatsConsensusRegistry`] ([`ConsensusRegistry`](concord_store::ConsensusRegistry)):
//!   consensus protocols by URI, changed by compare-and-swap;
//! - [`NatsEventLog`] ([`EventLog`](concord_interact::EventLog)): an agent's events on one
//!   JetStream stream, the stream sequence as the event id, every replica's subscribers fed
//!   from one ordered consumer of it (one order, each event once, a resume on any replica);
//! - [`NatsActionRecords`] ([`ActionRecords`](concord_interact::ActionRecords) and
//!   [`ActionRelay`](concord_interact::ActionRelay)): progress actions by id, so that
//!   `queryaction` is answered on any replica and `cancelaction` on any replica reaches the
//!   one running the action;
//! - [`start_degraded`]: every backend above for a replica that starts while NATS is away,
//!   answering a typed error at once until NATS answers, then the real ones
//!   ([`start_degraded_directory`] the same for a directory's registrations);
//! - [`NatsDirectoryStore`] ([`DirectoryStore`](concord_directory::DirectoryStore)): a
//!   directory's registrations and their events on a stream every directory replica follows.
//!
//! Each passes its trait's conformance suite (`concord_store::conformance`) against a real
//! `nats-server` (`tests/conformance.rs`). The traits are synchronous: [`Nats`] documents
//! how a call waits for its request, at most the operation timeout, and answers
//! [`StoreError::Backend`](concord_store::StoreError::Backend) carrying a [`NatsError`]
//! when NATS is away: never a panic, never a hang.
//!
//! ```no_run
//! # async fn example() -> Result<(), concord_nats::NatsError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let nats = concord_nats::Nats::connect(&concord_nats::NatsSettings::new(["nats://127.0.0.1:4222"])).await?;
//! let protocols = Arc::new(concord_nats::NatsProtocolBook::open(&nats, concord_nats::DEFAULT_PROTOCOL_BUCKET).await?);
//! let nonces = Arc::new(concord_nats::NatsNonceStore::open(&nats, concord_nats::DEFAULT_NONCE_BUCKET, Duration::from_secs(360)).await?);
//! let consensus = Arc::new(concord_nats::NatsConsensusRegistry::open(&nats, concord_nats::DEFAULT_CONSENSUS_BUCKET).await?);
//! # let _ = (protocols, nonces, consensus);
//! # Ok(())
//! # }
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod actions;
mod client;
mod consensus;
mod degraded;
mod directory;
mod error;
mod events;
mod nonces;
mod protocols;
mod shared;
mod usage;

pub use actions::{
    NatsActionRecords, BEAT as ACTION_BEAT, DEFAULT_ACTION_BUCKET, DEFAULT_ACTION_MAX_AGE,
};
pub use client::{
    check_bucket_name, check_server_url, Nats, NatsSettings, DEFAULT_OPERATION_TIMEOUT,
    MAX_REPLICAS,
};
pub use consensus::{NatsConsensusRegistry, DEFAULT_CONSENSUS_BUCKET};
pub use degraded::{
    start_degraded, start_degraded_directory, Degraded, DegradedDirectory, DegradedSettings,
};
pub use directory::{NatsDirectoryStore, DEFAULT_DIRECTORY_STREAM};
pub use error::{NatsError, BACKEND};
pub use events::{EventStream, NatsEventLog, DEFAULT_EVENT_STREAM};
pub use nonces::{NatsNonceStore, DEFAULT_NONCE_BUCKET};
pub use protocols::{NatsProtocolBook, DEFAULT_PROTOCOL_BUCKET};
pub use shared::{Buckets, SharedState};
pub use usage::{bucket_usage, BucketUsage};

pub mod testing;
