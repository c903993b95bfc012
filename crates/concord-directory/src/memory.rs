//! [`MemoryDirectoryStore`]: a [`DirectoryStore`] in memory, for tests and for embedding a
//! directory that need not outlive its process.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::capability::CapabilityKey;
use crate::event::{EventKind, ThingEvent};
use crate::store::{
    DirectoryStore, Entry, EventsAfter, Expect, Holder, Outcome, Page, Removal, StoreFailure,
    UnixMillis, Write,
};

/// A [`DirectoryStore`] in memory: what it holds goes with the process.
#[derive(Debug, Default)]
pub struct MemoryDirectoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    entries: BTreeMap<String, Entry>,
    index: BTreeMap<CapabilityKey, BTreeSet<String>>,
    keys: BTreeMap<String, Vec<CapabilityKey>>,
    events: VecDeque<ThingEvent>,
    latest: u64,
}

impl State {
    fn matches(&self, id: &str, expect: Expect) -> bool {
        match (self.entries.get(id), expect) {
            (None, Expect::Absent) => true,
            (Some(entry), Expect::Revision(revision)) => entry.revision == revision,
            _ => false,
        }
    }

    /// How many entries `holder` holds.
    fn held(&self, holder: Option<Holder<'_>>) -> u64 {
        let held = self
            .entries
            .values()
            .filter(|entry| match holder {
                Some(Holder::Owner(did)) => entry.owner.as_deref() == Some(did),
                Some(Holder::Client(client)) => entry.client.as_deref() == Some(client),
                None => false,
            })
            .count();
        u64::try_from(held).unwrap_or(u64::MAX)
    }

    fn unindex(&mut self, id: &str) {
        for key in self.keys.remove(id).unwrap_or_default() {
            if let Some(ids) = self.index.get_mut(&key) {
                ids.remove(id);
                if ids.is_empty() {
                    self.index.remove(&key);
                }
            }
        }
    }

    fn record(&mut self, event: ThingEvent, retention: usize) -> u64 {
        let id = event.id;
        self.latest = id;
        self.events.push_back(event);
        while self.events.len() > retention {
            self.events.pop_front();
        }
        id
    }
}

impl MemoryDirectoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change below is made whole before the guard drops; a panic cannot leave
        // half of one.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DirectoryStore for MemoryDirectoryStore {
    fn entry(&self, id: &str) -> Result<Option<Entry>, StoreFailure> {
        Ok(self.state().entries.get(id).cloned())
    }

    fn write(&self, write: &Write<'_>) -> Result<Outcome, StoreFailure> {
        let mut state = self.state();
        let id = write.entry.id.as_str();
        if !state.matches(id, write.expect) {
            return Ok(Outcome::Conflict);
        }
        if let Some(admission) = write.admission {
            // Counted under the same lock as the write below.
            let total = u64::try_from(state.entries.len()).unwrap_or(u64::MAX);
            let held = admission
                .holders()
                .map(|holder| state.held(Some(holder)))
                .max()
                .unwrap_or(0);
            if let Some(refusal) = admission.refusal(total, held) {
                return Ok(refusal);
            }
        }
        let event = state.latest + 1;
        let mut entry = write.entry.clone();
        entry.revision = event;
        state.unindex(id);
        for key in write.keys {
            state
                .index
                .entry(key.clone())
                .or_default()
                .insert(id.to_owned());
        }
        state.keys.insert(id.to_owned(), write.keys.to_vec());
        state.entries.insert(id.to_owned(), entry);
        let event = ThingEvent::new(
            event,
            write.kind,
            id.to_owned(),
            write.diff.cloned(),
            write.entry.modified,
        );
        Ok(Outcome::Done(state.record(event, write.event_retention)))
    }

    fn remove(&self, removal: &Removal<'_>) -> Result<Outcome, StoreFailure> {
        let mut state = self.state();
        if !state.matches(removal.id, Expect::Revision(removal.expect)) {
            return Ok(Outcome::Conflict);
        }
        state.entries.remove(removal.id);
        state.unindex(removal.id);
        let event = ThingEvent::new(
            state.latest + 1,
            EventKind::Deleted,
            removal.id.to_owned(),
            None,
            removal.at,
        );
        Ok(Outcome::Done(state.record(event, removal.event_retention)))
    }

    fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Result<Page, StoreFailure> {
        let state = self.state();
        let live = || {
            state
                .entries
                .values()
                .filter(|entry| !entry.expired_at(now))
        };
        let total = u64::try_from(live().count()).unwrap_or(u64::MAX);
        let entries = live()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        Ok(Page::new(entries, total, state.latest))
    }

    fn scan(
        &self,
        after: Option<&str>,
        limit: u64,
        now: UnixMillis,
    ) -> Result<Vec<Entry>, StoreFailure> {
        let state = self.state();
        let from = after.map_or(Bound::Unbounded, |id| Bound::Excluded(id.to_owned()));
        Ok(state
            .entries
            .range((from, Bound::Unbounded))
            .map(|(_, entry)| entry)
            .filter(|entry| !entry.expired_at(now))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }

    fn count(&self, holder: Option<Holder<'_>>) -> Result<(u64, u64), StoreFailure> {
        let state = self.state();
        let total = u64::try_from(state.entries.len()).unwrap_or(u64::MAX);
        Ok((total, state.held(holder)))
    }

    fn expired(&self, now: UnixMillis, max: usize) -> Result<Vec<(String, u64)>, StoreFailure> {
        let state = self.state();
        let mut expired: Vec<(UnixMillis, &Entry)> = state
            .entries
            .values()
            .filter_map(|entry| entry.expires.filter(|at| *at <= now).map(|at| (at, entry)))
            .collect();
        expired.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        Ok(expired
            .into_iter()
            .take(max)
            .map(|(_, entry)| (entry.id.clone(), entry.revision))
            .collect())
    }

    fn events_after(&self, after: u64, max: usize) -> Result<EventsAfter, StoreFailure> {
        let state = self.state();
        let events = state
            .events
            .iter()
            .filter(|event| event.id > after)
            .take(max)
            .cloned()
            .collect();
        Ok(EventsAfter::new(
            events,
            state.events.front().map(|event| event.id),
            state.latest,
        ))
    }

    fn find(
        &self,
        keys: &[CapabilityKey],
        now: UnixMillis,
        limit: u64,
    ) -> Result<Vec<String>, StoreFailure> {
        let state = self.state();
        let Some((first, rest)) = keys.split_first() else {
            return Ok(Vec::new());
        };
        let Some(candidates) = state.index.get(first) else {
            return Ok(Vec::new());
        };
        Ok(candidates
            .iter()
            .filter(|id| {
                rest.iter().all(|key| {
                    state
                        .index
                        .get(key)
                        .is_some_and(|ids| ids.contains(id.as_str()))
                })
            })
            .filter(|id| {
                state
                    .entries
                    .get(id.as_str())
                    .is_some_and(|entry| !entry.expired_at(now))
            })
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_memory_store_passes_the_conformance_suite() {
        crate::conformance::directory_store(&super::MemoryDirectoryStore::new());
    }
}
