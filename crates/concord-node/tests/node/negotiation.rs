//! A full deterministic negotiation between two nodes, then calls over it.

use concord_node::{CallError, Settlement};
use concord_proto::{Capability, Role};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn negotiates_generates_verifies_and_calls_without_an_llm() {
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    let info = connection.info().clone();
    assert_eq!(info.settlement, Settlement::Negotiated);
    assert_eq!(info.action, "getProductInfo");
    assert_eq!(info.peer, server.description_url());
    assert_eq!(info.offered_hash, None);
    assert!(info.capabilities.contains(Capability::TestCasesNegotiation));
    assert!(info.capabilities.contains(Capability::VerificationProtocol));
    assert!(!info
        .capabilities
        .contains(Capability::NaturalLanguageNegotiation));
    // Every step decided by the rules; the code from the template, checked by the cases.
    assert_eq!(info.accounting.llm_calls(), 0);
    assert_eq!(info.accounting.by_policy().1, 0);
    assert!(info.accounting.steps.len() >= 2, "{:?}", info.accounting);
    assert_eq!(info.code.len(), 1);
    assert_eq!(info.code[0].origin, "template");
    assert!(info.code[0].native, "a template runs natively");
    assert_eq!(info.code[0].llm_calls, 0);
    assert!(info.verified_cases >= 2, "{}", info.verified_cases);
    assert_eq!(info.code[0].cases_run, info.verified_cases);

    // A found product, an unknown one, a bad input, another action.
    let output = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(
        output,
        json!({"productId": "P12345", "productName": "Laptop", "productDescription": "A fast 14-inch laptop.", "price": 1299.99, "currency": "USD"})
    );
    let error = connection
        .call("getProductInfo", json!({"productId": "P404"}))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        CallError::Remote {
            code: 404,
            message: "no product P404".into()
        }
    );
    let error = connection
        .call("getProductInfo", json!({"productName": "Laptop"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, CallError::InvalidInput(text) if text.contains("productId")),
        "{error}"
    );
    let error = connection
        .call("getPrice", json!({"productId": "P12345"}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "this connection's protocol is for `getProductInfo`, not `getPrice`"
    );

    // Concurrent calls on the one connection, each matched to its own response.
    let calls = (0..64).map(|i| {
        let connection = connection.clone();
        async move {
            let id = if i % 2 == 0 { "P12345" } else { "P2" };
            let output = connection
                .call("getProductInfo", json!({"productId": id}))
                .await
                .unwrap();
            assert_eq!(output["productId"], id);
        }
    });
    futures_util::future::join_all(calls).await;

    // Both sides stored the protocol with their handler; the requester also the cases.
    let hash = info.hash;
    let ours = requester.store().protocol(&hash).unwrap().unwrap();
    assert!(ours.handlers.get(Role::Requester).is_some());
    assert!(ours.handlers.get(Role::Provider).is_none());
    assert!(ours.test_cases.is_some());
    assert_eq!(
        ours.peers,
        [format!("{}#getProductInfo", server.description_url())]
    );
    assert_eq!(ours.action.as_deref(), Some("getProductInfo"));
    let theirs = provider.store().protocol(&hash).unwrap().unwrap();
    assert!(theirs.handlers.get(Role::Provider).is_some());
    assert_eq!(theirs.document, ours.document);

    connection.close().await;
    assert!(connection.is_closed());
    assert_eq!(
        connection.closed().await,
        "closed locally: closed by the application"
    );
    let error = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Closed(_)), "{error}");

    // The transcripts hold the whole negotiation, frame by frame.
    for (store, sent_first) in [(requester.store(), true), (provider.store(), false)] {
        let transcripts = finished_transcripts(store, 1).await;
        let transcript = &transcripts[0];
        assert_eq!(
            transcript.summary.outcome,
            Some(concord_store::Outcome::Agreed(hash))
        );
        let frames = frame_summary(transcript);
        let (out, inn) = if sent_first {
            ("sent", "received")
        } else {
            ("received", "sent")
        };
        assert_eq!(frames[0], format!("{out} hello sourceHello"));
        assert_eq!(frames[1], format!("{inn} hello destinationHello"));
        assert_eq!(
            frames[2],
            format!("{out} meta protocolNegotiation:negotiating")
        );
        assert_eq!(
            frames[3],
            format!("{inn} meta protocolNegotiation:accepted")
        );
        // The requester writes its code once the test cases are agreed (verified against
        // them); the provider as soon as the protocol is agreed.
        assert_in_order(
            &frames,
            &[
                format!("{out} meta testCasesNegotiation:negotiating"),
                format!("{inn} meta testCasesNegotiation:accepted"),
                format!("{out} meta codeGeneration:generated"),
            ],
        );
        assert!(
            frames.contains(&format!("{inn} meta codeGeneration:generated")),
            "{frames:#?}"
        );
        let verification = frames.iter().filter(|f| f.contains("verification")).count();
        assert_eq!(verification, 2 * info.verified_cases, "{frames:#?}");
        // Application frames are data, not negotiation: not in the transcript.
        assert!(
            !frames.iter().any(|f| f.contains("application")),
            "{frames:#?}"
        );
    }
    wait_for_sessions(&server, 0).await;
}

#[tokio::test]
async fn the_seed_protocol_gets_a_counter_proposal_which_the_requester_accepts() {
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester
        .node
        .connect_with(
            server.url(),
            concord_node::Want::action("getProductInfo").propose(SEED_PRODUCT_INFO),
        )
        .await
        .unwrap();
    let info = connection.info();
    assert_eq!(info.settlement, Settlement::Negotiated);
    // The provider countered with its own protocol: the agreed one is not the seed's.
    assert_ne!(
        info.hash,
        concord_proto::ProtocolHash::of_text(SEED_PRODUCT_INFO)
    );
    let document = requester
        .store()
        .protocol(&info.hash)
        .unwrap()
        .unwrap()
        .document;
    assert!(document.contains("getProductInfo"));
    let output = connection
        .call("getProductInfo", json!({"productId": "P2"}))
        .await
        .unwrap();
    assert_eq!(output["productName"], "Mouse");
    connection.close().await;
    let transcripts = finished_transcripts(requester.store(), 1).await;
    let frames = frame_summary(&transcripts[0]);
    assert_eq!(
        &frames[2..5],
        [
            "sent meta protocolNegotiation:negotiating",
            "received meta protocolNegotiation:negotiating",
            "sent meta protocolNegotiation:accepted",
        ]
    );
    let counter = match &transcripts[0].frames[3].content {
        concord_store::FrameContent::Text(text) => {
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(counter["sequenceId"], 1);
    let summary = counter["modificationSummary"].as_str().unwrap();
    assert!(summary.contains("productName"), "{summary}");
}

#[tokio::test]
async fn a_closed_connections_transcript_is_complete_when_close_returns() {
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    connection.close().await;
    let id = connection
        .info()
        .transcript
        .expect("the session is recorded");
    let transcript = requester.store().transcript(id).unwrap().unwrap();
    assert!(
        transcript.summary.finished.is_some(),
        "{:?}",
        transcript.summary
    );
    assert!(
        transcript.summary.outcome.is_some(),
        "{:?}",
        transcript.summary
    );
}
