//! What keeps the store bounded against a hostile peer: transcripts keep a bounded prefix
//! of each text and a bounded number of frames, pruning runs in batches, negotiated
//! protocols are evicted least recently used first, and a 0-RTT check on a verified
//! document costs a lookup, not a re-hash.

mod support;

use std::time::{Duration, Instant, SystemTime};

use concord_proto::{Frame, ProtocolHash, ProtocolType, Role};
use concord_store::{
    Direction, FrameContent, FrameRecord, NewProtocol, Outcome, Problem, Store, StoreError,
    TranscriptBounds, TranscriptRetention,
};
use rusqlite::TransactionBehavior;

use support::open;

/// Bytes of the database file and its write-ahead log.
fn stored_bytes(store: &Store) -> u64 {
    let file = std::fs::metadata(store.path()).unwrap().len();
    file + store.wal_bytes().unwrap()
}

#[test]
fn a_10_mb_hello_is_kept_as_a_prefix_with_its_size_and_hash() {
    let (_dir, store) = open();
    let before = stored_bytes(&store);
    let hello = format!(
        r#"{{"messageType":"sourceHello","messageId":"{}"}}"#,
        "m".repeat(10_000_000)
    );
    let id = store
        .begin_transcript("hostile", Role::Provider, SystemTime::now())
        .unwrap();
    store
        .append_frame(
            id,
            &FrameRecord::hello(Direction::Received, hello.as_str(), SystemTime::now()),
        )
        .unwrap();
    // A meta frame of 10 MB too, cut by the recorder's constructor before the store.
    let meta = Frame::encode(ProtocolType::Meta, hello.as_bytes());
    let frame = Frame::decode(&meta, usize::MAX).unwrap();
    let record =
        FrameRecord::from_frame_within(Direction::Received, &frame, 4096, SystemTime::now());
    store.append_frame(id, &record).unwrap();
    store
        .finish_transcript(id, &Outcome::Failed("closed".into()), SystemTime::now())
        .unwrap();

    let grown = stored_bytes(&store) - before;
    assert!(
        grown < 200_000,
        "20 MB of frames cost {grown} bytes on disk"
    );
    let transcript = store.transcript(id).unwrap().unwrap();
    assert_eq!(transcript.frames.len(), 2);
    for frame in &transcript.frames {
        let FrameContent::Text(prefix) = &frame.content else {
            panic!("binary: {:?}", frame.kind);
        };
        assert_eq!(prefix.len(), 4096);
        assert!(hello.starts_with(prefix.as_str()));
        let cut = frame.cut.as_ref().expect("kept cut");
        assert_eq!(cut.len, hello.len() as u64);
        assert_eq!(cut.sha256, ProtocolHash::of_text(&hello).to_string());
    }
    // The summary counts what was sent, not what was kept.
    assert_eq!(transcript.summary.bytes, 2 * hello.len() as u64);
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn a_cut_respects_character_boundaries_and_the_configured_bound() {
    let (_dir, store) = open();
    store.set_transcript_bounds(TranscriptBounds::new(5, 512));
    let id = store
        .begin_transcript("peer", Role::Requester, SystemTime::now())
        .unwrap();
    for text in ["short", "éééé"] {
        store
            .append_frame(
                id,
                &FrameRecord::hello(Direction::Sent, text, SystemTime::now()),
            )
            .unwrap();
    }
    let frames = store.transcript(id).unwrap().unwrap().frames;
    assert_eq!(frames[0].content, FrameContent::Text("short".into()));
    assert_eq!(frames[0].cut, None);
    assert_eq!(frames[1].content, FrameContent::Text("éé".into()));
    let cut = frames[1].cut.as_ref().unwrap();
    assert_eq!(cut.len, 8);
    assert_eq!(cut.sha256, ProtocolHash::of_text("éééé").to_string());
}

#[test]
fn frames_beyond_the_bound_are_counted_not_stored() {
    let (_dir, store) = open();
    assert_eq!(store.transcript_bounds().max_frames, 512);
    let id = store
        .begin_transcript("hostile", Role::Provider, SystemTime::now())
        .unwrap();
    let mut recorded = 0;
    for i in 0..1000 {
        let frame = FrameRecord::hello(
            Direction::Received,
            format!("{{\"n\":{i}}}"),
            SystemTime::now(),
        );
        if store.append_frame(id, &frame).unwrap().is_some() {
            recorded += 1;
        }
    }
    assert_eq!(recorded, 512);
    // A recorder that dropped frames says so too.
    store.count_unrecorded_frames(id, 3).unwrap();
    store
        .finish_transcript(id, &Outcome::Failed("closed".into()), SystemTime::now())
        .unwrap();
    store.count_unrecorded_frames(id, 1).unwrap();
    let transcript = store.transcript(id).unwrap().unwrap();
    assert_eq!(transcript.frames.len(), 512);
    assert_eq!(transcript.summary.frame_count, 512);
    assert_eq!(transcript.summary.frames_not_recorded, 488 + 3 + 1);
    assert!(store.check().unwrap().is_empty());
    assert!(matches!(
        store.count_unrecorded_frames(9999.into(), 1),
        Err(StoreError::UnknownTranscript { .. })
    ));
}

#[test]
fn a_large_prune_deletes_everything_it_should_in_batches() {
    let (_dir, store) = open();
    let start = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..1_200 {
        let id = store
            .begin_transcript("peer", Role::Provider, start + Duration::from_millis(i))
            .unwrap();
        store
            .finish_transcript(id, &Outcome::Failed("closed".into()), start)
            .unwrap();
    }
    let running = store
        .begin_transcript("peer", Role::Provider, start)
        .unwrap();
    let deleted = store
        .prune_transcripts_by(&TranscriptRetention::all().keep_newest(10))
        .unwrap();
    assert_eq!(deleted, 1_190);
    let age = TranscriptRetention::all().started_before(SystemTime::now());
    assert_eq!(store.prune_transcripts_by(&age).unwrap(), 10);
    let left = store.list_transcripts(10_000).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, running);
}

/// Saves a negotiated protocol with a provider handler, used `uses` times.
fn negotiated(store: &Store, document: &str, uses: usize) -> ProtocolHash {
    let hash = store
        .save_protocol(
            &NewProtocol::negotiated(document, "peer").with_handler(Role::Provider, "js"),
        )
        .unwrap();
    for _ in 0..uses {
        store.touch_protocol(&hash, "peer").unwrap();
    }
    hash
}

#[test]
fn protocols_beyond_the_bound_are_evicted_least_recently_used_first_never_consensus() {
    let (_dir, store) = open();
    let consensus = store
        .save_protocol(&NewProtocol::consensus("urn:c", "# consensus\n", "peer"))
        .unwrap();
    let old = negotiated(&store, "# old\n", 0);
    std::thread::sleep(Duration::from_millis(3));
    let newer = negotiated(&store, "# newer\n", 0);
    std::thread::sleep(Duration::from_millis(3));
    // Stored first, but used last: kept.
    store.touch_protocol(&old, "peer").unwrap();
    let newest = negotiated(&store, "# newest\n", 0);
    assert_eq!(store.prune_protocols(2).unwrap(), 1);
    assert!(store.protocol(&newer).unwrap().is_none());
    for kept in [old, newest, consensus] {
        assert!(store.protocol(&kept).unwrap().is_some());
    }
    // The evicted one is no longer resumable (its cached verification went with it).
    assert!(!store.can_resume(&newer, Role::Provider).unwrap());
    assert_eq!(store.prune_protocols(0).unwrap(), 2);
    assert_eq!(store.list_protocols().unwrap().len(), 1);
    assert!(store.protocol(&consensus).unwrap().is_some());
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn a_thousand_protocols_are_pruned_in_batches_to_the_bound() {
    let (_dir, store) = open();
    for i in 0..1_100 {
        negotiated(&store, &format!("# protocol {i}\n"), 0);
    }
    assert_eq!(store.prune_protocols(50).unwrap(), 1_050);
    assert_eq!(store.list_protocols().unwrap().len(), 50);
}

/// A 1 MB protocol document.
fn big_document() -> String {
    let mut document = String::from("# Requirement\n");
    while document.len() < 1 << 20 {
        document.push_str("The product id is a string of letters and digits.\n");
    }
    document
}

#[test]
fn a_verified_document_is_not_read_or_rehashed_by_zero_rtt_checks() {
    let (dir, store) = open();
    let hash = negotiated(&store, &big_document(), 0);
    // Corrupted on disk behind the store's back, AFTER this process hashed it to save it.
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute(
            "UPDATE protocols SET document = 'tampered' WHERE hash = ?1",
            [hash.to_string()],
        )
        .unwrap();
    // The 0-RTT checks answer from what this process verified: they do not read it.
    assert!(store.can_resume(&hash, Role::Provider).unwrap());
    assert!(!store.can_resume(&hash, Role::Requester).unwrap());
    // The explicit check re-hashes every row and reports it…
    assert!(matches!(
        store.check().unwrap().as_slice(),
        [Problem::Protocol { hash: h, .. }] if *h == hash
    ));
    // …after which the 0-RTT checks re-hash it too, and refuse it.
    assert!(matches!(
        store.can_resume(&hash, Role::Provider),
        Err(StoreError::CorruptProtocol { .. })
    ));
    // A process that had not verified it catches it at once.
    let fresh = Store::open(dir.path()).unwrap();
    assert!(matches!(
        fresh.can_resume(&hash, Role::Provider),
        Err(StoreError::CorruptProtocol { .. })
    ));
    // Saving the document again repairs the row, verified as written.
    negotiated(&store, &big_document(), 0);
    assert!(store.can_resume(&hash, Role::Provider).unwrap());
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn a_document_read_once_is_not_rehashed_again() {
    let (dir, store) = open();
    let hash = negotiated(&store, &big_document(), 0);
    let reader = Store::open(dir.path()).unwrap();
    // First read in this process: hashed (and sound).
    assert!(reader.can_resume(&hash, Role::Provider).unwrap());
    let first = Instant::now();
    for _ in 0..100 {
        assert!(reader.can_resume(&hash, Role::Provider).unwrap());
    }
    let elapsed = first.elapsed();
    println!("100 can_resume on a verified 1 MB document: {elapsed:?}");
    // Hashing 1 MB a hundred times takes far longer than this (and debug builds more).
    assert!(elapsed < Duration::from_millis(200), "{elapsed:?}");
    // `protocol` reads the row but does not re-hash it either: a tampered document of
    // valid UTF-8 is returned as read (the explicit check still finds it).
    rusqlite::Connection::open(reader.path())
        .unwrap()
        .execute(
            "UPDATE protocols SET document = 'tampered' WHERE hash = ?1",
            [hash.to_string()],
        )
        .unwrap();
    assert_eq!(
        reader.protocol(&hash).unwrap().unwrap().document,
        "tampered"
    );
    assert_eq!(reader.check().unwrap().len(), 1);
    assert!(reader.protocol(&hash).is_err());
}

#[test]
fn a_write_on_a_busy_store_is_a_busy_error() {
    let (_dir, store) = open();
    let id = store
        .begin_transcript("peer", Role::Provider, SystemTime::now())
        .unwrap();
    let mut other = rusqlite::Connection::open(store.path()).unwrap();
    let lock = other
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    // Waits out the store's busy timeout (5 s), then fails with a retryable error.
    let error = store
        .finish_transcript(id, &Outcome::Failed("closed".into()), SystemTime::now())
        .unwrap_err();
    assert!(error.is_busy(), "{error}");
    drop(lock);
    store
        .finish_transcript(id, &Outcome::Failed("closed".into()), SystemTime::now())
        .unwrap();
    assert!(!StoreError::UnknownTranscript { id }.is_busy());
}
