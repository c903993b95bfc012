//! What the engine's hooks report about the current call: the deadline, checked by the
//! interrupt handler, and whether the allocator refused memory past the cap.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Shared between a handler (which arms it around each call), the interrupt handler the engine
/// polls while running code (every few thousand bytecode instructions and inside the regexp
/// matcher), and the engine's allocator.
#[derive(Debug)]
pub(crate) struct Watch {
    epoch: Instant,
    /// Nanoseconds since `epoch` after which the engine is interrupted; `u64::MAX` when disarmed.
    expires_at: AtomicU64,
    /// Set when the interrupt handler stopped the engine since the watch was last armed.
    expired: AtomicBool,
    /// Set when the allocator refused an allocation since the watch was last armed.
    memory_refused: AtomicBool,
}

impl Watch {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            expires_at: AtomicU64::new(u64::MAX),
            expired: AtomicBool::new(false),
            memory_refused: AtomicBool::new(false),
        })
    }

    /// Starts a deadline `timeout` from now and clears both flags.
    pub(crate) fn arm(&self, timeout: Duration) {
        let expires_at = self
            .nanos_since_epoch()
            .saturating_add(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
        self.expired.store(false, Ordering::Relaxed);
        self.memory_refused.store(false, Ordering::Relaxed);
        self.expires_at.store(expires_at, Ordering::Relaxed);
    }

    /// Stops checking the deadline.
    pub(crate) fn disarm(&self) {
        self.expires_at.store(u64::MAX, Ordering::Relaxed);
    }

    /// Whether the interrupt handler has stopped the engine since the last [`arm`](Self::arm).
    pub(crate) fn expired(&self) -> bool {
        self.expired.load(Ordering::Relaxed)
    }

    /// Whether the allocator has refused memory since the last [`arm`](Self::arm).
    pub(crate) fn memory_refused(&self) -> bool {
        self.memory_refused.load(Ordering::Relaxed)
    }

    /// The interrupt handler's check, also used by Rust loops that feed the engine: `true`
    /// once the deadline has passed (and from then on until the next `arm`).
    pub(crate) fn should_interrupt(&self) -> bool {
        let expires_at = self.expires_at.load(Ordering::Relaxed);
        if expires_at == u64::MAX || self.nanos_since_epoch() < expires_at {
            return false;
        }
        self.expired.store(true, Ordering::Relaxed);
        true
    }

    /// Called by the allocator when it refuses an allocation.
    pub(crate) fn refuse_memory(&self) {
        self.memory_refused.store(true, Ordering::Relaxed);
    }

    fn nanos_since_epoch(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disarmed_never_interrupts() {
        let watch = Watch::new();
        assert!(!watch.should_interrupt());
        watch.arm(Duration::ZERO);
        assert!(watch.should_interrupt());
        assert!(watch.expired());
        watch.disarm();
        assert!(!watch.should_interrupt());
        watch.arm(Duration::from_secs(3600));
        assert!(!watch.should_interrupt());
        assert!(!watch.expired());
    }

    #[test]
    fn arming_clears_the_memory_flag() {
        let watch = Watch::new();
        watch.refuse_memory();
        assert!(watch.memory_refused());
        watch.arm(Duration::from_secs(1));
        assert!(!watch.memory_refused());
    }
}
