//! One WebSocket, whichever library holds it: axum's server side or tokio-tungstenite's
//! client side, behind the few operations a session needs.

use std::future::Future;
use std::time::Duration;

use axum::extract::ws::{self, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, protocol::frame::coding::CloseCode};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// WebSocket close codes (RFC 6455 §7.4.1) the node sends.
pub(crate) mod close_code {
    /// The session ended as it should.
    pub(crate) const NORMAL: u16 = 1000;
    /// The node is shutting down.
    pub(crate) const GOING_AWAY: u16 = 1001;
    /// The peer broke the binding, the meta-protocol or the WebSocket protocol.
    pub(crate) const PROTOCOL_ERROR: u16 = 1002;
    /// A text message that is not UTF-8.
    pub(crate) const INVALID_PAYLOAD: u16 = 1007;
    /// A timeout or limit of ours.
    pub(crate) const POLICY: u16 = 1008;
    /// A message over the frame-size limit.
    pub(crate) const TOO_BIG: u16 = 1009;
    /// Something failed on our side.
    pub(crate) const INTERNAL: u16 = 1011;
    /// The node is full for now; the peer may try again later.
    pub(crate) const TRY_AGAIN_LATER: u16 = 1013;
}

/// Longest close reason RFC 6455 allows (125 bytes of payload minus the 2-byte code).
const MAX_CLOSE_REASON: usize = 123;

/// What arrived on the WebSocket.
#[derive(Debug)]
pub(crate) enum Incoming {
    Text(String),
    /// As the WebSocket library read it: the frame is sliced from here on, never copied.
    Binary(Bytes),
    /// The peer closed, with its code and reason if it gave them.
    Close(Option<(u16, String)>),
    /// A pong: the peer is alive (the answer to our ping, or a heartbeat of its own).
    Pong,
}

/// Why the WebSocket failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum TransportError {
    #[error("a WebSocket message exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("WebSocket error: {0}")]
    Other(String),
}

/// A fault of the peer's that the WebSocket library found: answered with a close frame
/// naming it before the connection goes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Violation {
    #[error("a text message that is not valid UTF-8: {0}")]
    InvalidUtf8(String),
    #[error("WebSocket protocol error: {0}")]
    Protocol(String),
}

impl Violation {
    /// The violation tungstenite's `error` reports, if it is one.
    fn of(error: &tungstenite::Error) -> Option<Self> {
        match error {
            tungstenite::Error::Utf8(detail) => Some(Self::InvalidUtf8(detail.clone())),
            tungstenite::Error::Protocol(detail) => Some(Self::Protocol(detail.to_string())),
            _ => None,
        }
    }

    /// The close code that answers it (RFC 6455 §7.4.1).
    pub(crate) fn close_code(&self) -> u16 {
        match self {
            Self::InvalidUtf8(_) => close_code::INVALID_PAYLOAD,
            Self::Protocol(_) => close_code::PROTOCOL_ERROR,
        }
    }
}

/// Answers `violation` with its close frame (the library still sends after a read
/// error), and turns it into the error the session ends with.
async fn answer_violation(transport: &mut impl Transport, violation: &Violation) -> TransportError {
    let reason = violation.to_string();
    let sent = transport
        .send_close(violation.close_code(), close_reason(&reason))
        .await;
    let closed = match sent {
        Ok(()) => format!("closed with code {}", violation.close_code()),
        Err(error) => format!("the close frame could not be sent: {error}"),
    };
    TransportError::Other(format!("{reason} ({closed})"))
}

/// The operations a session needs from its WebSocket.
pub(crate) trait Transport: Send + 'static {
    /// The next text, binary or close message; `None` once the connection is gone.
    /// Cancel-safe: nothing is lost when the future is dropped; and a read that answered
    /// `Pending` leaves the waker it was polled with registered after it is dropped, to be
    /// woken when there is more to read (the driver's read gate relies on it: it reads
    /// again only once woken). A text message that is not
    /// UTF-8 or a breach of the WebSocket protocol is answered with a close frame (1007 or
    /// 1002, with a reason) before its error is returned.
    fn recv(&mut self) -> impl Future<Output = Option<Result<Incoming, TransportError>>> + Send;
    /// Queues a binary message (sent on [`Transport::flush`]).
    fn feed_binary(
        &mut self,
        bytes: Vec<u8>,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;
    /// Sends a text message now.
    fn send_text(
        &mut self,
        text: String,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;
    /// Sends what was queued.
    fn flush(&mut self) -> impl Future<Output = Result<(), TransportError>> + Send;
    /// Sends a close message (no flush of anything else).
    fn send_close(
        &mut self,
        code: u16,
        reason: String,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;
    /// Sends a ping (empty), with what was queued before it.
    fn send_ping(&mut self) -> impl Future<Output = Result<(), TransportError>> + Send;
}

/// The next message that is not a pong (the steps before a session, which send no ping,
/// pass over a peer's heartbeats).
pub(crate) async fn recv_data(
    transport: &mut impl Transport,
) -> Option<Result<Incoming, TransportError>> {
    loop {
        match transport.recv().await {
            Some(Ok(Incoming::Pong)) => {}
            other => return other,
        }
    }
}

/// Sends a close message with `reason` (cut to what the protocol allows), then reads until
/// the peer's close or `linger`, so that the peer reads our reason before the TCP connection
/// goes (closing with unread data would reset it).
pub(crate) async fn close(
    transport: &mut impl Transport,
    code: u16,
    reason: &str,
    linger: Duration,
) {
    let reason = close_reason(reason);
    // A peer that reads nothing must not hold the session (and its slot) past `linger`.
    if !matches!(
        tokio::time::timeout(linger, transport.send_close(code, reason)).await,
        Ok(Ok(()))
    ) {
        return;
    }
    let _ = tokio::time::timeout(linger, async {
        while let Some(Ok(message)) = transport.recv().await {
            if matches!(message, Incoming::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// `reason` cut at a character boundary to fit a close frame.
pub(crate) fn close_reason(reason: &str) -> String {
    if reason.len() <= MAX_CLOSE_REASON {
        return reason.to_owned();
    }
    let mut end = MAX_CLOSE_REASON - '…'.len_utf8();
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &reason[..end])
}

// ----- server side: axum ---------------------------------------------------------------------

impl Transport for WebSocket {
    async fn recv(&mut self) -> Option<Result<Incoming, TransportError>> {
        loop {
            let message = match self.next().await? {
                Ok(message) => message,
                Err(error) => {
                    return Some(Err(match server_violation(&error) {
                        Some(violation) => answer_violation(self, &violation).await,
                        None => server_error(error),
                    }))
                }
            };
            return Some(Ok(match message {
                ws::Message::Text(text) => Incoming::Text(text.as_str().to_owned()),
                ws::Message::Binary(bytes) => Incoming::Binary(bytes),
                ws::Message::Close(frame) => {
                    Incoming::Close(frame.map(|f| (f.code, f.reason.as_str().to_owned())))
                }
                ws::Message::Pong(_) => Incoming::Pong,
                ws::Message::Ping(_) => continue,
            }));
        }
    }

    async fn feed_binary(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.feed(ws::Message::Binary(bytes.into()))
            .await
            .map_err(server_error)
    }

    async fn send_text(&mut self, text: String) -> Result<(), TransportError> {
        self.send(ws::Message::Text(text.into()))
            .await
            .map_err(server_error)
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        SinkExt::flush(self).await.map_err(server_error)
    }

    async fn send_close(&mut self, code: u16, reason: String) -> Result<(), TransportError> {
        self.send(ws::Message::Close(Some(ws::CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await
        .map_err(server_error)
    }

    async fn send_ping(&mut self) -> Result<(), TransportError> {
        self.send(ws::Message::Ping(Bytes::new()))
            .await
            .map_err(server_error)
    }
}

/// The tungstenite error under axum's `error`, if there is one.
fn tungstenite_cause(error: &axum::Error) -> Option<&tungstenite::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(cause) = current.downcast_ref::<tungstenite::Error>() {
            return Some(cause);
        }
        source = current.source();
    }
    None
}

fn server_violation(error: &axum::Error) -> Option<Violation> {
    tungstenite_cause(error).and_then(Violation::of)
}

fn server_error(error: axum::Error) -> TransportError {
    // axum wraps tungstenite's error; find a capacity error in the chain.
    if let Some(tungstenite::Error::Capacity(capacity)) = tungstenite_cause(&error) {
        return capacity_error(capacity);
    }
    TransportError::Other(error.to_string())
}

// ----- client side: tokio-tungstenite --------------------------------------------------------

/// The client's WebSocket.
pub(crate) type ClientSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

impl Transport for ClientSocket {
    async fn recv(&mut self) -> Option<Result<Incoming, TransportError>> {
        loop {
            let message = match self.next().await? {
                Ok(message) => message,
                Err(error) => {
                    return Some(Err(match Violation::of(&error) {
                        Some(violation) => answer_violation(self, &violation).await,
                        None => client_error(error),
                    }))
                }
            };
            return Some(Ok(match message {
                tungstenite::Message::Text(text) => Incoming::Text(text.as_str().to_owned()),
                tungstenite::Message::Binary(bytes) => Incoming::Binary(bytes),
                tungstenite::Message::Close(frame) => Incoming::Close(
                    frame.map(|f| (u16::from(f.code), f.reason.as_str().to_owned())),
                ),
                tungstenite::Message::Pong(_) => Incoming::Pong,
                tungstenite::Message::Ping(_) | tungstenite::Message::Frame(_) => continue,
            }));
        }
    }

    async fn feed_binary(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.feed(tungstenite::Message::Binary(bytes.into()))
            .await
            .map_err(client_error)
    }

    async fn send_text(&mut self, text: String) -> Result<(), TransportError> {
        self.send(tungstenite::Message::Text(text.into()))
            .await
            .map_err(client_error)
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        SinkExt::flush(self).await.map_err(client_error)
    }

    async fn send_close(&mut self, code: u16, reason: String) -> Result<(), TransportError> {
        self.send(tungstenite::Message::Close(Some(
            tungstenite::protocol::CloseFrame {
                code: CloseCode::from(code),
                reason: reason.into(),
            },
        )))
        .await
        .map_err(client_error)
    }

    async fn send_ping(&mut self) -> Result<(), TransportError> {
        self.send(tungstenite::Message::Ping(Bytes::new()))
            .await
            .map_err(client_error)
    }
}

fn client_error(error: tungstenite::Error) -> TransportError {
    match &error {
        tungstenite::Error::Capacity(capacity) => capacity_error(capacity),
        _ => TransportError::Other(error.to_string()),
    }
}

fn capacity_error(error: &tungstenite::error::CapacityError) -> TransportError {
    match error {
        tungstenite::error::CapacityError::MessageTooLong { max_size, .. } => {
            TransportError::TooLarge { limit: *max_size }
        }
        other => TransportError::Other(other.to_string()),
    }
}

/// How much one read from the socket takes in. tungstenite zero-fills this much of its
/// buffer before every read (its default, 128 KiB, cost more than the rest of the read for
/// our small frames); larger messages are read in several reads of this size. Each
/// WebSocket holds it for its whole life, so it is most of what an idle session costs:
/// 4 KiB keeps 10,000 idle sessions near 20 KB each (`benches/sessions.rs`).
pub(crate) const READ_BUFFER_SIZE: usize = 4 * 1024;

/// The WebSocket settings both sides use: messages and frames up to `max_frame_size`.
pub(crate) fn websocket_config(max_frame_size: usize) -> tungstenite::protocol::WebSocketConfig {
    tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(max_frame_size))
        .max_frame_size(Some(max_frame_size))
        .read_buffer_size(READ_BUFFER_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_close_frame_at_a_character_boundary() {
        assert_eq!(close_reason("short"), "short");
        let long = "é".repeat(100);
        let cut = close_reason(&long);
        assert!(cut.len() <= MAX_CLOSE_REASON, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }
}
