//! [`MemoryDirectoryStore`]: a [`DirectoryStore`] in memory, for tests and for embedding a
//! directory that need not outlive its process.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::capability::CapabilityKey;
use crate::event::{EventKind, ThingEvent};
use crate::state::DirectoryState;
use crate::store::{
    DirectoryStore, Entry, EventsAfter, Holder, Outcome, Page, Removal, StoreFailure, UnixMillis,
    Write,
};

/// A [`DirectoryStore`] in memory: what it holds goes with the process.
#[derive(Debug, Default)]
pub struct MemoryDirectoryStore {
    state: Mutex<DirectoryState>,
}

impl MemoryDirectoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, DirectoryState> {
        // Every change is made whole by one call on the state before the guard drops; a
        // panic cannot leave half of one.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DirectoryStore for MemoryDirectoryStore {
    fn entry(&self, id: &str) -> Result<Option<Entry>, StoreFailure> {
        Ok(self.state().entry(id))
    }

    fn write(&self, write: &Write<'_>) -> Result<Outcome, StoreFailure> {
        // Decided and made under one lock.
        let mut state = self.state();
        if let Some(refusal) = state.refusal(write) {
            return Ok(refusal);
        }
        let event = state.latest() + 1;
        let mut entry = write.entry.clone();
        entry.revision = event;
        let id = entry.id.clone();
        state.put(
            entry,
            write.keys.to_vec(),
            ThingEvent::new(
                event,
                write.kind,
                id,
                write.diff.cloned(),
                write.entry.modified,
            ),
            write.event_retention,
        );
        Ok(Outcome::Done(event))
    }

    fn remove(&self, removal: &Removal<'_>) -> Result<Outcome, StoreFailure> {
        let mut state = self.state();
        if let Some(refusal) = state.removal_refusal(removal) {
            return Ok(refusal);
        }
        let event = state.latest() + 1;
        state.delete(
            removal.id,
            ThingEvent::new(
                event,
                EventKind::Deleted,
                removal.id.to_owned(),
                None,
                removal.at,
            ),
            removal.event_retention,
        );
        Ok(Outcome::Done(event))
    }

    fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Result<Page, StoreFailure> {
        Ok(self.state().page(offset, limit, now))
    }

    fn scan(
        &self,
        after: Option<&str>,
        limit: u64,
        now: UnixMillis,
    ) -> Result<Vec<Entry>, StoreFailure> {
        Ok(self.state().scan(after, limit, now))
    }

    fn count(&self, holder: Option<Holder<'_>>) -> Result<(u64, u64), StoreFailure> {
        Ok(self.state().count(holder))
    }

    fn expired(&self, now: UnixMillis, max: usize) -> Result<Vec<(String, u64)>, StoreFailure> {
        Ok(self.state().expired(now, max))
    }

    fn events_after(&self, after: u64, max: usize) -> Result<EventsAfter, StoreFailure> {
        Ok(self.state().events_after(after, max))
    }

    fn find(
        &self,
        keys: &[CapabilityKey],
        now: UnixMillis,
        limit: u64,
    ) -> Result<Vec<String>, StoreFailure> {
        Ok(self.state().find(keys, now, limit))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_memory_store_passes_the_conformance_suite() {
        crate::conformance::directory_store(&super::MemoryDirectoryStore::new());
    }
}
