//! Size limits on meta messages, candidates and test cases, and the deadlines of a
//! negotiation: every hostile input gets a typed answer, never silence, and two Concord
//! peers agree on the limits because our own senders refuse what the peer would.

mod support;

use std::time::Duration;

use concord_proto::handshake::ProtocolChoice;
use concord_proto::{
    Capabilities, CloseReason, Decision, Event, MetaMessage, Phase, ProtocolNegotiation,
    ProtocolViolation, SessionConfig, SessionError, Side, TestCasesNegotiation, Wait,
};
use serde_json::json;
use support::{agreement, meta_frame, From, Pair, PRODUCT_INFO};

const KIB: usize = 1024;
const MB: usize = 1_000_000;

/// A pair about to negotiate with these settings (requester, provider).
fn pair(requester: SessionConfig, provider: SessionConfig) -> Pair {
    Pair::with(
        agreement(Capabilities::all(), ProtocolChoice::Negotiate),
        requester,
        provider,
    )
}

/// Settings whose size limits are wide enough to send anything up to `size`.
fn wide(size: usize) -> SessionConfig {
    let mut config = SessionConfig::default();
    config.max_meta_message_size = 2 * size;
    config.max_candidate_size = size;
    config.max_test_cases_size = size;
    config
}

fn protocol_frame(candidate: &str) -> Vec<u8> {
    MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
        sequence_id: 0,
        candidate_protocols: Some(candidate.into()),
        modification_summary: None,
        status: concord_proto::NegotiationStatus::Negotiating,
    })
    .to_frame()
    .unwrap()
}

fn test_cases_frame(text: &str) -> Vec<u8> {
    MetaMessage::TestCasesNegotiation(TestCasesNegotiation {
        test_cases: Some(text.into()),
        modification_summary: None,
        status: concord_proto::NegotiationStatus::Negotiating,
    })
    .to_frame()
    .unwrap()
}

/// The defaults are the documented ones.
#[test]
fn defaults() {
    let config = SessionConfig::default();
    assert_eq!(config.max_meta_message_size, 256 * KIB);
    assert_eq!(config.max_candidate_size, 64 * KIB);
    assert_eq!(config.max_test_cases_size, 64 * KIB);
    assert_eq!(config.first_proposal_timeout, Duration::from_secs(10));
    assert_eq!(config.negotiation_deadline, Duration::from_secs(180));
}

/// A 1 MB candidate from a peer with wider limits: the frame is over our meta-message
/// limit, refused on its length before decoding, answered `rejected` naming both.
#[test]
fn a_1_mb_candidate_is_refused_on_the_frame_length() {
    let mut pair = Pair::new();
    let frame = protocol_frame(&"x".repeat(MB));
    let size = frame.len() - 1;
    pair.provider.handle_frame(pair.now, frame.clone());
    let violation = ProtocolViolation::MetaMessageTooLarge {
        size,
        limit: 256 * KIB,
    };
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(violation.clone()))]
    );
    assert_eq!(
        support::describe(&pair.provider.poll_transmit().unwrap()),
        json!({"action": "protocolNegotiation", "sequenceId": 0, "status": "rejected",
               "modificationSummary": violation.to_string()})
    );
    assert_eq!(
        violation.to_string(),
        format!("meta message of {size} bytes exceeds the limit of 262144 bytes")
    );
    // Refused on its length: not even JSON is looked at.
    let mut pair = Pair::new();
    let mut garbage = vec![0u8];
    garbage.extend(std::iter::repeat_n(b'{', 300 * KIB));
    pair.provider.handle_frame(pair.now, garbage.clone());
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::MetaMessageTooLarge {
                size: 300 * KIB,
                limit: 256 * KIB
            }
        ))]
    );
}

/// A candidate within the meta-message limit but over the candidate limit, from a peer
/// whose own limits are wider: answered `rejected` with size and limit; both sides close
/// with a typed reason.
#[test]
fn an_oversized_candidate_is_rejected_naming_size_and_limit() {
    let mut pair = pair(wide(MB), SessionConfig::default());
    let candidate = "x".repeat(100_000);
    pair.requester.propose(pair.now, candidate).unwrap();
    pair.flush();
    let reason = "candidate protocol of 100000 bytes exceeds the limit of 65536 bytes";
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::CandidateTooLarge {
            size: 100_000,
            limit: 64 * KIB
        })]
    );
    assert_eq!(
        pair.take_wire()[1],
        (
            From::Provider,
            json!({"action": "protocolNegotiation", "sequenceId": 1, "status": "rejected",
                   "modificationSummary": reason})
        )
    );
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::NegotiationRejected {
            by: Side::Peer,
            reason: Some(reason.into())
        })]
    );
    assert_eq!(
        CloseReason::CandidateTooLarge {
            size: 100_000,
            limit: 64 * KIB
        }
        .to_string(),
        "the peer's candidate protocol of 100000 bytes exceeds our limit of 65536 bytes"
    );
}

/// The requester holds the same limit against the provider's counter-proposals.
#[test]
fn an_oversized_counter_proposal_is_rejected_too() {
    let mut pair = pair(SessionConfig::default(), wide(MB));
    pair.requester
        .propose(pair.now, PRODUCT_INFO.into())
        .unwrap();
    pair.flush();
    pair.provider_events();
    pair.provider
        .decide(
            pair.now,
            Decision::Counter {
                candidate: "y".repeat(70_000),
                modification_summary: "bigger".into(),
            },
        )
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::CandidateTooLarge {
            size: 70_000,
            limit: 64 * KIB
        })]
    );
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::NegotiationRejected {
            by: Side::Peer,
            reason: Some(
                "candidate protocol of 70000 bytes exceeds the limit of 65536 bytes".into()
            )
        })]
    );
}

/// Our own senders refuse what the peer would refuse, and nothing moves: the same call
/// with a text within the limit then goes through.
#[test]
fn our_senders_refuse_texts_over_the_limits() {
    let mut pair = Pair::new();
    let big = "x".repeat(64 * KIB + 1);
    assert_eq!(
        pair.requester.propose(pair.now, big.clone()),
        Err(SessionError::TextTooLarge {
            field: "candidateProtocols",
            size: 64 * KIB + 1,
            limit: 64 * KIB
        })
    );
    assert!(pair.requester.poll_transmit().is_none());
    pair.requester
        .propose(pair.now, "x".repeat(64 * KIB))
        .unwrap();
    pair.flush();
    pair.provider_events();
    assert!(matches!(
        pair.provider.decide(
            pair.now,
            Decision::Counter {
                candidate: big.clone(),
                modification_summary: "s".into()
            }
        ),
        Err(SessionError::TextTooLarge {
            field: "candidateProtocols",
            ..
        })
    ));
    // A summary that makes the whole message too large is refused by the message limit.
    let refused = pair.provider.decide(
        pair.now,
        Decision::Counter {
            candidate: "v2".into(),
            modification_summary: "s".repeat(300 * KIB),
        },
    );
    assert!(
        matches!(
            refused,
            Err(SessionError::MetaMessageTooLarge {
                action: "protocolNegotiation",
                size,
                limit
            }) if size > 300 * KIB && limit == 256 * KIB
        ),
        "{refused:?}"
    );
    pair.provider.decide(pair.now, Decision::Accept).unwrap();
    pair.flush();
    assert!(matches!(
        pair.requester_events().as_slice(),
        [Event::ProtocolAgreed { .. }]
    ));
    assert_eq!(
        pair.requester.propose_test_cases(pair.now, big.clone()),
        Err(SessionError::TextTooLarge {
            field: "testCases",
            size: 64 * KIB + 1,
            limit: 64 * KIB
        })
    );
    assert!(matches!(
        pair.requester
            .request_natural_language(pair.now, "n".repeat(300 * KIB)),
        Err(SessionError::MetaMessageTooLarge {
            action: "naturalLanguageNegotiation",
            ..
        })
    ));
    assert!(pair.requester.poll_transmit().is_none());
    assert_eq!(pair.requester.phase(), Phase::Preparing);
}

/// A reason of ours longer than 2 KiB is cut, never dropped: the peer is always told.
#[test]
fn a_long_rejection_reason_is_cut_not_lost() {
    let mut pair = Pair::new();
    pair.requester
        .propose(pair.now, PRODUCT_INFO.into())
        .unwrap();
    pair.flush();
    pair.provider_events();
    pair.provider
        .decide(
            pair.now,
            Decision::Reject {
                reason: "é".repeat(300 * KIB),
            },
        )
        .unwrap();
    pair.flush();
    let Some(Event::Closed(CloseReason::NegotiationRejected {
        by: Side::Peer,
        reason: Some(reason),
    })) = pair.requester_events().pop()
    else {
        panic!("the requester must be told");
    };
    assert!(reason.len() <= 2048, "{}", reason.len());
    assert!(reason.ends_with('…'));
}

/// A pair that agreed on the product-info protocol with these settings.
fn agreed(requester: SessionConfig, provider: SessionConfig) -> Pair {
    let mut pair = pair(requester, provider);
    pair.agree();
    pair.requester_events();
    pair.provider_events();
    pair.take_wire();
    pair
}

/// Oversized test cases (within the meta-message limit) are answered `rejected` for the
/// test cases; the session goes on to ready without them.
#[test]
fn oversized_test_cases_are_rejected_and_the_session_goes_on() {
    let mut pair = agreed(wide(MB), SessionConfig::default());
    pair.requester
        .propose_test_cases(pair.now, "t".repeat(100_000))
        .unwrap();
    pair.flush();
    let reason = "test cases of 100000 bytes exceed the limit of 65536 bytes";
    assert_eq!(
        pair.provider_events(),
        vec![Event::TestCasesRejected {
            by: Side::Local,
            reason: Some(reason.into())
        }]
    );
    assert_eq!(
        pair.take_wire()[1],
        (
            From::Provider,
            json!({"action": "testCasesNegotiation", "status": "rejected",
                   "modificationSummary": reason})
        )
    );
    assert_eq!(
        pair.requester_events(),
        vec![Event::TestCasesRejected {
            by: Side::Peer,
            reason: Some(reason.into())
        }]
    );
    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    assert!(pair.requester.is_ready() && pair.provider.is_ready());
}

/// The requester holds the test-case limit against the provider's counter-proposal.
#[test]
fn an_oversized_test_case_counter_is_rejected() {
    let mut pair = agreed(SessionConfig::default(), wide(MB));
    pair.requester
        .propose_test_cases(pair.now, "# case 1".into())
        .unwrap();
    pair.flush();
    pair.provider_events();
    pair.provider
        .decide_test_cases(
            pair.now,
            Decision::Counter {
                candidate: "t".repeat(70_000),
                modification_summary: "more".into(),
            },
        )
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::TestCasesRejected {
            by: Side::Local,
            reason: Some("test cases of 70000 bytes exceed the limit of 65536 bytes".into())
        }]
    );
    assert!(matches!(
        pair.provider_events().as_slice(),
        [Event::TestCasesRejected { by: Side::Peer, .. }]
    ));
}

/// A 1 MB test-case text is over the meta-message limit: while our own test cases await
/// the peer's answer, the peer is told `rejected` for them, then the session closes.
#[test]
fn a_1_mb_test_case_text_closes_the_session_with_a_typed_violation() {
    let mut pair = agreed(SessionConfig::default(), SessionConfig::default());
    pair.requester
        .propose_test_cases(pair.now, "# case 1".into())
        .unwrap();
    pair.flush();
    pair.take_wire();
    let frame = test_cases_frame(&"t".repeat(MB));
    let size = frame.len() - 1;
    pair.requester.handle_frame(pair.now, frame.clone());
    let violation = ProtocolViolation::MetaMessageTooLarge {
        size,
        limit: 256 * KIB,
    };
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::Violation(violation.clone()))]
    );
    assert_eq!(
        support::describe(&pair.requester.poll_transmit().unwrap()),
        json!({"action": "testCasesNegotiation", "status": "rejected",
               "modificationSummary": violation.to_string()})
    );
    // Opening test cases that large: the provider closes with the same typed violation.
    let mut pair = agreed(SessionConfig::default(), SessionConfig::default());
    pair.provider.handle_frame(pair.now, frame.clone());
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(violation))]
    );
}

/// Within the frame limit but over the meta-message one, after agreement: a typed
/// violation (no negotiation in progress to reject).
#[test]
fn any_other_oversized_meta_message_is_a_typed_violation() {
    let mut pair = agreed(SessionConfig::default(), SessionConfig::default());
    let text = format!(
        r#"{{"action":"naturalLanguageNegotiation","type":"REQUEST","messageId":"abcdefghijklmnop","message":"{}"}}"#,
        "n".repeat(300 * KIB)
    );
    pair.provider.handle_frame(pair.now, meta_frame(&text));
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::MetaMessageTooLarge {
                size: text.len(),
                limit: 256 * KIB
            }
        ))]
    );
    assert!(pair.provider.poll_transmit().is_none());
}

/// A first proposal in time ends the first-proposal wait (the provider's turn has no peer
/// deadline), but the whole negotiation's deadline still stands.
#[test]
fn a_first_proposal_in_time_clears_the_first_proposal_timeout() {
    let mut pair = Pair::new();
    pair.advance(Duration::from_secs(9));
    pair.requester
        .propose(pair.now, PRODUCT_INFO.into())
        .unwrap();
    pair.flush();
    assert!(matches!(
        pair.provider_events().as_slice(),
        [Event::CandidateReceived { .. }]
    ));
    let start = pair.now - Duration::from_secs(9);
    assert_eq!(
        pair.provider.poll_timeout(),
        Some(start + Duration::from_secs(180))
    );
    pair.advance(Duration::from_secs(30));
    assert_eq!(pair.provider.phase(), Phase::Negotiating);
}

/// Counter-proposals each within `negotiation_timeout` cannot stretch a negotiation past
/// `negotiation_deadline`: the side whose deadline passes tells the peer and closes.
#[test]
fn the_negotiation_deadline_bounds_the_whole_negotiation() {
    let mut lenient = SessionConfig::default();
    lenient.negotiation_deadline = Duration::from_secs(10_000);
    lenient.max_negotiation_rounds = 100;
    let mut provider = lenient.clone();
    provider.negotiation_deadline = Duration::from_secs(180);
    let mut pair = pair(lenient, provider);
    pair.requester.propose(pair.now, "v0".into()).unwrap();
    pair.flush();
    let mut round = 0;
    let events = loop {
        pair.advance(Duration::from_secs(50));
        let provider_events = pair.provider_events();
        if provider_events
            .iter()
            .any(|event| matches!(event, Event::Closed(_)))
        {
            break provider_events;
        }
        round += 1;
        let (side, name) = if round % 2 == 1 {
            (&mut pair.provider, "provider")
        } else {
            (&mut pair.requester, "requester")
        };
        side.decide(
            pair.now,
            Decision::Counter {
                candidate: format!("v{round} by the {name}"),
                modification_summary: format!("round {round}"),
            },
        )
        .unwrap();
        pair.flush();
        pair.requester_events();
    };
    assert_eq!(
        events,
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::Ready
        })]
    );
    assert_eq!(round, 3, "closed at 200 s, after three counters in time");
    pair.flush();
    let reason = "timed out: the negotiation deadline of 180 s passed";
    assert_eq!(
        pair.take_wire().last().unwrap().1["modificationSummary"],
        json!(reason)
    );
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::NegotiationRejected {
            by: Side::Peer,
            reason: Some(reason.into())
        })]
    );
    assert_eq!(
        CloseReason::TimedOut {
            waiting_for: Wait::Ready
        }
        .to_string(),
        "not ready within the negotiation deadline (negotiation_deadline)"
    );
}

/// The deadline runs through code generation and test cases too; test cases in flight
/// are answered `rejected` before the session closes.
#[test]
fn the_negotiation_deadline_covers_preparation() {
    let mut config = SessionConfig::default();
    config.negotiation_deadline = Duration::from_secs(30);
    config.code_generation_timeout = Duration::from_secs(1000);
    let mut pair = agreed(config.clone(), config);
    pair.requester
        .propose_test_cases(pair.now, "# case 1".into())
        .unwrap();
    pair.flush();
    pair.provider_events();
    pair.take_wire();
    assert_eq!(
        pair.requester.poll_timeout(),
        Some(pair.now + Duration::from_secs(30))
    );
    pair.now += Duration::from_secs(30);
    pair.requester.handle_timeout(pair.now);
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::Ready
        })]
    );
    assert_eq!(
        support::describe(&pair.requester.poll_transmit().unwrap()),
        json!({"action": "testCasesNegotiation", "status": "rejected",
               "modificationSummary": "timed out: the negotiation deadline of 30 s passed"})
    );
}

/// Once ready, the negotiation deadline is gone; after 0-RTT or consensus it never
/// applied, nor did the first-proposal timeout.
#[test]
fn no_negotiation_deadline_once_ready_or_after_0rtt_or_consensus() {
    let mut config = SessionConfig::default();
    config.negotiation_deadline = Duration::from_secs(30);
    let mut pair = agreed(config.clone(), config.clone());
    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    assert!(pair.requester.is_ready() && pair.provider.is_ready());
    assert_eq!(pair.requester.poll_timeout(), None);
    assert_eq!(pair.provider.poll_timeout(), None);
    pair.advance(Duration::from_secs(1000));
    assert!(pair.requester.is_ready() && pair.provider.is_ready());
    for protocol in [
        ProtocolChoice::Resume(concord_proto::ProtocolHash::of_text(PRODUCT_INFO)),
        ProtocolChoice::Consensus("https://example.com/protocol/1.0".into()),
    ] {
        let mut pair = Pair::with(
            agreement(Capabilities::all(), protocol),
            config.clone(),
            config.clone(),
        );
        assert_eq!(pair.provider.poll_timeout(), None);
        assert_eq!(pair.requester.poll_timeout(), None);
        pair.advance(Duration::from_secs(1000));
        assert!(pair.requester.is_ready() && pair.provider.is_ready());
    }
}

/// The requester drafting its first candidate (no peer deadline) is bounded by the
/// negotiation deadline alone; with nothing in progress on the wire it just closes.
#[test]
fn a_requester_that_never_proposes_is_bounded_by_the_deadline() {
    let mut pair = Pair::new();
    assert_eq!(
        pair.requester.poll_timeout(),
        Some(pair.now + Duration::from_secs(180))
    );
    pair.now += Duration::from_secs(180);
    pair.requester.handle_timeout(pair.now);
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::Ready
        })]
    );
    assert_eq!(
        support::describe(&pair.requester.poll_transmit().unwrap())["status"],
        json!("rejected")
    );
}

/// A frame built in place (`send_application_frame`) leaves exactly as `send_application`
/// would send its payload, and is held to the same rules: not before ready, no frame
/// without room for its header, none over the size limit.
#[test]
fn a_frame_built_in_place_is_the_same_frame_under_the_same_rules() {
    let mut pair = agreed(SessionConfig::default(), SessionConfig::default());
    assert_eq!(
        pair.requester.send_application_frame(vec![0, b'{', b'}']),
        Err(SessionError::NotReady(
            concord_proto::ProtocolType::Application
        ))
    );
    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    assert!(pair
        .requester_events()
        .iter()
        .any(|event| matches!(event, Event::Ready { .. })));
    pair.provider_events();

    let payload = br#"{"productId":"P12345"}"#;
    let mut frame = vec![0xAB];
    frame.extend_from_slice(payload);
    pair.requester.send_application_frame(frame).unwrap();
    pair.requester.send_application(payload).unwrap();
    let in_place = pair.requester.poll_transmit().unwrap();
    let copied = pair.requester.poll_transmit().unwrap();
    assert_eq!(in_place, copied);
    assert_eq!(
        in_place,
        concord_proto::Frame::encode(concord_proto::ProtocolType::Application, payload)
    );
    pair.provider.handle_frame(pair.now, in_place);
    assert_eq!(
        pair.provider_events(),
        vec![Event::Application(payload.to_vec().into())]
    );

    assert_eq!(
        pair.requester.send_application_frame(Vec::new()),
        Err(SessionError::NoHeaderRoom)
    );
    let limit = SessionConfig::default().max_frame_size;
    assert_eq!(
        pair.requester.send_application_frame(vec![0; limit + 1]),
        Err(SessionError::FrameTooLarge {
            size: limit + 1,
            limit
        })
    );
    assert_eq!(pair.requester.poll_transmit(), None);
}
