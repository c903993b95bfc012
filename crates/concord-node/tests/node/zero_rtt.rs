//! 0-RTT: a reconnect reuses the stored protocol with no negotiation; a protocol the peer
//! no longer holds falls back to negotiation; a protocol held with several peers (two
//! agents serving the same action, one agent under two names) is resumed with each; a
//! protocol resumed lately is resumed from memory for `resume_cache_ttl`, then asked of
//! the store again.

use std::time::Duration;

use concord_node::{Connection, Server, Settlement};
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

/// [`after_a_first_connection`] with a provider whose `resume_cache_ttl` is `ttl`, and a
/// second connection that resumed the protocol (the store vouched for it then) and closed.
async fn after_a_resume(ttl: Duration) -> (Agent, Server, Agent, ProtocolHash) {
    let provider = provider_with(concord_node::Limits {
        resume_cache_ttl: ttl,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let requester = requester();
    let first = requester.connect(&server, "getProductInfo").await;
    let hash = first.info().hash;
    first.close().await;
    let second = requester.connect(&server, "getProductInfo").await;
    assert_eq!(second.info().settlement, Settlement::Resumed);
    second.close().await;
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

#[tokio::test]
async fn a_protocol_resumed_lately_is_resumed_from_memory_until_its_ttl() {
    // Long enough for the next connect on a loaded machine, short enough to wait out.
    let ttl = Duration::from_secs(2);
    let (provider, server, requester, hash) = after_a_resume(ttl).await;

    // The store forgets it: within the ttl the provider still resumes it, from memory,
    // and the call is answered by the same code.
    provider.store().forget_protocol(&hash.to_string()).unwrap();
    let third = requester.connect(&server, "getProductInfo").await;
    assert_eq!(third.info().settlement, Settlement::Resumed);
    assert_eq!(third.info().hash, hash);
    let output = third
        .call("getProductInfo", json!({"productId": "P3"}))
        .await
        .unwrap();
    assert_eq!(output["productId"], "P3");
    third.close().await;

    // Past the ttl the store is asked again: it does not hold it, so it is negotiated.
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    assert!(provider.store().protocol(&hash).unwrap().is_none());
    let fourth = requester.connect(&server, "getProductInfo").await;
    assert_eq!(fourth.info().offered_hash, Some(hash));
    assert_eq!(fourth.info().settlement, Settlement::Negotiated);
    fourth.close().await;
}

#[tokio::test]
async fn with_no_resume_cache_every_0_rtt_hello_asks_the_store() {
    let (provider, server, requester, hash) = after_a_resume(Duration::ZERO).await;
    peers_once_holding(provider.store(), &hash, "ws://127.0.0.1").await;
    provider.store().forget_protocol(&hash.to_string()).unwrap();
    let third = requester.connect(&server, "getProductInfo").await;
    assert_eq!(third.info().settlement, Settlement::Negotiated);
    third.close().await;
}

/// Calls the catalogue action once over `connection` and closes it.
async fn call_once_and_close(connection: Connection, n: usize) {
    let input = catalogue::input(n);
    let output = connection
        .call(catalogue::ACTION, input.clone())
        .await
        .unwrap();
    assert_eq!(output["productId"], input["productId"]);
    connection.close().await;
}

/// The peers the store holds `hash` for, once `peer` is among them (a 0-RTT use is recorded
/// in the background).
async fn peers_once_holding(
    store: &concord_store::Store,
    hash: &ProtocolHash,
    peer: &str,
) -> Vec<String> {
    for _ in 0..200 {
        let peers = store.protocol(hash).unwrap().unwrap().peers;
        if peers.iter().any(|held| held == peer) {
            return peers;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{hash} is never recorded as held by {peer}");
}

#[tokio::test]
async fn two_providers_of_the_same_action_are_each_resumed_with() {
    let (provider_a, provider_b) = (provider(), provider());
    let (server_a, server_b) = (serve(&provider_a).await, serve(&provider_b).await);
    let requester = requester();

    // A: nothing stored, negotiated.
    let first = requester.connect(&server_a, catalogue::ACTION).await;
    assert_eq!(first.info().offered_hash, None);
    assert_eq!(first.info().settlement, Settlement::Negotiated);
    let hash = first.info().hash;
    call_once_and_close(first, 0).await;

    // B: offered A's protocol (same action); B does not hold it, so it is negotiated, to
    // the same text.
    let second = requester.connect(&server_b, catalogue::ACTION).await;
    assert_eq!(second.info().offered_hash, Some(hash));
    assert_eq!(second.info().settlement, Settlement::Negotiated);
    assert_eq!(second.info().hash, hash);
    call_once_and_close(second, 1).await;

    // A again, then B again: each holds it, each resumes (saving for B kept A).
    for (n, server) in [(2, &server_a), (3, &server_b)] {
        let connection = requester.connect(server, catalogue::ACTION).await;
        let info = connection.info();
        assert_eq!(info.settlement, Settlement::Resumed, "connection {}", n + 1);
        assert_eq!(info.offered_hash, Some(hash));
        assert_eq!(info.hash, hash);
        assert!(info.accounting.steps.is_empty());
        assert!(info.code.is_empty());
        call_once_and_close(connection, n).await;
    }

    let stored = requester.store().protocol(&hash).unwrap().unwrap();
    assert_eq!(stored.action.as_deref(), Some(catalogue::ACTION));
    let mut peers = stored.peers;
    peers.sort();
    let mut expected: Vec<String> = [&server_a, &server_b]
        .iter()
        .map(|server| format!("{}#{}", server.description_url(), catalogue::ACTION))
        .collect();
    expected.sort();
    assert_eq!(peers, expected);
}

#[tokio::test]
async fn a_provider_reached_by_another_name_is_resumed_with() {
    let (_provider, server, requester, hash) = after_a_first_connection().await;
    let url = server.url().replace("127.0.0.1", "localhost");
    assert_ne!(url, server.url());

    let connection = requester
        .node
        .connect(&url, catalogue::ACTION)
        .await
        .unwrap();
    let info = connection.info();
    assert!(info.peer.starts_with("http://localhost:"), "{}", info.peer);
    assert_eq!(info.offered_hash, Some(hash));
    assert_eq!(info.settlement, Settlement::Resumed);
    assert!(info.accounting.steps.is_empty());
    let peer = format!("{}#{}", info.peer, catalogue::ACTION);
    call_once_and_close(connection, 1).await;

    // Now held for both names: the next connection by the new name finds it as its own.
    let peers = peers_once_holding(requester.store(), &hash, &peer).await;
    assert_eq!(peers.len(), 2, "{peers:?}");
    let again = requester
        .node
        .connect(&url, catalogue::ACTION)
        .await
        .unwrap();
    assert_eq!(again.info().settlement, Settlement::Resumed);
    call_once_and_close(again, 2).await;
}
