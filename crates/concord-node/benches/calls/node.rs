//! The two nodes under test: the product-info provider and a requester, stores in temp dirs.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_handlers::{Outcome, Provider, Requester, Verifier};
use concord_negotiate::ProtocolDocument;
use concord_node::{Connection, Keys, Limits, Node, NodeBuilder, Security, Server, Settlement};
use concord_proto::{ProtocolHash, Role};
use concord_sandbox::Sandbox;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::catalogue::{self, Catalogue, ACTION};
use crate::echo::Wire;

type BoxError = Box<dyn Error + Send + Sync>;

/// The client side of a WebSocket (as the node's requester has it).
pub type ClientSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The provider serving, and the requester that holds the negotiated protocol.
pub struct Nodes {
    pub server: Server,
    pub requester: Node,
    provider: Node,
    /// Whether both have a DID: upgrades signed and checked, sessions in the Noise channel.
    secure: bool,
    /// Where a secure requester serves its DID document.
    _requester_server: Option<Server>,
    _dirs: [TempDir; 2],
}

/// Test mode for DIDs on loopback (`localhost` resolves over `http://`).
fn loopback_security() -> Security {
    let mut security = Security::default();
    security.resolver.allow_loopback_http = true;
    security
}

/// A builder with a fresh identity when `secure`.
fn with_identity(builder: NodeBuilder, secure: bool) -> NodeBuilder {
    if secure {
        builder.keys(Keys::generate()).security(loopback_security())
    } else {
        builder
    }
}

/// Serves `node` (nothing but its DID document) when `secure`, so that its DID resolves.
async fn host_did(node: &Node, secure: bool) -> Result<Option<Server>, BoxError> {
    Ok(if secure {
        Some(node.serve("127.0.0.1:0").await?)
    } else {
        None
    })
}

/// Every caller is on 127.0.0.1: the per-address limits, made for strangers, are raised
/// so that `--connections` callers and the reconnects of the first-call cases fit.
fn limits() -> Limits {
    Limits {
        call_timeout: Duration::from_secs(10),
        max_sessions_per_address: 4096,
        max_connections_per_address: 8192,
        connection_rate_per_address: 100_000,
        connection_burst_per_address: 100_000,
        // Each connection fetches the description and upgrades: two requests.
        request_rate_per_address: 200_000,
        request_burst_per_address: 200_000,
        max_pending_hellos: 4096,
        max_pending_hellos_per_address: 4096,
        // 64 callers from one address: every backend slot is theirs, and they may wait.
        max_backend_calls_per_address: Limits::default().max_backend_calls,
        max_backend_waiting_per_address: 4096,
        ..Limits::default()
    }
}

impl Nodes {
    /// The two nodes; with `secure`, each with a DID of its own (both sign, both encrypt).
    pub async fn start(catalogue: &Catalogue, secure: bool) -> Result<Self, BoxError> {
        let (provider_dir, requester_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let answers = catalogue.clone();
        let provider = with_identity(Node::builder("Product agent"), secure)
            .description("Product information for a small shop.")
            .data_dir(provider_dir.path())
            .limits(limits())
            .action(catalogue::action(), move |input: Value| {
                let answers = answers.clone();
                async move { answers.answer(input).await }
            })
            .build()?;
        let server = provider.serve("127.0.0.1:0").await?;
        let requester = with_identity(Node::builder("Requester"), secure)
            .data_dir(requester_dir.path())
            .limits(limits())
            .build()?;
        let requester_server = host_did(&requester, secure).await?;
        Ok(Self {
            server,
            requester,
            provider,
            secure,
            _requester_server: requester_server,
            _dirs: [provider_dir, requester_dir],
        })
    }

    /// A connection from the requester (negotiated the first time, 0-RTT after).
    pub async fn connect(&self) -> Result<Connection, BoxError> {
        let connection = self.requester.connect(self.server.url(), ACTION).await?;
        if connection.info().encrypted != self.secure {
            return Err(format!("expected encrypted = {}", self.secure).into());
        }
        Ok(connection)
    }

    /// Time to the first call's answer on a fresh connection: with a fresh requester (its
    /// store in a new temp dir, so a full negotiation), or with ours (0-RTT).
    pub async fn first_call(
        &self,
        fresh: bool,
        catalogue: &Catalogue,
    ) -> Result<Duration, BoxError> {
        let dir = tempfile::tempdir()?;
        let node = if fresh {
            with_identity(Node::builder("Fresh requester"), self.secure)
                .data_dir(dir.path())
                .limits(limits())
                .build()?
        } else {
            self.requester.clone()
        };
        // A fresh identity's document is served before the clock starts (the provider
        // still fetches it once: part of a first authentication).
        let _hosting = match fresh {
            true => host_did(&node, self.secure).await?,
            false => None,
        };
        tracing::info!(fresh, "bench: first call starts");
        let started = Instant::now();
        let connection = node.connect(self.server.url(), ACTION).await?;
        tracing::info!("bench: connected");
        connection
            .call(ACTION, json!({"productId": catalogue.id(0)}))
            .await?;
        let elapsed = started.elapsed();
        tracing::info!(?elapsed, "bench: first call answered");
        let expected = if fresh {
            Settlement::Negotiated
        } else {
            Settlement::Resumed
        };
        if connection.info().settlement != expected {
            return Err(format!(
                "expected {expected:?}, got {:?}",
                connection.info().settlement
            )
            .into());
        }
        connection.close().await;
        Ok(elapsed)
    }

    /// One request and one response exactly as the two nodes' code puts them on the wire.
    pub fn wire(&self, hash: &ProtocolHash, catalogue: &Catalogue) -> Result<Wire, BoxError> {
        let ours = self
            .requester
            .store()
            .protocol(hash)?
            .ok_or("no stored protocol")?;
        let theirs = self
            .provider
            .store()
            .protocol(hash)?
            .ok_or("no stored protocol")?;
        let document = ProtocolDocument::parse(&ours.document)?;
        let verifier = Arc::new(Verifier::new(&document)?);
        let load = |source: Option<&str>, role| {
            Sandbox::load(source.ok_or("no stored handler")?, role, Default::default())
                .map_err(BoxError::from)
        };
        let mut requester = Requester::new(
            load(
                ours.handlers.get(Role::Requester),
                concord_sandbox::Role::Requester,
            )?,
            Arc::clone(&verifier),
        )?;
        let mut provider = Provider::new(
            load(
                theirs.handlers.get(Role::Provider),
                concord_sandbox::Role::Provider,
            )?,
            verifier,
        )?;
        let (message_id, product_id) = ("wire0000deadbeef", catalogue.id(0));
        let product = catalogue.get(product_id).ok_or("no product")?.clone();
        let request = requester.encode_request(message_id, &json!({"productId": product_id}))?;
        let response = provider.encode_response(message_id, &Outcome::Result(product.clone()))?;
        Wire::new(
            serde_json::from_slice(&request)?,
            serde_json::from_slice(&response)?,
            message_id,
            product_id,
            &product,
        )
    }
}
