//! PT 1 frames of an interface session on arbitrary bytes: `wire::decode_frame` never
//! panics; a message that decodes encodes and decodes to itself; and both endpoints take
//! the bytes (split into frames at 0xFF bytes) without panicking, answering only frames
//! that decode again (the provider's behind a byte of headroom, as the node sends them).
#![no_main]

use std::time::Instant;

use concord_interact::stream::{Chunk, StreamLimits};
use concord_interact::wire::{decode_frame, encode_message, Frame};
use concord_interact::{
    ConsumerEndpoint, Interface, Limits, Message, Overflow, ProviderEndpoint, Thing,
};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn interface() -> Interface {
    serde_json::from_value(json!({
        "actions": {
            "echo": {"mode": "reply"},
            "train": {"mode": "progress"},
            "ping": {"mode": "notify"},
            "talk": {"mode": "stream", "stream": {"contentType": "audio/pcm", "initialCredit": 64}},
        },
        "properties": {"level": {"schema": {}, "writable": true, "observable": true}},
        "events": {"alarm": {}},
    }))
    .expect("a valid interface")
}

fn check_frame(bytes: &[u8], limits: &Limits) {
    match decode_frame(bytes, limits) {
        Ok(Frame::Message(message)) => {
            let encoded = encode_message(&message, limits).expect("a decoded message encodes");
            let again = Message::decode(&encoded, limits).expect("an encoded message decodes");
            assert_eq!(again, message);
        }
        Ok(Frame::Chunk(chunk)) => {
            let _ = Chunk::decode(chunk);
        }
        Err(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    check_frame(data, &limits);

    let now = Instant::now();
    let mut thing = Thing::new(
        interface(),
        [("level".to_owned(), json!(0))].into(),
        limits.clone(),
        Overflow::DropOldest,
    )
    .expect("a valid thing");
    let subscriber = thing.new_subscriber();
    let mut provider = ProviderEndpoint::new(
        subscriber,
        interface(),
        limits.clone(),
        StreamLimits::default(),
    );
    provider.set_frame_headroom(1);
    let mut consumer = ConsumerEndpoint::new(interface(), limits.clone(), StreamLimits::default());
    for frame in data.split(|b| *b == 0xFF) {
        provider.handle_frame(now, frame, &mut thing);
        consumer.handle_frame(now, frame);
        let _ = thing.publish("alarm", json!({}), now);
        while let Some(out) = provider.poll_transmit(&mut thing) {
            assert_eq!(
                out.first(),
                Some(&0),
                "the provider's frame lost its headroom"
            );
            assert!(
                decode_frame(&out[1..], &limits).is_ok(),
                "the provider sent a bad frame"
            );
        }
        while provider.poll_event().is_some() {}
        while consumer.poll_event().is_some() {}
        while let Some(out) = consumer.poll_transmit() {
            assert!(
                decode_frame(&out, &limits).is_ok(),
                "the consumer sent a bad frame"
            );
        }
    }
});
