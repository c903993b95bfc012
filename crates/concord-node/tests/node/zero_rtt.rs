//! 0-RTT: a reconnect reuses the stored protocol with no negotiation; a protocol the peer
//! no longer holds falls back to negotiation.

use concord_node::{Server, Settlement};
use concord_proto::ProtocolHash;
use serde_json::json;

use crate::support::*;

/// The provider serving, and a requester that negotiated a protocol with it and closed that
/// first connection.
async fn after_a_first_connection() -> (Agent, Server, Agent, ProtocolHash) {
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let first = requester.connect(&server, "getProductInfo").await;
    let hash = first.info().hash;
    first.close().await;
    (provider, server, requester, hash)
}

#[tokio::test]
async fn a_reconnect_resumes_the_stored_protocol_with_no_negotiation() {
    let (provider, server, requester, hash) = after_a_first_connection().await;
    let second = requester.connect(&server, "getProductInfo").await;
    let info = second.info();
    assert_eq!(info.settlement, Settlement::Resumed);
    assert_eq!(info.hash, hash);
    assert_eq!(info.offered_hash, Some(hash));
    assert!(info.accounting.steps.is_empty());
    assert!(info.code.is_empty());
    assert_eq!(info.verified_cases, 0);
    let output = second
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["price"], 1299.99);
    second.close().await;

    // Only the hellos crossed: no negotiation, no code generation, no test cases.
    for (store, out, inn) in [
        (requester.store(), "sent", "received"),
        (provider.store(), "received", "sent"),
    ] {
        let transcripts = finished_transcripts(store, 2).await;
        assert_eq!(
            frame_summary(&transcripts[0]),
            [
                format!("{out} hello sourceHello"),
                format!("{inn} hello destinationHello"),
            ]
        );
        assert_eq!(
            transcripts[0].summary.outcome,
            Some(concord_store::Outcome::Agreed(hash))
        );
        let hello = match &transcripts[0].frames[1].content {
            concord_store::FrameContent::Text(text) => text.clone(),
            other => panic!("{other:?}"),
        };
        if out == "sent" {
            assert!(
                hello.contains(&format!("\"usedProtocolHash\":\"{hash}\"")),
                "{hello}"
            );
        }
    }
    // Both sides noted the reuse.
    for store in [requester.store(), provider.store()] {
        let stored = store.protocol(&hash).unwrap().unwrap();
        assert_eq!(stored.use_count, 1, "{stored:?}");
        assert!(stored.last_used.is_some());
    }
}

#[tokio::test]
async fn a_protocol_the_peer_forgot_is_negotiated_again() {
    let (provider, server, requester, hash) = after_a_first_connection().await;
    provider.store().forget_protocol(&hash.to_string()).unwrap();

    let second = requester.connect(&server, "getProductInfo").await;
    let info = second.info();
    assert_eq!(info.offered_hash, Some(hash));
    assert_eq!(info.settlement, Settlement::Negotiated);
    // The rules draft the same protocol again: same hash, stored again on the provider.
    assert_eq!(info.hash, hash);
    assert!(provider.store().protocol(&hash).unwrap().is_some());
    let output = second
        .call("getProductInfo", json!({"productId": "P2"}))
        .await
        .unwrap();
    assert_eq!(output["currency"], "EUR");
    second.close().await;
    let transcripts = finished_transcripts(provider.store(), 2).await;
    let hello = match &transcripts[0].frames[1].content {
        concord_store::FrameContent::Text(text) => text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(!hello.contains("usedProtocolHash"), "{hello}");
    assert_in_order(
        &frame_summary(&transcripts[0]),
        &[
            "received meta protocolNegotiation:negotiating".to_owned(),
            "sent meta protocolNegotiation:accepted".to_owned(),
        ],
    );
}
