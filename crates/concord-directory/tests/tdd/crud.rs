//! Create, retrieve, update, patch, delete; enriched TDs and registration information.

use concord_directory::{
    parse_rfc3339, unix_millis, DirectoryError, PutOutcome, DISCOVERY_CONTEXT,
};
use serde_json::json;

use crate::support::*;

#[test]
fn tdd_things_create_anonymous_id_and_local_uuid() {
    for under in directories() {
        let d = &under.directory;
        let id = d
            .create(&bytes(&td(None, "Lamp")), [0xAB; 16], &alice(), at(0))
            .unwrap();
        // tdd-anonymous-td-local-uuid: a version-4 UUID as a URN.
        let uuid = id.strip_prefix("urn:uuid:").expect("a urn:uuid: id");
        assert_eq!(uuid.len(), 36, "{}", under.name);
        assert_eq!(&uuid[14..15], "4", "{}: version 4: {uuid}", under.name);
        assert!(
            matches!(&uuid[19..20], "8" | "9" | "a" | "b"),
            "{}: RFC 4122 variant",
            under.name
        );
        // tdd-anonymous-td-identifier: the local id is added when the TD is served.
        let got = d.get(&id, at(1)).unwrap();
        assert_eq!(got["id"], id.as_str(), "{}", under.name);
        let listed = d.list(&Default::default(), at(1)).unwrap();
        assert_eq!(listed.things[0]["id"], id.as_str(), "{}", under.name);
    }
}

#[test]
fn tdd_things_create_known_vs_anonymous_a_td_with_an_id_is_not_posted() {
    for under in directories() {
        let result = under.directory.create(
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            [1; 16],
            &alice(),
            at(0),
        );
        assert!(
            matches!(result, Err(DirectoryError::IdOnPost { ref id }) if id == "urn:lamp"),
            "{}",
            under.name
        );
        assert_eq!(status(result), 400);
        assert_eq!(
            under
                .directory
                .list(&Default::default(), at(0))
                .unwrap()
                .total,
            0
        );
    }
}

#[test]
fn tdd_things_create_known_td_resp_201_then_tdd_things_update_resp_204() {
    for under in directories() {
        let d = &under.directory;
        let first = d
            .put(
                "urn:lamp",
                &bytes(&td(Some("urn:lamp"), "Lamp")),
                &alice(),
                at(0),
            )
            .unwrap();
        assert_eq!(
            (first, first.status()),
            (PutOutcome::Created, 201),
            "{}",
            under.name
        );
        let second = d
            .put(
                "urn:lamp",
                &bytes(&td(Some("urn:lamp"), "Lamp 2")),
                &alice(),
                at(5),
            )
            .unwrap();
        assert_eq!(
            (second, second.status()),
            (PutOutcome::Replaced, 204),
            "{}",
            under.name
        );
        let got = d.get("urn:lamp", at(6)).unwrap();
        assert_eq!(got["title"], "Lamp 2");
        // tdd-registrationinfo-vocab-created / -modified: created stays, modified moves.
        let created = parse_rfc3339(got["registration"]["created"].as_str().unwrap()).unwrap();
        let modified = parse_rfc3339(got["registration"]["modified"].as_str().unwrap()).unwrap();
        assert_eq!(
            (created, modified),
            (unix_millis(at(0)), unix_millis(at(5))),
            "{}",
            under.name
        );
    }
}

#[test]
fn tdd_things_create_known_td_the_id_in_the_td_is_the_one_in_the_url() {
    for under in directories() {
        let d = &under.directory;
        let wrong = d.put(
            "urn:other",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        );
        assert_eq!(status(wrong), 400, "{}", under.name);
        let anonymous = d.put("urn:lamp", &bytes(&td(None, "Lamp")), &alice(), at(0));
        assert!(
            matches!(
                anonymous,
                Err(DirectoryError::IdMismatch { found: None, .. })
            ),
            "{}",
            under.name
        );
    }
}

#[test]
fn tdd_things_retrieve_resp_an_enriched_td_tdd_context_injection_tdd_absolute_time() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        let got = d.get("urn:lamp", at(7)).unwrap();
        assert_eq!(
            got["@context"],
            json!(["https://www.w3.org/2022/wot/td/v1.1", DISCOVERY_CONTEXT]),
            "{}",
            under.name
        );
        let registration = &got["registration"];
        for field in ["created", "modified", "retrieved", "expires"] {
            let text = registration[field]
                .as_str()
                .unwrap_or_else(|| panic!("{field} missing"));
            // RFC 3339 date-time with its offset (tdd-absolute-time).
            assert!(text.ends_with('Z') || text.contains('+'), "{field}: {text}");
            assert!(parse_rfc3339(text).is_some(), "{field}: {text}");
        }
        assert_eq!(
            parse_rfc3339(registration["retrieved"].as_str().unwrap()),
            Some(unix_millis(at(7))),
            "tdd-registrationinfo-vocab-retrieved"
        );
        assert_eq!(status(d.get("urn:missing", at(7))), 404, "{}", under.name);
    }
}

#[test]
fn tdd_registrationinfo_vocab_ttl_sets_expires_and_a_client_expires_is_ignored() {
    for under in directories() {
        let d = &under.directory;
        let mut lamp = td(Some("urn:lamp"), "Lamp");
        lamp["registration"] = json!({"ttl": 60, "expires": "2099-01-01T00:00:00Z", "created": "2000-01-01T00:00:00Z"});
        d.put("urn:lamp", &bytes(&lamp), &alice(), at(0)).unwrap();
        let got = d.get("urn:lamp", at(1)).unwrap();
        assert_eq!(got["registration"]["ttl"], 60, "{}", under.name);
        assert_eq!(
            parse_rfc3339(got["registration"]["expires"].as_str().unwrap()),
            Some(unix_millis(at(60))),
            "{}: tdd-registrationinfo-vocab-expires: computed from ttl",
            under.name
        );
        assert_eq!(
            parse_rfc3339(got["registration"]["created"].as_str().unwrap()),
            Some(unix_millis(at(0))),
            "{}: created is read-only",
            under.name
        );
        // Without ttl, a client's expires is kept.
        let mut until = td(Some("urn:until"), "Until");
        until["registration"] = json!({"expires": "2026-12-03T16:00:00Z"});
        d.put("urn:until", &bytes(&until), &alice(), at(0)).unwrap();
        let got = d.get("urn:until", at(1)).unwrap();
        assert_eq!(
            got["registration"]["expires"], "2026-12-03T16:00:00Z",
            "{}",
            under.name
        );
        assert!(got["registration"].get("ttl").is_none(), "{}", under.name);
    }
}

#[test]
fn tdd_things_update_partial_mergepatch_and_partialtd() {
    for under in directories() {
        let d = &under.directory;
        let mut lamp = td(Some("urn:lamp"), "Lamp");
        lamp["description"] = json!("a lamp");
        d.put("urn:lamp", &bytes(&lamp), &alice(), at(0)).unwrap();
        let patch = json!({
            "title": "Brighter lamp",                         // replaced
            "support": "https://lamp.example/help",           // added
            "description": null,                              // removed
            "actions": {"act": {"description": "acts"}}       // merged recursively
        });
        d.patch("urn:lamp", &bytes(&patch), &alice(), at(3))
            .unwrap();
        let got = d.get("urn:lamp", at(4)).unwrap();
        assert_eq!(got["title"], "Brighter lamp", "{}", under.name);
        assert_eq!(got["support"], "https://lamp.example/help");
        assert!(got.get("description").is_none());
        assert_eq!(got["actions"]["act"]["description"], "acts");
        assert_eq!(
            got["actions"]["act"]["forms"][0]["href"],
            "https://thing.example/act"
        );
    }
}

#[test]
fn tdd_things_update_partial_the_patched_td_is_validated_again() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        let error = d
            .patch(
                "urn:lamp",
                &bytes(&json!({"security": null})),
                &alice(),
                at(1),
            )
            .unwrap_err();
        assert_eq!(error.status(), 400, "{}", under.name);
        let errors = error.validation_errors().expect("validationErrors");
        assert!(
            errors
                .iter()
                .any(|e| e.field.is_empty() || e.field.starts_with("/security")),
            "{errors:?}"
        );
        assert_eq!(
            d.get("urn:lamp", at(2)).unwrap()["security"],
            "nosec",
            "nothing was written"
        );
        for bad in [&b"[1]"[..], b"not json"] {
            assert!(matches!(
                d.patch("urn:lamp", bad, &alice(), at(2)),
                Err(DirectoryError::InvalidPatch { .. })
            ));
        }
        let moved = d.patch(
            "urn:lamp",
            &bytes(&json!({"id": "urn:elsewhere"})),
            &alice(),
            at(2),
        );
        assert!(
            matches!(moved, Err(DirectoryError::IdMismatch { .. })),
            "{}",
            under.name
        );
        assert_eq!(status(d.patch("urn:missing", b"{}", &alice(), at(2))), 404);
    }
}

#[test]
fn tdd_things_update_partial_resp_an_empty_patch_refreshes_the_expiry() {
    for under in directories() {
        let d = &under.directory;
        let mut lamp = td(Some("urn:lamp"), "Lamp");
        lamp["registration"] = json!({"ttl": 60});
        d.put("urn:lamp", &bytes(&lamp), &alice(), at(0)).unwrap();
        d.patch("urn:lamp", b"{}", &alice(), at(50)).unwrap();
        let got = d
            .get("urn:lamp", at(100))
            .expect("refreshed: not expired at 100 s");
        assert_eq!(
            parse_rfc3339(got["registration"]["expires"].as_str().unwrap()),
            Some(unix_millis(at(110))),
            "{}",
            under.name
        );
    }
}

#[test]
fn tdd_things_delete_resp_and_then_it_is_gone() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        d.delete("urn:lamp", &alice(), at(1)).unwrap();
        assert_eq!(status(d.get("urn:lamp", at(2))), 404, "{}", under.name);
        assert_eq!(
            status(d.delete("urn:lamp", &alice(), at(2))),
            404,
            "{}",
            under.name
        );
    }
}

#[test]
fn tdd_registrationinfo_expiry_purge_expired_tds_are_gone_and_purged_with_an_event() {
    for under in directories() {
        let d = &under.directory;
        let mut lamp = td(Some("urn:lamp"), "Lamp");
        lamp["registration"] = json!({"ttl": 30});
        d.put("urn:lamp", &bytes(&lamp), &alice(), at(0)).unwrap();
        d.put(
            "urn:stays",
            &bytes(&td(Some("urn:stays"), "Stays")),
            &alice(),
            at(0),
        )
        .unwrap();
        assert!(d.get("urn:lamp", at(29)).is_ok());
        assert_eq!(
            status(d.get("urn:lamp", at(30))),
            404,
            "{}: expired",
            under.name
        );
        assert_eq!(
            d.list(&Default::default(), at(31)).unwrap().total,
            1,
            "{}",
            under.name
        );
        let before = d.latest_event().unwrap();
        assert_eq!(d.purge_expired(at(31), 100).unwrap(), 1, "{}", under.name);
        let events = d.events_since(before, 10).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].kind.name(), events[0].thing.as_str()),
            ("thing_deleted", "urn:lamp")
        );
        assert_eq!(
            d.purge_expired(at(31), 100).unwrap(),
            0,
            "{}: purged once",
            under.name
        );
    }
}

#[test]
fn tdd_things_update_a_retrieved_enriched_td_put_back_is_accepted() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        let mut got = d.get("urn:lamp", at(1)).unwrap();
        got["title"] = json!("Lamp again");
        let outcome = d.put("urn:lamp", &bytes(&got), &alice(), at(2)).unwrap();
        assert_eq!(outcome, PutOutcome::Replaced, "{}", under.name);
        let again = d.get("urn:lamp", at(3)).unwrap();
        assert_eq!(again["title"], "Lamp again");
        let contexts = again["@context"].as_array().unwrap();
        assert_eq!(
            contexts.iter().filter(|c| *c == DISCOVERY_CONTEXT).count(),
            1,
            "{}: the context once",
            under.name
        );
        assert_eq!(
            parse_rfc3339(again["registration"]["created"].as_str().unwrap()),
            Some(unix_millis(at(0))),
            "{}: created is the directory's, not the client's",
            under.name
        );
    }
}
