//! The NATS event log against a real nats-server started here (`CONCORD_NATS_SERVER` names
//! the binary; `.ci/run` runs these with `--ignored`): the event log conformance suites
//! (numbering, and delivery in one order across three replicas' connections), retention
//! and the gap it leads to, NATS stopped and restarted under a delivering replica, an
//! event NATS took without confirming it appended again and kept once, and the stream
//! brought to a changed configuration.

mod common;

use common::runtime;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use concord_interact::{conformance, EventLog, EventLogError, EventSink};
use concord_nats::testing::NatsServer;
use concord_nats::{EventStream, Nats, NatsError, NatsEventLog};
use serde_json::{json, Value};

/// One replica's connection: its own client, as a separate process would have.
fn connect(runtime: &tokio::runtime::Runtime, server: &NatsServer) -> Nats {
    common::connect(runtime, server.url(), Duration::from_secs(1))
}

fn open(runtime: &tokio::runtime::Runtime, nats: &Nats, stream: &EventStream) -> NatsEventLog {
    runtime.block_on(NatsEventLog::open(nats, stream)).unwrap()
}

/// Two replicas' logs of the stream `events`, each on its own connection.
fn two_replicas(
    runtime: &tokio::runtime::Runtime,
    server: &NatsServer,
) -> (NatsEventLog, NatsEventLog) {
    let stream = EventStream::new("events");
    (
        open(runtime, &connect(runtime, server), &stream),
        open(runtime, &connect(runtime, server), &stream),
    )
}

/// A sink keeping what it was given, and the oldest id it was told the log holds.
#[derive(Default)]
struct Kept {
    events: Mutex<Vec<(String, u64, Value)>>,
    first: Mutex<u64>,
}

impl EventSink for Kept {
    fn deliver(&self, event: &str, id: u64, data: Value) {
        self.events
            .lock()
            .unwrap()
            .push((event.to_owned(), id, data));
    }

    fn forget_before(&self, first: u64) {
        *self.first.lock().unwrap() = first;
    }
}

impl Kept {
    fn attach(log: &NatsEventLog) -> Arc<Self> {
        let sink = Arc::new(Self::default());
        let weak: Weak<dyn EventSink> = Arc::downgrade(&(Arc::clone(&sink) as Arc<dyn EventSink>));
        assert!(log.deliver_to(weak));
        sink
    }

    fn ids(&self) -> Vec<u64> {
        self.events.lock().unwrap().iter().map(|e| e.1).collect()
    }

    /// Waits until `check` holds of the ids, at most 15 s.
    fn wait(&self, what: &str, check: impl Fn(&[u64]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !check(&self.ids()) {
            assert!(Instant::now() < deadline, "{what}: {:?}", self.ids());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_nats_event_log_passes_the_event_log_conformance_suites() {
    let server = NatsServer::start();
    let runtime = runtime();
    let stream = EventStream::new("events");
    let logs: Vec<NatsEventLog> = (0..3)
        .map(|_| open(&runtime, &connect(&runtime, &server), &stream))
        .collect();
    conformance::event_log(&logs[0]);
    let handles: Vec<&dyn EventLog> = logs.iter().map(|log| log as &dyn EventLog).collect();
    conformance::event_log_delivery(&handles, Duration::from_secs(20));
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_replica_starting_later_gets_what_the_stream_retains_and_is_told_what_it_forgot() {
    let server = NatsServer::start();
    let runtime = runtime();
    let mut stream = EventStream::new("events");
    stream.max_messages = Some(5);
    let log = open(&runtime, &connect(&runtime, &server), &stream);
    let ids: Vec<u64> = (0..10)
        .map(|n| log.append("tick", &json!({"n": n})).unwrap())
        .collect();
    assert_eq!(ids, (1..=10).collect::<Vec<_>>());
    let late = Kept::attach(&open(&runtime, &connect(&runtime, &server), &stream));
    late.wait("the retained events", |ids| ids == [6, 7, 8, 9, 10]);
    assert_eq!(*late.first.lock().unwrap(), 6);
    // The log is told again as the stream forgets more.
    log.append("tick", &json!({"n": 10})).unwrap();
    late.wait("the next event", |ids| ids.last() == Some(&11));
    let deadline = Instant::now() + Duration::from_secs(5);
    while *late.first.lock().unwrap() != 7 {
        assert!(Instant::now() < deadline, "the new oldest id was not told");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn nats_away_an_append_answers_a_typed_error_and_delivery_goes_on_when_it_returns() {
    let mut server = NatsServer::start();
    let runtime = runtime();
    let (a, b) = two_replicas(&runtime, &server);
    let on_b = Kept::attach(&b);
    let first = a.append("tick", &json!(1)).unwrap();
    on_b.wait("the first event", |ids| ids == [first]);
    // An attempt appended twice is one event (here both arrived: the stream drops the
    // second and answers the first one's id).
    let once = a.append_again("tick", &json!("once"), "attempt-1").unwrap();
    assert_eq!(
        a.append_again("tick", &json!("once"), "attempt-1").unwrap(),
        once
    );
    let after = a.append("tick", &json!("after")).unwrap();
    on_b.wait("the attempt and the next event", |ids| {
        ids == [first, once, after]
    });

    server.stop();
    // Each append answers in time: `Unavailable` (not handed over: never published) or
    // `Uncertain` (the client took it just as NATS died: it may arrive later); once the
    // client knows NATS is gone, `Unavailable` at once.
    let mut uncertain = Vec::new();
    let mut refused = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in 0.. {
        let data = json!({"away": k});
        let started = Instant::now();
        let answer = a.append("tick", &data);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "an append with NATS away must answer within the operation timeout, took {:?}",
            started.elapsed()
        );
        match answer {
            Err(EventLogError::Unavailable { backend, event, .. }) => {
                assert_eq!((backend, event.as_str()), (concord_nats::BACKEND, "tick"));
                refused.push(data);
                if started.elapsed() < Duration::from_millis(100) {
                    break;
                }
            }
            Err(EventLogError::Uncertain {
                backend, attempt, ..
            }) => {
                assert_eq!(backend, concord_nats::BACKEND);
                uncertain.push((data, attempt));
            }
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "never refused at once");
        std::thread::sleep(Duration::from_millis(100));
    }

    server.resume();
    // The client reconnects by itself; then appends work again.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (next, next_data) = loop {
        let data = json!({"back": uncertain.len() + refused.len()});
        match a.append("tick", &data) {
            Ok(id) => break (id, data),
            Err(EventLogError::Uncertain { attempt, .. }) => uncertain.push((data, attempt)),
            Err(error) => {
                assert!(Instant::now() < deadline, "NATS back, still: {error}");
                refused.push(data);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    // What was uncertain, appended again under its attempt: each is kept once, whether the
    // client had delivered it on reconnecting or not.
    let mut again = Vec::new();
    for (data, attempt) in &uncertain {
        let id = a.append_again("tick", data, attempt).unwrap();
        // Twice: the second is the same event.
        assert_eq!(a.append_again("tick", data, attempt).unwrap(), id);
        again.push((id, data.clone()));
    }
    let later = b.append("tock", &json!(4)).unwrap();
    // B's sink, attached before NATS went away, goes on: each event once, in order; what
    // was refused never arrives, what was uncertain arrives once.
    on_b.wait("the events after NATS returned", |ids| {
        ids.last() == Some(&later)
    });
    let events = on_b.events.lock().unwrap().clone();
    let ids = on_b.ids();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    assert_eq!(
        events[..3].iter().map(|e| e.1).collect::<Vec<_>>(),
        [first, once, after]
    );
    assert!(events.contains(&("tick".to_owned(), next, next_data)));
    assert_eq!(events.last(), Some(&("tock".to_owned(), later, json!(4))));
    for (_, id, data) in &events[3..events.len() - 1] {
        if *id != next {
            assert!(
                again.contains(&(*id, data.clone())) && !refused.contains(data),
                "{data} arrived as {id}: it was not answered as uncertain, or not under the id appending it again gave"
            );
        }
    }
    for (id, data) in &again {
        let arrived = events.iter().filter(|(_, _, seen)| seen == data).count();
        assert_eq!(arrived, 1, "{data} (id {id}) arrived {arrived} times");
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_event_nats_took_but_did_not_confirm_appended_again_is_kept_once() {
    let server = NatsServer::start();
    let runtime = runtime();
    let (a, b) = two_replicas(&runtime, &server);
    let on_b = Kept::attach(&b);
    let first = a.append("tick", &json!("first")).unwrap();
    on_b.wait("the first event", |ids| ids == [first]);

    // A server that hangs: the client hands the event over and hears nothing.
    server.freeze();
    let data = json!("taken");
    let attempt = match a.append("tick", &data) {
        Err(EventLogError::Uncertain { attempt, .. }) => attempt,
        other => panic!("a publish with no acknowledgement must be uncertain: {other:?}"),
    };
    server.thaw();
    // The server goes on with what it was sent: the event is stored after all. Appended
    // again under its attempt, it is the same event, not a second one.
    let deadline = Instant::now() + Duration::from_secs(10);
    let id = loop {
        match a.append_again("tick", &data, &attempt) {
            Ok(id) => break id,
            Err(error) => {
                assert!(Instant::now() < deadline, "NATS thawed, still: {error}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert_eq!(a.append_again("tick", &data, &attempt).unwrap(), id);
    let last = b.append("tick", &json!("last")).unwrap();
    on_b.wait("the last event", |ids| ids.last() == Some(&last));
    let events = on_b.events.lock().unwrap().clone();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.1, e.2.clone()))
            .collect::<Vec<_>>(),
        [(first, json!("first")), (id, data), (last, json!("last"))]
    );
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_event_larger_than_nats_takes_is_refused_as_too_large_not_as_an_outage() {
    let server = NatsServer::start_with_max_payload(Some(4096));
    let runtime = runtime();
    let stream = EventStream::new("events");
    let log = open(&runtime, &connect(&runtime, &server), &stream);
    let on_log = Kept::attach(&log);
    let large = json!({"text": "x".repeat(8 * 1024)});
    match log.append("tick", &large) {
        Err(EventLogError::TooLarge {
            backend,
            event,
            reason,
        }) => {
            assert_eq!((backend, event.as_str()), (concord_nats::BACKEND, "tick"));
            assert!(reason.contains("4096"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing was published, and the log goes on.
    let small = log.append("tick", &json!("small")).unwrap();
    on_log.wait("the small event", |ids| ids == [small]);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_stream_is_brought_to_a_changed_configuration_and_a_taken_subject_is_refused() {
    let server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    let mut stream = EventStream::new("events");
    let log = open(&runtime, &nats, &stream);
    for n in 0..4 {
        log.append("e", &json!(n)).unwrap();
    }
    stream.max_messages = Some(2);
    stream.max_age = Some(Duration::from_secs(3600));
    let log = open(&runtime, &nats, &stream);
    let (first, last) = runtime.block_on(log.bounds()).unwrap();
    assert_eq!((first, last), (3, 4));
    // Another stream over the same agent's subjects: refused, naming the stream.
    let mut other = EventStream::new("other_events");
    other.agent = "events".to_owned();
    match runtime.block_on(NatsEventLog::open(&nats, &other)) {
        Err(error @ NatsError::Refused { .. }) => {
            assert!(
                error.is_configuration(),
                "trying again cannot cure it: {error}"
            );
            assert!(
                matches!(&error, NatsError::Refused { name, .. } if name == "other_events"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
}
