//! Hostile and broken input: every case closes the session with a typed error, answers
//! `rejected` during the protocol negotiation, and never panics.

mod support;

use concord_proto::{CloseReason, Event, FrameError, MetaError, ProtocolViolation, TextPosition};
use support::{meta_frame, Pair};

/// Feeds `frame` to a provider that is waiting for the first candidate; returns the
/// violation it closed with and whether it answered `rejected`.
fn provider_rejects(frame: &[u8]) -> (ProtocolViolation, bool) {
    let mut pair = Pair::new();
    pair.provider.handle_frame(pair.now, frame.to_vec());
    let events = pair.provider_events();
    let [Event::Closed(CloseReason::Violation(violation))] = events.as_slice() else {
        panic!("expected one violation, got {events:?}");
    };
    // The message says the cause; no source repeats it.
    assert!(
        std::error::Error::source(violation).is_none(),
        "{violation:?}"
    );
    let answered = pair
        .provider
        .poll_transmit()
        .map(|reply| support::describe(&reply)["status"] == "rejected")
        .unwrap_or(false);
    (violation.clone(), answered)
}

#[test]
fn a_truncated_frame() {
    assert_eq!(
        provider_rejects(b""),
        (ProtocolViolation::Frame(FrameError::Empty), true)
    );
}

#[test]
fn invalid_utf8_and_invalid_json() {
    let (violation, answered) = provider_rejects(b"\x00{\"action\":\"\xc3\x28\"}");
    assert_eq!(
        violation,
        ProtocolViolation::Meta(MetaError::InvalidUtf8 { valid_up_to: 11 })
    );
    assert!(answered);
    let (violation, _) = provider_rejects(b"\x00{\"action\": protocolNegotiation}");
    assert!(matches!(
        violation,
        ProtocolViolation::Meta(MetaError::Json {
            position: TextPosition {
                line: 1,
                column: 12
            },
            ..
        })
    ));
}

#[test]
fn missing_mistyped_and_unknown() {
    assert_eq!(
        provider_rejects(&meta_frame(
            r#"{"action":"protocolNegotiation","sequenceId":0,"candidateProtocols":"x"}"#
        ))
        .0,
        ProtocolViolation::Meta(MetaError::MissingField {
            action: "protocolNegotiation",
            field: "status"
        })
    );
    assert_eq!(
        provider_rejects(&meta_frame(r#"{"action":"protocolNegotiation","sequenceId":0.5,"candidateProtocols":"x","status":"negotiating"}"#)).0,
        ProtocolViolation::Meta(MetaError::InvalidValue {
            action: "protocolNegotiation",
            field: "sequenceId",
            value: "0.5".into(),
            expected: "a non-negative integer"
        })
    );
    assert_eq!(
        provider_rejects(&meta_frame(r#"{"action":"protocolNegotiation","sequenceId":0,"candidateProtocols":["x"],"status":"negotiating"}"#)).0,
        ProtocolViolation::Meta(MetaError::WrongType {
            action: "protocolNegotiation",
            field: "candidateProtocols",
            expected: "a string",
            found: "an array"
        })
    );
    assert_eq!(
        provider_rejects(&meta_frame(r#"{"action":"selfDestruct"}"#)).0,
        ProtocolViolation::Meta(MetaError::UnknownAction("selfDestruct".into()))
    );
}

#[test]
fn a_message_in_the_wrong_phase() {
    assert_eq!(
        provider_rejects(&meta_frame(
            r#"{"action":"codeGeneration","status":"generated"}"#
        ))
        .0,
        ProtocolViolation::UnexpectedMessage {
            action: "codeGeneration",
            status: None,
            state: "the protocol is not agreed yet"
        }
    );
    assert_eq!(
        provider_rejects(&meta_frame(r#"{"action":"protocolNegotiation","sequenceId":0,"candidateProtocols":"x","status":"accepted"}"#)).0,
        ProtocolViolation::UnexpectedMessage {
            action: "protocolNegotiation",
            status: Some(concord_proto::NegotiationStatus::Accepted),
            state: "no candidate is on the table"
        }
    );
}

#[test]
fn every_protocol_type_is_defined_so_reserved_bits_never_make_a_frame_unknown() {
    // Two PT bits leave no unknown type; the six reserved bits are ignored on receipt.
    let (violation, _) = provider_rejects(b"\x3f{}");
    assert_eq!(
        violation,
        ProtocolViolation::Meta(MetaError::MissingAction),
        "0x3f is PT 0 with every reserved bit set"
    );
}

#[test]
fn frames_after_close_are_ignored() {
    let mut pair = Pair::new();
    pair.provider.handle_frame(pair.now, &b""[..]);
    pair.provider_events();
    pair.provider.poll_transmit();
    pair.provider.handle_frame(pair.now, &b"\x40anything"[..]);
    assert_eq!(pair.provider_events(), vec![]);
    assert_eq!(pair.provider.poll_transmit(), None);
}
