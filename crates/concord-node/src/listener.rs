//! The server's listener: TCP connections, and for a node that serves TLS itself, the
//! handshake each one makes. The handshake runs in the connection's own task, after the
//! connection was admitted (`admission`), so a slow or silent client never holds up the
//! connections behind it and counts against the limits while it shakes hands.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;

/// An accepted connection: plain, or TLS after its handshake.
pub(crate) type Stream = Either<TcpStream, TlsStream<TcpStream>>;

/// What the server's accept loop takes connections from.
pub(crate) struct NodeListener {
    tcp: TcpListener,
    local_addr: SocketAddr,
    tls: Option<Handshake>,
}

/// A TLS server handshake with its time limit.
#[derive(Clone)]
pub(crate) struct Handshake {
    acceptor: TlsAcceptor,
    timeout: Duration,
}

impl NodeListener {
    /// Plain TCP.
    pub(crate) fn plain(tcp: TcpListener) -> io::Result<Self> {
        Ok(Self {
            local_addr: tcp.local_addr()?,
            tcp,
            tls: None,
        })
    }

    /// TLS with `config`, each handshake given `handshake_timeout`.
    pub(crate) fn tls(
        tcp: TcpListener,
        config: Arc<ServerConfig>,
        handshake_timeout: Duration,
    ) -> io::Result<Self> {
        Ok(Self {
            local_addr: tcp.local_addr()?,
            tcp,
            tls: Some(Handshake {
                acceptor: TlsAcceptor::from(config),
                timeout: handshake_timeout,
            }),
        })
    }

    /// The next TCP connection (axum's accept: errors logged, retried with a back-off), with
    /// `TCP_NODELAY`: frames are written whole, and without it a response could wait for
    /// the peer's delayed ACK of the previous one.
    pub(crate) async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        let (stream, remote) = axum::serve::Listener::accept(&mut self.tcp).await;
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        (stream, remote)
    }

    /// The TLS handshake connections need, if the node serves TLS itself.
    pub(crate) fn handshake(&self) -> Option<Handshake> {
        self.tls.clone()
    }

    /// The address it listens on.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

/// `tcp` ready to speak HTTP: as it is, or after the TLS handshake `tls` (`None` when the
/// handshake failed or timed out, which is logged).
pub(crate) async fn secure(
    tls: Option<&Handshake>,
    tcp: TcpStream,
    remote: SocketAddr,
) -> Option<Stream> {
    let Some(tls) = tls else {
        return Some(Either::Left(tcp));
    };
    match tokio::time::timeout(tls.timeout, tls.acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Some(Either::Right(stream)),
        Ok(Err(error)) => {
            tracing::debug!(%remote, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%remote, "TLS handshake timed out");
            None
        }
    }
}
