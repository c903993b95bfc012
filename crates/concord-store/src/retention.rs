//! Keeping transcripts in bounds: pruning by age and count, checkpointing the write-ahead
//! log so that it shrinks, and closing the transcripts a process that died left open.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rusqlite::{params, OptionalExtension, TransactionBehavior};

use crate::error::StoreError;
use crate::store::Store;
use crate::time::to_millis;
use crate::transcripts::Outcome;

/// Which finished transcripts [`Store::prune_transcripts_by`] deletes. Transcripts still
/// being recorded (no outcome yet) are never deleted.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use concord_store::TranscriptRetention;
///
/// // What a node keeps by default: a week, and at most 10,000.
/// let retention = TranscriptRetention::all()
///     .older_than(Duration::from_secs(7 * 24 * 3600), SystemTime::now())
///     .keep_newest(10_000);
/// assert_eq!(retention.newest_kept(), Some(10_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TranscriptRetention {
    started_before: Option<SystemTime>,
    keep_newest: Option<u64>,
}

impl TranscriptRetention {
    /// Keeps every transcript: add [`older_than`](Self::older_than),
    /// [`started_before`](Self::started_before) or [`keep_newest`](Self::keep_newest).
    pub fn all() -> Self {
        Self::default()
    }

    /// Deletes finished transcripts started more than `max_age` before `now`.
    pub fn older_than(self, max_age: Duration, now: SystemTime) -> Self {
        // A max age beyond the epoch deletes nothing by age rather than failing.
        match now.checked_sub(max_age) {
            Some(cutoff) => self.started_before(cutoff),
            None => self,
        }
    }

    /// Deletes finished transcripts started before `cutoff`.
    pub fn started_before(mut self, cutoff: SystemTime) -> Self {
        self.started_before = Some(cutoff);
        self
    }

    /// Keeps only the newest `count` finished transcripts (by start time), deleting older
    /// finished ones.
    pub fn keep_newest(mut self, count: u64) -> Self {
        self.keep_newest = Some(count);
        self
    }

    /// The start time before which finished transcripts are deleted, if any.
    pub fn cutoff(&self) -> Option<SystemTime> {
        self.started_before
    }

    /// How many finished transcripts are kept at most, if limited.
    pub fn newest_kept(&self) -> Option<u64> {
        self.keep_newest
    }
}

/// How hard [`Store::checkpoint`] tries to copy the write-ahead log into the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CheckpointMode {
    /// As much as it can without waiting for readers or writers (for a node in service);
    /// the log file keeps its size and is reused from its start.
    Passive,
    /// Waits (up to the store's 5 s busy timeout) for other connections, copies the whole
    /// log, then truncates the log file to zero bytes.
    Truncate,
}

impl CheckpointMode {
    fn pragma(self) -> &'static str {
        match self {
            Self::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
            Self::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
        }
    }
}

/// What a checkpoint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Checkpoint {
    /// Whether the whole log was copied (`false` when another connection held it up: a
    /// reader or writer in another process).
    pub complete: bool,
    /// Pages in the log when it finished (0 after a complete truncating checkpoint).
    pub log_pages: u64,
    /// Pages of the log copied into the database.
    pub checkpointed_pages: u64,
}

/// The most rows (transcripts, protocols) one pruning transaction deletes: a large prune
/// takes several short transactions, so that it never holds the write lock for long.
pub const PRUNE_BATCH: usize = 500;

/// The name of the lock file, beside the database, that recording processes hold.
const RECORDERS_SUFFIX: &str = "-recorders";

/// A process's claim to record transcripts in a store, taken by
/// [`Store::claim_recording`]: held (a shared lock on `concord.db-recorders`) for as long
/// as the value lives, so that no other process closes this one's transcripts as
/// interrupted. Dropping it (or the process dying) releases it.
#[derive(Debug)]
pub struct RecordingClaim {
    _lock: File,
    closed: u64,
}

impl RecordingClaim {
    /// How many transcripts left open by processes that died were closed as
    /// [`Outcome::Interrupted`] when the claim was taken (0 when another process was
    /// recording then: the open transcripts may be its sessions).
    pub fn closed_interrupted(&self) -> u64 {
        self.closed
    }
}

/// [`Store::claim_recording`] could not use the lock file beside the database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// The lock file could not be opened or locked.
    #[error("cannot lock {path}: {cause}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        cause: io::Error,
    },
    /// Closing the interrupted transcripts failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    /// Deletes the finished transcripts (with their frames) that `retention` does not
    /// keep, in transactions of at most [`PRUNE_BATCH`] transcripts (other writers get
    /// their turn between two); returns how many. Unfinished transcripts (sessions in
    /// progress) are never deleted.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use concord_proto::Role;
    /// use concord_store::{Outcome, Store, TranscriptRetention};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// for _ in 0..3 {
    ///     let id = store.begin_transcript("peer", Role::Provider, SystemTime::now())?;
    ///     store.finish_transcript(id, &Outcome::Failed("closed".into()), SystemTime::now())?;
    /// }
    /// let running = store.begin_transcript("peer", Role::Provider, SystemTime::now())?;
    /// assert_eq!(store.prune_transcripts_by(&TranscriptRetention::all().keep_newest(1))?, 2);
    /// assert_eq!(store.list_transcripts(10)?.len(), 2); // the newest finished, and `running`
    /// # let _ = running;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prune_transcripts_by(&self, retention: &TranscriptRetention) -> Result<u64, StoreError> {
        let mut deleted = 0;
        loop {
            let batch = self.prune_transcript_batch(retention, PRUNE_BATCH)?;
            deleted += batch;
            if batch < PRUNE_BATCH as u64 {
                return Ok(deleted);
            }
        }
    }

    /// Deletes at most `limit` of the finished transcripts `retention` does not keep (the
    /// oldest first), in one transaction; returns how many.
    pub(crate) fn prune_transcript_batch(
        &self,
        retention: &TranscriptRetention,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let sql = self.sqlite("prune transcripts");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let mut deleted = 0_usize;
        if let Some(cutoff) = retention.started_before {
            deleted += tx
                .prepare_cached(
                    "DELETE FROM transcripts WHERE id IN (
                         SELECT id FROM transcripts
                         WHERE finished_ms IS NOT NULL AND started_ms < ?1
                         ORDER BY started_ms, id LIMIT ?2)",
                )
                .and_then(|mut statement| statement.execute(params![to_millis(cutoff), limit]))
                .map_err(&sql)?;
        }
        let room = limit - i64::try_from(deleted).unwrap_or(i64::MAX);
        if let (Some(keep), true) = (retention.keep_newest, room > 0) {
            deleted += tx
                .prepare_cached(
                    "DELETE FROM transcripts WHERE id IN (
                         SELECT id FROM transcripts WHERE finished_ms IS NOT NULL
                         ORDER BY started_ms DESC, id DESC LIMIT ?2 OFFSET ?1)",
                )
                .and_then(|mut statement| {
                    statement.execute(params![i64::try_from(keep).unwrap_or(i64::MAX), room])
                })
                .map_err(&sql)?;
        }
        tx.commit().map_err(&sql)?;
        Ok(u64::try_from(deleted).unwrap_or(u64::MAX))
    }

    /// Keeps at most `max` negotiated protocols: deletes the least recently used beyond
    /// (by last use, else by when they were stored), with their peers, in transactions of
    /// at most [`PRUNE_BATCH`] rows; returns how many. Protocols settled by consensus are
    /// never deleted, nor counted.
    ///
    /// ```
    /// use concord_store::{NewProtocol, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let old = store.save_protocol(&NewProtocol::negotiated("# old\n", "peer"))?;
    /// let new = store.save_protocol(&NewProtocol::negotiated("# new\n", "peer"))?;
    /// store.touch_protocol(&new, "peer")?;
    /// assert_eq!(store.prune_protocols(1)?, 1);
    /// assert!(store.protocol(&old)?.is_none());
    /// assert!(store.protocol(&new)?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prune_protocols(&self, max: u64) -> Result<u64, StoreError> {
        let sql = self.sqlite("prune protocols");
        let keep = i64::try_from(max).unwrap_or(i64::MAX);
        let mut deleted = 0_u64;
        loop {
            let mut connection = self.connection();
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(&sql)?;
            // Its peers go with it (`ON DELETE CASCADE`).
            let hashes: Vec<String> = tx
                .prepare_cached(
                    "DELETE FROM protocols WHERE hash IN (
                         SELECT hash FROM protocols WHERE settlement = 'negotiated'
                         ORDER BY coalesce(last_used_ms, created_ms) DESC, rowid DESC
                         LIMIT ?2 OFFSET ?1)
                     RETURNING hash",
                )
                .and_then(|mut statement| {
                    statement
                        .query_map(params![keep, PRUNE_BATCH as i64], |row| row.get(0))?
                        .collect()
                })
                .map_err(&sql)?;
            tx.commit().map_err(&sql)?;
            drop(connection);
            for hash in &hashes {
                if let Ok(hash) = hash.parse() {
                    self.verified.remove(&hash);
                }
            }
            deleted += u64::try_from(hashes.len()).unwrap_or(u64::MAX);
            if hashes.len() < PRUNE_BATCH {
                return Ok(deleted);
            }
        }
    }

    /// Keeps at most `max` negotiated protocols held by `peer` (saved for it or used with
    /// it, as [`NewProtocol::peer`](crate::NewProtocol::peer) names it), so that one peer
    /// cannot fill the store and have [`prune_protocols`](Self::prune_protocols) evict
    /// everyone else's: beyond the `max` it used most recently, `peer` is taken off each
    /// protocol's peers, and a protocol left with no peer is deleted. A protocol another
    /// peer holds stays theirs. Protocols settled by consensus are never touched. One
    /// transaction; returns how many protocols were deleted.
    ///
    /// ```
    /// use concord_store::{NewProtocol, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let shared = store.save_protocol(&NewProtocol::negotiated("# shared\n", "caller"))?;
    /// store.touch_protocol(&shared, "filler")?;
    /// for i in 0..3 {
    ///     store.save_protocol(&NewProtocol::negotiated(format!("# {i}\n"), "filler"))?;
    /// }
    /// assert_eq!(store.cap_peer_protocols("filler", 1)?, 2);
    /// // The caller still holds the protocol it shared with the filler.
    /// assert_eq!(store.protocol(&shared)?.unwrap().peers, ["caller"]);
    /// assert_eq!(store.list_protocols()?.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cap_peer_protocols(&self, peer: &str, max: u64) -> Result<u64, StoreError> {
        self.cap_protocols_held_by(
            peer,
            max,
            "DELETE FROM protocols WHERE hash = ?1 AND settlement = 'negotiated'
                 AND NOT EXISTS (SELECT 1 FROM protocol_peers WHERE hash = ?1)
             RETURNING hash",
        )
    }

    /// [`cap_peer_protocols`](Self::cap_peer_protocols) for a client `address` (any peer
    /// name that is not a DID, such as `ws://203.0.113.7`), which sessions proving DIDs
    /// are saved under too: a DID costs nothing to mint, so the protocols of DIDs that
    /// called only from this address are its own. Beyond the `max` it used most
    /// recently, the address is taken off each protocol's peers, and a protocol left with
    /// no peer but DIDs (`did:…`) is deleted: one address keeps at most `max` whatever
    /// DIDs it signs with. A protocol another address (or any other peer that is not a
    /// DID) holds stays theirs. One transaction; returns how many protocols were deleted.
    ///
    /// ```
    /// use concord_store::{NewProtocol, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let shared = store.save_protocol(&NewProtocol::negotiated("# shared\n", "ws://198.51.100.1"))?;
    /// store.touch_protocol(&shared, "ws://203.0.113.7")?;
    /// for i in 0..3 {
    ///     let did = format!("did:wba:minted.example:{i}");
    ///     let hash = store.save_protocol(&NewProtocol::negotiated(format!("# {i}\n"), did))?;
    ///     store.add_protocol_peer(&hash, "ws://203.0.113.7")?;
    /// }
    /// assert_eq!(store.cap_address_protocols("ws://203.0.113.7", 1)?, 2);
    /// assert_eq!(store.protocol(&shared)?.unwrap().peers, ["ws://198.51.100.1"]);
    /// assert_eq!(store.list_protocols()?.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cap_address_protocols(&self, address: &str, max: u64) -> Result<u64, StoreError> {
        self.cap_protocols_held_by(
            address,
            max,
            "DELETE FROM protocols WHERE hash = ?1 AND settlement = 'negotiated'
                 AND NOT EXISTS (SELECT 1 FROM protocol_peers
                                 WHERE hash = ?1 AND peer NOT GLOB 'did:*')
             RETURNING hash",
        )
    }

    /// Takes `peer` off its negotiated protocols beyond the `max` it used most recently,
    /// then runs `orphan` (bound to each such hash as `?1`, returning the hash deleted).
    fn cap_protocols_held_by(&self, peer: &str, max: u64, orphan: &str) -> Result<u64, StoreError> {
        let sql = self.sqlite("cap a peer's protocols");
        let keep = i64::try_from(max).unwrap_or(i64::MAX);
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let beyond: Vec<String> = tx
            .prepare_cached(
                "SELECT pp.hash FROM protocol_peers pp JOIN protocols p ON p.hash = pp.hash
                 WHERE pp.peer = ?1 AND p.settlement = 'negotiated'
                 ORDER BY pp.last_used_ms DESC, pp.rowid DESC LIMIT -1 OFFSET ?2",
            )
            .and_then(|mut statement| {
                statement
                    .query_map(params![peer, keep], |row| row.get(0))?
                    .collect()
            })
            .map_err(&sql)?;
        let mut deleted = Vec::new();
        for hash in &beyond {
            tx.prepare_cached("DELETE FROM protocol_peers WHERE hash = ?1 AND peer = ?2")
                .and_then(|mut statement| statement.execute(params![hash, peer]))
                .map_err(&sql)?;
            // Its other peers, if any, keep it.
            let gone: Option<String> = tx
                .prepare_cached(orphan)
                .and_then(|mut statement| statement.query_row([hash], |row| row.get(0)).optional())
                .map_err(&sql)?;
            deleted.extend(gone);
        }
        tx.commit().map_err(&sql)?;
        drop(connection);
        for hash in &deleted {
            if let Ok(hash) = hash.parse() {
                self.verified.remove(&hash);
            }
        }
        Ok(u64::try_from(deleted.len()).unwrap_or(u64::MAX))
    }

    /// Copies the write-ahead log into the database (`PRAGMA wal_checkpoint`):
    /// [`CheckpointMode::Truncate`] after a large prune makes the `-wal` file shrink to
    /// zero bytes; [`CheckpointMode::Passive`] never waits, for a node in service.
    ///
    /// ```
    /// use concord_store::{CheckpointMode, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let done = store.checkpoint(CheckpointMode::Truncate)?;
    /// assert!(done.complete);
    /// assert_eq!(store.wal_bytes()?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn checkpoint(&self, mode: CheckpointMode) -> Result<Checkpoint, StoreError> {
        let connection = self.connection();
        let (busy, log, checkpointed): (i64, i64, i64) = connection
            .query_row(mode.pragma(), [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .map_err(self.sqlite("checkpoint the write-ahead log"))?;
        // SQLite answers -1 for the page counts of a database not in WAL mode, which a
        // store never is: read as 0.
        Ok(Checkpoint {
            complete: busy == 0,
            log_pages: u64::try_from(log).unwrap_or(0),
            checkpointed_pages: u64::try_from(checkpointed).unwrap_or(0),
        })
    }

    /// The size of the write-ahead log file (`concord.db-wal`) in bytes; 0 when there is
    /// none.
    pub fn wal_bytes(&self) -> io::Result<u64> {
        match std::fs::metadata(sibling(self.path(), "-wal")) {
            Ok(metadata) => Ok(metadata.len()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(error) => Err(error),
        }
    }

    /// Claims the store for recording transcripts in this process and, when no other
    /// process holds a claim, closes the transcripts left without an outcome as
    /// [`Outcome::Interrupted`]: their process died (`kill -9`, a crash) mid-session.
    /// Keep the claim for as long as transcripts are recorded; a node takes one when it
    /// is built.
    ///
    /// The claim is an advisory lock on `concord.db-recorders` beside the database: an
    /// exclusive lock succeeds only when no other claim is held (in this process or
    /// another), and is then traded for a shared one. Processes that only read the store
    /// (the CLI's `transcripts list`) take no claim.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use concord_proto::Role;
    /// use concord_store::{Outcome, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let id = store.begin_transcript("peer", Role::Provider, SystemTime::now())?;
    /// // … the process is killed here; the next one to record says so:
    /// let claim = store.claim_recording()?;
    /// assert_eq!(claim.closed_interrupted(), 1);
    /// let transcript = store.transcript(id)?.ok_or("kept")?;
    /// assert_eq!(transcript.summary.outcome, Some(Outcome::Interrupted));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn claim_recording(&self) -> Result<RecordingClaim, ClaimError> {
        let path = sibling(self.path(), RECORDERS_SUFFIX);
        let lock_error = |cause| ClaimError::Lock {
            path: path.clone(),
            cause,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(lock_error)?;
        let alone = match file.try_lock() {
            Ok(()) => true,
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Error(cause)) => return Err(lock_error(cause)),
        };
        let closed = if alone {
            let closed = self.close_unfinished_transcripts(SystemTime::now());
            file.unlock().map_err(lock_error)?;
            closed?
        } else {
            0
        };
        file.lock_shared().map_err(lock_error)?;
        Ok(RecordingClaim {
            _lock: file,
            closed,
        })
    }

    /// Gives every transcript without an outcome the outcome [`Outcome::Interrupted`],
    /// finished at `now`; returns how many.
    fn close_unfinished_transcripts(&self, now: SystemTime) -> Result<u64, StoreError> {
        let (name, detail) = Outcome::Interrupted.parts();
        let connection = self.connection();
        let closed = connection
            .prepare_cached(
                "UPDATE transcripts SET finished_ms = max(?1, started_ms), outcome = ?2, detail = ?3
                 WHERE finished_ms IS NULL",
            )
            .and_then(|mut statement| statement.execute(params![to_millis(now), name, detail]))
            .map_err(self.sqlite("close interrupted transcripts"))?;
        Ok(u64::try_from(closed).unwrap_or(u64::MAX))
    }
}

/// `concord.db` + `suffix`, beside it (SQLite's own `-wal` and `-shm` naming).
fn sibling(database: &Path, suffix: &str) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use concord_proto::Role;

    use super::*;
    use crate::{Direction, FrameRecord};

    fn finished(store: &Store, started: SystemTime, frames: usize) -> crate::TranscriptId {
        let id = store
            .begin_transcript(
                "https://peer.example/.well-known/wot",
                Role::Provider,
                started,
            )
            .unwrap();
        for _ in 0..frames {
            let text = "x".repeat(2000);
            store
                .append_frame(id, &FrameRecord::hello(Direction::Sent, text, started))
                .unwrap();
        }
        store
            .finish_transcript(id, &Outcome::Failed("closed".into()), started)
            .unwrap();
        id
    }

    #[test]
    fn prunes_by_count_keeping_the_newest_and_the_unfinished() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let start = SystemTime::now() - Duration::from_secs(3600);
        let ids: Vec<_> = (0..10)
            .map(|i| finished(&store, start + Duration::from_secs(i), 1))
            .collect();
        let running = store
            .begin_transcript("peer", Role::Requester, start)
            .unwrap();
        let deleted = store
            .prune_transcripts_by(&TranscriptRetention::all().keep_newest(3))
            .unwrap();
        assert_eq!(deleted, 7);
        let mut left: Vec<_> = store
            .list_transcripts(100)
            .unwrap()
            .into_iter()
            .map(|summary| summary.id)
            .collect();
        left.sort();
        assert_eq!(left, vec![ids[7], ids[8], ids[9], running]);
        // The frames went with their transcripts.
        assert!(store.transcript(ids[0]).unwrap().is_none());
        assert_eq!(store.transcript(ids[9]).unwrap().unwrap().frames.len(), 1);
        // Nothing more to do.
        let again = TranscriptRetention::all().keep_newest(3);
        assert_eq!(store.prune_transcripts_by(&again).unwrap(), 0);
        // keep_newest(0) deletes every finished one, never the running one.
        let none = TranscriptRetention::all().keep_newest(0);
        assert_eq!(store.prune_transcripts_by(&none).unwrap(), 3);
        assert_eq!(store.list_transcripts(100).unwrap()[0].id, running);
    }

    #[test]
    fn one_prune_transaction_deletes_at_most_a_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let start = SystemTime::now() - Duration::from_secs(3600);
        for i in 0..25 {
            finished(&store, start + Duration::from_secs(i), 1);
        }
        let by_age = TranscriptRetention::all().started_before(SystemTime::now());
        assert_eq!(store.prune_transcript_batch(&by_age, 10).unwrap(), 10);
        let by_count = TranscriptRetention::all().keep_newest(2);
        assert_eq!(store.prune_transcript_batch(&by_count, 10).unwrap(), 10);
        // Both criteria share one batch's room.
        let both = by_age.keep_newest(0);
        assert_eq!(store.prune_transcript_batch(&both, 4).unwrap(), 4);
        assert_eq!(store.list_transcripts(100).unwrap().len(), 1);
        assert_eq!(store.prune_transcripts_by(&both).unwrap(), 1);
    }

    #[test]
    fn prunes_by_age_and_count_together() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = SystemTime::now();
        let day = Duration::from_secs(24 * 3600);
        let old = finished(&store, now - 10 * day, 0);
        let _older_running = store
            .begin_transcript("peer", Role::Provider, now - 9 * day)
            .unwrap();
        let recent: Vec<_> = (1..=4)
            .map(|hours| finished(&store, now - Duration::from_secs(hours * 3600), 0))
            .collect();
        let age_only = TranscriptRetention::all().older_than(7 * day, now);
        assert_eq!(store.prune_transcripts_by(&age_only).unwrap(), 1);
        assert!(store.transcript(old).unwrap().is_none());
        // 4 recent finished ones and the unfinished old one are left; keep 2 of the finished.
        let both = age_only.keep_newest(2);
        assert_eq!(store.prune_transcripts_by(&both).unwrap(), 2);
        let left = store.list_transcripts(100).unwrap();
        assert_eq!(left.len(), 3);
        assert!(left.iter().any(|summary| summary.id == recent[0]));
        assert!(left.iter().any(|summary| summary.id == recent[1]));
        assert!(left.iter().any(|summary| summary.outcome.is_none()));
    }

    #[test]
    fn a_truncating_checkpoint_after_a_prune_shrinks_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let start = SystemTime::now() - Duration::from_secs(3600);
        for i in 0..200 {
            finished(&store, start + Duration::from_millis(i), 5);
        }
        let deleted = store
            .prune_transcripts_by(&TranscriptRetention::all().keep_newest(10))
            .unwrap();
        assert_eq!(deleted, 190);
        let before = store.wal_bytes().unwrap();
        assert!(
            before > 1 << 20,
            "the WAL holds ~2 MB of frames: {before} bytes"
        );
        let done = store.checkpoint(CheckpointMode::Truncate).unwrap();
        assert!(done.complete);
        assert_eq!(done.log_pages, 0);
        assert_eq!(store.wal_bytes().unwrap(), 0);
        // The store goes on working, and the kept transcripts are intact.
        let kept = store.list_transcripts(100).unwrap();
        assert_eq!(kept.len(), 10);
        assert!(kept.iter().all(|summary| summary.frame_count == 5));
        assert!(kept.iter().all(|summary| summary.bytes == 5 * 2000));
        assert!(store.checkpoint(CheckpointMode::Passive).unwrap().complete);
    }

    #[test]
    fn unfinished_transcripts_are_closed_as_interrupted_only_when_no_one_records() {
        let dir = tempfile::tempdir().unwrap();
        let dead = store_with_open_transcript(dir.path());
        let store = Store::open(dir.path()).unwrap();
        let claim = store.claim_recording().unwrap();
        assert_eq!(claim.closed_interrupted(), 1);
        let summary = store.transcript(dead).unwrap().unwrap().summary;
        assert_eq!(summary.outcome, Some(Outcome::Interrupted));
        assert!(summary.finished.is_some());
        // While `claim` is held, another claim (another node on the same store) leaves
        // the sessions of this one alone.
        let live = store
            .begin_transcript("peer", Role::Provider, SystemTime::now())
            .unwrap();
        let other = Store::open(dir.path()).unwrap();
        let second = other.claim_recording().unwrap();
        assert_eq!(second.closed_interrupted(), 0);
        assert_eq!(
            store.transcript(live).unwrap().unwrap().summary.outcome,
            None
        );
        drop((claim, second));
        // Once every claim is gone, the next one closes it.
        assert_eq!(other.claim_recording().unwrap().closed_interrupted(), 1);
    }

    fn store_with_open_transcript(dir: &Path) -> crate::TranscriptId {
        let store = Store::open(dir).unwrap();
        store
            .begin_transcript("peer", Role::Provider, SystemTime::now())
            .unwrap()
    }

    #[test]
    fn an_interrupted_outcome_reads_back_and_is_stored_as_failed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .begin_transcript("peer", Role::Provider, SystemTime::now())
            .unwrap();
        store
            .finish_transcript(id, &Outcome::Interrupted, SystemTime::now())
            .unwrap();
        let summary = store.transcript(id).unwrap().unwrap().summary;
        assert_eq!(summary.outcome, Some(Outcome::Interrupted));
        let stored: (String, String) = store
            .connection()
            .query_row(
                "SELECT outcome, detail FROM transcripts WHERE id = ?1",
                [id.get()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            stored,
            ("failed".to_owned(), Outcome::INTERRUPTED_DETAIL.to_owned())
        );
    }
}
