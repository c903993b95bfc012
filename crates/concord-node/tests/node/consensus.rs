//! Consensus protocols: both sides hold a published protocol (by URI) and its code; the
//! hello selects it and the session starts ready.

use std::time::Duration;

use concord_handlers::{template, Local};
use concord_negotiate::{canonical_protocol, Need, ProtocolDocument};
use concord_node::Settlement;
use concord_proto::{ProtocolHash, Role};
use concord_store::NewConsensus;
use serde_json::json;

use crate::support::*;

pub(crate) const URI: &str = "https://protocols.example/product-info/1.0";

/// The product-info protocol as a consensus document, with both sides' handler modules.
pub(crate) fn registry_entry() -> NewConsensus {
    let document = canonical_protocol(&catalogue::action(), Duration::from_secs(15));
    let parsed = ProtocolDocument::parse(&document).unwrap();
    let provider_code = template(&parsed, &Local::Provider(catalogue::action())).unwrap();
    let requester_code = template(
        &parsed,
        &Local::Requester(Need {
            action: "getProductInfo".into(),
            ..Need::default()
        }),
    )
    .unwrap();
    NewConsensus::new(URI, document)
        .with_handler(Role::Provider, provider_code)
        .with_handler(Role::Requester, requester_code)
}

#[tokio::test]
async fn a_shared_consensus_protocol_is_selected_in_the_hello() {
    let provider = provider();
    let requester = requester();
    let entry = registry_entry();
    let hash = entry.hash();
    provider.store().add_consensus(&entry).unwrap();
    requester.store().add_consensus(&entry).unwrap();
    let server = serve(&provider).await;

    let connection = requester.connect(&server, "getProductInfo").await;
    let info = connection.info();
    assert_eq!(
        info.settlement,
        Settlement::Consensus {
            uri: URI.to_owned()
        }
    );
    assert_eq!(info.hash, hash);
    assert!(info.accounting.steps.is_empty());
    assert!(info.code.is_empty());
    let output = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["productName"], "Laptop");
    connection.close().await;

    let transcripts = finished_transcripts(requester.store(), 1).await;
    let frames = &transcripts[0].frames;
    assert_eq!(frames.len(), 2, "{:?}", frame_summary(&transcripts[0]));
    let (sent, received) = match (&frames[0].content, &frames[1].content) {
        (concord_store::FrameContent::Text(a), concord_store::FrameContent::Text(b)) => (
            serde_json::from_str::<serde_json::Value>(a).unwrap(),
            serde_json::from_str::<serde_json::Value>(b).unwrap(),
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(sent["metaProtocol"]["candidateProtocols"], json!([URI]));
    assert_eq!(received["metaProtocol"]["selectedProtocol"], URI);
    // Both sides remember the session's protocol as settled by consensus.
    let stored = provider.store().protocol(&hash).unwrap().unwrap();
    assert_eq!(
        stored.settlement,
        concord_store::Settlement::Consensus {
            uri: URI.to_owned()
        }
    );
}

#[tokio::test]
async fn a_consensus_protocol_whose_document_differs_is_not_offered() {
    let provider = provider();
    let requester = requester();
    provider.store().add_consensus(&registry_entry()).unwrap();
    // Our copy of the URI's document is another version: its hash differs from the one
    // the provider publishes, so we do not offer it, and the session negotiates.
    let other = NewConsensus::new(URI, "# Product info, an older draft\n").with_handler(
        Role::Requester,
        "function encodeRequest(i) { return i; } function decodeResponse(m) { return m; }",
    );
    requester.store().add_consensus(&other).unwrap();
    let server = serve(&provider).await;
    let connection = requester.connect(&server, "getProductInfo").await;
    assert_eq!(connection.info().settlement, Settlement::Negotiated);
    assert_ne!(
        connection.info().hash,
        ProtocolHash::of_text("# Product info, an older draft\n")
    );
    connection.close().await;
    let transcripts = finished_transcripts(requester.store(), 1).await;
    let hello = match &transcripts[0].frames[0].content {
        concord_store::FrameContent::Text(text) => text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(!hello.contains("candidateProtocols"), "{hello}");
}
