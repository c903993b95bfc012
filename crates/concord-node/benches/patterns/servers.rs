//! Both servers of every case: the provider node (the seed's WeatherAgent and a byte
//! sink stream action) and the floor, a raw axum WebSocket server.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use concord_fixtures::weather;
use concord_negotiate::ActionSpec;
use concord_node::{ActionError, Limits, Node, Publisher, Server, StreamIo, StreamSpec, Want};
use serde_json::{json, Value};

use crate::BoxError;

/// The non-realtime stream action: it reads every byte, then answers their count as
/// 8 bytes (u64 big-endian) and ends its half.
pub const SINK: &str = "sink";
/// Credit each direction of a `sink` stream starts with (the default receive buffer).
pub const SINK_CREDIT: u64 = 1024 * 1024;
/// Descriptors kept beyond one per connection.
pub const SPARE: usize = 256;

/// The provider node, serving on loopback.
pub struct Provider {
    pub node: Node,
    pub server: Server,
    _dir: tempfile::TempDir,
}

impl Provider {
    /// Starts the WeatherAgent with the sink action, its limits raised for `sessions`
    /// sessions from 127.0.0.1.
    pub async fn start(sessions: usize) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let publisher = Arc::new(OnceLock::new());
        let node = weather::agent(Node::builder(weather::TITLE), Arc::clone(&publisher))
            .stream_action(sink_spec(), sink_stream(), sink)
            .data_dir(dir.path())
            .limits(provider_limits(sessions))
            .build()?;
        let _ = publisher.set(node.publisher());
        let server = node.serve("127.0.0.1:0").await?;
        Ok(Self {
            node,
            server,
            _dir: dir,
        })
    }

    pub fn publisher(&self) -> Publisher {
        self.node.publisher()
    }

    pub fn url(&self) -> &str {
        self.server.url()
    }
}

fn sink_spec() -> ActionSpec {
    ActionSpec {
        name: SINK.to_owned(),
        description: "Takes a stream of bytes and answers how many it read.".to_owned(),
        input: json!({"type": "object"}),
        output: json!({"type": "object"}),
    }
}

fn sink_stream() -> StreamSpec {
    StreamSpec {
        content_type: "application/octet-stream".to_owned(),
        output_content_type: None,
        frame_bytes: 0,
        initial_credit: SINK_CREDIT,
        realtime: false,
    }
}

async fn sink(_input: Value, mut stream: StreamIo) -> Result<Value, ActionError> {
    let mut total: u64 = 0;
    while let Some(bytes) = stream.receiver.next().await {
        let bytes = bytes.map_err(|error| ActionError::internal(error.to_string()))?;
        total += bytes.len() as u64;
    }
    stream
        .sender
        .send(total.to_be_bytes().to_vec())
        .await
        .map_err(|error| ActionError::internal(error.to_string()))?;
    stream
        .sender
        .finish()
        .await
        .map_err(|error| ActionError::internal(error.to_string()))?;
    Ok(json!({}))
}

/// Room for every session, all from 127.0.0.1, opened as fast as the client can, and
/// never closed as idle.
fn provider_limits(sessions: usize) -> Limits {
    let room = sessions + SPARE;
    let rate = u32::try_from(room).unwrap_or(u32::MAX);
    Limits {
        max_sessions: room,
        max_sessions_per_address: room,
        max_connections: room,
        max_connections_per_address: room,
        connection_rate_per_address: rate,
        connection_burst_per_address: rate,
        max_pending_hellos: room,
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    }
}

/// The requester: one node for every connection (the first negotiates, the rest resume
/// by 0-RTT).
pub struct Requester {
    pub node: Node,
    _dir: tempfile::TempDir,
}

impl Requester {
    pub fn new() -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let node = Node::builder("Requester")
            .data_dir(dir.path())
            .limits(Limits {
                idle_timeout: Duration::from_secs(3600),
                ..Limits::default()
            })
            .build()?;
        Ok(Self { node, _dir: dir })
    }
}

/// The interface every connection asks for.
pub fn want() -> Want {
    Want::interface([
        weather::GET_WEATHER,
        weather::USER_FEEDBACK_RECEIVED,
        weather::TALK,
        SINK,
    ])
}

/// The event's data, as the fan-out publishes it.
pub fn feedback(i: u64) -> Value {
    json!({"rating": 1 + i % 5, "comment": format!("feedback number {i}: the forecast was spot on")})
}

/// The message the node sends a subscriber for event `id` (what the raw broadcast sends).
pub fn event_message(id: u64, data: &Value) -> String {
    json!({
        "messageType": "notification",
        "operation": "subscribeevent",
        "name": weather::USER_FEEDBACK_RECEIVED,
        "correlationID": "c-1",
        "value": data,
        "eventID": id,
    })
    .to_string()
}

pub mod raw {
    //! The floor: an axum WebSocket server with the node's 4 KiB read buffer. Routes:
    //! `/echo` echoes each message; `/broadcast` sends every text the [`Broadcast`]
    //! carries (a tokio broadcast channel, one receiver per WebSocket); `/sink` counts the
    //! bytes of binary messages and answers their count when a text message comes.

    use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
    use axum::extract::State;
    use axum::response::Response;
    use axum::routing::get;
    use axum::Router;
    use tokio::sync::broadcast;

    use crate::BoxError;

    const READ_BUFFER_SIZE: usize = 4 * 1024;
    /// Messages the channel holds for a slow receiver (the node's subscriber queue).
    const CAPACITY: usize = 1024;

    /// What `/broadcast` sends.
    pub type Broadcast = broadcast::Sender<Utf8Bytes>;

    /// Starts the server; its `ws://address` (no path) and the broadcast sender.
    pub async fn serve() -> Result<(String, Broadcast), BoxError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (sender, _) = broadcast::channel(CAPACITY);
        let app = Router::new()
            .route("/echo", get(echo))
            .route("/broadcast", get(subscribe))
            .route("/sink", get(sink))
            .with_state(sender.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok((format!("ws://{address}"), sender))
    }

    async fn echo(upgrade: WebSocketUpgrade) -> Response {
        upgrade
            .read_buffer_size(READ_BUFFER_SIZE)
            .on_upgrade(|mut socket: WebSocket| async move {
                while let Some(Ok(message)) = socket.recv().await {
                    if socket.send(message).await.is_err() {
                        return;
                    }
                }
            })
    }

    async fn subscribe(State(sender): State<Broadcast>, upgrade: WebSocketUpgrade) -> Response {
        let mut events = sender.subscribe();
        upgrade
            .read_buffer_size(READ_BUFFER_SIZE)
            .on_upgrade(|mut socket: WebSocket| async move {
                loop {
                    tokio::select! {
                        event = events.recv() => {
                            let text = match event {
                                Ok(text) => text,
                                Err(broadcast::error::RecvError::Lagged(n)) => {
                                    Utf8Bytes::from(format!("lagged {n}"))
                                }
                                Err(broadcast::error::RecvError::Closed) => return,
                            };
                            if socket.send(Message::Text(text)).await.is_err() {
                                return;
                            }
                        }
                        incoming = socket.recv() => {
                            if !matches!(incoming, Some(Ok(_))) {
                                return;
                            }
                        }
                    }
                }
            })
    }

    async fn sink(upgrade: WebSocketUpgrade) -> Response {
        upgrade
            .read_buffer_size(READ_BUFFER_SIZE)
            .on_upgrade(|mut socket: WebSocket| async move {
                let mut total: u64 = 0;
                while let Some(Ok(message)) = socket.recv().await {
                    match message {
                        Message::Binary(bytes) => total += bytes.len() as u64,
                        Message::Text(_) => {
                            let answer = Message::Text(total.to_string().into());
                            if socket.send(answer).await.is_err() {
                                return;
                            }
                            total = 0;
                        }
                        _ => {}
                    }
                }
            })
    }
}
