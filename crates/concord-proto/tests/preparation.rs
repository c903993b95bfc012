//! After agreement: code generation, test cases, fix-error negotiation, natural-language
//! negotiation, and the rules for data frames.

mod support;

use std::time::Duration;

use concord_proto::handshake::ProtocolChoice;
use concord_proto::{
    Capabilities, Capability, CloseReason, Decision, Event, FixDecision, Phase, ProtocolType,
    ProtocolViolation, SessionConfig, SessionError, Side, Wait,
};
use serde_json::json;
use support::{agreement, meta_frame, From, Pair};

/// A pair that has agreed on the product-info protocol; events and wire drained.
fn agreed(capabilities: Capabilities) -> Pair {
    let mut pair = Pair::with(
        agreement(capabilities, ProtocolChoice::Negotiate),
        SessionConfig::default(),
        SessionConfig::default(),
    );
    pair.agree();
    pair.requester_events();
    pair.provider_events();
    pair.take_wire();
    pair
}

/// A pair past agreement and code generation, ready for data.
fn ready(capabilities: Capabilities) -> Pair {
    let mut pair = agreed(capabilities);
    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    pair.requester_events();
    pair.provider_events();
    pair.take_wire();
    pair
}

fn is_ready(event: &Event) -> bool {
    matches!(event, Event::Ready { .. })
}

const CASES: &str = "# Test case 1\n- request: {\"productId\":\"P12345\"}\n";

#[test]
fn code_generation_error_closes_both_sides() {
    let mut pair = agreed(Capabilities::all());
    pair.provider.code_failed(pair.now).unwrap();
    pair.flush();
    assert_eq!(
        pair.take_wire(),
        vec![(
            From::Provider,
            json!({"action": "codeGeneration", "status": "error"})
        )]
    );
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::CodeGenerationFailed {
            by: Side::Peer
        })]
    );
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::CodeGenerationFailed {
            by: Side::Local
        })]
    );
}

#[test]
fn peer_silent_past_the_code_generation_timeout() {
    let mut pair = agreed(Capabilities::all());
    pair.requester.code_ready(pair.now).unwrap();
    pair.flush();
    pair.provider_events();
    assert_eq!(
        pair.requester.poll_timeout(),
        Some(pair.now + Duration::from_secs(15))
    );
    pair.advance(Duration::from_secs(15));
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::CodeGeneration
        })]
    );
}

#[test]
fn test_cases_accepted_gate_readiness_until_agreed() {
    let mut pair = agreed(Capabilities::all());
    pair.requester
        .propose_test_cases(pair.now, CASES.into())
        .unwrap();
    // Code announced during the test-case negotiation: not ready until it is settled.
    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    assert_eq!(
        pair.provider_events(),
        vec![
            Event::TestCasesReceived {
                test_cases: CASES.into(),
                modification_summary: None
            },
            Event::PeerCodeReady,
        ]
    );
    assert!(!pair.requester_events().iter().any(is_ready));
    assert_eq!(
        pair.requester.send_application(b"{}"),
        Err(SessionError::NotReady(ProtocolType::Application))
    );
    pair.provider
        .decide_test_cases(pair.now, Decision::Accept)
        .unwrap();
    pair.flush();
    let agreed = Event::TestCasesAgreed {
        test_cases: CASES.into(),
    };
    let requester = pair.requester_events();
    assert_eq!(requester[0], agreed);
    assert!(is_ready(&requester[1]));
    let provider = pair.provider_events();
    assert_eq!(provider[0], agreed);
    assert!(is_ready(&provider[1]));
    assert_eq!(
        pair.take_wire(),
        vec![
            (
                From::Requester,
                json!({"action": "testCasesNegotiation", "testCases": CASES, "status": "negotiating"})
            ),
            (
                From::Requester,
                json!({"action": "codeGeneration", "status": "generated"})
            ),
            (
                From::Provider,
                json!({"action": "codeGeneration", "status": "generated"})
            ),
            (
                From::Provider,
                json!({"action": "testCasesNegotiation", "testCases": CASES, "status": "accepted"})
            ),
        ]
    );
}

#[test]
fn test_cases_countered_then_rejected_leave_the_session_usable() {
    let mut pair = agreed(Capabilities::all());
    pair.requester
        .propose_test_cases(pair.now, CASES.into())
        .unwrap();
    pair.flush();
    pair.provider
        .decide_test_cases(
            pair.now,
            Decision::Counter {
                candidate: "# Test case 1 (404 only)".into(),
                modification_summary: "dropped the 200 case".into(),
            },
        )
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::TestCasesReceived {
            test_cases: "# Test case 1 (404 only)".into(),
            modification_summary: Some("dropped the 200 case".into())
        }]
    );
    pair.requester
        .decide_test_cases(
            pair.now,
            Decision::Reject {
                reason: "we need the 200 case".into(),
            },
        )
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.provider_events().last(),
        Some(&Event::TestCasesRejected {
            by: Side::Peer,
            reason: Some("we need the 200 case".into())
        })
    );
    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    assert!(pair.requester_events().iter().any(is_ready));
    assert_eq!(pair.requester.phase(), Phase::Ready);
}

#[test]
fn only_the_requester_opens_test_cases_and_only_when_negotiated() {
    let mut pair = agreed(Capabilities::all());
    assert!(matches!(
        pair.provider.propose_test_cases(pair.now, CASES.into()),
        Err(SessionError::WrongRole { .. })
    ));
    let mut bare = agreed(Capabilities::none());
    assert_eq!(
        bare.requester.propose_test_cases(bare.now, CASES.into()),
        Err(SessionError::CapabilityNotNegotiated(
            Capability::TestCasesNegotiation
        ))
    );
    // A peer that sends it anyway breaks the protocol.
    bare.provider.handle_frame(
        bare.now,
        meta_frame(r#"{"action":"testCasesNegotiation","testCases":"x","status":"negotiating"}"#),
    );
    assert_eq!(
        bare.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::CapabilityNotNegotiated {
                capability: Capability::TestCasesNegotiation,
                what: "testCasesNegotiation"
            }
        ))]
    );
}

#[test]
fn peer_silent_in_test_case_negotiation_times_out() {
    let mut pair = agreed(Capabilities::all());
    pair.requester
        .propose_test_cases(pair.now, CASES.into())
        .unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    pair.advance(Duration::from_secs(60));
    assert_eq!(
        pair.requester_events().last(),
        Some(&Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::TestCases
        }))
    );
}

#[test]
fn a_fix_error_round_regenerates_code_and_returns_to_ready() {
    let mut pair = ready(Capabilities::all());
    pair.requester
        .report_error(pair.now, "status.code is missing from the response".into())
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.provider_events(),
        vec![Event::ErrorReported {
            error_description: "status.code is missing from the response".into()
        }]
    );
    pair.provider
        .decide_error_report(pair.now, FixDecision::Accept)
        .unwrap();
    assert_eq!(pair.provider.phase(), Phase::Preparing);
    pair.flush();
    assert_eq!(pair.requester_events(), vec![Event::FixAccepted]);
    assert_eq!(pair.requester.phase(), Phase::Preparing);
    assert_eq!(
        pair.requester.send_application(b"{}"),
        Err(SessionError::NotReady(ProtocolType::Application))
    );
    // The provider regenerates and announces its code again.
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    let requester = pair.requester_events();
    assert_eq!(requester[0], Event::PeerCodeReady);
    assert!(is_ready(&requester[1]));
    assert!(pair.provider_events().iter().any(is_ready));
    assert_eq!(
        pair.take_wire(),
        vec![
            (
                From::Requester,
                json!({"action": "fixErrorNegotiation",
                "errorDescription": "status.code is missing from the response", "status": "negotiating"})
            ),
            (
                From::Provider,
                json!({"action": "fixErrorNegotiation", "status": "accepted"})
            ),
            (
                From::Provider,
                json!({"action": "codeGeneration", "status": "generated"})
            ),
        ]
    );
}

#[test]
fn a_rejected_fix_keeps_the_session_ready() {
    let mut pair = ready(Capabilities::all());
    pair.requester
        .report_error(pair.now, "price must be a string".into())
        .unwrap();
    pair.flush();
    pair.provider
        .decide_error_report(
            pair.now,
            FixDecision::Reject {
                reason: "the schema says number".into(),
            },
        )
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::FixRejected {
            reason: Some("the schema says number".into())
        }]
    );
    assert!(pair.requester.is_ready());
}

#[test]
fn peer_silent_after_our_error_report_times_out() {
    let mut pair = ready(Capabilities::all());
    pair.requester.report_error(pair.now, "bad".into()).unwrap();
    pair.flush();
    pair.advance(Duration::from_secs(60));
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::FixError
        })]
    );
}

#[test]
fn a_fixed_peer_that_never_regenerates_times_out() {
    let mut pair = ready(Capabilities::all());
    pair.requester.report_error(pair.now, "bad".into()).unwrap();
    pair.flush();
    pair.provider
        .decide_error_report(pair.now, FixDecision::Accept)
        .unwrap();
    pair.flush();
    pair.advance(Duration::from_secs(15));
    assert_eq!(
        pair.requester_events().last(),
        Some(&Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::CodeGeneration
        }))
    );
}

#[test]
fn natural_language_negotiation_pairs_requests_and_responses() {
    let mut pair = Pair::new();
    let id = pair
        .requester
        .request_natural_language(pair.now, "Can you return prices in EUR?".into())
        .unwrap();
    assert_eq!(id.len(), 16);
    pair.flush();
    assert_eq!(
        pair.provider_events(),
        vec![Event::NaturalLanguageRequest {
            message_id: id.clone(),
            message: "Can you return prices in EUR?".into()
        }]
    );
    assert_eq!(
        pair.provider
            .respond_natural_language("0000000000000000", "?".into()),
        Err(SessionError::UnknownRequest("0000000000000000".into()))
    );
    pair.provider
        .respond_natural_language(&id, "Yes, add currency=EUR.".into())
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::NaturalLanguageResponse {
            message_id: id.clone(),
            message: "Yes, add currency=EUR.".into()
        }]
    );
    assert_eq!(
        pair.take_wire(),
        vec![
            (
                From::Requester,
                json!({"action": "naturalLanguageNegotiation", "type": "REQUEST",
                "messageId": id, "message": "Can you return prices in EUR?"})
            ),
            (
                From::Provider,
                json!({"action": "naturalLanguageNegotiation", "type": "RESPONSE",
                "messageId": id, "message": "Yes, add currency=EUR."})
            ),
        ]
    );
}

#[test]
fn natural_language_requests_time_out_without_closing() {
    let mut pair = Pair::new();
    let id = pair
        .requester
        .request_natural_language(pair.now, "hello?".into())
        .unwrap();
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.advance(Duration::from_secs(59));
    assert_eq!(pair.requester_events(), vec![]);
    pair.requester
        .handle_timeout(pair.now + Duration::from_secs(1));
    let events = pair.requester_events();
    assert_eq!(events[0], Event::NaturalLanguageTimedOut { message_id: id });
    // The protocol negotiation (also 60 s) timed out at the same moment.
    assert!(matches!(
        events[1],
        Event::Closed(CloseReason::TimedOut { .. })
    ));
}

#[test]
fn unanswered_natural_language_requests_are_bounded() {
    let mut pair = Pair::new();
    let limit = concord_proto::SessionConfig::default().max_pending_natural_language;
    let request = |n: usize| {
        meta_frame(&format!(
            r#"{{"action":"naturalLanguageNegotiation","type":"REQUEST","messageId":"question{n:08}","message":"hi"}}"#
        ))
    };
    for n in 0..limit {
        pair.provider.handle_frame(pair.now, request(n));
    }
    assert_eq!(pair.provider_events().len(), limit, "each one is delivered");
    pair.provider.handle_frame(pair.now, request(limit));
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::TooManyNaturalLanguageRequests { limit }
        ))]
    );
}

#[test]
fn an_unsolicited_natural_language_response_is_a_violation() {
    let mut pair = Pair::new();
    pair.provider
        .handle_frame(pair.now, meta_frame(r#"{"action":"naturalLanguageNegotiation","type":"RESPONSE","messageId":"abcdefghijklmnop","message":"hi"}"#));
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::UnknownNaturalLanguageResponse {
                message_id: "abcdefghijklmnop".into()
            }
        ))]
    );
}

#[test]
fn an_application_frame_before_ready_is_refused_both_ways() {
    let mut pair = agreed(Capabilities::all());
    pair.requester.code_ready(pair.now).unwrap();
    assert_eq!(
        pair.requester.send_application(b"{}"),
        Err(SessionError::NotReady(ProtocolType::Application))
    );
    pair.provider.handle_frame(pair.now, &b"\x40{}"[..]);
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::FrameBeforeReady {
                protocol_type: ProtocolType::Application
            }
        ))]
    );
}

#[test]
fn natural_language_and_verification_frames_need_their_capability() {
    let mut with = ready(Capabilities::all());
    with.requester
        .send_natural_language("# Output\n- price: 1299.99")
        .unwrap();
    with.requester.send_verification(b"\x01\x02").unwrap();
    with.flush();
    assert_eq!(
        with.provider_events(),
        vec![
            Event::NaturalLanguage("# Output\n- price: 1299.99".into()),
            Event::Verification(vec![1, 2].into()),
        ]
    );
    let mut without = ready(Capabilities::none());
    assert_eq!(
        without.requester.send_natural_language("hi"),
        Err(SessionError::CapabilityNotNegotiated(
            Capability::NaturalLanguageProtocol
        ))
    );
    assert_eq!(
        without.requester.send_verification(b""),
        Err(SessionError::CapabilityNotNegotiated(
            Capability::VerificationProtocol
        ))
    );
    without.provider.handle_frame(without.now, &b"\xC0data"[..]);
    assert_eq!(
        without.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::CapabilityNotNegotiated {
                capability: Capability::VerificationProtocol,
                what: "a verification frame"
            }
        ))]
    );
}

#[test]
fn a_natural_language_frame_must_be_utf8() {
    let mut pair = ready(Capabilities::all());
    pair.provider.handle_frame(pair.now, &b"\x80ok\xff"[..]);
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::NaturalLanguageNotUtf8 { valid_up_to: 2 }
        ))]
    );
}

/// A meta message too large to send is refused before anything moves: the same exchange
/// can be tried again with a smaller message.
#[test]
fn a_meta_message_too_large_to_send_changes_nothing() {
    let mut config = SessionConfig::default();
    config.max_frame_size = 512;
    let mut pair = Pair::with(
        agreement(Capabilities::all(), ProtocolChoice::Negotiate),
        config.clone(),
        config,
    );
    pair.agree();
    pair.requester_events();
    pair.provider_events();
    let huge = "x".repeat(600);
    let too_large = |result: Result<(), SessionError>| {
        matches!(result, Err(SessionError::FrameTooLarge { limit: 512, .. }))
    };

    assert!(too_large(
        pair.requester.propose_test_cases(pair.now, huge.clone())
    ));
    pair.requester
        .propose_test_cases(pair.now, CASES.into())
        .unwrap();
    pair.flush();
    assert!(too_large(pair.provider.decide_test_cases(
        pair.now,
        Decision::Reject {
            reason: huge.clone()
        }
    )));
    pair.provider
        .decide_test_cases(pair.now, Decision::Accept)
        .unwrap();
    pair.flush();

    assert!(too_large(
        pair.requester.report_error(pair.now, huge.clone())
    ));
    pair.requester
        .report_error(pair.now, "price is a string".into())
        .unwrap();
    pair.flush();
    assert!(too_large(pair.provider.decide_error_report(
        pair.now,
        FixDecision::Reject {
            reason: huge.clone()
        }
    )));
    pair.provider
        .decide_error_report(pair.now, FixDecision::Accept)
        .unwrap();

    let id = pair
        .requester
        .request_natural_language(pair.now, "EUR?".into())
        .unwrap();
    pair.flush();
    assert!(too_large(
        pair.provider.respond_natural_language(&id, huge.clone())
    ));
    pair.provider
        .respond_natural_language(&id, "yes".into())
        .unwrap();
}

#[test]
fn oversized_frames_are_refused_both_ways() {
    let mut config = SessionConfig::default();
    config.max_frame_size = 64;
    let mut pair = Pair::with(
        agreement(
            Capabilities::all(),
            ProtocolChoice::Resume(concord_proto::ProtocolHash::of_text("p")),
        ),
        config.clone(),
        config,
    );
    pair.requester_events();
    pair.provider_events();
    assert_eq!(
        pair.requester.send_application(&[b'x'; 64]),
        Err(SessionError::FrameTooLarge {
            size: 65,
            limit: 64
        })
    );
    pair.requester.send_application(&[b'x'; 63]).unwrap();
    pair.flush();
    assert_eq!(pair.provider_events().len(), 1);
    let mut big = vec![0x40];
    big.extend_from_slice(&[b'x'; 64]);
    pair.provider.handle_frame(pair.now, big.clone());
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::Frame(concord_proto::FrameError::TooLarge {
                size: 65,
                limit: 64
            })
        ))]
    );
}
