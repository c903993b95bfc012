//! The 0-RTT rule on a real file: a protocol is reused only when its stored document
//! reproduces the hash and the role's handler is stored; tampering is detected and reported.

mod support;

use concord_proto::handshake::{self, LocalOffer, ProtocolChoice, ProtocolStore};
use concord_proto::{Capabilities, ProtocolHash, Role};
use concord_store::{Corruption, Integrity, NewProtocol, Problem, ResumeQuery, Store, StoreError};

use support::open;

const DOC: &str = "# Requirement\nGet product info by id.\n";
const PEER: &str = "https://requester.example/.well-known/wot";

/// Changes the stored document of `hash` behind the store's back, and returns the store as
/// the next process to open it sees it (one that has not verified the document yet: the
/// one that saved it trusts what it hashed for as long as it runs, see `tests/bounds.rs`).
fn tamper(store: &Store, hash: &ProtocolHash, sql_expression: &str) -> Store {
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    let changed = connection
        .execute(
            &format!("UPDATE protocols SET document = {sql_expression} WHERE hash = ?1"),
            [hash.to_string()],
        )
        .unwrap();
    assert_eq!(changed, 1);
    Store::open(store.path().parent().unwrap()).unwrap()
}

/// What a provider answers to a sourceHello offering `hash` for 0-RTT.
fn answer(store: &impl ProtocolStore, hash: ProtocolHash) -> ProtocolChoice {
    let offer = LocalOffer::new(Capabilities::all());
    let source = handshake::source_hello(&offer, "aaaaaaaaaaaaaaaa", Some(hash), &[]);
    let (_, agreement) =
        handshake::answer_source_hello(&offer, &source, store, "bbbbbbbbbbbbbbbb").unwrap();
    agreement.protocol
}

#[test]
fn needs_the_document_and_the_handler_for_the_role() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER))
        .unwrap();
    // Document only: no code yet, for either role.
    assert!(!store.can_resume(&hash, Role::Provider).unwrap());
    assert!(!store.can_resume(&hash, Role::Requester).unwrap());
    assert_eq!(
        answer(&store.for_role(Role::Provider), hash),
        ProtocolChoice::Negotiate
    );

    store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER).with_handler(Role::Provider, "/* js */"))
        .unwrap();
    assert!(store.can_resume(&hash, Role::Provider).unwrap());
    assert!(!store.can_resume(&hash, Role::Requester).unwrap());
    assert_eq!(
        answer(&store.for_role(Role::Provider), hash),
        ProtocolChoice::Resume(hash)
    );
    assert_eq!(
        answer(&store.for_role(Role::Requester), hash),
        ProtocolChoice::Negotiate
    );

    // A hash we never stored.
    let unknown = ProtocolHash::of_text("unknown");
    assert!(!store.can_resume(&unknown, Role::Provider).unwrap());
    let view = store.for_role(Role::Provider);
    assert_eq!(answer(&view, unknown), ProtocolChoice::Negotiate);
    assert!(view.take_errors().is_empty());
}

#[test]
fn a_tampered_document_is_never_used_and_is_reported_everywhere() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(
            &NewProtocol::negotiated(DOC, PEER)
                .with_handler(Role::Provider, "/* js */")
                .with_handler(Role::Requester, "/* js */"),
        )
        .unwrap();
    assert_eq!(
        answer(&store.for_role(Role::Provider), hash),
        ProtocolChoice::Resume(hash)
    );

    // One byte changed: the hash column still says `hash`, the text no longer reproduces it.
    let store = tamper(&store, &hash, "replace(document, 'id', 'ID')");
    let actual = ProtocolHash::of_text(&DOC.replace("id", "ID"));

    // The handshake falls back to negotiation, and the view kept the reason.
    let view = store.for_role(Role::Provider);
    assert_eq!(answer(&view, hash), ProtocolChoice::Negotiate);
    let errors = view.take_errors();
    assert!(
        matches!(
            errors.as_slice(),
            [StoreError::CorruptProtocol { hash: h, corruption: Corruption::HashMismatch { actual: a }, .. }]
                if *h == hash && *a == actual
        ),
        "{errors:?}"
    );
    assert!(view.take_errors().is_empty(), "take_errors clears");

    // Direct calls are typed errors naming the file and the hash.
    let error = store.can_resume(&hash, Role::Provider).unwrap_err();
    let message = error.to_string();
    assert!(message.contains(&hash.to_string()), "{message}");
    assert!(
        message.contains(&store.path().display().to_string()),
        "{message}"
    );
    assert!(matches!(
        store.protocol(&hash),
        Err(StoreError::CorruptProtocol { .. })
    ));

    // Listing shows it as corrupt (so it can be forgotten); check() reports it.
    let list = store.list_protocols().unwrap();
    assert_eq!(
        list[0].integrity,
        Integrity::Corrupt(Corruption::HashMismatch { actual })
    );
    assert_eq!(
        store.check().unwrap(),
        [Problem::Protocol {
            hash,
            corruption: Corruption::HashMismatch { actual }
        }]
    );
    // It is not offered for 0-RTT either.
    let query = ResumeQuery {
        peer: PEER,
        action: "getProductInfo",
        role: Role::Requester,
    };
    assert_eq!(store.latest_resumable(&query).unwrap(), None);

    // Saving the agreed text again repairs the row.
    store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER))
        .unwrap();
    assert!(store.can_resume(&hash, Role::Provider).unwrap());
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn a_rewritten_hash_column_is_not_trusted() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER).with_handler(Role::Provider, "/* js */"))
        .unwrap();
    // Point the row at another (well-formed) hash: the stored text does not reproduce it.
    let forged = ProtocolHash::of_text("another protocol");
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute(
            "UPDATE protocols SET hash = ?1 WHERE hash = ?2",
            [forged.to_string(), hash.to_string()],
        )
        .unwrap();
    let view = store.for_role(Role::Provider);
    assert!(!view.holds_protocol(&forged));
    assert!(matches!(
        view.take_errors().as_slice(),
        [StoreError::CorruptProtocol { hash: h, .. }] if *h == forged
    ));
}

#[test]
fn a_document_that_is_not_utf8_is_corrupt() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER).with_handler(Role::Provider, "/* js */"))
        .unwrap();
    let store = tamper(&store, &hash, "CAST(x'23ff20' AS TEXT)");
    assert!(matches!(
        store.can_resume(&hash, Role::Provider),
        Err(StoreError::CorruptProtocol {
            corruption: Corruption::NotUtf8 { valid_up_to: 1 },
            ..
        })
    ));
    assert_eq!(
        store.list_protocols().unwrap()[0].integrity,
        Integrity::Corrupt(Corruption::NotUtf8 { valid_up_to: 1 })
    );
    // Still forgettable by prefix.
    assert_eq!(store.forget_protocol(&hash.to_string()[..8]).unwrap(), hash);
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn unreadable_columns_are_typed_errors_not_panics() {
    let (_dir, store) = open();
    let hash = store
        .save_protocol(&NewProtocol::negotiated(DOC, PEER).with_handler(Role::Provider, "/* js */"))
        .unwrap();
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute(
            "UPDATE protocols SET provider_handler = CAST(x'ff' AS TEXT) WHERE hash = ?1",
            [hash.to_string()],
        )
        .unwrap();
    match store.protocol(&hash) {
        Err(StoreError::CorruptRow {
            table, key, column, ..
        }) => {
            assert_eq!(table, "protocols");
            assert_eq!(key, hash.to_string());
            assert_eq!(column, "provider_handler");
        }
        other => panic!("expected CorruptRow, got {other:?}"),
    }
}
