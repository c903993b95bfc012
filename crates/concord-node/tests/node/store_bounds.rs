//! The store stays bounded in a running node: transcripts keep a prefix of long texts
//! and a bounded number of frames (`transcript_text_max_bytes`, `transcript_max_frames`),
//! and negotiated protocols beyond `protocol_max_count` are evicted after a session; one
//! peer holds at most `protocol_max_per_peer` of them.

use std::time::Duration;

use concord_node::Limits;
use concord_store::{FrameContent, FrameKind, NewProtocol, Settlement};
use futures_util::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

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

/// An anonymous peer from `source` proposes `candidate` with a raw WebSocket and waits for
/// the provider to say its code is ready (it saves the protocol before it says so).
async fn negotiate_from(source: &str, server: &concord_node::Server, candidate: &str) {
    let mut socket = raw_socket_from(source, server).await;
    let mut hello_text: serde_json::Value = serde_json::from_str(&source_hello(None)).unwrap();
    hello_text["metaProtocol"]["supportedCapabilities"] = json!([]);
    socket
        .send(Message::Text(hello_text.to_string().into()))
        .await
        .unwrap();
    next(&mut socket).await;
    let proposal = json!({
        "action": "protocolNegotiation", "sequenceId": 0, "status": "negotiating",
        "candidateProtocols": candidate, "modificationSummary": "",
    });
    socket.send(meta_frame(&proposal)).await.unwrap();
    for _ in 0..8 {
        if next_meta(&mut socket).await["action"] == "codeGeneration" {
            let _ = socket.close(None).await;
            return;
        }
    }
    panic!("the provider never said its code was ready");
}

#[tokio::test]
async fn one_address_filling_the_store_holds_its_share_and_a_callers_protocol_stays_resumable() {
    let provider = provider_with(Limits {
        protocol_max_count: 4,
        protocol_max_per_peer: 2,
        transcript_prune_interval: Duration::from_millis(1),
        ..quick_limits()
    });
    let server = serve(&provider).await;
    // The legitimate caller, from 127.0.0.1.
    let requester = requester();
    let first = requester.connect(&server, "getProductInfo").await;
    let hash = first.info().hash;
    first.close().await;
    let accepted = provider.store().protocol(&hash).unwrap().unwrap().document;

    // The attacker, from 127.0.0.2: six distinct protocols, each accepted and stored.
    for i in 0..6 {
        negotiate_from("127.0.0.2", &server, &format!("{accepted}\nFiller {i}.\n")).await;
    }
    let held = |protocols: &[concord_store::ProtocolSummary]| {
        protocols
            .iter()
            .filter(|p| p.peers.iter().any(|peer| peer == "ws://127.0.0.2"))
            .count()
    };
    // The prunes after the sessions settle within the bounds.
    let mut protocols = Vec::new();
    for _ in 0..100 {
        protocols = provider.store().list_protocols().unwrap();
        if protocols.len() <= 4 && held(&protocols) <= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held(&protocols) <= 2, "{protocols:#?}");
    assert!(
        protocols.iter().any(|p| p.hash == hash),
        "the caller's protocol was evicted: {protocols:#?}"
    );
    // The caller resumes it by 0-RTT.
    let second = requester.connect(&server, "getProductInfo").await;
    assert_eq!(second.info().settlement, concord_node::Settlement::Resumed);
    assert_eq!(second.info().hash, hash);
    second.close().await;
}
