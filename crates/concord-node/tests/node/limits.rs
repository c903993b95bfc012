//! Limits in force on real sessions: call timeouts, back-pressure on calls in flight, the
//! idle timeout, oversized calls, and shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use concord_negotiate::ActionSpec;
use concord_node::{ActionError, CallError, Limits, Node};
use serde_json::{json, Value};

use crate::support::*;

fn wait_action() -> ActionSpec {
    ActionSpec {
        name: "wait".into(),
        description: "Waits the given milliseconds, then answers.".into(),
        input: json!({"type": "object", "properties": {"millis": {"type": "integer"}}, "required": ["millis"]}),
        output: json!({"title": "Waited", "type": "object", "properties": {"millis": {"type": "integer"}}, "required": ["millis"]}),
    }
}

#[tokio::test]
async fn a_slow_call_times_out_and_the_connection_goes_on() {
    let provider = build(Node::builder("Slow agent").limits(quick_limits()).action(
        wait_action(),
        |input: Value| async move {
            let millis = input["millis"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(millis)).await;
            Ok(json!({"millis": millis}))
        },
    ));
    let server = serve(&provider).await;
    let requester = build(Node::builder("Requester").limits(Limits {
        call_timeout: Duration::from_millis(300),
        ..quick_limits()
    }));
    let connection = requester.connect(&server, "wait").await;
    let error = connection
        .call("wait", json!({"millis": 1500}))
        .await
        .unwrap_err();
    assert_eq!(error, CallError::Timeout(Duration::from_millis(300)));
    assert_eq!(error.to_string(), "no response within 300 ms");
    // The late response is dropped; the next call is answered.
    let output = connection.call("wait", json!({"millis": 1})).await.unwrap();
    assert_eq!(output, json!({"millis": 1}));
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let output = connection.call("wait", json!({"millis": 2})).await.unwrap();
    assert_eq!(output, json!({"millis": 2}));
}

#[tokio::test]
async fn calls_in_flight_are_capped_per_session() {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (running_in, most_in) = (Arc::clone(&running), Arc::clone(&most));
    let provider = build(
        Node::builder("Capped agent")
            .limits(Limits {
                max_calls_in_flight: 2,
                ..quick_limits()
            })
            .action(wait_action(), move |input: Value| {
                let (running, most) = (Arc::clone(&running_in), Arc::clone(&most_in));
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, ActionError>(json!({"millis": input["millis"]}))
                }
            }),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "wait").await;
    let calls = (0..6).map(|i| {
        let connection = connection.clone();
        async move { connection.call("wait", json!({"millis": i})).await.unwrap() }
    });
    let outputs = futures_util::future::join_all(calls).await;
    assert_eq!(outputs.len(), 6);
    for (i, output) in outputs.iter().enumerate() {
        assert_eq!(output["millis"], i);
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
    assert_eq!(running.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_idle_session_is_closed_with_a_reason() {
    let provider = provider_with(Limits {
        idle_timeout: Duration::from_millis(300),
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    let reason = tokio::time::timeout(Duration::from_secs(10), connection.closed())
        .await
        .unwrap();
    assert_eq!(
        reason,
        "the peer closed the connection (code 1000): idle for 300 ms"
    );
    let error = connection
        .call("getProductInfo", json!({"productId": "P2"}))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        CallError::Closed("the peer closed the connection (code 1000): idle for 300 ms".into())
    );
    wait_for_sessions(&server, 0).await;
}

#[tokio::test]
async fn a_call_over_the_frame_limit_is_refused_before_sending() {
    let echo = ActionSpec {
        name: "echo".into(),
        description: "Echoes text.".into(),
        input: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        output: json!({"title": "Echo", "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    };
    let limits = Limits {
        max_frame_size: 64 * 1024,
        ..quick_limits()
    };
    let provider = build(
        Node::builder("Echo agent")
            .limits(limits.clone())
            .action(echo, |input: Value| async move { Ok(input) }),
    );
    let server = serve(&provider).await;
    let requester = build(Node::builder("Requester").limits(limits));
    let connection = requester.connect(&server, "echo").await;
    let small = connection
        .call("echo", json!({"text": "x".repeat(1000)}))
        .await
        .unwrap();
    assert_eq!(small["text"].as_str().unwrap().len(), 1000);
    let error = connection
        .call("echo", json!({"text": "x".repeat(70_000)}))
        .await
        .unwrap_err();
    match &error {
        CallError::InvalidInput(text) => assert!(
            text.starts_with("a frame of ") && text.ends_with("exceeds the limit of 65536 bytes"),
            "{text}"
        ),
        other => panic!("{other}"),
    }
    // Nothing was sent: the session goes on.
    connection
        .call("echo", json!({"text": "still here"}))
        .await
        .unwrap();
}

#[tokio::test]
async fn shutdown_closes_every_session_with_a_reason() {
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    wait_for_sessions(&server, 1).await;
    server.shutdown().await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(10), connection.closed())
        .await
        .unwrap();
    assert_eq!(
        reason,
        "the peer closed the connection (code 1001): the node is shutting down"
    );
}

/// A provider whose `wait` action sleeps as long as it is asked to, counting the calls
/// that started.
fn slow_provider(started: Arc<AtomicUsize>) -> Agent {
    build(Node::builder("Slow agent").limits(quick_limits()).action(
        wait_action(),
        move |input: Value| {
            started.fetch_add(1, Ordering::SeqCst);
            async move {
                let millis = input["millis"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(millis)).await;
                Ok(json!({"millis": millis}))
            }
        },
    ))
}

async fn wait_until_started(started: &AtomicUsize, count: usize) {
    for _ in 0..200 {
        if started.load(Ordering::SeqCst) >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the action never started");
}

#[tokio::test]
async fn shutdown_drains_a_call_in_flight_before_closing_its_session() {
    let started = Arc::new(AtomicUsize::new(0));
    let provider = slow_provider(Arc::clone(&started));
    let server = serve(&provider).await;
    let url = server.url().to_owned();
    let requester = requester();
    let connection = requester.connect(&server, "wait").await;
    // A second, idle session closes at once.
    let idle = requester.connect(&server, "wait").await;
    let slow = tokio::spawn({
        let connection = connection.clone();
        async move { connection.call("wait", json!({"millis": 500})).await }
    });
    wait_until_started(&started, 1).await;
    let begun = std::time::Instant::now();
    let shutdown = tokio::spawn(server.shutdown());
    let reason = tokio::time::timeout(Duration::from_secs(5), idle.closed())
        .await
        .unwrap();
    assert_eq!(
        reason,
        "the peer closed the connection (code 1001): the node is shutting down"
    );
    // No new connection while it drains.
    let refused = requester.node.connect(&url, "wait").await;
    assert!(refused.is_err(), "a connection was accepted while draining");
    // The call in flight is answered, then its session closes with the reason.
    let output = slow.await.unwrap().unwrap();
    assert_eq!(output, json!({"millis": 500}));
    let reason = tokio::time::timeout(Duration::from_secs(5), connection.closed())
        .await
        .unwrap();
    assert_eq!(
        reason,
        "the peer closed the connection (code 1001): the node is shutting down"
    );
    shutdown.await.unwrap().unwrap();
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "{:?}",
        begun.elapsed()
    );
    assert_eq!(started.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_call_arriving_while_draining_is_not_taken() {
    let started = Arc::new(AtomicUsize::new(0));
    let provider = slow_provider(Arc::clone(&started));
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "wait").await;
    let slow = tokio::spawn({
        let connection = connection.clone();
        async move { connection.call("wait", json!({"millis": 600})).await }
    });
    wait_until_started(&started, 1).await;
    let shutdown = tokio::spawn(server.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Sent after the drain began: never run; the caller learns the session closed.
    let late = connection.call("wait", json!({"millis": 1})).await;
    assert!(matches!(late, Err(CallError::Closed(_))), "{late:?}");
    assert_eq!(slow.await.unwrap().unwrap(), json!({"millis": 600}));
    shutdown.await.unwrap().unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn calls_still_running_after_the_grace_lose_their_session() {
    let started = Arc::new(AtomicUsize::new(0));
    let provider = slow_provider(Arc::clone(&started));
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "wait").await;
    let slow = tokio::spawn({
        let connection = connection.clone();
        async move { connection.call("wait", json!({"millis": 5000})).await }
    });
    wait_until_started(&started, 1).await;
    let begun = std::time::Instant::now();
    server
        .shutdown_within(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(
        begun.elapsed() < Duration::from_secs(3),
        "{:?}",
        begun.elapsed()
    );
    let error = slow.await.unwrap().unwrap_err();
    assert!(
        matches!(&error, CallError::Closed(reason) if reason.contains("the node is shutting down")),
        "{error:?}"
    );
}
