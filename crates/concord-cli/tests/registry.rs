//! `concord registry add|list|remove`: consensus protocols with their generated handler
//! code.

mod support;

use std::path::Path;

use support::*;

const URI: &str = "https://protocols.example/product-info/seed";

fn registry(data_dir: &Path) -> assert_cmd::Command {
    let mut command = concord();
    command.arg("registry").arg("--data-dir").arg(data_dir);
    command
}

#[test]
fn add_list_and_remove() {
    let data = tempfile::tempdir().unwrap();
    let output = run(registry(data.path()).arg("list"));
    output.says(0, "no consensus protocols registered");

    // The seed does not fix the action's name: it must be given.
    let output = run(registry(data.path())
        .args(["add", URI])
        .arg(seed_protocol()));
    output.says(2, "pass --action NAME");

    let output = run(registry(data.path())
        .args(["add", URI])
        .arg(seed_protocol())
        .args(["--action", "getProductInfo"]));
    assert_eq!(output.code, 0, "{}", output.stderr);
    let expected_hash = run(concord().args(["protocol", "hash"]).arg(seed_protocol()));
    let hash = expected_hash.stdout.trim();
    assert_eq!(
        output.stdout,
        format!("registered {URI}: {hash} (handler code: requester)\n")
    );
    assert!(
        output
            .stderr
            .contains("requester module written by the template"),
        "{}",
        output.stderr
    );

    let list = run(registry(data.path()).args(["list", "--json"])).json();
    assert_eq!(list[0]["uri"], URI);
    assert_eq!(list[0]["hash"], hash);
    assert_eq!(list[0]["integrity"], "verified");
    assert_eq!(list[0]["handlers"], serde_json::json!(["requester"]));

    // With the action we serve, the provider's module too (same document: updated).
    let output = run(registry(data.path())
        .args(["add", URI])
        .arg(seed_protocol())
        .arg("--action-schema")
        .arg(fixture("handler-product-action.json")));
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output
            .stdout
            .ends_with("(handler code: requester, provider)\n"),
        "{}",
        output.stdout
    );
    let output = run(registry(data.path()).arg("list"));
    let lines: Vec<&str> = output.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", output.stdout);
    assert!(lines[1].starts_with(&hash[..12]), "{}", output.stdout);
    assert!(
        lines[1].contains("requester, provider"),
        "{}",
        output.stdout
    );
    assert!(lines[1].ends_with(URI), "{}", output.stdout);

    let output = run(registry(data.path()).args(["remove", URI]));
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert_eq!(output.stdout, format!("removed {URI}\n"));
    let output = run(registry(data.path()).args(["remove", URI]));
    output.says(1, "no consensus protocol is registered");
    assert_eq!(
        run(registry(data.path()).args(["list", "--json"])).json(),
        serde_json::json!([])
    );
}

#[test]
fn a_document_that_is_not_a_protocol_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let document = dir.path().join("broken.md");
    std::fs::write(
        &document,
        "# Data format\n## Request\n```json\n{\"type\": \"object\",,}\n```\n",
    )
    .unwrap();
    let output = run(registry(data.path())
        .args(["add", URI])
        .arg(&document)
        .args(["--action", "getProductInfo"]));
    output.says(1, "broken.md");
    // Nothing was registered.
    assert_eq!(
        run(registry(data.path()).args(["list", "--json"])).json(),
        serde_json::json!([])
    );
}

#[test]
fn an_action_other_than_the_one_the_protocol_fixes_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let document = dir.path().join("product-info.md");
    std::fs::write(&document, drafted_protocol()).unwrap();
    run(registry(data.path())
        .args(["add", URI])
        .arg(&document)
        .args(["--action", "getPrice"]))
    .fails(
        1,
        "the protocol is for the action `getProductInfo`, not `getPrice`",
    );
    // The action it fixes needs no --action.
    let output = run(registry(data.path()).args(["add", URI]).arg(&document));
    assert_eq!(output.code, 0, "{}", output.stderr);
}
