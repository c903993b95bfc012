//! The provider's HTTP server: binds, admits connections (`admission/`), and serves the
//! node's own routes (the description, the DID document) beside every binding's routes
//! (`binding/`: the meta-protocol WebSocket, the event ingest, those the builder added).
//! [`Server`] counts what runs and drains it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use concord_identity::Identity;
use tokio::sync::{watch, Semaphore};
use tracing::Instrument;

use crate::admission::accept::Accepting;
use crate::admission::{Admission, RefusalLog};
use crate::binding::websocket::{self, MetaProtocol, ServerState};
use crate::binding::{self, Bindings, Site};
use crate::describe::{Description, DescriptionHandle, DESCRIPTION_PATH, TD_MEDIA_TYPE};
use crate::directory_client::registrar::Registrar;
use crate::directory_client::RegistrationStatus;
use crate::error::NodeError;
use crate::identity::upgrade;
use crate::listener::NodeListener;
use crate::mdns::{Announced, Announcement};
use crate::node::Shared;
use crate::resume_cache::{ResumeCache, RESUME_CACHE_CAPACITY};
use crate::shed::IdleSessions;

/// How long [`Server::shutdown`] lets calls already running finish.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long a shutdown waits for sessions to end once they were told to close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A running provider: the description at `GET /.well-known/wot`, the meta-protocol
/// WebSocket at `/concord` and every other binding's routes. Dropping it stops the server (sessions are closed with code
/// 1001 at once); [`Server::shutdown`] drains it: calls already running are answered first.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    base_url: String,
    /// Set when the server stops taking connections and calls (the drain starts).
    stop: watch::Sender<bool>,
    /// Set when every session must close now, calls running or not (the grace is over).
    close: watch::Sender<bool>,
    sessions: Arc<Semaphore>,
    max_sessions: usize,
    admission: Arc<Admission>,
    did: Option<Arc<Identity>>,
    /// The DNS-SD announcement, when the node makes one: withdrawn when dropped.
    announced: Option<Announced>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The node's directory registrations, when it registers with any.
    registrar: Option<Registrar>,
}

impl Server {
    /// The node's DID (`did:wba:…`), when it has an identity: its document is served at the
    /// path the DID names (`/agents/e1_…/did.json`).
    pub fn did(&self) -> Option<&str> {
        self.did.as_ref().map(|identity| identity.did().as_str())
    }

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
        websocket::websocket_url(&self.base_url)
    }

    /// Established sessions running now: those whose hello was answered, counted against
    /// [`Limits::max_sessions`](crate::Limits::max_sessions). WebSockets still waiting
    /// for their hello are [`Server::pending`].
    pub fn sessions(&self) -> usize {
        self.max_sessions - self.sessions.available_permits()
    }

    /// WebSockets upgraded and still waiting for their hello now, counted against
    /// [`Limits::max_pending_hellos`](crate::Limits::max_pending_hellos).
    pub fn pending(&self) -> usize {
        self.admission.pending()
    }

    /// TCP connections held now, in any state, counted against
    /// [`Limits::max_connections`](crate::Limits::max_connections).
    pub fn connections(&self) -> usize {
        self.admission.connections()
    }

    /// Where each of the node's directory registrations stands
    /// ([`NodeBuilder::register_with`](crate::NodeBuilder::register_with)), in the order the
    /// directories were given; empty when it registers with none.
    pub fn registrations(&self) -> Vec<RegistrationStatus> {
        self.registrar
            .as_ref()
            .map(Registrar::statuses)
            .unwrap_or_default()
    }

    /// Drains the server, letting calls already running finish for up to 10 s: see
    /// [`Server::shutdown_within`].
    ///
    /// # Errors
    /// [`NodeError::Internal`] when the server task panicked.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        self.shutdown_within(DEFAULT_SHUTDOWN_GRACE).await
    }

    /// Drains the server, then stops it:
    ///
    /// 1. it deletes its entries from the directories it registered with (each within
    ///    `Limits::directory_client.timeout`), so that requesters stop finding it;
    /// 2. it stops accepting connections (a WebSocket upgrade gets 503 "the node is
    ///    shutting down", a WebSocket still waiting for its hello is closed with code 1001)
    ///    and calls: a request that arrives now is not taken, and its caller learns the
    ///    session closed;
    /// 3. each session whose calls have all been answered closes at once, with code 1001
    ///    and the reason "the node is shutting down"; the others close the same way as soon
    ///    as their last call running is answered;
    /// 4. when `grace` has passed, the sessions still open close anyway (their calls get no
    ///    answer), so do the HTTP connections still open (an exchange in progress, a
    ///    client not reading its answer: cut off), and the server waits up to 5 s more for
    ///    them to end.
    ///
    /// A zero `grace` closes every session at once. A request the provider could not read
    /// well enough to answer (no message id) holds its session open until `grace` ends.
    ///
    /// ```no_run
    /// # async fn run(server: concord_node::Server) -> Result<(), concord_node::NodeError> {
    /// server.shutdown_within(std::time::Duration::from_secs(3)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`NodeError::Internal`] when the server task panicked.
    pub async fn shutdown_within(mut self, grace: Duration) -> Result<(), NodeError> {
        if let Some(registrar) = self.registrar.take() {
            registrar.deregister().await;
        }
        let deadline = tokio::time::Instant::now() + grace;
        let open = self.sessions();
        tracing::info!(sessions = open, grace = ?grace, "draining: no new connections or calls");
        self.stop.send_replace(true);
        // Withdrawn first: nobody on the local network is sent to a node that drains.
        self.announced.take();
        let mut result = Ok(());
        if let Some(mut task) = self.task.take() {
            let stopped = match tokio::time::timeout_at(deadline, &mut task).await {
                Ok(stopped) => Some(stopped),
                Err(_) => {
                    self.close.send_replace(true);
                    let stopped = tokio::time::timeout(CLOSE_WAIT, &mut task).await.ok();
                    if stopped.is_none() {
                        // Nothing outlives `shutdown`: the accept loop is stopped here.
                        task.abort();
                    }
                    stopped
                }
            };
            result = match stopped {
                Some(Ok(())) | None => Ok(()),
                Some(Err(error)) => Err(NodeError::Internal(format!("server task: {error}"))),
            };
        }
        let all = u32::try_from(self.max_sessions).unwrap_or(u32::MAX);
        let drained = tokio::time::timeout_at(deadline, self.sessions.acquire_many(all))
            .await
            .is_ok();
        self.close.send_replace(true);
        if !drained {
            tracing::warn!(
                sessions = self.sessions(),
                "calls still running after the shutdown grace; closing their sessions"
            );
            let _ = tokio::time::timeout(CLOSE_WAIT, self.sessions.acquire_many(all)).await;
        }
        result
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.close.send_replace(true);
    }
}

/// What the node's own routes serve from: the node and its description.
struct Own {
    shared: Arc<Shared>,
    description: Arc<Description>,
}

pub(crate) async fn serve(shared: Arc<Shared>, addr: &str) -> Result<Server, NodeError> {
    if shared.actions.specs().is_empty() && shared.directory.is_none() {
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
        Some(config) => NodeListener::tls(tcp, Arc::clone(config), shared.limits.hello_timeout),
        None => NodeListener::plain(tcp),
    }
    .map_err(bind_error)?;
    let local_addr = listener.local_addr();
    let scheme = if shared.tls_server.is_some() {
        "https"
    } else {
        "http"
    };
    let base_url = match &shared.public_url {
        Some(url) => url.clone(),
        None => format!("{scheme}://{local_addr}/"),
    };
    let did = shared
        .identity
        .settle_did(&base_url, shared.kind())
        .map_err(NodeError::Config)?;
    let max_sessions = shared.limits.max_sessions;
    let sessions = Arc::new(Semaphore::new(max_sessions));
    let admission = Admission::new(&shared.limits);
    let log = Arc::new(RefusalLog::default());
    let header_timeout = shared.limits.http_header_timeout;
    let (stop, stopped) = watch::channel(false);
    let (close, closing) = watch::channel(false);
    let idle = IdleSessions::new(&shared.limits);
    let websocket = MetaProtocol::new(ServerState {
        shared: Arc::clone(&shared),
        sessions: Arc::clone(&sessions),
        admission: Arc::clone(&admission),
        log: Arc::clone(&log),
        idle: Arc::clone(&idle),
        stop: stopped.clone(),
        close: closing.clone(),
        endpoint: upgrade::Endpoint::of(&base_url),
        did: did.clone(),
        resumes: std::sync::Mutex::new(ResumeCache::new(
            shared.limits.resume_cache_ttl,
            RESUME_CACHE_CAPACITY,
        )),
    });
    let described = DescriptionHandle::default();
    let bindings = binding::served(&shared, websocket, &described);
    let thing = Arc::new(binding::NodeThing::new(Arc::clone(&shared), idle));
    let site = Site::new(base_url.clone(), stopped.clone(), thing);
    binding::check_schemes(&shared, &site, &bindings)?;
    let own = own_routes(&shared, &did, &site, &bindings, &described);
    let registered = Description::new(site.clone(), Arc::clone(&bindings));
    let app = binding::merge_routes(own, &bindings, &site)?;
    tokio::spawn(Arc::clone(&shared.affordances).run_timers(stopped.clone()));
    let accepting = Accepting {
        listener,
        app,
        admission: Arc::clone(&admission),
        log,
        header_timeout,
        stop: stopped,
        close: closing,
    };
    let task = tokio::spawn(
        accepting
            .run()
            .instrument(tracing::info_span!("server", addr = %local_addr)),
    );
    tracing::info!(%base_url, "serving");
    let announced = shared
        .mdns
        .then(|| announce(&shared, &base_url, local_addr))
        .flatten();
    let registrar = Registrar::start(&shared, registered);
    Ok(Server {
        local_addr,
        base_url,
        stop,
        close,
        sessions,
        max_sessions,
        admission,
        did,
        announced,
        task: Some(task),
        registrar,
    })
}

/// Starts the node's DNS-SD announcement; a failure (no multicast socket) is logged and
/// the node serves anyway: it is still reachable by its URL.
fn announce(shared: &Shared, base_url: &str, local_addr: SocketAddr) -> Option<Announced> {
    let announcement =
        Announcement::new(shared.kind(), &shared.persona.title, base_url, local_addr);
    match Announced::start(&announcement) {
        Ok(announced) => {
            tracing::info!(instance = %announcement.instance, service = %announcement.service_type, "announced with DNS-SD");
            Some(announced)
        }
        Err(error) => {
            tracing::warn!(%error, "cannot announce the node with DNS-SD; serving without it");
            None
        }
    }
}

/// The node's own routes: its description, listing every binding's forms (and handed to
/// the bindings that derive documents from it, through `described`), and its DID
/// document when it has a DID.
fn own_routes(
    shared: &Arc<Shared>,
    did: &Option<Arc<Identity>>,
    site: &Site,
    bindings: &Bindings,
    described: &DescriptionHandle,
) -> Router {
    let description = Arc::new(Description::new(site.clone(), Arc::clone(bindings)));
    described.set(&description);
    let own = Arc::new(Own {
        shared: Arc::clone(shared),
        description,
    });
    let mut routes = Router::new().route(DESCRIPTION_PATH, get(serve_description));
    if let Some(identity) = did {
        routes = routes.route(&identity.did().document_path(), get(serve_did_document));
        tracing::info!(did = %identity.did(), "our DID");
    }
    routes.with_state(own)
}

/// Our DID document (`application/did+json`).
async fn serve_did_document(State(own): State<Arc<Own>>) -> Response {
    match own.shared.identity.own_document() {
        Some(bytes) => (
            [(header::CONTENT_TYPE, "application/did+json")],
            bytes.clone(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Our description, with its `ETag` and `Cache-Control` (`max-age` of the limit
/// `description_max_age`; `no-cache` when it is zero, or when the description was built
/// without the consensus registry, which could not be read); `304 Not Modified` with no
/// body to a request whose `If-None-Match` names the current tag.
async fn serve_description(State(own): State<Arc<Own>>, request: HeaderMap) -> Response {
    match own.description.served(&own.shared).await {
        Ok(served) => {
            let max_age = own.shared.limits.description_max_age.as_secs();
            let cache_control = if max_age == 0 || served.provisional {
                "no-cache".to_owned()
            } else {
                format!("max-age={max_age}")
            };
            let caching = [
                (header::ETAG, served.etag.clone()),
                (header::CACHE_CONTROL, cache_control),
            ];
            if none_match(&request, &served.etag) {
                return (StatusCode::NOT_MODIFIED, caching).into_response();
            }
            (
                [(header::CONTENT_TYPE, TD_MEDIA_TYPE.to_owned())],
                caching,
                served.bytes,
            )
                .into_response()
        }
        Err(error) => {
            tracing::error!(%error, "cannot build our description");
            (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response()
        }
    }
}

/// Whether the request's `If-None-Match` names `etag` (or `*`), compared weakly (RFC 9110
/// 13.1.2): the representation the caller holds is the current one.
fn none_match(request: &HeaderMap, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let ours = opaque(etag);
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim() == "*" || opaque(tag) == ours)
}
