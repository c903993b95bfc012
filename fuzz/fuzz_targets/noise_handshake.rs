//! Noise XX handshake messages from a stranger: never a panic, only typed errors.
//!
//! The first byte picks the spot: the responder reading an arbitrary message 1, the
//! initiator reading an arbitrary message 2 (after its real message 1), or the responder
//! reading an arbitrary message 3 after a real exchange of messages 1 and 2. Keys and
//! ephemeral randomness are fixed, so the same input always takes the same path.
#![no_main]

use std::time::Instant;

use concord_secure::{prologue, ChannelConfig, Handshake, HandshakePayload, Role};
use libfuzzer_sys::fuzz_target;

const A_DID: &str = "did:wba:a.example:user:alice";
const B_DID: &str = "did:wba:b.example:user:bob";

fn side(role: Role) -> Handshake {
    let config = ChannelConfig::default();
    let p = prologue(Some(A_DID), B_DID);
    let (key, did, seed) = match role {
        Role::Initiator => ([1u8; 32], A_DID, 0x11),
        Role::Responder => ([2u8; 32], B_DID, 0x22),
    };
    let payload = HandshakePayload {
        did: Some(did.into()),
    };
    Handshake::with_rng(role, &key, &p, &payload, &config, move |b| b.fill(seed)).unwrap()
}

fn after(mut handshake: Handshake, message: &[u8]) {
    let result = handshake.read_message(message);
    if result.is_ok() && handshake.is_my_turn() {
        // Whatever got in, the next step must not panic either.
        let _ = handshake.write_message();
    }
    if handshake.is_finished() {
        let _ = handshake.remote_payload();
        let _ = handshake.remote_static();
        let _ = handshake.into_channel(Instant::now());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, message)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => after(side(Role::Responder), message),
        1 => {
            let mut a = side(Role::Initiator);
            a.write_message().unwrap();
            after(a, message);
        }
        _ => {
            let mut a = side(Role::Initiator);
            let mut b = side(Role::Responder);
            b.read_message(&a.write_message().unwrap()).unwrap();
            a.read_message(&b.write_message().unwrap()).unwrap();
            after(b, message);
        }
    }
});
