//! Meta-message decoding: never panics; whatever decodes re-encodes to an equal message,
//! and a negotiating session survives a sequence of such frames.
#![no_main]

use std::time::Instant;

use concord_proto::handshake::{Agreement, ProtocolChoice};
use concord_proto::{
    Capabilities, MetaMessage, NegotiationStatus, Role, Session, SessionConfig,
    META_PROTOCOL_VERSION,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = MetaMessage::decode(data) {
        let sendable = !matches!(
            &message,
            MetaMessage::ProtocolNegotiation(m) if m.status == NegotiationStatus::Timeout
        ) && !matches!(
            &message,
            MetaMessage::TestCasesNegotiation(m) if m.status == NegotiationStatus::Timeout
        ) && !matches!(
            &message,
            MetaMessage::FixErrorNegotiation(m) if m.status == NegotiationStatus::Timeout
        );
        if sendable {
            let encoded = message.encode().expect("a received message re-encodes");
            assert_eq!(MetaMessage::decode(&encoded).expect("re-decodes"), message);
        }
    }
    // Split the input on NUL into several PT 0 frames for a provider mid-negotiation, once
    // with the default limits and once with limits small enough for fuzz inputs to cross.
    let agreement = Agreement {
        version: META_PROTOCOL_VERSION,
        capabilities: Capabilities::all(),
        protocol: ProtocolChoice::Negotiate,
    };
    let mut small = SessionConfig::default();
    small.max_meta_message_size = 256;
    small.max_candidate_size = 64;
    small.max_test_cases_size = 64;
    for config in [SessionConfig::default(), small] {
        provider_survives(data, &agreement, config);
    }
});

fn provider_survives(data: &[u8], agreement: &Agreement, config: SessionConfig) {
    let now = Instant::now();
    let mut session = Session::new(Role::Provider, agreement, config, now);
    for part in data.split(|byte| *byte == 0) {
        let mut frame = Vec::with_capacity(part.len() + 1);
        frame.push(0);
        frame.extend_from_slice(part);
        session.handle_frame(now, frame);
        while let Some(event) = session.poll_event() {
            if let concord_proto::Event::CandidateReceived { .. } = event {
                let _ = session.decide(now, concord_proto::Decision::Accept);
            }
        }
        while session.poll_transmit().is_some() {}
    }
}
