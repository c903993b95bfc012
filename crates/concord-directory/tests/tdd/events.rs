//! Change events: their kinds, data, ids, replay and the gap past retention.

use concord_directory::{DirectoryError, DirectoryLimits, EventKind};
use serde_json::json;

use crate::support::*;

#[test]
fn tdd_notification_event_types_and_tdd_notification_data_td_id() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp 2")),
            &alice(),
            at(1),
        )
        .unwrap();
        d.patch(
            "urn:lamp",
            &bytes(&json!({"title": "Lamp 3"})),
            &alice(),
            at(2),
        )
        .unwrap();
        d.delete("urn:lamp", &alice(), at(3)).unwrap();
        let events = d.events_since(0, 100).unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                "thing_created",
                "thing_updated",
                "thing_updated",
                "thing_deleted"
            ],
            "{}",
            under.name
        );
        assert!(events.windows(2).all(|w| w[0].id < w[1].id), "ids increase");
        for event in &events {
            assert_eq!(
                event.data(false),
                json!({"id": "urn:lamp"}),
                "{}",
                under.name
            );
        }
        // tdd-notification-data-create-full: with diff, the whole (enriched) TD.
        let created = events[0].data(true);
        assert_eq!(created["title"], "Lamp");
        assert!(created["@context"]
            .as_array()
            .unwrap()
            .contains(&json!("https://www.w3.org/2022/wot/discovery")));
        // tdd-notification-data-update-diff / -update-id: a replacement by PUT carries the
        // merge patch from the old TD to the new, with the id.
        assert_eq!(
            events[1].data(true),
            json!({"title": "Lamp 2", "id": "urn:lamp"}),
            "{}",
            under.name
        );
        // A PATCH carries the client's merge patch, with the id.
        assert_eq!(
            events[2].data(true),
            json!({"title": "Lamp 3", "id": "urn:lamp"}),
            "{}",
            under.name
        );
        // tdd-notification-data-delete-diff: nothing more than the id.
        assert_eq!(
            events[3].data(true),
            json!({"id": "urn:lamp"}),
            "{}",
            under.name
        );
        assert_eq!(
            EventKind::from_name("thing_deleted"),
            Some(EventKind::Deleted)
        );
    }
}

#[test]
fn tdd_notification_event_id_replay_from_an_id_and_a_typed_gap_past_retention() {
    let mut limits = DirectoryLimits::default();
    limits.event_retention = 3;
    for under in directories_with(limits) {
        let d = &under.directory;
        for n in 0..5 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(n))
                .unwrap();
        }
        let latest = d.latest_event().unwrap();
        let replay = d.events_since(latest - 2, 10).unwrap();
        assert_eq!(
            replay.iter().map(|e| e.thing.as_str()).collect::<Vec<_>>(),
            ["urn:t3", "urn:t4"],
            "{}",
            under.name
        );
        assert!(
            d.events_since(latest, 10).unwrap().is_empty(),
            "{}: nothing after the latest",
            under.name
        );
        // The oldest kept is latest - 2; a client that saw latest - 3 missed nothing.
        assert_eq!(d.events_since(latest - 3, 10).unwrap().len(), 3);
        let gap = d.events_since(latest - 4, 10);
        assert!(
            matches!(gap, Err(DirectoryError::EventGap { asked, oldest: Some(oldest) }) if asked == latest - 4 && oldest == latest - 2),
            "{}",
            under.name
        );
        assert_eq!(status(d.events_since(latest - 4, 10)), 410);
        assert!(
            matches!(
                d.events_since(latest + 1, 10),
                Err(DirectoryError::UnknownEvent { .. })
            ),
            "{}",
            under.name
        );
    }
}

/// Applies the RFC 7396 merge patch `patch` to `target`.
fn apply(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(object), Some(members)) => {
            for (key, value) in members {
                if value.is_null() {
                    object.remove(key);
                } else {
                    apply(object.entry(key.clone()).or_insert(json!({})), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

#[test]
fn tdd_notification_data_update_diff_a_put_is_the_merge_patch_from_the_old_td() {
    for under in directories() {
        let d = &under.directory;
        let mut old = td(Some("urn:lamp"), "Lamp");
        old["description"] = json!("a lamp");
        old["actions"]["act"]["input"] = json!({"description": "any value", "default": "on"});
        d.put("urn:lamp", &bytes(&old), &alice(), at(0)).unwrap();
        let mut new = old.clone();
        new.as_object_mut().unwrap().remove("description");
        new["title"] = json!("Lamp 2");
        new["actions"]["act"]["input"]["default"] = json!("off");
        d.put("urn:lamp", &bytes(&new), &alice(), at(1)).unwrap();
        let events = d.events_since(0, 10).unwrap();
        let diff = events[1].diff.clone().expect("an update carries its diff");
        // Only what changed, the removed member as `null`.
        assert_eq!(
            diff,
            json!({
                "description": null,
                "title": "Lamp 2",
                "actions": {"act": {"input": {"default": "off"}}}
            }),
            "{}",
            under.name
        );
        // A client applying it to the old TD holds the new one.
        let mut applied = old.clone();
        apply(&mut applied, &diff);
        assert_eq!(applied, new, "{}", under.name);
        // The event's data names the TD.
        assert_eq!(events[1].data(true)["id"], "urn:lamp", "{}", under.name);
    }
}

/// The one limit of a merge patch: a `null` value inside the new TD reads as a removal.
#[test]
fn tdd_notification_data_update_diff_a_null_inside_the_new_td_reads_as_a_removal() {
    for under in directories() {
        let d = &under.directory;
        let mut old = td(Some("urn:lamp"), "Lamp");
        old["actions"]["act"]["input"] = json!({"description": "any value", "default": "on"});
        d.put("urn:lamp", &bytes(&old), &alice(), at(0)).unwrap();
        let mut new = old.clone();
        new["actions"]["act"]["input"]["default"] = serde_json::Value::Null;
        d.put("urn:lamp", &bytes(&new), &alice(), at(1)).unwrap();
        let events = d.events_since(0, 10).unwrap();
        let diff = events[1].diff.clone().expect("an update carries its diff");
        assert_eq!(
            diff,
            json!({"actions": {"act": {"input": {"default": null}}}}),
            "{}",
            under.name
        );
        let mut applied = old.clone();
        apply(&mut applied, &diff);
        assert!(
            applied["actions"]["act"]["input"].get("default").is_none(),
            "{}",
            under.name
        );
    }
}
