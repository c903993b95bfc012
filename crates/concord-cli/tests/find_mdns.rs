//! `concord find --mdns`: an agent served with `[discovery] mdns = true` is found on the
//! local network by what it does, and not by what it does not; its ANP and A2A documents
//! name the configured owner.

mod support;

use std::ffi::OsStr;

use serde_json::Value;
use support::*;

/// `concord find --mdns <criteria> --json`.
fn find_mdns(criteria: &[&str]) -> Output {
    run(concord()
        .args(["find", "--mdns", "--wait", "3s", "--json"])
        .args(criteria))
}

/// The announced Things of a `find --mdns --json` answer that are `served`.
fn ours<'a>(found: &'a Value, served: &Served) -> Vec<&'a Value> {
    found
        .as_array()
        .unwrap()
        .iter()
        .filter(|thing| thing["port"] == served.listening.port())
        .collect()
}

#[test]
fn an_agent_announced_with_mdns_is_found_by_its_action_and_names_its_owner() {
    let (dir, config) = temp_config(
        "[discovery]\nmdns = true\nowner = { name = \"Test Shop Ltd\", url = \"https://shop.example\" }\n",
    );
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);

    let found = find_mdns(&["--action", "getProductInfo"]);
    assert_eq!(found.code, 0, "{}{}", found.stdout, found.stderr);
    let json = found.json();
    let announced = ours(&json, &served);
    assert_eq!(announced.len(), 1, "{json:#}");
    let thing = announced[0];
    assert_eq!(thing["type"], "Thing");
    assert_eq!(thing["url"], served.description);
    assert_eq!(thing["description"]["title"], "Test shop");
    assert_eq!(
        thing["matches"],
        serde_json::json!([{"kind": "action", "name": "getProductInfo"}])
    );

    let missing = find_mdns(&["--action", "noSuchAction"]);
    assert!(
        ours(&missing.json(), &served).is_empty(),
        "{}",
        missing.stdout
    );

    let ad = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let response = reqwest::get(format!("{}ad.json", served.url))
            .await
            .unwrap();
        serde_json::from_slice::<Value>(&response.bytes().await.unwrap()).unwrap()
    });
    assert_eq!(ad["owner"]["name"], "Test Shop Ltd");
    assert_eq!(ad["did"].as_str(), served.did.as_deref());
    drop(served);
    drop(dir);
}
