//! The seeds' documents and the product-info action every negotiation test talks about.
#![allow(dead_code)] // each test file uses its own part of this module

use concord_negotiate::{ActionSpec, Need};
use serde_json::json;

/// The seeds' full candidate protocol (request and response JSON Schemas).
pub const SEED_FULL: &str = include_str!("../fixtures/seed-product-info.zh.md");
/// The seeds' candidate based on an existing protocol's URI, with changes.
pub const SEED_BASED_ON: &str = include_str!("../fixtures/seed-based-on-uri.zh.md");
/// The seeds' test cases for [`SEED_FULL`].
pub const SEED_CASES: &str = include_str!("../fixtures/seed-test-cases.zh.md");

/// The provider's `getProductInfo` action, as the seeds' protocol describes it.
pub fn product_action() -> ActionSpec {
    ActionSpec {
        name: "getProductInfo".into(),
        description: "Get product information by id.".into(),
        input: json!({
            "type": "object",
            "properties": {
                "productId": {"type": "string", "description": "The unique identifier for a product"},
                "productName": {"type": "string", "description": "The name of the product"}
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

/// The requester's need: call `getProductInfo`, with no schemas of its own.
pub fn need() -> Need {
    Need {
        action: "getProductInfo".into(),
        input: None,
        output: None,
    }
}
