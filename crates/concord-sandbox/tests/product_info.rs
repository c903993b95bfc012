//! The hand-written product-info handlers against the two test cases of the ANP
//! meta-protocol 05 seed, run the way the test-case runner will: requester encode → provider
//! decode → action stub answering the case's response → provider encode → requester decode.

use std::path::PathBuf;

use concord_sandbox::{Function, Handler, Limits, Role, Sandbox};
use serde_json::{json, Value};

const REQUESTER: &str = include_str!("fixtures/product-info-requester.js");
const PROVIDER: &str = include_str!("fixtures/product-info-provider.js");

fn seed_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/seeds/anp-meta-protocol-05.md"
    ))
}

/// The JSON object that follows `marker` in `text`, found by brace matching.
fn json_after(text: &str, marker: &str) -> Value {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("seed lacks {marker:?}"));
    let open = start + text[start..].find('{').expect("JSON object after marker");
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (offset, c) in text[open..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            '{' if !in_string => depth += 1,
            '}' if !in_string => {
                depth -= 1;
                if depth == 0 {
                    return serde_json::from_str(&text[open..=open + offset]).expect("seed JSON");
                }
            }
            _ => {}
        }
    }
    panic!("unterminated JSON after {marker:?}")
}

/// (request, response) of each test case in the seed, or `None` when the seed is absent.
fn seed_cases() -> Option<Vec<(Value, Value)>> {
    let Ok(seed) = std::fs::read_to_string(seed_path()) else {
        eprintln!("skipping: seed {} not found", seed_path().display());
        return None;
    };
    let cases = ["# 测试用例1", "# 测试用例2"]
        .iter()
        .map(|heading| {
            let case = &seed[seed.find(heading).expect("test case heading")..];
            (
                json_after(case, "测试请求数据"),
                json_after(case, "测试响应数据"),
            )
        })
        .collect();
    Some(cases)
}

fn handlers() -> (Handler, Handler) {
    (
        Sandbox::load(REQUESTER, Role::Requester, Limits::default()).expect("requester loads"),
        Sandbox::load(PROVIDER, Role::Provider, Limits::default()).expect("provider loads"),
    )
}

/// What the provider's action answers for a case: the product record, or the error.
fn action_outcome(request: &Value, response: &Value) -> Value {
    match response["status"]["code"].as_i64() {
        Some(200) => json!({"request": request, "result": response["productInfo"]}),
        _ => json!({"request": request, "error": response["status"]}),
    }
}

#[test]
fn seed_test_cases_pass_end_to_end() {
    let Some(cases) = seed_cases() else { return };
    assert_eq!(cases.len(), 2);
    let (mut requester, mut provider) = handlers();
    for (expected_request, expected_response) in cases {
        let mut input = json!({
            "messageId": expected_request["messageId"],
            "productId": expected_request["productId"],
        });
        if let Some(name) = expected_request.get("productName") {
            input["productName"] = name.clone();
        }
        let request = requester.call(Function::EncodeRequest, &input).unwrap();
        assert_eq!(request, expected_request);

        let action_input = provider.call(Function::DecodeRequest, &request).unwrap();
        assert_eq!(
            action_input,
            json!({"productId": expected_request["productId"]})
        );

        let outcome = action_outcome(&request, &expected_response);
        let response = provider.call(Function::EncodeResponse, &outcome).unwrap();
        assert_eq!(response, expected_response);

        let output = requester.call(Function::DecodeResponse, &response).unwrap();
        assert_eq!(output["messageId"], expected_request["messageId"]);
        assert_eq!(output["code"], expected_response["status"]["code"]);
        assert_eq!(output["productInfo"], expected_response["productInfo"]);
    }
}

#[test]
fn seed_case_outcomes_match_their_expected_results() {
    let Some(cases) = seed_cases() else { return };
    let (mut requester, _) = handlers();
    // Case 1: "成功获取产品信息，状态码为200。"
    let found = requester
        .call(Function::DecodeResponse, &cases[0].1)
        .unwrap();
    assert_eq!(found["code"], 200);
    assert_eq!(found["productInfo"]["price"], 1299.99);
    assert_eq!(found["productInfo"]["currency"], "USD");
    // Case 2: "请求的产品不存在，返回状态码404，产品信息为空。"
    let missing = requester
        .call(Function::DecodeResponse, &cases[1].1)
        .unwrap();
    assert_eq!(missing["code"], 404);
    assert_eq!(missing["productInfo"], Value::Null);
}

#[test]
fn handlers_reject_malformed_messages_with_the_module_error() {
    let (mut requester, mut provider) = handlers();
    let error = requester
        .call(Function::EncodeRequest, &json!({"messageId": "m1"}))
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("TypeError: productId must be a non-empty string"),
        "{error}"
    );
    assert!(error.to_string().contains("handler.js:"), "{error}");
    let error = provider
        .call(Function::DecodeRequest, &json!({"type": "RESPONSE"}))
        .unwrap_err();
    assert!(
        error.to_string().contains("not a getProductInfo REQUEST"),
        "{error}"
    );
}

#[test]
fn optional_product_name_is_carried_through() {
    let (mut requester, mut provider) = handlers();
    let request = requester
        .call(
            Function::EncodeRequest,
            &json!({"messageId": "m2", "productId": "P1", "productName": "笔记本"}),
        )
        .unwrap();
    assert_eq!(request["productName"], "笔记本");
    let input = provider.call(Function::DecodeRequest, &request).unwrap();
    assert_eq!(input, json!({"productId": "P1", "productName": "笔记本"}));
}

#[test]
fn each_module_is_loaded_for_its_own_role_only() {
    let error = Sandbox::load(REQUESTER, Role::Provider, Limits::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "module for the provider role does not define function `decodeRequest`"
    );
    let (mut requester, _) = handlers();
    let error = requester
        .call(Function::DecodeRequest, &json!({}))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "`decodeRequest` belongs to the provider role, but this handler was loaded as requester"
    );
}
