//! Template handlers: the seeds' product-info protocol and its two test cases, naming
//! styles, defaults, error conventions, constants, single values, hostile field names, and
//! the protocols no template fits.

mod common;

use std::time::Duration;

use common::{load, product_action, run_templates, seed, seed_cases};
use concord_handlers::{template, Local, Verifier};
use concord_negotiate::{
    canonical_protocol, ActionSpec, DeterministicNegotiator, Encoding, ErrorConvention, Need,
    ProtocolDocument, ProtocolSpec, TestCases,
};
use concord_sandbox::{Function, Role, SandboxError};
use serde_json::{json, Value};

#[test]
fn template_handlers_pass_the_seed_test_cases() {
    let document = seed();
    let cases = seed_cases();
    // Our side taken from the protocol itself…
    let provider = Local::from_protocol(&document, Role::Provider, "getProductInfo");
    let requester = Local::from_protocol(&document, Role::Requester, "getProductInfo");
    let report = run_templates(&document, &requester, &provider, &cases);
    assert!(report.passed(), "{}", report.details());
    assert_eq!(report.cases.len(), 2);
    let table = report.table();
    assert!(table.contains("测试用例1  pass"), "{table}");
    assert!(table.contains("测试用例2  pass"), "{table}");
    assert!(table.ends_with("2 of 2 case(s) passed\n"), "{table}");
    assert_eq!(report.fix_error_report(), None);
    // …and from the provider's published action, with a requester calling it as published.
    let action = product_action();
    let report = run_templates(
        &document,
        &Local::requester_for(&action),
        &Local::Provider(action),
        &cases,
    );
    assert!(report.passed(), "{}", report.details());
}

#[test]
fn the_seed_handlers_do_what_the_cases_say() {
    let document = seed();
    let cases = seed_cases().cases;
    let provider_side = Local::Provider(product_action());
    let requester_side = Local::requester_for(&product_action());
    let mut provider = load(
        &template(&document, &provider_side).unwrap(),
        &provider_side,
    );
    let mut requester = load(
        &template(&document, &requester_side).unwrap(),
        &requester_side,
    );

    let request = requester
        .call(
            Function::EncodeRequest,
            &json!({"messageId": "msg001", "input": {"productId": "P12345"}}),
        )
        .unwrap();
    assert_eq!(request, cases[0].request);
    assert_eq!(
        serde_json::to_string(&request).unwrap(),
        r#"{"messageId":"msg001","type":"REQUEST","action":"getProductInfo","productId":"P12345"}"#,
        "fields in the schema's order"
    );
    let incoming = provider.call(Function::DecodeRequest, &request).unwrap();
    assert_eq!(
        incoming,
        json!({"messageId": "msg001", "input": {"productId": "P12345"}})
    );

    let not_found = provider
        .call(
            Function::EncodeResponse,
            &json!({"messageId": "msg002", "error": {"code": 404, "message": "产品未找到"}}),
        )
        .unwrap();
    assert_eq!(not_found, cases[1].response);
    assert_eq!(
        requester
            .call(Function::DecodeResponse, &not_found)
            .unwrap(),
        json!({"messageId": "msg002", "error": {"code": 404, "message": "产品未找到"}})
    );
    let found = requester
        .call(Function::DecodeResponse, &cases[0].response)
        .unwrap();
    assert_eq!(found["output"]["price"], 1299.99);
    assert_eq!(found["messageId"], "msg001");
}

#[test]
fn templates_are_byte_stable() {
    let document = seed();
    for local in [
        Local::Provider(product_action()),
        Local::requester_for(&product_action()),
    ] {
        let first = template(&document, &local).unwrap();
        assert_eq!(first, template(&document, &local).unwrap());
        assert_eq!(
            first,
            template(
                &ProtocolDocument::parse(document.text()).unwrap(),
                &local.clone()
            )
            .unwrap()
        );
        assert!(first.contains(&document.hash().to_string()));
    }
    let provider = template(&document, &Local::Provider(product_action())).unwrap();
    assert!(provider.contains("const ACTION = \"getProductInfo\";"));
    assert!(provider.contains("const CODE_AT = [\"status\", \"code\"];"));
    assert!(provider.contains("    put(message, \"productInfo\", null);"));
}

/// A provider publishing camelCase, our action in snake_case with a defaulted field, and a
/// requester in kebab-case: the templates convert, fill the default, and pass the cases the
/// deterministic negotiator drafts.
#[test]
fn naming_styles_are_converted_and_defaults_filled() {
    let published = ActionSpec {
        name: "getQuote".into(),
        description: "Quote a product.".into(),
        input: json!({"type": "object", "properties": {"productId": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}}, "required": ["productId"]}),
        output: json!({"title": "Quote", "type": "object",
            "properties": {"productId": {"type": "string"}, "unitPrice": {"type": "number"}},
            "required": ["productId", "unitPrice"]}),
    };
    let document =
        ProtocolDocument::parse(&canonical_protocol(&published, Duration::from_secs(15))).unwrap();
    let ours = Local::Provider(ActionSpec {
        name: "getQuote".into(),
        description: String::new(),
        input: json!({"type": "object", "properties": {
            "product_id": {"type": "string"},
            "quantity": {"type": "integer"},
            "currency_code": {"type": "string", "default": "USD"}},
            "required": ["product_id", "currency_code"]}),
        output: json!({"type": "object", "properties": {"product_id": {"type": "string"}, "unit_price": {"type": "number"}},
            "required": ["product_id", "unit_price"]}),
    });
    let theirs = Local::Requester(Need {
        action: "getQuote".into(),
        input: Some(
            json!({"type": "object", "properties": {"product-id": {"type": "string"}, "quantity": {"type": "integer"}}, "required": ["product-id"]}),
        ),
        output: Some(
            json!({"type": "object", "properties": {"unit-price": {"type": "number"}}, "required": ["unit-price"]}),
        ),
    });
    let drafted = DeterministicNegotiator::new()
        .draft_test_cases_now(&document)
        .unwrap();
    let cases = TestCases::parse(&drafted).unwrap();
    assert!(cases.cases.len() >= 3, "{drafted}");
    let report = run_templates(&document, &theirs, &ours, &cases);
    assert!(report.passed(), "{}\n{drafted}", report.details());

    let mut provider = load(&template(&document, &ours).unwrap(), &ours);
    let incoming = provider
        .call(
            Function::DecodeRequest,
            &json!({"messageId": "m1", "type": "REQUEST", "action": "getQuote", "productId": "P1"}),
        )
        .unwrap();
    assert_eq!(
        incoming,
        json!({"messageId": "m1", "input": {"product_id": "P1", "currency_code": "USD"}})
    );
    let response = provider
        .call(
            Function::EncodeResponse,
            &json!({"messageId": "m1", "result": {"product_id": "P1", "unit_price": 2.5}}),
        )
        .unwrap();
    assert_eq!(
        response["quote"],
        json!({"productId": "P1", "unitPrice": 2.5})
    );
    let mut requester = load(&template(&document, &theirs).unwrap(), &theirs);
    assert_eq!(
        requester.call(Function::DecodeResponse, &response).unwrap(),
        json!({"messageId": "m1", "output": {"unit-price": 2.5}})
    );
    let request = requester
        .call(
            Function::EncodeRequest,
            &json!({"messageId": "m2", "input": {"product-id": "P2", "quantity": 3}}),
        )
        .unwrap();
    assert_eq!(
        request,
        json!({"messageId": "m2", "type": "REQUEST", "action": "getQuote", "productId": "P2", "quantity": 3})
    );
}

fn document_from(request: Value, response: Value, convention: ErrorConvention) -> ProtocolDocument {
    let text = ProtocolDocument::write(&ProtocolSpec {
        requirement: "Look a thing up.".into(),
        flow: "One request, one response.".into(),
        request_schema: request,
        response_schema: response,
        error_convention: convention,
        timeout: Duration::from_secs(15),
        encoding: Encoding::Json,
    });
    ProtocolDocument::parse(&text).unwrap()
}

fn http_convention() -> ErrorConvention {
    ErrorConvention {
        http_status_codes: true,
        ..ErrorConvention::default()
    }
}

#[test]
fn a_top_level_error_convention_is_followed() {
    let document = document_from(
        json!({"type": "object", "properties": {
            "messageId": {"type": "string"}, "action": {"type": "string", "const": "lookup"},
            "key": {"type": "string"}}, "required": ["messageId", "action", "key"]}),
        json!({"type": "object", "properties": {
            "messageId": {"type": "string"}, "code": {"type": "integer"}, "message": {"type": "string"},
            "value": {"type": ["string", "null"]}, "source": {"type": "string"}},
            "required": ["messageId", "code", "value"]}),
        http_convention(),
    );
    assert_eq!(
        document.error_convention.code_pointer.as_deref(),
        Some("/code")
    );
    let cases = TestCases::parse(
        r#"# Test case 1
- Request: {"messageId": "a1", "action": "lookup", "key": "k"}
- Response: {"messageId": "a1", "code": 200, "message": "fine", "value": "v", "source": "cache"}
- Expected: found
# Test case 2
- Request: {"messageId": "a2", "action": "lookup", "key": "gone"}
- Response: {"messageId": "a2", "code": 503, "message": "try later", "value": null}
- Expected: unavailable
"#,
    )
    .unwrap();
    let provider = Local::from_protocol(&document, Role::Provider, "ignored: the const wins");
    assert_eq!(provider.action(), "lookup");
    let requester = Local::from_protocol(&document, Role::Requester, "lookup");
    let report = run_templates(&document, &requester, &provider, &cases);
    assert!(report.passed(), "{}", report.details());
    let module = template(&document, &provider).unwrap();
    assert!(
        !module.contains("\"type\""),
        "the protocol has no type field:\n{module}"
    );
}

#[test]
fn the_action_and_type_constants_are_checked() {
    let action = product_action();
    let document =
        ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15))).unwrap();
    let local = Local::Provider(action);
    let mut provider = load(&template(&document, &local).unwrap(), &local);
    for (message, says) in [
        (
            json!({"messageId": "m", "type": "REQUEST", "action": "deleteProduct", "productId": "P"}),
            "the request's action must be \"getProductInfo\", not \"deleteProduct\"",
        ),
        (
            json!({"messageId": "m", "type": "RESPONSE", "action": "getProductInfo", "productId": "P"}),
            "the request's type must be \"REQUEST\", not \"RESPONSE\"",
        ),
        (
            json!({"type": "REQUEST", "action": "getProductInfo", "productId": "P"}),
            "the request's messageId must be a string, not absent",
        ),
        (
            json!({"messageId": "m", "type": "REQUEST", "action": "getProductInfo"}),
            "the request lacks \"productId\", which is required",
        ),
    ] {
        match provider.call(Function::DecodeRequest, &message) {
            Err(SandboxError::Thrown { message: thrown }) => {
                assert!(thrown.contains(says), "{thrown}")
            }
            other => panic!("{message}: {other:?}"),
        }
    }
}

#[test]
fn single_values_travel_in_one_field() {
    let action = ActionSpec {
        name: "price".into(),
        description: "The price of a product id.".into(),
        input: json!({"type": "string"}),
        output: json!({"type": "number"}),
    };
    let document =
        ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15))).unwrap();
    let cases = TestCases::parse(
        r#"# Test case 1
- Request: {"messageId": "p1", "type": "REQUEST", "action": "price", "input": "P1"}
- Response: {"messageId": "p1", "type": "RESPONSE", "status": {"code": 200, "message": "OK"}, "result": 9.5}
- Expected: the price
# Test case 2
- Request: {"messageId": "p2", "type": "REQUEST", "action": "price", "input": "nope"}
- Response: {"messageId": "p2", "type": "RESPONSE", "status": {"code": 404, "message": "no such product"}}
- Expected: not found
"#,
    )
    .unwrap();
    let report = run_templates(
        &document,
        &Local::requester_for(&action),
        &Local::Provider(action.clone()),
        &cases,
    );
    assert!(report.passed(), "{}", report.details());
}

/// Field names and constants written by the peer reach the module only as string
/// literals: names like `constructor` and `__proto__` map like any other, and a name
/// shaped to break out of a string or a comment stays data.
#[test]
fn hostile_field_names_are_data() {
    let escape = "x\"); globalThis.pwned = 1; //\n*/ (\"";
    let document = document_from(
        json!({"type": "object", "properties": {
            "messageId": {"type": "string"}, "type": {"type": "string", "const": "REQUEST"},
            "constructor": {"type": "string"}, "__proto__": {"type": "object"},
            escape: {"type": "string", "default": "*/ evil"}},
            "required": ["messageId", "type", "constructor", escape]}),
        json!({"type": "object", "properties": {
            "messageId": {"type": "string"}, "type": {"type": "string", "const": "RESPONSE"},
            "status": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}},
            "toString": {"type": "object", "properties": {"valueOf": {"type": "number"}}}},
            "required": ["messageId", "type", "status", "toString"]}),
        http_convention(),
    );
    let provider = Local::from_protocol(&document, Role::Provider, "anything");
    let requester = Local::from_protocol(&document, Role::Requester, "anything");
    let cases = TestCases {
        cases: vec![concord_negotiate::TestCase {
            name: "hostile names".into(),
            request: json!({"messageId": "h1", "type": "REQUEST", "constructor": "c",
                "__proto__": {"polluted": true}, escape: "e"}),
            response: json!({"messageId": "h1", "type": "RESPONSE",
                "status": {"code": 200, "message": "OK"}, "toString": {"valueOf": 1}}),
            expected: "mapped like any other field".into(),
        }],
    };
    let report = run_templates(&document, &requester, &provider, &cases);
    assert!(report.passed(), "{}", report.details());
    let mut handler = load(&template(&document, &provider).unwrap(), &provider);
    let incoming = handler
        .call(Function::DecodeRequest, &cases.cases[0].request)
        .unwrap();
    assert_eq!(incoming["input"]["__proto__"], json!({"polluted": true}));
    assert_eq!(incoming["input"][escape], "e");
    let defaulted = handler
        .call(
            Function::DecodeRequest,
            &json!({"messageId": "h2", "type": "REQUEST", "constructor": "c"}),
        )
        .unwrap();
    assert_eq!(defaulted["input"][escape], "*/ evil");
}

#[test]
fn no_template_fits_without_schemas_or_with_unmappable_fields() {
    let based_on = ProtocolDocument::parse(common::SEED_BASED_ON).unwrap();
    let error = template(&based_on, &Local::Provider(product_action())).unwrap_err();
    assert_eq!(
        error.to_string(),
        "no handler template fits: the protocol has no request and response JSON Schemas"
    );

    let document = seed();
    let mut typed = product_action();
    typed.input["properties"]["productId"] = json!({"type": "integer"});
    assert_eq!(
        template(&document, &Local::Provider(typed))
            .unwrap_err()
            .reason,
        "`productId` in the request has type string but `productId` needs integer"
    );
    let mut renamed = product_action();
    renamed.input =
        json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]});
    assert_eq!(
        template(&document, &Local::Provider(renamed))
            .unwrap_err()
            .reason,
        "`sku` is required but the request has no field of that name in any naming style"
    );
    let need = Local::Requester(Need {
        action: "getProductInfo".into(),
        input: None,
        output: Some(
            json!({"type": "object", "properties": {"stock": {"type": "integer"}}, "required": ["stock"]}),
        ),
    });
    assert!(template(&document, &need)
        .unwrap_err()
        .reason
        .contains("`stock` is required but the response has no field"));
    // A verifier still works for such documents.
    assert!(!Verifier::new(&based_on).unwrap().has_schemas());
}

#[test]
fn the_provider_side_is_the_action_the_protocol_calls() {
    let weather = ActionSpec {
        name: "get_product_info".into(),
        description: "Named like the product action, but takes a city.".into(),
        input: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        output: json!({"type": "object"}),
    };
    let product = product_action();
    // The canonical protocol fixes `action`: the name decides, exactly, else in any
    // naming style.
    let document =
        ProtocolDocument::parse(&canonical_protocol(&product, Duration::from_secs(15))).unwrap();
    assert_eq!(
        Local::provider_for(&document, &[weather.clone(), product.clone()]),
        Some(Local::Provider(product.clone()))
    );
    assert_eq!(
        Local::provider_for(&document, std::slice::from_ref(&weather)),
        Some(Local::Provider(weather.clone()))
    );
    // The seed's protocol does not: the request's fields decide.
    assert_eq!(
        Local::provider_for(&seed(), &[weather.clone(), product.clone()]),
        Some(Local::Provider(product))
    );
    // An only action is the one a request naming none calls, even with no field in common
    // (the judge then counters with that action's protocol).
    assert_eq!(
        Local::provider_for(&seed(), std::slice::from_ref(&weather)),
        Some(Local::Provider(weather))
    );
}

/// A status word with two success words: a requester reads either as a success, in the
/// module and natively alike, and the provider writes the first.
#[test]
fn every_success_word_reads_as_a_success() {
    let document = document_from(
        json!({"type": "object", "properties": {
            "messageId": {"type": "string"}, "action": {"type": "string", "const": "lookUp"},
            "city": {"type": "string"}}, "required": ["messageId", "action", "city"]}),
        json!({"type": "object", "properties": {
            "messageId": {"type": "string"},
            "status": {"type": "string", "enum": ["success", "ok", "error"]},
            "message": {"type": "string"},
            "data": {"type": "object", "properties": {"temp": {"type": "number"}}}},
            "required": ["messageId", "status"]}),
        ErrorConvention::default(),
    );
    let requester = Local::from_protocol(&document, Role::Requester, "lookUp");
    let provider = Local::from_protocol(&document, Role::Provider, "lookUp");
    let native = concord_handlers::Template::new(&document, &requester).unwrap();
    let mut module = load(&template(&document, &requester).unwrap(), &requester);
    for (word, error) in [("success", false), ("ok", false), ("error", true)] {
        let response =
            json!({"messageId": "m1", "status": word, "message": "m", "data": {"temp": 1.5}});
        let read = module.call(Function::DecodeResponse, &response).unwrap();
        assert_eq!(read.get("error").is_some(), error, "{word}: {read}");
        assert_eq!(
            native.call(Function::DecodeResponse, &response).unwrap(),
            read
        );
    }
    let mut writer = load(&template(&document, &provider).unwrap(), &provider);
    let written = writer
        .call(
            Function::EncodeResponse,
            &json!({"messageId": "m1", "result": {"temp": 2.0}}),
        )
        .unwrap();
    assert_eq!(written["status"], "success");
}
