//! The server's accept loop: each connection is admitted (or refused with a typed HTTP
//! answer), then, in a task of its own, shakes hands if the node serves TLS and is served
//! by hyper's HTTP/1 server with a header-read timeout and upgrades.
//!
//! hyper starts the header-read timer when it first waits for a request head, which is at
//! once on a new connection and again after each response on a kept-alive one: a
//! connection that never sends a byte, one idle between requests and one that dribbles
//! its request head are all closed when it runs out. An upgraded connection leaves hyper
//! and is the session's to bound (hello timeout, negotiation and idle timeouts).

use std::convert::Infallible;
use std::future::Ready;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use axum::Router;
use futures_util::future::Either;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::admission::{Admission, ClientKey, ConnectionGuard, Refusal, RefusalLog};
use crate::listener::{self, Handshake, NodeListener};

/// Refused connections answered at once at most; beyond it one is closed unanswered (a
/// flood must not cost more descriptors than this).
const MAX_REFUSALS_AT_ONCE: usize = 64;
/// How long a refused connection has to send its request and read the answer.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// An admitted connection, in every request's extensions: held by the connection while it
/// speaks HTTP and by the session it upgrades to, so that it counts until both are gone.
#[derive(Debug, Clone)]
pub(crate) struct Ticket(Arc<ConnectionGuard>);

impl Ticket {
    /// The client address the connection counts against.
    pub(crate) fn key(&self) -> ClientKey {
        self.0.key()
    }
}

/// What the accept loop needs.
pub(crate) struct Accepting {
    pub(crate) listener: NodeListener,
    pub(crate) app: Router,
    pub(crate) admission: Arc<Admission>,
    pub(crate) log: Arc<RefusalLog>,
    pub(crate) header_timeout: Duration,
    /// Set when the server stops taking connections.
    pub(crate) stop: watch::Receiver<bool>,
    /// Set when the shutdown's grace is over: the connections still open are closed.
    pub(crate) close: watch::Receiver<bool>,
}

impl Accepting {
    /// Accepts until `stop`, then lets the HTTP connections finish what they are doing
    /// (each is told to close after its response in progress) until `close`, which closes
    /// those still open, and returns.
    pub(crate) async fn run(mut self) {
        let connections = TaskTracker::new();
        let refusing = Arc::new(Semaphore::new(MAX_REFUSALS_AT_ONCE));
        let mut stop = self.stop.clone();
        let tls = self.listener.handshake();
        loop {
            let (tcp, remote) = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = until_stop(&mut stop) => break,
            };
            match self.admission.connect(remote) {
                Ok(guard) => {
                    let (tls, stop) = (tls.clone(), self.stop.clone());
                    let close = self.close.clone();
                    let header_timeout = self.header_timeout;
                    let service = PerConnection {
                        app: self.app.clone(),
                        remote,
                        ticket: Ticket(Arc::new(guard)),
                        admission: Arc::clone(&self.admission),
                        log: Arc::clone(&self.log),
                    };
                    connections.spawn(async move {
                        let mut stopping = stop.clone();
                        // A handshake in progress when the server stops is dropped.
                        let stream = tokio::select! {
                            stream = listener::secure(tls.as_ref(), tcp, remote) => stream,
                            () = until_stop(&mut stopping) => None,
                        };
                        if let Some(stream) = stream {
                            serve(stream, service, header_timeout, (stop, close)).await;
                        }
                    });
                }
                Err(refusal) => {
                    self.log
                        .refused(refusal.name(), remote, &refusal.to_string());
                    // Over the budget of answers, the connection is closed unanswered.
                    if let Ok(slot) = Arc::clone(&refusing).try_acquire_owned() {
                        connections.spawn(refuse(tls.clone(), tcp, remote, refusal, slot));
                    }
                }
            }
        }
        drop(self.listener);
        connections.close();
        connections.wait().await;
    }
}

/// Serves one admitted connection until it closes or upgrades; on `stop`, it closes once
/// its response in progress is written; on `close` (the shutdown's grace is over), at
/// once, whatever it is doing.
async fn serve(
    stream: listener::Stream,
    service: PerConnection,
    header_timeout: Duration,
    (mut stop, mut close): (watch::Receiver<bool>, watch::Receiver<bool>),
) {
    let remote = service.remote;
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = until_stop(&mut stop) => {
            connection.as_mut().graceful_shutdown();
            tokio::select! {
                result = connection.as_mut() => result,
                () = until_stop(&mut close) => {
                    tracing::debug!(%remote, "HTTP connection closed: the shutdown's grace is over");
                    return;
                }
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%remote, %error, "HTTP connection ended");
    }
}

/// Resolves once `stop` is set (or its sender is gone).
pub(crate) async fn until_stop(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Answers a refused connection's request with the refusal (after the TLS handshake if
/// the node serves TLS), then closes it; all within 2 s.
async fn refuse(
    tls: Option<Handshake>,
    tcp: tokio::net::TcpStream,
    remote: SocketAddr,
    refusal: Refusal,
    _slot: OwnedSemaphorePermit,
) {
    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, async move {
        if let Some(stream) = listener::secure(tls.as_ref(), tcp, remote).await {
            answer_refusal(stream, refusal).await;
        }
    })
    .await;
}

async fn answer_refusal(stream: listener::Stream, refusal: Refusal) {
    let response = Arc::new(refusal);
    let service = hyper::service::service_fn(move |_request: hyper::Request<Incoming>| {
        let refusal = Arc::clone(&response);
        async move { Ok::<_, Infallible>(refusal_response(&refusal)) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(REFUSAL_TIMEOUT)
        .keep_alive(false);
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// A refusal as HTTP: 429 or 503, `Retry-After`, and one line saying which limit.
pub(crate) fn refusal_response(refusal: &Refusal) -> Response {
    let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    (
        status,
        [
            (header::RETRY_AFTER, refusal.retry_after().to_string()),
            (header::CONNECTION, "close".to_owned()),
        ],
        format!("{refusal}\n"),
    )
        .into_response()
}

/// The router for one connection: every request, on whatever route, first spends one of
/// its address's request budget (over it, the refusal is the answer and the connection
/// closes after it), then reaches the router carrying the peer's address
/// (`ConnectInfo<SocketAddr>`) and the connection's [`Ticket`].
#[derive(Clone)]
struct PerConnection {
    app: Router,
    remote: SocketAddr,
    ticket: Ticket,
    admission: Arc<Admission>,
    log: Arc<RefusalLog>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for PerConnection {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, RouteFuture<Infallible>>;

    fn call(&self, mut request: hyper::Request<Incoming>) -> Self::Future {
        if let Err(refusal) = self.admission.request(self.ticket.key()) {
            self.log
                .refused(refusal.name(), self.remote, &refusal.to_string());
            return Either::Left(std::future::ready(Ok(refusal_response(&refusal))));
        }
        request.extensions_mut().insert(ConnectInfo(self.remote));
        request.extensions_mut().insert(self.ticket.clone());
        Either::Right(tower_service::Service::call(&mut self.app.clone(), request))
    }
}
