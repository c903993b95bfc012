//! Negotiated protocols on a real SQLite file: round trips, upserts, listing, forgetting
//! by prefix, touch counting.

mod support;

use std::time::SystemTime;

use concord_proto::{ProtocolHash, Role};
use concord_store::{
    HeldBy, Integrity, NewProtocol, ResumeOffer, ResumeQuery, Settlement, Store, StoreError,
};

use support::open;

const DOC: &str =
    "# Requirement\nGet product info by id.\n\n# Request\n```json\n{\"productId\": \"P1\"}\n```\n";
const PEER: &str = "https://provider.example/.well-known/wot";
const REQUESTER_JS: &str =
    "function encodeRequest(i) { return i; }\nfunction decodeResponse(m) { return m; }\n";
const PROVIDER_JS: &str =
    "function decodeRequest(m) { return m; }\nfunction encodeResponse(o) { return o; }\n";

#[test]
fn round_trip_keeps_every_field_exactly() {
    let (_dir, store) = open();
    let before = SystemTime::now() - std::time::Duration::from_millis(1);
    // Exact bytes matter: CRLF, trailing spaces, non-ASCII, NUL.
    let document = format!("{DOC}Ünïcödé — ✓\r\ntrailing  \n\0end");
    let hash = store
        .save_protocol(
            &NewProtocol::negotiated(&document, PEER)
                .with_handler(Role::Requester, REQUESTER_JS)
                .with_handler(Role::Provider, PROVIDER_JS)
                .with_test_cases("## Case 1\nrequest … response …\n"),
        )
        .unwrap();
    assert_eq!(hash, ProtocolHash::of_text(&document));

    let stored = store.protocol(&hash).unwrap().unwrap();
    assert_eq!(stored.hash, hash);
    assert_eq!(stored.document, document);
    assert_eq!(stored.handlers.get(Role::Requester), Some(REQUESTER_JS));
    assert_eq!(stored.handlers.get(Role::Provider), Some(PROVIDER_JS));
    assert_eq!(
        stored.test_cases.as_deref(),
        Some("## Case 1\nrequest … response …\n")
    );
    assert_eq!(stored.peers, [PEER]);
    assert_eq!(stored.action, None);
    assert_eq!(stored.settlement, Settlement::Negotiated);
    assert!(stored.created >= before && stored.created <= SystemTime::now());
    assert_eq!(stored.last_used, None);
    assert_eq!(stored.use_count, 0);

    // And after reopening the file.
    let path = store.path().to_path_buf();
    drop(store);
    let store = Store::open(path.parent().unwrap()).unwrap();
    assert_eq!(store.protocol(&hash).unwrap().unwrap(), stored);
}

#[test]
fn unknown_hash_is_none() {
    let (_dir, store) = open();
    assert_eq!(
        store.protocol(&ProtocolHash::of_text("nothing")).unwrap(),
        None
    );
}

#[test]
fn consensus_settlement_keeps_its_uri() {
    let (_dir, store) = open();
    let uri = "https://protocols.example/product-info/v1";
    let hash = store
        .save_protocol(&NewProtocol::consensus(uri, DOC, PEER))
        .unwrap();
    assert_eq!(
        store.protocol(&hash).unwrap().unwrap().settlement,
        Settlement::Consensus { uri: uri.into() }
    );
}

#[test]
fn upsert_adds_handlers_later_and_keeps_usage() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER).with_test_cases("cases v1"))
        .unwrap();
    store.touch_protocol(&hash, PEER).unwrap();
    let first = store.protocol(&hash).unwrap().unwrap();

    // The provider module arrives once generated; other fields left None are kept.
    let again = store
        .save_protocol(
            &NewProtocol::negotiated(DOC, "agent-b").with_handler(Role::Provider, PROVIDER_JS),
        )
        .unwrap();
    assert_eq!(again, hash);
    let second = store.protocol(&hash).unwrap().unwrap();
    assert_eq!(second.handlers.get(Role::Provider), Some(PROVIDER_JS));
    assert_eq!(second.handlers.get(Role::Requester), None);
    assert_eq!(second.test_cases.as_deref(), Some("cases v1"));
    // Saved for another peer: added, the first one kept.
    assert_eq!(second.peers, ["agent-b", PEER]);
    assert_eq!(second.created, first.created);
    assert_eq!(second.use_count, 1);
    assert_eq!(second.last_used, first.last_used);

    // A regenerated module (after fix-error) replaces the old one.
    store
        .save_protocol(
            &NewProtocol::negotiated(DOC, "agent-b").with_handler(Role::Provider, "/* v2 */"),
        )
        .unwrap();
    assert_eq!(
        store
            .protocol(&hash)
            .unwrap()
            .unwrap()
            .handlers
            .get(Role::Provider),
        Some("/* v2 */")
    );
    assert_eq!(store.list_protocols().unwrap().len(), 1);
}

#[test]
fn list_is_newest_first_with_summary_fields() {
    let (_dir, store) = open();
    let a = store
        .save_protocol(&NewProtocol::negotiated("# A\n", "peer-a"))
        .unwrap();
    let b = store
        .save_protocol(
            &NewProtocol::negotiated("# B\n", "peer-b").with_handler(Role::Requester, "x"),
        )
        .unwrap();
    let c = store
        .save_protocol(
            &NewProtocol::consensus("urn:c", "# C\n", "peer-c")
                .with_handler(Role::Provider, "y")
                .with_test_cases("t"),
        )
        .unwrap();
    store.touch_protocol(&a, "peer-a").unwrap();

    let list = store.list_protocols().unwrap();
    assert_eq!(list.iter().map(|s| s.hash).collect::<Vec<_>>(), [c, b, a]);
    let [sc, sb, sa] = list.as_slice() else {
        unreachable!()
    };
    assert_eq!(sc.handler_roles, [Role::Provider]);
    assert!(sc.has_test_cases);
    assert_eq!(
        sc.settlement,
        Settlement::Consensus {
            uri: "urn:c".into()
        }
    );
    assert_eq!(sb.handler_roles, [Role::Requester]);
    assert!(!sb.has_test_cases);
    assert_eq!(sa.handler_roles, []);
    assert_eq!(sa.peers, ["peer-a"]);
    assert_eq!(sa.use_count, 1);
    assert!(sa.last_used.is_some());
    assert_eq!(sa.document_len, 4);
    assert!(list.iter().all(|s| s.integrity == Integrity::Verified));
}

#[test]
fn forget_by_full_hash_and_by_unique_prefix() {
    let (_dir, store) = open();
    let a = store
        .save_protocol(&NewProtocol::negotiated("# A\n", PEER))
        .unwrap();
    let b = store
        .save_protocol(&NewProtocol::negotiated("# B\n", PEER))
        .unwrap();

    assert_eq!(store.forget_protocol(&a.to_string()).unwrap(), a);
    assert_eq!(store.protocol(&a).unwrap(), None);

    // Eight digits, upper case, with the `sha256:` prefix the reference implementation writes.
    let selector = format!("sha256:{}", &b.to_string()[..8].to_uppercase());
    assert_eq!(store.resolve_protocol(&selector).unwrap(), b);
    assert_eq!(store.forget_protocol(&selector).unwrap(), b);
    assert!(store.list_protocols().unwrap().is_empty());

    // Nothing left to match.
    assert!(matches!(
        store.forget_protocol(&b.to_string()),
        Err(StoreError::NoMatchingProtocol { prefix }) if prefix == b.to_string()
    ));
}

#[test]
fn ambiguous_prefix_is_a_typed_error_listing_the_matches() {
    let (_dir, store) = open();
    let real = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER))
        .unwrap();
    // Two rows whose hash columns share eight digits cannot be made by brute force, so write
    // them with raw SQL (their documents do not match: they are also corrupt, and corrupt
    // rows must stay forgettable).
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    for last in ["0", "1"] {
        let hash = format!("deadbeef{}{last}", "0".repeat(55));
        connection
            .execute(
                "INSERT INTO protocols (hash, document, settlement, created_ms)
                 VALUES (?1, 'x', 'negotiated', 0)",
                [&hash],
            )
            .unwrap();
    }
    match store.forget_protocol("DEADBEEF") {
        Err(StoreError::AmbiguousPrefix { prefix, matches }) => {
            assert_eq!(prefix, "deadbeef");
            assert_eq!(matches.len(), 2);
            assert!(matches
                .iter()
                .all(|h| h.to_string().starts_with("deadbeef")));
        }
        other => panic!("expected AmbiguousPrefix, got {other:?}"),
    }
    let message = store.resolve_protocol("deadbeef").unwrap_err().to_string();
    assert!(
        message.contains("ambiguous") && message.contains("deadbeef"),
        "{message}"
    );
    // Nothing was deleted.
    assert_eq!(store.list_protocols().unwrap().len(), 3);

    // A longer prefix is unique and forgets just that row.
    let one = format!("deadbeef{}1", "0".repeat(55));
    assert_eq!(store.forget_protocol(&one).unwrap().to_string(), one);
    assert_eq!(
        store.forget_protocol("deadbeef").unwrap().to_string(),
        format!("deadbeef{}0", "0".repeat(55))
    );
    assert_eq!(
        store
            .list_protocols()
            .unwrap()
            .iter()
            .map(|s| s.hash)
            .collect::<Vec<_>>(),
        [real]
    );
}

#[test]
fn bad_selectors_are_typed_errors() {
    let (_dir, store) = open();
    assert!(matches!(
        store.forget_protocol("abc"),
        Err(StoreError::PrefixTooShort { .. })
    ));
    assert!(matches!(
        store.forget_protocol("abcdefgh"),
        Err(StoreError::NotAHashPrefix { .. })
    ));
    assert!(matches!(
        store.forget_protocol("abcd%fff"),
        Err(StoreError::NotAHashPrefix { .. })
    ));
    assert!(matches!(
        store.forget_protocol(&"a".repeat(65)),
        Err(StoreError::NotAHashPrefix { .. })
    ));
}

#[test]
fn touch_counts_every_use_and_sets_last_used() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER))
        .unwrap();
    let before = SystemTime::now() - std::time::Duration::from_millis(1);
    for expected in 1..=5 {
        assert_eq!(store.touch_protocol(&hash, PEER).unwrap(), expected);
    }
    let stored = store.protocol(&hash).unwrap().unwrap();
    assert_eq!(stored.use_count, 5);
    assert!(stored.last_used.unwrap() >= before);

    let missing = ProtocolHash::of_text("missing");
    assert!(matches!(
        store.touch_protocol(&missing, PEER),
        Err(StoreError::UnknownProtocol { hash }) if hash == missing
    ));
}

#[test]
fn latest_resumable_picks_the_most_recent_usable_protocol_for_the_peer() {
    let (_dir, store) = open();
    let query = ResumeQuery {
        peer: PEER,
        action: "getProductInfo",
        role: Role::Requester,
    };
    let old = store
        .save_protocol(&NewProtocol::negotiated("# old\n", PEER).with_handler(Role::Requester, "a"))
        .unwrap();
    let new = store
        .save_protocol(&NewProtocol::negotiated("# new\n", PEER).with_handler(Role::Requester, "b"))
        .unwrap();
    // Only provider code: not resumable as requester.
    store
        .save_protocol(
            &NewProtocol::negotiated("# newest\n", PEER).with_handler(Role::Provider, "c"),
        )
        .unwrap();
    // Another peer's, with no action recorded: never offered to this peer.
    store
        .save_protocol(
            &NewProtocol::negotiated("# other peer\n", "other").with_handler(Role::Requester, "d"),
        )
        .unwrap();
    // This peer's, for another action: not offered for this one.
    store
        .save_protocol(
            &NewProtocol::negotiated("# other action\n", PEER)
                .with_action("listProducts")
                .with_handler(Role::Requester, "e"),
        )
        .unwrap();

    let offer = |query: &ResumeQuery<'_>| store.latest_resumable(query).unwrap();
    let this_peer = |hash| {
        Some(ResumeOffer {
            hash,
            held_by: HeldBy::ThisPeer,
        })
    };
    assert_eq!(offer(&query), this_peer(new));
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.touch_protocol(&old, PEER).unwrap();
    assert_eq!(offer(&query), this_peer(old));
    let nobody = ResumeQuery {
        peer: "nobody",
        ..query
    };
    assert_eq!(offer(&nobody), None);
}
