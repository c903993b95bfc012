//! The set of peers per protocol: saving or using a protocol with a peer adds that peer,
//! the 0-RTT offer looks for the exact peer first and then for the same action with any
//! other peer, forgetting removes the peers, and a store written with schema version 1
//! (one `peer` column) is migrated.

mod support;

use std::time::Duration;

use concord_proto::{ProtocolHash, Role};
use concord_store::{
    HeldBy, NewProtocol, Problem, ResumeOffer, ResumeQuery, Store, MAX_PEERS_PER_PROTOCOL,
};

use support::open;

const DOC: &str = "# Requirement\nGet product info by id.\n";
const ACTION: &str = "getProductInfo";
const A: &str = "http://127.0.0.1:8080/.well-known/wot#getProductInfo";
const B: &str = "http://127.0.0.1:8081/.well-known/wot#getProductInfo";
const LOCALHOST_A: &str = "http://localhost:8080/.well-known/wot#getProductInfo";

/// What a requester saves after negotiating `document` with `peer`.
fn negotiated(document: &str, peer: &str) -> NewProtocol {
    NewProtocol::negotiated(document, peer)
        .with_action(ACTION)
        .with_handler(Role::Requester, "function encodeRequest(i) { return i; }")
}

/// A requester's query for `peer` and the product-info action.
fn query(peer: &str) -> ResumeQuery<'_> {
    ResumeQuery {
        peer,
        action: ACTION,
        role: Role::Requester,
    }
}

fn this_peer(hash: ProtocolHash) -> Option<ResumeOffer> {
    Some(ResumeOffer {
        hash,
        held_by: HeldBy::ThisPeer,
    })
}

fn other_peer(hash: ProtocolHash, peer: &str) -> Option<ResumeOffer> {
    Some(ResumeOffer {
        hash,
        held_by: HeldBy::OtherPeer {
            peer: peer.to_owned(),
        },
    })
}

/// Rows of `protocol_peers`, read behind the store's back.
fn peer_rows(store: &Store) -> i64 {
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .query_row("SELECT count(*) FROM protocol_peers", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn one_hash_keeps_every_peer_it_was_saved_for() {
    let (_dir, store) = open();
    let hash = store.save_protocol(&negotiated(DOC, A)).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    // The same text agreed with a second agent: the same hash, one more peer.
    assert_eq!(store.save_protocol(&negotiated(DOC, B)).unwrap(), hash);

    let stored = store.protocol(&hash).unwrap().unwrap();
    assert_eq!(stored.peers, [B, A], "most recent first; A is not lost");
    assert_eq!(stored.action.as_deref(), Some(ACTION));
    let listed = store.list_protocols().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].peers, [B, A]);
    assert_eq!(listed[0].action.as_deref(), Some(ACTION));

    // Either peer gets it offered as its own.
    assert_eq!(store.latest_resumable(&query(A)).unwrap(), this_peer(hash));
    assert_eq!(store.latest_resumable(&query(B)).unwrap(), this_peer(hash));

    // Saving for a peer it has does not duplicate it, and moves it to the front.
    store.save_protocol(&negotiated(DOC, A)).unwrap();
    assert_eq!(store.protocol(&hash).unwrap().unwrap().peers, [A, B]);
    assert_eq!(peer_rows(&store), 2);
}

#[test]
fn a_use_records_the_peer_and_its_last_use() {
    let (_dir, store) = open();
    let hash = store.save_protocol(&negotiated(DOC, A)).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    store.save_protocol(&negotiated(DOC, B)).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    // A 0-RTT resume through another name of A.
    assert_eq!(store.touch_protocol(&hash, LOCALHOST_A).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(store.touch_protocol(&hash, A).unwrap(), 2);

    let stored = store.protocol(&hash).unwrap().unwrap();
    assert_eq!(stored.peers, [A, LOCALHOST_A, B]);
    assert_eq!(stored.use_count, 2);
    assert_eq!(
        store.latest_resumable(&query(LOCALHOST_A)).unwrap(),
        this_peer(hash)
    );
}

#[test]
fn a_new_peer_is_offered_the_latest_protocol_for_the_same_action() {
    let (_dir, store) = open();
    let first = store.save_protocol(&negotiated("# first\n", A)).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let second = store.save_protocol(&negotiated("# second\n", B)).unwrap();

    // Nothing saved for this peer: the most recent protocol for the action, from B.
    assert_eq!(
        store.latest_resumable(&query(LOCALHOST_A)).unwrap(),
        other_peer(second, B)
    );
    // A use of the first one makes it the most recent.
    std::thread::sleep(Duration::from_millis(2));
    store.touch_protocol(&first, A).unwrap();
    assert_eq!(
        store.latest_resumable(&query(LOCALHOST_A)).unwrap(),
        other_peer(first, A)
    );
    // The exact peer's own protocol wins over a more recent one of another peer.
    std::thread::sleep(Duration::from_millis(2));
    store.touch_protocol(&second, B).unwrap();
    assert_eq!(store.latest_resumable(&query(A)).unwrap(), this_peer(first));

    // Another action, or another role's handler only: nothing to offer.
    let other_action = ResumeQuery {
        action: "listProducts",
        ..query(LOCALHOST_A)
    };
    assert_eq!(store.latest_resumable(&other_action).unwrap(), None);
    let as_provider = ResumeQuery {
        role: Role::Provider,
        ..query(LOCALHOST_A)
    };
    assert_eq!(store.latest_resumable(&as_provider).unwrap(), None);
}

#[test]
fn a_protocol_without_a_recorded_action_is_offered_to_its_own_peers_only() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, A).with_handler(Role::Requester, "js"))
        .unwrap();
    assert_eq!(store.latest_resumable(&query(A)).unwrap(), this_peer(hash));
    assert_eq!(store.latest_resumable(&query(B)).unwrap(), None);
    // Saved again with the action (negotiated once more, with B): offered to new peers.
    store.save_protocol(&negotiated(DOC, B)).unwrap();
    assert_eq!(
        store.latest_resumable(&query(LOCALHOST_A)).unwrap(),
        other_peer(hash, B)
    );
}

#[test]
fn a_corrupt_protocol_is_never_offered_to_another_peer() {
    let (dir, store) = open();
    let good = store.save_protocol(&negotiated("# good\n", A)).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let bad = store.save_protocol(&negotiated("# bad\n", B)).unwrap();
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute(
            "UPDATE protocols SET document = 'tampered' WHERE hash = ?1",
            [bad.to_string()],
        )
        .unwrap();
    // The next process to open the store has not verified the tampered row.
    let store = Store::open(dir.path()).unwrap();
    // The newest for the action is corrupt: skipped, the older good one is offered.
    assert_eq!(
        store.latest_resumable(&query(LOCALHOST_A)).unwrap(),
        other_peer(good, A)
    );
    // B's own (corrupt) protocol is skipped too, and A's is offered instead.
    assert_eq!(
        store.latest_resumable(&query(B)).unwrap(),
        other_peer(good, A)
    );
}

#[test]
fn forgetting_a_protocol_removes_its_peers() {
    let (_dir, store) = open();
    let hash = store.save_protocol(&negotiated(DOC, A)).unwrap();
    store.save_protocol(&negotiated(DOC, B)).unwrap();
    let kept = store.save_protocol(&negotiated("# kept\n", A)).unwrap();
    assert_eq!(peer_rows(&store), 3);

    assert_eq!(store.forget_protocol(&hash.to_string()).unwrap(), hash);
    assert_eq!(peer_rows(&store), 1);
    assert_eq!(store.protocol(&kept).unwrap().unwrap().peers, [A]);
    assert_eq!(
        store.latest_resumable(&query(B)).unwrap(),
        other_peer(kept, A)
    );
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn a_protocol_keeps_at_most_the_most_recent_peers() {
    let (_dir, store) = open();
    let extra = 3;
    let peers: Vec<String> = (0..MAX_PEERS_PER_PROTOCOL + extra)
        .map(|n| format!("ws://127.0.0.1:{}", 40_000 + n))
        .collect();
    let hash = store.save_protocol(&negotiated(DOC, &peers[0])).unwrap();
    for peer in &peers[1..] {
        store.touch_protocol(&hash, peer).unwrap();
    }
    let stored = store.protocol(&hash).unwrap().unwrap();
    assert_eq!(stored.peers.len(), MAX_PEERS_PER_PROTOCOL);
    let newest_first: Vec<String> = peers[extra..].iter().rev().cloned().collect();
    assert_eq!(stored.peers, newest_first);
    assert_eq!(peer_rows(&store), MAX_PEERS_PER_PROTOCOL as i64);
}

#[test]
fn an_unreadable_peer_is_skipped_and_reported() {
    let (_dir, store) = open();
    let hash = store.save_protocol(&negotiated(DOC, A)).unwrap();
    store.save_protocol(&negotiated(DOC, B)).unwrap();
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute(
            "UPDATE protocol_peers SET peer = CAST(x'ff' AS TEXT) WHERE peer = ?1",
            [B],
        )
        .unwrap();
    // The protocol is still read, listed and offered; the bad entry is left out.
    assert_eq!(store.protocol(&hash).unwrap().unwrap().peers, [A]);
    assert_eq!(store.list_protocols().unwrap()[0].peers, [A]);
    assert_eq!(store.latest_resumable(&query(A)).unwrap(), this_peer(hash));
    assert_eq!(
        store.latest_resumable(&query(LOCALHOST_A)).unwrap(),
        other_peer(hash, A)
    );
    match store.check().unwrap().as_slice() {
        [Problem::Row { table, detail }] => {
            assert_eq!(*table, "protocol_peers");
            assert!(detail.contains("peer"), "{detail}");
        }
        other => panic!("expected one unreadable peer row, got {other:?}"),
    }
}

/// Schema version 1, as the first release created it (one `peer` per protocol).
const SCHEMA_V1: &str = r#"
    PRAGMA application_id = 1131307876;
    CREATE TABLE protocols (
        hash              TEXT PRIMARY KEY NOT NULL
                          CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
        document          TEXT NOT NULL,
        requester_handler TEXT,
        provider_handler  TEXT,
        test_cases        TEXT,
        peer              TEXT NOT NULL,
        settlement        TEXT NOT NULL CHECK (settlement IN ('negotiated', 'consensus')),
        consensus_uri     TEXT,
        created_ms        INTEGER NOT NULL,
        last_used_ms      INTEGER,
        use_count         INTEGER NOT NULL DEFAULT 0 CHECK (use_count >= 0),
        CHECK ((settlement = 'consensus') = (consensus_uri IS NOT NULL))
    ) STRICT;
    CREATE INDEX protocols_by_created ON protocols (created_ms);
    CREATE INDEX protocols_by_peer ON protocols (peer);
    CREATE TABLE consensus_protocols (
        uri               TEXT PRIMARY KEY NOT NULL CHECK (length(uri) > 0),
        hash              TEXT NOT NULL
                          CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
        document          TEXT NOT NULL,
        requester_handler TEXT,
        provider_handler  TEXT,
        added_ms          INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE transcripts (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        peer        TEXT NOT NULL,
        role        TEXT NOT NULL CHECK (role IN ('requester', 'provider')),
        started_ms  INTEGER NOT NULL,
        finished_ms INTEGER,
        outcome     TEXT CHECK (outcome IN ('agreed', 'rejected', 'failed')),
        detail      TEXT,
        frame_count INTEGER NOT NULL DEFAULT 0 CHECK (frame_count >= 0),
        CHECK ((finished_ms IS NULL) = (outcome IS NULL)),
        CHECK ((outcome IS NULL) = (detail IS NULL))
    ) STRICT;
    CREATE INDEX transcripts_by_started ON transcripts (started_ms);
    CREATE TABLE transcript_frames (
        transcript_id INTEGER NOT NULL REFERENCES transcripts (id) ON DELETE CASCADE,
        seq           INTEGER NOT NULL CHECK (seq >= 0),
        direction     TEXT NOT NULL CHECK (direction IN ('sent', 'received')),
        kind          TEXT NOT NULL CHECK (kind IN
                          ('hello', 'meta', 'application', 'natural-language', 'verification')),
        text          TEXT,
        byte_len      INTEGER CHECK (byte_len >= 0),
        at_ms         INTEGER NOT NULL,
        CHECK ((text IS NULL) <> (byte_len IS NULL)),
        PRIMARY KEY (transcript_id, seq)
    ) STRICT, WITHOUT ROWID;
    PRAGMA user_version = 1;
"#;

#[test]
fn a_version_1_store_is_migrated_its_peers_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Store::FILE_NAME);
    let used = ProtocolHash::of_text("# used\n");
    let fresh = ProtocolHash::of_text("# fresh\n");
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection.execute_batch(SCHEMA_V1).unwrap();
        connection
            .execute(
                "INSERT INTO protocols (hash, document, requester_handler, peer, settlement,
                     created_ms, last_used_ms, use_count)
                 VALUES (?1, '# used' || char(10), 'js', ?2, 'negotiated', 1000, 5000, 3)",
                [used.to_string(), A.to_owned()],
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO protocols (hash, document, provider_handler, peer, settlement,
                     consensus_uri, created_ms)
                 VALUES (?1, '# fresh' || char(10), 'js', 'ws://127.0.0.1:5000', 'consensus',
                     'urn:c', 2000)",
                [fresh.to_string()],
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO transcripts (peer, role, started_ms) VALUES ('p', 'provider', 0)",
                [],
            )
            .unwrap();
    }

    let store = Store::open(dir.path()).unwrap();
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, Store::schema_version());
    assert!(store.check().unwrap().is_empty());

    // Each old peer is the first entry of its protocol; everything else is kept.
    let stored = store.protocol(&used).unwrap().unwrap();
    assert_eq!(stored.peers, [A]);
    assert_eq!(stored.action, None);
    assert_eq!(stored.use_count, 3);
    assert_eq!(stored.handlers.get(Role::Requester), Some("js"));
    let stored = store.protocol(&fresh).unwrap().unwrap();
    assert_eq!(stored.peers, ["ws://127.0.0.1:5000"]);
    assert_eq!(store.list_protocols().unwrap().len(), 2);
    assert_eq!(store.list_transcripts(10).unwrap().len(), 1);

    // Offered to its peer as before (no action recorded yet: to that peer only).
    assert_eq!(store.latest_resumable(&query(A)).unwrap(), this_peer(used));
    assert_eq!(store.latest_resumable(&query(B)).unwrap(), None);
    // Saved with another peer: added, the old one kept.
    store.save_protocol(&negotiated("# used\n", B)).unwrap();
    assert_eq!(store.protocol(&used).unwrap().unwrap().peers, [B, A]);

    // Reopening does not migrate again.
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.protocol(&used).unwrap().unwrap().peers, [B, A]);
}
