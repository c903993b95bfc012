//! The Concord node's persistent store: one SQLite file (WAL) in a data directory.
//!
//! - **Negotiated protocols by hash** ([`Store::save_protocol`], [`Store::protocol`],
//!   [`Store::list_protocols`], [`Store::forget_protocol`], [`Store::touch_protocol`]): the
//!   exact accepted document, handler modules per role, test cases, the action it calls,
//!   settlement, creation / last-use times with a use count, and the **set of peers** it
//!   was saved for or used with (saving or using it with a peer adds that peer).
//! - **What to offer for 0-RTT** ([`Store::latest_resumable`] with a [`ResumeQuery`]): the
//!   protocol most recently used with that exact peer; else the one most recently used for
//!   the same action with any other peer, which the new peer may hold too
//!   ([`HeldBy`] says which).
//! - **The 0-RTT rule** ([`Store::can_resume`], [`Store::for_role`] implementing
//!   [`ProtocolStore`](concord_proto::handshake::ProtocolStore)): a protocol is reused only
//!   when its stored document reproduces the hash, and the handler module for the
//!   session's role is stored. The document is verified once per process (when saved, or
//!   the first time it is read) and remembered, so a check then costs one indexed lookup.
//!   A row that fails this is reported ([`StoreError::CorruptProtocol`],
//!   [`Integrity::Corrupt`], [`Store::check`], which re-hashes every row) and never used.
//! - **Bounded protocols** ([`Store::prune_protocols`]): at most N negotiated protocols,
//!   the least recently used evicted first (consensus entries never); at most N per peer
//!   ([`Store::cap_peer_protocols`]) and per client address whatever DIDs it proved
//!   ([`Store::cap_address_protocols`]).
//! - **Consensus registry** ([`Store::add_consensus`], [`Store::consensus`],
//!   [`Store::list_consensus`], [`Store::remove_consensus`], [`Store::can_use_consensus`]).
//! - **Negotiation transcripts** ([`Store::begin_transcript`], [`Store::append_frame`],
//!   [`Store::finish_transcript`], [`Store::list_transcripts`], [`Store::transcript`]) with
//!   how each session was protected ([`Store::set_transcript_channel`]),
//!   each within [`TranscriptBounds`] (long texts kept cut with their size and SHA-256, a
//!   bounded number of frames), kept in bounds by [`Store::prune_transcripts_by`] (age
//!   and count, in batches) and
//!   [`Store::checkpoint`] (the write-ahead log shrinks); [`Store::claim_recording`]
//!   closes the ones a dead process left open as [`Outcome::Interrupted`].
//! - **Nonces of accepted DID-signed requests** ([`Store::record_nonce`],
//!   [`Store::unexpired_nonces`]), each until its signature could no longer be valid, so
//!   that a replay is refused across a restart.
//!
//! - **A Thing Description Directory's state** (`concord_directory::DirectoryStore`,
//!   implemented by [`Store`] over its own tables): registered TDs, their capability
//!   index and change events, each write one transaction; it passes
//!   `concord_directory::conformance::directory_store` and survives `kill -9`
//!   (`tests/directory_crash.rs`).
//!
//! - **Seams for other backends** ([`ProtocolBook`], [`ConsensusRegistry`], [`NonceStore`]): the concerns a
//!   node may keep elsewhere, one trait each with its contract written down; [`Store`]
//!   implements them, and `conformance` (feature `conformance`) holds the suites any
//!   backend must pass.
//!
//! The API is synchronous and the [`Store`] is `Send + Sync`: share it in an `Arc` and
//! call it through `spawn_blocking` from async code. It survives `kill -9` mid-write (see
//! [`Store`] for the durability choices, and `tests/crash.rs` for the proof).
//!
//! ```
//! use concord_proto::handshake::ProtocolStore;
//! use concord_proto::Role;
//! use concord_store::{NewProtocol, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?; // production: Store::open(Store::default_dir()?)
//! let hash = store.save_protocol(
//!     &NewProtocol::negotiated("# Requirement\nGet product info\n", "https://peer.example/.well-known/wot")
//!         .with_handler(Role::Provider, "function decodeRequest(m) { return m; }"),
//! )?;
//! // Answering a sourceHello that offers `hash` for 0-RTT:
//! assert!(store.for_role(Role::Provider).holds_protocol(&hash));
//! assert_eq!(store.touch_protocol(&hash, "https://peer.example/.well-known/wot")?, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod backends;
mod check;
mod column;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod directory;
mod error;
mod handlers;
mod integrity;
mod nonces;
mod prefix;
mod protocols;
mod registry;
mod retention;
mod role_view;
mod schema;
mod store;
mod time;
mod transcripts;
mod verified;

pub use backends::{ConsensusRegistry, NonceStore, ProtocolBook};
pub use check::Problem;
pub use error::StoreError;
pub use handlers::Handlers;
pub use integrity::{Corruption, Integrity};
pub use nonces::{UsedNonce, NONCE_PRUNE_BATCH};
pub use prefix::MIN_PREFIX_LEN;
pub use protocols::{
    HeldBy, NewProtocol, ProtocolSummary, ResumeOffer, ResumeQuery, Settlement, StoredProtocol,
    MAX_PEERS_PER_PROTOCOL,
};
pub use registry::{ConsensusProtocol, ConsensusSummary, NewConsensus};
pub use retention::{
    Checkpoint, CheckpointMode, ClaimError, RecordingClaim, TranscriptRetention, PRUNE_BATCH,
};
pub use role_view::RoleView;
pub use store::Store;
pub use transcripts::{
    Direction, FrameContent, FrameKind, FrameRecord, Outcome, TextCut, Transcript,
    TranscriptBounds, TranscriptId, TranscriptSummary, MAX_CHANNEL_BYTES,
};
pub use verified::VERIFIED_CAPACITY;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
