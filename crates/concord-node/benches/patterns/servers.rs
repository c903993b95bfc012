//! Both servers of every case: the provider node (the seed's WeatherAgent and a byte
//! sink stream action) and the floor, a raw axum WebSocket server.

use concord_fixtures::weather;
use concord_negotiate::ActionSpec;
use concord_node::{
    ActionError, Connection, Node, Publisher, Server, StreamIo, StreamSpec, Subscription, Want,
};
use serde_json::{json, Value};

use crate::{limits, open, BoxError};

/// The non-realtime stream action: it reads every byte, then answers their count as
/// 8 bytes (u64 big-endian) and ends its half.
pub const SINK: &str = "sink";
/// Credit each direction of a `sink` stream starts with (the default receive buffer).
pub const SINK_CREDIT: u64 = 1024 * 1024;

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
        let node = weather::agent(Node::builder(weather::TITLE))
            .stream_action(sink_spec(), sink_stream(), sink)
            .data_dir(dir.path())
            .limits(limits::provider(sessions))
            .build()?;
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
    let internal = |error: concord_node::CallError| ActionError::internal(error.to_string());
    let mut total: u64 = 0;
    while let Some(bytes) = stream.receiver.next().await {
        total += bytes.map_err(internal)?.len() as u64;
    }
    let count = total.to_be_bytes().to_vec();
    stream.sender.send(count).await.map_err(internal)?;
    stream.sender.finish().await.map_err(internal)?;
    Ok(json!({}))
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
            .limits(limits::requester())
            .build()?;
        Ok(Self { node, _dir: dir })
    }

    /// `count` interface sessions to `url`, [`open::AT_ONCE`] opened at a time.
    pub async fn connect_all(&self, url: &str, count: usize) -> Result<Vec<Connection>, BoxError> {
        Ok(open::all(count, |_| self.node.connect_with(url, want())).await?)
    }
}

/// Each connection subscribed to the event, [`open::AT_ONCE`] at a time.
pub async fn subscribe_each(connections: &[Connection]) -> Result<Vec<Subscription>, BoxError> {
    let subscribe = |i: usize| connections[i].subscribe(weather::USER_FEEDBACK_RECEIVED, None);
    Ok(open::all(connections.len(), subscribe).await?)
}

/// One interface session to a fresh provider, and a fresh raw server beside it: what the
/// stream and voice phases compare.
pub struct Pair {
    pub connection: Connection,
    /// The raw server's `ws://address`.
    pub raw: String,
    _requester: Requester,
    _provider: Provider,
}

impl Pair {
    pub async fn start() -> Result<Self, BoxError> {
        let provider = Provider::start(16).await?;
        let requester = Requester::new()?;
        let connection = requester.node.connect_with(provider.url(), want()).await?;
        let (raw, _) = raw::serve().await?;
        Ok(Self {
            connection,
            raw,
            _requester: requester,
            _provider: provider,
        })
    }

    /// Closes the session; the servers end with it.
    pub async fn close(self) {
        self.connection.close().await;
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
