//! Figures for concord-identity: signing a request, verifying one against a cached
//! document, reading a DID document, and the replay cache's memory per 10,000 nonces.

use std::hint::black_box;
use std::time::Duration;

use concord_identity::{
    read_document, sign_request, Credentials, Did, DidDocumentLimits, Identity, Keys, ReplayCache,
    RequestTarget, TimeWindow,
};
use criterion::{criterion_group, Criterion};

const NOW: i64 = 1_767_225_600;
const TARGET: RequestTarget<'static> = RequestTarget {
    method: "GET",
    target_uri: "https://provider.example:8443/agents/bob/ws",
};

fn identity() -> Identity {
    Identity::new(
        Keys::generate(),
        "client.example",
        Some(8443),
        &["agents", "alice"],
    )
    .unwrap()
}

fn bench_sign(c: &mut Criterion) {
    let id = identity();
    c.bench_function("sign_request (no body)", |b| {
        b.iter(|| {
            sign_request(
                &id,
                black_box(&TARGET),
                b"",
                NOW,
                "0123456789abcdef0123456789abcdef",
            )
        })
    });
    let body = vec![b'x'; 1024];
    c.bench_function("sign_request (1 KiB body)", |b| {
        b.iter(|| {
            sign_request(
                &id,
                black_box(&TARGET),
                &body,
                NOW,
                "0123456789abcdef0123456789abcdef",
            )
        })
    });
}

fn bench_verify(c: &mut Criterion) {
    let id = identity();
    let bytes = serde_json::to_vec(&id.document("2026-01-01T00:00:00Z", &[])).unwrap();
    let doc = read_document(&bytes, id.did(), &DidDocumentLimits::default()).unwrap();
    let h = sign_request(&id, &TARGET, b"", NOW, "0123456789abcdef0123456789abcdef");
    let lookup = |name: &str| match name {
        "Signature-Input" => Some(h.signature_input.as_str()),
        "Signature" => Some(h.signature.as_str()),
        _ => None,
    };
    // A zero TTL lets the same nonce through again while still doing the cache's work.
    let replay = ReplayCache::new(1_000, Duration::ZERO);
    let window = TimeWindow::default();
    c.bench_function("from_headers + verify (cached document)", |b| {
        b.iter(|| {
            let creds = Credentials::from_headers(lookup).unwrap().unwrap();
            creds
                .verify(
                    &doc,
                    &TARGET,
                    "provider.example",
                    lookup,
                    b"",
                    NOW,
                    &window,
                    &replay,
                )
                .unwrap()
        })
    });
}

fn bench_read(c: &mut Criterion) {
    let id = identity();
    let bytes = serde_json::to_vec(&id.document("2026-01-01T00:00:00Z", &[])).unwrap();
    let did: Did = id.did().clone();
    let limits = DidDocumentLimits::default();
    c.bench_function(
        &format!("read_document (e1, {} bytes, proof verified)", bytes.len()),
        |b| b.iter(|| read_document(black_box(&bytes), &did, &limits).unwrap()),
    );
}

/// The replay cache's heap per 10,000 nonces, from one DID each (the worst case: every
/// nonce also counts against a DID of its own) and from 10 DIDs.
fn replay_memory() {
    for dids in [10_000, 10] {
        let mut cache = ReplayCache::default();
        let before = cache.approx_memory_bytes();
        for i in 0..10_000 {
            let did = Did::parse(&format!("did:wba:example.com:agents:a{}", i % dids)).unwrap();
            cache.insert(&did, &format!("{i:032x}"), NOW).unwrap();
        }
        let bytes = cache.approx_memory_bytes() - before;
        println!(
            "replay cache, {dids} DIDs: {} entries, {bytes} bytes (approx heap) = {:.1} bytes/nonce",
            cache.len(),
            bytes as f64 / 10_000.0
        );
    }
}

criterion_group!(benches, bench_sign, bench_verify, bench_read);

fn main() {
    replay_memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
