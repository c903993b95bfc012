//! Conformance suites for the traits of this crate: any backend must pass them (they
//! panic, naming the broken rule, when it does not). Feature `conformance`.
//!
//! ```
//! use concord_interact::{conformance, LocalEventLog};
//!
//! conformance::event_log(&LocalEventLog::new(1));
//! ```
// Panicking, naming the broken rule, is how a conformance suite fails.
#![allow(clippy::panic)]

use serde_json::json;

use crate::event_log::EventLog;

/// Checks the [`EventLog`] contract on an empty log: ids of one name strictly increase,
/// names are numbered apart, and appends racing from several threads never share an id
/// and each thread sees its ids increase.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn event_log(log: &dyn EventLog) {
    let append = |event: &str| {
        log.append(event, &json!({"n": 1}))
            .unwrap_or_else(|error| panic!("appending `{event}`: the backend failed: {error}"))
    };
    let first = append("conformance.a");
    let second = append("conformance.a");
    assert!(
        second > first,
        "ids of one name must increase: {first} then {second}"
    );
    let other = append("conformance.b");
    let third = append("conformance.a");
    assert!(
        third > second,
        "another name's event must not break the sequence: {second} then {third}"
    );
    let _ = other;

    const THREADS: usize = 4;
    const APPENDS: usize = 64;
    let seen: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..APPENDS)
                        .map(|_| append("conformance.race"))
                        .collect::<Vec<_>>()
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
    for ids in &seen {
        assert!(
            ids.windows(2).all(|pair| pair[0] < pair[1]),
            "each thread's ids must increase: {ids:?}"
        );
    }
    let mut all: Vec<u64> = seen.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        THREADS * APPENDS,
        "racing appends must never share an id"
    );
}
