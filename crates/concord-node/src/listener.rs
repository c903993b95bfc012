//! The server's listener: plain TCP, or TLS with each handshake in a task of its own, so a
//! slow or silent client never holds up the connections behind it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tokio_util::task::AbortOnDropHandle;

/// An accepted connection: plain, or TLS after its handshake.
pub(crate) type Stream = Either<TcpStream, TlsStream<TcpStream>>;

/// What `axum::serve` accepts connections from.
pub(crate) struct NodeListener {
    local_addr: SocketAddr,
    kind: Kind,
}

enum Kind {
    Plain(TcpListener),
    Tls {
        /// Connections whose handshake completed, in the order they completed.
        handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
        /// Accepts and shakes hands; stopped when the listener is dropped.
        _accepting: AbortOnDropHandle<()>,
    },
}

impl NodeListener {
    /// Plain TCP.
    pub(crate) fn plain(tcp: TcpListener) -> io::Result<Self> {
        Ok(Self {
            local_addr: tcp.local_addr()?,
            kind: Kind::Plain(tcp),
        })
    }

    /// TLS with `config`: at most `max_handshakes` handshakes at a time, each given
    /// `handshake_timeout`; a failed handshake is logged and dropped.
    pub(crate) fn tls(
        tcp: TcpListener,
        config: Arc<ServerConfig>,
        handshake_timeout: Duration,
        max_handshakes: usize,
    ) -> io::Result<Self> {
        let local_addr = tcp.local_addr()?;
        let (done, handshaken) = mpsc::channel(max_handshakes.max(1));
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(Semaphore::new(max_handshakes.max(1)));
        let mut tcp = tcp;
        let accepting = tokio::spawn(async move {
            loop {
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                let (stream, remote) = accept(&mut tcp).await;
                let (acceptor, done) = (acceptor.clone(), done.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            drop(slot);
                            let _ = done.send((stream, remote)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%remote, %error, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self {
            local_addr,
            kind: Kind::Tls {
                handshaken,
                _accepting: AbortOnDropHandle::new(accepting),
            },
        })
    }
}

/// The next TCP connection (axum's accept: errors logged, retried with a back-off), with
/// `TCP_NODELAY`: frames are written whole, and without it a response could wait for the
/// peer's delayed ACK of the previous one.
async fn accept(tcp: &mut TcpListener) -> (TcpStream, SocketAddr) {
    let (stream, remote) = axum::serve::Listener::accept(tcp).await;
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    (stream, remote)
}

impl axum::serve::Listener for NodeListener {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Stream, SocketAddr) {
        match &mut self.kind {
            Kind::Plain(tcp) => {
                let (stream, remote) = accept(tcp).await;
                (Either::Left(stream), remote)
            }
            Kind::Tls { handshaken, .. } => match handshaken.recv().await {
                Some((stream, remote)) => (Either::Right(stream), remote),
                // The accepting task ended: nothing more will come.
                None => std::future::pending().await,
            },
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local_addr)
    }
}
