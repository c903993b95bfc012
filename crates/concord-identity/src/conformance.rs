//! Conformance suites for the traits of this crate: any backend must pass them (they
//! panic, naming the broken rule, when it does not). Feature `conformance`.
//!
//! ```
//! use std::time::Duration;
//! use concord_identity::{conformance, ReplayCache};
//!
//! conformance::nonce_log(&|| ReplayCache::new(1_000, Duration::from_secs(360)).per_did(100), 360);
//! ```
// Panicking, naming the broken rule, is how a conformance suite fails.
#![allow(clippy::panic)]

use crate::did::Did;
use crate::nonce_log::NonceLog;
use crate::replay::Replay;

/// Distinct fresh pairs an empty log under test must accept (its room at least).
pub const NONCE_LOG_ROOM: usize = 64;

/// Checks the [`NonceLog`] contract on logs made by `new` (each call an empty log, with a
/// time to live of `ttl_secs` and room for at least [`NONCE_LOG_ROOM`] pairs, 32 of them
/// for one DID): no false negative, alone or under concurrent records; fresh pairs
/// accepted while there is room; restored pairs refused until they expire.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn nonce_log<L: NonceLog>(new: &dyn Fn() -> L, ttl_secs: i64) {
    let did = |name: &str| match Did::parse(&format!("did:wba:conformance.example:{name}")) {
        Ok(did) => did,
        Err(error) => panic!("the suite's DID {name:?} does not parse: {error}"),
    };
    let (alice, bob) = (did("alice"), did("bob"));
    let now = 1_700_000_000;

    let log = new();
    assert!(
        !log.seen(&alice, "n1", now),
        "an empty log must not have seen n1 (a false positive here makes every nonce useless)"
    );
    assert_eq!(
        log.record(&alice, "n1", now),
        Ok(()),
        "a fresh pair must be accepted"
    );
    assert!(
        log.seen(&alice, "n1", now),
        "a recorded pair must be seen (false negative)"
    );
    assert_eq!(
        log.record(&alice, "n1", now + 1),
        Err(Replay::Seen),
        "a second record of a pair is a replay (false negative)"
    );
    assert!(
        log.seen(&alice, "n1", now + ttl_secs - 1),
        "a pair must be remembered for its whole time to live (false negative)"
    );
    assert_eq!(
        log.record(&bob, "n1", now),
        Ok(()),
        "the same nonce from another DID is a fresh pair"
    );
    for n in 0..16 {
        assert_eq!(
            log.record(&alice, &format!("m{n}"), now),
            Ok(()),
            "fresh pair m{n} refused while the log has room"
        );
    }
    for n in 0..16 {
        assert_eq!(
            log.record(&alice, &format!("m{n}"), now + 2),
            Err(Replay::Seen),
            "m{n} replayed (false negative)"
        );
    }

    let log = new();
    log.restore(&alice, "old", now - 10);
    assert!(log.seen(&alice, "old", now), "a restored pair must be seen");
    assert_eq!(
        log.record(&alice, "old", now),
        Err(Replay::Seen),
        "a restored pair is a replay until it expires"
    );

    concurrent_records(&new(), &did, now);
}

/// Several threads record the same pairs at once: each pair is accepted at most once.
fn concurrent_records(log: &dyn NonceLog, did: &dyn Fn(&str) -> Did, now: i64) {
    const THREADS: usize = 4;
    const PAIRS: usize = NONCE_LOG_ROOM / 4;
    let dids: Vec<Did> = (0..4).map(|n| did(&format!("racer{n}"))).collect();
    let accepted: Vec<Vec<usize>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..PAIRS)
                        .filter(|n| {
                            log.record(&dids[n % dids.len()], &format!("race{n}"), now)
                                .is_ok()
                        })
                        .collect::<Vec<usize>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| panic!("a racing thread panicked"))
            })
            .collect()
    });
    once_at_most(&accepted, PAIRS, THREADS);
}

/// Each of `pairs` pairs raced by `threads` threads was accepted at most once (a false
/// positive under contention is allowed; a false negative never).
fn once_at_most(accepted: &[Vec<usize>], pairs: usize, threads: usize) {
    let mut times = vec![0usize; pairs];
    for n in accepted.iter().flatten() {
        times[*n] += 1;
    }
    if let Some(n) = times.iter().position(|&count| count > 1) {
        panic!(
            "pair race{n}, recorded by {threads} threads at once, was accepted {} times (false negative)",
            times[n]
        );
    }
}
