//! A binding's subscription to one event or observation of one property
//! ([`ThingAccess::subscribe_event`](super::ThingAccess::subscribe_event),
//! [`ThingAccess::observe_property`](super::ThingAccess::observe_property)): a session
//! of the node's `Thing` of its own, with the bounded queue, replay and gap rule of an
//! interface session's subscription, counted in the budget of sessions holding a
//! subscription like one.

use std::sync::Arc;
use std::time::Instant;

use concord_identity::Caller;
use concord_interact::{ActionCaller, Delivery, FeedItem, SubscriberId, Thing};
use serde_json::Value;
use tokio::sync::{watch, Notify};

use super::ThingError;
use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::driver::StopSignal;
use crate::interact::Affordances;
use crate::shed::{IdleSessions, Registration};

/// What a [`Feed`] hands its binding next.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FeedNews {
    /// An event (or a property change): its sequence number among those of its name, and
    /// its data (the property's new value).
    Item {
        /// Its sequence number, what a subscriber resumes after.
        id: u64,
        /// Its data.
        data: Arc<Value>,
    },
    /// Events `from..=to` will never come (they left the replay buffer, or the
    /// subscriber's queue overflowed and dropped them).
    Gap {
        /// The first missed id.
        from: u64,
        /// The last missed id.
        to: u64,
    },
}

/// Why a [`Feed`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeedEnd {
    /// It fell too far behind (the node's `event_overflow` is `Disconnect`).
    Dropped,
    /// The budget of sessions holding a subscription gave its place to a newcomer (it
    /// had been silent longest).
    Shed,
    /// The node shuts down.
    Shutdown,
}

/// One subscription (or observation) of a binding's client: [`Feed::next`] waits for
/// what comes. Dropping it ends the subscription and gives its place in the holders'
/// budget back.
pub struct Feed {
    affordances: Arc<Affordances>,
    subscriber: SubscriberId,
    wake: Arc<Notify>,
    stop: watch::Receiver<StopSignal>,
    /// Its place in the budget of sessions holding a subscription.
    _registration: Registration,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("subscriber", &self.subscriber)
            .finish_non_exhaustive()
    }
}

impl Feed {
    pub(crate) fn new(
        affordances: Arc<Affordances>,
        (subscriber, wake): (SubscriberId, Arc<Notify>),
        stop: watch::Receiver<StopSignal>,
        registration: Registration,
    ) -> Self {
        // A subscriber's client says nothing while it waits: silent from the start, as an
        // interface session holding only a subscription is.
        registration.set_idle(Some(Instant::now()));
        Self {
            affordances,
            subscriber,
            wake,
            stop,
            _registration: registration,
        }
    }

    /// The next event, change or gap, waiting for it; `Err` once the feed ended.
    pub async fn next(&mut self) -> Result<FeedNews, FeedEnd> {
        loop {
            if let Some(news) = self.poll()? {
                return Ok(news);
            }
            tokio::select! {
                () = self.wake.notified() => {}
                changed = self.stop.changed() => {
                    let signal = *self.stop.borrow();
                    return Err(match (changed, signal) {
                        (Ok(()), StopSignal::Shed | StopSignal::ShedHolder) => FeedEnd::Shed,
                        _ => FeedEnd::Shutdown,
                    });
                }
            }
        }
    }

    /// What is queued now, if anything.
    fn poll(&self) -> Result<Option<FeedNews>, FeedEnd> {
        let mut thing = self.affordances.lock();
        let news = match thing.poll_feed(self.subscriber) {
            Some(FeedItem::Event(Delivery::Event(record))) => FeedNews::Item {
                id: record.id,
                data: record.data,
            },
            Some(FeedItem::Event(Delivery::Gap(gap))) => FeedNews::Gap {
                from: gap.from,
                to: gap.to,
            },
            Some(FeedItem::Property(change)) => FeedNews::Item {
                id: change.id,
                data: Arc::new(change.value),
            },
            Some(FeedItem::Dropped) => return Err(FeedEnd::Dropped),
            Some(_) | None if !thing.has_subscriptions(self.subscriber) => {
                return Err(FeedEnd::Dropped)
            }
            Some(_) | None => return Ok(None),
        };
        Ok(Some(news))
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.affordances.unregister(self.subscriber);
    }
}

/// A place in the holders' budget for `client` (its refusal is [`ThingError::Busy`], 429
/// or 503), given back when the registration is dropped, and the signal that says when
/// the budget sheds it for another holder.
pub(crate) fn hold(
    idle: &Arc<IdleSessions>,
    client: ClientKey,
) -> Result<(Registration, watch::Receiver<StopSignal>), ThingError> {
    let (stop_tx, stop) = watch::channel(StopSignal::Running);
    let registration = idle.register(None, Arc::new(stop_tx), client);
    registration.try_hold(Instant::now()).map_err(|problem| {
        let status = problem.status.unwrap_or(503);
        let detail = problem.detail.clone().unwrap_or_default();
        ThingError::Busy(ActionError::new(status, detail))
    })?;
    Ok((registration, stop))
}

/// Opens a feed for `caller` from `client`: a place in the holders' budget first (its
/// refusal is [`ThingError::Busy`], 429 or 503), then a session of the node's `Thing`
/// that `subscribe` subscribes (its refusal ends the session).
pub(crate) fn open(
    affordances: &Arc<Affordances>,
    idle: &Arc<IdleSessions>,
    caller: &Caller,
    client: ClientKey,
    subscribe: impl FnOnce(&mut Thing, SubscriberId, Instant) -> Result<(), ThingError>,
) -> Result<Feed, ThingError> {
    let (registration, stop) = hold(idle, client)?;
    let now = Instant::now();
    let mut counted = ActionCaller::address(client.to_string());
    if let Some(did) = caller.did() {
        counted = counted.with_identity(did.as_str());
    }
    let session = affordances.register(counted);
    let subscribed = {
        let mut thing = affordances.lock();
        let subscribed = subscribe(&mut thing, session.0, now);
        affordances.wake(&mut thing);
        subscribed
    };
    if let Err(error) = subscribed {
        affordances.unregister(session.0);
        return Err(error);
    }
    Ok(Feed::new(
        Arc::clone(affordances),
        session,
        stop,
        registration,
    ))
}
