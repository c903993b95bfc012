//! The Noise XX handshake between two peers in memory.

mod common;

use std::time::Instant;

use common::*;
use concord_secure::{
    prologue, ChannelConfig, ChannelError, Handshake, HandshakePayload, Role, Stage,
};
use proptest::prelude::*;

#[test]
fn handshake_both_ways_shows_payloads_statics_and_equal_hashes() {
    let config = ChannelConfig::default();
    let (mut a, mut b) = pair(&config);
    assert!(a.is_my_turn() && !b.is_my_turn());
    assert_eq!((a.remote_static(), b.remote_static()), (None, None));

    let m1 = a.write_message().unwrap();
    assert_eq!(m1.len(), 32, "message 1 is the ephemeral key alone");
    b.read_message(&m1).unwrap();
    assert!(b.remote_payload().is_none() && b.remote_static().is_none());
    assert!(!a.is_my_turn() && b.is_my_turn());

    a.read_message(&b.write_message().unwrap()).unwrap();
    assert_eq!(a.remote_static(), Some(public(&secret(2))));
    assert_eq!(a.remote_payload(), Some(&payload(B_DID)));
    assert!(!a.is_finished() && a.handshake_hash().is_none());

    b.read_message(&a.write_message().unwrap()).unwrap();
    assert!(a.is_finished() && b.is_finished());
    assert!(!a.is_my_turn() && !b.is_my_turn());
    assert_eq!(b.remote_static(), Some(public(&secret(1))));
    assert_eq!(b.remote_payload(), Some(&payload(A_DID)));

    let (ha, hb) = (a.handshake_hash().unwrap(), b.handshake_hash().unwrap());
    assert_eq!(ha, hb);
    let now = Instant::now();
    let (ca, cb) = (a.into_channel(now).unwrap(), b.into_channel(now).unwrap());
    assert_eq!(ca.handshake_hash(), ha);
    assert_eq!(cb.handshake_hash(), ha);
    assert_eq!(ca.remote_static(), Some(public(&secret(2))));
    assert_eq!(cb.remote_static(), Some(public(&secret(1))));
}

#[test]
fn anonymous_initiator_is_bound_and_seen_as_such() {
    let config = ChannelConfig::default();
    let p = prologue(None, B_DID);
    let anon = HandshakePayload { did: None };
    let mut a = Handshake::new(Role::Initiator, &secret(1), &p, &anon, &config).unwrap();
    let mut b = Handshake::new(Role::Responder, &secret(2), &p, &payload(B_DID), &config).unwrap();
    run(&mut a, &mut b).unwrap();
    assert_eq!(b.remote_payload(), Some(&anon));
    assert_eq!(b.remote_static(), Some(public(&secret(1))));
}

#[test]
fn the_other_direction_works_too() {
    // Bob initiates to Alice: roles are not tied to keys.
    let config = ChannelConfig::default();
    let p = prologue(Some(B_DID), A_DID);
    let mut b = Handshake::new(Role::Initiator, &secret(2), &p, &payload(B_DID), &config).unwrap();
    let mut a = Handshake::new(Role::Responder, &secret(1), &p, &payload(A_DID), &config).unwrap();
    run(&mut b, &mut a).unwrap();
    assert_eq!(a.remote_static(), Some(public(&secret(2))));
    assert_eq!(b.remote_static(), Some(public(&secret(1))));
    assert_eq!(a.handshake_hash(), b.handshake_hash());
}

#[test]
fn prologue_layout_is_as_documented() {
    let mut want = b"concord-noise-xx/1\n".to_vec();
    want.push(1);
    want.extend_from_slice(&2u64.to_be_bytes());
    want.extend_from_slice(b"ab");
    want.extend_from_slice(&3u64.to_be_bytes());
    want.extend_from_slice(b"cde");
    assert_eq!(prologue(Some("ab"), "cde"), want);
    assert_ne!(prologue(None, "x"), prologue(Some(""), "x"));
    assert_ne!(prologue(Some("a"), "bc"), prologue(Some("ab"), "c"));
}

fn mismatch(pa: Vec<u8>, pb: Vec<u8>) {
    let config = ChannelConfig::default();
    let mut a = Handshake::new(Role::Initiator, &secret(1), &pa, &payload(A_DID), &config).unwrap();
    let mut b = Handshake::new(Role::Responder, &secret(2), &pb, &payload(B_DID), &config).unwrap();
    b.read_message(&a.write_message().unwrap()).unwrap();
    let err = a.read_message(&b.write_message().unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            ChannelError::Noise {
                stage: Stage::Message2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(a.remote_payload().is_none());
    assert!(!a.is_finished() && !a.is_my_turn());
    // Dead: every later call says the same.
    assert_eq!(a.write_message().unwrap_err(), err);
    assert_eq!(a.into_channel(Instant::now()).unwrap_err(), err);
}

#[test]
fn prologue_mismatch_fails_the_handshake() {
    mismatch(
        prologue(Some(A_DID), B_DID),
        prologue(Some(A_DID), "did:wba:mallory.example"),
    );
    mismatch(
        prologue(Some(A_DID), B_DID),
        prologue(Some("did:wba:eve.example"), B_DID),
    );
    mismatch(prologue(None, B_DID), prologue(Some(A_DID), B_DID));
}

#[test]
fn fixed_rng_is_deterministic_and_os_rng_is_not() {
    let config = ChannelConfig::default();
    let hash = |seed| {
        let (mut a, mut b) = fixed_pair(&config, seed);
        run(&mut a, &mut b).unwrap();
        a.handshake_hash().unwrap()
    };
    assert_eq!(hash(7), hash(7));
    assert_ne!(hash(7), hash(8));
    let os = || {
        let (mut a, mut b) = pair(&config);
        run(&mut a, &mut b).unwrap();
        a.handshake_hash().unwrap()
    };
    assert_ne!(os(), os());
}

#[test]
fn out_of_turn_calls_are_typed_errors_and_kill_the_handshake() {
    let config = ChannelConfig::default();
    let (mut a, mut b) = pair(&config);
    let err = b.write_message().unwrap_err();
    assert!(matches!(err, ChannelError::OutOfTurn { .. }), "{err:?}");
    assert_eq!(
        b.read_message(&[0; 32]).unwrap_err(),
        err,
        "dead after an error"
    );

    let m1 = a.write_message().unwrap();
    let err = a.write_message().unwrap_err();
    assert!(matches!(err, ChannelError::OutOfTurn { .. }));
    assert_eq!(a.read_message(&m1).unwrap_err(), err);

    let (mut a, b) = pair(&config);
    let err = a.read_message(&[0; 32]).unwrap_err();
    assert!(matches!(err, ChannelError::OutOfTurn { .. }));
    let (a2, _) = pair(&config);
    assert_eq!(
        a2.into_channel(Instant::now()).unwrap_err(),
        ChannelError::HandshakeIncomplete
    );

    let (mut a, mut b2) = pair(&config);
    run(&mut a, &mut b2).unwrap();
    assert!(matches!(
        a.write_message().unwrap_err(),
        ChannelError::OutOfTurn { .. }
    ));
    assert!(matches!(
        b2.read_message(&[0; 64]).unwrap_err(),
        ChannelError::OutOfTurn { .. }
    ));
    drop(b);
}

#[test]
fn oversized_local_payload_is_refused_at_start() {
    let config = ChannelConfig {
        max_handshake_payload: 64,
        ..ChannelConfig::default()
    };
    let big = HandshakePayload {
        did: Some("d".repeat(100)),
    };
    let err = Handshake::new(Role::Responder, &secret(2), b"p", &big, &config).unwrap_err();
    assert!(
        matches!(
            err,
            ChannelError::PayloadTooLarge {
                size: 116,
                limit: 64
            }
        ),
        "{err:?}"
    );
    // The configuration cannot raise the limit past one Noise message.
    let config = ChannelConfig {
        max_handshake_payload: usize::MAX,
        ..ChannelConfig::default()
    };
    let huge = HandshakePayload {
        did: Some("d".repeat(70_000)),
    };
    let err = Handshake::new(Role::Responder, &secret(2), b"p", &huge, &config).unwrap_err();
    assert!(
        matches!(err, ChannelError::PayloadTooLarge { .. }),
        "{err:?}"
    );
}

#[test]
fn oversized_remote_payload_is_refused_before_decrypting() {
    let config = ChannelConfig::default(); // 4 KiB
    let p = prologue(Some(A_DID), B_DID);
    let mut a = Handshake::new(Role::Initiator, &secret(1), &p, &payload(A_DID), &config).unwrap();
    let mut raw_b = raw(Role::Responder, &secret(2), &p);
    raw_read(&mut raw_b, &a.write_message().unwrap()).unwrap();
    let big = format!(r#"{{"v":1,"did":"{}"}}"#, "x".repeat(5000));
    let err = a
        .read_message(&raw_write(&mut raw_b, big.as_bytes()))
        .unwrap_err();
    assert_eq!(
        err,
        ChannelError::PayloadTooLarge {
            size: big.len(),
            limit: 4096
        }
    );

    // The same on message 3, at the responder.
    let mut raw_a = raw(Role::Initiator, &secret(1), &p);
    let mut b = Handshake::new(Role::Responder, &secret(2), &p, &payload(B_DID), &config).unwrap();
    b.read_message(&raw_write(&mut raw_a, &[])).unwrap();
    raw_read(&mut raw_a, &b.write_message().unwrap()).unwrap();
    let err = b
        .read_message(&raw_write(&mut raw_a, big.as_bytes()))
        .unwrap_err();
    assert_eq!(
        err,
        ChannelError::PayloadTooLarge {
            size: big.len(),
            limit: 4096
        }
    );
}

#[test]
fn message_one_with_a_payload_or_too_long_is_refused() {
    let config = ChannelConfig::default();
    let p = prologue(Some(A_DID), B_DID);
    let mut raw_a = raw(Role::Initiator, &secret(1), &p);
    let mut b = Handshake::new(Role::Responder, &secret(2), &p, &payload(B_DID), &config).unwrap();
    let err = b
        .read_message(&raw_write(&mut raw_a, b"{\"v\":1}"))
        .unwrap_err();
    assert!(matches!(err, ChannelError::Malformed { .. }), "{err:?}");

    let mut b = Handshake::new(Role::Responder, &secret(2), &p, &payload(B_DID), &config).unwrap();
    let err = b.read_message(&vec![0u8; 70_000]).unwrap_err();
    assert_eq!(
        err,
        ChannelError::MessageTooLarge {
            size: 70_000,
            limit: 65_535
        }
    );
}

/// A raw responder sends `json` as its payload in message 2; what does Alice make of it?
fn alice_reads_payload(json: &str) -> Result<Option<HandshakePayload>, ChannelError> {
    let config = ChannelConfig::default();
    let p = prologue(Some(A_DID), B_DID);
    let mut a = Handshake::new(Role::Initiator, &secret(1), &p, &payload(A_DID), &config).unwrap();
    let mut raw_b = raw(Role::Responder, &secret(2), &p);
    raw_read(&mut raw_b, &a.write_message().unwrap()).unwrap();
    a.read_message(&raw_write(&mut raw_b, json.as_bytes()))?;
    Ok(a.remote_payload().cloned())
}

#[test]
fn payload_json_rules() {
    let bob = Some(payload(B_DID));
    assert_eq!(
        alice_reads_payload(&format!(r#"{{"v":1,"did":"{B_DID}"}}"#)).unwrap(),
        bob
    );
    assert_eq!(
        alice_reads_payload(&format!(r#"{{"future":[1,2],"did":"{B_DID}","v":1}}"#)).unwrap(),
        bob,
        "unknown fields are ignored"
    );
    assert_eq!(
        alice_reads_payload(r#"{"v":1}"#).unwrap(),
        Some(HandshakePayload { did: None })
    );
    assert_eq!(
        alice_reads_payload(r#"{"v":1,"did":null}"#).unwrap(),
        Some(HandshakePayload { did: None })
    );
    for bad in [
        r#"{"v":2,"did":"x"}"#,
        r#"{"did":"x"}"#,
        r#"{"v":1,"did":"x","did":"y"}"#,
        r#"{"v":1,"did":7}"#,
        "",
        "[]",
        "{\"v\":1} trailing",
    ] {
        let err = alice_reads_payload(bad).unwrap_err();
        assert!(
            matches!(err, ChannelError::Malformed { .. }),
            "{bad}: {err:?}"
        );
    }
}

#[test]
fn handshake_and_channel_are_send() {
    fn send<T: Send>() {}
    send::<Handshake>();
    send::<concord_secure::Channel>();
    send::<ChannelError>();
}

#[test]
fn tampered_handshake_messages_fail() {
    let config = ChannelConfig::default();
    // Message 2 altered anywhere past the ephemeral key, and message 3 anywhere.
    for at in [32, 40, 80, 100] {
        let (mut a, mut b) = pair(&config);
        b.read_message(&a.write_message().unwrap()).unwrap();
        let mut m2 = b.write_message().unwrap();
        m2[at] ^= 1;
        let err = a.read_message(&m2).unwrap_err();
        assert!(
            matches!(
                err,
                ChannelError::Noise {
                    stage: Stage::Message2,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    for at in [0, 31, 47, 48, 70] {
        let (mut a, mut b) = pair(&config);
        b.read_message(&a.write_message().unwrap()).unwrap();
        a.read_message(&b.write_message().unwrap()).unwrap();
        let mut m3 = a.write_message().unwrap();
        m3[at] ^= 0x80;
        let err = b.read_message(&m3).unwrap_err();
        assert!(
            matches!(
                err,
                ChannelError::Noise {
                    stage: Stage::Message3,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(b.remote_payload().is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn garbage_handshake_messages_never_panic(garbage in proptest::collection::vec(any::<u8>(), 0..300)) {
        let config = ChannelConfig::default();
        // Responder reading message 1.
        let (_, mut b) = pair(&config);
        let r1 = b.read_message(&garbage);
        if garbage.len() != 32 {
            prop_assert!(r1.is_err());
        }
        // Initiator reading message 2.
        let (mut a, _) = pair(&config);
        a.write_message().unwrap();
        prop_assert!(a.read_message(&garbage).is_err());
        // Responder reading message 3 after a real exchange.
        let (mut a, mut b) = pair(&config);
        b.read_message(&a.write_message().unwrap()).unwrap();
        a.read_message(&b.write_message().unwrap()).unwrap();
        prop_assert!(b.read_message(&garbage).is_err());
        prop_assert!(!b.is_finished());
    }
}
