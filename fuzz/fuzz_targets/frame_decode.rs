//! Frame decoding, then a session fed the same bytes as a frame: never panics.
#![no_main]

use std::time::Instant;

use concord_proto::handshake::{Agreement, ProtocolChoice};
use concord_proto::{
    Capabilities, Frame, ProtocolHash, Role, Session, SessionConfig, DEFAULT_MAX_FRAME_SIZE,
    META_PROTOCOL_VERSION,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::decode(data, DEFAULT_MAX_FRAME_SIZE) {
        assert_eq!(
            Frame::encode(frame.protocol_type, frame.data).len(),
            data.len()
        );
    }
    // A ready session (0-RTT) receiving the bytes: every PT path is reachable.
    let agreement = Agreement {
        version: META_PROTOCOL_VERSION,
        capabilities: Capabilities::all(),
        protocol: ProtocolChoice::Resume(ProtocolHash::of_bytes(b"fuzz")),
    };
    let now = Instant::now();
    let mut session = Session::new(Role::Provider, &agreement, SessionConfig::default(), now);
    session.handle_frame(now, data.to_vec());
    while session.poll_event().is_some() {}
    while session.poll_transmit().is_some() {}
});
