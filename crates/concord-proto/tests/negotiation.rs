//! Protocol negotiation between a requester and a provider: agreement, counter-proposals,
//! rejection, the round cap, sequenceId rules and timeouts.

mod support;

use std::time::Duration;

use concord_proto::{
    CloseReason, Decision, EstablishedProtocol, Event, Phase, ProtocolHash, ProtocolViolation,
    Side, Wait,
};
use serde_json::json;
use support::{meta_frame, From, Pair, PRODUCT_INFO};

/// Both sides with `config`, negotiating (no 0-RTT, no consensus).
fn negotiating(config: concord_proto::SessionConfig) -> Pair {
    Pair::with(
        support::agreement(
            concord_proto::Capabilities::all(),
            concord_proto::handshake::ProtocolChoice::Negotiate,
        ),
        config.clone(),
        config,
    )
}

fn counter(candidate: &str, summary: &str) -> Decision {
    Decision::Counter {
        candidate: candidate.into(),
        modification_summary: summary.into(),
    }
}

#[test]
fn happy_path_agrees_generates_code_and_exchanges_data() {
    let mut pair = Pair::new();
    pair.requester
        .propose(pair.now, PRODUCT_INFO.into())
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.provider_events(),
        vec![Event::CandidateReceived {
            sequence_id: 0,
            candidate: PRODUCT_INFO.into(),
            modification_summary: None,
            replaces: None,
        }]
    );
    pair.provider.decide(pair.now, Decision::Accept).unwrap();
    pair.flush();
    let hash = ProtocolHash::of_text(PRODUCT_INFO);
    let agreed = Event::ProtocolAgreed {
        hash,
        document: PRODUCT_INFO.into(),
    };
    assert_eq!(pair.requester_events(), vec![agreed.clone()]);
    assert_eq!(pair.provider_events(), vec![agreed]);
    assert_eq!(pair.requester.phase(), Phase::Preparing);

    pair.requester.code_ready(pair.now).unwrap();
    pair.provider.code_ready(pair.now).unwrap();
    pair.flush();
    let ready = Event::Ready {
        protocol: EstablishedProtocol::Negotiated {
            hash,
            document: PRODUCT_INFO.into(),
        },
    };
    assert_eq!(
        pair.requester_events(),
        vec![Event::PeerCodeReady, ready.clone()]
    );
    assert_eq!(pair.provider_events(), vec![Event::PeerCodeReady, ready]);

    pair.requester
        .send_application(br#"{"productId":"P12345"}"#)
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.provider_events(),
        vec![Event::Application(
            br#"{"productId":"P12345"}"#.to_vec().into()
        )]
    );
    assert_eq!(
        pair.take_wire(),
        vec![
            (
                From::Requester,
                json!({"action": "protocolNegotiation", "sequenceId": 0,
                       "candidateProtocols": PRODUCT_INFO, "status": "negotiating"})
            ),
            (
                From::Provider,
                json!({"action": "protocolNegotiation", "sequenceId": 1,
                       "candidateProtocols": PRODUCT_INFO, "status": "accepted"})
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
                From::Requester,
                json!({"pt": "application", "data": r#"{"productId":"P12345"}"#})
            ),
        ]
    );
    assert_eq!(
        pair.requester.poll_timeout(),
        None,
        "nothing pending once ready"
    );
}

#[test]
fn several_counter_proposals_then_agreement_on_the_last_text() {
    let mut pair = Pair::new();
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.provider
        .decide(pair.now, counter("v2", "renamed id"))
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::CandidateReceived {
            sequence_id: 1,
            candidate: "v2".into(),
            modification_summary: Some("renamed id".into()),
            replaces: Some("v1".into()),
        }]
    );
    pair.requester
        .decide(pair.now, counter("v3", "added currency"))
        .unwrap();
    pair.flush();
    // Each side sees which of its own candidates the peer's answers.
    assert_eq!(
        pair.provider_events().last(),
        Some(&Event::CandidateReceived {
            sequence_id: 2,
            candidate: "v3".into(),
            modification_summary: Some("added currency".into()),
            replaces: Some("v2".into()),
        })
    );
    pair.provider
        .decide(pair.now, counter("v4", "timeout 15 s"))
        .unwrap();
    pair.flush();
    pair.requester.decide(pair.now, Decision::Accept).unwrap();
    pair.flush();
    let hash = ProtocolHash::of_text("v4");
    assert!(pair.provider_events().contains(&Event::ProtocolAgreed {
        hash,
        document: "v4".into()
    }));
    let wire = pair.take_wire();
    let sequence: Vec<_> = wire
        .iter()
        .map(|(from, message)| {
            (
                *from,
                message["sequenceId"].clone(),
                message["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        sequence,
        vec![
            (From::Requester, json!(0), json!("negotiating")),
            (From::Provider, json!(1), json!("negotiating")),
            (From::Requester, json!(2), json!("negotiating")),
            (From::Provider, json!(3), json!("negotiating")),
            (From::Requester, json!(4), json!("accepted")),
        ]
    );
    assert_eq!(wire[4].1["candidateProtocols"], "v4");
    assert_eq!(wire[3].1["modificationSummary"], "timeout 15 s");
}

#[test]
fn rejection_closes_both_sides_with_the_reason() {
    let mut pair = Pair::new();
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.provider
        .decide(
            pair.now,
            Decision::Reject {
                reason: "no action serves `productId`".into(),
            },
        )
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::NegotiationRejected {
            by: Side::Peer,
            reason: Some("no action serves `productId`".into()),
        })]
    );
    assert_eq!(
        pair.take_wire()[1].1,
        json!({"action": "protocolNegotiation", "sequenceId": 1,
               "modificationSummary": "no action serves `productId`", "status": "rejected"})
    );
    assert_eq!(pair.requester.phase(), Phase::Closed);
    assert_eq!(pair.provider.phase(), Phase::Closed);
}

#[test]
fn round_cap_turns_a_counter_into_a_rejection() {
    let mut config = concord_proto::SessionConfig::default();
    config.max_negotiation_rounds = 3;
    let mut pair = negotiating(config);
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.provider.decide(pair.now, counter("v2", "s2")).unwrap();
    pair.flush();
    pair.requester
        .decide(pair.now, counter("v3", "s3"))
        .unwrap();
    pair.flush();
    // A fourth negotiating message would pass the cap of 3: it goes out as a rejection.
    pair.provider.decide(pair.now, counter("v4", "s4")).unwrap();
    pair.flush();
    let cap = CloseReason::RoundCapReached { rounds: 3 };
    assert_eq!(pair.provider_events().last(), Some(&Event::Closed(cap)));
    assert_eq!(
        pair.take_wire().last().unwrap().1,
        json!({"action": "protocolNegotiation", "sequenceId": 3, "status": "rejected",
               "modificationSummary": "round cap of 3 negotiating messages reached without agreement"})
    );
    assert!(matches!(
        pair.requester_events().last(),
        Some(Event::Closed(CloseReason::NegotiationRejected {
            by: Side::Peer,
            ..
        }))
    ));
}

/// A proposal or an answer too large to send is refused before the state moves: the turn
/// stays ours, and a smaller one goes out with the sequenceId the refused one would have had.
#[test]
fn a_candidate_too_large_to_send_changes_nothing() {
    let mut config = concord_proto::SessionConfig::default();
    config.max_frame_size = 200;
    let mut pair = negotiating(config);
    let huge = "x".repeat(300);
    let too_large = |result: Result<(), concord_proto::SessionError>| {
        matches!(
            result,
            Err(concord_proto::SessionError::FrameTooLarge { limit: 200, .. })
        )
    };
    assert!(too_large(pair.requester.propose(pair.now, huge.clone())));
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    assert!(too_large(
        pair.provider.decide(pair.now, counter(&huge, "s"))
    ));
    assert!(too_large(pair.provider.decide(
        pair.now,
        Decision::Counter {
            candidate: "v2".into(),
            modification_summary: huge.clone(),
        }
    )));
    pair.provider.decide(pair.now, counter("v2", "s2")).unwrap();
    pair.flush();
    assert_eq!(
        pair.requester_events().last(),
        Some(&Event::CandidateReceived {
            sequence_id: 1,
            candidate: "v2".into(),
            modification_summary: Some("s2".into()),
            replaces: Some("v1".into()),
        })
    );
}

#[test]
fn a_peer_passing_the_round_cap_is_rejected() {
    let mut config = concord_proto::SessionConfig::default();
    config.max_negotiation_rounds = 2;
    let mut pair = Pair::with(
        support::agreement(
            concord_proto::Capabilities::all(),
            concord_proto::handshake::ProtocolChoice::Negotiate,
        ),
        concord_proto::SessionConfig::default(),
        config,
    );
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.provider.decide(pair.now, counter("v2", "s2")).unwrap();
    pair.flush();
    // The requester allows 10 rounds; the provider only 2.
    pair.requester
        .decide(pair.now, counter("v3", "s3"))
        .unwrap();
    pair.flush();
    assert_eq!(
        pair.provider_events().last(),
        Some(&Event::Closed(CloseReason::RoundCapReached { rounds: 2 }))
    );
    assert_eq!(pair.take_wire().last().unwrap().1["status"], "rejected");
}

/// The requester's events once it proposed `v1` and the peer answered with `frame`
/// (a meta message's JSON).
fn requester_answered_with(frame: &str) -> Vec<Event> {
    let mut pair = Pair::new();
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.requester.handle_frame(pair.now, meta_frame(frame));
    pair.requester_events()
}

fn provider_receiving(frames: &[&str]) -> Pair {
    let mut pair = Pair::new();
    for frame in frames {
        pair.provider.handle_frame(pair.now, meta_frame(frame));
    }
    pair
}

#[test]
fn a_sequence_id_gap_is_answered_with_rejected_and_a_reason() {
    let mut pair = Pair::new();
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.provider_events();
    // The provider's counter should carry 1; a peer that skips to 5 is rejected.
    let bad = r#"{"action":"protocolNegotiation","sequenceId":5,"candidateProtocols":"v2","modificationSummary":"s","status":"negotiating"}"#;
    pair.requester.handle_frame(pair.now, meta_frame(bad));
    let violation = ProtocolViolation::SequenceId {
        expected: Some(1),
        got: 5,
    };
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::Violation(violation.clone()))]
    );
    let reply = support::describe(&pair.requester.poll_transmit().unwrap());
    assert_eq!(
        reply,
        json!({"action": "protocolNegotiation", "sequenceId": 6, "status": "rejected",
               "modificationSummary": violation.to_string()})
    );
    assert_eq!(
        violation.to_string(),
        "protocolNegotiation sequenceId 5 breaks the sequence: expected 1"
    );
}

#[test]
fn a_repeated_sequence_id_is_rejected() {
    let mut pair = provider_receiving(&[
        r#"{"action":"protocolNegotiation","sequenceId":0,"candidateProtocols":"v1","status":"negotiating"}"#,
    ]);
    pair.provider.decide(pair.now, counter("v2", "s")).unwrap();
    pair.provider.poll_transmit();
    let repeat = r#"{"action":"protocolNegotiation","sequenceId":1,"candidateProtocols":"v3","modificationSummary":"s","status":"negotiating"}"#;
    pair.provider.handle_frame(pair.now, meta_frame(repeat));
    assert_eq!(
        pair.provider_events().last(),
        Some(&Event::Closed(CloseReason::Violation(
            ProtocolViolation::SequenceId {
                expected: Some(2),
                got: 1
            }
        )))
    );
}

#[test]
fn a_first_message_must_carry_zero_or_one() {
    let mut pair = provider_receiving(&[
        r#"{"action":"protocolNegotiation","sequenceId":2,"candidateProtocols":"v1","status":"negotiating"}"#,
    ]);
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::SequenceId {
                expected: None,
                got: 2
            }
        ))]
    );
}

#[test]
fn a_counter_without_modification_summary_is_rejected() {
    assert_eq!(
        requester_answered_with(
            r#"{"action":"protocolNegotiation","sequenceId":1,"candidateProtocols":"v2","status":"negotiating"}"#
        ),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::MissingModificationSummary {
                action: "protocolNegotiation"
            }
        ))]
    );
}

#[test]
fn an_accept_of_a_different_text_is_a_violation() {
    assert_eq!(
        requester_answered_with(
            r#"{"action":"protocolNegotiation","sequenceId":1,"candidateProtocols":"v1 but not quite","status":"accepted"}"#
        ),
        vec![Event::Closed(CloseReason::Violation(
            ProtocolViolation::AcceptedDifferentText {
                action: "protocolNegotiation"
            }
        ))]
    );
}

/// A hello then silence: the provider waits `first_proposal_timeout` (10 s), not the 60 s
/// of a negotiation step, then tells the requester and closes.
#[test]
fn provider_times_out_waiting_for_the_first_candidate() {
    let mut pair = Pair::new();
    assert_eq!(
        pair.provider.poll_timeout(),
        Some(pair.now + Duration::from_secs(10))
    );
    pair.advance(Duration::from_secs(9));
    assert!(pair.provider_events().is_empty());
    pair.advance(Duration::from_secs(1));
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::FirstProposal
        })]
    );
    assert_eq!(
        support::describe(&pair.provider.poll_transmit().unwrap()),
        json!({"action": "protocolNegotiation", "sequenceId": 0, "status": "rejected",
               "modificationSummary": "timed out: no protocolNegotiation within 10 s of the hellos"})
    );
}

#[test]
fn requester_times_out_waiting_for_an_answer_and_tells_the_peer() {
    let mut pair = Pair::new();
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    pair.flush();
    pair.provider_events();
    pair.advance(Duration::from_secs(60));
    assert_eq!(
        pair.requester_events(),
        vec![Event::Closed(CloseReason::TimedOut {
            waiting_for: Wait::ProtocolNegotiation
        })]
    );
    pair.flush();
    assert_eq!(
        pair.take_wire().last().unwrap().1,
        json!({"action": "protocolNegotiation", "sequenceId": 1, "status": "rejected",
               "modificationSummary": "timed out: no answer within 60 s"})
    );
    assert_eq!(
        pair.provider_events(),
        vec![Event::Closed(CloseReason::NegotiationRejected {
            by: Side::Peer,
            reason: Some("timed out: no answer within 60 s".into())
        })]
    );
}

#[test]
fn a_peer_timeout_status_ends_the_negotiation() {
    assert_eq!(
        requester_answered_with(
            r#"{"action":"protocolNegotiation","sequenceId":1,"status":"timeout"}"#
        ),
        vec![Event::Closed(CloseReason::PeerTimedOut)]
    );
}

#[test]
fn decisions_out_of_turn_are_refused_without_side_effects() {
    let mut pair = Pair::new();
    assert!(matches!(
        pair.requester.decide(pair.now, Decision::Accept),
        Err(concord_proto::SessionError::NotNow { .. })
    ));
    assert!(matches!(
        pair.provider.propose(pair.now, "v1".into()),
        Err(concord_proto::SessionError::WrongRole {
            role: "provider",
            ..
        })
    ));
    pair.requester.propose(pair.now, "v1".into()).unwrap();
    assert!(pair.requester.propose(pair.now, "again".into()).is_err());
    assert!(matches!(
        pair.requester.code_ready(pair.now),
        Err(concord_proto::SessionError::NotNow { .. })
    ));
    assert_eq!(
        pair.requester.poll_transmit().map(|f| f.len() > 1),
        Some(true)
    );
    assert_eq!(pair.requester.poll_transmit(), None);
}
