//! Opening the store: one SQLite file in WAL mode behind a mutex.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

use crate::column::ColumnError;
use crate::error::StoreError;
use crate::schema::{self, MigrateError};
use crate::transcripts::TranscriptBounds;
use crate::verified::Verified;

/// Creates `dir` and its missing parents; on Unix, the ones created here get mode `0700`.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// How long an operation waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Switches the file to WAL mode and returns the journal mode it is in.
///
/// The switch takes an exclusive lock, and SQLite does not call the busy handler for it when
/// that could deadlock (another connection holding a shared lock it also wants to upgrade),
/// which is what several processes opening a new store at once do: it answers
/// `SQLITE_BUSY` at once. This retries that answer, with short growing pauses, until
/// [`BUSY_TIMEOUT`] has passed (an attempt that the busy handler makes wait may add up to
/// as much again).
fn enable_wal(connection: &Connection) -> rusqlite::Result<String> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == ErrorCode::DatabaseBusy && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

/// The node's persistent store: negotiated protocols, the consensus registry and
/// negotiation transcripts, in one SQLite file.
///
/// Every method is synchronous and takes `&self`; the store is `Send + Sync`, so share it
/// in an `Arc` and call it from `tokio::task::spawn_blocking` in async code.
///
/// **One connection behind a [`Mutex`].** SQLite admits one writer at a time anyway, and
/// the node touches the store a few times per session (hello, agreement, frames of a
/// negotiation), never per application message; each operation takes microseconds to
/// a millisecond. A pool would only add concurrent readers, at the cost of more file
/// handles and a dependency, for no measurable gain at this load. A poisoned mutex is
/// recovered: a panic mid-operation drops its transaction, which SQLite rolls back, so
/// the connection is always consistent.
///
/// **Durability.** WAL with `synchronous=NORMAL`: every committed transaction survives a
/// crash of the process (`kill -9`), because the commit is in the WAL file before
/// `commit` returns; an OS crash or power loss can lose the last few commits but never
/// corrupts the file. `FULL` would add an `fsync` to every commit (every transcript
/// frame) to protect against power loss too, and a lost protocol only means negotiating
/// again. Multi-row writes run in `IMMEDIATE` transactions.
///
/// ```
/// use concord_store::{NewProtocol, Store};
/// use concord_proto::Role;
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(dir.path())?;
/// let hash = store.save_protocol(
///     &NewProtocol::negotiated("# Requirement\nGet product info\n", "https://peer.example/.well-known/wot")
///         .with_handler(Role::Provider, "function decodeRequest(m) { return m; }"),
/// )?;
/// assert!(store.can_resume(&hash, Role::Provider)?);
/// assert!(!store.can_resume(&hash, Role::Requester)?); // no requester code yet
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    connection: Mutex<Connection>,
    /// How much of each transcript is kept.
    bounds: Mutex<TranscriptBounds>,
    /// The protocols whose documents this process verified (see `verified.rs`).
    pub(crate) verified: Verified,
}

impl Store {
    /// The database file's name inside the data directory.
    pub const FILE_NAME: &'static str = "concord.db";

    /// Opens (creating if needed) the store in `dir`: the directory, the file
    /// [`FILE_NAME`](Self::FILE_NAME), WAL mode, and the schema migrated to the latest version.
    ///
    /// Directories it creates are private to the user on Unix (mode `0700`): the store
    /// holds handler code the node will run, and only the documents are covered by hashes.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let dir = dir.as_ref();
        create_private_dir(dir).map_err(|cause| StoreError::CreateDir {
            path: dir.to_path_buf(),
            cause,
        })?;
        let path = dir.join(Self::FILE_NAME);
        let open_error = |cause| StoreError::Open {
            path: path.clone(),
            cause,
        };
        let mut connection = Connection::open(&path).map_err(open_error)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
        let mode = enable_wal(&connection).map_err(open_error)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NoWal { path, mode });
        }
        for (pragma, value) in [
            ("synchronous", "NORMAL"),
            ("foreign_keys", "ON"),
            // Never run SQL functions found in the file's schema (views, triggers).
            ("trusted_schema", "OFF"),
        ] {
            connection
                .pragma_update(None, pragma, value)
                .map_err(open_error)?;
        }
        schema::migrate(&mut connection).map_err(|error| match error {
            MigrateError::Sqlite(cause) => open_error(cause),
            MigrateError::Foreign { application_id } => StoreError::ForeignDatabase {
                path: path.clone(),
                application_id,
            },
            MigrateError::Unsupported { found } => StoreError::UnsupportedSchema {
                path: path.clone(),
                found,
                supported: schema::LATEST_VERSION,
            },
        })?;
        Ok(Self {
            path,
            connection: Mutex::new(connection),
            bounds: Mutex::new(TranscriptBounds::default()),
            verified: Verified::default(),
        })
    }

    /// How much of each transcript this store keeps from now on (default
    /// [`TranscriptBounds::default`]: 4 KiB of text per frame, 512 frames).
    pub fn set_transcript_bounds(&self, bounds: TranscriptBounds) {
        *self.bounds.lock().unwrap_or_else(PoisonError::into_inner) = bounds;
    }

    /// How much of each transcript this store keeps.
    pub fn transcript_bounds(&self) -> TranscriptBounds {
        *self.bounds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The platform's data directory for Concord: `~/.local/share/concord` on Linux
    /// (`$XDG_DATA_HOME/concord`), `~/Library/Application Support/concord` on macOS,
    /// `%APPDATA%\concord\data` on Windows.
    pub fn default_dir() -> Result<PathBuf, StoreError> {
        directories::ProjectDirs::from("", "", "concord")
            .map(|dirs| dirs.data_dir().to_path_buf())
            .ok_or(StoreError::NoDataDir)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version this build writes (`PRAGMA user_version` of every file it opened).
    pub const fn schema_version() -> i64 {
        schema::LATEST_VERSION
    }

    /// The connection, recovering from a poisoned mutex (see the type's docs).
    pub(crate) fn connection(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Maps a SQLite error during `operation` to a [`StoreError::Sqlite`] naming this file.
    pub(crate) fn sqlite(
        &self,
        operation: &'static str,
    ) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |cause| StoreError::Sqlite {
            path: self.path.clone(),
            operation,
            cause,
        }
    }

    /// Maps an unreadable column of row `key` in `table` to a [`StoreError::CorruptRow`].
    pub(crate) fn corrupt_row<'a>(
        &'a self,
        table: &'static str,
        key: &'a dyn std::fmt::Display,
    ) -> impl Fn(ColumnError) -> StoreError + 'a {
        move |error| StoreError::CorruptRow {
            path: self.path.clone(),
            table,
            key: key.to_string(),
            column: error.column,
            detail: error.detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::NewProtocol;

    #[test]
    fn a_poisoned_lock_is_recovered_and_the_connection_is_consistent() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let worker = Arc::clone(&store);
        let result = std::thread::spawn(move || {
            let mut connection = worker.connection();
            let tx = connection.transaction().unwrap();
            tx.execute(
                "INSERT INTO transcripts (peer, role, started_ms) VALUES ('p', 'provider', 0)",
                [],
            )
            .unwrap();
            panic!("a bug while the lock is held, mid-transaction");
        })
        .join();
        assert!(result.is_err());
        assert!(store.connection.is_poisoned());
        // The unwinding dropped the transaction (rolled back); the store keeps working.
        assert!(store.list_transcripts(10).unwrap().is_empty());
        store
            .save_protocol(&NewProtocol::negotiated("# x\n", "p"))
            .unwrap();
        assert_eq!(store.list_protocols().unwrap().len(), 1);
    }
}
