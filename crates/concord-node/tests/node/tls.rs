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

/// Connects to `server` trusting the system's store alone: refused, and the error says why.
async fn refused_without_the_ca(server: &Server) -> String {
    let error = requester()
        .node
        .connect(server.url(), catalogue::ACTION)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("invalid peer certificate: UnknownIssuer"),
        "{error}"
    );
    error
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
    let error = refused_without_the_ca(&server).await;
    assert!(
        error.contains(server.url().trim_end_matches('/')),
        "{error}"
    );
}

/// The product provider serving `https://` and `wss://` itself, with a certificate the
/// private CA signed for `localhost` and `127.0.0.1`.
async fn provider_with_its_own_tls() -> (Agent, Server, PrivateCa) {
    let ca = PrivateCa::for_localhost().unwrap();
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .tls_certificate_pem(ca.chain_pem(), ca.key_pem())
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    (provider, server, ca)
}

#[tokio::test]
async fn a_node_with_a_certificate_serves_https_and_wss_itself() {
    let (_provider, server, ca) = provider_with_its_own_tls().await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    assert!(
        server.endpoint().starts_with("wss://127.0.0.1:"),
        "{}",
        server.endpoint()
    );

    // A silent client holding a TCP connection open never completes its handshake; the
    // handshakes of others go on around it.
    let _silent = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let trusting = build(
        Node::builder("Requester")
            .trust_root_certificates_pem(ca.pem())
            .limits(quick_limits()),
    );
    // Well within the 5 s the silent client's handshake is given.
    let connecting = trusting.node.connect(server.url(), catalogue::ACTION);
    let connection = tokio::time::timeout(std::time::Duration::from_secs(2), connecting)
        .await
        .expect("connected while the silent client's handshake waits")
        .unwrap();
    let output = connection
        .call(catalogue::ACTION, json!({"productId": "P2"}))
        .await
        .unwrap();
    assert_eq!(output["productName"], "Mouse");
    connection.close().await;

    refused_without_the_ca(&server).await;
}

#[test]
fn a_certificate_or_key_that_is_not_pem_is_a_build_error_naming_it() {
    let ca = PrivateCa::for_localhost().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let build = |chain: &str, key: &str| {
        Node::builder("Shop")
            .tls_certificate_pem(chain, key)
            .data_dir(dir.path())
            .build()
            .unwrap_err()
            .to_string()
    };
    assert!(build("no certificate", ca.key_pem())
        .contains("TLS certificate: no `-----BEGIN CERTIFICATE-----`"));
    assert!(build(ca.chain_pem(), "no key").contains("TLS private key"));
    // A key that is not the certificate's.
    let other = PrivateCa::for_localhost().unwrap();
    assert!(build(ca.chain_pem(), other.key_pem()).contains("TLS certificate and key"));
}
