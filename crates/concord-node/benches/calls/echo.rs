//! The floor: a raw axum WebSocket JSON service carrying the same messages as the node (the
//! node's own request and response, header byte included), with none of its work: no hello,
//! no session, no handler code, no schema checks. The server parses the request, looks the
//! product up in the same catalogue and answers with the response message; the client builds
//! the request, sends it and parses the response.

use std::error::Error;
use std::net::SocketAddr;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite;

use crate::catalogue::Catalogue;

type BoxError = Box<dyn Error + Send + Sync>;

/// The node's WebSocket read buffer (tungstenite zero-fills it before each read), used here
/// too so that the floor has the same transport settings: this and TCP_NODELAY both ways.
const READ_BUFFER_SIZE: usize = 4 * 1024;

/// The shape of the node's messages on the wire, and where the variable parts sit.
#[derive(Debug, Clone)]
pub struct Wire {
    /// A PT 1 frame's header byte.
    header: u8,
    request: Value,
    request_id_at: String,
    request_product_at: String,
    response: Value,
    response_id_at: String,
    response_product_at: String,
}

impl Wire {
    /// From one request and one response the node's code produced for `message_id` and
    /// `product_id`.
    pub fn new(
        request: Value,
        response: Value,
        message_id: &str,
        product_id: &str,
        product: &Value,
    ) -> Result<Self, BoxError> {
        let at = |message: &Value, target: &Value, what: &str| {
            pointer_of(message, target).ok_or_else(|| format!("no {what} in {message}"))
        };
        let id = Value::from(message_id);
        Ok(Self {
            header: concord_proto::ProtocolType::Application.header(),
            request_id_at: at(&request, &id, "messageId")?,
            request_product_at: at(&request, &Value::from(product_id), "productId")?,
            response_id_at: at(&response, &id, "messageId")?,
            response_product_at: at(&response, product, "product")?,
            request,
            response,
        })
    }

    fn encode(&self, message: &Value) -> Result<Vec<u8>, BoxError> {
        let mut bytes = vec![self.header];
        serde_json::to_writer(&mut bytes, message)?;
        Ok(bytes)
    }

    fn decode(bytes: &[u8]) -> Result<Value, BoxError> {
        let body = bytes.get(1..).ok_or("an empty frame")?;
        Ok(serde_json::from_slice(body)?)
    }

    fn respond(&self, catalogue: &Catalogue, bytes: &[u8]) -> Result<Vec<u8>, BoxError> {
        let request = Self::decode(bytes)?;
        let id = request
            .pointer(&self.request_product_at)
            .and_then(Value::as_str)
            .ok_or("no productId")?;
        let product = catalogue.get(id).ok_or("no such product")?;
        let mut response = self.response.clone();
        set(
            &mut response,
            &self.response_id_at,
            request.pointer(&self.request_id_at).cloned(),
        )?;
        set(
            &mut response,
            &self.response_product_at,
            Some(product.clone()),
        )?;
        self.encode(&response)
    }
}

/// Where `target` sits in `message`, as a JSON pointer.
fn pointer_of(message: &Value, target: &Value) -> Option<String> {
    if message == target {
        return Some(String::new());
    }
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    match message {
        Value::Object(members) => members.iter().find_map(|(key, value)| {
            pointer_of(value, target).map(|rest| format!("/{}{rest}", escape(key)))
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, value)| pointer_of(value, target).map(|rest| format!("/{i}{rest}"))),
        _ => None,
    }
}

fn set(message: &mut Value, at: &str, value: Option<Value>) -> Result<(), BoxError> {
    let slot = message.pointer_mut(at).ok_or("a missing field")?;
    *slot = value.ok_or("a missing field")?;
    Ok(())
}

/// Serves the echo on a free loopback port; returns its WebSocket URL.
pub async fn serve(wire: Wire, catalogue: Catalogue) -> Result<String, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = Router::new()
        .route("/echo", get(upgrade))
        .with_state((wire, catalogue));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("ws://{addr}/echo"))
}

async fn upgrade(State(state): State<(Wire, Catalogue)>, upgrade: WebSocketUpgrade) -> Response {
    upgrade
        .read_buffer_size(READ_BUFFER_SIZE)
        .on_upgrade(move |socket| answer(socket, state))
}

async fn answer(mut socket: WebSocket, (wire, catalogue): (Wire, Catalogue)) {
    while let Some(Ok(message)) = socket.next().await {
        let Message::Binary(bytes) = message else {
            continue;
        };
        let Ok(response) = wire.respond(&catalogue, &bytes) else {
            return;
        };
        if socket.send(Message::Binary(response.into())).await.is_err() {
            return;
        }
    }
}

/// One client connection, one call at a time.
pub struct Client {
    socket: crate::node::ClientSocket,
    wire: Wire,
    next_id: u64,
}

impl Client {
    pub async fn connect(url: &str, wire: Wire) -> Result<Self, BoxError> {
        let config =
            tungstenite::protocol::WebSocketConfig::default().read_buffer_size(READ_BUFFER_SIZE);
        let (socket, _) =
            tokio_tungstenite::connect_async_with_config(url, Some(config), true).await?;
        Ok(Self {
            socket,
            wire,
            next_id: 0,
        })
    }

    /// Asks for `product_id`; returns the product.
    pub async fn call(&mut self, product_id: &str) -> Result<Value, BoxError> {
        let message_id = format!("echo0000{:08x}", self.next_id);
        self.next_id += 1;
        let mut request = self.wire.request.clone();
        set(
            &mut request,
            &self.wire.request_id_at,
            Some(message_id.as_str().into()),
        )?;
        set(
            &mut request,
            &self.wire.request_product_at,
            Some(product_id.into()),
        )?;
        let bytes = self.wire.encode(&request)?;
        self.socket
            .send(tungstenite::Message::Binary(bytes.into()))
            .await?;
        loop {
            match self.socket.next().await.ok_or("the echo closed")?? {
                tungstenite::Message::Binary(bytes) => {
                    let mut response = Wire::decode(&bytes)?;
                    if response.pointer(&self.wire.response_id_at) != Some(&Value::from(message_id))
                    {
                        return Err("a response to another request".into());
                    }
                    let product = response
                        .pointer_mut(&self.wire.response_product_at)
                        .ok_or("no product")?;
                    return Ok(product.take());
                }
                tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => continue,
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}

impl Wire {
    /// The request and response frame sizes (header byte included) for a product.
    pub fn frame_sizes(&self, catalogue: &Catalogue) -> Result<(usize, usize), BoxError> {
        let request = self.encode(&self.request)?;
        Ok((request.len(), self.respond(catalogue, &request)?.len()))
    }
}
