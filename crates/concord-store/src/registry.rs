//! The consensus registry: protocols known by URI (one URI per protocol version), with
//! their document and handler modules, usable without any negotiation.

use std::time::SystemTime;

use concord_proto::{ProtocolHash, Role};
use rusqlite::params;

use crate::column::{self, ColumnError};
use crate::error::StoreError;
use crate::handlers::{handler_column, stored_roles, Handlers};
use crate::integrity::{integrity_of, verify_document, Integrity};
use crate::store::Store;
use crate::time::now_millis;

const TABLE: &str = "consensus_protocols";

/// A consensus protocol to register: its hash is computed here from `document`.
///
/// ```
/// use concord_store::NewConsensus;
/// use concord_proto::Role;
///
/// let entry = NewConsensus::new("https://protocols.example/product-info/v1", "# Product info\n")
///     .with_handler(Role::Provider, "function decodeRequest(m) { return m; }");
/// assert_eq!(entry.hash(), concord_proto::ProtocolHash::of_text("# Product info\n"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewConsensus {
    /// The protocol's URI, as peers name it in `candidateProtocols`.
    pub uri: String,
    /// The protocol document.
    pub document: String,
    /// Handler modules available for it.
    pub handlers: Handlers,
}

impl NewConsensus {
    /// The protocol at `uri` with this document and no handler modules yet.
    pub fn new(uri: impl Into<String>, document: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            document: document.into(),
            handlers: Handlers::default(),
        }
    }

    /// This entry with `role`'s handler module.
    pub fn with_handler(mut self, role: Role, source: impl Into<String>) -> Self {
        self.handlers.set(role, source);
        self
    }

    /// SHA-256 of the document.
    pub fn hash(&self) -> ProtocolHash {
        ProtocolHash::of_text(&self.document)
    }
}

/// A registered consensus protocol whose document reproduced its hash when read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsensusProtocol {
    /// The protocol's URI.
    pub uri: String,
    /// SHA-256 of `document`.
    pub hash: ProtocolHash,
    /// The protocol document.
    pub document: String,
    /// Handler modules stored.
    pub handlers: Handlers,
    /// When this document was registered under the URI.
    pub added: SystemTime,
}

impl ConsensusProtocol {
    /// The protocol `document` registered at `uri` since `added`, with no handler module
    /// yet: its hash is computed here, never taken from a caller (what another
    /// [`ConsensusRegistry`](crate::ConsensusRegistry) backend answers once it has checked
    /// the document it read).
    pub fn new(uri: impl Into<String>, document: impl Into<String>, added: SystemTime) -> Self {
        let document = document.into();
        Self {
            uri: uri.into(),
            hash: ProtocolHash::of_text(&document),
            document,
            handlers: Handlers::default(),
            added,
        }
    }
}

/// One line of [`Store::list_consensus`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsensusSummary {
    /// The protocol's URI.
    pub uri: String,
    /// The hash stored with it.
    pub hash: ProtocolHash,
    /// Whether the stored document reproduces `hash`; a corrupt entry is never used.
    pub integrity: Integrity,
    /// Roles whose handler module is stored.
    pub handler_roles: Vec<Role>,
    /// The document's length in bytes.
    pub document_len: usize,
    /// When this document was registered under the URI.
    pub added: SystemTime,
}

impl From<&ConsensusProtocol> for ConsensusSummary {
    /// The listing line of a protocol whose document reproduced its hash.
    fn from(protocol: &ConsensusProtocol) -> Self {
        Self {
            uri: protocol.uri.clone(),
            hash: protocol.hash,
            integrity: Integrity::Verified,
            handler_roles: [Role::Requester, Role::Provider]
                .into_iter()
                .filter(|role| protocol.handlers.get(*role).is_some())
                .collect(),
            document_len: protocol.document.len(),
            added: protocol.added,
        }
    }
}

impl Store {
    /// Registers the consensus protocol at `entry.uri`, or updates it. With the same
    /// document, handler modules given here replace the stored ones and those left `None`
    /// are kept; with a different document everything is replaced (old handlers belong to
    /// the old document).
    pub fn add_consensus(&self, entry: &NewConsensus) -> Result<ProtocolHash, StoreError> {
        let hash = entry.hash();
        let connection = self.connection();
        connection
            .prepare_cached(
                "INSERT INTO consensus_protocols
                     (uri, hash, document, requester_handler, provider_handler, added_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (uri) DO UPDATE SET
                     requester_handler = CASE WHEN hash = excluded.hash
                         THEN coalesce(excluded.requester_handler, requester_handler)
                         ELSE excluded.requester_handler END,
                     provider_handler = CASE WHEN hash = excluded.hash
                         THEN coalesce(excluded.provider_handler, provider_handler)
                         ELSE excluded.provider_handler END,
                     added_ms = CASE WHEN hash = excluded.hash
                         THEN added_ms ELSE excluded.added_ms END,
                     hash = excluded.hash,
                     document = excluded.document",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    entry.uri,
                    hash.to_string(),
                    entry.document,
                    entry.handlers.requester,
                    entry.handlers.provider,
                    now_millis(),
                ])
            })
            .map_err(self.sqlite("add consensus protocol"))?;
        Ok(hash)
    }

    /// The consensus protocol registered at `uri`, after checking that its document
    /// reproduces the stored hash; one that does not is [`StoreError::CorruptConsensus`].
    pub fn consensus(&self, uri: &str) -> Result<Option<ConsensusProtocol>, StoreError> {
        let sql = self.sqlite("read consensus protocol");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached("SELECT * FROM consensus_protocols WHERE uri = ?1")
            .map_err(&sql)?;
        let mut rows = statement.query([uri]).map_err(&sql)?;
        let Some(row) = rows.next().map_err(&sql)? else {
            return Ok(None);
        };
        let corrupt_row = self.corrupt_row(TABLE, &uri);
        let hash = column::hash(row, "hash").map_err(&corrupt_row)?;
        let raw = column::opt_raw_text(row, "document")
            .map_err(&corrupt_row)?
            .unwrap_or_default();
        let document = self.verified_consensus(uri, &hash, raw)?;
        let read = || -> Result<ConsensusProtocol, ColumnError> {
            Ok(ConsensusProtocol {
                uri: uri.to_owned(),
                hash,
                document,
                handlers: Handlers::read(row)?,
                added: column::time(row, "added_ms")?,
            })
        };
        read().map(Some).map_err(corrupt_row)
    }

    /// Every registered consensus protocol, by URI, with its [`Integrity`].
    pub fn list_consensus(&self) -> Result<Vec<ConsensusSummary>, StoreError> {
        let sql = self.sqlite("list consensus protocols");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT uri, hash, document, added_ms,
                     requester_handler IS NOT NULL AS has_requester,
                     provider_handler IS NOT NULL AS has_provider
                 FROM consensus_protocols ORDER BY uri",
            )
            .map_err(&sql)?;
        let mut rows = statement.query([]).map_err(&sql)?;
        let mut summaries = Vec::new();
        while let Some(row) = rows.next().map_err(&sql)? {
            let uri =
                column::text(row, "uri").map_err(self.corrupt_row(TABLE, &"(unreadable uri)"))?;
            let read = || -> Result<ConsensusSummary, ColumnError> {
                let hash = column::hash(row, "hash")?;
                let raw = column::opt_raw_text(row, "document")?.unwrap_or_default();
                Ok(ConsensusSummary {
                    uri: uri.clone(),
                    hash,
                    document_len: raw.len(),
                    integrity: integrity_of(&hash, &raw),
                    handler_roles: stored_roles(row)?,
                    added: column::time(row, "added_ms")?,
                })
            };
            summaries.push(read().map_err(self.corrupt_row(TABLE, &uri))?);
        }
        Ok(summaries)
    }

    /// Removes the consensus protocol at `uri`; whether it was registered.
    pub fn remove_consensus(&self, uri: &str) -> Result<bool, StoreError> {
        let connection = self.connection();
        let removed = connection
            .prepare_cached("DELETE FROM consensus_protocols WHERE uri = ?1")
            .and_then(|mut statement| statement.execute([uri]))
            .map_err(self.sqlite("remove consensus protocol"))?;
        Ok(removed > 0)
    }

    /// Whether a session in `role` can use the consensus protocol at `uri`: its document
    /// re-hashes to the stored hash and `role`'s handler module is stored. A document that
    /// does not reproduce its hash is [`StoreError::CorruptConsensus`].
    pub fn can_use_consensus(&self, uri: &str, role: Role) -> Result<bool, StoreError> {
        let handler = handler_column(role);
        let query = format!(
            "SELECT hash, document, {handler} IS NOT NULL AS has_handler
             FROM consensus_protocols WHERE uri = ?1"
        );
        let sql = self.sqlite("check consensus protocol");
        let connection = self.connection();
        let mut statement = connection.prepare_cached(&query).map_err(&sql)?;
        let mut rows = statement.query([uri]).map_err(&sql)?;
        let Some(row) = rows.next().map_err(&sql)? else {
            return Ok(false);
        };
        let read = || -> Result<(ProtocolHash, Vec<u8>, bool), ColumnError> {
            Ok((
                column::hash(row, "hash")?,
                column::opt_raw_text(row, "document")?.unwrap_or_default(),
                column::int(row, "has_handler")? != 0,
            ))
        };
        let (hash, raw, has_handler) = read().map_err(self.corrupt_row(TABLE, &uri))?;
        self.verified_consensus(uri, &hash, raw)?;
        Ok(has_handler)
    }

    /// The stored `document` of the consensus protocol at `uri` as text, if it reproduces
    /// `hash`; else [`StoreError::CorruptConsensus`].
    fn verified_consensus(
        &self,
        uri: &str,
        hash: &ProtocolHash,
        raw: Vec<u8>,
    ) -> Result<String, StoreError> {
        verify_document(hash, raw).map_err(|corruption| StoreError::CorruptConsensus {
            path: self.path().to_path_buf(),
            uri: uri.to_owned(),
            corruption,
        })
    }
}
