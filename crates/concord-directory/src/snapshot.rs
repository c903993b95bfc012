//! The parsed, enriched TDs a JSONPath search walks, kept between searches: a search is a
//! walk over values in memory, not a read, parse and enrichment of every TD. The snapshot
//! is as of one store revision (the id of its latest event, which every write, removal and
//! purge moves, whichever process made it), read by id order from after the last id read
//! (so a write during the read makes it skip no TD it did not touch; those it touched are
//! named by the events after the revision). When the revision has moved, the TDs the
//! events since name are read again one by one (all of them when those events are no
//! longer kept, or more than [`MAX_CHANGES`] TDs changed); TDs expired since are dropped;
//! so no search answers from stale data. Only one snapshot is held; each TD is shared
//! (`Arc`), so that bringing a snapshot up to date while a search still walks it copies
//! pointers, not TDs. A directory found holding more than `max_query_scan_bytes` is
//! remembered so until its revision moves: a refused search does not read it all again.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::error::{DirectoryError, RETRY_AFTER};
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

/// The enriched TDs (without `registration.retrieved`) unexpired at `built`, in
/// code-point order of id, each as the only member of an array: the root of a JSONPath
/// query evaluated on that TD.
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
    /// The TDs, each as a one-member JSON array.
    pub(crate) things: Vec<Arc<Value>>,
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
        let mut held: Vec<Held> = Vec::new();
        let mut bytes: u64 = 0;
        loop {
            let after = held.last().map(|last| last.id.as_str());
            let entries = store.scan(after, SCAN_PAGE, now)?;
            let read = u64::try_from(entries.len()).unwrap_or(u64::MAX);
            for entry in entries {
                bytes = bytes.saturating_add(entry.size);
                within(bytes, limits)?;
                held.push(Held::of(&entry));
                things.push(rooted(entry));
            }
            if read < SCAN_PAGE {
                break;
            }
        }
        Ok(Self {
            revision,
            built: now,
            held,
            bytes,
            things,
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
        let things = &mut self.things;
        for id in changed {
            let at = self.held.binary_search_by(|held| held.id.as_str().cmp(&id));
            let entry = store.entry(&id)?.filter(|entry| !entry.expired_at(now));
            match (at, entry) {
                (Ok(at), Some(entry)) => {
                    self.bytes = self.bytes.saturating_sub(self.held[at].size);
                    self.bytes = self.bytes.saturating_add(entry.size);
                    self.held[at] = Held::of(&entry);
                    things[at] = rooted(entry);
                }
                (Ok(at), None) => {
                    self.bytes = self.bytes.saturating_sub(self.held[at].size);
                    self.held.remove(at);
                    things.remove(at);
                }
                (Err(at), Some(entry)) => {
                    self.bytes = self.bytes.saturating_add(entry.size);
                    self.held.insert(at, Held::of(&entry));
                    things.insert(at, rooted(entry));
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

/// An entry's enriched TD as the only member of an array.
fn rooted(entry: Entry) -> Arc<Value> {
    Arc::new(Value::Array(vec![into_enriched(entry, None)]))
}

fn within(bytes: u64, limits: &DirectoryLimits) -> Result<(), DirectoryError> {
    if bytes > limits.max_query_scan_bytes {
        return Err(too_broad(limits));
    }
    Ok(())
}

/// The snapshot a directory's JSONPath searches share (one, brought up to date or replaced
/// when stale), or the revision at which the directory was found too broad for one.
#[derive(Default)]
pub(crate) struct SearchCache {
    held: Mutex<Cached>,
}

/// What a [`SearchCache`] holds.
#[derive(Default)]
enum Cached {
    #[default]
    Nothing,
    Snapshot(Arc<Snapshot>),
    /// The store's revision when its TDs took more than `max_query_scan_bytes`, and until
    /// when that answer holds without reading them again (TDs expire without moving the
    /// revision: [`RETRY_AFTER`], the `Retry-After` the refusal gives).
    TooBroad(u64, UnixMillis),
}
impl std::fmt::Debug for SearchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = match &*self.held() {
            Cached::Nothing => "nothing".to_owned(),
            Cached::Snapshot(snapshot) => format!("snapshot at revision {}", snapshot.revision),
            Cached::TooBroad(revision, _) => format!("too broad at revision {revision}"),
        };
        f.debug_struct("SearchCache")
            .field("held", &held)
            .finish_non_exhaustive()
    }
}

impl SearchCache {
    fn held(&self) -> MutexGuard<'_, Cached> {
        // The guarded value is replaced whole; a panic cannot leave half of one.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The snapshot of `store` at `now`: the one held while it is fresh, else that one
    /// brought up to date, else a new one (searches wait for it rather than each reading
    /// the store).
    ///
    /// # Errors
    /// [`DirectoryError::SearchTooBroad`] (at once while the store's revision has not moved
    /// since it was found so, for [`RETRY_AFTER`]), or a store failure.
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
        // Taken out: a failure below leaves nothing held.
        let found = match std::mem::take(&mut *held) {
            Cached::TooBroad(at, until) if at == revision && now < until => {
                *held = Cached::TooBroad(at, until);
                return Err(too_broad(limits));
            }
            Cached::Snapshot(snapshot) if snapshot.fresh(revision, now) => Ok(snapshot),
            Cached::Snapshot(mut snapshot) => {
                // Copied (pointers to the TDs) only while a search still walks the old one.
                match Arc::make_mut(&mut snapshot).catch_up(store, limits, now) {
                    Ok(true) => Ok(snapshot),
                    Ok(false) => Snapshot::read(store, limits, revision, now).map(Arc::new),
                    Err(error) => Err(error),
                }
            }
            Cached::Nothing | Cached::TooBroad(..) => {
                Snapshot::read(store, limits, revision, now).map(Arc::new)
            }
        };
        match found {
            Ok(snapshot) => {
                *held = Cached::Snapshot(Arc::clone(&snapshot));
                Ok(snapshot)
            }
            Err(DirectoryError::SearchTooBroad { limit }) => {
                let wait = i64::try_from(RETRY_AFTER.as_millis()).unwrap_or(i64::MAX);
                *held = Cached::TooBroad(revision, now.saturating_add(wait));
                Err(DirectoryError::SearchTooBroad { limit })
            }
            Err(error) => Err(error),
        }
    }
}

fn too_broad(limits: &DirectoryLimits) -> DirectoryError {
    DirectoryError::SearchTooBroad {
        limit: limits.max_query_scan_bytes,
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
        snapshot
            .things
            .iter()
            .map(|t| t[0]["id"].as_str().unwrap().to_owned())
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
        assert_eq!(caught.things[1][0]["title"], "changed");
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
        assert_eq!(written.things.len(), 2);
        let expired = cache.snapshot(&store, &limits, 5_000).unwrap();
        assert!(!Arc::ptr_eq(&written, &expired), "an expiry: read again");
        assert_eq!(expired.things.len(), 1);
        let earlier = cache.snapshot(&store, &limits, 4_000).unwrap();
        assert_eq!(
            earlier.things.len(),
            2,
            "asked for an earlier time: read again"
        );
    }

    /// A store that removes `victim` during a scan, once the scan has gone past it: what
    /// a writer in another process does while a snapshot is read.
    #[derive(Debug)]
    struct WrittenDuringScan {
        inner: MemoryDirectoryStore,
        victim: &'static str,
        scans: std::sync::atomic::AtomicUsize,
    }

    impl DirectoryStore for WrittenDuringScan {
        fn entry(&self, id: &str) -> Result<Option<Entry>, crate::store::StoreFailure> {
            self.inner.entry(id)
        }
        fn write(
            &self,
            write: &Write<'_>,
        ) -> Result<crate::store::Outcome, crate::store::StoreFailure> {
            self.inner.write(write)
        }
        fn remove(
            &self,
            removal: &crate::store::Removal<'_>,
        ) -> Result<crate::store::Outcome, crate::store::StoreFailure> {
            self.inner.remove(removal)
        }
        fn page(
            &self,
            offset: u64,
            limit: u64,
            now: UnixMillis,
        ) -> Result<crate::store::Page, crate::store::StoreFailure> {
            self.inner.page(offset, limit, now)
        }
        fn scan(
            &self,
            after: Option<&str>,
            limit: u64,
            now: UnixMillis,
        ) -> Result<Vec<Entry>, crate::store::StoreFailure> {
            let scans = self.scans.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if scans == 1 {
                let victim = self.inner.entry(self.victim)?.unwrap();
                let removal = crate::store::Removal::new(self.victim, victim.revision, now, 10_000);
                self.inner.remove(&removal)?;
            }
            self.inner.scan(after, limit, now)
        }
        fn count(
            &self,
            holder: Option<crate::store::Holder<'_>>,
        ) -> Result<(u64, u64), crate::store::StoreFailure> {
            self.inner.count(holder)
        }
        fn expired(
            &self,
            now: UnixMillis,
            max: usize,
        ) -> Result<Vec<(String, u64)>, crate::store::StoreFailure> {
            self.inner.expired(now, max)
        }
        fn events_after(
            &self,
            after: u64,
            max: usize,
        ) -> Result<crate::store::EventsAfter, crate::store::StoreFailure> {
            self.inner.events_after(after, max)
        }
        fn find(
            &self,
            keys: &[crate::capability::CapabilityKey],
            now: UnixMillis,
            limit: u64,
        ) -> Result<Vec<String>, crate::store::StoreFailure> {
            self.inner.find(keys, now, limit)
        }
    }

    #[test]
    fn a_write_during_the_read_of_a_snapshot_makes_it_miss_no_other_td() {
        let store = WrittenDuringScan {
            inner: MemoryDirectoryStore::new(),
            victim: "urn:n0000",
            scans: std::sync::atomic::AtomicUsize::new(0),
        };
        let count = 2 * SCAN_PAGE as usize + 10;
        for n in 0..count {
            put_kept(&store.inner, &format!("urn:n{n:04}"), None, 10_000);
        }
        let limits = DirectoryLimits::default();
        let cache = SearchCache::default();
        // The first TD goes while the second page is read: every other TD is still there
        // (an offset would have made the read skip the first TD of the second page).
        let read = cache.snapshot(&store, &limits, 1_000).unwrap();
        let expected: Vec<String> = (1..count).map(|n| format!("urn:n{n:04}")).collect();
        let mut seen = ids(&read);
        seen.retain(|id| id != "urn:n0000");
        assert_eq!(seen, expected);
        // The next search catches up by the removal's event.
        assert_eq!(
            ids(&cache.snapshot(&store, &limits, 1_000).unwrap()),
            expected
        );
    }

    #[test]
    fn a_directory_too_broad_for_a_search_is_not_read_again_until_it_changes() {
        let store = WrittenDuringScan {
            inner: MemoryDirectoryStore::new(),
            victim: "urn:none",
            scans: std::sync::atomic::AtomicUsize::new(2),
        };
        let limits = DirectoryLimits {
            max_query_scan_bytes: 1,
            ..DirectoryLimits::default()
        };
        put(&store.inner, "urn:a", None);
        let cache = SearchCache::default();
        let scans = || store.scans.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..3 {
            assert!(matches!(
                cache.snapshot(&store, &limits, 1_000),
                Err(DirectoryError::SearchTooBroad { limit: 1 })
            ));
        }
        assert_eq!(scans(), 3, "read once, then answered from memory");
        put(&store.inner, "urn:b", None);
        assert!(cache.snapshot(&store, &limits, 1_000).is_err());
        assert_eq!(scans(), 4, "a write: read again");
        // TDs may have expired since (no write moves the revision): read again after
        // RETRY_AFTER.
        let later = 1_000 + i64::try_from(RETRY_AFTER.as_millis()).unwrap();
        assert!(cache.snapshot(&store, &limits, later - 1).is_err());
        assert_eq!(scans(), 4);
        assert!(cache.snapshot(&store, &limits, later).is_err());
        assert_eq!(scans(), 5, "past RETRY_AFTER: read again");
    }
}
