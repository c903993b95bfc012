//! Verification: wire messages against the protocol's schemas, deliberately wrong modules
//! against the seeds' test cases (diffs and the fix-error report), and cases the runner
//! cannot run.

mod common;

use common::{load, product_action, seed, seed_cases, SEED_BASED_ON};
use concord_handlers::{
    template, CaseRunner, CaseStep, CasesReport, Code, Direction, Local, Problem, Verifier,
};
use concord_negotiate::{ProtocolDocument, TestCases};
use concord_sandbox::{Limits, Role, Sandbox, SandboxError};
use serde_json::json;

/// A provider that reports errors with the right status but keeps an empty product.
const WRONG_PROVIDER: &str = r#"
function decodeRequest(message) {
  return { messageId: message.messageId, input: { productId: message.productId } };
}
function encodeResponse(outcome) {
  const response = { messageId: outcome.messageId, type: "RESPONSE" };
  if (outcome.error !== undefined) {
    response.status = { code: outcome.error.code, message: outcome.error.message };
    response.productInfo = {};
  } else {
    response.status = { code: 200, message: "OK" };
    response.productInfo = outcome.result;
  }
  return response;
}
"#;

/// A requester that never reports errors.
const WRONG_REQUESTER: &str = r#"
function encodeRequest(call) {
  return { messageId: call.messageId, type: "REQUEST", action: "getProductInfo", productId: call.input.productId };
}
function decodeResponse(message) {
  return { messageId: message.messageId, output: message.productInfo };
}
"#;

fn run_with(requester_source: Option<&str>, provider_source: Option<&str>) -> CasesReport {
    let document = seed();
    let verifier = Verifier::new(&document).unwrap();
    let provider_side = Local::Provider(product_action());
    let requester_side = Local::requester_for(&product_action());
    let requester_source = requester_source.map_or_else(
        || template(&document, &requester_side).unwrap(),
        str::to_owned,
    );
    let provider_source = provider_source.map_or_else(
        || template(&document, &provider_side).unwrap(),
        str::to_owned,
    );
    let mut requester = load(&requester_source, &requester_side);
    let mut provider = load(&provider_source, &provider_side);
    CaseRunner::new(&verifier)
        .with_side(&mut requester, &requester_side)
        .with_side(&mut provider, &provider_side)
        .run(&seed_cases())
}

#[test]
fn wire_messages_are_validated_against_the_seed_schemas() {
    let verifier = Verifier::new(&seed()).unwrap();
    assert!(verifier.has_schemas());
    let cases = seed_cases().cases;
    assert_eq!(
        verifier.check(Direction::Request, &cases[0].request),
        Ok(())
    );
    assert_eq!(
        verifier.check(Direction::Response, &cases[0].response),
        Ok(())
    );
    // The not-found response: an error, checked against the envelope only.
    assert_eq!(
        verifier.check(Direction::Response, &cases[1].response),
        Ok(())
    );

    let mut request = cases[0].request.clone();
    request.as_object_mut().unwrap().remove("productId");
    let invalid = verifier.check(Direction::Request, &request).unwrap_err();
    assert!(invalid.to_string().contains("productId"), "{invalid}");

    let mut response = cases[0].response.clone();
    response["productInfo"]["price"] = json!("1299.99");
    let invalid = verifier.check(Direction::Response, &response).unwrap_err();
    assert_eq!(invalid.violations[0].pointer, "/productInfo/price");
    let description = invalid.error_description(&response);
    assert!(description.starts_with("The response message we received breaks the agreed protocol's response schema:\n- /productInfo/price: "), "{description}");

    // A success with a null product is not an error response: the full schema applies.
    let mut empty = cases[0].response.clone();
    empty["productInfo"] = json!(null);
    let invalid = verifier.check(Direction::Response, &empty).unwrap_err();
    assert_eq!(invalid.violations[0].pointer, "/productInfo");

    assert!(verifier.check(Direction::Request, &json!([1])).is_err());
    // Without schemas, only the shape of a message is checked.
    let loose = Verifier::new(&ProtocolDocument::parse(SEED_BASED_ON).unwrap()).unwrap();
    assert_eq!(
        loose.check(Direction::Request, &json!({"anything": 1})),
        Ok(())
    );
    assert!(loose.check(Direction::Response, &json!("text")).is_err());
}

#[test]
fn a_wrong_provider_fails_the_not_found_case_with_a_diff_and_a_fix_report() {
    let report = run_with(None, Some(WRONG_PROVIDER));
    assert!(!report.passed());
    assert!(report.cases[0].passed(), "{}", report.details());
    let case = &report.cases[1];
    assert_eq!(case.name, "测试用例2");
    assert_eq!(case.failures.len(), 1, "{}", report.details());
    let failure = &case.failures[0];
    assert_eq!(failure.step, CaseStep::EncodeResponse);
    let Problem::Mismatch {
        expected,
        actual,
        differences,
    } = &failure.problem
    else {
        panic!("{:?}", failure.problem)
    };
    assert_eq!(expected["productInfo"], json!(null));
    assert_eq!(actual["productInfo"], json!({}));
    assert_eq!(differences.len(), 1);
    assert_eq!(differences[0].pointer, "/productInfo");
    assert_eq!(
        differences[0].to_string(),
        "/productInfo: expected null, got {}"
    );

    let table = report.table();
    assert!(
        table.contains("测试用例2  FAIL    provider encodeResponse  differs from the case at /productInfo: expected null, got {}"),
        "{table}"
    );
    let fix = report.fix_error_report().unwrap();
    assert!(
        fix.starts_with("The handler code fails 1 of 2 negotiated test case(s)."),
        "{fix}"
    );
    assert!(
        fix.contains(
            "Test case \"测试用例2\", provider encodeResponse: the response message it produced differs from what the case expects:\n\
             - /productInfo: expected null, got {}\n"
        ),
        "{fix}"
    );
    assert!(fix.contains("Expected: {\"messageId\":\"msg002\""), "{fix}");
    assert!(fix.contains("Actual: {\"messageId\":\"msg002\""), "{fix}");
}

#[test]
fn a_wrong_requester_fails_where_the_response_reports_an_error() {
    let report = run_with(Some(WRONG_REQUESTER), None);
    assert!(report.cases[0].passed(), "{}", report.details());
    let failure = &report.cases[1].failures[0];
    assert_eq!(failure.step, CaseStep::DecodeResponse);
    let lines: Vec<String> = match &failure.problem {
        Problem::Mismatch { differences, .. } => {
            differences.iter().map(ToString::to_string).collect()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        lines,
        [
            "/error: expected {\"code\":404,\"message\":\"产品未找到\"}, got absent",
            "/output: expected absent, got null",
        ]
    );
    let fix = report.fix_error_report().unwrap();
    assert!(
        fix.contains(
            "requester decodeResponse: the result it returned for the case's response differs"
        ),
        "{fix}"
    );
}

#[test]
fn a_module_that_breaks_the_schema_or_throws_is_reported_as_such() {
    let string_price = WRONG_PROVIDER
        .replace("response.productInfo = {};", "response.productInfo = null;")
        .replace(
            "response.productInfo = outcome.result;",
            "response.productInfo = Object.assign({}, outcome.result, { price: String(outcome.result.price) });",
        );
    let report = run_with(None, Some(&string_price));
    let failure = &report.cases[0].failures[0];
    assert_eq!(failure.step, CaseStep::EncodeResponse);
    match &failure.problem {
        Problem::Schema(invalid) => {
            assert_eq!(invalid.direction, Direction::Response);
            assert_eq!(invalid.violations[0].pointer, "/productInfo/price");
        }
        other => panic!("{other:?}"),
    }
    assert!(report.cases[1].passed(), "{}", report.details());
    let fix = report.fix_error_report().unwrap();
    assert!(
        fix.contains("breaks the agreed response schema:\n- /productInfo/price: "),
        "{fix}"
    );

    let throwing = r#"
        function encodeRequest(call) { throw new RangeError("no ids today"); }
        function decodeResponse(message) { for (;;) {} }
    "#;
    let document = seed();
    let verifier = Verifier::new(&document).unwrap();
    let side = Local::requester_for(&product_action());
    let mut limits = Limits::default();
    limits.call_timeout = std::time::Duration::from_millis(20);
    let mut handler = Code::from(Sandbox::load(throwing, Role::Requester, limits).unwrap());
    let report = CaseRunner::new(&verifier)
        .with_side(&mut handler, &side)
        .run(&seed_cases());
    for case in &report.cases {
        assert_eq!(case.failures.len(), 2, "{}", report.details());
        match &case.failures[0].problem {
            Problem::Sandbox(SandboxError::Thrown { message }) => {
                assert!(message.contains("RangeError: no ids today"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            case.failures[1].problem,
            Problem::Sandbox(SandboxError::Timeout { .. })
        ));
    }
    assert!(report
        .table()
        .contains("handler threw: RangeError: no ids today"));
}

#[test]
fn broken_cases_and_unrunnable_sides_are_named() {
    let document = seed();
    let verifier = Verifier::new(&document).unwrap();
    let mut cases = seed_cases();
    cases.cases[0].response["productInfo"]
        .as_object_mut()
        .unwrap()
        .remove("currency");
    let side = Local::Provider(product_action());
    let mut handler = load(&template(&document, &side).unwrap(), &side);
    let report = CaseRunner::new(&verifier)
        .with_side(&mut handler, &side)
        .run(&cases);
    let failure = &report.cases[0].failures[0];
    assert_eq!(failure.step, CaseStep::Case);
    assert!(matches!(failure.problem, Problem::InvalidCase(_)));
    let fix = report.fix_error_report().unwrap();
    assert!(
        fix.contains(
            "Test case \"测试用例1\": the case's own response breaks the agreed response schema:"
        ),
        "{fix}"
    );

    // Our action requires a field no case request carries.
    let mut action = product_action();
    action.input["properties"]["warehouse"] = json!({"type": "string"});
    action.input["required"] = json!(["productId", "warehouse"]);
    let side = Local::Provider(action);
    let mut handler = load(
        &template(&seed(), &Local::Provider(product_action())).unwrap(),
        &side,
    );
    let report = CaseRunner::new(&verifier)
        .with_side(&mut handler, &side)
        .run(&seed_cases());
    match &report.cases[0].failures[0].problem {
        Problem::Underivable(reason) => assert_eq!(
            reason,
            "the case's request has no field for our required input field `/warehouse` (in any \
             naming style); and what decodeRequest returns does not fit our action's input: the \
             decoded input at /: \"warehouse\" is a required property"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_side_alone_is_checked_against_the_case_messages() {
    let document = seed();
    let verifier = Verifier::new(&document).unwrap();
    let side = Local::requester_for(&product_action());
    let mut handler = load(&template(&document, &side).unwrap(), &side);
    let report = CaseRunner::new(&verifier)
        .with_side(&mut handler, &side)
        .run(&seed_cases());
    assert!(report.passed(), "{}", report.details());
    let side = Local::Provider(product_action());
    let mut handler = load(WRONG_PROVIDER, &side);
    let report = CaseRunner::new(&verifier)
        .with_side(&mut handler, &side)
        .run(&TestCases::parse(common::SEED_CASES).unwrap());
    assert!(!report.passed());
    assert_eq!(report.failed().count(), 1);
}

/// A peer's schema over the schema limits is neither compiled nor planned from, even when it
/// was put into the document after it was read: each refusal names the limit and where.
#[test]
fn an_over_limit_schema_is_never_compiled_or_planned_from() {
    let mut document = seed();
    let mut request = document.request_schema.clone().unwrap();
    request["properties"]["productId"]["enum"] = json!((0..3_000).collect::<Vec<_>>());
    document.request_schema = Some(request);

    let error = Verifier::new(&document).unwrap_err();
    assert_eq!(error.which, "request");
    for part in ["/properties/productId/enum", "3000", "max_enum_values"] {
        assert!(error.message.contains(part), "{error}");
    }

    let local = Local::Provider(product_action());
    let refused = template(&document, &local).unwrap_err();
    assert!(
        refused.reason.contains("request schema is too complex")
            && refused.reason.contains("max_enum_values"),
        "{refused}"
    );
    // The seed as read plans and compiles.
    assert!(Verifier::new(&seed()).is_ok());
    assert!(template(&seed(), &local).is_ok());
}
