//! Property tests: any valid message, hello and frame encodes and decodes to itself; and
//! arbitrary bytes never panic the decoders or a session.

use std::time::Instant;

use concord_proto::handshake::{Agreement, ProtocolChoice};
use concord_proto::{
    Capabilities, CodeGeneration, CodeGenerationStatus, FixErrorNegotiation, Frame, Hello,
    HelloKind, MetaMessage, MetaProtocolHello, MetaVersion, NaturalLanguageKind,
    NaturalLanguageNegotiation, NegotiationStatus, ProtocolHash, ProtocolNegotiation, ProtocolType,
    Role, Session, SessionConfig, TestCasesNegotiation, META_PROTOCOL_VERSION,
};
use proptest::prelude::*;

fn sendable_status() -> impl Strategy<Value = NegotiationStatus> {
    prop_oneof![
        Just(NegotiationStatus::Negotiating),
        Just(NegotiationStatus::Accepted),
        Just(NegotiationStatus::Rejected),
    ]
}

fn text() -> impl Strategy<Value = String> {
    ".{0,40}"
}

fn meta_message() -> impl Strategy<Value = MetaMessage> {
    prop_oneof![
        (
            any::<u64>(),
            text(),
            proptest::option::of(text()),
            sendable_status()
        )
            .prop_map(|(sequence_id, candidate, summary, status)| {
                MetaMessage::ProtocolNegotiation(ProtocolNegotiation {
                    sequence_id,
                    candidate_protocols: Some(candidate),
                    modification_summary: summary,
                    status,
                })
            }),
        prop_oneof![
            Just(CodeGenerationStatus::Generated),
            Just(CodeGenerationStatus::Error)
        ]
        .prop_map(|status| MetaMessage::CodeGeneration(CodeGeneration { status })),
        (text(), proptest::option::of(text()), sendable_status()).prop_map(
            |(cases, summary, status)| {
                MetaMessage::TestCasesNegotiation(TestCasesNegotiation {
                    test_cases: Some(cases),
                    modification_summary: summary,
                    status,
                })
            }
        ),
        (text(), sendable_status()).prop_map(|(description, status)| {
            MetaMessage::FixErrorNegotiation(FixErrorNegotiation {
                error_description: Some(description),
                status,
            })
        }),
        (any::<bool>(), "[A-Za-z0-9]{16}", text()).prop_map(|(request, message_id, message)| {
            MetaMessage::NaturalLanguageNegotiation(NaturalLanguageNegotiation {
                kind: if request {
                    NaturalLanguageKind::Request
                } else {
                    NaturalLanguageKind::Response
                },
                message_id,
                message,
            })
        }),
    ]
}

fn hello() -> impl Strategy<Value = Hello> {
    (
        any::<bool>(),
        any::<u8>(),
        proptest::option::of(text()),
        proptest::collection::vec("[a-z]{1,8}:[a-z0-9/.]{1,20}", 0..3),
        proptest::option::of(any::<[u8; 8]>()),
        proptest::collection::vec((0u16..5, 0u16..5), 0..3),
    )
        .prop_map(
            |(source, capability_bits, selected, candidates, hash_seed, versions)| {
                let capabilities: Capabilities = concord_proto::Capability::ALL
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| capability_bits & (1 << i) != 0)
                    .map(|(_, c)| c)
                    .collect();
                let mut meta = MetaProtocolHello::new(capabilities);
                meta.used_protocol_hash = hash_seed.map(|seed| ProtocolHash::of_bytes(&seed));
                meta.candidate_protocols = candidates;
                meta.selected_protocol = selected.filter(|s| !s.is_empty());
                meta.supported_versions = versions
                    .into_iter()
                    .map(|(major, minor)| MetaVersion { major, minor })
                    .collect();
                let kind = if source {
                    HelloKind::Source
                } else {
                    HelloKind::Destination
                };
                Hello::new(kind, "0123456789abcdef", meta)
            },
        )
}

proptest! {
    #[test]
    fn meta_messages_round_trip(message in meta_message()) {
        let frame = message.to_frame().unwrap();
        let decoded = Frame::decode(&frame, usize::MAX).unwrap();
        prop_assert_eq!(decoded.protocol_type, ProtocolType::Meta);
        prop_assert_eq!(MetaMessage::decode(decoded.data).unwrap(), message.clone());
        // The serde impls agree with the codec.
        let value = serde_json::to_value(&message).unwrap();
        prop_assert_eq!(serde_json::from_value::<MetaMessage>(value).unwrap(), message);
    }

    #[test]
    fn hellos_round_trip(hello in hello()) {
        prop_assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
    }

    #[test]
    fn frames_round_trip(pt in 0u8..4, data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let protocol_type = ProtocolType::from_header(pt << 6);
        let bytes = Frame::encode(protocol_type, &data);
        let frame = Frame::decode(&bytes, usize::MAX).unwrap();
        prop_assert_eq!(frame.protocol_type, protocol_type);
        prop_assert_eq!(frame.data, &data[..]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = MetaMessage::decode(&bytes);
        let _ = Hello::decode(&String::from_utf8_lossy(&bytes));
        let agreement = Agreement {
            version: META_PROTOCOL_VERSION,
            capabilities: Capabilities::all(),
            protocol: ProtocolChoice::Negotiate,
        };
        let mut session = Session::new(Role::Provider, &agreement, SessionConfig::default(), Instant::now());
        session.handle_frame(Instant::now(), bytes.clone());
        while session.poll_event().is_some() {}
    }
}
