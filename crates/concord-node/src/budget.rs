//! The node-wide budget of running backend calls: every call of an action (request-reply,
//! notify, progress, stream; a closure, a command, a POST) holds a slot while it runs, so
//! that strangers cannot start more processes or requests than the machine can take.
//!
//! `Limits::max_backend_calls` slots in all, at most `Limits::max_backend_calls_per_address`
//! of them held by one client address (an IPv4 address or an IPv6 /64, as admission counts
//! them; an authenticated caller counts against its address too). A call that finds no slot
//! waits, at most `Limits::backend_call_wait`; when a slot frees it goes to the waiter whose
//! address holds the fewest running calls, then to the one whose address has had the least
//! slot time lately (the time its ended calls held their slots, halved every
//! `Limits::backend_call_wait`; the oldest waiter first among equals), so a flood from
//! many addresses, each call of which holds a slot for a second, does not keep an address
//! whose calls take a millisecond waiting behind a round of theirs. At most
//! `Limits::max_backend_waiting_per_address` of an address's calls wait (one more is
//! refused at once, 429), and at most `Limits::max_backend_waiting` in all: one more then takes the place of
//! the newest waiter of the address with the most waiting, when that address has at least
//! two more waiting than the newcomer's, and is refused at once (503) otherwise. A call still waiting when its
//! wait is over is refused: 429 when its address holds its share, 503 when the node is full.
//!
//! Long-lived calls (progress and stream actions, [`CallKind::Long`]) run for as long as
//! they like, so they have a cap of their own within the budget: at most
//! `Limits::max_long_backend_calls` of them at once, `Limits::max_long_backend_calls_per_address`
//! for one address. The rest of the slots stay for request-reply and notify calls
//! ([`CallKind::Brief`]), which strangers holding never-ending actions cannot take. A long
//! call beyond its caps waits and is refused as any other (429 over its address's share,
//! 503 when the long-lived calls' cap is full).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::config::Limits;

/// What a call holds its slot for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    /// Request-reply and notify calls: bounded by `Limits::call_timeout`.
    Brief,
    /// Progress and stream actions: as long as they run, within the long-lived calls' cap.
    Long,
}

/// The budget of one node.
#[derive(Debug)]
pub(crate) struct CallBudget {
    limit: usize,
    per_address: usize,
    long_limit: usize,
    long_per_address: usize,
    wait: Duration,
    waiting_limit: usize,
    waiting_per_address: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    /// Of `running`, the long-lived calls.
    long_running: usize,
    addresses: HashMap<ClientKey, Counts>,
    waiting: Vec<Waiter>,
    next_seq: u64,
    /// How long an address's slot time takes to count half as much, in seconds.
    half_life: f64,
    /// When addresses whose slot time has faded were last swept from `addresses`.
    swept: Option<Instant>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    running: usize,
    waiting: usize,
    /// Of `running`, the long-lived calls.
    long_running: usize,
    /// Of `waiting`, the long-lived calls.
    long_waiting: usize,
    /// The slot time its ended calls held, in seconds, fading by half every
    /// `State::half_life`, as of `used_at`.
    used: f64,
    used_at: Option<Instant>,
}

#[derive(Debug)]
struct Waiter {
    seq: u64,
    key: ClientKey,
    kind: CallKind,
    wake: oneshot::Sender<CallPermit>,
}

/// One running call's slot; dropping it hands the slot to the next waiter.
#[derive(Debug)]
pub(crate) struct CallPermit {
    budget: Option<Arc<CallBudget>>,
    key: ClientKey,
    kind: CallKind,
    /// When the call started with its slot: the time from then is charged to its
    /// address.
    granted: Instant,
}

impl CallPermit {
    /// The permit of a call that starts now: a waiter handed its slot is charged from
    /// when it runs, not for the time it took to be woken (a busy machine's latency is
    /// not the caller's slot time).
    fn started(mut self) -> Self {
        self.granted = Instant::now();
        self
    }
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        if let Some(budget) = self.budget.take() {
            let mut state = budget.lock();
            state.release(self.key, self.kind, self.granted.elapsed());
            budget.dispatch(&mut state);
        }
    }
}

/// Slot time below which an address with nothing running or waiting is forgotten, in
/// seconds.
const FADED: f64 = 1e-4;

impl Counts {
    /// The slot time its ended calls held, faded as of `now`.
    fn used(&self, now: Instant, half_life: f64) -> f64 {
        self.used_at.map_or(0.0, |at| {
            let ago = now.saturating_duration_since(at).as_secs_f64();
            self.used * 0.5_f64.powf(ago / half_life)
        })
    }

    /// Nothing running or waiting, and its slot time faded: it says nothing an address
    /// that comes would not.
    fn is_spent(&self, now: Instant, half_life: f64) -> bool {
        self.running == 0 && self.waiting == 0 && self.used(now, half_life) < FADED
    }
}

/// A waiter's place in the queue; dropping it (the call gave up or was cancelled) leaves
/// the queue.
struct Place<'a> {
    budget: &'a Arc<CallBudget>,
    seq: u64,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.budget.lock().leave(self.seq);
    }
}

impl State {
    fn counts(&mut self, key: ClientKey) -> &mut Counts {
        self.addresses.entry(key).or_default()
    }

    /// The slot time `key`'s calls held lately, in microseconds (0 for an address not
    /// tracked).
    fn used_of(&self, key: ClientKey, now: Instant) -> u64 {
        self.addresses.get(&key).map_or(0, |counts| {
            // Far below u64's range: a slot time is at most the node's lifetime.
            (counts.used(now, self.half_life) * 1e6) as u64
        })
    }

    fn take_slot(&mut self, key: ClientKey, kind: CallKind) {
        self.running += 1;
        let long = kind == CallKind::Long;
        self.long_running += usize::from(long);
        let counts = self.counts(key);
        counts.running += 1;
        counts.long_running += usize::from(long);
    }

    /// A `kind` call of `key` that held its slot for `held` ended: its address is
    /// charged that slot time.
    fn release(&mut self, key: ClientKey, kind: CallKind, held: Duration) {
        self.running = self.running.saturating_sub(1);
        let long = kind == CallKind::Long;
        self.long_running = self.long_running.saturating_sub(usize::from(long));
        let now = Instant::now();
        let half_life = self.half_life;
        let counts = self.counts(key);
        counts.running = counts.running.saturating_sub(1);
        counts.long_running = counts.long_running.saturating_sub(usize::from(long));
        counts.used = counts.used(now, half_life) + held.as_secs_f64();
        counts.used_at = Some(now);
        self.forget_if_empty(key);
        self.sweep(now);
    }

    /// Forgets `key`'s address when it has nothing running or waiting and its slot time
    /// has faded: a flood whose calls all ended or were refused for a moment keeps its
    /// place behind those that had less.
    fn forget_if_empty(&mut self, key: ClientKey) {
        let (now, half_life) = (Instant::now(), self.half_life);
        if self
            .addresses
            .get(&key)
            .is_some_and(|counts| counts.is_spent(now, half_life))
        {
            self.addresses.remove(&key);
        }
    }

    /// Forgets, at most once a half-life, every address whose slot time has faded with
    /// nothing running or waiting, so that the table holds only addresses that say
    /// something.
    fn sweep(&mut self, now: Instant) {
        let half_life = self.half_life;
        if self
            .swept
            .is_some_and(|at| now.saturating_duration_since(at).as_secs_f64() < half_life)
        {
            return;
        }
        self.swept = Some(now);
        self.addresses
            .retain(|_, counts| !counts.is_spent(now, half_life));
    }

    /// Removes the waiter `seq` if it is still waiting.
    fn leave(&mut self, seq: u64) {
        if let Some(index) = self.waiting.iter().position(|waiter| waiter.seq == seq) {
            let waiter = self.waiting.swap_remove(index);
            self.unwait(waiter.key, waiter.kind);
        }
    }

    fn unwait(&mut self, key: ClientKey, kind: CallKind) {
        let counts = self.counts(key);
        counts.waiting = counts.waiting.saturating_sub(1);
        if kind == CallKind::Long {
            counts.long_waiting = counts.long_waiting.saturating_sub(1);
        }
        self.forget_if_empty(key);
    }

    fn running_of(&self, key: ClientKey) -> usize {
        self.addresses.get(&key).map_or(0, |counts| counts.running)
    }

    fn waiting_of(&self, key: ClientKey) -> usize {
        self.addresses.get(&key).map_or(0, |counts| counts.waiting)
    }

    fn long_running_of(&self, key: ClientKey) -> usize {
        self.addresses
            .get(&key)
            .map_or(0, |counts| counts.long_running)
    }

    /// Calls of `kind` from `key` waiting.
    fn waiting_of_kind(&self, key: ClientKey, kind: CallKind) -> usize {
        self.addresses.get(&key).map_or(0, |counts| match kind {
            CallKind::Long => counts.long_waiting,
            CallKind::Brief => counts.waiting.saturating_sub(counts.long_waiting),
        })
    }
}

impl CallBudget {
    /// The budget `limits` set.
    pub(crate) fn new(limits: &Limits) -> Self {
        let long_limit = limits.long_backend_calls();
        Self {
            limit: limits.max_backend_calls,
            per_address: limits.max_backend_calls_per_address,
            long_limit,
            long_per_address: limits.max_long_backend_calls_per_address.min(long_limit),
            wait: limits.backend_call_wait,
            waiting_limit: limits.max_backend_waiting,
            waiting_per_address: limits.max_backend_waiting_per_address,
            state: Mutex::new(State {
                // A zero wait is refused by `Limits::validate`; a tiny one still halves.
                half_life: limits.backend_call_wait.as_secs_f64().max(1e-3),
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a `kind` call from `key` if one is free now (and nobody waits for it).
    pub(crate) fn try_enter(
        self: &Arc<Self>,
        key: ClientKey,
        kind: CallKind,
    ) -> Option<CallPermit> {
        let mut state = self.lock();
        self.can_run(&state, key, kind)
            .then(|| self.grant(&mut state, key, kind))
    }

    /// A slot for a `kind` call from `key`, waiting for one at most
    /// `Limits::backend_call_wait`.
    ///
    /// # Errors
    /// 429 when `key` is over its share, 503 when the node (or, for a long-lived call, the
    /// long-lived calls' cap) is full (at once when too many wait already, else once the
    /// wait is over).
    pub(crate) async fn enter(
        self: &Arc<Self>,
        key: ClientKey,
        kind: CallKind,
    ) -> Result<CallPermit, ActionError> {
        let (seq, mut woken) = {
            let mut state = self.lock();
            if self.can_run(&state, key, kind) {
                return Ok(self.grant(&mut state, key, kind));
            }
            if state.waiting_of(key) >= self.waiting_per_address {
                return Err(self.over_share());
            }
            if state.waiting.len() >= self.waiting_limit && !Self::displace_for(&mut state, key) {
                return Err(self.full());
            }
            let seq = state.next_seq;
            state.next_seq += 1;
            let (wake, woken) = oneshot::channel();
            state.waiting.push(Waiter {
                seq,
                key,
                kind,
                wake,
            });
            let counts = state.counts(key);
            counts.waiting += 1;
            if kind == CallKind::Long {
                counts.long_waiting += 1;
            }
            (seq, woken)
        };
        let place = Place { budget: self, seq };
        match tokio::time::timeout(self.wait, &mut woken).await {
            Ok(Ok(permit)) => Ok(permit.started()),
            // Displaced by a waiter from an address with fewer waiting.
            Ok(Err(_)) => Err(self.full()),
            Err(_) => {
                drop(place);
                // A slot handed over just as the wait ran out is taken.
                if let Ok(permit) = woken.try_recv() {
                    return Ok(permit.started());
                }
                let state = self.lock();
                let long = kind == CallKind::Long;
                Err(if state.running_of(key) >= self.per_address {
                    self.over_share()
                } else if long && state.long_running_of(key) >= self.long_per_address {
                    self.over_long_share()
                } else if long && state.long_running >= self.long_limit {
                    self.long_full()
                } else {
                    self.full()
                })
            }
        }
    }

    /// Calls running now (for tests and logs).
    #[cfg(test)]
    fn running(&self) -> usize {
        self.lock().running
    }

    fn can_run(&self, state: &State, key: ClientKey, kind: CallKind) -> bool {
        self.has_room(state, key, kind)
            // Nobody from this address waits already for a call of this kind: its calls
            // of one kind run in order.
            && state.waiting_of_kind(key, kind) == 0
    }

    /// Whether a `kind` call from `key` fits in the budget now.
    fn has_room(&self, state: &State, key: ClientKey, kind: CallKind) -> bool {
        state.running < self.limit
            && state.running_of(key) < self.per_address
            && (kind == CallKind::Brief
                || (state.long_running < self.long_limit
                    && state.long_running_of(key) < self.long_per_address))
    }

    fn grant(self: &Arc<Self>, state: &mut State, key: ClientKey, kind: CallKind) -> CallPermit {
        state.take_slot(key, kind);
        CallPermit {
            budget: Some(Arc::clone(self)),
            key,
            kind,
            granted: Instant::now(),
        }
    }

    /// Makes room in a full queue for a waiter from `key` by refusing the newest waiter of
    /// the address with the most waiting, if that address has at least two more waiting
    /// than `key` has.
    fn displace_for(state: &mut State, key: ClientKey) -> bool {
        let mine = state.waiting_of(key);
        let Some((_, most)) = state
            .addresses
            .iter()
            .map(|(other, counts)| (*other, counts.waiting))
            .max_by_key(|(_, waiting)| *waiting)
        else {
            return false;
        };
        if most < mine + 2 {
            return false;
        }
        let victim = state
            .waiting
            .iter()
            .enumerate()
            .filter(|(_, waiter)| state.waiting_of(waiter.key) == most)
            .max_by_key(|(_, waiter)| waiter.seq)
            .map(|(index, _)| index);
        let Some(index) = victim else {
            return false;
        };
        // Dropping its sender tells it: refused, the node is full.
        let waiter = state.waiting.swap_remove(index);
        state.unwait(waiter.key, waiter.kind);
        true
    }

    /// Hands free slots to waiters: each to the one whose address holds the fewest running
    /// calls, then whose address has had the least slot time lately, the oldest among
    /// equals, skipping those that do not fit (their address at its share, a
    /// long-lived call beyond the long-lived calls' caps).
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        let now = Instant::now();
        // Each address's order key, worked out once per grant however many of its calls
        // wait (a flood's address has dozens).
        let mut order: HashMap<ClientKey, (usize, u64)> = HashMap::new();
        while state.running < self.limit {
            order.clear();
            let next = state
                .waiting
                .iter()
                .enumerate()
                .filter(|(_, waiter)| self.has_room(state, waiter.key, waiter.kind))
                // The address running the fewest, then the one that has had the least
                // slot time lately (a caller whose calls take a millisecond is not queued
                // behind a round of a flood's calls that take a second each), then the
                // oldest waiter.
                .min_by_key(|(_, waiter)| {
                    let (running, used) = *order.entry(waiter.key).or_insert_with(|| {
                        (state.running_of(waiter.key), state.used_of(waiter.key, now))
                    });
                    (running, used, waiter.seq)
                })
                .map(|(index, _)| index);
            let Some(index) = next else {
                return;
            };
            let waiter = state.waiting.swap_remove(index);
            state.unwait(waiter.key, waiter.kind);
            let permit = self.grant(state, waiter.key, waiter.kind);
            if let Err(mut permit) = waiter.wake.send(permit) {
                // It gave up meanwhile: the slot is free again (released here, under the
                // lock we hold, not by the permit's drop).
                permit.budget = None;
                state.release(waiter.key, waiter.kind, Duration::ZERO);
            }
        }
    }

    fn over_share(&self) -> ActionError {
        ActionError::new(
            429,
            format!(
                "this node runs at most {} action calls at once for one address, and yours \
                 has that many running and waiting; try again later",
                self.per_address
            ),
        )
    }

    fn over_long_share(&self) -> ActionError {
        ActionError::new(
            429,
            format!(
                "this node runs at most {} long-running (progress or stream) action calls at \
                 once for one address, and yours has that many running; try again later",
                self.long_per_address
            ),
        )
    }

    fn long_full(&self) -> ActionError {
        ActionError::new(
            503,
            format!(
                "this node runs at most {} long-running (progress or stream) action calls at \
                 once and has that many running; try again later",
                self.long_limit
            ),
        )
    }

    fn full(&self) -> ActionError {
        ActionError::new(
            503,
            format!(
                "this node runs at most {} action calls at once and is full; try again later",
                self.limit
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: usize, per_address: usize, wait_ms: u64) -> Arc<CallBudget> {
        let limits = Limits {
            max_backend_calls: limit,
            max_backend_calls_per_address: per_address,
            backend_call_wait: Duration::from_millis(wait_ms),
            max_backend_waiting: limit,
            max_backend_waiting_per_address: per_address,
            max_long_backend_calls: limit,
            max_long_backend_calls_per_address: per_address,
            ..Limits::default()
        };
        Arc::new(CallBudget::new(&limits))
    }

    #[tokio::test]
    async fn long_lived_calls_leave_the_brief_ones_the_rest_of_the_slots() {
        let limits = Limits {
            max_backend_calls: 8,
            max_backend_calls_per_address: 2,
            backend_call_wait: Duration::from_millis(50),
            max_long_backend_calls: 4,
            max_long_backend_calls_per_address: 1,
            ..Limits::default()
        };
        let budget = Arc::new(CallBudget::new(&limits));
        // Four addresses each try for two never-ending long calls: one each runs.
        let mut held = Vec::new();
        for last in 2..6 {
            held.push(budget.enter(key(last), CallKind::Long).await.unwrap());
            let refused = budget.enter(key(last), CallKind::Long).await.unwrap_err();
            assert_eq!(refused.code, 429, "{}", refused.message);
        }
        // The long-lived calls' cap is full: a fifth address's long call is refused, 503.
        let refused = budget.enter(key(6), CallKind::Long).await.unwrap_err();
        assert_eq!(refused.code, 503, "{}", refused.message);
        // Brief calls from anyone, an attacker's address too, still run.
        let brief = [
            budget.enter(key(1), CallKind::Brief).await.unwrap(),
            budget.enter(key(1), CallKind::Brief).await.unwrap(),
            budget.enter(key(2), CallKind::Brief).await.unwrap(),
        ];
        assert_eq!(budget.running(), 7);
        drop(brief);
        // A long call that ends gives its place to a waiting long one.
        let waiting = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move { budget.enter(key(6), CallKind::Long).await.map(|p| p.key) }
        });
        tokio::task::yield_now().await;
        drop(held.pop());
        assert_eq!(waiting.await.unwrap().unwrap(), key(6));
        drop(held);
        assert!(nothing_counted(&budget));
    }

    /// Nothing running or waiting is counted for any address (the slot time of ended
    /// calls stays until it fades).
    fn nothing_counted(budget: &CallBudget) -> bool {
        budget
            .lock()
            .addresses
            .values()
            .all(|counts| counts.running == 0 && counts.waiting == 0)
    }

    /// An address's slot time fades by half every `backend_call_wait`; once it has faded,
    /// with nothing running or waiting, the address is forgotten.
    #[tokio::test]
    async fn slot_time_fades_and_a_faded_address_is_forgotten() {
        let budget = budget(2, 2, 20);
        let held = budget.try_enter(key(1), CallKind::Brief);
        tokio::time::sleep(Duration::from_millis(30)).await;
        drop(held);
        let used = budget.lock().used_of(key(1), Instant::now());
        assert!(used >= 30_000, "{used} µs");
        // Twenty half-lives later, below the faded mark; the next release sweeps it.
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(budget.try_enter(key(2), CallKind::Brief));
        let state = budget.lock();
        assert!(!state.addresses.contains_key(&key(1)));
    }

    fn key(last: u8) -> ClientKey {
        ClientKey::of(std::net::IpAddr::from([192, 0, 2, last]))
    }

    #[tokio::test]
    async fn an_address_over_its_share_waits_then_gets_429() {
        let budget = budget(4, 2, 50);
        let held = [
            budget.try_enter(key(1), CallKind::Brief),
            budget.try_enter(key(1), CallKind::Brief),
        ];
        assert!(held.iter().all(Option::is_some));
        assert!(budget.try_enter(key(1), CallKind::Brief).is_none());
        let refused = budget.enter(key(1), CallKind::Brief).await.unwrap_err();
        assert_eq!(refused.code, 429);
        // Another address still runs.
        assert!(budget.enter(key(2), CallKind::Brief).await.is_ok());
    }

    #[tokio::test]
    async fn a_full_node_answers_503_and_a_freed_slot_goes_to_the_address_with_fewest_running() {
        let budget = budget(2, 2, 5_000);
        let first = budget.try_enter(key(1), CallKind::Brief);
        let _second = budget.try_enter(key(1), CallKind::Brief);
        assert_eq!(budget.running(), 2);
        // key(1) waits for its own share; key(3) waits for the node.
        let flood = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move { budget.enter(key(1), CallKind::Brief).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        let other = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move {
                budget
                    .enter(key(3), CallKind::Brief)
                    .await
                    .map(|permit| permit.key)
            }
        });
        tokio::task::yield_now().await;
        drop(first);
        assert_eq!(other.await.unwrap().unwrap(), key(3));
        flood.abort();
        let short = budget_full_refusal().await;
        assert_eq!(short, 503);
    }

    async fn budget_full_refusal() -> u16 {
        let budget = budget(1, 1, 20);
        let _held = budget.try_enter(key(1), CallKind::Brief);
        budget
            .enter(key(2), CallKind::Brief)
            .await
            .unwrap_err()
            .code
    }

    #[tokio::test]
    async fn a_full_queue_makes_room_for_an_address_with_none_waiting() {
        let budget = budget(2, 2, 5_000);
        let _held = [
            budget.try_enter(key(1), CallKind::Brief),
            budget.try_enter(key(1), CallKind::Brief),
        ];
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let budget = Arc::clone(&budget);
                tokio::spawn(async move { budget.enter(key(1), CallKind::Brief).await.map(|_| ()) })
            })
            .collect();
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert_eq!(budget.lock().waiting.len(), 2);
        // A third from key(1) is over its share at once.
        assert_eq!(
            budget
                .enter(key(1), CallKind::Brief)
                .await
                .unwrap_err()
                .code,
            429
        );
        // key(2) takes the place of key(1)'s newest waiter, which hears 503.
        let newcomer = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move { budget.enter(key(2), CallKind::Brief).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        let mut refused = Vec::new();
        for waiter in waiters {
            if !waiter.is_finished() {
                waiter.abort();
                continue;
            }
            refused.push(waiter.await.unwrap().unwrap_err().code);
        }
        assert_eq!(refused, [503]);
        newcomer.abort();
        // Every place given back: nothing left waiting, nothing counted for nobody.
        tokio::task::yield_now().await;
        assert!(budget.lock().waiting.is_empty());
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_leaves_no_slot_taken() {
        let budget = budget(1, 1, 5_000);
        let held = budget.try_enter(key(1), CallKind::Brief);
        let waiter = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move { budget.enter(key(2), CallKind::Brief).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        waiter.abort();
        let _ = waiter.await;
        drop(held);
        assert_eq!(budget.running(), 0);
        assert!(nothing_counted(&budget));
        assert!(budget.try_enter(key(3), CallKind::Brief).is_some());
    }
}
