//! The event log: where published events get their ids, so that a backend shared by
//! several nodes (a stream of a message broker) can number them, while fan-out to each
//! node's subscribers stays local ([`EventHub::publish_as`](crate::EventHub::publish_as)).
//! [`LocalEventLog`] is the in-memory default.

use std::collections::{HashMap, VecDeque};
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
    /// The event is larger than the backend takes (NATS: the server's `max_payload`): it
    /// was not published, and would not be if tried again.
    #[error("the {backend} event log cannot take `{event}`: {reason}")]
    TooLarge {
        /// The backend.
        backend: &'static str,
        /// The event's name.
        event: String,
        /// The sizes, as the backend gives them.
        reason: String,
    },
    /// The event was handed to the backend but no answer came in time (the backend went
    /// away meanwhile): it may or may not be published (it may still arrive when the
    /// backend returns). Not a silent loss: say so to whoever published it. Appending it
    /// again under `attempt` ([`EventLog::append_again`]) publishes it at most once.
    #[error("the {backend} event log did not confirm `{event}`: it may or may not be published ({reason}); append it again as attempt {attempt}")]
    Uncertain {
        /// The backend.
        backend: &'static str,
        /// The event's name.
        event: String,
        /// What happened.
        reason: String,
        /// The append's key: appended again under it, the event is kept at most once.
        attempt: String,
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
///   delivered like any other), and the publisher is told it is not known. A backend that
///   answers it implements [`append_again`](Self::append_again): the same event appended
///   again under the answer's `attempt` is kept (and delivered) at most once, whether or
///   not the first one arrived, for as long as the backend says (its duplicate window).
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

    /// Appends the event `event` under the key `attempt`: an append that answered
    /// [`EventLogError::Uncertain`] again, under that answer's `attempt`, or a publisher's
    /// own idempotency key. Within the log's duplicate window the same attempt is one
    /// event: its first id, appended (and delivered) once, whether or not the first one
    /// arrived. The window is the backend's (NATS JetStream: the stream's duplicate
    /// window; [`LocalEventLog`]: its latest attempts).
    ///
    /// # Errors
    /// As [`append`](Self::append) (an `Uncertain` answer carries the same `attempt`).
    fn append_again(&self, event: &str, data: &Value, attempt: &str) -> Result<u64, EventLogError>;

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
/// Its duplicate window ([`EventLog::append_again`]) is its latest
/// [`LocalEventLog::ATTEMPTS_KEPT`] attempts.
#[derive(Debug)]
pub struct LocalEventLog {
    first: u64,
    next: Mutex<HashMap<String, u64>>,
    attempts: Mutex<Attempts>,
}

/// The latest attempts appended, with their ids, oldest first.
#[derive(Debug, Default)]
struct Attempts {
    ids: HashMap<(String, String), u64>,
    order: VecDeque<(String, String)>,
}

impl LocalEventLog {
    /// Numbers each event name's events from `first` (at least 1).
    pub fn new(first: u64) -> Self {
        Self {
            first: first.max(1),
            next: Mutex::new(HashMap::new()),
            attempts: Mutex::new(Attempts::default()),
        }
    }

    /// How many of the latest attempts it remembers (its duplicate window).
    pub const ATTEMPTS_KEPT: usize = 4096;
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

    fn append_again(&self, event: &str, data: &Value, attempt: &str) -> Result<u64, EventLogError> {
        let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (event.to_owned(), attempt.to_owned());
        if let Some(id) = attempts.ids.get(&key) {
            return Ok(*id);
        }
        let id = self.append(event, data)?;
        if attempts.order.len() == Self::ATTEMPTS_KEPT {
            if let Some(oldest) = attempts.order.pop_front() {
                attempts.ids.remove(&oldest);
            }
        }
        attempts.ids.insert(key.clone(), id);
        attempts.order.push_back(key);
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

        fn append_again(&self, _: &str, _: &Value, _: &str) -> Result<u64, EventLogError> {
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

        /// Ignores the attempt: every append is a new event.
        fn append_again(&self, event: &str, data: &Value, _: &str) -> Result<u64, EventLogError> {
            self.append(event, data)
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

    #[test]
    #[should_panic(expected = "an attempt appended again must keep its first id")]
    fn the_event_log_suite_refuses_a_log_that_appends_an_attempt_twice() {
        crate::conformance::event_log(&Broadcast::default());
    }

    #[test]
    fn the_local_log_forgets_its_oldest_attempts_first() {
        let log = LocalEventLog::new(1);
        let first = log.append_again("e", &Value::Null, "a-0").unwrap();
        for n in 1..LocalEventLog::ATTEMPTS_KEPT {
            log.append_again("e", &Value::Null, &format!("a-{n}"))
                .unwrap();
        }
        // Still within the window; one more pushes "a-0" out.
        assert_eq!(log.append_again("e", &Value::Null, "a-0").unwrap(), first);
        log.append_again("e", &Value::Null, "one more").unwrap();
        assert!(log.append_again("e", &Value::Null, "a-0").unwrap() > first);
        // An attempt is per event name.
        assert_eq!(log.append_again("f", &Value::Null, "a-1").unwrap(), 1);
    }
}
