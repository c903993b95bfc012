//! The provider's property table: current values, per-property change ids, and observers
//! fed through an [`EventHub`] of their own (bounded queues, the hub's [`Overflow`]).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::Value;

use crate::events::{Delivery, EventError, EventHub, HubEvent, Overflow, SubscriberId};
use crate::interface::PropertyAffordance;
use crate::problem::{Problem, ProblemType};
use crate::Limits;

/// The problem type URI of a property the session does not cover (404).
pub const UNKNOWN_PROPERTY: &str = "urn:concord:interact:unknown-property";
/// The problem type URI of an operation a property does not allow (405): writing a
/// read-only property, observing one that is not observable.
pub const NOT_ALLOWED: &str = "urn:concord:interact:not-allowed";

/// A property operation refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropertyError {
    /// No such property.
    #[error("unknown property {name:?}")]
    Unknown {
        /// The name (its first 64 characters).
        name: String,
    },
    /// `writeproperty` on a property that is not writable.
    #[error("property {name:?} is read-only")]
    ReadOnly {
        /// The name.
        name: String,
    },
    /// `observeproperty` on a property that is not observable.
    #[error("property {name:?} is not observable")]
    NotObservable {
        /// The name.
        name: String,
    },
    /// A declared property without an initial value.
    #[error("property {name:?} has no initial value")]
    MissingValue {
        /// The name.
        name: String,
    },
    /// An initial value for a property that is not declared.
    #[error("initial value for undeclared property {name:?}")]
    Undeclared {
        /// The name.
        name: String,
    },
    /// The change hub refused (already observing, not observing, too many observers…).
    #[error(transparent)]
    Observe(#[from] EventError),
}

impl PropertyError {
    /// The problem to answer with: 404 unknown, 405 not allowed, otherwise the hub's.
    pub fn to_problem(&self) -> Problem {
        match self {
            Self::Unknown { .. } => Problem::new(UNKNOWN_PROPERTY)
                .with_title("Unknown property")
                .with_status(404)
                .with_detail(self.to_string()),
            Self::ReadOnly { .. } | Self::NotObservable { .. } => Problem::new(NOT_ALLOWED)
                .with_title("Operation not allowed")
                .with_status(405)
                .with_detail(self.to_string()),
            Self::Observe(error) => error.to_problem(),
            Self::MissingValue { .. } | Self::Undeclared { .. } => {
                Problem::of(ProblemType::Conflict, self.to_string())
            }
        }
    }
}

/// A change an observer is due.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyChange {
    /// The property.
    pub name: String,
    /// The change's sequence number among changes of this property, from 1.
    pub id: u64,
    /// The new value.
    pub value: Value,
}

/// The current value of every property, and who observes which.
///
/// Values are state, not events: when an observer's queue overflows under
/// [`Overflow::DropOldest`], the older changes go without a notice (the newer ones are
/// still queued); under [`Overflow::Disconnect`] the observer is dropped like a slow
/// subscriber ([`PropertyTable::poll_event`]).
#[derive(Debug)]
pub struct PropertyTable {
    affordances: BTreeMap<String, PropertyAffordance>,
    values: BTreeMap<String, Value>,
    changes: EventHub,
}

impl PropertyTable {
    /// A table with every declared property at its initial value. Every property needs
    /// one, and every value a declared property; at most `Limits::max_events` properties.
    pub fn new(
        affordances: BTreeMap<String, PropertyAffordance>,
        mut initial: BTreeMap<String, Value>,
        limits: Limits,
        overflow: Overflow,
    ) -> Result<Self, PropertyError> {
        if let Some(name) = initial.keys().find(|n| !affordances.contains_key(*n)) {
            return Err(PropertyError::Undeclared { name: name.clone() });
        }
        let mut changes = EventHub::new(limits, overflow);
        let mut values = BTreeMap::new();
        for name in affordances.keys() {
            let value = initial
                .remove(name)
                .ok_or_else(|| PropertyError::MissingValue { name: name.clone() })?;
            changes.declare(name)?;
            values.insert(name.clone(), value);
        }
        Ok(Self {
            affordances,
            values,
            changes,
        })
    }

    /// The declared properties.
    pub fn affordances(&self) -> &BTreeMap<String, PropertyAffordance> {
        &self.affordances
    }

    /// The current value.
    pub fn read(&self, name: &str) -> Result<&Value, PropertyError> {
        self.values.get(name).ok_or_else(|| unknown(name))
    }

    /// Whether a peer may write it (known and writable).
    pub fn check_writable(&self, name: &str) -> Result<(), PropertyError> {
        match self.affordances.get(name) {
            None => Err(unknown(name)),
            Some(p) if !p.writable => Err(PropertyError::ReadOnly { name: name.into() }),
            Some(_) => Ok(()),
        }
    }

    /// Sets the value (a local write or an accepted `writeproperty`) and queues the change
    /// for every observer; returns the change id.
    pub fn set(&mut self, name: &str, value: Value, now: Instant) -> Result<u64, PropertyError> {
        let slot = self.values.get_mut(name).ok_or_else(|| unknown(name))?;
        *slot = value.clone();
        Ok(self.changes.publish(name, value, now)?)
    }

    /// Starts observing a property; returns the id of its latest change (0: none yet).
    pub fn observe(
        &mut self,
        observer: SubscriberId,
        name: &str,
        now: Instant,
    ) -> Result<u64, PropertyError> {
        match self.affordances.get(name) {
            None => return Err(unknown(name)),
            Some(p) if !p.observable => {
                return Err(PropertyError::NotObservable { name: name.into() })
            }
            Some(_) => {}
        }
        Ok(self.changes.subscribe(observer, name, None, now)?.latest)
    }

    /// Stops observing a property; queued changes of it are discarded.
    pub fn unobserve(&mut self, observer: SubscriberId, name: &str) -> Result<(), PropertyError> {
        if !self.affordances.contains_key(name) {
            return Err(unknown(name));
        }
        Ok(self.changes.unsubscribe(observer, name)?)
    }

    /// The next change due to this observer.
    pub fn poll_change(&mut self, observer: SubscriberId) -> Option<PropertyChange> {
        loop {
            match self.changes.poll_delivery(observer)? {
                Delivery::Event(record) => {
                    return Some(PropertyChange {
                        name: record.event.to_string(),
                        id: record.id,
                        value: Value::clone(&record.data),
                    })
                }
                Delivery::Gap(_) => continue,
            }
        }
    }

    /// How many changes wait for this observer.
    pub fn queued(&self, observer: SubscriberId) -> usize {
        self.changes.queued(observer)
    }

    /// What the changes waiting for this observer weigh ([`EventHub::queued_bytes`]).
    pub fn queued_bytes(&self, observer: SubscriberId) -> usize {
        self.changes.queued_bytes(observer)
    }

    /// What the changes waiting for every observer weigh, together.
    pub fn total_queued_bytes(&self) -> usize {
        self.changes.total_queued_bytes()
    }

    /// Whether `observer` observes a property.
    pub fn is_observed_by(&self, observer: SubscriberId) -> bool {
        self.changes.is_subscribed(observer)
    }

    /// Forgets an observer whose session ended.
    pub fn remove_observer(&mut self, observer: SubscriberId) {
        self.changes.remove_subscriber(observer);
    }

    /// An observer dropped for overflow ([`Overflow::Disconnect`]).
    pub fn poll_event(&mut self) -> Option<HubEvent> {
        self.changes.poll_event()
    }
}

fn unknown(name: &str) -> PropertyError {
    PropertyError::Unknown {
        name: name.chars().take(64).collect(),
    }
}
