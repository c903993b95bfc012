//! The product-info action both services answer from memory, and the ids callers ask for.

use std::collections::HashMap;
use std::sync::Arc;

use concord_negotiate::ActionSpec;
use concord_node::ActionError;
use serde_json::{json, Value};

/// Products in the catalogue (callers cycle through them).
const PRODUCTS: usize = 64;

/// The seeds' product-info action.
pub fn action() -> ActionSpec {
    ActionSpec {
        name: "getProductInfo".into(),
        description: "Get product information by product id.".into(),
        input: json!({
            "type": "object",
            "properties": {"productId": {"type": "string", "description": "The unique identifier for a product"}},
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
