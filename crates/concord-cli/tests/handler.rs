//! `concord handler generate|run|test`, with template handlers for the seeds' product-info
//! protocol, hostile modules under limits, and the LLM path against a scripted server.

mod support;

use concord_llm_script::{ScriptServer, Step};
use serde_json::{json, Value};
use support::*;

fn generate(extra: &[&str]) -> Output {
    run(concord()
        .args(["handler", "generate"])
        .arg(seed("seed-product-info.zh.md"))
        .args(extra))
}

#[test]
fn handler_test_passes_the_seed_cases_with_template_handlers() {
    let output = run(concord()
        .args(["handler", "test"])
        .arg(seed("seed-product-info.zh.md"))
        .arg(seed("seed-test-cases.zh.md")));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    assert_eq!(
        output.stdout,
        "case       result  step  problem\n\
         测试用例1  pass\n\
         测试用例2  pass\n\
         2 of 2 case(s) passed\n"
    );
    // With our own action in snake_case: the templates convert names both ways.
    let output = run(concord()
        .args(["handler", "test"])
        .arg(seed("seed-product-info.zh.md"))
        .arg(seed("seed-test-cases.zh.md"))
        .arg("--action-schema")
        .arg(fixture("handler-product-action.json")));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
}

#[test]
fn handler_test_reports_a_wrong_module_with_a_diff_and_a_fix_report() {
    let output = run(concord()
        .args(["handler", "test"])
        .arg(seed("seed-product-info.zh.md"))
        .arg(seed("seed-test-cases.zh.md"))
        .arg("--provider")
        .arg(fixture("handler-wrong-provider.js")));
    assert_eq!(output.code, 1, "{}{}", output.stdout, output.stderr);
    assert!(output.stdout.starts_with(
        "case       result  step                     problem\n\
         测试用例1  pass\n\
         测试用例2  FAIL    provider encodeResponse  differs from the case at /productInfo: expected null, got {}\n\
         1 of 2 case(s) passed\n"
    ), "{}", output.stdout);
    assert!(
        output.stdout.contains(
            "Fix-error report (for fixErrorNegotiation.errorDescription):\n\
         The handler code fails 1 of 2 negotiated test case(s)."
        ),
        "{}",
        output.stdout
    );
    assert!(output
        .stdout
        .contains("- /productInfo: expected null, got {}"));
}

#[test]
fn handler_generate_prints_the_same_module_every_time() {
    let first = generate(&["--role", "provider", "--action", "getProductInfo"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first
        .stdout
        .starts_with("// Concord protocol handler: provider side."));
    assert!(first.stdout.contains("function decodeRequest(message) {"));
    assert!(first.stdout.contains("function encodeResponse(outcome) {"));
    assert_eq!(
        first.stderr,
        "concord: provider module written by the template; passes 2 test case(s)\n"
    );
    let second = generate(&["--role", "provider", "--action", "getProductInfo"]);
    assert_eq!(first.stdout, second.stdout);

    let requester = generate(&[
        "--role",
        "requester",
        "--action-schema",
        fixture("handler-product-action.json").to_str().unwrap(),
        "--cases",
        seed("seed-test-cases.zh.md").to_str().unwrap(),
    ]);
    assert_eq!(requester.code, 0, "{}", requester.stderr);
    assert!(requester.stdout.contains("function encodeRequest(call) {"));
    assert!(requester
        .stdout
        .contains("{ name: \"product_id\", required: true }"));
}

#[test]
fn handler_generate_maps_a_requester_need_in_its_own_naming() {
    let output = generate(&[
        "--role",
        "requester",
        "--need",
        fixture("handler-need.json").to_str().unwrap(),
        "--cases",
        seed("seed-test-cases.zh.md").to_str().unwrap(),
    ]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    let path = std::env::temp_dir().join(format!("concord-need-{}.js", std::process::id()));
    std::fs::write(&path, &output.stdout).unwrap();
    let request = run(concord().args(["handler", "run"]).arg(&path).args([
        "encodeRequest",
        r#"{"messageId": "m1", "input": {"product-id": "P1"}}"#,
    ]));
    assert_eq!(request.code, 0, "{}", request.stderr);
    assert_eq!(
        serde_json::from_str::<Value>(&request.stdout).unwrap()["productId"],
        "P1"
    );
    let response = r#"{"messageId": "m1", "type": "RESPONSE", "status": {"code": 200, "message": "OK"},
        "productInfo": {"productId": "P1", "productName": "n", "productDescription": "d", "price": 5, "currency": "EUR"}}"#;
    let reply = run(concord()
        .args(["handler", "run"])
        .arg(&path)
        .args(["decodeResponse", response]));
    assert_eq!(reply.code, 0, "{}", reply.stderr);
    assert_eq!(
        serde_json::from_str::<Value>(&reply.stdout).unwrap(),
        json!({"messageId": "m1", "output": {"price": 5, "currency": "EUR"}})
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn handler_generate_says_what_it_needs() {
    let output = generate(&["--role", "provider"]);
    output.says(2, "pass --action NAME or --action-schema FILE");
    let output = run(concord()
        .args([
            "handler",
            "generate",
            "--role",
            "provider",
            "--action",
            "getProductInfo",
        ])
        .arg(seed("seed-based-on-uri.zh.md")));
    assert_eq!(output.code, 1);
    assert_eq!(
        output.stderr,
        "concord: no handler template fits: the protocol has no request and response JSON \
         Schemas, and no LLM is configured to write the module\n"
    );
}

#[test]
fn handler_run_prints_the_result_or_names_the_error() {
    let module = generate(&["--role", "requester", "--action", "getProductInfo"]).stdout;
    let path = std::env::temp_dir().join(format!("concord-handler-{}.js", std::process::id()));
    std::fs::write(&path, module).unwrap();
    let output = run(concord().args(["handler", "run"]).arg(&path).args([
        "encodeRequest",
        r#"{"messageId": "m1", "input": {"productId": "P1"}}"#,
    ]));
    assert_eq!(output.code, 0, "{}", output.stderr);
    let message: Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(
        message,
        json!({"messageId": "m1", "type": "REQUEST", "action": "getProductInfo", "productId": "P1"})
    );
    let output = run(concord()
        .args(["handler", "run"])
        .arg(&path)
        .args(["encodeRequest", r#"{"messageId": "m1", "input": {}}"#]));
    assert_eq!(output.code, 1);
    assert!(output.stderr.starts_with(
        "concord: encodeRequest failed: handler threw: TypeError: the input lacks \"productId\", which is required"
    ), "{}", output.stderr);
    // The role follows from the function: a requester module has no decodeRequest.
    let output = run(concord()
        .args(["handler", "run"])
        .arg(&path)
        .args(["decodeRequest", "{}"]));
    assert_eq!(output.code, 1);
    assert!(output
        .stderr
        .ends_with("module for the provider role does not define function `decodeRequest`\n"));
    for (arguments, says) in [
        (["encodeReq", "{}"], "unknown handler function `encodeReq`"),
        (["encodeRequest", "{bad"], "the argument is not valid JSON"),
    ] {
        let output = run(concord()
            .args(["handler", "run"])
            .arg(&path)
            .args(arguments));
        output.says(2, says);
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn handler_run_names_the_limit_a_module_hits() {
    let hostile = fixture("handler-hostile.js");
    let output = run(concord().args(["handler", "run"]).arg(&hostile).args([
        "encodeRequest",
        r#"{"input": {"spin": true}}"#,
        "--timeout-ms",
        "50",
    ]));
    assert_eq!(output.code, 1);
    assert_eq!(
        output.stderr,
        "concord: encodeRequest was stopped: handler exceeded its time limit of 50ms\n"
    );
    let output = run(concord().args(["handler", "run"]).arg(&hostile).args([
        "encodeRequest",
        r#"{"input": {}}"#,
        "--memory-mb",
        "8",
        "--timeout-ms",
        "5000",
    ]));
    assert_eq!(output.code, 1);
    assert_eq!(
        output.stderr,
        "concord: encodeRequest was stopped: handler exceeded its memory limit of 8388608 bytes\n"
    );
    let output = run(concord().args(["handler", "run"]).arg(&hostile).args([
        "decodeResponse",
        "{}",
        "--memory-mb",
        "0",
    ]));
    output.says(2, "invalid limit `memory_bytes`");
}

#[tokio::test(flavor = "multi_thread")]
async fn handler_generate_with_llm_writes_what_no_template_fits() {
    let module = std::fs::read_to_string(fixture("handler-wrong-provider.js"))
        .unwrap()
        .replace("response.productInfo = {};", "response.productInfo = null;");
    let server = ScriptServer::start([
        Step::content(json!({"module": "function decodeRequest(m) {"}).to_string()),
        Step::content(json!({ "module": module }).to_string()).usage(1000, 200),
    ])
    .await
    .unwrap();
    let base_url = server.base_url();
    let output = tokio::task::spawn_blocking(move || {
        run(concord()
            .args(["handler", "generate", "--role", "provider", "--llm"])
            .arg(seed("seed-based-on-uri.zh.md"))
            .args(["--action", "getProductInfo", "--cases"])
            .arg(seed("seed-test-cases.zh.md"))
            .env("CONCORD_LLM_BASE_URL", base_url)
            .env("CONCORD_LLM_MODEL", "test-model"))
    })
    .await
    .unwrap();
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert_eq!(output.stdout, module);
    // One line: who wrote it, why not the template, what checked it, what it cost.
    assert!(
        output.stderr.starts_with(
            "concord: provider module written by the LLM on attempt 2 (no template: no handler \
         template fits: the protocol has no request and response JSON Schemas); passes 2 test \
         case(s); 2 LLM call(s)"
        ),
        "{}",
        output.stderr
    );
    assert_eq!(output.stderr.lines().count(), 1, "{}", output.stderr);
    assert_eq!(server.requests().len(), 2);
}
