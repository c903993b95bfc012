//! The replay cache: each (DID, nonce) is accepted once while its signature could still be
//! valid.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};

use crate::did::Did;
use crate::nonce_log::NonceLog;

/// Default capacity (entries).
pub const DEFAULT_CAPACITY: usize = 100_000;
/// Default time to live: 360 s, the SDK's 6 minutes (≥ max age 300 s + skew 60 s).
pub const DEFAULT_TTL: Duration = Duration::from_secs(360);
/// Default share of one DID: 1% of the capacity (1,000 of 100,000), so that one DID
/// signing fresh nonces as fast as it can fills its own share, not everyone's.
pub const DEFAULT_PER_DID_SHARE: usize = 100;

/// Why a (DID, nonce) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Replay {
    /// The nonce was already used by this DID and has not expired.
    #[error("nonce already used by this DID")]
    Seen,
    /// The cache holds `capacity` unexpired nonces; new ones are refused rather than old
    /// ones forgotten (forgetting would allow replays). Answer 503 and retry later.
    #[error("replay cache is full ({capacity} unexpired nonces)")]
    Full {
        /// The capacity.
        capacity: usize,
    },
    /// This DID already holds `limit` unexpired nonces (its share of the cache): it is
    /// refused until some expire; other DIDs are not.
    #[error("this DID holds {limit} unexpired nonces, its share of the replay cache")]
    DidQuota {
        /// The share of one DID.
        limit: usize,
    },
}

/// A bounded set of (DID, nonce) pairs with expiry: the in-memory [`NonceLog`], one
/// process's default.
///
/// Stores a 16-byte keyed hash of each pair (SHA-256 under a random key drawn at
/// [`ReplayCache::new`], so a peer cannot aim collisions), in a `HashMap` plus a `VecDeque`
/// in insertion order for expiry. When full, expired entries are evicted first; if it is
/// still full the new pair is refused ([`Replay::Full`]). One DID may hold at most its
/// share of the entries ([`ReplayCache::per_did`]; [`Replay::DidQuota`] beyond). Pairs
/// [restored](ReplayCache::restore) from an earlier process are kept until they expire but
/// count against neither bound: new pairs have the whole capacity beside them.
///
/// The entries sit behind a mutex held for one lookup or insertion, so one cache can be
/// shared (`Arc<dyn NonceLog>`) by every connection of a node; the `&mut self` methods
/// reach them without locking.
pub struct ReplayCache {
    key: [u8; 32],
    capacity: usize,
    per_did: usize,
    ttl: i64,
    entries: Mutex<Entries>,
}

/// What a [`ReplayCache`] holds.
#[derive(Default)]
struct Entries {
    seen: HashMap<[u8; 16], i64>,
    /// Entries in insertion order: expiry, the pair's hash, the DID's hash (`None` for a
    /// restored pair, which counts against no bound).
    order: VecDeque<(i64, [u8; 16], Option<[u8; 16]>)>,
    /// Unexpired entries per DID (by the DID's hash), restored ones left out.
    per_did_count: HashMap<[u8; 16], u32>,
    /// Unexpired entries recorded by [`insert`](ReplayCache::insert): what the capacity
    /// bounds.
    inserted: usize,
}

impl Default for ReplayCache {
    fn default() -> Self {
        ReplayCache::new(DEFAULT_CAPACITY, DEFAULT_TTL)
    }
}

impl std::fmt::Debug for ReplayCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayCache")
            .field("capacity", &self.capacity)
            .field("ttl", &self.ttl)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl ReplayCache {
    /// A cache of at most `capacity` pairs, each kept `ttl` after it was recorded; one DID
    /// holds at most 1% of them (at least 1; [`per_did`](Self::per_did) sets another share).
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        let mut key = [0u8; 32];
        OsRng.fill_bytes(&mut key);
        ReplayCache {
            key,
            capacity,
            per_did: (capacity / DEFAULT_PER_DID_SHARE).max(1),
            ttl: i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX),
            entries: Mutex::new(Entries::default()),
        }
    }

    /// At most `limit` unexpired nonces per DID (at least 1).
    pub fn per_did(mut self, limit: usize) -> Self {
        self.per_did = limit.max(1);
        self
    }

    fn digest(&self, did: &Did, nonce: Option<&str>) -> [u8; 16] {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update((did.as_str().len() as u64).to_le_bytes());
        h.update(did.as_str());
        if let Some(nonce) = nonce {
            h.update([1u8]);
            h.update(nonce);
        }
        let full = h.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// The entries, locked (a panic elsewhere while holding them leaves them consistent:
    /// every change is a few map and queue operations that cannot panic halfway).
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether (did, nonce) was recorded and has not expired: the cheap check a verifier
    /// makes before any costly work (fetching a document).
    pub fn contains(&self, did: &Did, nonce: &str, now_unix: i64) -> bool {
        let digest = self.digest(did, Some(nonce));
        self.lock()
            .seen
            .get(&digest)
            .is_some_and(|&expiry| expiry > now_unix)
    }

    /// Records (did, nonce) at `now_unix`; [`Replay::Seen`] if it is already there and
    /// unexpired, [`Replay::Full`] if the cache is full of unexpired pairs.
    pub fn insert(&mut self, did: &Did, nonce: &str, now_unix: i64) -> Result<(), Replay> {
        self.record(did, nonce, now_unix)
    }

    /// Records (did, nonce) as recorded at `recorded_unix` (by an earlier process, read
    /// back from durable storage): it is a replay until it expires, whatever the bounds
    /// (what was accepted must not be forgotten while its signature could still be valid),
    /// and counts against neither the capacity nor the DID's share, so that new pairs are
    /// accepted beside everything restored (agents sharing a store may together have
    /// recorded several times one cache's capacity): the cache holds at most the capacity
    /// plus the pairs restored, shrinking back as they expire. Restore pairs oldest first,
    /// before any [`insert`](Self::insert).
    pub fn restore(&mut self, did: &Did, nonce: &str, recorded_unix: i64) {
        <Self as NonceLog>::restore(self, did, nonce, recorded_unix);
    }

    /// Pairs held (some may have expired but not yet been evicted).
    pub fn len(&self) -> usize {
        self.lock().seen.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.lock().seen.is_empty()
    }

    /// Approximate heap bytes: the map's buckets (key, value and one control byte each) and
    /// the queue's slots, by allocated capacity.
    pub fn approx_memory_bytes(&self) -> usize {
        // hashbrown allocates a power of two ≥ capacity * 8 / 7 buckets, each holding its
        // entry and one control byte.
        fn map_bytes<K, V>(map: &HashMap<K, V>) -> usize {
            if map.capacity() == 0 {
                return 0;
            }
            (map.capacity() * 8 / 7).next_power_of_two() * (std::mem::size_of::<(K, V)>() + 1)
        }
        let entries = self.lock();
        map_bytes(&entries.seen)
            + map_bytes(&entries.per_did_count)
            + entries.order.capacity() * std::mem::size_of::<(i64, [u8; 16], Option<[u8; 16]>)>()
            + std::mem::size_of::<Self>()
    }
}

impl NonceLog for ReplayCache {
    fn seen(&self, did: &Did, nonce: &str, now_unix: i64) -> bool {
        self.contains(did, nonce, now_unix)
    }

    fn record(&self, did: &Did, nonce: &str, now_unix: i64) -> Result<(), Replay> {
        let digest = self.digest(did, Some(nonce));
        let did_digest = self.digest(did, None);
        let mut entries = self.lock();
        if let Some(&expiry) = entries.seen.get(&digest) {
            if expiry > now_unix {
                return Err(Replay::Seen);
            }
        }
        entries.evict_expired(now_unix);
        let held = entries.per_did_count.get(&did_digest).copied().unwrap_or(0);
        if usize::try_from(held).unwrap_or(usize::MAX) >= self.per_did {
            return Err(Replay::DidQuota {
                limit: self.per_did,
            });
        }
        if entries.inserted >= self.capacity {
            return Err(Replay::Full {
                capacity: self.capacity,
            });
        }
        let expiry = now_unix.saturating_add(self.ttl);
        entries.seen.insert(digest, expiry);
        entries.order.push_back((expiry, digest, Some(did_digest)));
        entries.inserted += 1;
        *entries.per_did_count.entry(did_digest).or_insert(0) += 1;
        Ok(())
    }

    fn restore(&self, did: &Did, nonce: &str, recorded_unix: i64) {
        let digest = self.digest(did, Some(nonce));
        let mut entries = self.lock();
        if entries.seen.contains_key(&digest) {
            return;
        }
        let expiry = recorded_unix.saturating_add(self.ttl);
        entries.seen.insert(digest, expiry);
        entries.order.push_back((expiry, digest, None));
    }
}

impl Entries {
    fn evict_expired(&mut self, now_unix: i64) {
        while let Some(&(expiry, digest, did)) = self.order.front() {
            if expiry > now_unix {
                break;
            }
            self.order.pop_front();
            if self.seen.get(&digest) == Some(&expiry) {
                self.seen.remove(&digest);
            }
            let Some(did) = did else {
                continue;
            };
            self.inserted = self.inserted.saturating_sub(1);
            if let Some(count) = self.per_did_count.get_mut(&did) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.per_did_count.remove(&did);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn did(s: &str) -> Did {
        Did::parse(&format!("did:wba:example.com:{s}")).unwrap()
    }

    #[test]
    fn second_use_is_a_replay_until_expiry() {
        let mut cache = ReplayCache::new(10, Duration::from_secs(360));
        cache.insert(&did("a"), "n1", 1000).unwrap();
        assert_eq!(cache.insert(&did("a"), "n1", 1001), Err(Replay::Seen));
        cache.insert(&did("b"), "n1", 1001).unwrap(); // other DID, same nonce
        assert_eq!(cache.insert(&did("a"), "n1", 1359), Err(Replay::Seen));
        cache.insert(&did("a"), "n1", 1360).unwrap(); // expired: accepted again
    }

    #[test]
    fn full_refuses_rather_than_forgets() {
        let mut cache = ReplayCache::new(2, Duration::from_secs(10)).per_did(3);
        cache.insert(&did("a"), "1", 0).unwrap();
        cache.insert(&did("a"), "2", 0).unwrap();
        assert_eq!(
            cache.insert(&did("a"), "3", 5),
            Err(Replay::Full { capacity: 2 })
        );
        assert_eq!(cache.insert(&did("a"), "1", 5), Err(Replay::Seen));
        cache.insert(&did("a"), "3", 10).unwrap(); // the old ones expired
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn restored_pairs_are_replays_until_they_expire_whatever_the_bounds() {
        let mut cache = ReplayCache::new(2, Duration::from_secs(10)).per_did(1);
        for nonce in ["1", "2", "3"] {
            cache.restore(&did("a"), nonce, 0);
        }
        assert_eq!(cache.len(), 3, "over the capacity: nothing forgotten");
        assert_eq!(cache.insert(&did("a"), "2", 5), Err(Replay::Seen));
        cache.insert(&did("a"), "2", 10).unwrap(); // expired: accepted again
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_cache_restored_over_its_capacity_still_takes_new_pairs_and_refuses_every_replay() {
        // Agents sharing a store recorded three times this cache's capacity between them.
        let mut cache = ReplayCache::new(2, Duration::from_secs(10)).per_did(1);
        for nonce in ["1", "2", "3", "4", "5", "6"] {
            cache.restore(&did("a"), nonce, 0);
        }
        // Every restored pair is a replay until it expires…
        for nonce in ["1", "2", "3", "4", "5", "6"] {
            assert_eq!(cache.insert(&did("a"), nonce, 5), Err(Replay::Seen));
        }
        // …and new pairs have the whole capacity and their DID's share beside them.
        cache.insert(&did("a"), "7", 5).unwrap();
        assert_eq!(
            cache.insert(&did("a"), "8", 5),
            Err(Replay::DidQuota { limit: 1 })
        );
        cache.insert(&did("b"), "1", 5).unwrap();
        assert_eq!(
            cache.insert(&did("c"), "1", 5),
            Err(Replay::Full { capacity: 2 })
        );
        assert_eq!(cache.len(), 8, "the capacity plus the pairs restored");
        // The restored pairs expire (at 10), the new ones later (at 15).
        assert_eq!(cache.insert(&did("a"), "7", 12), Err(Replay::Seen));
        assert_eq!(
            cache.insert(&did("c"), "1", 12),
            Err(Replay::Full { capacity: 2 })
        );
        assert_eq!(cache.len(), 2, "shrunk back as the restored pairs expired");
    }

    #[test]
    fn memory_is_reported() {
        let mut cache = ReplayCache::default();
        for i in 0..1000 {
            cache.insert(&did("a"), &i.to_string(), 0).unwrap();
        }
        let bytes = cache.approx_memory_bytes();
        assert!(bytes > 1000 * 40 && bytes < 1000 * 200, "{bytes}");
    }

    #[test]
    fn one_did_fills_only_its_share_and_others_still_get_in() {
        let mut cache = ReplayCache::new(100, Duration::from_secs(60)).per_did(3);
        let flooder = did("flooder");
        for n in 0..3 {
            cache.insert(&flooder, &format!("n{n}"), 0).unwrap();
        }
        assert_eq!(
            cache.insert(&flooder, "n3", 0),
            Err(Replay::DidQuota { limit: 3 })
        );
        cache.insert(&did("someone-else"), "n0", 0).unwrap();
        assert!(cache.contains(&flooder, "n1", 0));
        assert!(!cache.contains(&flooder, "n3", 0));
        // Once its nonces expire, the DID gets its share back.
        cache.insert(&flooder, "n4", 61).unwrap();
        assert!(!cache.contains(&flooder, "n1", 61));
    }

    #[test]
    fn the_replay_cache_passes_the_nonce_log_conformance_suite() {
        crate::conformance::nonce_log(
            &|| ReplayCache::new(1_000, Duration::from_secs(360)).per_did(100),
            360,
        );
    }

    /// A log that forgets every nonce: the suite must catch it.
    #[derive(Debug)]
    struct Forgetful;

    impl NonceLog for Forgetful {
        fn seen(&self, _: &Did, _: &str, _: i64) -> bool {
            false
        }
        fn record(&self, _: &Did, _: &str, _: i64) -> Result<(), Replay> {
            Ok(())
        }
        fn restore(&self, _: &Did, _: &str, _: i64) {}
    }

    #[test]
    #[should_panic(expected = "false negative")]
    fn the_nonce_log_suite_refuses_a_log_that_forgets() {
        crate::conformance::nonce_log(&|| Forgetful, 360);
    }
}
