//! Two peers driven by hand on a simulated clock: a provider with an `EventHub` and
//! subscribers that speak Web Thing Protocol messages.

use std::time::{Duration, Instant};

use concord_interact::{
    CorrelationError, CorrelationState, Correlations, Delivery, EventError, EventHub, HubEvent,
    Limits, Message, MessageError, MessageType, Operation, Overflow, ProblemType, SubscriberId,
    TextPosition,
};
use proptest::prelude::*;
use serde_json::json;

const EVENT: &str = "userFeedbackReceived";

fn hub(limits: Limits, overflow: Overflow) -> EventHub {
    let mut hub = EventHub::new(limits, overflow);
    hub.declare(EVENT).unwrap();
    hub
}

/// Sends every queued delivery through the wire (encode, decode) to a subscriber peer.
fn drain(
    hub: &mut EventHub,
    who: SubscriberId,
    correlation_id: &str,
    limits: &Limits,
) -> Vec<Message> {
    let mut out = Vec::new();
    while let Some(d) = hub.poll_delivery(who) {
        let bytes = d
            .to_message(Operation::SubscribeEvent, correlation_id)
            .encode(limits)
            .unwrap();
        out.push(Message::decode(&bytes, limits).unwrap());
    }
    out
}

fn ids(messages: &[Message]) -> Vec<u64> {
    messages.iter().filter_map(|m| m.event_id).collect()
}

#[test]
fn message_round_trip_and_field_errors() {
    let limits = Limits::default();
    let request = Message::request(Operation::SubscribeEvent, "c-1")
        .with_name(EVENT)
        .with_last_event_id(7);
    let bytes = request.encode(&limits).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains(r#""messageType":"request""#), "{text}");
    assert!(text.contains(r#""correlationID":"c-1""#), "{text}");
    assert!(text.contains(r#""lastEventID":7"#), "{text}");
    assert_eq!(Message::decode(&bytes, &limits).unwrap(), request);

    let bad = |s: &str| Message::decode(s.as_bytes(), &limits).unwrap_err();
    assert_eq!(
        bad(r#"{"messageType":"request","operation":"subscribeevent","name":"x"}"#),
        MessageError::Missing {
            field: "correlationID"
        }
    );
    assert_eq!(
        bad(r#"{"messageType":"shout","operation":"readproperty","correlationID":"c"}"#),
        MessageError::UnknownValue {
            field: "messageType",
            value: "shout".into()
        }
    );
    assert_eq!(
        bad(r#"{"messageType":"request","operation":"readproperty","correlationID":"c"}"#),
        MessageError::Missing { field: "name" }
    );
    let long = "x".repeat(129);
    assert_eq!(
        bad(&format!(
            r#"{{"messageType":"request","operation":"readproperty","name":"p","correlationID":"{long}"}}"#
        )),
        MessageError::TooLong {
            field: "correlationID",
            len: 129,
            limit: 128
        }
    );
    assert!(matches!(
        bad(
            r#"{"messageType":"response","operation":"invokeaction","correlationID":"c","progress":1.5}"#
        ),
        MessageError::OutOfRange {
            field: "progress",
            ..
        }
    ));
    assert!(matches!(
        bad(
            r#"{"messageType":"response","operation":"invokeaction","correlationID":"c","error":{"status":42}}"#
        ),
        MessageError::OutOfRange {
            field: "error.status",
            ..
        }
    ));
    let deep = format!(
        r#"{{"messageType":"request","operation":"writeproperty","name":"p","correlationID":"c","value":{}1{}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    assert_eq!(bad(&deep), MessageError::TooDeep { limit: 32 });
    assert!(matches!(
        bad("{"),
        MessageError::Json {
            position: Some(TextPosition { line: 1, .. }),
            ..
        }
    ));
    // "é" is two bytes and one character: serde_json's byte column of the stray `x` is 16,
    // its character column 15.
    assert_eq!(
        bad("{\"name\": \"é\", x}"),
        MessageError::Json {
            message: "key must be a string at line 1 column 16".to_owned(),
            position: Some(TextPosition {
                line: 1,
                column: 15
            }),
        }
    );
    let mut small = Limits::default();
    small.max_message_size = 16;
    assert!(matches!(
        Message::decode(&bytes, &small),
        Err(MessageError::TooLarge { limit: 16, .. })
    ));
}

#[test]
fn fan_out_to_a_thousand_subscribers() {
    let limits = Limits::default();
    let start = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::DropOldest);
    for n in 0..1000 {
        hub.subscribe(SubscriberId(n), EVENT, None, start).unwrap();
    }
    for k in 0..5u64 {
        let id = hub
            .publish(
                EVENT,
                json!({ "rating": k }),
                start + Duration::from_millis(k),
            )
            .unwrap();
        assert_eq!(id, k + 1);
    }
    for n in 0..1000 {
        let got = drain(&mut hub, SubscriberId(n), "c-sub", &limits);
        assert_eq!(ids(&got), [1, 2, 3, 4, 5], "subscriber {n}");
        assert_eq!(got[4].value, Some(json!({ "rating": 4 })));
        assert_eq!(got[0].message_type, MessageType::Notification);
        assert_eq!(got[0].name.as_deref(), Some(EVENT));
    }
    assert_eq!(hub.poll_event(), None);
}

#[test]
fn resume_after_reconnect_replays_from_the_buffer() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::DropOldest);
    let alice = SubscriberId(1);

    // The subscriber peer asks, the provider answers, events flow.
    let mut peer = Correlations::new(&limits);
    let request = Message::request(Operation::SubscribeEvent, "c-1").with_name(EVENT);
    peer.open(&request).unwrap();
    let request = Message::decode(&request.encode(&limits).unwrap(), &limits).unwrap();
    let ack = hub
        .subscribe(
            alice,
            request.name.as_deref().unwrap(),
            request.last_event_id,
            t0,
        )
        .unwrap();
    assert_eq!((ack.latest, ack.replayed, ack.gap), (0, 0, None));
    assert_eq!(
        peer.accept(&request.response()).unwrap(),
        CorrelationState::Open
    );
    for k in 0..3 {
        hub.publish(EVENT, json!(k), t0).unwrap();
    }
    let got = drain(&mut hub, alice, "c-1", &limits);
    for m in &got {
        assert_eq!(peer.accept(m).unwrap(), CorrelationState::Open);
    }
    let last_seen = *ids(&got).last().unwrap();
    assert_eq!(last_seen, 3);

    // The connection drops; events keep coming.
    hub.remove_subscriber(alice);
    for k in 3..6 {
        hub.publish(EVENT, json!(k), t0 + Duration::from_secs(1))
            .unwrap();
    }

    // Reconnect under a new subscriber id, resuming from the last seen id.
    let back = SubscriberId(2);
    let resumed = Message::request(Operation::SubscribeEvent, "c-2")
        .with_name(EVENT)
        .with_last_event_id(last_seen);
    let ack = hub
        .subscribe(
            back,
            EVENT,
            resumed.last_event_id,
            t0 + Duration::from_secs(2),
        )
        .unwrap();
    assert_eq!((ack.latest, ack.replayed, ack.gap), (6, 3, None));
    hub.publish(EVENT, json!(6), t0 + Duration::from_secs(3))
        .unwrap();
    assert_eq!(ids(&drain(&mut hub, back, "c-2", &limits)), [4, 5, 6, 7]);
}

#[test]
fn resume_from_before_the_buffer_answers_a_gap() {
    let mut limits = Limits::default();
    limits.replay_events = 4;
    let t0 = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::DropOldest);
    for k in 0..10 {
        hub.publish(EVENT, json!(k), t0).unwrap();
    }
    let bob = SubscriberId(9);
    let ack = hub.subscribe(bob, EVENT, Some(2), t0).unwrap();
    let gap = ack.gap.unwrap();
    assert_eq!((gap.from, gap.to), (3, 6));
    assert_eq!(ack.replayed, 4);
    let got = drain(&mut hub, bob, "c-9", &limits);
    let problem = got[0].error.as_ref().unwrap();
    assert_eq!(problem.kind(), Some(ProblemType::Gap));
    assert_eq!(problem.gap_range(), Some((3, 6)));
    assert_eq!(ids(&got[1..]), [7, 8, 9, 10]);

    // A resume from an id never reached is refused, not silently accepted.
    assert_eq!(
        hub.subscribe(SubscriberId(10), EVENT, Some(11), t0)
            .unwrap_err(),
        EventError::LastSeenAhead {
            name: EVENT.into(),
            last_seen: 11,
            latest: 10
        }
    );

    // Age bound: events older than replay_max_age leave the buffer too.
    let mut aged = Limits::default();
    aged.replay_max_age = Some(Duration::from_secs(60));
    let mut hub = hub_with(aged);
    hub.publish(EVENT, json!(1), t0).unwrap();
    hub.publish(EVENT, json!(2), t0 + Duration::from_secs(90))
        .unwrap();
    let ack = hub
        .subscribe(
            SubscriberId(1),
            EVENT,
            Some(0),
            t0 + Duration::from_secs(100),
        )
        .unwrap();
    assert_eq!(ack.gap.map(|g| (g.from, g.to)), Some((1, 1)));
    assert_eq!(ack.replayed, 1);
}

fn hub_with(limits: Limits) -> EventHub {
    hub(limits, Overflow::DropOldest)
}

#[test]
fn slow_subscriber_gets_a_gap_and_others_are_unaffected() {
    let mut limits = Limits::default();
    limits.subscriber_queue = 8;
    let t0 = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::DropOldest);
    let (slow, fast) = (SubscriberId(1), SubscriberId(2));
    hub.subscribe(slow, EVENT, None, t0).unwrap();
    hub.subscribe(fast, EVENT, None, t0).unwrap();
    let mut fast_ids = Vec::new();
    for k in 0..20 {
        hub.publish(EVENT, json!(k), t0).unwrap();
        fast_ids.extend(ids(&drain(&mut hub, fast, "c-f", &limits)));
        assert!(hub.queued(slow) <= limits.subscriber_queue + 1);
    }
    assert_eq!(fast_ids, (1..=20).collect::<Vec<_>>());
    let got = drain(&mut hub, slow, "c-s", &limits);
    assert_eq!(got[0].error.as_ref().unwrap().gap_range(), Some((1, 12)));
    assert_eq!(ids(&got[1..]), (13..=20).collect::<Vec<_>>());
    assert_eq!(hub.poll_event(), None);
}

#[test]
fn disconnect_policy_drops_the_slow_subscriber_only() {
    let mut limits = Limits::default();
    limits.subscriber_queue = 4;
    let t0 = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::Disconnect);
    let (slow, fast) = (SubscriberId(1), SubscriberId(2));
    hub.subscribe(slow, EVENT, None, t0).unwrap();
    hub.subscribe(fast, EVENT, None, t0).unwrap();
    for k in 0..6 {
        hub.publish(EVENT, json!(k), t0).unwrap();
        drain(&mut hub, fast, "c-f", &limits);
    }
    assert_eq!(
        hub.poll_event(),
        Some(HubEvent::SubscriberDropped {
            subscriber: slow,
            reason: concord_interact::DropReason::Overflow
        })
    );
    assert!(!hub.is_subscribed(slow));
    assert_eq!(hub.poll_delivery(slow), None);
    assert!(hub.is_subscribed(fast));
}

#[test]
fn unknown_event_and_unknown_correlation_are_typed_errors() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::DropOldest);
    let err = hub
        .subscribe(SubscriberId(1), "noSuchEvent", None, t0)
        .unwrap_err();
    assert_eq!(
        err,
        EventError::UnknownEvent {
            name: "noSuchEvent".into()
        }
    );
    assert_eq!(err.to_problem().kind(), Some(ProblemType::UnknownEvent));
    assert_eq!(err.to_problem().status, Some(404));
    assert!(matches!(
        hub.publish("noSuchEvent", json!(1), t0),
        Err(EventError::UnknownEvent { .. })
    ));
    assert!(!hub.is_subscribed(SubscriberId(1)));

    // The error response travels to the subscriber peer as a problem.
    let request = Message::request(Operation::SubscribeEvent, "c-1").with_name("noSuchEvent");
    let reply = request.response().with_error(err.to_problem());
    let reply = Message::decode(&reply.encode(&limits).unwrap(), &limits).unwrap();
    assert_eq!(reply.error.unwrap().kind(), Some(ProblemType::UnknownEvent));

    // Subscriber side: an answer to a request never sent.
    let mut peer = Correlations::new(&limits);
    let stray = Message::new(
        MessageType::Notification,
        Operation::SubscribeEvent,
        "c-404",
    )
    .with_name(EVENT)
    .with_event_id(1);
    let err = peer.accept(&stray).unwrap_err();
    assert_eq!(
        err,
        CorrelationError::Unknown {
            correlation_id: "c-404".into()
        }
    );
    assert_eq!(
        err.to_problem().kind(),
        Some(ProblemType::UnknownCorrelationId)
    );

    // Duplicate subscriptions and unsubscribing what is not subscribed.
    hub.subscribe(SubscriberId(1), EVENT, None, t0).unwrap();
    assert!(matches!(
        hub.subscribe(SubscriberId(1), EVENT, None, t0),
        Err(EventError::AlreadySubscribed { .. })
    ));
    hub.unsubscribe(SubscriberId(1), EVENT).unwrap();
    assert!(matches!(
        hub.unsubscribe(SubscriberId(1), EVENT),
        Err(EventError::NotSubscribed { .. })
    ));
}

#[test]
fn subscribe_all_receives_every_event() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut hub = hub(limits.clone(), Overflow::DropOldest);
    hub.declare("modelChanged").unwrap();
    let who = SubscriberId(3);
    hub.subscribe_all(who).unwrap();
    hub.publish(EVENT, json!(1), t0).unwrap();
    hub.publish("modelChanged", json!(2), t0).unwrap();
    let names: Vec<String> = std::iter::from_fn(|| hub.poll_delivery(who))
        .map(|d| match d {
            Delivery::Event(r) => format!("{}#{}", r.event, r.id),
            Delivery::Gap(g) => format!("gap {}", g.event),
        })
        .collect();
    assert_eq!(names, [format!("{EVENT}#1"), "modelChanged#1".to_owned()]);
    hub.unsubscribe_all(who).unwrap();
    hub.publish(EVENT, json!(3), t0).unwrap();
    assert_eq!(hub.poll_delivery(who), None);
}

/// Checks one subscriber's received stream: every id from 1 to `published` exactly once,
/// in order, as an event or inside a gap.
fn assert_complete(got: &[Delivery], published: u64) {
    let mut next = 1;
    for d in got {
        match d {
            Delivery::Event(r) => {
                assert_eq!(r.id, next, "{got:?}");
                next += 1;
            }
            Delivery::Gap(g) => {
                assert_eq!(g.from, next, "{got:?}");
                assert!(g.to >= g.from, "{got:?}");
                next = g.to + 1;
            }
        }
    }
    assert_eq!(next, published + 1, "{got:?}");
}

proptest! {
    /// Under DropOldest, whatever the interleaving of publishes and polls, every subscriber
    /// accounts for every event exactly once (delivered or in a gap), and its queue never
    /// grows past the bound.
    #[test]
    fn drop_oldest_never_loses_silently(
        capacity in 1usize..6,
        ops in proptest::collection::vec((0u8..3, 0usize..3), 0..200),
    ) {
        let mut limits = Limits::default();
        limits.subscriber_queue = capacity;
        let t0 = Instant::now();
        let mut hub = hub(limits, Overflow::DropOldest);
        let subs = [SubscriberId(0), SubscriberId(1), SubscriberId(2)];
        for s in subs {
            hub.subscribe(s, EVENT, None, t0).unwrap();
        }
        let mut got: Vec<Vec<Delivery>> = vec![Vec::new(); 3];
        let mut published = 0;
        for (op, who) in ops {
            if op == 0 {
                if let Some(d) = hub.poll_delivery(subs[who]) {
                    got[who].push(d);
                }
            } else {
                hub.publish(EVENT, json!(published), t0).unwrap();
                published += 1;
            }
            for s in subs {
                // The queue plus at most one pending gap for the one event.
                prop_assert!(hub.queued(s) <= capacity + 1);
            }
        }
        for (i, s) in subs.into_iter().enumerate() {
            got[i].extend(std::iter::from_fn(|| hub.poll_delivery(s)));
            assert_complete(&got[i], published);
        }
    }

    /// A resume from any id up to the latest gets exactly the later ids, some as a gap.
    #[test]
    fn resume_covers_everything_after_last_seen(
        replay in 0usize..10,
        published in 0u64..30,
        seen_frac in 0.0f64..=1.0,
    ) {
        let mut limits = Limits::default();
        limits.replay_events = replay;
        let t0 = Instant::now();
        let mut hub = hub(limits, Overflow::DropOldest);
        for k in 0..published {
            hub.publish(EVENT, json!(k), t0).unwrap();
        }
        // Truncation toward zero is what we want here.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let seen = (seen_frac * published as f64) as u64;
        let who = SubscriberId(1);
        let ack = hub.subscribe(who, EVENT, Some(seen), t0).unwrap();
        let got: Vec<Delivery> = std::iter::from_fn(|| hub.poll_delivery(who)).collect();
        prop_assert_eq!(ack.replayed, got.iter().filter(|d| matches!(d, Delivery::Event(_))).count());
        let mut next = seen + 1;
        for d in &got {
            match d {
                Delivery::Event(r) => { prop_assert_eq!(r.id, next); next += 1; }
                Delivery::Gap(g) => { prop_assert_eq!(g.from, next); next = g.to + 1; }
            }
        }
        prop_assert_eq!(next, published + 1);
    }

    /// Decoding arbitrary bytes never panics.
    #[test]
    fn decode_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Message::decode(&bytes, &Limits::default());
    }

    /// Every valid message survives encode → decode.
    #[test]
    fn round_trip(
        op in 0usize..11,
        kind in 0usize..3,
        id in "[a-zA-Z0-9-]{1,128}",
        name in "[a-zA-Z]{1,20}",
        progress in prop::sample::select(vec![0.0, 0.25, 0.5, 1.0]),
        event_id in any::<u64>(),
        value in prop::option::of(any::<i64>()),
    ) {
        let limits = Limits::default();
        let types = [MessageType::Request, MessageType::Response, MessageType::Notification];
        let mut m = Message::new(types[kind], Operation::ALL[op], id)
            .with_name(name)
            .with_action_id("action-1")
            .with_progress(progress)
            .with_event_id(event_id);
        if let Some(v) = value {
            m = m.with_value(json!({ "v": v, "list": [v, null, "x"] }));
        }
        let back = Message::decode(&m.encode(&limits).unwrap(), &limits).unwrap();
        prop_assert_eq!(back, m);
    }
}
