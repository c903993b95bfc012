//! Transcript retention in a running node: pruned by count after sessions end, and the
//! transcripts a killed process left open closed as interrupted when a node starts.

use std::time::{Duration, SystemTime};

use concord_node::{Limits, Node};
use concord_proto::Role;
use concord_store::{Outcome, Store};
use serde_json::json;

use crate::support::*;

/// (finished, unfinished) transcripts in `store`.
fn counts(store: &Store) -> (usize, usize) {
    let all = store.list_transcripts(1000).unwrap();
    let finished = all
        .iter()
        .filter(|summary| summary.outcome.is_some())
        .count();
    (finished, all.len() - finished)
}

#[tokio::test]
async fn twenty_connections_leave_at_most_the_count_limit_plus_those_in_progress() {
    let provider = provider_with(Limits {
        transcript_max_count: 5,
        transcript_prune_interval: Duration::from_millis(200),
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let requester = requester();
    let mut open = Vec::new();
    for i in 0..20 {
        let connection = requester.connect(&server, "getProductInfo").await;
        let output = connection
            .call("getProductInfo", json!({"productId": "P12345"}))
            .await
            .unwrap();
        assert!(output.is_object(), "{output}");
        if i >= 18 {
            open.push(connection); // the last two stay in progress
        } else {
            connection.close().await;
        }
    }
    wait_for_sessions(&server, 2).await;
    // Every session that ended asked for a prune; the last one runs within the interval.
    let mut seen = (usize::MAX, usize::MAX);
    for _ in 0..100 {
        seen = counts(provider.store());
        if seen.0 <= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.0 <= 5, "finished transcripts left: {}", seen.0);
    assert_eq!(
        seen.1, 2,
        "the two sessions in progress keep their transcripts"
    );
    assert!(counts(provider.store()).0 + counts(provider.store()).1 <= 7);
    // The newest finished ones are kept, whole.
    let kept = provider.store().list_transcripts(10).unwrap();
    assert!(kept.iter().all(|summary| summary.frame_count >= 2));
    for connection in open {
        connection.close().await;
    }
}

#[tokio::test]
async fn a_node_closes_the_transcripts_a_killed_process_left_open() {
    let dir = tempfile::tempdir().unwrap();
    let left_open = {
        let store = Store::open(dir.path()).unwrap();
        // What a process killed mid-session leaves: a transcript with no outcome.
        store
            .begin_transcript(
                "https://peer.example/.well-known/wot",
                Role::Provider,
                SystemTime::now(),
            )
            .unwrap()
    };
    let node = Node::builder("Restarted agent")
        .data_dir(dir.path())
        .build()
        .unwrap();
    let transcript = node.store().transcript(left_open).unwrap().unwrap();
    assert_eq!(transcript.summary.outcome, Some(Outcome::Interrupted));
    // A second node on the same store while the first runs leaves its sessions alone.
    let running = node
        .store()
        .begin_transcript("peer", Role::Requester, SystemTime::now())
        .unwrap();
    let _second = Node::builder("Second agent")
        .data_dir(dir.path())
        .build()
        .unwrap();
    let transcript = node.store().transcript(running).unwrap().unwrap();
    assert_eq!(transcript.summary.outcome, None);
}
