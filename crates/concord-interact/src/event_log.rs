//! The event log: where published events get their ids, so that a backend shared by
//! several nodes (a stream of a message broker) can number them, while fan-out to each
//! node's subscribers stays local ([`EventHub::publish_as`](crate::EventHub::publish_as)).
//! [`LocalEventLog`] is the in-memory default.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, Weak};

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
    /// The event was handed to the backend but no answer came in time (the backend went
    /// away meanwhile): it may or may not be published (it may still arrive when the
    /// backend returns). Not a silent loss: say so to whoever published it.
    #[error("the {backend} event log did not confirm `{event}`: it may or may not be published ({reason})")]
    Uncertain {
        /// The backend.
        backend: &'static str,
        /// The event's name.
        event: String,
        /// What happened.
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
/// - An error appends nothing: the event is not published; except
///   [`EventLogError::Uncertain`], which a backend on the network answers when it handed
///   the event over and then heard nothing: the event may be published (and then is
///   delivered like any other), and the publisher is told it is not known.
///
/// Called once per publish, synchronously, before the event reaches the node's
/// subscribers (publishes of one node are serialized around it): a backend on the network
/// answers quickly or fails.
///
/// # Who fans out
///
/// By default fan-out stays local: a node's subscribers hear the events published through
/// that node, right after [`append`](Self::append). A log shared by several nodes that
/// must give every node's subscribers every node's events in **one** order (a stream of a
/// message broker) delivers them itself: [`deliver_to`](Self::deliver_to) answers `true`
/// and from then on the node publishes nothing locally; every event reaches its
/// subscribers through the [`EventSink`], its own ones included, so that a node's own
/// event can never overtake an earlier event of another node still in flight. Such a log
/// must, for every sink it was given:
///
/// - deliver every event it holds, first those it held when the sink was given (from its
///   oldest), then every event appended by any node, each **once**, in increasing id order
///   across every name (ids are the ones [`append`](Self::append) returned);
/// - go on after the backend was away, from the event after the last one delivered, with
///   no restart;
/// - tell the sink ([`EventSink::forget_before`]) the oldest id it still holds when it
///   learns it, so that a resume from before it answers a [`Gap`](crate::Gap) as on any
///   node;
/// - stop delivering once the sink is dropped.
///
/// `conformance::event_log_delivery` checks this across several nodes.
pub trait EventLog: Send + Sync + std::fmt::Debug {
    /// Appends an event named `event` carrying `data`; its id.
    ///
    /// # Errors
    /// [`EventLogError::Unavailable`] when it could not be appended.
    fn append(&self, event: &str, data: &Value) -> Result<u64, EventLogError>;

    /// Starts delivering every event of the log to `sink` (see "Who fans out"); `false`,
    /// the default, for a log that does not (the node then publishes each event it
    /// appended to its own subscribers). Called once per node, when it is built.
    fn deliver_to(&self, sink: Weak<dyn EventSink>) -> bool {
        let _ = sink;
        false
    }
}

/// Where an [`EventLog`] that fans out delivers events: a node's event hub.
pub trait EventSink: Send + Sync {
    /// The event `id` named `event`, in the log's order. A sink ignores an event whose id is
    /// not above the latest of its name, and one of a name it does not declare.
    fn deliver(&self, event: &str, id: u64, data: Value);

    /// The log holds no event below `first` any more: a resume from before it is told of a
    /// gap.
    fn forget_before(&self, first: u64);
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
    use std::time::Duration;

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

    /// A log shared in memory that delivers each event to every sink as it appends it (under
    /// one lock: one order), delivering twice when `twice`.
    #[derive(Default)]
    struct Broadcast {
        twice: bool,
        inner: Mutex<Shared>,
    }

    /// The last id, every event, the sinks.
    #[derive(Default)]
    struct Shared(u64, Vec<(String, u64, Value)>, Vec<Weak<dyn EventSink>>);

    impl std::fmt::Debug for Broadcast {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Broadcast")
        }
    }

    impl EventLog for Broadcast {
        fn append(&self, event: &str, data: &Value) -> Result<u64, EventLogError> {
            let mut inner = self.inner.lock().unwrap();
            inner.0 += 1;
            let id = inner.0;
            inner.1.push((event.to_owned(), id, data.clone()));
            for sink in inner.2.iter().filter_map(Weak::upgrade) {
                sink.deliver(event, id, data.clone());
                if self.twice {
                    sink.deliver(event, id, data.clone());
                }
            }
            Ok(id)
        }

        fn deliver_to(&self, sink: Weak<dyn EventSink>) -> bool {
            let mut inner = self.inner.lock().unwrap();
            if let Some(live) = sink.upgrade() {
                for (event, id, data) in &inner.1 {
                    live.deliver(event, *id, data.clone());
                }
            }
            inner.2.push(sink);
            true
        }
    }

    #[test]
    fn a_log_that_delivers_in_one_order_passes_the_delivery_suite() {
        let log = Broadcast::default();
        crate::conformance::event_log_delivery(&[&log, &log, &log], Duration::from_secs(5));
    }

    #[test]
    #[should_panic(expected = "increasing order, each once")]
    fn the_delivery_suite_refuses_a_log_that_delivers_twice() {
        let log = Broadcast {
            twice: true,
            ..Broadcast::default()
        };
        crate::conformance::event_log_delivery(&[&log, &log], Duration::from_secs(5));
    }

    #[test]
    #[should_panic(expected = "must deliver")]
    fn the_delivery_suite_refuses_a_log_that_does_not_deliver() {
        crate::conformance::event_log_delivery(&[&LocalEventLog::new(1)], Duration::from_secs(1));
    }

    #[test]
    #[should_panic(expected = "ids of one name must increase")]
    fn the_event_log_suite_refuses_a_log_that_repeats_ids() {
        crate::conformance::event_log(&Stuck);
    }
}
