//! Interoperability with the reference Python implementation (PyPI `anp` 1.0.7), whose
//! behaviour is replayed here frame by frame: sequenceId starting at 1, an `accepted`
//! echo with a stale sequenceId, no `modificationSummary` on accept, `sha256:` hashes.

mod support;

use concord_proto::{Decision, Event, MetaMessage, ProtocolHash, SessionConfig};
use serde_json::json;
use support::{meta_frame, From, Pair, PRODUCT_INFO};

fn meta(json: serde_json::Value) -> Vec<u8> {
    // The reference encodes bytes([pt << 6]) + json.dumps(msg).encode() (with spaces).
    meta_frame(&json.to_string().replace(",", ", ").replace(":", ": "))
}

#[test]
fn our_provider_accepts_a_reference_requester() {
    let mut pair = Pair::new();
    // Reference requester: round 1, no modificationSummary.
    pair.provider.handle_frame(
        pair.now,
        meta(json!({"action": "protocolNegotiation", "sequenceId": 1,
                     "candidateProtocols": PRODUCT_INFO, "status": "negotiating"})),
    );
    assert_eq!(
        pair.provider_events(),
        vec![Event::CandidateReceived {
            sequence_id: 1,
            candidate: PRODUCT_INFO.into(),
            modification_summary: None,
            replaces: None,
        }]
    );
    pair.provider.decide(pair.now, Decision::Accept).unwrap();
    let accepted = support::describe(&pair.provider.poll_transmit().unwrap());
    assert_eq!(
        accepted,
        json!({"action": "protocolNegotiation", "sequenceId": 2,
               "candidateProtocols": PRODUCT_INFO, "status": "accepted"})
    );
    // The reference requester then echoes `accepted` with its own stale round (1).
    pair.provider.handle_frame(
        pair.now,
        meta(json!({"action": "protocolNegotiation", "sequenceId": 1,
                     "candidateProtocols": PRODUCT_INFO, "status": "accepted"})),
    );
    let events = pair.provider_events();
    assert_eq!(
        events,
        vec![Event::ProtocolAgreed {
            hash: ProtocolHash::of_text(PRODUCT_INFO),
            document: PRODUCT_INFO.into()
        }]
    );
    // It sends codeGeneration once its code is written.
    pair.provider.handle_frame(
        pair.now,
        meta(json!({"action": "codeGeneration", "status": "generated"})),
    );
    pair.provider.code_ready(pair.now).unwrap();
    assert!(matches!(
        pair.provider_events().as_slice(),
        [Event::PeerCodeReady, Event::Ready { .. }]
    ));
}

#[test]
fn our_requester_in_reference_mode_starts_at_one_and_echoes() {
    let mut pair = Pair::with(
        support::agreement(
            concord_proto::Capabilities::none(),
            concord_proto::handshake::ProtocolChoice::Negotiate,
        ),
        SessionConfig::reference_compatible(),
        SessionConfig::default(),
    );
    pair.agree();
    let wire = pair.take_wire();
    assert_eq!(
        wire.iter()
            .map(|(from, m)| (*from, m["sequenceId"].clone(), m["status"].clone()))
            .collect::<Vec<_>>(),
        vec![
            (From::Requester, json!(1), json!("negotiating")),
            (From::Provider, json!(2), json!("accepted")),
            (From::Requester, json!(3), json!("accepted")),
        ]
    );
    // The echo reached our provider after its agreement and was accepted silently.
    assert!(matches!(
        pair.provider_events().as_slice(),
        [
            Event::CandidateReceived { .. },
            Event::ProtocolAgreed { .. }
        ]
    ));
}

#[test]
fn a_reference_rejection_with_empty_text_is_understood() {
    let mut pair = Pair::new();
    pair.requester
        .propose(pair.now, PRODUCT_INFO.into())
        .unwrap();
    pair.requester.poll_transmit();
    pair.requester.handle_frame(
        pair.now,
        meta(json!({"action": "protocolNegotiation", "sequenceId": 1,
                     "candidateProtocols": "", "status": "rejected"})),
    );
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(
            concord_proto::CloseReason::NegotiationRejected {
                by: concord_proto::Side::Peer,
                reason: None
            }
        )]
    );
}

#[test]
fn reference_hashes_with_prefix_are_the_same_hash() {
    // The reference stores "sha256:" + hashlib.sha256(text.encode('utf-8')).hexdigest().
    let stored = format!("sha256:{}", ProtocolHash::of_text(PRODUCT_INFO));
    assert_eq!(
        stored.parse::<ProtocolHash>().unwrap(),
        ProtocolHash::of_text(PRODUCT_INFO)
    );
    // And its decoder reads our frames: data[0] >> 6 and json.loads(data[1:]).
    let frame = MetaMessage::CodeGeneration(concord_proto::CodeGeneration {
        status: concord_proto::CodeGenerationStatus::Generated,
    })
    .to_frame()
    .unwrap();
    assert_eq!(frame[0] >> 6, 0);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&frame[1..]).unwrap(),
        json!({"action": "codeGeneration", "status": "generated"})
    );
}
