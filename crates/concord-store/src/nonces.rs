//! The nonces of accepted DID-signed requests, kept until their signatures could no longer
//! be valid: a node that restarts reloads them, so a request accepted before the restart is
//! not accepted again after it (a replay).
//!
//! The table holds what the node's in-memory replay cache admitted (its capacity and
//! per-DID share bound it), and each record removes up to [`NONCE_PRUNE_BATCH`] expired
//! rows, so expired rows never outnumber the ones recorded since.

use rusqlite::params;

use crate::error::StoreError;
use crate::store::Store;

/// The most expired nonces one [`Store::record_nonce`] deletes.
pub const NONCE_PRUNE_BATCH: usize = 64;

/// One recorded nonce (see [`Store::unexpired_nonces`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UsedNonce {
    /// The DID that signed.
    pub did: String,
    /// Its nonce.
    pub nonce: String,
    /// When it was accepted (Unix seconds).
    pub recorded: i64,
    /// Until when it is kept (Unix seconds).
    pub expires: i64,
}

impl UsedNonce {
    /// The pair `did`, `nonce` accepted at `recorded`, kept until `expires` (Unix seconds):
    /// what another [`NonceStore`](crate::NonceStore) backend answers.
    pub fn new(
        did: impl Into<String>,
        nonce: impl Into<String>,
        recorded: i64,
        expires: i64,
    ) -> Self {
        Self {
            did: did.into(),
            nonce: nonce.into(),
            recorded,
            expires,
        }
    }
}

impl Store {
    /// Records that `did` used `nonce` at `recorded` (Unix seconds), kept until `expires`,
    /// and deletes up to [`NONCE_PRUNE_BATCH`] nonces expired at `recorded`, in one
    /// transaction (committed to the write-ahead log before this returns: it survives
    /// `kill -9`). `Ok(false)`, recording nothing, when `did` already used `nonce` and it
    /// has not expired (a replay).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] when it could not be written (the caller must then refuse the
    /// request rather than accept a nonce it may forget).
    pub fn record_nonce(
        &self,
        did: &str,
        nonce: &str,
        recorded: i64,
        expires: i64,
    ) -> Result<bool, StoreError> {
        let sql = self.sqlite("record nonce");
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let batch = i64::try_from(NONCE_PRUNE_BATCH).unwrap_or(i64::MAX);
        tx.prepare_cached(
            "DELETE FROM auth_nonces WHERE rowid IN
                (SELECT rowid FROM auth_nonces WHERE expires <= ?1 LIMIT ?2)",
        )
        .and_then(|mut statement| statement.execute(params![recorded, batch]))
        .map_err(&sql)?;
        // A row of the same pair that expired (and was not pruned yet) is replaced.
        let written = tx
            .prepare_cached(
                "INSERT INTO auth_nonces (did, nonce, recorded, expires) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (did, nonce) DO UPDATE
                    SET recorded = excluded.recorded, expires = excluded.expires
                    WHERE auth_nonces.expires <= excluded.recorded",
            )
            .and_then(|mut statement| statement.execute(params![did, nonce, recorded, expires]))
            .map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(written > 0)
    }

    /// Every nonce not expired at `now` (Unix seconds), oldest first; the expired ones are
    /// deleted first.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] when the table could not be read.
    pub fn unexpired_nonces(&self, now: i64) -> Result<Vec<UsedNonce>, StoreError> {
        let sql = self.sqlite("read nonces");
        let connection = self.connection();
        connection
            .prepare_cached("DELETE FROM auth_nonces WHERE expires <= ?1")
            .and_then(|mut statement| statement.execute([now]))
            .map_err(&sql)?;
        let mut statement = connection
            .prepare_cached(
                "SELECT did, nonce, recorded, expires FROM auth_nonces
                 WHERE expires > ?1 ORDER BY recorded, rowid",
            )
            .map_err(&sql)?;
        let rows = statement
            .query_map([now], |row| {
                Ok(UsedNonce {
                    did: row.get(0)?,
                    nonce: row.get(1)?,
                    recorded: row.get(2)?,
                    expires: row.get(3)?,
                })
            })
            .map_err(&sql)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(&sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_recorded_once_until_it_expires_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let did = "did:wba:example.com:agents:alice";
        {
            let store = Store::open(dir.path()).unwrap();
            assert!(store.record_nonce(did, "n1", 1_000, 1_360).unwrap());
            assert!(
                !store.record_nonce(did, "n1", 1_100, 1_460).unwrap(),
                "a replay"
            );
            assert!(store
                .record_nonce("did:wba:example.com:bob", "n1", 1_100, 1_460)
                .unwrap());
        }
        let store = Store::open(dir.path()).unwrap();
        let kept = store.unexpired_nonces(1_200).unwrap();
        assert_eq!(
            kept.iter()
                .map(|n| (n.did.as_str(), n.nonce.as_str(), n.recorded))
                .collect::<Vec<_>>(),
            [(did, "n1", 1_000), ("did:wba:example.com:bob", "n1", 1_100)]
        );
        // Past its expiry the pair may be used again (its signature no longer verifies).
        assert!(store.record_nonce(did, "n1", 1_360, 1_720).unwrap());
        assert_eq!(
            store.unexpired_nonces(1_500).unwrap().len(),
            1,
            "bob's expired"
        );
    }

    #[test]
    fn each_record_prunes_a_batch_of_expired_nonces() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for n in 0..100 {
            assert!(store
                .record_nonce("did:wba:a.example", &format!("n{n}"), 0, 10)
                .unwrap());
        }
        store
            .record_nonce("did:wba:a.example", "late", 20, 30)
            .unwrap();
        let rows: i64 = store
            .connection()
            .query_row("SELECT count(*) FROM auth_nonces", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 100 - 64 + 1);
    }
}
