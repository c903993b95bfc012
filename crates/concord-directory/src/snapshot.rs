//! The parsed, enriched TDs a JSONPath search walks, kept between searches: a search is a
//! walk over values in memory, not a read, parse and enrichment of every TD. The snapshot
//! is as of one store revision (the id of its latest event, which every write, removal and
//! purge moves, whichever process made it) and is rebuilt when the revision has moved or
//! one of its TDs has expired, so no search answers from stale data. Only one is held.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::error::DirectoryError;
use crate::limits::DirectoryLimits;
use crate::store::{DirectoryStore, UnixMillis};
use crate::td::into_enriched;

/// The page size a snapshot reads the store in.
const SCAN_PAGE: u64 = 256;

/// The enriched TDs (without `registration.retrieved`) unexpired at `built`, as one JSON
/// array in code-point order of id: the root of a JSONPath query.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The store's revision when the snapshot began to be read.
    revision: u64,
    /// When it was read: TDs expired then are left out.
    built: UnixMillis,
    /// The earliest expiry among its TDs: from then on it is stale.
    next_expiry: Option<UnixMillis>,
    /// The TDs, as a JSON array.
    pub(crate) things: Value,
}

impl Snapshot {
    fn fresh(&self, revision: u64, now: UnixMillis) -> bool {
        self.revision == revision
            && now >= self.built
            && self.next_expiry.is_none_or(|expiry| now < expiry)
    }

    /// Reads every unexpired TD at `now`, within `max_query_scan_bytes` of their JSON.
    fn read(
        store: &dyn DirectoryStore,
        limits: &DirectoryLimits,
        revision: u64,
        now: UnixMillis,
    ) -> Result<Self, DirectoryError> {
        let mut things = Vec::new();
        let mut bytes: u64 = 0;
        let mut next_expiry: Option<UnixMillis> = None;
        let mut offset = 0;
        loop {
            let page = store.page(offset, SCAN_PAGE, now)?;
            let read = u64::try_from(page.entries.len()).unwrap_or(u64::MAX);
            for entry in page.entries {
                bytes = bytes.saturating_add(entry.size);
                if bytes > limits.max_query_scan_bytes {
                    return Err(DirectoryError::SearchTooBroad {
                        limit: limits.max_query_scan_bytes,
                    });
                }
                if let Some(expires) = entry.expires {
                    next_expiry = Some(next_expiry.map_or(expires, |next| next.min(expires)));
                }
                things.push(into_enriched(entry, None));
            }
            offset += read;
            if read < SCAN_PAGE {
                break;
            }
        }
        Ok(Self {
            revision,
            built: now,
            next_expiry,
            things: Value::Array(things),
        })
    }
}

/// The snapshot a directory's JSONPath searches share (one, replaced when stale).
#[derive(Default)]
pub(crate) struct SearchCache {
    held: Mutex<Option<Arc<Snapshot>>>,
}

impl std::fmt::Debug for SearchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.held();
        f.debug_struct("SearchCache")
            .field("revision", &held.as_ref().map(|snapshot| snapshot.revision))
            .finish_non_exhaustive()
    }
}

impl SearchCache {
    fn held(&self) -> MutexGuard<'_, Option<Arc<Snapshot>>> {
        // The guarded value is replaced whole; a panic cannot leave half of one.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The snapshot of `store` at `now`: the one held while it is fresh, else a new one
    /// (searches wait for it rather than each reading the store).
    pub(crate) fn snapshot(
        &self,
        store: &dyn DirectoryStore,
        limits: &DirectoryLimits,
        now: UnixMillis,
    ) -> Result<Arc<Snapshot>, DirectoryError> {
        let mut held = self.held();
        // Read before the TDs: a write during the read moves it, and the next search
        // reads again.
        let revision = store.events_after(u64::MAX, 0)?.latest;
        if let Some(snapshot) = held.as_ref().filter(|held| held.fresh(revision, now)) {
            return Ok(Arc::clone(snapshot));
        }
        // The stale one goes first: at most one is held while the next is read.
        *held = None;
        let snapshot = Arc::new(Snapshot::read(store, limits, revision, now)?);
        *held = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use crate::memory::MemoryDirectoryStore;
    use crate::store::{Entry, Expect, Write};
    use serde_json::json;

    fn put(store: &MemoryDirectoryStore, id: &str, expires: Option<UnixMillis>) {
        let mut entry = Entry::new(id, json!({"id": id, "title": id}));
        entry.expires = expires;
        let write = Write::new(&entry, &[], Expect::Absent, EventKind::Created, None, 10);
        store.write(&write).unwrap();
    }

    #[test]
    fn the_snapshot_is_kept_while_fresh_and_read_again_after_a_write_or_an_expiry() {
        let store = MemoryDirectoryStore::new();
        let limits = DirectoryLimits::default();
        let cache = SearchCache::default();
        put(&store, "urn:a", Some(5_000));
        let first = cache.snapshot(&store, &limits, 1_000).unwrap();
        let again = cache.snapshot(&store, &limits, 2_000).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "nothing changed: the same TDs");
        put(&store, "urn:b", None);
        let written = cache.snapshot(&store, &limits, 2_000).unwrap();
        assert!(!Arc::ptr_eq(&first, &written), "a write: read again");
        assert_eq!(written.things.as_array().unwrap().len(), 2);
        let expired = cache.snapshot(&store, &limits, 5_000).unwrap();
        assert!(!Arc::ptr_eq(&written, &expired), "an expiry: read again");
        assert_eq!(expired.things.as_array().unwrap().len(), 1);
        let earlier = cache.snapshot(&store, &limits, 4_000).unwrap();
        assert_eq!(
            earlier.things.as_array().unwrap().len(),
            2,
            "asked for an earlier time: read again"
        );
    }
}
