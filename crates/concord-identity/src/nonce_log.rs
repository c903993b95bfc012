//! The nonce log: the seam behind which a node keeps the (DID, nonce) pairs it accepted,
//! shaped like quinn-proto's `TokenLog` (one synchronous `&self` call on the hot path,
//! shared as `Arc<dyn NonceLog>`, its error contract written down).
//!
//! [`ReplayCache`](crate::ReplayCache) is the in-memory default; a backend shared by
//! several processes (a key-value store with expiry) implements the same trait and must
//! pass `conformance::nonce_log` (feature `conformance`).

use crate::did::Did;
use crate::replay::Replay;

/// Where accepted (DID, nonce) pairs are remembered while their signatures could still be
/// valid, so that a second use is refused.
///
/// # Contract: which errors are allowed
///
/// - A **false negative** (answering `Ok(())` to [`record`](Self::record), or `false` to
///   [`seen`](Self::seen), for a pair recorded or [restored](Self::restore) less than the
///   log's time to live ago) lets a signed request be replayed: **never allowed**, under
///   any concurrency. Two `record`s of one pair racing each other (two connections, two
///   processes sharing the backend) must answer `Ok` to at most one.
/// - A **false positive** (refusing a pair never used: [`Replay::Seen`], or
///   [`Replay::Full`]/[`Replay::DidQuota`] when the backend cannot or will not hold more)
///   costs the caller one retry with a fresh nonce: allowed, and the way a backend that
///   cannot answer (unreachable, over its bounds) must fail. A log that refuses everything
///   is safe but useless; a conforming one accepts distinct fresh pairs while it has room.
/// - After the time to live, a pair may be accepted again (its signature no longer
///   verifies) or still refused.
///
/// Calls are synchronous and made on the upgrade's path (one lookup before the signer's
/// document is fetched, one record after the signature verified): a backend that needs
/// the network keeps a local view it answers from, or answers quickly.
pub trait NonceLog: Send + Sync + std::fmt::Debug {
    /// Whether `did` already used `nonce` (recorded or restored, not expired at
    /// `now_unix`): the cheap check made before any costly work. `true` refuses the
    /// request as a replay; may be a false positive, never a false negative.
    fn seen(&self, did: &Did, nonce: &str, now_unix: i64) -> bool;

    /// Records that `did` used `nonce` at `now_unix`, once the request verified.
    ///
    /// # Errors
    /// [`Replay::Seen`] when the pair is already held (a replay); [`Replay::Full`] or
    /// [`Replay::DidQuota`] when the backend refuses to hold more (answered 503 or 429).
    fn record(&self, did: &Did, nonce: &str, now_unix: i64) -> Result<(), Replay>;

    /// Takes a pair recorded at `recorded_unix` by an earlier process (read back from
    /// durable storage): a replay until it expires, whatever the log's bounds. A backend
    /// that is itself durable and shared may hold it already and do nothing.
    fn restore(&self, did: &Did, nonce: &str, recorded_unix: i64);
}
