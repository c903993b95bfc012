//! The schema and its migrations, versioned with `PRAGMA user_version`.
//!
//! Migration `n` (1-based) takes a file from version `n - 1` to `n`. All pending
//! migrations run in one `IMMEDIATE` transaction together with the version bump, so a
//! crash leaves the file at the old version or the new one, never in between, and two
//! processes opening the same file at once migrate it once.

use rusqlite::{Connection, TransactionBehavior};

/// `PRAGMA application_id` of a Concord store ("Cncd").
pub(crate) const APPLICATION_ID: i64 = 0x436e_6364;

/// Schema migrations, oldest first. Never edit a released entry: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: protocols, consensus registry, transcripts.
    r#"
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
    "#,
    // 2: a set of peers per protocol (one column replaced by a table), and the action a
    // protocol calls. Each stored protocol's peer becomes its first entry, last used when
    // the protocol was; its action stays unknown (NULL) until it is saved or used again.
    r#"
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
    "#,
    // 3: bounded transcripts and protocols. A frame whose text was cut keeps its prefix in
    // `text` with the whole text's size and SHA-256; a transcript counts the frames beyond
    // its bound that were not recorded; negotiated protocols are evicted least recently
    // used first; which roles have a handler is answered from an index (a 0-RTT check of
    // a verified document never reads its row).
    r#"
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
    "#,
    // 4: how each session was protected (`Noise_XX_…; peer authenticated as did:…`,
    // `plain; peer anonymous`), set by the node once the session is established; NULL for
    // transcripts recorded before (unknown).
    r#"
    ALTER TABLE transcripts ADD COLUMN channel TEXT;
    "#,
    // 5: the nonces of accepted DID-signed upgrades, each until its signature could no
    // longer be valid, so that a header accepted before a restart is refused after it.
    r#"
    CREATE TABLE auth_nonces (
        did TEXT NOT NULL CHECK (length(did) > 0),
        nonce TEXT NOT NULL CHECK (length(nonce) > 0),
        recorded INTEGER NOT NULL,
        expires INTEGER NOT NULL CHECK (expires >= recorded),
        UNIQUE (did, nonce)
    );
    CREATE INDEX auth_nonces_by_expiry ON auth_nonces (expires);
    "#,
    // 6: a Thing Description Directory (`concord_directory::DirectoryStore`): the TDs
    // registered, their capability-search keys, and the change events (ids never reused:
    // AUTOINCREMENT keeps the latest in `sqlite_sequence` when retention drops them all).
    r#"
    -- `td` is the last column: reading any other column of a row never walks the TD's
    -- overflow pages. `directory_things_live` covers listing and counting (id order, the
    -- expiry filter) without reading a row.
    CREATE TABLE directory_things (
        id          TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
        anonymous   INTEGER NOT NULL CHECK (anonymous IN (0, 1)),
        created_ms  INTEGER NOT NULL,
        modified_ms INTEGER NOT NULL,
        expires_ms  INTEGER,
        ttl_ms      INTEGER CHECK (ttl_ms >= 0),
        owner       TEXT,
        client      TEXT,
        size        INTEGER NOT NULL CHECK (size >= 0),
        revision    INTEGER NOT NULL CHECK (revision > 0),
        td          TEXT NOT NULL
    ) STRICT;
    CREATE INDEX directory_things_live ON directory_things (id, expires_ms);
    CREATE INDEX directory_things_by_expiry ON directory_things (expires_ms)
        WHERE expires_ms IS NOT NULL;
    CREATE INDEX directory_things_by_owner ON directory_things (owner) WHERE owner IS NOT NULL;
    CREATE INDEX directory_things_by_client ON directory_things (client) WHERE client IS NOT NULL;

    CREATE TABLE directory_keys (
        kind  TEXT NOT NULL,
        value TEXT NOT NULL,
        id    TEXT NOT NULL REFERENCES directory_things (id) ON DELETE CASCADE,
        PRIMARY KEY (kind, value, id)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX directory_keys_by_id ON directory_keys (id);

    CREATE TABLE directory_events (
        id    INTEGER PRIMARY KEY AUTOINCREMENT,
        kind  TEXT NOT NULL
              CHECK (kind IN ('thing_created', 'thing_updated', 'thing_deleted')),
        thing TEXT NOT NULL,
        diff  TEXT,
        at_ms INTEGER NOT NULL
    ) STRICT;
    "#,
];

/// The schema version this build writes.
pub(crate) const LATEST_VERSION: i64 = MIGRATIONS.len() as i64;

/// What [`migrate`] found wrong with a file before touching it.
#[derive(Debug)]
pub(crate) enum MigrateError {
    Sqlite(rusqlite::Error),
    Foreign { application_id: i64 },
    Unsupported { found: i64 },
}

impl From<rusqlite::Error> for MigrateError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sqlite(error)
    }
}

/// Brings the file to [`LATEST_VERSION`], claiming an empty file for Concord.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), MigrateError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let application_id: i64 = tx.pragma_query_value(None, "application_id", |row| row.get(0))?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if application_id != APPLICATION_ID {
        let tables: i64 =
            tx.query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))?;
        if application_id != 0 || version != 0 || tables != 0 {
            return Err(MigrateError::Foreign { application_id });
        }
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    let Some(done) = usize::try_from(version)
        .ok()
        .filter(|_| version <= LATEST_VERSION)
    else {
        return Err(MigrateError::Unsupported { found: version });
    };
    for migration in MIGRATIONS.iter().skip(done) {
        tx.execute_batch(migration)?;
    }
    if version != LATEST_VERSION {
        tx.pragma_update(None, "user_version", LATEST_VERSION)?;
    }
    tx.commit()?;
    Ok(())
}
