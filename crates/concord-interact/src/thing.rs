//! The provider's node-wide state: one [`Thing`] per node, shared by every provider
//! session (the node keeps it behind a lock): the event hub, the property table and the
//! long-running actions by id.
//!
//! Each session has a [`SubscriberId`] ([`Thing::new_subscriber`]) under which the Thing
//! queues what that session must send: events, property changes, and the progress and
//! terminal notifications of the actions it invoked. [`Thing::poll_wake`] names the
//! sessions with something queued; the node then drains that session's
//! [`ProviderEndpoint::poll_transmit`](crate::ProviderEndpoint::poll_transmit).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::action_records::{ActionRecord, ActionRecords};
use crate::actions::{Action, ActionEvent, ActionIds, ActionTable, ActionTableError};
use crate::events::{Delivery, EventError, EventHub, HubEvent, Overflow, Subscribed, SubscriberId};
use crate::interface::Interface;
use crate::message::{Message, MessageType, Operation};
use crate::problem::Problem;
use crate::property::{PropertyChange, PropertyError, PropertyTable};
use crate::Limits;

/// A Thing that cannot be built from its interface.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThingError {
    /// An event the hub refuses (name too long, too many events).
    #[error("event: {0}")]
    Event(#[from] EventError),
    /// A property without its initial value, a value for no property, or too many
    /// properties.
    #[error("property: {0}")]
    Property(#[from] PropertyError),
}

/// Who invokes long-running actions, as the node counts them against
/// `Limits::max_actions_per_caller`: by the client address it calls from (as the node keys
/// addresses: an IPv4 address, an IPv6 /64), and, when it proved one, by its identity (a
/// DID) too. An identity costs nothing to mint, so its actions count against its address
/// as well; an address may be shared, so an identity's count follows it across addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionCaller {
    address: String,
    identity: Option<String>,
}

impl ActionCaller {
    /// A caller known by its client address only.
    pub fn address(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            identity: None,
        }
    }

    /// The same caller, having proved `identity` (a DID).
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Whether an action of `owner` counts against this caller (same address, or same
    /// identity).
    fn shares_with(&self, owner: &ActionCaller) -> bool {
        self.address == owner.address
            || self
                .identity
                .as_ref()
                .is_some_and(|identity| owner.identity.as_ref() == Some(identity))
    }
}

impl From<&str> for ActionCaller {
    fn from(address: &str) -> Self {
        Self::address(address)
    }
}

/// Who invoked an unfinished action, to send its notifications to.
#[derive(Debug)]
struct Owner {
    /// The session, `None` once it ended (the lease runs).
    subscriber: Option<SubscriberId>,
    /// Who invoked it ([`Thing::new_subscriber_for`]).
    caller: ActionCaller,
    /// The `correlationID` of its `invokeaction`.
    correlation_id: String,
}

/// What the Thing queued for one session besides the hubs' deliveries.
#[derive(Debug, Default)]
struct Session {
    /// Who the session's peer is, as the node names it.
    caller: ActionCaller,
    /// Action notifications (at most one progress notification per action: a newer one
    /// replaces it), so at most two per unfinished action.
    outbox: VecDeque<Message>,
    /// The session's subscriber was dropped by a hub for overflow.
    dropped: bool,
}

/// Something the Thing queued for a session ([`Thing::poll_outgoing`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outgoing {
    /// An action notification, ready to send.
    Action(Box<Message>),
    /// An event or a gap.
    Event(Delivery),
    /// A property change.
    Property(PropertyChange),
    /// The session fell too far behind (under [`Overflow::Disconnect`]): its
    /// subscriptions and observations are gone.
    Dropped,
}

/// What [`Thing::poll_feed`] hands a session without the meta-protocol.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FeedItem {
    /// An event of its subscription, or a gap in them.
    Event(Delivery),
    /// A change of the property it observes.
    Property(PropertyChange),
    /// It fell too far behind (under [`Overflow::Disconnect`]): its subscription is gone.
    Dropped,
}

/// The node-wide state of a provider: events, properties and actions.
#[derive(Debug)]
pub struct Thing {
    interface: Interface,
    events: EventHub,
    properties: PropertyTable,
    actions: ActionTable,
    owners: BTreeMap<String, Owner>,
    sessions: BTreeMap<SubscriberId, Session>,
    next_subscriber: u64,
    wake: VecDeque<SubscriberId>,
    woken: BTreeSet<SubscriberId>,
    action_events: VecDeque<ActionEvent>,
}

impl Thing {
    /// A Thing serving `interface` (all of the node's affordances): declares its events and
    /// sets every property to its initial value (each needs one). `overflow` applies to
    /// every subscriber's and observer's queue.
    pub fn new(
        interface: Interface,
        initial_properties: BTreeMap<String, Value>,
        limits: Limits,
        overflow: Overflow,
    ) -> Result<Self, ThingError> {
        let mut events = EventHub::new(limits.clone(), overflow);
        for name in interface.events.keys() {
            events.declare(name)?;
        }
        let properties = PropertyTable::new(
            interface.properties.clone(),
            initial_properties,
            limits.clone(),
            overflow,
        )?;
        Ok(Self {
            interface,
            events,
            properties,
            actions: ActionTable::new(limits),
            owners: BTreeMap::new(),
            sessions: BTreeMap::new(),
            next_subscriber: 1,
            wake: VecDeque::new(),
            woken: BTreeSet::new(),
            action_events: VecDeque::new(),
        })
    }

    /// Numbers events from `first` (see [`EventHub::number_from`]).
    pub fn with_first_event_id(mut self, first: u64) -> Self {
        self.events.number_from(first);
        self
    }

    /// Takes long-running actions' ids from `ids` (see [`ActionTable::with_ids`]).
    pub fn with_action_ids(mut self, ids: Box<dyn ActionIds>) -> Self {
        self.actions = self.actions.with_ids(ids);
        self
    }

    /// Gives long-running actions the wall clock (see [`ActionTable::with_wall_clock`]).
    pub fn with_wall_clock(mut self, at: std::time::Instant, wall: std::time::SystemTime) -> Self {
        self.actions = self.actions.with_wall_clock(at, wall);
        self
    }

    /// Records long-running actions in `records`, and answers a query for an action another
    /// Thing sharing them runs (see [`ActionTable::with_records`]).
    pub fn with_action_records(mut self, records: Arc<dyn ActionRecords>) -> Self {
        self.actions = self.actions.with_records(records);
        self
    }

    /// Every affordance the node serves.
    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    /// Publishes an event to every session subscribed to it; returns its id.
    pub fn publish(&mut self, event: &str, data: Value, now: Instant) -> Result<u64, EventError> {
        self.publish_noting(event, None, data, now)
    }

    /// A shared log feeds the events (see [`EventHub::fed_by_shared_log`]).
    pub fn events_fed_by_shared_log(&mut self) {
        self.events.fed_by_shared_log();
    }

    /// The shared log the events come from holds none below `first` any more (see
    /// [`EventHub::forget_before`]).
    pub fn forget_events_before(&mut self, first: u64) {
        let mut fresh = Vec::new();
        self.events.forget_before_noting(first, &mut fresh);
        self.wake_fresh(fresh);
    }

    /// Publishes an event under the `id` an [`EventLog`](crate::EventLog) gave it (see
    /// [`EventHub::publish_as`]) to every session subscribed to it.
    ///
    /// # Errors
    /// [`EventError::UnknownEvent`], or [`EventError::IdNotAfter`] when `id` is not above
    /// the event's latest id.
    pub fn publish_as(
        &mut self,
        event: &str,
        id: u64,
        data: Value,
        now: Instant,
    ) -> Result<(), EventError> {
        self.publish_noting(event, Some(id), data, now).map(|_| ())
    }

    fn publish_noting(
        &mut self,
        event: &str,
        id: Option<u64>,
        data: Value,
        now: Instant,
    ) -> Result<u64, EventError> {
        let mut fresh = Vec::new();
        let id = self
            .events
            .publish_noting(event, id, data, now, &mut fresh)?;
        if self.events.has_events() {
            self.after_change();
            return Ok(id);
        }
        self.wake_fresh(fresh);
        Ok(id)
    }

    /// Names the sessions among `fresh` for [`Thing::poll_wake`]. Only the sessions that had
    /// nothing queued are news: any other was named when its queue filled and has not
    /// taken it yet (what `after_change` finds, without looking at every session on every
    /// publish).
    fn wake_fresh(&mut self, fresh: Vec<SubscriberId>) {
        for id in fresh {
            if self.sessions.contains_key(&id) && self.woken.insert(id) {
                self.wake.push_back(id);
            }
        }
    }

    /// A property's current value.
    pub fn read_property(&self, name: &str) -> Result<&Value, PropertyError> {
        self.properties.read(name)
    }

    /// Sets a property (a local write, read-only properties included); its observers are
    /// notified.
    pub fn set_property(
        &mut self,
        name: &str,
        value: Value,
        now: Instant,
    ) -> Result<(), PropertyError> {
        self.properties.set(name, value, now)?;
        self.after_change();
        Ok(())
    }

    /// Reports an action's progress (0 to 1, never lower) and optionally a partial
    /// output; its caller gets a notification (a newer one replaces one not sent yet).
    pub fn progress(
        &mut self,
        action_id: &str,
        progress: f64,
        partial: Option<Value>,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        self.actions.progress(action_id, progress, partial, now)?;
        self.notify_owner(action_id, false);
        self.drain_action_events();
        Ok(())
    }

    /// Terminal: the action completed with `output`; its caller gets the one terminal
    /// notification.
    pub fn complete(
        &mut self,
        action_id: &str,
        output: Value,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        self.actions.complete(action_id, Some(output), now)?;
        self.notify_owner(action_id, true);
        self.drain_action_events();
        Ok(())
    }

    /// Terminal: the action failed; its caller gets the one terminal notification.
    pub fn fail(
        &mut self,
        action_id: &str,
        problem: Problem,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        self.actions.fail(action_id, problem, now)?;
        self.notify_owner(action_id, true);
        self.drain_action_events();
        Ok(())
    }

    /// Another replica answered the action `record.id`, which this Thing runs or ran,
    /// while this one was cut off from the shared records past the action's lease:
    /// `record`, its terminal answer, stands. The table lets go of the action
    /// ([`ActionTable::ended_elsewhere`]: it is answered from the records, as on every other
    /// replica); an unfinished one's work is stopped ([`Thing::poll_action_event`]) and its
    /// attached caller gets `record` as its terminal notification.
    ///
    /// # Errors
    /// As [`ActionTable::ended_elsewhere`] says.
    pub fn action_ended_elsewhere(
        &mut self,
        record: &ActionRecord,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        self.actions.ended_elsewhere(&record.id)?;
        if let Some(owner) = self.owners.remove(&record.id) {
            if let Some(session) = owner.subscriber.and_then(|s| self.sessions.get_mut(&s)) {
                let answer = Action::from_record(record.clone(), now);
                session.outbox.push_back(answer.to_message(
                    MessageType::Notification,
                    Operation::InvokeAction,
                    &owner.correlation_id,
                ));
            }
            self.after_change();
        }
        self.drain_action_events();
        Ok(())
    }

    /// An action of this Thing, finished or not.
    pub fn query_action(&self, action_id: &str) -> Result<&Action, ActionTableError> {
        self.actions.query(action_id)
    }

    /// An action, finished or not (`queryaction`): this Thing's, else as its action records
    /// have it (see [`ActionTable::lookup`]).
    ///
    /// # Errors
    /// [`ActionTableError::Unknown`], or [`ActionTableError::Records`] when the records could not be
    /// read.
    pub fn lookup_action(
        &self,
        action_id: &str,
        now: Instant,
    ) -> Result<Cow<'_, Action>, ActionTableError> {
        self.actions.lookup(action_id, now)
    }

    /// Cancels an action (`cancelaction`): [`Thing::poll_action_event`] tells the node to
    /// stop the work, its caller gets the terminal notification (status cancelled). An
    /// action another Thing sharing the records runs is refused here
    /// ([`ActionTableError::HeldElsewhere`]): the provider endpoint then asks its node to
    /// relay the cancel ([`ProviderEvent::CancelElsewhere`](crate::ProviderEvent)).
    pub fn cancel_action(
        &mut self,
        action_id: &str,
        now: Instant,
    ) -> Result<&Action, ActionTableError> {
        self.actions.cancel(action_id, now)?;
        self.drain_action_events();
        self.actions.query(action_id)
    }

    /// The next session with something queued (events, property changes, action
    /// notifications, or news that it was dropped); each named once until it is named
    /// again after new deliveries.
    pub fn poll_wake(&mut self) -> Option<SubscriberId> {
        let id = self.wake.pop_front()?;
        self.woken.remove(&id);
        Some(id)
    }

    /// The next action event for the node: cancelled by the caller or because the lease
    /// ran out (stop the work behind it), or a change the action records could not take.
    pub fn poll_action_event(&mut self) -> Option<ActionEvent> {
        self.action_events.pop_front()
    }

    /// When the next action lease runs out.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.actions.poll_timeout()
    }

    /// Cancels the actions whose lease ran out by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.actions.handle_timeout(now);
        self.drain_action_events();
    }

    /// A new session's id (one per provider session), its peer known to no other session:
    /// its unfinished actions count against `Limits::max_actions_per_caller` alone.
    pub fn new_subscriber(&mut self) -> SubscriberId {
        let caller = ActionCaller::address(format!("session {}", self.next_subscriber));
        self.new_subscriber_for(caller)
    }

    /// A new session's id for a peer the node knows as `caller` (its client address, and
    /// its DID if it proved one): the unfinished actions of every session of one address,
    /// or of one identity, and of those that ended within their lease, count together
    /// against `Limits::max_actions_per_caller`, so no caller can take the node's
    /// `max_actions` from the others; and the last `Limits::reserved_actions` are only
    /// for callers that hold none.
    pub fn new_subscriber_for(&mut self, caller: impl Into<ActionCaller>) -> SubscriberId {
        let id = SubscriberId(self.next_subscriber);
        self.next_subscriber = self.next_subscriber.saturating_add(1);
        let session = Session {
            caller: caller.into(),
            ..Session::default()
        };
        self.sessions.insert(id, session);
        id
    }

    /// A session ended: its subscriptions, observations and queues are gone; the actions
    /// it invoked keep running until their lease runs out ([`Thing::poll_timeout`]).
    pub fn remove_subscriber(&mut self, id: SubscriberId, now: Instant) {
        self.events.remove_subscriber(id);
        self.properties.remove_observer(id);
        self.sessions.remove(&id);
        self.woken.remove(&id);
        self.wake.retain(|w| *w != id);
        for (action_id, owner) in &mut self.owners {
            if owner.subscriber == Some(id) {
                owner.subscriber = None;
                // Owners are unfinished actions only, so this cannot fail.
                let _ = self.actions.detach_action(action_id, now);
            }
        }
    }

    // Sessions without the meta-protocol: an HTTP binding's event stream or long poll is
    // a session of its own ([`Thing::new_subscriber_for`]) that subscribes to one event or
    // observes one property, and takes what is queued for it with [`Thing::poll_feed`].

    /// Subscribes the session `id` to `event`, as a meta-protocol `subscribeevent` does:
    /// without `last_seen` from now on; with it (the id of the last event the subscriber
    /// saw, e.g. an SSE `Last-Event-ID`), every later event still in the replay buffer
    /// is queued first, preceded by a [`Gap`](crate::Gap) for those that left it.
    ///
    /// # Errors
    /// [`EventError`]: an unknown event, a `last_seen` ahead of the latest id, a session
    /// already subscribed, or one dropped for overflowing while its replay was queued.
    pub fn subscribe_event(
        &mut self,
        id: SubscriberId,
        event: &str,
        last_seen: Option<u64>,
        now: Instant,
    ) -> Result<Subscribed, EventError> {
        self.subscribe(id, event, last_seen, now)
    }

    /// Makes the session `id` observe the property `name` from now on, as a
    /// meta-protocol `observeproperty` does; returns the id of its latest change (0:
    /// none yet).
    ///
    /// # Errors
    /// [`PropertyError`]: an unknown or unobservable property, or a session already
    /// observing it.
    pub fn observe_property(
        &mut self,
        id: SubscriberId,
        name: &str,
        now: Instant,
    ) -> Result<u64, PropertyError> {
        self.observe(id, name, now)
    }

    /// The next event, gap or property change queued for the session `id`, or word that
    /// it was dropped for falling behind (under [`Overflow::Disconnect`]).
    pub fn poll_feed(&mut self, id: SubscriberId) -> Option<FeedItem> {
        loop {
            return Some(match self.poll_outgoing(id)? {
                // Action notifications go to sessions that invoke; a feed invokes nothing.
                Outgoing::Action(_) => continue,
                Outgoing::Event(delivery) => FeedItem::Event(delivery),
                Outgoing::Property(change) => FeedItem::Property(change),
                Outgoing::Dropped => FeedItem::Dropped,
            });
        }
    }

    /// Whether the session `id` subscribes to an event or observes a property (a quiet
    /// session with a subscription is waiting, not idle).
    pub fn has_subscriptions(&self, id: SubscriberId) -> bool {
        self.events.is_subscribed(id) || self.properties.is_observed_by(id)
    }

    /// What the events and property changes waiting for the session `id` weigh
    /// ([`EventHub::queued_bytes`]).
    pub fn queued_bytes(&self, id: SubscriberId) -> usize {
        self.events
            .queued_bytes(id)
            .saturating_add(self.properties.queued_bytes(id))
    }

    /// What the events and property changes waiting for every session weigh, together:
    /// each session's share is bounded by `Limits::subscriber_queue_bytes` per hub.
    pub fn total_queued_bytes(&self) -> usize {
        self.events
            .total_queued_bytes()
            .saturating_add(self.properties.total_queued_bytes())
    }

    /// How many sessions are known.
    pub fn subscriber_count(&self) -> usize {
        self.sessions.len()
    }

    /// How many actions are unfinished.
    pub fn unfinished_actions(&self) -> usize {
        self.actions.unfinished()
    }

    pub(crate) fn start_action(
        &mut self,
        name: &str,
        subscriber: SubscriberId,
        correlation_id: &str,
        now: Instant,
    ) -> Result<String, ActionTableError> {
        let caller = self
            .sessions
            .get(&subscriber)
            .map(|session| session.caller.clone())
            .unwrap_or_default();
        self.start_owned(name, caller, Some(subscriber), correlation_id, now)
    }

    /// Starts an action `name` for `caller`, checked against the caller's bound and the
    /// reserve; `subscriber` is the session its notifications go to (none: it has none).
    fn start_owned(
        &mut self,
        name: &str,
        caller: ActionCaller,
        subscriber: Option<SubscriberId>,
        correlation_id: &str,
        now: Instant,
    ) -> Result<String, ActionTableError> {
        let limits = self.actions.limits();
        let (limit, reserved, max) = (
            limits.max_actions_per_caller,
            limits.reserved_actions_in_force(),
            limits.max_actions,
        );
        let count = |matches: &dyn Fn(&ActionCaller) -> bool| {
            self.owners
                .values()
                .filter(|owner| matches(&owner.caller))
                .count()
        };
        let by_address = count(&|owner| owner.address == caller.address);
        let by_identity = caller.identity.as_ref().map_or(0, |identity| {
            count(&|owner| owner.identity.as_ref() == Some(identity))
        });
        if by_address >= limit || by_identity >= limit {
            return Err(ActionTableError::CallerLimit { limit });
        }
        let holds_some = self
            .owners
            .values()
            .any(|owner| caller.shares_with(&owner.caller));
        if holds_some && self.actions.unfinished() >= max.saturating_sub(reserved) {
            return Err(ActionTableError::Reserved { reserved });
        }
        let id = self.actions.start(name, now)?;
        self.drain_action_events();
        self.owners.insert(
            id.clone(),
            Owner {
                subscriber,
                caller,
                correlation_id: correlation_id.to_owned(),
            },
        );
        Ok(id)
    }

    /// Starts the long-running action `name` for a caller without a session (an HTTP
    /// binding's `invokeaction`, answered with the action's id at once): counted against
    /// `Limits::max_actions_per_caller` and the reserve like a session's actions of the same
    /// `caller`; its caller is detached from the start, so its lease runs from `now`, and
    /// each [`Thing::renew_action`] (the caller came back to query it) starts it again. A
    /// caller that never comes back gets its action cancelled when the lease runs out.
    ///
    /// # Errors
    /// [`ActionTableError::CallerLimit`], [`ActionTableError::Reserved`],
    /// [`ActionTableError::TooMany`] or [`ActionTableError::NameTooLong`].
    pub fn start_detached_action(
        &mut self,
        name: &str,
        caller: ActionCaller,
        now: Instant,
    ) -> Result<String, ActionTableError> {
        let id = self.start_owned(name, caller, None, "", now)?;
        self.actions.detach_action(&id, now)?;
        Ok(id)
    }

    /// The detached caller of the unfinished action `action_id` came back: its lease starts
    /// again from `now`.
    ///
    /// # Errors
    /// [`ActionTableError::Unknown`] or [`ActionTableError::Finished`].
    pub fn renew_action(&mut self, action_id: &str, now: Instant) -> Result<(), ActionTableError> {
        self.actions.detach_action(action_id, now)
    }

    pub(crate) fn subscribe(
        &mut self,
        subscriber: SubscriberId,
        event: &str,
        last_seen: Option<u64>,
        now: Instant,
    ) -> Result<Subscribed, EventError> {
        let result = self.events.subscribe(subscriber, event, last_seen, now);
        self.after_change();
        result
    }

    pub(crate) fn unsubscribe(
        &mut self,
        subscriber: SubscriberId,
        event: &str,
    ) -> Result<(), EventError> {
        self.events.unsubscribe(subscriber, event)
    }

    pub(crate) fn write_property(
        &mut self,
        name: &str,
        value: Value,
        now: Instant,
    ) -> Result<(), PropertyError> {
        self.properties.check_writable(name)?;
        self.set_property(name, value, now)
    }

    pub(crate) fn check_writable(&self, name: &str) -> Result<(), PropertyError> {
        self.properties.check_writable(name)
    }

    pub(crate) fn observe(
        &mut self,
        subscriber: SubscriberId,
        name: &str,
        now: Instant,
    ) -> Result<u64, PropertyError> {
        let result = self.properties.observe(subscriber, name, now);
        self.after_change();
        result
    }

    pub(crate) fn unobserve(
        &mut self,
        subscriber: SubscriberId,
        name: &str,
    ) -> Result<(), PropertyError> {
        self.properties.unobserve(subscriber, name)
    }

    /// The next thing queued for this session: news that it was dropped, action
    /// notifications, property changes, then events.
    pub(crate) fn poll_outgoing(&mut self, subscriber: SubscriberId) -> Option<Outgoing> {
        let session = self.sessions.get_mut(&subscriber)?;
        if std::mem::take(&mut session.dropped) {
            return Some(Outgoing::Dropped);
        }
        if let Some(message) = session.outbox.pop_front() {
            return Some(Outgoing::Action(Box::new(message)));
        }
        if let Some(change) = self.properties.poll_change(subscriber) {
            return Some(Outgoing::Property(change));
        }
        self.events.poll_delivery(subscriber).map(Outgoing::Event)
    }

    /// Queues the action's current status for its attached caller; a terminal status
    /// forgets the owner.
    fn notify_owner(&mut self, action_id: &str, terminal: bool) {
        let owner = if terminal {
            self.owners.remove(action_id)
        } else {
            None
        };
        let owner = owner.as_ref().or_else(|| self.owners.get(action_id));
        let (Some(owner), Ok(action)) = (owner, self.actions.query(action_id)) else {
            return;
        };
        let Some(session) = owner.subscriber.and_then(|s| self.sessions.get_mut(&s)) else {
            return;
        };
        let message = action.to_message(
            MessageType::Notification,
            Operation::InvokeAction,
            &owner.correlation_id,
        );
        let pending_progress = session.outbox.iter_mut().find(|m| {
            m.action_id.as_deref() == Some(action_id) && !m.status.is_some_and(|s| s.is_terminal())
        });
        match pending_progress {
            Some(slot) if !terminal => *slot = message,
            _ => session.outbox.push_back(message),
        }
        self.after_change();
    }

    fn drain_action_events(&mut self) {
        while let Some(event) = self.actions.poll_event() {
            let cancelled = match &event {
                ActionEvent::Cancelled { id, .. } => Some(id.clone()),
                ActionEvent::EndedElsewhere { .. } | ActionEvent::NotRecorded { .. } => None,
            };
            self.action_events.push_back(event);
            if let Some(id) = cancelled {
                self.notify_owner(&id, true);
            }
        }
    }

    /// Takes the hubs' drop notices and names every session with something queued.
    fn after_change(&mut self) {
        let mut dropped = Vec::new();
        while let Some(HubEvent::SubscriberDropped { subscriber, .. }) = self.events.poll_event() {
            dropped.push(subscriber);
        }
        while let Some(HubEvent::SubscriberDropped { subscriber, .. }) =
            self.properties.poll_event()
        {
            dropped.push(subscriber);
        }
        for id in dropped {
            self.events.remove_subscriber(id);
            self.properties.remove_observer(id);
            if let Some(session) = self.sessions.get_mut(&id) {
                session.dropped = true;
            }
        }
        for (id, session) in &self.sessions {
            if self.woken.contains(id) {
                continue;
            }
            let queued = session.dropped
                || !session.outbox.is_empty()
                || self.events.queued(*id) > 0
                || self.properties.queued(*id) > 0;
            if queued && self.woken.insert(*id) {
                self.wake.push_back(*id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interface::{ActionAffordance, ActionMode};

    fn thing_with(limits: Limits) -> Thing {
        let mut interface = Interface::default();
        interface.actions.insert(
            "render".to_owned(),
            ActionAffordance {
                description: String::new(),
                input: serde_json::json!({"type": "object"}),
                output: serde_json::json!({"type": "object"}),
                mode: ActionMode::Progress,
                stream: None,
            },
        );
        Thing::new(interface, BTreeMap::new(), limits, Overflow::DropOldest).unwrap()
    }

    #[test]
    fn a_feed_resumes_from_its_last_seen_id_with_a_gap_for_what_left_the_replay() {
        let limits = Limits {
            replay_events: 2,
            ..Limits::default()
        };
        let mut interface = Interface::default();
        interface.events.insert(
            "tick".to_owned(),
            crate::interface::EventAffordance {
                description: String::new(),
                data: serde_json::json!({"type": "object"}),
            },
        );
        let mut thing =
            Thing::new(interface, BTreeMap::new(), limits, Overflow::DropOldest).unwrap();
        let now = Instant::now();
        let ids: Vec<u64> = (0..4)
            .map(|n| {
                thing
                    .publish("tick", serde_json::json!({"n": n}), now)
                    .unwrap()
            })
            .collect();
        let feed = thing.new_subscriber_for("http://127.0.0.1");
        let subscribed = thing
            .subscribe_event(feed, "tick", Some(ids[0]), now)
            .unwrap();
        assert_eq!(subscribed.replayed, 2);
        // The second left the replay buffer: a gap, then the last two.
        match thing.poll_feed(feed) {
            Some(FeedItem::Event(Delivery::Gap(gap))) => {
                assert_eq!((gap.from, gap.to), (ids[1], ids[1]));
            }
            other => panic!("expected a gap, got {other:?}"),
        }
        for id in &ids[2..] {
            match thing.poll_feed(feed) {
                Some(FeedItem::Event(Delivery::Event(record))) => assert_eq!(record.id, *id),
                other => panic!("expected event {id}, got {other:?}"),
            }
        }
        assert_eq!(thing.poll_feed(feed), None);
        // A resume ahead of the latest is refused.
        let other = thing.new_subscriber_for("http://127.0.0.2");
        assert!(thing
            .subscribe_event(other, "tick", Some(ids[3] + 1), now)
            .is_err());
    }

    #[test]
    fn max_actions_lowered_alone_keeps_a_quarter_in_reserve_not_every_place() {
        // The default reserve (64) with 8 places: a quarter of them (2) is kept.
        let limits = Limits {
            max_actions: 8,
            ..Limits::default()
        };
        let mut thing = thing_with(limits);
        let now = Instant::now();
        let holder = thing.new_subscriber_for("ws://192.0.2.7");
        // A caller holding one starts more, up to the reserve.
        for n in 0..6 {
            let correlation = format!("c{n}");
            thing
                .start_action("render", holder, &correlation, now)
                .unwrap();
        }
        assert!(matches!(
            thing.start_action("render", holder, "c6", now),
            Err(ActionTableError::Reserved { reserved: 2 })
        ));
        // A newcomer takes a reserved place.
        let newcomer = thing.new_subscriber_for("ws://198.51.100.9");
        thing.start_action("render", newcomer, "c7", now).unwrap();
        assert_eq!(thing.unfinished_actions(), 7);
    }

    #[test]
    fn a_detached_action_counts_against_its_caller_and_lives_while_its_caller_comes_back() {
        let limits = Limits {
            max_actions_per_caller: 2,
            action_lease: std::time::Duration::from_secs(30),
            ..Limits::default()
        };
        let mut thing = thing_with(limits);
        let start = Instant::now();
        let caller = || ActionCaller::address("192.0.2.7");
        // A session's actions and detached ones of the same address count together.
        let session = thing.new_subscriber_for(caller());
        thing.start_action("render", session, "c1", start).unwrap();
        let id = thing
            .start_detached_action("render", caller(), start)
            .unwrap();
        assert!(matches!(
            thing.start_detached_action("render", caller(), start),
            Err(ActionTableError::CallerLimit { limit: 2 })
        ));
        // Its lease runs from the start; coming back renews it.
        let later = start + std::time::Duration::from_secs(20);
        thing.renew_action(&id, later).unwrap();
        thing.handle_timeout(start + std::time::Duration::from_secs(40));
        assert_eq!(
            thing.query_action(&id).unwrap().status(),
            crate::ActionStatus::Pending
        );
        // A caller that does not come back within the lease: cancelled.
        thing.handle_timeout(later + std::time::Duration::from_secs(31));
        assert_eq!(
            thing.query_action(&id).unwrap().status(),
            crate::ActionStatus::Cancelled
        );
        // Its place is free again.
        thing
            .start_detached_action("render", caller(), later)
            .unwrap();
    }
}
