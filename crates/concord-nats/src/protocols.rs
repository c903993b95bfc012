//! [`ProtocolBook`] in a key-value bucket: one record per hash, created only once (the
//! first replica to save a hash creates it, the others merge into it by compare-and-swap),
//! and small index entries that let a 0-RTT offer and the bounds find candidates without
//! reading every record.

use std::time::{Duration, SystemTime};

use async_nats::jetstream::kv;
use concord_proto::{ProtocolHash, Role};
use concord_store::{
    HeldBy, NewProtocol, ProtocolBook, ResumeOffer, ResumeQuery, Settlement, StoreError,
    StoredProtocol, MAX_PEERS_PER_PROTOCOL,
};
use serde::{Deserialize, Serialize};

use crate::client::{entries_under, file_bucket, key_of, live_entry, Nats};
use crate::consensus::now_ms;
use crate::error::NatsError;

/// The bucket's name unless configured otherwise.
pub const DEFAULT_PROTOCOL_BUCKET: &str = "concord_protocols";

/// How many times a merge is retried when other replicas keep changing the record.
const CAS_ATTEMPTS: usize = 16;

/// The record of a protocol: `p.<hash>`.
fn record_key(hash: &ProtocolHash) -> String {
    format!("p.{hash}")
}

/// A peer's index entry: `peer.<sha256(peer)>.<hash>` (what it holds).
fn peer_prefix(peer: &str) -> String {
    format!("peer.{}.", key_of(peer))
}

/// An action's index entry: `act.<sha256(action)>.<hash>` (what calls it).
fn action_prefix(action: &str) -> String {
    format!("act.{}.", key_of(action))
}

/// The use index: `lru.<hash>` (when it was last used, whether negotiated).
fn lru_key(hash: &ProtocolHash) -> String {
    format!("lru.{hash}")
}

/// Negotiated protocols by hash shared by every replica of an agent: a protocol
/// negotiated on one replica is offered and accepted for 0-RTT on every other.
///
/// Layout of the bucket (file storage, one value per key): `p.<hash>` holds the
/// document, handler modules, test cases, action, settlement, use count and the peers
/// (at most [`MAX_PEERS_PER_PROTOCOL`], each with when it last used it); `peer.<h>.<hash>`,
/// `act.<h>.<hash>` and `lru.<hash>` are index entries (`<h>` the SHA-256 of the peer or
/// action name) written after the record. An index entry is only a hint: every candidate
/// it names is read and checked against its record (the document re-hashed, the peer or
/// action and the handler present) before it is offered, kept or evicted, so a stale or
/// missing index entry costs at most a negotiation, never a wrong answer.
///
/// Saving creates the record when it is missing (two replicas saving one hash at once:
/// one creates it, the other merges into it, both succeed); every change of a record is a
/// compare-and-swap on its revision, retried on a conflict.
#[derive(Debug, Clone)]
pub struct NatsProtocolBook {
    nats: Nats,
    store: kv::Store,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PeerUse {
    peer: String,
    used_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    document: String,
    requester: Option<String>,
    provider: Option<String>,
    test_cases: Option<String>,
    action: Option<String>,
    consensus_uri: Option<String>,
    created_ms: u64,
    last_used_ms: Option<u64>,
    use_count: u64,
    /// The most recent first.
    peers: Vec<PeerUse>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Use {
    used_ms: u64,
    negotiated: bool,
}

fn time(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

impl Record {
    fn negotiated(&self) -> bool {
        self.consensus_uri.is_none()
    }

    fn handler(&self, role: Role) -> Option<&String> {
        match role {
            Role::Requester => self.requester.as_ref(),
            Role::Provider => self.provider.as_ref(),
        }
    }

    /// Puts `peer` first, used `now`, and forgets the least recent beyond the bound;
    /// the peers forgotten.
    fn record_peer(&mut self, peer: &str, now: u64) -> Vec<String> {
        self.peers.retain(|held| held.peer != peer);
        self.peers.insert(
            0,
            PeerUse {
                peer: peer.to_owned(),
                used_ms: now,
            },
        );
        self.peers
            .split_off(self.peers.len().min(MAX_PEERS_PER_PROTOCOL))
            .into_iter()
            .map(|gone| gone.peer)
            .collect()
    }

    fn used_ms(&self) -> u64 {
        self.last_used_ms.unwrap_or(self.created_ms)
    }

    fn stored(self, hash: ProtocolHash) -> StoredProtocol {
        let settlement = match self.consensus_uri {
            Some(uri) => Settlement::Consensus { uri },
            None => Settlement::Negotiated,
        };
        let mut stored = StoredProtocol::new(self.document, settlement, time(self.created_ms));
        stored.hash = hash;
        stored.handlers.requester = self.requester;
        stored.handlers.provider = self.provider;
        stored.test_cases = self.test_cases;
        stored.action = self.action;
        stored.peers = self.peers.into_iter().map(|held| held.peer).collect();
        stored.last_used = self.last_used_ms.map(time);
        stored.use_count = self.use_count;
        stored
    }
}

/// A record read and checked, with the revision to compare-and-swap against.
struct Held {
    record: Record,
    revision: u64,
}

/// What a change of a record decided.
enum Change {
    /// Write this record.
    Write(Record),
    /// No protocol has this hash.
    Unknown,
}

impl NatsProtocolBook {
    /// The bucket `bucket` (file storage, one value per key), created when missing.
    ///
    /// # Errors
    /// When it cannot be created or read.
    pub async fn open(nats: &Nats, bucket: &str) -> Result<Self, NatsError> {
        let store = nats
            .bucket(file_bucket(bucket, "Concord: negotiated protocols by hash"))
            .await?;
        Ok(Self {
            nats: nats.clone(),
            store,
        })
    }

    /// Records `peer` as holding the protocol `hash` now (and, when `used`, one more use):
    /// its use count.
    ///
    /// # Errors
    /// [`StoreError::UnknownProtocol`] when no protocol has this hash, or NATS's.
    fn record_peer(
        &self,
        operation: &'static str,
        hash: &ProtocolHash,
        peer: &str,
        used: bool,
    ) -> Result<u64, StoreError> {
        let (hash, peer) = (*hash, peer.to_owned());
        let written = self.write(operation, move |book| {
            Box::pin(async move {
                let mut forgotten = Vec::new();
                let now = now_ms();
                let written = book
                    .change(&hash, |held| match held {
                        None => Change::Unknown,
                        Some(mut record) => {
                            if used {
                                record.last_used_ms = Some(now);
                                record.use_count = record.use_count.saturating_add(1);
                            }
                            forgotten = record.record_peer(&peer, now);
                            Change::Write(record)
                        }
                    })
                    .await?;
                if let Some(record) = &written {
                    book.index(&hash, record, &peer, &forgotten).await?;
                }
                Ok(written.map(|record| record.use_count))
            })
        })?;
        written.ok_or(StoreError::UnknownProtocol { hash })
    }

    /// Runs a read, made again while no NATS server takes it ([`Nats::run`]).
    fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        work: impl Fn(Book) -> futures_util::future::BoxFuture<'static, Result<T, NatsError>>
            + Send
            + 'static,
    ) -> Result<T, StoreError> {
        let (store, nats) = (self.store.clone(), self.nats.clone());
        self.nats
            .run(operation, move || {
                work(Book {
                    store: store.clone(),
                    nats: nats.clone(),
                    operation,
                })
            })
            .map_err(|error| error.into_store(operation))
    }

    /// Runs a change once: it takes several requests, and making it again after one of
    /// them failed would count a use twice or lose what the first try evicted.
    fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        work: impl FnOnce(Book) -> futures_util::future::BoxFuture<'static, Result<T, NatsError>>,
    ) -> Result<T, StoreError> {
        let book = Book {
            store: self.store.clone(),
            nats: self.nats.clone(),
            operation,
        };
        self.nats
            .run_once(operation, work(book))
            .map_err(|error| error.into_store(operation))
    }
}

/// The bucket as one operation sees it.
struct Book {
    store: kv::Store,
    nats: Nats,
    operation: &'static str,
}

impl Book {
    fn corrupt(&self, key: &str, detail: String) -> NatsError {
        NatsError::Corrupt {
            bucket: self.store.name.clone(),
            key: key.to_owned(),
            detail,
        }
    }

    /// The record of `hash`, its document checked against the hash.
    async fn read(&self, hash: &ProtocolHash) -> Result<Option<Held>, NatsError> {
        let key = record_key(hash);
        let Some(entry) = live_entry(&self.store, self.operation, &key).await? else {
            return Ok(None);
        };
        let record: Record = serde_json::from_slice(&entry.value)
            .map_err(|error| self.corrupt(&key, format!("not a protocol record: {error}")))?;
        if !hash.matches(&record.document) {
            return Err(self.corrupt(&key, format!("the document does not reproduce {hash}")));
        }
        Ok(Some(Held {
            record,
            revision: entry.revision,
        }))
    }

    /// Applies `change` to the record of `hash` (created when `change` makes one from
    /// nothing), retried on a compare-and-swap conflict; the record written.
    async fn change(
        &self,
        hash: &ProtocolHash,
        mut change: impl FnMut(Option<Record>) -> Change,
    ) -> Result<Option<Record>, NatsError> {
        let key = record_key(hash);
        for _ in 0..CAS_ATTEMPTS {
            let held = self.read(hash).await?;
            let revision = held.as_ref().map(|held| held.revision);
            let Change::Write(record) = change(held.map(|held| held.record)) else {
                return Ok(None);
            };
            let value = bytes::Bytes::from(
                serde_json::to_vec(&record)
                    .map_err(|error| NatsError::request(self.operation, key.as_str(), error))?,
            );
            // Written: done. Another replica wrote first: read again and merge into theirs.
            match revision {
                None => match self.store.create(&key, value).await {
                    Ok(_) => return Ok(Some(record)),
                    Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {}
                    Err(error) => return Err(NatsError::request(self.operation, key, error)),
                },
                Some(revision) => match self.store.update(&key, value, revision).await {
                    Ok(_) => return Ok(Some(record)),
                    Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {}
                    Err(error) => return Err(NatsError::request(self.operation, key, error)),
                },
            }
        }
        Err(NatsError::Conflict {
            what: "protocol",
            key: hash.to_string(),
        })
    }

    async fn put_index(&self, key: String, used: &Use) -> Result<(), NatsError> {
        let value = serde_json::to_vec(used)
            .map_err(|error| NatsError::request(self.operation, key.as_str(), error))?;
        self.store
            .put(&key, value.into())
            .await
            .map_err(|error| NatsError::request(self.operation, key, error))?;
        Ok(())
    }

    async fn delete_key(&self, key: String) -> Result<(), NatsError> {
        self.store
            .delete(&key)
            .await
            .map_err(|error| NatsError::request(self.operation, key, error))
    }

    /// Writes the index entries of `record` after a change by `peer` (and forgets the
    /// entries of the peers it forgot).
    async fn index(
        &self,
        hash: &ProtocolHash,
        record: &Record,
        peer: &str,
        forgotten: &[String],
    ) -> Result<(), NatsError> {
        let used = Use {
            used_ms: record
                .used_ms()
                .max(record.peers.first().map_or(0, |first| first.used_ms)),
            negotiated: record.negotiated(),
        };
        self.put_index(format!("{}{hash}", peer_prefix(peer)), &used)
            .await?;
        if let Some(action) = &record.action {
            self.put_index(format!("{}{hash}", action_prefix(action)), &used)
                .await?;
        }
        self.put_index(lru_key(hash), &used).await?;
        for gone in forgotten {
            self.delete_key(format!("{}{hash}", peer_prefix(gone)))
                .await?;
        }
        Ok(())
    }

    /// Deletes the record of `hash` if it is still at `revision`, then its index
    /// entries; whether it went.
    async fn delete(&self, hash: &ProtocolHash, held: &Held) -> Result<bool, NatsError> {
        let key = record_key(hash);
        if self
            .store
            .delete_expect_revision(&key, Some(held.revision))
            .await
            .is_err()
        {
            // Changed (or gone) since we read it: it is not ours to delete now.
            return Ok(false);
        }
        for peer in &held.record.peers {
            self.delete_key(format!("{}{hash}", peer_prefix(&peer.peer)))
                .await?;
        }
        if let Some(action) = &held.record.action {
            self.delete_key(format!("{}{hash}", action_prefix(action)))
                .await?;
        }
        self.delete_key(lru_key(hash)).await?;
        Ok(true)
    }

    /// The hashes named under an index `prefix`, the most recently used first.
    async fn indexed(&self, prefix: &str) -> Result<Vec<(ProtocolHash, Use)>, NatsError> {
        let mut found: Vec<(ProtocolHash, Use)> =
            entries_under(&self.store, self.nats.inbox(), self.operation, prefix)
                .await?
                .into_iter()
                .filter_map(|(key, value, _)| {
                    let hash = key.strip_prefix(prefix)?.parse().ok()?;
                    let used = serde_json::from_slice(&value).ok()?;
                    Some((hash, used))
                })
                .collect();
        found.sort_by_key(|(_, used)| std::cmp::Reverse(used.used_ms));
        Ok(found)
    }

    /// Takes `holder` off its negotiated protocols beyond the `max` it used most
    /// recently; one left with no peer that `keeps` is deleted. How many were deleted.
    async fn cap(
        &self,
        holder: &str,
        max: u64,
        keeps: impl Fn(&str) -> bool,
    ) -> Result<u64, NatsError> {
        let mut held = Vec::new();
        for (hash, _) in self.indexed(&peer_prefix(holder)).await? {
            match self.read(&hash).await? {
                Some(current) if current.record.negotiated() => {
                    if let Some(used) = current
                        .record
                        .peers
                        .iter()
                        .find(|peer| peer.peer == holder)
                        .map(|peer| peer.used_ms)
                    {
                        held.push((hash, used));
                    }
                }
                _ => {}
            }
        }
        held.sort_by_key(|(_, used)| std::cmp::Reverse(*used));
        let keep = usize::try_from(max).unwrap_or(usize::MAX);
        let mut deleted = 0;
        for (hash, _) in held.into_iter().skip(keep) {
            for _ in 0..CAS_ATTEMPTS {
                let Some(current) = self.read(&hash).await? else {
                    break;
                };
                let mut record = current.record.clone();
                record.peers.retain(|peer| peer.peer != holder);
                if !record.peers.iter().any(|peer| keeps(&peer.peer)) {
                    if self.delete(&hash, &current).await? {
                        deleted += 1;
                        break;
                    }
                    continue;
                }
                let value = bytes::Bytes::from(serde_json::to_vec(&record).map_err(|error| {
                    NatsError::request(self.operation, hash.to_string(), error)
                })?);
                if self
                    .store
                    .update(record_key(&hash), value, current.revision)
                    .await
                    .is_ok()
                {
                    self.delete_key(format!("{}{hash}", peer_prefix(holder)))
                        .await?;
                    break;
                }
            }
        }
        Ok(deleted)
    }
}

impl ProtocolBook for NatsProtocolBook {
    fn save_protocol(&self, protocol: &NewProtocol) -> Result<ProtocolHash, StoreError> {
        let protocol = protocol.clone();
        let hash = protocol.hash();
        self.write("save protocol", move |book| {
            Box::pin(async move {
                let mut forgotten = Vec::new();
                let now = now_ms();
                let written = book
                    .change(&hash, |held| {
                        let mut record = held.unwrap_or_else(|| Record {
                            document: protocol.document.clone(),
                            requester: None,
                            provider: None,
                            test_cases: None,
                            action: None,
                            consensus_uri: None,
                            created_ms: now,
                            last_used_ms: None,
                            use_count: 0,
                            peers: Vec::new(),
                        });
                        let given = &protocol.handlers;
                        record.requester = given.requester.clone().or(record.requester);
                        record.provider = given.provider.clone().or(record.provider);
                        record.test_cases = protocol.test_cases.clone().or(record.test_cases);
                        record.action = protocol.action.clone().or(record.action);
                        record.consensus_uri = match &protocol.settlement {
                            Settlement::Consensus { uri } => Some(uri.clone()),
                            _ => None,
                        };
                        forgotten = record.record_peer(&protocol.peer, now);
                        Change::Write(record)
                    })
                    .await?;
                if let Some(record) = written {
                    book.index(&hash, &record, &protocol.peer, &forgotten)
                        .await?;
                }
                Ok(hash)
            })
        })
    }

    fn protocol(&self, hash: &ProtocolHash) -> Result<Option<StoredProtocol>, StoreError> {
        let hash = *hash;
        self.read("read protocol", move |book| {
            Box::pin(
                async move { Ok(book.read(&hash).await?.map(|held| held.record.stored(hash))) },
            )
        })
    }

    fn touch_protocol(&self, hash: &ProtocolHash, peer: &str) -> Result<u64, StoreError> {
        self.record_peer("touch protocol", hash, peer, true)
    }

    fn add_protocol_peer(&self, hash: &ProtocolHash, peer: &str) -> Result<(), StoreError> {
        self.record_peer("add a protocol peer", hash, peer, false)
            .map(drop)
    }

    fn can_resume(&self, hash: &ProtocolHash, role: Role) -> Result<bool, StoreError> {
        let hash = *hash;
        self.read("check protocol", move |book| {
            Box::pin(async move {
                Ok(book
                    .read(&hash)
                    .await?
                    .is_some_and(|held| held.record.handler(role).is_some()))
            })
        })
    }

    fn latest_resumable(&self, query: &ResumeQuery<'_>) -> Result<Option<ResumeOffer>, StoreError> {
        let (peer, action, role) = (query.peer.to_owned(), query.action.to_owned(), query.role);
        self.read("find resumable protocol", move |book| {
            let (peer, action) = (peer.clone(), action.clone());
            Box::pin(async move {
                for (hash, _) in book.indexed(&peer_prefix(&peer)).await? {
                    // A corrupt record is skipped, as a corrupt row is in SQLite.
                    let Ok(Some(held)) = book.read(&hash).await else {
                        continue;
                    };
                    let record = &held.record;
                    if record.peers.iter().any(|held| held.peer == peer)
                        && record
                            .action
                            .as_ref()
                            .is_none_or(|called| *called == action)
                        && record.handler(role).is_some()
                    {
                        return Ok(Some(ResumeOffer {
                            hash,
                            held_by: HeldBy::ThisPeer,
                        }));
                    }
                }
                for (hash, _) in book.indexed(&action_prefix(&action)).await? {
                    let Ok(Some(held)) = book.read(&hash).await else {
                        continue;
                    };
                    let record = held.record;
                    if record.action.as_deref() != Some(action.as_str())
                        || record.handler(role).is_none()
                    {
                        continue;
                    }
                    if let Some(other) = record.peers.into_iter().find(|held| held.peer != peer) {
                        return Ok(Some(ResumeOffer {
                            hash,
                            held_by: HeldBy::OtherPeer { peer: other.peer },
                        }));
                    }
                }
                Ok(None)
            })
        })
    }

    fn prune_protocols(&self, max: u64) -> Result<u64, StoreError> {
        self.write("prune protocols", move |book| {
            Box::pin(async move {
                let negotiated: Vec<ProtocolHash> = book
                    .indexed("lru.")
                    .await?
                    .into_iter()
                    .filter(|(_, used)| used.negotiated)
                    .map(|(hash, _)| hash)
                    .collect();
                let keep = usize::try_from(max).unwrap_or(usize::MAX);
                let mut deleted = 0;
                for hash in negotiated.into_iter().skip(keep) {
                    match book.read(&hash).await? {
                        Some(held) if held.record.negotiated() => {
                            if book.delete(&hash, &held).await? {
                                deleted += 1;
                            }
                        }
                        Some(_) => {}
                        // A stale use entry.
                        None => book.delete_key(lru_key(&hash)).await?,
                    }
                }
                Ok(deleted)
            })
        })
    }

    fn cap_peer_protocols(&self, peer: &str, max: u64) -> Result<u64, StoreError> {
        let peer = peer.to_owned();
        self.write("cap a peer's protocols", move |book| {
            Box::pin(async move { book.cap(&peer, max, |_| true).await })
        })
    }

    fn cap_address_protocols(&self, address: &str, max: u64) -> Result<u64, StoreError> {
        let address = address.to_owned();
        self.write("cap an address's protocols", move |book| {
            Box::pin(async move {
                book.cap(&address, max, |peer| !peer.starts_with("did:"))
                    .await
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            document: "# d\n".to_owned(),
            requester: None,
            provider: None,
            test_cases: None,
            action: None,
            consensus_uri: None,
            created_ms: 1,
            last_used_ms: None,
            use_count: 0,
            peers: Vec::new(),
        }
    }

    #[test]
    fn a_peer_used_again_moves_first_and_the_least_recent_beyond_the_bound_are_forgotten() {
        let mut record = record();
        for n in 0..MAX_PEERS_PER_PROTOCOL {
            assert!(record
                .record_peer(&format!("peer-{n}"), n as u64)
                .is_empty());
        }
        assert!(record.record_peer("peer-0", 100).is_empty(), "held already");
        assert_eq!(record.peers[0].peer, "peer-0");
        assert_eq!(record.peers.len(), MAX_PEERS_PER_PROTOCOL);
        let forgotten = record.record_peer("newcomer", 101);
        assert_eq!(forgotten, ["peer-1"], "the least recently used one goes");
        assert_eq!(record.peers.len(), MAX_PEERS_PER_PROTOCOL);
        assert_eq!(record.peers[0].peer, "newcomer");
    }

    #[test]
    fn every_key_is_one_a_bucket_accepts() {
        let hash = ProtocolHash::of_text("# d\n");
        for key in [
            record_key(&hash),
            lru_key(&hash),
            format!("{}{hash}", peer_prefix("ws://[2001:db8::1]:80 did:wba:x")),
            format!("{}{hash}", action_prefix("get product.info*>")),
        ] {
            assert!(
                key.split('.')
                    .all(|token| !token.is_empty()
                        && token.chars().all(|c| c.is_ascii_alphanumeric())),
                "{key}"
            );
        }
    }
}
