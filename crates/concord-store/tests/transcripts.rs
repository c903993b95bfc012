//! Negotiation transcripts on a real file.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use concord_proto::{Frame, ProtocolHash, ProtocolType, Role};
use concord_store::{
    Direction, FrameContent, FrameKind, FrameRecord, Outcome, StoreError, TranscriptId,
    TranscriptRetention,
};

use support::open;

fn at(millis: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_760_000_000_000 + millis)
}

fn frame(direction: Direction, protocol_type: ProtocolType, data: &[u8], t: u64) -> FrameRecord {
    let bytes = Frame::encode(protocol_type, data);
    FrameRecord::from_frame(direction, &Frame::decode(&bytes, 1 << 20).unwrap(), at(t))
}

#[test]
fn records_a_whole_negotiation_in_order() {
    let (_dir, store) = open();
    let peer = "https://provider.example/.well-known/wot";
    let id = store
        .begin_transcript(peer, Role::Requester, at(0))
        .unwrap();
    let proposal = r##"{"action":"protocolNegotiation","sequenceId":0,"candidateProtocols":"# P","status":"negotiating"}"##;
    let frames = [
        FrameRecord::hello(Direction::Sent, r#"{"type":"sourceHello"}"#, at(1)),
        FrameRecord::hello(Direction::Received, r#"{"type":"destinationHello"}"#, at(2)),
        frame(Direction::Sent, ProtocolType::Meta, proposal.as_bytes(), 3),
        frame(
            Direction::Received,
            ProtocolType::NaturalLanguage,
            "Bonjour ✓".as_bytes(),
            4,
        ),
        frame(Direction::Sent, ProtocolType::Application, &[0u8; 300], 5),
        frame(Direction::Received, ProtocolType::Verification, b"{}", 6),
        // A meta frame that is not UTF-8 keeps only its length.
        frame(Direction::Received, ProtocolType::Meta, &[0xff, 0xfe], 7),
    ];
    for (expected, record) in frames.iter().enumerate() {
        assert_eq!(
            store.append_frame(id, record).unwrap(),
            Some(expected as u64)
        );
    }
    let agreed = ProtocolHash::of_text("# P");
    store
        .finish_transcript(id, &Outcome::Agreed(agreed), at(8))
        .unwrap();

    let transcript = store.transcript(id).unwrap().unwrap();
    assert_eq!(transcript.frames, frames);
    assert_eq!(
        transcript.frames[2].content,
        FrameContent::Text(proposal.to_owned())
    );
    assert_eq!(transcript.frames[3].kind, FrameKind::NaturalLanguage);
    assert_eq!(
        transcript.frames[4].content,
        FrameContent::Binary { len: 300 }
    );
    assert_eq!(
        transcript.frames[6].content,
        FrameContent::Binary { len: 2 }
    );
    let summary = &transcript.summary;
    assert_eq!(summary.id, id);
    assert_eq!(summary.peer, peer);
    assert_eq!(summary.role, Role::Requester);
    assert_eq!(summary.started, at(0));
    assert_eq!(summary.finished, Some(at(8)));
    assert_eq!(summary.outcome, Some(Outcome::Agreed(agreed)));
    assert_eq!(summary.frame_count, 7);
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn outcomes_round_trip() {
    let (_dir, store) = open();
    let outcomes = [
        Outcome::Agreed(ProtocolHash::of_text("x")),
        Outcome::Rejected("round cap of 10 messages reached".into()),
        Outcome::Failed("peer disconnected during codeGeneration".into()),
    ];
    for (n, outcome) in outcomes.iter().enumerate() {
        let id = store
            .begin_transcript("peer", Role::Provider, at(n as u64))
            .unwrap();
        store
            .finish_transcript(id, outcome, at(n as u64 + 1))
            .unwrap();
        assert_eq!(
            store
                .transcript(id)
                .unwrap()
                .unwrap()
                .summary
                .outcome
                .as_ref(),
            Some(outcome)
        );
    }
}

#[test]
fn finished_and_unknown_transcripts_refuse_writes() {
    let (_dir, store) = open();
    let id = store
        .begin_transcript("peer", Role::Provider, at(0))
        .unwrap();
    let record = FrameRecord::hello(Direction::Received, "{}", at(1));
    store
        .finish_transcript(id, &Outcome::Rejected("no".into()), at(2))
        .unwrap();
    assert!(matches!(
        store.append_frame(id, &record),
        Err(StoreError::TranscriptFinished { id: i }) if i == id
    ));
    assert!(matches!(
        store.finish_transcript(id, &Outcome::Failed("again".into()), at(3)),
        Err(StoreError::TranscriptFinished { .. })
    ));
    // The first outcome stands.
    assert_eq!(
        store.transcript(id).unwrap().unwrap().summary.outcome,
        Some(Outcome::Rejected("no".into()))
    );

    let unknown = TranscriptId::from(999);
    assert!(matches!(
        store.append_frame(unknown, &record),
        Err(StoreError::UnknownTranscript { id }) if id == unknown
    ));
    assert!(matches!(
        store.finish_transcript(unknown, &Outcome::Failed("x".into()), at(1)),
        Err(StoreError::UnknownTranscript { .. })
    ));
    assert_eq!(store.transcript(unknown).unwrap(), None);
}

#[test]
fn list_is_newest_first_and_limited() {
    let (_dir, store) = open();
    let ids: Vec<_> = (0..5)
        .map(|n| {
            store
                .begin_transcript(&format!("peer-{n}"), Role::Requester, at(n * 10))
                .unwrap()
        })
        .collect();
    store
        .append_frame(ids[4], &FrameRecord::hello(Direction::Sent, "{}", at(41)))
        .unwrap();
    let list = store.list_transcripts(3).unwrap();
    assert_eq!(
        list.iter().map(|s| s.id).collect::<Vec<_>>(),
        [ids[4], ids[3], ids[2]]
    );
    assert_eq!(list[0].frame_count, 1);
    assert_eq!(list[0].finished, None);
    assert_eq!(list[0].outcome, None);
    assert_eq!(store.list_transcripts(100).unwrap().len(), 5);
}

#[test]
fn prune_deletes_old_transcripts_with_their_frames_and_ids_are_not_reused() {
    let (_dir, store) = open();
    let old = store
        .begin_transcript("peer", Role::Requester, at(0))
        .unwrap();
    store
        .append_frame(old, &FrameRecord::hello(Direction::Sent, "{}", at(1)))
        .unwrap();
    let new = store
        .begin_transcript("peer", Role::Requester, at(100))
        .unwrap();
    for id in [old, new] {
        store
            .finish_transcript(id, &Outcome::Failed("closed".into()), at(200))
            .unwrap();
    }
    let before = |time| TranscriptRetention::all().started_before(time);
    assert_eq!(store.prune_transcripts_by(&before(at(50))).unwrap(), 1);
    assert_eq!(store.transcript(old).unwrap(), None);
    assert!(store.transcript(new).unwrap().is_some());
    assert!(store.check().unwrap().is_empty(), "no orphan frames");

    // Deleting the newest must not hand its id out again.
    assert_eq!(store.prune_transcripts_by(&before(at(1000))).unwrap(), 1);
    let next = store
        .begin_transcript("peer", Role::Requester, at(2000))
        .unwrap();
    assert!(next > new);
}

#[test]
fn a_broken_transcript_is_reported_by_check() {
    let (_dir, store) = open();
    let id = store
        .begin_transcript("peer", Role::Requester, at(0))
        .unwrap();
    for n in 0..3 {
        store
            .append_frame(id, &FrameRecord::hello(Direction::Sent, "{}", at(n)))
            .unwrap();
    }
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute("DELETE FROM transcript_frames WHERE seq = 1", [])
        .unwrap();
    let problems = store.check().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .to_string()
            .contains(&format!("transcript {id}")),
        "{}",
        problems[0]
    );
}
