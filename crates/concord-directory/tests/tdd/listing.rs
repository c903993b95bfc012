//! Listing: code-point order, paging with `next`, the canonical etag, the collection format.

use concord_directory::{ListFormat, ListQuery};
use serde_json::json;

use crate::support::*;

#[test]
fn tdd_things_list_pagination_order_default_and_order_utf_8_code_point_order() {
    for under in directories() {
        let d = &under.directory;
        // Code-point order: "B" < "a" < "é" < "😀"; not locale or case order.
        for id in ["urn:😀", "urn:a", "urn:é", "urn:B"] {
            d.put(id, &bytes(&td(Some(id), "T")), &alice(), at(0))
                .unwrap();
        }
        let listing = d.list(&ListQuery::default(), at(1)).unwrap();
        let ids: Vec<&str> = listing
            .things
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["urn:B", "urn:a", "urn:é", "urn:😀"], "{}", under.name);
        // tdd-things-list-resp: an array of TDs.
        assert!(listing.body("/things").is_array());
    }
}

#[test]
fn tdd_things_list_pagination_limit_header_nextlink_and_nextlink_attr() {
    for under in directories() {
        let d = &under.directory;
        for n in 0..5 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        let first = d
            .list(&ListQuery::new(0, Some(2), ListFormat::Array), at(1))
            .unwrap();
        assert_eq!((first.things.len(), first.total), (2, 5), "{}", under.name);
        let next = first
            .next
            .expect("tdd-things-list-pagination-header-nextlink");
        assert_eq!(next.to_query_string(), "offset=2&limit=2", "{}", under.name);
        let last = d
            .list(&ListQuery::new(4, Some(2), ListFormat::Array), at(1))
            .unwrap();
        assert_eq!(last.things.len(), 1);
        assert!(
            last.next.is_none(),
            "{}: no next after the last page",
            under.name
        );
        let beyond = d
            .list(&ListQuery::new(9, Some(2), ListFormat::Array), at(1))
            .unwrap();
        assert!(beyond.things.is_empty() && beyond.next.is_none());
        assert_eq!(
            status(d.list(&ListQuery::new(0, Some(0), ListFormat::Array), at(1))),
            400
        );
    }
}

#[test]
fn tdd_things_list_pagination_header_nextlink_base_the_etag_changes_with_the_content() {
    for under in directories() {
        let d = &under.directory;
        d.put("urn:a", &bytes(&td(Some("urn:a"), "A")), &alice(), at(0))
            .unwrap();
        let etag = |at_s| d.list(&ListQuery::default(), at(at_s)).unwrap().etag;
        let first = etag(1);
        assert_eq!(
            first,
            etag(2),
            "{}: unchanged content, same etag",
            under.name
        );
        d.patch("urn:a", &bytes(&json!({"title": "A2"})), &alice(), at(3))
            .unwrap();
        let patched = etag(4);
        assert_ne!(first, patched, "{}: a patch changes it", under.name);
        d.delete("urn:a", &alice(), at(5)).unwrap();
        assert_ne!(patched, etag(6), "{}: a delete changes it", under.name);
    }
}

#[test]
fn tdd_things_list_pagination_collection_format() {
    for under in directories() {
        let d = &under.directory;
        for n in 0..3 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        let page = d
            .list(
                &ListQuery::new(0, Some(2), ListFormat::parse("collection").unwrap()),
                at(1),
            )
            .unwrap();
        let body = page.body("/things");
        assert_eq!(body["@type"], "ThingCollection", "{}", under.name);
        assert_eq!(body["total"], 3);
        assert_eq!(body["members"].as_array().unwrap().len(), 2);
        assert_eq!(body["@id"], "/things?offset=0&limit=2&format=collection");
        assert_eq!(body["next"], "/things?offset=2&limit=2&format=collection");
        assert!(ListFormat::parse("xml").is_err());
    }
}

#[test]
fn a_page_is_cut_to_max_page_size() {
    let mut limits = concord_directory::DirectoryLimits::default();
    limits.max_page_size = 2;
    for under in directories_with(limits) {
        let d = &under.directory;
        for n in 0..3 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        let page = d
            .list(&ListQuery::new(0, Some(50), ListFormat::Array), at(1))
            .unwrap();
        assert_eq!(page.things.len(), 2, "{}", under.name);
        assert_eq!(
            page.next.unwrap().to_query_string(),
            "offset=2&limit=50",
            "the next link repeats the limit the client sent ({})",
            under.name
        );
        let unlimited = d
            .list(&ListQuery::new(0, None, ListFormat::Array), at(1))
            .unwrap();
        assert_eq!(unlimited.next.unwrap().to_query_string(), "offset=2");
    }
}
