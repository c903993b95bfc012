//! JSONPath search (RFC 9535) and capability search, each bounded.

use std::sync::Arc;
use std::time::Duration;

use concord_directory::{
    CapabilityKind, CapabilityQuery, Directory, DirectoryError, DirectoryLimits, DirectoryStore,
    Entry, EventKind, Expect, MemoryDirectoryStore, Outcome, Write,
};
use serde_json::json;

use crate::support::*;

fn agent(id: &str, action: &str, input_field: &str) -> serde_json::Value {
    json!({
        "@context": ["https://www.w3.org/2022/wot/td/v1.1", {"lmos": "https://eclipse.dev/lmos/protocol/v1", "concord": "https://concord.dev/ns/v1#"}],
        "@type": "lmos:Agent",
        "id": id,
        "title": format!("Agent {id}"),
        "lmos:metadata": {"lmos:vendor": {"lmos:name": "Acme"}},
        "securityDefinitions": {"nosec": {"scheme": "nosec"}},
        "security": "nosec",
        "actions": {action: {
            "input": {"type": "object", "properties": {input_field: {"type": "string"}}},
            "output": {"type": "object", "properties": {"answer": {"type": "string"}}},
            "forms": [{"href": "https://agent.example/act"}]
        }},
        "concord:metaProtocol": {
            "concord:endpoint": "wss://agent.example/concord",
            "concord:versions": ["1.0"],
            "concord:did": format!("did:wba:agent.example:{}", &id[4..]),
            "concord:consensusProtocols": [{
                "concord:uri": "https://protocols.example/weather/1.0",
                "concord:protocolHash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            }]
        }
    })
}

#[test]
fn tdd_search_large_tdds_jsonpath_finds_whole_tds_and_fragments() {
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
            "urn:fan",
            &bytes(&td(Some("urn:fan"), "Fan")),
            &alice(),
            at(0),
        )
        .unwrap();
        let found = d
            .search_jsonpath("$[?@.title=='Lamp']", at(1), &mut || Duration::ZERO)
            .unwrap();
        assert_eq!(found.len(), 1, "{}", under.name);
        assert_eq!(found[0]["id"], "urn:lamp");
        assert!(
            found[0]["registration"].is_object(),
            "searched over enriched TDs"
        );
        let titles = d
            .search_jsonpath("$[*].title", at(1), &mut || Duration::ZERO)
            .unwrap();
        assert_eq!(
            titles,
            [json!("Fan"), json!("Lamp")],
            "{}: fragments, in id order",
            under.name
        );
    }
}

#[test]
fn a_malformed_or_too_long_jsonpath_query_is_refused_400() {
    for under in directories() {
        let d = &under.directory;
        for bad in ["$[?@.title==", "title", "", "$..[?(@.a"] {
            let result = d.search_jsonpath(bad, at(0), &mut || Duration::ZERO);
            assert!(
                matches!(result, Err(DirectoryError::InvalidQuery { .. })),
                "{}: {bad:?}: {result:?}",
                under.name
            );
        }
        let long = format!("$[?@.title=='{}']", "x".repeat(2_000));
        assert!(matches!(
            d.search_jsonpath(&long, at(0), &mut || Duration::ZERO),
            Err(DirectoryError::QueryTooLong { limit: 1_024, .. })
        ));
    }
}

#[test]
fn a_jsonpath_search_over_too_much_or_matching_too_much_is_refused() {
    let mut limits = DirectoryLimits::default();
    limits.max_query_results = 5;
    limits.max_query_scan_bytes = 2_000;
    for under in directories_with(limits) {
        let d = &under.directory;
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        let result = d.search_jsonpath("$..*", at(1), &mut || Duration::ZERO);
        assert!(
            matches!(result, Err(DirectoryError::TooManyResults { limit: 5 })),
            "{}: {result:?}",
            under.name
        );
        // A small request whose query is too broad: 400 (narrow it), not 413.
        assert_eq!(
            status(d.search_jsonpath("$..*", at(1), &mut || Duration::ZERO)),
            400
        );
        assert_eq!(result.unwrap_err().retry_after(), None);
        for n in 0..10 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        let broad = d.search_jsonpath("$[*].id", at(1), &mut || Duration::ZERO);
        assert!(
            matches!(broad, Err(DirectoryError::SearchTooBroad { limit: 2_000 })),
            "{}: {broad:?}",
            under.name
        );
        assert_eq!(
            status(d.search_jsonpath("$[*].id", at(1), &mut || Duration::ZERO)),
            503
        );
        assert_eq!(
            broad.unwrap_err().retry_after(),
            Some(concord_directory::RETRY_AFTER)
        );
    }
}

/// A JSONPath search is bounded in time (tdd-search-jsonpath, "bounded in time"): the
/// query is evaluated on one TD after another and the caller's clock is asked between
/// them.
#[test]
fn a_jsonpath_search_past_its_time_is_refused_400() {
    for under in directories() {
        let d = &under.directory;
        for n in 0..5 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        // A clock on which each TD takes a second: past the 2 s before the fourth.
        let mut ticks = 0;
        let mut clock = || {
            ticks += 1;
            Duration::from_secs(ticks - 1)
        };
        let slow = d.search_jsonpath("$[*].id", at(1), &mut clock);
        assert!(
            matches!(
                slow,
                Err(DirectoryError::SearchTooSlow {
                    walked: 3,
                    held: 5,
                    ..
                })
            ),
            "{}: {slow:?}",
            under.name
        );
        let slow = slow.unwrap_err();
        assert_eq!((slow.status(), slow.retry_after()), (400, None));
        let found = d.search_jsonpath("$[*].id", at(1), &mut || Duration::ZERO);
        assert_eq!(found.unwrap().len(), 5, "{}: within its time", under.name);
    }
}

/// Evaluated on one TD at a time, a query selects the nodes RFC 9535 gives over the array
/// of all TDs (checked against `serde_json_path` over that array), and a query whose
/// answer would differ is refused.
#[test]
fn a_jsonpath_search_one_td_at_a_time_answers_as_over_all_of_them() {
    for under in directories() {
        let d = &under.directory;
        for (id, action, field) in [
            ("urn:b", "forecast", "city"),
            ("urn:a", "translate", "text"),
            ("urn:c", "forecast", "zip"),
        ] {
            d.put(id, &bytes(&agent(id, action, field)), &alice(), at(0))
                .unwrap();
        }
        let all = serde_json::Value::Array(
            d.search_jsonpath("$[*]", at(1), &mut || Duration::ZERO)
                .unwrap(),
        );
        assert_eq!(
            d.search_jsonpath("$", at(1), &mut || Duration::ZERO)
                .unwrap(),
            std::slice::from_ref(&all),
            "{}: `$` is the root array itself",
            under.name
        );
        for query in [
            "$[*].title",
            "$[?@.title == 'Agent urn:c']",
            "$..title",
            "$..actions.*.input..type",
            "$[?@.actions.forecast].id",
            "$[?count(@.actions.*) == 1].id",
            "$[?match(@.title, 'Agent urn:[ab]')].id",
            "$[?search(@['lmos:metadata']['lmos:vendor']['lmos:name'], 'cm')].id",
            "$[*]['id', 'title']",
        ] {
            let per_td = d
                .search_jsonpath(query, at(1), &mut || Duration::ZERO)
                .unwrap();
            let path = serde_json_path::JsonPath::parse(query).unwrap();
            let over_all: Vec<serde_json::Value> =
                path.query(&all).all().into_iter().cloned().collect();
            assert_eq!(per_td, over_all, "{}: {query}", under.name);
        }
        // A descendant segment at the root selects the same nodes, grouped by TD: over
        // the array, the TDs themselves come first, then each one's descendants.
        for query in ["$..*", "$..[?@.title]", "$..['id', 'title']"] {
            let sorted = |nodes: Vec<serde_json::Value>| {
                let mut texts: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
                texts.sort();
                texts
            };
            let per_td = d
                .search_jsonpath(query, at(1), &mut || Duration::ZERO)
                .unwrap();
            let path = serde_json_path::JsonPath::parse(query).unwrap();
            let over_all = path.query(&all).all().into_iter().cloned().collect();
            assert_eq!(sorted(per_td), sorted(over_all), "{}: {query}", under.name);
        }
        for query in [
            "$[0]",
            "$[-1].id",
            "$[0:2]",
            "$..[1]",
            "$[?@.id == $[0].id]",
        ] {
            let refused = d.search_jsonpath(query, at(1), &mut || Duration::ZERO);
            assert!(
                matches!(refused, Err(DirectoryError::InvalidQuery { .. })),
                "{}: {query}: {refused:?}",
                under.name
            );
        }
    }
}

/// `$` alone is one node (the root array), however many TDs it holds.
#[test]
fn the_root_alone_is_one_node() {
    let mut limits = DirectoryLimits::default();
    limits.max_query_results = 2;
    for under in directories_with(limits) {
        let d = &under.directory;
        for n in 0..3 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        let root = d
            .search_jsonpath("$", at(1), &mut || Duration::ZERO)
            .unwrap();
        let lengths: Vec<_> = root.iter().map(|n| n.as_array().map(Vec::len)).collect();
        assert_eq!(lengths, [Some(3)], "{}", under.name);
        let each = d.search_jsonpath("$[*]", at(1), &mut || Duration::ZERO);
        assert!(
            matches!(each, Err(DirectoryError::TooManyResults { limit: 2 })),
            "{}: {each:?}",
            under.name
        );
    }
}

/// The work of one query on one TD is bounded by its shape: descendant segments, and the
/// regular expressions `match()` and `search()` compile for every node.
#[test]
fn an_expensive_jsonpath_shape_is_refused_400() {
    for under in directories() {
        let d = &under.directory;
        let long = format!("$[?match(@.title, '{}')]", "a".repeat(129));
        for query in [
            "$..*..*..*",
            "$[?match(@.title, @.description)]",
            long.as_str(),
            "$[?search(@.title, '\\w{500}{500}')]",
            "$[?match(@.title, '[')]",
        ] {
            let refused = d.search_jsonpath(query, at(1), &mut || Duration::ZERO);
            assert!(
                matches!(refused, Err(DirectoryError::InvalidQuery { .. })),
                "{}: {query}: {refused:?}",
                under.name
            );
            assert_eq!(status(refused), 400);
        }
    }
}

/// `$[*,*,*,…]` selects each TD many times: the answer is bounded by its bytes of JSON,
/// not only by its count of nodes.
#[test]
fn a_jsonpath_answer_is_bounded_by_its_bytes() {
    let mut limits = DirectoryLimits::default();
    limits.max_query_answer_bytes = 20_000;
    for under in directories_with(limits.clone()) {
        let d = &under.directory;
        let mut big = td(Some("urn:big"), "Big");
        big["description"] = serde_json::Value::String("x".repeat(8_000));
        d.put("urn:big", &bytes(&big), &alice(), at(0)).unwrap();
        let once = d
            .search_jsonpath("$[*]", at(1), &mut || Duration::ZERO)
            .unwrap();
        assert_eq!(once.len(), 1, "{}", under.name);
        let many = format!("$[{}]", ["*"; 5].join(","));
        let refused = d.search_jsonpath(&many, at(1), &mut || Duration::ZERO);
        assert!(
            matches!(
                refused,
                Err(DirectoryError::AnswerTooLarge { limit: 20_000 })
            ),
            "{}: {}",
            under.name,
            refused.map(|nodes| nodes.len()).unwrap_or(0)
        );
        assert_eq!(
            status(d.search_jsonpath(&many, at(1), &mut || Duration::ZERO)),
            413
        );
        let small = format!("$[{}].id", ["*"; 5].join(","));
        assert_eq!(
            d.search_jsonpath(&small, at(1), &mut || Duration::ZERO)
                .unwrap()
                .len(),
            5
        );
    }
}

#[test]
fn capability_search_finds_who_can_do_this() {
    for under in directories() {
        let d = &under.directory;
        d.put(
            "urn:weather",
            &bytes(&agent("urn:weather", "getWeather", "city")),
            &alice(),
            at(0),
        )
        .unwrap();
        d.put(
            "urn:news",
            &bytes(&agent("urn:news", "getNews", "topic")),
            &alice(),
            at(0),
        )
        .unwrap();
        d.put(
            "urn:lamp",
            &bytes(&td(Some("urn:lamp"), "Lamp")),
            &alice(),
            at(0),
        )
        .unwrap();
        let ids = |query: CapabilityQuery| -> Vec<String> {
            d.search_capabilities(&query, at(1))
                .unwrap()
                .things
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned())
                .collect()
        };
        let q = CapabilityQuery::new;
        assert_eq!(
            ids(q().and(CapabilityKind::Action, "getWeather")),
            ["urn:weather"],
            "{}",
            under.name
        );
        assert_eq!(
            ids(q().and(CapabilityKind::InputField, "topic")),
            ["urn:news"]
        );
        assert_eq!(
            ids(q().and(CapabilityKind::InputField, "city")),
            ["urn:lamp", "urn:weather"]
        );
        assert_eq!(
            ids(q().and(CapabilityKind::OutputField, "answer")),
            ["urn:news", "urn:weather"]
        );
        // `field`: a field of either side, the one meaning every client gives it.
        assert_eq!(
            ids(q().and(CapabilityKind::Field, "answer")),
            ["urn:news", "urn:weather"],
            "{}: an output field",
            under.name
        );
        assert_eq!(
            ids(q().and(CapabilityKind::Field, "city")),
            ["urn:lamp", "urn:weather"],
            "{}: an input field",
            under.name
        );
        assert_eq!(
            ids(q().and(CapabilityKind::Type, "lmos:Agent")),
            ["urn:news", "urn:weather"]
        );
        assert_eq!(
            ids(q().and(CapabilityKind::Lmos, "lmos:name=Acme")),
            ["urn:news", "urn:weather"]
        );
        assert_eq!(
            ids(q().and(
                CapabilityKind::ConsensusUri,
                "https://protocols.example/weather/1.0"
            )),
            ["urn:news", "urn:weather"]
        );
        assert_eq!(
            ids(q().and(
                CapabilityKind::ConsensusHash,
                "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
            )),
            ["urn:news", "urn:weather"],
            "{}: a hash is asked in either case",
            under.name
        );
        assert_eq!(
            ids(q().and(CapabilityKind::Did, "did:wba:agent.example:news")),
            ["urn:news"]
        );
        assert_eq!(
            ids(q()
                .and(CapabilityKind::Type, "lmos:Agent")
                .and(CapabilityKind::InputField, "city")),
            ["urn:weather"],
            "terms combine with AND"
        );
        assert!(ids(q().and(CapabilityKind::Action, "fly")).is_empty());
        // A patch re-indexes; a delete un-indexes.
        d.patch("urn:news", &bytes(&json!({"actions": {"getNews": null, "getHeadlines": {"forms": [{"href": "https://agent.example/h"}]}}})), &alice(), at(2)).unwrap();
        assert!(
            ids(q().and(CapabilityKind::Action, "getNews")).is_empty(),
            "{}",
            under.name
        );
        assert_eq!(
            ids(q().and(CapabilityKind::Action, "getHeadlines")),
            ["urn:news"]
        );
        d.delete("urn:weather", &alice(), at(3)).unwrap();
        assert!(ids(q().and(CapabilityKind::Action, "getWeather")).is_empty());
    }
}

#[test]
fn capability_search_is_bounded_in_result_size_and_terms() {
    let mut limits = DirectoryLimits::default();
    limits.max_capability_results = 2;
    limits.max_capability_terms = 2;
    for under in directories_with(limits) {
        let d = &under.directory;
        for n in 0..3 {
            let id = format!("urn:t{n}");
            d.put(&id, &bytes(&td(Some(&id), "T")), &alice(), at(0))
                .unwrap();
        }
        let found = d
            .search_capabilities(
                &CapabilityQuery::new().and(CapabilityKind::Action, "act"),
                at(1),
            )
            .unwrap();
        assert_eq!(
            (found.things.len(), found.truncated),
            (2, true),
            "{}",
            under.name
        );
        let many = CapabilityQuery::new()
            .and(CapabilityKind::Action, "a")
            .and(CapabilityKind::Action, "b")
            .and(CapabilityKind::Action, "c");
        assert_eq!(status(d.search_capabilities(&many, at(1))), 400);
        assert_eq!(
            status(d.search_capabilities(&CapabilityQuery::new(), at(1))),
            400
        );
        assert_eq!(
            status(d.search_capabilities(
                &CapabilityQuery::new().and(CapabilityKind::Action, ""),
                at(1)
            )),
            400
        );
    }
}

#[test]
fn a_full_directory_at_the_default_limits_is_searched_by_jsonpath() {
    // 10,000 TDs (the default `max_entries`) of about 1 KB each, written straight into
    // the store (what registering them would store, without 10,000 validations).
    let store = Arc::new(MemoryDirectoryStore::new());
    let filler = "x".repeat(700);
    for n in 0..10_000 {
        let id = format!("urn:full:{n:05}");
        let mut thing = td(Some(&id), &format!("Thing {n:05}"));
        thing["description"] = json!(filler);
        let entry = Entry::new(&id, thing);
        let write = Write::new(&entry, &[], Expect::Absent, EventKind::Created, None, 10);
        assert!(matches!(store.write(&write).unwrap(), Outcome::Done(_)));
    }
    let directory = Directory::new(store, DirectoryLimits::default()).unwrap();
    for n in [0, 4_321, 9_999] {
        let found = directory
            .search_jsonpath(&format!("$[?@.title=='Thing {n:05}']"), at(1), &mut || {
                Duration::ZERO
            })
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0]["id"], format!("urn:full:{n:05}"));
    }
}

#[test]
fn a_jsonpath_search_never_answers_from_before_a_write_by_another_handle_or_an_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let store: Arc<dyn DirectoryStore> =
            Arc::new(concord_store::Store::open(dir.path()).unwrap());
        Directory::new(store, DirectoryLimits::default()).unwrap()
    };
    // Two handles on one file: what two processes sharing it would have.
    let (searcher, writer) = (open(), open());
    let titles = |at_time| -> Vec<String> {
        let found = searcher
            .search_jsonpath("$[*].title", at_time, &mut || Duration::ZERO)
            .unwrap();
        found
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    writer
        .put("urn:a", &bytes(&td(Some("urn:a"), "A")), &alice(), at(0))
        .unwrap();
    assert_eq!(titles(at(1)), ["A"]);
    writer
        .put("urn:b", &bytes(&td(Some("urn:b"), "B")), &alice(), at(2))
        .unwrap();
    assert_eq!(
        titles(at(3)),
        ["A", "B"],
        "a registration by another handle"
    );
    writer
        .patch("urn:a", &bytes(&json!({"title": "A2"})), &alice(), at(4))
        .unwrap();
    assert_eq!(titles(at(5)), ["A2", "B"], "a patch by another handle");
    writer.delete("urn:b", &alice(), at(6)).unwrap();
    assert_eq!(titles(at(7)), ["A2"], "a deletion by another handle");
    let mut brief = td(Some("urn:c"), "C");
    brief["registration"] = json!({"ttl": 60});
    writer
        .put("urn:c", &bytes(&brief), &alice(), at(8))
        .unwrap();
    assert_eq!(titles(at(9)), ["A2", "C"]);
    // No write since: only time passes, and C expires.
    assert_eq!(titles(at(8 + 60)), ["A2"], "an expiry");
}
