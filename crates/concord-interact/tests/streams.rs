//! Two peers exchanging streams by hand: voice frames both ways under credit flow,
//! violations answered per stream, END, RESET, TRUNCATE, realtime drops, and a property:
//! no sequence of grants and sends puts more bytes on the wire than were granted.

use concord_interact::stream::{
    Chunk, Flags, PeerError, ResetBy, ResetCode, SendCredit, SendMode, Sent, Side, StreamError,
    StreamEvent, StreamId, StreamLimits, Streams, Transmit,
};
use proptest::prelude::*;

/// 20 ms of 24 kHz mono PCM16.
const FRAME: usize = 960;

fn limits(initial_credit: u64) -> StreamLimits {
    let mut limits = StreamLimits::default();
    limits.initial_credit = initial_credit;
    limits
}

fn pair(initial_credit: u64) -> (Streams, Streams) {
    (
        Streams::new(Side::Requester, limits(initial_credit)),
        Streams::new(Side::Provider, limits(initial_credit)),
    )
}

/// Moves everything `from` has to send into `to`; returns the peer errors and the chunk
/// payload bytes that crossed.
fn pump(from: &mut Streams, to: &mut Streams) -> (Vec<PeerError>, u64) {
    let mut errors = Vec::new();
    let mut bytes = 0;
    while let Some(transmit) = from.poll_transmit() {
        let result = match transmit {
            Transmit::Chunk(data) => {
                let chunk = Chunk::decode(&data).unwrap();
                if chunk.reset_code().is_none() {
                    bytes += chunk.payload.len() as u64;
                }
                to.handle_chunk(&data)
            }
            Transmit::Grant { id, total } => to.handle_grant(id, total),
        };
        if let Err(error) = result {
            errors.push(error);
        }
    }
    (errors, bytes)
}

fn events(streams: &mut Streams) -> Vec<StreamEvent> {
    std::iter::from_fn(|| streams.poll_event()).collect()
}

fn frame(n: usize) -> Vec<u8> {
    (0..FRAME).map(|i| (n * 7 + i) as u8).collect()
}

/// One side of a voice call: frames waiting to go (reliable sender with its own backlog),
/// bytes received and not yet played (a stream is a byte stream: a read may hold several
/// frames), and frames played.
struct Voice {
    next_frame: usize,
    total_frames: usize,
    received: Vec<u8>,
    played: Vec<Vec<u8>>,
}

impl Voice {
    fn new(total_frames: usize) -> Self {
        Self {
            next_frame: 0,
            total_frames,
            received: Vec::new(),
            played: Vec::new(),
        }
    }

    /// Sends frames until blocked or `burst` frames went.
    fn speak(&mut self, streams: &mut Streams, id: StreamId, burst: usize) {
        let mut stream = streams.send_stream(id).unwrap();
        for _ in 0..burst {
            if self.next_frame == self.total_frames {
                return;
            }
            match stream.send(&frame(self.next_frame)) {
                Ok(Sent::Queued) => self.next_frame += 1,
                Ok(Sent::Dropped) => panic!("a reliable sender never drops"),
                Err(StreamError::Blocked { available, len, .. }) => {
                    assert!(available < len);
                    return;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Plays one frame (20 ms), reading more when it has less than a frame, and grants
    /// the frame's bytes back once played.
    fn play(&mut self, streams: &mut Streams, id: StreamId) {
        let mut stream = streams.recv_stream(id).unwrap();
        if self.received.len() < FRAME {
            if let Some(bytes) = stream.read() {
                self.received.extend_from_slice(&bytes);
            }
        }
        if self.received.len() >= FRAME {
            let rest = self.received.split_off(FRAME);
            self.played
                .push(std::mem::replace(&mut self.received, rest));
            stream.grant(FRAME as u64).unwrap();
        }
    }
}

fn assert_within_grant(sender: &mut Streams, receiver: &mut Streams, id: StreamId) {
    let sent = sender.send_stream(id).unwrap().credit().unwrap().sent();
    let granted = receiver
        .recv_stream(id)
        .unwrap()
        .credit()
        .unwrap()
        .granted();
    assert!(sent <= granted, "sent {sent} > granted {granted}");
}

#[test]
fn pcm16_frames_both_ways_under_credit_flow() {
    // Four frames of credit: the 10-frame burst at the start must wait for grants.
    let (mut a, mut b) = pair(4 * FRAME as u64);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    b.accept(id, SendMode::Reliable, b.limits().initial_credit)
        .unwrap();
    let frames = 150; // 3 s of audio each way
    let (mut a_voice, mut b_voice) = (Voice::new(frames), Voice::new(frames));
    let mut blocked_ticks = 0;
    for tick in 0..400 {
        let burst = if tick == 0 { 10 } else { 1 };
        a_voice.speak(&mut a, id, burst);
        b_voice.speak(&mut b, id, burst);
        let before = (a_voice.next_frame, b_voice.next_frame);
        if tick == 0 {
            assert_eq!(before, (4, 4), "the burst stops at the initial credit");
        }
        assert!(pump(&mut a, &mut b).0.is_empty());
        assert!(pump(&mut b, &mut a).0.is_empty());
        // Bytes sent never pass bytes granted, on either side.
        assert_within_grant(&mut a, &mut b, id);
        assert_within_grant(&mut b, &mut a, id);
        a_voice.play(&mut a, id);
        b_voice.play(&mut b, id);
        for event in events(&mut a).into_iter().chain(events(&mut b)) {
            if matches!(event, StreamEvent::Writable { .. }) {
                blocked_ticks += 1;
            }
        }
        if a_voice.played.len() == frames && b_voice.played.len() == frames {
            break;
        }
    }
    let expected: Vec<Vec<u8>> = (0..frames).map(frame).collect();
    assert_eq!(a_voice.played, expected);
    assert_eq!(b_voice.played, expected);
    assert!(blocked_ticks > 0, "credit flow held the senders back");

    // Both finish: END both ways, then the state is gone on both sides.
    a.send_stream(id).unwrap().finish().unwrap();
    b.send_stream(id).unwrap().finish().unwrap();
    pump(&mut a, &mut b);
    pump(&mut b, &mut a);
    for side in [&mut a, &mut b] {
        let events = events(side);
        assert!(events.contains(&StreamEvent::Finished { id }));
        assert!(events.contains(&StreamEvent::Closed { id }));
        assert!(side.is_empty());
    }
}

#[test]
fn a_sender_past_its_credit_is_refused() {
    let (mut a, mut b) = pair(2 * FRAME as u64);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    let mut send = a.send_stream(id).unwrap();
    assert_eq!(send.send(&frame(0)), Ok(Sent::Queued));
    assert_eq!(send.send(&frame(1)), Ok(Sent::Queued));
    assert_eq!(
        send.send(&frame(2)),
        Err(StreamError::Blocked {
            id,
            len: FRAME as u64,
            available: 0
        })
    );
    pump(&mut a, &mut b);
    // The peer's grant wakes the sender.
    b.recv_stream(id).unwrap().grant(FRAME as u64).unwrap();
    pump(&mut b, &mut a);
    assert!(events(&mut a).contains(&StreamEvent::Writable { id }));
    assert_eq!(a.send_stream(id).unwrap().send(&frame(2)), Ok(Sent::Queued));
    pump(&mut a, &mut b);
    assert_eq!(b.recv_stream(id).unwrap().buffered(), 3 * FRAME as u64);
}

#[test]
fn a_chunk_past_the_credit_resets_that_stream_429_style() {
    let (mut a, mut b) = pair(FRAME as u64);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    let other = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    a.send_stream(id).unwrap().send(&frame(0)).unwrap();
    pump(&mut a, &mut b);
    // A misbehaving peer ignores its credit.
    let rogue = Chunk::data(id, 1, &[0; 10], false).encode();
    assert_eq!(
        b.handle_chunk(&rogue),
        Err(PeerError::ChunkPastCredit {
            id,
            len: 10,
            available: 0
        })
    );
    assert_eq!(
        PeerError::ChunkPastCredit {
            id,
            len: 10,
            available: 0
        }
        .reset_code(),
        Some(ResetCode::CREDIT_EXCEEDED)
    );
    assert!(events(&mut b).contains(&StreamEvent::Reset {
        id,
        code: ResetCode::CREDIT_EXCEEDED,
        by: ResetBy::Violation
    }));
    pump(&mut b, &mut a);
    assert!(events(&mut a).contains(&StreamEvent::Reset {
        id,
        code: ResetCode::CREDIT_EXCEEDED,
        by: ResetBy::Peer
    }));
    assert!(!a.contains(id) && !b.contains(id));

    // The session survives: the other stream still carries data.
    a.send_stream(other).unwrap().send(b"still here").unwrap();
    assert!(pump(&mut a, &mut b).0.is_empty());
    assert_eq!(
        b.recv_stream(other).unwrap().read().as_deref(),
        Some(&b"still here"[..])
    );
}

#[test]
fn data_after_end_is_refused() {
    let (mut a, mut b) = pair(64 * 1024);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    let mut send = a.send_stream(id).unwrap();
    send.send(&frame(0)).unwrap();
    send.finish().unwrap();
    assert_eq!(send.send(&frame(1)), Err(StreamError::SendFinished { id }));
    pump(&mut a, &mut b);
    assert_eq!(
        events(&mut b),
        [
            StreamEvent::Opened { id },
            StreamEvent::Readable { id },
            StreamEvent::Finished { id }
        ]
    );
    // Sequence 2 would be next; the peer said END at 1.
    let late = Chunk::data(id, 2, b"late", false).encode();
    assert_eq!(
        b.handle_chunk(&late),
        Err(PeerError::DataAfterEnd { id, sequence: 2 })
    );
    // Half close: b still reads what came and answers on its own direction.
    let mut recv = b.recv_stream(id).unwrap();
    assert_eq!(recv.read().as_deref(), Some(&frame(0)[..]));
    assert!(recv.is_finished());
    b.send_stream(id).unwrap().send(b"answer").unwrap();
    b.send_stream(id).unwrap().finish().unwrap();
    assert!(pump(&mut b, &mut a).0.is_empty());
    let mut recv = a.recv_stream(id).unwrap();
    assert_eq!(recv.read().as_deref(), Some(&b"answer"[..]));
    assert!(events(&mut a).contains(&StreamEvent::Closed { id }));
    assert!(events(&mut b).contains(&StreamEvent::Closed { id }));
    // Once gone, a chunk for the stream is still data after the peer's END (the stream
    // closed cleanly, so it cannot be a late chunk of a reset one).
    assert_eq!(
        b.handle_chunk(&late),
        Err(PeerError::DataAfterEnd { id, sequence: 2 })
    );
}

#[test]
fn reset_mid_stream_both_ways() {
    let (mut a, mut b) = pair(64 * 1024);
    let id = a
        .open(SendMode::Realtime, a.limits().initial_credit)
        .unwrap();
    for n in 0..3 {
        a.send_stream(id).unwrap().send(&frame(n)).unwrap();
    }
    pump(&mut a, &mut b);
    // Two more frames queued, then the sender aborts: they never leave.
    for n in 3..5 {
        a.send_stream(id).unwrap().send(&frame(n)).unwrap();
    }
    a.send_stream(id).unwrap().reset(ResetCode(4242));
    assert!(a.send_stream(id).is_err());
    let (errors, bytes) = pump(&mut a, &mut b);
    assert!(errors.is_empty());
    assert_eq!(bytes, 0, "queued chunks are discarded by the reset");
    assert!(events(&mut b).contains(&StreamEvent::Reset {
        id,
        code: ResetCode(4242),
        by: ResetBy::Peer
    }));
    assert_eq!(
        b.recv_stream(id).err(),
        Some(StreamError::UnknownStream { id })
    );
    // A chunk already in flight when the reset crossed: dropped with a typed answer.
    let in_flight = Chunk::data(id, 3, &frame(3), false).encode();
    assert_eq!(
        b.handle_chunk(&in_flight),
        Err(PeerError::StreamClosed { id })
    );

    // The receiver cancels (it wants no more): the reset reaches the sender.
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    a.send_stream(id).unwrap().send(&frame(0)).unwrap();
    pump(&mut a, &mut b);
    b.recv_stream(id).unwrap().reset(ResetCode::CANCELLED);
    pump(&mut b, &mut a);
    assert!(events(&mut a).contains(&StreamEvent::Reset {
        id,
        code: ResetCode::CANCELLED,
        by: ResetBy::Peer
    }));
    assert!(a.is_empty() && b.is_empty());
}

#[test]
fn truncate_discards_what_was_not_played() {
    let (mut a, mut b) = pair(64 * 1024);
    let id = a
        .open(SendMode::Realtime, a.limits().initial_credit)
        .unwrap();
    a.send_stream(id).unwrap().send(&frame(0)).unwrap();
    pump(&mut a, &mut b);
    // The listener has played one frame when the speaker is interrupted.
    assert_eq!(
        b.recv_stream(id).unwrap().read().as_deref(),
        Some(&frame(0)[..])
    );
    for n in 1..5 {
        a.send_stream(id).unwrap().send(&frame(n)).unwrap();
    }
    pump(&mut a, &mut b);
    for n in 5..8 {
        a.send_stream(id).unwrap().send(&frame(n)).unwrap();
    }
    let sent_before = a.send_stream(id).unwrap().credit().unwrap().sent();
    let discarded_here = a.send_stream(id).unwrap().truncate().unwrap();
    assert_eq!(discarded_here, 3 * FRAME as u64);
    let sent_after = a.send_stream(id).unwrap().credit().unwrap().sent();
    assert_eq!(sent_before - sent_after, discarded_here, "credit refunded");
    // The answer after the interruption.
    a.send_stream(id).unwrap().send(b"new answer").unwrap();
    let (errors, bytes) = pump(&mut a, &mut b);
    assert!(errors.is_empty(), "no sequence gap: {errors:?}");
    assert_eq!(bytes, b"new answer".len() as u64);
    let events = events(&mut b);
    assert!(events.contains(&StreamEvent::Truncated {
        id,
        discarded: 4 * FRAME as u64
    }));
    let mut recv = b.recv_stream(id).unwrap();
    assert_eq!(recv.read().as_deref(), Some(&b"new answer"[..]));
    assert_eq!(recv.read(), None);
    // The discarded bytes can be granted again.
    recv.grant(5 * FRAME as u64).unwrap();
}

#[test]
fn a_realtime_sender_drops_and_counts() {
    let (mut a, mut b) = pair(2 * FRAME as u64);
    let id = a
        .open(SendMode::Realtime, a.limits().initial_credit)
        .unwrap();
    let outcomes: Vec<Sent> = (0..5)
        .map(|n| a.send_stream(id).unwrap().send(&frame(n)).unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            Sent::Queued,
            Sent::Queued,
            Sent::Dropped,
            Sent::Dropped,
            Sent::Dropped
        ]
    );
    let send = a.send_stream(id).unwrap();
    let credit = send.credit().unwrap();
    assert_eq!(credit.dropped_chunks(), 3);
    assert_eq!(credit.dropped_bytes(), 3 * FRAME as u64);
    pump(&mut a, &mut b);
    let mut recv = b.recv_stream(id).unwrap();
    while let Some(chunk) = recv.read() {
        recv.grant(chunk.len() as u64).unwrap();
    }
    pump(&mut b, &mut a);
    assert!(events(&mut a).contains(&StreamEvent::Writable { id }));
    assert_eq!(a.send_stream(id).unwrap().send(&frame(5)), Ok(Sent::Queued));
}

#[test]
fn sequence_gaps_and_duplicates_are_typed() {
    let (mut a, mut b) = pair(64 * 1024);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    a.send_stream(id).unwrap().send(b"zero").unwrap();
    pump(&mut a, &mut b);
    let duplicate = Chunk::data(id, 0, b"zero", false).encode();
    assert_eq!(
        b.handle_chunk(&duplicate),
        Err(PeerError::Duplicate {
            id,
            expected: 1,
            got: 0
        })
    );
    assert!(b.contains(id), "a duplicate is dropped, the stream lives");
    let gap = Chunk::data(id, 5, b"five", false).encode();
    assert_eq!(
        b.handle_chunk(&gap),
        Err(PeerError::SequenceGap {
            id,
            expected: 1,
            got: 5
        })
    );
    assert!(!b.contains(id), "a gap resets the stream");
    pump(&mut b, &mut a);
    assert!(events(&mut a).contains(&StreamEvent::Reset {
        id,
        code: ResetCode::PROTOCOL,
        by: ResetBy::Peer
    }));
}

#[test]
fn bad_bytes_and_limits_get_typed_answers() {
    let mut small = limits(64 * 1024);
    small.max_streams = 1;
    small.max_chunk_size = 1024;
    let mut b = Streams::new(Side::Provider, small);
    assert!(matches!(
        b.handle_chunk(&[0, 0, 0]),
        Err(PeerError::Header(_))
    ));
    assert!(matches!(
        b.handle_chunk(&[0, 0, 0, 0, 0, 0, 0, 0, 0x80]),
        Err(PeerError::Header(_))
    ));
    // A stream of the provider's own parity the provider never opened.
    let unknown = Chunk::data(StreamId(1), 0, b"x", false).encode();
    assert_eq!(
        b.handle_chunk(&unknown),
        Err(PeerError::UnknownStream { id: StreamId(1) })
    );
    let first = Chunk::data(StreamId(0), 0, b"x", false).encode();
    b.handle_chunk(&first).unwrap();
    // Over the stream limit: refused with a RESET.
    let second = Chunk::data(StreamId(2), 0, b"x", false).encode();
    assert_eq!(
        b.handle_chunk(&second),
        Err(PeerError::TooManyStreams {
            id: StreamId(2),
            limit: 1
        })
    );
    let Some(Transmit::Chunk(reset)) = b.poll_transmit() else {
        panic!("a RESET answers the refused stream");
    };
    let reset = Chunk::decode(&reset).unwrap();
    assert_eq!(reset.header.stream_id, StreamId(2));
    assert_eq!(reset.reset_code(), Some(ResetCode::REFUSED));
    // Too large a chunk resets its stream.
    let big = Chunk::data(StreamId(0), 1, &[0; 1025], false).encode();
    assert_eq!(
        b.handle_chunk(&big),
        Err(PeerError::ChunkTooLarge {
            id: StreamId(0),
            len: 1025,
            limit: 1024
        })
    );
    assert!(b.is_empty());
    // Ours too large, and too many of ours.
    let id = b
        .open(SendMode::Reliable, b.limits().initial_credit)
        .unwrap();
    assert_eq!(
        b.send_stream(id).unwrap().send(&[0; 1025]),
        Err(StreamError::ChunkTooLarge {
            len: 1025,
            limit: 1024
        })
    );
    assert_eq!(
        b.open(SendMode::Reliable, b.limits().initial_credit),
        Err(StreamError::TooManyStreams { limit: 1 })
    );
}

#[test]
fn grants_are_bounded_by_the_receive_buffer() {
    let mut small = limits(1000);
    small.max_receive_buffer = 4000;
    let mut a = Streams::new(Side::Requester, small);
    let mut b = Streams::new(Side::Provider, small);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    b.accept(id, SendMode::Reliable, b.limits().initial_credit)
        .unwrap();
    let mut recv = b.recv_stream(id).unwrap();
    assert_eq!(recv.grant(3000), Ok(4000));
    assert_eq!(
        recv.grant(1),
        Err(StreamError::GrantExceedsBuffer {
            id,
            requested: 1,
            room: 0
        })
    );
    // Two grants before a poll leave as one, carrying the total.
    let mut b2 = Streams::new(Side::Provider, limits(1000));
    b2.accept(id, SendMode::Reliable, b2.limits().initial_credit)
        .unwrap();
    let mut recv = b2.recv_stream(id).unwrap();
    recv.grant(10).unwrap();
    recv.grant(20).unwrap();
    assert_eq!(
        b2.poll_transmit(),
        Some(Transmit::Grant { id, total: 1030 })
    );
    assert_eq!(b2.poll_transmit(), None);
    // A repeated or older total changes nothing.
    a.handle_grant(id, 4000).unwrap();
    a.handle_grant(id, 2000).unwrap();
    assert_eq!(a.send_stream(id).unwrap().available(), 4000);
}

#[test]
fn write_splits_a_byte_pipe_at_the_credit_and_chunk_size() {
    let mut l = limits(10_000);
    l.max_chunk_size = 4096;
    let mut a = Streams::new(Side::Requester, l);
    let mut b = Streams::new(Side::Provider, l);
    let id = a
        .open(SendMode::Realtime, a.limits().initial_credit)
        .unwrap();
    let data: Vec<u8> = (0..12_000u32).map(|i| i as u8).collect();
    let mut offset = 0;
    while offset < data.len() {
        match a.send_stream(id).unwrap().write(&data[offset..]) {
            Ok(n) => offset += n,
            Err(StreamError::Blocked { .. }) => {
                pump(&mut a, &mut b);
                let mut recv = b.recv_stream(id).unwrap();
                let mut got = 0;
                while let Some(chunk) = recv.read() {
                    got += chunk.len() as u64;
                }
                recv.grant(got).unwrap();
                pump(&mut b, &mut a);
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(offset, data.len());
    assert_eq!(
        a.send_stream(id)
            .unwrap()
            .credit()
            .unwrap()
            .dropped_chunks(),
        0,
        "a byte pipe never drops"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Grant(u64),
    Send(usize),
    Write(usize),
    Truncate,
    Pump,
    Read,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..5000).prop_map(Op::Grant),
        (0usize..3000).prop_map(Op::Send),
        (0usize..9000).prop_map(Op::Write),
        Just(Op::Truncate),
        Just(Op::Pump),
        Just(Op::Read),
    ]
}

proptest! {
    /// Whatever the application does, the bytes on the wire never exceed the bytes
    /// granted, and the receiver never sees a chunk past its credit.
    #[test]
    fn sent_bytes_never_exceed_granted_bytes(
        ops in proptest::collection::vec(op(), 1..200),
        realtime in any::<bool>(),
        initial in 0u64..4000,
    ) {
        let mut l = limits(initial);
        l.max_receive_buffer = 16_000;
        l.max_send_queue = 8_000;
        l.max_chunk_size = 4096;
        let mut a = Streams::new(Side::Requester, l);
        let mut b = Streams::new(Side::Provider, l);
        let mode = if realtime { SendMode::Realtime } else { SendMode::Reliable };
        let id = a.open(mode, a.limits().initial_credit).unwrap();
        b.accept(id, SendMode::Reliable, b.limits().initial_credit).unwrap();
        let mut on_wire = 0u64;
        for op in ops {
            match op {
                Op::Grant(n) => {
                    let _ = b.recv_stream(id).unwrap().grant(n);
                }
                Op::Send(n) => {
                    let _ = a.send_stream(id).unwrap().send(&vec![1; n]);
                }
                Op::Write(n) => {
                    let _ = a.send_stream(id).unwrap().write(&vec![2; n]);
                }
                Op::Truncate => {
                    let _ = a.send_stream(id).unwrap().truncate();
                }
                Op::Pump => {
                    let (errors, bytes) = pump(&mut a, &mut b);
                    prop_assert!(errors.is_empty(), "{errors:?}");
                    on_wire += bytes;
                    let (errors, _) = pump(&mut b, &mut a);
                    prop_assert!(errors.is_empty(), "{errors:?}");
                }
                Op::Read => {
                    let _ = b.recv_stream(id).unwrap().read();
                }
            }
            let granted = b.recv_stream(id).unwrap().credit().unwrap().granted();
            let credit = a.send_stream(id).unwrap().credit().unwrap().clone();
            prop_assert!(on_wire <= granted);
            prop_assert!(credit.sent() <= credit.granted());
            prop_assert!(b.recv_stream(id).unwrap().buffered() <= 16_000);
        }
    }

    /// The credit alone: any interleaving of grants and sends keeps sent ≤ granted, and
    /// nothing overflows.
    #[test]
    fn send_credit_never_exceeds_its_grants(
        initial in any::<u64>(),
        steps in proptest::collection::vec((any::<bool>(), any::<u64>()), 0..100),
        realtime in any::<bool>(),
    ) {
        let mode = if realtime { SendMode::Realtime } else { SendMode::Reliable };
        let mut credit = SendCredit::new(initial, mode);
        for (is_grant, n) in steps {
            if is_grant {
                let _ = credit.grant(n);
            } else {
                let _ = credit.try_send(n);
            }
            prop_assert!(credit.sent() <= credit.granted());
            prop_assert_eq!(credit.available(), credit.granted() - credit.sent());
        }
    }
}

#[test]
fn flags_compose() {
    assert!(Flags::END.union(Flags::TRUNCATE).contains(Flags::TRUNCATE));
    assert_eq!(Flags::from_bits(8), Some(Flags::CREDIT));
    assert_eq!(Flags::from_bits(16), None);
}

/// A peer that spends its credit on one-byte chunks (each its own frame) gets its bytes
/// buffered, not a buffer per chunk: what it holds in our memory is what its credit
/// allows, and the bytes read back are its bytes in order.
#[test]
fn tiny_chunks_cost_their_bytes_not_a_buffer_each() {
    let credit = 100_000;
    let (mut a, mut b) = pair(credit);
    let id = a
        .open(SendMode::Reliable, a.limits().initial_credit)
        .unwrap();
    let sent: Vec<u8> = (0..credit).map(|i| (i % 251) as u8).collect();
    for byte in &sent {
        a.send_stream(id).unwrap().send(&[*byte]).unwrap();
    }
    let (errors, bytes) = pump(&mut a, &mut b);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(bytes, credit);
    let mut recv = b.recv_stream(id).unwrap();
    assert_eq!(recv.buffered(), credit);
    let pieces: Vec<_> = std::iter::from_fn(|| recv.read()).collect();
    assert!(
        pieces.len() <= 8,
        "{} pieces for {credit} one-byte chunks",
        pieces.len()
    );
    assert_eq!(pieces.concat(), sent);
}

/// Default limits but a receive buffer of `max_receive_buffer` bytes per stream.
fn buffer(max_receive_buffer: u64) -> StreamLimits {
    let mut limits = StreamLimits::default();
    limits.max_receive_buffer = max_receive_buffer;
    limits
}

// An initial credit one side cannot buffer, between two peers whose receive buffers
// differ: refused where it does not fit, never cut down on one side only.

#[test]
fn an_initial_credit_over_our_receive_buffer_is_refused_at_open() {
    let mut a = Streams::new(Side::Requester, buffer(4000));
    assert_eq!(
        a.open(SendMode::Reliable, 6000),
        Err(StreamError::CreditExceedsBuffer {
            credit: 6000,
            limit: 4000
        })
    );
    assert!(a.is_empty());
    // Within the buffer (its edge included) as before.
    let id = a.open(SendMode::Reliable, 4000).unwrap();
    assert_eq!(a.send_stream(id).unwrap().available(), 4000);
    assert_eq!(id, StreamId(0), "a refused open takes no id");
}

/// The requester holds 8000 bytes, the provider 4000, the document says 6000: the
/// requester opens and sends its 6000 bytes at once, the provider refuses the stream
/// (a RESET) and takes none of them; before, it cut its credit to 4000 and reset the
/// stream mid-way when the requester's 6000 went past it.
#[test]
fn the_side_that_cannot_hold_the_credit_refuses_the_stream_and_buffers_nothing() {
    let mut requester = Streams::new(Side::Requester, buffer(8000));
    let mut provider = Streams::new(Side::Provider, buffer(4000));
    let id = requester.open(SendMode::Reliable, 6000).unwrap();
    assert_eq!(
        requester.send_stream(id).unwrap().send(&[7; 6000]),
        Ok(Sent::Queued)
    );
    assert_eq!(
        provider.accept(id, SendMode::Reliable, 6000),
        Err(StreamError::CreditExceedsBuffer {
            credit: 6000,
            limit: 4000
        })
    );
    let (errors, bytes) = pump(&mut requester, &mut provider);
    assert_eq!(bytes, 6000);
    assert_eq!(errors, vec![PeerError::StreamClosed { id }]);
    assert!(provider.is_empty());
    assert!(matches!(
        provider.recv_stream(id),
        Err(StreamError::UnknownStream { .. })
    ));
    // The refusal reaches the requester as a RESET.
    let (errors, _) = pump(&mut provider, &mut requester);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(requester.is_empty());
    let events: Vec<_> = std::iter::from_fn(|| requester.poll_event()).collect();
    assert!(
        events.contains(&StreamEvent::Reset {
            id,
            code: ResetCode::REFUSED,
            by: ResetBy::Peer
        }),
        "{events:?}"
    );
}

/// A credit both hold works as before: the provider takes all of it.
#[test]
fn a_credit_both_sides_hold_carries_its_bytes() {
    let mut requester = Streams::new(Side::Requester, buffer(8000));
    let mut provider = Streams::new(Side::Provider, buffer(4000));
    let id = requester.open(SendMode::Reliable, 4000).unwrap();
    provider.accept(id, SendMode::Reliable, 4000).unwrap();
    assert_eq!(
        requester.send_stream(id).unwrap().send(&[7; 4000]),
        Ok(Sent::Queued)
    );
    let (errors, bytes) = pump(&mut requester, &mut provider);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(bytes, 4000);
    assert_eq!(
        provider.recv_stream(id).unwrap().read().unwrap().len(),
        4000
    );
}

// The session-wide credit (h2's connection window): what every stream of a session holds
// granted and unread together.

fn session(max_session_buffer: u64, initial_credit: u64) -> StreamLimits {
    let mut limits = limits(initial_credit);
    limits.max_receive_buffer = 2 * initial_credit;
    limits.max_session_buffer = max_session_buffer;
    limits
}

/// The requester's session holds 8000 bytes: two streams of 4000 fill it; a third is
/// refused at open, the provider's own stream (opened by its first chunk) is refused with
/// a RESET, and a grant past the room is refused. Before, each stream was bounded alone.
#[test]
fn the_session_credit_refuses_streams_and_grants_that_do_not_fit() {
    let mut requester = Streams::new(Side::Requester, session(8000, 4000));
    let mut provider = Streams::new(Side::Provider, session(8000, 4000));
    let a = requester.open(SendMode::Reliable, 4000).unwrap();
    let b = requester.open(SendMode::Reliable, 2000).unwrap();
    assert_eq!(requester.session_credit().outstanding(), 6000);
    assert_eq!(
        requester.open(SendMode::Reliable, 4000),
        Err(StreamError::SessionFull {
            credit: 4000,
            room: 2000
        })
    );
    assert_eq!(
        requester.recv_stream(b).unwrap().grant(2001),
        Err(StreamError::SessionFull {
            credit: 2001,
            room: 2000
        })
    );
    assert_eq!(requester.recv_stream(b).unwrap().grant(1000), Ok(3000));
    // A stream of the provider's own, opened by its first chunk, with 4000 of credit.
    provider.accept(a, SendMode::Reliable, 4000).unwrap();
    let c = StreamId(1);
    let chunk = Chunk::data(c, 0, &[1; 10], false).encode();
    assert_eq!(
        requester.handle_chunk(&chunk),
        Err(PeerError::SessionFull {
            id: c,
            credit: 4000,
            room: 1000
        })
    );
    assert_eq!(
        PeerError::SessionFull {
            id: c,
            credit: 4000,
            room: 1000
        }
        .reset_code(),
        Some(ResetCode::REFUSED)
    );
    let frames: Vec<Vec<u8>> = std::iter::from_fn(|| requester.poll_transmit())
        .map(|t| t.into_frame(&[]))
        .collect();
    assert!(frames.iter().any(|frame| {
        let chunk = Chunk::decode(frame).unwrap();
        chunk.header.stream_id == c && chunk.reset_code() == Some(ResetCode::REFUSED)
    }));
    // A stream that goes gives its share back.
    requester
        .send_stream(b)
        .unwrap()
        .reset(ResetCode::CANCELLED);
    assert_eq!(requester.session_credit().outstanding(), 4000);
    assert!(requester.open(SendMode::Reliable, 4000).is_ok());
}

/// Two streams share a session of 80,000 bytes. `a`'s reader reads below a quarter of its
/// window (no refill due); `b`'s reader grants the room that freed; `a`'s next read makes a
/// refill due that the session cannot hold: it waits, and goes out once reads on `b`
/// make room. The session never has more granted and unread than its bound.
#[test]
fn a_refill_waits_for_the_session_credit_and_goes_out_when_reads_make_room() {
    const CHUNK: usize = 5000;
    let mut requester = Streams::new(Side::Requester, session(80_000, 40_000));
    let mut provider = Streams::new(Side::Provider, session(80_000, 40_000));
    let a = requester.open(SendMode::Reliable, 40_000).unwrap();
    let b = requester.open(SendMode::Reliable, 40_000).unwrap();
    provider.accept(a, SendMode::Reliable, 40_000).unwrap();
    provider.accept(b, SendMode::Reliable, 40_000).unwrap();
    for _ in 0..8 {
        provider.send_stream(a).unwrap().send(&[1; CHUNK]).unwrap();
    }
    let (errors, bytes) = pump(&mut provider, &mut requester);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(bytes, 40_000);
    assert_eq!(requester.session_credit().room(), 0);
    assert!(matches!(
        provider.send_stream(a).unwrap().send(&[1; CHUNK]),
        Err(StreamError::Blocked { .. })
    ));

    let read = requester.recv_stream(a).unwrap().read_and_grant().unwrap();
    assert_eq!(read.len(), CHUNK);
    assert_eq!(
        requester.session_credit().room(),
        5000,
        "below a quarter: no refill"
    );
    assert_eq!(requester.recv_stream(b).unwrap().grant(5000), Ok(45_000));
    assert_eq!(requester.session_credit().room(), 0);
    let read = requester.recv_stream(a).unwrap().read_and_grant().unwrap();
    assert_eq!(read.len(), CHUNK);
    // 10,000 due on a, 5,000 of room: the refill waits.
    assert_eq!(requester.session_credit().room(), 5000);
    let _ = pump(&mut requester, &mut provider);
    assert_eq!(provider.send_stream(a).unwrap().available(), 0);

    // b's bytes arrive and one chunk of them is read: room for a's refill.
    for _ in 0..9 {
        provider.send_stream(b).unwrap().send(&[2; CHUNK]).unwrap();
    }
    let (errors, _) = pump(&mut provider, &mut requester);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(requester.session_credit().outstanding(), 75_000);
    let read = requester.recv_stream(b).unwrap().read().unwrap();
    assert_eq!(read.len(), CHUNK);
    assert_eq!(
        requester.session_credit().outstanding(),
        80_000,
        "a took it"
    );
    let _ = pump(&mut requester, &mut provider);
    assert_eq!(provider.send_stream(a).unwrap().available(), 10_000);
    assert_eq!(
        events(&mut provider),
        vec![StreamEvent::Writable { id: a }],
        "the provider's blocked sender on a hears of the credit"
    );
}

// STOP: a reader that wants nothing more tells its peer, which stops sending; and the
// end / stop / reset rules of the whole stream, in every order.

/// Opens a stream of the requester with `credit` both ways, accepted by the provider.
fn opened(credit: u64) -> (Streams, Streams, StreamId) {
    let (mut requester, mut provider) = pair(credit);
    let id = requester.open(SendMode::Reliable, credit).unwrap();
    provider.accept(id, SendMode::Reliable, credit).unwrap();
    (requester, provider, id)
}

/// The provider stops reading: the requester hears it, what it had queued goes (its
/// credit back), its writes are refused, and its END still closes the stream in order;
/// a chunk that crossed the STOP is checked and dropped. Before, a stopped reader had no
/// way to tell its peer, which kept sending to be read and dropped.
#[test]
fn stop_tells_the_peer_which_stops_sending_and_ends_in_order() {
    let (mut requester, mut provider, id) = opened(20_000);
    requester.send_stream(id).unwrap().send(&[1; 5000]).unwrap();
    let _ = pump(&mut requester, &mut provider);
    assert_eq!(events(&mut provider), vec![StreamEvent::Readable { id }]);
    // Crossing the STOP: one chunk sent, one still queued when the STOP arrives.
    requester.send_stream(id).unwrap().send(&[2; 5000]).unwrap();
    let crossing = requester.poll_transmit().unwrap();
    requester.send_stream(id).unwrap().send(&[3; 5000]).unwrap();

    provider
        .recv_stream(id)
        .unwrap()
        .stop(ResetCode(7))
        .unwrap();
    assert_eq!(provider.recv_stream(id).unwrap().buffered(), 0, "discarded");
    let stop = provider.poll_transmit().unwrap().into_frame(&[]);
    let chunk = Chunk::decode(&stop).unwrap();
    assert_eq!(
        (chunk.header.flags, chunk.stop_code()),
        (Flags::STOP, Some(ResetCode(7)))
    );
    // The chunk that crossed the STOP is taken and dropped: no Readable, nothing buffered.
    let Transmit::Chunk(crossing) = crossing else {
        panic!("a data chunk")
    };
    assert_eq!(provider.handle_chunk(&crossing), Ok(()));
    assert_eq!(provider.recv_stream(id).unwrap().buffered(), 0);
    assert!(events(&mut provider).is_empty());

    requester.handle_chunk(&stop).unwrap();
    assert_eq!(
        events(&mut requester),
        vec![StreamEvent::Stopped {
            id,
            code: ResetCode(7)
        }]
    );
    let mut send = requester.send_stream(id).unwrap();
    assert_eq!(send.stopped(), Some(ResetCode(7)));
    assert_eq!(
        send.credit().unwrap().sent(),
        10_000,
        "the queued chunk's credit came back"
    );
    assert_eq!(
        send.write(&[4; 10]),
        Err(StreamError::Stopped {
            id,
            code: ResetCode(7)
        })
    );
    send.finish().unwrap();
    let (errors, bytes) = pump(&mut requester, &mut provider);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(bytes, 0, "nothing but the END crossed after the STOP");
    // The provider ends its half too: the stream closes both sides, no RESET.
    provider.send_stream(id).unwrap().finish().unwrap();
    let _ = pump(&mut provider, &mut requester);
    assert!(events(&mut provider).contains(&StreamEvent::Closed { id }));
    assert!(requester.is_empty() && provider.is_empty());
    assert!(events(&mut requester).contains(&StreamEvent::Closed { id }));
}

/// A peer that does not know STOP (an older build, another implementation: the chunk is
/// lost or refused there) keeps writing to a stopped reader: the stopped side still grants
/// what it dropped, so the peer finishes and the stream closes, and nothing is buffered.
#[test]
fn a_peer_that_never_hears_the_stop_is_still_granted_and_finishes() {
    let (mut requester, mut provider, id) = opened(4096);
    provider
        .recv_stream(id)
        .unwrap()
        .stop(ResetCode(7))
        .unwrap();
    // The STOP is lost on its way.
    assert!(matches!(provider.poll_transmit(), Some(Transmit::Chunk(_))));
    let mut crossed = 0;
    for round in 0..100 {
        let mut send = requester.send_stream(id).unwrap();
        let written = send.write(&[round as u8; 4096]).unwrap();
        assert_eq!(
            written, 4096,
            "round {round}: the writer was granted nothing"
        );
        let (errors, bytes) = pump(&mut requester, &mut provider);
        assert!(errors.is_empty(), "{errors:?}");
        crossed += bytes;
        assert_eq!(provider.recv_stream(id).unwrap().buffered(), 0);
        let (errors, _) = pump(&mut provider, &mut requester);
        assert!(errors.is_empty(), "{errors:?}");
    }
    assert_eq!(crossed, 100 * 4096);
    requester.send_stream(id).unwrap().finish().unwrap();
    let _ = pump(&mut requester, &mut provider);
    provider.send_stream(id).unwrap().finish().unwrap();
    let _ = pump(&mut provider, &mut requester);
    assert!(events(&mut provider).contains(&StreamEvent::Closed { id }));
}

/// What one step does to a stream of the side under test ("we") or its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// We end our half.
    Finish,
    /// Our reader stops.
    Stop,
    /// The peer ends its half (and what it sent crosses).
    PeerEnd,
    /// The peer resets the stream.
    PeerReset,
}

/// Plays `steps` on a stream where `we` are one side, pumping both ways after each; says
/// how the stream ended on our side.
fn play(we: Side, steps: &[Step]) -> Vec<StreamEvent> {
    let (requester, provider, id) = opened(20_000);
    let (mut ours, mut theirs) = match we {
        Side::Requester => (requester, provider),
        Side::Provider => (provider, requester),
    };
    theirs.send_stream(id).unwrap().send(&[9; 100]).unwrap();
    let mut seen = Vec::new();
    for step in steps {
        match step {
            Step::Finish => {
                let _ = ours.send_stream(id).and_then(|mut s| s.finish());
            }
            Step::Stop => {
                let _ = ours
                    .recv_stream(id)
                    .and_then(|mut r| r.stop(ResetCode::CANCELLED));
            }
            Step::PeerEnd => {
                let _ = theirs.send_stream(id).and_then(|mut s| s.finish());
            }
            Step::PeerReset => {
                if let Ok(stream) = theirs.send_stream(id) {
                    stream.reset(ResetCode(42));
                }
            }
        }
        for _ in 0..2 {
            let _ = pump(&mut ours, &mut theirs);
            let _ = pump(&mut theirs, &mut ours);
        }
        seen.extend(events(&mut ours));
    }
    // Whoever still reads takes what is there.
    while let Ok(Some(_)) = ours.recv_stream(id).map(|mut r| r.read()) {}
    while let Ok(Some(_)) = theirs.recv_stream(id).map(|mut r| r.read()) {}
    for _ in 0..2 {
        let _ = pump(&mut ours, &mut theirs);
        let _ = pump(&mut theirs, &mut ours);
    }
    seen.extend(events(&mut ours));
    seen
}

/// How a stream ended, from our events.
fn outcome(events: &[StreamEvent]) -> Option<StreamEvent> {
    events
        .iter()
        .find(|e| matches!(e, StreamEvent::Closed { .. } | StreamEvent::Reset { .. }))
        .cloned()
}

/// Every order of our END, our stop and the peer's END, on both sides, and a peer's RESET
/// at every place: the requester that stopped reading and ended before the peer's END
/// cancels the stream (whichever it did first); every other order closes it cleanly; the
/// provider never cancels; a peer's RESET wins wherever it comes.
#[test]
fn every_order_of_end_stop_and_reset_ends_the_stream_by_one_rule() {
    let id = StreamId(0);
    let orders = [
        [Step::Finish, Step::Stop, Step::PeerEnd],
        [Step::Finish, Step::PeerEnd, Step::Stop],
        [Step::Stop, Step::Finish, Step::PeerEnd],
        [Step::Stop, Step::PeerEnd, Step::Finish],
        [Step::PeerEnd, Step::Finish, Step::Stop],
        [Step::PeerEnd, Step::Stop, Step::Finish],
    ];
    for we in [Side::Requester, Side::Provider] {
        for order in orders {
            let position = |step| order.iter().position(|s| *s == step).unwrap();
            let unwanted = position(Step::Stop) < position(Step::PeerEnd)
                && position(Step::Finish) < position(Step::PeerEnd);
            let expected = if we == Side::Requester && unwanted {
                StreamEvent::Reset {
                    id,
                    code: ResetCode::CANCELLED,
                    by: ResetBy::Unwanted,
                }
            } else {
                StreamEvent::Closed { id }
            };
            let events = play(we, &order);
            assert_eq!(
                outcome(&events),
                Some(expected),
                "{we:?} {order:?}: {events:?}"
            );
            // A peer's RESET at any place before the stream was over.
            for at in 0..=order.len() {
                let mut steps = order.to_vec();
                steps.insert(at, Step::PeerReset);
                let events = play(we, &steps);
                let over_before = outcome(&play(we, &order[..at]));
                let expected = over_before.unwrap_or(StreamEvent::Reset {
                    id,
                    code: ResetCode(42),
                    by: ResetBy::Peer,
                });
                assert_eq!(
                    outcome(&events),
                    Some(expected),
                    "{we:?} {steps:?}: {events:?}"
                );
            }
        }
    }
}

/// Bytes read held (h2's `release_capacity` model, for a driver that hands them to a
/// reader task) stay within the stream's and the session's credit until released: no
/// refill goes out for them, and the session's room does not come back; releasing them
/// applies the refill. The stream closes only once nothing read is held.
#[test]
fn held_reads_count_against_the_credit_until_released() {
    const CHUNK: usize = 5000;
    let mut requester = Streams::new(Side::Requester, session(80_000, 40_000));
    let mut provider = Streams::new(Side::Provider, session(80_000, 40_000));
    let a = requester.open(SendMode::Reliable, 40_000).unwrap();
    provider.accept(a, SendMode::Reliable, 40_000).unwrap();
    for _ in 0..8 {
        provider.send_stream(a).unwrap().send(&[1; CHUNK]).unwrap();
    }
    let (errors, bytes) = pump(&mut provider, &mut requester);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(bytes, 40_000);

    let mut held = 0;
    while let Some(bytes) = requester.recv_stream(a).unwrap().read_held() {
        held += bytes.len() as u64;
    }
    assert_eq!(held, 40_000);
    let recv = requester.recv_stream(a).unwrap();
    assert_eq!((recv.held(), recv.buffered()), (40_000, 0));
    assert_eq!(requester.session_credit().outstanding(), 40_000);
    let _ = pump(&mut requester, &mut provider);
    assert_eq!(
        provider.send_stream(a).unwrap().available(),
        0,
        "nothing held was granted back"
    );

    // Below a quarter of the window: no refill; a quarter: the window back.
    assert_eq!(requester.recv_stream(a).unwrap().release(9_999), 9_999);
    let _ = pump(&mut requester, &mut provider);
    assert_eq!(provider.send_stream(a).unwrap().available(), 0);
    assert_eq!(requester.recv_stream(a).unwrap().release(1), 1);
    let _ = pump(&mut requester, &mut provider);
    assert_eq!(provider.send_stream(a).unwrap().available(), 10_000);
    assert_eq!(requester.session_credit().outstanding(), 40_000);

    // The peer ends; the stream stays until what is held goes (here, with a stop).
    provider.send_stream(a).unwrap().finish().unwrap();
    requester.send_stream(a).unwrap().finish().unwrap();
    let _ = pump(&mut provider, &mut requester);
    let _ = pump(&mut requester, &mut provider);
    assert!(requester.recv_stream(a).is_ok(), "30,000 bytes still held");
    assert_eq!(requester.recv_stream(a).unwrap().release(100_000), 30_000);
    assert!(requester.recv_stream(a).is_err(), "closed once released");
    assert_eq!(requester.session_credit().outstanding(), 0);
}
