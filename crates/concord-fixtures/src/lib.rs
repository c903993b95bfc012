//! The seeds' product-info example, written once for Concord's tests, benchmarks and
//! `concord demo`: the `getProductInfo` action and a small catalogue that answers it.
//!
//! Not published: the crates' tests and benchmarks take it as a dev-dependency, and the
//! CLI's demo serves its catalogue. With the `node` feature, `catalogue::answer` is the
//! catalogue as a `concord-node` action backend; with `tls`, `tls` puts a node behind a
//! TLS-terminating proxy signed by a private CA. [`foreign`] is a corpus of candidate
//! protocols written the way other agents write them, with the decision each should get
//! and the actions they call (with `node`, each action as a backend).
//!
//! ```
//! use concord_fixtures::{catalogue, product_action};
//!
//! assert_eq!(catalogue::action().name, catalogue::ACTION);
//! // The seeds' protocol also takes an optional product name; the catalogue does not.
//! assert!(product_action().input["properties"].get("productName").is_some());
//! assert!(catalogue::action().input["properties"].get("productName").is_none());
//! assert_eq!(catalogue::product("P2").unwrap()["productName"], "Mouse");
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

pub mod catalogue;
pub mod foreign;
#[cfg(feature = "tls")]
pub mod tls;
pub mod weather;

use concord_negotiate::ActionSpec;
use serde_json::json;

/// The product-info action as the seeds' protocol describes it: a product id and,
/// optionally, a product name in; the product's information out. (The
/// [catalogue's action](catalogue::action) takes the id alone, so its provider answers the
/// seeds' protocol with a counter-proposal.)
pub fn product_action() -> ActionSpec {
    let mut action = catalogue::action();
    action.input["properties"]["productName"] =
        json!({"type": "string", "description": "The name of the product"});
    action
}
