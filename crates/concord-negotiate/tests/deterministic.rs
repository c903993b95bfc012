//! The deterministic negotiator: accept what it can serve as written (naming styles are
//! mapped), counter on what it cannot (a missing or optional input, a type clash, extras),
//! reject only what no protocol can satisfy (an unknown action, an output the action never
//! returns); test cases
//! drafted and judged; error reports diagnosed. Same inputs, same output.

mod support;

use concord_negotiate::{DeterministicNegotiator, JudgeContext, Need, ProtocolDocument, TestCases};
use concord_proto::{Decision, FixDecision};
use serde_json::{json, Value};
use support::{need, product_action, SEED_CASES, SEED_FULL};

fn provider_judges(candidate: &str) -> Decision {
    let actions = [product_action()];
    DeterministicNegotiator::new()
        .judge_now(JudgeContext::Provider { actions: &actions }, candidate)
}

/// A candidate like the canonical one, with the request's action fields replaced.
fn candidate_with_request_fields(fields: Value, required: Value) -> String {
    let mut document = ProtocolDocument::parse(
        &DeterministicNegotiator::new()
            .draft_now(&need(), &product_action())
            .unwrap(),
    )
    .unwrap();
    let mut request = document.request_schema.take().unwrap();
    let properties = request["properties"].as_object_mut().unwrap();
    properties.retain(|name, _| ["messageId", "type", "action"].contains(&name.as_str()));
    properties.extend(fields.as_object().unwrap().clone());
    let mut all_required = vec![json!("messageId"), json!("type"), json!("action")];
    all_required.extend(required.as_array().unwrap().iter().cloned());
    request["required"] = Value::Array(all_required);
    format!(
        "# Requirement\nGet product info\n\n## Request\n```json\n{}\n```\n\n## Response\n```json\n{}\n```\n",
        serde_json::to_string_pretty(&request).unwrap(),
        serde_json::to_string_pretty(document.response_schema.as_ref().unwrap()).unwrap()
    )
}

fn expect_counter(decision: Decision) -> (String, String) {
    match decision {
        Decision::Counter {
            candidate,
            modification_summary,
        } => (candidate, modification_summary),
        other => panic!("expected a counter-proposal, got {other:?}"),
    }
}

fn expect_reject(decision: Decision) -> String {
    match decision {
        Decision::Reject { reason } => reason,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn a_draft_from_the_published_action_is_accepted() {
    let draft = DeterministicNegotiator::new()
        .draft_now(&need(), &product_action())
        .unwrap();
    assert_eq!(provider_judges(&draft), Decision::Accept);
    let document = ProtocolDocument::parse(&draft).unwrap();
    assert_eq!(
        document.request_schema.unwrap()["properties"]["productId"]["type"],
        "string"
    );
    assert_eq!(
        document.response_schema.unwrap()["required"],
        json!(["messageId", "type", "status"]),
        "an error response carries no product info, so the schema does not require it"
    );
}

#[test]
fn the_seed_candidate_as_written_is_accepted_by_a_product_provider() {
    assert_eq!(provider_judges(SEED_FULL), Decision::Accept);
}

#[test]
fn naming_style_differences_are_served_as_written() {
    let candidate = candidate_with_request_fields(
        json!({"product_id": {"type": "string"}, "product_name": {"type": "string"}}),
        json!(["product_id"]),
    );
    assert_eq!(provider_judges(&candidate), Decision::Accept);
    // The requester, who can supply product_id in its own naming, accepts our canonical
    // protocol too.
    let counter = DeterministicNegotiator::new()
        .draft_now(&need(), &product_action())
        .unwrap();
    let requester_need = Need {
        input: Some(json!({"type": "object", "properties": {"product_id": {"type": "string"}}})),
        ..need()
    };
    let action = product_action();
    let decision = DeterministicNegotiator::new().judge_now(
        JudgeContext::Requester {
            need: &requester_need,
            peer_action: &action,
        },
        &counter,
    );
    assert_eq!(decision, Decision::Accept);
}

#[test]
fn optional_extras_get_a_counter_that_drops_them() {
    let candidate = candidate_with_request_fields(
        json!({"productId": {"type": "string"}, "color": {"type": "string"}}),
        json!(["productId"]),
    );
    let (counter, summary) = expect_counter(provider_judges(&candidate));
    assert!(
        summary.contains("drop request field `color`, which action `getProductInfo` does not take"),
        "{summary}"
    );
    assert!(!counter.contains("\"color\""));
    assert_eq!(
        provider_judges(&counter),
        Decision::Accept,
        "our own counter is acceptable to us"
    );
}

#[test]
fn a_missing_field_we_can_default_is_served_as_written() {
    let mut action = product_action();
    action.input["properties"]["locale"] = json!({"type": "string", "default": "en-US"});
    action.input["required"] = json!(["productId", "locale"]);
    let candidate = candidate_with_request_fields(
        json!({"productId": {"type": "string"}}),
        json!(["productId"]),
    );
    let actions = [action];
    let decision = DeterministicNegotiator::new()
        .judge_now(JudgeContext::Provider { actions: &actions }, &candidate);
    assert_eq!(
        decision,
        Decision::Accept,
        "the default stands in for `locale`"
    );
}

#[test]
fn a_missing_required_field_gets_a_counter_naming_it() {
    let candidate = candidate_with_request_fields(
        json!({"productName": {"type": "string"}}),
        json!(["productName"]),
    );
    let (counter, summary) = expect_counter(provider_judges(&candidate));
    assert!(
        summary.contains("add request field `productId`, which action `getProductInfo` requires"),
        "{summary}"
    );
    assert!(counter.contains("\"productId\""));
}

#[test]
fn a_type_clash_gets_a_counter_naming_the_field() {
    let candidate = candidate_with_request_fields(
        json!({"productId": {"type": "integer"}}),
        json!(["productId"]),
    );
    let (_, summary) = expect_counter(provider_judges(&candidate));
    assert!(
        summary.contains("request field `productId`: `productId` in the request has type integer but `productId` needs string"),
        "{summary}"
    );
}

#[test]
fn an_output_the_action_never_returns_is_rejected_naming_it() {
    let document = ProtocolDocument::parse(
        &DeterministicNegotiator::new()
            .draft_now(&need(), &product_action())
            .unwrap(),
    )
    .unwrap();
    let mut response = document.response_schema.clone().unwrap();
    let info = &mut response["properties"]["productInfo"];
    info["properties"]["stockLevel"] = json!({"type": "integer"});
    info["required"] = json!(["productId", "stockLevel"]);
    let text = format!(
        "# Requirement\nGet product info\n\n## Request\n```json\n{}\n```\n\n## Response\n```json\n{}\n```\n",
        serde_json::to_string_pretty(document.request_schema.as_ref().unwrap()).unwrap(),
        serde_json::to_string_pretty(&response).unwrap()
    );
    let reason = expect_reject(provider_judges(&text));
    assert!(
        reason.contains("the candidate requires `stockLevel` in `productInfo`, which action `getProductInfo` does not return"),
        "{reason}"
    );
}

#[test]
fn an_unknown_action_is_rejected_and_an_unreadable_candidate_countered() {
    let text = DeterministicNegotiator::new()
        .draft_now(&need(), &product_action())
        .unwrap()
        .replace(
            "\"const\": \"getProductInfo\"",
            "\"const\": \"deleteEverything\"",
        );
    assert_eq!(
        expect_reject(provider_judges(&text)),
        "we have no action `deleteEverything`"
    );
    // Our only action: a candidate we cannot read gets our protocol, saying why.
    let (counter, summary) = expect_counter(provider_judges("just words"));
    assert!(
        summary.contains("We could not read the candidate"),
        "{summary}"
    );
    assert_eq!(provider_judges(&counter), Decision::Accept);
    let based_on = include_str!("fixtures/seed-based-on-uri.zh.md");
    let (_, summary) = expect_counter(provider_judges(based_on));
    assert!(
        summary.contains("we do not hold that protocol's text"),
        "{summary}"
    );
    // With several actions and no name to go by, a rejection that lists ours.
    let mut other = product_action();
    other.name = "getStock".into();
    let actions = [product_action(), other];
    let reason = expect_reject(
        DeterministicNegotiator::new()
            .judge_now(JudgeContext::Provider { actions: &actions }, "just words"),
    );
    assert!(reason.contains("`getProductInfo`, `getStock`"), "{reason}");
}

#[test]
fn a_requester_rejects_a_counter_it_cannot_use() {
    let wanted = Need {
        output: Some(
            json!({"type": "object", "properties": {"stockLevel": {"type": "integer"}}, "required": ["stockLevel"]}),
        ),
        ..need()
    };
    let action = product_action();
    let counter = DeterministicNegotiator::new()
        .draft_now(&need(), &action)
        .unwrap();
    let decision = DeterministicNegotiator::new().judge_now(
        JudgeContext::Requester {
            need: &wanted,
            peer_action: &action,
        },
        &counter,
    );
    let reason = expect_reject(decision);
    assert!(
        reason.contains("the response does not carry what we need"),
        "{reason}"
    );
    assert!(reason.contains("`stockLevel`"), "{reason}");
    // And it will not even draft for an action that cannot meet the need.
    assert!(DeterministicNegotiator::new()
        .draft_now(&wanted, &action)
        .is_err());
}

#[test]
fn drafted_test_cases_are_valid_and_accepted_by_the_other_side() {
    let negotiator = DeterministicNegotiator::new();
    let mut action = product_action();
    action.input["properties"]["currency"] = json!({"type": "string", "enum": ["USD", "EUR"]});
    let protocol =
        ProtocolDocument::parse(&negotiator.draft_now(&need(), &action).unwrap()).unwrap();
    let text = negotiator.draft_test_cases_now(&protocol).unwrap();
    let cases = TestCases::parse(&text).unwrap().cases;
    let names: Vec<&str> = cases.iter().map(|case| case.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Test case 1: found",
            "Test case 2: `currency` = \"EUR\"",
            "Test case 3: unknown `productId`"
        ]
    );
    assert_eq!(cases[0].request["action"], "getProductInfo");
    assert_eq!(cases[2].request["productId"], "does-not-exist");
    assert_eq!(cases[2].response["status"]["code"], 404);
    assert_eq!(
        cases[2].response.get("productInfo"),
        None,
        "an error response carries no result"
    );
    assert_eq!(cases[2].response["messageId"], "msg003");
    assert_eq!(
        negotiator.judge_test_cases_now(&protocol, &text),
        Decision::Accept
    );
    assert_eq!(
        text,
        negotiator.draft_test_cases_now(&protocol).unwrap(),
        "deterministic"
    );
}

#[test]
fn the_seed_test_cases_fit_the_seed_protocol() {
    let protocol = ProtocolDocument::parse(SEED_FULL).unwrap();
    assert_eq!(
        DeterministicNegotiator::new().judge_test_cases_now(&protocol, SEED_CASES),
        Decision::Accept
    );
}

#[test]
fn test_cases_that_break_the_schema_are_rejected_with_pointers() {
    let protocol = ProtocolDocument::parse(SEED_FULL).unwrap();
    let broken = SEED_CASES.replace("\"price\": 1299.99", "\"price\": \"1299.99\"");
    let reason =
        expect_reject(DeterministicNegotiator::new().judge_test_cases_now(&protocol, &broken));
    assert!(
        reason.contains(
            "测试用例1: response /productInfo/price: \"1299.99\" is not of type \"number\""
        ),
        "{reason}"
    );
}

#[test]
fn diagnosis_accepts_only_reports_our_messages_confirm() {
    let protocol = ProtocolDocument::parse(SEED_FULL).unwrap();
    let negotiator = DeterministicNegotiator::new();
    let good = json!({"messageId": "m", "type": "RESPONSE", "status": {"code": 200, "message": "OK"},
        "productInfo": {"productId": "P1", "productName": "n", "productDescription": "d", "price": 1.0, "currency": "USD"}});
    assert!(matches!(
        negotiator.diagnose_now(&protocol, std::slice::from_ref(&good)),
        FixDecision::Reject { .. }
    ));
    let mut bad = good;
    bad["status"].as_object_mut().unwrap().remove("code");
    assert_eq!(
        negotiator.diagnose_now(&protocol, &[bad]),
        FixDecision::Accept
    );
}

#[test]
fn the_trait_records_deterministic_steps() {
    use concord_negotiate::{Negotiator, PolicyKind, Step};
    let negotiator = DeterministicNegotiator::new();
    let decided = futures_lite_block_on(negotiator.draft(&need(), &product_action())).unwrap();
    assert_eq!(decided.record.step, Step::Draft);
    assert_eq!(decided.record.policy, PolicyKind::Deterministic);
    assert_eq!(decided.record.llm_calls, 0);
}

/// Polls a future that never waits (the deterministic negotiator's futures are ready at once).
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut context) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the deterministic negotiator never waits"),
    }
}

#[test]
fn drafted_cases_for_the_seed_protocol_use_conventional_envelope_values() {
    let protocol = ProtocolDocument::parse(SEED_FULL).unwrap();
    let text = DeterministicNegotiator::new()
        .draft_test_cases_now(&protocol)
        .unwrap();
    let cases = TestCases::parse(&text).unwrap().cases;
    assert_eq!(cases[0].request["type"], "REQUEST");
    assert_eq!(cases[0].request["action"], "getProductInfo");
    assert_eq!(cases[0].response["type"], "RESPONSE");
}

/// The drafted protocol of a `book` action with this input.
fn booking_protocol(input: Value) -> ProtocolDocument {
    let action = concord_negotiate::ActionSpec {
        name: "book".into(),
        description: "Books a table.".into(),
        input,
        output: json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
    };
    ProtocolDocument::parse(&concord_negotiate::canonical_protocol(
        &action,
        std::time::Duration::from_secs(15),
    ))
    .unwrap()
}

#[test]
fn test_cases_are_drafted_for_inputs_a_full_fill_breaks() {
    let negotiator = DeterministicNegotiator::new();
    for input in [
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {}, "c": {}, "d": {}},
               "required": ["a"], "maxProperties": 2}),
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
               "required": ["a"], "not": {"required": ["a", "b"]}}),
    ] {
        let protocol = booking_protocol(input.clone());
        let text = negotiator
            .draft_test_cases_now(&protocol)
            .unwrap_or_else(|error| panic!("{input}: {error}"));
        assert!(!TestCases::parse(&text).unwrap().cases.is_empty());
        assert_eq!(
            negotiator.judge_test_cases_now(&protocol, &text),
            Decision::Accept,
            "{input}"
        );
    }
}

#[test]
fn a_drafted_case_the_schema_refuses_is_dropped_alone() {
    let negotiator = DeterministicNegotiator::new();
    let input = json!({
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b", "c"]}},
        "required": ["kind"],
        "not": {"properties": {"kind": {"const": "b"}}}
    });
    let protocol = booking_protocol(input);
    let text = negotiator.draft_test_cases_now(&protocol).unwrap();
    let cases = TestCases::parse(&text).unwrap().cases;
    let kinds: Vec<&Value> = cases.iter().map(|case| &case.request["kind"]).collect();
    assert_eq!(kinds, [&json!("a"), &json!("c")]);
    assert_eq!(cases[1].name, "Test case 2: `kind` = \"c\"");
    assert_eq!(cases[1].request["messageId"], "msg002");
    assert_eq!(
        negotiator.judge_test_cases_now(&protocol, &text),
        Decision::Accept
    );
}

#[test]
fn a_result_a_full_fill_breaks_is_drafted_from_one_branch() {
    let negotiator = DeterministicNegotiator::new();
    let action = concord_negotiate::ActionSpec {
        name: "book".into(),
        description: "Books a table.".into(),
        input: json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        output: json!({"title": "Booking", "type": "object",
            "properties": {"table": {"type": "integer"}, "waitlist": {"type": "integer"}},
            "oneOf": [{"required": ["table"]}, {"required": ["waitlist"]}]}),
    };
    let protocol = ProtocolDocument::parse(&concord_negotiate::canonical_protocol(
        &action,
        std::time::Duration::from_secs(15),
    ))
    .unwrap();
    let text = negotiator.draft_test_cases_now(&protocol).unwrap();
    let cases = TestCases::parse(&text).unwrap().cases;
    assert_eq!(cases[0].response["booking"], json!({"table": 1}));
    assert_eq!(
        negotiator.judge_test_cases_now(&protocol, &text),
        Decision::Accept
    );
}
