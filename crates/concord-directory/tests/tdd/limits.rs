//! Every bound answers its typed refusal (tdd-registrationinfo-expiry-config: servers may
//! set a configurable upper limit to expiry times and refuse incompliant requests).

use std::sync::Arc;

use concord_directory::{
    Directory, DirectoryError, DirectoryLimits, DirectoryStore, ListQuery, MemoryDirectoryStore,
    PutOutcome, Registrant,
};
use serde_json::json;

use crate::support::*;

#[test]
fn a_td_over_max_td_bytes_is_refused_413() {
    let mut limits = DirectoryLimits::default();
    limits.max_td_bytes = 600;
    for under in directories_with(limits) {
        let mut big = td(Some("urn:big"), "Big");
        big["description"] = json!("x".repeat(600));
        let result = under
            .directory
            .put("urn:big", &bytes(&big), &alice(), at(0));
        assert!(
            matches!(result, Err(DirectoryError::TdTooLarge { limit: 600, .. })),
            "{}",
            under.name
        );
        assert_eq!(
            status(
                under
                    .directory
                    .put("urn:big", &bytes(&big), &alice(), at(0))
            ),
            413
        );
        // A patch that makes a TD too large is refused too.
        under
            .directory
            .put(
                "urn:small",
                &bytes(&td(Some("urn:small"), "S")),
                &alice(),
                at(0),
            )
            .unwrap();
        let grow = json!({"description": "y".repeat(400)});
        assert_eq!(
            status(
                under
                    .directory
                    .patch("urn:small", &bytes(&grow), &alice(), at(1))
            ),
            413,
            "{}",
            under.name
        );
    }
}

#[test]
fn registrations_beyond_max_entries_are_refused_503_until_expired_ones_are_purged() {
    let mut limits = DirectoryLimits::default();
    limits.max_entries = 2;
    for under in directories_with(limits) {
        let d = &under.directory;
        let mut short = td(Some("urn:short"), "Short");
        short["registration"] = json!({"ttl": 10});
        d.put(
            "urn:short",
            &bytes(&short),
            &Registrant::client("127.0.0.2"),
            at(0),
        )
        .unwrap();
        d.put(
            "urn:b",
            &bytes(&td(Some("urn:b"), "B")),
            &Registrant::client("127.0.0.3"),
            at(0),
        )
        .unwrap();
        let full = d.put("urn:c", &bytes(&td(Some("urn:c"), "C")), &alice(), at(1));
        assert!(
            matches!(full, Err(DirectoryError::DirectoryFull { limit: 2 })),
            "{}",
            under.name
        );
        // Replacing a held TD is not a new registration.
        d.put(
            "urn:b",
            &bytes(&td(Some("urn:b"), "B2")),
            &Registrant::client("127.0.0.3"),
            at(1),
        )
        .unwrap();
        // Once `urn:short` has expired, a new registration purges it and fits.
        d.put("urn:c", &bytes(&td(Some("urn:c"), "C")), &alice(), at(11))
            .expect("the expired TD makes room");
        assert_eq!(status(d.get("urn:short", at(11))), 404);
    }
}

#[test]
fn a_registrant_beyond_its_quota_is_refused_429_by_did_or_client_address() {
    let mut limits = DirectoryLimits::default();
    limits.max_entries_per_registrant = 2;
    for under in directories_with(limits) {
        let d = &under.directory;
        let attacker = Registrant::client("127.0.0.2");
        for n in 0..2 {
            let id = format!("urn:flood{n}");
            d.put(&id, &bytes(&td(Some(&id), "F")), &attacker, at(0))
                .unwrap();
        }
        let refused = d.put(
            "urn:flood2",
            &bytes(&td(Some("urn:flood2"), "F")),
            &attacker,
            at(0),
        );
        assert!(
            matches!(refused, Err(DirectoryError::QuotaExceeded { limit: 2, .. })),
            "{}",
            under.name
        );
        assert_eq!(
            status(d.create(&bytes(&td(None, "F")), [3; 16], &attacker, at(0))),
            429
        );
        // Others are still served.
        d.put(
            "urn:legit",
            &bytes(&td(Some("urn:legit"), "L")),
            &alice(),
            at(0),
        )
        .expect("another client is served");
        let did = Registrant::did("did:wba:agents.example:bob", "127.0.0.4");
        d.put("urn:bob", &bytes(&td(Some("urn:bob"), "B")), &did, at(0))
            .expect("a DID from another address has its own quota");
    }
}

#[test]
fn signed_writes_count_against_their_did_and_their_address_429() {
    let mut limits = DirectoryLimits::default();
    limits.max_entries_per_registrant = 2;
    for under in directories_with(limits) {
        let d = &under.directory;
        // One address minting a new DID for every TD: its address's quota still applies.
        let dids: Vec<String> = (0..4)
            .map(|n| format!("did:wba:agents.example:minted{n}"))
            .collect();
        for (n, did) in dids.iter().take(2).enumerate() {
            let id = format!("urn:minted{n}");
            let who = Registrant::did(did, "127.0.0.2");
            d.put(&id, &bytes(&td(Some(&id), "M")), &who, at(0))
                .expect("within the address's quota");
        }
        for did in &dids[2..] {
            let who = Registrant::did(did, "127.0.0.2");
            let refused = d.put(
                "urn:minted-more",
                &bytes(&td(Some("urn:minted-more"), "M")),
                &who,
                at(0),
            );
            assert!(
                matches!(refused, Err(DirectoryError::QuotaExceeded { limit: 2, .. })),
                "{}: {refused:?}",
                under.name
            );
        }
        assert_eq!(
            status(d.create(
                &bytes(&td(None, "M")),
                [5; 16],
                &Registrant::client("127.0.0.2"),
                at(0)
            )),
            429,
            "{}: nor unsigned from that address",
            under.name
        );
        // One DID from many addresses: its DID's quota applies.
        let roaming = "did:wba:agents.example:roaming";
        for (n, client) in ["127.0.0.3", "127.0.0.4"].into_iter().enumerate() {
            let id = format!("urn:roaming{n}");
            d.put(
                &id,
                &bytes(&td(Some(&id), "R")),
                &Registrant::did(roaming, client),
                at(0),
            )
            .expect("within the DID's quota");
        }
        assert_eq!(
            status(d.put(
                "urn:roaming2",
                &bytes(&td(Some("urn:roaming2"), "R")),
                &Registrant::did(roaming, "127.0.0.5"),
                at(0)
            )),
            429,
            "{}",
            under.name
        );
        d.put(
            "urn:legit",
            &bytes(&td(Some("urn:legit"), "L")),
            &alice(),
            at(0),
        )
        .expect("others are still served");
    }
}

#[test]
fn a_td_registered_without_a_did_is_changed_only_from_its_address_403() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:alice",
            &bytes(&td(Some("urn:alice"), "Alice")),
            &alice(),
            at(0),
        )
        .unwrap();
        let id = d
            .create(&bytes(&td(None, "Anon")), [9; 16], &alice(), at(0))
            .unwrap();
        let stranger = Registrant::client("127.0.0.2");
        let signed = Registrant::did("did:wba:agents.example:mallory", "127.0.0.3");
        for who in [&stranger, &signed] {
            assert_eq!(
                status(d.put(
                    "urn:alice",
                    &bytes(&td(Some("urn:alice"), "Mine")),
                    who,
                    at(1)
                )),
                403,
                "{}",
                under.name
            );
            assert_eq!(
                status(d.patch("urn:alice", br#"{"title":"Mine"}"#, who, at(1))),
                403
            );
            assert_eq!(
                status(d.patch(&id, br#"{"title":"Mine"}"#, who, at(1))),
                403
            );
            assert_eq!(status(d.delete("urn:alice", who, at(1))), 403);
            assert_eq!(status(d.delete(&id, who, at(1))), 403);
        }
        assert_eq!(d.get("urn:alice", at(2)).unwrap()["title"], "Alice");
        assert_eq!(d.get(&id, at(2)).unwrap()["title"], "Anon");
        // Its registrant's address may.
        d.patch("urn:alice", br#"{"title":"Alice 2"}"#, &alice(), at(2))
            .expect("the registrant's address patches it");
        d.delete(&id, &alice(), at(2))
            .expect("the registrant's address deletes it");
    }
}

#[test]
fn a_proved_did_never_writes_a_td_naming_another_did_403() {
    const BOB: &str = "did:wba:agents.example:bob";
    for under in directories() {
        let d = &under.directory;
        let mallory = Registrant::did("did:wba:agents.example:mallory", "127.0.0.2");
        let refused = d.put(BOB, &bytes(&td(Some(BOB), "Bob")), &mallory, at(0));
        assert!(
            matches!(refused, Err(DirectoryError::NotNamedWriter { ref named, field: "id", .. }) if named == BOB),
            "{}: {refused:?}",
            under.name
        );
        let named = naming(Some("urn:bob"), BOB);
        assert_eq!(
            status(d.put("urn:bob", &bytes(&named), &mallory, at(0))),
            403
        );
        assert_eq!(
            status(d.create(&bytes(&naming(None, BOB)), [7; 16], &mallory, at(0))),
            403
        );
        assert_eq!(status(d.get(BOB, at(1))), 404, "{}", under.name);
    }
}

#[test]
fn the_did_a_squatted_td_names_takes_it_over() {
    const BOB: &str = "did:wba:agents.example:bob";
    for under in directories() {
        let d = &under.directory;
        let squatter = Registrant::client("127.0.0.2");
        let bob = Registrant::did(BOB, "127.0.0.1");
        // An anonymous writer registers Bob's DID as id, and a TD naming Bob.
        d.put(BOB, &bytes(&td(Some(BOB), "Squatted")), &squatter, at(0))
            .unwrap();
        d.put(
            "urn:bob",
            &bytes(&naming(Some("urn:bob"), BOB)),
            &squatter,
            at(0),
        )
        .unwrap();
        // Bob's signed writes take them over.
        assert_eq!(
            d.put(BOB, &bytes(&td(Some(BOB), "Bob")), &bob, at(1))
                .map_err(|e| e.to_string()),
            Ok(PutOutcome::Replaced),
            "{}",
            under.name
        );
        d.patch("urn:bob", br#"{"title":"Bob's"}"#, &bob, at(1))
            .expect("Bob patches the TD naming him");
        // The squatter lost them.
        assert_eq!(
            status(d.put(BOB, &bytes(&td(Some(BOB), "Again")), &squatter, at(2))),
            403,
            "{}",
            under.name
        );
        assert_eq!(
            status(d.patch("urn:bob", br#"{"title":"x"}"#, &squatter, at(2))),
            403
        );
        assert_eq!(status(d.delete(BOB, &squatter, at(2))), 403);
        assert_eq!(d.get(BOB, at(3)).unwrap()["title"], "Bob");
        assert_eq!(d.get("urn:bob", at(3)).unwrap()["title"], "Bob's");
        d.delete(BOB, &bob, at(3)).expect("Bob deletes it");
    }
}

#[test]
fn a_td_registered_by_a_did_is_changed_only_by_that_did_403() {
    for under in directories() {
        let d = &under.directory;
        let bob = Registrant::did("did:wba:agents.example:bob", "127.0.0.1");
        let mallory = Registrant::did("did:wba:agents.example:mallory", "127.0.0.2");
        d.put("urn:bob", &bytes(&td(Some("urn:bob"), "Bob")), &bob, at(0))
            .unwrap();
        assert_eq!(
            status(d.put(
                "urn:bob",
                &bytes(&td(Some("urn:bob"), "Mine")),
                &mallory,
                at(1)
            )),
            403,
            "{}",
            under.name
        );
        assert_eq!(
            status(d.patch("urn:bob", b"{}", &Registrant::client("127.0.0.3"), at(1))),
            403
        );
        assert_eq!(status(d.delete("urn:bob", &mallory, at(1))), 403);
        assert_eq!(d.get("urn:bob", at(2)).unwrap()["title"], "Bob");
        d.delete("urn:bob", &bob, at(2))
            .expect("the owner may delete it");
    }
}

#[test]
fn a_ttl_or_expires_outside_the_limits_is_refused_400() {
    for under in directories() {
        let d = &under.directory;
        for registration in [
            json!({"ttl": 1}),
            json!({"ttl": 400 * 86_400}),
            json!({"ttl": -5}),
            json!({"ttl": "60"}),
            json!({"expires": "2026-12-03T14:00:00Z"}),
            json!({"expires": "2026-12-03T16:00:00"}),
            json!("soon"),
        ] {
            let mut lamp = td(Some("urn:lamp"), "Lamp");
            lamp["registration"] = registration.clone();
            let result = d.put("urn:lamp", &bytes(&lamp), &alice(), at(0));
            assert!(
                matches!(result, Err(DirectoryError::InvalidRegistration { .. })),
                "{}: {registration}: {result:?}",
                under.name
            );
        }
        // With no ttl and no expires, the default TTL applies.
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        assert_eq!(
            d.get("urn:lamp", at(1)).unwrap()["registration"]["ttl"],
            86_400,
            "{}",
            under.name
        );
    }
}

#[test]
fn limits_that_cannot_work_are_refused() {
    let mut limits = DirectoryLimits::default();
    limits.max_entries = 0;
    assert_eq!(limits.validate().unwrap_err().name, "max_entries");
    let mut limits = DirectoryLimits::default();
    limits.min_ttl = limits.max_ttl * 2;
    assert_eq!(limits.validate().unwrap_err().name, "min_ttl");
    assert!(DirectoryLimits::default().validate().is_ok());
}

#[test]
fn every_refusal_has_a_problem_type_title_and_detail() {
    let error = DirectoryError::TdTooLarge { size: 9, limit: 8 };
    assert_eq!(
        error.problem_type(),
        "https://concord.dev/problems/directory/td-too-large"
    );
    assert_eq!(error.title(), "Thing Description too large");
    assert_eq!(error.detail(), "the TD is 9 bytes; the limit is 8");
}

#[test]
fn an_expired_td_taken_over_by_put_counts_against_the_new_registrants_quota() {
    let mut limits = DirectoryLimits::default();
    limits.max_entries_per_registrant = 1;
    for under in directories_with(limits) {
        let d = &under.directory;
        let mut victim = td(Some("urn:victim"), "Victim");
        victim["registration"] = json!({"ttl": 10});
        d.put("urn:victim", &bytes(&victim), &alice(), at(0))
            .unwrap();
        let attacker = Registrant::client("127.0.0.2");
        d.put(
            "urn:mine",
            &bytes(&td(Some("urn:mine"), "Mine")),
            &attacker,
            at(0),
        )
        .unwrap();
        // The victim's TD expired; the attacker, at its quota, may not take its id over.
        let taken = d.put(
            "urn:victim",
            &bytes(&td(Some("urn:victim"), "Taken")),
            &attacker,
            at(20),
        );
        assert!(
            matches!(taken, Err(DirectoryError::QuotaExceeded { .. })),
            "{}: {taken:?}",
            under.name
        );
        // A registrant within its quota registers it anew: 201, a fresh creation time.
        let outcome = d
            .put(
                "urn:victim",
                &bytes(&td(Some("urn:victim"), "Again")),
                &alice(),
                at(21),
            )
            .unwrap();
        assert_eq!(outcome.status(), 201, "{}", under.name);
        let got = d.get("urn:victim", at(22)).unwrap();
        assert_eq!(
            concord_directory::parse_rfc3339(got["registration"]["created"].as_str().unwrap()),
            Some(concord_directory::unix_millis(at(21)))
        );
        let kinds: Vec<&str> = d
            .events_since(0, 10)
            .unwrap()
            .iter()
            .map(|e| e.kind.name())
            .collect();
        assert_eq!(
            kinds,
            [
                "thing_created",
                "thing_created",
                "thing_deleted",
                "thing_created"
            ],
            "{}: the expired TD is deleted, then created anew",
            under.name
        );
    }
}

/// Registrations racing from threads, each through its own handle on one store (for
/// SQLite: its own connection to the file, as another process would have): with room for
/// one, exactly one is registered and the others refused.
fn race(handles: &[Directory], who: Registrant<'_>) -> (usize, Vec<DirectoryError>) {
    const RACERS: usize = 8;
    let start = std::sync::Barrier::new(RACERS);
    let results: Vec<Result<(), DirectoryError>> = std::thread::scope(|scope| {
        let runners: Vec<_> = (0..RACERS)
            .map(|n| {
                let directory = &handles[n % handles.len()];
                let start = &start;
                scope.spawn(move || {
                    let id = format!("urn:race:{n}");
                    let body = bytes(&td(Some(&id), "Racer"));
                    start.wait();
                    directory.put(&id, &body, &who, at(1)).map(|_| ())
                })
            })
            .collect();
        runners.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let done = results.iter().filter(|r| r.is_ok()).count();
    (done, results.into_iter().filter_map(Result::err).collect())
}

#[test]
fn racing_registrations_never_pass_the_quota_or_max_entries_together() {
    let mut quota = DirectoryLimits::default();
    quota.max_entries_per_registrant = 1;
    let mut full = DirectoryLimits::default();
    full.max_entries = 1;
    for (limits, refusal) in [(quota, "quota-exceeded"), (full, "directory-full")] {
        let dir = tempfile::tempdir().unwrap();
        let sqlite: Vec<Directory> = (0..4)
            .map(|_| {
                let store: Arc<dyn DirectoryStore> =
                    Arc::new(concord_store::Store::open(dir.path()).unwrap());
                Directory::new(store, limits.clone()).unwrap()
            })
            .collect();
        let memory: Arc<dyn DirectoryStore> = Arc::new(MemoryDirectoryStore::new());
        let memory = vec![Directory::new(memory, limits.clone()).unwrap()];
        for (name, handles) in [("sqlite", sqlite), ("memory", memory)] {
            let (done, refused) = race(&handles, alice());
            assert_eq!(done, 1, "{name}: {refusal}: {refused:?}");
            assert!(
                refused.iter().all(|e| e.problem_type().ends_with(refusal)),
                "{name}: {refused:?}"
            );
            let page = handles[0].list(&ListQuery::default(), at(1)).unwrap();
            assert_eq!(page.total, 1, "{name}: {refusal}");
        }
    }
}

/// A directory over each store where an agent writes only its own entry.
fn own_entries_only() -> Vec<Under> {
    directories()
        .into_iter()
        .map(|mut under| {
            under.directory = under.directory.clone().own_entries_only(true);
            under
        })
        .collect()
}

/// `td` naming `did` in `concord:metaProtocol`, as concord-describe describes an agent.
fn naming(id: Option<&str>, did: &str) -> serde_json::Value {
    let mut described = td(id, "Agent");
    described["@context"] = json!([
        "https://www.w3.org/2022/wot/td/v1.1",
        {"concord": "https://concord.dev/ns/v1#"}
    ]);
    described["concord:metaProtocol"] = json!({
        "concord:endpoint": "wss://agent.example/concord",
        "concord:versions": ["1.0"],
        "concord:did": did
    });
    described
}

#[test]
fn an_agent_writes_only_the_td_that_names_its_own_did_403() {
    const BOB: &str = "did:wba:agents.example:bob";
    for under in own_entries_only() {
        let d = &under.directory;
        let bob = Registrant::did(BOB, "127.0.0.1");
        let mallory = Registrant::did("did:wba:agents.example:mallory", "127.0.0.2");
        let anonymous = Registrant::client("127.0.0.3");
        // A TD whose id is Bob's DID: Mallory and an anonymous writer are refused.
        for who in [&mallory, &anonymous] {
            let refused = d.put(BOB, &bytes(&td(Some(BOB), "Bob")), who, at(0));
            assert!(
                matches!(refused, Err(DirectoryError::NotNamedWriter { ref named, field: "id", .. }) if named == BOB),
                "{}: {refused:?}",
                under.name
            );
        }
        // A TD naming Bob in concord:metaProtocol, by PUT and by POST.
        let named = naming(Some("urn:bob"), BOB);
        assert_eq!(
            status(d.put("urn:bob", &bytes(&named), &mallory, at(0))),
            403
        );
        let anonymous_td = naming(None, BOB);
        assert_eq!(
            status(d.create(&bytes(&anonymous_td), [7; 16], &mallory, at(0))),
            403,
            "{}",
            under.name
        );
        // Bob writes both.
        d.put(BOB, &bytes(&td(Some(BOB), "Bob")), &bob, at(0))
            .expect("Bob registers the TD with his DID as id");
        d.put("urn:bob", &bytes(&named), &bob, at(0))
            .expect("Bob registers the TD naming his DID");
        d.create(&bytes(&anonymous_td), [8; 16], &bob, at(0))
            .expect("Bob posts the TD naming his DID");
        // Mallory cannot make her own TD name Bob by a patch.
        d.put(
            "urn:mallory",
            &bytes(&td(Some("urn:mallory"), "M")),
            &mallory,
            at(0),
        )
        .expect("a TD naming no DID is anyone's to write");
        let patch = json!({
            "@context": named["@context"],
            "concord:metaProtocol": named["concord:metaProtocol"],
        });
        assert_eq!(
            status(d.patch("urn:mallory", &bytes(&patch), &mallory, at(1))),
            403
        );
        assert!(d
            .get("urn:mallory", at(2))
            .unwrap()
            .get("concord:metaProtocol")
            .is_none());
    }
}

#[test]
fn without_own_entries_only_a_td_naming_a_did_is_open_to_its_first_writer() {
    for under in directories() {
        let named = naming(Some("urn:bob"), "did:wba:agents.example:bob");
        under
            .directory
            .put("urn:bob", &bytes(&named), &alice(), at(0))
            .expect("the default keeps the first-writer rule alone");
    }
}
