//! The directory's registrations in NATS, against a real nats-server started here
//! (`CONCORD_NATS_SERVER`; `.ci/run` runs these with `--ignored`): the `DirectoryStore`
//! conformance suite, and two directory replicas on one log: what one registers the other
//! reads, finds and reports as an event; racing writes on one entry, one wins.

mod common;

use common::runtime;
use std::time::{Duration, Instant};

use concord_directory::{
    keys_of, CapabilityKey, CapabilityKind, DirectoryStore, Entry, EventKind, Expect, Outcome,
    Removal, StoreFailure, Write,
};
use concord_nats::testing::NatsServer;
use concord_nats::{NatsDirectoryStore, DEFAULT_DIRECTORY_STREAM};
use serde_json::json;

/// One directory replica on its own connection.
fn replica(runtime: &tokio::runtime::Runtime, server: &NatsServer) -> NatsDirectoryStore {
    let nats = common::connect(runtime, server.url(), Duration::from_secs(2));
    runtime
        .block_on(NatsDirectoryStore::open(&nats, DEFAULT_DIRECTORY_STREAM))
        .unwrap()
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_directory_store_passes_its_conformance_suite() {
    let server = NatsServer::start();
    let runtime = runtime();
    let store = replica(&runtime, &server);
    concord_directory::conformance::directory_store(&store);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn what_one_directory_replica_registers_another_reads_finds_and_reports() {
    let server = NatsServer::start();
    let runtime = runtime();
    let (a, b) = (replica(&runtime, &server), replica(&runtime, &server));
    let td = json!({"title": "Weather", "actions": {"forecast": {}}});
    let entry = Entry::new("urn:weather", td.clone());
    let keys = keys_of(&td);
    let created = a
        .write(&Write::new(
            &entry,
            &keys,
            Expect::Absent,
            EventKind::Created,
            Some(&td),
            16,
        ))
        .unwrap();
    let Outcome::Done(revision) = created else {
        panic!("not written: {created:?}");
    };
    // B follows A's write: the entry, the capability search, the event.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.entry("urn:weather").unwrap().is_none() {
        assert!(Instant::now() < deadline, "B never saw A's registration");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(b.entry("urn:weather").unwrap().unwrap().revision, revision);
    assert_eq!(
        b.find(
            &[CapabilityKey::new(CapabilityKind::Action, "forecast")],
            0,
            10
        )
        .unwrap(),
        ["urn:weather"]
    );
    let events = b.events_after(0, 10).unwrap();
    assert_eq!(events.latest, revision);
    assert_eq!(events.events.len(), 1);
    assert_eq!(events.events[0].kind, EventKind::Created);
    assert_eq!(events.events[0].thing, "urn:weather");

    // Both update the entry at once from the same revision: one wins, the other is told.
    let updated = Entry::new("urn:weather", json!({"title": "Weather 2"}));
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        [&a, &b]
            .map(|store| {
                let updated = &updated;
                scope.spawn(move || {
                    store
                        .write(&Write::new(
                            updated,
                            &[],
                            Expect::Revision(revision),
                            EventKind::Updated,
                            None,
                            16,
                        ))
                        .unwrap()
                })
            })
            .into_iter()
            .map(|writer| writer.join().unwrap())
            .collect()
    });
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Done(_)))
            .count(),
        1,
        "{outcomes:?}"
    );
    assert!(outcomes.contains(&Outcome::Conflict), "{outcomes:?}");

    // Removed on B: gone on A, with its event.
    let current = b.entry("urn:weather").unwrap().unwrap().revision;
    let removed = b
        .remove(&Removal::new("urn:weather", current, 5, 16))
        .unwrap();
    let Outcome::Done(gone) = removed else {
        panic!("not removed: {removed:?}");
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.entry("urn:weather").unwrap().is_some() {
        assert!(Instant::now() < deadline, "A never saw B's removal");
        std::thread::sleep(Duration::from_millis(10));
    }
    let events = a.events_after(revision, 10).unwrap();
    assert_eq!(events.latest, gone);
    assert_eq!(
        events.events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::Updated, EventKind::Deleted]
    );

    // A replica started now rebuilds the entries from the log (here: none left).
    let c = replica(&runtime, &server);
    assert!(c.entry("urn:weather").unwrap().is_none());
    assert_eq!(c.events_after(0, 10).unwrap().latest, gone);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_directory_replica_that_loses_nats_answers_unavailable_and_recovers_by_itself() {
    let mut server = NatsServer::start();
    let runtime = runtime();
    let store = replica(&runtime, &server);
    let td = json!({"title": "Weather", "actions": {"forecast": {}}});
    let keys = keys_of(&td);
    let first = Entry::new("urn:weather", td.clone());
    let write = |entry: &Entry| {
        store.write(&Write::new(
            entry,
            &keys,
            Expect::Absent,
            EventKind::Created,
            Some(&td),
            16,
        ))
    };
    assert!(matches!(write(&first), Ok(Outcome::Done(_))));

    server.stop();
    // A write cannot be decided without the log: unavailable for now (the directory
    // answers 503 with Retry-After), not a failure of the backend (500).
    let second = Entry::new("urn:rain", td.clone());
    let refused = write(&second);
    assert!(
        matches!(refused, Err(StoreFailure::Unavailable { .. })),
        "{refused:?}"
    );
    // What this replica already holds is still read.
    assert!(store.entry("urn:weather").unwrap().is_some());

    server.resume();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match write(&second) {
            Ok(Outcome::Done(_)) => break,
            Err(StoreFailure::Unavailable { .. }) => {
                assert!(Instant::now() < deadline, "the store never came back");
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(store.entry("urn:rain").unwrap().is_some());
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_td_larger_than_nats_takes_is_a_backend_failure_not_an_outage() {
    let server = NatsServer::start_with_max_payload(Some(4096));
    let runtime = runtime();
    let store = replica(&runtime, &server);
    let td = json!({"title": "Large", "description": "x".repeat(8 * 1024)});
    let entry = Entry::new("urn:large", td.clone());
    let refused = store.write(&Write::new(
        &entry,
        &[],
        Expect::Absent,
        EventKind::Created,
        Some(&td),
        16,
    ));
    match refused {
        Err(StoreFailure::Backend { message, .. }) => {
            assert!(message.contains("max_payload"), "{message}");
        }
        other => panic!("trying again cannot pass: not a 503: {other:?}"),
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn many_writers_on_three_replicas_each_register_with_no_write_given_up() {
    const WRITERS_PER_REPLICA: usize = 8;
    const WRITES_EACH: usize = 6;
    let server = NatsServer::start();
    let runtime = runtime();
    let replicas = [
        replica(&runtime, &server),
        replica(&runtime, &server),
        replica(&runtime, &server),
    ];
    // Every write appends after the log's last message: all of them contend on one
    // expected sequence, and each that loses tries again.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let writers: Vec<_> = replicas
            .iter()
            .enumerate()
            .flat_map(|(r, store)| (0..WRITERS_PER_REPLICA).map(move |w| (r, w, store)))
            .map(|(r, w, store)| {
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for i in 0..WRITES_EACH {
                        let id = format!("urn:writer:{r}:{w}:{i}");
                        let td = json!({"title": id, "actions": {"forecast": {}}});
                        let entry = Entry::new(&id, td.clone());
                        let keys = keys_of(&td);
                        match store.write(&Write::new(
                            &entry,
                            &keys,
                            Expect::Absent,
                            EventKind::Created,
                            Some(&td),
                            16,
                        )) {
                            Ok(Outcome::Done(_)) => {}
                            other => failures.push(format!("{id}: {other:?}")),
                        }
                    }
                    failures
                })
            })
            .collect();
        writers
            .into_iter()
            .flat_map(|writer| writer.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} writes failed: {failures:#?}",
        failures.len()
    );
    let all = 3 * WRITERS_PER_REPLICA * WRITES_EACH;
    let limit = u64::try_from(all + 1).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    for store in &replicas {
        loop {
            let found = store
                .find(
                    &[CapabilityKey::new(CapabilityKind::Action, "forecast")],
                    0,
                    limit,
                )
                .unwrap();
            if found.len() == all {
                break;
            }
            assert!(Instant::now() < deadline, "{} of {all} seen", found.len());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
