//! What the shared state costs a replica, per operation, NATS (a real nats-server on
//! loopback, `CONCORD_NATS_SERVER`) against the SQLite store in the same run: the 0-RTT
//! check (`can_resume`), choosing the protocol to offer (`latest_resumable`), saving a
//! protocol, recording a nonce. Prints p50/p99 and the ratio to SQLite.
//!
//! With `--cluster`, NATS is a 3-node cluster on loopback (`testing::NatsCluster`) and the
//! buckets have three replicas (R3): compare its NATS columns with a run without.
//!
//! `CONCORD_NATS_SERVER=…/nats-server cargo bench -p concord-nats --bench lookup [-- --rounds N] [--cluster]`

use std::time::{Duration, Instant};

use concord_nats::testing::{NatsCluster, NatsServer};
use concord_nats::{Nats, NatsNonceStore, NatsProtocolBook, NatsSettings};
use concord_proto::Role;
use concord_store::{NewProtocol, NonceStore, ProtocolBook, ResumeQuery, Store};

const PEER: &str = "https://shop.example/.well-known/wot";

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn measure(rounds: usize, mut op: impl FnMut(usize)) -> (Duration, Duration) {
    for n in 0..rounds / 10 {
        op(n);
    }
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|n| {
            let started = Instant::now();
            op(rounds + n);
            started.elapsed()
        })
        .collect();
    (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    )
}

/// Fills `book` with `count` protocols for other peers and one for `PEER`.
fn fill(book: &dyn ProtocolBook, count: usize) -> concord_proto::ProtocolHash {
    for n in 0..count {
        book.save_protocol(
            &NewProtocol::negotiated(format!("# filler {n}\n"), format!("peer-{n}"))
                .with_action(format!("action{}", n % 10))
                .with_handler(Role::Requester, "/* r */"),
        )
        .unwrap();
    }
    book.save_protocol(
        &NewProtocol::negotiated("# Requirement\nGet product info\n", PEER)
            .with_action("getProductInfo")
            .with_handler(Role::Requester, "/* r */")
            .with_handler(Role::Provider, "/* p */"),
    )
    .unwrap()
}

/// The NATS servers to measure against (kept running while held), how to reach them and
/// what they are: one server (R1), or with `cluster` three in a cluster (R3).
fn nats_servers(cluster: bool) -> (Box<dyn std::any::Any>, NatsSettings, &'static str) {
    if cluster {
        let cluster = NatsCluster::start();
        let mut settings = NatsSettings::new(cluster.urls());
        settings.replicas = NatsCluster::SIZE;
        (
            Box::new(cluster),
            settings,
            "a 3-node cluster on loopback, R3",
        )
    } else {
        let server = NatsServer::start();
        let settings = NatsSettings::new([server.url()]);
        (Box::new(server), settings, "one server on loopback, R1")
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|arg| arg == "--rounds")
        .and_then(|at| args.get(at + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    if NatsServer::binary().is_none() {
        println!("lookup: set CONCORD_NATS_SERVER to a nats-server binary; nothing measured");
        return;
    }
    let (_servers, settings, where_) = nats_servers(args.iter().any(|arg| arg == "--cluster"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let nats = runtime.block_on(Nats::connect(&settings)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(dir.path()).unwrap();
    let book = runtime
        .block_on(NatsProtocolBook::open(&nats, "bench_protocols"))
        .unwrap();
    let nonces = runtime
        .block_on(NatsNonceStore::open(
            &nats,
            "bench_nonces",
            Duration::from_secs(600),
        ))
        .unwrap();
    let hash = fill(&sqlite, 200);
    assert_eq!(fill(&book, 200), hash);
    let query = ResumeQuery {
        peer: PEER,
        action: "getProductInfo",
        role: Role::Requester,
    };
    let stranger = ResumeQuery {
        peer: "https://new.example/.well-known/wot",
        ..query
    };
    println!("{rounds} rounds each, 201 protocols held; NATS {where_}, SQLite in a temp dir");
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "operation", "SQLite p50", "p99", "NATS p50", "p99", "x p50"
    );
    let row = |name: &str, local: (Duration, Duration), shared: (Duration, Duration)| {
        println!(
            "{name:<44} {:>10.1?} {:>10.1?} {:>10.1?} {:>10.1?} {:>8.1}",
            local.0,
            local.1,
            shared.0,
            shared.1,
            shared.0.as_secs_f64() / local.0.as_secs_f64()
        );
    };
    row(
        "0-RTT check (can_resume)",
        measure(rounds, |_| {
            assert!(sqlite.can_resume(&hash, Role::Provider).unwrap())
        }),
        measure(rounds, |_| {
            assert!(book.can_resume(&hash, Role::Provider).unwrap())
        }),
    );
    row(
        "offer for a known peer (latest_resumable)",
        measure(rounds, |_| {
            assert!(sqlite.latest_resumable(&query).unwrap().is_some())
        }),
        measure(rounds, |_| {
            assert!(book.latest_resumable(&query).unwrap().is_some())
        }),
    );
    row(
        "offer for a new peer, by action",
        measure(rounds, |_| {
            assert!(sqlite.latest_resumable(&stranger).unwrap().is_some())
        }),
        measure(rounds, |_| {
            assert!(book.latest_resumable(&stranger).unwrap().is_some())
        }),
    );
    row(
        "use recorded (touch_protocol)",
        measure(rounds, |_| {
            sqlite.touch_protocol(&hash, PEER).unwrap();
        }),
        measure(rounds, |_| {
            book.touch_protocol(&hash, PEER).unwrap();
        }),
    );
    let now = 1_800_000_000;
    row(
        "nonce recorded (record_nonce)",
        measure(rounds, |n| {
            assert!(sqlite
                .record_nonce("did:wba:bench.example:a", &format!("n{n}"), now, now + 300)
                .unwrap())
        }),
        measure(rounds, |n| {
            assert!(nonces
                .record_nonce("did:wba:bench.example:a", &format!("n{n}"), now, now + 300)
                .unwrap())
        }),
    );
}
