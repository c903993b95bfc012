//! The store stays bounded in a running node: transcripts keep a prefix of long texts
//! and a bounded number of frames (`transcript_text_max_bytes`, `transcript_max_frames`),
//! and negotiated protocols beyond `protocol_max_count` are evicted after a session.

use std::time::Duration;

use concord_node::Limits;
use concord_store::{FrameContent, FrameKind, NewProtocol, Settlement};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_session_leaves_a_bounded_transcript_and_at_most_the_protocol_bound() {
    let provider = provider_with(Limits {
        transcript_text_max_bytes: 64,
        transcript_max_frames: 3,
        protocol_max_count: 1,
        ..quick_limits()
    });
    for i in 0..3 {
        provider
            .store()
            .save_protocol(&NewProtocol::negotiated(format!("# old {i}\n"), "someone"))
            .unwrap();
    }
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    let output = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert!(output.is_object(), "{output}");
    connection.close().await;

    let transcripts = finished_transcripts(provider.store(), 1).await;
    let transcript = &transcripts[0];
    assert_eq!(transcript.frames.len(), 3);
    assert!(transcript.summary.frames_not_recorded > 0);
    let hello = &transcript.frames[0];
    assert_eq!(hello.kind, FrameKind::Hello);
    let FrameContent::Text(prefix) = &hello.content else {
        panic!("a hello is text");
    };
    assert!(prefix.len() <= 64, "{prefix}");
    let cut = hello.cut.as_ref().expect("a hello is longer than 64 bytes");
    assert!(cut.len > 64);
    assert_eq!(cut.sha256.len(), 64);

    // The prune after the session keeps one negotiated protocol: the one just agreed.
    let mut negotiated = usize::MAX;
    for _ in 0..100 {
        let protocols = provider.store().list_protocols().unwrap();
        negotiated = protocols
            .iter()
            .filter(|p| p.settlement == Settlement::Negotiated)
            .count();
        if negotiated <= 1 {
            assert!(protocols[0].use_count > 0 || protocols[0].peers.len() == 1);
            assert!(!protocols[0].peers.iter().any(|peer| peer == "someone"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(negotiated, 1);
}
