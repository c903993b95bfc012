//! Stream chunk headers on arbitrary bytes: decoding never panics and re-encodes to the
//! same bytes; then the bytes, cut into length-prefixed records, are fed to a `Streams` as
//! chunks and grants: never a panic, every bound holds, and it keeps answering.
#![no_main]

use concord_interact::stream::{Chunk, Side, StreamId, StreamLimits, Streams, Transmit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(chunk) = Chunk::decode(data) {
        assert_eq!(chunk.encode(), data);
    }

    let mut limits = StreamLimits::default();
    limits.max_streams = 4;
    limits.max_chunk_size = 64;
    limits.initial_credit = 128;
    limits.max_receive_buffer = 512;
    limits.max_send_queue = 256;
    let max_receive_buffer = limits.max_receive_buffer;
    let mut streams = Streams::new(Side::Provider, limits);
    // Records: [kind u8][len u8][bytes]; kind even = a chunk, odd = a grant (id, total).
    let mut rest = data;
    while let [kind, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (record, next) = tail.split_at(len);
        rest = next;
        if kind & 1 == 0 {
            let _ = streams.handle_chunk(record);
        } else if let [a, b, c, d, total @ ..] = record {
            let id = StreamId(u32::from_be_bytes([*a, *b, *c, *d]));
            let total = total.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
            let _ = streams.handle_grant(id, total);
        }
        match (kind >> 1) & 3 {
            1 => {
                if let Ok(id) = streams.open(Default::default(), len as u64 * 64) {
                    let _ = streams.send_stream(id).map(|mut s| s.send(record));
                }
            }
            2 => {
                let id = StreamId(u32::from(*kind >> 3) * 2);
                if let Ok(mut recv) = streams.recv_stream(id) {
                    while recv.read().is_some() {}
                    let _ = recv.grant(u64::from(*kind));
                }
            }
            _ => {}
        }
        assert!(streams.len() <= 4);
        while let Some(transmit) = streams.poll_transmit() {
            if let Transmit::Chunk(bytes) = transmit {
                assert!(Chunk::decode(&bytes).is_ok(), "we only send valid chunks");
            }
        }
        while streams.poll_event().is_some() {}
    }
    for id in 0..16 {
        if let Ok(recv) = streams.recv_stream(StreamId(id)) {
            assert!(recv.buffered() <= max_receive_buffer);
        }
    }
});
