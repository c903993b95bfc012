//! The seeds' documents and the product-info action every negotiation test talks about.
#![allow(dead_code)] // each test file uses its own part of this module

use concord_negotiate::Need;

/// The seeds' full candidate protocol (request and response JSON Schemas).
pub const SEED_FULL: &str = include_str!("../fixtures/seed-product-info.zh.md");
/// The seeds' candidate based on an existing protocol's URI, with changes.
pub const SEED_BASED_ON: &str = include_str!("../fixtures/seed-based-on-uri.zh.md");
/// The seeds' test cases for [`SEED_FULL`].
pub const SEED_CASES: &str = include_str!("../fixtures/seed-test-cases.zh.md");

/// The provider's `getProductInfo` action, as the seeds' protocol describes it.
#[allow(unused_imports)] // not every test file uses it
pub use concord_fixtures::product_action;

/// The requester's need: call `getProductInfo`, with no schemas of its own.
pub fn need() -> Need {
    Need {
        action: "getProductInfo".into(),
        input: None,
        output: None,
    }
}
