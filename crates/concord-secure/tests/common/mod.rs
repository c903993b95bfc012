//! Helpers shared by the integration tests: keys, DIDs, two peers driven in memory.
#![allow(dead_code)]

use std::time::Instant;

use concord_secure::{
    prologue, Channel, ChannelConfig, ChannelError, Handshake, HandshakePayload, Role,
    NOISE_PATTERN,
};

pub const A_DID: &str = "did:wba:a.example:user:alice";
pub const B_DID: &str = "did:wba:b.example%3A8443:agents:bob";

pub fn secret(n: u8) -> [u8; 32] {
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = n.wrapping_mul(31).wrapping_add(i as u8);
    }
    key
}

/// The X25519 public key of `secret`, computed apart from snow.
pub fn public(secret: &[u8; 32]) -> [u8; 32] {
    x25519_dalek::x25519(*secret, x25519_dalek::X25519_BASEPOINT_BYTES)
}

pub fn payload(did: &str) -> HandshakePayload {
    HandshakePayload {
        did: Some(did.to_owned()),
    }
}

/// Alice (initiator, `A_DID`, key 1) and Bob (responder, `B_DID`, key 2), OS randomness.
pub fn pair(config: &ChannelConfig) -> (Handshake, Handshake) {
    let p = prologue(Some(A_DID), B_DID);
    let a = Handshake::new(Role::Initiator, &secret(1), &p, &payload(A_DID), config).unwrap();
    let b = Handshake::new(Role::Responder, &secret(2), &p, &payload(B_DID), config).unwrap();
    (a, b)
}

/// The same pair with deterministic ephemeral keys (`seed` fills the RNG's output).
pub fn fixed_pair(config: &ChannelConfig, seed: u8) -> (Handshake, Handshake) {
    let p = prologue(Some(A_DID), B_DID);
    let a = Handshake::with_rng(
        Role::Initiator,
        &secret(1),
        &p,
        &payload(A_DID),
        config,
        move |b| b.fill(seed),
    )
    .unwrap();
    let b = Handshake::with_rng(
        Role::Responder,
        &secret(2),
        &p,
        &payload(B_DID),
        config,
        move |b| b.fill(seed.wrapping_add(1)),
    )
    .unwrap();
    (a, b)
}

/// Runs the three messages, whoever's turn it is.
pub fn run(initiator: &mut Handshake, responder: &mut Handshake) -> Result<(), ChannelError> {
    responder.read_message(&initiator.write_message()?)?;
    initiator.read_message(&responder.write_message()?)?;
    responder.read_message(&initiator.write_message()?)?;
    Ok(())
}

pub fn channels(config: &ChannelConfig) -> (Channel, Channel, Instant) {
    let (mut a, mut b) = pair(config);
    run(&mut a, &mut b).unwrap();
    let now = Instant::now();
    (
        a.into_channel(now).unwrap(),
        b.into_channel(now).unwrap(),
        now,
    )
}

pub fn fixed_channels(config: &ChannelConfig, seed: u8) -> (Channel, Channel, Instant) {
    let (mut a, mut b) = fixed_pair(config, seed);
    run(&mut a, &mut b).unwrap();
    let now = Instant::now();
    (
        a.into_channel(now).unwrap(),
        b.into_channel(now).unwrap(),
        now,
    )
}

/// A raw snow state with the same pattern, for peers that misbehave on purpose.
pub fn raw(role: Role, key: &[u8; 32], prologue: &[u8]) -> snow::HandshakeState {
    let builder = snow::Builder::new(NOISE_PATTERN.parse().unwrap())
        .local_private_key(key)
        .unwrap()
        .prologue(prologue)
        .unwrap();
    match role {
        Role::Initiator => builder.build_initiator().unwrap(),
        Role::Responder => builder.build_responder().unwrap(),
    }
}

pub fn raw_write(state: &mut snow::HandshakeState, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 65535];
    let n = state.write_message(payload, &mut out).unwrap();
    out.truncate(n);
    out
}

pub fn raw_read(state: &mut snow::HandshakeState, message: &[u8]) -> Result<Vec<u8>, snow::Error> {
    let mut out = vec![0u8; 65535];
    let n = state.read_message(message, &mut out)?;
    out.truncate(n);
    Ok(out)
}

/// One chunk as the wire format says: `[u16 BE len][noise message of flags|bytes]`.
pub fn raw_chunk(transport: &mut snow::TransportState, flags: u8, bytes: &[u8]) -> Vec<u8> {
    let mut plain = vec![flags];
    plain.extend_from_slice(bytes);
    let mut out = vec![0u8; 65535];
    let n = transport.write_message(&plain, &mut out).unwrap();
    let mut chunk = (n as u16).to_be_bytes().to_vec();
    chunk.extend_from_slice(&out[..n]);
    chunk
}

/// Our responder (Bob) against a raw snow initiator speaking the documented wire format;
/// returns the raw initiator's transport state and Bob's channel.
pub fn raw_initiator_vs_bob(config: &ChannelConfig) -> (snow::TransportState, Channel, Instant) {
    let p = prologue(Some(A_DID), B_DID);
    let mut raw_a = raw(Role::Initiator, &secret(1), &p);
    let mut bob = Handshake::new(Role::Responder, &secret(2), &p, &payload(B_DID), config).unwrap();
    bob.read_message(&raw_write(&mut raw_a, &[])).unwrap();
    let their = raw_read(&mut raw_a, &bob.write_message().unwrap()).unwrap();
    assert_eq!(their, format!(r#"{{"v":1,"did":"{B_DID}"}}"#).into_bytes());
    bob.read_message(&raw_write(
        &mut raw_a,
        format!(r#"{{"v":1,"did":"{A_DID}"}}"#).as_bytes(),
    ))
    .unwrap();
    let now = Instant::now();
    (
        raw_a.into_transport_mode().unwrap(),
        bob.into_channel(now).unwrap(),
        now,
    )
}
