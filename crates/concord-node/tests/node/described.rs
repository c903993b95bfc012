//! Connecting with a description fetched already (`Node::describe`, then
//! `Node::connect_described`): the provider is asked for its description once, and the
//! connection is what `connect_with` makes: the provider's DID checked against where its
//! description came from and proved over the channel, 0-RTT resume on a reconnect.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use std::time::Duration;

use concord_node::{ConnectError, Keys, Limits, Node, Server, Settlement, Want};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::consensus::registry_entry;
use crate::support::{
    build, catalogue, loopback_security, quick_limits, requester_with_did, Agent,
};

/// What a description request starts with on the wire.
const DESCRIPTION_REQUEST: &[u8] = b"GET /.well-known/wot ";

/// A plain TCP proxy on loopback in front of the provider, counting the description
/// requests that cross it.
struct CountingProxy {
    listener: TcpListener,
    descriptions: Arc<AtomicUsize>,
}

impl CountingProxy {
    async fn bind() -> Self {
        Self {
            listener: TcpListener::bind("127.0.0.1:0").await.unwrap(),
            descriptions: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// `http://localhost:PORT/`, the provider's public URL.
    fn url(&self) -> String {
        format!(
            "http://localhost:{}/",
            self.listener.local_addr().unwrap().port()
        )
    }

    /// Forwards every connection to `backend` in a task; the counter stays readable.
    fn forward_to(self, backend: std::net::SocketAddr) -> Arc<AtomicUsize> {
        self.forward_to_switchable(Arc::new(std::sync::Mutex::new(backend)))
    }

    /// Forwards every new connection to the address `backend` holds when it arrives.
    fn forward_to_switchable(
        self,
        backend: Arc<std::sync::Mutex<std::net::SocketAddr>>,
    ) -> Arc<AtomicUsize> {
        let descriptions = Arc::clone(&self.descriptions);
        tokio::spawn(async move {
            while let Ok((client, _)) = self.listener.accept().await {
                let descriptions = Arc::clone(&self.descriptions);
                let to = *backend.lock().unwrap();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(to).await {
                        relay(client, server, &descriptions).await;
                    }
                });
            }
        });
        descriptions
    }
}

/// Copies both ways, counting the description requests from `client`.
async fn relay(client: TcpStream, server: TcpStream, descriptions: &AtomicUsize) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async {
        let mut buffer = vec![0; 16 << 10];
        // The end of the last read, for a request line split across reads.
        let mut carried: Vec<u8> = Vec::new();
        loop {
            let read = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            let bytes = &buffer[..read];
            let mut window = std::mem::take(&mut carried);
            window.extend_from_slice(bytes);
            let found = window
                .windows(DESCRIPTION_REQUEST.len())
                .filter(|part| *part == DESCRIPTION_REQUEST)
                .count();
            descriptions.fetch_add(found, Ordering::SeqCst);
            let keep = window.len().min(DESCRIPTION_REQUEST.len() - 1);
            carried = window[window.len() - keep..].to_vec();
            if server_write.write_all(bytes).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// The product provider with a DID, reached through the proxy (its public URL, so its
/// description, endpoint and DID name the proxy); the description request counter.
async fn provider_behind_counting_proxy() -> (Agent, Server, String, Arc<AtomicUsize>) {
    provider_behind_counting_proxy_with(quick_limits()).await
}

/// [`provider_behind_counting_proxy`] with its `limits`.
async fn provider_behind_counting_proxy_with(
    limits: concord_node::Limits,
) -> (Agent, Server, String, Arc<AtomicUsize>) {
    let proxy = CountingProxy::bind().await;
    let url = proxy.url();
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .keys(Keys::generate())
            .security(loopback_security())
            .public_url(url.clone())
            .limits(limits),
    );
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let descriptions = proxy.forward_to(server.local_addr());
    (provider, server, url, descriptions)
}

#[tokio::test]
async fn a_fetched_description_connects_with_one_description_request() {
    let (_provider, server, url, descriptions) = provider_behind_counting_proxy().await;
    let provider_did = server.did().unwrap().to_owned();
    let (requester, _requester_server) = requester_with_did().await;
    let want = || Want::action(catalogue::ACTION);

    // Described once, connected without asking again: the DID proved over the channel.
    let peer = requester.node.describe(&url).await.unwrap();
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    assert!(peer.url().ends_with("/.well-known/wot"), "{}", peer.url());
    assert!(peer.action(catalogue::ACTION).is_some());
    let first = requester
        .node
        .connect_described(&peer, want())
        .await
        .unwrap();
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    assert_eq!(first.info().settlement, Settlement::Negotiated);
    assert_eq!(
        first.info().peer_did.as_deref(),
        Some(provider_did.as_str())
    );
    assert!(first.info().encrypted);
    let output = first
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["price"], 1299.99);
    first.close().await;

    // The same description again: a 0-RTT resume, still no second request.
    let again = requester
        .node
        .connect_described(&peer, want())
        .await
        .unwrap();
    assert_eq!(again.info().settlement, Settlement::Resumed);
    assert_eq!(
        again.info().peer_did.as_deref(),
        Some(provider_did.as_str())
    );
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    again.close().await;

    // `connect_with` fetches it itself, once, and resumes alike.
    let fetched = requester.node.connect_with(&url, want()).await.unwrap();
    assert_eq!(fetched.info().settlement, Settlement::Resumed);
    assert_eq!(fetched.info().peer, peer.url());
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
    fetched.close().await;
}

#[tokio::test]
async fn a_description_from_an_origin_its_did_does_not_name_is_refused_alike() {
    let (_provider, server, _url, descriptions) = provider_behind_counting_proxy().await;
    let (requester, _requester_server) = requester_with_did().await;
    // Straight from the server's own address: the description names the proxy's DID.
    let own_address = format!("http://{}/", server.local_addr());
    let direct = requester.node.describe(&own_address).await.unwrap();
    let described = requester
        .node
        .connect_described(&direct, Want::action(catalogue::ACTION))
        .await
        .unwrap_err();
    let fetched = requester
        .node
        .connect_with(&own_address, Want::action(catalogue::ACTION))
        .await
        .unwrap_err();
    assert!(
        matches!(&described, ConnectError::Security { reason, .. } if reason.contains("whose host is not")),
        "{described}"
    );
    assert_eq!(described.to_string(), fetched.to_string());
    assert_eq!(descriptions.load(Ordering::SeqCst), 0);
}

/// Connects to `url` (0-RTT after the first) and closes; the settlement.
async fn connect_and_close(requester: &Agent, url: &str) -> Settlement {
    let connection = requester
        .node
        .connect(url, catalogue::ACTION)
        .await
        .unwrap();
    let output = connection
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["price"], 1299.99);
    let settlement = connection.info().settlement.clone();
    connection.close().await;
    settlement
}

#[tokio::test]
async fn connections_share_the_description_while_it_is_fresh() {
    // The default `description_max_age` (60 s): fresh for the whole test.
    let (_provider, _server, url, descriptions) = provider_behind_counting_proxy().await;
    let (requester, _requester_server) = requester_with_did().await;
    assert_eq!(
        connect_and_close(&requester, &url).await,
        Settlement::Negotiated
    );
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    // The next connections (one at a time and two at once) use the validated description
    // held by the node: no request, and the DID still proved over each channel.
    assert_eq!(
        connect_and_close(&requester, &url).await,
        Settlement::Resumed
    );
    let (a, b) = tokio::join!(
        connect_and_close(&requester, &url),
        connect_and_close(&requester, &url)
    );
    assert_eq!((a, b), (Settlement::Resumed, Settlement::Resumed));
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    // `describe` always asks (it says it fetches).
    requester.node.describe(&url).await.unwrap();
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_description_is_asked_for_again_once_its_max_age_is_over() {
    let limits = Limits {
        description_max_age: Duration::from_secs(1),
        ..quick_limits()
    };
    let (_provider, _server, url, descriptions) = provider_behind_counting_proxy_with(limits).await;
    let (requester, _requester_server) = requester_with_did().await;
    connect_and_close(&requester, &url).await;
    assert_eq!(
        connect_and_close(&requester, &url).await,
        Settlement::Resumed
    );
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    // Past its second: revalidated (a 304: the same description, not validated again).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        connect_and_close(&requester, &url).await,
        Settlement::Resumed
    );
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
    assert_eq!(
        connect_and_close(&requester, &url).await,
        Settlement::Resumed
    );
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn with_no_max_age_every_connect_revalidates_the_description() {
    let limits = Limits {
        description_max_age: Duration::ZERO,
        ..quick_limits()
    };
    let (_provider, _server, url, descriptions) = provider_behind_counting_proxy_with(limits).await;
    let (requester, _requester_server) = requester_with_did().await;
    for (round, expected) in [
        Settlement::Negotiated,
        Settlement::Resumed,
        Settlement::Resumed,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(connect_and_close(&requester, &url).await, expected);
        assert_eq!(descriptions.load(Ordering::SeqCst), round + 1);
    }
}

#[tokio::test]
async fn a_consensus_protocol_we_hold_and_the_cached_description_does_not_list_revalidates_it() {
    let (provider, _server, url, descriptions) = provider_behind_counting_proxy().await;
    let (requester, _requester_server) = requester_with_did().await;
    let first = requester
        .node
        .connect(&url, catalogue::ACTION)
        .await
        .unwrap();
    let negotiated = first.info().hash;
    first.close().await;
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);
    // Both registries gain a consensus protocol for the action while the requester holds
    // a fresh description that does not list it.
    let entry = registry_entry();
    provider.node.store().add_consensus(&entry).unwrap();
    requester.node.store().add_consensus(&entry).unwrap();
    // The requester forgets the protocol it negotiated (it would offer it first).
    requester
        .node
        .store()
        .forget_protocol(&negotiated.to_string())
        .unwrap();
    // The description is asked for again (it changed: a 200 listing the protocol), and
    // the protocol is selected in the hello.
    assert_eq!(
        connect_and_close(&requester, &url).await,
        Settlement::Consensus {
            uri: crate::consensus::URI.to_owned()
        }
    );
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
    // Now listed: the next connect asks for nothing.
    connect_and_close(&requester, &url).await;
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
}

/// A product provider with a fresh DID whose public URL is `url`.
async fn provider_at(url: &str) -> (Agent, Server) {
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .keys(Keys::generate())
            .security(loopback_security())
            .public_url(url.to_owned())
            .limits(quick_limits()),
    );
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    (provider, server)
}

#[tokio::test]
async fn a_cached_description_that_fails_the_connection_is_asked_for_again() {
    let proxy = CountingProxy::bind().await;
    let url = proxy.url();
    let (first_provider, first_server) = provider_at(&url).await;
    let backend = Arc::new(std::sync::Mutex::new(first_server.local_addr()));
    let descriptions = proxy.forward_to_switchable(Arc::clone(&backend));
    let (requester, _requester_server) = requester_with_did().await;
    let first = requester
        .node
        .connect(&url, catalogue::ACTION)
        .await
        .unwrap();
    assert_eq!(first.info().peer_did.as_deref(), first_server.did(),);
    first.close().await;
    assert_eq!(descriptions.load(Ordering::SeqCst), 1);

    // Another agent (other keys: another DID) now answers at the same URL while the
    // requester holds a fresh description naming the first one's DID: the channel proves
    // the other DID, so the cached description is asked for again and the connection
    // tried once more, with the new DID proved.
    let (_second, second_server) = provider_at(&url).await;
    *backend.lock().unwrap() = second_server.local_addr();
    drop(first_server);
    let again = requester
        .node
        .connect(&url, catalogue::ACTION)
        .await
        .unwrap();
    assert_eq!(again.info().peer_did.as_deref(), second_server.did());
    assert_ne!(second_server.did(), first_provider.node.did().as_deref());
    assert_eq!(again.info().settlement, Settlement::Negotiated);
    assert_eq!(descriptions.load(Ordering::SeqCst), 2);
    let output = again
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["price"], 1299.99);
}
