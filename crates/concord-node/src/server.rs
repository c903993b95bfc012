//! The provider's HTTP side: the description, the WebSocket endpoint, the session limit,
//! and the hello that starts each session.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::{Listener, ListenerExt};
use axum::Router;
use concord_proto::handshake::{self, LocalOffer, ProtocolChoice};
use concord_proto::{HelloKind, Role, Session};
use concord_store::Direction;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::code::{self, LocalSide};
use crate::describe::{self, Description, DESCRIPTION_PATH, ENDPOINT_PATH, TD_MEDIA_TYPE};
use crate::driver::{Driver, Settled, Settlement, Start, CLOSE_LINGER};
use crate::error::NodeError;
use crate::hello;
use crate::listener::NodeListener;
use crate::node::Shared;
use crate::storage::Recorder;
use crate::transport::{self, Transport};

/// How long [`Server::shutdown`] waits for sessions to close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running provider: the description at `GET /.well-known/wot` and the meta-protocol
/// WebSocket at `/concord`. Dropping it stops the server (sessions are closed with code
/// 1001); [`Server::shutdown`] also waits for them.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    base_url: String,
    stop: watch::Sender<bool>,
    sessions: Arc<Semaphore>,
    max_sessions: usize,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The base URL peers connect to: the public URL when the node has one
    /// ([`NodeBuilder::public_url`](crate::NodeBuilder::public_url)), else
    /// `http://host:port/` (`https://` with a certificate).
    pub fn url(&self) -> &str {
        &self.base_url
    }

    /// The description's URL.
    pub fn description_url(&self) -> String {
        format!(
            "{}{}",
            self.base_url.trim_end_matches('/'),
            DESCRIPTION_PATH
        )
    }

    /// The meta-protocol WebSocket's URL.
    pub fn endpoint(&self) -> String {
        describe::websocket_url(&self.base_url)
    }

    /// Sessions running now.
    pub fn sessions(&self) -> usize {
        self.max_sessions - self.sessions.available_permits()
    }

    /// Stops accepting connections, closes every session (code 1001, "the node is shutting
    /// down") and waits up to 5 s for them to end.
    ///
    /// # Errors
    /// [`NodeError::Internal`] when the server task failed.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        self.stop.send_replace(true);
        let result = match self.task.take() {
            Some(task) => match task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(NodeError::Internal(format!("server: {error}"))),
                Err(error) => Err(NodeError::Internal(format!("server task: {error}"))),
            },
            None => Ok(()),
        };
        let all = u32::try_from(self.max_sessions).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.sessions.acquire_many(all)).await;
        result
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

struct ServerState {
    shared: Arc<Shared>,
    description: Description,
    sessions: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
}

pub(crate) async fn serve(shared: Arc<Shared>, addr: &str) -> Result<Server, NodeError> {
    if shared.actions.specs().is_empty() {
        tracing::warn!("serving a node with no actions: peers can connect but call nothing");
    }
    let bind_error = |cause| NodeError::Bind {
        addr: addr.to_owned(),
        cause,
    };
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(bind_error)?;
    let listener = match &shared.tls_server {
        Some(config) => NodeListener::tls(
            tcp,
            Arc::clone(config),
            shared.limits.hello_timeout,
            shared.limits.max_sessions,
        ),
        None => NodeListener::plain(tcp),
    }
    .map_err(bind_error)?;
    let local_addr = Listener::local_addr(&listener).map_err(bind_error)?;
    // `tap_io` only for axum's `ConnectInfo<SocketAddr>`, which it provides for any
    // listener it wraps.
    let listener = listener.tap_io(|_| {});
    let scheme = if shared.tls_server.is_some() {
        "https"
    } else {
        "http"
    };
    let base_url = match &shared.public_url {
        Some(url) => url.clone(),
        None => format!("{scheme}://{local_addr}/"),
    };
    let max_sessions = shared.limits.max_sessions;
    let sessions = Arc::new(Semaphore::new(max_sessions));
    let (stop, stopped) = watch::channel(false);
    let state = Arc::new(ServerState {
        shared,
        description: Description::new(base_url.clone()),
        sessions: Arc::clone(&sessions),
        stop: stopped.clone(),
    });
    let app = Router::new()
        .route(DESCRIPTION_PATH, get(serve_description))
        .route(ENDPOINT_PATH, get(accept_session))
        .with_state(state);
    let mut until = stopped;
    let task = tokio::spawn(
        async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(async move {
                let _ = until.wait_for(|stop| *stop).await;
            })
            .await
        }
        .instrument(tracing::info_span!("server", addr = %local_addr)),
    );
    tracing::info!(%base_url, "serving");
    Ok(Server {
        local_addr,
        base_url,
        stop,
        sessions,
        max_sessions,
        task: Some(task),
    })
}

async fn serve_description(State(state): State<Arc<ServerState>>) -> Response {
    match state.description.bytes(&state.shared).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, TD_MEDIA_TYPE)], bytes).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot build our description");
            (StatusCode::INTERNAL_SERVER_ERROR, error).into_response()
        }
    }
}

async fn accept_session(
    State(state): State<Arc<ServerState>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    upgrade: WebSocketUpgrade,
) -> Response {
    if *state.stop.borrow() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the node is shutting down").into_response();
    }
    let Ok(permit) = Arc::clone(&state.sessions).try_acquire_owned() else {
        let limit = state.shared.limits.max_sessions;
        tracing::warn!(%remote, limit, "session limit reached; refusing a connection");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            format!("this node serves at most {limit} sessions at once; try again later"),
        )
            .into_response();
    };
    let limit = state.shared.limits.max_frame_size;
    upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .read_buffer_size(transport::READ_BUFFER_SIZE)
        .on_upgrade(move |socket| {
            run_session(socket, state, remote, permit)
                .instrument(tracing::info_span!("connection", %remote))
        })
}

/// One provider session: the hello, then the driver, holding a session permit throughout.
async fn run_session(
    mut socket: WebSocket,
    state: Arc<ServerState>,
    remote: SocketAddr,
    _permit: OwnedSemaphorePermit,
) {
    let shared = Arc::clone(&state.shared);
    let limits = &shared.limits;
    let (source, source_text) =
        match hello::read(&mut socket, HelloKind::Source, limits.hello_timeout).await {
            Ok(hello) => hello,
            Err(failure) => {
                tracing::info!(%failure, "no session: bad or missing sourceHello");
                if let Some((code, reason)) = failure.close_frame() {
                    transport::close(&mut socket, code, &reason, CLOSE_LINGER).await;
                }
                return;
            }
        };
    let peer = peer_label(&source, remote);
    let offer = LocalOffer::new(shared.capabilities);
    let message_id = hello::random_id();
    let answer = {
        let source = source.clone();
        shared
            .store
            .run(move |store| {
                let view = store.for_role(Role::Provider);
                let answer = handshake::answer_source_hello(&offer, &source, &view, &message_id);
                for error in view.take_errors() {
                    tracing::warn!(%error, "a stored protocol cannot be used");
                }
                let (destination, agreement) = match answer {
                    Ok(answer) => answer,
                    Err(error) => return Ok(Err(error)),
                };
                let stored = match &agreement.protocol {
                    ProtocolChoice::Negotiate => None,
                    ProtocolChoice::Resume(hash) => store.protocol(hash)?.and_then(|protocol| {
                        Some(Stored {
                            handler: protocol.handlers.get(Role::Provider)?.to_owned(),
                            settled: Settled {
                                hash: protocol.hash,
                                document: protocol.document,
                                how: Settlement::Resumed,
                            },
                            test_cases: protocol.test_cases,
                        })
                    }),
                    ProtocolChoice::Consensus(uri) => store.consensus(uri)?.and_then(|entry| {
                        Some(Stored {
                            handler: entry.handlers.get(Role::Provider)?.to_owned(),
                            settled: Settled {
                                hash: entry.hash,
                                document: entry.document,
                                how: Settlement::Consensus { uri: uri.clone() },
                            },
                            test_cases: None,
                        })
                    }),
                };
                Ok(Ok((destination, agreement, stored)))
            })
            .await
    };
    let (mut destination, mut agreement, stored) = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            tracing::info!(%error, "no session: the hello exchange cannot conclude");
            let reason = format!("handshake: {error}");
            transport::close(
                &mut socket,
                transport::close_code::PROTOCOL_ERROR,
                &reason,
                CLOSE_LINGER,
            )
            .await;
            return;
        }
        Err(error) => {
            tracing::error!(%error, "no session: the store failed");
            let reason = "the node's store failed; try again later";
            transport::close(
                &mut socket,
                transport::close_code::INTERNAL,
                reason,
                CLOSE_LINGER,
            )
            .await;
            return;
        }
    };
    // A protocol the store vouched for still has to load; if it does not, negotiate.
    let mut settled = None;
    if agreement.protocol != ProtocolChoice::Negotiate {
        let loaded = stored
            .ok_or_else(|| "the stored protocol vanished".to_owned())
            .and_then(|stored| {
                let code = code::load(
                    &shared,
                    &stored.settled.document,
                    &stored.handler,
                    &LocalSide::Provider,
                )?;
                Ok((stored, code))
            });
        match loaded {
            Ok((stored, code)) => settled = Some((stored.settled, code, stored.test_cases)),
            Err(error) => {
                tracing::warn!(%error, "cannot use the stored protocol; negotiating instead");
                destination.meta_protocol.used_protocol_hash = None;
                destination.meta_protocol.selected_protocol = None;
                agreement.protocol = ProtocolChoice::Negotiate;
            }
        }
    }
    match &agreement.protocol {
        ProtocolChoice::Negotiate => match source.meta_protocol.used_protocol_hash {
            Some(hash) => {
                tracing::info!(%hash, "0-RTT miss: we do not hold this protocol; negotiating")
            }
            None => tracing::info!("negotiating a protocol"),
        },
        ProtocolChoice::Resume(hash) => tracing::info!(%hash, "0-RTT: resuming a stored protocol"),
        ProtocolChoice::Consensus(uri) => tracing::info!(%uri, "consensus protocol selected"),
    }
    let recorder = Recorder::start(&shared.store, &peer, Role::Provider).await;
    recorder.hello(Direction::Received, &source_text);
    let destination_text = destination.encode();
    recorder.hello(Direction::Sent, &destination_text);
    if let Err(error) = socket.send_text(destination_text).await {
        tracing::info!(%error, "the peer left during the hello");
        recorder
            .finish(concord_store::Outcome::Failed(format!(
                "the peer left during the hello: {error}"
            )))
            .await;
        return;
    }
    let session = Session::new(
        Role::Provider,
        &agreement,
        shared.session_config(),
        Instant::now(),
    );
    Driver::new(Start {
        transport: socket,
        session,
        shared: Arc::clone(&shared),
        peer,
        recorder,
        settled,
        shutdown: Some(state.stop.clone()),
        requester: None,
    })
    .run()
    .await;
}

/// A protocol the store holds, as read for a session.
struct Stored {
    settled: Settled,
    handler: String,
    test_cases: Option<String>,
}

/// Who the peer is, for the store and transcripts: its DID when its hello names one, else
/// its address.
fn peer_label(source: &concord_proto::Hello, remote: SocketAddr) -> String {
    ["sourceDid", "sourceDID", "did"]
        .iter()
        .find_map(|key| source.extra.get(*key).and_then(serde_json::Value::as_str))
        .filter(|did| !did.is_empty() && did.len() <= 256)
        .map_or_else(|| format!("ws://{remote}"), str::to_owned)
}
