//! Negotiated protocols by hash: the accepted document, handler modules, test cases, the
//! action it calls, the peers that hold it, and when and how often they were used.
//!
//! A protocol is stored once per hash, and the same hash can be agreed with several peers
//! (two agents serving the same action, or one agent reached by two names): each protocol
//! keeps the set of peers it was saved for or used with (`protocol_peers`), so that a
//! connection to any of them, or to a new peer serving the same action, can offer it for
//! 0-RTT ([`Store::latest_resumable`]).

use std::collections::HashMap;
use std::time::SystemTime;

use concord_proto::{ProtocolHash, Role};
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use crate::column::{self, ColumnError};
use crate::error::StoreError;
use crate::handlers::{handler_column, stored_roles, Handlers};
use crate::integrity::{integrity_of, verify_document, Corruption, Integrity};
use crate::prefix;
use crate::store::Store;
use crate::time::now_millis;

const TABLE: &str = "protocols";

/// The most peers a protocol keeps: saving or using it with one more forgets the peer
/// least recently saved for or used with it. (A provider sees each requester as a new
/// address; this bounds what that costs.)
pub const MAX_PEERS_PER_PROTOCOL: usize = 64;

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
///     .with_action("getProductInfo")
///     .with_handler(Role::Requester, "function encodeRequest(i) { return i; }")
///     .with_test_cases("## Test case 1\n");
/// assert_eq!(protocol.hash(), ProtocolHash::of_text("# Requirement\n"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewProtocol {
    /// The exact accepted text (the `candidateProtocols` of the accepted message).
    pub document: String,
    /// The peer it was agreed (or used) with: its description URL, agent id or address.
    /// Saving adds it to the protocol's peers; the others are kept.
    pub peer: String,
    /// The action the protocol calls, when known (the requester knows the action it
    /// calls): what [`Store::latest_resumable`] matches a new peer by.
    pub action: Option<String>,
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
            action: None,
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

    /// This protocol, recorded as calling `action`.
    pub fn with_action(mut self, action: impl Into<String>) -> Self {
        self.action = Some(action.into());
        self
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
    /// The action it calls, if it was recorded.
    pub action: Option<String>,
    /// Every peer it was saved for or used with, the most recent first (at most
    /// [`MAX_PEERS_PER_PROTOCOL`]).
    pub peers: Vec<String>,
    /// How it was settled.
    pub settlement: Settlement,
    /// When it was first stored.
    pub created: SystemTime,
    /// When a session last used it ([`Store::touch_protocol`]).
    pub last_used: Option<SystemTime>,
    /// How many sessions used it.
    pub use_count: u64,
}

impl StoredProtocol {
    /// The protocol `document`, settled as `settlement` and first stored at `created`,
    /// with no handler, test cases, action, peer or use yet: its hash is computed here,
    /// never taken from a caller (what another [`ProtocolBook`](crate::ProtocolBook)
    /// backend answers once it has read the rest).
    pub fn new(document: impl Into<String>, settlement: Settlement, created: SystemTime) -> Self {
        let document = document.into();
        Self {
            hash: ProtocolHash::of_text(&document),
            document,
            handlers: Handlers::default(),
            test_cases: None,
            action: None,
            peers: Vec::new(),
            settlement,
            created,
            last_used: None,
            use_count: 0,
        }
    }
}

/// One line of [`Store::list_protocols`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProtocolSummary {
    /// The hash the protocol is stored under.
    pub hash: ProtocolHash,
    /// Whether the stored document reproduces `hash`; a corrupt entry is never used.
    pub integrity: Integrity,
    /// The action it calls, if it was recorded.
    pub action: Option<String>,
    /// Every peer it was saved for or used with, the most recent first (at most
    /// [`MAX_PEERS_PER_PROTOCOL`]).
    pub peers: Vec<String>,
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

/// What a connection is about to ask for, to choose the protocol to offer for 0-RTT
/// ([`Store::latest_resumable`]).
///
/// ```
/// use concord_proto::Role;
/// use concord_store::ResumeQuery;
///
/// let query = ResumeQuery {
///     peer: "https://shop.example/.well-known/wot",
///     action: "getProductInfo",
///     role: Role::Requester,
/// };
/// # let _ = query;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeQuery<'a> {
    /// The peer about to be connected to, named as protocols are saved for it
    /// ([`NewProtocol::peer`]).
    pub peer: &'a str,
    /// The action the connection will call.
    pub action: &'a str,
    /// Our role in the session: the protocol's handler module for it must be stored.
    pub role: Role,
}

/// The protocol to offer for 0-RTT (`usedProtocolHash` in the sourceHello), and why it
/// was chosen ([`Store::latest_resumable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeOffer {
    /// The hash to offer; its stored document reproduced it when it was chosen.
    pub hash: ProtocolHash,
    /// Whose protocol it is.
    pub held_by: HeldBy,
}

/// Why [`Store::latest_resumable`] chose a protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldBy {
    /// It was saved for, or used with, this very peer.
    ThisPeer,
    /// It calls the same action and was saved for, or used with, another peer: the peer
    /// asked for may hold it too (a second agent serving the same action, or the same
    /// agent under another name). If it does not, it says so in its destinationHello and
    /// the protocol is negotiated, at no extra cost.
    OtherPeer {
        /// The peer it was most recently saved for or used with.
        peer: String,
    },
}

impl Store {
    /// Stores a protocol under the hash of its document, or updates the one stored there,
    /// and adds [`peer`](NewProtocol::peer) to its peers (last used now); the other peers
    /// are kept. Handler modules, test cases and the action given here replace the stored
    /// ones while those left `None` are kept; the settlement is replaced; `created`,
    /// `last_used` and `use_count` are kept. Saving the document again also repairs a
    /// corrupt row. One transaction.
    pub fn save_protocol(&self, protocol: &NewProtocol) -> Result<ProtocolHash, StoreError> {
        let sql = self.sqlite("save protocol");
        let hash = protocol.hash();
        let hash_text = hash.to_string();
        let now = now_millis();
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        tx.prepare_cached(
            "INSERT INTO protocols (hash, document, requester_handler, provider_handler,
                 test_cases, action, settlement, consensus_uri, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (hash) DO UPDATE SET
                 document = excluded.document,
                 requester_handler = coalesce(excluded.requester_handler, requester_handler),
                 provider_handler = coalesce(excluded.provider_handler, provider_handler),
                 test_cases = coalesce(excluded.test_cases, test_cases),
                 action = coalesce(excluded.action, action),
                 settlement = excluded.settlement,
                 consensus_uri = excluded.consensus_uri",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                hash_text,
                protocol.document,
                protocol.handlers.requester,
                protocol.handlers.provider,
                protocol.test_cases,
                protocol.action,
                protocol.settlement.name(),
                protocol.settlement.uri(),
                now,
            ])
        })
        .map_err(&sql)?;
        record_peer(&tx, &hash_text, &protocol.peer, now).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        // The document was hashed to name it: verified, as written.
        self.verified.insert(hash);
        Ok(hash)
    }

    /// The protocol stored under `hash`, after checking that its document reproduces the
    /// hash (re-hashed only the first time this process reads it, see
    /// [`can_resume`](Self::can_resume)); a document that does not is
    /// [`StoreError::CorruptProtocol`].
    pub fn protocol(&self, hash: &ProtocolHash) -> Result<Option<StoredProtocol>, StoreError> {
        let sql = self.sqlite("read protocol");
        let hash_text = hash.to_string();
        let mut connection = self.connection();
        // One read transaction: the row and its peers as of one moment.
        let tx = connection.transaction().map_err(&sql)?;
        let mut statement = tx
            .prepare_cached("SELECT * FROM protocols WHERE hash = ?1")
            .map_err(&sql)?;
        let mut rows = statement.query([&hash_text]).map_err(&sql)?;
        let Some(row) = rows.next().map_err(&sql)? else {
            return Ok(None);
        };
        let corrupt_row = self.corrupt_row(TABLE, hash);
        let raw = column::opt_raw_text(row, "document")
            .map_err(&corrupt_row)?
            .unwrap_or_default();
        let document = self.checked_document(hash, raw)?;
        let read = || -> Result<StoredProtocol, ColumnError> {
            Ok(StoredProtocol {
                hash: *hash,
                document,
                handlers: Handlers::read(row)?,
                test_cases: column::opt_text(row, "test_cases")?,
                action: column::opt_text(row, "action")?,
                peers: Vec::new(),
                settlement: Settlement::read(row)?,
                created: column::time(row, "created_ms")?,
                last_used: column::opt_time(row, "last_used_ms")?,
                use_count: column::count(row, "use_count")?,
            })
        };
        let mut protocol = read().map_err(corrupt_row)?;
        drop(rows);
        drop(statement);
        let mut peers = self.peers_in(&tx, Some(&hash_text))?;
        protocol.peers = peers.remove(&hash_text).unwrap_or_default();
        Ok(Some(protocol))
    }

    /// Every stored protocol, newest first, with its [`Integrity`]: corrupt entries are
    /// listed (so they can be seen and forgotten) but never used.
    pub fn list_protocols(&self) -> Result<Vec<ProtocolSummary>, StoreError> {
        let sql = self.sqlite("list protocols");
        let mut connection = self.connection();
        // One read transaction: the rows and their peers as of one moment.
        let tx = connection.transaction().map_err(&sql)?;
        let mut peers = self.peers_in(&tx, None)?;
        let mut statement = tx
            .prepare_cached(
                "SELECT hash, document, action, settlement, consensus_uri, created_ms,
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
            let peers = peers.remove(&hash.to_string()).unwrap_or_default();
            let read = || -> Result<ProtocolSummary, ColumnError> {
                let raw = column::opt_raw_text(row, "document")?.unwrap_or_default();
                let integrity = integrity_of(&hash, raw.as_slice());
                self.note_integrity(&hash, &integrity);
                Ok(ProtocolSummary {
                    hash,
                    document_len: raw.len(),
                    integrity,
                    action: column::opt_text(row, "action")?,
                    peers,
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

    /// The peers of the protocol stored under `hash` (of every protocol when `None`), by
    /// hash, each list the most recent first. A peer entry that cannot be read is left out
    /// (it does not stop the protocol from being read or used; [`check`](Self::check)
    /// reports it).
    fn peers_in(
        &self,
        connection: &Connection,
        hash: Option<&str>,
    ) -> Result<HashMap<String, Vec<String>>, StoreError> {
        let sql = self.sqlite("read protocol peers");
        let query = match hash {
            Some(_) => {
                "SELECT hash, peer FROM protocol_peers WHERE hash = ?1
                 ORDER BY last_used_ms DESC, rowid DESC"
            }
            None => "SELECT hash, peer FROM protocol_peers ORDER BY last_used_ms DESC, rowid DESC",
        };
        let mut statement = connection.prepare_cached(query).map_err(&sql)?;
        let mut rows = statement
            .query(rusqlite::params_from_iter(hash))
            .map_err(&sql)?;
        let mut peers: HashMap<String, Vec<String>> = HashMap::new();
        while let Some(row) = rows.next().map_err(&sql)? {
            if let (Ok(hash), Ok(peer)) = (column::text(row, "hash"), column::text(row, "peer")) {
                peers.entry(hash).or_default().push(peer);
            }
        }
        Ok(peers)
    }

    /// The stored hash named by `selector`: a full hash or a unique prefix of at least
    /// [`MIN_PREFIX_LEN`](crate::MIN_PREFIX_LEN) hex digits (optionally `sha256:`-prefixed).
    pub fn resolve_protocol(&self, selector: &str) -> Result<ProtocolHash, StoreError> {
        let connection = self.connection();
        self.resolve_in(&connection, selector)
    }

    fn resolve_in(
        &self,
        connection: &Connection,
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
    /// with its peers, and returns its hash. Resolving and deleting happen in one transaction.
    pub fn forget_protocol(&self, selector: &str) -> Result<ProtocolHash, StoreError> {
        let sql = self.sqlite("forget protocol");
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let hash = self.resolve_in(&tx, selector)?;
        // Its peers go with it (`ON DELETE CASCADE`; foreign keys are on, see `Store::open`).
        tx.execute("DELETE FROM protocols WHERE hash = ?1", [hash.to_string()])
            .map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        self.verified.remove(&hash);
        Ok(hash)
    }

    /// Records that a session with `peer` used the protocol now: sets `last_used`,
    /// increments `use_count` and adds `peer` to its peers (or marks it used now), in one
    /// transaction (atomic even across processes); returns the new count.
    pub fn touch_protocol(&self, hash: &ProtocolHash, peer: &str) -> Result<u64, StoreError> {
        let sql = self.sqlite("touch protocol");
        let hash_text = hash.to_string();
        let now = now_millis();
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let count: Option<i64> = tx
            .prepare_cached(
                "UPDATE protocols SET last_used_ms = ?1, use_count = use_count + 1
                 WHERE hash = ?2 RETURNING use_count",
            )
            .and_then(|mut statement| {
                statement
                    .query_row(params![now, hash_text], |row| row.get(0))
                    .optional()
            })
            .map_err(&sql)?;
        let count = count.ok_or(StoreError::UnknownProtocol { hash: *hash })?;
        let count =
            column::count_value("use_count", count).map_err(self.corrupt_row(TABLE, hash))?;
        record_peer(&tx, &hash_text, peer, now).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(count)
    }

    /// Adds `peer` to the peers of the protocol `hash` (or marks it used by `peer` now)
    /// without counting a use: a second name of the peer of a session already counted by
    /// [`save_protocol`](Self::save_protocol) or [`touch_protocol`](Self::touch_protocol),
    /// such as the client address of a caller saved under its DID. One transaction.
    pub fn add_protocol_peer(&self, hash: &ProtocolHash, peer: &str) -> Result<(), StoreError> {
        let sql = self.sqlite("add a protocol peer");
        let hash_text = hash.to_string();
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let stored: Option<i64> = tx
            .prepare_cached("SELECT 1 FROM protocols WHERE hash = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([&hash_text], |row| row.get(0))
                    .optional()
            })
            .map_err(&sql)?;
        if stored.is_none() {
            return Err(StoreError::UnknownProtocol { hash: *hash });
        }
        record_peer(&tx, &hash_text, peer, now_millis()).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(())
    }

    /// The 0-RTT rule: whether a session in `role` can resume the protocol `hash` — the
    /// stored document reproduces `hash` (the stored hash column is not trusted) and
    /// `role`'s handler module is stored. A row whose document does not reproduce its
    /// hash is [`StoreError::CorruptProtocol`].
    ///
    /// The document is hashed once per process: when this process saved it, or the first
    /// time it reads it here, in [`protocol`](Self::protocol) or in
    /// [`latest_resumable`](Self::latest_resumable); after that the answer is one indexed
    /// lookup that reads neither the document nor hashes it, whatever its size. A row
    /// changed on disk after this process verified it is caught by [`check`](Self::check)
    /// and [`list_protocols`](Self::list_protocols), which re-hash every row (and then
    /// make the checks here re-hash it too).
    pub fn can_resume(&self, hash: &ProtocolHash, role: Role) -> Result<bool, StoreError> {
        let handler = handler_column(role);
        let sql = self.sqlite("check protocol");
        let connection = self.connection();
        if self.verified.contains(hash) {
            let has_handler: Option<bool> = connection
                .prepare_cached(&verified_check_query(handler))
                .and_then(|mut statement| {
                    statement
                        .query_row([hash.to_string()], |row| row.get(0))
                        .optional()
                })
                .map_err(&sql)?;
            return Ok(has_handler.unwrap_or(false));
        }
        let query = format!(
            "SELECT document, {handler} IS NOT NULL AS has_handler FROM protocols WHERE hash = ?1"
        );
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
        self.checked_document(hash, raw)?;
        Ok(has_handler)
    }

    /// The protocol to offer for 0-RTT on a connection to `query.peer` calling
    /// `query.action` in `query.role`, in this order:
    ///
    /// 1. the one most recently saved for or used with that exact peer
    ///    ([`HeldBy::ThisPeer`]), among those that call the action or whose action was never
    ///    recorded (saved before the store kept actions);
    /// 2. if there is none, the one calling that action most recently saved for or used with
    ///    any other peer ([`HeldBy::OtherPeer`]): the new peer may hold it too, and if it
    ///    does not, the hello says so and a normal negotiation follows.
    ///
    /// Either way the protocol's `role` handler is stored and its document reproduces its
    /// hash (hashed once per process, as in [`can_resume`](Self::can_resume): the
    /// candidates this process verified cost no read of their document). Corrupt rows are skipped (they show in
    /// [`list_protocols`](Self::list_protocols) and [`check`](Self::check)). `None`: offer
    /// nothing, negotiate.
    pub fn latest_resumable(
        &self,
        query: &ResumeQuery<'_>,
    ) -> Result<Option<ResumeOffer>, StoreError> {
        let handler = handler_column(query.role);
        let sql = self.sqlite("find resumable protocol");
        let connection = self.connection();
        let this_peer = format!(
            "SELECT p.hash, pp.peer
             FROM protocol_peers pp JOIN protocols p ON p.hash = pp.hash
             WHERE pp.peer = ?1 AND (p.action IS NULL OR p.action = ?2)
                 AND p.{handler} IS NOT NULL
             ORDER BY pp.last_used_ms DESC, pp.rowid DESC"
        );
        if let Some((hash, _)) = self
            .first_verified(&connection, &this_peer, query)
            .map_err(&sql)?
        {
            return Ok(Some(ResumeOffer {
                hash,
                held_by: HeldBy::ThisPeer,
            }));
        }
        let same_action = format!(
            "SELECT p.hash, pp.peer
             FROM protocols p JOIN protocol_peers pp ON pp.hash = p.hash
             WHERE p.action = ?2 AND pp.peer <> ?1 AND p.{handler} IS NOT NULL
             ORDER BY pp.last_used_ms DESC, pp.rowid DESC"
        );
        let found = self
            .first_verified(&connection, &same_action, query)
            .map_err(&sql)?;
        Ok(found.map(|(hash, peer)| ResumeOffer {
            hash,
            held_by: HeldBy::OtherPeer { peer },
        }))
    }

    /// The stored `document` of protocol `hash` as text, if it reproduces the hash (not
    /// re-hashed when this process verified it already; remembered as verified when it
    /// does); else [`StoreError::CorruptProtocol`].
    fn checked_document(&self, hash: &ProtocolHash, raw: Vec<u8>) -> Result<String, StoreError> {
        let corrupt = |corruption| StoreError::CorruptProtocol {
            path: self.path().to_path_buf(),
            hash: *hash,
            corruption,
        };
        if self.verified.contains(hash) {
            return String::from_utf8(raw).map_err(|error| {
                self.verified.remove(hash);
                corrupt(Corruption::NotUtf8 {
                    valid_up_to: error.utf8_error().valid_up_to(),
                })
            });
        }
        let document = verify_document(hash, raw).map_err(corrupt)?;
        self.verified.insert(*hash);
        Ok(document)
    }

    /// Keeps the verified set in line with an explicit re-hash: a corrupt row is checked
    /// again (and refused) by the next 0-RTT check, a sound one is not.
    pub(crate) fn note_integrity(&self, hash: &ProtocolHash, integrity: &Integrity) {
        match integrity {
            Integrity::Verified => self.verified.insert(*hash),
            Integrity::Corrupt(_) => self.verified.remove(hash),
        }
    }

    /// The first row of `query` (selecting `hash` and `peer`, bound to the peer as `?1`
    /// and the action as `?2`) whose hash and peer are readable and whose document
    /// reproduces the hash (verified now unless this process did already): its hash and
    /// peer. Unreadable and corrupt rows are skipped.
    fn first_verified(
        &self,
        connection: &Connection,
        query: &str,
        resume: &ResumeQuery<'_>,
    ) -> rusqlite::Result<Option<(ProtocolHash, String)>> {
        let mut statement = connection.prepare_cached(query)?;
        let mut rows = statement.query(params![resume.peer, resume.action])?;
        while let Some(row) = rows.next()? {
            let (Ok(hash), Ok(peer)) = (column::hash(row, "hash"), column::text(row, "peer"))
            else {
                continue;
            };
            if self.verified.contains(&hash) {
                return Ok(Some((hash, peer)));
            }
            let raw: Option<Vec<u8>> = connection
                .prepare_cached("SELECT CAST(document AS BLOB) FROM protocols WHERE hash = ?1")?
                .query_row([hash.to_string()], |row| row.get(0))
                .optional()?;
            if let Some(raw) = raw {
                if integrity_of(&hash, raw.as_slice()).is_verified() {
                    self.verified.insert(hash);
                    return Ok(Some((hash, peer)));
                }
            }
        }
        Ok(None)
    }
}

/// Whether protocol `?1` has a `handler` (column name), answered from the
/// `protocols_roles` index without reading the row (nor its document).
fn verified_check_query(handler: &str) -> String {
    format!(
        "SELECT {handler} IS NOT NULL AS has_handler FROM protocols INDEXED BY protocols_roles
         WHERE hash = ?1"
    )
}

/// Adds `peer` to the peers of protocol `hash_text`, last used `now` (a peer it has is
/// moved to the front: replaced, so that it is also the newest row when times tie), then
/// forgets the least recent peers beyond [`MAX_PEERS_PER_PROTOCOL`].
fn record_peer(
    connection: &Connection,
    hash_text: &str,
    peer: &str,
    now: i64,
) -> rusqlite::Result<()> {
    connection
        .prepare_cached(
            "INSERT OR REPLACE INTO protocol_peers (hash, peer, last_used_ms) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![hash_text, peer, now])?;
    connection
        .prepare_cached(
            "DELETE FROM protocol_peers WHERE hash = ?1 AND rowid IN (
                 SELECT rowid FROM protocol_peers WHERE hash = ?1
                 ORDER BY last_used_ms DESC, rowid DESC LIMIT -1 OFFSET ?2)",
        )?
        .execute(params![hash_text, MAX_PEERS_PER_PROTOCOL as i64])?;
    Ok(())
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    #[test]
    fn a_verified_check_is_answered_from_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for role in [Role::Requester, Role::Provider] {
            let handler = handler_column(role);
            let plan: String = store
                .connection()
                .query_row(
                    &format!("EXPLAIN QUERY PLAN {}", verified_check_query(handler)),
                    ["0"],
                    |row| row.get(3),
                )
                .unwrap();
            assert!(plan.contains("COVERING INDEX protocols_roles"), "{plan}");
        }
    }
}
