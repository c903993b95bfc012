//! A negotiation the provider rejects: the reason reaches the requester and both
//! transcripts.

use concord_node::{ConnectError, Want};
use concord_proto::{CloseReason, Side};

use crate::support::*;

/// A product-info protocol whose response requires a field the provider's action never
/// returns: no protocol with that action can satisfy it.
fn needs_a_stock_level() -> String {
    let text = SEED_PRODUCT_INFO.replace(
        r#""required": ["productId", "productName", "productDescription", "price", "currency"]"#,
        r#""required": ["productId", "productName", "productDescription", "price", "currency", "stockLevel"]"#,
    );
    text.replacen(
        r#"        "currency": {"#,
        r#"        "stockLevel": {"type": "integer"},
        "currency": {"#,
        1,
    )
}

#[tokio::test]
async fn the_provider_rejects_a_candidate_it_cannot_serve() {
    let candidate = needs_a_stock_level();
    assert!(candidate.contains(r#""stockLevel": {"type": "integer"}"#));
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let error = requester
        .node
        .connect_with(
            server.url(),
            Want::action("getProductInfo").propose(candidate),
        )
        .await
        .unwrap_err();
    let ConnectError::Closed(CloseReason::NegotiationRejected {
        by: Side::Peer,
        reason: Some(reason),
    }) = &error
    else {
        panic!("{error}");
    };
    assert!(reason.contains("`stockLevel`"), "{reason}");
    for store in [requester.store(), provider.store()] {
        let transcripts = finished_transcripts(store, 1).await;
        let transcript = &transcripts[0];
        assert!(
            matches!(
                &transcript.summary.outcome,
                Some(concord_store::Outcome::Rejected(text)) if text.contains("`stockLevel`")
            ),
            "{:?}",
            transcript.summary.outcome
        );
        let frames: Vec<String> = frame_summary(transcript)
            .into_iter()
            .map(|line| line.replace("sent ", "").replace("received ", ""))
            .collect();
        assert_eq!(
            frames,
            [
                "hello sourceHello",
                "hello destinationHello",
                "meta protocolNegotiation:negotiating",
                "meta protocolNegotiation:rejected",
            ]
        );
    }
    // Nothing was stored for 0-RTT.
    assert!(requester.store().list_protocols().unwrap().is_empty());
    assert!(provider.store().list_protocols().unwrap().is_empty());
}
