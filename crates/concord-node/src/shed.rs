//! Shedding idle sessions when the provider is full: every established session says since
//! when its peer has sent nothing while no call of its runs (ready, or still waiting for
//! the requester's first proposal); when every session slot is taken and a newcomer has
//! sent a valid hello, the session whose peer was silent longest is told to close, so
//! that peers holding slots without using them cannot keep working peers out. A
//! subscription, an observation or a stream does not make a session busy: a subscriber
//! resumes from its last event id.
//!
//! The sessions that hold such things have a budget of their own, in all and per client
//! address ([`Registration::try_hold`]); when it is full, a new holder sheds the holding
//! session whose peer was silent longest.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use concord_interact::Problem;
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::admission::ClientKey;
use crate::driver::StopSignal;

/// `idle_since` of a session that is busy.
const BUSY: u64 = u64::MAX;

/// The node's established sessions, as far as shedding is concerned.
#[derive(Debug)]
pub(crate) struct IdleSessions {
    /// The instant `idle_since` values count from.
    epoch: Instant,
    sessions: Mutex<Vec<Arc<Activity>>>,
    /// Sessions holding a subscription, an observation or a stream at most, in all and
    /// per client address.
    max_holding: usize,
    max_holding_per_address: usize,
    /// How long a holder's peer must have been silent before a new holder may shed it.
    shed_after: Duration,
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
    /// The client address the session counts against.
    key: ClientKey,
    /// Whether it holds a subscription, an observation or a stream (counted in the
    /// holders' budget). Only changed under the registry's lock.
    holding: AtomicBool,
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
    pub(crate) fn new(limits: &crate::Limits) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            sessions: Mutex::new(Vec::new()),
            max_holding: limits.holding_sessions_in_force(),
            max_holding_per_address: limits.holding_sessions_per_address_in_force(),
            shed_after: limits.idle_shed_after,
        })
    }

    /// Registers a new established session from `key`'s address holding `slot`, told to
    /// stop through `stop`, busy until it says otherwise.
    pub(crate) fn register(
        self: &Arc<Self>,
        slot: Option<OwnedSemaphorePermit>,
        stop: Arc<watch::Sender<StopSignal>>,
        key: ClientKey,
    ) -> Registration {
        let activity = Arc::new(Activity {
            idle_since: AtomicU64::new(BUSY),
            stop,
            key,
            holding: AtomicBool::new(false),
        });
        self.lock().push(Arc::clone(&activity));
        Registration {
            registry: Arc::clone(self),
            activity,
            _slot: slot,
        }
    }

    /// Whether a newcomer from `newcomer`'s address could shed a session (see
    /// [`IdleSessions::shed_for`]): it may then take a slot even when all are taken.
    pub(crate) fn can_shed_for(
        &self,
        newcomer: ClientKey,
        at_least: Duration,
        now: Instant,
    ) -> bool {
        let sessions = self.lock();
        self.pick(&sessions, newcomer, at_least, now, |_| true)
            .is_some()
    }

    /// Tells a session idle at least `at_least` to close, for a newcomer from
    /// `newcomer`'s address: one of the address holding the most sessions (the
    /// newcomer's included), the one idle longest; returns whether one was told. It
    /// stops counting as idle at once, so that two newcomers never shed the same session.
    pub(crate) fn shed_for(&self, newcomer: ClientKey, at_least: Duration, now: Instant) -> bool {
        let sessions = self.lock();
        self.shed_among(&sessions, newcomer, at_least, now, StopSignal::Shed, |_| {
            true
        })
        .is_some()
    }

    /// Sheds a session idle at least `at_least` among those `eligible` picks, for a
    /// newcomer from `newcomer`'s address, telling it `why`; returns it. The victim is one
    /// of the address holding the most of those `eligible` picks, the newcomer's address
    /// counted as holding one more (ties: the one idle longest): an address holding many
    /// loses its own first. A session of an address holding fewer than the newcomer's
    /// (counted with the newcomer) is never shed for it: a peer from an address holding
    /// few, silent as a subscriber is, is not shed for the newcomers of addresses holding
    /// more, even when it is the only session silent long enough (the newcomer is then
    /// refused: its address would hold more than the victim's). When every address holds
    /// as many, the one idle longest is shed. A session of an address
    /// holding at least two more than the newcomer's is shed even before `at_least`
    /// (never while a call of its runs): else addresses holding every slot, each session
    /// reconnected within `at_least`, would keep every other address out.
    fn shed_among(
        &self,
        sessions: &[Arc<Activity>],
        newcomer: ClientKey,
        at_least: Duration,
        now: Instant,
        why: StopSignal,
        eligible: impl Fn(&Activity) -> bool,
    ) -> Option<Arc<Activity>> {
        let (since, activity) = self.pick(sessions, newcomer, at_least, now, eligible)?;
        // Claim it: a session that turned busy meanwhile is left alone.
        if activity
            .idle_since
            .compare_exchange(since, BUSY, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        StopSignal::send(&activity.stop, why);
        Some(Arc::clone(activity))
    }

    /// The session [`IdleSessions::shed_among`] would shed, with its idle mark.
    fn pick<'a>(
        &self,
        sessions: &'a [Arc<Activity>],
        newcomer: ClientKey,
        at_least: Duration,
        now: Instant,
        eligible: impl Fn(&Activity) -> bool,
    ) -> Option<(u64, &'a Arc<Activity>)> {
        let latest = self.millis(now).saturating_sub(millis(at_least));
        let mut held: HashMap<ClientKey, usize> = HashMap::from([(newcomer, 1)]);
        for activity in sessions.iter().filter(|activity| eligible(activity)) {
            *held.entry(activity.key).or_insert(0) += 1;
        }
        // With the newcomer counted: an address holding fewer would hold fewer than the
        // newcomer's after the swap, and one holding at least two more than the
        // newcomer's holds at least one more here.
        let ours = held.get(&newcomer).copied().unwrap_or(1);
        let beyond = ours + 1;
        sessions
            .iter()
            .filter(|activity| eligible(activity))
            .map(|activity| (activity.idle_since.load(Ordering::Relaxed), activity))
            .filter(|(since, activity)| {
                let count = held.get(&activity.key).copied().unwrap_or(0);
                *since != BUSY && count >= ours && (*since <= latest || count >= beyond)
            })
            .max_by_key(|(since, activity)| {
                let count = held.get(&activity.key).copied().unwrap_or(0);
                (count, Reverse(*since))
            })
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
    /// Says the session's peer has been silent since `since` with no call of its running
    /// (it may be shed), or that it is busy (`None`).
    pub(crate) fn set_idle(&self, since: Option<Instant>) {
        let value = since.map_or(BUSY, |since| self.registry.millis(since));
        self.activity.idle_since.store(value, Ordering::Relaxed);
    }

    /// Counts this session among those holding a subscription, an observation or a
    /// stream, or says why not, as the problem that answers the request: 429 when its
    /// address holds its share (`max_holding_sessions_per_address`); when the node-wide
    /// budget (`max_holding_sessions`) is full, a holding session whose peer was silent at
    /// least `idle_shed_after` is shed and its place taken (one of the address holding
    /// the most, the one silent longest: see [`IdleSessions::shed_among`]), else 503.
    pub(crate) fn try_hold(&self, now: Instant) -> Result<(), Box<Problem>> {
        let registry = &self.registry;
        let sessions = registry.lock();
        if self.activity.holding.load(Ordering::Relaxed) {
            return Ok(());
        }
        let key = self.activity.key;
        let (mut all, mut ours) = (0, 0);
        for activity in sessions.iter() {
            if activity.holding.load(Ordering::Relaxed) {
                all += 1;
                ours += usize::from(activity.key == key);
            }
        }
        if ours >= registry.max_holding_per_address {
            return Err(hold_refused(
                429,
                format!(
                    "this node serves at most {} sessions holding a subscription, an \
                     observation or a stream from one address; close one first",
                    registry.max_holding_per_address
                ),
            ));
        }
        if all >= registry.max_holding {
            let me = &self.activity;
            let shed = registry.shed_among(
                &sessions,
                key,
                registry.shed_after,
                now,
                StopSignal::ShedHolder,
                |activity| {
                    activity.holding.load(Ordering::Relaxed) && !std::ptr::eq(activity, &**me)
                },
            );
            let Some(shed) = shed else {
                return Err(hold_refused(
                    503,
                    format!(
                        "this node serves at most {} sessions holding a subscription, an \
                         observation or a stream, all of them in use; try again later",
                        registry.max_holding
                    ),
                ));
            };
            tracing::info!("the holders' budget is full: shed the holder silent longest");
            // Its place is ours now, not when it has finished closing.
            shed.holding.store(false, Ordering::Relaxed);
        }
        self.activity.holding.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// This session holds nothing any more.
    pub(crate) fn release_hold(&self) {
        let _sessions = self.registry.lock();
        self.activity.holding.store(false, Ordering::Relaxed);
    }
}

/// The problem answering a request the holders' budget refuses.
fn hold_refused(status: u16, detail: String) -> Box<Problem> {
    Box::new(Problem::of(concord_interact::ProblemType::LimitReached, detail).with_status(status))
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

    fn local() -> ClientKey {
        ClientKey::of(std::net::Ipv4Addr::LOCALHOST.into())
    }

    fn session(registry: &Arc<IdleSessions>) -> (Registration, watch::Receiver<StopSignal>) {
        session_from(registry, local())
    }

    fn session_from(
        registry: &Arc<IdleSessions>,
        key: ClientKey,
    ) -> (Registration, watch::Receiver<StopSignal>) {
        let (stop, signal) = watch::channel(StopSignal::Running);
        (registry.register(None, Arc::new(stop), key), signal)
    }

    #[test]
    fn the_address_holding_most_is_shed_first_and_a_lone_silent_peer_is_not() {
        let registry = IdleSessions::new(&crate::Limits::default());
        let now = Instant::now() + Duration::from_secs(10);
        let attacker = ClientKey::of(std::net::Ipv4Addr::new(192, 0, 2, 1).into());
        let other = ClientKey::of(std::net::Ipv4Addr::new(192, 0, 2, 2).into());
        // The caller's subscriber, silent longest.
        let (caller, caller_signal) = session(&registry);
        caller.set_idle(Some(now - Duration::from_secs(9)));
        let mut attackers = Vec::new();
        for (key, silent) in [(attacker, 3), (attacker, 2), (other, 1)] {
            let (registration, signal) = session_from(&registry, key);
            registration.set_idle(Some(now - Duration::from_secs(silent)));
            attackers.push((registration, signal));
        }
        // A newcomer from the other address: the attacker holds the most.
        assert!(registry.shed_for(other, Duration::from_secs(1), now));
        assert_eq!(*attackers[0].1.borrow(), StopSignal::Shed);
        // The attacker's own newcomer sheds the attacker's next, the other's its own: not
        // the caller's, silent longest.
        assert!(registry.shed_for(attacker, Duration::from_secs(1), now));
        assert_eq!(*attackers[1].1.borrow(), StopSignal::Shed);
        assert!(registry.shed_for(other, Duration::from_secs(1), now));
        assert_eq!(*attackers[2].1.borrow(), StopSignal::Shed);
        assert_eq!(*caller_signal.borrow(), StopSignal::Running);
        // Every address holding as many (the shed still count until they leave): the one
        // silent longest.
        drop(attackers);
        assert!(registry.shed_for(other, Duration::from_secs(1), now));
        assert_eq!(*caller_signal.borrow(), StopSignal::Shed);
    }

    /// Addresses holding every slot with sessions younger than the floor (each
    /// reconnected at once) do not keep another address out: a newcomer from an address
    /// holding two fewer sheds one of theirs at once; their own newcomers wait for the
    /// floor; a session with a call running is never shed.
    #[test]
    fn young_sessions_of_an_address_holding_many_are_shed_for_another_address() {
        let registry = IdleSessions::new(&crate::Limits::default());
        let now = Instant::now() + Duration::from_secs(10);
        let attacker = ClientKey::of(std::net::Ipv4Addr::new(192, 0, 2, 9).into());
        let (busy, busy_signal) = session_from(&registry, attacker);
        let (young, young_signal) = session_from(&registry, attacker);
        young.set_idle(Some(now - Duration::from_millis(100)));
        // The attacker's own newcomer: its address holds as many, the floor applies.
        assert!(!registry.can_shed_for(attacker, Duration::from_secs(1), now));
        assert!(!registry.shed_for(attacker, Duration::from_secs(1), now));
        // Another address holding none: the young session goes at once, the busy one stays.
        assert!(registry.can_shed_for(local(), Duration::from_secs(1), now));
        assert!(registry.shed_for(local(), Duration::from_secs(1), now));
        assert_eq!(*young_signal.borrow(), StopSignal::Shed);
        assert_eq!(*busy_signal.borrow(), StopSignal::Running);
        assert!(!registry.shed_for(local(), Duration::from_secs(1), now));
        drop((busy, young));
    }

    #[test]
    fn the_session_idle_longest_is_shed_and_only_once() {
        let registry = IdleSessions::new(&crate::Limits::default());
        let now = Instant::now() + Duration::from_secs(10);
        let (busy, _) = session(&registry);
        let (older, older_signal) = session(&registry);
        let (newer, newer_signal) = session(&registry);
        older.set_idle(Some(now - Duration::from_secs(5)));
        newer.set_idle(Some(now - Duration::from_secs(2)));
        // Nobody idle for 6 s.
        assert!(!registry.can_shed_for(local(), Duration::from_secs(6), now));
        assert!(!registry.shed_for(local(), Duration::from_secs(6), now));
        assert!(registry.can_shed_for(local(), Duration::from_secs(1), now));
        assert!(registry.shed_for(local(), Duration::from_secs(1), now));
        assert_eq!(*older_signal.borrow(), StopSignal::Shed);
        assert_eq!(*newer_signal.borrow(), StopSignal::Running);
        assert!(registry.shed_for(local(), Duration::from_secs(1), now));
        assert_eq!(*newer_signal.borrow(), StopSignal::Shed);
        // Each was claimed once: nobody idle is left.
        assert!(!registry.shed_for(local(), Duration::ZERO, now));
        drop(busy);
        assert_eq!(registry.lock().len(), 2);
    }
}
