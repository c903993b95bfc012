//! The cost of the encrypted channel: a full Noise XX handshake (both sides, in memory)
//! and seal + open of 100 B, 1 KiB and 64 KiB records beside a plain copy of the same
//! bytes (the floor). Prints throughput and the ratio to the copy at the end.
//!
//! `cargo bench -p concord-secure --bench channel`

use std::hint::black_box;
use std::time::{Duration, Instant};

use concord_secure::{
    prologue, Channel, ChannelConfig, Handshake, HandshakePayload, RecordKind, Role,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const A_DID: &str = "did:wba:a.example:user:alice";
const B_DID: &str = "did:wba:b.example:user:bob";
const SIZES: [usize; 3] = [100, 1024, 64 * 1024];

fn handshake() -> (Channel, Channel) {
    let config = ChannelConfig::default();
    let p = prologue(Some(A_DID), B_DID);
    let pa = HandshakePayload {
        did: Some(A_DID.into()),
    };
    let pb = HandshakePayload {
        did: Some(B_DID.into()),
    };
    let mut a = Handshake::new(Role::Initiator, &[1; 32], &p, &pa, &config).unwrap();
    let mut b = Handshake::new(Role::Responder, &[2; 32], &p, &pb, &config).unwrap();
    b.read_message(&a.write_message().unwrap()).unwrap();
    a.read_message(&b.write_message().unwrap()).unwrap();
    b.read_message(&a.write_message().unwrap()).unwrap();
    let now = Instant::now();
    (a.into_channel(now).unwrap(), b.into_channel(now).unwrap())
}

fn bench_handshake(c: &mut Criterion) {
    c.bench_function("handshake/xx_both_sides", |bench| {
        bench.iter(|| black_box(handshake()))
    });
}

fn bench_records(c: &mut Criterion) {
    let mut group = c.benchmark_group("record");
    let now = Instant::now();
    for size in SIZES {
        let data = vec![0x5au8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("seal_open", size), &data, |bench, data| {
            // Rekeying by count would happen every 65,536 records: part of the cost.
            let (mut a, mut b) = handshake();
            bench.iter(|| {
                let sealed = a.seal(RecordKind::Binary, black_box(data), now).unwrap();
                black_box(b.open(&sealed, now).unwrap())
            });
        });
        group.bench_with_input(BenchmarkId::new("memcpy", size), &data, |bench, data| {
            // The floor: the two copies a plain record path makes (into a message, out of it).
            bench.iter(|| {
                let message = black_box(data).to_vec();
                black_box(black_box(&message).to_vec())
            });
        });
    }
    group.finish();
}

/// Two raw snow transport states (no chunking, no flags): what the cipher alone costs.
fn raw_snow() -> (snow::TransportState, snow::TransportState) {
    let params: snow::params::NoiseParams = concord_secure::NOISE_PATTERN.parse().unwrap();
    let mut i = snow::Builder::new(params.clone())
        .local_private_key(&[1; 32])
        .unwrap()
        .build_initiator()
        .unwrap();
    let mut r = snow::Builder::new(params)
        .local_private_key(&[2; 32])
        .unwrap()
        .build_responder()
        .unwrap();
    let (mut buf, mut payload) = (vec![0u8; 65_535], vec![0u8; 65_535]);
    for _ in 0..3 {
        let (w, rd) = if i.is_my_turn() {
            (&mut i, &mut r)
        } else {
            (&mut r, &mut i)
        };
        let n = w.write_message(&[], &mut buf).unwrap();
        rd.read_message(&buf[..n], &mut payload).unwrap();
    }
    (
        i.into_transport_mode().unwrap(),
        r.into_transport_mode().unwrap(),
    )
}

/// A plain timing loop for the summary table (criterion's numbers are in its report).
fn per_op(mut f: impl FnMut(), budget: Duration) -> Duration {
    for _ in 0..16 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < budget {
        for _ in 0..16 {
            f();
        }
        n += 16;
    }
    start.elapsed() / n
}

fn summary(_: &mut Criterion) {
    let budget = Duration::from_millis(700);
    let hs = per_op(|| drop(black_box(handshake())), budget);
    println!(
        "\nsummary: full XX handshake, both sides in memory: {:.1} µs",
        hs.as_secs_f64() * 1e6
    );
    println!("| record | seal+open | throughput | raw snow write+read | memcpy x2 | throughput | ratio to raw snow | ratio to memcpy |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let now = Instant::now();
    for size in SIZES {
        let data = vec![0x5au8; size];
        let (mut a, mut b) = handshake();
        let sealed = per_op(
            || {
                let m = a.seal(RecordKind::Binary, black_box(&data), now).unwrap();
                black_box(b.open(&m, now).unwrap());
            },
            budget,
        );
        let (mut ri, mut rr) = raw_snow();
        let (mut wire, mut plain) = (vec![0u8; 65_535], vec![0u8; 65_535]);
        let raw = per_op(
            || {
                // The same chunks a record takes, without the flags byte and length prefix.
                for piece in black_box(&data).chunks(concord_secure::MAX_CHUNK_DATA) {
                    let n = ri.write_message(piece, &mut wire).unwrap();
                    black_box(rr.read_message(&wire[..n], &mut plain).unwrap());
                }
            },
            budget,
        );
        let copy = per_op(
            || {
                let m = black_box(&data).to_vec();
                black_box(black_box(&m).to_vec());
            },
            budget,
        );
        let mib = |d: Duration| size as f64 / d.as_secs_f64() / (1024.0 * 1024.0);
        println!(
            "| {size} B | {:.2} µs | {:.0} MiB/s | {:.2} µs | {:.3} µs | {:.0} MiB/s | {:.2}x | {:.1}x |",
            sealed.as_secs_f64() * 1e6,
            mib(sealed),
            raw.as_secs_f64() * 1e6,
            copy.as_secs_f64() * 1e6,
            mib(copy),
            sealed.as_secs_f64() / raw.as_secs_f64(),
            sealed.as_secs_f64() / copy.as_secs_f64()
        );
    }
}

criterion_group!(benches, bench_handshake, bench_records, summary);
criterion_main!(benches);
