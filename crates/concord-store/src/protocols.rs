//! Negotiated protocols by hash: the accepted document, handler modules, test cases, and
//! when and how often they were used.

use std::time::SystemTime;

use concord_proto::{ProtocolHash, Role};
use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};

use crate::column::{self, ColumnError};
use crate::error::StoreError;
use crate::handlers::{handler_column, stored_roles, Handlers};
use crate::integrity::{integrity_of, verify_document, Integrity};
use crate::prefix;
use crate::store::Store;
use crate::time::now_millis;

const TABLE: &str = "protocols";

/// How a protocol was settled between the two agents.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settlement {
    /// Agreed with `protocolNegotiation` messages.
    Negotiated,
    /// Selected from both agents' consensus protocols in the hello.
    Consensus {
        /// The consensus protocol's URI.
        uri: String,
    },
}

impl Settlement {
    fn name(&self) -> &'static str {
        match self {
            Self::Negotiated => "negotiated",
            Self::Consensus { .. } => "consensus",
        }
    }

    fn uri(&self) -> Option<&str> {
        match self {
            Self::Negotiated => None,
            Self::Consensus { uri } => Some(uri),
        }
    }

    fn read(row: &Row<'_>) -> Result<Self, ColumnError> {
        let name = column::text(row, "settlement")?;
        let uri = column::opt_text(row, "consensus_uri")?;
        match (name.as_str(), uri) {
            ("negotiated", None) => Ok(Self::Negotiated),
            ("consensus", Some(uri)) => Ok(Self::Consensus { uri }),
            ("negotiated", Some(_)) => Err(ColumnError::new(
                "consensus_uri",
                "a negotiated protocol has a consensus URI",
            )),
            ("consensus", None) => Err(ColumnError::new(
                "consensus_uri",
                "a consensus protocol has no URI",
            )),
            (other, _) => Err(ColumnError::new(
                "settlement",
                format!("unknown settlement {other:?}"),
            )),
        }
    }
}

/// A protocol to store: its hash is computed here from `document`, never taken from a caller.
///
/// ```
/// use concord_store::NewProtocol;
/// use concord_proto::{ProtocolHash, Role};
///
/// let protocol = NewProtocol::negotiated("# Requirement\n", "https://peer.example/.well-known/wot")
///     .with_handler(Role::Requester, "function encodeRequest(i) { return i; }")
///     .with_test_cases("## Test case 1\n");
/// assert_eq!(protocol.hash(), ProtocolHash::of_text("# Requirement\n"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewProtocol {
    /// The exact accepted text (the `candidateProtocols` of the accepted message).
    pub document: String,
    /// The peer: its description URL or agent id.
    pub peer: String,
    /// How it was settled.
    pub settlement: Settlement,
    /// Handler modules generated so far.
    pub handlers: Handlers,
    /// The agreed test cases, if any.
    pub test_cases: Option<String>,
}

impl NewProtocol {
    /// A protocol agreed by negotiation with `peer`.
    pub fn negotiated(document: impl Into<String>, peer: impl Into<String>) -> Self {
        Self {
            document: document.into(),
            peer: peer.into(),
            settlement: Settlement::Negotiated,
            handlers: Handlers::default(),
            test_cases: None,
        }
    }

    /// The consensus protocol at `uri`, used with `peer`.
    pub fn consensus(
        uri: impl Into<String>,
        document: impl Into<String>,
        peer: impl Into<String>,
    ) -> Self {
        Self {
            settlement: Settlement::Consensus { uri: uri.into() },
            ..Self::negotiated(document, peer)
        }
    }

    /// This protocol with `role`'s handler module.
    pub fn with_handler(mut self, role: Role, source: impl Into<String>) -> Self {
        self.handlers.set(role, source);
        self
    }

    /// This protocol with agreed test cases.
    pub fn with_test_cases(mut self, text: impl Into<String>) -> Self {
        self.test_cases = Some(text.into());
        self
    }

    /// The hash the protocol will be stored under: SHA-256 of the document's UTF-8 bytes.
    pub fn hash(&self) -> ProtocolHash {
        ProtocolHash::of_text(&self.document)
    }
}

/// A stored protocol whose document reproduced its hash when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredProtocol {
    /// SHA-256 of `document`.
    pub hash: ProtocolHash,
    /// The exact accepted text.
    pub document: String,
    /// Handler modules stored so far.
    pub handlers: Handlers,
    /// The agreed test cases, if any.
    pub test_cases: Option<String>,
    /// The peer it was last saved for.
    pub peer: String,
    /// How it was settled.
    pub settlement: Settlement,
    /// When it was first stored.
    pub created: SystemTime,
    /// When a session last used it ([`Store::touch_protocol`]).
    pub last_used: Option<SystemTime>,
    /// How many sessions used it.
    pub use_count: u64,
}

/// One line of [`Store::list_protocols`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProtocolSummary {
    /// The hash the protocol is stored under.
    pub hash: ProtocolHash,
    /// Whether the stored document reproduces `hash`; a corrupt entry is never used.
    pub integrity: Integrity,
    /// The peer it was last saved for.
    pub peer: String,
    /// How it was settled.
    pub settlement: Settlement,
    /// Roles whose handler module is stored.
    pub handler_roles: Vec<Role>,
    /// Whether test cases are stored.
    pub has_test_cases: bool,
    /// The document's length in bytes.
    pub document_len: usize,
    /// When it was first stored.
    pub created: SystemTime,
    /// When a session last used it.
    pub last_used: Option<SystemTime>,
    /// How many sessions used it.
    pub use_count: u64,
}

impl Store {
    /// Stores a protocol under the hash of its document, or updates the one stored there:
    /// peer and settlement are replaced, handler modules and test cases given here replace
    /// the stored ones while those left `None` are kept, and `created`, `last_used` and
    /// `use_count` are kept. Saving the document again also repairs a corrupt row.
    pub fn save_protocol(&self, protocol: &NewProtocol) -> Result<ProtocolHash, StoreError> {
        let sql = self.sqlite("save protocol");
        let hash = protocol.hash();
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "INSERT INTO protocols (hash, document, requester_handler, provider_handler,
                     test_cases, peer, settlement, consensus_uri, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (hash) DO UPDATE SET
                     document = excluded.document,
                     requester_handler = coalesce(excluded.requester_handler, requester_handler),
                     provider_handler = coalesce(excluded.provider_handler, provider_handler),
                     test_cases = coalesce(excluded.test_cases, test_cases),
                     peer = excluded.peer,
                     settlement = excluded.settlement,
                     consensus_uri = excluded.consensus_uri",
            )
            .map_err(&sql)?;
        statement
            .execute(params![
                hash.to_string(),
                protocol.document,
                protocol.handlers.requester,
                protocol.handlers.provider,
                protocol.test_cases,
                protocol.peer,
                protocol.settlement.name(),
                protocol.settlement.uri(),
                now_millis(),
            ])
            .map_err(&sql)?;
        Ok(hash)
    }

    /// The protocol stored under `hash`, after checking that its document reproduces the
    /// hash; a document that does not is [`StoreError::CorruptProtocol`].
    pub fn protocol(&self, hash: &ProtocolHash) -> Result<Option<StoredProtocol>, StoreError> {
        let sql = self.sqlite("read protocol");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached("SELECT * FROM protocols WHERE hash = ?1")
            .map_err(&sql)?;
        let mut rows = statement.query([hash.to_string()]).map_err(&sql)?;
        let Some(row) = rows.next().map_err(&sql)? else {
            return Ok(None);
        };
        let corrupt_row = self.corrupt_row(TABLE, hash);
        let raw = column::opt_raw_text(row, "document")
            .map_err(&corrupt_row)?
            .unwrap_or_default();
        let document = self.verified_protocol(hash, raw)?;
        let read = || -> Result<StoredProtocol, ColumnError> {
            Ok(StoredProtocol {
                hash: *hash,
                document,
                handlers: Handlers::read(row)?,
                test_cases: column::opt_text(row, "test_cases")?,
                peer: column::text(row, "peer")?,
                settlement: Settlement::read(row)?,
                created: column::time(row, "created_ms")?,
                last_used: column::opt_time(row, "last_used_ms")?,
                use_count: column::count(row, "use_count")?,
            })
        };
        read().map(Some).map_err(corrupt_row)
    }

    /// Every stored protocol, newest first, with its [`Integrity`]: corrupt entries are
    /// listed (so they can be seen and forgotten) but never used.
    pub fn list_protocols(&self) -> Result<Vec<ProtocolSummary>, StoreError> {
        let sql = self.sqlite("list protocols");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT hash, document, peer, settlement, consensus_uri, created_ms,
                     last_used_ms, use_count,
                     requester_handler IS NOT NULL AS has_requester,
                     provider_handler IS NOT NULL AS has_provider,
                     test_cases IS NOT NULL AS has_test_cases
                 FROM protocols ORDER BY created_ms DESC, rowid DESC",
            )
            .map_err(&sql)?;
        let mut rows = statement.query([]).map_err(&sql)?;
        let mut summaries = Vec::new();
        while let Some(row) = rows.next().map_err(&sql)? {
            let hash =
                column::hash(row, "hash").map_err(self.corrupt_row(TABLE, &"(unreadable hash)"))?;
            let read = || -> Result<ProtocolSummary, ColumnError> {
                let raw = column::opt_raw_text(row, "document")?.unwrap_or_default();
                Ok(ProtocolSummary {
                    hash,
                    document_len: raw.len(),
                    integrity: integrity_of(&hash, raw),
                    peer: column::text(row, "peer")?,
                    settlement: Settlement::read(row)?,
                    handler_roles: stored_roles(row)?,
                    has_test_cases: column::int(row, "has_test_cases")? != 0,
                    created: column::time(row, "created_ms")?,
                    last_used: column::opt_time(row, "last_used_ms")?,
                    use_count: column::count(row, "use_count")?,
                })
            };
            summaries.push(read().map_err(self.corrupt_row(TABLE, &hash))?);
        }
        Ok(summaries)
    }

    /// The stored hash named by `selector`: a full hash or a unique prefix of at least
    /// [`MIN_PREFIX_LEN`](crate::MIN_PREFIX_LEN) hex digits (optionally `sha256:`-prefixed).
    pub fn resolve_protocol(&self, selector: &str) -> Result<ProtocolHash, StoreError> {
        let connection = self.connection();
        self.resolve_in(&connection, selector)
    }

    fn resolve_in(
        &self,
        connection: &rusqlite::Connection,
        selector: &str,
    ) -> Result<ProtocolHash, StoreError> {
        let sql = self.sqlite("resolve hash prefix");
        let prefix = prefix::normalise(selector)?;
        let mut statement = connection
            .prepare_cached(
                "SELECT hash FROM protocols WHERE hash GLOB ?1 || '*' ORDER BY hash LIMIT 11",
            )
            .map_err(&sql)?;
        let mut rows = statement.query([&prefix]).map_err(&sql)?;
        let mut matches = Vec::new();
        while let Some(row) = rows.next().map_err(&sql)? {
            matches.push(column::hash(row, "hash").map_err(self.corrupt_row(TABLE, &prefix))?);
        }
        match matches.as_slice() {
            [] => Err(StoreError::NoMatchingProtocol { prefix }),
            [hash] => Ok(*hash),
            _ => {
                matches.truncate(10);
                Err(StoreError::AmbiguousPrefix { prefix, matches })
            }
        }
    }

    /// Deletes the protocol named by `selector` (as in [`resolve_protocol`](Self::resolve_protocol))
    /// and returns its hash. Resolving and deleting happen in one transaction.
    pub fn forget_protocol(&self, selector: &str) -> Result<ProtocolHash, StoreError> {
        let sql = self.sqlite("forget protocol");
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let hash = self.resolve_in(&tx, selector)?;
        tx.execute("DELETE FROM protocols WHERE hash = ?1", [hash.to_string()])
            .map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(hash)
    }

    /// Records that a session used the protocol now: sets `last_used` and increments
    /// `use_count` in one statement (atomic even across processes); returns the new count.
    pub fn touch_protocol(&self, hash: &ProtocolHash) -> Result<u64, StoreError> {
        let connection = self.connection();
        let count: Option<i64> = connection
            .prepare_cached(
                "UPDATE protocols SET last_used_ms = ?1, use_count = use_count + 1
                 WHERE hash = ?2 RETURNING use_count",
            )
            .and_then(|mut statement| {
                statement
                    .query_row(params![now_millis(), hash.to_string()], |row| row.get(0))
                    .optional()
            })
            .map_err(self.sqlite("touch protocol"))?;
        let count = count.ok_or(StoreError::UnknownProtocol { hash: *hash })?;
        column::count_value("use_count", count).map_err(self.corrupt_row(TABLE, hash))
    }

    /// The 0-RTT rule: whether a session in `role` can resume the protocol `hash` — the
    /// stored document re-hashes to `hash` (recomputed now, the stored hash column is not
    /// trusted) and `role`'s handler module is stored. A row whose document does not
    /// reproduce its hash is [`StoreError::CorruptProtocol`].
    pub fn can_resume(&self, hash: &ProtocolHash, role: Role) -> Result<bool, StoreError> {
        let handler = handler_column(role);
        let query = format!(
            "SELECT document, {handler} IS NOT NULL AS has_handler FROM protocols WHERE hash = ?1"
        );
        let sql = self.sqlite("check protocol");
        let connection = self.connection();
        let mut statement = connection.prepare_cached(&query).map_err(&sql)?;
        let mut rows = statement.query([hash.to_string()]).map_err(&sql)?;
        let Some(row) = rows.next().map_err(&sql)? else {
            return Ok(false);
        };
        let read = || -> Result<(Vec<u8>, bool), ColumnError> {
            Ok((
                column::opt_raw_text(row, "document")?.unwrap_or_default(),
                column::int(row, "has_handler")? != 0,
            ))
        };
        let (raw, has_handler) = read().map_err(self.corrupt_row(TABLE, hash))?;
        self.verified_protocol(hash, raw)?;
        Ok(has_handler)
    }

    /// The protocol to offer `peer` for 0-RTT when connecting in `role`: the most recently
    /// used (or created) one saved for that peer whose document reproduces its hash and
    /// whose `role` handler is stored. Corrupt rows are skipped (they show in
    /// [`list_protocols`](Self::list_protocols) and [`check`](Self::check)).
    pub fn latest_resumable(
        &self,
        peer: &str,
        role: Role,
    ) -> Result<Option<ProtocolHash>, StoreError> {
        let handler = handler_column(role);
        let query = format!(
            "SELECT hash, document FROM protocols WHERE peer = ?1 AND {handler} IS NOT NULL
             ORDER BY coalesce(last_used_ms, created_ms) DESC, rowid DESC"
        );
        let sql = self.sqlite("find resumable protocol");
        let connection = self.connection();
        let mut statement = connection.prepare_cached(&query).map_err(&sql)?;
        let mut rows = statement.query([peer]).map_err(&sql)?;
        while let Some(row) = rows.next().map_err(&sql)? {
            let read = || -> Result<(ProtocolHash, Vec<u8>), ColumnError> {
                Ok((
                    column::hash(row, "hash")?,
                    column::opt_raw_text(row, "document")?.unwrap_or_default(),
                ))
            };
            let Ok((hash, raw)) = read() else { continue };
            if integrity_of(&hash, raw).is_verified() {
                return Ok(Some(hash));
            }
        }
        Ok(None)
    }

    /// The stored `document` of protocol `hash` as text, if it reproduces the hash; else
    /// [`StoreError::CorruptProtocol`].
    fn verified_protocol(&self, hash: &ProtocolHash, raw: Vec<u8>) -> Result<String, StoreError> {
        verify_document(hash, raw).map_err(|corruption| StoreError::CorruptProtocol {
            path: self.path().to_path_buf(),
            hash: *hash,
            corruption,
        })
    }
}
