//! [`NonceStore`] in a key-value bucket whose `max_age` is the signature window.

use std::time::Duration;

use async_nats::jetstream::kv;
use concord_store::{NonceStore, StoreError, UsedNonce};
use serde::{Deserialize, Serialize};

use crate::client::{file_bucket, key_of, live_entry, Nats};
use crate::error::NatsError;

/// The bucket's name unless configured otherwise.
pub const DEFAULT_NONCE_BUCKET: &str = "concord_nonces";

/// Where every key of this bucket starts.
const PREFIX: &str = "n.";

/// The nonces of accepted DID-signed requests, shared by every replica of an agent: one
/// key per (DID, nonce) pair, written create-only, in a bucket whose `max_age` is the
/// signature window (NATS forgets a pair once no signature carrying it can be valid).
///
/// A pair recorded on one replica is refused on every other, and after any restart (the
/// bucket is on the servers' disks). Two replicas recording one pair at once: the server
/// accepts one create and refuses the other. A pair whose recorded expiry has passed (the
/// bucket keeps it a little longer than asked) is replaced by a compare-and-swap on its
/// revision, so that two replicas doing that at once still accept at most one.
#[derive(Debug, Clone)]
pub struct NatsNonceStore {
    nats: Nats,
    store: kv::Store,
    window: Duration,
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    did: String,
    nonce: String,
    recorded: i64,
    expires: i64,
}

impl NatsNonceStore {
    /// The bucket `bucket`, created with `max_age` = `window` (file storage, one value
    /// per key) when missing. `window` is the longest a nonce must be kept (the node's
    /// `Security::replay_ttl`).
    ///
    /// # Errors
    /// When the bucket cannot be created or read, or [`NatsError::WindowTooShort`] when it
    /// exists and forgets entries sooner than `window`.
    pub async fn open(nats: &Nats, bucket: &str, window: Duration) -> Result<Self, NatsError> {
        let store = nats
            .bucket(kv::Config {
                max_age: window,
                ..file_bucket(bucket, "Concord: nonces of accepted DID-signed requests")
            })
            .await?;
        let status = store.status().await.map_err(|error| NatsError::Bucket {
            bucket: bucket.to_owned(),
            cause: error.to_string(),
        })?;
        let max_age = status.max_age();
        if !max_age.is_zero() && max_age < window {
            return Err(NatsError::WindowTooShort {
                bucket: bucket.to_owned(),
                max_age,
                window,
            });
        }
        // A bucket that keeps entries longer keeps them at least `window`.
        let window = if max_age.is_zero() { window } else { max_age };
        Ok(Self {
            nats: nats.clone(),
            store,
            window,
        })
    }

    /// How long the bucket keeps a nonce: the longest `expires - recorded` accepted.
    pub fn window(&self) -> Duration {
        self.window
    }
}

impl NonceStore for NatsNonceStore {
    fn record_nonce(
        &self,
        did: &str,
        nonce: &str,
        recorded: i64,
        expires: i64,
    ) -> Result<bool, StoreError> {
        const OPERATION: &str = "record nonce";
        let asked = expires.saturating_sub(recorded);
        if u64::try_from(asked).map_or(true, |asked| Duration::from_secs(asked) > self.window) {
            return Err(NatsError::BeyondWindow {
                asked,
                window: self.window,
            }
            .into_store(OPERATION));
        }
        let key = format!("{PREFIX}{}", key_of(&format!("{did}\n{nonce}")));
        let record = Record {
            did: did.to_owned(),
            nonce: nonce.to_owned(),
            recorded,
            expires,
        };
        let value = bytes::Bytes::from(serde_json::to_vec(&record).map_err(|error| {
            NatsError::request(OPERATION, key.as_str(), error).into_store(OPERATION)
        })?);
        let (store, bucket) = (self.store.clone(), self.store.name.clone());
        self.nats
            .run(OPERATION, move || {
                let (store, bucket, key, value) =
                    (store.clone(), bucket.clone(), key.clone(), value.clone());
                async move {
                    match store.create(&key, value.clone()).await {
                        Ok(_) => return Ok(true),
                        Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {}
                        Err(error) => return Err(NatsError::request(OPERATION, key, error)),
                    }
                    // Held: a replay, unless what is held expired by the caller's clock.
                    let Some(held) = live_entry(&store, OPERATION, &key).await? else {
                        // Deleted or aged out between the create and this read: a false
                        // positive (refusing one request) is allowed, a false negative never.
                        return Ok(false);
                    };
                    let held_record: Record =
                        serde_json::from_slice(&held.value).map_err(|error| {
                            NatsError::Corrupt {
                                bucket,
                                key: key.clone(),
                                detail: format!("not a nonce record: {error}"),
                            }
                        })?;
                    if held_record.expires > recorded {
                        return Ok(false);
                    }
                    match store.update(&key, value, held.revision).await {
                        Ok(_) => Ok(true),
                        // Another replica replaced it first: that one was accepted.
                        Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                            Ok(false)
                        }
                        Err(error) => Err(NatsError::request(OPERATION, key, error)),
                    }
                }
            })
            .map_err(|error| error.into_store(OPERATION))
    }

    fn unexpired_nonces(&self, now: i64) -> Result<Vec<UsedNonce>, StoreError> {
        const OPERATION: &str = "read nonces";
        let bucket = self.store.name.clone();
        let entries = self.nats.entries_blocking(&self.store, OPERATION, PREFIX)?;
        let mut kept = Vec::new();
        for (key, value, _) in entries {
            let record: Record = serde_json::from_slice(&value).map_err(|error| {
                NatsError::Corrupt {
                    bucket: bucket.clone(),
                    key,
                    detail: format!("not a nonce record: {error}"),
                }
                .into_store(OPERATION)
            })?;
            if record.expires > now {
                kept.push(UsedNonce::new(
                    record.did,
                    record.nonce,
                    record.recorded,
                    record.expires,
                ));
            }
        }
        kept.sort_by_key(|used| used.recorded);
        Ok(kept)
    }
}
