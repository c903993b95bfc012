//! The parsed, enriched TDs a JSONPath search walks, kept between searches: a search is a
//! walk over values in memory, not a read, parse and enrichment of every TD. The snapshot
//! is as of one store revision (the id of its latest event, which every write, removal and
//! purge moves, whichever process made it). When the revision has moved, the TDs the
//! events since name are read again one by one (all of them when those events are no
//! longer kept, or more than [`MAX_CHANGES`] TDs changed); TDs expired since are dropped;
//! so no search answers from stale data. Only one snapshot is held.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::error::DirectoryError;
use crate::limits::DirectoryLimits;
use crate::store::{DirectoryStore, Entry, UnixMillis};
use crate::td::into_enriched;

/// The page size a snapshot reads the store in.
const SCAN_PAGE: u64 = 256;

/// The most TDs changed since a snapshot that are read one by one; beyond, all are read.
const MAX_CHANGES: usize = 1_024;

/// What a snapshot knows of one of its TDs.
#[derive(Clone, Debug)]
struct Held {
    id: String,
    size: u64,
    expires: Option<UnixMillis>,
}

impl Held {
    fn of(entry: &Entry) -> Self {
        Self {
            id: entry.id.clone(),
            size: entry.size,
            expires: entry.expires,
        }
    }
}

/// The enriched TDs (without `registration.retrieved`) unexpired at `built`, as one JSON
/// array in code-point order of id: the root of a JSONPath query.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// The store's revision the snapshot reflects (at least).
    revision: u64,
    /// When it was read: TDs expired then are left out.
    built: UnixMillis,
    /// Its TDs, in the order of `things`.
    held: Vec<Held>,
    /// The size of their JSON.
    bytes: u64,
    /// The TDs, as a JSON array.
    pub(crate) things: Value,
}

impl Snapshot {
    fn fresh(&self, revision: u64, now: UnixMillis) -> bool {
        self.revision == revision
            && now >= self.built
            && self
                .held
                .iter()
                .all(|held| held.expires.is_none_or(|at| now < at))
    }

    /// Reads every unexpired TD at `now`, within `max_query_scan_bytes` of their JSON.
    fn read(
        store: &dyn DirectoryStore,
        limits: &DirectoryLimits,
        revision: u64,
        now: UnixMillis,
    ) -> Result<Self, DirectoryError> {
        let mut things = Vec::new();
        let mut held = Vec::new();
        let mut bytes: u64 = 0;
        let mut offset = 0;
        loop {
            let page = store.page(offset, SCAN_PAGE, now)?;
            let read = u64::try_from(page.entries.len()).unwrap_or(u64::MAX);
            for entry in page.entries {
                bytes = bytes.saturating_add(entry.size);
                within(bytes, limits)?;
                held.push(Held::of(&entry));
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
            held,
            bytes,
            things: Value::Array(things),
        })
    }

    /// Brings the snapshot to the store's state at `now` by the events since its revision;
    /// `false` (the snapshot unchanged or partly changed: drop it) when they do not say
    /// enough: some are no longer kept, too many TDs changed, or `now` is before it.
    fn catch_up(
        &mut self,
        store: &dyn DirectoryStore,
        limits: &DirectoryLimits,
        now: UnixMillis,
    ) -> Result<bool, DirectoryError> {
        if now < self.built {
            return Ok(false);
        }
        let mut changed = BTreeSet::new();
        let mut after = self.revision;
        loop {
            let since = store.events_after(after, SCAN_PAGE as usize)?;
            let missing = after < since.latest
                && since
                    .oldest
                    .is_none_or(|oldest| after.saturating_add(1) < oldest);
            if missing {
                return Ok(false);
            }
            let Some(last) = since.events.last().map(|event| event.id) else {
                break;
            };
            changed.extend(since.events.into_iter().map(|event| event.thing));
            if changed.len() > MAX_CHANGES {
                return Ok(false);
            }
            after = last;
        }
        let Value::Array(things) = &mut self.things else {
            return Ok(false);
        };
        for id in changed {
            let at = self.held.binary_search_by(|held| held.id.as_str().cmp(&id));
            let entry = store.entry(&id)?.filter(|entry| !entry.expired_at(now));
            match (at, entry) {
                (Ok(at), Some(entry)) => {
                    self.bytes = self.bytes.saturating_sub(self.held[at].size);
                    self.bytes = self.bytes.saturating_add(entry.size);
                    self.held[at] = Held::of(&entry);
                    things[at] = into_enriched(entry, None);
                }
                (Ok(at), None) => {
                    self.bytes = self.bytes.saturating_sub(self.held[at].size);
                    self.held.remove(at);
                    things.remove(at);
                }
                (Err(at), Some(entry)) => {
                    self.bytes = self.bytes.saturating_add(entry.size);
                    self.held.insert(at, Held::of(&entry));
                    things.insert(at, into_enriched(entry, None));
                }
                (Err(_), None) => {}
            }
        }
        // TDs expired since, with no event yet (not purged).
        let mut at = 0;
        while at < self.held.len() {
            if self.held[at].expires.is_some_and(|expires| expires <= now) {
                self.bytes = self.bytes.saturating_sub(self.held[at].size);
                self.held.remove(at);
                things.remove(at);
            } else {
                at += 1;
            }
        }
        within(self.bytes, limits)?;
        self.revision = after;
        self.built = now;
        Ok(true)
    }
}

fn within(bytes: u64, limits: &DirectoryLimits) -> Result<(), DirectoryError> {
    if bytes > limits.max_query_scan_bytes {
        return Err(DirectoryError::SearchTooBroad {
            limit: limits.max_query_scan_bytes,
        });
    }
    Ok(())
}

/// The snapshot a directory's JSONPath searches share (one, brought up to date or replaced
/// when stale).
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

    /// The snapshot of `store` at `now`: the one held while it is fresh, else that one
    /// brought up to date, else a new one (searches wait for it rather than each reading
    /// the store).
    pub(crate) fn snapshot(
        &self,
        store: &dyn DirectoryStore,
        limits: &DirectoryLimits,
        now: UnixMillis,
    ) -> Result<Arc<Snapshot>, DirectoryError> {
        let mut held = self.held();
        // Read before the TDs: a write during the read moves it, and the next search
        // catches up from it.
        let revision = store.events_after(u64::MAX, 0)?.latest;
        // Taken out: a failure below leaves none held.
        if let Some(mut snapshot) = held.take() {
            if snapshot.fresh(revision, now) {
                *held = Some(Arc::clone(&snapshot));
                return Ok(snapshot);
            }
            // Copied only while a search still walks the old one.
            if Arc::make_mut(&mut snapshot).catch_up(store, limits, now)? {
                *held = Some(Arc::clone(&snapshot));
                return Ok(snapshot);
            }
        }
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
        put_kept(store, id, expires, 10);
    }

    fn put_kept(store: &MemoryDirectoryStore, id: &str, expires: Option<UnixMillis>, kept: usize) {
        let mut entry = Entry::new(id, json!({"id": id, "title": id}));
        entry.expires = expires;
        let write = Write::new(&entry, &[], Expect::Absent, EventKind::Created, None, kept);
        store.write(&write).unwrap();
    }

    fn ids(snapshot: &Snapshot) -> Vec<String> {
        let things = snapshot.things.as_array().unwrap();
        things
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_snapshot_catches_up_by_the_events_or_is_read_again_past_them() {
        let store = MemoryDirectoryStore::new();
        let limits = DirectoryLimits::default();
        let cache = SearchCache::default();
        put(&store, "urn:m", None);
        assert_eq!(
            ids(&cache.snapshot(&store, &limits, 1_000).unwrap()),
            ["urn:m"]
        );
        // Caught up by the events: inserted in code-point order, replaced, removed.
        put(&store, "urn:a", None);
        put(&store, "urn:z", None);
        let mut entry = store.entry("urn:m").unwrap().unwrap();
        entry.td = json!({"id": "urn:m", "title": "changed"});
        let write = Write::new(
            &entry,
            &[],
            Expect::Revision(entry.revision),
            EventKind::Updated,
            None,
            10,
        );
        store.write(&write).unwrap();
        let caught = cache.snapshot(&store, &limits, 1_000).unwrap();
        assert_eq!(ids(&caught), ["urn:a", "urn:m", "urn:z"]);
        assert_eq!(caught.things[1]["title"], "changed");
        let z = store.entry("urn:z").unwrap().unwrap();
        store
            .remove(&crate::store::Removal::new("urn:z", z.revision, 1_000, 10))
            .unwrap();
        assert_eq!(
            ids(&cache.snapshot(&store, &limits, 1_000).unwrap()),
            ["urn:a", "urn:m"]
        );
        // Events no longer kept (retention 1): read again.
        put_kept(&store, "urn:b", None, 1);
        put_kept(&store, "urn:c", None, 1);
        assert_eq!(
            ids(&cache.snapshot(&store, &limits, 1_000).unwrap()),
            ["urn:a", "urn:b", "urn:c", "urn:m"]
        );
        // More TDs changed than are read one by one: read again.
        for n in 0..=MAX_CHANGES {
            put(&store, &format!("urn:n{n:04}"), None);
        }
        let all = cache.snapshot(&store, &limits, 1_000).unwrap();
        assert_eq!(all.held.len(), 4 + MAX_CHANGES + 1);
        assert_eq!(ids(&all).len(), all.held.len());
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
