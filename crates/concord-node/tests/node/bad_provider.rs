//! Bad input from a provider, seen by a requester node: each is a clear `ConnectError`.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use concord_describe::{ActionBuilder, MetaProtocol, ProblemKind, TextPosition, ThingBuilder};
use concord_node::{ConnectError, DescriptionError, Limits, Node};
use concord_proto::{CloseReason, ProtocolViolation, Wait};
use serde_json::json;
use tokio::sync::mpsc;

use crate::support::*;

/// What the fake provider does once the requester's WebSocket is open.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    BinaryInsteadOfHello,
    GarbageAfterHello,
    SilentAfterHello,
    NoHello,
    CloseAfterHello,
    UnofferedHash,
}

#[derive(Clone)]
struct Fake {
    misbehaviour: Misbehaviour,
    description: String,
    /// What the fake saw last from the requester: a close frame's code and reason.
    seen: mpsc::UnboundedSender<(u16, String)>,
}

const DESTINATION_HELLO: &str = r#"{"version":"1.0","type":"destinationHello","messageId":"fakeprovider0001","metaProtocol":{"version":"1.0","supportedCapabilities":[]}}"#;

async fn fake_session(mut socket: WebSocket, fake: Fake) {
    // The requester's sourceHello.
    let _ = socket.recv().await;
    match fake.misbehaviour {
        Misbehaviour::BinaryInsteadOfHello => {
            let _ = socket
                .send(Message::Binary(vec![0u8, b'{', b'}'].into()))
                .await;
        }
        Misbehaviour::GarbageAfterHello => {
            let _ = socket.send(Message::Text(DESTINATION_HELLO.into())).await;
            let _ = socket
                .send(Message::Binary(vec![0x00, b'n', b'o', b'p', b'e'].into()))
                .await;
        }
        Misbehaviour::SilentAfterHello => {
            let _ = socket.send(Message::Text(DESTINATION_HELLO.into())).await;
        }
        Misbehaviour::NoHello => {}
        Misbehaviour::CloseAfterHello => {
            let _ = socket
                .send(Message::Close(Some(axum::extract::ws::CloseFrame {
                    code: 1013,
                    reason: "too busy to negotiate now".into(),
                })))
                .await;
        }
        Misbehaviour::UnofferedHash => {
            let hello = DESTINATION_HELLO.replace(
                r#""supportedCapabilities":[]"#,
                &format!(
                    r#""supportedCapabilities":[],"usedProtocolHash":"{}""#,
                    "cd".repeat(32)
                ),
            );
            let _ = socket.send(Message::Text(hello.into())).await;
        }
    }
    while let Some(Ok(message)) = socket.recv().await {
        if let Message::Close(frame) = message {
            let _ = fake
                .seen
                .send(frame.map_or((0, String::new()), |f| (f.code, f.reason.to_string())));
            break;
        }
    }
}

/// A fake provider with a valid description; returns its URL and what it saw.
async fn fake_provider(
    misbehaviour: Misbehaviour,
) -> (String, mpsc::UnboundedReceiver<(u16, String)>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let thing = ThingBuilder::agent("Fake agent")
        .action(
            "getProductInfo",
            ActionBuilder::new(format!("ws://{addr}/concord"))
                .input(catalogue::action().input)
                .output(catalogue::action().output),
        )
        .meta_protocol(MetaProtocol::new(format!("ws://{addr}/concord")))
        .build()
        .unwrap();
    let (seen, saw) = mpsc::unbounded_channel();
    let fake = Fake {
        misbehaviour,
        description: serde_json::to_string(&thing).unwrap(),
        seen,
    };
    let app = axum::Router::new()
        .route(
            "/.well-known/wot",
            get(|State(fake): State<Fake>| async move { fake.description.clone() }),
        )
        .route(
            "/concord",
            get(
                |State(fake): State<Fake>, upgrade: WebSocketUpgrade| async move {
                    upgrade
                        .on_upgrade(move |socket| fake_session(socket, fake))
                        .into_response()
                },
            ),
        )
        .with_state(fake);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/"), saw)
}

fn impatient_requester() -> Agent {
    build(Node::builder("Requester").limits(Limits {
        hello_timeout: Duration::from_millis(300),
        pending_hello_shed_after: Duration::from_millis(100),
        negotiation_timeout: Duration::from_millis(400),
        ..quick_limits()
    }))
}

async fn connect(misbehaviour: Misbehaviour) -> (ConnectError, Option<(u16, String)>) {
    let (url, mut saw) = fake_provider(misbehaviour).await;
    let requester = impatient_requester();
    let error = requester
        .node
        .connect(&url, "getProductInfo")
        .await
        .unwrap_err();
    let seen = tokio::time::timeout(Duration::from_secs(3), saw.recv())
        .await
        .ok()
        .flatten();
    (error, seen)
}

#[tokio::test]
async fn a_binary_frame_instead_of_the_destination_hello() {
    let (error, seen) = connect(Misbehaviour::BinaryInsteadOfHello).await;
    let reason = "expected the destinationHello as a JSON text frame first, got a binary frame";
    assert!(
        matches!(&error, ConnectError::Binding(text) if text == reason),
        "{error}"
    );
    assert_eq!(seen, Some((1002, reason.to_owned())));
}

#[tokio::test]
async fn a_garbage_frame_after_the_hello() {
    let (error, seen) = connect(Misbehaviour::GarbageAfterHello).await;
    assert!(
        matches!(
            &error,
            ConnectError::Closed(CloseReason::Violation(ProtocolViolation::Meta(_)))
        ),
        "{error}"
    );
    let (code, reason) = seen.unwrap();
    assert_eq!(code, 1002);
    assert!(
        reason.starts_with("protocol violation: bad meta message:"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_provider_that_stalls_mid_negotiation() {
    let (error, seen) = connect(Misbehaviour::SilentAfterHello).await;
    assert!(
        matches!(
            &error,
            ConnectError::Closed(CloseReason::TimedOut {
                waiting_for: Wait::ProtocolNegotiation
            })
        ),
        "{error}"
    );
    assert_eq!(
        seen,
        Some((1008, "timed out waiting for ProtocolNegotiation".to_owned()))
    );
}

#[tokio::test]
async fn a_provider_that_never_says_hello() {
    let (error, seen) = connect(Misbehaviour::NoHello).await;
    assert_eq!(
        error.to_string(),
        "timed out: no destinationHello within 300 ms"
    );
    assert_eq!(
        seen,
        Some((1008, "no destinationHello within 300 ms".to_owned()))
    );
}

#[tokio::test]
async fn a_provider_that_closes_during_the_hello() {
    let (error, _) = connect(Misbehaviour::CloseAfterHello).await;
    assert_eq!(
        error.to_string(),
        "the peer closed the connection (code 1013): too busy to negotiate now"
    );
}

#[tokio::test]
async fn a_destination_hello_confirming_a_hash_we_did_not_offer() {
    let (error, seen) = connect(Misbehaviour::UnofferedHash).await;
    assert_eq!(
        error.to_string(),
        format!(
            "handshake: destinationHello confirms protocol hash {} that our sourceHello did not offer",
            "cd".repeat(32)
        )
    );
    assert_eq!(seen.map(|(code, _)| code), Some(1002));
}

#[tokio::test]
async fn a_description_that_is_not_valid() {
    let app = axum::Router::new()
        .route("/.well-known/wot", get(|| async { "{\"title\": \"x\",}" }))
        .route(
            "/plain/.well-known/wot",
            get(|| async {
                json!({
                    "@context": "https://www.w3.org/2022/wot/td/v1.1",
                    "title": "No Concord here",
                    "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
                    "security": "nosec_sc"
                })
                .to_string()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let requester = impatient_requester();
    let error = requester
        .node
        .connect(&format!("http://{addr}/"), "getProductInfo")
        .await
        .unwrap_err();
    match &error {
        ConnectError::InvalidDescription { problems, .. } => {
            let text = problems.to_string();
            assert!(text.contains("1:14"), "{problems}");
            assert!(text.contains("trailing comma"), "{problems}");
            // The validator's report itself, not a string made of it.
            let DescriptionError::Invalid(report) = problems else {
                panic!("{problems:?}")
            };
            let first = report.errors().next().expect("a problem");
            assert_eq!(first.kind, ProblemKind::Syntax);
            assert_eq!(
                first.position,
                Some(TextPosition {
                    line: 1,
                    column: 14
                })
            );
        }
        other => panic!("{other}"),
    }
    let error = requester
        .node
        .connect(
            &format!("http://{addr}/plain/.well-known/wot"),
            "getProductInfo",
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "the description at http://{addr}/plain/.well-known/wot advertises no Concord meta-protocol endpoint"
        )
    );
}
