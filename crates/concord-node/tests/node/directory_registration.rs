//! An agent registering itself with a real directory (the node-level WoT Discovery
//! directory, `NodeBuilder::directory`, on loopback with its memory store): registered at
//! start, refreshed before expiry, found by capability, deregistered on a graceful
//! shutdown; registered after backoff when the directory comes up after the agent; signed
//! when the directory requires signatures.

use std::sync::Arc;
use std::time::Duration;

use concord_directory::{DirectoryLimits, MemoryDirectoryStore};
use concord_node::{
    CapabilityQuery, Directory, DirectoryService, Node, RegistrationSettings, RegistrationState,
    Server,
};
use serde_json::Value;

use crate::support::*;

const AGENT_ID: &str = "urn:uuid:0b6c4f1e-2d7a-4b8e-9c3f-5a1d2e3f4a5b";

/// A directory node accepting TTLs from 2 s, on `addr`.
async fn directory_at(addr: &str, require_signatures: bool) -> (Agent, Server) {
    let mut limits = DirectoryLimits::default();
    limits.min_ttl = Duration::from_secs(2);
    let tdd =
        concord_directory::Directory::new(Arc::new(MemoryDirectoryStore::new()), limits).unwrap();
    let agent = build(
        Node::builder("Directory")
            .directory(DirectoryService::new(tdd).require_signatures(require_signatures))
            .security(loopback_security())
            .limits(quick_limits()),
    );
    let server = agent.node.serve(addr).await.unwrap();
    (agent, server)
}

/// The product agent, registering with `directory` on a `ttl`, retrying quickly.
fn registering_agent(directory: &str, ttl: Duration) -> Agent {
    let mut settings = RegistrationSettings::with_ttl(ttl);
    settings.first_retry = Duration::from_millis(100);
    settings.max_retry = Duration::from_millis(500);
    build(
        Node::builder("Product agent")
            .id(AGENT_ID)
            .action(catalogue::action(), catalogue::answer)
            .limits(quick_limits())
            .register_with(directory)
            .registration(settings),
    )
}

/// Waits up to 20 s for the server's first registration to reach `state`.
async fn registration_reaches(server: &Server, state: RegistrationState) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = server.registrations()[0].clone();
        if status.state == state {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {state:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn expires(td: &Value) -> String {
    td["registration"]["expires"]
        .as_str()
        .expect("an enriched TD with registration.expires")
        .to_owned()
}

#[tokio::test]
async fn an_agent_registers_refreshes_is_found_and_deregisters_on_shutdown() {
    let (_directory, tdd) = directory_at("127.0.0.1:0", false).await;
    let agent = registering_agent(tdd.url(), Duration::from_secs(3));
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    registration_reaches(&server, RegistrationState::Registered).await;
    let client = Directory::new(tdd.url()).unwrap();
    let first = client.get(AGENT_ID).await.unwrap();
    assert_eq!(first["title"], "Product agent");
    assert_eq!(first["registration"]["ttl"], 3);
    // Found by capability, at the agent's own base URL.
    let found = client
        .search(&CapabilityQuery::action("getProductInfo"))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["base"], server.url());
    let mut by_field = CapabilityQuery::default();
    by_field.field = Some("productId".into());
    assert_eq!(client.search(&by_field).await.unwrap().len(), 1);
    // Refreshed at half the TTL: `expires` moves on before the entry expires.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = client.get(AGENT_ID).await.unwrap();
        if expires(&now) > expires(&first) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never refreshed");
    }
    // Still there well past the first TTL: the refreshes keep it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    client.get(AGENT_ID).await.unwrap();
    // A graceful shutdown deletes it.
    let statuses = server.registrations();
    server.shutdown().await.unwrap();
    assert_eq!(statuses[0].id.as_deref(), Some(AGENT_ID));
    let error = client.get(AGENT_ID).await.unwrap_err();
    assert_eq!(error.status(), Some(404), "{error}");
}

#[tokio::test]
async fn an_agent_registers_once_its_directory_comes_up() {
    // A port nothing listens on, for now.
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let agent = registering_agent(&url, Duration::from_secs(30));
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while server.registrations()[0].failures < 2 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = server.registrations()[0].clone();
    assert_eq!(status.state, RegistrationState::Pending);
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("unreachable"),
        "{status:?}"
    );
    // The agent serves meanwhile.
    let requester = requester();
    requester.connect(&server, "getProductInfo").await;
    // The directory comes up: the next retry registers.
    let (_directory, tdd) = directory_at(&format!("127.0.0.1:{port}"), false).await;
    registration_reaches(&server, RegistrationState::Registered).await;
    let td = Directory::new(tdd.url())
        .unwrap()
        .get(AGENT_ID)
        .await
        .unwrap();
    assert_eq!(td["base"], server.url());
    assert!(server.registrations()[0].last_error.is_none());
}

#[tokio::test]
async fn a_directory_requiring_signatures_takes_a_signed_registration_only() {
    let (_directory, tdd) = directory_at("127.0.0.1:0", true).await;
    // Anonymous: refused (401), and the agent gives up.
    let anonymous = registering_agent(tdd.url(), Duration::from_secs(30));
    let server = anonymous.node.serve("127.0.0.1:0").await.unwrap();
    registration_reaches(&server, RegistrationState::GivenUp).await;
    assert!(
        server.registrations()[0]
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("401"),
        "{:?}",
        server.registrations()
    );
    // With a DID (and no id: registered under its DID), signed: taken.
    let mut settings = RegistrationSettings::with_ttl(Duration::from_secs(30));
    settings.first_retry = Duration::from_millis(100);
    let signed = build(
        Node::builder("Signed agent")
            .action(catalogue::action(), catalogue::answer)
            .keys(concord_node::Keys::generate())
            .security(loopback_security())
            .limits(quick_limits())
            .register_with(tdd.url())
            .registration(settings),
    );
    let server = signed.node.serve("127.0.0.1:0").await.unwrap();
    registration_reaches(&server, RegistrationState::Registered).await;
    let did = server.did().unwrap().to_owned();
    assert_eq!(server.registrations()[0].id.as_deref(), Some(did.as_str()));
    let td = Directory::new(tdd.url()).unwrap().get(&did).await.unwrap();
    assert_eq!(td["title"], "Signed agent");
    server.shutdown().await.unwrap();
    let gone = Directory::new(tdd.url())
        .unwrap()
        .get(&did)
        .await
        .unwrap_err();
    assert_eq!(gone.status(), Some(404));
}

#[tokio::test]
async fn a_directory_requiring_signatures_refuses_a_td_naming_another_did_403() {
    const BOB: &str = "did:wba:agents.example:bob";
    let (_directory, tdd) = directory_at("127.0.0.1:0", true).await;
    // Signed with its own DID, it registers a description whose id is Bob's DID.
    let mut settings = RegistrationSettings::with_ttl(Duration::from_secs(30));
    settings.first_retry = Duration::from_millis(100);
    let impostor = build(
        Node::builder("Impostor")
            .id(BOB)
            .action(catalogue::action(), catalogue::answer)
            .keys(concord_node::Keys::generate())
            .security(loopback_security())
            .limits(quick_limits())
            .register_with(tdd.url())
            .registration(settings),
    );
    let server = impostor.node.serve("127.0.0.1:0").await.unwrap();
    // A 403 for a DID-named entry is reported as a conflict, not a silent refusal.
    registration_reaches(&server, RegistrationState::Conflict).await;
    let said = server.registrations()[0]
        .last_error
        .clone()
        .unwrap_or_default();
    assert!(said.contains("403"), "{said}");
    assert!(said.contains(BOB), "{said}");
    let gone = Directory::new(tdd.url())
        .unwrap()
        .get(BOB)
        .await
        .unwrap_err();
    assert_eq!(gone.status(), Some(404), "{gone}");
}

#[tokio::test]
async fn the_client_posts_a_td_without_id_and_refreshes_it() {
    let (_directory, tdd) = directory_at("127.0.0.1:0", false).await;
    let client = Directory::new(tdd.url()).unwrap();
    let td = serde_json::json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "title": "Anonymous lamp",
        "securityDefinitions": {"nosec": {"scheme": "nosec"}},
        "security": "nosec",
        "actions": {"toggle": {"forms": [{"href": "http://127.0.0.1:9/toggle"}]}}
    });
    // No id: POST /things, the id from the directory's Location.
    let registered = client
        .register(&td, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(registered.created);
    assert!(registered.id.starts_with("urn:uuid:"), "{}", registered.id);
    let first = client.get(&registered.id).await.unwrap();
    assert_eq!(first["title"], "Anonymous lamp");
    assert_eq!(first["registration"]["ttl"], 30);
    // An empty merge patch: `expires` computed again from the ttl, later than before.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        client.refresh(&registered.id).await.unwrap();
        let now = client.get(&registered.id).await.unwrap();
        if expires(&now) > expires(&first) {
            assert_eq!(now["title"], "Anonymous lamp");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never refreshed");
    }
    // Refreshing what the directory does not hold: 404.
    let missing = client
        .refresh("urn:uuid:00000000-0000-4000-8000-000000000000")
        .await
        .unwrap_err();
    assert_eq!(missing.status(), Some(404), "{missing}");
}
