//! `concord protocols list|show|forget` on the store a `concord call` filled.

mod support;

use std::path::Path;

use support::*;

fn protocols(data_dir: &Path, args: &[&str]) -> Output {
    run(concord()
        .arg("protocols")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir))
}

#[test]
fn list_show_and_forget_by_hash_prefix() {
    let (served, _provider) = provider("");
    // A signed requester: 0-RTT only in an authenticated session.
    let signer = Signer::start();
    let requester = &signer.data_dir;

    // An empty store lists nothing.
    let output = protocols(requester.path(), &["list"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert_eq!(output.stdout, "");
    assert!(
        output.stderr.contains("no protocols stored"),
        "{}",
        output.stderr
    );

    let call = signed_call_json(&served.url, r#"{"productId": "P12345"}"#, &signer);
    assert_eq!(call.code, 0, "{}", call.stderr);
    let hash = call.json()["hash"].as_str().unwrap().to_owned();
    let prefix = &hash[..10];

    let output = protocols(requester.path(), &["list"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    let lines: Vec<&str> = output.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", output.stdout);
    assert!(lines[0].starts_with("hash"), "{}", output.stdout);
    assert!(lines[1].starts_with(&hash[..12]), "{}", output.stdout);
    assert!(lines[1].contains("negotiated"), "{}", output.stdout);
    assert!(
        lines[1].ends_with(&format!("{}#getProductInfo", served.description)),
        "{}",
        output.stdout
    );

    let list = protocols(requester.path(), &["list", "--json"]).json();
    assert_eq!(list[0]["hash"], hash.as_str());
    assert_eq!(list[0]["integrity"], "verified");
    assert_eq!(list[0]["settlement"]["kind"], "negotiated");
    assert_eq!(list[0]["handlers"], serde_json::json!(["requester"]));
    assert_eq!(list[0]["testCases"], true);
    // Resumed by no later session yet: the negotiating session is not a resumption.
    assert_eq!(list[0]["resumed"], 0);
    assert!(list[0]["lastResumed"].is_null());
    assert!(lines[0].contains("resumed"), "{}", output.stdout);
    let peer = format!("{}#getProductInfo", served.description);
    assert_eq!(list[0]["peers"], serde_json::json!([peer]));
    assert_eq!(list[0]["action"], "getProductInfo");

    let output = protocols(requester.path(), &["show", prefix]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.starts_with(&format!("hash:        {hash}\n")),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("handlers:    requester\n"),
        "{}",
        output.stdout
    );
    assert!(output.stdout.contains("# Requirement"), "{}", output.stdout);
    assert!(
        output.stdout.contains(&format!("peers:       {peer}\n")),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("resumed:     never"),
        "{}",
        output.stdout
    );
    // A second call reuses it with 0-RTT: one resumption.
    let resumed = signed_call_json(&served.url, r#"{"productId": "P2"}"#, &signer).json();
    assert_eq!(resumed["settledBy"], "resumed", "{resumed}");
    let list = protocols(requester.path(), &["list", "--json"]).json();
    assert_eq!(list[0]["resumed"], 1, "{list}");
    assert!(list[0]["lastResumed"].is_string(), "{list}");
    let output = protocols(requester.path(), &["show", prefix]);
    assert!(
        output
            .stdout
            .contains("resumed:     once with 0-RTT, last "),
        "{}",
        output.stdout
    );
    let shown = protocols(requester.path(), &["show", prefix, "--json"]).json();
    assert_eq!(shown["hash"], hash.as_str());
    assert_eq!(shown["peers"], serde_json::json!([peer]));
    assert_eq!(shown["action"], "getProductInfo");
    assert!(shown["handlers"]["provider"].is_null());
    // `--document` prints the stored document alone, exactly what hashes to the hash.
    let document = protocols(requester.path(), &["show", prefix, "--document"]);
    assert_eq!(document.code, 0, "{}", document.stderr);
    assert_eq!(document.stdout, shown["document"].as_str().unwrap());
    let output = run_with_stdin(&["protocol", "hash"], document.stdout);
    assert_eq!(output.stdout.trim(), hash);

    let output = protocols(
        requester.path(),
        &["show", prefix, "--handler", "requester"],
    );
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.contains("function encodeRequest"),
        "{}",
        output.stdout
    );
    let output = protocols(requester.path(), &["show", prefix, "--handler", "provider"]);
    output.says(1, "no provider handler module is stored");
    let output = protocols(requester.path(), &["show", prefix, "--test-cases"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(!output.stdout.trim().is_empty());

    // Selectors that name nothing: exit 1 with the store's reason.
    let output = protocols(requester.path(), &["show", "0000000000"]);
    output.says(1, "no stored protocol hash starts with");
    let output = protocols(requester.path(), &["show", "abc"]);
    output.says(1, "too short");
    let output = protocols(requester.path(), &["forget", "not-hex!"]);
    output.says(1, "is not a protocol hash");

    let output = protocols(requester.path(), &["forget", prefix]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert_eq!(output.stdout, format!("forgot {hash}\n"));
    assert_eq!(
        protocols(requester.path(), &["list", "--json"]).json(),
        serde_json::json!([])
    );
    // Forgotten: the next call negotiates again (and agrees on the same protocol).
    let again = signed_call_json(&served.url, r#"{"productId": "P2"}"#, &signer).json();
    assert_eq!(again["settledBy"], "negotiated");
    assert!(again["offeredHash"].is_null());
    assert_eq!(again["hash"], hash.as_str());
}
