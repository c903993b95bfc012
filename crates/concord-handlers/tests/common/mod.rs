//! Fixtures shared by the integration tests: the seeds' product-info protocol and test
//! cases (from concord-negotiate's fixtures, as written), and our product action.

#![allow(dead_code)]

pub mod generated;

use concord_handlers::{template, CaseRunner, CasesReport, Local, Verifier};
use concord_negotiate::{ActionSpec, ProtocolDocument, TestCases};
use concord_sandbox::{Handler, Limits, Sandbox};
use serde_json::json;

/// The seeds' full product-info candidate protocol, in Chinese, as written.
pub const SEED: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../concord-negotiate/tests/fixtures/seed-product-info.zh.md"
));

/// The seeds' "based on protocol URI … with these changes" candidate: no schemas.
pub const SEED_BASED_ON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../concord-negotiate/tests/fixtures/seed-based-on-uri.zh.md"
));

/// The seeds' two test cases.
pub const SEED_CASES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../concord-negotiate/tests/fixtures/seed-test-cases.zh.md"
));

pub fn seed() -> ProtocolDocument {
    ProtocolDocument::parse(SEED).unwrap()
}

pub fn seed_cases() -> TestCases {
    TestCases::parse(SEED_CASES).unwrap()
}

/// Our product action, as the provider publishes it.
pub fn product_action() -> ActionSpec {
    ActionSpec {
        name: "getProductInfo".into(),
        description: "Get product information by id.".into(),
        input: json!({
            "type": "object",
            "properties": {
                "productId": {"type": "string"},
                "productName": {"type": "string"}
            },
            "required": ["productId"]
        }),
        output: json!({
            "title": "ProductInfo",
            "type": "object",
            "properties": {
                "productId": {"type": "string"},
                "productName": {"type": "string"},
                "productDescription": {"type": "string"},
                "price": {"type": "number"},
                "currency": {"type": "string"}
            },
            "required": ["productId", "productName", "productDescription", "price", "currency"]
        }),
    }
}

pub fn load(source: &str, local: &Local) -> Handler {
    Sandbox::load(source, local.role(), Limits::default())
        .unwrap_or_else(|error| panic!("{error}\n{source}"))
}

/// Template handlers for both sides, run through `cases`.
pub fn run_templates(
    document: &ProtocolDocument,
    requester: &Local,
    provider: &Local,
    cases: &TestCases,
) -> CasesReport {
    let mut requester_handler = load(&template(document, requester).unwrap(), requester);
    let mut provider_handler = load(&template(document, provider).unwrap(), provider);
    let verifier = Verifier::new(document).unwrap();
    CaseRunner::new(&verifier)
        .with_side(&mut requester_handler, requester)
        .with_side(&mut provider_handler, provider)
        .run(cases)
}
