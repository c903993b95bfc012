//! Every bound answers its typed refusal (tdd-registrationinfo-expiry-config: servers may
//! set a configurable upper limit to expiry times and refuse incompliant requests).

use concord_directory::{DirectoryError, DirectoryLimits, Registrant};
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
        let did = Registrant::did("did:wba:agents.example:bob", "127.0.0.2");
        d.put("urn:bob", &bytes(&td(Some("urn:bob"), "B")), &did, at(0))
            .expect("a DID has its own quota");
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
