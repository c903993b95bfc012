//! `concord llm check` against the scripted server: the structured request, the fallback
//! when the server refuses the JSON Schema, a wrong answer (exit 1), and an unreachable
//! server (exit 2).

mod support;

use concord_llm_script::{ScriptServer, Step};
use support::*;

const REFUSAL: &str = r#"{"error":{"code":400,"message":"response_format type must be one of \"text\" or \"json_object\", but got: json_schema","type":"invalid_request_error"}}"#;

async fn check(server: &ScriptServer, extra: &[&str]) -> Output {
    let mut args = vec![
        "llm".to_owned(),
        "check".to_owned(),
        "--base-url".to_owned(),
        server.base_url(),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    tokio::task::spawn_blocking(move || run(concord().args(&args)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_with_structured_output_passes() {
    let server = ScriptServer::start([
        Step::content(r#"{"sum": 5}"#).usage(30, 4),
        Step::content("1 2 3 4 5 6 7 8").usage(20, 16),
    ])
    .await
    .unwrap();

    let output = check(&server, &["--model", "m1"]).await;

    assert_eq!(output.code, 0, "{}", output.stderr);
    let report = output.json();
    assert_eq!(report["model"], "m1");
    assert_eq!(report["structured"]["format"], "json_schema");
    assert_eq!(report["structured"]["answer"], 5);
    assert_eq!(report["speed"]["completionTokens"], 16);
    assert!(report["speed"]["tokensPerSecond"].as_f64().unwrap() > 0.0);
    assert_eq!(report["usage"]["promptTokens"], 50);
    let requests = server.requests();
    let format = &requests[0].body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["schema"]["required"][0], "sum");
    assert_eq!(requests[0].body["temperature"], 0.0);
    assert_eq!(requests[1].body["max_tokens"], 48);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_refusing_the_schema_is_reported_as_prompt_only() {
    let server = ScriptServer::start([
        Step::status(400, REFUSAL),
        Step::content(r#"{"sum": 5}"#),
        Step::content("1 2 3"),
    ])
    .await
    .unwrap();

    let output = check(&server, &["--model", "m1"]).await;

    assert_eq!(output.code, 0, "{}", output.stderr);
    let report = output.json();
    assert_eq!(report["structured"]["format"], "prompt_only");
    assert_eq!(report["usage"]["promptOnlyCalls"], 1);
    assert_eq!(report["usage"]["jsonSchemaCalls"], 1);
    assert!(server.requests()[1].body.get("response_format").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_or_cut_answer_exits_1_with_the_report() {
    let server = ScriptServer::start([Step::content(r#"{"sum": 7}"#), Step::content("1 2")])
        .await
        .unwrap();
    let output = check(&server, &["--model", "m1"]).await;
    output.says(1, "m1: the structured answer is wrong (2 + 3)");
    assert_eq!(output.json()["structured"]["right"], false);

    let server = ScriptServer::start([
        Step::content(r#"{"su"#).finish_reason("length"),
        Step::content("1 2"),
    ])
    .await
    .unwrap();
    let output = check(&server, &["--model", "m1"]).await;
    output.says(1, "was cut off after");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_lists_no_model_needs_one_named_and_an_unreachable_one_exits_2() {
    // The scripted server serves no /models: 404, so nothing is listed.
    let server = ScriptServer::start([]).await.unwrap();
    let output = check(&server, &[]).await;
    output.fails(2, "lists no model: name one with --model");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let output = run(concord().args([
        "llm",
        "check",
        "--base-url",
        &format!("http://127.0.0.1:{port}/v1"),
    ]));
    output.says(2, "cannot be used");
}
