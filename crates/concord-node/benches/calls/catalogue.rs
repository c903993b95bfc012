//! The product-info action both services answer from memory, and the ids callers ask for.
//! The action is the fixtures' (`concord-fixtures`); the catalogue is this benchmark's own:
//! 64 products of about 200 bytes of JSON each, where the fixtures' five are smaller.

use std::collections::HashMap;
use std::sync::Arc;

pub use concord_fixtures::catalogue::{action, ACTION};
use concord_node::ActionError;
use serde_json::{json, Value};

/// Products in the catalogue (callers cycle through them).
const PRODUCTS: usize = 64;

/// Products by id, about 200 bytes of JSON each.
#[derive(Debug, Clone)]
pub struct Catalogue {
    products: Arc<HashMap<String, Value>>,
    ids: Arc<[String]>,
}

impl Catalogue {
    pub fn new() -> Self {
        let ids: Vec<String> = (0..PRODUCTS).map(|i| format!("P{i:05}")).collect();
        let products = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let product = json!({
                    "productId": id,
                    "productName": format!("ThinkPad X1 Carbon Gen {}", 10 + i % 3),
                    "productDescription": "A 14-inch business laptop with a fast processor, 32 GB of memory and a 1 TB SSD.",
                    "price": 1299.99 + i as f64,
                    "currency": "USD"
                });
                (id.clone(), product)
            })
            .collect();
        Self {
            products: Arc::new(products),
            ids: ids.into(),
        }
    }

    /// The `n`th id, cycling.
    pub fn id(&self, n: usize) -> &str {
        &self.ids[n % self.ids.len()]
    }

    pub fn get(&self, id: &str) -> Option<&Value> {
        self.products.get(id)
    }

    /// The action's backend: a lookup and a clone.
    pub async fn answer(&self, input: Value) -> Result<Value, ActionError> {
        let id = input["productId"]
            .as_str()
            .ok_or_else(|| ActionError::bad_request("productId is missing"))?;
        self.get(id)
            .cloned()
            .ok_or_else(|| ActionError::not_found(format!("no product {id}")))
    }
}
