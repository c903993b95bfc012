//! The hello exchange: version pick, capability intersection, 0-RTT hit and miss,
//! consensus protocol selection, and sessions that start ready from them.

mod support;

use std::time::Instant;

use concord_proto::handshake::{
    accept_destination_hello, answer_source_hello, source_hello, HandshakeError, KnownProtocols,
    LocalOffer, ProtocolChoice,
};
use concord_proto::{
    Capabilities, Capability, EstablishedProtocol, Event, Hello, MetaVersion, Phase, ProtocolHash,
    Role, Session, SessionConfig,
};
use serde_json::json;
use support::PRODUCT_INFO;

fn v(text: &str) -> MetaVersion {
    text.parse().unwrap()
}

fn caps(list: &[Capability]) -> Capabilities {
    list.iter().copied().collect()
}

/// Runs a full hello exchange; returns (requester agreement, provider agreement, destinationHello).
fn exchange(
    requester: &LocalOffer,
    provider: &LocalOffer,
    store: &KnownProtocols,
    resume: Option<ProtocolHash>,
    consensus: &[String],
) -> (
    concord_proto::handshake::Agreement,
    concord_proto::handshake::Agreement,
    Hello,
) {
    let source = source_hello(requester, "src0000000000001", resume, consensus);
    // Both hellos cross the wire as JSON text.
    let source = Hello::decode(&source.encode()).unwrap();
    let (destination, provider_side) =
        answer_source_hello(provider, &source, store, "dst0000000000001").unwrap();
    let destination = Hello::decode(&destination.encode()).unwrap();
    let requester_side = accept_destination_hello(requester, &source, &destination).unwrap();
    (requester_side, provider_side, destination)
}

#[test]
fn capabilities_are_the_intersection_and_unknown_names_are_ignored() {
    let requester = LocalOffer::new(caps(&[
        Capability::TestCasesNegotiation,
        Capability::FixErrorNegotiation,
        Capability::NaturalLanguageProtocol,
    ]));
    let provider = LocalOffer::new(caps(&[
        Capability::TestCasesNegotiation,
        Capability::VerificationProtocol,
        Capability::NaturalLanguageProtocol,
    ]));
    let (ours, theirs, destination) =
        exchange(&requester, &provider, &KnownProtocols::default(), None, &[]);
    let both = caps(&[
        Capability::NaturalLanguageProtocol,
        Capability::TestCasesNegotiation,
    ]);
    assert_eq!(ours.capabilities, both);
    assert_eq!(theirs.capabilities, both);
    assert_eq!(
        serde_json::to_value(&destination).unwrap(),
        json!({"version": "1.0", "type": "destinationHello", "messageId": "dst0000000000001",
               "metaProtocol": {"version": "1.0",
                 "supportedCapabilities": ["naturalLanguageProtocol", "verificationProtocol", "testCasesNegotiation"]}})
    );
    let mut hello = source_hello(&requester, "x", None, &[]);
    hello
        .meta_protocol
        .extra
        .insert("future".into(), json!(true));
    let text = hello.encode().replace(
        "\"fixErrorNegotiation\"",
        "\"telepathy\",\"fixErrorNegotiation\"",
    );
    let decoded = Hello::decode(&text).unwrap();
    assert_eq!(
        decoded.meta_protocol.supported_capabilities,
        requester.capabilities
    );
    assert_eq!(decoded.meta_protocol.extra["future"], json!(true));
}

#[test]
fn version_is_the_highest_both_speak() {
    let mut requester = LocalOffer::new(Capabilities::none());
    requester.versions = vec![v("1.0"), v("1.1"), v("2.0")];
    let mut provider = LocalOffer::new(Capabilities::none());
    provider.versions = vec![v("1.0"), v("1.1")];
    let (ours, theirs, destination) =
        exchange(&requester, &provider, &KnownProtocols::default(), None, &[]);
    assert_eq!(ours.version, v("1.1"));
    assert_eq!(theirs.version, v("1.1"));
    assert_eq!(destination.meta_protocol.version, v("1.1"));

    // A peer that only names its one (highest) version.
    let old = LocalOffer::new(Capabilities::none());
    let (ours, _, _) = exchange(&requester, &old, &KnownProtocols::default(), None, &[]);
    assert_eq!(ours.version, v("1.0"));

    let mut future = LocalOffer::new(Capabilities::none());
    future.versions = vec![v("3.0")];
    let source = source_hello(&future, "x", None, &[]);
    assert_eq!(
        answer_source_hello(&old, &source, &KnownProtocols::default(), "y").unwrap_err(),
        HandshakeError::NoCommonVersion {
            ours: "1.0".into(),
            theirs: "3.0".into()
        }
    );
}

#[test]
fn zero_rtt_hit_starts_both_sessions_ready() {
    let offer = LocalOffer::new(Capabilities::all());
    let mut store = KnownProtocols::default();
    let hash = store.insert_document(PRODUCT_INFO);
    let (ours, theirs, destination) = exchange(&offer, &offer, &store, Some(hash), &[]);
    assert_eq!(ours.protocol, ProtocolChoice::Resume(hash));
    assert_eq!(theirs.protocol, ProtocolChoice::Resume(hash));
    assert_eq!(destination.meta_protocol.used_protocol_hash, Some(hash));

    let now = Instant::now();
    let mut session = Session::new(Role::Requester, &ours, SessionConfig::default(), now);
    assert_eq!(session.phase(), Phase::Ready);
    assert_eq!(
        session.poll_event(),
        Some(Event::Ready {
            protocol: EstablishedProtocol::Resumed { hash }
        })
    );
    session.send_application(b"{}").unwrap();
    assert_eq!(session.poll_transmit(), Some(b"\x40{}".to_vec()));
}

#[test]
fn zero_rtt_miss_falls_back_to_negotiation() {
    let offer = LocalOffer::new(Capabilities::all());
    let unknown = ProtocolHash::of_text("a protocol the provider forgot");
    let (ours, theirs, destination) = exchange(
        &offer,
        &offer,
        &KnownProtocols::default(),
        Some(unknown),
        &[],
    );
    assert_eq!(ours.protocol, ProtocolChoice::Negotiate);
    assert_eq!(theirs.protocol, ProtocolChoice::Negotiate);
    assert_eq!(destination.meta_protocol.used_protocol_hash, None);
    let session = Session::new(
        Role::Requester,
        &ours,
        SessionConfig::default(),
        Instant::now(),
    );
    assert_eq!(session.phase(), Phase::Negotiating);
}

#[test]
fn consensus_selection_takes_the_first_supported_uri_in_the_source_order() {
    let offer = LocalOffer::new(Capabilities::all());
    let mut store = KnownProtocols::default();
    store.insert_consensus("https://example.com/protocol/1.0");
    store.insert_consensus("https://example.com/protocol/2.0");
    let candidates = vec![
        "https://example.com/protocol/3.0".to_owned(),
        "https://example.com/protocol/2.0".to_owned(),
        "https://example.com/protocol/1.0".to_owned(),
    ];
    let (ours, theirs, destination) = exchange(&offer, &offer, &store, None, &candidates);
    let chosen = "https://example.com/protocol/2.0".to_owned();
    assert_eq!(ours.protocol, ProtocolChoice::Consensus(chosen.clone()));
    assert_eq!(theirs.protocol, ProtocolChoice::Consensus(chosen.clone()));
    assert_eq!(
        destination.meta_protocol.selected_protocol,
        Some(chosen.clone())
    );
    let mut session = Session::new(
        Role::Provider,
        &theirs,
        SessionConfig::default(),
        Instant::now(),
    );
    assert_eq!(
        session.poll_event(),
        Some(Event::Ready {
            protocol: EstablishedProtocol::Consensus { uri: chosen }
        })
    );
}

#[test]
fn zero_rtt_wins_over_consensus_and_unsupported_consensus_negotiates() {
    let offer = LocalOffer::new(Capabilities::all());
    let mut store = KnownProtocols::default();
    let hash = store.insert_document(PRODUCT_INFO);
    store.insert_consensus("urn:p:1");
    let (ours, _, destination) = exchange(&offer, &offer, &store, Some(hash), &["urn:p:1".into()]);
    assert_eq!(ours.protocol, ProtocolChoice::Resume(hash));
    assert_eq!(destination.meta_protocol.selected_protocol, None);
    let (ours, _, _) = exchange(&offer, &offer, &store, None, &["urn:p:2".into()]);
    assert_eq!(ours.protocol, ProtocolChoice::Negotiate);
}

#[test]
fn a_destination_that_confirms_what_we_did_not_offer_is_refused() {
    let offer = LocalOffer::new(Capabilities::none());
    let sent = source_hello(&offer, "s", None, &["urn:p:1".into()]);
    let mut destination = source_hello(&offer, "d", Some(ProtocolHash::of_text("x")), &[]);
    destination.kind = concord_proto::HelloKind::Destination;
    assert_eq!(
        accept_destination_hello(&offer, &sent, &destination),
        Err(HandshakeError::UnofferedHash(ProtocolHash::of_text("x")))
    );
    destination.meta_protocol.used_protocol_hash = None;
    destination.meta_protocol.selected_protocol = Some("urn:p:9".into());
    assert_eq!(
        accept_destination_hello(&offer, &sent, &destination),
        Err(HandshakeError::UnofferedProtocol("urn:p:9".into()))
    );
    assert!(matches!(
        accept_destination_hello(&offer, &sent, &sent),
        Err(HandshakeError::WrongKind {
            expected: "destinationHello",
            received: "sourceHello"
        })
    ));
}

#[test]
fn a_store_never_vouches_for_a_hash_it_cannot_reproduce() {
    use concord_proto::handshake::ProtocolStore;
    let mut store = KnownProtocols::default();
    let hash = store.insert_document(PRODUCT_INFO);
    assert!(store.holds_protocol(&hash));
    assert!(!store.holds_protocol(&ProtocolHash::of_text("other")));
    assert_eq!(store.document(&hash), Some(PRODUCT_INFO));
}
