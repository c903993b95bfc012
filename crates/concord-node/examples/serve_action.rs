//! An agent that serves one action. Run it, then the `call_action` example:
//! `cargo run -p concord-node --example serve_action`
use concord_negotiate::ActionSpec;
use concord_node::{ActionError, Node};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let action = ActionSpec {
        name: "getProductInfo".into(),
        description: "Product information by product id.".into(),
        input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
        output: json!({"title": "ProductInfo", "type": "object", "required": ["name", "price"],
                       "properties": {"name": {"type": "string"}, "price": {"type": "number"}}}),
    };
    let node = Node::builder("Product agent")
        .action(action, |input: Value| async move {
            match input["productId"].as_str() {
                Some("P1") => Ok(json!({"name": "Laptop", "price": 1299.99})),
                _ => Err(ActionError::not_found("no such product")),
            }
        })
        .build()?;
    let server = node.serve("127.0.0.1:8080").await?;
    println!("serving {}", server.description_url());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await?;
    Ok(())
}
