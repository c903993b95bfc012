//! The demo's provider action: the seeds' product-info action, answered in process from a
//! small catalogue.

use concord_negotiate::ActionSpec;
use concord_node::ActionError;
use serde_json::{json, Value};

/// The products the provider knows: id, name, description, price, currency.
pub const PRODUCTS: &[(&str, &str, &str, f64, &str)] = &[
    ("P12345", "Laptop", "A fast 14-inch laptop.", 1299.99, "USD"),
    ("P2", "Mouse", "A quiet wireless mouse.", 19.5, "EUR"),
    ("P3", "Monitor", "A 27-inch 4K monitor.", 349.0, "USD"),
    ("P4", "Keyboard", "A mechanical keyboard.", 89.0, "EUR"),
    (
        "P5",
        "Headset",
        "A headset with a noise-cancelling microphone.",
        59.9,
        "USD",
    ),
];

/// The action's name.
pub const ACTION: &str = "getProductInfo";

/// The seeds' product-info action: a product id in, the product's information out.
pub fn action() -> ActionSpec {
    ActionSpec {
        name: ACTION.into(),
        description: "Get product information by product id.".into(),
        input: json!({
            "type": "object",
            "properties": {
                "productId": {"type": "string", "description": "The unique identifier for a product"}
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

/// Answers one call from the catalogue.
pub async fn answer(input: Value) -> Result<Value, ActionError> {
    let Some(id) = input["productId"].as_str() else {
        return Err(ActionError::bad_request("productId is missing"));
    };
    PRODUCTS
        .iter()
        .find(|(known, ..)| *known == id)
        .map(|(id, name, description, price, currency)| {
            json!({
                "productId": id,
                "productName": name,
                "productDescription": description,
                "price": price,
                "currency": currency,
            })
        })
        .ok_or_else(|| ActionError::not_found(format!("no product {id}")))
}

/// The input of the `n`th call: the catalogue's ids in turn.
pub fn input(n: usize) -> Value {
    json!({"productId": PRODUCTS[n % PRODUCTS.len()].0})
}
