//! Many connections opened, or closed, a few dozen at a time.

use std::future::Future;

use concord_node::Connection;
use futures_util::{stream, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Connections opened (or closed) at once.
pub const AT_ONCE: usize = 64;

/// A raw WebSocket, as the client side holds it.
pub type WebSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What `open(i)` gives for each `i` in `0..count`, [`AT_ONCE`] running at a time: all of
/// it, or (once every one has ended) the first error.
pub async fn all<T, E, F, Fut>(count: usize, open: F) -> Result<Vec<T>, E>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let opened: Vec<Result<T, E>> = stream::iter(0..count)
        .map(open)
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    opened.into_iter().collect()
}

/// `count` raw WebSockets to `url`.
pub async fn websockets(
    url: &str,
    count: usize,
) -> Result<Vec<WebSocket>, tokio_tungstenite::tungstenite::Error> {
    all(count, |_| async move {
        let (socket, _) = tokio_tungstenite::connect_async(url).await?;
        Ok(socket)
    })
    .await
}

/// Closes every connection, [`AT_ONCE`] at a time.
pub async fn close_all(connections: Vec<Connection>) {
    stream::iter(connections)
        .for_each_concurrent(AT_ONCE, |connection| async move {
            connection.close().await;
        })
        .await;
}
