//! Events across three replicas of the weather agent sharing one JetStream stream (each
//! replica its own NATS connection, as separate processes would have): events published
//! on every replica at once reach the subscribers of every replica in one order, each
//! once, and so does an event an action publishes; a subscriber resumes with its last id on another replica with no gap and no
//! duplicate, and is told of a gap exactly when its id is older than the stream holds.

use std::sync::Arc;
use std::time::Duration;

use concord_fixtures::weather;
use concord_nats::testing::NatsServer;
use concord_nats::{EventStream, Nats, NatsEventLog, NatsSettings};
use concord_node::{Connection, Node, Notification, Server, Subscription, Want};
use serde_json::json;

use crate::support::{build, quick_limits, requester, Agent};

const EVENT: &str = weather::USER_FEEDBACK_RECEIVED;

/// One replica of the weather agent with its own connection to the stream.
async fn replica(nats_url: &str, stream: &EventStream) -> (Agent, Server) {
    let mut settings = NatsSettings::new([nats_url]);
    settings.operation_timeout = Duration::from_secs(1);
    let nats = Nats::connect(&settings).await.unwrap();
    let log = NatsEventLog::open(&nats, stream).await.unwrap();
    let agent = build(
        weather::agent(Node::builder(weather::TITLE))
            .event_log(Arc::new(log))
            .limits(quick_limits()),
    );
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    (agent, server)
}

/// A subscription to the feedback event on `server`, resumed after `last` when given,
/// with the session it lives on.
async fn subscribe(caller: &Agent, server: &Server, last: Option<u64>) -> Subscribed {
    let peer = caller
        .node
        .connect_with(server.url(), Want::interface([EVENT]))
        .await
        .unwrap();
    let subscription = peer.subscribe(EVENT, last).await.unwrap();
    Subscribed {
        _peer: peer,
        subscription,
    }
}

struct Subscribed {
    _peer: Connection,
    subscription: Subscription,
}

/// What the next notification is, waited for at most 10 s: `(id, number)` of an event
/// (the number [`publish`] gave it), or the range of a gap (number `None`).
async fn next(subscribed: &mut Subscribed) -> (u64, Option<u64>, Option<u64>) {
    match tokio::time::timeout(Duration::from_secs(10), subscribed.subscription.next()).await {
        Ok(Some(Notification::Event { id, data, .. })) => (
            id,
            data["comment"].as_str().and_then(|n| n.parse().ok()),
            None,
        ),
        Ok(Some(Notification::Gap { from, to, .. })) => (from, None, Some(to)),
        other => panic!("no notification within 10 s: {other:?}"),
    }
}

/// Publishes `count` events on `replica` from a blocking thread (a publish waits for the
/// stream's acknowledgement), numbered from `first`; their ids.
async fn publish(replica: &Agent, first: u64, count: u64) -> Vec<u64> {
    let publisher = replica.node.publisher();
    tokio::task::spawn_blocking(move || {
        (first..first + count)
            .map(|n| {
                // The schema takes ratings 1 to 5: the number rides in the comment.
                let data = json!({"rating": 1 + n % 5, "comment": n.to_string()});
                publisher.publish(EVENT, data).unwrap()
            })
            .collect()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn events_published_on_every_replica_reach_every_replicas_subscribers_in_one_order() {
    let nats = tokio::task::spawn_blocking(NatsServer::start)
        .await
        .unwrap();
    let stream = EventStream::new("weather_events");
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(replica(&nats.url(), &stream).await);
    }
    let caller = requester();
    let mut on_a = subscribe(&caller, &replicas[0].1, None).await;
    let mut on_b = subscribe(&caller, &replicas[1].1, None).await;

    // An event published on C reaches the subscribers on A and B.
    let on_c = publish(&replicas[2].0, 100, 1).await;
    assert_eq!(next(&mut on_a).await, (on_c[0], Some(100), None));
    assert_eq!(next(&mut on_b).await, (on_c[0], Some(100), None));

    // The three publish at once, 20 events each: both subscribers receive all 60, each
    // once, in one order (the stream's), ids increasing.
    let (a, b, c) = tokio::join!(
        publish(&replicas[0].0, 0, 20),
        publish(&replicas[1].0, 20, 20),
        publish(&replicas[2].0, 40, 20),
    );
    let mut published: Vec<u64> = [a, b, c].concat();
    published.sort_unstable();
    let mut heard = Vec::new();
    for subscription in [&mut on_a, &mut on_b] {
        let mut got = Vec::new();
        for _ in 0..60 {
            got.push(next(subscription).await);
        }
        heard.push(got);
    }
    assert_eq!(heard[0], heard[1], "one order on every replica");
    let ids: Vec<u64> = heard[0].iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, published, "every event once, in the stream's order");
    // An action publishing on C (logFeedback, on the session's task: the publish waits
    // for the stream there) reaches A and B too.
    let caller_on_c = caller
        .node
        .connect_with(
            replicas[2].1.url(),
            Want::interface([weather::LOG_FEEDBACK]),
        )
        .await
        .unwrap();
    caller_on_c
        .notify(
            weather::LOG_FEEDBACK,
            json!({"rating": 5, "comment": "1000"}),
        )
        .await
        .unwrap();
    let on_a_action = next(&mut on_a).await;
    assert_eq!(on_a_action.1, Some(1000));
    assert_eq!(next(&mut on_b).await, on_a_action);
    let mut numbers: Vec<u64> = heard[0]
        .iter()
        .filter_map(|(_, number, _)| *number)
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (0..60).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn a_subscriber_resumes_on_another_replica_with_no_gap_and_no_duplicate() {
    let nats = tokio::task::spawn_blocking(NatsServer::start)
        .await
        .unwrap();
    let mut stream = EventStream::new("weather_events");
    stream.max_messages = Some(40);
    let (a, a_server) = replica(&nats.url(), &stream).await;
    let (b, b_server) = replica(&nats.url(), &stream).await;
    let caller = requester();

    let mut on_a = subscribe(&caller, &a_server, None).await;
    let ids = publish(&a, 0, 10).await;
    let mut last = 0;
    for _ in 0..5 {
        last = next(&mut on_a).await.0;
    }
    assert_eq!(last, ids[4]);
    drop(on_a);
    // Published while it was away, on both replicas.
    let more = [publish(&b, 10, 5).await, publish(&a, 15, 5).await].concat();

    // It resumes on B with its last id: every later event, no gap, no duplicate.
    let mut on_b = subscribe(&caller, &b_server, Some(last)).await;
    let expected: Vec<u64> = ids[5..].iter().chain(&more).copied().collect();
    let mut got = Vec::new();
    for _ in 0..expected.len() {
        got.push(next(&mut on_b).await);
    }
    assert_eq!(
        got.iter()
            .map(|(id, _, gap)| (*id, *gap))
            .collect::<Vec<_>>(),
        expected.iter().map(|id| (*id, None)).collect::<Vec<_>>()
    );
    assert_eq!(
        got.iter()
            .map(|(_, number, _)| number.unwrap())
            .collect::<Vec<_>>(),
        (5..20).collect::<Vec<_>>()
    );
    // Live events follow on B.
    let live = publish(&a, 20, 1).await;
    assert_eq!(next(&mut on_b).await, (live[0], Some(20), None));

    // The stream keeps 40 events: after 40 more, a resume from the first id is told of
    // a gap up to the oldest the stream holds, then gets all 40.
    let later = publish(&b, 100, 40).await;
    let oldest = later[0];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut resumed = loop {
        // The replica hears what the stream forgot within a second.
        let mut resumed = subscribe(&caller, &a_server, Some(ids[0])).await;
        match next(&mut resumed).await {
            (from, None, Some(to)) if to == oldest - 1 => {
                assert_eq!(from, ids[0] + 1);
                break resumed;
            }
            other => assert!(
                std::time::Instant::now() < deadline,
                "no gap up to {}: {other:?}",
                oldest - 1
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for id in later {
        assert_eq!(next(&mut resumed).await.0, id);
    }
}
