//! The runtime message path: bytes in and out through template handlers, JSON and AICL,
//! typed errors that say whose fault a bad message is, and limits that leave the handler
//! usable.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{load, product_action, seed};
use concord_handlers::{
    template, ErrorStatus, Incoming, Local, Outcome, Provider, Reply, Requester, RuntimeError,
    Verifier, WireError,
};
use concord_negotiate::{Encoding, ProtocolDocument, ProtocolSpec};
use concord_sandbox::{Limits, Role, Sandbox, SandboxError};
use serde_json::json;

fn sides(document: &ProtocolDocument) -> (Requester, Provider) {
    let verifier = Arc::new(Verifier::new(document).unwrap());
    let requester_side = Local::requester_for(&product_action());
    let provider_side = Local::Provider(product_action());
    let requester = load(
        &template(document, &requester_side).unwrap(),
        &requester_side,
    );
    let provider = load(&template(document, &provider_side).unwrap(), &provider_side);
    (
        Requester::new(requester, Arc::clone(&verifier)).unwrap(),
        Provider::new(provider, verifier).unwrap(),
    )
}

fn product() -> serde_json::Value {
    json!({"productId": "P1", "productName": "笔记本", "productDescription": "轻薄",
           "price": 999.5, "currency": "CNY"})
}

#[test]
fn a_request_and_its_responses_travel_as_json_bytes() {
    let (mut requester, mut provider) = sides(&seed());
    let bytes = requester
        .encode_request("Xk3uQ9aTz0LmB7vc", &json!({"productId": "P1"}))
        .unwrap();
    assert_eq!(
        bytes,
        br#"{"messageId":"Xk3uQ9aTz0LmB7vc","type":"REQUEST","action":"getProductInfo","productId":"P1"}"#
    );
    let incoming = provider.decode_request(&bytes).unwrap();
    assert_eq!(
        incoming,
        Incoming {
            message_id: "Xk3uQ9aTz0LmB7vc".into(),
            input: json!({"productId": "P1"})
        }
    );
    let response = provider
        .encode_response(&incoming.message_id, &Outcome::Result(product()))
        .unwrap();
    assert_eq!(
        requester.decode_response(&response).unwrap(),
        Reply::Output {
            message_id: "Xk3uQ9aTz0LmB7vc".into(),
            output: product()
        }
    );
    let error = ErrorStatus {
        code: 404,
        message: "产品未找到".into(),
    };
    let response = provider
        .encode_response("m2", &Outcome::Error(error.clone()))
        .unwrap();
    let reply = requester.decode_response(&response).unwrap();
    assert_eq!(
        reply,
        Reply::Error {
            message_id: "m2".into(),
            error
        }
    );
    assert_eq!(reply.message_id(), "m2");
}

#[test]
fn aicl_protocols_travel_as_aicl_text() {
    let seed = seed();
    let text = ProtocolDocument::write(&ProtocolSpec {
        requirement: "Get product information.".into(),
        flow: "One request, one response.".into(),
        request_schema: seed.request_schema.clone().unwrap(),
        response_schema: seed.response_schema.clone().unwrap(),
        error_convention: seed.error_convention.clone(),
        timeout: Duration::from_secs(15),
        encoding: Encoding::Aicl,
    });
    let document = ProtocolDocument::parse(&text).unwrap();
    assert_eq!(document.encoding, Encoding::Aicl);
    let (mut requester, mut provider) = sides(&document);
    let bytes = requester
        .encode_request("m1", &json!({"productId": "P1"}))
        .unwrap();
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        "[d:[s:messageId]:[s:m1],[s:type]:[s:REQUEST],[s:action]:[s:getProductInfo],[s:productId]:[s:P1]]"
    );
    let incoming = provider.decode_request(&bytes).unwrap();
    let response = provider
        .encode_response(&incoming.message_id, &Outcome::Result(product()))
        .unwrap();
    assert!(response.starts_with(b"[d:[s:messageId]:[s:m1],"));
    assert!(matches!(
        requester.decode_response(&response).unwrap(),
        Reply::Output { output, .. } if output == product()
    ));
    // The protocol's "null product on error" has no AICL form: the message cannot be sent.
    let error = provider
        .encode_response(
            "m1",
            &Outcome::Error(ErrorStatus {
                code: 404,
                message: "not found".into(),
            }),
        )
        .unwrap_err();
    match &error {
        RuntimeError::Wire {
            source: WireError::Aicl(aicl),
            ..
        } => assert!(aicl.to_string().contains("/productInfo"), "{aicl}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_messages_say_whose_fault_they_are() {
    let (mut requester, mut provider) = sides(&seed());
    // The peer's response breaks the schema: answer with a fix-error report.
    let bad = br#"{"messageId":"m1","type":"RESPONSE","status":{"code":200,"message":"OK"},"productInfo":{"productId":"P1"}}"#;
    match requester.decode_response(bad).unwrap_err() {
        RuntimeError::InvalidIncoming(invalid) => {
            let report = invalid.error_description(&serde_json::from_slice(bad).unwrap());
            assert!(report.contains("- /productInfo: "), "{report}");
            assert!(report.contains("\"currency\""), "{report}");
        }
        other => panic!("{other:?}"),
    }
    // Not JSON at all.
    assert!(matches!(
        provider.decode_request(b"{\"messageId\": ").unwrap_err(),
        RuntimeError::Wire {
            source: WireError::Json(_),
            ..
        }
    ));
    // Our action's result breaks the schema: our side is wrong.
    let error = provider
        .encode_response("m1", &Outcome::Result(json!({"productId": "P1", "productName": "x", "productDescription": "y", "price": "free", "currency": "USD"})))
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::InvalidOutgoing(invalid) if invalid.violations[0].pointer == "/productInfo/price"),
        "{error:?}"
    );
    // The template says what the application's input lacks.
    match requester
        .encode_request("m1", &json!({"name": "x"}))
        .unwrap_err()
    {
        RuntimeError::Handler {
            source: SandboxError::Thrown { message },
            ..
        } => assert!(
            message.contains("the input lacks \"productId\", which is required"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    // Oversized input is refused before parsing.
    let huge = vec![b' '; (1 << 20) + 1];
    assert!(matches!(
        provider.decode_request(&huge).unwrap_err(),
        RuntimeError::Wire {
            source: WireError::TooLarge { .. },
            ..
        }
    ));
}

#[test]
fn contract_breaches_and_limits_are_typed_and_the_next_call_works() {
    let document = seed();
    let verifier = Arc::new(Verifier::new(&document).unwrap());
    let module = r#"
        function encodeRequest(call) {
          if (call.input.spin) for (;;) {}
          return { messageId: call.messageId, type: "REQUEST", action: "getProductInfo", productId: call.input.productId };
        }
        function decodeResponse(message) { return { messageId: message.messageId, outputs: message.productInfo }; }
    "#;
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_millis(20);
    let handler = Sandbox::load(module, Role::Requester, limits).unwrap();
    assert!(matches!(
        Provider::new(handler.try_clone().unwrap(), Arc::clone(&verifier)).unwrap_err(),
        RuntimeError::WrongRole {
            expected: Role::Provider,
            actual: Role::Requester
        }
    ));
    let mut requester = Requester::new(handler, verifier).unwrap();
    match requester
        .encode_request("m1", &json!({"productId": "P1", "spin": true}))
        .unwrap_err()
    {
        RuntimeError::Handler { source, .. } => {
            assert!(source.is_limit());
            assert_eq!(
                source.to_string(),
                "handler exceeded its time limit of 20ms"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(requester
        .encode_request("m2", &json!({"productId": "P1"}))
        .is_ok());
    let response = br#"{"messageId":"m2","type":"RESPONSE","status":{"code":404,"message":"no"},"productInfo":null}"#;
    let error = requester.decode_response(response).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`decodeResponse` broke the handler contract: it returned an unknown field \"outputs\" (allowed: messageId, output, error)"
    );
}

/// The negotiated cases run live between two nodes: the requester sends each case's request
/// (its input derived from the case), the provider recognises the case and answers with the
/// case's response through its action stub, and the requester checks the reply.
#[test]
fn test_cases_run_across_the_wire() {
    let document = seed();
    let cases = common::seed_cases();
    let verifier = Verifier::new(&document).unwrap();
    let (mut requester, mut provider) = sides(&document);
    let requester_side = Local::requester_for(&product_action());
    let provider_side =
        Local::provider_for(&document, &[unrelated_action(), product_action()]).unwrap();
    assert_eq!(provider_side, Local::Provider(product_action()));
    for case in &cases.cases {
        let call = verifier.case_input(&requester_side, case).unwrap();
        let bytes = requester
            .encode_request(&call.message_id, &call.input)
            .unwrap();

        let received =
            concord_handlers::wire::decode(verifier.encoding(), &bytes, 1 << 20).unwrap();
        let answered = verifier.case_for_request(&cases, &received).unwrap();
        assert_eq!(answered.name, case.name);
        let incoming = provider.decode_request(&bytes).unwrap();
        assert_eq!(incoming, verifier.case_input(&provider_side, case).unwrap());
        let outcome = verifier.case_outcome(&provider_side, answered).unwrap();
        let response = provider
            .encode_response(&incoming.message_id, &outcome)
            .unwrap();

        let reply = requester.decode_response(&response).unwrap();
        assert_eq!(reply, verifier.case_reply(&requester_side, case).unwrap());
    }
    assert!(verifier
        .case_for_request(&cases, &json!({"messageId": "other"}))
        .is_none());
}

fn unrelated_action() -> concord_negotiate::ActionSpec {
    concord_negotiate::ActionSpec {
        name: "getWeather".into(),
        description: "The weather in a city.".into(),
        input: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        output: json!({"type": "object"}),
    }
}
