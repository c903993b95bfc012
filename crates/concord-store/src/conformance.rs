//! Conformance suites for the traits of [`backends`](crate::NonceStore): any backend must
//! pass them (they panic, naming the broken rule, when it does not). Feature `conformance`.
//!
//! ```
//! use concord_store::{conformance, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?;
//! conformance::nonce_store(&store);
//! conformance::consensus_registry(&store);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
// Panicking, naming the broken rule, is how a conformance suite fails.
#![allow(clippy::panic)]

use concord_proto::{ProtocolHash, Role};

use crate::backends::{ConsensusRegistry, NonceStore};
use crate::error::StoreError;
use crate::registry::NewConsensus;

fn ok<T>(what: &str, result: Result<T, StoreError>) -> T {
    result.unwrap_or_else(|error| panic!("{what}: the backend failed: {error}"))
}

/// Checks the [`NonceStore`] contract on an empty log: a pair is recorded once until it
/// expires, per DID; what is recorded is read back until it expires; racing records of
/// one pair accept exactly one.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn nonce_store(log: &dyn NonceStore) {
    let (alice, bob) = (
        "did:wba:conformance.example:alice",
        "did:wba:conformance.example:bob",
    );
    assert!(
        ok("record", log.record_nonce(alice, "n1", 1_000, 1_360)),
        "a fresh pair must be recorded"
    );
    assert!(
        !ok("record again", log.record_nonce(alice, "n1", 1_100, 1_460)),
        "a held pair is a replay (false negative)"
    );
    assert!(
        ok("record bob", log.record_nonce(bob, "n1", 1_100, 1_460)),
        "the same nonce from another DID is a fresh pair"
    );
    let kept = ok("read", log.unexpired_nonces(1_200));
    for (did, nonce) in [(alice, "n1"), (bob, "n1")] {
        assert!(
            kept.iter()
                .any(|used| used.did == did && used.nonce == nonce),
            "({did}, {nonce}) recorded and unexpired must be read back: {kept:?}"
        );
    }
    assert!(
        ok(
            "record after expiry",
            log.record_nonce(alice, "n1", 1_360, 1_720)
        ),
        "an expired pair may be recorded again"
    );
    let kept = ok("read later", log.unexpired_nonces(1_500));
    assert!(
        kept.iter()
            .any(|used| used.did == alice && used.recorded == 1_360),
        "the pair recorded again must be read back: {kept:?}"
    );

    const THREADS: usize = 4;
    const PAIRS: usize = 8;
    let accepted: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..PAIRS)
                        .filter(|n| {
                            ok(
                                "racing record",
                                log.record_nonce(alice, &format!("race{n}"), 2_000, 2_360),
                            )
                        })
                        .count()
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
            .sum()
    });
    assert_eq!(
        accepted, PAIRS,
        "racing records of {PAIRS} pairs from {THREADS} threads must accept each exactly once"
    );
}

/// Checks the [`ConsensusRegistry`] contract on an empty registry: entries are added,
/// read back with their hash, listed, updated by URI and removed; a role is usable only
/// with its handler module.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn consensus_registry(registry: &dyn ConsensusRegistry) {
    let uri = "https://protocols.conformance.example/product-info/v1";
    let document = "# Product info\n";
    assert!(
        ok("read missing", registry.consensus(uri)).is_none(),
        "an empty registry holds nothing"
    );
    assert!(!ok(
        "can use missing",
        registry.can_use_consensus(uri, Role::Provider)
    ));
    let entry = NewConsensus::new(uri, document).with_handler(Role::Provider, "/* provider */");
    let hash = ok("add", registry.add_consensus(&entry));
    assert_eq!(
        hash,
        ProtocolHash::of_text(document),
        "the hash of the document"
    );
    let stored = ok("read", registry.consensus(uri))
        .unwrap_or_else(|| panic!("{uri} was added but is not read back"));
    assert_eq!(
        (stored.uri.as_str(), stored.document.as_str()),
        (uri, document)
    );
    assert_eq!(stored.hash, hash);
    assert_eq!(stored.handlers.get(Role::Provider), Some("/* provider */"));
    assert!(ok(
        "can use",
        registry.can_use_consensus(uri, Role::Provider)
    ));
    assert!(
        !ok(
            "can use without handler",
            registry.can_use_consensus(uri, Role::Requester)
        ),
        "a role without its handler module cannot use the protocol"
    );

    // Same document: the handler given is added, the other kept.
    let more = NewConsensus::new(uri, document).with_handler(Role::Requester, "/* requester */");
    ok("update", registry.add_consensus(&more));
    let stored = ok("read updated", registry.consensus(uri))
        .unwrap_or_else(|| panic!("{uri} is gone after an update"));
    assert_eq!(stored.handlers.get(Role::Provider), Some("/* provider */"));
    assert_eq!(
        stored.handlers.get(Role::Requester),
        Some("/* requester */")
    );
    // Another document: everything replaced.
    let replaced = NewConsensus::new(uri, "# Product info v1.1\n");
    ok("replace", registry.add_consensus(&replaced));
    let stored = ok("read replaced", registry.consensus(uri))
        .unwrap_or_else(|| panic!("{uri} is gone after a replacement"));
    assert_eq!(stored.hash, ProtocolHash::of_text("# Product info v1.1\n"));
    assert_eq!(
        stored.handlers.get(Role::Provider),
        None,
        "old handlers belong to the old document"
    );

    let listed = ok("list", registry.list_consensus());
    assert_eq!(
        listed
            .iter()
            .map(|entry| entry.uri.as_str())
            .collect::<Vec<_>>(),
        [uri]
    );
    assert!(ok("remove", registry.remove_consensus(uri)));
    assert!(!ok("remove again", registry.remove_consensus(uri)));
    assert!(ok("read removed", registry.consensus(uri)).is_none());
}
