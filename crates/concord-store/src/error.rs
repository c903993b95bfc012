//! Why a store operation failed: every error names what was wrong and where.
//!
//! An error's message says everything, its cause included, and it has no
//! [`source`](std::error::Error::source): printing an error with its chain shows each
//! cause once. The underlying I/O or SQLite error stays available in the `cause` field.

use std::path::PathBuf;

use concord_proto::ProtocolHash;

use crate::integrity::Corruption;
use crate::transcripts::TranscriptId;

/// Everything that can go wrong opening or using a [`Store`](crate::Store).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The platform has no data directory for this user (no home directory).
    #[error(
        "cannot find the platform data directory (is HOME set?); pass a data directory explicitly"
    )]
    NoDataDir,
    /// The data directory could not be created.
    #[error("cannot create the data directory {path}: {cause}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The database file could not be opened or configured (not SQLite, unreadable, locked…).
    #[error("cannot open the store {path}: {cause}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        cause: rusqlite::Error,
    },
    /// The file is a SQLite database of some other application.
    #[error("{path} is not a Concord store (application id {application_id:#010x}, or tables of another program)")]
    ForeignDatabase {
        /// The database file.
        path: PathBuf,
        /// The `PRAGMA application_id` found.
        application_id: i64,
    },
    /// The file has a schema version this build does not know (written by a newer build).
    #[error("the store {path} has schema version {found}; this build knows versions 0 to {supported}: upgrade concord")]
    UnsupportedSchema {
        /// The database file.
        path: PathBuf,
        /// `PRAGMA user_version` in the file.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// Write-ahead logging could not be enabled (e.g. a file system without shared memory).
    #[error("the store {path} cannot use write-ahead logging (journal mode stays {mode:?})")]
    NoWal {
        /// The database file.
        path: PathBuf,
        /// The journal mode SQLite reports.
        mode: String,
    },
    /// A SQLite error during an operation.
    #[error("store {path}: {operation}: {cause}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What the store was doing.
        operation: &'static str,
        /// The SQLite error.
        cause: rusqlite::Error,
    },
    /// A stored protocol's document does not reproduce its hash: it is never used.
    #[error("store {path}: protocol {hash} is corrupt: {corruption}")]
    CorruptProtocol {
        /// The database file.
        path: PathBuf,
        /// The hash the row is stored under.
        hash: ProtocolHash,
        /// What is wrong with the document.
        corruption: Corruption,
    },
    /// A consensus protocol's document does not reproduce its hash: it is never used.
    #[error("store {path}: consensus protocol {uri:?} is corrupt: {corruption}")]
    CorruptConsensus {
        /// The database file.
        path: PathBuf,
        /// The protocol's URI.
        uri: String,
        /// What is wrong with the document.
        corruption: Corruption,
    },
    /// A stored value cannot be read back (wrong type, not UTF-8, out of range, unknown name).
    #[error("store {path}: table {table}, row {key}, column {column}: {detail}")]
    CorruptRow {
        /// The database file.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The row's key (hash, URI or id).
        key: String,
        /// The column.
        column: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// No stored protocol has this hash.
    #[error("no stored protocol has hash {hash}")]
    UnknownProtocol {
        /// The hash asked for.
        hash: ProtocolHash,
    },
    /// A hash selector shorter than [`MIN_PREFIX_LEN`](crate::MIN_PREFIX_LEN) hex digits.
    #[error("hash prefix {selector:?} is too short: give at least {min} hex digits")]
    PrefixTooShort {
        /// The selector as given.
        selector: String,
        /// The minimum length.
        min: usize,
    },
    /// A hash selector that is not hex digits (optionally after `sha256:`) of at most 64 characters.
    #[error("{selector:?} is not a protocol hash or hash prefix: {problem}")]
    NotAHashPrefix {
        /// The selector as given.
        selector: String,
        /// What is wrong with it.
        problem: String,
    },
    /// No stored protocol hash starts with this prefix.
    #[error("no stored protocol hash starts with {prefix}")]
    NoMatchingProtocol {
        /// The (normalised) prefix.
        prefix: String,
    },
    /// Several stored protocol hashes start with this prefix.
    #[error("hash prefix {prefix} is ambiguous: it matches {}", join(.matches))]
    AmbiguousPrefix {
        /// The (normalised) prefix.
        prefix: String,
        /// The matching hashes (at most ten).
        matches: Vec<ProtocolHash>,
    },
    /// No transcript has this id.
    #[error("no negotiation transcript has id {id}")]
    UnknownTranscript {
        /// The id asked for.
        id: TranscriptId,
    },
    /// The transcript is finished: no frames can be appended, it cannot be finished again.
    #[error("negotiation transcript {id} is already finished")]
    TranscriptFinished {
        /// The transcript.
        id: TranscriptId,
    },
    /// A backend other than this SQLite store (behind [`NonceStore`](crate::NonceStore) or
    /// [`ConsensusRegistry`](crate::ConsensusRegistry)) could not do what was asked.
    #[error("the {backend} backend could not {operation}: {cause}")]
    Backend {
        /// The backend (`"nats-jetstream"`, …).
        backend: &'static str,
        /// What it was asked to do (`"record nonce"`, …).
        operation: &'static str,
        /// Its error.
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// Whether the operation failed only because another connection held the store's
    /// write lock past the busy timeout (`SQLITE_BUSY` or `SQLITE_LOCKED`): the same call
    /// may succeed later.
    pub fn is_busy(&self) -> bool {
        let cause = match self {
            Self::Sqlite { cause, .. } | Self::Open { cause, .. } => cause,
            _ => return false,
        };
        matches!(
            cause.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

fn join(hashes: &[ProtocolHash]) -> String {
    hashes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
