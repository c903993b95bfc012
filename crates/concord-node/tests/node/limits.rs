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
