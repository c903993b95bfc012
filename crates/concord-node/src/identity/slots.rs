//! Fetch slots shared out by key (a DID's registrable domain, a client address): at most
//! `limit` held at once per key, the key's semaphore kept only while someone holds or
//! waits for one of its slots.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `limit` slots per key.
pub(crate) struct KeyedSlots<K> {
    limit: usize,
    semaphores: Mutex<HashMap<K, Arc<Semaphore>>>,
}

impl<K: Hash + Eq + Clone> KeyedSlots<K> {
    /// `limit` slots per key (at least 1, at most [`Semaphore::MAX_PERMITS`]: checked by
    /// the settings that give it).
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            semaphores: Mutex::new(HashMap::new()),
        }
    }

    /// The limit per key.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// One of `key`'s slots, waiting at most `wait`; `None` when none was free in time.
    pub(crate) async fn acquire(&self, key: K, wait: Duration) -> Option<KeyedSlot<'_, K>> {
        let semaphore = Arc::clone(
            self.lock()
                .entry(key.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limit))),
        );
        // Made before waiting, so that a wait that times out (or is cancelled) cleans up.
        let mut slot = KeyedSlot {
            slots: self,
            key,
            semaphore,
            permit: None,
        };
        let acquired = tokio::time::timeout(wait, Arc::clone(&slot.semaphore).acquire_owned());
        // The semaphore is never closed; a closed one is as good as a full one.
        slot.permit = Some(acquired.await.ok()?.ok()?);
        Some(slot)
    }

    /// Keys with a slot held or waited for.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Arc<Semaphore>>> {
        self.semaphores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A slot of one key; the key's semaphore leaves the map with the last slot.
pub(crate) struct KeyedSlot<'a, K: Hash + Eq + Clone> {
    slots: &'a KeyedSlots<K>,
    key: K,
    semaphore: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl<K: Hash + Eq + Clone> Drop for KeyedSlot<'_, K> {
    fn drop(&mut self) {
        let mut semaphores = self.slots.lock();
        drop(self.permit.take());
        // Clones are made under this lock: the map's and ours alone mean nobody else holds
        // or waits for this key.
        if Arc::strong_count(&self.semaphore) == 2
            && semaphores
                .get(&self.key)
                .is_some_and(|semaphore| Arc::ptr_eq(semaphore, &self.semaphore))
        {
            semaphores.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_key_has_its_own_limit_and_leaves_the_map_with_its_last_slot() {
        let slots = KeyedSlots::new(2);
        let wait = Duration::from_millis(50);
        let a1 = slots.acquire("a", wait).await.unwrap();
        let _a2 = slots.acquire("a", wait).await.unwrap();
        assert!(slots.acquire("a", wait).await.is_none(), "a third of a");
        let b = slots.acquire("b", wait).await.unwrap();
        drop(a1);
        assert!(slots.acquire("a", wait).await.is_some());
        drop(b);
        drop(_a2);
        assert!(slots.is_empty());
    }
}
