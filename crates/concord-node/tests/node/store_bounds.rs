//! The store stays bounded in a running node: transcripts keep a prefix of long texts
//! and a bounded number of frames (`transcript_text_max_bytes`, `transcript_max_frames`),
//! and negotiated protocols beyond `protocol_max_count` are evicted after a session; one
//! peer holds at most `protocol_max_per_peer` of them.

use std::time::Duration;

use concord_node::{Keys, Limits, Node};
use concord_store::{FrameContent, FrameKind, NewProtocol, Settlement};
use futures_util::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::identity::{document, host, now, signed, upgrade_from};
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
    negotiate_on(raw_socket_from(source, server).await, candidate).await;
}

/// Proposes `candidate` on an upgraded `socket` (plain, no capability) and waits for the
/// provider to say its code is ready.
async fn negotiate_on(mut socket: RawSocket, candidate: &str) {
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

#[tokio::test]
async fn dids_minted_on_one_address_hold_its_share_in_all_and_a_callers_protocol_stays_resumable() {
    let provider = build(
        Node::builder("Product agent")
            .description("Product information for a small shop.")
            .action(catalogue::action(), catalogue::answer)
            .keys(Keys::generate())
            .security(loopback_security())
            .limits(Limits {
                protocol_max_per_peer: 2,
                transcript_prune_interval: Duration::from_millis(1),
                ..quick_limits()
            }),
    );
    let server = serve(&provider).await;
    // The legitimate caller, with a DID of its own, from 127.0.0.1.
    let (requester, _requester_server) = requester_with_did().await;
    let first = requester.connect(&server, "getProductInfo").await;
    let hash = first.info().hash;
    first.close().await;
    let accepted = provider.store().protocol(&hash).unwrap().unwrap().document;

    // The attacker, from 127.0.0.2: each upgrade signed by a DID minted for it, each
    // proposing a distinct protocol that is accepted and stored.
    let mut minted = Vec::new();
    for i in 0..6 {
        let did = host(document).await;
        let headers = signed(
            &did.identity,
            &server,
            now(),
            &format!("minted-nonce-{i:04}"),
        );
        let socket = upgrade_from("127.0.0.2", &server, &headers).await.unwrap();
        negotiate_on(socket, &format!("{accepted}\nFiller {i}.\n")).await;
        minted.push(did.identity.did().to_string());
    }
    let held = |protocols: &[concord_store::ProtocolSummary]| {
        protocols
            .iter()
            .filter(|p| p.peers.iter().any(|peer| minted.contains(peer)))
            .count()
    };
    let mut protocols = Vec::new();
    for _ in 0..100 {
        protocols = provider.store().list_protocols().unwrap();
        if held(&protocols) <= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The address's share in all, whatever the number of DIDs.
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
