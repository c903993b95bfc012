//! Conformance suites for the traits of this crate
//! ([`ProtocolBook`](crate::ProtocolBook), [`ConsensusRegistry`](crate::ConsensusRegistry),
//! [`NonceStore`](crate::NonceStore)): any backend must pass them (they panic, naming the
//! broken rule, when it does not). Feature `conformance`.
//!
//! ```
//! use concord_store::{conformance, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?;
//! conformance::protocol_book(&store);
//! conformance::nonce_store(&store);
//! conformance::consensus_registry(&store);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
// Panicking, naming the broken rule, is how a conformance suite fails.
#![allow(clippy::panic)]

use concord_proto::{ProtocolHash, Role};

use crate::backends::{ConsensusRegistry, NonceStore, ProtocolBook};
use crate::error::StoreError;
use crate::protocols::{HeldBy, NewProtocol, ResumeQuery};
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
    let accepted: Vec<Vec<usize>> = std::thread::scope(|scope| {
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
    let mut times = [0usize; PAIRS];
    for n in accepted.iter().flatten() {
        times[*n] += 1;
    }
    // A false positive under contention is allowed; a false negative never.
    if let Some(n) = times.iter().position(|&count| count > 1) {
        panic!(
            "pair race{n}, recorded by {THREADS} threads at once, was accepted {} times (false negative)",
            times[n]
        );
    }
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

/// Checks the [`ProtocolBook`] contract on an empty book: a saved protocol is read back
/// under its hash with its handlers and peers; the 0-RTT rule needs the role's handler;
/// uses are counted; the protocol to offer is the one held for the peer, else the one
/// another peer holds for the action; the bounds evict the least recently used
/// negotiated protocols, never a consensus one, and a peer's or an address's beyond its
/// share only.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn protocol_book(book: &dyn ProtocolBook) {
    let (peer, other) = (
        "https://shop.example/.well-known/wot",
        "https://mall.example/.well-known/wot",
    );
    let missing = ProtocolHash::of_text("# never saved\n");
    assert!(ok("read missing", book.protocol(&missing)).is_none());
    assert!(!ok(
        "resume missing",
        book.can_resume(&missing, Role::Provider)
    ));

    let document = "# Requirement\nGet product info\n";
    let saved = NewProtocol::negotiated(document, peer)
        .with_action("getProductInfo")
        .with_handler(Role::Requester, "/* requester */");
    let hash = ok("save", book.save_protocol(&saved));
    assert_eq!(
        hash,
        ProtocolHash::of_text(document),
        "a protocol is known by its hash"
    );
    let stored = ok("read", book.protocol(&hash))
        .unwrap_or_else(|| panic!("{hash} was saved but is not read back"));
    assert_eq!(stored.document, document);
    assert_eq!(
        stored.handlers.get(Role::Requester),
        Some("/* requester */")
    );
    assert_eq!(stored.peers, [peer]);
    assert!(ok("resume", book.can_resume(&hash, Role::Requester)));
    assert!(
        !ok(
            "resume without handler",
            book.can_resume(&hash, Role::Provider)
        ),
        "0-RTT needs the role's handler module (false positive)"
    );

    assert_eq!(ok("touch", book.touch_protocol(&hash, peer)), 1);
    assert_eq!(ok("touch again", book.touch_protocol(&hash, other)), 2);
    ok(
        "add a peer",
        book.add_protocol_peer(&hash, "ws://198.51.100.1"),
    );
    let stored = ok("read touched", book.protocol(&hash))
        .unwrap_or_else(|| panic!("{hash} is gone after a touch"));
    assert_eq!(stored.use_count, 2, "adding a peer counts no use");
    let mut peers = stored.peers.clone();
    peers.sort();
    assert_eq!(
        peers,
        [
            "https://mall.example/.well-known/wot",
            peer,
            "ws://198.51.100.1"
        ]
        .into_iter()
        .map(str::to_owned)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );

    let query = |peer, action| ResumeQuery {
        peer,
        action,
        role: Role::Requester,
    };
    let offer = ok(
        "offer",
        book.latest_resumable(&query(peer, "getProductInfo")),
    )
    .unwrap_or_else(|| panic!("nothing offered for the peer that holds {hash}"));
    assert_eq!((offer.hash, offer.held_by), (hash, HeldBy::ThisPeer));
    let stranger = "https://new.example/.well-known/wot";
    let offer = ok(
        "offer to another",
        book.latest_resumable(&query(stranger, "getProductInfo")),
    )
    .unwrap_or_else(|| panic!("nothing offered for the action {hash} calls"));
    assert_eq!(offer.hash, hash);
    assert!(
        matches!(offer.held_by, HeldBy::OtherPeer { .. }),
        "{:?}",
        offer.held_by
    );
    assert!(
        ok(
            "offer another action",
            book.latest_resumable(&query(stranger, "otherAction"))
        )
        .is_none(),
        "nothing is offered for an action no protocol calls"
    );

    // The bounds: least recently used first, never a consensus protocol.
    let consensus = ok(
        "save consensus",
        book.save_protocol(&NewProtocol::consensus(
            "https://protocols.example/v1",
            "# consensus\n",
            peer,
        )),
    );
    let old = ok(
        "save old",
        book.save_protocol(&NewProtocol::negotiated("# old\n", "bounds")),
    );
    let new = ok(
        "save new",
        book.save_protocol(&NewProtocol::negotiated("# new\n", "bounds")),
    );
    ok("touch new", book.touch_protocol(&new, "bounds"));
    ok("touch first", book.touch_protocol(&hash, peer));
    assert_eq!(
        ok("prune", book.prune_protocols(2)),
        1,
        "three negotiated, two kept"
    );
    // Which one went depends on use times a fast machine may not tell apart.
    let left = [&old, &new, &hash]
        .into_iter()
        .filter(|kept| ok("read kept", book.protocol(kept)).is_some())
        .count();
    assert_eq!(
        left, 2,
        "the count answered is the number of protocols that went"
    );
    assert!(
        ok("read consensus", book.protocol(&consensus)).is_some(),
        "a consensus protocol is never evicted"
    );
    if ok("read new", book.protocol(&new)).is_none() {
        // `new` was evicted: it is back for the share checks below.
        ok(
            "save new again",
            book.save_protocol(&NewProtocol::negotiated("# new\n", "bounds")),
        );
    }

    // A peer's share: the protocols it alone holds beyond it go; shared ones stay.
    let fillers: Vec<ProtocolHash> = (0..3)
        .map(|n| {
            ok(
                "fill",
                book.save_protocol(&NewProtocol::negotiated(
                    format!("# filler {n}\n"),
                    "filler",
                )),
            )
        })
        .collect();
    ok("share", book.touch_protocol(&new, "filler"));
    let gone = ok("cap peer", book.cap_peer_protocols("filler", 1));
    assert!(
        ok("read shared", book.protocol(&new)).is_some(),
        "a protocol another peer holds stays"
    );
    within_share(book, &fillers, gone, "a peer");

    // An address's share, whatever DIDs it proved.
    let minted: Vec<ProtocolHash> = (0..3)
        .map(|n| {
            let did = format!("did:wba:minted.example:{n}");
            let hash = ok(
                "mint",
                book.save_protocol(&NewProtocol::negotiated(format!("# minted {n}\n"), did)),
            );
            ok("address", book.add_protocol_peer(&hash, "ws://203.0.113.7"));
            hash
        })
        .collect();
    let gone = ok(
        "cap address",
        book.cap_address_protocols("ws://203.0.113.7", 1),
    );
    within_share(book, &minted, gone, "an address");
}

/// Of `held` (protocols one holder alone held), at most one is left, and `gone` counts
/// the others.
fn within_share(book: &dyn ProtocolBook, held: &[ProtocolHash], gone: u64, holder: &str) {
    let left = held
        .iter()
        .filter(|hash| ok("read held", book.protocol(hash)).is_some())
        .count();
    assert!(
        left <= 1,
        "{holder} keeps at most its share of 1, not {left}"
    );
    assert_eq!(
        usize::try_from(gone).unwrap_or(usize::MAX),
        held.len() - left,
        "the count answered is the number of protocols that went"
    );
}
