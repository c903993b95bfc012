//! The **sans-IO core of a W3C WoT Discovery Thing Description Directory** (TDD): the
//! model of a registration, the rules of the Things API (create, retrieve, update, patch,
//! delete, list with paging), enriched TDs, registration expiry, change events with
//! replay, validation with `validationErrors`, JSONPath search (RFC 9535) and capability
//! search ("who can do this"), every bound in [`DirectoryLimits`] and every refusal a
//! typed [`DirectoryError`] with its HTTP status and problem-details pieces.
//!
//! No I/O, no clock, no randomness: operations take `now`, an anonymous TD's id is made of
//! random bytes the caller passes, and the state sits behind [`DirectoryStore`]
//! ([`MemoryDirectoryStore`] here; the SQLite one is `concord_store::Store`),
//! whose backends must pass the suite of `conformance` (feature `conformance`). The HTTP
//! routes (`concord-node`) turn requests into these calls and the answers into responses.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::SystemTime;
//! use concord_directory::{Directory, DirectoryLimits, ListQuery, MemoryDirectoryStore, Registrant};
//!
//! let directory = Directory::new(Arc::new(MemoryDirectoryStore::new()), DirectoryLimits::default())?;
//! let td = br#"{
//!   "@context": "https://www.w3.org/2022/wot/td/v1.1",
//!   "title": "Lamp",
//!   "securityDefinitions": {"nosec": {"scheme": "nosec"}},
//!   "security": "nosec",
//!   "properties": {"on": {"type": "boolean", "forms": [{"href": "https://lamp.example/on"}]}}
//! }"#;
//! let now = SystemTime::now();
//! let id = directory.create(td, [7; 16], &Registrant::client("127.0.0.1"), now)?;
//! assert!(id.starts_with("urn:uuid:"));
//! let enriched = directory.get(&id, now)?;
//! assert_eq!(enriched["id"], id.as_str());
//! assert!(enriched["registration"]["created"].is_string());
//! assert_eq!(directory.list(&ListQuery::default(), now)?.total, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod capability;
mod clock;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod diff;
mod directory;
mod error;
mod event;
mod limits;
mod listing;
mod memory;
mod query_shape;
mod regex_functions;
mod search;
mod snapshot;
mod state;
mod store;
mod td;

pub use capability::{
    keys_of, schema_has_field, CapabilityKey, CapabilityKind, CapabilityMatches, CapabilityQuery,
    MAX_KEYS_PER_TD,
};
pub use clock::{parse_rfc3339, rfc3339, unix_millis};
pub use diff::merge_diff;
pub use directory::{Directory, PutOutcome, Registrant};
pub use error::{
    DirectoryError, ValidationError, PROBLEM_BASE, RETRY_AFTER, UNAVAILABLE_RETRY_AFTER,
};
pub use event::{EventKind, ThingEvent};
pub use limits::{DirectoryLimits, InvalidLimit};
pub use listing::{ListFormat, ListQuery, Listing};
pub use memory::MemoryDirectoryStore;
pub use query_shape::PATTERN_PROGRAM_BYTES;
pub use state::DirectoryState;
pub use store::{
    Admission, DirectoryStore, Entry, EventsAfter, Expect, Holder, Outcome, Page, Removal,
    StoreFailure, UnixMillis, Write,
};
pub use td::{dids_named, enrich, into_enriched, DISCOVERY_CONTEXT};
