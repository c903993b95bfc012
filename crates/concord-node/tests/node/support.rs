//! Shared pieces of the integration tests: agents on loopback with stores in temp dirs,
//! a raw WebSocket peer for bad input, and waiting helpers.

use std::sync::Once;
use std::time::Duration;

pub use concord_fixtures::catalogue;
use concord_node::{Connection, Keys, Limits, Node, NodeBuilder, Security, Server};
use concord_store::{Store, Transcript};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::Message;

pub type RawSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The seeds' product-info protocol, as written (Chinese).
pub const SEED_PRODUCT_INFO: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../concord-negotiate/tests/fixtures/seed-product-info.zh.md"
));

/// Logs to the test output with `RUST_LOG=concord_node=debug`.
pub fn init_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    });
}

/// An agent with its store in a temp dir that lives as long as it.
pub struct Agent {
    pub node: Node,
    /// Where the store lives (removed when the agent is dropped).
    pub _dir: TempDir,
}

impl Agent {
    pub fn store(&self) -> &Store {
        self.node.store()
    }

    /// Connects to the server's `action`; the connection must be made.
    pub async fn connect(&self, server: &Server, action: &str) -> Connection {
        self.node.connect(server.url(), action).await.unwrap()
    }
}

pub fn quick_limits() -> Limits {
    Limits {
        hello_timeout: Duration::from_secs(5),
        negotiation_timeout: Duration::from_secs(20),
        code_generation_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(10),
        ..Limits::default()
    }
}

pub fn build(builder: NodeBuilder) -> Agent {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = builder.data_dir(dir.path()).build().unwrap();
    Agent { node, _dir: dir }
}

/// The product-info provider.
pub fn provider_with(limits: Limits) -> Agent {
    build(
        Node::builder("Product agent")
            .description("Product information for a small shop.")
            .action(catalogue::action(), catalogue::answer)
            .limits(limits),
    )
}

pub fn provider() -> Agent {
    provider_with(quick_limits())
}

/// A requester with no actions.
pub fn requester() -> Agent {
    build(Node::builder("Requester").limits(quick_limits()))
}

pub async fn serve(agent: &Agent) -> Server {
    agent.node.serve("127.0.0.1:0").await.unwrap()
}

/// The bytes of the description `server` serves now (`GET /.well-known/wot`).
pub async fn served_description_bytes(server: &Server) -> Vec<u8> {
    reqwest::get(server.description_url())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

/// The description `server` serves now, valid and read into the typed model (`report`
/// holds its warnings).
pub async fn served_description(server: &Server) -> concord_describe::Validated {
    concord_describe::parse(&served_description_bytes(server).await).unwrap()
}

/// A WebSocket to the server's endpoint, before any hello.
pub async fn raw_socket(server: &Server) -> RawSocket {
    let (socket, _) = tokio_tungstenite::connect_async(server.endpoint())
        .await
        .unwrap();
    socket
}

/// A TCP connection to the server from `source` (any port): attackers play from other
/// loopback addresses than the legitimate caller's 127.0.0.1.
pub async fn tcp_from(source: &str, server: &Server) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::new(source.parse().unwrap(), 0))
        .unwrap();
    socket.connect(server.local_addr()).await.unwrap()
}

/// A WebSocket to the server's endpoint from `source`, before any hello.
pub async fn raw_socket_from(source: &str, server: &Server) -> RawSocket {
    let tcp = tokio_tungstenite::MaybeTlsStream::Plain(tcp_from(source, server).await);
    let (socket, _) = tokio_tungstenite::client_async(server.endpoint(), tcp)
        .await
        .unwrap();
    socket
}

/// A sourceHello offering every capability, optionally a 0-RTT hash.
pub fn source_hello(hash: Option<&str>) -> String {
    let mut meta = json!({
        "version": "1.0",
        "supportedCapabilities": ["testCasesNegotiation", "fixErrorNegotiation", "verificationProtocol"],
    });
    if let Some(hash) = hash {
        meta["usedProtocolHash"] = json!(hash);
    }
    json!({"version": "1.0", "type": "sourceHello", "messageId": "rawpeer000000001", "metaProtocol": meta})
        .to_string()
}

/// Says hello and returns the destinationHello.
pub async fn hello(socket: &mut RawSocket, hash: Option<&str>) -> Value {
    socket
        .send(Message::Text(source_hello(hash).into()))
        .await
        .unwrap();
    match next(socket).await {
        Message::Text(text) => serde_json::from_str(text.as_str()).unwrap(),
        other => panic!("expected the destinationHello, got {other:?}"),
    }
}

/// The next message (ping/pong skipped), within 10 s.
pub async fn next(socket: &mut RawSocket) -> Message {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("no message within 10 s")
            .expect("the connection ended")
            .expect("WebSocket error");
        if !matches!(message, Message::Ping(_) | Message::Pong(_)) {
            return message;
        }
    }
}

/// The next binary frame's meta message (PT 0) as JSON.
pub async fn next_meta(socket: &mut RawSocket) -> Value {
    match next(socket).await {
        Message::Binary(bytes) => {
            assert_eq!(bytes[0] >> 6, 0, "expected a meta frame");
            serde_json::from_slice(&bytes[1..]).unwrap()
        }
        other => panic!("expected a binary frame, got {other:?}"),
    }
}

/// Reads until the close frame and asserts its code and reason.
pub async fn assert_closed_with(socket: &mut RawSocket, code: u16, reason: &str) {
    assert_eq!(closed_with(socket).await, (code, reason.to_owned()));
}

/// Reads until the close frame and returns its code and reason.
pub async fn closed_with(socket: &mut RawSocket) -> (u16, String) {
    loop {
        match next(socket).await {
            Message::Close(Some(frame)) => {
                return (u16::from(frame.code), frame.reason.to_string())
            }
            Message::Close(None) => return (0, String::new()),
            _ => {}
        }
    }
}

/// A meta frame: header byte 0 then the JSON.
pub fn meta_frame(message: &Value) -> Message {
    let mut bytes = vec![0u8];
    bytes.extend_from_slice(message.to_string().as_bytes());
    Message::Binary(bytes.into())
}

/// Waits until the server runs `count` sessions.
pub async fn wait_for_sessions(server: &Server, count: usize) {
    for _ in 0..200 {
        if server.sessions() == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the server runs {} sessions, not {count}",
        server.sessions()
    );
}

/// Every transcript in the store, newest first, once `count` of them are finished.
pub async fn finished_transcripts(store: &Store, count: usize) -> Vec<Transcript> {
    for _ in 0..200 {
        let summaries = store.list_transcripts(100).unwrap();
        let finished = summaries.iter().filter(|s| s.finished.is_some()).count();
        if finished >= count {
            return summaries
                .iter()
                .map(|summary| store.transcript(summary.id).unwrap().unwrap())
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("fewer than {count} transcripts finished");
}

/// A transcript's frames as `(direction, kind, text)` with text cut to its `action`/`type`
/// and status where it is JSON.
pub fn frame_summary(transcript: &Transcript) -> Vec<String> {
    transcript
        .frames
        .iter()
        .map(|frame| {
            let text = match &frame.content {
                concord_store::FrameContent::Text(text) => {
                    match serde_json::from_str::<Value>(text) {
                        Ok(json) => {
                            let name = json["action"]
                                .as_str()
                                .or(json["type"].as_str())
                                .unwrap_or("?")
                                .to_owned();
                            match json["status"].as_str() {
                                Some(status) => format!("{name}:{status}"),
                                None => name,
                            }
                        }
                        Err(_) => "text".to_owned(),
                    }
                }
                concord_store::FrameContent::Binary { len } => format!("{len} bytes"),
            };
            format!("{} {} {text}", frame.direction.name(), frame.kind.name())
        })
        .collect()
}

/// Asserts that `expected` appear in `frames` in this order (other frames may come between).
pub fn assert_in_order(frames: &[String], expected: &[String]) {
    let mut rest = frames.iter();
    for wanted in expected {
        assert!(
            rest.any(|frame| frame == wanted),
            "{wanted:?} missing (in order) from {frames:#?}"
        );
    }
}

/// Test mode: DIDs on `localhost` resolve over `http://` (everything here is on loopback).
pub fn loopback_security() -> Security {
    let mut security = Security::default();
    security.resolver.allow_loopback_http = true;
    security
}

/// A requester with an identity of its own: it serves (nothing) so that its DID document
/// is reachable, as an agent's node does; a provider with a DID resumes only for
/// authenticated callers.
pub async fn requester_with_did() -> (Agent, Server) {
    let agent = build(
        Node::builder("Requester")
            .keys(Keys::generate())
            .security(loopback_security())
            .limits(quick_limits()),
    );
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    (agent, server)
}
