//! `concord describe validate` and `concord describe new`.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::*;

/// `concord describe <args>` with `stdin`.
fn describe(args: &[&str], stdin: &str) -> Output {
    run(concord().arg("describe").args(args).write_stdin(stdin))
}

/// The seed's LMOS examples, kept as fixtures by concord-describe.
fn describe_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../concord-describe/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// Writes `text` to a file of its own under the test's temporary directory.
fn file(name: &str, text: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("describe-{name}"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const VALID: &str = r#"{
  "@context": ["https://www.w3.org/2022/wot/td/v1.1", {"lmos": "https://eclipse.dev/lmos/protocol/v1"}],
  "@type": "lmos:Agent",
  "title": "Echo",
  "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
  "security": "nosec_sc"
}"#;

const WITH_WARNING: &str = r#"{
  "@context": "https://www.w3.org/2022/wot/td/v1.1",
  "title": "Lister",
  "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
  "security": "nosec_sc",
  "actions": {"list": {"output": {"type": "array"}, "forms": [{"href": "https://lister.example.com/list"}]}}
}"#;

#[test]
fn valid_description_exits_0() {
    let path = file("valid.json", VALID);
    let out = describe(&["validate", &path], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, format!("{path}: valid\n"));
}

#[test]
fn warnings_are_printed_and_allowed() {
    let path = file("warning.json", WITH_WARNING);
    let out = describe(&["validate", &path], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "{path}:6:34: warning[array-without-items] at /actions/list/output: `type` is array but `items` is missing, so peers cannot know what the array holds\n{path}: valid, 1 warning\n"
        )
    );
}

#[test]
fn the_seed_example_is_rejected_with_line_and_column() {
    let path = describe_fixture("lmos-seed-full-example.json");
    let out = describe(&["validate", &path], "");
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stdout,
        format!(
            "{path}:5:47: error[syntax] at /@context/1/lmos: trailing comma before `}}`\n\
             {path}:22:2: error[syntax] at /lmos:metadata: missing `,` between object members (the next one starts at line 23, column 1)\n\
             {path}: invalid, 2 errors, 0 warnings\n"
        )
    );
    let fixed = describe_fixture("lmos-seed-full-example.fixed.json");
    assert_eq!(describe(&["validate", &fixed], "").code, 0);
}

#[test]
fn several_files_and_standard_input() {
    let valid = file("several-valid.json", VALID);
    let invalid = file("several-invalid.json", r#"{"title": "no context"}"#);
    let out = describe(&["validate", &valid, "-", &invalid], VALID);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let verdicts: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.ends_with("valid") || l.contains(": invalid"))
        .collect();
    assert_eq!(verdicts.len(), 3, "{}", out.stdout);
    assert!(out.stdout.contains("-: valid\n"));
    assert!(out
        .stdout
        .contains(&format!("{invalid}:1:1: error[missing-term] at /@context:")));
    assert!(out
        .stdout
        .contains(&format!("{invalid}: invalid, 3 errors, 0 warnings")));
}

#[test]
fn json_output_has_a_report_per_file() {
    let valid = file("json-valid.json", VALID);
    let seed = describe_fixture("lmos-seed-example.json");
    let out = describe(&["validate", "--json", &valid, &seed], "");
    assert_eq!(out.code, 1);
    let reports: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(reports[0]["file"], valid.as_str());
    assert_eq!(reports[0]["valid"], true);
    assert_eq!(reports[1]["valid"], false);
    let error = &reports[1]["errors"][0];
    assert_eq!(error["kind"], "syntax");
    assert_eq!(error["severity"], "error");
    assert_eq!(
        (error["line"].as_u64(), error["column"].as_u64()),
        (Some(5), Some(47))
    );
    assert_eq!(error["pointer"], "/@context/1/lmos");
}

#[test]
fn unreadable_file_exits_2_after_checking_the_others() {
    let valid = file("unreadable-valid.json", VALID);
    let out = describe(&["validate", "/nonexistent/agent.json", &valid], "");
    out.says(2, "cannot read /nonexistent/agent.json");
    assert!(out.stdout.contains(&format!("{valid}: valid")));
    let out = describe(&["validate", "--json", "/nonexistent/agent.json"], "");
    assert_eq!(out.code, 2);
    let reports: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(reports[0]["error"]
        .as_str()
        .unwrap()
        .contains("cannot read"));
}

#[test]
fn validate_needs_a_file() {
    let out = describe(&["validate"], "");
    out.says(2, "FILES");
}

#[test]
fn the_external_corpus_through_the_cli() {
    let td = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/td");
    if !td.is_dir() {
        eprintln!(
            "SKIPPED: external TD test documents not found at {}",
            td.display()
        );
        return;
    }
    let valid = td.join("valid/MinimalThing.json").display().to_string();
    let invalid = td
        .join("invalid/invalidSecuMatch.json")
        .display()
        .to_string();
    let warning = td
        .join("warning/unavailableDirectTm.json")
        .display()
        .to_string();
    assert_eq!(describe(&["validate", &valid, &warning], "").code, 0);
    let out = describe(&["validate", &invalid], "");
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("error[undefined-security] at /actions/toggle/forms/0/security/0"),
        "{}",
        out.stdout
    );
}

#[test]
fn new_prints_a_valid_skeleton() {
    let out = describe(&["new", "--title", "WeatherAgent"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = concord_describe::validate(out.stdout.as_bytes());
    assert!(report.is_valid() && report.warning_count() == 0, "{report}");
    let thing = concord_describe::parse(out.stdout.as_bytes())
        .unwrap()
        .thing;
    assert_eq!(thing.title, "WeatherAgent");
    assert_eq!(thing.lmos_kind(), Some(concord_describe::LmosKind::Agent));

    // Round trip through the validator on the command line.
    let path = file("new.json", &out.stdout);
    assert_eq!(describe(&["validate", &path], "").code, 0);
}

#[test]
fn new_with_endpoint_id_and_tool() {
    let out = describe(
        &[
            "new",
            "--title",
            "Scraper",
            "--tool",
            "--id",
            "urn:uuid:0b7f0c1e-8b7a-4c59-9d43-0c2b8a3f9e11",
            "--endpoint",
            "wss://scraper.example.com/concord",
        ],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let document: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(document["@type"], "lmos:Tool");
    assert_eq!(
        document["id"],
        "urn:uuid:0b7f0c1e-8b7a-4c59-9d43-0c2b8a3f9e11"
    );
    assert_eq!(
        document["concord:metaProtocol"]["concord:endpoint"],
        "wss://scraper.example.com/concord"
    );
    assert_eq!(
        document["concord:metaProtocol"]["concord:versions"][0],
        "1.0"
    );
    // The TD 1.0 URI first, for consumers that know only it (TD 1.1 allows it), then
    // TD 1.1's, then the prefixes.
    assert_eq!(document["@context"][0], "https://www.w3.org/2019/wot/td/v1");
    assert_eq!(
        document["@context"][1],
        "https://www.w3.org/2022/wot/td/v1.1"
    );
    assert_eq!(
        document["@context"][2]["concord"],
        "https://concord.dev/ns/v1#"
    );
    assert!(concord_describe::validate(out.stdout.as_bytes()).is_valid());
}

#[test]
fn new_refuses_arguments_that_make_an_invalid_description() {
    let out = describe(
        &[
            "new",
            "--title",
            "X",
            "--endpoint",
            "https://x.example.com/",
        ],
        "",
    );
    out.fails(1, "/concord:metaProtocol/concord:endpoint");
    assert!(out.stdout.is_empty());
}

#[test]
fn validate_checks_the_http_forms() {
    let text = r#"{
  "@context": ["https://www.w3.org/2019/wot/td/v1", "https://www.w3.org/2022/wot/td/v1.1"],
  "title": "Lamp",
  "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
  "security": "nosec_sc",
  "properties": {"on": {"type": "boolean", "observable": true, "forms": [
    {"href": "https://lamp.example.com/on", "op": "readproperty", "htv:methodName": "PUT"},
    {"href": "https://lamp.example.com/on/observable", "op": "observeproperty", "subprotocol": "sse", "contentType": "text/event-stream", "htv:methodName": "GET"}
  ]}},
  "events": {"overheated": {"forms": [
    {"href": "https://lamp.example.com/overheated", "op": "subscribeevent", "subprotocol": "carrier-pigeon", "htv:methodName": "get"}
  ]}}
}"#;
    let path = file("http-forms.json", text);
    let out = describe(&["validate", &path], "");
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    for expected in [
        "error[conflict] at /properties/on/forms/0/htv:methodName: `readproperty` over HTTP is GET, not `PUT`",
        "error[invalid-value] at /events/overheated/forms/0/htv:methodName: `get` is not an HTTP method (methods are uppercase)",
        "error[invalid-value] at /events/overheated/forms/0/subprotocol: `carrier-pigeon` is not a subprotocol of the HTTP binding",
    ] {
        assert!(out.stdout.contains(expected), "{expected}\n{}", out.stdout);
    }
    assert!(out.stdout.contains("invalid, 3 errors"), "{}", out.stdout);
}
