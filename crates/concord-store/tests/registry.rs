//! The consensus registry on a real file.

mod support;

use concord_proto::handshake::{self, LocalOffer, ProtocolChoice, ProtocolStore};
use concord_proto::{Capabilities, ProtocolHash, Role};
use concord_store::{Corruption, Integrity, NewConsensus, Problem, StoreError};

use support::open;

const URI_V1: &str = "https://protocols.example/product-info/v1";
const URI_V2: &str = "https://protocols.example/product-info/v2";
const DOC_V1: &str = "# Product info v1\n";
const DOC_V2: &str = "# Product info v2\n";

#[test]
fn add_get_list_remove() {
    let (_dir, store) = open();
    let hash = store
        .add_consensus(&NewConsensus::new(URI_V2, DOC_V2).with_handler(Role::Provider, "/* p */"))
        .unwrap();
    assert_eq!(hash, ProtocolHash::of_text(DOC_V2));
    store
        .add_consensus(
            &NewConsensus::new(URI_V1, DOC_V1)
                .with_handler(Role::Provider, "/* p */")
                .with_handler(Role::Requester, "/* r */"),
        )
        .unwrap();

    let v2 = store.consensus(URI_V2).unwrap().unwrap();
    assert_eq!(v2.uri, URI_V2);
    assert_eq!(v2.document, DOC_V2);
    assert_eq!(v2.hash, hash);
    assert_eq!(v2.handlers.get(Role::Provider), Some("/* p */"));
    assert_eq!(v2.handlers.get(Role::Requester), None);
    assert_eq!(store.consensus("urn:none").unwrap(), None);

    let list = store.list_consensus().unwrap();
    assert_eq!(
        list.iter().map(|s| s.uri.as_str()).collect::<Vec<_>>(),
        [URI_V1, URI_V2]
    );
    assert_eq!(list[0].handler_roles, [Role::Requester, Role::Provider]);
    assert_eq!(list[1].handler_roles, [Role::Provider]);
    assert_eq!(list[1].document_len, DOC_V2.len());
    assert!(list.iter().all(|s| s.integrity == Integrity::Verified));

    assert!(store.remove_consensus(URI_V1).unwrap());
    assert!(!store.remove_consensus(URI_V1).unwrap());
    assert_eq!(store.list_consensus().unwrap().len(), 1);
}

#[test]
fn supports_consensus_needs_the_role_handler() {
    let (_dir, store) = open();
    store
        .add_consensus(&NewConsensus::new(URI_V1, DOC_V1).with_handler(Role::Provider, "/* p */"))
        .unwrap();
    assert!(store.for_role(Role::Provider).supports_consensus(URI_V1));
    assert!(!store.for_role(Role::Requester).supports_consensus(URI_V1));
    assert!(!store.for_role(Role::Provider).supports_consensus(URI_V2));

    // In a handshake: the first URI of the source's list that we support wins.
    let offer = LocalOffer::new(Capabilities::all());
    let source = handshake::source_hello(
        &offer,
        "aaaaaaaaaaaaaaaa",
        None,
        &[URI_V2.to_owned(), URI_V1.to_owned()],
    );
    let (_, agreement) = handshake::answer_source_hello(
        &offer,
        &source,
        &store.for_role(Role::Provider),
        "bbbbbbbbbbbbbbbb",
    )
    .unwrap();
    assert_eq!(
        agreement.protocol,
        ProtocolChoice::Consensus(URI_V1.to_owned())
    );
}

#[test]
fn re_adding_merges_handlers_but_a_new_document_replaces_them() {
    let (_dir, store) = open();
    store
        .add_consensus(&NewConsensus::new(URI_V1, DOC_V1).with_handler(Role::Provider, "/* p */"))
        .unwrap();
    let added = store.consensus(URI_V1).unwrap().unwrap().added;

    // Same document: the requester module is added, the provider module kept.
    store
        .add_consensus(&NewConsensus::new(URI_V1, DOC_V1).with_handler(Role::Requester, "/* r */"))
        .unwrap();
    let merged = store.consensus(URI_V1).unwrap().unwrap();
    assert_eq!(merged.handlers.get(Role::Provider), Some("/* p */"));
    assert_eq!(merged.handlers.get(Role::Requester), Some("/* r */"));
    assert_eq!(merged.added, added);

    // A different document under the same URI: old code belongs to the old document.
    let new_hash = store
        .add_consensus(
            &NewConsensus::new(URI_V1, "# edited\n").with_handler(Role::Requester, "/* r2 */"),
        )
        .unwrap();
    let replaced = store.consensus(URI_V1).unwrap().unwrap();
    assert_eq!(replaced.hash, new_hash);
    assert_eq!(replaced.document, "# edited\n");
    assert_eq!(replaced.handlers.get(Role::Provider), None);
    assert_eq!(replaced.handlers.get(Role::Requester), Some("/* r2 */"));
    assert!(!store.for_role(Role::Provider).supports_consensus(URI_V1));
}

#[test]
fn a_tampered_consensus_document_is_never_used_and_is_reported() {
    let (_dir, store) = open();
    store
        .add_consensus(&NewConsensus::new(URI_V1, DOC_V1).with_handler(Role::Provider, "/* p */"))
        .unwrap();
    let connection = rusqlite::Connection::open(store.path()).unwrap();
    connection
        .execute(
            "UPDATE consensus_protocols SET document = document || ' ' WHERE uri = ?1",
            [URI_V1],
        )
        .unwrap();
    let actual = ProtocolHash::of_text(&format!("{DOC_V1} "));
    let corruption = Corruption::HashMismatch { actual };

    let view = store.for_role(Role::Provider);
    assert!(!view.supports_consensus(URI_V1));
    assert!(matches!(
        view.take_errors().as_slice(),
        [StoreError::CorruptConsensus { uri, .. }] if uri == URI_V1
    ));
    assert!(matches!(
        store.consensus(URI_V1),
        Err(StoreError::CorruptConsensus { .. })
    ));
    assert_eq!(
        store.list_consensus().unwrap()[0].integrity,
        Integrity::Corrupt(corruption.clone())
    );
    assert_eq!(
        store.check().unwrap(),
        [Problem::Consensus {
            uri: URI_V1.to_owned(),
            corruption
        }]
    );
}
