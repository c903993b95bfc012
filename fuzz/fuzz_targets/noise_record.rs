//! `Channel::open` on arbitrary bytes after a real handshake with fixed keys (and fixed
//! ephemeral randomness, so the seeds, real sealed records, stay valid): never a panic;
//! once an error is returned, the channel keeps returning it.
#![no_main]

use std::time::Instant;

use concord_secure::{prologue, Channel, ChannelConfig, Handshake, HandshakePayload, Role};
use libfuzzer_sys::fuzz_target;

const A_DID: &str = "did:wba:a.example:user:alice";
const B_DID: &str = "did:wba:b.example:user:bob";

fn channels(now: Instant) -> (Channel, Channel) {
    let config = ChannelConfig {
        max_record: 256 * 1024,
        ..ChannelConfig::default()
    };
    let p = prologue(Some(A_DID), B_DID);
    let mut a = Handshake::with_rng(
        Role::Initiator,
        &[1; 32],
        &p,
        &HandshakePayload {
            did: Some(A_DID.into()),
        },
        &config,
        |b| b.fill(0x11),
    )
    .unwrap();
    let mut b = Handshake::with_rng(
        Role::Responder,
        &[2; 32],
        &p,
        &HandshakePayload {
            did: Some(B_DID.into()),
        },
        &config,
        |b| b.fill(0x22),
    )
    .unwrap();
    b.read_message(&a.write_message().unwrap()).unwrap();
    a.read_message(&b.write_message().unwrap()).unwrap();
    b.read_message(&a.write_message().unwrap()).unwrap();
    (a.into_channel(now).unwrap(), b.into_channel(now).unwrap())
}

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let (mut a, mut b) = channels(now);
    match b.open(data, now) {
        Ok(record) => {
            // Only a real record from `a` can open: it must round-trip.
            let again = a.seal(record.kind, &record.data, now).unwrap();
            assert_eq!(again, data);
        }
        Err(error) => assert_eq!(b.open(data, now).unwrap_err(), error),
    }
});
