//! A small product catalogue and the action that reads it: a product id in, the product's
//! information out.

use concord_negotiate::ActionSpec;
use serde_json::{json, Value};

/// The action's name.
pub const ACTION: &str = "getProductInfo";

/// The products: id, name, description, price, currency.
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

/// The action the catalogue answers: a product id in, the product's information out.
pub fn action() -> ActionSpec {
    ActionSpec {
        name: ACTION.into(),
        description: "Get product information by id.".into(),
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

/// The product with this id, as the action outputs it.
pub fn product(id: &str) -> Option<Value> {
    PRODUCTS.iter().find(|(known, ..)| *known == id).map(
        |(id, name, description, price, currency)| {
            json!({
                "productId": id,
                "productName": name,
                "productDescription": description,
                "price": price,
                "currency": currency,
            })
        },
    )
}

/// The input of the `n`th call: the catalogue's ids in turn.
pub fn input(n: usize) -> Value {
    json!({"productId": PRODUCTS[n % PRODUCTS.len()].0})
}

/// The action's backend: the product asked for; 404 for an unknown id, 400 without one.
#[cfg(feature = "node")]
pub async fn answer(input: Value) -> Result<Value, concord_node::ActionError> {
    use concord_node::ActionError;
    let Some(id) = input["productId"].as_str() else {
        return Err(ActionError::bad_request("productId is missing"));
    };
    product(id).ok_or_else(|| ActionError::not_found(format!("no product {id}")))
}
