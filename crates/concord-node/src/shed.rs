//! Shedding idle sessions when the provider is full: every established session says when
//! it became idle (ready with nothing in flight, or still waiting for the requester's
//! first proposal); when every session slot is taken and a newcomer has sent a valid
//! hello, the session idle longest is told to close, so that peers holding slots without
//! using them cannot keep working peers out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::driver::StopSignal;

/// `idle_since` of a session that is busy.
const BUSY: u64 = u64::MAX;

/// The node's established sessions, as far as shedding is concerned.
#[derive(Debug)]
pub(crate) struct IdleSessions {
    /// The instant `idle_since` values count from.
    epoch: Instant,
    sessions: Mutex<Vec<Arc<Activity>>>,
}

/// One session's side: when it became idle, and its stop signal.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Milliseconds from the registry's epoch at which the session became idle, or
    /// [`BUSY`].
    idle_since: AtomicU64,
    /// The session's stop signal (the one a shutdown uses too): shedding sets it to
    /// [`StopSignal::Shed`].
    stop: Arc<watch::Sender<StopSignal>>,
}

/// A session's registration, holding its session slot: says when it is idle, learns when
/// it is shed, and leaves the registry, giving the slot back, when dropped (a shed
/// session drops it as soon as it starts closing, so that the newcomer need not wait for
/// the close handshake).
#[derive(Debug)]
pub(crate) struct Registration {
    registry: Arc<IdleSessions>,
    activity: Arc<Activity>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl IdleSessions {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            sessions: Mutex::new(Vec::new()),
        })
    }

    /// Registers a new established session holding `slot`, told to stop through `stop`,
    /// busy until it says otherwise.
    pub(crate) fn register(
        self: &Arc<Self>,
        slot: Option<OwnedSemaphorePermit>,
        stop: Arc<watch::Sender<StopSignal>>,
    ) -> Registration {
        let activity = Arc::new(Activity {
            idle_since: AtomicU64::new(BUSY),
            stop,
        });
        self.lock().push(Arc::clone(&activity));
        Registration {
            registry: Arc::clone(self),
            activity,
            _slot: slot,
        }
    }

    /// Whether some session has been idle at least `at_least`: a newcomer may then take a
    /// slot even when all are taken.
    pub(crate) fn has_idle(&self, at_least: Duration, now: Instant) -> bool {
        let latest = self.millis(now).saturating_sub(millis(at_least));
        self.lock().iter().any(|activity| {
            let since = activity.idle_since.load(Ordering::Relaxed);
            since != BUSY && since <= latest
        })
    }

    /// Tells the session idle longest, if it has been idle at least `at_least`, to close;
    /// returns whether one was told. It stops counting as idle at once, so that two
    /// newcomers never shed the same session.
    pub(crate) fn shed_longest_idle(&self, at_least: Duration, now: Instant) -> bool {
        let latest = self.millis(now).saturating_sub(millis(at_least));
        let sessions = self.lock();
        let oldest = sessions
            .iter()
            .map(|activity| (activity.idle_since.load(Ordering::Relaxed), activity))
            .filter(|(since, _)| *since != BUSY && *since <= latest)
            .min_by_key(|(since, _)| *since);
        let Some((since, activity)) = oldest else {
            return false;
        };
        // Claim it: a session that turned busy meanwhile is left alone.
        if activity
            .idle_since
            .compare_exchange(since, BUSY, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        StopSignal::send(&activity.stop, StopSignal::Shed);
        true
    }

    fn millis(&self, at: Instant) -> u64 {
        millis(at.saturating_duration_since(self.epoch))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Activity>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(BUSY - 1)
}

impl Registration {
    /// Says the session is idle since `since`, or busy (`None`).
    pub(crate) fn set_idle(&self, since: Option<Instant>) {
        let value = since.map_or(BUSY, |since| self.registry.millis(since));
        self.activity.idle_since.store(value, Ordering::Relaxed);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry
            .lock()
            .retain(|activity| !Arc::ptr_eq(activity, &self.activity));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(registry: &Arc<IdleSessions>) -> (Registration, watch::Receiver<StopSignal>) {
        let (stop, signal) = watch::channel(StopSignal::Running);
        (registry.register(None, Arc::new(stop)), signal)
    }

    #[test]
    fn the_session_idle_longest_is_shed_and_only_once() {
        let registry = IdleSessions::new();
        let now = Instant::now() + Duration::from_secs(10);
        let (busy, _) = session(&registry);
        let (older, older_signal) = session(&registry);
        let (newer, newer_signal) = session(&registry);
        older.set_idle(Some(now - Duration::from_secs(5)));
        newer.set_idle(Some(now - Duration::from_secs(2)));
        // Nobody idle for 6 s.
        assert!(!registry.has_idle(Duration::from_secs(6), now));
        assert!(!registry.shed_longest_idle(Duration::from_secs(6), now));
        assert!(registry.has_idle(Duration::from_secs(1), now));
        assert!(registry.shed_longest_idle(Duration::from_secs(1), now));
        assert_eq!(*older_signal.borrow(), StopSignal::Shed);
        assert_eq!(*newer_signal.borrow(), StopSignal::Running);
        assert!(registry.shed_longest_idle(Duration::from_secs(1), now));
        assert_eq!(*newer_signal.borrow(), StopSignal::Shed);
        // Each was claimed once: nobody idle is left.
        assert!(!registry.shed_longest_idle(Duration::ZERO, now));
        drop(busy);
        assert_eq!(registry.lock().len(), 2);
    }
}
