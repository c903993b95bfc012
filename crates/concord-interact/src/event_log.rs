//! The event log: where published events get their ids, so that a backend shared by
//! several nodes (a stream of a message broker) can number them, while fan-out to each
//! node's subscribers stays local ([`EventHub::publish_as`](crate::EventHub::publish_as)).
//! [`LocalEventLog`] is the in-memory default.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// Why an [`EventLog`] could not append an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventLogError {
    /// The backend could not take the event (unreachable, full, refused).
    #[error("the {backend} event log could not append `{event}`: {reason}")]
    Unavailable {
        /// The backend (`"memory"`, `"nats-jetstream"`, …).
        backend: &'static str,
        /// The event's name.
        event: String,
        /// What it said.
        reason: String,
    },
}

/// Where published events are appended and numbered.
///
/// # Contract
///
/// - Ids of one event name strictly increase in the order [`append`](Self::append)
///   returns them, from any number of threads: two appends never get the same id, and an
///   append that returns after another began got a greater one. Ids may skip (events
///   other nodes appended): a subscriber of this node sees only the events published here.
/// - An id is never reused, not even after a restart: a subscriber resuming with an id it
///   saw must not be given another event under it. (The in-memory default starts above
///   every id it could have given before, from the clock.)
/// - An error appends nothing: the event is not published.
///
/// Called once per publish, synchronously, before the event reaches the node's
/// subscribers (publishes of one node are serialized around it): a backend on the network
/// answers quickly or fails. Fan-out stays local: a node's subscribers hear the events
/// published through that node; carrying other nodes' events to them is the backend's
/// business (it can publish them through [`EventHub::publish_as`](crate::EventHub::publish_as)
/// under the ids it gave).
pub trait EventLog: Send + Sync + std::fmt::Debug {
    /// Appends an event named `event` carrying `data`; its id.
    ///
    /// # Errors
    /// [`EventLogError::Unavailable`] when it could not be appended.
    fn append(&self, event: &str, data: &Value) -> Result<u64, EventLogError>;
}

/// The in-memory [`EventLog`]: each event name numbered from `first`, one by one; the data
/// is not kept (the [`EventHub`](crate::EventHub)'s replay buffer keeps what resumes need).
#[derive(Debug)]
pub struct LocalEventLog {
    first: u64,
    next: Mutex<HashMap<String, u64>>,
}

impl LocalEventLog {
    /// Numbers each event name's events from `first` (at least 1).
    pub fn new(first: u64) -> Self {
        Self {
            first: first.max(1),
            next: Mutex::new(HashMap::new()),
        }
    }
}

impl EventLog for LocalEventLog {
    fn append(&self, event: &str, _data: &Value) -> Result<u64, EventLogError> {
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = match next.get_mut(event) {
            Some(slot) => slot,
            None => next.entry(event.to_owned()).or_insert(self.first),
        };
        let id = *slot;
        *slot = id
            .checked_add(1)
            .ok_or_else(|| EventLogError::Unavailable {
                backend: "memory",
                event: event.to_owned(),
                reason: "its ids are exhausted".to_owned(),
            })?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_event_log_passes_the_event_log_conformance_suite() {
        crate::conformance::event_log(&LocalEventLog::new(1_000));
    }

    /// A log that gives every event the same id: the suite must catch it.
    #[derive(Debug)]
    struct Stuck;

    impl EventLog for Stuck {
        fn append(&self, _: &str, _: &Value) -> Result<u64, EventLogError> {
            Ok(7)
        }
    }

    #[test]
    #[should_panic(expected = "ids of one name must increase")]
    fn the_event_log_suite_refuses_a_log_that_repeats_ids() {
        crate::conformance::event_log(&Stuck);
    }
}
