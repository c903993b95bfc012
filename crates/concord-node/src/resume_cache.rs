//! The protocols a provider resumed lately, by hash: a repeat 0-RTT hello is answered
//! from here, without a trip to the store on the blocking pool before the answer.
//!
//! A hash names one document, so an entry is never stale by its content; what may change is
//! whether the store still holds the protocol (pruned by count or by a peer's share,
//! forgotten by `concord protocols forget`, evicted by another replica on a shared
//! backend). An entry is therefore kept at most `Limits::resume_cache_ttl` after the store
//! last vouched for it: a protocol the store forgot is resumed for at most that long after.
//! Pure: the caller gives `now`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_proto::ProtocolHash;

/// The most protocols kept; one more pushes out the one the store vouched for longest ago.
pub(crate) const RESUME_CACHE_CAPACITY: usize = 256;

/// What the store said of a protocol when it vouched for it.
#[derive(Debug)]
struct Entry<T> {
    value: Arc<T>,
    vouched: Instant,
}

/// Protocols by hash, each kept `ttl` after the store vouched for it, at most `capacity`.
#[derive(Debug)]
pub(crate) struct ResumeCache<T> {
    entries: HashMap<ProtocolHash, Entry<T>>,
    ttl: Duration,
    capacity: usize,
}

impl<T> ResumeCache<T> {
    /// An empty cache keeping entries `ttl` (zero: nothing is kept) and at most `capacity`.
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            ttl,
            capacity,
        }
    }

    /// The protocol `hash`, if the store vouched for it less than `ttl` before `now`.
    pub(crate) fn get(&mut self, hash: &ProtocolHash, now: Instant) -> Option<Arc<T>> {
        let entry = self.entries.get(hash)?;
        if now.saturating_duration_since(entry.vouched) < self.ttl {
            return Some(Arc::clone(&entry.value));
        }
        self.entries.remove(hash);
        None
    }

    /// The store vouched for `hash` at `now`, as `value`.
    pub(crate) fn insert(&mut self, hash: ProtocolHash, value: Arc<T>, now: Instant) {
        if self.ttl.is_zero() || self.capacity == 0 {
            return;
        }
        if !self.entries.contains_key(&hash) && self.entries.len() >= self.capacity {
            let ttl = self.ttl;
            self.entries
                .retain(|_, entry| now.saturating_duration_since(entry.vouched) < ttl);
            if self.entries.len() >= self.capacity {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.vouched)
                    .map(|(hash, _)| *hash);
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
            }
        }
        self.entries.insert(
            hash,
            Entry {
                value,
                vouched: now,
            },
        );
    }

    /// How many protocols are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: u8) -> ProtocolHash {
        ProtocolHash::of_text(&format!("protocol {n}"))
    }

    #[test]
    fn an_entry_is_kept_until_its_ttl_from_when_the_store_vouched_for_it() {
        let mut cache = ResumeCache::new(Duration::from_secs(10), 4);
        let t0 = Instant::now();
        cache.insert(hash(1), Arc::new("one"), t0);
        assert_eq!(
            cache.get(&hash(1), t0 + Duration::from_secs(9)).as_deref(),
            Some(&"one")
        );
        // Vouched for again: kept 10 s from then.
        cache.insert(hash(1), Arc::new("one"), t0 + Duration::from_secs(9));
        assert!(cache.get(&hash(1), t0 + Duration::from_secs(18)).is_some());
        // At exactly the ttl: gone, and forgotten.
        assert!(cache.get(&hash(1), t0 + Duration::from_secs(19)).is_none());
        assert_eq!(cache.len(), 0);
        assert!(cache.get(&hash(2), t0).is_none());
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_one_vouched_for_longest_ago() {
        let mut cache = ResumeCache::new(Duration::from_secs(10), 2);
        let t0 = Instant::now();
        cache.insert(hash(1), Arc::new(1), t0);
        cache.insert(hash(2), Arc::new(2), t0 + Duration::from_secs(1));
        cache.insert(hash(3), Arc::new(3), t0 + Duration::from_secs(2));
        assert_eq!(cache.len(), 2);
        let now = t0 + Duration::from_secs(3);
        assert!(cache.get(&hash(1), now).is_none(), "the oldest went");
        assert!(cache.get(&hash(2), now).is_some());
        assert!(cache.get(&hash(3), now).is_some());
        // Both expired by then: both go, the newcomer stays.
        let later = t0 + Duration::from_secs(30);
        cache.insert(hash(4), Arc::new(4), later);
        assert_eq!(cache.len(), 1);
        assert!(cache.get(&hash(4), later).is_some());
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let t0 = Instant::now();
        let mut off = ResumeCache::new(Duration::ZERO, 4);
        off.insert(hash(1), Arc::new(1), t0);
        assert!(off.get(&hash(1), t0).is_none());
        assert_eq!(off.len(), 0);
    }
}
