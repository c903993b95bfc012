//! [`ConsensusRegistry`] in a key-value bucket, each change a compare-and-swap on the
//! entry's revision.

use std::time::{Duration, SystemTime};

use async_nats::jetstream::kv;
use concord_proto::{ProtocolHash, Role};
use concord_store::{
    ConsensusProtocol, ConsensusRegistry, ConsensusSummary, NewConsensus, StoreError,
};
use serde::{Deserialize, Serialize};

use crate::client::{file_bucket, key_of, live_entry, Nats};
use crate::error::NatsError;

/// The bucket's name unless configured otherwise.
pub const DEFAULT_CONSENSUS_BUCKET: &str = "concord_consensus";

const PREFIX: &str = "c.";
const WHAT: &str = "consensus protocol";

/// The consensus registry shared by every replica of an agent: one key per URI.
///
/// A change reads the entry, merges (the same document keeps the handler modules not
/// given; another document replaces everything) and writes it only if its revision is
/// still the one read. Two replicas racing on one URI: one write lands, the other
/// answers [`NatsError::Conflict`] (inside [`StoreError::Backend`]) unless what landed is
/// already what it asked for, and nothing is silently overwritten.
#[derive(Debug, Clone)]
pub struct NatsConsensusRegistry {
    nats: Nats,
    store: kv::Store,
}

/// An entry as stored: the document with the hash it must reproduce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    uri: String,
    hash: String,
    document: String,
    requester: Option<String>,
    provider: Option<String>,
    added_ms: u64,
}

impl Record {
    fn checked(self, bucket: &str, key: &str) -> Result<ConsensusProtocol, NatsError> {
        let corrupt = |detail: String| NatsError::Corrupt {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            detail,
        };
        let hash: ProtocolHash = self
            .hash
            .parse()
            .map_err(|error| corrupt(format!("hash {:?}: {error}", self.hash)))?;
        if !hash.matches(&self.document) {
            return Err(corrupt(format!(
                "the document of {:?} does not reproduce its hash {hash}",
                self.uri
            )));
        }
        let mut protocol = ConsensusProtocol::new(
            self.uri,
            self.document,
            SystemTime::UNIX_EPOCH + Duration::from_millis(self.added_ms),
        );
        protocol.handlers.requester = self.requester;
        protocol.handlers.provider = self.provider;
        Ok(protocol)
    }

    /// What `entry` makes of `held` (the stored record, if any).
    fn merged(held: Option<&Self>, entry: &NewConsensus) -> Self {
        let hash = entry.hash();
        match held {
            Some(held) if held.document == entry.document => Self {
                requester: entry
                    .handlers
                    .requester
                    .clone()
                    .or_else(|| held.requester.clone()),
                provider: entry
                    .handlers
                    .provider
                    .clone()
                    .or_else(|| held.provider.clone()),
                ..held.clone()
            },
            _ => Self {
                uri: entry.uri.clone(),
                hash: hash.to_string(),
                document: entry.document.clone(),
                requester: entry.handlers.requester.clone(),
                provider: entry.handlers.provider.clone(),
                added_ms: now_ms(),
            },
        }
    }

    /// Whether this record already holds what `entry` asks (so a lost race changed
    /// nothing the caller wanted).
    fn holds(&self, entry: &NewConsensus) -> bool {
        self.document == entry.document
            && entry
                .handlers
                .requester
                .as_ref()
                .is_none_or(|source| self.requester.as_ref() == Some(source))
            && entry
                .handlers
                .provider
                .as_ref()
                .is_none_or(|source| self.provider.as_ref() == Some(source))
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn decode(bucket: &str, key: &str, value: &[u8]) -> Result<Record, NatsError> {
    serde_json::from_slice(value).map_err(|error| NatsError::Corrupt {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        detail: format!("not a consensus record: {error}"),
    })
}

fn encode(operation: &'static str, key: &str, record: &Record) -> Result<bytes::Bytes, NatsError> {
    serde_json::to_vec(record)
        .map(bytes::Bytes::from)
        .map_err(|error| NatsError::request(operation, key, error))
}

impl NatsConsensusRegistry {
    /// The bucket `bucket` (file storage, one value per key), created when missing.
    ///
    /// # Errors
    /// When it cannot be created or read.
    pub async fn open(nats: &Nats, bucket: &str) -> Result<Self, NatsError> {
        let store = nats
            .bucket(file_bucket(bucket, "Concord: consensus protocols by URI"))
            .await?;
        Ok(Self {
            nats: nats.clone(),
            store,
        })
    }

    fn read(
        &self,
        operation: &'static str,
        uri: &str,
    ) -> Result<Option<ConsensusProtocol>, NatsError> {
        let key = format!("{PREFIX}{}", key_of(uri));
        let store = self.store.clone();
        let bucket = self.store.name.clone();
        self.nats.run(operation, move || {
            let (store, bucket, key) = (store.clone(), bucket.clone(), key.clone());
            async move {
                let Some(entry) = live_entry(&store, operation, &key).await? else {
                    return Ok(None);
                };
                decode(&bucket, &key, &entry.value)?
                    .checked(&bucket, &key)
                    .map(Some)
            }
        })
    }
}

impl ConsensusRegistry for NatsConsensusRegistry {
    fn add_consensus(&self, entry: &NewConsensus) -> Result<ProtocolHash, StoreError> {
        const OPERATION: &str = "add consensus protocol";
        let key = format!("{PREFIX}{}", key_of(&entry.uri));
        let (store, bucket, entry) = (self.store.clone(), self.store.name.clone(), entry.clone());
        self.nats
            .run(OPERATION, move || {
                let (store, bucket, entry, key) =
                    (store.clone(), bucket.clone(), entry.clone(), key.clone());
                async move {
                    let held = live_entry(&store, OPERATION, &key).await?;
                    let held_record = held
                        .as_ref()
                        .map(|held| decode(&bucket, &key, &held.value))
                        .transpose()?;
                    let record = Record::merged(held_record.as_ref(), &entry);
                    let value = encode(OPERATION, &key, &record)?;
                    let written = match &held {
                        None => store.create(&key, value).await.map_err(|error| {
                            (
                                error.kind() == kv::CreateErrorKind::AlreadyExists,
                                error.to_string(),
                            )
                        }),
                        Some(held) => {
                            store
                                .update(&key, value, held.revision)
                                .await
                                .map_err(|error| {
                                    (
                                        error.kind() == kv::UpdateErrorKind::WrongLastRevision,
                                        error.to_string(),
                                    )
                                })
                        }
                    };
                    match written {
                        Ok(_) => Ok(entry.hash()),
                        Err((true, _)) => {
                            // Lost the race: fine only when the winner wrote what we asked.
                            let now = live_entry(&store, OPERATION, &key).await?;
                            match now
                                .map(|now| decode(&bucket, &key, &now.value))
                                .transpose()?
                            {
                                Some(now) if now.holds(&entry) => Ok(entry.hash()),
                                _ => Err(NatsError::Conflict {
                                    what: WHAT,
                                    key: entry.uri.clone(),
                                }),
                            }
                        }
                        Err((false, cause)) => Err(NatsError::request(OPERATION, key, cause)),
                    }
                }
            })
            .map_err(|error| error.into_store(OPERATION))
    }

    fn consensus(&self, uri: &str) -> Result<Option<ConsensusProtocol>, StoreError> {
        const OPERATION: &str = "read consensus protocol";
        self.read(OPERATION, uri)
            .map_err(|error| error.into_store(OPERATION))
    }

    fn list_consensus(&self) -> Result<Vec<ConsensusSummary>, StoreError> {
        const OPERATION: &str = "list consensus protocols";
        let bucket = self.store.name.clone();
        let entries = self.nats.entries_blocking(&self.store, OPERATION, PREFIX)?;
        let mut listed = entries
            .into_iter()
            .map(|(key, value, _)| {
                decode(&bucket, &key, &value)?
                    .checked(&bucket, &key)
                    .map(|protocol| ConsensusSummary::from(&protocol))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| error.into_store(OPERATION))?;
        listed.sort_by(|a, b| a.uri.cmp(&b.uri));
        Ok(listed)
    }

    fn remove_consensus(&self, uri: &str) -> Result<bool, StoreError> {
        const OPERATION: &str = "remove consensus protocol";
        let key = format!("{PREFIX}{}", key_of(uri));
        let (store, uri) = (self.store.clone(), uri.to_owned());
        self.nats
            .run(OPERATION, move || {
                let (store, uri, key) = (store.clone(), uri.clone(), key.clone());
                async move {
                    let Some(held) = live_entry(&store, OPERATION, &key).await? else {
                        return Ok(false);
                    };
                    match store
                        .delete_expect_revision(&key, Some(held.revision))
                        .await
                    {
                        Ok(()) => Ok(true),
                        Err(error) => {
                            // Changed since we read it: removing it now would drop that change.
                            if live_entry(&store, OPERATION, &key)
                                .await?
                                .is_some_and(|now| now.revision != held.revision)
                            {
                                Err(NatsError::Conflict {
                                    what: WHAT,
                                    key: uri,
                                })
                            } else {
                                Err(NatsError::request(OPERATION, key, error))
                            }
                        }
                    }
                }
            })
            .map_err(|error| error.into_store(OPERATION))
    }

    fn can_use_consensus(&self, uri: &str, role: Role) -> Result<bool, StoreError> {
        const OPERATION: &str = "check consensus protocol";
        Ok(self
            .read(OPERATION, uri)
            .map_err(|error| error.into_store(OPERATION))?
            .is_some_and(|protocol| protocol.handlers.get(role).is_some()))
    }
}
