//! The seeds' own protocol and test-case examples, as written, and English/fenced variants.

mod support;

use std::time::Duration;

use concord_negotiate::{DocumentError, Encoding, ProtocolDocument, TestCases, TestCasesError};
use concord_proto::TextPosition;
use serde_json::json;
use support::{SEED_BASED_ON, SEED_CASES, SEED_FULL};

#[test]
fn the_seed_full_candidate_parses_into_its_two_schemas() {
    let document = ProtocolDocument::parse(SEED_FULL).unwrap();
    let request = document.request_schema.as_ref().unwrap();
    let response = document.response_schema.as_ref().unwrap();
    assert_eq!(request["title"], "ProductInfoRequest");
    assert_eq!(
        request["required"],
        json!(["messageId", "type", "action", "productId"])
    );
    assert_eq!(response["title"], "ProductInfoResponse");
    assert_eq!(
        response["properties"]["productInfo"]["required"],
        json!([
            "productId",
            "productName",
            "productDescription",
            "price",
            "currency"
        ])
    );
    assert_eq!(document.requirement.as_deref(), Some("获取商品信息"));
    assert!(document
        .flow
        .as_deref()
        .unwrap()
        .starts_with("请求者携带商品id或名字"));
    assert_eq!(document.timeout, Some(Duration::from_secs(15)));
    assert_eq!(document.encoding, Encoding::Json);
    assert!(document.error_convention.http_status_codes);
    assert_eq!(
        document.error_convention.code_pointer.as_deref(),
        Some("/status/code")
    );
    assert_eq!(
        document.error_convention.message_pointer.as_deref(),
        Some("/status/message")
    );
    assert_eq!(document.base, None);
    assert_eq!(document.text(), SEED_FULL);
}

#[test]
fn the_seed_based_on_uri_candidate_parses_into_base_and_changes() {
    let document = ProtocolDocument::parse(SEED_BASED_ON).unwrap();
    let base = document.base.as_ref().unwrap();
    assert_eq!(
        base.uri,
        "https://agent-network-protocol.com/protocols/product-info-0-1-1"
    );
    assert!(base.changes.starts_with("- 在响应消息中增加自定义错误码"));
    assert_eq!(
        document.error_convention.custom_codes,
        vec![
            (100_001, "商品缺货中".to_owned()),
            (100_002, "商品下架中".to_owned()),
            (100_003, "商品价格未知".to_owned()),
        ]
    );
    assert_eq!(document.request_schema, None);
}

#[test]
fn english_and_fenced_variants_parse_the_same() {
    let english = "# Requirement\nGet product info\n\n# Flow description\nBased on the existing protocol (URI: urn:anp:product-info:1), with changes.\nTimeout: 30 s\n\n# Data format\nMessages are AICL.\n\n## Request message:\n```json\n{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"string\"}}}\n```\n\n## Response message:\n~~~\n{\"type\": \"object\"}\n~~~\n\n# Changes\n- add `currency`\n";
    let document = ProtocolDocument::parse(english).unwrap();
    assert_eq!(
        document.request_schema.unwrap()["properties"]["id"]["type"],
        "string"
    );
    assert_eq!(document.response_schema, Some(json!({"type": "object"})));
    assert_eq!(document.timeout, Some(Duration::from_secs(30)));
    assert_eq!(document.encoding, Encoding::Aicl);
    let base = document.base.unwrap();
    assert_eq!(base.uri, "urn:anp:product-info:1");
    assert_eq!(base.changes, "- add `currency`");
}

#[test]
fn broken_schemas_are_located_in_the_document() {
    let text = "# Requirement\nx\n\n## Request\nThe schema:\n{\n  \"type\": \"object\",\n  \"properties\": {,}\n}\n\n## Response\n{}\n";
    assert_eq!(
        ProtocolDocument::parse(text),
        Err(DocumentError::SchemaJson {
            section: "request",
            position: TextPosition {
                line: 8,
                column: 18
            },
            message: "key must be a string".into(),
        })
    );
    assert!(matches!(
        ProtocolDocument::parse("# Requirement\nonly words\n"),
        Err(DocumentError::Incomplete {
            found: "no schema and no base protocol"
        })
    ));
    assert!(matches!(
        ProtocolDocument::parse("## Request\n[1]\n## Response\n{}"),
        Err(DocumentError::Incomplete {
            found: "a response schema only"
        })
    ));
    assert_eq!(ProtocolDocument::parse(" \n"), Err(DocumentError::Empty));
}

#[test]
fn written_documents_parse_back_and_are_byte_stable() {
    let seed = ProtocolDocument::parse(SEED_FULL).unwrap();
    let spec = concord_negotiate::ProtocolSpec {
        requirement: "Get product information.".into(),
        flow: "The requester sends a product id; the provider returns the product.".into(),
        request_schema: seed.request_schema.clone().unwrap(),
        response_schema: seed.response_schema.clone().unwrap(),
        error_convention: seed.error_convention.clone(),
        timeout: Duration::from_secs(15),
        encoding: Encoding::Json,
    };
    let text = ProtocolDocument::write(&spec);
    assert_eq!(text, ProtocolDocument::write(&spec));
    let parsed = ProtocolDocument::parse(&text).unwrap();
    assert_eq!(parsed.request_schema, seed.request_schema);
    assert_eq!(parsed.response_schema, seed.response_schema);
    assert_eq!(parsed.error_convention, seed.error_convention);
    assert_eq!(parsed.timeout, Some(Duration::from_secs(15)));
}

#[test]
fn the_seed_test_cases_parse() {
    let cases = TestCases::parse(SEED_CASES).unwrap().cases;
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0].name, "测试用例1");
    assert_eq!(
        cases[0].request,
        json!({"messageId": "msg001", "type": "REQUEST", "action": "getProductInfo", "productId": "P12345"})
    );
    assert_eq!(cases[0].response["productInfo"]["price"], json!(1299.99));
    assert_eq!(cases[0].expected, "成功获取产品信息，状态码为200。");
    assert_eq!(cases[1].response["status"]["code"], 404);
    assert_eq!(cases[1].response["productInfo"], serde_json::Value::Null);
    // Written in English, parsed back to the same cases.
    let written = TestCases {
        cases: cases.clone(),
    }
    .write();
    assert_eq!(TestCases::parse(&written).unwrap().cases, cases);
}

#[test]
fn broken_test_cases_say_what_is_missing() {
    assert_eq!(TestCases::parse("no cases"), Err(TestCasesError::NoCases));
    assert_eq!(
        TestCases::parse("# Test case 1\n- Request: {\"a\":1}\n- Expected: x\n"),
        Err(TestCasesError::MissingPart {
            case: "Test case 1".into(),
            part: "response"
        })
    );
    assert!(matches!(
        TestCases::parse("# Test case 1\n- Request: {\"a\":}\n- Response: {}\n"),
        Err(TestCasesError::Json {
            part: "request",
            position: TextPosition { line: 2, .. },
            ..
        })
    ));
}

/// A peer's text may put any character right after a label's colon and end its lines with
/// CRLF; the part's text starts after the colon either way (found by the fuzzer: a
/// multi-byte character there used to split a character and panic).
#[test]
fn a_part_starts_right_after_its_colon_whatever_follows() {
    let text = "# Test case 1\r\n- Request:响应 {\"id\": 1}\r\n- Response：{\"ok\": true}\r\n- Expected:找到 \r\n";
    let cases = TestCases::parse(text).unwrap().cases;
    assert_eq!(cases[0].request, serde_json::json!({"id": 1}));
    assert_eq!(cases[0].response, serde_json::json!({"ok": true}));
    assert_eq!(cases[0].expected, "找到");
    // Line 2, column 18 (in characters): the `}` where a value was expected.
    assert!(matches!(
        TestCases::parse("# Test case 1\r\n- Request:响 {\"a\":}\r\n- Response: {}\r\n"),
        Err(TestCasesError::Json {
            part: "request",
            position: TextPosition {
                line: 2,
                column: 18
            },
            ..
        })
    ));
}

/// Expected text that would read back as structure (several lines, a heading, a label, a
/// fence, quotes) is written as a JSON string literal and reads back unchanged; plain text
/// is written as it is (found by the fuzzer: a peer's fenced expected text came back as new
/// cases or parts).
#[test]
fn any_expected_text_is_written_so_that_it_reads_back_unchanged() {
    let texts = [
        "found",
        "the product is returned",
        "",
        "line one\n# Test case 2\n- Request: {\"id\": 2}",
        "请求数据：{\"a\": 1}",
        "# not a heading",
        "```json",
        "\"quoted\"",
        "  padded  ",
        "- Response: {}",
    ];
    for expected in texts {
        let cases = TestCases {
            cases: vec![concord_negotiate::TestCase {
                name: "Test case 1".into(),
                request: serde_json::json!({"id": 1}),
                response: serde_json::json!({"ok": true}),
                expected: expected.into(),
            }],
        };
        let written = cases.write();
        assert_eq!(TestCases::parse(&written).unwrap(), cases, "{written}");
        let plain = matches!(expected, "found" | "the product is returned" | "");
        assert_eq!(
            written.contains(&format!("\n{expected}\n")),
            plain,
            "{written}"
        );
    }
}

/// A fault after characters of several bytes is placed by characters (column 11, the `}`
/// where a value was expected; it used to say 15, its byte), like every other
/// position (serde_json counts its columns in bytes; the document's column used to add them
/// to a column counted in characters).
#[test]
fn a_schema_fault_after_wide_characters_is_placed_in_characters() {
    let text = "# Requirement\nx\n\n## Request\n{\"名前\": tru}\n\n## Response\n{}\n";
    assert!(matches!(
        ProtocolDocument::parse(text),
        Err(DocumentError::SchemaJson {
            position: TextPosition {
                line: 5,
                column: 11
            },
            ..
        })
    ));
}
