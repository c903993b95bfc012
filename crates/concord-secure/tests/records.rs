//! Sealed records between two peers in memory: sizes, chunking, hostile input, rekeying.

mod common;

use std::time::Duration;

use common::*;
use concord_secure::{ChannelConfig, ChannelError, RecordKind, MAX_CHUNK_DATA};
use proptest::prelude::*;

fn bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// The chunk lengths of a sealed message, as the wire format lays them out.
fn chunk_lengths(message: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < message.len() {
        let len = usize::from(u16::from_be_bytes([message[at], message[at + 1]]));
        out.push(len);
        at += 2 + len;
    }
    assert_eq!(at, message.len());
    out
}

#[test]
fn text_and_binary_of_every_boundary_size_round_trip_both_ways() {
    let config = ChannelConfig::default();
    let (mut a, mut b, now) = channels(&config);
    let sizes = [
        0,
        1,
        100,
        65_517,
        65_518,
        65_519,
        65_520,
        131_036,
        131_037,
        2 * 1024 * 1024,
        config.max_record,
    ];
    for &size in &sizes {
        for kind in [RecordKind::Binary, RecordKind::Text] {
            let data = match kind {
                RecordKind::Binary => bytes(size),
                RecordKind::Text => "é"
                    .repeat(size / 2)
                    .into_bytes()
                    .into_iter()
                    .chain(b"x".repeat(size % 2))
                    .collect(),
            };
            assert_eq!(data.len(), size);
            let sealed = a.seal(kind, &data, now).unwrap();
            let chunks = size.div_ceil(MAX_CHUNK_DATA).max(1);
            let lengths = chunk_lengths(&sealed);
            assert_eq!(lengths.len(), chunks, "size {size}");
            assert_eq!(sealed.len(), size + chunks * (2 + 1 + 16), "size {size}");
            assert!(lengths.iter().all(|&l| l <= 65_535));
            let record = b.open(&sealed, now).unwrap();
            assert_eq!((record.kind, record.data.len()), (kind, size));
            assert!(record.data == data, "size {size}");
            // And back.
            let sealed = b.seal(kind, &data, now).unwrap();
            assert!(a.open(&sealed, now).unwrap().data == data);
        }
    }
    let n = (sizes.len() * 2) as u64;
    assert_eq!((a.records_sent(), a.records_received()), (n, n));
    assert_eq!((b.records_sent(), b.records_received()), (n, n));
    assert_eq!(a.rekeys(), (0, 0));
}

#[test]
fn chunk_boundary_is_65518_data_bytes() {
    let (mut a, _, now) = channels(&ChannelConfig::default());
    assert_eq!(
        chunk_lengths(&a.seal(RecordKind::Binary, &bytes(65_518), now).unwrap()),
        vec![65_535]
    );
    assert_eq!(
        chunk_lengths(&a.seal(RecordKind::Binary, &bytes(65_519), now).unwrap()),
        vec![65_535, 18]
    );
    assert_eq!(
        chunk_lengths(&a.seal(RecordKind::Binary, &bytes(65_520), now).unwrap()),
        vec![65_535, 19]
    );
    assert_eq!(
        chunk_lengths(&a.seal(RecordKind::Text, &[], now).unwrap()),
        vec![17]
    );
}

#[test]
fn over_the_limit_is_record_too_large_on_seal_and_on_open() {
    let config = ChannelConfig::default();
    let (mut a, mut b, now) = channels(&config);
    let limit = config.max_record;
    let err = a
        .seal(RecordKind::Binary, &bytes(limit + 1), now)
        .unwrap_err();
    assert_eq!(
        err,
        ChannelError::RecordTooLarge {
            size: limit + 1,
            limit
        }
    );
    // Refusing to seal touched no key: the channel goes on.
    let sealed = a.seal(RecordKind::Binary, b"still here", now).unwrap();
    assert_eq!(b.open(&sealed, now).unwrap().data, b"still here");

    // A peer with a bigger limit sends more than we accept.
    let small = ChannelConfig {
        max_record: 100_000,
        ..ChannelConfig::default()
    };
    let big = ChannelConfig {
        max_record: 200_000,
        ..ChannelConfig::default()
    };
    let (mut a, _) = fixed_pair(&big, 3);
    let (_, mut b) = fixed_pair(&small, 3);
    run(&mut a, &mut b).unwrap();
    let (mut a, mut b) = (a.into_channel(now).unwrap(), b.into_channel(now).unwrap());
    let sealed = a.seal(RecordKind::Binary, &bytes(100_001), now).unwrap();
    let err = b.open(&sealed, now).unwrap_err();
    assert_eq!(
        err,
        ChannelError::RecordTooLarge {
            size: 100_001,
            limit: 100_000
        }
    );
    assert_eq!(b.records_received(), 0);
    let ok = a.seal(RecordKind::Binary, b"x", now).unwrap();
    assert_eq!(b.open(&ok, now).unwrap_err(), err, "dead after an error");
}

#[test]
fn replayed_reordered_dropped_messages_fail_to_authenticate_then_the_channel_is_dead() {
    let config = ChannelConfig::default();
    // Replay.
    let (mut a, mut b, now) = channels(&config);
    let m1 = a.seal(RecordKind::Binary, b"one", now).unwrap();
    let m2 = a.seal(RecordKind::Binary, b"two", now).unwrap();
    b.open(&m1, now).unwrap();
    assert_eq!(b.open(&m1, now).unwrap_err(), ChannelError::Decrypt);
    assert_eq!(b.open(&m2, now).unwrap_err(), ChannelError::Decrypt, "dead");
    assert_eq!(
        b.seal(RecordKind::Text, b"", now).unwrap_err(),
        ChannelError::Decrypt,
        "dead both ways"
    );
    assert_eq!(b.records_received(), 1);

    // Reorder.
    let (mut a, mut b, now) = channels(&config);
    let m1 = a.seal(RecordKind::Text, b"one", now).unwrap();
    let m2 = a.seal(RecordKind::Text, b"two", now).unwrap();
    assert_eq!(b.open(&m2, now).unwrap_err(), ChannelError::Decrypt);
    assert_eq!(b.open(&m1, now).unwrap_err(), ChannelError::Decrypt);

    // Drop.
    let (mut a, mut b, now) = channels(&config);
    let _m1 = a.seal(RecordKind::Text, b"one", now).unwrap();
    let m2 = a.seal(RecordKind::Text, b"two", now).unwrap();
    assert_eq!(b.open(&m2, now).unwrap_err(), ChannelError::Decrypt);

    // A record from another session (other keys) does not authenticate.
    let (mut a, _, now) = channels(&config);
    let (_, mut b, _) = channels(&config);
    assert_eq!(
        b.open(&a.seal(RecordKind::Text, b"x", now).unwrap(), now)
            .unwrap_err(),
        ChannelError::Decrypt
    );

    // A record echoed back to its sender does not either (each direction has its key).
    let (mut a, _, now) = channels(&config);
    let m = a.seal(RecordKind::Text, b"x", now).unwrap();
    assert_eq!(a.open(&m, now).unwrap_err(), ChannelError::Decrypt);
}

/// A way to cut or extend a sealed message.
type Cut = Box<dyn Fn(&[u8]) -> Vec<u8>>;

fn malformed(err: &ChannelError) -> bool {
    matches!(err, ChannelError::Malformed { .. })
}

#[test]
fn truncated_and_trailing_bytes_are_malformed_then_dead() {
    let config = ChannelConfig::default();
    let data = bytes(70_000); // two chunks
    let cases: Vec<Cut> = vec![
        Box::new(|m| m[..m.len() - 1].to_vec()), // inside the last chunk
        Box::new(|m| m[..65_537].to_vec()),      // after chunk 1 (MORE set)
        Box::new(|m| m[..65_538].to_vec()),      // inside chunk 2's length
        Box::new(|m| m[..1].to_vec()),           // inside chunk 1's length
        Box::new(|_| Vec::new()),                // empty
        Box::new(|m| [m, &[0u8][..]].concat()),  // one trailing byte
        Box::new(|m| [m, &[0u8, 17][..]].concat()), // a trailing chunk header
        Box::new(|m| [m, m].concat()),           // the record twice
    ];
    for (i, case) in cases.iter().enumerate() {
        let (mut a, mut b, now) = channels(&config);
        let sealed = a.seal(RecordKind::Binary, &data, now).unwrap();
        let err = b.open(&case(&sealed), now).unwrap_err();
        assert!(malformed(&err), "case {i}: {err:?}");
        assert_eq!(b.open(&sealed, now).unwrap_err(), err, "case {i}: dead");
    }
    // A chunk length below flags + tag.
    let (_, mut b, now) = channels(&config);
    assert!(malformed(&b.open(&[0, 16, 1, 2], now).unwrap_err()));
}

#[test]
fn two_records_glued_or_split_do_not_open() {
    let config = ChannelConfig::default();
    let (mut a, mut b, now) = channels(&config);
    let m1 = a.seal(RecordKind::Text, b"one", now).unwrap();
    let m2 = a.seal(RecordKind::Text, b"two", now).unwrap();
    let err = b.open(&[m1.clone(), m2].concat(), now).unwrap_err();
    assert!(malformed(&err), "{err:?}");

    let (mut a, mut b, now) = channels(&config);
    let m = a.seal(RecordKind::Binary, &bytes(70_000), now).unwrap();
    let err = b.open(&m[..65_537], now).unwrap_err();
    assert!(malformed(&err), "first chunk alone: {err:?}");
}

/// Chunks written by a raw snow transport (the documented wire format, flags chosen by
/// the test) to our channel.
#[test]
fn hand_made_chunks_follow_the_documented_format() {
    let config = ChannelConfig::default();
    let (mut raw_a, mut bob, now) = raw_initiator_vs_bob(&config);
    // Text, one chunk.
    let m = raw_chunk(&mut raw_a, 0b000, "héllo".as_bytes());
    assert_eq!(
        bob.open(&m, now).unwrap(),
        concord_secure::Record {
            kind: RecordKind::Text,
            data: "héllo".into()
        }
    );
    // Binary in three small chunks (chunks need not be full).
    let m = [
        raw_chunk(&mut raw_a, 0b011, b"ab"),
        raw_chunk(&mut raw_a, 0b011, b""),
        raw_chunk(&mut raw_a, 0b001, b"c"),
    ]
    .concat();
    assert_eq!(bob.open(&m, now).unwrap().data, b"abc");
    // REKEY on the last chunk: Bob rekeys his receiving key; so must we.
    let m = raw_chunk(&mut raw_a, 0b101, b"rekey");
    assert_eq!(bob.open(&m, now).unwrap().data, b"rekey");
    assert_eq!(bob.rekeys(), (0, 1));
    raw_a.rekey_outgoing();
    assert_eq!(
        bob.open(&raw_chunk(&mut raw_a, 0b001, b"after"), now)
            .unwrap()
            .data,
        b"after"
    );

    let bad: Vec<(u8, &[u8], &str)> = vec![
        (0b1000, b"x", "unknown flag"),
        (0b110, b"x", "REKEY with MORE"),
        (0b000, &[0xff, 0xfe], "text not UTF-8"),
    ];
    for (flags, body, what) in bad {
        let (mut raw_a, mut bob, now) = raw_initiator_vs_bob(&config);
        let mut m = raw_chunk(&mut raw_a, flags, body);
        if flags & 0b010 != 0 {
            m.extend(raw_chunk(&mut raw_a, 0, b"y"));
        }
        let err = bob.open(&m, now).unwrap_err();
        assert!(malformed(&err), "{what}: {err:?}");
    }
    // Kind changes between chunks.
    let (mut raw_a, mut bob, now) = raw_initiator_vs_bob(&config);
    let m = [
        raw_chunk(&mut raw_a, 0b011, b"a"),
        raw_chunk(&mut raw_a, 0b000, b"b"),
    ]
    .concat();
    assert!(malformed(&bob.open(&m, now).unwrap_err()));
    // Text split inside a UTF-8 sequence is fine: UTF-8 is checked on the whole record.
    let (mut raw_a, mut bob, now) = raw_initiator_vs_bob(&config);
    let e = "é".as_bytes();
    let m = [
        raw_chunk(&mut raw_a, 0b010, &e[..1]),
        raw_chunk(&mut raw_a, 0b000, &e[1..]),
    ]
    .concat();
    assert_eq!(bob.open(&m, now).unwrap().data, e);
}

#[test]
fn our_rekey_really_changes_the_key() {
    // Bob sends with REKEY after every 2 records; a raw reader that ignores the flag fails.
    let config = ChannelConfig {
        rekey_after_records: 2,
        ..ChannelConfig::default()
    };
    let (mut raw_a, mut bob, now) = raw_initiator_vs_bob(&config);
    let mut plain = vec![0u8; 65_535];
    let m1 = bob.seal(RecordKind::Binary, b"1", now).unwrap();
    let m2 = bob.seal(RecordKind::Binary, b"2", now).unwrap();
    let m3 = bob.seal(RecordKind::Binary, b"3", now).unwrap();
    assert_eq!(bob.rekeys(), (1, 0));
    let n = raw_a.read_message(&m1[2..], &mut plain).unwrap();
    assert_eq!(&plain[..n], &[0b001, b'1']);
    let n = raw_a.read_message(&m2[2..], &mut plain).unwrap();
    assert_eq!(&plain[..n], &[0b101, b'2'], "REKEY on the second record");
    assert!(
        raw_a.read_message(&m3[2..], &mut plain).is_err(),
        "old key no longer opens"
    );
}

#[test]
fn rekey_by_count_both_sides_keep_talking() {
    let config = ChannelConfig {
        rekey_after_records: 3,
        ..ChannelConfig::default()
    };
    let (mut a, mut b, now) = channels(&config);
    for i in 0..10u8 {
        let m = a.seal(RecordKind::Binary, &[i; 70_000], now).unwrap();
        assert_eq!(b.open(&m, now).unwrap().data, vec![i; 70_000]);
        let m = b
            .seal(RecordKind::Text, format!("reply {i}").as_bytes(), now)
            .unwrap();
        assert_eq!(
            a.open(&m, now).unwrap().data,
            format!("reply {i}").into_bytes()
        );
    }
    assert_eq!(a.rekeys(), (3, 3));
    assert_eq!(b.rekeys(), (3, 3));
    // One direction only.
    for _ in 0..3 {
        let m = a.seal(RecordKind::Text, b"", now).unwrap();
        b.open(&m, now).unwrap();
    }
    assert_eq!(a.rekeys(), (4, 3));
    assert_eq!(b.rekeys(), (3, 4));
}

#[test]
fn rekey_by_time_follows_the_senders_clock() {
    let config = ChannelConfig {
        rekey_after: Duration::from_secs(60),
        ..ChannelConfig::default()
    };
    let (mut a, mut b, start) = channels(&config);
    let mut now = start;
    let mut exchange = |now| {
        let m = a.seal(RecordKind::Text, b"ping", now).unwrap();
        // The receiver's clock does not matter: give it a stale one.
        assert_eq!(b.open(&m, start).unwrap().data, b"ping");
        let m = b.seal(RecordKind::Text, b"pong", start).unwrap();
        assert_eq!(a.open(&m, now).unwrap().data, b"pong");
        (a.rekeys(), b.rekeys())
    };
    assert_eq!(exchange(now), ((0, 0), (0, 0)));
    now += Duration::from_secs(59);
    assert_eq!(exchange(now), ((0, 0), (0, 0)));
    now += Duration::from_secs(1);
    assert_eq!(
        exchange(now),
        ((1, 0), (0, 1)),
        "60 s since the channel started"
    );
    now += Duration::from_secs(30);
    assert_eq!(exchange(now), ((1, 0), (0, 1)));
    now += Duration::from_secs(31);
    assert_eq!(exchange(now), ((2, 0), (0, 2)));
    // A clock that goes backwards never rekeys early nor panics.
    assert_eq!(exchange(start), ((2, 0), (0, 2)));
}

#[test]
fn rekeying_can_be_disabled() {
    let config = ChannelConfig {
        rekey_after_records: 0,
        rekey_after: Duration::ZERO,
        ..ChannelConfig::default()
    };
    let (mut a, mut b, now) = channels(&config);
    for _ in 0..100 {
        let m = a
            .seal(RecordKind::Text, b"x", now + Duration::from_secs(86_400))
            .unwrap();
        b.open(&m, now).unwrap();
    }
    assert_eq!(a.rekeys(), (0, 0));
}

#[test]
fn deterministic_channels_seal_identically() {
    let config = ChannelConfig::default();
    let (mut a1, _, now) = fixed_channels(&config, 9);
    let (mut a2, _, _) = fixed_channels(&config, 9);
    assert_eq!(a1.handshake_hash(), a2.handshake_hash());
    assert_eq!(
        a1.seal(RecordKind::Text, b"same", now).unwrap(),
        a2.seal(RecordKind::Text, b"same", now).unwrap()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any single altered byte of a two-chunk record, in a length prefix or a Noise
    /// message, is refused with a typed error, and the channel is dead after it.
    #[test]
    fn a_tampered_byte_anywhere_is_refused(position in 0usize..70_038, flip in 1u8..=255, second in any::<bool>()) {
        let config = ChannelConfig::default();
        let (mut a, mut b, now) = fixed_channels(&config, 5);
        if second {
            // The same on a record that is not the channel's first.
            let m = a.seal(RecordKind::Text, b"first", now).unwrap();
            b.open(&m, now).unwrap();
        }
        let sealed = a.seal(RecordKind::Binary, &bytes(70_000), now).unwrap();
        prop_assert_eq!(sealed.len(), 70_038);
        let mut tampered = sealed.clone();
        tampered[position] ^= flip;
        let err = b.open(&tampered, now).unwrap_err();
        prop_assert!(
            matches!(err, ChannelError::Decrypt | ChannelError::Malformed { .. } | ChannelError::RecordTooLarge { .. }),
            "{:?}", err
        );
        // Past the length prefixes, only authentication can fail.
        if position >= 2 && position != 65_537 && position != 65_538 {
            prop_assert_eq!(&err, &ChannelError::Decrypt);
        }
        prop_assert_eq!(b.open(&sealed, now).unwrap_err(), err);
    }

    #[test]
    fn arbitrary_bytes_never_open(garbage in proptest::collection::vec(any::<u8>(), 0..2_000)) {
        let (_, mut b, now) = fixed_channels(&ChannelConfig::default(), 5);
        prop_assert!(b.open(&garbage, now).is_err());
    }
}
