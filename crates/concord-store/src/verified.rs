//! The hashes whose stored documents this process has verified: a 0-RTT check answers
//! from here instead of reading and re-hashing the document.
//!
//! A document is verified once, when it is saved (it was hashed to name it) or the first
//! time it is read; an entry is dropped when the protocol is forgotten, evicted, found
//! corrupt by an explicit check, or saved again. A row changed on disk behind this
//! process's back after it was verified is not noticed by the 0-RTT checks: only by
//! [`Store::check`](crate::Store::check) and the listings, which re-hash everything.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use concord_proto::ProtocolHash;

/// How many verified hashes are remembered at most: beyond, an arbitrary one is forgotten
/// (and re-hashed the next time it is checked). Above the node's default bound on stored
/// protocols (10,000).
pub const VERIFIED_CAPACITY: usize = 16_384;

/// A bounded set of verified hashes, shared by every caller of a store.
#[derive(Debug, Default)]
pub(crate) struct Verified(Mutex<HashSet<ProtocolHash>>);

impl Verified {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<ProtocolHash>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `hash`'s stored document was verified by this process.
    pub(crate) fn contains(&self, hash: &ProtocolHash) -> bool {
        self.set().contains(hash)
    }

    /// Remembers that `hash`'s stored document reproduces it.
    pub(crate) fn insert(&self, hash: ProtocolHash) {
        let mut set = self.set();
        if set.len() >= VERIFIED_CAPACITY && !set.contains(&hash) {
            if let Some(any) = set.iter().next().copied() {
                set.remove(&any);
            }
        }
        set.insert(hash);
    }

    /// Forgets `hash` (forgotten, evicted or found corrupt).
    pub(crate) fn remove(&self, hash: &ProtocolHash) {
        self.set().remove(hash);
    }

    /// How many hashes are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.set().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_its_capacity() {
        let verified = Verified::default();
        for i in 0..VERIFIED_CAPACITY + 10 {
            verified.insert(ProtocolHash::of_text(&i.to_string()));
        }
        assert_eq!(verified.len(), VERIFIED_CAPACITY);
        let last = ProtocolHash::of_text(&(VERIFIED_CAPACITY + 9).to_string());
        assert!(verified.contains(&last));
        verified.remove(&last);
        assert!(!verified.contains(&last));
    }
}
