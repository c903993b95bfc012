//! How each session was protected (schema version 4): set once the session is
//! established, read back by every reader, cut to its bound, and NULL (unknown) for the
//! transcripts of a store written with schema version 3.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use concord_proto::Role;
use concord_store::{Outcome, Store, StoreError, TranscriptId, MAX_CHANNEL_BYTES};

use support::open;

const NOISE: &str = "Noise_XX_25519_ChaChaPoly_BLAKE2s; peer authenticated as \
                     did:wba:localhost%3A8080:agents:e1_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ";
const PLAIN: &str = "plain; peer anonymous";

fn at(millis: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_760_000_000_000 + millis)
}

#[test]
fn a_channel_set_reads_back_in_the_transcript_and_the_listing() {
    let (_dir, store) = open();
    let noise = store
        .begin_transcript("ws://127.0.0.1:9000", Role::Requester, at(0))
        .unwrap();
    let plain = store
        .begin_transcript("ws://127.0.0.1:9001", Role::Provider, at(1))
        .unwrap();
    let unset = store
        .begin_transcript("ws://127.0.0.1:9002", Role::Provider, at(2))
        .unwrap();
    store.set_transcript_channel(noise, NOISE).unwrap();
    store.set_transcript_channel(plain, PLAIN).unwrap();

    let channel = |id| store.transcript(id).unwrap().unwrap().summary.channel;
    assert_eq!(channel(noise).as_deref(), Some(NOISE));
    assert_eq!(channel(plain).as_deref(), Some(PLAIN));
    assert_eq!(channel(unset), None);

    let listed: Vec<(TranscriptId, Option<String>)> = store
        .list_transcripts(10)
        .unwrap()
        .into_iter()
        .map(|summary| (summary.id, summary.channel))
        .collect();
    assert_eq!(
        listed,
        [
            (unset, None),
            (plain, Some(PLAIN.to_owned())),
            (noise, Some(NOISE.to_owned())),
        ]
    );

    // Kept through finishing; a finished transcript may still be given its channel.
    store
        .finish_transcript(noise, &Outcome::Failed("x".into()), at(5))
        .unwrap();
    assert_eq!(channel(noise).as_deref(), Some(NOISE));
    store
        .finish_transcript(unset, &Outcome::Failed("y".into()), at(6))
        .unwrap();
    store.set_transcript_channel(unset, PLAIN).unwrap();
    assert_eq!(channel(unset).as_deref(), Some(PLAIN));
}

#[test]
fn a_long_channel_is_cut_at_a_character_boundary() {
    let (_dir, store) = open();
    let id = store
        .begin_transcript("ws://127.0.0.1:9000", Role::Provider, at(0))
        .unwrap();
    // 'é' is 2 bytes: 1 + 2k never lands on the bound exactly.
    let long = format!("p{}", "é".repeat(MAX_CHANNEL_BYTES));
    store.set_transcript_channel(id, &long).unwrap();
    let kept = store
        .transcript(id)
        .unwrap()
        .unwrap()
        .summary
        .channel
        .unwrap();
    assert_eq!(kept.len(), MAX_CHANNEL_BYTES - 1);
    assert!(long.starts_with(&kept));
    let exact = "x".repeat(MAX_CHANNEL_BYTES);
    store.set_transcript_channel(id, &exact).unwrap();
    let kept = store
        .transcript(id)
        .unwrap()
        .unwrap()
        .summary
        .channel
        .unwrap();
    assert_eq!(kept, exact);
}

#[test]
fn an_unknown_transcript_is_a_typed_error() {
    let (_dir, store) = open();
    let error = store
        .set_transcript_channel(TranscriptId::from(42), PLAIN)
        .unwrap_err();
    assert!(
        matches!(error, StoreError::UnknownTranscript { id } if id.get() == 42),
        "{error}"
    );
}

#[test]
fn a_version_3_store_is_migrated_its_transcripts_channel_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Store::FILE_NAME);
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection.execute_batch(SCHEMA_V3).unwrap();
        connection
            .execute(
                "INSERT INTO transcripts
                     (peer, role, started_ms, finished_ms, outcome, detail, frame_count)
                 VALUES ('ws://old', 'provider', 1000, 2000, 'failed', 'gone', 1)",
                [],
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO transcript_frames (transcript_id, seq, direction, kind, text, at_ms)
                 VALUES (1, 0, 'received', 'hello', '{}', 1500)",
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
    assert!(version >= 4);
    assert_eq!(store.check().unwrap(), []);

    let old = store.list_transcripts(10).unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!(old[0].peer, "ws://old");
    assert_eq!(old[0].channel, None);
    assert_eq!(old[0].frame_count, 1);
    let whole = store.transcript(old[0].id).unwrap().unwrap();
    assert_eq!(whole.frames.len(), 1);
    assert_eq!(whole.summary.channel, None);

    // New transcripts record theirs next to the old ones.
    let id = store
        .begin_transcript("ws://new", Role::Requester, at(0))
        .unwrap();
    store.set_transcript_channel(id, NOISE).unwrap();
    drop(store);
    // Reopening does not migrate again and keeps both.
    let store = Store::open(dir.path()).unwrap();
    let channels: Vec<Option<String>> = store
        .list_transcripts(10)
        .unwrap()
        .into_iter()
        .map(|summary| summary.channel)
        .collect();
    assert_eq!(channels, [Some(NOISE.to_owned()), None]);
}

/// Schema version 3, as the release before the channel column created it (version 1 and
/// migrations 2 and 3, verbatim).
const SCHEMA_V3: &str = r#"
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
    CREATE TABLE protocol_peers (
        hash         TEXT NOT NULL
                     REFERENCES protocols (hash) ON DELETE CASCADE ON UPDATE CASCADE,
        peer         TEXT NOT NULL,
        last_used_ms INTEGER NOT NULL,
        PRIMARY KEY (hash, peer)
    ) STRICT;
    CREATE INDEX protocol_peers_by_peer ON protocol_peers (peer, last_used_ms);
    INSERT INTO protocol_peers (hash, peer, last_used_ms)
        SELECT hash, peer, coalesce(last_used_ms, created_ms) FROM protocols;
    DROP INDEX protocols_by_peer;
    ALTER TABLE protocols DROP COLUMN peer;
    ALTER TABLE protocols ADD COLUMN action TEXT CHECK (length(action) > 0);
    CREATE INDEX protocols_by_action ON protocols (action);
    ALTER TABLE transcript_frames ADD COLUMN full_len INTEGER CHECK (full_len >= 0);
    ALTER TABLE transcript_frames ADD COLUMN sha256 TEXT
        CHECK (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*');
    ALTER TABLE transcripts ADD COLUMN frames_not_recorded INTEGER NOT NULL DEFAULT 0
        CHECK (frames_not_recorded >= 0);
    CREATE INDEX transcripts_by_finished_start ON transcripts (started_ms, id)
        WHERE finished_ms IS NOT NULL;
    CREATE INDEX protocols_by_recency ON protocols (coalesce(last_used_ms, created_ms))
        WHERE settlement = 'negotiated';
    CREATE INDEX protocols_roles ON protocols
        (hash, requester_handler IS NOT NULL, provider_handler IS NOT NULL);
    PRAGMA user_version = 3;
"#;
