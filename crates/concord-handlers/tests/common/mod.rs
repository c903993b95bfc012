//! Fixtures shared by the integration tests: the seeds' product-info protocol and test
//! cases (from concord-negotiate's fixtures, as written), and our product action.

#![allow(dead_code)]

pub mod generated;

use concord_handlers::{template, CaseRunner, CasesReport, Code, Local, Verifier};
use concord_negotiate::{ProtocolDocument, TestCases};
use concord_sandbox::{Limits, Sandbox};

/// Our product action, as the provider publishes it (the seeds' product-info action).
#[allow(unused_imports)] // not every test file uses it
pub use concord_fixtures::product_action;

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

/// `source` as `local`'s handler in the sandbox (even when it is our template).
pub fn load(source: &str, local: &Local) -> Code {
    Code::from(
        Sandbox::load(source, local.role(), Limits::default())
            .unwrap_or_else(|error| panic!("{error}\n{source}")),
    )
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
