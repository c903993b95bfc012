//! A node behind a reverse proxy that terminates TLS: its description names its public
//! `https://` base and `wss://` endpoint, and a peer that trusts the proxy's certificate
//! reaches it over both; a peer that does not is refused with the reason.

use concord_fixtures::tls::{PrivateCa, TlsProxy};
use concord_node::{Node, Server};
use serde_json::json;

use crate::support::*;

/// The product provider serving on loopback behind a TLS proxy for `localhost`; the CA's PEM.
async fn provider_behind_tls() -> (Agent, Server, String) {
    let ca = PrivateCa::for_localhost().unwrap();
    let proxy = TlsProxy::bind(&ca).await.unwrap();
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .public_url(proxy.url())
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    proxy.forward_to(server.local_addr());
    (provider, server, ca.pem().to_owned())
}

#[tokio::test]
async fn a_peer_behind_tls_is_reached_over_https_and_wss() {
    let (_provider, server, ca_pem) = provider_behind_tls().await;
    assert!(server.url().starts_with("https://localhost:"));
    assert!(
        server.endpoint().starts_with("wss://localhost:"),
        "{}",
        server.endpoint()
    );

    let requester = build(
        Node::builder("Requester")
            .trust_root_certificates_pem(ca_pem)
            .limits(quick_limits()),
    );
    let connection = requester.connect(&server, catalogue::ACTION).await;
    assert!(connection.info().endpoint.starts_with("wss://localhost:"));
    let output = connection
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["price"], 1299.99);
    connection.close().await;
}

#[tokio::test]
async fn a_certificate_no_trusted_root_signed_is_refused_with_the_reason() {
    let (_provider, server, _) = provider_behind_tls().await;
    let requester = requester();
    let error = requester
        .node
        .connect(server.url(), catalogue::ACTION)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("invalid peer certificate: UnknownIssuer"),
        "{error}"
    );
    assert!(
        error.contains(server.url().trim_end_matches('/')),
        "{error}"
    );
}
